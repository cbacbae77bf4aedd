// The lowering's walks over tile mappings: which variables ranges cover, the tile changes along a run, the pieces
// of a copy. Internal: included by the definitions of the lowering, liveness and the estimates, not by the public
// headers of tilebsp::compiled.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/graph.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

namespace tilebsp::program::detail {
using core::detail::GraphImpl;
using core::detail::VariableMapping;

/// The variables that element ranges sorted by (var, begin) cover entirely, leaving out those in the sorted
/// `except`: ranges may overlap.
template <class R>
std::vector<std::uint32_t> covered_variables(GraphImpl const& g, std::vector<R> const& sorted,
                                             std::vector<std::uint32_t> const& except) {
  std::vector<std::uint32_t> out;
  for (std::size_t i = 0; i < sorted.size();) {
    std::uint32_t const var = sorted[i].var;
    std::int64_t covered = 0, end = 0;
    for (; i < sorted.size() && sorted[i].var == var; ++i) {
      std::int64_t const b = std::max(sorted[i].begin, end);
      if (sorted[i].end > b) covered += sorted[i].end - b;
      end = std::max(end, sorted[i].end);
    }
    if (covered == g.variables[var].size && !std::binary_search(except.begin(), except.end(), var)) out.push_back(var);
  }
  return out;
}

/// The mapping pieces last looked up, one per variable for the last few variables: a compute set's runs mostly
/// fall in the piece of the run before them in the same variable (a tile's share of it), and a vertex's fields
/// alternate between a few variables (a convolution's input, weights and output), so a lookup mostly needs no
/// search, or a short gallop from where that variable's last one ended.
struct PieceCursor {
  struct Slot {
    std::uint32_t var = ~std::uint32_t{0};
    std::optional<VariableMapping::Cursor> cursor;
    VariableMapping::Piece piece{0, 0, -1};
  };
  static constexpr std::size_t slots = 4;
  Slot slot[slots];
  std::size_t last = 0, next = 0;

  /// The piece of element i of variable v, widened to the span on its tile of a progression through i with this
  /// step (VariableMapping::Cursor::widen).
  VariableMapping::Piece along(GraphImpl const& g, std::uint32_t v, std::int64_t i, std::int64_t step) {
    Slot* s = find(g, v, i);
    if (i < s->piece.begin || i >= s->piece.end) s->piece = s->cursor->at(i);
    VariableMapping::Piece q = s->piece;
    s->cursor->widen(i, step, q);
    return q;
  }
  /// Calls f(tile, elements) for the mapped elements [b, e) of variable v (VariableMapping::Cursor::count).
  template <class F>
  void count(GraphImpl const& g, std::uint32_t v, std::int64_t b, std::int64_t e, F&& f) {
    find(g, v, b)->cursor->count(b, e, f);
  }
  /// The same for `rows` ranges of `len` elements `step` apart from b (VariableMapping::Cursor::count_rows).
  template <class F>
  void count_rows(GraphImpl const& g, std::uint32_t v, std::int64_t b, std::int64_t len, std::int64_t step,
                  std::int64_t rows, F&& f) {
    find(g, v, b)->cursor->count_rows(b, len, step, rows, f);
  }

 private:
  Slot* find(GraphImpl const& g, std::uint32_t v, std::int64_t i) {
    Slot* s = &slot[last];
    if (s->var != v) {
      std::size_t k = 0;
      while (k < slots && slot[k].var != v) ++k;
      if (k == slots) {  // a variable not among the last few: replace the oldest
        k = next++ % slots;
        slot[k].var = v;
        slot[k].cursor.emplace(g.variables[v].mapping);
        slot[k].piece = slot[k].cursor->at(i);
      }
      last = k;
      s = &slot[k];
    }
    return s;
  }
};

/// Calls f(var, tile, elements) for the mapped elements of `t`, a run of one tile's elements at a time (a strided
/// run element by element); f returns false to stop early.
template <class F>
void for_each_tile_of(GraphImpl const& g, Tensor const& t, F&& f) {
  bool go = true;
  t.for_each_run([&](std::uint32_t var, std::int64_t start, std::int64_t stride, std::int64_t count) {
    if (!go) return;
    VariableMapping::Cursor c(g.variables[var].mapping);
    auto const visit = [&](std::uint32_t tile, std::int64_t n) {
      if (go) go = f(var, tile, n);
    };
    if (stride == 1 || count == 1) c.count(start, start + count, visit);
    else if (stride == -1) c.count(start - count + 1, start + 1, visit);
    else
      for (std::int64_t i = 0; i < count && go; ++i) c.count(start + i * stride, start + i * stride + 1, visit);
  });
}

/// Calls f(offset, tile) at each point along a strided run where the owning tile changes (unmapped elements are
/// skipped): one lookup per piece of the mapping the run crosses, not per element, and one per block where the
/// stride is a whole number of the block's periods.
template <class F>
void tile_changes(GraphImpl const& g, std::uint32_t var, std::int64_t start, std::int64_t stride, std::int64_t count,
                  F&& f, PieceCursor& cursor) {
  std::int64_t last = -1;
  std::int64_t const last_x = start + (count - 1) * stride;
  for (std::int64_t i = 0; i < count;) {
    VariableMapping::Piece const p = cursor.along(g, var, start + i * stride, stride);
    if (p.tile >= 0 && p.tile != last) f(i, static_cast<std::uint32_t>(p.tile));
    if (p.tile >= 0) last = p.tile;
    // The first element past the piece.
    if (stride == 0 || (stride > 0 && p.end > last_x) || (stride < 0 && p.begin <= last_x)) break;
    i = std::max(i + 1, stride > 0 ? (p.end - start + stride - 1) / stride : (start - p.begin) / -stride + 1);
  }
}

/// Calls f(src_run, dst_run, src_start, dst_start, count) for each piece of an element-wise copy of `src` to
/// `dst` along their runs, leaving out the pieces that copy elements onto themselves.
template <class F>
void copy_pieces(Tensor const& src, Tensor const& dst, F&& f) {
  auto const sr = src.runs(), dr = dst.runs();
  std::size_t i = 0, j = 0;
  std::int64_t si = 0, dj = 0;  // elements consumed in sr[i], dr[j]
  while (i < sr.size() && j < dr.size()) {
    auto const& a = sr[i];
    auto const& b = dr[j];
    std::int64_t const m = std::min(a.count - si, b.count - dj);
    std::int64_t const s0 = a.start + si * a.stride, d0 = b.start + dj * b.stride;
    if (!(a.var == b.var && s0 == d0 && (a.stride == b.stride || m == 1))) f(a, b, s0, d0, m);
    si += m;
    dj += m;
    if (si == a.count) ++i, si = 0;
    if (dj == b.count) ++j, dj = 0;
  }
}


/// How a Lowering builds its Schedule. `plan`: in full. `record`: the instructions, slots, callbacks and host paths
/// only, with a placeholder per compute set and exchange (no plan: no mapping lookups, no estimates) and a hash of
/// every copy's tensors — what the executable cache needs to find a compiled schedule and to complete it.

}  // namespace tilebsp::program::detail
