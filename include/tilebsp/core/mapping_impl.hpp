// map_linearly's definition: included by <tilebsp/core/mapping.hpp> (header-only) or compiled once into
// tilebsp::compiled (src/core.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/mapping.hpp>

#include <algorithm>
#include <cstddef>

namespace tilebsp {

TILEBSP_INLINE void map_linearly(Graph& g, Tensor const& t, LinearMapping opt) {
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
