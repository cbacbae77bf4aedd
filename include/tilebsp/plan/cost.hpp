// Cost model: estimated IPU cycles of compute sets, exchanges and syncs on a Target. A leaf: the planners (plan/)
// and the lowering (program/) both use it.
#pragma once

#include <tilebsp/core/target.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace tilebsp::plan::detail {

/// One element-wise copy between two variables, inside one (source tile, destination tile) pair.
struct Transfer {
  std::uint32_t src_var = 0, dst_var = 0;
  std::int64_t src_start = 0, src_stride = 1, dst_start = 0, dst_stride = 1, count = 0;
  std::uint32_t src_tile = 0, dst_tile = 0;
  std::uint32_t elem_bytes = 4;
};

/// Fixed supervisor cost of starting a compute set on a tile.
inline constexpr std::uint64_t compute_set_overhead_cycles = 100;
/// On-tile copies (same source and destination tile) move this many bytes per cycle.
inline constexpr double on_tile_copy_bytes_per_cycle = 8;

/// Default vertex estimate when the vertex has no cycle_estimate(): 20 + one worker cycle per element.
inline std::uint64_t default_vertex_cycles(std::int64_t elements) { return 20 + static_cast<std::uint64_t>(elements); }

/// A tile's compute-set cycles: worker vertices go in order to the least loaded of the tile's workers; each
/// worker issues every `workers`-th cycle, so they need workers × (largest worker load) cycles. Supervisor
/// vertices (which drive all workers themselves) add their tile cycles.
inline std::uint64_t tile_compute_cycles(std::vector<std::uint64_t> const& vertex_cycles, std::size_t workers,
                                         std::uint64_t supervisor_cycles = 0) {
  std::vector<std::uint64_t> load(std::max<std::size_t>(workers, 1), 0);
  for (auto c : vertex_cycles) *std::min_element(load.begin(), load.end()) += c;
  return compute_set_overhead_cycles + supervisor_cycles + load.size() * *std::max_element(load.begin(), load.end());
}

inline std::uint64_t sync_cycles(Target const& t) { return t.ipus > 1 ? t.inter_ipu_sync_cycles : t.sync_cycles; }

/// Exchange cycles: the busiest tile's max(sent, received) bytes at the on-chip rate plus its on-tile copies,
/// or the busiest IPU pair's bytes at the inter-IPU rate, whichever is larger.
inline std::uint64_t exchange_cycles(Target const& t, std::vector<Transfer> const& transfers) {
  std::map<std::uint32_t, std::pair<double, double>> tile;  // tile -> (sent or received, on-tile)
  std::map<std::pair<std::size_t, std::size_t>, double> link;
  std::map<std::uint32_t, double> sent, recv;
  for (auto const& x : transfers) {
    double const bytes = static_cast<double>(x.count) * x.elem_bytes;
    if (x.src_tile == x.dst_tile) {
      tile[x.src_tile].second += bytes;
      continue;
    }
    sent[x.src_tile] += bytes;
    recv[x.dst_tile] += bytes;
    auto const a = t.ipu_of(x.src_tile), b = t.ipu_of(x.dst_tile);
    if (a != b) link[{a, b}] += bytes;
  }
  for (auto const& [k, v] : sent) tile[k].first = std::max(tile[k].first, v);
  for (auto const& [k, v] : recv) tile[k].first = std::max(tile[k].first, v);
  double worst = 0;
  for (auto const& [k, v] : tile)
    worst = std::max(worst, v.first / t.exchange_bytes_per_cycle + v.second / on_tile_copy_bytes_per_cycle);
  for (auto const& [k, v] : link) worst = std::max(worst, v / t.inter_ipu_bytes_per_cycle);
  return static_cast<std::uint64_t>(std::ceil(worst));
}

}  // namespace tilebsp::plan::detail
