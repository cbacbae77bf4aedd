// Single-threaded GEMM on f32 or f16 operands with f32 accumulation: C = alpha * A * B + beta * C, through a
// register-blocked xsimd micro-kernel (up to 12 rows x 2 vectors of accumulators), the kernel of tile matmuls.
#pragma once

#include <tilebsp/core/half.hpp>
#include <tilebsp/simd/arch.hpp>
#include <tilebsp/simd/blocks.hpp>
#include <tilebsp/simd/scratch.hpp>
#include <tilebsp/simd/tuning.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

namespace tilebsp::simd {

/// Register block of the micro-kernel: MR rows of A by NR columns of B (two vectors). With 32 vector registers
/// (AVX-512) 12 x 2 accumulators, with 16 (AVX2, SSE) 6 x 2 (simd/tuning.hpp); the running sums over K segments
/// live in memory.
inline constexpr std::size_t gemm_mr = tuning.gemm_mr;
inline constexpr std::size_t gemm_nr = 2 * lanes;
/// Cache blocking (simd/blocks.hpp): a KC x NR panel of B streams from L2 while an MR x KC micro-panel of A stays
/// in L1; an MC x KC block of A stays in L2 across the panels, and a KC x NC block of packed B in L3 across the
/// blocks of A. KC (gemm_kc) is fixed, MC and NC come from the host's caches.
/// A gemm_ksum's cache blocks hold whole groups up to this many rows of K: every block boundary ends a run of
/// groups and re-walks the panels, and with the tile plans' short groups (35 of 784 for 128x128x784) fewer, longer
/// blocks than gemm_kc measured faster (the micro-panel of A then spills to L2, which the broadcast loads
/// absorb).
inline constexpr std::size_t gemm_ksum_kc = 1024;
/// Rows of K from which a panel prefetches the C rows of its next register block (panel_rows). Over a long K range
/// a block's C stores (or loads, for later K blocks) miss once per row and the prefetch hides that; over a short
/// one the hardware prefetchers keep up with the rows and the prefetches cost more than they save (50176x16x96,
/// MobileNetV2's and EfficientNet-B0's 1x1 expansions at 112², ran 20% faster without them, 50176x64x96 15%).
inline constexpr std::size_t gemm_prefetch_c_k = 128;

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

/// B already in the layout gemm packs it into on each call (f32, K blocks of gemm_b_block(group) rows, each a row
/// of NR-column panels), for products that reuse one B — weights, as oneDNN packs them at primitive creation.
/// The K block starting at row k0 (counted from the call's first row of K) is at data + k0 * ld; its panel of the
/// call's columns [j, j + NR) at + (col + j) * kc, kc the block's rows. pack_b_panels writes it.
struct PackedB {
  float const* data;
  std::size_t ld;   ///< floats per row of K: at least the packed columns rounded up to NR
  std::size_t col;  ///< the call's first column inside the packed columns (a multiple of NR)
};

/// v * sigmoid(v) by the instructions of the map `(_1 + _2) * sigmoid(_1 + _2)` (simd::sigmoid, as expr/eval.hpp
/// computes it), inlined as sigmoid is.
[[gnu::always_inline]] inline batch<float> silu(batch<float> v) noexcept { return v * simd::sigmoid(v); }

/// What a gemm applies to each f32 result of C as it stores it, after alpha and beta (oneDNN's bias and eltwise
/// post-ops): v = v + bias[j] for column j of the call, then, where set, v = max(v, lo) and v = min(v, hi), or
/// v = v * sigmoid(v) — the instructions of the map `min(max(_1 + _2, lo), hi)` (or `relu(_1 + _2)`, lo = 0, or
/// `(_1 + _2) * sigmoid(_1 + _2)`) over the stored C, so the bits are the same as that map run after the product.
struct PostOp {
  float const* bias;  ///< the call's column 0
  float lo = 0.0f, hi = 0.0f;
  bool max_lo = false, min_hi = false, silu = false;

