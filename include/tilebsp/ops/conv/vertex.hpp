// ops::conv, its pieces and vertex: how a plan deals its work to tiles (each_piece, geometry) and the vertex that
// runs one piece.
#pragma once

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/mapping.hpp>
#include <tilebsp/ops/detail/common.hpp>
#include <tilebsp/ops/detail/host_work.hpp>
#include <tilebsp/ops/detail/rank6.hpp>
#include <tilebsp/ops/map.hpp>
#include <tilebsp/plan/conv.hpp>
#include <tilebsp/plan/detail/conv.hpp>
#include <tilebsp/program/programs.hpp>
#include <tilebsp/simd/conv.hpp>
#include <tilebsp/vertex/add_vertex.hpp>

#include <boost/hana/define_struct.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace tilebsp::ops::detail {



/// The geometry a convolution vertex carries: the loop, its block of work and where its three blocks sit.
struct ConvGeometry {
  simd::ConvLoop loop;
  simd::ConvRange range;
  Block6 src, other, dst;
};

/// One tile's piece of one serial step. Forward-like (Grad = false): dst = conv(src window, weights block);
/// weight gradient (Grad = true): dst = sum over the piece's positions of src window x output gradients
/// (`other`). Load: continue the chains from dst (a later serial step).
template <class TS, class TW, class TD, bool Load, bool Grad>
struct ConvVertex {
  using Out = std::conditional_t<Load, inout<TD>, output<TD>>;
  BOOST_HANA_DEFINE_STRUCT(ConvVertex, (input<TS>, src), (input<TW>, other), (Out, dst), (param<ConvGeometry>, geom),
                           (param<float>, macs_per_cycle));
  static constexpr bool supervisor = true;
  void compute() {
    ConvGeometry const& g = geom;
    auto const s = g.src.operand(src.data());
    auto const o = g.other.operand(other.data());
    auto const d = g.dst.operand(dst.data());
    if constexpr (Grad) simd::conv_weight_gradient(g.loop, g.range, s, o, d, Load);
    else simd::conv_forward(g.loop, g.range, s, o, d, Load);
  }
  std::uint64_t cycle_estimate() const {
    ConvGeometry const& g = geom;
    auto const& r = g.range;
    std::array<double, 3> e{};
    for (std::size_t d = 0; d < 3; ++d) e[d] = static_cast<double>(r.hi[d] - r.lo[d]);
    double const macs = tilebsp::plan::detail::conv_block_macs(g.loop, static_cast<double>(r.n1 - r.n0), e, static_cast<double>(r.g1 - r.g0),
                                                         static_cast<double>(r.c1 - r.c0), static_cast<double>(r.j1 - r.j0));
    return 50 + static_cast<std::uint64_t>(std::ceil(macs / macs_per_cycle)) + (dst.size() * sizeof(TD) + 7) / 8;
  }
};

/// The rank-6 views of a pass's three operands (see simd::Operand6) and the plan.
struct ConvViews {
  Tensor src, other, out;
};

/// Calls f(tile, part, range) for every tile piece in serial step `step` (pieces already done are skipped), or
/// with step = whole_piece for the piece's whole range; `part` is the index of the piece's partial in the final
/// reduction.
inline constexpr std::size_t whole_piece = ~std::size_t{0};
template <class F>
void each_piece(ConvPlan const& p, std::size_t step, F&& f) {
  auto const& q = p.problem;
  bool const wu = q.kind == ConvPass::weight_update;
  std::size_t const rd = q.row_dim;
  for (std::size_t ig = 0; ig < p.g_split; ++ig)
    for (std::size_t ij = 0; ij < p.j_split; ++ij)
      for (std::size_t ic = 0; ic < p.c_split; ++ic)
        for (std::size_t in = 0; in < p.n_split; ++in)
          for (std::size_t ir = 0; ir < p.r_split; ++ir) {
            simd::ConvRange r = p.piece(ig, ij, ic, in, ir);
            // The serial step's share of the reduction channels (or rows).
            auto& a = wu ? r.lo[rd] : r.j0;
            auto& b = wu ? r.hi[rd] : r.j1;
            if (step != whole_piece) std::tie(a, b) = p.serial().range(a, b, step);
            if (a >= b || r.g0 >= r.g1 || r.c0 >= r.c1 || r.n0 >= r.n1 || r.lo[rd] >= r.hi[rd] || r.j0 >= r.j1) continue;
            f(p.tile_of(ig, ij, ic, in, ir), p.part_of(ij, in, ir), r);
          }
}

/// The blocks of the source window, the other operand and the destination for piece `r`.
inline ConvGeometry geometry(ConvProblem const& q, simd::ConvRange const& r) {
  ConvGeometry g;
  g.loop = q.loop;
  g.range = r;
  bool const wu = q.kind == ConvPass::weight_update;
  Index6 so{r.n0, 0, 0, 0, r.g0, r.j0}, ss{r.n1 - r.n0, 0, 0, 0, r.g1 - r.g0, r.j1 - r.j0};
  for (std::size_t d = 0; d < 3; ++d) {
    auto const [a, b] = tilebsp::plan::detail::source_range(q.loop.dim[d], r.lo[d], r.hi[d]);
    so[d + 1] = a, ss[d + 1] = b - a;
  }
  g.src = {so, ss};
  Index6 const taps_o{r.g0, 0, 0, 0, r.j0, r.c0};
  Index6 const taps_s{r.g1 - r.g0, q.loop.dim[0].taps, q.loop.dim[1].taps, q.loop.dim[2].taps, r.j1 - r.j0, r.c1 - r.c0};
  Index6 const pos_o{r.n0, r.lo[0], r.lo[1], r.lo[2], r.g0, r.c0};
  Index6 const pos_s{r.n1 - r.n0, r.hi[0] - r.lo[0], r.hi[1] - r.lo[1], r.hi[2] - r.lo[2], r.g1 - r.g0, r.c1 - r.c0};
  g.other = wu ? Block6{pos_o, pos_s} : Block6{taps_o, taps_s};
  g.dst = wu ? Block6{taps_o, taps_s} : Block6{pos_o, pos_s};
  return g;
}

}  // namespace tilebsp::ops::detail
