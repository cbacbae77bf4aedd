// The partial-sum stage that operators splitting their reduction dimension end with (matmul's K split, a
// convolution's input channels and kernel positions): where the result lives, each rectangle of a tile's region sums
// the partials of its elements, fetched from the tiles that computed them, in part order.
#pragma once

#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/tensor.hpp>
#include <tilebsp/plan/search.hpp>
#include <tilebsp/program/programs.hpp>
#include <tilebsp/simd/arch.hpp>
#include <tilebsp/simd/partials.hpp>
#include <tilebsp/vertex/add_vertex.hpp>

#include <boost/hana/define_struct.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace tilebsp::ops::detail {

/// out (=|+=) alpha * (parts[0] + parts[1] + ...), summed in f32 in that order.
template <class TP, class TO, bool Acc>
struct SumPartials {
  using Out = std::conditional_t<Acc, inout_view<TO, 2>, output_view<TO, 2>>;
  BOOST_HANA_DEFINE_STRUCT(SumPartials, (input_view<TP, 3>, parts), (Out, out), (param<float>, alpha));
  static constexpr bool supervisor = true;
  void compute() {
    std::size_t const rows = out.dim(0), cols = out.dim(1), np = parts.dim(0);
    constexpr std::size_t L = simd::lanes;
    alignas(64) float acc[L];
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j0 = 0; j0 < cols; j0 += L) {
        std::size_t const w = std::min(L, cols - j0);
        simd::sum_partials<TP>(&parts(std::size_t{0}, i, j0), parts.stride(0), parts.stride(2), np, w, acc);
        simd::scale_into<TO, Acc>(acc, &out(i, j0), out.stride(1), w, alpha);
      }
  }
  std::uint64_t cycle_estimate() const {
    return tilebsp::plan::detail::sum_partials_cycles(out.dim(0) * out.dim(1), parts.dim(0), sizeof(TP));
  }
};

/// The compute set `name`/reduce: out[g] (=|+=) alpha * sum over p of parts[p, g], for `parts` [P, G, M, N] and
/// `out` [G, M, N] (+= when `accumulate`). Each tile's region of `out`, in mapping order, becomes rectangles of one
/// group: a run of rows with the same columns (a block narrower than the result has one region per row) is one
/// rectangle, cut at multiples of `row_block` rows and `col_block` columns (a planner's blocks; M and N: no cuts).
template <class TP, class TO>
Execute sum_partials_stage(Graph& g, std::string const& name, Tensor const& parts, Tensor const& out, float alpha,
                           bool accumulate, std::size_t row_block, std::size_t col_block) {
  ComputeSet const cs = g.add_compute_set(name + "/reduce");
  std::size_t const np = parts.dim(0), m = out.dim(1), n = out.dim(2);
  Tensor const by_group = parts.dimshuffle({1, 0, 2, 3});  // [G, P, M, N]
  struct Rect {
    std::size_t tile, gi, i, i1, j, j1;
  };
  std::vector<Rect> rects;
  auto const rect = [&](std::size_t tile, std::size_t gi, std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) {
    for (std::size_t i = r0; i < r1;) {
      std::size_t const i1 = std::min(r1, (i / row_block + 1) * row_block);
      for (std::size_t j = c0; j < c1;) {
        std::size_t const j1 = std::min(c1, (j / col_block + 1) * col_block);
        rects.push_back({tile, gi, i, i1, j, j1});
        j = j1;
      }
      i = i1;
    }
  };
  std::optional<Rect> run;
  auto const add = [&](std::size_t tile, std::size_t gi, std::size_t i, std::size_t i1, std::size_t j, std::size_t j1) {
    if (run && run->tile == tile && run->gi == gi && run->i1 == i && run->j == j && run->j1 == j1) {
      run->i1 = i1;
      return;
    }
    if (run) rect(run->tile, run->gi, run->i, run->i1, run->j, run->j1);
    run = Rect{tile, gi, i, i1, j, j1};
  };
  std::size_t const mn = m * n;
  for (auto const& [tile, iv] : g.tile_mapping(out.flatten())) {
    for (std::size_t b = iv.begin; b < iv.end;) {
      std::size_t const gi = b / mn, rem = b % mn, i = rem / n, j = rem % n;
      std::size_t const left = iv.end - b;
      if (j != 0 || left < n) {  // part of one row
        std::size_t const len = std::min(n - j, left);
        add(tile, gi, i, i + 1, j, j + len);
        b += len;
      } else {  // whole rows of one group
        std::size_t const rows = std::min(left / n, m - i);
        add(tile, gi, i, i + rows, 0, n);
        b += rows * n;
      }
    }
  }
  if (run) rect(run->tile, run->gi, run->i, run->i1, run->j, run->j1);
  vertex::add_vertices(g, rects.size(), [&](std::size_t k) {
    Rect const& r = rects[k];
    Tensor src = by_group.index(r.gi).slice({0, r.i, r.j}, {np, r.i1, r.j1});
    Tensor dst = out.index(r.gi).slice({r.i, r.j}, {r.i1, r.j1});
    if (accumulate)
      return vertex::record<SumPartials<TP, TO, true>>(g, cs, r.tile, fetch(std::move(src)), std::move(dst), alpha);
    return vertex::record<SumPartials<TP, TO, false>>(g, cs, r.tile, fetch(std::move(src)), std::move(dst), alpha);
  });
  return execute(cs);
}

}  // namespace tilebsp::ops::detail