  batch<float> apply(batch<float> v, batch<float> bias_v) const noexcept {
    using B = batch<float>;
    v = v + bias_v;
    if (max_lo) v = xsimd::max(v, B(lo));
    if (min_hi) v = xsimd::min(v, B(hi));
    if (silu) v = simd::silu(v);
    return v;
  }
};

/// The post-op over results already stored: `rows` rows of `n` f32 values, `rs` apart, column j taking bias[j]. For
/// a producer that cannot apply it as it stores (partial sums summed afterwards, the convolutions' many forms), on
/// each of its blocks while the block is still in the cache: the bits of PostOp::apply, and of the map.
inline void post_op_rows(float* c, std::ptrdiff_t rs, std::size_t rows, std::size_t n, PostOp const& op) noexcept {
  using B = batch<float>;
  PostOp const o = op;  // locals: the stores may alias anything behind a pointer
  for (std::size_t r = 0; r < rows; ++r, c += rs) {
    std::size_t j = 0;
    for (; j + lanes <= n; j += lanes) o.apply(B::load_unaligned(c + j), B::load_unaligned(o.bias + j)).store_unaligned(c + j);
    if (j < n) store_partial(o.apply(load_partial(c + j, n - j), load_partial(o.bias + j, n - j)), c + j, n - j);
  }
}

/// C = post(C + alpha * S) over `rows` rows of `n` f32 values (S row-major, n apart; C rows `rs` apart; post may be
/// null): an accumulated product's sums added to C and finished in one pass over C, the bits of
/// scale_into<float, true> and then post_op_rows where alpha * S is exact (alpha 1: scale_into's scalar tail is
/// std::fma, which a vector fma without FMA instructions is not).
inline void accumulate_rows(float const* s, float* c, std::ptrdiff_t rs, std::size_t rows, std::size_t n, float alpha,
                            PostOp const* post) noexcept {
  using B = batch<float>;
  B const al(alpha);
  bool const has_post = post != nullptr;
  PostOp const o = has_post ? *post : PostOp{nullptr};  // locals: the stores may alias anything behind a pointer
  for (std::size_t r = 0; r < rows; ++r, c += rs, s += n) {
    std::size_t j = 0;
    for (; j + lanes <= n; j += lanes) {
      B v = fma(al, B::load_unaligned(s + j), B::load_unaligned(c + j));
      if (has_post) v = o.apply(v, B::load_unaligned(o.bias + j));
      v.store_unaligned(c + j);
    }
    if (j < n) {
      B v = fma(al, load_partial(s + j, n - j), load_partial(c + j, n - j));
      if (has_post) v = o.apply(v, load_partial(o.bias + j, n - j));
      store_partial(v, c + j, n - j);
    }
  }
}

/// Rows of K per cache block: gemm_kc for a gemm (group 0), whole groups for a gemm_ksum with groups of `group`
/// columns (as many as fit in gemm_ksum_kc, at least one).
constexpr std::size_t gemm_b_block(std::size_t group = 0) noexcept {
  return group == 0 ? gemm_kc : std::max<std::size_t>(1, gemm_ksum_kc / group) * group;
}

namespace detail {

/// Whether a gemm (or gemm_ksum) of m rows reads B in place rather than packing it on each call, where packing
/// would cost more than it saves (a PackedB, packed once, still streams better): B is f32 with unit column stride
/// and either few rows of A share each panel, or its rows are no wider than a panel (the last columns by masked
/// loads), or up to 256 rows of A share it (packing would cost more than it saves) and its rows spread over the
/// cache sets (a byte stride that is not a multiple of 1 KiB, so a panel stays cached as well as a packed one).
template <class TB>
constexpr bool gemm_reads_b_in_place(std::size_t m, Matrix<TB> b) noexcept {
  return std::is_same_v<TB, float> && b.cs == 1 &&
         (m <= 2 * gemm_mr || b.rs <= std::ptrdiff_t{gemm_nr} || (m <= 256 && (static_cast<std::size_t>(b.rs) * sizeof(float)) % 1024 != 0));
}

template <class T>
inline constexpr bool gemm_element = std::is_same_v<T, float> || std::is_same_v<T, half>;

/// How the micro-kernel reads B: a packed panel (NR floats per k, cache-resident), in place (rows far apart,
/// prefetched ahead), or in place with the last vector masked to the valid columns.
enum class BRead { packed, direct, masked };

/// One register block: R rows of A by V vectors of B columns. The kc columns of the block fall into groups of
/// `group` columns and each group into segments of kb (the last of each may be shorter). acc = a segment's
/// products summed from zero by FMA in k order; a group's sum is acc_0 + acc_1 + ... in order; the running sum
/// tot = -0 + group_0 + group_1 + ... (-0 is the exact additive identity, so one segment gives acc bitwise).
/// A(r, k) is at a[r * ars + k * acs] (a packed panel has ars = 1, acs = MR), B(k, c) at b[k * brs + c].
/// Then Sum: C (f32) = tot, or C + tot when `load` (a running sum over calls); otherwise C = alpha * tot + beta * C
/// for the R x n valid corner.
// grp is read only for a segment after the first of its group, which the previous segment wrote: GCC cannot see
// that at some -O levels and instruction sets (-O2 -march=znver4) and warns.
#if defined(__GNUC__) && !defined(__clang__)  // clang has no such warning (and would warn about the unknown name)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <std::size_t R, std::size_t V, BRead Read, bool Sum, class TC>
__attribute__((always_inline)) inline void micro_kernel(std::size_t kc, std::size_t group, std::size_t kb, float const* a, std::ptrdiff_t ars,
                                                       std::ptrdiff_t acs, float const* b, std::ptrdiff_t brs, MatrixOut<TC> c, std::size_t n,
                                                       float alpha, float beta, bool load, PostOp const* post = nullptr) noexcept {
  static_assert(R <= 12, "micro_kernel addresses at most twelve rows of A");
  using B = batch<float>;
  constexpr std::size_t N = R * V, W = V * lanes;
  alignas(64) float tot[R][W];  // in memory: the registers hold the accumulators, B and one broadcast
  std::size_t const tail = n - (V - 1) * lanes;  // valid columns of the last vector
  // Rows of C whose columns lie in a row: whole vectors, the last one masked to its valid columns in f32 (a panel
  // narrower than NR, as the 24 output channels of MobileNetV2's projections: element by element through memory,
  // they ran at half the speed of 32).
  bool const full = c.cs == 1 && (n == W || std::is_same_v<TC, float>);
  auto const cp = [&](std::size_t r, std::size_t j) -> TC& {
    return c.data[static_cast<std::ptrdiff_t>(r) * c.rs + static_cast<std::ptrdiff_t>(j) * c.cs];
  };
  // Vector i of C: loaded and stored whole, or its valid columns only.
  auto const load_c = [&](std::size_t i) __attribute__((always_inline)) {
    float const* cr = reinterpret_cast<float const*>(&cp(i / V, (i % V) * lanes));
    return i % V == V - 1 && tail < lanes ? load_partial(cr, tail) : B::load_unaligned(cr);
  };
  auto const store_c = [&](std::size_t i, B const& v) __attribute__((always_inline)) {
    float* cr = reinterpret_cast<float*>(&cp(i / V, (i % V) * lanes));
    if (i % V == V - 1 && tail < lanes) store_partial(v, cr, tail);
    else v.store_unaligned(cr);
  };
  B const al(alpha);
  // The post-op in locals (C's stores may alias anything behind a pointer), its bias vectors loaded once per block
  // before the first store, after the products (their registers are free then).
  bool const has_post = post != nullptr;
  PostOp const op = has_post ? *post : PostOp{nullptr};
  B bias_v[V];
  auto const load_bias = [&]() __attribute__((always_inline)) {
    if (!has_post) return;
    TILEBSP_UNROLL
    for (std::size_t v = 0; v < V; ++v)
      bias_v[v] = v == V - 1 && tail < lanes ? load_partial(op.bias + v * lanes, tail) : B::load_unaligned(op.bias + v * lanes);
  };
  // The result of a vector of C from its total v.
  auto const put = [&](std::size_t i, B v) __attribute__((always_inline)) {
    if constexpr (Sum) {
      store_c(i, load ? load_c(i) + v : v);
    } else {
      v = v * al;
      if constexpr (std::is_same_v<TC, float>) {
        if (beta != 0.0f) v = simd::fma(B(beta), load_c(i), v);
        if (has_post) v = op.apply(v, bias_v[i % V]);
        store_c(i, v);
      } else {
        store_f16(v, &cp(i / V, (i % V) * lanes));
      }
    }
  };
  // One segment (kc <= kb, group): tot = -0 + acc is acc bitwise, so a full block goes from the registers to C
  // (a trip through tot costs loads and stores that short K ranges notice).
  bool const from_registers = kc <= kb && kc <= group && full && (Sum || std::is_same_v<TC, float> || beta == 0.0f);
  // A full block of a sum over groups keeps tot in memory only between groups: the first group adds itself to C
  // (load) or to nothing (-0 + g is g bitwise), the last writes tot + g straight to C.
  bool const sum_direct = Sum && full;
  if (!from_registers && !sum_direct) {  // tot starts from C (a running sum over calls) or from -0
    if (Sum && load) {
      static_assert(!Sum || std::is_same_v<TC, float>);
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t j = 0; j < W; ++j) tot[r][j] = j < n ? static_cast<float>(cp(r, j)) : 0.0f;
    } else {
      TILEBSP_UNROLL
      for (std::size_t i = 0; i < N; ++i) B(-0.0f).store_aligned(&tot[i / V][(i % V) * lanes]);
    }
  }
  alignas(64) float grp[R][W];  // the sum of a group's segments so far, when it has several
  for (std::size_t g0 = 0; g0 < kc; g0 += group) {
    std::size_t const g1 = std::min(kc, g0 + group);
    for (std::size_t k0 = g0; k0 < g1; k0 += kb) {
      std::size_t const k1 = std::min(g1, k0 + kb);
      [&]<std::size_t... I>(std::index_sequence<I...>) __attribute__((always_inline)) {
        B acc[N];
        ((acc[I] = B(0.0f)), ...);
        // Rows 0-3 from ak, 4-7 from ak4 and 8-11 from ak8 at offsets 0..3 x ars: five integer registers address
        // twelve rows.
        float const* ak = a + static_cast<std::ptrdiff_t>(k0) * acs;
        float const* ak4 = ak + 4 * ars;
        float const* ak8 = ak + 8 * ars;
        float const* bk = b + static_cast<std::ptrdiff_t>(k0) * brs;
        for (std::size_t k = k0; k < k1; ++k, ak += acs, ak4 += acs, ak8 += acs, bk += brs) {
          if constexpr (Read != BRead::packed) {  // rows far apart: hardware prefetch does not see them coming
            TILEBSP_UNROLL
            for (std::size_t v = 0; v < V; ++v) __builtin_prefetch(bk + static_cast<std::ptrdiff_t>(tuning.gemm_prefetch_k) * brs + v * lanes);
          }
          B bv[V];
          TILEBSP_UNROLL
          for (std::size_t v = 0; v + 1 < V; ++v) bv[v] = B::load_unaligned(bk + v * lanes);
          if constexpr (Read == BRead::masked) bv[V - 1] = load_partial(bk + (V - 1) * lanes, tail);
          else bv[V - 1] = B::load_unaligned(bk + (V - 1) * lanes);
          if constexpr (R < gemm_mr) {
            TILEBSP_UNROLL
            for (auto& v : bv) in_register(v);
          }  // few rows: one load per vector
          ((acc[I] = simd::fma(B((I / V < 4 ? ak : I / V < 8 ? ak4 : ak8)[static_cast<std::ptrdiff_t>(I / V % 4) * ars]), bv[I % V], acc[I])), ...);
        }
        if (from_registers) {
          load_bias();
          (put(I, acc[I]), ...);
          return;
        }
        auto const at = [](float (&m)[R][W], std::size_t i) { return &m[i / V][(i % V) * lanes]; };
        bool const first = k0 == g0, last = k1 == g1;
        if (!first) ((acc[I] = B::load_aligned(at(grp, I)) + acc[I]), ...);
        if constexpr (Sum) {
          if (last && sum_direct) {
            if (g0 > 0) ((acc[I] = B::load_aligned(at(tot, I)) + acc[I]), ...);
            else if (load) ((acc[I] = load_c(I) + acc[I]), ...);
            if (g1 == kc) (store_c(I, acc[I]), ...);
            else ((acc[I].store_aligned(at(tot, I))), ...);
            return;
          }
        }
        if (last) {
          ((B::load_aligned(at(tot, I)) + acc[I]).store_aligned(at(tot, I)), ...);
        } else {
          ((acc[I].store_aligned(at(grp, I))), ...);
        }
      }(std::make_index_sequence<N>{});
    }
  }
  if (from_registers || sum_direct) return;
  if constexpr (Sum) {
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t j = 0; j < n; ++j) cp(r, j) = tot[r][j];
    return;
  }
  if (full && (std::is_same_v<TC, float> || beta == 0.0f)) {
    load_bias();
    for (std::size_t i = 0; i < N; ++i) put(i, B::load_aligned(&tot[i / V][(i % V) * lanes]));
    return;
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t j = 0; j < n; ++j) {
      TC& o = cp(r, j);
      float v = tot[r][j] * alpha;
      v = beta != 0.0f ? xsimd::fma(beta, static_cast<float>(o), v) : v;
      if (has_post) v = op.apply(B(v), B(op.bias[j])).get(0);  // the vector instructions, one lane
      o = TC(v);
    }
}

