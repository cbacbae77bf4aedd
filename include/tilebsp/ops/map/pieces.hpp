// How ops::map cuts its output per tile: regions, and series of equal regions (a run per position of a block
// of channels) as one piece of several rows.
#pragma once

#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/mapping.hpp>
#include <tilebsp/core/tensor.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tilebsp::ops::detail {

/// A piece of a map's work on one tile: `rows` runs of `length` elements of the flattened output, `stride`
/// elements apart from `begin` (one run when rows is 1).
struct MapPiece {
  std::size_t tile = 0, begin = 0, length = 0, stride = 0, rows = 1;
};

/// Whether piece p's rows can be cut from a [rows, stride] reshape of `total` elements: starting at its first
/// row, or ending with its last.
inline bool rows_fit(MapPiece const& p, std::size_t total) {
  return p.begin + p.rows * p.stride <= total || p.begin + p.length >= p.stride;
}

/// Pieces of `out`'s flattened elements (`out` is 1-D), per tile: each region of the tile, except that a series of
/// regions of one length at one stride (a run per position of a block of channels) is one piece of several rows
/// where rows_fit. Each piece is one vertex, shared by the tile's workers. When `out` is a whole variable, the
/// series come from its mapping's repeats (a few per block of positions) instead of its regions one by one.
inline std::vector<MapPiece> pieces(Graph const& g, Tensor const& out) {
  std::size_t const total = out.num_elements();
  std::vector<MapPiece> found;  // regions (rows 1) and series (rows >= 2), tiles ascending, positions on each
  auto const a = out.affine();
  auto const& impl = g.impl();
  bool done = false;
  if (a && a->start == 0 && a->strides.size() == 1 && a->strides[0] == 1 &&
      static_cast<std::int64_t>(total) == impl.variables[a->var].size) {
    std::size_t const lo = g.first_tile(), hi = lo + g.num_tiles();
    std::int64_t const mapped = impl.variables[a->var].mapping.for_each_series(
        [&](std::int64_t b, std::int64_t e, std::uint32_t tile, std::int64_t period, std::size_t reps) {
          if (tile < lo || tile >= hi) return;
          found.push_back({tile - lo, static_cast<std::size_t>(b), static_cast<std::size_t>(e - b),
                           static_cast<std::size_t>(period), reps});
        });
    if (mapped == static_cast<std::int64_t>(total)) {  // else tile_mapping below throws its mapping_error
      tilebsp::core::detail::group_by_tile(found, g.num_tiles(), [](MapPiece const& p) { return p.tile; });
      done = true;
    } else {
      found.clear();
    }
  }
  if (!done)
    for (auto const& [tile, iv] : g.tile_mapping(out))  // tiles ascending, regions ascending on each
      found.push_back({tile, iv.begin, iv.size(), 0, 1});
  std::vector<MapPiece> r;
  // A series of rows as one piece, or, where its rows do not fit a reshape (the series spans all of out), its
  // last run on its own.
  auto const series = [&](MapPiece p) {
    std::size_t const n = p.rows;
    if (!rows_fit(p, total)) --p.rows;
    if (p.rows >= 2) r.push_back(p);
    else r.push_back({p.tile, p.begin, p.length, 0, 1});
    if (p.rows < n) r.push_back({p.tile, p.begin + (n - 1) * p.stride, p.length, 0, 1});
  };
  for (std::size_t i = 0; i < found.size();) {
    MapPiece const x = found[i];
    if (x.rows >= 2) {
      series(x);
      ++i;
      continue;
    }
    auto const joins = [&](std::size_t j, std::size_t stride) {
      return j < found.size() && found[j].tile == x.tile && found[j].rows == 1 && found[j].length == x.length &&
             found[j].begin - found[j - 1].begin == stride;
    };
    std::size_t n = 1;
    std::size_t const stride = i + 1 < found.size() ? found[i + 1].begin - x.begin : 0;  // of the next region, if any
    if (joins(i + 1, stride)) {
      for (n = 2; joins(i + n, stride);) ++n;
      series({x.tile, x.begin, x.length, stride, n});
    } else {
      r.push_back(x);
    }
    i += n;
  }
  return r;
}

/// The elements of flat (1-D, `total` elements) that piece p covers: [length] for one run, else [rows, length].
inline Tensor piece_of(Tensor const& flat, MapPiece const& p) {
  if (p.rows == 1) return flat.slice(p.begin, p.begin + p.length);
  std::size_t const span = p.rows * p.stride, total = flat.num_elements();
  if (p.begin + span <= total)
    return flat.slice(p.begin, p.begin + span).reshape({p.rows, p.stride}).slice({0, 0}, {p.rows, p.length});
  std::size_t const end = p.begin + span - p.stride + p.length;  // ends with the last row
  return flat.slice(end - span, end).reshape({p.rows, p.stride}).slice({0, p.stride - p.length}, {p.rows, p.stride});
}

}  // namespace tilebsp::ops::detail
