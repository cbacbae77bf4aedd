// Single-threaded GEMM on f32 or f16 operands with f32 accumulation: C = alpha * A * B + beta * C, through a
// register-blocked xsimd micro-kernel (up to 6 rows x 2 vectors of accumulators), the kernel of tile matmuls.
#pragma once

#include <tilebsp/core/half.hpp>
#include <tilebsp/simd/arch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

namespace tilebsp::simd {

/// Register block of the micro-kernel: MR rows of A by NR columns of B (two vectors).
inline constexpr std::size_t gemm_mr = 6;
inline constexpr std::size_t gemm_nr = 2 * lanes;
/// Cache blocking: a KC x NR panel of B stays in L1, an MC x KC block of A in L2.
inline constexpr std::size_t gemm_kc = 256;
inline constexpr std::size_t gemm_mc = 96;

/// Strided view of a matrix operand: element (i, j) at data[i * rs + j * cs] (a transposed operand swaps them).
template <class T>
struct Matrix {
  T const* data;
  std::ptrdiff_t rs, cs;
};
using MatrixRef = Matrix<float>;

/// Strided destination: element (i, j) at data[i * rs + j * cs].
template <class T>
struct MatrixOut {
  T* data;
  std::ptrdiff_t rs, cs;
};

namespace detail {

template <class T>
inline constexpr bool gemm_element = std::is_same_v<T, float> || std::is_same_v<T, half>;

/// acc[R x NR] = sum over k of A(r, k) * B(k, c), with A(r, k) at a[r * ars + k * acs] (a packed panel has
/// ars = 1, acs = MR) and B(k, c) at b[k * brs + c] (a packed panel has brs = NR); then C = alpha * acc + beta * C
/// for the m x n valid corner. R is a compile-time row count so the accumulators stay in registers.
template <std::size_t R, class TC>
void micro_kernel(std::size_t kc, float const* a, std::ptrdiff_t ars, std::ptrdiff_t acs, float const* b,
                  std::ptrdiff_t brs, MatrixOut<TC> c, std::size_t n, float alpha, float beta) noexcept {
  using B = batch<float>;
  B acc[R][2];
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((acc[I][0] = B(0.0f), acc[I][1] = B(0.0f)), ...);
    for (std::size_t k = 0; k < kc; ++k) {
      float const* bk = b + static_cast<std::ptrdiff_t>(k) * brs;
      B const b0 = B::load_unaligned(bk), b1 = B::load_unaligned(bk + lanes);
      float const* ak = a + static_cast<std::ptrdiff_t>(k) * acs;
      ((acc[I][0] = xsimd::fma(B(ak[static_cast<std::ptrdiff_t>(I) * ars]), b0, acc[I][0]),
        acc[I][1] = xsimd::fma(B(ak[static_cast<std::ptrdiff_t>(I) * ars]), b1, acc[I][1])), ...);
    }
  }(std::make_index_sequence<R>{});
  B const al(alpha);
  if constexpr (std::is_same_v<TC, float>) {
    if (n == gemm_nr && c.cs == 1) {
      for (std::size_t r = 0; r < R; ++r) {
        float* cr = c.data + static_cast<std::ptrdiff_t>(r) * c.rs;
        for (std::size_t h = 0; h < 2; ++h) {
          B v = acc[r][h] * al;
          if (beta != 0.0f) v = xsimd::fma(B(beta), B::load_unaligned(cr + h * lanes), v);
          v.store_unaligned(cr + h * lanes);
        }
      }
      return;
    }
  } else {
    if (n == gemm_nr && c.cs == 1 && beta == 0.0f) {
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t h = 0; h < 2; ++h) store_f16(acc[r][h] * al, c.data + static_cast<std::ptrdiff_t>(r) * c.rs + h * lanes);
      return;
    }
  }
  alignas(64) float tmp[R][gemm_nr];
  for (std::size_t r = 0; r < R; ++r) {
    (acc[r][0] * al).store_aligned(&tmp[r][0]);
    (acc[r][1] * al).store_aligned(&tmp[r][lanes]);
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t j = 0; j < n; ++j) {
      TC& o = c.data[static_cast<std::ptrdiff_t>(r) * c.rs + static_cast<std::ptrdiff_t>(j) * c.cs];
      o = TC(tmp[r][j] + (beta != 0.0f ? beta * static_cast<float>(o) : 0.0f));
    }
}

