// Summing a reduction's partials in order and the final scale-and-store, shared by the matmul and convolution
// reduction vertices and their host paths, so that both round alike.
#pragma once

#include <tilebsp/core/half.hpp>
#include <tilebsp/simd/arch.hpp>

#include <cmath>
#include <cstddef>
#include <type_traits>

namespace tilebsp::simd {

/// acc[j] = src[j * stride] + src[part_stride + j * stride] + ... over `parts` partials, in f32, in part order,
/// for j < w (w <= lanes).
template <class TP>
void sum_partials(TP const* src, std::ptrdiff_t part_stride, std::ptrdiff_t stride, std::size_t parts, std::size_t w,
                  float* acc) noexcept {
  if constexpr (std::is_same_v<TP, float>) {
    if (w == lanes && stride == 1) {
      using B = batch<float>;
      B s = B::load_unaligned(src);
      for (std::size_t p = 1; p < parts; ++p) s += B::load_unaligned(src + static_cast<std::ptrdiff_t>(p) * part_stride);
      s.store_unaligned(acc);
      return;
    }
  }
  for (std::size_t j = 0; j < w; ++j) {
    TP const* x = src + static_cast<std::ptrdiff_t>(j) * stride;
    float s = static_cast<float>(x[0]);
    for (std::size_t p = 1; p < parts; ++p) s += static_cast<float>(x[static_cast<std::ptrdiff_t>(p) * part_stride]);
    acc[j] = s;
  }
}

/// The next partial of a reduction added to its running sum, in f32: sum[e] += part[e] for e < n (the host
/// kernels' partials, summed in part order as sum_partials sums them).
template <class TP>
void add_partial(float* sum, TP const* part, std::size_t n) noexcept {
  std::size_t e = 0;
  if constexpr (std::is_same_v<TP, float>) {
    using B = batch<float>;
    for (; e + lanes <= n; e += lanes) (B::load_unaligned(sum + e) + B::load_unaligned(part + e)).store_unaligned(sum + e);
  }
  for (; e < n; ++e) sum[e] += static_cast<float>(part[e]);
}

/// The last step of a reduction: out = alpha * s, or out + alpha * s (one fused multiply-add) when accumulating,
/// for n elements of out at `stride`.
template <class TO, bool Acc>
void scale_into(float const* s, TO* out, std::ptrdiff_t stride, std::size_t n, float alpha) noexcept {
  std::size_t j = 0;
  if constexpr (std::is_same_v<TO, float>) {
    if (stride == 1) {
      using B = batch<float>;
      for (; j + lanes <= n; j += lanes) {
        B const v = B::load_unaligned(s + j);
        B const r = Acc ? fma(B(alpha), v, B::load_unaligned(out + j)) : v * B(alpha);
        r.store_unaligned(out + j);
      }
    }
  }
  for (; j < n; ++j) {
    TO& o = out[static_cast<std::ptrdiff_t>(j) * stride];
    o = TO(Acc ? std::fma(alpha, s[j], static_cast<float>(o)) : alpha * s[j]);
  }
}

}  // namespace tilebsp::simd
