// Winograd F(2x2, 3x3) convolution: a forward-like pass of a 3x3 kernel with stride 1 computed on 4x4 input tiles
// that each give a 2x2 block of outputs with 16 multiplications per input/output channel pair instead of 36
// (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", CVPR 2016). Per group:
//   U = G g G^T   (weights, 4x4 points per input/output channel pair)
//   V = B^T d B   (a 4x4 input tile, per input channel)
//   M = sum over input channels j of V(j) U(j), one small GEMM per point (tiles x j times j x output channels)
//   Y = A^T M A   (the tile's 2x2 outputs)
// with G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1], B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] and
// A^T = [1 1 1 0; 0 1 -1 -1].
//
// Arithmetic (what keeps tile vertices and host kernels bitwise equal): tiles sit on a global grid — a tile's
// first output position is even in both dimensions — whatever block of work computes them, so an output is always
// the same entry of the same tile; every transform is the fixed sequence of f32 additions written below; a point's
// sum over j is one chain of fused multiply-adds from zero in j order; with `load` the output is dst + Y (one
// rounding). A lane (output channel) never depends on the other lanes. Padding reads zeros, as in the direct
// kernels; unlike them, a non-finite input or weight reaches the neighbouring outputs of its tile (as NaN or
// infinity), because the transforms mix the tile's elements.
#pragma once

#include <tilebsp/core/half.hpp>
#include <tilebsp/simd/arch.hpp>
#include <tilebsp/simd/blocks.hpp>
#include <tilebsp/simd/conv_loop.hpp>
#include <tilebsp/simd/gemm.hpp>
#include <tilebsp/simd/tuning.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace tilebsp::simd {

namespace detail {

/// Points of a transformed tile (4x4).
inline constexpr std::size_t wino_points = 16;

/// The transformed inputs (V) and the products (M) of a batch of tiles are stored by channel vector: for each
/// vector of (reduction or lane) channels, tile after tile, each tile's 16 points one vector apart and then a
/// padding vector, so that the same point of consecutive tiles (what a register block of the product reads) falls
/// in different L1 sets. Every offset inside a vector's block is a compile-time constant. Floats per tile:
inline constexpr std::size_t wino_tile_stride = (wino_points + 1) * lanes;

/// Tiles of one GEMM register block with CV vectors of output channels: R x CV accumulators, CV weight vectors
/// and one broadcast input in the registers (32 with AVX-512, 16 otherwise).
constexpr std::size_t wino_rows(std::size_t CV) noexcept { return tuning.wino_rows[CV - 1]; }

/// m[t * wino_tile_stride + c * mb] (CV vectors) = sum over j < J (one FMA chain from zero, j in order) of
/// v[t * wino_tile_stride + (j / lanes) * vb + j % lanes] * u[j * us + c * lanes], for R tiles t.
template <std::size_t R, std::size_t CV>
__attribute__((noinline)) void wino_block(std::size_t J, float const* v, std::size_t vb, float const* u, std::size_t us,
                                          float* m, std::size_t mb) noexcept {
  using B = batch<float>;
  constexpr std::size_t ts = wino_tile_stride;
  B acc[R][CV];
  TILEBSP_UNROLL
  for (std::size_t t = 0; t < R; ++t)
    TILEBSP_UNROLL
    for (std::size_t c = 0; c < CV; ++c) acc[t][c] = B(0.0f);
  auto const step = [&](std::size_t j) __attribute__((always_inline)) {
    B w[CV];
    TILEBSP_UNROLL
    for (std::size_t c = 0; c < CV; ++c) w[c] = B::load_aligned(u + c * lanes);
    u += us;
    TILEBSP_UNROLL
    for (std::size_t t = 0; t < R; ++t) {
      B const x(v[t * ts + j]);
      TILEBSP_UNROLL
      for (std::size_t c = 0; c < CV; ++c) acc[t][c] = simd::fma(x, w[c], acc[t][c]);
    }
  };
  // A whole vector of reduction channels at constant offsets from v, then the rest.
  std::size_t j = 0;
  for (; j + lanes <= J; j += lanes, v += vb) {
    TILEBSP_UNROLL
    for (std::size_t jj = 0; jj < lanes; ++jj) step(jj);
  }
  for (std::size_t jj = 0; j < J; ++j, ++jj) step(jj);
  TILEBSP_UNROLL
  for (std::size_t t = 0; t < R; ++t)
    TILEBSP_UNROLL
    for (std::size_t c = 0; c < CV; ++c) acc[t][c].store_aligned(m + t * ts + c * mb);
}

/// wino_block for `rows` (1 to wino_rows(CV)) tiles.
template <std::size_t CV, std::size_t R = 1>
void wino_block_rows(std::size_t rows, std::size_t J, float const* v, std::size_t vb, float const* u, std::size_t us,
                     float* m, std::size_t mb) noexcept {
  if constexpr (R < wino_rows(CV)) {
    if (rows != R) return wino_block_rows<CV, R + 1>(rows, J, v, vb, u, us, m, mb);
  }
  wino_block<R, CV>(J, v, vb, u, us, m, mb);
}

/// `n` (<= lanes) elements `stride` apart from p, as f32, zeros past them.
template <class T>
batch<float> wino_load(T const* p, std::ptrdiff_t stride, std::size_t n) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    if (stride == 1) return n == lanes ? batch<float>::load_unaligned(p) : load_partial(p, n);
  }
  alignas(64) float tmp[lanes] = {};
  for (std::size_t l = 0; l < n; ++l) tmp[l] = static_cast<float>(p[static_cast<std::ptrdiff_t>(l) * stride]);
  return batch<float>::load_aligned(tmp);
}

