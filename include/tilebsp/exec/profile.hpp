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
  /// Of est_cycles: the compute phase's (the slowest tile) and the exchanges' (fetches included); the rest is
  /// syncs, streams and collectives.
  std::uint64_t compute_cycles = 0, exchange_cycles = 0;
  std::string compute_set;   ///< the compute set's name (superstep with a compute phase; else empty)
  std::int32_t op = -1;      ///< the operator that built that compute set: index into Profile::operators (-1: none)
  std::vector<std::uint32_t> ipus;  ///< the IPUs the step involves
};

/// An operator (OperatorScope: ops::matmul, ops::conv, a map, a reduction, ...) and what its compute sets cost.
struct OperatorProfile {
  std::string kind, name;
  std::vector<std::string> plans;  ///< the plans it chose (matmul and convolution planners), as text
  std::size_t compute_sets = 0;
  std::uint64_t est_cycles = 0;  ///< estimated cycles of its steps, every execution so far
  std::uint64_t host_ns = 0;     ///< measured host time of its steps (EngineOptions::profiling)
  std::string kernels;           ///< the instruction set of its kernels (simd::isa_name()); empty: not said
};

/// A variable (or the vertices' state) and its bytes, on one tile or over all.
struct MemoryOccupant {
  std::string name;
  std::uint64_t bytes = 0;
  bool always_live = true;
};

/// Bytes live over a program's steps, as Poplar's liveness report: what is live part of the time (variables
/// between their first write and last use, temporaries, operator buffers) summed over tiles; always-live bytes
/// (constants, vertex state, variables whose value outlives a run) are one figure.
struct ProgramLiveness {
  std::vector<std::uint64_t> bytes;  ///< per instruction of the program, in code order
  std::size_t peak_step = 0;
  std::vector<MemoryOccupant> peak_variables;  ///< live at the peak, largest first (at most 40)
  std::uint64_t peak_buffers = 0;              ///< staging, fetch and exchange buffers at the peak
  /// Every variable live part of the time: its bytes (over all tiles) and first and last instruction.
  struct Range {
    std::string name;
    std::uint64_t bytes = 0;
    std::size_t first = 0, last = 0;
  };
  std::vector<Range> ranges;
};

/// The memory and balance detail of a profile: computed on demand from the executable (Profile::detail()).
struct ProfileDetail {
  std::uint64_t always_live_bytes = 0;            ///< summed over tiles
  std::vector<std::vector<MemoryOccupant>> tiles;  ///< per tile, its largest occupants (at most 8)
  std::vector<ProgramLiveness> liveness;           ///< per program
  /// Per tile, estimated compute cycles of the compute sets run so far (each step's executions; every step once
  /// when nothing ran yet).
  std::vector<std::uint64_t> tile_cycles;
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
  std::vector<OperatorProfile> operators;
  Executable executable;  ///< what was profiled (for detail())

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
  /// The instruction sets the operators' kernels were compiled for (simd::isa_name(): "fma3+avx2", ...), each once,
  /// in the order the operators were built; empty when no operator said (a graph of the user's own vertices).
  std::vector<std::string> kernels() const;
  /// Bytes per replica that cross-replica collectives reduced in the steps run so far.
  std::uint64_t collective_bytes() const;

  /// Memory occupants per tile, liveness per program step and compute cycles per tile. Computed here (it walks
  /// every variable's mapping: ResNeXt-101's takes about a second); `threads` 0: all hardware threads.
  ProfileDetail detail(std::size_t threads = 0) const;

  // The report (text, JSON, HTML) is the report layer's: tilebsp::report::summary(profile), json, write_json, html,
  // write_html and write_report (<tilebsp/report/report.hpp>). These members forward to it, for code written
  // before the layer existed; they are defined where the report layer is included.
  [[deprecated("use tilebsp::report::summary(profile)")]] std::string summary() const;
  [[deprecated("use tilebsp::report::json(profile, detail)")]] std::string json(ProfileDetail const* detail = nullptr) const;
  [[deprecated("use tilebsp::report::write_json(profile, path, detail)")]] void write_json(
      std::string const& path, ProfileDetail const* detail = nullptr) const;
  [[deprecated("use tilebsp::report::html(profile, detail)")]] std::string html(ProfileDetail const& detail) const;
  [[deprecated("use tilebsp::report::html(profile)")]] std::string html() const;
  [[deprecated("use tilebsp::report::write_html(profile, path)")]] void write_html(std::string const& path) const;
  [[deprecated("use tilebsp::report::write_report(profile, dir)")]] void write_report(std::string const& dir) const;
};

}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/engine.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/exec/profile_impl.hpp>
#endif