/// Runs the micro-kernel instantiated for `rows` (1..MR) rows.
template <class TC>
void micro_kernel_rows(std::size_t rows, std::size_t kc, float const* a, std::ptrdiff_t ars, std::ptrdiff_t acs,
                       float const* b, std::ptrdiff_t brs, MatrixOut<TC> c, std::size_t n, float alpha,
                       float beta) noexcept {
  static_assert(gemm_mr == 6);
  switch (rows) {
    case 6: micro_kernel<6>(kc, a, ars, acs, b, brs, c, n, alpha, beta); break;
    case 5: micro_kernel<5>(kc, a, ars, acs, b, brs, c, n, alpha, beta); break;
    case 4: micro_kernel<4>(kc, a, ars, acs, b, brs, c, n, alpha, beta); break;
    case 3: micro_kernel<3>(kc, a, ars, acs, b, brs, c, n, alpha, beta); break;
    case 2: micro_kernel<2>(kc, a, ars, acs, b, brs, c, n, alpha, beta); break;
    default: micro_kernel<1>(kc, a, ars, acs, b, brs, c, n, alpha, beta); break;
  }
}

/// Packs rows [0, m) x columns [0, kc) of A into MR-row panels (element (r, k) of a panel at k * MR + r),
/// converting to f32; rows past m are zero.
template <class T>
void pack_a(Matrix<T> a, std::size_t m, std::size_t kc, float* out) noexcept {
  for (std::size_t i0 = 0; i0 < m; i0 += gemm_mr) {
    std::size_t const mr = std::min(gemm_mr, m - i0);
    for (std::size_t k = 0; k < kc; ++k) {
      for (std::size_t r = 0; r < mr; ++r)
        out[k * gemm_mr + r] = static_cast<float>(a.data[static_cast<std::ptrdiff_t>(i0 + r) * a.rs + static_cast<std::ptrdiff_t>(k) * a.cs]);
      for (std::size_t r = mr; r < gemm_mr; ++r) out[k * gemm_mr + r] = 0.0f;
    }
    out += kc * gemm_mr;
  }
}
/// Packs rows [0, kc) x columns [0, n) of B into NR-column panels (element (k, c) at k * NR + c), converting to
/// f32; columns past n are zero.
template <class T>
void pack_b(Matrix<T> b, std::size_t kc, std::size_t n, float* out) noexcept {
  for (std::size_t j0 = 0; j0 < n; j0 += gemm_nr) {
    std::size_t const nr = std::min(gemm_nr, n - j0);
    for (std::size_t k = 0; k < kc; ++k) {
      float* o = out + k * gemm_nr;
      T const* row = b.data + static_cast<std::ptrdiff_t>(k) * b.rs + static_cast<std::ptrdiff_t>(j0) * b.cs;
      if (b.cs == 1 && nr == gemm_nr) {
        if constexpr (std::is_same_v<T, float>) {
          std::memcpy(o, row, gemm_nr * sizeof(float));
        } else {
          load_f16(row).store_aligned(o);
          load_f16(row + lanes).store_aligned(o + lanes);
        }
      } else {
        for (std::size_t c = 0; c < nr; ++c) o[c] = static_cast<float>(row[static_cast<std::ptrdiff_t>(c) * b.cs]);
        for (std::size_t c = nr; c < gemm_nr; ++c) o[c] = 0.0f;
      }
    }
    out += kc * gemm_nr;
  }
}

/// 64-byte aligned scratch that grows on demand; one per thread, reused across calls (no allocation in the
/// steady state).
class Scratch {
 public:
  float* get(std::size_t floats) {
    if (floats > size_) {
      release();
      p_ = static_cast<float*>(::operator new(floats * sizeof(float), std::align_val_t{64}));
      size_ = floats;
    }
    return p_;
  }
  ~Scratch() { release(); }

 private:
  void release() noexcept {
    if (p_) ::operator delete(p_, std::align_val_t{64});
    p_ = nullptr;
    size_ = 0;
  }
  float* p_ = nullptr;
  std::size_t size_ = 0;
};
inline Scratch& scratch_a() {
  thread_local Scratch s;
  return s;
}
inline Scratch& scratch_b() {
  thread_local Scratch s;
  return s;
}
inline Scratch& scratch_c() {
  thread_local Scratch s;
  return s;
}

}  // namespace detail