/// micro_kernel out of line: the edge blocks, one instantiation per shape rather than one per call site.
template <std::size_t R, std::size_t V, BRead Read, bool Sum, class TC>
__attribute__((noinline)) void micro_kernel_call(std::size_t kc, std::size_t group, std::size_t kb, float const* a, std::ptrdiff_t ars,
                                                 std::ptrdiff_t acs, float const* b, std::ptrdiff_t brs, MatrixOut<TC> c, std::size_t n,
                                                 float alpha, float beta, bool load, PostOp const* post) noexcept {
  micro_kernel<R, V, Read, Sum>(kc, group, kb, a, ars, acs, b, brs, c, n, alpha, beta, load, post);
}

/// Rows of the register block of a gemm_ksum whose groups are single segments (the tile plans' K ranges without
/// serial steps): 6 x 2 accumulators beside 6 x 2 running sums, all in registers with AVX-512's 32 (0: none, the
/// sums stay in memory). Against 8 x 2 with the sums in memory, the group's epilogue is register adds instead of
/// loads, adds and stores.
inline constexpr std::size_t gemm_ksum_mr = tuning.gemm_ksum_mr;

/// One register block of such a gemm_ksum: R rows of A (A(r, k) at a[r * ars + k * acs]) by two vectors of B
/// (B(k, c) at b[k * brs + c]), kc columns in groups of `group`; tot = g_0 + g_1 + ..., each group's products
/// summed from zero by FMA in k order, tot starting from C when `load`: bitwise micro_kernel<R, 2, Read, true>
/// with kb = group (-0 + g_0 is g_0). Stores the R x 2 vectors of tot to C (row stride crs).
template <std::size_t R, BRead Read>
__attribute__((noinline)) void ksum_kernel(std::size_t kc, std::size_t group, float const* a, std::ptrdiff_t ars, std::ptrdiff_t acs,
                                           float const* b, std::ptrdiff_t brs, float* c, std::ptrdiff_t crs, bool load) noexcept {
  using B = batch<float>;
  constexpr std::size_t V = 2;
  auto const cv = [&](std::size_t i) { return c + static_cast<std::ptrdiff_t>(i / V) * crs + static_cast<std::ptrdiff_t>(i % V * lanes); };
  [&]<std::size_t... I>(std::index_sequence<I...>) __attribute__((always_inline)) {
    B tot[R * V], acc[R * V];
    if (load) ((tot[I] = B::load_unaligned(cv(I))), ...);
    else ((tot[I] = B(-0.0f)), ...);
    // The groups lie end to end along K: the pointers run on from one into the next.
    float const* ak = a;
    float const* ak4 = a + 4 * ars;
    float const* bk = b;
    for (std::size_t left = kc; left > 0;) {
      std::size_t len = std::min(group, left);
      left -= len;
      ((acc[I] = B(0.0f)), ...);
      for (; len > 0; --len, ak += acs, ak4 += acs, bk += brs) {
        if constexpr (Read != BRead::packed) {
          __builtin_prefetch(bk + static_cast<std::ptrdiff_t>(tuning.gemm_prefetch_k) * brs);
          __builtin_prefetch(bk + static_cast<std::ptrdiff_t>(tuning.gemm_prefetch_k) * brs + lanes);
        }
        B const b0 = B::load_unaligned(bk), b1 = B::load_unaligned(bk + lanes);
        (fma_in_registers(acc[I], B((I / V < 4 ? ak : ak4)[static_cast<std::ptrdiff_t>(I / V % 4) * ars]), I % V ? b1 : b0), ...);
      }
      ((tot[I] = tot[I] + acc[I]), ...);
    }
    ((tot[I].store_unaligned(cv(I))), ...);
  }(std::make_index_sequence<R * V>{});
}

