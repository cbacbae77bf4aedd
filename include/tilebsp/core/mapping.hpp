// Tile mapping queries (TileMapping) and linear mapping of tensors over a graph's tiles.
#pragma once

#include <tilebsp/config.hpp>
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
TILEBSP_INLINE void map_linearly(Graph& g, Tensor const& t, LinearMapping opt = {});

}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/core.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/core/mapping_impl.hpp>
#endif
