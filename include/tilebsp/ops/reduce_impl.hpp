// ops::reduce's definitions: the vertices, the builder and the entry point declared in <tilebsp/ops/reduce.hpp>.
// Included by that header (header-only) or compiled once into tilebsp::compiled (src/reduce.cpp); include it
// directly to use the vertices.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/ops/reduce.hpp>

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/mapping.hpp>
#include <tilebsp/ops/detail/instances.hpp>
#include <tilebsp/program/programs.hpp>
#include <tilebsp/simd/reduce.hpp>
#include <tilebsp/vertex/add_vertex.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace tilebsp::ops {

namespace detail {

/// Stage 1 when the kept dimensions are the innermost ones: each segment of `in` is a contiguous run of a
/// row-major [rows][width] block (the reduced dimensions, then the kept ones) starting at column first[s] (from
/// the first column of `partials`), and partials[c] folds, in order, every element of column c of the runs.
template <class T, simd::Reduction R>
struct ReduceColumns {
  BOOST_HANA_DEFINE_STRUCT(ReduceColumns, (input_list<T>, in), (output<float>, partials),
                           (param<std::vector<std::uint32_t>>, first), (param<std::uint32_t>, width));
  void compute() {
    std::fill(partials.begin(), partials.end(), simd::identity(R));
    for (std::size_t s = 0; s < in.size(); ++s)
      simd::fold_columns(R, in[s].data(), in[s].size(), first.get()[s], width, partials.data());
  }
  std::uint64_t cycle_estimate() const {
    std::uint64_t c = 20 + partials.size();
    for (auto seg : in) c += 10 + (seg.size() + 1) / 2 + 2 * ((seg.size() + width - 1) / width);
    return c;
  }
};

/// Rows, in one vertex per run of rows a tile holds the same columns of: out(i, 0) = reduction of row i of `in`
/// times scale. A row the tile holds whole gives its output (Out = T, rounded once); a part of a row gives an f32
/// partial (Out = float, scale 1) that stage 2 combines with the row's other parts.
template <class T, simd::Reduction R, class Out>
struct ReduceRows {
  BOOST_HANA_DEFINE_STRUCT(ReduceRows, (input_view<T, 2>, in), (output_view<Out, 2>, out), (param<float>, scale));
  void compute() {
    std::size_t const n = in.dim(0), w = in.dim(1);
    // A row whose elements are not adjacent (a view that reduces a dimension other than the innermost, as a global
    // mean over a channels-last tensor's positions) is gathered in order: the same elements, the same result. The
    // buffer is the thread's, kept between runs: no allocation per step once it is as wide as the widest row.
    thread_local std::vector<T> row;
    for (std::size_t i = 0; i < n; ++i) {
      T const* p = &in(i, 0);
      if (in.stride(1) != 1 && w > 1) {
        row.resize(w);
        for (std::size_t j = 0; j < w; ++j) row[j] = in(i, j);
        p = row.data();
      }
      float const acc = simd::reduce(R, p, w);
      out(i, 0) = Out(scale == 1.0f ? acc : acc * scale);
    }
  }
  std::uint64_t cycle_estimate() const {
    return 20 + in.dim(0) * (11 + (in.dim(1) + 1) / 2 * (R == simd::Reduction::log_add ? 4 : 1));
  }
};

/// Stage 2: out[i] = combination of the next counts[i] partials, in order, times scale.
template <class T, simd::Reduction R>
struct ReduceFinal {
  BOOST_HANA_DEFINE_STRUCT(ReduceFinal, (input<float>, partials), (output<T>, out),
                           (param<std::vector<std::uint32_t>>, counts), (param<float>, scale));
  void compute() {
    std::size_t p = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      float acc = simd::identity(R);
      for (std::uint32_t j = 0; j < counts.get()[i]; ++j) acc = simd::combine(R, acc, partials[p++]);
      out[i] = T(scale == 1.0f ? acc : acc * scale);
    }
  }
  std::uint64_t cycle_estimate() const { return 20 + 2 * partials.size() + out.size(); }
};