/// The rows [0, mc) of one full-width panel (NR columns, C unit stride) of such a gemm_ksum, A read in place:
/// blocks of gemm_ksum_mr rows, then the last rows; each block first prefetches the C rows of the next.
template <BRead Read>
void ksum_panel_rows(std::size_t mc, std::size_t kc, std::size_t group, float const* a, std::ptrdiff_t ars, std::ptrdiff_t acs,
                     float const* b, std::ptrdiff_t brs, float* c, std::ptrdiff_t crs, bool load) noexcept {
  constexpr std::size_t R = gemm_ksum_mr > 0 ? gemm_ksum_mr : 1;  // never called without the register blocks
  auto const row = [](auto* p, std::ptrdiff_t stride, std::size_t r) { return p + static_cast<std::ptrdiff_t>(r) * stride; };
  std::size_t r0 = 0;
  for (; r0 + R <= mc; r0 += R) {
    for (std::size_t r = r0 + R; r < std::min(mc, r0 + 2 * R); ++r) {
      __builtin_prefetch(row(c, crs, r), 1);
      __builtin_prefetch(row(c, crs, r) + gemm_nr - 1, 1);
    }
    ksum_kernel<R, Read>(kc, group, row(a, ars, r0), ars, acs, b, brs, row(c, crs, r0), crs, load);
  }
  [&]<std::size_t... E>(std::index_sequence<E...>) {
    ((mc - r0 == E + 1 ? ksum_kernel<E + 1, Read>(kc, group, row(a, ars, r0), ars, acs, b, brs, row(c, crs, r0), crs, load) : void()), ...);
  }(std::make_index_sequence<R - 1>{});
}

