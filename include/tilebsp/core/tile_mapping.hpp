// TileMapping: the regions of a tensor held by each tile, as returned by Graph::tile_mapping.
#pragma once

#include <tilebsp/core/shape.hpp>

#include <cstddef>
#include <utility>
#include <vector>

namespace tilebsp {

namespace core::detail {

/// Orders `items` by tile (`tile_of(item)`, below `tiles`), keeping their order on each tile: a counting sort,
/// O(items + tiles) (an operator's result has a region per position and block of channels).
template <class T, class TileOf>
void group_by_tile(std::vector<T>& items, std::size_t tiles, TileOf tile_of) {
  std::vector<std::size_t> at(tiles + 1, 0);
  for (auto const& x : items) ++at[tile_of(x) + 1];
  for (std::size_t i = 1; i <= tiles; ++i) at[i] += at[i - 1];
  std::vector<T> sorted(items.size());
  for (auto const& x : items) sorted[at[tile_of(x)]++] = x;
  items = std::move(sorted);
}

}  // namespace core::detail

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