/// Stores the first `n` lanes of x to p, `stride` apart (after adding the values there, with `load`).
template <class T>
void wino_store(batch<float> x, T* p, std::ptrdiff_t stride, std::size_t n, bool load) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    if (stride == 1) {
      if (n == lanes) (load ? batch<float>::load_unaligned(p) + x : x).store_unaligned(p);
      else store_partial(load ? load_partial(p, n) + x : x, p, n);
      return;
    }
  }
  alignas(64) float tmp[lanes];
  x.store_aligned(tmp);
  for (std::size_t l = 0; l < n; ++l) {
    T& o = p[static_cast<std::ptrdiff_t>(l) * stride];
    o = T(load ? static_cast<float>(o) + tmp[l] : tmp[l]);
  }
}

/// One transform step over four values (in place): B^T x.
[[gnu::always_inline]] inline void wino_input_step(batch<float>& x0, batch<float>& x1, batch<float>& x2, batch<float>& x3) noexcept {
  batch<float> const t0 = x0 - x2, t1 = x1 + x2, t2 = x2 - x1, t3 = x1 - x3;
  x0 = t0, x1 = t1, x2 = t2, x3 = t3;
}

/// Per-thread buffers: transformed weights, inputs and products.
inline Scratch& wino_scratch(int which) {
  thread_local Scratch s[3];
  return s[which];
}

/// The tile grid of a block of work: tiles start at even output positions; tile t of a batch starting at t0 has
/// first output (y0 + 2 ((t0 + t) / nx), x0 + 2 ((t0 + t) % nx)).
struct WinoGrid {
  std::int64_t y0, x0, nx, tiles;
  std::int64_t y(std::int64_t t) const noexcept { return y0 + 2 * (t / nx); }
  std::int64_t x(std::int64_t t) const noexcept { return x0 + 2 * (t % nx); }
  /// Steps (ty, tx) to the next tile of the grid.
  void next(std::int64_t& ty, std::int64_t& tx) const noexcept {
    tx += 2;
    if (tx == x0 + 2 * nx) tx = x0, ty += 2;
  }
};

