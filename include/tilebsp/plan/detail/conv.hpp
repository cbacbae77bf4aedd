// plan_conv's search: the problem a pass computes, the cost of one candidate plan and the walk over the split
// candidates. Internal: included by plan/conv_impl.hpp and the convolutions' definitions (ops/conv_impl.hpp,
// ops/conv/vertex.hpp).
#pragma once

#include <tilebsp/plan/conv.hpp>
#include <tilebsp/plan/detail/search.hpp>
#include <tilebsp/simd/conv_loop.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace tilebsp::plan::detail {

/// The loop of a pass of `p` (validated).
inline ConvProblem conv_problem(ConvParams const& p, ConvPass kind) {
  p.validate();
  ConvProblem q;
  q.params = p;
  q.kind = kind;
  std::size_t const lead = 3 - p.rank();
  auto const out = p.output_field();
  for (std::size_t d = 0; d < p.rank(); ++d) {
    auto& D = q.loop.dim[lead + d];
    std::int64_t const K = p.kernel_shape[d], dk = p.kernel_dilation_of(d), o = static_cast<std::int64_t>(out[d]);
    if (kind == ConvPass::backward_input)
      D = {p.input_field[d], o, K, p.input_dilation_of(d), dk, p.padding_lower_of(d) - (K - 1) * dk, p.stride_of(d)};
    else
      D = {o, p.input_field[d], K, p.stride_of(d), dk, -p.padding_lower_of(d), p.input_dilation_of(d)};
  }
  q.row_dim = lead;
  q.batch = static_cast<std::size_t>(p.batch);
  q.groups = static_cast<std::size_t>(p.groups);
  bool const back = kind == ConvPass::backward_input;
  q.c = static_cast<std::size_t>(back ? p.input_channels : p.output_channels);
  q.j = static_cast<std::size_t>(back ? p.output_channels : p.input_channels);
  return q;
}

/// Multiply-adds of a forward-like block of n images x positions e[0] x e[1] x e[2], g groups x c lane channels x j
/// reduction channels: per position and tap, or for Winograd per tile point plus the transforms (about 32
/// additions per tile and reduction channel and 24 per tile and lane channel, counted as multiply-adds).
inline double conv_block_macs(simd::ConvLoop const& L, double n, std::array<double, 3> const& e, double g, double c, double j) {
  if (!L.winograd) return n * e[0] * e[1] * e[2] * static_cast<double>(L.taps()) * g * c * j;
  double const tiles = n * e[0] * std::ceil(e[1] / 2) * std::ceil(e[2] / 2);
  return tiles * g * (16 * c * j + 32 * j + 24 * c);
}

/// Source elements of dimension `d` read for output positions [lo, hi): [first, last + 1), possibly empty.
inline std::pair<std::int64_t, std::int64_t> source_range(simd::ConvDim const& D, std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return {0, 0};
  std::int64_t const v0 = lo * D.a + D.c, v1 = (hi - 1) * D.a + (D.taps - 1) * D.b + D.c;
  std::int64_t const first = std::max<std::int64_t>(0, v0 <= 0 ? 0 : (v0 + D.div - 1) / D.div);
  std::int64_t const last = std::min<std::int64_t>(D.in - 1, v1 < 0 ? -1 : v1 / D.div);
  return last < first ? std::pair<std::int64_t, std::int64_t>{0, 0} : std::pair{first, last + 1};
}

}  // namespace tilebsp::plan::detail

