// ops::conv, its host path: the task that computes a plan's passes on the host, bitwise as its vertices do.
#pragma once

#include <tilebsp/ops/conv/vertex.hpp>
#include <tilebsp/ops/detail/host_work.hpp>
#include <tilebsp/simd/gemm.hpp>
#include <tilebsp/simd/partials.hpp>

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
#include <utility>
#include <vector>

namespace tilebsp::ops::detail {

/// The host kernel of a convolution plan, the task of its host path: computes every serial step and the final
/// reduction bitwise as the vertices do — the same reduction pieces and steps, the same kernel, the same
/// summation order — dividing the work by output blocks, whose values do not depend on the division.
template <class TS, class TW, class TP, class TO>
class ConvHostKernel {
 public:
  ConvHostKernel(ConvPlan const& p, ConvViews const& v, float alpha) {
    auto s = std::make_shared<State>(State{p, v.src.affine(), v.other.affine(), v.out.affine(), alpha, std::nullopt});
    // A forward-like pass runs an epilogue on each unit's block once it is final (HostKernel::writes).
    if (p.problem.kind != ConvPass::weight_update) s->writes = row_range(v.out);
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
  /// Direct forward weights packed once per host write (inference), per group and range of reduction channels
  /// (the plan's parts and serial steps), one cache piece each: the floats each unit would pack for its blocks.
  struct PackedDirect {
    HostWriteCache cache;
    std::vector<std::pair<std::int64_t, std::int64_t>> ranges;  ///< sorted
    std::vector<std::size_t> offset;                            ///< of each range in a group's floats
    std::size_t group_floats = 0;
    simd::detail::Scratch storage;  ///< 64-byte aligned
    float* data = nullptr;
  };
  struct Bound {
    std::byte *src, *other, *out;
    std::shared_ptr<UnitQueue> queue;
    std::shared_ptr<PreparedWeights> wino;  ///< null: each unit transforms the weights it reads
    std::shared_ptr<PackedDirect> direct;   ///< null: each unit packs the weights it reads
  };
  struct State {
    ConvPlan plan;
    std::optional<tilebsp::core::detail::Affine> src, other, out;
    float alpha;
    std::optional<VarRange> writes;

    Bound bind(HostBinding const& at) const {
      auto const& q = plan.problem;
      Bound r{at(src->var), at(other->var), at(out->var), std::make_shared<UnitQueue>(at.threads), nullptr, nullptr};
      // Only the host writes the weights (not a training step's update): transform them once per write (the same
      // bits as each unit transforming its own).
      std::uint64_t const* counter = at.host_writes ? at.host_writes(other->var) : nullptr;
      if (counter && q.loop.winograd) {
        r.wino = std::make_shared<PreparedWeights>(HostWriteCache(counter, q.groups));
        r.wino->layout = simd::wino_weights_layout(nullptr, q.j, q.c);
        r.wino->data = r.wino->storage.get(q.groups * r.wino->layout.group_stride);
        r.wino->layout.data = r.wino->data;
      }
      // Direct forward passes whose groups fill column pairs pack each range of reduction channels once per write.
      auto const C = static_cast<std::int64_t>(q.c);
      bool const pairs = C >= static_cast<std::int64_t>(simd::lanes / 2 + 1);  // conv_columns' own column pairs
      if (counter && q.kind != ConvPass::weight_update && !q.loop.winograd && pairs) {
        std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
        auto const add = [&](std::int64_t j0, std::int64_t j1) {
          plan.serial().each(j0, j1, [&](std::size_t, std::int64_t s0, std::int64_t s1) {
            ranges.emplace_back(s0, s1);
          });
        };
        if (!plan.reduce) add(0, static_cast<std::int64_t>(q.j));
        else
          for (std::size_t i = 0; i < plan.parts(); ++i)
            if (simd::ConvRange const share = plan.part(i); share.j0 < share.j1) add(share.j0, share.j1);
        std::sort(ranges.begin(), ranges.end());
        ranges.erase(std::unique(ranges.begin(), ranges.end()), ranges.end());
        auto d = std::make_shared<PackedDirect>(
            PackedDirect{HostWriteCache(counter, q.groups * ranges.size()), std::move(ranges), {}, 0, {}, nullptr});
        for (auto const& [j0, j1] : d->ranges) {
          d->offset.push_back(d->group_floats);
          d->group_floats += simd::packed_forward_group_floats(q.loop, C, j1 - j0);
        }
        d->data = d->storage.get(q.groups * d->group_floats);
        r.direct = std::move(d);
      }
      return r;
    }

    /// How a run on `threads` threads divides the work into units: chunks of each dimension, and their number.
    struct Split {
      std::int64_t gc, cc, jc, bc, oc, rc, units;
    };
    Split split(unsigned threads) const {
      auto const& q = plan.problem;
      bool const wu = q.kind == ConvPass::weight_update;
      std::int64_t const G = static_cast<std::int64_t>(q.groups), C = static_cast<std::int64_t>(q.c),
                         J = static_cast<std::int64_t>(q.j);
      auto const& D = q.loop.dim;
      auto const L = static_cast<std::int64_t>(simd::lanes);
      // Units: forward-like, chunks of groups x lane channels x images (n, o0) x rows o1; weight gradient, chunks
      // of groups x lane channels x reduction channels. Channel chunks are split first (each unit packs only its
      // own weights; but see channels_first), down to one vector (whole groups when a vector spans groups); then
      // images, which repack the weights; then rows, which also rebuild the rows a kernel's taps share; for the
      // weight gradient, reduction channels instead, down to chunks of 8 (each chunk rebuilds the input box, and
      // fewer than 4 channels cannot use the row kernel: the 56² grouped layer's 4 split in 2 ran at a fifth of the
      // speed). Until there are at least 8 units per thread where the problem allows, a share per thread and then
      // what the others left (UnitQueue; a unit's values do not depend on the thread), so that a thread the machine
      // slows down takes fewer.
      std::int64_t const want = 8 * static_cast<std::int64_t>(threads);
      std::int64_t const per_vec = C >= L ? 1 : std::max<std::int64_t>(1, L / C);
      std::int64_t const B = static_cast<std::int64_t>(q.batch);
      // Strided layers of groups of one channel (depthwise) that read their source in place split images and rows
      // before groups: a unit of a vector of groups reads a vector from every position of the image, spread over
      // its lines (64 of 384 bytes at 96 channels), where a unit of rows reads its rows whole and each column finds
      // them in L2 (simd::detail::forward_in_place). Units of rows read their halo rows again: with boxes (5x5 at
      // 7²) groups first measured faster.
      bool const rows_first = !wu && C == 1 && J == 1 && G >= L && (D[1].a > 1 || D[2].a > 1) &&
                              simd::in_place_copies_fewer(q.loop, {0, 0, 0}, {D[0].out, D[1].out, D[2].out});
      std::int64_t gc = rows_first || G < 2 * per_vec ? G : per_vec, cc = C, jc = J, bc = B, oc = D[0].out, rc = D[1].out;
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
      // A direct forward unit reads the weights of its channels for every reduction part it runs, packing them
      // itself unless only the host writes them (bind), and makes a call per part: once the channels are split down
      // to a column pair, each split of images or rows reads and calls again. Where the weights outweigh an image's
      // inputs and a unit has fewer than 256 positions to use each weight on, that costs more than the balance the
      // units buy beyond 4 per thread (inception_v3's 5x5 layers; benchmarks/RESULTS.md, session 70). Winograd's
      // are transformed once per host write and keep the split below.
      bool const repacks = !wu && !q.loop.winograd && channels_first;
      auto const positions = [&] { return bc * oc * rc * D[2].out; };
      while (units_now() < want) {
        auto const halve_channels = [&] { cc = std::max(2 * L, (cc + 1) / 2 / (2 * L) * (2 * L)); };
        auto const halve_groups = [&] { gc = std::max(per_vec, (gc + 1) / 2 / per_vec * per_vec); };
        if (gc > per_vec && !rows_first) halve_groups();
        else if (cc > 2 * L && channels_first) halve_channels();
        else if (repacks && units_now() >= 4 * static_cast<std::int64_t>(threads) && positions() < 256) break;
        else if (!wu && bc > 1) bc = (bc + 1) / 2;
        else if (!wu && oc > 1) oc = (oc + 1) / 2;
        else if (!wu && rc > 4) rc = std::max<std::int64_t>(4, (rc + 1) / 2);
        else if (gc > per_vec) halve_groups();
        else if (cc > 2 * L) halve_channels();
        else if (wu && jc > 8) jc = std::max<std::int64_t>(8, (jc + 1) / 2);
        else break;
      }
      return {gc, cc, jc, bc, oc, rc, units_now()};
    }

    /// Whether a run on `threads` threads has each unit finish whole rows of channels, so that an epilogue runs on
    /// long runs of the result while they are in the cache (HostKernel::bind_with). Units of some groups or
    /// channels (depthwise convolutions, wide layers) would hand it runs of a vector or two: measured slower than
    /// the separate pass.
    bool fuses(HostBinding const& at) const {
      Split const sp = split(at.threads);
      return sp.gc == static_cast<std::int64_t>(plan.problem.groups) && sp.cc == static_cast<std::int64_t>(plan.problem.c);
    }

    /// The bias-and-clamp span after a forward-like pass as a post-op (bound to `at`'s memory), whatever the split:
    /// applied as the kernels store their results, or over each block once it is final (simd::conv_forward). For
    /// f32 results whose groups and channels lie end to end (channels-last), the op's columns all of them: the
    /// span's element i is then channel i % columns of the result (HostKernel::writes equals the span's range:
    /// dense, or rows of G * C at one pitch).
    std::optional<simd::PostOp> post_op(HostBinding const& at, ColumnOp const& op) const {
      auto const& q = plan.problem;
      auto const G = static_cast<std::int64_t>(q.groups), C = static_cast<std::int64_t>(q.c);
      auto const& st = out->strides;
      if (!std::is_same_v<TO, float> || q.kind == ConvPass::weight_update || !writes || (C > 1 && st[5] != 1) ||
          (G > 1 && st[4] != C) || op.columns != G * C)
        return std::nullopt;
      simd::PostOp p{reinterpret_cast<float const*>(at(op.bias_var)) + op.bias_start};
      p.lo = op.lo, p.hi = op.hi, p.max_lo = op.max_lo, p.min_hi = op.min_hi, p.silu = op.silu;
      return p;
    }

    void run(Bound const& at, unsigned t, unsigned threads, Epilogue const* epilogue = nullptr,
             simd::PostOp const* post = nullptr) const {
      auto const& q = plan.problem;
      bool const wu = q.kind == ConvPass::weight_update;
      auto const s6 = affine_operand6<TS const>(*src, at.src);
      auto const o6 = affine_operand6<TW const>(*other, at.other);
      auto const d6 = affine_operand6<TO>(*out, at.out);
      Split const sp = split(threads);
      std::int64_t const G = static_cast<std::int64_t>(q.groups), C = static_cast<std::int64_t>(q.c),
                         J = static_cast<std::int64_t>(q.j), B = static_cast<std::int64_t>(q.batch);
      auto const& D = q.loop.dim;
      std::int64_t const gc = sp.gc, cc = sp.cc, jc = sp.jc, bc = sp.bc, oc = sp.oc, rc = sp.rc;
      auto const chunks = [](std::int64_t n, std::int64_t c) { return (n + c - 1) / c; };
      std::int64_t const ng = chunks(G, gc), nc = chunks(C, cc), nj = chunks(J, jc);
      std::int64_t const nr = chunks(D[1].out, rc), no = chunks(D[0].out, oc);
      std::int64_t const units = sp.units;
      at.queue->run(static_cast<std::size_t>(units), t, threads, [&](std::size_t u) {
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
          forward_unit(at, r, s6, o6, d6, post);
          if (epilogue) finished(*epilogue, r, d6);  // the unit's block, while it is in the cache
        } else {
          r.n0 = 0, r.n1 = static_cast<std::int64_t>(q.batch);
          gradient_unit(r, s6, o6, d6);
        }
      });
    }

    /// Runs `epilogue` on the final values of block `r` of the result: the innermost dimensions that lie end to
    /// end form one run; the others are walked like an odometer.
    void finished(Epilogue const& epilogue, simd::ConvRange const& r, simd::Operand6<TO> const& d6) const {
      std::array<std::int64_t, 6> const lo{r.n0, r.lo[0], r.lo[1], r.lo[2], r.g0, r.c0};
      std::array<std::int64_t, 6> const ext{r.n1 - r.n0, r.hi[0] - r.lo[0], r.hi[1] - r.lo[1], r.hi[2] - r.lo[2], r.g1 - r.g0, r.c1 - r.c0};
      if (std::find_if(ext.begin(), ext.end(), [](std::int64_t e) { return e <= 0; }) != ext.end()) return;
      std::int64_t len = 1;
      std::size_t outer = 6;
      while (outer > 0 && (ext[outer - 1] == 1 || d6.stride[outer - 1] == len)) len *= ext[--outer];
      EpilogueRuns runs(&epilogue, d6.data, sizeof(TO), *writes);
      std::array<std::int64_t, 6> idx = lo;
      for (;;) {
        runs.add(d6.at(idx[0], idx[1], idx[2], idx[3], idx[4], idx[5]), len);
        std::size_t d = outer;
        while (d > 0 && ++idx[d - 1] == lo[d - 1] + ext[d - 1]) idx[d - 1] = lo[d - 1], --d;
        if (d == 0) break;
      }
      runs.flush();
    }

    /// The plan's reduction structure for one forward-like unit. With `post`, each result once final gets it: in the
    /// last serial step's stores, or over the block after its partials are summed.
    void forward_unit(Bound const& at, simd::ConvRange r, simd::Operand6<TS const> const& s6, simd::Operand6<TW const> const& o6,
                      simd::Operand6<TO> const& d6, simd::PostOp const* post = nullptr) const {
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
      // Weights packed once per write for this step's channels, if the range is one the bind saw.
      using Packed = simd::PackedForwardWeights;
      auto const packed_for = [&](std::int64_t s0, std::int64_t s1, Packed& pw) -> Packed const* {
        if (!at.direct) return nullptr;
        auto& d = *at.direct;
        auto const it = std::lower_bound(d.ranges.begin(), d.ranges.end(), std::pair{s0, s1});
        if (it == d.ranges.end() || *it != std::pair{s0, s1}) return nullptr;
        auto const k = static_cast<std::size_t>(it - d.ranges.begin());
        auto const C = static_cast<std::int64_t>(p.problem.c);
        for (std::int64_t g = r.g0; g < r.g1; ++g)
          d.cache.ensure(static_cast<std::size_t>(g) * d.ranges.size() + k, [&] {
            float* const panels = d.data + static_cast<std::size_t>(g) * d.group_floats + d.offset[k];
            simd::pack_forward_weights(p.problem.loop, o6, g, C, s0, s1, panels);
          });
        pw = {d.data + d.offset[k], static_cast<std::ptrdiff_t>(d.group_floats), s0, s1};
        return &pw;
      };
      // `last`: the post-op the last step stores through (an f32 result).
      auto const steps = [&](std::int64_t j0, std::int64_t j1, auto const& dst, simd::PostOp const* last = nullptr) {
        p.serial().each(j0, j1, [&](std::size_t s, std::int64_t s0, std::int64_t s1) {
          r.j0 = s0, r.j1 = s1;
          simd::PackedForwardWeights pw;
          simd::conv_forward(p.problem.loop, r, s6, o6, dst, s > 0, wino, packed_for(s0, s1, pw), s1 == j1 ? last : nullptr);
        });
      };
      if (!p.reduce) {
        steps(0, J, d6, post);
        return;
      }
      simd::ConvRange const block = r;
      auto const finish = [&] {
        if constexpr (std::is_same_v<TO, float>) {
          if (post) simd::conv_post_block(block, d6, *post);
        }
      };
      // f32 partials of one serial step each are summed in the kernel (simd::conv_forward_parts: the same bits as
      // reduce_unit below).
      if constexpr (std::is_same_v<TP, float>) {
        if (!wino) {
          thread_local std::vector<simd::ForwardPart> parts;
          thread_local std::vector<Packed> packed;
          parts.clear();
          packed.assign(p.parts(), Packed{});
          bool one_step = true;
          for (std::size_t i = 0; i < p.parts() && one_step; ++i) {
            simd::ConvRange const share = p.part(i);
            if (share.j0 >= share.j1) continue;  // left out of the sum, as the vertices leave it out
            std::size_t n = 0;
            p.serial().each(share.j0, share.j1, [&](std::size_t, std::int64_t, std::int64_t) { ++n; });
            one_step = n == 1;
            parts.push_back({share.j0, share.j1, packed_for(share.j0, share.j1, packed[i])});
          }
          if (one_step && simd::conv_forward_parts(p.problem.loop, r, s6, o6, d6, parts, alpha, p.problem.accumulate))
            return finish();
        }
      }
      Index6 const origin{r.n0, r.lo[0], r.lo[1], r.lo[2], r.g0, r.c0};
      Index6 const shape{r.n1 - r.n0, r.hi[0] - r.lo[0], r.hi[1] - r.lo[1], r.hi[2] - r.lo[2], r.g1 - r.g0, r.c1 - r.c0};
      reduce_unit(origin, shape, [&](std::size_t part, auto const& dst) {
        simd::ConvRange const share = p.part(part);
        if (share.j0 >= share.j1) return false;
        steps(share.j0, share.j1, dst);
        return true;
      }, p.parts(), d6);
      finish();
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
      auto const exists = [&](simd::ConvRange const& share) { return share.n0 < share.n1 && share.lo[rd] < share.hi[rd]; };
      // f32 partials: the kernel sums them as it makes them (simd::conv_weight_gradient_parts: the same bits as the
      // loop below), each column's accumulators in L1 from the first part to the last.
      auto const whole = [&](simd::Operand6<float> const& sum) {
        if constexpr (!std::is_same_v<TP, float>) return false;
        thread_local std::vector<simd::GradientStep> list;
        list.clear();
        for (std::size_t i = 0; i < p.parts(); ++i)
          if (simd::ConvRange const share = p.part(i); exists(share))
            p.serial().each(share.lo[rd], share.hi[rd], [&](std::size_t, std::int64_t s0, std::int64_t s1) {
              simd::GradientStep st{i, r};
              st.range.n0 = share.n0, st.range.n1 = share.n1, st.range.lo[rd] = s0, st.range.hi[rd] = s1;
              list.push_back(st);
            });
        return simd::conv_weight_gradient_parts(q.loop, r, s6, o6, sum, list);
      };
      reduce_unit(origin, shape, [&](std::size_t part, auto const& dst) {
        simd::ConvRange const share = p.part(part);
        if (!exists(share)) return false;
        steps(share.n0, share.n1, share.lo[rd], share.hi[rd], dst);
        return true;
      }, p.parts(), d6, true, whole);
    }

    /// Computes `parts` partials of a unit-shaped block (part(i, dst) writes partial i, of type TP, into dst and
    /// returns true, or returns false for a piece that does not exist), sums them in f32 in order as the reduction
    /// vertices do, and finishes into d6 with alpha (accumulating when the plan does). Pieces that do not exist
    /// are left out of the sum, as the vertices leave them out (the planner's splits make none today).
    /// With `interleave` (weight gradients) and a unit of lanes / C groups of C channels, the partials are laid
    /// out as the kernel's accumulators — group fastest, then channel, then (taps, j) rows a vector apart — so
    /// that conv_weight_gradient accumulates in them in place; otherwise they are row-major.
    /// `whole`, where given, is tried first: whole(sum) makes the summed block in `sum` (laid out as the partials)
    /// and returns true, or returns false having done nothing.
    template <class Part, class Whole = std::nullptr_t>
    void reduce_unit(Index6 const& origin, Index6 const& shape, Part&& part, std::size_t parts,
                     simd::Operand6<TO> const& d6, bool interleave = false, Whole&& whole = nullptr) const {
      std::size_t const inner = static_cast<std::size_t>(shape[5]);
      std::size_t const elems = static_cast<std::size_t>(shape[0] * shape[1] * shape[2] * shape[3] * shape[4] * shape[5]);
      float* sum = simd::detail::conv_scratch(3).get(elems);
      // An f32 partial goes straight into the sum when it is the first: one pass less over the block (a
      // one-partial plan, like the 7² weight update's, then needs no buffer at all).
      constexpr bool first_in_sum = std::is_same_v<TP, float>;
      thread_local std::vector<TP> buf;
      auto op = Block6{origin, shape}.operand(static_cast<TP*>(nullptr));
      auto const L = static_cast<std::int64_t>(simd::lanes);
      if (interleave && shape[0] > 1 && shape[0] * shape[5] == L) {
        op.stride[0] = 1, op.stride[5] = shape[0], op.stride[4] = L;  // group, channel, j
        for (std::size_t d = 3; d >= 1; --d) op.stride[d] = op.stride[d + 1] * shape[d + 1];  // taps
      }
      bool first = true;
      if constexpr (!std::is_same_v<std::decay_t<Whole>, std::nullptr_t>) {
        simd::Operand6<float> const into_sum{sum, op.stride, op.origin};
        first = !whole(into_sum);
        if (!first) parts = 0;
      }
      if (parts > 0 && (!first_in_sum || parts > 1)) buf.assign(elems, TP(0.0f));
      op.data = buf.data();
      for (std::size_t i = 0; i < parts; ++i) {
        if constexpr (first_in_sum) {
          if (first) {
            auto into_sum = op;
            into_sum.data = sum;
            first = !part(i, into_sum);
            continue;
          }
        }
        if (!part(i, op)) continue;
        if (first)
          for (std::size_t e = 0; e < elems; ++e) sum[e] = static_cast<float>(buf[e]);
        else
          simd::add_partial(sum, buf.data(), elems);
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

}  // namespace tilebsp::ops::detail
