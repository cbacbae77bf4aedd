// Tile mapping queries (TileMapping) and linear mapping of tensors over a graph's tiles.
#pragma once

#include <tilebsp/core/graph.hpp>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace tilebsp {

/// Free-function spelling of Graph::tile_mapping.
inline TileMapping tile_mapping(Graph const& g, Tensor const& t) { return g.tile_mapping(t); }

/// How map_linearly spreads a tensor.
struct LinearMapping {
  std::size_t grain = 1;               ///< elements per tile are a multiple of this (except the last tile)
  std::size_t min_bytes_per_tile = 0;  ///< never put fewer bytes than this on a used tile
};

/// Spreads `t`'s flattened elements evenly over the view's tiles, in order, honouring grain and minimum size.
inline void map_linearly(Graph& g, Tensor const& t, LinearMapping opt = {}) {
  g.check_tensor("map_linearly", t);
  if (opt.grain == 0) throw option_error("map_linearly: grain must be at least 1");
  std::size_t const n = t.num_elements(), grains = (n + opt.grain - 1) / opt.grain;
  if (n == 0) return;
  std::size_t const bytes_per_grain = opt.grain * size_of(t.element_type());
  std::size_t const min_grains = (opt.min_bytes_per_tile + bytes_per_grain - 1) / bytes_per_grain;
  std::size_t const per_tile = std::max({(grains + g.num_tiles() - 1) / g.num_tiles(), min_grains, std::size_t{1}});
  Tensor const flat = t.flatten();
  for (std::size_t tile = 0; tile * per_tile < grains; ++tile) {
    std::size_t const b = tile * per_tile * opt.grain, e = std::min(n, (tile + 1) * per_tile * opt.grain);
    g.set_tile_mapping(flat.slice(b, e), tile);
  }
}

}  // namespace tilebsp
