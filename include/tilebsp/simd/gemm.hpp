// Single-threaded f32 GEMM on packed panels: C = alpha * A * B + beta * C with a register-blocked xsimd
// micro-kernel (6 rows x 2 vectors of accumulators), the building block of tile matmul vertices.
#pragma once

#include <tilebsp/simd/arch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

namespace tilebsp::simd {

/// Register block of the micro-kernel: MR rows of A by NR columns of B (two vectors).
inline constexpr std::size_t gemm_mr = 6;
inline constexpr std::size_t gemm_nr = 2 * lanes;
/// Cache blocking: a KC x NR panel of B stays in L1, an MC x KC block of A in L2.
inline constexpr std::size_t gemm_kc = 256;
inline constexpr std::size_t gemm_mc = 96;

namespace detail {

/// acc[MR x NR] = sum over k of a[k * MR + r] * b[k * NR + c] (packed panels), then C = alpha * acc + beta * C for
/// the m x n valid corner.
inline void micro_kernel(std::size_t kc, float const* a, float const* b, float* c, std::size_t ldc, std::size_t m,
                         std::size_t n, float alpha, float beta) noexcept {
  using B = batch<float>;
  B acc[gemm_mr][2];
  // Rows are expanded at compile time so the 12 accumulators stay in registers.
  [&]<std::size_t... R>(std::index_sequence<R...>) {
    ((acc[R][0] = B(0.0f), acc[R][1] = B(0.0f)), ...);
    for (std::size_t k = 0; k < kc; ++k) {
      B const b0 = B::load_aligned(b + k * gemm_nr), b1 = B::load_aligned(b + k * gemm_nr + lanes);
      float const* ak = a + k * gemm_mr;
      ((acc[R][0] = xsimd::fma(B(ak[R]), b0, acc[R][0]), acc[R][1] = xsimd::fma(B(ak[R]), b1, acc[R][1])), ...);
    }
  }(std::make_index_sequence<gemm_mr>{});
  B const al(alpha);
  if (m == gemm_mr && n == gemm_nr) {
    for (std::size_t r = 0; r < gemm_mr; ++r) {
      float* cr = c + r * ldc;
      for (std::size_t h = 0; h < 2; ++h) {
        B v = acc[r][h] * al;
        if (beta != 0.0f) v = xsimd::fma(B(beta), B::load_unaligned(cr + h * lanes), v);
        v.store_unaligned(cr + h * lanes);
      }
    }
    return;
  }
  alignas(64) float tmp[gemm_mr][gemm_nr];
  for (std::size_t r = 0; r < gemm_mr; ++r) {
    (acc[r][0] * al).store_aligned(&tmp[r][0]);
    (acc[r][1] * al).store_aligned(&tmp[r][lanes]);
  }
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t j = 0; j < n; ++j) c[r * ldc + j] = tmp[r][j] + (beta != 0.0f ? beta * c[r * ldc + j] : 0.0f);
}

/// Packs rows [0, m) x columns [0, kc) of A (element (i, k) at a[i * rs + k * cs]) into MR-row panels, zero-padded.
inline void pack_a(float const* a, std::size_t rs, std::size_t cs, std::size_t m, std::size_t kc, float* out) noexcept {
  for (std::size_t i0 = 0; i0 < m; i0 += gemm_mr) {
    std::size_t const mr = std::min(gemm_mr, m - i0);
    for (std::size_t k = 0; k < kc; ++k) {
      for (std::size_t r = 0; r < mr; ++r) out[k * gemm_mr + r] = a[(i0 + r) * rs + k * cs];
      for (std::size_t r = mr; r < gemm_mr; ++r) out[k * gemm_mr + r] = 0.0f;
    }
    out += kc * gemm_mr;
  }
}
/// Packs rows [0, kc) x columns [0, n) of B (element (k, j) at b[k * rs + j * cs]) into NR-column panels.
inline void pack_b(float const* b, std::size_t rs, std::size_t cs, std::size_t kc, std::size_t n, float* out) noexcept {
  for (std::size_t j0 = 0; j0 < n; j0 += gemm_nr) {
    std::size_t const nr = std::min(gemm_nr, n - j0);
    for (std::size_t k = 0; k < kc; ++k) {
      float* o = out + k * gemm_nr;
      if (cs == 1 && nr == gemm_nr) {
        std::memcpy(o, b + k * rs + j0, gemm_nr * sizeof(float));
      } else {
        for (std::size_t c = 0; c < nr; ++c) o[c] = b[k * rs + (j0 + c) * cs];
        for (std::size_t c = nr; c < gemm_nr; ++c) o[c] = 0.0f;
      }
    }
    out += kc * gemm_nr;
  }
}

struct AlignedFloats {
  explicit AlignedFloats(std::size_t n) : p(static_cast<float*>(::operator new(n * sizeof(float) + 64, std::align_val_t{64}))) {}
  ~AlignedFloats() { ::operator delete(p, std::align_val_t{64}); }
  AlignedFloats(AlignedFloats const&) = delete;
  AlignedFloats& operator=(AlignedFloats const&) = delete;
  float* p;
};

}  // namespace detail

/// Strided view of a matrix operand: element (i, j) at data[i * rs + j * cs] (a transposed operand swaps them).
struct MatrixRef {
  float const* data;
  std::size_t rs, cs;
};

/// C[m x n] (row stride ldc) = alpha * A[m x k] * B[k x n] + beta * C. Deterministic: the summation order depends
/// only on k and the blocking constants.
inline void gemm(std::size_t m, std::size_t n, std::size_t k, float alpha, MatrixRef a, MatrixRef b, float beta, float* c,
                 std::size_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) c[i * ldc + j] = beta != 0.0f ? beta * c[i * ldc + j] : 0.0f;
    return;
  }
  std::size_t const np = (n + gemm_nr - 1) / gemm_nr * gemm_nr;
  detail::AlignedFloats bp(gemm_kc * np), ap(gemm_kc * (gemm_mc + gemm_mr));
  for (std::size_t k0 = 0; k0 < k; k0 += gemm_kc) {
    std::size_t const kc = std::min(gemm_kc, k - k0);
    float const b_beta = k0 == 0 ? beta : 1.0f;  // later K blocks accumulate onto C
    detail::pack_b(b.data + k0 * b.rs, b.rs, b.cs, kc, n, bp.p);
    for (std::size_t i0 = 0; i0 < m; i0 += gemm_mc) {
      std::size_t const mc = std::min(gemm_mc, m - i0);
      detail::pack_a(a.data + i0 * a.rs + k0 * a.cs, a.rs, a.cs, mc, kc, ap.p);
      for (std::size_t j0 = 0; j0 < n; j0 += gemm_nr)
        for (std::size_t r0 = 0; r0 < mc; r0 += gemm_mr)
          detail::micro_kernel(kc, ap.p + r0 * kc, bp.p + j0 * kc, c + (i0 + r0) * ldc + j0, ldc,
                               std::min(gemm_mr, mc - r0), std::min(gemm_nr, n - j0), alpha, b_beta);
    }
  }
}

}  // namespace tilebsp::simd
