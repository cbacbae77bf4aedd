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

/// Register block of the micro-kernel: MR rows of A by NR columns of B (two vectors); a block at most one vector
/// wide takes MR1 rows (enough independent FMA chains to cover the FMA latency).
inline constexpr std::size_t gemm_mr = 6;
inline constexpr std::size_t gemm_mr1 = 8;
inline constexpr std::size_t gemm_nr = 2 * lanes;
/// Rows of one register block for a block `n` columns wide (A read in place).
constexpr std::size_t gemm_rows(std::size_t n) noexcept { return n <= lanes ? gemm_mr1 : gemm_mr; }
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

/// One register block: R rows of A by V vectors of B columns. Over the kc columns of the block, in segments of
/// kb (the last may be shorter), acc = the segment's products summed from zero by FMA in k order, and
/// tot = acc for the first segment, tot + acc after. A(r, k) is at a[r * ars + k * acs] (a packed panel has
/// ars = 1, acs = MR), B(k, c) at b[k * brs + c]; Masked reads only the n valid columns of the last vector (B read
/// in place). Then Sum: C (f32) = tot, or C + tot segment by segment when `load` (a running sum over calls);
/// otherwise C = alpha * tot + beta * C for the m x n valid corner.
template <std::size_t R, std::size_t V, bool Masked, bool Sum, class TC>
void micro_kernel(std::size_t kc, std::size_t kb, float const* a, std::ptrdiff_t ars, std::ptrdiff_t acs, float const* b,
                  std::ptrdiff_t brs, MatrixOut<TC> c, std::size_t n, float alpha, float beta, bool load) noexcept {
  using B = batch<float>;
  constexpr std::size_t N = R * V;
  B tot[N], acc[N];
  std::size_t const tail = n - (V - 1) * lanes;  // valid columns of the last vector
  bool const full = n == V * lanes && c.cs == 1;
  alignas(64) float tmp[R][V * lanes];
  bool have = false;
  if constexpr (Sum) {
    static_assert(std::is_same_v<TC, float>);
    if (load) {
      for (std::size_t i = 0; i < N; ++i) {
        float const* cr = c.data + static_cast<std::ptrdiff_t>(i / V) * c.rs;
        if (full) {
          tot[i] = B::load_unaligned(cr + (i % V) * lanes);
        } else {
          for (std::size_t j = 0; j < lanes; ++j) {
            std::size_t const col = (i % V) * lanes + j;
            tmp[i / V][col] = col < n ? cr[static_cast<std::ptrdiff_t>(col) * c.cs] : 0.0f;
          }
          tot[i] = B::load_aligned(&tmp[i / V][(i % V) * lanes]);
        }
      }
      have = true;
    }
  }
  for (std::size_t k0 = 0; k0 < kc; k0 += kb) {
    std::size_t const k1 = std::min(kc, k0 + kb);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((acc[I] = B(0.0f)), ...);
      for (std::size_t k = k0; k < k1; ++k) {
        float const* bk = b + static_cast<std::ptrdiff_t>(k) * brs;
        __builtin_prefetch(bk + 8 * brs);  // B read in place has its rows far apart: prefetch ahead
        if constexpr (V == 2) __builtin_prefetch(bk + 8 * brs + lanes);
        B bv[V];
        if constexpr (V == 2) bv[0] = B::load_unaligned(bk);
        if constexpr (Masked) bv[V - 1] = load_partial(bk + (V - 1) * lanes, tail);
        else bv[V - 1] = B::load_unaligned(bk + (V - 1) * lanes);
        float const* ak = a + static_cast<std::ptrdiff_t>(k) * acs;
        ((acc[I] = xsimd::fma(B(ak[static_cast<std::ptrdiff_t>(I / V) * ars]), bv[I % V], acc[I])), ...);
      }
      if (have) ((tot[I] = tot[I] + acc[I]), ...);
      else ((tot[I] = acc[I]), ...);
    }(std::make_index_sequence<N>{});
    have = true;
  }
  if constexpr (Sum) {
    for (std::size_t i = 0; i < N; ++i) {
      float* cr = c.data + static_cast<std::ptrdiff_t>(i / V) * c.rs;
      if (full) tot[i].store_unaligned(cr + (i % V) * lanes);
      else tot[i].store_aligned(&tmp[i / V][(i % V) * lanes]);
    }
    if (!full)
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t j = 0; j < n; ++j) c.data[static_cast<std::ptrdiff_t>(r) * c.rs + static_cast<std::ptrdiff_t>(j) * c.cs] = tmp[r][j];
    return;
  }
  B const al(alpha);
  if constexpr (std::is_same_v<TC, float>) {
    if (full) {
      for (std::size_t i = 0; i < N; ++i) {
        float* cr = c.data + static_cast<std::ptrdiff_t>(i / V) * c.rs + (i % V) * lanes;
        B v = tot[i] * al;
        if (beta != 0.0f) v = xsimd::fma(B(beta), B::load_unaligned(cr), v);
        v.store_unaligned(cr);
      }
      return;
    }
  } else {
    if (full && beta == 0.0f) {
      for (std::size_t i = 0; i < N; ++i)
        store_f16(tot[i] * al, c.data + static_cast<std::ptrdiff_t>(i / V) * c.rs + (i % V) * lanes);
      return;
    }
  }
  for (std::size_t i = 0; i < N; ++i) (tot[i] * al).store_aligned(&tmp[i / V][(i % V) * lanes]);
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t j = 0; j < n; ++j) {
      TC& o = c.data[static_cast<std::ptrdiff_t>(r) * c.rs + static_cast<std::ptrdiff_t>(j) * c.cs];
      o = TC(beta != 0.0f ? xsimd::fma(beta, static_cast<float>(o), tmp[r][j]) : tmp[r][j]);
    }
}

