// Tile memory as Poplar's liveness analysis sees it: each variable's uses by each program, what is always live
// and what only part of the time, each tile's peak, and the check against the tile's memory (out_of_memory).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/program/schedule.hpp>
#include <tilebsp/program/tile_memory.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace tilebsp::program::detail {
using core::detail::GraphImpl;
using core::detail::VertexRecord;

/// Bytes of variable `var` on each tile that holds some, one entry per tile, by tile.
TILEBSP_INLINE std::vector<std::pair<std::uint32_t, std::uint64_t>> bytes_per_tile(GraphImpl const& g,
                                                                                std::uint32_t var);

/// Device-side vertex state: a 4-byte header, 8 bytes (pointer, size) per tensor field and 8 more per dimension
/// of a view field (its extent and stride), 8 per list plus 8 per entry, and params rounded up to 4 bytes.
TILEBSP_INLINE std::uint64_t vertex_state_bytes(VertexRecord const& rec);

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

}  // namespace tilebsp::program::detail

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/compile.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/program/liveness_impl.hpp>
#endif
