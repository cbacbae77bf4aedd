// Cost model: estimated IPU cycles of compute sets, exchanges and syncs on a Target. A leaf: the planners (plan/)
// and the lowering (program/) both use it.
#pragma once

#include <tilebsp/core/target.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
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

/// A barrier among `ipus` IPUs: on-chip for one, across the IPU-Links for more.
inline std::uint64_t sync_cycles(Target const& t, std::size_t ipus) {
  return ipus > 1 ? t.inter_ipu_sync_cycles : t.sync_cycles;
}

/// The bytes an exchange moves, per tile (sent, received, copied on the tile) and per ordered pair of IPUs: dense
/// arrays, so that adding a transfer is O(1) and the totals need no sort or map.
class ExchangeLoad {
 public:
  explicit ExchangeLoad(Target const& t)
      : t_(&t), sent_(t.num_tiles(), 0), received_(t.num_tiles(), 0), on_tile_(t.num_tiles(), 0), link_(t.ipus * t.ipus, 0) {}
  void add(std::size_t src_tile, std::size_t dst_tile, std::uint64_t bytes) {
    if (src_tile == dst_tile) {
      on_tile_[src_tile] += bytes;
      return;
    }
    sent_[src_tile] += bytes;
    received_[dst_tile] += bytes;
    if (std::size_t const a = t_->ipu_of(src_tile), b = t_->ipu_of(dst_tile); a != b) link_[a * t_->ipus + b] += bytes;
  }
  /// Bytes each tile receives from the others.
  std::vector<std::uint64_t> const& received() const noexcept { return received_; }
  /// The busiest tile's max(sent, received) bytes at the on-chip rate plus its on-tile copies, or the busiest IPU
  /// pair's bytes at the inter-IPU rate plus the link latency, whichever is larger.
  std::uint64_t cycles() const {
    double worst = 0;
    for (std::size_t k = 0; k < sent_.size(); ++k)
      worst = std::max(worst, static_cast<double>(std::max(sent_[k], received_[k])) / t_->exchange_bytes_per_cycle +
                                  static_cast<double>(on_tile_[k]) / on_tile_copy_bytes_per_cycle);
    for (auto bytes : link_)
      if (bytes > 0)
        worst = std::max(worst, static_cast<double>(bytes) / t_->inter_ipu_bytes_per_cycle +
                                    static_cast<double>(t_->inter_ipu_latency_cycles));
    return static_cast<std::uint64_t>(std::ceil(worst));
  }

 private:
  Target const* t_;
  std::vector<std::uint64_t> sent_, received_, on_tile_, link_;
};

/// Exchange cycles of a list of transfers (ExchangeLoad::cycles).
inline std::uint64_t exchange_cycles(Target const& t, std::vector<Transfer> const& transfers) {
  ExchangeLoad load(t);
  for (auto const& x : transfers)
    load.add(x.src_tile, x.dst_tile, static_cast<std::uint64_t>(x.count) * x.elem_bytes);
  return load.cycles();
}

}  // namespace tilebsp::plan::detail
