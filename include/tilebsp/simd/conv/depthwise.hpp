// Convolution kernels, the depthwise form: groups of one input and one output channel (MobileNet's and
// EfficientNet's depthwise layers), each vector of lanes over consecutive groups, reading the source where it lies.
#pragma once

#include <tilebsp/simd/arch.hpp>
#include <tilebsp/simd/conv/blocks.hpp>
#include <tilebsp/simd/conv/columns.hpp>
#include <tilebsp/simd/conv_loop.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

namespace tilebsp::simd::detail {

/// A source row of depthwise_positions that lies in the padding.
inline constexpr std::ptrdiff_t no_row = std::numeric_limits<std::ptrdiff_t>::min();

/// Whether conv_forward runs block `r` as depthwise_forward: f32 operands, one reduction and one output channel
/// per group in the block, at least a vector of groups, consecutive in the source and the result, no input
/// dilation, at most 64 taps in dimensions 0 and 1 together, a stride in dimension 1 or 2, and 32 vector registers
/// (AVX-512). Measured: with 16 registers (AVX2) the strided layers ran slower than in the in-place register
/// blocks; stride-1 layers ran slower than in the row blocks, and slower than the boxes where the positions next to
/// the padding, one at a time here, are many (5x5 kernels over 14x14 and 7x7 outputs).
template <class TS, class TW, class TD>
bool depthwise_applies(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, Operand6<TD> const& dst) noexcept {
  if constexpr (!std::is_same_v<TS, float> || !std::is_same_v<TW, float> || !std::is_same_v<TD, float>) {
    return false;
  } else {
    auto const& D = L.dim;
    return !L.winograd && r.j1 - r.j0 == 1 && r.c1 - r.c0 == 1 && r.g1 - r.g0 >= static_cast<std::int64_t>(lanes) &&
           src.stride[4] == 1 && dst.stride[4] == 1 && D[0].div == 1 && D[1].div == 1 && D[2].div == 1 &&
           D[0].taps * D[1].taps <= 64 && lanes >= 16 && (D[1].a > 1 || D[2].a > 1);
  }
}

/// P positions of one output row (o2, o2 + 1, ...) over every vector of groups [0, G) from g0: each lane's chain of
/// multiply-adds over the taps in row-major order (t0, t1, t2), from zero or (load) from dst. rows[k]: where in src
/// the row that taps (t0, t1) number k read lies, at group g0 (no_row: padding); a tap that reads padding
/// multiplies a zero, as the boxes of the other forms hold zeros there. wp: the weights, tap t's at wp + t * gp.
/// Each tap is checked: the positions next to the padding, and kernels without a depthwise_inside.
template <std::size_t P>
void depthwise_positions(ConvDim const& d2, std::int64_t o2, float const* src, std::ptrdiff_t const* rows, std::size_t nrows,
                         std::ptrdiff_t s3, float const* wp, std::size_t gp, std::int64_t G, float* out, std::ptrdiff_t ds,
                         bool load, PostOp const* post) {
  auto const K = static_cast<std::size_t>(d2.taps);
  batch<float> const zero(0.0f);
  for (std::int64_t g = 0; g < G; g += static_cast<std::int64_t>(lanes)) {
    auto const n = static_cast<std::size_t>(std::min<std::int64_t>(static_cast<std::int64_t>(lanes), G - g));
    bool const whole = n == lanes;
    batch<float> acc[P];
    for (std::size_t p = 0; p < P; ++p) {
      float* const o = out + static_cast<std::ptrdiff_t>(p) * ds + g;
      acc[p] = !load ? zero : whole ? batch<float>::load_unaligned(o) : load_partial(o, n);
    }
    float const* w = wp + g;
    for (std::size_t k = 0; k < nrows; ++k) {
      std::ptrdiff_t const row = rows[k];
      for (std::size_t t2 = 0; t2 < K; ++t2, w += gp) {
        batch<float> const wv = batch<float>::load_unaligned(w);
        std::int64_t const v = o2 * d2.a + static_cast<std::int64_t>(t2) * d2.b + d2.c;  // position 0's source
        for (std::size_t p = 0; p < P; ++p) {
          std::int64_t const vp = v + static_cast<std::int64_t>(p) * d2.a;
          batch<float> x = zero;
          if (row != no_row && vp >= 0 && vp < d2.in) {
            float const* const at = src + row + vp * s3 + g;
            x = whole ? batch<float>::load_unaligned(at) : load_partial(at, n);
          }
          acc[p] = fma(x, wv, acc[p]);
        }
      }
    }
    if (post) {
      batch<float> const bias = whole ? batch<float>::load_unaligned(post->bias + g) : load_partial(post->bias + g, n);
      for (std::size_t p = 0; p < P; ++p) acc[p] = post->apply(acc[p], bias);
    }
    for (std::size_t p = 0; p < P; ++p) {
      float* const o = out + static_cast<std::ptrdiff_t>(p) * ds + g;
      if (whole) acc[p].store_unaligned(o);
      else store_partial(acc[p], o, n);
    }
  }
}

/// Tap q of a row of the source (q = p * A + t2 from position 0's first) into position p's chain, where it is one of
/// p's taps (t2 < K).
template <std::size_t p, std::size_t q, std::size_t K, std::size_t A, std::size_t P>
[[gnu::always_inline]] inline void depthwise_tap(batch<float> const& x, batch<float> const (&wv)[K], batch<float> (&acc)[P]) noexcept {
  if constexpr (q >= p * A && q - p * A < K) fma_in_registers(acc[p], x, wv[q - p * A]);
}

/// One source row of P positions with K taps at stride A (kernel dilation 1), none in the padding: each of the
/// (P - 1) * A + K source positions is loaded once and multiplied into every position whose tap it is; a chain
/// still takes its taps in order (t2 rising as the source position does). Whole: a whole vector of groups, else
/// the first n lanes.
template <std::size_t P, std::size_t K, std::size_t A, bool Whole, std::size_t... q, std::size_t... p>
[[gnu::always_inline]] inline void depthwise_row(float const* x0, std::ptrdiff_t s3, std::size_t n, batch<float> const (&wv)[K],
                                                 batch<float> (&acc)[P], std::index_sequence<q...>, std::index_sequence<p...>) noexcept {
  auto const one = [&]<std::size_t Q>() {
    float const* const at = x0 + static_cast<std::ptrdiff_t>(Q) * s3;
    batch<float> x;
    if constexpr (Whole) x = batch<float>::load_unaligned(at);
    else x = load_partial(at, n);
    in_register(x);  // loaded once for the K positions it serves (GCC would fold a load into each multiply-add)
    (depthwise_tap<p, Q, K, A, P>(x, wv, acc), ...);
  };
  (one.template operator()<q>(), ...);
}

/// depthwise_positions for P positions whose taps in dimension 2 all read the source (K taps at stride A, kernel
/// dilation 1): the same chains, each source vector loaded once per row (depthwise_row).
template <std::size_t P, std::size_t K, std::size_t A>
void depthwise_inside(ConvDim const& d2, std::int64_t o2, float const* src, std::ptrdiff_t const* rows, std::size_t nrows,
                      std::ptrdiff_t s3, float const* wp, std::size_t gp, std::int64_t G, float* out, std::ptrdiff_t ds, bool load,
                      PostOp const* post) {
  std::ptrdiff_t const first = (o2 * d2.a + d2.c) * s3;  // position 0's first tap in a row
  auto const block = [&]<bool Whole>(std::int64_t g, std::size_t n) {
    batch<float> acc[P];
    for (std::size_t i = 0; i < P; ++i) {
      float* const o = out + static_cast<std::ptrdiff_t>(i) * ds + g;
      if (!load) acc[i] = batch<float>(0.0f);
      else if constexpr (Whole) acc[i] = batch<float>::load_unaligned(o);
      else acc[i] = load_partial(o, n);
    }
    float const* w = wp + g;
    for (std::size_t k = 0; k < nrows; ++k, w += K * gp) {
      batch<float> wv[K];
      for (std::size_t t = 0; t < K; ++t) {
        wv[t] = batch<float>::load_unaligned(w + t * gp);
        in_register(wv[t]);
      }
      if (rows[k] == no_row) {  // a row of padding: its taps multiply zeros, in the same order
        batch<float> const zero(0.0f);
        for (std::size_t t = 0; t < K; ++t)
          for (std::size_t i = 0; i < P; ++i) fma_in_registers(acc[i], zero, wv[t]);
        continue;
      }
      depthwise_row<P, K, A, Whole>(src + rows[k] + first + g, s3, n, wv, acc, std::make_index_sequence<(P - 1) * A + K>{},
                                    std::make_index_sequence<P>{});
    }
    if (post) {  // the bias loaded after the products, whose weights' registers are free then
      PostOp const op = *post;
      batch<float> bias;
      if constexpr (Whole) bias = batch<float>::load_unaligned(op.bias + g);
      else bias = load_partial(op.bias + g, n);
      for (std::size_t i = 0; i < P; ++i) acc[i] = op.apply(acc[i], bias);
    }
    for (std::size_t i = 0; i < P; ++i) {
      float* const o = out + static_cast<std::ptrdiff_t>(i) * ds + g;
      if constexpr (Whole) acc[i].store_unaligned(o);
      else store_partial(acc[i], o, n);
    }
  };
  auto const L = static_cast<std::int64_t>(lanes);
  std::int64_t g = 0;
  for (; g + L <= G; g += L) block.template operator()<true>(g, lanes);
  if (g < G) block.template operator()<false>(g, static_cast<std::size_t>(G - g));
}

/// conv_forward for a block where depthwise_applies: per output row, the source rows its taps read, then blocks of
/// positions over every vector of the block's groups, each position's results written whole. No box, no packed
/// columns: the source is read in place, padding taps multiply zeros.
template <class TS, class TW, class TD>
void depthwise_forward(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, Operand6<TW const> const& w,
                       Operand6<TD> const& dst, bool load, PostOp const* post = nullptr) {
  if constexpr (std::is_same_v<TS, float> && std::is_same_v<TW, float> && std::is_same_v<TD, float>) {
    auto const& D = L.dim;
    std::int64_t const G = r.g1 - r.g0;
    auto const gp = static_cast<std::size_t>((G + static_cast<std::int64_t>(lanes) - 1) / static_cast<std::int64_t>(lanes)) * lanes;
    auto const T = static_cast<std::size_t>(L.taps());
    // The weights by tap, the groups of each consecutive (gp floats, the last vector's spare lanes zero).
    float* const wp = conv_scratch(0).get(T * gp);
    for (std::size_t t = 0; t < T; ++t) {
      auto const t2 = static_cast<std::int64_t>(t) % D[2].taps, t1 = static_cast<std::int64_t>(t) / D[2].taps % D[1].taps,
                 t0 = static_cast<std::int64_t>(t) / D[2].taps / D[1].taps;
      float* const o = wp + t * gp;
      for (std::int64_t g = 0; g < G; ++g) o[g] = *w.at(r.g0 + g, t0, t1, t2, r.j0, r.c0);
      std::fill(o + G, o + gp, 0.0f);
    }
    // The post-op at the block's first group (lanes over consecutive groups of one channel: channel g).
    PostOp block_post{nullptr};
    if (post) block_post = *post, block_post.bias += r.g0 * dst.stride[4];
    PostOp const* const gpost = post ? &block_post : nullptr;
    std::array<std::ptrdiff_t, 64> rows{};
    // Offsets in src of (n, v0, v1, 0, g0, j0), from the origin (as Operand6::at, without forming a pointer to the
    // row's virtual start, which a window of the source need not hold).
    auto const offset = [&](std::int64_t n, std::int64_t v0, std::int64_t v1) {
      std::int64_t const i[6] = {n, v0, v1, 0, r.g0, r.j0};
      std::ptrdiff_t off = 0;
      for (int k = 0; k < 6; ++k) off += static_cast<std::ptrdiff_t>(i[k] - src.origin[k]) * src.stride[k];
      return off;
    };
    auto const nrows = static_cast<std::size_t>(D[0].taps * D[1].taps);
    std::ptrdiff_t const s3 = src.stride[3], ds = dst.stride[3];
    // Positions whose taps in dimension 2 all read the source, in blocks of PB (fewer at the end), for the kernels of
    // mobilenet's and efficientnet's layers; the others (next to padding, other kernels) one at a time, checked.
    using Inside = void (*)(ConvDim const&, std::int64_t, float const*, std::ptrdiff_t const*, std::size_t, std::ptrdiff_t,
                            float const*, std::size_t, std::int64_t, float*, std::ptrdiff_t, bool, PostOp const*);
    constexpr std::size_t PB = lanes >= 16 ? 12 : 8;  // accumulators, beside K weights and a source vector
    std::array<Inside, 4> fast{};                      // blocks of PB, 4, 2 and 1 positions
    auto const kernels = [&]<std::size_t K, std::size_t A>() {
      fast = {depthwise_inside<PB, K, A>, depthwise_inside<4, K, A>, depthwise_inside<2, K, A>, depthwise_inside<1, K, A>};
    };
    if (D[2].b == 1) {
      if (D[2].taps == 3 && D[2].a == 1) kernels.template operator()<3, 1>();
      else if (D[2].taps == 3 && D[2].a == 2) kernels.template operator()<3, 2>();
      else if (D[2].taps == 5 && D[2].a == 1) kernels.template operator()<5, 1>();
      else if (D[2].taps == 5 && D[2].a == 2) kernels.template operator()<5, 2>();
    }
    // [in0, in1): the positions of the block whose taps in dimension 2 all read the source (an interval).
    std::int64_t in0 = r.lo[2], in1 = r.hi[2];
    auto const inside2 = [&](std::int64_t o2) { return D[2].reads(o2, 0) && D[2].reads(o2, D[2].taps - 1); };
    while (in0 < in1 && !inside2(in0)) ++in0;
    while (in1 > in0 && !inside2(in1 - 1)) --in1;
    for (std::int64_t n = r.n0; n < r.n1; ++n)
      for (std::int64_t o0 = r.lo[0]; o0 < r.hi[0]; ++o0)
        for (std::int64_t o1 = r.lo[1]; o1 < r.hi[1]; ++o1) {
          for (std::int64_t t0 = 0, k = 0; t0 < D[0].taps; ++t0)
            for (std::int64_t t1 = 0; t1 < D[1].taps; ++t1, ++k) {
              std::int64_t const v0 = D[0].source(o0 * D[0].a + t0 * D[0].b + D[0].c);
              std::int64_t const v1 = v0 < 0 ? -1 : D[1].source(o1 * D[1].a + t1 * D[1].b + D[1].c);
              rows[static_cast<std::size_t>(k)] = v1 < 0 ? no_row : offset(n, v0, v1);
            }
          auto const out = [&](std::int64_t o2) { return dst.at(n, o0, o1, o2, r.g0, r.c0); };
          if (!fast[0]) {  // checked blocks of 8 positions
            for (std::int64_t o2 = r.lo[2]; o2 < r.hi[2]; o2 += 8) {
              if (r.hi[2] - o2 >= 8) depthwise_positions<8>(D[2], o2, src.data, rows.data(), nrows, s3, wp, gp, G, out(o2), ds, load, gpost);
              else
                for (std::int64_t o = o2; o < r.hi[2]; ++o)
                  depthwise_positions<1>(D[2], o, src.data, rows.data(), nrows, s3, wp, gp, G, out(o), ds, load, gpost);
            }
            continue;
          }
          for (std::int64_t o2 = r.lo[2]; o2 < in0; ++o2)
            depthwise_positions<1>(D[2], o2, src.data, rows.data(), nrows, s3, wp, gp, G, out(o2), ds, load, gpost);
          for (std::int64_t o2 = in0; o2 < in1;) {
            std::int64_t const left = in1 - o2;
            std::size_t const b = left >= static_cast<std::int64_t>(PB) ? 0 : left >= 4 ? 1 : left >= 2 ? 2 : 3;
            fast[b](D[2], o2, src.data, rows.data(), nrows, s3, wp, gp, G, out(o2), ds, load, gpost);
            o2 += b == 0 ? static_cast<std::int64_t>(PB) : std::int64_t{4} >> (b - 1);
          }
          for (std::int64_t o2 = std::max(in1, in0); o2 < r.hi[2]; ++o2)
            depthwise_positions<1>(D[2], o2, src.data, rows.data(), nrows, s3, wp, gp, G, out(o2), ds, load, gpost);
        }
  }
}

}  // namespace tilebsp::simd::detail
