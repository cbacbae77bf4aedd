// plan_conv: how a convolution pass is split across tiles — batch, the first output dimension, groups, output
// channels and the reduction (input channels, or for the weight update the positions), with serial steps when the
// per-tile temporary memory bound demands them. The search, the cost of a tile's work and the bound/relax rules are
// plan/search.hpp's, shared with plan_matmul.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/plan/conv_params.hpp>
#include <tilebsp/plan/matmul.hpp>
#include <tilebsp/plan/search.hpp>
#include <tilebsp/simd/conv_loop.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

namespace tilebsp {

/// How a forward-like pass (forward, backward input) computes its outputs. The weight update is always direct.
enum class ConvAlgorithm {
  automatic,  ///< Winograd where it applies and pays: 16 or more lane and reduction channels per group, an output
              ///< field of at least 8x8 (smaller fields waste too much of their tiles); direct otherwise
  direct,     ///< each output one chain of fused multiply-adds over its taps and reduction channels
  winograd,   ///< F(2x2, 3x3) tiles: 3x3 kernels with stride 1 and no dilation only (option_error elsewhere)
};

/// The implementations of a convolution pass; plan/conv_implementations.hpp lists them with the condition under
/// which each applies, and choose_conv_implementation picks one.
enum class ConvImplementation : std::uint8_t {
  pointwise_matmul,  ///< a 1x1 kernel as a grouped matmul
  winograd,          ///< Winograd F(2x2, 3x3)
  direct,            ///< the direct kernels
};

/// Options of ops::conv and its passes: the matmul options (available_memory_proportion, partials,
/// output_type, pass hint) and the algorithm of the forward-like passes.
struct ConvOptions {
  double available_memory_proportion = 0.6;
  ElementType partials = ElementType::f32;
  std::optional<ElementType> output_type = std::nullopt;
  MatmulPass pass = MatmulPass::inference;
  ConvAlgorithm algorithm = ConvAlgorithm::automatic;
  /// The options of the matmuls that 1x1 convolutions become.
  MatmulOptions matmul() const { return {available_memory_proportion, partials, output_type, pass}; }

  friend bool operator==(ConvOptions const&, ConvOptions const&) = default;
};

/// Which computation a convolution plan is for.
enum class ConvPass {
  forward,         ///< out = conv(in, weights)
  backward_input,  ///< input gradients from output gradients (a forward pass over the flipped, transposed weights)
  weight_update,   ///< weight gradients: sum over batch and positions of input x output gradient
};

constexpr std::string_view name_of(ConvPass p) noexcept {
  switch (p) {
    case ConvPass::forward: return "forward";
    case ConvPass::backward_input: return "backward input";
    case ConvPass::weight_update: return "weight update";
  }
  return "?";
}

/// The convolution a pass computes, as a loop over three spatial dimensions (simd::ConvLoop: lower-rank problems
/// lead with dimensions of extent 1), with its batch, groups, lane channels C and reduction channels J.
struct ConvProblem {
  ConvParams params;  ///< the forward convolution's parameters
  ConvPass kind = ConvPass::forward;
  simd::ConvLoop loop;
  std::size_t batch = 1, groups = 1, c = 1, j = 1;
  std::size_t row_dim = 0;  ///< the loop dimension the plan splits (the first spatial dimension)
  ElementType input = ElementType::f32, partials = ElementType::f32, output = ElementType::f32;
  bool accumulate = false;  ///< the result is added to an existing tensor (the weight update)
  /// How the pass is built (choose_conv_implementation); loop.winograd is set where it is Winograd.
  ConvImplementation implementation = ConvImplementation::direct;

  /// Output positions of the loop (all dimensions) and kernel taps.
  std::size_t positions() const noexcept {
    return static_cast<std::size_t>(loop.dim[0].out * loop.dim[1].out * loop.dim[2].out);
  }
  std::size_t taps() const noexcept { return static_cast<std::size_t>(loop.taps()); }

