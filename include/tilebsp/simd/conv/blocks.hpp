// Convolution kernels, their register blocks: the forward block over a box, the row block of 3-wide kernels,
// the weight-gradient blocks, and the dispatch of their compile-time sizes.
#pragma once

#include <tilebsp/simd/conv/box.hpp>
#include <tilebsp/simd/gemm.hpp>
#include <tilebsp/simd/tuning.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

namespace tilebsp::simd::detail {
/// The XL floats at p repeated across a vector (XL a power of two below lanes): one broadcast load on x86.
template <std::size_t XL>
[[gnu::always_inline]] inline batch<float> load_repeated(float const* p) noexcept {
  static_assert(XL > 1 && XL < lanes && lanes % XL == 0);
  return isa::load_repeated<XL, arch>(p, arch{});
}

/// x permuted: lane m takes lane idx[m].
inline batch<float> permute_lanes(batch<float> const& x, std::int32_t const* idx) noexcept {
  return isa::permute_lanes<arch>(x, idx, arch{});
}

/// The input of one step for a vector of lanes: the float at x broadcast (XL = 1: a vector of output channels
/// per group), the vector at x (XL = lanes: lanes spanning groups; in a box or, unaligned, where the source lies)
/// or the XL floats at x repeated (an interleaved column).
template <std::size_t XL>
[[gnu::always_inline]] inline batch<float> load_step(float const* x) noexcept {
  if constexpr (XL == 1) return batch<float>(*x);
  else if constexpr (XL == lanes) return batch<float>::load_unaligned(x);
  else return load_repeated<XL>(x);
}

/// One register-block row: acc[v] += x * w[v] with x = load_step<XL> (V > 1 only for XL = 1).
template <std::size_t V, std::size_t XL>
[[gnu::always_inline]] inline void fma_row(float const* x, batch<float> const (&w)[V], batch<float> (&acc)[V]) noexcept {
  if constexpr (XL == 1) {
    batch<float> const xv(*x);
    TILEBSP_UNROLL
    for (std::size_t v = 0; v < V; ++v) acc[v] = simd::fma(xv, w[v], acc[v]);
  } else {
    acc[0] = simd::fma(load_step<XL>(x), w[0], acc[0]);
  }
}

/// acc[r][v] over T x K steps: step (t, k) multiplies weights wp[t * K + k] by the box at xp[r] + toff[t] + k * ks
/// (see fma_row): each row is one pointer and the inner loop one index (plain addressing modes, no per-step
/// offsets). The accumulators start from acc_io, or from zero when `out` is given, and end in acc_io, or in
/// out[r] (row r's V vectors stored contiguously there), permuted by `perm` when given; with `add` (and no perm),
/// each added to the value there instead (a partial summed into its reduction's sums). The `nnext` rows at
/// next[i] (V vectors each: the next block's results) are prefetched for writing, spread over the outer steps.
template <std::size_t R, std::size_t V, std::size_t XL>
void forward_block(std::size_t T, std::size_t K, std::ptrdiff_t const* toff, std::ptrdiff_t ks, float const* wp,
                   float const* const* xp, float* acc_io, float* const* out = nullptr,
                   std::int32_t const* perm = nullptr, float* const* next = nullptr, std::size_t nnext = 0,
                   bool add = false) noexcept {
  using B = batch<float>;
  B acc[R][V];
  TILEBSP_UNROLL
  for (std::size_t r = 0; r < R; ++r)
    TILEBSP_UNROLL
    for (std::size_t v = 0; v < V; ++v) acc[r][v] = out ? B(0.0f) : B::load_aligned(acc_io + (r * V + v) * lanes);
  for (std::size_t t = 0; t < T; ++t) {
    float const* p[R];
    TILEBSP_UNROLL
    for (std::size_t r = 0; r < R; ++r) p[r] = xp[r] + toff[t];
    // The next outer step reads other box rows (a kernel row further down): their lines come from L2, and
    // fetched ahead they do not stall its first steps. Not worth two prefetches per row for a few inner steps.
    if (K >= 8 && t + 1 < T) {
      TILEBSP_UNROLL
      for (std::size_t r = 0; r < R; ++r) {
        __builtin_prefetch(xp[r] + toff[t + 1]);
        __builtin_prefetch(xp[r] + toff[t + 1] + static_cast<std::ptrdiff_t>(K - 1) * ks);
      }
    }
    // A few of the next block's result rows per outer step: all at once, their misses fill the core's miss
    // buffers and the prefetches stall (the stem's large output leaves the caches).
    for (std::size_t i = t * nnext / T, i1 = (t + 1) * nnext / T; i < i1; ++i)
      for (std::size_t v = 0; v < V; ++v) __builtin_prefetch(next[i] + v * lanes, 1);
    for (std::size_t k = 0; k < K; ++k, wp += V * lanes) {
      B w[V];
      TILEBSP_UNROLL
      for (std::size_t v = 0; v < V; ++v) w[v] = B::load_aligned(wp + v * lanes);
      std::ptrdiff_t const o = static_cast<std::ptrdiff_t>(k) * ks;
      TILEBSP_UNROLL
      for (std::size_t r = 0; r < R; ++r) fma_row<V, XL>(p[r] + o, w, acc[r]);
    }
  }
  TILEBSP_UNROLL
  for (std::size_t r = 0; r < R; ++r)
    TILEBSP_UNROLL
    for (std::size_t v = 0; v < V; ++v) {
      if (out && add) (acc[r][v] + B::load_unaligned(out[r] + v * lanes)).store_unaligned(out[r] + v * lanes);
      else if (out) (perm ? permute_lanes(acc[r][v], perm) : acc[r][v]).store_unaligned(out[r] + v * lanes);
      else acc[r][v].store_aligned(acc_io + (r * V + v) * lanes);
    }
}

/// Taps of dimension 2 that row_block handles (a 3-wide kernel, stride and dilation 1 there).
inline constexpr std::size_t row_taps = 3;
/// Whether dimension 2 of a loop runs as row blocks: row_taps taps, stride and dilation 1.
inline bool row_kernel(ConvLoop const& L) noexcept {
  auto const& d = L.dim[2];
  return d.taps == static_cast<std::int64_t>(row_taps) && d.a == 1 && d.b == 1;
}

/// How the steps of a source column (xl_source) read their inputs: the steps run (t0, t1, j) over whole rows of
/// cj reduction channels, and step t's lane l takes the float idx[(t mod cj) * lanes + l] after the step's
/// position.
struct SourceSteps {
  std::int32_t const* idx = nullptr;
  std::size_t cj = 1;
};

/// R consecutive output positions of one row, `s` floats apart in the box, over T outer steps of row_taps inner
/// steps: position r's step (t, k) multiplies the weights at wp + woff[t] + k * wk by the box at x + toff[t] +
/// (r + k) * s. An input is thus loaded once for up to three positions (taps): R + 2 loads for 3 R fused
/// multiply-adds per outer step, where forward_block needs one load per multiply-add. `zero_first` and
/// `zero_last`: the first and last inputs are zeros (padding), whose steps are skipped. Results go to out + r * os
/// (V vectors each, lanes permuted by `perm` when given); with `load`, the chains continue from the values there
/// (lanes gathered by `inv`, the inverse of perm). A source column (XL = xl_source) reads its inputs through
/// `sl` (see SourceSteps). With `post` (and no perm), each result gets it before it leaves the registers, its bias
/// at post->bias for the column's lanes.
template <std::size_t R, std::size_t V, std::size_t XL>
void row_block(std::size_t T, std::ptrdiff_t const* toff, std::ptrdiff_t s, float const* wp, std::ptrdiff_t const* woff,
               std::ptrdiff_t wk, float const* x, float* out, std::ptrdiff_t os, std::int32_t const* perm,
               std::int32_t const* inv, bool load, bool zero_first, bool zero_last, SourceSteps const& sl = {},
               PostOp const* post = nullptr) noexcept {
  using B = batch<float>;
  constexpr std::size_t K = row_taps;
  B acc[R][V];
  TILEBSP_UNROLL
  for (std::size_t r = 0; r < R; ++r)
    TILEBSP_UNROLL
    for (std::size_t v = 0; v < V; ++v) {
      if (!load) acc[r][v] = B(0.0f);
      else if (perm) acc[r][v] = permute_lanes(B::load_unaligned(out + static_cast<std::ptrdiff_t>(r) * os + v * lanes), inv);
      else acc[r][v] = B::load_unaligned(out + static_cast<std::ptrdiff_t>(r) * os + v * lanes);
    }
  for (std::size_t t = 0, j = 0; t < T; ++t, j = j + 1 == sl.cj ? 0 : j + 1) {
    float const* p = x + toff[t];
    float const* wq = wp + woff[t];
    [[maybe_unused]] auto const ix = [&] {
      if constexpr (XL == xl_source) return LaneIndex(sl.idx + j * lanes);
      else return 0;
    }();
    B w[K][V];
    TILEBSP_UNROLL
    for (std::size_t k = 0; k < K; ++k)
      TILEBSP_UNROLL
      for (std::size_t v = 0; v < V; ++v) w[k][v] = B::load_unaligned(wq + static_cast<std::ptrdiff_t>(k) * wk + v * lanes);
    // Input i feeds position r = i - k with tap k; for each position the taps come in order.
    TILEBSP_UNROLL
    for (std::size_t i = 0; i < R + K - 1; ++i) {
      if ((i == 0 && zero_first) || (i == R + K - 2 && zero_last)) continue;
      float const* const pi = p + static_cast<std::ptrdiff_t>(i) * s;
      B xi;
      if constexpr (XL == xl_source) xi = ix.load(pi);
      else xi = load_step<XL>(pi);
      TILEBSP_UNROLL
      for (std::size_t k = 0; k < K; ++k) {
        if (i < k || i - k >= R) continue;
        TILEBSP_UNROLL
        for (std::size_t v = 0; v < V; ++v) acc[i - k][v] = simd::fma(xi, w[k][v], acc[i - k][v]);
      }
    }
  }
  if (post) {  // the bias loaded after the products, whose weights' registers are free then
    PostOp const op = *post;
    B bias[V];
    TILEBSP_UNROLL
    for (std::size_t v = 0; v < V; ++v) bias[v] = B::load_unaligned(op.bias + v * lanes);
    TILEBSP_UNROLL
    for (std::size_t r = 0; r < R; ++r)
      TILEBSP_UNROLL
      for (std::size_t v = 0; v < V; ++v) op.apply(acc[r][v], bias[v]).store_unaligned(out + static_cast<std::ptrdiff_t>(r) * os + v * lanes);
    return;
  }
  TILEBSP_UNROLL
  for (std::size_t r = 0; r < R; ++r)
    TILEBSP_UNROLL
    for (std::size_t v = 0; v < V; ++v)
      (perm ? permute_lanes(acc[r][v], perm) : acc[r][v]).store_unaligned(out + static_cast<std::ptrdiff_t>(r) * os + v * lanes);
}

/// acc[r][v] over P positions: y = yrow[p], x = the box at x + poff[p] + qoff[r]; acc_io need not be aligned.
template <std::size_t R, std::size_t V, std::size_t XL>
void gradient_block(std::size_t P, float const* yrow, float const* x, std::ptrdiff_t const* poff, std::ptrdiff_t const* qoff,
                    float* acc_io) noexcept {
  using B = batch<float>;
  B acc[R][V];
  TILEBSP_UNROLL
  for (std::size_t r = 0; r < R; ++r)
    TILEBSP_UNROLL
    for (std::size_t v = 0; v < V; ++v) acc[r][v] = B::load_unaligned(acc_io + (r * V + v) * lanes);
  for (std::size_t p = 0; p < P; ++p) {
    B y[V];
    TILEBSP_UNROLL
    for (std::size_t v = 0; v < V; ++v) y[v] = B::load_aligned(yrow + (p * V + v) * lanes);
    float const* xp = x + poff[p];
    TILEBSP_UNROLL
    for (std::size_t r = 0; r < R; ++r) fma_row<V, XL>(xp + qoff[r], y, acc[r]);
  }
  TILEBSP_UNROLL
  for (std::size_t r = 0; r < R; ++r)
    TILEBSP_UNROLL
    for (std::size_t v = 0; v < V; ++v) acc[r][v].store_unaligned(acc_io + (r * V + v) * lanes);
}

/// Weight gradients along a row (a 3-wide kernel with stride and dilation 1 there): the accumulators of the
/// three taps k of RJ reduction channels, acc[k][r] at acc_io + k * ks + r * V lanes. Over `rows` output rows of
/// ow positions (output gradients at y, one row after the other, V vectors per position; the box row of output
/// row i at x + i * xrow, inputs xs apart, reduction channel r at + r * XL; ow >= 2), input i of a row serves position
/// i - k of tap k: one load for three multiply-adds, where gradient_block loads an input per multiply-add. Each
/// accumulator still takes its positions in row-major order, so the sums are gradient_block's bitwise.
/// `zero_first` and `zero_last`: a row's first and last inputs are zeros (padding), whose steps are skipped.
/// With `from_zero` the chains start from zero, not from the values at acc_io. With `prefetch_rows` each step
/// prefetches its input's position in the next row (xrow further on) into L1.
template <std::size_t RJ, std::size_t V, std::size_t XL, std::size_t VS = V>
void gradient_row_block(std::size_t rows, std::size_t ow, float const* y, float const* x, std::ptrdiff_t xrow,
                        std::ptrdiff_t xs, float* acc_io, std::ptrdiff_t ks, bool zero_first, bool zero_last, bool from_zero,
                        bool prefetch_rows = false) noexcept {
  static_assert(V <= VS);
  using B = batch<float>;
  constexpr std::size_t K = row_taps, VL = VS * lanes;
  B acc[K][RJ][V];
  TILEBSP_UNROLL
  for (std::size_t k = 0; k < K; ++k)
    TILEBSP_UNROLL
    for (std::size_t r = 0; r < RJ; ++r)
      TILEBSP_UNROLL
      for (std::size_t v = 0; v < V; ++v)
        acc[k][r][v] = from_zero ? B(0.0f) : B::load_unaligned(acc_io + static_cast<std::ptrdiff_t>(k) * ks + (r * VS + v) * lanes);
  // Input i with the taps in mask M (bit k: position i - k exists); the first two and last two inputs of a row
  // have two or one tap, the others all three (ow >= 2).
  auto const step = [&]<unsigned M>(float const* yr, float const* xi, std::size_t i) __attribute__((always_inline)) {
    B yk[K][V];
    TILEBSP_UNROLL
    for (std::size_t k = 0; k < K; ++k)
      TILEBSP_UNROLL
      for (std::size_t v = 0; v < V; ++v)
        if (M >> k & 1) yk[k][v] = B::load_aligned(yr + (i - k) * VL + v * lanes);
    TILEBSP_UNROLL
    for (std::size_t r = 0; r < RJ; ++r) {
      B const xb = load_step<XL>(xi + r * XL);
      TILEBSP_UNROLL
      for (std::size_t k = 0; k < K; ++k)
        TILEBSP_UNROLL
        for (std::size_t v = 0; v < V; ++v)
          if (M >> k & 1) acc[k][r][v] = simd::fma(xb, yk[k][v], acc[k][r][v]);
    }
  };
  auto const next_row = static_cast<std::uintptr_t>(xrow) * sizeof(float);
  for (std::size_t row = 0; row < rows; ++row) {
    float const* yr = y + row * ow * VL;
    float const* xr = x + static_cast<std::ptrdiff_t>(row) * xrow;
    auto const at = [&](std::size_t i) { return xr + static_cast<std::ptrdiff_t>(i) * xs; };
    if (!zero_first) step.template operator()<1>(yr, at(0), 0);
    step.template operator()<3>(yr, at(1), 1);
    // Two loops, not a test per step: a branch in the step is slower (benchmarks/RESULTS.md). The prefetch
    // takes an address, not a pointer: past the last row it lies outside the source (a prefetch never faults).
    if (prefetch_rows)
      for (std::size_t i = 2; i < ow; ++i) {
        __builtin_prefetch(reinterpret_cast<void const*>(reinterpret_cast<std::uintptr_t>(at(i)) + next_row));
        step.template operator()<7>(yr, at(i), i);
      }
    else
      for (std::size_t i = 2; i < ow; ++i) step.template operator()<7>(yr, at(i), i);
    step.template operator()<6>(yr, at(ow), ow);
    if (!zero_last) step.template operator()<4>(yr, at(ow + 1), ow + 1);
  }
  TILEBSP_UNROLL
  for (std::size_t k = 0; k < K; ++k)
    TILEBSP_UNROLL
    for (std::size_t r = 0; r < RJ; ++r)
      TILEBSP_UNROLL
      for (std::size_t v = 0; v < V; ++v) acc[k][r][v].store_unaligned(acc_io + static_cast<std::ptrdiff_t>(k) * ks + (r * VS + v) * lanes);
}
/// Reduction channels of a gradient_row_block: 3 RJ V accumulators, 3 V output gradients and an input in the
/// registers (32 with AVX-512, 16 otherwise).
constexpr std::size_t grad_row_channels(std::size_t V) noexcept { return tuning.grad_row_channels[V - 1]; }
/// Vectors per gradient_row_block of a column of V vectors: all V, or one at a time (AVX2, simd/tuning.hpp).
constexpr std::size_t grad_kernel_vectors(std::size_t V) noexcept { return tuning.grad_kernel_vectors[V - 1]; }
/// Calls f.template operator()<RJ, V, XL>() for `n` (1 to grad_row_channels(V)) reduction channels.
template <std::size_t V, std::size_t XL, std::size_t RJ = 1, class F>
void with_grad_channels(std::size_t n, F&& f) {
  if constexpr (RJ < grad_row_channels(V)) {
    if (n != RJ) return with_grad_channels<V, XL, RJ + 1>(n, f);
  }
  f.template operator()<RJ, V, XL>();
}

constexpr std::size_t block_rows(std::size_t V) noexcept { return tuning.conv_block_rows[V - 1]; }

/// Calls f.template operator()<R, V, XL>() for a block of `rows` (1 to block_rows(V)) rows.
template <std::size_t V, std::size_t XL, std::size_t R = 1, class F>
void with_rows(std::size_t rows, F&& f) {
  if constexpr (R < block_rows(V)) {
    if (rows != R) return with_rows<V, XL, R + 1>(rows, f);
  }
  f.template operator()<R, V, XL>();
}
/// Rows of a row_block: up to row_rows_max(V) (R accumulators, 3 V weights and an input in registers; 0 where
/// none fits: two-vector columns with 16 registers), at least row_rows_min(V) (enough chains to cover the
/// latency of the three back-to-back multiply-adds of a position; fewer rows run faster in forward_block).
constexpr std::size_t row_rows_max(std::size_t V) noexcept { return tuning.row_rows_max[V - 1]; }
constexpr std::size_t row_rows_min(std::size_t V) noexcept { return tuning.row_rows_min[V - 1]; }
/// Calls f.template operator()<R, V, XL>() for a row block of `rows` rows (in the range above).
template <std::size_t V, std::size_t XL, std::size_t R = row_rows_min(V), class F>
void with_row_rows(std::size_t rows, F&& f) {
  if constexpr (R < row_rows_max(V)) {
    if (rows != R) return with_row_rows<V, XL, R + 1>(rows, f);
  }
  if constexpr (R > 0) f.template operator()<R, V, XL>();
}

/// Calls f.template operator()<V, XL>() for a column (a source column only with `Source`: the kernels that read
/// them).
template <bool Source = false, std::size_t XL = 2, class F>
void with_column(ConvColumn const& col, F&& f) {
  if constexpr (XL == 2) {
    if constexpr (Source) {
      if (col.xl == xl_source) return f.template operator()<1, xl_source>();
    }
    if (col.xl == 1 && col.vectors == 2) return f.template operator()<2, 1>();
    if (col.xl == 1) return f.template operator()<1, 1>();
    if (col.xl == lanes) return f.template operator()<1, lanes>();
  }
  if constexpr (XL < lanes) {
    if (col.xl == XL) return f.template operator()<1, XL>();
    return with_column<Source, XL * 2>(col, f);
  }
}

}  // namespace tilebsp::simd::detail