/// U[(p * cj + j) * CP + c] = (G g G^T)[p] of the weights of group g, reduction channel j0 + j and lane channel
/// c0 + c (c < nc; the lanes up to CP are zero).
template <class TW>
__attribute__((noinline)) void wino_weights(Operand6<TW const> const& w, std::int64_t g, std::int64_t j0, std::int64_t cj,
                                            std::int64_t c0, std::int64_t nc, float* U, std::size_t CP) noexcept {
  using B = batch<float>;
  for (std::int64_t j = 0; j < cj; ++j)
    for (std::size_t v = 0; v < CP / lanes; ++v) {
      auto const n = static_cast<std::size_t>(std::min<std::int64_t>(lanes, nc - static_cast<std::int64_t>(v * lanes)));
      TW const* const base = w.at(g, 0, 0, 0, j0 + j, c0 + static_cast<std::int64_t>(v * lanes));
      B a[4][3];
      TILEBSP_UNROLL
      for (std::ptrdiff_t t2 = 0; t2 < 3; ++t2) {
        B x[3];
        TILEBSP_UNROLL
        for (std::ptrdiff_t t1 = 0; t1 < 3; ++t1) x[t1] = wino_load(base + t1 * w.stride[2] + t2 * w.stride[3], w.stride[5], n);
        B const s = x[0] + x[2];
        a[0][t2] = x[0], a[1][t2] = (s + x[1]) * B(0.5f), a[2][t2] = (s - x[1]) * B(0.5f), a[3][t2] = x[2];
      }
      TILEBSP_UNROLL
      for (std::size_t i = 0; i < 4; ++i) {
        B const s = a[i][0] + a[i][2];
        B const u[4] = {a[i][0], (s + a[i][1]) * B(0.5f), (s - a[i][1]) * B(0.5f), a[i][2]};
        TILEBSP_UNROLL
        for (std::size_t k = 0; k < 4; ++k)
          u[k].store_aligned(U + ((i * 4 + k) * static_cast<std::size_t>(cj) + static_cast<std::size_t>(j)) * CP + v * lanes);
      }
    }
}

