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
};

/// What an Engine did and what the modelled target would have done.
struct Profile {
  Target target;
  std::size_t host_threads = 1;
  bool host_timing = false;
  std::vector<TileMemory> memory;
  std::vector<std::vector<StepProfile>> programs;

  /// Estimated IPU cycles of every step run so far.
  std::uint64_t estimated_cycles() const;
  /// Measured host time of every step, nanoseconds (EngineOptions::profiling).
  std::uint64_t host_ns() const;
  /// The largest total of any tile's memory.
  std::uint64_t max_tile_bytes() const;

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
