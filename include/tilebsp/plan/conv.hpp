// plan_conv: how a convolution pass is split across tiles — batch, the first output dimension, groups, output
// channels and the reduction (input channels, or for the weight update the positions), with serial steps when the
// per-tile temporary memory bound demands them. The search, the cost of a tile's work and the bound/relax rules are
// plan/search.hpp's, shared with plan_matmul.
#pragma once

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
#include <sstream>
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

namespace plan::detail {

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

}  // namespace plan::detail

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

namespace plan::detail {

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
}  // namespace plan::detail

/// Plans `q` on target `t` within options.available_memory_proportion (option_error outside [0, 1]); when no
/// plan fits, warns and relaxes the bound as plan_matmul does. Remembered like plan_matmul's plans.
inline ConvPlan plan_conv(Target const& t, ConvProblem const& q, ConvOptions const& o = {}) {
  static plan::detail::PlanMemo<ConvPlan, ConvProblem, ConvOptions> memo;
  return memo.get(t, q, o, [&](std::string& warning) { return plan::detail::search_conv(t, q, o, warning); });
}

inline std::string ConvPlan::describe() const {
  auto const& q = problem;
  bool const wu = q.kind == ConvPass::weight_update;
  std::ostringstream s;
  s << "conv " << name_of(q.kind) << " " << q.params.describe() << " (" << name_of(q.input) << " operands, "
    << name_of(q.partials) << " partials, " << name_of(q.output) << " result" << (q.accumulate ? ", accumulated" : "")
    << (wu ? "" : q.loop.winograd ? ", winograd F(2x2, 3x3)" : ", direct") << "), pass " << name_of(pass) << ", available_memory_proportion " << amp << " on " << target << "\n";
  s << "  parallel splits: batch " << n_split << " (" << n_tile << " each) x rows " << r_split << " (" << r_tile
    << ") x groups " << g_split << " (" << g_tile << ") x " << (wu ? "output" : "lane") << " channels " << c_split
    << " (" << c_tile << ") x " << (wu ? "input" : "reduction") << " channels " << j_split << " (" << j_tile
    << ") = " << tiles << " tiles\n";
  s << "  serial steps over " << (wu ? "rows" : "reduction channels") << ": " << steps << " (" << step << " each)";
  if (reduce)
    s << "; final stage reduces " << parts() << " partial" << (parts() > 1 ? "s" : "") << " per result"
      << (q.accumulate ? " and adds them to the weights" : "");
  s << "\n" << describe_costs();
  return s.str();
}

}  // namespace tilebsp