/// Splits each tile's intervals into at most `workers` pieces of similar size (multiples of 16 elements).
inline std::vector<std::vector<Interval>> split_for_workers(std::vector<Interval> const& regions, std::size_t workers,
                                                            std::size_t stride) {
  std::size_t total = 0;
  for (auto const& r : regions) total += r.size();
  std::size_t const chunk = std::max<std::size_t>(stride, ((total + workers - 1) / workers + stride - 1) / stride * stride);
  std::vector<std::vector<Interval>> groups(1);
  std::size_t in_group = 0;
  for (auto r : regions)
    while (r.begin < r.end) {
      if (in_group == chunk) {
        groups.emplace_back();
        in_group = 0;
      }
      std::size_t const n = std::min(r.size(), chunk - in_group);
      groups.back().push_back({r.begin, r.begin + n});
      in_group += n;
      r.begin += n;
    }
  return groups;
}

/// Reduces rows: output k is the reduction of v's elements [k * rn, (k + 1) * rn) (v flat, kn * rn elements;
/// out, kn elements, not yet mapped). Each tile reduces what it holds of each row, a run of rows holding the same
/// columns at a time (a block of a product's result: its rows' parts at one stride, one vertex). A row that one
/// tile holds whole gives its output there, mapped to that tile; the parts of a row split between tiles give f32
/// partials, laid out row by row (each row's in tile order), which stage 2 reads where they live and combines on
/// the tile of the row's first part: no copy, a vertex per run of rows rather than a field per partial.
template <class T, simd::Reduction R>
Tensor reduce_rows(Graph& g, Sequence& prog, Tensor const& v, Tensor const& out, std::size_t kn, std::size_t rn,
                   float scale, std::string const& name) {
  std::size_t const workers = std::max<std::size_t>(1, g.target().workers_per_tile);
  Tensor const rows = v.reshape({kn, rn});
  Tensor const out_flat = out.flatten();
  struct Series {
    std::size_t tile, row, rows, c0, c1;  // rows [row, row + rows), columns [c0, c1) of each, on `tile`
  };
  std::vector<Series> series;  // tiles ascending, then rows
  auto const add = [&](std::size_t tile, std::size_t k, std::size_t n, std::size_t c0, std::size_t c1) {
    if (!series.empty()) {
      Series& s = series.back();
      if (s.tile == tile && s.c0 == c0 && s.c1 == c1 && s.row + s.rows == k) {
        s.rows += n;
        return;
      }
    }
    series.push_back({tile, k, n, c0, c1});
  };
  for (auto const& [tile, r] : g.tile_mapping(v))  // tiles ascending, regions ascending on each
    for (std::size_t b = r.begin; b < r.end;) {
      std::size_t const k = b / rn, c0 = b % rn;
      if (c0 == 0 && r.end - b >= rn) {  // whole rows
        std::size_t const n = (r.end - b) / rn;
        add(tile, k, n, 0, rn);
        b += n * rn;
        continue;
      }
      std::size_t const e = std::min(r.end, (k + 1) * rn);
      add(tile, k, 1, c0, e - k * rn);
      b = e;
    }
  // Parts per split row, and where each row's partials begin; each output's tile.
  std::vector<std::uint32_t> parts(kn, 0);
  std::vector<std::int64_t> out_tile(kn, -1);
  for (auto const& s : series)
    for (std::size_t k = s.row; k < s.row + s.rows; ++k) {
      if (s.c1 - s.c0 < rn) ++parts[k];
      if (out_tile[k] < 0) out_tile[k] = static_cast<std::int64_t>(s.tile);
    }
  std::vector<std::size_t> first(kn + 1, 0);
  for (std::size_t k = 0; k < kn; ++k) first[k + 1] = first[k] + parts[k];
  std::size_t const total = first[kn];
  for (std::size_t k = 0; k < kn;) {
    std::size_t e = k + 1;
    while (e < kn && out_tile[e] == out_tile[k]) ++e;
    g.set_tile_mapping(out_flat.slice(k, e), static_cast<std::size_t>(out_tile[k]));
    k = e;
  }
  Tensor const partials = g.add_variable(f32, {total}, name + "/partials", {.temporary = true});

  // Stage 1: each series in up to `workers` vertices (at least 64 elements each).
  ComputeSet const stage1 = g.add_compute_set(total > 0 ? name + "/partials" : name);
  std::vector<std::uint32_t> placed(kn, 0);  // per split row, its parts given a partial so far
  std::vector<std::size_t> at;               // the partials of a run of rows
  for (auto const& s : series) {
    std::size_t const width = s.c1 - s.c0;
    std::size_t const per = std::max((s.rows + workers - 1) / workers, (64 + width - 1) / width);
    for (std::size_t a = s.row; a < s.row + s.rows; a += per) {
      std::size_t const n = std::min(per, s.row + s.rows - a);
      if (width == rn) {
        g.add_vertex<ReduceRows<T, R, T>>(stage1, s.tile, rows.slice(Shape{a, 0}, Shape{a + n, rn}),
                                          out_flat.slice(a, a + n).reshape({n, 1}), scale);
        continue;
      }
      at.clear();
      for (std::size_t k = a; k < a + n; ++k) at.push_back(first[k] + placed[k]++);
      // Runs of rows whose partials lie one step apart: one strided output each.
      for (std::size_t i = 0; i < n;) {
        std::size_t const step = i + 1 < n ? at[i + 1] - at[i] : 1;
        std::size_t m = 1;
        while (i + m < n && at[i + m] - at[i + m - 1] == step) ++m;
        if (m > 1 && at[i] + m * step > total) --m;  // the last row's slice would run past the partials
        Tensor const p = m == 1 ? partials.slice(at[i], at[i] + 1).reshape({1, 1})
                                : partials.slice(at[i], at[i] + m * step).reshape({m, step}).slice(Shape{0, 0}, Shape{m, 1});
        g.set_tile_mapping(p, s.tile);
        g.add_vertex<ReduceRows<T, R, float>>(stage1, s.tile, rows.slice(Shape{a + i, s.c0}, Shape{a + i + m, s.c1}), p,
                                              1.0f);
        i += m;
      }
    }
  }
  prog.add(execute(stage1));
  if (total == 0) return out;

  // Stage 2: runs of split rows whose outputs share a tile, their partials read where stage 1 left them.
  ComputeSet const stage2 = g.add_compute_set(name);
  for (std::size_t k = 0; k < kn;) {
    if (parts[k] == 0) {
      ++k;
      continue;
    }
    std::size_t e = k + 1;
    while (e < kn && parts[e] > 0 && out_tile[e] == out_tile[k]) ++e;
    auto const tile = static_cast<std::size_t>(out_tile[k]);
    for (auto const& group : split_for_workers({{k, e}}, workers, 16))
      for (auto const& r : group) {
        std::vector<std::uint32_t> counts(parts.begin() + static_cast<std::ptrdiff_t>(r.begin),
                                          parts.begin() + static_cast<std::ptrdiff_t>(r.end));
        g.add_vertex<ReduceFinal<T, R>>(stage2, tile, fetch(partials.slice(first[r.begin], first[r.end])),
                                        out_flat.slice(r), counts, scale);
      }
    k = e;
  }
  prog.add(execute(stage2));
  return out;
}