/// Runs the micro-kernel instantiated for `rows` (1..MR, or 1..MR1 when nr <= lanes) rows, one vector of columns
/// when nr <= lanes.
template <bool Masked, bool Sum, class TC>
void micro_kernel_rows(std::size_t rows, std::size_t nr, std::size_t kc, std::size_t kb, float const* a, std::ptrdiff_t ars,
                       std::ptrdiff_t acs, float const* b, std::ptrdiff_t brs, MatrixOut<TC> c, float alpha, float beta,
                       bool load) noexcept {
  static_assert(gemm_mr == 6 && gemm_mr1 == 8);
  auto const run = [&]<std::size_t V>() {
    if constexpr (V == 1) {
      if (rows == 8) return micro_kernel<8, V, Masked, Sum>(kc, kb, a, ars, acs, b, brs, c, nr, alpha, beta, load);
      if (rows == 7) return micro_kernel<7, V, Masked, Sum>(kc, kb, a, ars, acs, b, brs, c, nr, alpha, beta, load);
    }
    switch (rows) {
      case 6: micro_kernel<6, V, Masked, Sum>(kc, kb, a, ars, acs, b, brs, c, nr, alpha, beta, load); break;
      case 5: micro_kernel<5, V, Masked, Sum>(kc, kb, a, ars, acs, b, brs, c, nr, alpha, beta, load); break;
      case 4: micro_kernel<4, V, Masked, Sum>(kc, kb, a, ars, acs, b, brs, c, nr, alpha, beta, load); break;
      case 3: micro_kernel<3, V, Masked, Sum>(kc, kb, a, ars, acs, b, brs, c, nr, alpha, beta, load); break;
      case 2: micro_kernel<2, V, Masked, Sum>(kc, kb, a, ars, acs, b, brs, c, nr, alpha, beta, load); break;
      default: micro_kernel<1, V, Masked, Sum>(kc, kb, a, ars, acs, b, brs, c, nr, alpha, beta, load); break;
    }
  };
  if (nr <= lanes) run.template operator()<1>();
  else run.template operator()<2>();
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
      __builtin_prefetch(row + 8 * b.rs);  // rows are far apart: hardware prefetch does not see them coming
      __builtin_prefetch(row + 8 * b.rs + 16 * b.cs);
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

namespace detail {

/// The blocked loops around the micro-kernel. Not Sum: C = alpha * A * B + beta * C (later K blocks accumulate
/// onto C). Sum: C (f32) = the in-order sum of the K segments of kb columns (kb <= gemm_kc; each cache block holds
/// whole segments, and later blocks continue the running sum in C).
template <bool Sum, class TA, class TB, class TC>
void gemm_blocked(std::size_t m, std::size_t n, std::size_t k, std::size_t kb, float alpha, Matrix<TA> a, Matrix<TB> b,
                  float beta, MatrixOut<TC> c) {
  auto const cat = [&](std::size_t i, std::size_t j) -> TC& {
    return c.data[static_cast<std::ptrdiff_t>(i) * c.rs + static_cast<std::ptrdiff_t>(j) * c.cs];
  };
  // f32 A is read in place (broadcast loads need no layout); f16 A is converted into packed panels. B is read in
  // place when it is f32 with unit column stride and either few rows of A share each panel or its rows are no wider
  // than a panel (the last columns by masked loads); otherwise packed.
  constexpr bool direct_a = std::is_same_v<TA, float>;
  bool const direct_b = std::is_same_v<TB, float> && b.cs == 1 && (m <= 2 * gemm_mr || b.rs <= std::ptrdiff_t{gemm_nr});
  std::size_t const np = (n + gemm_nr - 1) / gemm_nr * gemm_nr;
  std::size_t const block = Sum ? std::max<std::size_t>(1, gemm_kc / kb) * kb : gemm_kc;
  float* bp = direct_b ? nullptr : scratch_b().get(block * np);
  float* ap = direct_a ? nullptr : scratch_a().get(block * (gemm_mc + gemm_mr));
  for (std::size_t k0 = 0; k0 < k; k0 += block) {
    std::size_t const kc = std::min(block, k - k0);
    float const kbeta = k0 == 0 ? beta : 1.0f;  // later K blocks accumulate onto C
    Matrix<TB> const bk{b.data + static_cast<std::ptrdiff_t>(k0) * b.rs, b.rs, b.cs};
    if (!direct_b) pack_b(bk, kc, n, bp);
    for (std::size_t i0 = 0; i0 < m; i0 += gemm_mc) {
      std::size_t const mc = std::min(gemm_mc, m - i0);
      float const* ablk = nullptr;
      std::ptrdiff_t ars = 1, acs = gemm_mr;
      std::ptrdiff_t const apanel = static_cast<std::ptrdiff_t>(gemm_mr * kc);  // packed A
      if constexpr (direct_a) {
        ablk = a.data + static_cast<std::ptrdiff_t>(i0) * a.rs + static_cast<std::ptrdiff_t>(k0) * a.cs;
        ars = a.rs;
        acs = a.cs;
      } else {
        pack_a(Matrix<TA>{a.data + static_cast<std::ptrdiff_t>(i0) * a.rs + static_cast<std::ptrdiff_t>(k0) * a.cs, a.rs, a.cs},
               mc, kc, ap);
        ablk = ap;
      }
      for (std::size_t j0 = 0; j0 < n; j0 += gemm_nr) {
        std::size_t const nr = std::min(gemm_nr, n - j0);
        float const* bpanel = nullptr;
        std::ptrdiff_t brs = gemm_nr;
        bool masked = false;
        if (!direct_b) {
          bpanel = bp + j0 * kc;
        } else {
          if constexpr (std::is_same_v<TB, float>) bpanel = bk.data + j0;
          brs = b.rs;
          masked = nr % lanes != 0;
        }
        std::size_t const mr = direct_a ? gemm_rows(nr) : gemm_mr;  // packed A comes in MR-row panels
        for (std::size_t r0 = 0; r0 < mc; r0 += mr) {
          std::size_t const rows = std::min(mr, mc - r0);
          float const* ar = direct_a ? ablk + static_cast<std::ptrdiff_t>(r0) * a.rs : ablk + static_cast<std::ptrdiff_t>(r0 / gemm_mr) * apanel;
          MatrixOut<TC> const cr{&cat(i0 + r0, j0), c.rs, c.cs};
          std::size_t const seg = Sum ? kb : kc;
          if (masked)
            micro_kernel_rows<true, Sum>(rows, nr, kc, seg, ar, ars, acs, bpanel, brs, cr, alpha, kbeta, k0 > 0);
          else
            micro_kernel_rows<false, Sum>(rows, nr, kc, seg, ar, ars, acs, bpanel, brs, cr, alpha, kbeta, k0 > 0);
        }
      }
    }
  }
}

}  // namespace detail

/// C[m x n] = alpha * A[m x k] * B[k x n] + beta * C, accumulating in f32 (beta == 0: C is not read). A and B are
/// f32 or f16, C is f32 or f16, any strides. Deterministic: each element's summation order depends only on k and
/// the blocking constants, never on m, n, the operands' layout or the thread.
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
          cat(i, j) = TC(beta != 0.0f ? xsimd::fma(beta, static_cast<float>(cat(i, j)), t[i * n + j]) : t[i * n + j]);
      return;
    }
  }
  detail::gemm_blocked<false>(m, n, k, k, alpha, a, b, beta, c);
}

