// Max pooling kernels: the forward max over windows and the gradient's walk over bands of input rows, run alike
// by max_pool's vertices (on gathered blocks) and its host path (on the tensors in place).
#pragma once

#include <tilebsp/core/half.hpp>
#include <tilebsp/simd/arch.hpp>
#include <tilebsp/simd/conv_loop.hpp>

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tilebsp::simd {

/// Calls f(x0, x1, x2) for the source positions of output (o0, o1, o2)'s window in tap order, skipping padding,
/// until f returns true; returns whether it did.
template <class F>
bool each_window_source(simd::ConvLoop const& loop, std::int64_t o0, std::int64_t o1, std::int64_t o2, F&& f) {
  auto const& L = loop.dim;
  for (std::int64_t t0 = 0; t0 < L[0].taps; ++t0) {
    std::int64_t const x0 = L[0].source(o0 * L[0].a + t0 * L[0].b + L[0].c);
    if (x0 < 0) continue;
    for (std::int64_t t1 = 0; t1 < L[1].taps; ++t1) {
      std::int64_t const x1 = L[1].source(o1 * L[1].a + t1 * L[1].b + L[1].c);
      if (x1 < 0) continue;
      for (std::int64_t t2 = 0; t2 < L[2].taps; ++t2) {
        std::int64_t const x2 = L[2].source(o2 * L[2].a + t2 * L[2].b + L[2].c);
        if (x2 >= 0 && f(x0, x1, x2)) return true;
      }
    }
  }
  return false;
}

/// out = select(in > out or in is NaN, in, out), element-wise over n channels.
template <class T>
void max_into(T* out, T const* in, std::int64_t n) {
  std::int64_t c = 0;
  // Whole batches: select(b > a or b is NaN, b, a), which takes exactly one of the two values (so f16 values
  // round-trip through f32 unchanged), as the scalar tail does.
  constexpr auto L = static_cast<std::int64_t>(simd::lanes);
  for (; c + L <= n; c += L) {
    if constexpr (std::is_same_v<T, float>) {
      auto const a = simd::batch<float>::load_unaligned(out + c), b = simd::batch<float>::load_unaligned(in + c);
      xsimd::select(b > a || xsimd::isnan(b), b, a).store_unaligned(out + c);
    } else {
      auto const a = simd::load_f16(out + c), b = simd::load_f16(in + c);
      simd::store_f16(xsimd::select(b > a || xsimd::isnan(b), b, a), out + c);
    }
  }
  for (; c < n; ++c) {
    // NaN propagates, as in PyTorch: a NaN is taken, and never replaced (comparisons with it are false).
    float const a = static_cast<float>(out[c]), b = static_cast<float>(in[c]);
    if (b > a || b != b) out[c] = in[c];
  }
}

/// Max pooling of the outputs in range `r` (batch x positions x channels [c0, c1), channels contiguous in both
/// operands): each output is the first of its window's sources (in tap order), replaced by each later one that is
/// greater or NaN. The vertices run it on their gathered windows, the host kernel on the whole tensors, so both
/// write the same bits.
template <class T>
void max_pool_range(simd::ConvLoop const& loop, simd::ConvRange const& r, simd::Operand6<T const> const& s,
                    simd::Operand6<T> const& d) {
  std::int64_t const cn = r.c1 - r.c0;
  constexpr auto L = static_cast<std::int64_t>(simd::lanes);
  using B = simd::batch<float>;
  auto const load = [](T const* p) {
    if constexpr (std::is_same_v<T, float>) return B::load_unaligned(p);
    else return simd::load_f16(p);
  };
  auto const store = [](B const& x, T* p) {
    if constexpr (std::is_same_v<T, float>) x.store_unaligned(p);
    else simd::store_f16(x, p);
  };
  // A window's sources, gathered first: each block of channels then keeps its maxima in registers over all of them
  // (the same selects in the same order as max_into's, so the same bits), storing once.
  constexpr std::size_t max_sources = 64;
  std::array<T const*, max_sources> src{};
  for (std::int64_t n = r.n0; n < r.n1; ++n)
    for (std::int64_t o0 = r.lo[0]; o0 < r.hi[0]; ++o0)
      for (std::int64_t o1 = r.lo[1]; o1 < r.hi[1]; ++o1)
        for (std::int64_t o2 = r.lo[2]; o2 < r.hi[2]; ++o2) {
          T* out = d.at(n, o0, o1, o2, 0, r.c0);
          std::size_t k = 0;
          bool const more = each_window_source(loop, o0, o1, o2, [&](auto x0, auto x1, auto x2) {
            if (k == max_sources) return true;  // more than max_sources
            src[k++] = s.at(n, x0, x1, x2, 0, r.c0);
            return false;
          });
          if (k == 0) continue;
          std::int64_t c = 0;
          if (!more) {
            for (; c + 4 * L <= cn; c += 4 * L) {
              std::array<B, 4> m;
              for (std::size_t j = 0; j < 4; ++j) m[j] = load(src[0] + c + static_cast<std::int64_t>(j) * L);
              for (std::size_t i = 1; i < k; ++i)
                for (std::size_t j = 0; j < 4; ++j) {
                  B const b = load(src[i] + c + static_cast<std::int64_t>(j) * L);
                  m[j] = xsimd::select(b > m[j] || xsimd::isnan(b), b, m[j]);
                }
              for (std::size_t j = 0; j < 4; ++j) store(m[j], out + c + static_cast<std::int64_t>(j) * L);
            }
            for (; c + L <= cn; c += L) {
              B m = load(src[0] + c);
              for (std::size_t i = 1; i < k; ++i) {
                B const b = load(src[i] + c);
                m = xsimd::select(b > m || xsimd::isnan(b), b, m);
              }
              store(m, out + c);
            }
            if (c == cn) continue;
          }
          // The channels left (or all of them, for a window of more than max_sources sources), through memory.
          bool first = true;
          each_window_source(loop, o0, o1, o2, [&](std::int64_t x0, std::int64_t x1, std::int64_t x2) {
            T const* in = s.at(n, x0, x1, x2, 0, r.c0) + c;
            if (first) std::copy(in, in + (cn - c), out + c);
            else max_into(out + c, in, cn - c);
            first = false;
            return false;
          });
        }
}

/// The input rows [lo, hi) of dimension `rd` (the leading spatial dimension of the field) whose gradient one
/// vertex or host unit owns, for one image and channels [c0, c1).
struct PoolBand {
  std::size_t rd = 0;
  std::int64_t n = 0, lo = 0, hi = 0, c0 = 0, c1 = 0;
};

/// The outputs [first, last) of dimension d whose windows read any of the input rows [lo, hi) (pooling has no
/// input dilation).
inline std::pair<std::int64_t, std::int64_t> pool_outputs_reading(simd::ConvDim const& D, std::int64_t lo, std::int64_t hi) {
  auto const floor_div = [](std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  std::int64_t const first = std::max<std::int64_t>(0, floor_div(lo - D.c - (D.taps - 1) * D.b + D.a - 1, D.a));
  std::int64_t const last = std::min<std::int64_t>(D.out, floor_div(hi - 1 - D.c, D.a) + 1);
  return {first, std::max(first, last)};
}

/// One window source for a block of `w` channels: each channel not yet done whose value equals its maximum
/// (or is the NaN that propagated) is done, and adds its output gradient to `acc` when the source is `own`ed.
/// Returns whether all channels of the block are done.
template <class T>
bool max_pool_take(float* acc, bool own, T const* v, T const* m, T const* dy, float* done, std::size_t w) {
  using B = simd::batch<float>;
  auto const load = [](T const* p) {
    if constexpr (std::is_same_v<T, float>) return B::load_unaligned(p);
    else return simd::load_f16(p);
  };
  std::size_t c = 0;
  B all(1.0f);
  for (; c + simd::lanes <= w; c += simd::lanes) {
    B const x = load(v + c), mx = load(m + c), d = B::load_unaligned(done + c);
    auto const hit = (d == B(0.0f)) && ((x == mx) || (xsimd::isnan(x) && xsimd::isnan(mx)));
    if (own) (B::load_unaligned(acc + c) + xsimd::select(hit, load(dy + c), B(0.0f))).store_unaligned(acc + c);
    B const now = xsimd::select(hit, B(1.0f), d);
    now.store_unaligned(done + c);
    all = xsimd::min(all, now);
  }
  bool finished = xsimd::all(all != B(0.0f));
  for (; c < w; ++c) {
    float const x = static_cast<float>(v[c]), mx = static_cast<float>(m[c]);
    if (done[c] == 0.0f && (x == mx || (x != x && mx != mx))) {
      if (own) acc[c] += static_cast<float>(dy[c]);
      done[c] = 1.0f;
    }
    finished = finished && done[c] != 0.0f;
  }
  return finished;
}

/// The gradient of max pooling over band `b`: acc (f32, zeroed here) at the band's input positions receives, for
/// each output whose window reads the band (in output order), its gradient dy at the first maximum of the window
/// (in tap order; the walk reads the whole window, x and y where the window and the output lie), as in PyTorch.
/// Operands are indexed (n, x0, x1, x2, 0, channel), channels contiguous. The vertices run it on their gathered
/// blocks, the host kernel on the tensors in place, so both write the same bits for any bands: a position's sum
/// always runs over the same outputs in the same order.
template <class T>
void max_pool_grad_band(simd::ConvLoop const& l, PoolBand const& b, simd::Operand6<T const> const& x,
                        simd::Operand6<T const> const& y, simd::Operand6<T const> const& dy, simd::Operand6<float> const& acc) {
  auto const& L = l.dim;
  std::int64_t lo[3] = {0, 0, 0}, hi[3] = {L[0].in, L[1].in, L[2].in};
  lo[b.rd] = b.lo, hi[b.rd] = b.hi;
  auto const cn = static_cast<std::size_t>(b.c1 - b.c0);
  for (std::int64_t x0 = lo[0]; x0 < hi[0]; ++x0)
    for (std::int64_t x1 = lo[1]; x1 < hi[1]; ++x1)
      for (std::int64_t x2 = lo[2]; x2 < hi[2]; ++x2) std::fill_n(acc.at(b.n, x0, x1, x2, 0, b.c0), cn, 0.0f);
  std::int64_t olo[3] = {0, 0, 0}, ohi[3] = {L[0].out, L[1].out, L[2].out};
  std::tie(olo[b.rd], ohi[b.rd]) = pool_outputs_reading(L[b.rd], b.lo, b.hi);
  // Per output position and block of channels, walk the window once: each channel takes the first source equal
  // to its maximum (or the NaN that propagated), and the walk stops when every channel of the block has.
  constexpr std::int64_t block = 64;
  for (std::int64_t o0 = olo[0]; o0 < ohi[0]; ++o0)
    for (std::int64_t o1 = olo[1]; o1 < ohi[1]; ++o1)
      for (std::int64_t o2 = olo[2]; o2 < ohi[2]; ++o2)
        for (std::int64_t c0 = b.c0; c0 < b.c1; c0 += block) {
          auto const w = static_cast<std::size_t>(std::min(block, b.c1 - c0));
          T const* const yo = y.at(b.n, o0, o1, o2, 0, c0);
          T const* const dyo = dy.at(b.n, o0, o1, o2, 0, c0);
          std::array<float, block> done{};  // 1 once a channel has taken its gradient
          each_window_source(l, o0, o1, o2, [&](std::int64_t x0, std::int64_t x1, std::int64_t x2) {
            std::int64_t const xr = b.rd == 0 ? x0 : b.rd == 1 ? x1 : x2;
            bool const own = xr >= b.lo && xr < b.hi;
            return max_pool_take<T>(own ? acc.at(b.n, x0, x1, x2, 0, c0) : nullptr, own, x.at(b.n, x0, x1, x2, 0, c0), yo, dyo,
                                    done.data(), w);
          });
        }
}

}  // namespace tilebsp::simd
