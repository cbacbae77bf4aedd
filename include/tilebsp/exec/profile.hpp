// Profile: estimated IPU cycles and measured host time per step, memory per tile; text summary and JSON.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/target.hpp>
#include <tilebsp/program/compile.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tilebsp {

/// One schedule instruction as profiled.
struct StepProfile {
  std::string kind;   ///< superstep, stream_in, stream_out, host, sync, branch
  std::string label;  ///< e.g. "compute set 'axpy' + exchange (3 copies)"
  std::uint64_t est_cycles = 0;  ///< estimated IPU cycles of one execution
  std::uint64_t executions = 0;  ///< times it ran (all engine.run calls)
  std::uint64_t host_ns = 0;     ///< measured host time, all executions (EngineOptions::profiling)
  std::uint64_t exchange_bytes = 0;
  std::uint64_t inter_ipu_bytes = 0;  ///< of exchange_bytes, those crossing IPU-Links (one execution)
  std::uint64_t collective_bytes = 0;  ///< a cross-replica collective's tensor, bytes per replica (kind "collective")
  /// The pipeline stage the step belongs to (-1: none) and its IPU. A stage's steps run inside a pipeline step
  /// ("pipeline_step"), whose estimate covers them: estimated_cycles() leaves them out.
  std::int32_t stage = -1, ipu = -1;
};

/// One pipeline stage of a program, as profiled.
struct StageProfile {
  std::size_t program = 0, stage = 0, ipu = 0;
  std::uint64_t est_cycles = 0;  ///< estimated IPU cycles of one run (one micro-batch)
  std::uint64_t runs = 0;        ///< micro-batches it ran (all engine.run calls)
};

/// What an Engine did and what the modelled target would have done.
struct Profile {
  Target target;
  std::size_t host_threads = 1;
  bool host_timing = false;
  /// Replicas of the executable, and those this engine ran (first_replica .. + local_replicas - 1). The step
  /// figures are per replica: replicas run concurrently on their own IPUs.
  std::size_t replicas = 1, first_replica = 0, local_replicas = 1;
  std::vector<TileMemory> memory;
  std::vector<std::vector<StepProfile>> programs;
  std::vector<StageProfile> stages;  ///< pipeline stages (each pipeline's, in order)

  /// Estimated IPU cycles of every step run so far (a pipeline step's stages overlap: its own estimate counts).
  std::uint64_t estimated_cycles() const;
  /// Measured host time of every step, nanoseconds (EngineOptions::profiling).
  std::uint64_t host_ns() const;
  /// The largest total of any tile's memory.
  std::uint64_t max_tile_bytes() const;
  /// The largest total of a tile of IPU `ipu`.
  std::uint64_t max_tile_bytes(std::size_t ipu) const;
  /// Bytes that crossed IPU-Links in the steps run so far (estimated, per the model).
  std::uint64_t inter_ipu_bytes() const;
  /// Bytes per replica that cross-replica collectives reduced in the steps run so far.
  std::uint64_t collective_bytes() const;

  /// Human-readable report: totals, the costliest steps, memory per tile.
  std::string summary() const;
  /// The profile as JSON (target, per-step figures for every program, and each tile's memory as [always-live,
  /// not-always-live peak, temporary peak] bytes).
  std::string json() const;
  /// Writes json() to `path`; throws tilebsp::error when the file cannot be written.
  void write_json(std::string const& path) const;
};

}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/engine.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/exec/profile_impl.hpp>
#endif