  friend bool operator==(ConvProblem const&, ConvProblem const&) = default;
};


/// The splits of a convolution pass across tiles. Parallel splits: batch (n), the first spatial output
/// dimension (rows), groups (g), lane channels (c) and reduction channels (j); the weight update reduces over
/// its n and row splits instead of j. Serial steps run over j (forward, backward input) or rows (weight update).
struct ConvPlan : PlanCosts {
  ConvProblem problem;
  MatmulPass pass = MatmulPass::inference;
  std::string target;
  double amp = 0.6;
  std::size_t n_split = 1, r_split = 1, g_split = 1, c_split = 1, j_split = 1;
  std::size_t n_tile = 0, r_tile = 0, g_tile = 0, c_tile = 0, j_tile = 0;
  std::size_t steps = 1, step = 0;
  bool reduce = false;
  /// The serial steps over a piece's reduction channels (forward, backward input) or rows (weight update).
  SerialSteps serial() const noexcept { return {steps, step}; }
  std::size_t tiles = 0;

  /// Rows of the split dimension in the loop.
  std::size_t rows() const noexcept { return static_cast<std::size_t>(problem.loop.dim[problem.row_dim].out); }
  /// Partial results reduced per result element in the final stage.
  std::size_t parts() const noexcept {
    return problem.kind == ConvPass::weight_update ? n_split * r_split : j_split;
  }
  /// Tile of piece (ig, ij, ic, in, ir): rows vary fastest, then batch, lane channels, reduction, groups.
  std::size_t tile_of(std::size_t ig, std::size_t ij, std::size_t ic, std::size_t in, std::size_t ir) const noexcept {
    return (((ig * j_split + ij) * c_split + ic) * n_split + in) * r_split + ir;
  }

  // The plan's decomposition, in one place: the vertices, the result's mapping and the host path all take their
  // ranges from piece() and part(), which is what makes the host path's sums bitwise the vertices'.

  /// The ranges of piece (ig, ij, ic, in, ir): groups, reduction channels, lane channels, batch and the rows of the
  /// split dimension, every other output dimension whole. A range is empty where a split overruns the problem.
  simd::ConvRange piece(std::size_t ig, std::size_t ij, std::size_t ic, std::size_t in, std::size_t ir) const noexcept {
    auto const span = [](std::size_t i, std::size_t tile, std::size_t total) {
      return std::pair<std::int64_t, std::int64_t>(static_cast<std::int64_t>(std::min(total, i * tile)),
                                                    static_cast<std::int64_t>(std::min(total, (i + 1) * tile)));
    };
    simd::ConvRange r;
    std::tie(r.g0, r.g1) = span(ig, g_tile, problem.groups);
    std::tie(r.j0, r.j1) = span(ij, j_tile, problem.j);
    std::tie(r.c0, r.c1) = span(ic, c_tile, problem.c);
    std::tie(r.n0, r.n1) = span(in, n_tile, problem.batch);
    for (std::size_t d = 0; d < 3; ++d) r.lo[d] = 0, r.hi[d] = problem.loop.dim[d].out;
    std::tie(r.lo[problem.row_dim], r.hi[problem.row_dim]) = span(ir, r_tile, rows());
    return r;
  }
  /// The index of piece (ij, in, ir)'s partial in the final reduction: its reduction split.
  std::size_t part_of(std::size_t ij, std::size_t in, std::size_t ir) const noexcept {
    return problem.kind == ConvPass::weight_update ? in * r_split + ir : ij;
  }
  /// The reduction share of partial `part` (0 <= part < parts()), as the ranges of its pieces: the reduction
  /// channels [j0, j1) (forward, backward input), or the batch [n0, n1) and rows [lo, hi) of the split dimension
  /// (weight update). The inverse of part_of.
  simd::ConvRange part(std::size_t i) const noexcept {
    return problem.kind == ConvPass::weight_update ? piece(0, 0, 0, i / r_split, i % r_split) : piece(0, i, 0, 0, 0);
  }
  std::string describe() const;
};


/// Plans `q` on target `t` within options.available_memory_proportion (option_error outside [0, 1]); when no
/// plan fits, warns and relaxes the bound as plan_matmul does. Remembered like plan_matmul's plans.
TILEBSP_INLINE ConvPlan plan_conv(Target const& t, ConvProblem const& q, ConvOptions const& o = {});

/// `p`, a plan of a forward-like pass that writes its result, for the same pass adding the result to the output's
/// values (ops::conv_accumulate): the same splits and serial steps, so that its sums are the plain pass's bitwise,
/// and a reduction that adds them (`reduce`), estimated again on `t`.
TILEBSP_INLINE ConvPlan accumulating(ConvPlan p, Target const& t);

}  // namespace tilebsp

// Header-only (the default), the planner's definitions follow; a target linking tilebsp::compiled
// (TILEBSP_COMPILED) gets them from the library (src/compile.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/plan/detail/conv.hpp>
#endif