/// Columns of the panels a gemm of m rows walks: NR, or twice that for at most MR/2 rows of A and B read in place
/// (four vectors per row of B: longer runs of each row per pass, as many accumulators as a full block).
constexpr std::size_t gemm_panel(std::size_t m, bool direct_b) noexcept {
  return direct_b && 2 * m <= gemm_mr ? 2 * gemm_nr : gemm_nr;
}

/// Runs the micro-kernel instantiated for `rows` (1..MR) rows and as many vectors as `nr` columns need (up to two,
/// or four for at most MR/2 rows).
template <BRead Read, bool Sum, class TC>
void micro_kernel_rows(std::size_t rows, std::size_t nr, std::size_t kc, std::size_t group, std::size_t kb, float const* a, std::ptrdiff_t ars,
                       std::ptrdiff_t acs, float const* b, std::ptrdiff_t brs, MatrixOut<TC> c, float alpha, float beta,
                       bool load, PostOp const* post) noexcept {
  auto const run = [&]<std::size_t V, std::size_t... R>(std::index_sequence<R...>) {
    ((rows == R + 1 ? micro_kernel_call<R + 1, V, Read, Sum>(kc, group, kb, a, ars, acs, b, brs, c, nr, alpha, beta, load, post) : void()), ...);
  };
  std::size_t const vectors = (nr + lanes - 1) / lanes;
  if (vectors <= 1) run.template operator()<1>(std::make_index_sequence<gemm_mr>{});
  else if (vectors == 2) run.template operator()<2>(std::make_index_sequence<gemm_mr>{});
  else if constexpr (Read != BRead::packed) {
    if (vectors == 3) run.template operator()<3>(std::make_index_sequence<gemm_mr / 2>{});
    else run.template operator()<4>(std::make_index_sequence<gemm_mr / 2>{});
  }
}