namespace tilebsp::plan::detail {

inline void evaluate(ConvPlan& p, Target const& t) {
  auto const& q = p.problem;
  auto const& L = q.loop;
  std::size_t const ein = size_of(q.input), ep = size_of(q.partials), eout = size_of(q.output);
  bool const wu = q.kind == ConvPass::weight_update;
  p.tiles = p.n_split * p.r_split * p.g_split * p.c_split * p.j_split;
  p.step = ceil_div(wu ? p.r_tile : p.j_tile, p.steps);
  std::size_t const rd = q.row_dim;
  std::size_t other_out = 1, other_in = 1;
  for (std::size_t d = 0; d < 3; ++d)
    if (d != rd) {
      other_out *= static_cast<std::size_t>(L.dim[d].out);
      other_in *= static_cast<std::size_t>(L.dim[d].in);
    }
  std::size_t const rows_step = wu ? p.step : p.r_tile, j_step = wu ? p.j_tile : p.step;
  auto const extents = [&](std::size_t rows) {
    std::array<double, 3> e{};
    for (std::size_t d = 0; d < 3; ++d) e[d] = static_cast<double>(d == rd ? rows : static_cast<std::size_t>(L.dim[d].out));
    return e;
  };
  auto const [w0, w1] = source_range(L.dim[rd], 0, static_cast<std::int64_t>(rows_step));
  std::uint64_t const window = static_cast<std::uint64_t>(p.n_tile) * static_cast<std::uint64_t>(w1 - w0) * other_in *
                               p.g_tile * j_step * ein;
  std::uint64_t const positions = static_cast<std::uint64_t>(p.n_tile) * rows_step * other_out;
  std::size_t const taps = q.taps();
  TileWork w;
  w.steps = p.steps;
  w.macs = wu ? static_cast<double>(positions) * static_cast<double>(p.g_tile * p.c_tile * taps * j_step)
              : conv_block_macs(L, static_cast<double>(p.n_tile), extents(rows_step), static_cast<double>(p.g_tile),
                                static_cast<double>(p.c_tile), static_cast<double>(j_step));
  std::uint64_t const result = wu ? static_cast<std::uint64_t>(p.g_tile) * taps * p.j_tile * p.c_tile
                                  : static_cast<std::uint64_t>(p.n_tile) * p.r_tile * other_out * p.g_tile * p.c_tile;
  w.recv = window + (wu ? positions * p.g_tile * p.c_tile * ein : static_cast<std::uint64_t>(p.g_tile) * taps * j_step * p.c_tile * ein);
  w.sent = static_cast<double>(w.recv);
  w.written_bytes = result * (p.reduce ? ep : eout);
  w.resident_bytes = p.reduce ? result * ep : 0;
  w.reduce = p.reduce;
  w.result_elements = result;
  w.parts = p.parts();
  w.partial_bytes = ep;
  cost_tile_work(p, t, macs_per_cycle(t, q.input), w);
}

inline auto conv_tie(ConvPlan const& p) {
  return std::tuple(p.j_split, p.steps, p.g_split, p.n_split, p.r_split, p.c_split);
}


/// plan_conv's search (the warning, if any, in `warning`).
inline ConvPlan search_conv(Target const& t, ConvProblem const& q, ConvOptions const& o, std::string& warning) {
  ConvPlan const base = plan::detail::base_plan<ConvPlan>("conv", t, q, o);
  std::size_t const tiles = t.num_tiles();
  std::uint64_t const bound = base.bound;
  bool const wu = q.kind == ConvPass::weight_update;
  std::size_t const rows = static_cast<std::size_t>(q.loop.dim[q.row_dim].out);
  plan::detail::Candidates<ConvPlan, decltype(&conv_tie)> kept{bound, &conv_tie};
  static constexpr std::size_t serial_steps[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
  for (auto const& [gs, gt] : plan::detail::split_candidates(q.groups, tiles))
    for (auto const& [js, jt] : plan::detail::split_candidates(q.j, tiles / gs))
      for (auto const& [cs, ct] : plan::detail::split_candidates(q.c, tiles / (gs * js)))
        for (auto const& [ns, nt] : plan::detail::split_candidates(q.batch, tiles / (gs * js * cs)))
          for (auto const& [rs, rt] : plan::detail::split_candidates(rows, tiles / (gs * js * cs * ns))) {
            ConvPlan p = base;
            p.g_split = gs, p.j_split = js, p.c_split = cs, p.n_split = ns, p.r_split = rs;
            p.g_tile = gt, p.j_tile = jt, p.c_tile = ct, p.n_tile = nt, p.r_tile = rt;
            std::size_t const serial = wu ? rt : jt;
            std::size_t last_step = 0;
            bool fitted = false;
            // Steps only add cycles: past the first count that fits, only the least-memory count matters.
            for (std::size_t i = 0; i < std::size(serial_steps); ++i) {
              std::size_t const s = serial_steps[i];
              if (s > 1 && s > serial) break;
              std::size_t const step = plan::detail::ceil_div(serial, s);
              if (s > 1 && step == last_step) continue;
              bool const last = i + 1 == std::size(serial_steps) || serial_steps[i + 1] > serial;
              if (fitted && !last) continue;
              last_step = step;
              p.steps = s;
              p.reduce = q.accumulate || p.parts() > 1 || (s > 1 && q.output != q.partials);
              plan::detail::evaluate(p, t);
              if (kept.offer(p)) fitted = true;
            }
          }
  return plan::detail::settle(t, base.amp, "conv " + std::string(name_of(q.kind)) + " " + q.params.describe(),
                              std::move(kept), warning);
}
}  // namespace tilebsp::plan::detail

// Header-only (the default), plan_conv's definitions follow (the public header includes this one).
#ifndef TILEBSP_COMPILED
#include <tilebsp/plan/conv_impl.hpp>
#endif
