// ops::conv, ops::conv_backward_input, ops::conv_weight_gradients / conv_weight_update and ops::add_bias:
// (grouped) convolutions built from a plan_conv plan — one vertex per tile and serial step running the direct
// convolution kernel on its fetched input window and weights, then a fixed-order reduction of partials — with a
// host kernel that computes the same values bitwise without the per-tile copies. 1x1 convolutions with unit
// stride, no padding and no dilation are matmuls and take the matmul path.
#pragma once

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/mapping.hpp>
#include <tilebsp/ops/detail/common.hpp>
#include <tilebsp/ops/detail/host_task.hpp>
#include <tilebsp/ops/detail/instances.hpp>
#include <tilebsp/ops/detail/rank6.hpp>
#include <tilebsp/ops/map.hpp>
#include <tilebsp/ops/matmul.hpp>
#include <tilebsp/plan/conv.hpp>
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
    double const macs = tilebsp::detail::conv_block_macs(g.loop, static_cast<double>(r.n1 - r.n0), e, static_cast<double>(r.g1 - r.g0),
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
  std::size_t const rd = q.row_dim, rows = p.rows();
  for (std::size_t ig = 0; ig < p.g_split; ++ig)
    for (std::size_t ij = 0; ij < p.j_split; ++ij)
      for (std::size_t ic = 0; ic < p.c_split; ++ic)
        for (std::size_t in = 0; in < p.n_split; ++in)
          for (std::size_t ir = 0; ir < p.r_split; ++ir) {
            simd::ConvRange r;
            auto const span = [](std::size_t i, std::size_t tile, std::size_t total) {
              return std::pair<std::int64_t, std::int64_t>(static_cast<std::int64_t>(std::min(total, i * tile)),
                                                            static_cast<std::int64_t>(std::min(total, (i + 1) * tile)));
            };
            std::tie(r.g0, r.g1) = span(ig, p.g_tile, q.groups);
            std::tie(r.j0, r.j1) = span(ij, p.j_tile, q.j);
            std::tie(r.c0, r.c1) = span(ic, p.c_tile, q.c);
            std::tie(r.n0, r.n1) = span(in, p.n_tile, q.batch);
            for (std::size_t d = 0; d < 3; ++d) r.lo[d] = 0, r.hi[d] = q.loop.dim[d].out;
            std::tie(r.lo[rd], r.hi[rd]) = span(ir, p.r_tile, rows);
            // The serial step's share of the reduction channels (or rows).
            auto& a = wu ? r.lo[rd] : r.j0;
            auto& b = wu ? r.hi[rd] : r.j1;
            if (step != whole_piece) std::tie(a, b) = p.serial().range(a, b, step);
            if (a >= b || r.g0 >= r.g1 || r.c0 >= r.c1 || r.n0 >= r.n1 || r.lo[rd] >= r.hi[rd] || r.j0 >= r.j1) continue;
            f(p.tile_of(ig, ij, ic, in, ir), wu ? in * p.r_split + ir : ij, r);
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
    auto const [a, b] = tilebsp::detail::source_range(q.loop.dim[d], r.lo[d], r.hi[d]);
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

/// The host kernel of a convolution plan, the task of its host path: computes every serial step and the final
/// reduction bitwise as the vertices do — the same reduction pieces and steps, the same kernel, the same
/// summation order — dividing the work by output blocks, whose values do not depend on the division.
template <class TS, class TW, class TP, class TO>
class ConvHostKernel {
 public:
  ConvHostKernel(ConvPlan const& p, ConvViews const& v, float alpha) {
    auto s = std::make_shared<State>(State{p, v.src.affine(), v.other.affine(), v.out.affine(), alpha});
    if (one_variable_each(s->src, s->other, s->out)) s_ = std::move(s);
  }
  HostKernel kernel() const { return host_kernel_of(s_); }

 private:
  /// Winograd weights transformed once per host write of the weights (inference: the weights outlive many runs),
  /// one cache piece per group.
  struct PreparedWeights {
    HostWriteCache cache;
    simd::detail::Scratch storage;  ///< 64-byte aligned
    float* data = nullptr;
    simd::WinoWeights layout;
  };
  struct Bound {
    std::byte *src, *other, *out;
    std::shared_ptr<UnitQueue> queue;
    std::shared_ptr<PreparedWeights> wino;  ///< null: each unit transforms the weights it reads
  };
  struct State {
    ConvPlan plan;
    std::optional<tilebsp::detail::Affine> src, other, out;
    float alpha;

    Bound bind(HostBinding const& at) const {
      Bound r{at(src->var), at(other->var), at(out->var), std::make_shared<UnitQueue>(), nullptr};
      auto const& q = plan.problem;
      // Only the host writes the weights (not a training step's update): transform them once per write (the same
      // bits as each unit transforming its own).
      if (std::uint64_t const* writes = at.host_writes ? at.host_writes(other->var) : nullptr; writes && q.loop.winograd) {
        r.wino = std::make_shared<PreparedWeights>(HostWriteCache(writes, q.groups));
        r.wino->layout = simd::wino_weights_layout(nullptr, q.j, q.c);
        r.wino->data = r.wino->storage.get(q.groups * r.wino->layout.group_stride);
        r.wino->layout.data = r.wino->data;
      }
      return r;
    }

    /// A unit-shaped scratch destination of type T for range r.
    template <class T>
    static simd::Operand6<T> scratch_operand(T* data, Index6 const& origin, Index6 const& shape) {
      return Block6{origin, shape}.operand(data);
    }

    void run(Bound const& at, unsigned /*t*/, unsigned threads) const {
      auto const& q = plan.problem;
      bool const wu = q.kind == ConvPass::weight_update;
      auto const s6 = affine_operand6<TS const>(*src, at.src);
      auto const o6 = affine_operand6<TW const>(*other, at.other);
      auto const d6 = affine_operand6<TO>(*out, at.out);
      auto const L = static_cast<std::int64_t>(simd::lanes);
      // Units: forward-like, chunks of groups x lane channels x images (n, o0) x rows o1; weight gradient, chunks
      // of groups x lane channels x reduction channels. Channel chunks are split first (each unit packs only its
      // own weights; but see channels_first), down to one vector (whole groups when a vector spans groups); then
      // images, which repack the weights; then rows, which also rebuild the rows a kernel's taps share; for the
      // weight gradient, reduction channels instead, down to chunks of 8 (each chunk rebuilds the input box, and
      // fewer than 4 channels cannot use the row kernel: the 56² grouped layer's 4 split in 2 ran at a fifth of the
      // speed). Until there are at least 8 units per thread where the problem allows, handed out first come first
      // served (a unit's values do not depend on the thread), so that a thread the machine slows down takes fewer.
      std::int64_t const G = static_cast<std::int64_t>(q.groups), C = static_cast<std::int64_t>(q.c),
                         J = static_cast<std::int64_t>(q.j);
      auto const& D = q.loop.dim;
      std::int64_t const want = 8 * static_cast<std::int64_t>(threads);
      std::int64_t const per_vec = C >= L ? 1 : std::max<std::int64_t>(1, L / C);
      std::int64_t const B = static_cast<std::int64_t>(q.batch);
      std::int64_t gc = G >= 2 * per_vec ? per_vec : G, cc = C, jc = J, bc = B, oc = D[0].out, rc = D[1].out;
      // A channel chunk builds its own input box, a row or image chunk packs its own weights: forward-like passes
      // split channels first only where a group's weights outweigh an image's inputs; the stem (7x7x3 x 64
      // weights against 230² x 3 inputs) splits rows instead, which measured faster.
      double image = static_cast<double>(J);
      for (auto const& d : D) image *= static_cast<double>(d.in);
      bool const channels_first = wu || static_cast<double>(q.loop.taps()) * static_cast<double>(J * C) >= image;
      if (G == 1 && C > 2 * L && channels_first) cc = 2 * L * std::max<std::int64_t>(1, (C + 2 * L * want - 1) / (2 * L * want));
      auto const chunks = [](std::int64_t n, std::int64_t c) { return (n + c - 1) / c; };
      auto const units_now = [&] {
        std::int64_t u = chunks(G, gc) * chunks(C, cc) * chunks(J, jc);
        return wu ? u : u * chunks(B, bc) * chunks(D[0].out, oc) * chunks(D[1].out, rc);
      };
      while (units_now() < want) {
        auto const halve_channels = [&] { cc = std::max(2 * L, (cc + 1) / 2 / (2 * L) * (2 * L)); };
        if (gc > per_vec) gc = std::max(per_vec, (gc + 1) / 2 / per_vec * per_vec);
        else if (cc > 2 * L && channels_first) halve_channels();
        else if (!wu && bc > 1) bc = (bc + 1) / 2;
        else if (!wu && oc > 1) oc = (oc + 1) / 2;
        else if (!wu && rc > 4) rc = std::max<std::int64_t>(4, (rc + 1) / 2);
        else if (cc > 2 * L) halve_channels();
        else if (wu && jc > 8) jc = std::max<std::int64_t>(8, (jc + 1) / 2);
        else break;
      }
      std::int64_t const ng = chunks(G, gc), nc = chunks(C, cc), nj = chunks(J, jc);
      std::int64_t const nr = chunks(D[1].out, rc), no = chunks(D[0].out, oc);
      std::int64_t const units = units_now();
      at.queue->run(static_cast<std::size_t>(units), threads, [&](std::size_t u) {
        auto x = static_cast<std::int64_t>(u);
        simd::ConvRange r;
        std::int64_t const ij = wu ? x % nj : 0;
        if (wu) x /= nj;
        std::int64_t const ic = x % nc;
        x /= nc;
        std::int64_t const ig = x % ng;
        x /= ng;
        r.g0 = ig * gc, r.g1 = std::min(G, r.g0 + gc);
        r.c0 = ic * cc, r.c1 = std::min(C, r.c0 + cc);
        r.j0 = ij * jc, r.j1 = std::min(J, r.j0 + jc);
        for (std::size_t d = 0; d < 3; ++d) r.lo[d] = 0, r.hi[d] = D[d].out;
        if (!wu) {
          r.lo[1] = (x % nr) * rc, r.hi[1] = std::min(D[1].out, r.lo[1] + rc);
          x /= nr;
          r.lo[0] = (x % no) * oc, r.hi[0] = std::min(D[0].out, r.lo[0] + oc);
          x /= no;
          r.n0 = x * bc, r.n1 = std::min(B, r.n0 + bc);
          forward_unit(at, r, s6, o6, d6);
        } else {
          r.n0 = 0, r.n1 = static_cast<std::int64_t>(q.batch);
          gradient_unit(r, s6, o6, d6);
        }
      });
    }

    /// The plan's reduction structure for one forward-like unit.
    void forward_unit(Bound const& at, simd::ConvRange r, simd::Operand6<TS const> const& s6, simd::Operand6<TW const> const& o6,
                      simd::Operand6<TO> const& d6) const {
      auto const& p = plan;
      auto const J = static_cast<std::int64_t>(p.problem.j);
      simd::WinoWeights const* wino = nullptr;
      if (at.wino) {
        auto& w = *at.wino;
        for (std::int64_t g = r.g0; g < r.g1; ++g)
          w.cache.ensure(static_cast<std::size_t>(g), [&] {
            simd::winograd_prepare_weights(o6, g, J, static_cast<std::int64_t>(p.problem.c), w.layout, w.data);
          });
        wino = &w.layout;
      }
      auto const steps = [&](std::int64_t j0, std::int64_t j1, auto const& dst) {
        p.serial().each(j0, j1, [&](std::size_t s, std::int64_t s0, std::int64_t s1) {
          r.j0 = s0, r.j1 = s1;
          simd::conv_forward(p.problem.loop, r, s6, o6, dst, s > 0, wino);
        });
      };
      if (!p.reduce) {
        steps(0, J, d6);
        return;
      }
      Index6 const origin{r.n0, r.lo[0], r.lo[1], r.lo[2], r.g0, r.c0};
      Index6 const shape{r.n1 - r.n0, r.hi[0] - r.lo[0], r.hi[1] - r.lo[1], r.hi[2] - r.lo[2], r.g1 - r.g0, r.c1 - r.c0};
      reduce_unit(origin, shape, [&](std::size_t part, auto const& dst) {
        std::int64_t const j0 = static_cast<std::int64_t>(part * p.j_tile);
        if (j0 >= J) return false;
        steps(j0, std::min(J, j0 + static_cast<std::int64_t>(p.j_tile)), dst);
        return true;
      }, p.j_split, d6);
    }

    void gradient_unit(simd::ConvRange r, simd::Operand6<TS const> const& s6, simd::Operand6<TW const> const& o6,
                       simd::Operand6<TO> const& d6) const {
      auto const& p = plan;
      auto const& q = p.problem;
      std::size_t const rd = q.row_dim;
      auto const rows = static_cast<std::int64_t>(p.rows());
      auto const steps = [&](std::int64_t n0, std::int64_t n1, std::int64_t r0, std::int64_t r1, auto const& dst) {
        r.n0 = n0, r.n1 = n1;
        p.serial().each(r0, r1, [&](std::size_t s, std::int64_t s0, std::int64_t s1) {
          r.lo[rd] = s0, r.hi[rd] = s1;
          simd::conv_weight_gradient(q.loop, r, s6, o6, dst, s > 0);
        });
      };
      if (!p.reduce) {
        steps(0, static_cast<std::int64_t>(q.batch), 0, rows, d6);
        return;
      }
      auto const& D = q.loop.dim;
      Index6 const origin{r.g0, 0, 0, 0, r.j0, r.c0};
      Index6 const shape{r.g1 - r.g0, D[0].taps, D[1].taps, D[2].taps, r.j1 - r.j0, r.c1 - r.c0};
      auto const B = static_cast<std::int64_t>(q.batch);
      reduce_unit(origin, shape, [&](std::size_t part, auto const& dst) {
        auto const in = static_cast<std::int64_t>(part / p.r_split), ir = static_cast<std::int64_t>(part % p.r_split);
        std::int64_t const n0 = std::min(B, in * static_cast<std::int64_t>(p.n_tile));
        std::int64_t const r0 = std::min(rows, ir * static_cast<std::int64_t>(p.r_tile));
        std::int64_t const n1 = std::min(B, n0 + static_cast<std::int64_t>(p.n_tile));
        std::int64_t const r1 = std::min(rows, r0 + static_cast<std::int64_t>(p.r_tile));
        if (n0 >= n1 || r0 >= r1) return false;
        steps(n0, n1, r0, r1, dst);
        return true;
      }, p.n_split * p.r_split, d6, true);
    }

    /// Computes `parts` partials of a unit-shaped block (part(i, dst) writes partial i, of type TP, into dst and
    /// returns true, or returns false for a piece that does not exist), sums them in f32 in order as the reduction
    /// vertices do, and finishes into d6 with alpha (accumulating when the plan does). Pieces that do not exist
    /// are left out of the sum, as the vertices leave them out (the planner's splits make none today).
    /// With `interleave` (weight gradients) and a unit of lanes / C groups of C channels, the partials are laid
    /// out as the kernel's accumulators — group fastest, then channel, then (taps, j) rows a vector apart — so
    /// that conv_weight_gradient accumulates in them in place; otherwise they are row-major.
    template <class Part>
    void reduce_unit(Index6 const& origin, Index6 const& shape, Part&& part, std::size_t parts,
                     simd::Operand6<TO> const& d6, bool interleave = false) const {
      std::size_t const inner = static_cast<std::size_t>(shape[5]);
      std::size_t const elems = static_cast<std::size_t>(shape[0] * shape[1] * shape[2] * shape[3] * shape[4] * shape[5]);
      float* sum = simd::detail::conv_scratch(3).get(elems);
      thread_local std::vector<TP> buf;
      buf.assign(elems, TP(0.0f));
      auto op = Block6{origin, shape}.operand(buf.data());
      auto const L = static_cast<std::int64_t>(simd::lanes);
      if (interleave && shape[0] > 1 && shape[0] * shape[5] == L) {
        op.stride[0] = 1, op.stride[5] = shape[0], op.stride[4] = L;  // group, channel, j
        for (std::size_t d = 3; d >= 1; --d) op.stride[d] = op.stride[d + 1] * shape[d + 1];  // taps
      }
      bool first = true;
      for (std::size_t i = 0; i < parts; ++i) {
        if (!part(i, op)) continue;
        if (first)
          for (std::size_t e = 0; e < elems; ++e) sum[e] = static_cast<float>(buf[e]);
        else
          for (std::size_t e = 0; e < elems; ++e) sum[e] += static_cast<float>(buf[e]);
        first = false;
      }
      if (first) std::fill(sum, sum + elems, 0.0f);  // no piece exists: the sum is empty
      // Rows of the innermost (channel) dimension in row-major order, each finished into d6; idx steps through
      // dimensions 4, 3, ..., 0 like an odometer and o follows it by strides.
      Index6 idx = origin;
      TO* o = d6.at(idx[0], idx[1], idx[2], idx[3], idx[4], idx[5]);
      float const* row = sum;  // the row's first channel in sum (laid out as buf)
      thread_local std::vector<float> gathered;
      gathered.assign(op.stride[5] == 1 ? 0 : inner, 0.0f);
      for (std::size_t e = 0; e < elems; e += inner) {
        float const* from = row;
        if (!gathered.empty()) {
          for (std::size_t c = 0; c < inner; ++c) gathered[c] = row[static_cast<std::ptrdiff_t>(c) * op.stride[5]];
          from = gathered.data();
        }
        if (plan.problem.accumulate) simd::scale_into<TO, true>(from, o, d6.stride[5], inner, alpha);
        else simd::scale_into<TO, false>(from, o, d6.stride[5], inner, alpha);
        for (std::size_t d = 5; d-- > 0;) {
          o += d6.stride[d], row += op.stride[d];
          if (++idx[d] < origin[d] + shape[d]) break;
          o -= shape[d] * d6.stride[d], row -= shape[d] * op.stride[d];
          idx[d] = origin[d];
        }
      }
    }
  };
  std::shared_ptr<State const> s_;
};


/// The final stage of a plan with partials, where the result lives: row segments of the result as a matrix
/// [rows, innermost dimension], each summing its partials in part order.
template <class TP, class TO>
Execute conv_reduce_stage(Graph& g, ConvPlan const& p, Tensor const& parts, Tensor const& out_user, float alpha,
                          std::string const& name) {
  auto const& q = p.problem;
  ComputeSet const cs = g.add_compute_set(name + "/reduce");
  std::size_t const cols = out_user.dim(out_user.rank() - 1), rows = out_user.num_elements() / cols;
  Tensor const out2 = out_user.reshape({rows, cols});
  Tensor const parts3 = parts.reshape({p.parts(), rows, cols});
  for (auto const& [tile, iv] : g.tile_mapping(out2.flatten()))
    for (std::size_t b = iv.begin; b < iv.end;) {
      std::size_t const i = b / cols, j = b % cols, left = iv.end - b;
      std::size_t r1 = i + 1, c0 = j, c1 = std::min(cols, j + left);
      if (j == 0 && left >= cols) r1 = i + left / cols, c1 = cols;
      Tensor const src = parts3.slice({0, i, c0}, {p.parts(), r1, c1});
      Tensor const dst = out2.slice({i, c0}, {r1, c1});
      if (q.accumulate) g.add_vertex<MatmulReduce<TP, TO, true>>(cs, tile, fetch(src), dst, alpha);
      else g.add_vertex<MatmulReduce<TP, TO, false>>(cs, tile, fetch(src), dst, alpha);
      b += (r1 - i - 1) * cols + (c1 - c0);
    }
  return execute(cs);
}

/// Adds the plan's compute sets to `prog` as one host path: serial steps into `out` (or partials), then the final
/// stage into `out`; the host kernel computes the same values in one task.
template <class TS, class TW, class TP, class TO>
void build_conv(Graph& g, Sequence& prog, ConvPlan const& p, ConvViews const& v, Tensor const& out_user, float alpha,
                std::string const& name) {
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
  auto const rate = static_cast<float>(tilebsp::detail::macs_per_cycle(g.target(), q.input));
  Sequence body;
  for (std::size_t s = 0; s < p.steps; ++s) {
    ComputeSet const cs = g.add_compute_set(name + (p.steps > 1 ? "/step" + std::to_string(s) : ""));
    each_piece(p, s, [&](std::size_t tile, std::size_t part, simd::ConvRange const& r) {
      ConvGeometry const geo = geometry(q, r);
      Tensor const src = geo.src.of(v.src), other = geo.other.of(v.other);
      auto const add = [&]<class TD, bool Load>(Tensor const& dst) {
        if (wu) g.add_vertex<ConvVertex<TS, TW, TD, Load, true>>(cs, tile, fetch(src), fetch(other), dst, geo, rate);
        else g.add_vertex<ConvVertex<TS, TW, TD, Load, false>>(cs, tile, fetch(src), fetch(other), dst, geo, rate);
      };
      if (p.reduce) {
        Tensor const dst = geo.dst.of(parts6.index(part));
        if (s == 0) add.template operator()<TP, false>(dst);
        else add.template operator()<TP, true>(dst);
      } else {
        Tensor const dst = geo.dst.of(v.out);
        if (s == 0) add.template operator()<TO, false>(dst);
        else add.template operator()<TO, true>(dst);
      }
    });
    body.add(execute(cs));
  }
  if (p.reduce) body.add(conv_reduce_stage<TP, TO>(g, p, parts, out_user, alpha, name));
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
          simd::ConvRange r;
          r.g0 = static_cast<std::int64_t>(std::min(q.groups, ig * p.g_tile)), r.g1 = static_cast<std::int64_t>(std::min(q.groups, (ig + 1) * p.g_tile));
          r.c0 = static_cast<std::int64_t>(std::min(q.c, ic * p.c_tile)), r.c1 = static_cast<std::int64_t>(std::min(q.c, (ic + 1) * p.c_tile));
          r.j0 = static_cast<std::int64_t>(std::min(q.j, ij * p.j_tile)), r.j1 = static_cast<std::int64_t>(std::min(q.j, (ij + 1) * p.j_tile));
          if (r.g0 >= r.g1 || r.c0 >= r.c1 || r.j0 >= r.j1) continue;
          g.set_tile_mapping(geometry(q, r).dst.of(out6), p.tile_of(ig, ij, ic, 0, 0));
        }
        continue;
      }
      for (std::size_t in = 0; in < p.n_split; ++in)
        for (std::size_t ir = 0; ir < p.r_split; ++ir) {
          simd::ConvRange r;
          r.g0 = static_cast<std::int64_t>(std::min(q.groups, ig * p.g_tile)), r.g1 = static_cast<std::int64_t>(std::min(q.groups, (ig + 1) * p.g_tile));
          r.c0 = static_cast<std::int64_t>(std::min(q.c, ic * p.c_tile)), r.c1 = static_cast<std::int64_t>(std::min(q.c, (ic + 1) * p.c_tile));
          r.n0 = static_cast<std::int64_t>(std::min(q.batch, in * p.n_tile)), r.n1 = static_cast<std::int64_t>(std::min(q.batch, (in + 1) * p.n_tile));
          for (std::size_t d = 0; d < 3; ++d) r.lo[d] = 0, r.hi[d] = q.loop.dim[d].out;
          auto const rows = static_cast<std::int64_t>(p.rows());
          std::int64_t const b = std::min(rows, static_cast<std::int64_t>(ir * p.r_tile)), e = std::min(rows, static_cast<std::int64_t>((ir + 1) * p.r_tile));
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

/// A 1x1 convolution with no padding or dilation: a (grouped) matmul. The forward and weight-update passes also
/// take a stride that divides the field, subsampling the input first (`strided`).
inline bool is_pointwise(ConvParams const& p, bool strided = false) {
  for (std::size_t d = 0; d < p.rank(); ++d)
    if (p.kernel_shape[d] != 1 || (strided ? p.input_field[d] % p.stride_of(d) != 0 : p.stride_of(d) != 1) ||
        p.padding_lower_of(d) != 0 || p.padding_upper_of(d) != 0 || p.input_dilation_of(d) != 1 || p.kernel_dilation_of(d) != 1)
      return false;
  return true;
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
  Tensor const flat = t.flatten();
  for (auto const& [tile, r] : g.tile_mapping(view)) g.set_tile_mapping(flat.slice(r), tile);
  prog.add(copy(view, t));
  return t;
}

/// Activations [N, field..., G * C] as grouped matrices [G, N * positions, C].
inline Tensor as_matrices(Tensor const& t, std::size_t groups) {
  std::size_t const ch = t.dim(t.rank() - 1), m = t.num_elements() / ch;
  return t.reshape({m, groups, ch / groups}).dimshuffle({1, 0, 2});
}

/// Builds a pointwise pass as a matmul a3 x b3 into c3 (c3 += alpha * a3 x b3 when accumulating). A template, as
/// the operators are, so that only a caller instantiates the matmul kernels.
template <std::same_as<Tensor> T>
void pointwise(Graph& g, Sequence& prog, T const& a3, T const& b3, T const& c3, bool map_out, bool accumulate, float alpha,
               ConvOptions const& o, std::string const& name) {
  MatmulProblem q;
  q.groups = a3.dim(0), q.m = a3.dim(1), q.k = a3.dim(2), q.n = b3.dim(2);
  q.input = a3.element_type();
  q.partials = o.partials;
  q.output = c3.element_type();
  q.accumulate = accumulate;
  if (q.groups * q.m * q.n == 0) return;
  MatmulPlan const p = plan_matmul(view_target(g), q, o.matmul());
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
  tilebsp::detail::check_amp(op, o.available_memory_proportion);
  ConvProblem q = tilebsp::detail::conv_problem(params, kind);
  q.input = input;
  check_float(op, "partials", o.partials);
  q.partials = o.partials;
  q.output = o.output_type.value_or(out_type.value_or(input));
  check_float(op, "the output type", q.output);
  q.loop.winograd = tilebsp::detail::use_winograd(op, q, o.algorithm);
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

/// The plan ops::conv (or the pass `kind`) would use on graph g's target, without building it.
inline ConvPlan plan_conv(Graph const& g, ConvParams const& params, ConvPass kind = ConvPass::forward,
                          ElementType type = ElementType::f32, ConvOptions const& options = {}) {
  detail::check_params("plan_conv", params);
  ConvProblem q = detail::conv_problem_of("plan_conv", params, kind, type, options, std::nullopt);
  q.accumulate = kind == ConvPass::weight_update;
  return plan_conv(detail::view_target(g), q, options);
}

/// A new activations tensor of params.input_shape(), mapped so that each tile of the forward plan holds the
/// inputs its piece reads most (its window's own rows), spreading the rest linearly.
inline Tensor create_conv_input(Graph& g, ConvParams const& params, ElementType type = ElementType::f32,
                                ConvOptions const& options = {}, std::string const& name = "conv/input") {
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

/// New weights of params.weights_shape(): each (group, input-channel, output-channel) block of the forward plan
/// dealt out evenly over the tiles whose pieces read it, so that no tile holds more than its share (a layer
/// whose plan splits rows over many tiles and channels over few would otherwise pile its weights on a few).
inline Tensor create_conv_weights(Graph& g, ConvParams const& params, ElementType type = ElementType::f32,
                                  ConvOptions const& options = {}, std::string const& name = "conv/weights") {
  detail::check_params("create_conv_weights", params);
  Tensor w = g.add_variable(type, params.weights_shape(), name);
  ConvPlan const p = plan_conv(g, params, ConvPass::forward, type, options);
  Tensor const w6 = detail::weights6(w, params.rank());
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::pair<Tensor, std::vector<std::size_t>>> blocks;
  detail::each_piece(p, detail::whole_piece, [&](std::size_t tile, std::size_t, simd::ConvRange const& r) {
    auto& [block, tiles] = blocks[{r.g0, r.c0, r.j0}];
    if (tiles.empty()) block = detail::geometry(p.problem, r).other.of(w6).flatten();
    if (std::find(tiles.begin(), tiles.end(), tile) == tiles.end()) tiles.push_back(tile);
  });
  for (auto const& [key, bt] : blocks) {
    auto const& [block, tiles] = bt;
    std::size_t const n = block.num_elements(), k = tiles.size();
    for (std::size_t i = 0; i < k; ++i)
      if (n * i / k < n * (i + 1) / k) g.set_tile_mapping(block.slice(n * i / k, n * (i + 1) / k), tiles[i]);
  }
  return w;
}

/// The convolution of `in` ([N, field..., G * C_in], f32 or f16) with `weights` ([G, kernel..., C_in, C_out], the
/// same type), per `params`; returns [N, out_field..., G * C_out] mapped per plan. Throws shape_error (bad
/// parameters, operands of the wrong shape), type_error and option_error (AMP outside [0, 1]).
template <std::same_as<Tensor> T>
T conv(Graph& g, Sequence& prog, T const& in, T const& weights, ConvParams const& params, ConvOptions const& options = {},
       std::string const& name = "conv") {
  detail::check_params("conv", params);
  detail::check_conv_tensor("conv", g, in, "inputs", params.input_shape());
  detail::check_conv_tensor("conv", g, weights, "weights", params.weights_shape());
  if (in.element_type() != weights.element_type())
    throw type_error("conv: inputs are " + std::string(name_of(in.element_type())) + " but weights are " +
                     std::string(name_of(weights.element_type())));
  ConvProblem const q = detail::conv_problem_of("conv", params, ConvPass::forward, in.element_type(), options, std::nullopt);
  Tensor out = g.add_variable(q.output, params.output_shape(), name);
  std::size_t const G = q.groups, r = params.rank();
  if (detail::is_pointwise(params, true)) {
    Tensor const w3 = weights.reshape({G, q.j, q.c});
    Tensor const a = detail::subsampled_input(g, prog, in, params, name);
    detail::pointwise(g, prog, detail::as_matrices(a, G), w3, detail::as_matrices(out, G), true, false, 1.0f, options, name);
    return out;
  }
  ConvPlan const p = plan_conv(detail::view_target(g), q, options);
  detail::ConvViews const v{detail::activations6(in, r, G), detail::weights6(weights, r), detail::activations6(out, r, G)};
  detail::map_conv_result(g, p, v.out);
  detail::dispatch_conv_types(q, [&]<class TS, class TW, class TP, class TO>() {
    detail::build_conv<TS, TW, TP, TO>(g, prog, p, v, out, 1.0f, name);
  });
  return out;
}

/// Input gradients of the convolution: from `grad_out` ([N, out_field..., G * C_out]) and the forward weights,
/// returns [N, field..., G * C_in] — a forward-like pass over the flipped, transposed weights with the input
/// dilated by the stride. Same errors as conv.
template <std::same_as<Tensor> T>
T conv_backward_input(Graph& g, Sequence& prog, T const& grad_out, T const& weights, ConvParams const& params,
                      ConvOptions const& options = {}, std::string const& name = "conv/backward_input") {
  char const* op = "conv_backward_input";
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
  if (detail::is_pointwise(params)) {
    Tensor const w3 = weights.reshape({G, q.c, q.j}).dimshuffle({0, 2, 1});
    detail::pointwise(g, prog, detail::as_matrices(grad_out, G), w3, detail::as_matrices(out, G), true, false, 1.0f,
                      options, name);
    return out;
  }
  ConvPlan const p = plan_conv(detail::view_target(g), q, options);
  Tensor const w = detail::weights6(weights, r).reverse(1).reverse(2).reverse(3).dimshuffle({0, 1, 2, 3, 5, 4});
  detail::ConvViews const v{detail::activations6(grad_out, r, G), w, detail::activations6(out, r, G)};
  detail::map_conv_result(g, p, v.out);
  detail::dispatch_conv_types(q, [&]<class TS, class TW, class TP, class TO>() {
    detail::build_conv<TS, TW, TP, TO>(g, prog, p, v, out, 1.0f, name);
  });
  return out;
}

namespace detail {
template <std::same_as<Tensor> T>
void weight_pass(Graph& g, Sequence& prog, T const& grad_out, T const& acts, T const& dst, bool accumulate, float scale,
                 ConvParams const& params, ConvOptions const& options, std::string const& name, char const* op) {
  ConvProblem q = conv_problem_of(op, params, ConvPass::weight_update, acts.element_type(), options, dst.element_type());
  q.accumulate = accumulate;
  std::size_t const G = q.groups, r = params.rank();
  if (is_pointwise(params, true)) {
    Tensor const a3 = as_matrices(subsampled_input(g, prog, acts, params, name), G).dimshuffle({0, 2, 1});  // [G, C_in, positions]
    pointwise(g, prog, a3, as_matrices(grad_out, G), dst.reshape({G, q.j, q.c}), !accumulate, accumulate, scale, options,
              name);
    return;
  }
  ConvPlan const p = plan_conv(view_target(g), q, options);
  ConvViews const v{activations6(acts, r, G), activations6(grad_out, r, G), weights6(dst, r)};
  if (!accumulate) map_conv_result(g, p, v.out);
  dispatch_conv_types(q, [&]<class TS, class TW, class TP, class TO>() {
    build_conv<TS, TW, TP, TO>(g, prog, p, v, dst, scale, name);
  });
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

/// Weight gradients: sum over the batch and output positions of activations x output gradients, as a new tensor
/// of params.weights_shape() (type options.output_type, else the operands'). Same errors as conv.
template <std::same_as<Tensor> T>
T conv_weight_gradients(Graph& g, Sequence& prog, T const& grad_out, T const& acts, ConvParams const& params,
                        ConvOptions const& options = {}, std::string const& name = "conv/weight_gradients") {
  char const* op = "conv_weight_gradients";
  detail::check_weight_pass(op, g, grad_out, acts, params);
  Tensor dw = g.add_variable(options.output_type.value_or(acts.element_type()), params.weights_shape(), name);
  detail::weight_pass(g, prog, grad_out, acts, dw, false, 1.0f, params, options, name, op);
  return dw;
}

/// weights += scale * (weight gradients): the SGD step of PopLibs' convolutionWeightUpdate (scale = -learning
/// rate). The weights keep their mapping. Same errors as conv.
template <std::same_as<Tensor> T>
void conv_weight_update(Graph& g, Sequence& prog, T const& grad_out, T const& acts, T const& weights, float scale,
                        ConvParams const& params, ConvOptions const& options = {},
                        std::string const& name = "conv/weight_update") {
  char const* op = "conv_weight_update";
  detail::check_weight_pass(op, g, grad_out, acts, params);
  detail::check_conv_tensor(op, g, weights, "weights", params.weights_shape());
  ConvOptions o = options;
  o.output_type = weights.element_type();
  detail::weight_pass(g, prog, grad_out, acts, weights, true, scale, params, o, name, op);
}

/// acts += bias along the last (channel) dimension: acts [..., C], bias [C] of the same type.
template <std::same_as<Tensor> T>
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

#define TILEBSP_OPS_CONV_INSTANCES(X)                                                                                \
  X(Tensor conv(Graph&, Sequence&, Tensor const&, Tensor const&, ConvParams const&, ConvOptions const&,             \
                std::string const&))                                                                                \
  X(Tensor conv_backward_input(Graph&, Sequence&, Tensor const&, Tensor const&, ConvParams const&, ConvOptions const&, \
                               std::string const&))                                                                 \
  X(Tensor conv_weight_gradients(Graph&, Sequence&, Tensor const&, Tensor const&, ConvParams const&,                \
                                 ConvOptions const&, std::string const&))                                           \
  X(void conv_weight_update(Graph&, Sequence&, Tensor const&, Tensor const&, Tensor const&, float, ConvParams const&, \
                            ConvOptions const&, std::string const&))                                                \
  X(void add_bias(Graph&, Sequence&, Tensor const&, Tensor const&))
TILEBSP_DECLARE_INSTANCES(TILEBSP_OPS_CONV_INSTANCES)

}  // namespace ops
}  // namespace tilebsp