/// The row blocks [0, mc) of one panel: the full blocks of MR rows in one loop with the micro-kernel inlined, then
/// the last rows. Over K ranges of at least gemm_prefetch_c_k rows each block first prefetches the C rows of the
/// next (a cache miss each when C is large), or of the next panel's first block at `next` (null: none; next_cols
/// columns). A call per block passed a dozen arguments on the stack behind the block's C stores, which short K
/// ranges (the 56² 1x1 convolutions) noticed.
template <BRead Read, bool Sum, class TC>
void panel_rows(std::size_t mc, std::size_t nr, std::size_t kc, std::size_t group, std::size_t kb, float const* a, std::ptrdiff_t astep,
                std::ptrdiff_t ars, std::ptrdiff_t acs, float const* b, std::ptrdiff_t brs, MatrixOut<TC> c, TC const* next,
                std::size_t next_cols, float alpha, float beta, bool load, PostOp const* post = nullptr) noexcept {
  std::size_t const vectors = (nr + lanes - 1) / lanes;
  // Four-vector panels hold at most MR/2 rows (gemm_panel): no full block, all rows go to the edge path.
  std::size_t const full = vectors <= 2 ? mc / gemm_mr * gemm_mr : 0;
  auto const at = [&](std::size_t r, std::size_t j) {
    return c.data + static_cast<std::ptrdiff_t>(r) * c.rs + static_cast<std::ptrdiff_t>(j) * c.cs;
  };
  auto const ablock = [&](std::size_t r0) { return a + static_cast<std::ptrdiff_t>(r0 / gemm_mr) * astep; };
  bool const prefetch = kc >= gemm_prefetch_c_k;
  auto const prefetch_after = [&](std::size_t r0) __attribute__((always_inline)) {
    if (!prefetch) return;
    if (r0 + gemm_mr < mc) {
      for (std::size_t r = r0 + gemm_mr; r < std::min(mc, r0 + 2 * gemm_mr); ++r) {
        __builtin_prefetch(at(r, 0), 1);
        __builtin_prefetch(at(r, nr - 1), 1);
      }
    } else if (next) {
      for (std::size_t r = 0; r < std::min(mc, gemm_mr); ++r) {
        __builtin_prefetch(next + static_cast<std::ptrdiff_t>(r) * c.rs, 1);
        __builtin_prefetch(next + static_cast<std::ptrdiff_t>(r) * c.rs + static_cast<std::ptrdiff_t>(next_cols - 1) * c.cs, 1);
      }
    }
  };
  auto const blocks = [&]<std::size_t V>() {
    for (std::size_t r0 = 0; r0 < full; r0 += gemm_mr) {
      prefetch_after(r0);
      micro_kernel<gemm_mr, V, Read, Sum>(kc, group, kb, ablock(r0), ars, acs, b, brs, MatrixOut<TC>{at(r0, 0), c.rs, c.cs}, nr, alpha,
                                          beta, load, post);
    }
  };
  if (vectors <= 1) blocks.template operator()<1>();
  else if (vectors == 2) blocks.template operator()<2>();
  if (full < mc) {
    prefetch_after(full);
    micro_kernel_rows<Read, Sum>(mc - full, nr, kc, group, kb, ablock(full), ars, acs, b, brs, MatrixOut<TC>{at(full, 0), c.rs, c.cs},
                                 alpha, beta, load, post);
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

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
          load_f16(row).store_unaligned(o);
          load_f16(row + lanes).store_unaligned(o + lanes);
        }
      } else {
        for (std::size_t c = 0; c < nr; ++c) o[c] = static_cast<float>(row[static_cast<std::ptrdiff_t>(c) * b.cs]);
        for (std::size_t c = nr; c < gemm_nr; ++c) o[c] = 0.0f;
      }
    }
    out += kc * gemm_nr;
  }
}

}  // namespace detail

