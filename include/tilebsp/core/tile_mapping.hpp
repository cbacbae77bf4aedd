// TileMapping: the regions of a tensor held by each tile, as returned by Graph::tile_mapping.
#pragma once

#include <tilebsp/core/shape.hpp>

#include <cstddef>
#include <utility>
#include <vector>

namespace tilebsp {

/// Regions of a tensor's flattened element indices, grouped by tile (tiles ascending, regions ascending).
/// Iterating yields (tile, Interval) pairs; tile numbers are those of the graph view that made the query.
class TileMapping {
 public:
  using value_type = std::pair<std::size_t, Interval>;
  explicit TileMapping(std::vector<value_type> r) : regions_(std::move(r)) {}

  auto begin() const noexcept { return regions_.begin(); }
  auto end() const noexcept { return regions_.end(); }
  std::size_t size() const noexcept { return regions_.size(); }
  bool empty() const noexcept { return regions_.empty(); }
  /// Regions on `tile`.
  std::vector<Interval> regions_on(std::size_t tile) const {
    std::vector<Interval> r;
    for (auto const& [t, iv] : regions_)
      if (t == tile) r.push_back(iv);
    return r;
  }
  /// Tiles holding at least one element, ascending.
  std::vector<std::size_t> tiles() const {
    std::vector<std::size_t> r;
    for (auto const& [t, iv] : regions_)
      if (r.empty() || r.back() != t) r.push_back(t);
    return r;
  }

 private:
  std::vector<value_type> regions_;
};

}  // namespace tilebsp
