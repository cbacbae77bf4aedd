// compile(): lowers programs once into an Executable, checks mapping, estimates cycles and accounts tile memory.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/plan/cost.hpp>
#include <tilebsp/program/lower.hpp>
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
  Executable(std::shared_ptr<program::detail::Schedule const> schedule, std::vector<TileMemory> memory)
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
  program::detail::Schedule const& schedule() const noexcept { return *s_; }
  /// The executable cache's entry for this executable (empty when no cache was used or the graph cannot be
  /// cached), and whether compile() loaded it from there rather than lowering the programs.
  std::string const& cache_entry() const noexcept { return cache_entry_; }
  bool loaded_from_cache() const noexcept { return loaded_; }

 private:
  friend Executable program::detail::compile_programs(Graph const&, CompileOptions const&,
                                                      std::function<void(Lowering&)> const&);
  std::shared_ptr<program::detail::Schedule const> s_;
  std::vector<TileMemory> memory_;
  std::string cache_entry_;
  bool loaded_ = false;
};

namespace program::detail {
using core::detail::GraphImpl;
using core::detail::VertexRecord;

TILEBSP_INLINE void check_mapped(GraphImpl const& g, std::size_t threads);

/// Bytes of variable `var` on each tile that holds some, one entry per tile, by tile.
TILEBSP_INLINE std::vector<std::pair<std::uint32_t, std::uint64_t>> bytes_per_tile(GraphImpl const& g,
                                                                                std::uint32_t var);

/// Device-side vertex state: a 4-byte header, 8 bytes (pointer, size) per tensor field and 8 more per dimension
/// of a view field (its extent and stride), 8 per list plus 8 per entry, and params rounded up to 4 bytes.
TILEBSP_INLINE std::uint64_t vertex_state_bytes(VertexRecord const& rec);

/// The IPUs holding elements of `x`.
TILEBSP_INLINE std::vector<std::uint32_t> ipus_of(GraphImpl const& g, Tensor const& x);

TILEBSP_INLINE void estimate_cycles(Schedule& s);

/// Estimated cycles of a cross-replica all-reduce of `bytes` per replica over `replicas` replicas (0 for one).
TILEBSP_INLINE std::uint64_t collective_cycles(Target const& t, std::size_t replicas, std::uint64_t bytes);

/// Estimated cycles of one run of instructions [begin, end) of `p` (repeats multiplied out, conditional steps and
/// host path bodies once, pipeline stages' code left out: the pipeline steps hold their cost).
TILEBSP_INLINE std::uint64_t run_cycles(Schedule const& s, std::size_t program, std::size_t begin, std::size_t end);

/// How one program touches one variable, at steps 2·pc (compute phase) and 2·pc + 1 (exchange phase).
struct VariableUse {
  static constexpr std::size_t never = SIZE_MAX;
  std::size_t first = never, last = 0, last_read = 0, last_write = 0;
  bool read = false, written = false;
  bool first_is_full_write = false;  ///< the first access writes every element, unconditionally, reading none
};

/// Each variable's use by each program.
TILEBSP_INLINE std::vector<std::vector<VariableUse>> variable_uses(Schedule const& s);

/// Per-tile memory, as Poplar's liveness analysis sees it. Always live: constants, vertex state, and variables
/// whose value may outlive a program run (any variable some program reads before writing it in full). Live part
/// of the time: temporary variables and staging, fetch and staged-exchange buffers (peak_temporary), and the
/// other variables from their first full write to their last use. A variable written and not read again stays
/// live to the program's end (the host may read it), as does one written before a host callback (which may read
/// it). Loops: a range that crosses a loop boundary, or a temporary read before it is written, covers the loop.
struct MemoryDetail;
TILEBSP_INLINE std::vector<TileMemory> account_memory(Schedule const& s, std::size_t threads = 1,
                                                      MemoryDetail* detail = nullptr);

/// What account_memory() saw, for the profile report (filled when asked for).
struct MemoryDetail {
  /// Per program, per instruction: bytes live part of the time, summed over tiles (the larger of its compute and
  /// exchange phases). Staging, fetch and staged-exchange buffers count in `live`, not in `ranges`.
  std::vector<std::vector<std::uint64_t>> live;
  /// Per program: each variable live part of the time, and its first and last instruction.
  struct Range {
    std::uint32_t var = 0;
    std::size_t first = 0, last = 0;
  };
  std::vector<std::vector<Range>> ranges;
  /// Per tile, its largest occupants (at most `occupants_per_tile`, largest first): a variable's index and its bytes
  /// there; index -1 is the vertices' state.
  static constexpr std::size_t occupants_per_tile = 8;
  std::vector<std::vector<std::pair<std::int64_t, std::uint64_t>>> occupants;
  /// Per variable: whether it is live part of the time (else always live).
  std::vector<char> tracked;
};

TILEBSP_INLINE void check_memory(Schedule const& s, std::vector<TileMemory> const& mem);

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
