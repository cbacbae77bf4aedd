// plan_matmul: how a (grouped) matmul is split across tiles: parallel splits of groups, M, N and K, serial
// steps over K, chosen for the fewest estimated cycles with each tile's temporary memory within
// availableMemoryProportion × bytes_per_tile.
#pragma once

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/target.hpp>
#include <tilebsp/core/types.hpp>
#include <tilebsp/core/warning.hpp>
#include <tilebsp/plan/cost.hpp>
#include <tilebsp/plan/memo.hpp>
#include <tilebsp/plan/search.hpp>
#include <tilebsp/plan/serial_steps.hpp>

#include <algorithm>
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

namespace tilebsp {

/// Which training pass a matmul belongs to (PopLibs' fullyConnectedPass). Recorded in the plan and its
/// description; the cost model treats all passes alike.
enum class MatmulPass { inference, training_forward, training_backward, training_weight_update };

constexpr std::string_view name_of(MatmulPass p) noexcept {
  switch (p) {
    case MatmulPass::inference: return "inference";
    case MatmulPass::training_forward: return "training forward";
    case MatmulPass::training_backward: return "training backward";
    case MatmulPass::training_weight_update: return "training weight update";
  }
  return "?";
}

/// Options of ops::matmul, ops::matmul_acc and plan_matmul.
struct MatmulOptions {
  /// Bound on each tile's temporary memory as a proportion of bytes_per_tile, in [0, 1]; 0 asks for the plan
  /// with the least temporary memory.
  double available_memory_proportion = 0.6;
  /// Type of partial sums kept between serial steps and reduced across tiles (f32 or f16). Within one step the
  /// kernel always accumulates in f32.
  ElementType partials = ElementType::f32;
  /// Type of the result (f32 or f16); by default the operands' type (matmul) or the accumulator's (matmul_acc).
  std::optional<ElementType> output_type = std::nullopt;
  MatmulPass pass = MatmulPass::inference;

  friend bool operator==(MatmulOptions const&, MatmulOptions const&) = default;
};

/// A matmul: `groups` independent products of [m, k] and [k, n] operands of type `input`.
struct MatmulProblem {
  std::size_t groups = 1, m = 0, n = 0, k = 0;
  ElementType input = ElementType::f32;
  ElementType partials = ElementType::f32;
  ElementType output = ElementType::f32;
  /// The result is added to an existing tensor (matmul_acc): always through a final reduction stage.
  bool accumulate = false;

  friend bool operator==(MatmulProblem const&, MatmulProblem const&) = default;
};

/// The splits of a matmul across tiles, with its estimated temporary memory and cycles.
struct MatmulPlan : PlanCosts {
  MatmulProblem problem;
  MatmulPass pass = MatmulPass::inference;
  std::string target;
  double amp = 0.6;
  /// Parallel splits: number of pieces of each dimension and the (largest) piece size.
  std::size_t g_split = 1, m_split = 1, n_split = 1, k_split = 1;
  std::size_t g_tile = 0, m_tile = 0, n_tile = 0, k_tile = 0;
  /// Serial steps over each tile's K range, of k_step elements each.
  std::size_t k_steps = 1, k_step = 0;
  SerialSteps serial() const noexcept { return {k_steps, k_step}; }
  /// Partial results are reduced across tiles (or added to the accumulator) in a final stage.
  bool reduce = false;
  std::size_t tiles = 0;

  /// Tile of parallel piece (group block, K block, N block, M block): M blocks vary fastest, so neighbouring
  /// tiles share a B panel and hold vertically adjacent pieces of A and C.
  std::size_t tile_of(std::size_t ig, std::size_t ik, std::size_t in, std::size_t im) const noexcept {
    return ((ig * k_split + ik) * n_split + in) * m_split + im;
  }
  /// The ranges of piece (ig, ik, in, im): groups [g0, g1), rows of A and C [m0, m1), columns of B and C [n0, n1)
  /// and its share of K [k0, k1), the partial it adds to the final stage. The vertices, the result's mapping and
  /// the host path all take their ranges from here, which is what makes the host path's sums bitwise the
  /// vertices'. A range is empty where a split overruns the problem.
  struct Block {
    std::size_t g0, g1, m0, m1, n0, n1, k0, k1;
  };
  Block block(std::size_t ig, std::size_t ik, std::size_t in, std::size_t im) const noexcept {
    auto const at = [](std::size_t i, std::size_t tile, std::size_t total) { return std::min(total, i * tile); };
    return {at(ig, g_tile, problem.groups), at(ig + 1, g_tile, problem.groups), at(im, m_tile, problem.m),
            at(im + 1, m_tile, problem.m),  at(in, n_tile, problem.n),          at(in + 1, n_tile, problem.n),
            at(ik, k_tile, problem.k),      at(ik + 1, k_tile, problem.k)};
  }
  std::string describe() const;
};

namespace plan::detail {

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
}  // namespace plan::detail

/// Plans `q` on target `t`. Throws option_error for an AMP outside [0, 1]. When no plan keeps the temporary
/// memory within the bound, warns (see set_warning_handler) and relaxes it, as the plan's `fit` records. The
/// search runs once per distinct (target, problem, options) among the last few asked (plan/memo.hpp).
inline MatmulPlan plan_matmul(Target const& t, MatmulProblem const& q, MatmulOptions const& o = {}) {
  static plan::detail::PlanMemo<MatmulPlan, MatmulProblem, MatmulOptions> memo;
  return memo.get(t, q, o, [&](std::string& warning) { return plan::detail::search_matmul(t, q, o, warning); });
}

inline std::string MatmulPlan::describe() const {
  auto const& q = problem;
  std::ostringstream s;
  s << "matmul " << (q.groups > 1 ? std::to_string(q.groups) + " groups of " : "") << q.m << "x" << q.k << " * " << q.k
    << "x" << q.n << " (" << name_of(q.input) << " operands, " << name_of(q.partials) << " partials, "
    << name_of(q.output) << " result" << (q.accumulate ? ", accumulated" : "") << "), pass " << name_of(pass)
    << ", available_memory_proportion " << amp << " on " << target << "\n";
  s << "  parallel splits: groups " << g_split << " (" << g_tile << " each) x M " << m_split << " (" << m_tile
    << ") x N " << n_split << " (" << n_tile << ") x K " << k_split << " (" << k_tile << ") = " << tiles << " tiles\n";
  s << "  serial steps over K: " << k_steps << " (" << k_step << " each)";
  if (reduce)
    s << "; final stage reduces " << k_split << " partial" << (k_split > 1 ? "s" : "") << " per result"
      << (q.accumulate ? " and adds them to the accumulator" : "");
  s << "\n" << describe_costs();
  return s.str();
}

}  // namespace tilebsp
