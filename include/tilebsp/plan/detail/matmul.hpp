// plan_matmul's search: the cost of one candidate plan and the walk over the split candidates. Internal: included
// by plan/matmul_impl.hpp and the matmul's definitions (ops/detail/matmul_build.hpp).
#pragma once

#include <tilebsp/plan/detail/search.hpp>
#include <tilebsp/plan/matmul.hpp>

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

/// Tile cycles of a matmul vertex: setup, the multiply-accumulates at the tile's MAC rate, and writing the
/// results (one 64-bit store per cycle).
inline std::uint64_t matmul_vertex_cycles(double macs_per_cycle, std::size_t g, std::size_t m, std::size_t n,
                                          std::size_t k, std::size_t out_bytes) {
  double const macs = static_cast<double>(g) * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  return 50 + static_cast<std::uint64_t>(std::ceil(macs / macs_per_cycle)) +
         static_cast<std::uint64_t>(ceil_div(g * m * n * out_bytes, 8));
}
/// Evaluates one candidate: fills sizes, memory and cycles.
inline void evaluate(MatmulPlan& p, Target const& t) {
  auto const& q = p.problem;
  std::size_t const ein = size_of(q.input), ep = size_of(q.partials), eout = size_of(q.output);
  p.k_step = ceil_div(p.k_tile, p.k_steps);
  p.tiles = p.g_split * p.m_split * p.n_split * p.k_split;
  std::uint64_t const out_tile = static_cast<std::uint64_t>(p.g_tile) * p.m_tile * p.n_tile;
  TileWork w;
  w.steps = p.k_steps;
  w.macs = static_cast<double>(out_tile) * static_cast<double>(p.k_step);
  // Each serial step fetches the tile's A and B slices (an upper bound: pieces already on the tile need not move).
  w.recv = static_cast<std::uint64_t>(p.g_tile) * (p.m_tile + p.n_tile) * p.k_step * ein;
  // Sending side, for row-major operands mapped linearly over all tiles: a step's columns of A are on every
  // tile and go to n_split tiles each; its rows of B (k_split slices of k_step rows) are on a share of the
  // tiles and go to m_split tiles each.
  double const T = static_cast<double>(t.num_tiles()), G = static_cast<double>(q.groups);
  double const slice = static_cast<double>(p.k_split * p.k_step);
  double const sent_a = G * static_cast<double>(q.m) * slice * static_cast<double>(ein * p.n_split) / T;
  double const holders_b = std::max(1.0, std::min(T, T * slice / std::max<double>(1.0, static_cast<double>(q.k))));
  double const sent_b = G * slice * static_cast<double>(q.n) * static_cast<double>(ein * p.m_split) / holders_b;
  w.sent = sent_a + sent_b;
  w.written_bytes = out_tile * (p.reduce ? ep : eout);
  w.resident_bytes = p.reduce ? out_tile * ep : 0;
  w.reduce = p.reduce;
  w.result_elements = out_tile;
  w.parts = p.k_split;
  w.partial_bytes = ep;
  cost_tile_work(p, t, macs_per_cycle(t, q.input), w);
}

/// The order of matmul plans of equal cycles and memory: by their splits.
inline auto matmul_tie(MatmulPlan const& p) {
  return std::tuple(p.k_split, p.k_steps, p.g_split, p.m_split, p.n_split);
}

/// plan_matmul's search (the warning, if any, in `warning`).
inline MatmulPlan search_matmul(Target const& t, MatmulProblem const& q, MatmulOptions const& o, std::string& warning) {
  MatmulPlan const base = plan::detail::base_plan<MatmulPlan>("matmul", t, q, o);
  std::size_t const tiles = t.num_tiles();
  std::uint64_t const bound = base.bound;
  plan::detail::Candidates<MatmulPlan, decltype(&matmul_tie)> kept{bound, &matmul_tie};
  static constexpr std::size_t serial_steps[] = {1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64};
  for (auto const& [gs, gt] : plan::detail::split_candidates(q.groups, tiles))
    for (auto const& [ms, mt] : plan::detail::split_candidates(q.m, tiles / gs))
      for (auto const& [ns, nt] : plan::detail::split_candidates(q.n, tiles / (gs * ms)))
        for (auto const& [ks, kt] : plan::detail::split_candidates(q.k, tiles / (gs * ms * ns))) {
          MatmulPlan p = base;
          p.g_split = gs, p.m_split = ms, p.n_split = ns, p.k_split = ks;
          p.g_tile = gt, p.m_tile = mt, p.n_tile = nt, p.k_tile = kt;
          std::size_t last_step = 0;
          for (std::size_t s : serial_steps) {
            if (s > 1 && s > kt) break;
            std::size_t const step = plan::detail::ceil_div(kt, s);
            if (s > 1 && step == last_step) continue;
            last_step = step;
            p.k_steps = s;
            p.reduce = q.accumulate || ks > 1 || (s > 1 && q.output != q.partials);
            plan::detail::evaluate(p, t);
            kept.offer(p);
          }
        }
  std::string const what = "matmul " + std::string(q.groups > 1 ? std::to_string(q.groups) + " groups of " : "") +
                           std::to_string(q.m) + "x" + std::to_string(q.k) + " * " + std::to_string(q.k) + "x" +
                           std::to_string(q.n);
  return plan::detail::settle(t, base.amp, what, std::move(kept), warning);
}
}  // namespace tilebsp::plan::detail

// Header-only (the default), plan_matmul's definitions follow (the public header includes this one).
#ifndef TILEBSP_COMPILED
#include <tilebsp/plan/matmul_impl.hpp>
#endif