template <class T, simd::Reduction R>
Tensor reduce(Graph& g, Sequence& prog, Tensor const& t, std::vector<std::size_t> const& dims, float scale,
              std::string const& name) {
  OperatorScope const scope(g, "reduce", name, simd::isa_name());
  std::vector<bool> reduced(t.rank(), false);
  for (auto d : dims) {
    if (d >= t.rank())
      throw index_error("reduce: dimension " + std::to_string(d) + " out of range for rank " + std::to_string(t.rank()));
    if (reduced[d]) throw shape_error("reduce: dimension " + std::to_string(d) + " is listed twice");
    reduced[d] = true;
  }
  Shape out_shape;
  std::size_t kn = 1, rn = 1;
  for (std::size_t d = 0; d < t.rank(); ++d)
    if (!reduced[d]) {
      out_shape.push_back(t.dim(d));
      kn *= t.dim(d);
    } else {
      rn *= t.dim(d);
    }
  // Kept dimensions first (each output a row of the reduced ones), or, when the innermost dimension is kept and
  // is also the fastest in memory, reduced dimensions first: each output is then a column, and a tile's
  // contiguous runs of t fold row by row into one partial per column (a bias gradient over [N][H][W][C] reads
  // its input in memory order; a transposed view keeps the rows). Columns are counted in 32 bits.
  bool columns = false;
  if (R != simd::Reduction::log_add && kn <= std::numeric_limits<std::uint32_t>::max()) {
    std::size_t last = t.rank();  // the innermost dimension of more than one element
    for (std::size_t d = t.rank(); d-- > 0 && last == t.rank();)
      if (t.dim(d) > 1) last = d;
    columns = last < t.rank() && !reduced[last];
    if (auto const a = t.affine(); columns && a)
      for (std::size_t d = 0; d < t.rank(); ++d)
        if (t.dim(d) > 1 && std::abs(a->strides[d]) < std::abs(a->strides[last])) columns = false;
  }
  std::vector<std::size_t> perm;
  auto const dims_where = [&](bool is_reduced) {
    for (std::size_t d = 0; d < t.rank(); ++d)
      if (reduced[d] == is_reduced) perm.push_back(d);
  };
  dims_where(columns);   // rows: the kept dimensions first; columns: the reduced ones
  dims_where(!columns);
  // Element k * rn + r is output k, position r (rows); element r * kn + k (columns).
  Tensor const v = t.dimshuffle(perm).flatten();
  Tensor out = g.add_variable(t.element_type(), out_shape, name);
  if (kn == 0) return out;
  if (!columns && rn > 0) return reduce_rows<T, R>(g, prog, v, out, kn, rn, scale, name);
  map_linearly(g, out);
  std::size_t const workers = std::max<std::size_t>(1, g.target().workers_per_tile);

  // Columns (or rows of nothing: every output the identity, from stage 2 alone). Stage 1: each group of runs of
  // about a worker's share (at least 16 rows' worth) folds to one partial per column of the range it touches.
  struct Piece {
    std::size_t tile, first, partials;  // first: the output of the piece's first partial
    std::vector<Interval> runs;
  };
  std::vector<Piece> pieces;  // ordered by tile, then position
  if (rn > 0) {
    std::map<std::size_t, std::vector<Interval>> by_tile;
    for (auto const& [tile, r] : g.tile_mapping(v)) by_tile[tile].push_back(r);
    for (auto const& [tile, regions] : by_tile) {
      // At least 16 rows' worth a piece: each piece adds a partial per column to stage 2, which then handles at
      // most a sixteenth of the elements; smaller pieces also cost more vertex overhead than they save (a tile
      // holding one image row of 28 x 32 gets 2 pieces, not 6).
      for (auto& group : split_for_workers(regions, workers, 16 * kn)) {
        std::size_t lo = kn, hi = 0;
        for (auto const& r : group) {
          lo = std::min(lo, r.begin % kn);
          hi = std::max(hi, r.begin % kn + r.size());
        }
        if (hi > kn) lo = 0, hi = kn;  // a run wraps to the next row: every column
        pieces.push_back({tile, lo, hi - lo, std::move(group)});
      }
    }
  }
  std::vector<std::size_t> offset(pieces.size() + 1, 0);  // of each piece's first partial
  for (std::size_t p = 0; p < pieces.size(); ++p) offset[p + 1] = offset[p] + pieces[p].partials;
  Tensor const partials = g.add_variable(f32, {offset.back()}, name + "/partials", {.temporary = true});
  ComputeSet const stage1 = g.add_compute_set(name + "/partials");
  for (std::size_t i = 0; i < pieces.size();) {
    std::size_t const tile = pieces[i].tile;
    std::size_t j = i;
    while (j < pieces.size() && pieces[j].tile == tile) ++j;
    g.set_tile_mapping(partials.slice(offset[i], offset[j]), tile);
    for (std::size_t p = i; p < j; ++p) {
      std::vector<Tensor> segs;
      std::vector<std::uint32_t> first;
      for (auto const& r : pieces[p].runs) {
        segs.push_back(v.slice(r));
        first.push_back(static_cast<std::uint32_t>(r.begin % kn - pieces[p].first));
      }
      g.add_vertex<ReduceColumns<T, R>>(stage1, tile, segs, partials.slice(offset[p], offset[p + 1]), first,
                                         static_cast<std::uint32_t>(kn));
    }
    i = j;
  }

  // Stage 2: each output's partials go, in tile order, to the output's tile, which combines them.
  std::vector<std::vector<std::size_t>> of_row(kn);
  for (std::size_t p = 0; p < pieces.size(); ++p)
    for (std::size_t q = 0; q < pieces[p].partials; ++q) of_row[pieces[p].first + q].push_back(offset[p] + q);
  Tensor const gathered = g.add_variable(f32, {offset.back()}, name + "/gathered", {.temporary = true});
  std::vector<Tensor> sources;
  ComputeSet const stage2 = g.add_compute_set(name);
  Tensor const out_flat = out.flatten();
  std::size_t at = 0;
  for (auto const& [tile, r] : g.tile_mapping(out_flat))
    for (auto const& group : split_for_workers({r}, workers, 16))
      for (auto const& rows : group) {
        std::size_t const begin = at;
        std::vector<std::uint32_t> counts;
        for (std::size_t k = rows.begin; k < rows.end; ++k) {
          counts.push_back(static_cast<std::uint32_t>(of_row[k].size()));
          for (auto p : of_row[k]) sources.push_back(partials.slice(p, p + 1));
          at += of_row[k].size();
        }
        g.set_tile_mapping(gathered.slice(begin, at), tile);
        g.add_vertex<ReduceFinal<T, R>>(stage2, tile, gathered.slice(begin, at), out_flat.slice(rows), counts, scale);
      }
  if (!pieces.empty()) {
    prog.add(execute(stage1));
    prog.add(copy(concat(sources), gathered));
  }
  prog.add(execute(stage2));
  return out;
}

