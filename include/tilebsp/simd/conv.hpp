// Direct convolution kernels with f32 accumulation, the kernels of tile convolutions: a forward-like pass (the
// forward convolution, and the backward-input pass written as one) and the weight-gradient pass.
//
// Vectors run over output channels. When a group has fewer output channels than a vector has lanes, one vector
// spans several groups: each lane then needs its own group's input channel, so the input window is expanded
// once per block (a lane permute per input element) into a buffer the kernel reads with plain vector loads.
// Otherwise every lane of a vector shares one input value, which the kernel broadcasts.
//
// Arithmetic (what makes tile vertices and host kernels agree bitwise): each result is one chain of f32 fused
// multiply-adds from zero (or from the value it is continued from) in a fixed order — forward: steps (t0, t1, t2,
// j) in row-major order (taps, then reduction channels), except for a 3-wide kernel with stride and dilation 1 in
// dimension 2: (t0, t1, j, t2), the order in which one loaded input serves three neighbouring positions; weight
// gradient: positions (n, o0, o1, o2) in row-major order. Padding and dilation holes read zeros. The result of a
// lane never depends on the other lanes, the block sizes or the instruction set's vector width (given fused
// multiply-add).
#pragma once

#include <tilebsp/core/half.hpp>
#include <tilebsp/simd/arch.hpp>
#include <tilebsp/simd/blocks.hpp>
#include <tilebsp/simd/conv/depthwise.hpp>
#include <tilebsp/simd/conv/forms.hpp>
#include <tilebsp/simd/conv/positions.hpp>
#include <tilebsp/simd/conv/rows.hpp>
#include <tilebsp/simd/conv_loop.hpp>
#include <tilebsp/simd/gemm.hpp>
#include <tilebsp/simd/partials.hpp>
#include <tilebsp/simd/winograd.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