namespace detail {

/// The blocked loops around the micro-kernel. Not Sum: C = alpha * A * B + beta * C (later K blocks accumulate
/// onto C). Sum: C (f32) = the in-order sum of the K groups of `group` columns, each the in-order sum of its
/// segments of kb columns (kb <= gemm_kc; each cache block holds whole groups, and later blocks continue the
/// running sum in C).
template <bool Sum, class TA, class TB, class TC>
void gemm_blocked(std::size_t m, std::size_t n, std::size_t k, std::size_t group, std::size_t kb, float alpha, Matrix<TA> a, Matrix<TB> b,
                  float beta, MatrixOut<TC> c, PackedB const* pre = nullptr, PostOp const* post = nullptr) {
  auto const cat = [&](std::size_t i, std::size_t j) -> TC& {
    return c.data[static_cast<std::ptrdiff_t>(i) * c.rs + static_cast<std::ptrdiff_t>(j) * c.cs];
  };
  // f32 A is read in place (broadcast loads need no layout); f16 A is converted into packed panels. B is read
  // packed ahead (pre), in place (gemm_reads_b_in_place), or packed here block by block.
  constexpr bool direct_a = std::is_same_v<TA, float>;
  bool const direct_b = !pre && gemm_reads_b_in_place(m, b);
  Blocks const bl = blocks();
  // Columns per block: packing B here is bounded by NC (B in place or packed ahead needs no bound).
  std::size_t const nblock = direct_b || pre ? n : bl.gemm_nc;
  std::size_t const np = (std::min(n, nblock) + gemm_nr - 1) / gemm_nr * gemm_nr;
  std::size_t const block = gemm_b_block(Sum ? group : 0);
  float* bp = direct_b || pre ? nullptr : scratch_b().get(block * np);
  float* ap = direct_a ? nullptr : scratch_a().get(block * (bl.gemm_mc + gemm_mr));
  std::size_t const panel = gemm_panel(m, direct_b);
  for (std::size_t jc = 0; jc < n; jc += nblock) {
    std::size_t const jend = std::min(n, jc + nblock);
    for (std::size_t k0 = 0; k0 < k; k0 += block) {
      std::size_t const kc = std::min(block, k - k0);
      float const kbeta = k0 == 0 ? beta : 1.0f;  // later K blocks accumulate onto C
      Matrix<TB> const bk{b.data + static_cast<std::ptrdiff_t>(k0) * b.rs, b.rs, b.cs};
      if (!direct_b && !pre) pack_b(Matrix<TB>{bk.data + static_cast<std::ptrdiff_t>(jc) * b.cs, b.rs, b.cs}, kc, jend - jc, bp);
      for (std::size_t i0 = 0; i0 < m; i0 += bl.gemm_mc) {
        std::size_t const mc = std::min(bl.gemm_mc, m - i0);
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
        for (std::size_t j0 = jc; j0 < jend; j0 += panel) {
          std::size_t const nr = std::min(panel, jend - j0);
          float const* bpanel = nullptr;
          std::ptrdiff_t brs = gemm_nr;
          BRead read = BRead::packed;
          if (pre) {
            bpanel = pre->data + k0 * pre->ld + (pre->col + j0) * kc;
          } else if (!direct_b) {
            bpanel = bp + (j0 - jc) * kc;
          } else {
            if constexpr (std::is_same_v<TB, float>) bpanel = bk.data + j0;
            brs = b.rs;
            read = nr % lanes != 0 ? BRead::masked : BRead::direct;
          }
          std::size_t const grp = Sum ? group : kc, seg = Sum ? kb : kc;
          std::ptrdiff_t const astep = direct_a ? static_cast<std::ptrdiff_t>(gemm_mr) * a.rs : apanel;
          TC const* next = j0 + panel < jend ? &cat(i0, j0 + panel) : nullptr;
          std::size_t const next_cols = j0 + panel < jend ? std::min(panel, jend - j0 - panel) : 0;
          // Single-segment groups, several per block, on full panels of A read in place: the running sums in registers.
          bool const ksum_registers = Sum && direct_a && seg >= grp && kc > grp && nr == gemm_nr && c.cs == 1;
          // The post-op on the last K block, at the panel's columns.
          PostOp panel_op{nullptr};
          PostOp const* panel_post = nullptr;
          if (post && k0 + kc == k) panel_op = *post, panel_op.bias += j0, panel_post = &panel_op;
          auto const run = [&]<BRead Read>() {
            if constexpr (Sum && gemm_ksum_mr > 0 && Read != BRead::masked) {
              if (ksum_registers) {
                ksum_panel_rows<Read>(mc, kc, grp, ablk, ars, acs, bpanel, brs, &cat(i0, j0), c.rs, k0 > 0);
                return;
              }
            }
            panel_rows<Read, Sum>(mc, nr, kc, grp, seg, ablk, astep, ars, acs, bpanel, brs, MatrixOut<TC>{&cat(i0, j0), c.rs, c.cs}, next,
                                  next_cols, alpha, kbeta, k0 > 0, panel_post);
          };
          if (read == BRead::packed) run.template operator()<BRead::packed>();
          else if (read == BRead::direct) run.template operator()<BRead::direct>();
          else run.template operator()<BRead::masked>();
        }
      }
    }
  }
}

/// gemm on B in place (pre null) or packed ahead (pre).
template <class TA, class TB, class TC>
void gemm_any(std::size_t m, std::size_t n, std::size_t k, float alpha, Matrix<TA> a, Matrix<TB> b, PackedB const* pre, float beta,
              MatrixOut<TC> c, PostOp const* post = nullptr) {
  static_assert(gemm_element<TA> && gemm_element<TB> && gemm_element<TC>, "gemm: operands are float or half");
  if (m == 0 || n == 0) return;
  if constexpr (!std::is_same_v<TC, float>) post = nullptr;  // never set: simd::gemm's post-ops take an f32 C
  auto const cat = [&](std::size_t i, std::size_t j) -> TC& {
    return c.data[static_cast<std::ptrdiff_t>(i) * c.rs + static_cast<std::ptrdiff_t>(j) * c.cs];
  };
  if (k == 0) {
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        float v = beta != 0.0f ? beta * static_cast<float>(cat(i, j)) : 0.0f;
        if (post) v = post->apply(batch<float>(v), batch<float>(post->bias[j])).get(0);
        cat(i, j) = TC(v);
      }
    return;
  }
  if constexpr (!std::is_same_v<TC, float>) {
    if (k > gemm_kc) {  // partial sums over several K blocks stay in f32; round once at the end
      float* t = scratch_c().get(m * n);
      gemm_any(m, n, k, alpha, a, b, pre, 0.0f, MatrixOut<float>{t, static_cast<std::ptrdiff_t>(n), 1});
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j)
          cat(i, j) = TC(beta != 0.0f ? xsimd::fma(beta, static_cast<float>(cat(i, j)), t[i * n + j]) : t[i * n + j]);
      return;
    }
  }
  gemm_blocked<false>(m, n, k, k, k, alpha, a, b, beta, c, pre, post);
}

template <class TA, class TB>
void gemm_ksum_any(std::size_t m, std::size_t n, std::size_t k, std::size_t group, std::size_t kb, Matrix<TA> a, Matrix<TB> b,
                   PackedB const* pre, MatrixOut<float> s) {
  static_assert(gemm_element<TA> && gemm_element<TB>, "gemm_ksum: operands are float or half");
  if (k == 0) return gemm_any(m, n, k, 1.0f, a, b, pre, 0.0f, s);  // the empty sum: zeros
  if (m == 0 || n == 0) return;
  group = std::max<std::size_t>(group, 1);
  gemm_blocked<true>(m, n, k, group, std::clamp<std::size_t>(kb, 1, std::min(group, gemm_kc)), 1.0f, a, b, 0.0f, s, pre);
}

}  // namespace detail

