// ops::conv's definitions: the builders and the entry points declared in <tilebsp/ops/conv.hpp>. Included by that
// header (header-only) or compiled once into tilebsp::compiled (src/conv.cpp); include it directly to use the
// vertices.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/ops/conv.hpp>

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/mapping.hpp>
#include <tilebsp/ops/conv/host_kernel.hpp>
#include <tilebsp/ops/conv/vertex.hpp>
#include <tilebsp/ops/detail/common.hpp>
#include <tilebsp/ops/detail/host_work.hpp>
#include <tilebsp/ops/detail/instances.hpp>
#include <tilebsp/ops/detail/matmul_build.hpp>
#include <tilebsp/ops/detail/partials.hpp>
#include <tilebsp/ops/detail/rank6.hpp>
#include <tilebsp/ops/map.hpp>
#include <tilebsp/plan/conv.hpp>
#include <tilebsp/plan/conv_implementations.hpp>
#include <tilebsp/plan/detail/conv.hpp>
#include <tilebsp/program/host_path.hpp>
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

namespace tilebsp {
namespace ops {
namespace detail {

/// Adds the plan's compute sets to `prog` as one host path: serial steps into `out` (or partials), then the final
/// stage into `out`; the host kernel computes the same values in one task.
template <class TS, class TW, class TP, class TO>
void build_conv(Graph& g, Sequence& prog, ConvPlan const& p, ConvViews const& v, Tensor const& out_user, float alpha,
                std::string const& name) {
  OperatorScope const scope(g, "conv", name, simd::isa_name());
  OperatorScope::note_plan(g, p.describe());
  auto const& q = p.problem;
  bool const wu = q.kind == ConvPass::weight_update;
  Tensor parts;
  Tensor parts6;  // (part, ...) of the destination's rank-6 shape
  if (p.reduce) {
    Shape s{p.parts()};
    for (std::size_t d = 0; d < 6; ++d) s.push_back(v.out.dim(d));
    parts = g.add_variable(q.partials, s, name + "/partials", {.temporary = true});
    parts6 = parts;
    each_piece(p, whole_piece, [&](std::size_t tile, std::size_t part, simd::ConvRange const& r) {
      g.set_tile_mapping(geometry(q, r).dst.of(parts6.index(part)), tile);
    });
  }
  auto const rate = static_cast<float>(tilebsp::plan::detail::macs_per_cycle(g.target(), q.input));
  Sequence body;
  for (std::size_t s = 0; s < p.steps; ++s) {
    ComputeSet const cs = g.add_compute_set(name + (p.steps > 1 ? "/step" + std::to_string(s) : ""));
    struct Piece {
      std::size_t tile, part;
      simd::ConvRange r;
    };
    std::vector<Piece> pieces;
    each_piece(p, s, [&](std::size_t tile, std::size_t part, simd::ConvRange const& r) { pieces.push_back({tile, part, r}); });
    vertex::add_vertices(g, pieces.size(), [&](std::size_t k) {
      std::size_t const tile = pieces[k].tile, part = pieces[k].part;
      ConvGeometry const geo = geometry(q, pieces[k].r);
      Tensor src = geo.src.of(v.src), other = geo.other.of(v.other);
      auto const make = [&]<class TD, bool Load>(Tensor&& dst) {
        if (wu)
          return vertex::record<ConvVertex<TS, TW, TD, Load, true>>(g, cs, tile, fetch(std::move(src)), fetch(std::move(other)),
                                                                      std::move(dst), geo, rate);
        return vertex::record<ConvVertex<TS, TW, TD, Load, false>>(g, cs, tile, fetch(std::move(src)), fetch(std::move(other)),
                                                                     std::move(dst), geo, rate);
      };
      Tensor dst = p.reduce ? geo.dst.of(parts6.index(part)) : geo.dst.of(v.out);
      if (p.reduce)
        return s == 0 ? make.template operator()<TP, false>(std::move(dst)) : make.template operator()<TP, true>(std::move(dst));
      return s == 0 ? make.template operator()<TO, false>(std::move(dst)) : make.template operator()<TO, true>(std::move(dst));
    });
    body.add(execute(cs));
  }
  if (p.reduce) {
    // The partials as a matrix per part: [part, rows, innermost dimension] of the result, one group, no cuts.
    std::size_t const cols = out_user.dim(out_user.rank() - 1), rows = out_user.num_elements() / cols;
    body.add(sum_partials_stage<TP, TO>(g, name, parts.reshape({p.parts(), rows, cols}).expand(1),
                                        out_user.reshape({rows, cols}).expand(0), alpha, q.accumulate, rows, cols));
  }
  prog.add(host_path(name, ConvHostKernel<TS, TW, TP, TO>(p, v, alpha).kernel(), std::move(body)));
}

/// Maps a new result of a forward-like plan: each (n, rows, groups, channels) block on its tile, its rows dealt
/// out to the reduction tiles when they reduce it.
inline void map_conv_result(Graph& g, ConvPlan const& p, Tensor const& out6) {
  auto const& q = p.problem;
  bool const wu = q.kind == ConvPass::weight_update;
  std::size_t const rd = q.row_dim;
  for (std::size_t ig = 0; ig < p.g_split; ++ig)
    for (std::size_t ic = 0; ic < p.c_split; ++ic) {
      if (wu) {
        for (std::size_t ij = 0; ij < p.j_split; ++ij) {
          simd::ConvRange const r = p.piece(ig, ij, ic, 0, 0);
          if (r.g0 >= r.g1 || r.c0 >= r.c1 || r.j0 >= r.j1) continue;
          g.set_tile_mapping(geometry(q, r).dst.of(out6), p.tile_of(ig, ij, ic, 0, 0));
        }
        continue;
      }
      for (std::size_t in = 0; in < p.n_split; ++in)
        for (std::size_t ir = 0; ir < p.r_split; ++ir) {
          simd::ConvRange r = p.piece(ig, 0, ic, in, ir);
          std::int64_t const b = r.lo[rd], e = r.hi[rd];
          if (r.g0 >= r.g1 || r.c0 >= r.c1 || r.n0 >= r.n1 || b >= e) continue;
          std::size_t const parts = p.reduce ? p.j_split : 1;
          for (std::size_t ij = 0; ij < parts; ++ij) {
            // Part ij of the block's rows (the last parts may get none when there are fewer rows than parts).
            std::int64_t const rb = b + (e - b) * static_cast<std::int64_t>(ij) / static_cast<std::int64_t>(parts);
            std::int64_t const re = b + (e - b) * static_cast<std::int64_t>(ij + 1) / static_cast<std::int64_t>(parts);
            if (rb >= re) continue;
            r.lo[rd] = rb, r.hi[rd] = re;
            g.set_tile_mapping(geometry(q, r).dst.of(out6), p.tile_of(ig, ij, ic, in, ir));
          }
        }
    }
}

/// Calls f<TS, TW, TP, TO>() for the problem's types. Every pass takes both operands of one type (the ops check
/// it before they get here), so TW is TS: instantiating the other pairs would only cost every caller's compile.
template <class F>
void dispatch_conv_types(ConvProblem const& q, F&& f) {
  with_float_type(q.input, [&]<class TS>() {
    with_float_type(q.partials, [&]<class TP>() {
      with_float_type(q.output, [&]<class TO>() { f.template operator()<TS, TS, TP, TO>(); });
    });
  });
}

/// The input of a strided pointwise convolution, every stride-th position of each field dimension, copied into a
/// temporary variable mapped where those elements live (an on-tile copy); the input itself when unstrided.
inline Tensor subsampled_input(Graph& g, Sequence& prog, Tensor const& in, ConvParams const& p, std::string const& name) {
  Shape split{in.dim(0)};
  bool strided = false;
  for (std::size_t d = 0; d < p.rank(); ++d) {
    auto const stride = static_cast<std::size_t>(p.stride_of(d));
    split.push_back(in.dim(d + 1) / stride);
    split.push_back(stride);
    strided = strided || p.stride_of(d) != 1;
  }
  if (!strided) return in;
  split.push_back(in.dim(in.rank() - 1));
  Tensor view = in.reshape(split);  // [N, F0 / s0, s0, ..., C]: take index 0 of each stride dimension
  for (std::size_t d = p.rank(); d-- > 0;) view = view.slice(0, 1, 2 + 2 * d);
  Shape out_shape{in.dim(0)};
  for (std::size_t d = 0; d < p.rank(); ++d) out_shape.push_back(split[1 + 2 * d]);
  out_shape.push_back(in.dim(in.rank() - 1));
  view = view.reshape(out_shape);
  Tensor t = g.add_variable(in.element_type(), out_shape, name + "/subsampled", {.temporary = true});
  g.set_tile_mapping_like(t, view);
  prog.add(copy(view, t));
  return t;
}

/// Activations [N, field..., G * C] as grouped matrices [G, N * positions, C].
inline Tensor as_matrices(Tensor const& t, std::size_t groups) {
  std::size_t const ch = t.dim(t.rank() - 1), m = t.num_elements() / ch;
  return t.reshape({m, groups, ch / groups}).dimshuffle({1, 0, 2});
}

/// q without its accumulation: the plain pass, whose plan conv_accumulate's follows (tilebsp::accumulating).
inline ConvProblem plain(ConvProblem q) {
  q.accumulate = false;
  return q;
}

/// Builds a pointwise pass as a matmul a3 x b3 into c3 (c3 += alpha * a3 x b3 when accumulating; planned as the
/// plain product, then tilebsp::accumulating, where `like_product`). A template, as the operators are, so that
/// only a caller instantiates the matmul kernels.
template <std::same_as<Tensor> T>
void pointwise(Graph& g, Sequence& prog, T const& a3, T const& b3, T const& c3, bool map_out, bool accumulate, float alpha,
               ConvOptions const& o, std::string const& name, bool like_product = false) {
  MatmulProblem q;
  q.groups = a3.dim(0), q.m = a3.dim(1), q.k = a3.dim(2), q.n = b3.dim(2);
  q.input = a3.element_type();
  q.partials = o.partials;
  q.output = c3.element_type();
  q.accumulate = accumulate && !like_product;
  if (q.groups * q.m * q.n == 0) return;
  MatmulPlan p = plan_matmul(view_target(g), q, o.matmul());
  if (accumulate && like_product) p = accumulating(p, view_target(g));
  if (map_out) map_result(g, p, c3);
  dispatch_types(q, [&]<class TA, class TP, class TO>() { build<TA, TP, TO>(g, prog, p, a3, b3, c3, alpha, name); });
}

inline void check_conv_tensor(char const* op, Graph const& g, Tensor const& t, char const* what, Shape const& want) {
  g.check_tensor(op, t);
  if (t.shape() != want)
    throw shape_error(std::string(op) + ": " + what + " are " + to_string(t.shape()) + " but the parameters need " +
                      to_string(want));
  check_float(op, what, t.element_type());
}

/// Validates a pass and returns its problem.
inline ConvProblem conv_problem_of(char const* op, ConvParams const& params, ConvPass kind, ElementType input,
                                   ConvOptions const& o, std::optional<ElementType> out_type) {
  tilebsp::plan::detail::check_amp(op, o.available_memory_proportion);
  ConvProblem q = tilebsp::plan::detail::conv_problem(params, kind);
  q.input = input;
  check_float(op, "partials", o.partials);
  q.partials = o.partials;
  q.output = o.output_type.value_or(out_type.value_or(input));
  check_float(op, "the output type", q.output);
  q.implementation = choose_conv_implementation(op, q, o.algorithm);
  q.loop.winograd = q.implementation == ConvImplementation::winograd;
  return q;
}

inline void check_params(char const* op, ConvParams const& p) {
  try {
    p.validate();
  } catch (shape_error const& e) {
    throw shape_error(std::string(op) + ": " + e.what());
  }
}

}  // namespace detail

namespace detail {
/// Plans `q` and adds its compute sets: a new result (`map_result`) is mapped per plan first, then the serial steps
/// and any reduction write `dst`, scaled by `alpha`. A template, so that only a file that calls a pass compiles its
/// kernels.
template <std::same_as<Tensor> T>
void build_planned(Graph& g, Sequence& prog, ConvProblem const& q, ConvOptions const& options, ConvViews const& v,
                   T const& dst, float alpha, bool map_result, std::string const& name) {
  ConvPlan const p = q.kind == ConvPass::forward && q.accumulate
                         ? accumulating(plan_conv(view_target(g), plain(q), options), view_target(g))
                         : plan_conv(view_target(g), q, options);
  if (map_result) map_conv_result(g, p, v.out);
  dispatch_conv_types(q, [&]<class TS, class TW, class TP, class TO>() {
    build_conv<TS, TW, TP, TO>(g, prog, p, v, dst, alpha, name);
  });
}

template <std::same_as<Tensor> T>
void weight_pass(Graph& g, Sequence& prog, T const& grad_out, T const& acts, T const& dst, bool accumulate, float scale,
                 ConvParams const& params, ConvOptions const& options, std::string const& name, char const* op) {
  ConvProblem q = conv_problem_of(op, params, ConvPass::weight_update, acts.element_type(), options, dst.element_type());
  q.accumulate = accumulate;
  std::size_t const G = q.groups, r = params.rank();
  if (q.implementation == ConvImplementation::pointwise_matmul) {
    Tensor const a3 = as_matrices(subsampled_input(g, prog, acts, params, name), G).dimshuffle({0, 2, 1});  // [G, C_in, positions]
    pointwise(g, prog, a3, as_matrices(grad_out, G), dst.reshape({G, q.j, q.c}), !accumulate, accumulate, scale, options,
              name);
    return;
  }
  ConvViews const v{activations6(acts, r, G), activations6(grad_out, r, G), weights6(dst, r)};
  build_planned(g, prog, q, options, v, dst, scale, !accumulate, name);
}
inline void check_weight_pass(char const* op, Graph const& g, Tensor const& grad_out, Tensor const& acts,
                              ConvParams const& params) {
  check_params(op, params);
  check_conv_tensor(op, g, grad_out, "output gradients", params.output_shape());
  check_conv_tensor(op, g, acts, "activations", params.input_shape());
  if (grad_out.element_type() != acts.element_type())
    throw type_error(std::string(op) + ": output gradients are " + std::string(name_of(grad_out.element_type())) +
                     " but activations are " + std::string(name_of(acts.element_type())));
}
}  // namespace detail

template <class G, class>
ConvPlan plan_conv(G const& g, ConvParams const& params, ConvPass kind,
                   ElementType type, ConvOptions const& options) {
  detail::check_params("plan_conv", params);
  ConvProblem q = detail::conv_problem_of("plan_conv", params, kind, type, options, std::nullopt);
  q.accumulate = kind == ConvPass::weight_update;
  return plan_conv(detail::view_target(g), q, options);
}

template <class G, class>
Tensor create_conv_input(G& g, ConvParams const& params, ElementType type,
                         ConvOptions const& options, std::string const& name) {
  detail::check_params("create_conv_input", params);
  Tensor t = g.add_variable(type, params.input_shape(), name);
  map_linearly(g, t);
  ConvPlan const p = plan_conv(g, params, ConvPass::forward, type, options);
  Tensor const t6 = detail::activations6(t, params.rank(), p.problem.groups);
  detail::each_piece(p, detail::whole_piece, [&](std::size_t tile, std::size_t, simd::ConvRange const& r) {
    if (r.c0 != 0) return;  // one owner per window: the first lane-channel block
    // The window rows that belong to the piece's own output rows (not the halo shared with its neighbours).
    auto geo = detail::geometry(p.problem, r);
    std::size_t const rd = p.problem.row_dim;
    auto const& D = p.problem.loop.dim[rd];
    auto const first = [&](std::int64_t o) { return std::max<std::int64_t>(0, o * D.a + D.c + D.div - 1) / D.div; };
    std::int64_t const own0 = std::max(geo.src.origin[rd + 1], first(r.lo[rd]));
    std::int64_t const own1 = std::min(geo.src.origin[rd + 1] + geo.src.shape[rd + 1], first(r.hi[rd]));
    if (own1 <= own0) return;
    geo.src.origin[rd + 1] = own0, geo.src.shape[rd + 1] = own1 - own0;
    g.set_tile_mapping(geo.src.of(t6), tile);
  });
  return t;
}

template <class G, class>
Tensor create_conv_weights(G& g, ConvParams const& params, ElementType type,
                           ConvOptions const& options, std::string const& name) {
  detail::check_params("create_conv_weights", params);
  Tensor w = g.add_variable(type, params.weights_shape(), name);
  ConvPlan const p = plan_conv(g, params, ConvPass::forward, type, options);
  Tensor const w6 = detail::weights6(w, params.rank());
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::pair<Tensor, std::vector<std::size_t>>> blocks;
  detail::each_piece(p, detail::whole_piece, [&](std::size_t tile, std::size_t, simd::ConvRange const& r) {
    auto& [block, tiles] = blocks[{r.g0, r.c0, r.j0}];
    if (tiles.empty()) block = detail::geometry(p.problem, r).other.of(w6);
    if (std::find(tiles.begin(), tiles.end(), tile) == tiles.end()) tiles.push_back(tile);
  });
  for (auto const& [key, bt] : blocks) {
    auto const& [block, tiles] = bt;
    std::size_t const n = block.num_elements(), k = tiles.size();
    for (std::size_t i = 0; i < k; ++i) detail::map_flat_range(g, block, n * i / k, n * (i + 1) / k, tiles[i]);
  }
  return w;
}

namespace detail {
/// The forward pass of conv and conv_with_output: validates the operands and returns the problem.
inline ConvProblem forward_problem(char const* op, Graph const& g, Tensor const& in, Tensor const& weights,
                                   ConvParams const& params, ConvOptions const& options) {
  check_params(op, params);
  check_conv_tensor(op, g, in, "inputs", params.input_shape());
  check_conv_tensor(op, g, weights, "weights", params.weights_shape());
  if (in.element_type() != weights.element_type())
    throw type_error(std::string(op) + ": inputs are " + std::string(name_of(in.element_type())) + " but weights are " +
                     std::string(name_of(weights.element_type())));
  return conv_problem_of(op, params, ConvPass::forward, in.element_type(), options, std::nullopt);
}
/// Builds the forward pass of `q` into `out`, mapping it per plan where `map_out`.
template <std::same_as<Tensor> T>
void forward_into(Graph& g, Sequence& prog, ConvProblem const& q, T const& in, T const& weights, T const& out,
                  ConvParams const& params, ConvOptions const& options, bool map_out, std::string const& name) {
  std::size_t const G = q.groups, r = params.rank();
  if (q.implementation == ConvImplementation::pointwise_matmul) {
    Tensor const w3 = weights.reshape({G, q.j, q.c});
    Tensor const a = subsampled_input(g, prog, in, params, name);
    pointwise(g, prog, as_matrices(a, G), w3, as_matrices(out, G), map_out, q.accumulate, 1.0f, options, name, true);
    return;
  }
  ConvViews const v{activations6(in, r, G), weights6(weights, r), activations6(out, r, G)};
  build_planned(g, prog, q, options, v, out, 1.0f, map_out, name);
}
/// Whether tensors a and b have a variable in common (map's tests: elsewhere, or the same view).
inline bool share_variable(Tensor const& a, Tensor const& b) { return overlaps_elsewhere(a, b) || same_view(a, b); }
/// Whether no element of `t` is mapped to a tile (a given output that the operator then maps per plan).
inline bool unmapped(Graph const& g, Tensor const& t) {
  auto const none = [](std::int64_t, std::int64_t, std::uint32_t) {};
  return core::detail::for_each_mapped(g.impl(), t, none) == static_cast<std::int64_t>(t.num_elements());
}
/// Validates a forward pass's given output `out` (conv_with_output, conv_accumulate): its shape, its type and no
/// variable shared with an operand.
inline void check_forward_output(char const* op, Graph const& g, ConvProblem const& q, Tensor const& in,
                                 Tensor const& weights, Tensor const& out, ConvParams const& params) {
  g.check_tensor(op, out);
  if (out.shape() != params.output_shape())
    throw shape_error(std::string(op) + ": the output is " + to_string(out.shape()) + " but the parameters need " +
                      to_string(params.output_shape()));
  if (out.element_type() != q.output)
    throw type_error(std::string(op) + ": the output is " + std::string(name_of(out.element_type())) +
                     " but the result is " + std::string(name_of(q.output)));
  if (share_variable(out, in) || share_variable(out, weights))
    throw write_conflict_error(std::string(op) + ": the output shares a variable with the " +
                               (share_variable(out, in) ? "inputs" : "weights"));
}
}  // namespace detail

template <class T, class>
T conv(Graph& g, Sequence& prog, T const& in, T const& weights, ConvParams const& params, ConvOptions const& options,
       std::string const& name) {
  OperatorScope const scope(g, "conv", name, simd::isa_name());
  ConvProblem const q = detail::forward_problem("conv", g, in, weights, params, options);
  Tensor out = g.add_variable(q.output, params.output_shape(), name);
  detail::forward_into(g, prog, q, in, weights, out, params, options, true, name);
  return out;
}

template <class T, class>
void conv_with_output(Graph& g, Sequence& prog, T const& in, T const& weights, T const& out, ConvParams const& params,
                      ConvOptions const& options, std::string const& name) {
  char const* op = "conv_with_output";
  OperatorScope const scope(g, op, name, simd::isa_name());
  ConvProblem const q = detail::forward_problem(op, g, in, weights, params, options);
  detail::check_forward_output(op, g, q, in, weights, out, params);
  detail::forward_into(g, prog, q, in, weights, out, params, options, detail::unmapped(g, out), name);
}

template <class T, class>
void conv_accumulate(Graph& g, Sequence& prog, T const& in, T const& weights, T const& acc, ConvParams const& params,
                     ConvOptions const& options, std::string const& name) {
  char const* op = "conv_accumulate";
  OperatorScope const scope(g, op, name, simd::isa_name());
  ConvProblem q = detail::forward_problem(op, g, in, weights, params, options);
  detail::check_forward_output(op, g, q, in, weights, acc, params);
  q.accumulate = true;
  detail::forward_into(g, prog, q, in, weights, acc, params, options, detail::unmapped(g, acc), name);
}

template <class T, class>
T conv_backward_input(Graph& g, Sequence& prog, T const& grad_out, T const& weights, ConvParams const& params,
                      ConvOptions const& options, std::string const& name) {
  char const* op = "conv_backward_input";
  OperatorScope const scope(g, op, name, simd::isa_name());
  detail::check_params(op, params);
  detail::check_conv_tensor(op, g, grad_out, "output gradients", params.output_shape());
  detail::check_conv_tensor(op, g, weights, "weights", params.weights_shape());
  if (grad_out.element_type() != weights.element_type())
    throw type_error(std::string(op) + ": output gradients are " + std::string(name_of(grad_out.element_type())) +
                     " but weights are " + std::string(name_of(weights.element_type())));
  ConvProblem const q = detail::conv_problem_of(op, params, ConvPass::backward_input, grad_out.element_type(), options,
                                                std::nullopt);
  Tensor out = g.add_variable(q.output, params.input_shape(), name);
  std::size_t const G = q.groups, r = params.rank();
  if (q.implementation == ConvImplementation::pointwise_matmul) {
    Tensor const w3 = weights.reshape({G, q.c, q.j}).dimshuffle({0, 2, 1});
    detail::pointwise(g, prog, detail::as_matrices(grad_out, G), w3, detail::as_matrices(out, G), true, false, 1.0f,
                      options, name);
    return out;
  }
  Tensor const w = detail::weights6(weights, r).reverse(1).reverse(2).reverse(3).dimshuffle({0, 1, 2, 3, 5, 4});
  detail::ConvViews const v{detail::activations6(grad_out, r, G), w, detail::activations6(out, r, G)};
  detail::build_planned(g, prog, q, options, v, out, 1.0f, true, name);
  return out;
}

template <class T, class>
T conv_weight_gradients(Graph& g, Sequence& prog, T const& grad_out, T const& acts, ConvParams const& params,
                        ConvOptions const& options, std::string const& name) {
  char const* op = "conv_weight_gradients";
  OperatorScope const scope(g, op, name, simd::isa_name());
  detail::check_weight_pass(op, g, grad_out, acts, params);
  Tensor dw = g.add_variable(options.output_type.value_or(acts.element_type()), params.weights_shape(), name);
  detail::weight_pass(g, prog, grad_out, acts, dw, false, 1.0f, params, options, name, op);
  return dw;
}

template <class T, class>
void conv_weight_update(Graph& g, Sequence& prog, T const& grad_out, T const& acts, T const& weights, float scale,
                        ConvParams const& params, ConvOptions const& options,
                        std::string const& name) {
  char const* op = "conv_weight_update";
  OperatorScope const scope(g, op, name, simd::isa_name());
  detail::check_weight_pass(op, g, grad_out, acts, params);
  detail::check_conv_tensor(op, g, weights, "weights", params.weights_shape());
  ConvOptions o = options;
  o.output_type = weights.element_type();
  detail::weight_pass(g, prog, grad_out, acts, weights, true, scale, params, o, name, op);
}

template <class T, class>
void add_bias(Graph& g, Sequence& prog, T const& acts, T const& bias) {
  g.check_tensor("add_bias", acts);
  g.check_tensor("add_bias", bias);
  if (acts.rank() == 0 || bias.rank() != 1 || bias.dim(0) != acts.dim(acts.rank() - 1))
    throw shape_error("add_bias: bias " + to_string(bias.shape()) + " does not match the channels of " +
                      to_string(acts.shape()));
  if (bias.element_type() != acts.element_type())
    throw type_error("add_bias: bias is " + std::string(name_of(bias.element_type())) + " but activations are " +
                     std::string(name_of(acts.element_type())));
  map_in_place(g, prog, expr::_1 + expr::_2, acts, bias.broadcast(acts.shape()));
}

}  // namespace ops
}  // namespace tilebsp
