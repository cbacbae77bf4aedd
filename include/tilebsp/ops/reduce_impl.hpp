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

/// Stage 1: partials[s] = reduction of segment s, in f32.
template <class T, simd::Reduction R>
struct ReducePartials {
  BOOST_HANA_DEFINE_STRUCT(ReducePartials, (input_list<T>, in), (output<float>, partials));
  void compute() {
    for (std::size_t s = 0; s < in.size(); ++s) partials[s] = simd::reduce(R, in[s].data(), in[s].size());
  }
  std::uint64_t cycle_estimate() const {
    std::uint64_t c = 20;
    for (auto seg : in) c += 10 + (seg.size() + 1) / 2 * (R == simd::Reduction::log_add ? 4 : 1);
    return c;
  }
};

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

/// Rows held whole by one tile, in one stage: out[i] = reduction of row i of `in` (rows of `width` elements, one
/// after the other) times scale; the same value a row's single partial gives through stage 2.
template <class T, simd::Reduction R>
struct ReduceRows {
  BOOST_HANA_DEFINE_STRUCT(ReduceRows, (input<T>, in), (output<T>, out), (param<std::uint32_t>, width),
                           (param<float>, scale));
  void compute() {
    for (std::size_t i = 0; i < out.size(); ++i) {
      float const acc = simd::reduce(R, in.data() + i * width, width);
      out[i] = T(scale == 1.0f ? acc : acc * scale);
    }
  }
  std::uint64_t cycle_estimate() const {
    return 20 + out.size() * (11 + (width + 1) / 2 * (R == simd::Reduction::log_add ? 4 : 1));
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
  Tensor const out_flat = out.flatten();
  std::size_t const workers = std::max<std::size_t>(1, g.target().workers_per_tile);
  // Rows: an output whose row one tile holds whole is reduced there in one stage (ReduceRows), its output on that
  // tile; only rows split between tiles (a few, where tiles' shares end) go through partials and stage 2.
  // Columns, and rows too wide for 32-bit widths, all go through stage 2, the outputs mapped linearly.
  std::vector<std::int64_t> out_tile(columns || rn == 0 || rn > std::numeric_limits<std::uint32_t>::max() ? 0 : kn, -1);
  if (out_tile.empty()) map_linearly(g, out);
  struct Whole {
    std::size_t tile;
    Interval rows;  // of v's elements: whole rows, one after the other
  };
  std::vector<Whole> whole;

  // Stage 1: every tile reduces the pieces of rows it holds, each to one f32 partial; or (columns) each group of
  // runs of about a worker's share (at least 16 rows' worth) to one partial per column of the range it touches.
  struct Piece {
    std::size_t tile, first, partials;  // first: the output of the piece's first partial
    std::vector<Interval> runs;
  };
  std::vector<Piece> pieces;  // ordered by tile, then position
  if (rn > 0) {
    std::map<std::size_t, std::vector<Interval>> by_tile;
    for (auto const& [tile, r] : g.tile_mapping(v)) by_tile[tile].push_back(r);
    for (auto const& [tile, regions] : by_tile) {
      if (columns) {
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
        continue;
      }
      std::vector<Interval> rows, full;  // regions cut at row boundaries: parts of rows, and runs of whole rows
      for (auto r : regions)
        while (r.begin < r.end) {
          std::size_t const e = std::min(r.end, (r.begin / rn + 1) * rn);
          if (!out_tile.empty() && r.begin % rn == 0 && e - r.begin == rn) {
            out_tile[r.begin / rn] = static_cast<std::int64_t>(tile);
            if (!full.empty() && full.back().end == r.begin) full.back().end = e;
            else full.push_back({r.begin, e});
          } else {
            rows.push_back({r.begin, e});
          }
          r.begin = e;
        }
      for (auto const& group : split_for_workers(rows, workers, 64))
        for (auto const& r : group) pieces.push_back({tile, r.begin / rn, 1, {r}});
      for (auto const& group : split_for_workers(full, workers, rn))  // cut at whole rows: chunks of rows
        for (auto const& r : group) whole.push_back({tile, r});
    }
  }
  std::vector<std::size_t> offset(pieces.size() + 1, 0);  // of each piece's first partial
  for (std::size_t p = 0; p < pieces.size(); ++p) offset[p + 1] = offset[p] + pieces[p].partials;
  Tensor const partials = g.add_variable(f32, {offset.back()}, name + "/partials", {.temporary = true});
  // Named as the operator where it computes the outputs alone (no split rows).
  ComputeSet const stage1 = g.add_compute_set(out_tile.empty() || !pieces.empty() ? name + "/partials" : name);
  if (!out_tile.empty()) {
    // Outputs of whole rows on their rows' tiles; a split row's on the tile of its first part.
    for (auto const& p : pieces)
      if (out_tile[p.first] < 0) out_tile[p.first] = static_cast<std::int64_t>(p.tile);
    for (std::size_t k = 0; k < kn;) {
      std::size_t e = k + 1;
      while (e < kn && out_tile[e] == out_tile[k]) ++e;
      g.set_tile_mapping(out_flat.slice(k, e), static_cast<std::size_t>(out_tile[k]));
      k = e;
    }
    for (auto const& w : whole)
      g.add_vertex<ReduceRows<T, R>>(stage1, w.tile, v.slice(w.rows), out_flat.slice(w.rows.begin / rn, w.rows.end / rn),
                                      static_cast<std::uint32_t>(rn), scale);
  }
  for (std::size_t i = 0; i < pieces.size();) {
    std::size_t const tile = pieces[i].tile;
    std::size_t j = i;
    while (j < pieces.size() && pieces[j].tile == tile) ++j;
    g.set_tile_mapping(partials.slice(offset[i], offset[j]), tile);
    if (columns) {
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
      continue;
    }
    // One vertex per worker-sized group of this tile's pieces.
    std::size_t total = 0;
    for (std::size_t p = i; p < j; ++p) total += pieces[p].runs[0].size();
    std::size_t const chunk = (total + workers - 1) / workers;
    for (std::size_t a = i; a < j;) {
      std::size_t b = a, size = 0;
      std::vector<Tensor> segs;
      while (b < j && (b == a || size + pieces[b].runs[0].size() <= chunk)) {
        size += pieces[b].runs[0].size();
        segs.push_back(v.slice(pieces[b].runs[0]));
        ++b;
      }
      g.add_vertex<ReducePartials<T, R>>(stage1, tile, segs, partials.slice(a, b));
      a = b;
    }
    i = j;
  }

  // Stage 2: each output's partials go, in tile order, to the output's tile, which combines them.
  std::vector<std::vector<std::size_t>> of_row(kn);
  for (std::size_t p = 0; p < pieces.size(); ++p)
    for (std::size_t q = 0; q < pieces[p].partials; ++q) of_row[pieces[p].first + q].push_back(offset[p] + q);
  Tensor const gathered = g.add_variable(f32, {offset.back()}, name + "/gathered", {.temporary = true});
  std::vector<Tensor> sources;
  std::size_t at = 0;
  // The outputs stage 2 computes: every one (columns), or the split rows (runs of them on one tile).
  std::vector<std::pair<std::size_t, Interval>> finals;
  if (out_tile.empty()) {
    for (auto const& [tile, r] : g.tile_mapping(out_flat)) finals.emplace_back(tile, r);
  } else {
    for (std::size_t k = 0; k < kn; ++k) {
      if (of_row[k].empty()) continue;
      auto const tile = static_cast<std::size_t>(out_tile[k]);
      if (!finals.empty() && finals.back().first == tile && finals.back().second.end == k) ++finals.back().second.end;
      else finals.push_back({tile, {k, k + 1}});
    }
  }
  ComputeSet const stage2 = finals.empty() ? stage1 : g.add_compute_set(name);
  for (auto const& [tile, r] : finals)
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
  if (!pieces.empty() || !whole.empty()) prog.add(execute(stage1));
  if (!sources.empty()) prog.add(copy(concat(sources), gathered));
  if (!finals.empty()) prog.add(execute(stage2));
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