/// S[m x n] (f32) = P_0 + P_1 + ... summed in order, where P_j = A[:, K segment j] * B[K segment j, :] over
/// segments of `kb` columns of K (the last may be shorter), each computed exactly as gemm(beta 0) on the segment
/// computes it: bitwise the result of one gemm per segment followed by an in-order f32 sum, without the
/// intermediate matrices. kb is clamped to [1, gemm_kc]; k = 0 gives zeros.
template <class TA, class TB>
void gemm_ksum(std::size_t m, std::size_t n, std::size_t k, std::size_t kb, Matrix<TA> a, Matrix<TB> b, MatrixOut<float> s) {
  static_assert(detail::gemm_element<TA> && detail::gemm_element<TB>, "gemm_ksum: operands are float or half");
  if (k == 0) return gemm(m, n, k, 1.0f, a, b, 0.0f, s);  // the empty sum: zeros
  if (m == 0 || n == 0) return;
  detail::gemm_blocked<true>(m, n, k, std::clamp<std::size_t>(kb, 1, gemm_kc), 1.0f, a, b, 0.0f, s);
}

/// The f32 form with a row-major C of row stride ldc.
inline void gemm(std::size_t m, std::size_t n, std::size_t k, float alpha, MatrixRef a, MatrixRef b, float beta, float* c,
                 std::size_t ldc) {
  gemm(m, n, k, alpha, a, b, beta, MatrixOut<float>{c, static_cast<std::ptrdiff_t>(ldc), 1});
}

}  // namespace tilebsp::simd