/// C[m x n] = alpha * A[m x k] * B[k x n] + beta * C, accumulating in f32 (beta == 0: C is not read). A and B are
/// f32 or f16, C is f32 or f16, any strides. Deterministic: the summation order depends only on k and the
/// blocking constants, never on the operands' layout or the thread.
template <class TA, class TB, class TC>
void gemm(std::size_t m, std::size_t n, std::size_t k, float alpha, Matrix<TA> a, Matrix<TB> b, float beta,
          MatrixOut<TC> c) {
  static_assert(detail::gemm_element<TA> && detail::gemm_element<TB> && detail::gemm_element<TC>,
                "gemm: operands are float or half");
  if (m == 0 || n == 0) return;
  auto const cat = [&](std::size_t i, std::size_t j) -> TC& {
    return c.data[static_cast<std::ptrdiff_t>(i) * c.rs + static_cast<std::ptrdiff_t>(j) * c.cs];
  };
  if (k == 0) {
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) cat(i, j) = TC(beta != 0.0f ? beta * static_cast<float>(cat(i, j)) : 0.0f);
    return;
  }
  if constexpr (!std::is_same_v<TC, float>) {
    if (k > gemm_kc) {  // partial sums over several K blocks stay in f32; round once at the end
      float* t = detail::scratch_c().get(m * n);
      gemm(m, n, k, alpha, a, b, 0.0f, MatrixOut<float>{t, static_cast<std::ptrdiff_t>(n), 1});
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j)
          cat(i, j) = TC(t[i * n + j] + (beta != 0.0f ? beta * static_cast<float>(cat(i, j)) : 0.0f));
      return;
    }
  }
  // f32 A is read in place (broadcast loads need no layout); f16 A is converted into packed panels. B is read in
  // place when it is f32 with unit column stride and few rows of A share each panel; otherwise packed.
  constexpr bool direct_a = std::is_same_v<TA, float>;
  bool const direct_b = std::is_same_v<TB, float> && b.cs == 1 && m <= 2 * gemm_mr;
  std::size_t const np = (n + gemm_nr - 1) / gemm_nr * gemm_nr;
  float* bp = detail::scratch_b().get(gemm_kc * (direct_b ? gemm_nr : np));
  float* ap = direct_a ? nullptr : detail::scratch_a().get(gemm_kc * (gemm_mc + gemm_mr));
  for (std::size_t k0 = 0; k0 < k; k0 += gemm_kc) {
    std::size_t const kc = std::min(gemm_kc, k - k0);
    float const kb = k0 == 0 ? beta : 1.0f;  // later K blocks accumulate onto C
    Matrix<TB> const bk{b.data + static_cast<std::ptrdiff_t>(k0) * b.rs, b.rs, b.cs};
    if (!direct_b) detail::pack_b(bk, kc, n, bp);
    for (std::size_t i0 = 0; i0 < m; i0 += gemm_mc) {
      std::size_t const mc = std::min(gemm_mc, m - i0);
      float const* ablk = nullptr;
      std::ptrdiff_t ars = 1, acs = gemm_mr, apanel = static_cast<std::ptrdiff_t>(gemm_mr * kc);
      if constexpr (direct_a) {
        ablk = a.data + static_cast<std::ptrdiff_t>(i0) * a.rs + static_cast<std::ptrdiff_t>(k0) * a.cs;
        ars = a.rs;
        acs = a.cs;
        apanel = static_cast<std::ptrdiff_t>(gemm_mr) * a.rs;
      } else {
        detail::pack_a(Matrix<TA>{a.data + static_cast<std::ptrdiff_t>(i0) * a.rs + static_cast<std::ptrdiff_t>(k0) * a.cs,
                                  a.rs, a.cs},
                       mc, kc, ap);
        ablk = ap;
      }
      for (std::size_t j0 = 0; j0 < n; j0 += gemm_nr) {
        std::size_t const nr = std::min(gemm_nr, n - j0);
        float const* bpanel = nullptr;
        std::ptrdiff_t brs = gemm_nr;
        if (!direct_b) {
          bpanel = bp + j0 * kc;
        } else if (nr == gemm_nr) {
          if constexpr (std::is_same_v<TB, float>) bpanel = bk.data + j0;
          brs = b.rs;
        } else {
          detail::pack_b(Matrix<TB>{bk.data + static_cast<std::ptrdiff_t>(j0), b.rs, 1}, kc, nr, bp);
          bpanel = bp;
        }
        for (std::size_t r0 = 0; r0 < mc; r0 += gemm_mr)
          detail::micro_kernel_rows(std::min(gemm_mr, mc - r0), kc, ablk + static_cast<std::ptrdiff_t>(r0 / gemm_mr) * apanel,
                                    ars, acs, bpanel, brs,
                                    MatrixOut<TC>{&cat(i0 + r0, j0), c.rs, c.cs}, nr, alpha, kb);
      }
    }
  }
}

/// The f32 form with a row-major C of row stride ldc.
inline void gemm(std::size_t m, std::size_t n, std::size_t k, float alpha, MatrixRef a, MatrixRef b, float beta, float* c,
                 std::size_t ldc) {
  gemm(m, n, k, alpha, a, b, beta, MatrixOut<float>{c, static_cast<std::ptrdiff_t>(ldc), 1});
}

}  // namespace tilebsp::simd
