// plan_matmul: how a (grouped) matmul is split across tiles: parallel splits of groups, M, N and K, serial
// steps over K, chosen for the fewest estimated cycles with each tile's temporary memory within
// availableMemoryProportion × bytes_per_tile.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/core/target.hpp>
#include <tilebsp/core/types.hpp>
#include <tilebsp/core/warning.hpp>
#include <tilebsp/plan/search.hpp>
#include <tilebsp/plan/serial_steps.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
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

/// Plans `q` on target `t`. Throws option_error for an AMP outside [0, 1]. When no plan keeps the temporary
/// memory within the bound, warns (see set_warning_handler) and relaxes it, as the plan's `fit` records. The
/// search runs once per distinct (target, problem, options) among the last few asked (plan/memo.hpp).
TILEBSP_INLINE MatmulPlan plan_matmul(Target const& t, MatmulProblem const& q, MatmulOptions const& o = {});

/// `p`, a plan of a product that writes its result, for the same product added to the output's values (a pointwise
/// ops::conv_accumulate): the same splits and steps, so that its sums are the plain product's bitwise, and a
/// reduction that adds them (`reduce`), estimated again on `t`.
TILEBSP_INLINE MatmulPlan accumulating(MatmulPlan p, Target const& t);

}  // namespace tilebsp

// Header-only (the default), the planner's definitions follow; a target linking tilebsp::compiled
// (TILEBSP_COMPILED) gets them from the library (src/compile.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/plan/detail/matmul.hpp>
#endif
