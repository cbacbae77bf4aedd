// ops::map's definitions that do not depend on the expression (operand shapes, aliasing, the pieces of each
// tile's work): included by <tilebsp/ops/map.hpp> (header-only) or compiled once into tilebsp::compiled
// (src/map.cpp). ops::map itself is a template over the user's expression, defined in the header.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/ops/map.hpp>
#include <tilebsp/ops/map/pieces.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tilebsp::ops::detail {

TILEBSP_INLINE Shape broadcast_shapes(char const* op, std::vector<Shape> const& shapes) {
  std::size_t rank = 0;
  for (auto const& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (auto const& s : shapes)
    for (std::size_t d = 0; d < s.size(); ++d) {
      std::size_t& o = out[rank - s.size() + d];
      if (s[d] == o || s[d] == 1) continue;
      if (o != 1) {
        std::string list;
        for (auto const& x : shapes) list += (list.empty() ? "" : " and ") + to_string(x);
        throw shape_error(std::string(op) + ": operand shapes " + list + " do not broadcast");
      }
      o = s[d];
    }
  return out;
}

TILEBSP_INLINE bool overlaps_elsewhere(Tensor const& t, Tensor const& out) {
  auto const a = t.affine(), b = out.affine();
  if (a && b) return a->var == b->var && (a->start != b->start || a->strides != b->strides || t.shape() != out.shape());
  std::vector<std::uint32_t> vars;
  out.for_each_run([&](std::uint32_t v, std::int64_t, std::int64_t, std::int64_t) { vars.push_back(v); });
  bool shared = false;
  t.for_each_run([&](std::uint32_t v, std::int64_t, std::int64_t, std::int64_t) {
    shared = shared || std::find(vars.begin(), vars.end(), v) != vars.end();
  });
  return shared;
}

TILEBSP_INLINE bool same_view(Tensor const& t, Tensor const& out) {
  auto const a = t.affine(), b = out.affine();
  return a && b && a->var == b->var && a->start == b->start && a->strides == b->strides && t.shape() == out.shape();
}

TILEBSP_INLINE std::vector<MapPiece> pieces(Graph const& g, Tensor const& out) {
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

}  // namespace tilebsp::ops::detail
