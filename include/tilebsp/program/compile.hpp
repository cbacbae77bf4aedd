// compile(): lowers programs once into an Executable, checks mapping, estimates cycles (program/estimate.hpp) and
// accounts tile memory (program/liveness.hpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/plan/cost.hpp>
#include <tilebsp/program/lower.hpp>
#include <tilebsp/program/estimate.hpp>
#include <tilebsp/program/liveness.hpp>
#include <tilebsp/program/programs.hpp>
#include <tilebsp/program/schedule.hpp>
#include <tilebsp/program/tile_memory.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace tilebsp {

/// Called by compile() on the calling thread as it goes: the phase's name, and how far it is (`done` of `total`
/// units; total 0 when the phase has no measure). For a progress display; see CompileOptions::progress.
using CompileProgress = std::function<void(std::string_view phase, std::size_t done, std::size_t total)>;

/// Options of compile().
struct CompileOptions {
  /// Compile even when a tile's memory is over-subscribed (for inspecting the profile), as Poplar's
  /// debug.allowOutOfMemory. The engine still runs: host memory is not tile memory.
  bool allow_out_of_memory = false;
  /// Host threads that plan the compute sets (0: all hardware threads). The Executable is the same for any number.
  std::size_t threads = 0;
  /// Directory of the executable cache (created when missing). Empty: the environment variable
  /// TILEBSP_EXECUTABLE_CACHE, when set and not empty; else no cache. See docs/01, "Compiling".
  std::string cache_dir{};
  /// Use the cache directory even when another user owns it or its group or others may write it (a cache shared
  /// on purpose). Without this, such a directory is warned about and not used, as ssh treats a key file others can
  /// read: an entry is checked for consistency, not authenticity (docs/01). The environment variable
  /// TILEBSP_EXECUTABLE_CACHE_TRUST=1 does the same.
  bool trust_cache_dir = false;
  /// Receives compile's phases and progress (none when empty).
  CompileProgress progress{};
  /// Replicas of the program (data parallelism, Poplar's replication factor): each runs on its own copy of the
  /// target with its own copy of every variable; cross-replica collectives (all_reduce) join them. The Engine runs
  /// them all, or its share when several processes run them (EngineOptions::communicator). At least 1.
  std::size_t replicas = 1;
};

class Executable;
namespace program::detail {
TILEBSP_INLINE Executable compile_programs(Graph const& g, CompileOptions const& options,
                                           std::function<void(Lowering&)> const& lower);
}

/// The result of compile(): a flat schedule per program, ready for an Engine.
class Executable {
 public:
  Executable() = default;
  /// Internal: what compile() makes.
  Executable(std::shared_ptr<schedule::Schedule const> schedule, std::vector<TileMemory> memory)
      : s_(std::move(schedule)), memory_(std::move(memory)) {}

  /// Whether this holds a compiled program (a default-constructed Executable does not).
  bool empty() const noexcept { return !s_; }
  Target const& target() const noexcept { return s_->graph->target; }
  std::size_t num_programs() const noexcept { return s_->programs.size(); }
  std::vector<TileMemory> const& memory() const noexcept { return memory_; }
  /// CompileOptions::replicas: the memory and cycle figures are one replica's (they run concurrently).
  std::size_t replicas() const noexcept { return s_->replicas; }
  /// Estimated IPU cycles of one run of program `program`: its steps, those in a repeat as often as it runs, a
  /// conditional step once, a pipeline step's stages within it. Throws index_error when out of range.
  std::uint64_t estimated_cycles(std::size_t program) const;
  schedule::Schedule const& schedule() const noexcept { return *s_; }
  /// The executable cache's entry for this executable (empty when no cache was used or the graph cannot be
  /// cached), and whether compile() loaded it from there rather than lowering the programs.
  std::string const& cache_entry() const noexcept { return cache_entry_; }
  bool loaded_from_cache() const noexcept { return loaded_; }

 private:
  friend Executable program::detail::compile_programs(Graph const&, CompileOptions const&,
                                                      std::function<void(Lowering&)> const&);
  std::shared_ptr<schedule::Schedule const> s_;
  std::vector<TileMemory> memory_;
  std::string cache_entry_;
  bool loaded_ = false;
};

namespace program::detail {
using core::detail::GraphImpl;
using core::detail::VertexRecord;

TILEBSP_INLINE void check_mapped(GraphImpl const& g, std::size_t threads);


/// compile(): checks the graph's mapping, lowers the programs (`lower` calls each one's lower() between
/// begin_program and end_program), estimates cycles and accounts memory; or loads them from the executable cache.
/// (Declared above Executable, its friend.)

}  // namespace program::detail

/// Lowers `programs` (run later as engine.run(0), run(1), ...) into an Executable. Throws mapping_error for
/// unmapped data or fields reaching other tiles, write_conflict_error, and out_of_memory. With an executable cache
/// (CompileOptions::cache_dir or TILEBSP_EXECUTABLE_CACHE), an entry for the same graph and programs is loaded
/// instead of lowering them, and a fresh compile is stored.
template <class... P>
Executable compile(Graph const& g, CompileOptions const& options, P const&... programs) {
  static_assert((ProgramLike<P> && ...), "compile: every argument after the options must be a program");
  return program::detail::compile_programs(g, options, [&](Lowering& l) {
    ((l.begin_program(), programs.lower(l), l.end_program()), ...);
  });
}
template <ProgramLike... P>
Executable compile(Graph const& g, P const&... programs) {
  return compile(g, CompileOptions{}, programs...);
}
/// compile() of a list of programs known at run time (engine.run(i) runs programs[i]).
inline Executable compile(Graph const& g, CompileOptions const& options, std::vector<Program> const& programs) {
  return program::detail::compile_programs(g, options, [&](Lowering& l) {
    for (auto const& p : programs) l.begin_program(), p.lower(l), l.end_program();
  });
}

inline std::uint64_t Executable::estimated_cycles(std::size_t program) const {
  if (program >= num_programs())
    throw index_error("estimated_cycles: program " + std::to_string(program) + " out of range (the executable has " +
                      std::to_string(num_programs()) + " programs)");
  return program::detail::run_cycles(*s_, program, 0, s_->programs[program].code.size());
}

}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/compile.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/program/compile_impl.hpp>
#endif