/// V[(j / lanes) * tb * wino_tile_stride + t * wino_tile_stride + p * lanes + j % lanes] = (B^T d B)[p] of the 4x4
/// inputs d of tiles t0 + t (t < nt <= tb) of image n, position s0 of dimension 0 (-1: padding), group g,
/// reduction channels j0 + j (j < cj; the lanes up to JP are zero).
template <class TS>
__attribute__((noinline)) void wino_inputs(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, std::int64_t n, std::int64_t s0,
                                           std::int64_t g, std::int64_t j0, std::int64_t cj, WinoGrid const& grid,
                                           std::int64_t t0, std::size_t nt, float* V, std::size_t tb, std::size_t JP) noexcept {
  using B = batch<float>;
  auto const& D = L.dim;
  constexpr std::size_t ts = wino_tile_stride;
  alignas(64) static constexpr float zeros[lanes] = {};
  // Element offsets of a tile row or column in the source, or -1 for padding (no input dilation here).
  auto const offset = [](ConvDim const& d, std::int64_t v, std::ptrdiff_t stride) -> std::ptrdiff_t { return v >= 0 && v < d.in ? v * stride : -1; };
  // A tile's first input row (column) feeds only its first output row (column) and its last input only the
  // second: where that output lies outside the block, the input reads as zero — the kept outputs' bits do not
  // change, and a vertex never reads past the source rows its own block needs.
  auto const needed = [&](std::size_t d, std::int64_t first, std::int64_t i) {
    return !(i == 0 && first < r.lo[d]) && !(i == 3 && first + 1 >= r.hi[d]);
  };
  // Whether all 16 inputs of the tile starting at output `first` of dimension d are read from the source.
  auto const inside = [&](std::size_t d, std::int64_t first) {
    return first + D[d].c >= 0 && first + 3 + D[d].c < D[d].in && first >= r.lo[d] && first + 1 < r.hi[d];
  };
  // The transform of d, stored as the points of tile t, channel vector jv.
  auto const transform = [&](B (&d)[4][4], std::size_t t, std::size_t jv) __attribute__((always_inline)) {
    TILEBSP_UNROLL
    for (std::size_t k = 0; k < 4; ++k) wino_input_step(d[0][k], d[1][k], d[2][k], d[3][k]);
    float* const v = V + (jv * tb + t) * ts;
    TILEBSP_UNROLL
    for (std::size_t i = 0; i < 4; ++i) {
      wino_input_step(d[i][0], d[i][1], d[i][2], d[i][3]);
      TILEBSP_UNROLL
      for (std::size_t k = 0; k < 4; ++k) d[i][k].store_aligned(v + (i * 4 + k) * lanes);
    }
  };
  for (std::size_t jv = 0; jv < JP / lanes; ++jv) {
    auto const cnt = static_cast<std::size_t>(std::min<std::int64_t>(lanes, cj - static_cast<std::int64_t>(jv * lanes)));
    TS const* const base = s0 < 0 ? nullptr : src.at(n, s0, 0, 0, g, j0 + static_cast<std::int64_t>(jv * lanes));
    std::int64_t ty = grid.y(t0), tx = grid.x(t0);
    // f32 channels in a row: every element one vector load (padding from a row of zeros), no branch per element;
    // a tile whose inputs all lie inside the source and the block reads them at fixed offsets from its corner.
    auto const rows = [&]<bool Full>() __attribute__((always_inline)) {
      float const* const b = reinterpret_cast<float const*>(base);
      std::ptrdiff_t const s2 = src.stride[2], s3 = src.stride[3];
      for (std::size_t t = 0; t < nt; ++t, grid.next(ty, tx)) {
        B d[4][4];
        if (Full && inside(1, ty) && inside(2, tx)) {
          float const* const c = b + (ty + D[1].c) * s2 + (tx + D[2].c) * s3;
          TILEBSP_UNROLL
          for (std::ptrdiff_t i = 0; i < 4; ++i)
            TILEBSP_UNROLL
            for (std::ptrdiff_t k = 0; k < 4; ++k) d[i][k] = B::load_unaligned(c + i * s2 + k * s3);
          transform(d, t, jv);
          continue;
        }
        float const* q[4][4];
        TILEBSP_UNROLL
        for (std::int64_t i = 0; i < 4; ++i) {
          std::ptrdiff_t const oi = needed(1, ty, i) ? offset(D[1], ty + i + D[1].c, s2) : -1;
          TILEBSP_UNROLL
          for (std::int64_t k = 0; k < 4; ++k) {
            std::ptrdiff_t const ok = needed(2, tx, k) ? offset(D[2], tx + k + D[2].c, s3) : -1;
            q[i][k] = oi < 0 || ok < 0 ? zeros : b + oi + ok;
          }
        }
        TILEBSP_UNROLL
        for (std::size_t i = 0; i < 4; ++i)
          TILEBSP_UNROLL
          for (std::size_t k = 0; k < 4; ++k) d[i][k] = Full ? B::load_unaligned(q[i][k]) : load_partial(q[i][k], cnt);
        transform(d, t, jv);
      }
    };
    if (std::is_same_v<TS, float> && s0 >= 0 && src.stride[5] == 1) {
      if (cnt == lanes) rows.template operator()<true>();
      else rows.template operator()<false>();
      continue;
    }
    for (std::size_t t = 0; t < nt; ++t, grid.next(ty, tx)) {
      B d[4][4];
      for (std::int64_t i = 0; i < 4; ++i)
        for (std::int64_t k = 0; k < 4; ++k) {
          std::ptrdiff_t const oi = needed(1, ty, i) ? offset(D[1], ty + i + D[1].c, src.stride[2]) : -1;
          std::ptrdiff_t const ok = needed(2, tx, k) ? offset(D[2], tx + k + D[2].c, src.stride[3]) : -1;
          d[i][k] = s0 < 0 || oi < 0 || ok < 0 ? B(0.0f) : wino_load(base + oi + ok, src.stride[5], cnt);
        }
      transform(d, t, jv);
    }
  }
}

