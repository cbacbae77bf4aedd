// How ops::map cuts its output per tile: regions, and series of equal regions (a run per position of a block
// of channels) as one piece of several rows.
#pragma once

#include <tilebsp/config.hpp>
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
TILEBSP_INLINE std::vector<MapPiece> pieces(Graph const& g, Tensor const& out);

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