namespace tilebsp::simd {

/// The weights of a forward pass packed ahead for reduction channels [j0, j1) (inference: the weights outlive many
/// runs), as conv_forward's register blocks read them: group g's column pair at output channel c (a multiple of
/// 2 x lanes) at data + g * group_stride + c * taps * (j1 - j0), packed by pack_forward_weights.
struct PackedForwardWeights {
  float const* data = nullptr;
  std::ptrdiff_t group_stride = 0;
  std::int64_t j0 = 0, j1 = 0;
};

/// Floats per group of PackedForwardWeights for `channels` output channels per group over `cj` reduction channels.
inline std::size_t packed_forward_group_floats(ConvLoop const& L, std::int64_t channels, std::int64_t cj) noexcept {
  auto const pair = static_cast<std::int64_t>(2 * lanes);
  return static_cast<std::size_t>((channels + pair - 1) / pair * pair * L.taps() * cj);
}

/// Writes group g's PackedForwardWeights for reduction channels [j0, j1) at `out`: every column pair of its
/// `channels` output channels, as conv_forward would pack them for a block (no-op where the groups are too narrow
/// for column pairs: conv_forward then packs per block).
template <class TW>
void pack_forward_weights(ConvLoop const& L, Operand6<TW const> const& w, std::int64_t g, std::int64_t channels,
                          std::int64_t j0, std::int64_t j1, float* out) {
  auto const pair = static_cast<std::int64_t>(2 * lanes);
  bool const rows_k = detail::row_kernel(L);
  for (auto const& col : detail::conv_columns(g, g + 1, 0, channels)) {
    if (!col.bcast) return;
    detail::pack_weights(L, w, col, j0, j1, out + col.c[0] / pair * pair * L.taps() * (j1 - j0), rows_k);
  }
}

namespace detail {

/// How the register blocks over boxes walk block r: strips (n, o0, rows) in order, as many per pass as fit in
/// Blocks::conv_box (3/16 of L2) of boxes, or all of them where the source is the box (box_in_place); one box layout,
/// X[v0][v1][v2][j][XL] with room for a whole strip (`row_floats` = j x XL per position), or the source's strides.
struct BoxStrips {
  bool in_place;
  std::array<std::int64_t, 3> ext;  ///< the box's extent per dimension (dimension 1: set per strip)
  std::int64_t strip, per_o0, n0s, strips, per_pass;
  std::ptrdiff_t xs0, xs1, xs2, box;
};

template <class TS>
BoxStrips box_strips(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, std::int64_t row_floats,
                     bool in_place) {
  auto const& D = L.dim;
  std::int64_t const ow = r.hi[2] - r.lo[2], nrow = r.hi[1] - r.lo[1];
  BoxStrips b{in_place, {(D[0].taps - 1) * D[0].b + 1, 0, (ow - 1) * D[2].a + (D[2].taps - 1) * D[2].b + 1}, 0, 0,
              r.hi[0] - r.lo[0], 0, 0, 0, 0, 0, 0};
  b.strip = std::min(nrow, strip_rows(L, b.ext, static_cast<std::size_t>(row_floats)));
  b.xs2 = row_floats, b.xs1 = b.xs2 * b.ext[2], b.xs0 = b.xs1 * ((b.strip - 1) * D[1].a + (D[1].taps - 1) * D[1].b + 1);
  b.box = b.xs0 * b.ext[0];
  if (in_place) b.xs0 = src.stride[1], b.xs1 = src.stride[2], b.xs2 = src.stride[3], b.box = 0;
  b.per_o0 = (nrow + b.strip - 1) / b.strip, b.strips = (r.n1 - r.n0) * b.n0s * b.per_o0;
  b.per_pass = in_place ? b.strips : std::max<std::int64_t>(1, static_cast<std::int64_t>(blocks().conv_box / sizeof(float)) / b.box);
  return b;
}

/// Strips [k0, k1) of block r for the columns of `first`'s group over reduction channels [j0, j1): their boxes
/// built (or the source where it is the box), and their output positions in order, each position's inputs in
/// fs.x and its result in fs.d (elements from dst.data, at first's channels).
template <class TS, class TD>
void strip_positions(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, Operand6<TD> const& dst,
                     ConvColumn const& first, std::int64_t j0, std::int64_t j1, BoxStrips const& b, std::int64_t k0,
                     std::int64_t k1, ForwardScratch& fs) {
  auto const& D = L.dim;
  std::int64_t const ow = r.hi[2] - r.lo[2];
  float* xbuf = b.in_place ? nullptr : conv_scratch(2).get(static_cast<std::size_t>((k1 - k0) * b.box));
  std::array<std::int64_t, 3> ext = b.ext;
  fs.x.clear();
  fs.d.clear();
  for (std::int64_t k = k0; k < k1; ++k) {
    std::int64_t const s = r.lo[1] + (k % b.per_o0) * b.strip, s1 = std::min(r.hi[1], s + b.strip);
    std::int64_t const o0 = r.lo[0] + (k / b.per_o0) % b.n0s, n = r.n0 + k / b.per_o0 / b.n0s;
    std::array<std::int64_t, 3> const vlo{o0 * D[0].a + D[0].c, s * D[1].a + D[1].c, r.lo[2] * D[2].a + D[2].c};
    float const* x = nullptr;
    if constexpr (std::is_same_v<TS, float>) {
      if (b.in_place) x = src.at(n, vlo[0], vlo[1], vlo[2], first.g[0], j0);
    }
    if (!b.in_place) {
      float* const box = xbuf + (k - k0) * b.box;
      ext[1] = (s1 - s - 1) * D[1].a + (D[1].taps - 1) * D[1].b + 1;
      build_box(L, src, first, n, vlo, ext, j0, j1, box, b.xs0);
      x = box;
    }
    for (std::int64_t o1 = s; o1 < s1; ++o1) {
      float const* xr = x + (o1 - s) * D[1].a * b.xs1;
      std::ptrdiff_t d = dst.at(n, o0, o1, r.lo[2], first.g[0], first.c[0]) - dst.data;
      for (std::int64_t o2 = 0; o2 < ow; ++o2, xr += D[2].a * b.xs2, d += dst.stride[3]) {
        fs.x.push_back(xr);
        fs.d.push_back(d);
      }
    }
  }
}

}  // namespace detail

/// Applies `post` to block `r` of an f32 channels-last result, already final: bias[channel] for channel
/// g * dst.stride[4] + c * dst.stride[5]; per row of positions, the block's channels as one run where they lie end
/// to end, else a run per group.
inline void conv_post_block(ConvRange const& r, Operand6<float> const& dst, PostOp const& post) noexcept {
  std::int64_t const ow = r.hi[2] - r.lo[2], cc = r.c1 - r.c0;
  if (r.n1 <= r.n0 || r.hi[0] <= r.lo[0] || r.hi[1] <= r.lo[1] || ow <= 0 || r.g1 <= r.g0 || cc <= 0) return;
  bool const one_run = r.g1 - r.g0 == 1 || ((cc == 1 || dst.stride[5] == 1) && dst.stride[4] == cc);
  for (std::int64_t n = r.n0; n < r.n1; ++n)
    for (std::int64_t o0 = r.lo[0]; o0 < r.hi[0]; ++o0)
      for (std::int64_t o1 = r.lo[1]; o1 < r.hi[1]; ++o1)
        for (std::int64_t g = r.g0; g < (one_run ? r.g0 + 1 : r.g1); ++g) {
          PostOp op = post;
          op.bias += g * dst.stride[4] + r.c0 * dst.stride[5];
          auto const cols = static_cast<std::size_t>(one_run ? (r.g1 - r.g0) * cc : cc);
          post_op_rows(dst.at(n, o0, o1, r.lo[2], g, r.c0), dst.stride[3], static_cast<std::size_t>(ow), cols, op);
        }
}

namespace detail {

/// conv_forward's forms for block `r`: true where the form applied `post` as it stored each result (the depthwise
/// kernels; row blocks whose columns' lanes are not permuted), false where it is left to the caller.
template <class TS, class TW, class TD>
bool forward_forms(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, Operand6<TW const> const& w,
                   Operand6<TD> const& dst, bool load, WinoWeights const* wino, PackedForwardWeights const* packed,
                   PostOp const* post) {
  if (L.winograd) return winograd_forward(L, r, src, w, dst, load, wino), false;
  auto const& D = L.dim;
  std::int64_t const cj = r.j1 - r.j0;
  std::size_t const Q = static_cast<std::size_t>(L.taps() * cj);
  std::int64_t const ow = r.hi[2] - r.lo[2];
  if (r.n1 <= r.n0 || ow <= 0 || r.hi[0] <= r.lo[0] || r.hi[1] <= r.lo[1] || Q == 0) return false;
  // The form (simd/conv/forms.hpp). A 3-wide kernel with stride and dilation 1 in dimension 2 runs its steps
  // (t0, t1, j, t2): as row blocks, or as register blocks of outer (t0, t1, j) x inner t2. Otherwise steps
  // (t0, t1, t2, j), outer (t0, t1[, t2]) x inner ([t2,] j): the taps of dimension 2 join the inner steps when
  // they are consecutive in the box (no kernel dilation there).
  if (depthwise_applies<TS, TW, TD>(L, r, src, dst)) return depthwise_forward(L, r, src, w, dst, load, post), true;
  bool const rows_k = row_kernel(L);
  auto cols = conv_columns(r.g0, r.g1, r.c0, r.c1);
  // Broadcast columns read an f32 source with unit channel stride where it lies when no tap of the block reads
  // padding or a dilation hole: the source is then the box (strides its own), and no unit copies it.
  bool const in_place = box_in_place(L, r, src, cols);
  bool const join2 = !rows_k && D[2].b == 1 && (!in_place || src.stride[3] == cj);
  std::size_t const K = static_cast<std::size_t>(rows_k ? D[2].taps : join2 ? D[2].taps * cj : cj), T = Q / K;
  ForwardScratch& fs = forward_scratch();
  if constexpr (std::is_same_v<TD, float>) {
    if (forward_form(L, cols, dst, ow) == DirectForm::forward_rows) {
      source_columns(L, r, src, dst, cols, fs.sidx);
      bool const in_registers = post && forward_rows_post(dst, cols);
      forward_rows(L, r, src, w, dst, load, cols, {fs.sidx.data(), static_cast<std::size_t>(cj)}, in_registers ? post : nullptr);
      return in_registers;
    }
  }
  if (forward_blocks_source_in_place(L, r, src, cols)) return forward_in_place(L, r, src, w, dst, load, cols), false;
  fs.toff.resize(T);
  // Batches of columns that read the same input box (broadcast columns of one group), with their packed weights
  // within a quarter of L2 (Blocks::conv_weights): the box is built once per batch.
  Blocks const bl = blocks();
  for (std::size_t c0 = 0; c0 < cols.size();) {
    std::size_t c1 = c0 + 1, floats = Q * cols[c0].vectors * lanes;
    while (c1 < cols.size() && cols[c0].bcast && cols[c1].bcast && cols[c1].g[0] == cols[c0].g[0] &&
           floats + Q * cols[c1].vectors * lanes <= bl.conv_weights / sizeof(float))
      floats += Q * cols[c1++].vectors * lanes;
    float const* wp = nullptr;
    auto const pair = static_cast<std::int64_t>(2 * lanes);
    if (packed && packed->j0 == r.j0 && packed->j1 == r.j1 && cols[c0].bcast && cols[c0].c[0] % pair == 0) {
      // Column pairs lie end to end there; only a group's last may be narrower, and nothing follows it.
      wp = packed->data + cols[c0].g[0] * packed->group_stride + cols[c0].c[0] * static_cast<std::int64_t>(Q);
    } else {
      float* pw = conv_scratch(0).get(floats);
      wp = pw;
      for (std::size_t c = c0; c < c1; ++c) {
        pack_weights(L, w, cols[c], r.j0, r.j1, pw, rows_k);
        pw += Q * cols[c].vectors * lanes;
      }
    }
    ConvColumn const& first = cols[c0];
    auto const XL = static_cast<std::int64_t>(first.xl);
    BoxStrips const bs = box_strips(L, r, src, cj * XL, in_place);
    std::ptrdiff_t const ks = rows_k ? bs.xs2 : XL;
    {
      std::size_t t = 0;
      for (std::int64_t t0 = 0; t0 < D[0].taps; ++t0)
        for (std::int64_t t1 = 0; t1 < D[1].taps; ++t1)
          for (std::int64_t m = 0; m < (rows_k ? cj : join2 ? 1 : D[2].taps); ++m)
            fs.toff[t++] = t0 * D[0].b * bs.xs0 + t1 * D[1].b * bs.xs1 + (rows_k ? m * XL : m * D[2].b * bs.xs2);
    }
    // The register blocks of a pass run across row, strip and image ends.
    for (std::int64_t k0 = 0; k0 < bs.strips; k0 += bs.per_pass) {
      strip_positions(L, r, src, dst, first, r.j0, r.j1, bs, k0, std::min(bs.strips, k0 + bs.per_pass), fs);
      std::size_t const P = fs.x.size();
      float const* wc = wp;
      for (std::size_t c = c0; c < c1; ++c) {
        ConvColumn const& col = cols[c];
        std::size_t const VL = col.vectors * lanes;
        TD* const base = dst.data + (col.g[0] - first.g[0]) * dst.stride[4] + (col.c[0] - first.c[0]) * dst.stride[5];
        forward_positions(col, P, fs.x.data(), fs.d.data(), T, K, fs.toff.data(), ks, wc, dst, base, load);
        wc += Q * VL;
      }
    }
    c0 = c1;
  }
  return false;
}

}  // namespace detail

/// dst(n, o, g, c) = [dst +] sum over taps t (row-major), then j in [j0, j1), of src(n, v(o, t), g, j) *
/// w(g, t, j, c), for the block `r`; with `load`, each chain continues from the value in dst. A loop marked
/// winograd runs winograd_forward instead (on `wino`, its weights prepared ahead, when given); a depthwise block
/// (detail::depthwise_applies) runs detail::depthwise_forward. Register blocks over boxes read their weights
/// from `packed` where it covers [r.j0, r.j1) (the same floats as packing them here). With `post` (an f32
/// channels-last result: conv_post_block), each result of the block gets it once final: as the depthwise kernels
/// and row blocks store it, or over the block after the other forms.
template <class TS, class TW, class TD>
void conv_forward(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, Operand6<TW const> const& w,
                  Operand6<TD> const& dst, bool load, WinoWeights const* wino = nullptr,
                  PackedForwardWeights const* packed = nullptr, PostOp const* post = nullptr) {
  bool const applied = detail::forward_forms(L, r, src, w, dst, load, wino, packed, post);
  if constexpr (std::is_same_v<TD, float>) {
    if (post && !applied) conv_post_block(r, dst, *post);
  }
}

/// A reduction part of a forward pass (conv_forward_parts): reduction channels [j0, j1), the weights packed ahead
/// where `packed` covers them.
struct ForwardPart {
  std::int64_t j0 = 0, j1 = 0;
  PackedForwardWeights const* packed = nullptr;
};

/// dst = alpha * s, or dst + alpha * s with `accumulate` (scale_into), where s sums the partials p_0, p_1, ... in
/// f32 in part order, the first as it is; p_k is the chain conv_forward computes for block r over parts[k]'s
/// reduction channels, from zero. These are the bits of the reduction vertices' sum of f32 partials, but no
/// partial leaves the registers except into its block's sums, and one box holds every part's channels (or the
/// source in place: detail::box_in_place). Returns false, computing nothing, unless the block's partials would run
/// as register blocks over boxes of broadcast columns (then conv_forward computes each part).
template <class TS, class TW, class TO>
bool conv_forward_parts(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src,
                        Operand6<TW const> const& w, Operand6<TO> const& dst, std::vector<ForwardPart> const& parts,
                        float alpha, bool accumulate) {
  using namespace detail;
  auto const& D = L.dim;
  std::int64_t const ow = r.hi[2] - r.lo[2];
  if (L.winograd || parts.empty() || r.n1 <= r.n0 || ow <= 0 || r.hi[0] <= r.lo[0] || r.hi[1] <= r.lo[1]) return false;
  auto const cols = conv_columns(r.g0, r.g1, r.c0, r.c1);
  if (!broadcast_columns(cols)) return false;
  std::int64_t jlo = parts.front().j0, jhi = parts.front().j1;
  for (ForwardPart const& p : parts) {
    if (p.j0 >= p.j1) return false;
    jlo = std::min(jlo, p.j0), jhi = std::max(jhi, p.j1);
  }
  // The form of the partials' blocks, as conv_forward chooses it for a row-major block of f32 partials.
  std::int64_t const CB = r.c1 - r.c0;
  Operand6<float> const rows_probe{nullptr, {0, 0, 0, 0, CB, 1}, {}};
  if (forward_form(L, cols, rows_probe, ow) == DirectForm::forward_rows) return false;
  bool const rows_k = row_kernel(L), in_place = box_in_place(L, r, src, cols);
  std::int64_t const cjb = jhi - jlo, taps = L.taps();
  ForwardScratch& fs = forward_scratch();
  BoxStrips const bs = box_strips(L, r, src, cjb, in_place);
  std::ptrdiff_t const xs0 = bs.xs0, xs1 = bs.xs1, xs2 = bs.xs2;
  // Each part's steps in the box: T outer offsets (fs.toff from steps[k].at) of K inner steps ks apart, in
  // conv_forward's order.
  struct Steps {
    std::size_t T, K, at, Q;
    std::ptrdiff_t ks;
  };
  thread_local std::vector<Steps> steps;  // per-thread lists, as ForwardScratch's: no allocation per unit
  thread_local std::vector<float const*> wk;
  steps.resize(parts.size());
  wk.resize(parts.size());
  fs.toff.clear();
  for (std::size_t k = 0; k < parts.size(); ++k) {
    std::int64_t const cj = parts[k].j1 - parts[k].j0, jo = parts[k].j0 - jlo;
    bool const join2 = !rows_k && D[2].b == 1 && xs2 == cj;
    steps[k] = {0, static_cast<std::size_t>(rows_k ? D[2].taps : join2 ? D[2].taps * cj : cj), fs.toff.size(),
                static_cast<std::size_t>(taps * cj), rows_k ? xs2 : 1};
    for (std::int64_t t0 = 0; t0 < D[0].taps; ++t0)
      for (std::int64_t t1 = 0; t1 < D[1].taps; ++t1)
        for (std::int64_t m = 0; m < (rows_k ? cj : join2 ? 1 : D[2].taps); ++m)
          fs.toff.push_back(t0 * D[0].b * xs0 + t1 * D[1].b * xs1 + jo + (rows_k ? m : m * D[2].b * xs2));
    steps[k].T = fs.toff.size() - steps[k].at;
  }
  auto const pair = static_cast<std::int64_t>(2 * lanes);
  for (std::size_t c0 = 0; c0 < cols.size();) {  // the columns of a group share its boxes
    std::size_t c1 = c0 + 1;
    while (c1 < cols.size() && cols[c1].g[0] == cols[c0].g[0]) ++c1;
    ConvColumn const& first = cols[c0];
    for (std::int64_t k0 = 0; k0 < bs.strips; k0 += bs.per_pass) {
      strip_positions(L, r, src, dst, first, jlo, jhi, bs, k0, std::min(bs.strips, k0 + bs.per_pass), fs);
      std::size_t const P = fs.x.size();
      float* const sums = conv_scratch(1).get(P * 2 * lanes);
      for (std::size_t c = c0; c < c1; ++c) {
        ConvColumn const& col = cols[c];
        std::size_t const VL = col.vectors * lanes;
        fs.rows.resize(P);
        for (std::size_t i = 0; i < P; ++i) fs.rows[i] = sums + i * VL;
        // Each part's weights: packed ahead, or packed here.
        std::size_t own = 0;
        for (std::size_t k = 0; k < parts.size(); ++k) {
          PackedForwardWeights const* pk = parts[k].packed;
          bool const ahead = pk && pk->j0 == parts[k].j0 && pk->j1 == parts[k].j1 && col.c[0] % pair == 0;
          auto const Q = static_cast<std::int64_t>(steps[k].Q);
          wk[k] = ahead ? pk->data + col.g[0] * pk->group_stride + col.c[0] * Q : nullptr;
          if (!ahead) own += steps[k].Q * VL;
        }
        float* pw = own ? conv_scratch(0).get(own) : nullptr;
        for (std::size_t k = 0; k < parts.size(); ++k)
          if (!wk[k]) {
            pack_weights(L, w, col, parts[k].j0, parts[k].j1, pw, rows_k);
            wk[k] = pw;
            pw += steps[k].Q * VL;
          }
        with_column(col, [&]<std::size_t VV, std::size_t XX>() {
          constexpr std::size_t RB = block_rows(VV);
          std::size_t const np = (P + RB - 1) / RB;
          for (std::size_t k = 0; k < parts.size(); ++k)
            for (std::size_t b = 0; b < np; ++b) {
              std::size_t const i0 = P * b / np, i1 = P * (b + 1) / np;
              with_rows<VV, XX>(i1 - i0, [&]<std::size_t RR, std::size_t V2, std::size_t X2>() {
                forward_block<RR, V2, X2>(steps[k].T, steps[k].K, fs.toff.data() + steps[k].at, steps[k].ks, wk[k],
                                          fs.x.data() + i0, sums, fs.rows.data() + i0, nullptr, nullptr, 0, k > 0);
              });
            }
        });
        std::size_t used = 0;
        while (used < VL && col.g[used] >= 0) ++used;
        TO* const base = dst.data + (col.c[0] - first.c[0]) * dst.stride[5];
        for (std::size_t i = 0; i < P; ++i) {
          if (accumulate) scale_into<TO, true>(fs.rows[i], base + fs.d[i], dst.stride[5], used, alpha);
          else scale_into<TO, false>(fs.rows[i], base + fs.d[i], dst.stride[5], used, alpha);
        }
      }
    }
    c0 = c1;
  }
  return true;
}

/// One serial step of one partial of a weight gradient (conv_weight_gradient_parts): the images [n0, n1) and the
/// output positions [lo, hi) of `range`, continuing the chains of the steps of the same partial before it.
struct GradientStep {
  std::size_t part = 0;
  ConvRange range;
};

namespace detail {
template <class TS, class TY, class TD>
void weight_gradient(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, Operand6<TY const> const& dy,
                     Operand6<TD> const& dst, bool load, std::vector<GradientStep> const* steps);
}  // namespace detail

/// dst(g, t, j, c) = [dst +] sum over positions (n, o) of block `r` in row-major order of src(n, v(o, t), g, j) *
/// dy(n, o, g, c), for every tap t and j in [j0, j1); with `load`, each chain continues from the value in dst.
template <class TS, class TY, class TD>
void conv_weight_gradient(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src,
                          Operand6<TY const> const& dy, Operand6<TD> const& dst, bool load) {
  detail::weight_gradient(L, r, src, dy, dst, load, nullptr);
}

/// The partials of a weight gradient summed in order, as the final reduction sums them: `steps` in order, each
/// partial's chains as conv_weight_gradient makes them over its steps (from zero), sum = p0, then sum += p1, ...,
/// into `sum` (f32). The groups, channels and reduction channels are r's. Returns false, doing nothing, where the
/// accumulators cannot live in `sum` itself (its layout is not the kernels'): the caller sums the partials then.
template <class TS, class TY>
bool conv_weight_gradient_parts(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src,
                                Operand6<TY const> const& dy, Operand6<float> const& sum,
                                std::vector<GradientStep> const& steps) {
  for (auto const& col : detail::conv_columns(r.g0, r.g1, r.c0, r.c1))
    if (!detail::gradient_column(L, r, src, sum, col).in_place) return false;
  detail::weight_gradient(L, r, src, dy, sum, false, &steps);
  return true;
}

namespace detail {
/// conv_weight_gradient, or with `steps` conv_weight_gradient_parts (then the accumulators lie in dst).
template <class TS, class TY, class TD>
void weight_gradient(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, Operand6<TY const> const& dy,
                     Operand6<TD> const& dst, bool load, std::vector<GradientStep> const* steps) {
  auto const& D = L.dim;
  std::int64_t const cj = r.j1 - r.j0;
  std::size_t const Q = static_cast<std::size_t>(L.taps() * cj);
  std::int64_t const ow = r.hi[2] - r.lo[2];
  if (Q == 0) return;
  GradientScratch& gs = gradient_scratch();
  auto &qoff = gs.qoff, &drow = gs.drow, &poff = gs.poff;
  qoff.resize(Q);
  drow.resize(Q);
  for (auto const& col : conv_columns(r.g0, r.g1, r.c0, r.c1)) {
    std::size_t const VL = col.vectors * lanes, XL = col.xl;
    // The form and placements (simd/conv/forms.hpp): row blocks or register blocks; the accumulator rows (t, j)
    // in dst itself or copied in and out; the source read in place or from a box.
    GradientColumn const gc = gradient_column(L, r, src, dst, col);
    bool const in_place = gc.in_place, row_blocks = gc.form == DirectForm::gradient_rows;
    std::ptrdiff_t const* const doff = gc.doff;
    std::int64_t const nj = gc.nj;
    std::ptrdiff_t yoff[2 * lanes];
    std::size_t yused = 0;
    bool const ycontig = lane_offsets(dy, col, yoff, yused) && std::is_same_v<TY, float>;
    TD* const d0 = dst.at(col.g[0], 0, 0, 0, r.j0, col.c[0]);
    if (!in_place) {
      std::size_t q = 0;
      for (std::int64_t t0 = 0; t0 < D[0].taps; ++t0)
        for (std::int64_t t1 = 0; t1 < D[1].taps; ++t1)
          for (std::int64_t t2 = 0; t2 < D[2].taps; ++t2)
            for (std::int64_t j = 0; j < cj; ++j, ++q)
              drow[q] = t0 * dst.stride[1] + t1 * dst.stride[2] + t2 * dst.stride[3] + j * dst.stride[4];
    }
    float* acc = nullptr;
    if constexpr (std::is_same_v<TD, float>) {
      if (in_place) acc = d0;
    }
    if (!acc) acc = conv_scratch(0).get(Q * VL);
    // With steps, the first partial's chains run in the sum itself (d0), each later one's in a buffer added to it.
    float* const sum = acc;
    float* const later = steps ? conv_scratch(0).get(Q * VL) : nullptr;
    // An interleaved column reads a position's output gradients with one load and one permutation.
    alignas(64) std::int32_t yidx[lanes], unused[lanes];
    bool const yperm = !ycontig && std::is_same_v<TY, float> && VL == lanes && lane_permutation(yoff, VL, unused);
    for (std::size_t l = 0; yperm && l < lanes; ++l) yidx[l] = static_cast<std::int32_t>(yoff[l]);
    // Row blocks run (t0, t1) x channels [j, j + nj) x the three taps along the row. Without `load` the
    // accumulators start from zero: row blocks start each from zero in registers the first time a kernel runs it,
    // and those no kernel ran are zeroed at the end; the register blocks zero them all.
    std::int64_t const chunks_j = (cj + nj - 1) / nj;
    auto const started = [&](std::int64_t t01, std::int64_t j) -> unsigned char& {
      return gs.touched[static_cast<std::size_t>(t01 * chunks_j + j / nj)];
    };
    // Chains that start from zero (a partial's) or from the values in acc (`load`).
    auto const begin = [&](bool from_acc) {
      if (row_blocks) gs.touched.assign(static_cast<std::size_t>(D[0].taps * D[1].taps * chunks_j), from_acc ? 1 : 0);
      else if (!from_acc) std::memset(acc, 0, Q * VL * sizeof(float));
    };
    auto const zero_unstarted = [&] {  // the row blocks no kernel started
      if (row_blocks)
        for (std::int64_t t01 = 0; t01 < D[0].taps * D[1].taps; ++t01)
          for (std::int64_t j = 0; j < cj; j += nj)
            if (!started(t01, j))
              for (std::int64_t k = 0; k < 3; ++k)
                std::memset(acc + (t01 * 3 * cj + k * cj + j) * static_cast<std::int64_t>(VL), 0,
                            static_cast<std::size_t>(std::min(nj, cj - j)) * VL * sizeof(float));
    };
    begin(load);
    if (load && !in_place)  // initial values from dst
      for (std::size_t q = 0; q < Q; ++q) load_lanes(acc + q * VL, d0 + drow[q], doff, VL);
    std::array<std::int64_t, 3> const ext{(D[0].taps - 1) * D[0].b + 1, 0, (ow - 1) * D[2].a + (D[2].taps - 1) * D[2].b + 1};
    std::int64_t const strip = strip_rows(L, ext, static_cast<std::size_t>(cj) * XL);
    bool const direct = gc.source_in_place, prefetch_rows = gc.prefetch_rows;
    // A strip's positions in row-major order, in chunks of whole output rows that pass through the accumulators
    // once: up to about 128 positions whose rows of the input box stay within L1 (Blocks::l1).
    std::int64_t const box_row = ext[2] * cj * static_cast<std::int64_t>(XL) * 4;
    std::int64_t const chunk = std::clamp<std::int64_t>(static_cast<std::int64_t>(blocks().l1) / std::max<std::int64_t>(1, box_row) - (D[1].taps - 1) * D[1].b,
                                                        1, std::max<std::int64_t>(1, 128 / ow));
    float* yrow = ow > 0 ? conv_scratch(1).get(static_cast<std::size_t>(std::min(strip, chunk) * ow) * VL) : nullptr;
    // The positions of one step (r's own, or one of `steps`) into the chains in acc.
    auto const run = [&](ConvRange const& rs) {
      bool const work = rs.n1 > rs.n0 && ow > 0 && rs.hi[0] > rs.lo[0] && rs.hi[1] > rs.lo[1];
      for (std::int64_t n = rs.n0; work && n < rs.n1; ++n)
        for (std::int64_t o0 = rs.lo[0]; o0 < rs.hi[0]; ++o0)
          for (std::int64_t s = rs.lo[1]; s < rs.hi[1]; s += strip) {
            std::int64_t const s1 = std::min(rs.hi[1], s + strip);
            StripBox box{};
            if constexpr (std::is_same_v<TS, float>) {
              if (direct)
                box = {src.at(n, o0 * D[0].a + D[0].c, s * D[1].a + D[1].c, D[2].c, col.g[0], r.j0), src.stride[1], src.stride[2],
                       src.stride[3]};
            }
            if (!direct) box = build_strip(L, src, col, n, o0, s, s1, r.lo[2], ow, r.j0, r.j1, row_blocks ? nullptr : qoff.data());
            auto const [x, xs0, xs1, xs2] = box;
            for (std::int64_t c0 = s; c0 < s1; c0 += chunk) {
              std::int64_t const c1 = std::min(s1, c0 + chunk);
              auto const P = static_cast<std::size_t>((c1 - c0) * ow);
              if (!row_blocks) poff.resize(P);
              float* yo = yrow;
              for (std::int64_t o1 = c0, i = 0; o1 < c1; ++o1) {
                TY const* yp = dy.at(n, o0, o1, r.lo[2], col.g[0], col.c[0]);
                for (std::int64_t p = 0; p < ow; ++p, ++i, yp += dy.stride[3], yo += VL) {
                  if (!row_blocks) poff[static_cast<std::size_t>(i)] = (o1 - s) * D[1].a * xs1 + p * D[2].a * xs2;
                  if constexpr (std::is_same_v<TY, float>) {
                    if (yperm) {
                      permute_lanes(batch<float>::load_unaligned(yp), yidx).store_aligned(yo);
                      continue;
                    }
                    if (ycontig && yused == VL) {
                      copy_floats(yo, yp, VL);
                      continue;
                    }
                  }
                  load_lanes(yo, yp, yoff, VL);
                }
              }
              with_column(col, [&]<std::size_t VV, std::size_t XX>() {
                // Rows of inputs that are padding or dilation holes, and a row's first and last input when padding,
                // are skipped (as in forward_rows: the sums do not change).
                if (row_blocks) {
                  bool const z0 = D[2].source(D[2].c) < 0, z1 = D[2].source(D[2].c + ow + 1) < 0;
                  for (std::int64_t t01 = 0; t01 < D[0].taps * D[1].taps; ++t01) {
                    std::int64_t const t0 = t01 / D[1].taps, t1 = t01 % D[1].taps;
                    if (!D[0].reads(o0, t0)) continue;
                    auto const valid = [&](std::int64_t o1) { return D[1].reads(o1, t1); };
                    for (std::int64_t a = c0; a < c1;) {  // runs [a, b) of rows with inputs
                      if (!valid(a)) {
                        ++a;
                        continue;
                      }
                      std::int64_t b = a + 1;
                      while (b < c1 && valid(b)) ++b;
                      for (std::int64_t j = 0; j < cj; j += nj) {
                        std::size_t const q0 = static_cast<std::size_t>(t01 * 3 * cj + j);
                        unsigned char& begun = started(t01, j);
                        // A column's vectors in kernels of KV vectors each (all of them, or one at a time where the
                        // registers hold more reduction channels of one vector).
                        constexpr std::size_t KV = grad_kernel_vectors(VV);
                        for (std::size_t h = 0; h < VV; h += KV)
                          with_grad_channels<KV, XX>(static_cast<std::size_t>(std::min(nj, cj - j)), [&]<std::size_t RJ, std::size_t V2, std::size_t X2>() {
                            gradient_row_block<RJ, V2, X2, VV>(static_cast<std::size_t>(b - a), static_cast<std::size_t>(ow),
                                                               yrow + (a - c0) * ow * static_cast<std::int64_t>(VL) + h * lanes,
                                                               x + t0 * D[0].b * xs0 + t1 * D[1].b * xs1 + j * static_cast<std::ptrdiff_t>(XX) +
                                                                   (a - s) * D[1].a * xs1,
                                                               D[1].a * xs1, xs2, acc + q0 * VL + h * lanes,
                                                               static_cast<std::ptrdiff_t>(cj * VL), z0, z1, !begun, prefetch_rows);
                          });
                        begun = 1;
                      }
                      a = b;
                    }
                  }
                  return;
                }
                constexpr std::size_t RB = block_rows(VV);
                for (std::size_t q0 = 0; q0 < Q; q0 += RB) {
                  std::size_t const rows = std::min(RB, Q - q0);
                  with_rows<VV, XX>(rows, [&]<std::size_t RR, std::size_t V2, std::size_t X2>() {
                    gradient_block<RR, V2, X2>(P, yrow, x, poff.data(), qoff.data() + q0, acc + q0 * VL);
                  });
                }
              });
            }
          }
    };
    if (!steps) {
      run(r);
      zero_unstarted();
    } else {
      for (std::size_t i = 0; i < steps->size(); ++i) {
        GradientStep const& st = (*steps)[i];
        if (i > 0 && st.part != (*steps)[i - 1].part) {
          acc = later;
          begin(false);
        }
        run(st.range);
        if (i + 1 < steps->size() && (*steps)[i + 1].part == st.part) continue;
        zero_unstarted();  // the partial is complete
        if (acc != sum) add_partial(sum, acc, Q * VL);
      }
      if (steps->empty()) std::memset(sum, 0, Q * VL * sizeof(float));
    }
    if (!in_place)
      for (std::size_t q = 0; q < Q; ++q) store_lanes(d0 + drow[q], acc + q * VL, doff, VL, gc.dcontig, gc.dused);
  }
}
}  // namespace detail

}  // namespace tilebsp::simd