/// dst(n, o0, y, x, g, c0 + c) = [dst +] (A^T M A) of tiles t0 + t (t < nt), for the outputs inside the block r;
/// M as V in wino_inputs (CP lane channels per point, tb tiles per channel vector).
template <class TD>
__attribute__((noinline)) void wino_outputs(ConvRange const& r, Operand6<TD> const& dst, std::int64_t n, std::int64_t o0, std::int64_t g,
                                            WinoGrid const& grid, std::int64_t t0, std::size_t nt, float const* M, std::size_t tb,
                                            std::size_t CP, bool load) noexcept {
  using B = batch<float>;
  constexpr std::size_t ts = wino_tile_stride;
  std::int64_t const nc = r.c1 - r.c0;
  for (std::size_t v = 0; v < CP / lanes; ++v) {
    auto const cnt = static_cast<std::size_t>(std::min<std::int64_t>(lanes, nc - static_cast<std::int64_t>(v * lanes)));
    TD* const base = dst.at(n, o0, 0, 0, g, r.c0 + static_cast<std::int64_t>(v * lanes));
    bool const direct = std::is_same_v<TD, float> && dst.stride[5] == 1 && cnt == lanes && !load;
    std::int64_t ty = grid.y(t0), tx = grid.x(t0);
    for (std::size_t t = 0; t < nt; ++t, grid.next(ty, tx)) {
      float const* const mt = M + (v * tb + t) * ts;
      B m[4][4];
      TILEBSP_UNROLL
      for (std::size_t i = 0; i < 4; ++i)
        TILEBSP_UNROLL
        for (std::size_t k = 0; k < 4; ++k) m[i][k] = B::load_aligned(mt + (i * 4 + k) * lanes);
      B a[2][4];
      TILEBSP_UNROLL
      for (std::size_t k = 0; k < 4; ++k) {
        a[0][k] = m[0][k] + m[1][k] + m[2][k];
        a[1][k] = m[1][k] - m[2][k] - m[3][k];
      }
      TILEBSP_UNROLL
      for (std::int64_t i = 0; i < 2; ++i) {
        if (ty + i < r.lo[1] || ty + i >= r.hi[1]) continue;
        B const y[2] = {a[i][0] + a[i][1] + a[i][2], a[i][1] - a[i][2] - a[i][3]};
        TILEBSP_UNROLL
        for (std::int64_t k = 0; k < 2; ++k) {
          if (tx + k < r.lo[2] || tx + k >= r.hi[2]) continue;
          TD* const q = base + (ty + i) * dst.stride[2] + (tx + k) * dst.stride[3];
          if constexpr (std::is_same_v<TD, float>) {
            if (direct) {
              y[k].store_unaligned(q);
              continue;
            }
          }
          wino_store(y[k], q, dst.stride[5], cnt, load);
        }
      }
    }
  }
}

}  // namespace detail

/// Weights transformed ahead of a product (U = G g G^T of every group, reduction channel and lane channel), for
/// convolutions whose weights outlive many runs — as oneDNN transforms them at primitive creation. Group g's point
/// p, reduction channel j, lane channel c is at data[g * group_stride + (p * J + j) * c_stride + c]; c_stride is
/// the lane channels rounded up to whole vectors. winograd_prepare_weights writes it.
struct WinoWeights {
  float const* data = nullptr;
  std::size_t J = 0, c_stride = 0, group_stride = 0;
};

/// The layout of prepared weights at `data` for J reduction and C lane channels per group (group_stride floats
/// per group).
constexpr WinoWeights wino_weights_layout(float const* data, std::size_t J, std::size_t C) noexcept {
  std::size_t const cs = (C + lanes - 1) / lanes * lanes;
  return {data, J, cs, detail::wino_points * J * cs};
}

/// Writes group g's transformed weights (all J reduction and C lane channels of w) into `out` laid out as `pre`
/// describes; the values are those winograd_forward computes for itself.
template <class TW>
void winograd_prepare_weights(Operand6<TW const> const& w, std::int64_t g, std::int64_t J, std::int64_t C, WinoWeights const& pre, float* out) {
  detail::wino_weights(w, g, 0, J, 0, C, out + static_cast<std::size_t>(g) * pre.group_stride, pre.c_stride);
}