/// C[m x n] = alpha * A[m x k] * B[k x n] + beta * C, accumulating in f32 (beta == 0: C is not read). A and B are
/// f32 or f16, C is f32 or f16, any strides. Deterministic: each element's summation order depends only on k and
/// the blocking constants, never on m, n, the operands' layout or the thread.
template <class TA, class TB, class TC>
void gemm(std::size_t m, std::size_t n, std::size_t k, float alpha, Matrix<TA> a, Matrix<TB> b, float beta,
          MatrixOut<TC> c) {
  detail::gemm_any(m, n, k, alpha, a, b, nullptr, beta, c);
}
/// The same product on B packed ahead (pack_b_panels with gemm_b_block()): bitwise the same result.
template <class TA, class TC>
void gemm(std::size_t m, std::size_t n, std::size_t k, float alpha, Matrix<TA> a, PackedB b, float beta, MatrixOut<TC> c) {
  detail::gemm_any(m, n, k, alpha, a, Matrix<float>{nullptr, 0, 1}, &b, beta, c);
}
/// The product into an f32 C, each result stored as `post` computes it from the product's value: bitwise the
/// gemm above, then the post-op's map over C (PostOp).
template <class TA, class TB>
void gemm(std::size_t m, std::size_t n, std::size_t k, float alpha, Matrix<TA> a, Matrix<TB> b, float beta, MatrixOut<float> c,
          PostOp const& post) {
  detail::gemm_any(m, n, k, alpha, a, b, nullptr, beta, c, &post);
}
/// The same on B packed ahead.
template <class TA>
void gemm(std::size_t m, std::size_t n, std::size_t k, float alpha, Matrix<TA> a, PackedB b, float beta, MatrixOut<float> c,
          PostOp const& post) {
  detail::gemm_any(m, n, k, alpha, a, Matrix<float>{nullptr, 0, 1}, &b, beta, c, &post);
}

/// S[m x n] (f32) = P_0 + P_1 + ... summed in order over the groups of `group` columns of K (the last may be
/// shorter), where P_j = Q_j0 + Q_j1 + ... summed in order over the group's segments of `kb` columns (the last may
/// be shorter) and Q = A[:, segment] * B[segment, :] computed exactly as gemm(beta 0) on the segment computes it:
/// bitwise one gemm per segment, accumulated (beta 1) within each group and summed across groups in f32, without
/// the intermediate matrices. kb is clamped to [1, min(group, gemm_kc)] and group to at least 1; k = 0 gives zeros.
template <class TA, class TB>
void gemm_ksum(std::size_t m, std::size_t n, std::size_t k, std::size_t group, std::size_t kb, Matrix<TA> a, Matrix<TB> b,
               MatrixOut<float> s) {
  detail::gemm_ksum_any(m, n, k, group, kb, a, b, nullptr, s);
}
/// The same sum on B packed ahead (pack_b_panels with gemm_b_block(max(group, 1))): bitwise the same result.
template <class TA>
void gemm_ksum(std::size_t m, std::size_t n, std::size_t k, std::size_t group, std::size_t kb, Matrix<TA> a, PackedB b, MatrixOut<float> s) {
  detail::gemm_ksum_any(m, n, k, group, kb, a, Matrix<float>{nullptr, 0, 1}, &b, s);
}
/// The one-level form: groups of one segment of kb columns.
template <class TA, class TB>
void gemm_ksum(std::size_t m, std::size_t n, std::size_t k, std::size_t kb, Matrix<TA> a, Matrix<TB> b, MatrixOut<float> s) {
  kb = std::clamp<std::size_t>(kb, 1, gemm_kc);
  gemm_ksum(m, n, k, kb, kb, a, b, s);
}

/// Packs B[k x n] (f32 or f16, any strides) for products that reuse it, as the packed columns [col, col + n) of
/// `out` (col a multiple of NR): K blocks of `block` rows (gemm_b_block of the product that reads it) from row 0,
/// the block at row k0 at out + k0 * ld, each a row of NR-column panels (columns past n zero). ld is at least the
/// packed columns rounded up to NR; a product over packed columns [c, ...) reads PackedB{out, ld, c}. Column
/// ranges may be packed by separate calls (threads), each writing only its own panels.
template <class TB>
void pack_b_panels(Matrix<TB> b, std::size_t k, std::size_t n, std::size_t block, float* out, std::size_t ld, std::size_t col = 0) {
  static_assert(detail::gemm_element<TB>, "pack_b_panels: B is float or half");
  block = std::max<std::size_t>(block, 1);
  for (std::size_t k0 = 0; k0 < k; k0 += block) {
    std::size_t const kc = std::min(block, k - k0);
    detail::pack_b(Matrix<TB>{b.data + static_cast<std::ptrdiff_t>(k0) * b.rs, b.rs, b.cs}, kc, n, out + k0 * ld + col * kc);
  }
}

/// The f32 form with a row-major C of row stride ldc. A template only so that a file that never calls it does not
/// instantiate the f32 gemm (an inline function's calls are instantiated in every file that includes it).
template <int = 0>
void gemm(std::size_t m, std::size_t n, std::size_t k, float alpha, MatrixRef a, MatrixRef b, float beta, float* c,
          std::size_t ldc) {
  gemm(m, n, k, alpha, a, b, beta, MatrixOut<float>{c, static_cast<std::ptrdiff_t>(ldc), 1});
}

}  // namespace tilebsp::simd