template <simd::Reduction R>
Tensor reduce_as(Graph& g, Sequence& prog, Tensor const& t, std::vector<std::size_t> const& dims, float scale,
                 std::string const& name) {
  switch (t.element_type()) {
    case ElementType::f32: return reduce<float, R>(g, prog, t, dims, scale, name);
    case ElementType::f16: return reduce<half, R>(g, prog, t, dims, scale, name);
    default:
      throw type_error("reduce: only f32 and f16 tensors can be reduced, not " + std::string(name_of(t.element_type())));
  }
}

}  // namespace detail

template <class T, class>
T scaled_reduce(Graph& g, Sequence& prog, T const& t, std::vector<std::size_t> const& dims, ReduceOp op, float scale,
                std::string const& name) {
  g.check_tensor("reduce", t);
  switch (op) {
    case ReduceOp::add: return detail::reduce_as<ReduceOp::add>(g, prog, t, dims, scale, name);
    case ReduceOp::mul: return detail::reduce_as<ReduceOp::mul>(g, prog, t, dims, scale, name);
    case ReduceOp::max: return detail::reduce_as<ReduceOp::max>(g, prog, t, dims, scale, name);
    case ReduceOp::min: return detail::reduce_as<ReduceOp::min>(g, prog, t, dims, scale, name);
    case ReduceOp::square_add: return detail::reduce_as<ReduceOp::square_add>(g, prog, t, dims, scale, name);
    case ReduceOp::log_add: return detail::reduce_as<ReduceOp::log_add>(g, prog, t, dims, scale, name);
  }
  throw option_error("reduce: unknown operation");
}

template <class T, class>
T reduce(Graph& g, Sequence& prog, T const& t, std::vector<std::size_t> const& dims, ReduceOp op,
         std::string const& name) {
  return scaled_reduce(g, prog, t, dims, op, 1.0f, name);
}

}  // namespace tilebsp::ops