/// conv_forward as Winograd F(2x2, 3x3) for a loop that winograd_applies: dst(n, o, g, c) = [dst +] the tile
/// result of output o over reduction channels [j0, j1), for the block `r` (see the arithmetic above).
/// With `pre` (weights prepared by winograd_prepare_weights, and r.c0 a multiple of the vector width), the
/// weights are read from it instead of being transformed again: bitwise the same results.
template <class TS, class TW, class TD>
void winograd_forward(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, Operand6<TW const> const& w,
                      Operand6<TD> const& dst, bool load, WinoWeights const* pre = nullptr) {
  using namespace detail;
  constexpr std::size_t P = wino_points;
  std::int64_t const cj = r.j1 - r.j0, nc = r.c1 - r.c0;
  if (cj <= 0 || r.n1 <= r.n0 || r.g1 <= r.g0 || nc <= 0 || r.hi[0] <= r.lo[0] || r.hi[1] <= r.lo[1] || r.hi[2] <= r.lo[2]) return;
  std::size_t const JP = static_cast<std::size_t>((cj + lanes - 1) / lanes) * lanes;
  std::size_t const CP = static_cast<std::size_t>((nc + lanes - 1) / lanes) * lanes;
  WinoGrid grid{r.lo[1] & ~std::int64_t{1}, r.lo[2] & ~std::int64_t{1}, 0, 0};
  grid.nx = (r.hi[2] - grid.x0 + 1) / 2;
  grid.tiles = (r.hi[1] - grid.y0 + 1) / 2 * grid.nx;
  constexpr std::size_t ts = wino_tile_stride;
  // Tiles per batch: whole register blocks, as many as keep V and M of a batch within L1 (Blocks::l1, with a
  // point's weights), at least one. At 14² with 16 channels per group: one block of 14 tiles instead of all 49
  // (the 192 KiB this used to allow), so that the outputs transform no longer waits for products evicted to L2.
  std::size_t const rows1 = wino_rows(1);  // a multiple of wino_rows(2)
  std::size_t const block_bytes = rows1 * sizeof(float) * ts * (JP + CP) / lanes;
  auto const batch_tiles = static_cast<std::int64_t>(rows1 * std::max<std::size_t>(1, blocks().l1 / block_bytes));
  auto const tb = static_cast<std::size_t>(std::min(grid.tiles, batch_tiles));
  if (pre && r.c0 % static_cast<std::int64_t>(lanes) != 0) pre = nullptr;
  float* const U = pre ? nullptr : wino_scratch(0).get(P * static_cast<std::size_t>(cj) * CP);
  // Weights of group g at point p, from reduction channel r.j0 and lane channel r.c0: (U, rows us floats apart).
  std::size_t const us = pre ? pre->c_stride : CP;
  auto const weights = [&](std::int64_t g, std::size_t p) -> float const* {
    if (!pre) return U + p * static_cast<std::size_t>(cj) * CP;
    return pre->data + static_cast<std::size_t>(g) * pre->group_stride + (p * pre->J + static_cast<std::size_t>(r.j0)) * us +
           static_cast<std::size_t>(r.c0);
  };
  float* const V = wino_scratch(1).get(JP / lanes * tb * ts);
  float* const M = wino_scratch(2).get(CP / lanes * tb * ts);
  for (std::int64_t g = r.g0; g < r.g1; ++g) {
    if (!pre) wino_weights(w, g, r.j0, cj, r.c0, nc, U, CP);
    for (std::int64_t n = r.n0; n < r.n1; ++n)
      for (std::int64_t o0 = r.lo[0]; o0 < r.hi[0]; ++o0) {
        std::int64_t const s0 = L.dim[0].source(o0 * L.dim[0].a + L.dim[0].c);
        for (std::int64_t t0 = 0; t0 < grid.tiles; t0 += batch_tiles) {
          auto const nt = static_cast<std::size_t>(std::min(batch_tiles, grid.tiles - t0));
          wino_inputs(L, r, src, n, s0, g, r.j0, cj, grid, t0, nt, V, tb, JP);
          // M[p] = V[p] U[p] (tiles x j times j x channels) by register blocks of up to two vectors of channels.
          for (std::size_t p = 0; p < P; ++p)
            for (std::size_t c = 0; c < CP; c += 2 * lanes) {
              bool const two = CP - c >= 2 * lanes;
              std::size_t const R = wino_rows(two ? 2 : 1);
              float const* up = weights(g, p) + c;
              for (std::size_t t = 0; t < nt; t += R) {
                float const* vp = V + t * ts + p * lanes;
                float* mp = M + (c / lanes * tb + t) * ts + p * lanes;
                std::size_t const rows = std::min(R, nt - t);
                if (two) wino_block_rows<2>(rows, static_cast<std::size_t>(cj), vp, tb * ts, up, us, mp, tb * ts);
                else wino_block_rows<1>(rows, static_cast<std::size_t>(cj), vp, tb * ts, up, us, mp, tb * ts);
              }
            }
          wino_outputs(r, dst, n, o0, g, grid, t0, nt, M, tb, CP, load);
        }
      }
  }
}

}  // namespace tilebsp::simd
