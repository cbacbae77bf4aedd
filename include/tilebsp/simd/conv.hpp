// Direct convolution kernels with f32 accumulation, the kernels of tile convolutions: a forward-like pass (the
// forward convolution, and the backward-input pass written as one) and the weight-gradient pass.
//
// Vectors run over output channels. When a group has fewer output channels than a vector has lanes, one vector
// spans several groups: each lane then needs its own group's input channel, so the input window is expanded
// once per block (a lane permute per input element) into a buffer the kernel reads with plain vector loads.
// Otherwise every lane of a vector shares one input value, which the kernel broadcasts.
//
// Arithmetic (what makes tile vertices and host kernels agree bitwise): each result is one chain of f32 fused
// multiply-adds from zero (or from the value it is continued from) in a fixed order — forward: taps in row-major
// order, then reduction channels; weight gradient: positions (n, o0, o1, o2) in row-major order. Padding and
// dilation holes read zeros. The result of a lane never depends on the other lanes, the block sizes or the
// instruction set's vector width (given fused multiply-add).
#pragma once

#include <tilebsp/core/half.hpp>
#include <tilebsp/simd/arch.hpp>
#include <tilebsp/simd/gemm.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace tilebsp::simd {

/// One spatial dimension of a convolution-like loop, in virtual coordinates: output position o and kernel tap t
/// read virtual position v = o * a + t * b + c of the source, which is source element v / div when v >= 0, div
/// divides v and v / div < in, and zero otherwise (padding, dilation holes).
struct ConvDim {
  std::int64_t out = 1, in = 1, taps = 1, a = 1, b = 1, c = 0, div = 1;
  std::int64_t source(std::int64_t v) const noexcept {
    if (v < 0) return -1;
    if (div != 1) {  // input dilation: holes between the source elements
      if (v % div != 0) return -1;
      v /= div;
    }
    return v < in ? v : -1;
  }
};

/// Three spatial dimensions (a lower-rank problem leads with dimensions of extent 1).
struct ConvLoop {
  std::array<ConvDim, 3> dim;
  std::int64_t taps() const noexcept { return dim[0].taps * dim[1].taps * dim[2].taps; }
};

/// A strided rank-6 operand relative to an origin: element (i0, ..., i5) at data + sum (i_k - origin_k) * stride_k.
/// Activations are indexed (n, x0, x1, x2, group, channel), weights (group, t0, t1, t2, j, c).
template <class T>
struct Operand6 {
  T* data = nullptr;
  std::array<std::ptrdiff_t, 6> stride{};
  std::array<std::int64_t, 6> origin{};
  T* at(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3, std::int64_t i4, std::int64_t i5) const noexcept {
    std::int64_t const i[6] = {i0, i1, i2, i3, i4, i5};
    std::ptrdiff_t off = 0;
    for (int k = 0; k < 6; ++k) off += static_cast<std::ptrdiff_t>(i[k] - origin[k]) * stride[k];
    return data + off;
  }
};

/// A block of work: batch [n0, n1); output positions [lo[d], hi[d]); lanes over groups [g0, g1) x channels
/// [c0, c1) (the pass's output channels); reduction channels [j0, j1).
struct ConvRange {
  std::int64_t n0 = 0, n1 = 1;
  std::array<std::int64_t, 3> lo{}, hi{};
  std::int64_t g0 = 0, g1 = 1, c0 = 0, c1 = 1, j0 = 0, j1 = 1;
};

namespace detail {

/// Up to two vectors of lanes computed together. bcast: every used lane belongs to one group.
struct ConvColumn {
  std::size_t vectors = 1;
  bool bcast = true;
  std::int64_t g[2 * lanes], c[2 * lanes];  // g < 0: unused lane
  std::int64_t first_group() const noexcept { return g[0]; }
};

/// The columns of groups [g0, g1) x channels [c0, c1): a group with at least a vector of channels gets its own
/// (broadcast) columns of up to two vectors; smaller groups share a vector, lanes / (c1 - c0) groups each.
inline std::vector<ConvColumn> conv_columns(std::int64_t g0, std::int64_t g1, std::int64_t c0, std::int64_t c1) {
  std::vector<ConvColumn> cols;
  auto const L = static_cast<std::int64_t>(lanes);
  std::int64_t const ct = c1 - c0;
  if (ct <= 0 || g1 <= g0) return cols;
  std::int64_t const per = ct >= L / 2 + 1 ? 1 : L / ct;  // groups per vector
  if (per == 1) {
    for (std::int64_t g = g0; g < g1; ++g)
      for (std::int64_t c = c0; c < c1; c += 2 * L) {
        ConvColumn col;
        std::int64_t const n = std::min(2 * L, c1 - c);
        col.vectors = n > L ? 2 : 1;
        for (std::int64_t l = 0; l < 2 * L; ++l) {
          col.g[l] = l < n ? g : -1;
          col.c[l] = l < n ? c + l : 0;
        }
        cols.push_back(col);
      }
    return cols;
  }
  for (std::int64_t g = g0; g < g1; g += per) {
    ConvColumn col;
    std::int64_t const ng = std::min(per, g1 - g);
    col.bcast = ng == 1;
    for (std::int64_t l = 0; l < 2 * L; ++l) {
      bool const used = l < L && l < ng * ct;
      col.g[l] = used ? g + l / ct : -1;
      col.c[l] = used ? c0 + l % ct : 0;
    }
    cols.push_back(col);
  }
  return cols;
}

/// Per-thread destination rows of the direct-store path of conv_forward.
inline std::vector<float*>& direct_rows() {
  thread_local std::vector<float*> rows;
  return rows;
}

inline Scratch& conv_scratch(int which) {
  thread_local Scratch s[4];
  return s[which];
}

template <class T>
float to_f32(T v) noexcept {
  return static_cast<float>(v);
}

/// A lane permutation of the first `span` floats at p: out[l] = p[idx[l]], zero where idx[l] < 0. `in` is
/// load_partial(p, span), loaded once by the caller for several permutations of the same floats (x86);
/// other targets read p.
struct LanePermuter {
  float const* p;
  batch<float> in;
  LanePermuter(float const* p_, [[maybe_unused]] std::size_t span) noexcept : p(p_) {
#if defined(__AVX512F__) || defined(__AVX2__)
    in = load_partial(p, span);
#endif
  }
  batch<float> operator()(std::int32_t const* idx) const noexcept {
#if defined(__AVX512F__)
    __m512i const ix = _mm512_loadu_si512(idx);
    __mmask16 const used = _mm512_cmpge_epi32_mask(ix, _mm512_setzero_si512());
    return _mm512_maskz_permutexvar_ps(used, ix, in);
#elif defined(__AVX2__)
    __m256i const ix = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(idx));
    __m256 const used = _mm256_castsi256_ps(_mm256_cmpgt_epi32(ix, _mm256_set1_epi32(-1)));
    return _mm256_and_ps(_mm256_permutevar8x32_ps(in, ix), used);
#else
    alignas(64) float tmp[lanes];
    for (std::size_t l = 0; l < lanes; ++l) tmp[l] = idx[l] >= 0 ? p[idx[l]] : 0.0f;
    return batch<float>::load_aligned(tmp);
#endif
  }
};

/// Builds the virtual input box of one column for batch n: X[v0][v1][v2][j][XL] over virtual positions
/// [vlo[d], vlo[d] + ext[d]) and reduction channels [j0, j1); XL = 1 (broadcast column) or lanes.
template <class TS>
void build_box(ConvLoop const& L, Operand6<TS const> const& src, ConvColumn const& col, std::int64_t n,
               std::array<std::int64_t, 3> const& vlo, std::array<std::int64_t, 3> const& ext, std::int64_t j0,
               std::int64_t j1, float* x) {
  std::size_t const XL = col.bcast ? 1 : lanes;
  std::size_t const cj = static_cast<std::size_t>(j1 - j0), row = cj * XL;
  // Expanded columns read each lane's channel relative to the column's first lane.
  alignas(64) std::int32_t idx[64][lanes];
  bool fast = false;
  std::size_t span = 0;
  if (!col.bcast) {
    fast = std::is_same_v<TS, float> && src.stride[5] == 1 && cj <= 64;
    for (std::size_t j = 0; j < cj && fast; ++j)
      for (std::size_t l = 0; l < lanes; ++l) {
        std::ptrdiff_t const off = col.g[l] < 0 ? -1 : (col.g[l] - col.g[0]) * src.stride[4] + static_cast<std::ptrdiff_t>(j);
        if (off >= static_cast<std::ptrdiff_t>(lanes)) fast = false;
        idx[j][l] = static_cast<std::int32_t>(off);
        span = std::max<std::size_t>(span, static_cast<std::size_t>(off + 1));
      }
  }
  std::int64_t const g = col.first_group();
  float* out = x;
  for (std::int64_t v0 = vlo[0]; v0 < vlo[0] + ext[0]; ++v0) {
    std::int64_t const s0 = L.dim[0].source(v0);
    for (std::int64_t v1 = vlo[1]; v1 < vlo[1] + ext[1]; ++v1) {
      std::int64_t const s1 = s0 < 0 ? -1 : L.dim[1].source(v1);
      for (std::int64_t v2 = vlo[2]; v2 < vlo[2] + ext[2]; ++v2, out += row) {
        std::int64_t const s2 = s1 < 0 ? -1 : L.dim[2].source(v2);
        if (s2 < 0) {
          std::memset(out, 0, row * sizeof(float));
          continue;
        }
        if (col.bcast) {
          TS const* p = src.at(n, s0, s1, s2, g, j0);
          if constexpr (std::is_same_v<TS, float>) {
            if (src.stride[5] == 1) {
              std::memcpy(out, p, cj * sizeof(float));
              continue;
            }
          }
          for (std::size_t j = 0; j < cj; ++j) out[j] = to_f32(p[static_cast<std::ptrdiff_t>(j) * src.stride[5]]);
        } else if (fast) {
          if constexpr (std::is_same_v<TS, float>) {
            float const* p = src.at(n, s0, s1, s2, g, j0);
            LanePermuter const permute(p, span);
            for (std::size_t j = 0; j < cj; ++j) permute(idx[j]).store_aligned(out + j * lanes);
          }
        } else {
          for (std::size_t j = 0; j < cj; ++j)
            for (std::size_t l = 0; l < lanes; ++l)
              out[j * lanes + l] = col.g[l] < 0 ? 0.0f : to_f32(*src.at(n, s0, s1, s2, col.g[l], j0 + static_cast<std::int64_t>(j)));
        }
      }
    }
  }
}

/// Offsets of the lanes of a column within an operand relative to its first lane: the group at dimension
/// `gdim` (4 for activations, 0 for weights), the channel at dimension 5; contiguous when they are 0, 1, 2, ...
/// for the used lanes.
template <class T>
bool lane_offsets(Operand6<T> const& op, ConvColumn const& col, std::ptrdiff_t* off, std::size_t& used, std::size_t gdim = 4) {
  used = 0;
  bool contiguous = true;
  for (std::size_t l = 0; l < col.vectors * lanes; ++l) {
    if (col.g[l] < 0) {
      off[l] = -1;
      continue;
    }
    off[l] = (col.g[l] - col.g[0]) * op.stride[gdim] + (col.c[l] - col.c[0]) * op.stride[5];
    contiguous = contiguous && off[l] == static_cast<std::ptrdiff_t>(l) && used == l;
    used = l + 1;
  }
  return contiguous;
}

/// Packs the weights of one column: wp[q][v][lanes] for q = (t0, t1, t2, j) in row-major order.
template <class TW>
void pack_weights(ConvLoop const& L, Operand6<TW const> const& w, ConvColumn const& col, std::int64_t j0,
                  std::int64_t j1, float* wp) {
  std::size_t const VL = col.vectors * lanes;
  std::ptrdiff_t off[2 * lanes];
  std::size_t used = 0;
  // Lanes 0..used-1 reading consecutive floats: a copy per row.
  bool const contiguous = lane_offsets(w, col, off, used, 0) && std::is_same_v<TW, float>;
  for (std::int64_t t0 = 0; t0 < L.dim[0].taps; ++t0)
    for (std::int64_t t1 = 0; t1 < L.dim[1].taps; ++t1)
      for (std::int64_t t2 = 0; t2 < L.dim[2].taps; ++t2) {
        TW const* row = w.at(col.g[0], t0, t1, t2, j0, col.c[0]);
        for (std::int64_t j = j0; j < j1; ++j, wp += VL, row += w.stride[4]) {
          if constexpr (std::is_same_v<TW, float>) {
            if (contiguous) {
              std::memcpy(wp, row, used * sizeof(float));
              std::fill(wp + used, wp + VL, 0.0f);
              continue;
            }
          }
          for (std::size_t l = 0; l < VL; ++l) wp[l] = off[l] < 0 ? 0.0f : to_f32(row[off[l]]);
        }
      }
}

/// One register-block row: acc[v] += x * w[v], with x broadcast from *x (Bcast: a vector of output channels per
/// group) or the vector at x (lanes spanning groups, V = 1).
template <std::size_t V, bool Bcast>
[[gnu::always_inline]] inline void fma_row(float const* x, batch<float> const (&w)[V], batch<float> (&acc)[V]) noexcept {
  using B = batch<float>;
  if constexpr (Bcast) {
    B const xv(*x);
    for (std::size_t v = 0; v < V; ++v) acc[v] = xsimd::fma(xv, w[v], acc[v]);
  } else {
    acc[0] = xsimd::fma(B::load_aligned(x), w[0], acc[0]);
  }
}

/// acc[r][v] over Q steps: w = wp[q], x = the box at x + poff[r] + qoff[q] (broadcast or a vector). The
/// accumulators start from acc_io, or from zero when `out` is given, and end in acc_io, or in out[r] (row r's
/// V vectors stored contiguously there: a destination that holds whole vectors).
template <std::size_t R, std::size_t V, bool Bcast>
void forward_block(std::size_t Q, float const* wp, float const* x, std::ptrdiff_t const* poff, std::ptrdiff_t const* qoff,
                   float* acc_io, float* const* out = nullptr) noexcept {
  using B = batch<float>;
  B acc[R][V];
  std::ptrdiff_t po[R];
  for (std::size_t r = 0; r < R; ++r) {
    po[r] = poff[r];
    for (std::size_t v = 0; v < V; ++v) acc[r][v] = out ? B(0.0f) : B::load_aligned(acc_io + (r * V + v) * lanes);
  }
  for (std::size_t q = 0; q < Q; ++q) {
    B w[V];
    for (std::size_t v = 0; v < V; ++v) w[v] = B::load_aligned(wp + (q * V + v) * lanes);
    float const* xq = x + qoff[q];
    for (std::size_t r = 0; r < R; ++r) fma_row<V, Bcast>(xq + po[r], w, acc[r]);
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t v = 0; v < V; ++v) {
      if (out) acc[r][v].store_unaligned(out[r] + v * lanes);
      else acc[r][v].store_aligned(acc_io + (r * V + v) * lanes);
    }
}

/// acc[r][v] over P positions: y = yrow[p], x = the box at x + poff[p] + qoff[r].
template <std::size_t R, std::size_t V, bool Bcast>
void gradient_block(std::size_t P, float const* yrow, float const* x, std::ptrdiff_t const* poff, std::ptrdiff_t const* qoff,
                    float* acc_io) noexcept {
  using B = batch<float>;
  B acc[R][V];
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t v = 0; v < V; ++v) acc[r][v] = B::load_aligned(acc_io + (r * V + v) * lanes);
  for (std::size_t p = 0; p < P; ++p) {
    B y[V];
    for (std::size_t v = 0; v < V; ++v) y[v] = B::load_aligned(yrow + (p * V + v) * lanes);
    float const* xp = x + poff[p];
    for (std::size_t r = 0; r < R; ++r) fma_row<V, Bcast>(xp + qoff[r], y, acc[r]);
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t v = 0; v < V; ++v) acc[r][v].store_aligned(acc_io + (r * V + v) * lanes);
}

/// Largest register block: 12 rows with AVX-512's 32 registers, 6 (or 8 one-vector rows) otherwise.
inline constexpr std::size_t max_block_rows = lanes >= 16 ? 12 : 8;
constexpr std::size_t block_rows(std::size_t V) noexcept { return lanes >= 16 ? 12 : (V == 2 ? 6 : 8); }

/// Calls f.template operator()<R, V, Bcast>() for a block of `rows` (1 to block_rows(V)) rows.
template <std::size_t V, bool Bcast, std::size_t R = 1, class F>
void with_rows(std::size_t rows, F&& f) {
  if constexpr (R < block_rows(V)) {
    if (rows != R) return with_rows<V, Bcast, R + 1>(rows, f);
  }
  f.template operator()<R, V, Bcast>();
}
template <class F>
void with_column(ConvColumn const& col, F&& f) {
  if (!col.bcast) f.template operator()<1, false>();
  else if (col.vectors == 2) f.template operator()<2, true>();
  else f.template operator()<1, true>();
}

/// The input box of one strip — output positions (o0, [s, s1), [lo2, lo2 + ow)) of batch n — built for a column,
/// with the offset of every step q = (t0, t1, t2, j) in `qoff`.
struct StripBox {
  float* x;
  std::ptrdiff_t xs1, xs2;  ///< strides of the box's dimensions 1 and 2
};
template <class TS>
StripBox build_strip(ConvLoop const& L, Operand6<TS const> const& src, ConvColumn const& col, std::int64_t n,
                     std::int64_t o0, std::int64_t s, std::int64_t s1, std::int64_t lo2, std::int64_t ow, std::int64_t j0,
                     std::int64_t j1, std::ptrdiff_t* qoff) {
  auto const& D = L.dim;
  std::int64_t const cj = j1 - j0;
  auto const XL = static_cast<std::ptrdiff_t>(col.bcast ? 1 : lanes);
  // Dimension 0 covers one output position's taps, 1 the strip's, 2 the whole output range.
  std::array<std::int64_t, 3> const ext{(D[0].taps - 1) * D[0].b + 1, (s1 - 1 - s) * D[1].a + (D[1].taps - 1) * D[1].b + 1,
                                        (ow - 1) * D[2].a + (D[2].taps - 1) * D[2].b + 1};
  std::array<std::int64_t, 3> const vlo{o0 * D[0].a + D[0].c, s * D[1].a + D[1].c, lo2 * D[2].a + D[2].c};
  std::ptrdiff_t const xs2 = cj * XL, xs1 = xs2 * ext[2], xs0 = xs1 * ext[1];
  float* x = conv_scratch(2).get(static_cast<std::size_t>(xs0 * ext[0]));
  build_box(L, src, col, n, vlo, ext, j0, j1, x);
  std::size_t q = 0;
  for (std::int64_t t0 = 0; t0 < D[0].taps; ++t0)
    for (std::int64_t t1 = 0; t1 < D[1].taps; ++t1)
      for (std::int64_t t2 = 0; t2 < D[2].taps; ++t2)
        for (std::int64_t j = 0; j < cj; ++j) qoff[q++] = t0 * D[0].b * xs0 + t1 * D[1].b * xs1 + t2 * D[2].b * xs2 + j * XL;
  return {x, xs1, xs2};
}

/// Output positions of dimension 1 per box, so that a box stays within about 192 KiB.
inline std::int64_t strip_rows(ConvLoop const& L, std::array<std::int64_t, 3> const& ext_other, std::size_t row_floats) {
  std::int64_t const per_v1 = ext_other[0] * ext_other[2] * static_cast<std::int64_t>(row_floats);
  std::int64_t const budget = (192 << 10) / 4;
  std::int64_t const a = std::max<std::int64_t>(1, L.dim[1].a);
  std::int64_t const halo = (L.dim[1].taps - 1) * L.dim[1].b + 1;
  return std::max<std::int64_t>(1, (budget / std::max<std::int64_t>(1, per_v1) - halo) / a + 1);
}

}  // namespace detail

/// dst(n, o, g, c) = [dst +] sum over taps t (row-major), then j in [j0, j1), of src(n, v(o, t), g, j) *
/// w(g, t, j, c), for the block `r`; with `load`, each chain continues from the value in dst.
template <class TS, class TW, class TD>
void conv_forward(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, Operand6<TW const> const& w,
                  Operand6<TD> const& dst, bool load) {
  using namespace detail;
  auto const& D = L.dim;
  std::int64_t const cj = r.j1 - r.j0;
  std::size_t const Q = static_cast<std::size_t>(L.taps() * cj);
  std::int64_t const ow = r.hi[2] - r.lo[2];
  if (r.n1 <= r.n0 || ow <= 0 || r.hi[0] <= r.lo[0] || r.hi[1] <= r.lo[1] || Q == 0) return;
  std::vector<std::ptrdiff_t> qoff(Q), poff;
  auto const cols = conv_columns(r.g0, r.g1, r.c0, r.c1);
  // Batches of columns that read the same input box (broadcast columns of one group), with their packed weights
  // within about 256 KiB: the box is built once per batch.
  for (std::size_t c0 = 0; c0 < cols.size();) {
    std::size_t c1 = c0 + 1, floats = Q * cols[c0].vectors * lanes;
    while (c1 < cols.size() && cols[c0].bcast && cols[c1].bcast && cols[c1].g[0] == cols[c0].g[0] &&
           floats + Q * cols[c1].vectors * lanes <= (std::size_t{64} << 10))
      floats += Q * cols[c1++].vectors * lanes;
    float* wp = conv_scratch(0).get(floats);
    {
      float* dstw = wp;
      for (std::size_t c = c0; c < c1; ++c) {
        pack_weights(L, w, cols[c], r.j0, r.j1, dstw);
        dstw += Q * cols[c].vectors * lanes;
      }
    }
    ConvColumn const& first = cols[c0];
    std::size_t const XL = first.bcast ? 1 : lanes;
    std::array<std::int64_t, 3> const ext{(D[0].taps - 1) * D[0].b + 1, 0, (ow - 1) * D[2].a + (D[2].taps - 1) * D[2].b + 1};
    std::int64_t const strip = strip_rows(L, ext, static_cast<std::size_t>(cj) * XL);
    for (std::int64_t n = r.n0; n < r.n1; ++n)
      for (std::int64_t o0 = r.lo[0]; o0 < r.hi[0]; ++o0)
        for (std::int64_t s = r.lo[1]; s < r.hi[1]; s += strip) {
          std::int64_t const s1 = std::min(r.hi[1], s + strip);
          auto const [x, xs1, xs2] = build_strip(L, src, first, n, o0, s, s1, r.lo[2], ow, r.j0, r.j1, qoff.data());
          std::ptrdiff_t const ds = dst.stride[3];
          // The strip's output positions in row-major order: register blocks run across row ends.
          std::int64_t const P = (s1 - s) * ow;
          poff.resize(static_cast<std::size_t>(P));
          for (std::int64_t i = 0; i < P; ++i) poff[static_cast<std::size_t>(i)] = (i / ow) * D[1].a * xs1 + (i % ow) * D[2].a * xs2;
          float const* wc = wp;
          for (std::size_t c = c0; c < c1; ++c) {
            ConvColumn const& col = cols[c];
            std::size_t const VL = col.vectors * lanes;
            std::ptrdiff_t off[2 * lanes];
            std::size_t used = 0;
            bool const contiguous = lane_offsets(dst, col, off, used) && std::is_same_v<TD, float>;
            auto const dpos = [&](std::int64_t i) { return dst.at(n, o0, s + i / ow, r.lo[2] + i % ow, col.g[0], col.c[0]); };
            // Whole vectors of contiguous f32 results starting from zero are stored from the registers into
            // their rows of dst; otherwise they pass through accumulator rows.
            float* const* rows_out = nullptr;
            if (std::is_same_v<TD, float> && contiguous && used == VL && !load) {
              std::vector<float*>& dp = direct_rows();
              dp.resize(static_cast<std::size_t>(P));
              for (std::int64_t i = 0, k = 0; i < s1 - s; ++i) {
                auto* d = reinterpret_cast<float*>(dpos(i * ow));
                for (std::int64_t j = 0; j < ow; ++j, d += ds) dp[static_cast<std::size_t>(k++)] = d;
              }
              rows_out = dp.data();
            }
            float* accrow = rows_out ? nullptr : conv_scratch(1).get(static_cast<std::size_t>(P) * VL);
            for (std::int64_t i = 0; !rows_out && i < P; ++i) {  // initial values
              float* a = accrow + i * static_cast<std::ptrdiff_t>(VL);
              if (!load) {
                std::memset(a, 0, VL * sizeof(float));
              } else {
                TD const* d = dpos(i);
                for (std::size_t l = 0; l < VL; ++l) a[l] = off[l] < 0 ? 0.0f : to_f32(d[off[l]]);
              }
            }
            with_column(col, [&]<std::size_t VV, bool Bc>() {
              constexpr std::size_t RB = block_rows(VV);
              for (std::int64_t i = 0; i < P; i += static_cast<std::int64_t>(RB)) {
                std::size_t const rows = std::min<std::size_t>(RB, static_cast<std::size_t>(P - i));
                with_rows<VV, Bc>(rows, [&]<std::size_t RR, std::size_t V2, bool B2>() {
                  forward_block<RR, V2, B2>(Q, wc, x, poff.data() + i, qoff.data(),
                                            rows_out ? nullptr : accrow + i * static_cast<std::ptrdiff_t>(VL),
                                            rows_out ? rows_out + i : nullptr);
                });
              }
            });
            for (std::int64_t i = 0; !rows_out && i < P; ++i) {  // results
              float const* a = accrow + i * static_cast<std::ptrdiff_t>(VL);
              TD* d = i % ow == 0 ? dpos(i) : dpos(i - i % ow) + (i % ow) * ds;
              if constexpr (std::is_same_v<TD, float>) {
                if (contiguous) {
                  std::memcpy(d, a, used * sizeof(float));
                  continue;
                }
              }
              for (std::size_t l = 0; l < VL; ++l)
                if (off[l] >= 0) d[off[l]] = TD(a[l]);
            }
            wc += Q * VL;
          }
        }
    c0 = c1;
  }
}

/// dst(g, t, j, c) = [dst +] sum over positions (n, o) of block `r` in row-major order of src(n, v(o, t), g, j) *
/// dy(n, o, g, c), for every tap t and j in [j0, j1); with `load`, each chain continues from the value in dst.
template <class TS, class TY, class TD>
void conv_weight_gradient(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src,
                          Operand6<TY const> const& dy, Operand6<TD> const& dst, bool load) {
  using namespace detail;
  auto const& D = L.dim;
  std::int64_t const cj = r.j1 - r.j0;
  std::size_t const Q = static_cast<std::size_t>(L.taps() * cj);
  std::int64_t const ow = r.hi[2] - r.lo[2];
  if (Q == 0) return;
  std::vector<std::ptrdiff_t> qoff(Q);
  for (auto const& col : conv_columns(r.g0, r.g1, r.c0, r.c1)) {
    std::size_t const V = col.vectors, VL = V * lanes, XL = col.bcast ? 1 : lanes;
    float* acc = conv_scratch(0).get(Q * VL);
    std::ptrdiff_t doff[2 * lanes], yoff[2 * lanes];
    std::size_t dused = 0, yused = 0;
    bool const dcontig = lane_offsets(dst, col, doff, dused, 0) && std::is_same_v<TD, float>;
    bool const ycontig = lane_offsets(dy, col, yoff, yused) && std::is_same_v<TY, float>;
    {  // initial values
      float* a = acc;
      for (std::int64_t t0 = 0; t0 < D[0].taps; ++t0)
        for (std::int64_t t1 = 0; t1 < D[1].taps; ++t1)
          for (std::int64_t t2 = 0; t2 < D[2].taps; ++t2)
            for (std::int64_t j = r.j0; j < r.j1; ++j, a += VL) {
              if (!load) {
                std::memset(a, 0, VL * sizeof(float));
                continue;
              }
              TD const* d = dst.at(col.g[0], t0, t1, t2, j, col.c[0]);
              for (std::size_t l = 0; l < VL; ++l) a[l] = doff[l] < 0 ? 0.0f : to_f32(d[doff[l]]);
            }
    }
    bool const work = r.n1 > r.n0 && ow > 0 && r.hi[0] > r.lo[0] && r.hi[1] > r.lo[1];
    std::array<std::int64_t, 3> const ext{(D[0].taps - 1) * D[0].b + 1, 0, (ow - 1) * D[2].a + (D[2].taps - 1) * D[2].b + 1};
    std::int64_t const strip = strip_rows(L, ext, static_cast<std::size_t>(cj) * XL);
    // A strip's positions in row-major order, in chunks of whole output rows that pass through the accumulators
    // once: up to about 128 positions whose rows of the input box stay within about 32 KiB (L1).
    std::int64_t const box_row = ext[2] * cj * static_cast<std::int64_t>(XL) * 4;
    std::int64_t const chunk = std::clamp<std::int64_t>((32 << 10) / std::max<std::int64_t>(1, box_row) - (D[1].taps - 1) * D[1].b,
                                                        1, std::max<std::int64_t>(1, 128 / ow));
    float* yrow = work ? conv_scratch(1).get(static_cast<std::size_t>(std::min(strip, chunk) * ow) * VL) : nullptr;
    std::vector<std::ptrdiff_t> poff;
    for (std::int64_t n = r.n0; work && n < r.n1; ++n)
      for (std::int64_t o0 = r.lo[0]; o0 < r.hi[0]; ++o0)
        for (std::int64_t s = r.lo[1]; s < r.hi[1]; s += strip) {
          std::int64_t const s1 = std::min(r.hi[1], s + strip);
          auto const [x, xs1, xs2] = build_strip(L, src, col, n, o0, s, s1, r.lo[2], ow, r.j0, r.j1, qoff.data());
          for (std::int64_t c0 = s; c0 < s1; c0 += chunk) {
            std::int64_t const c1 = std::min(s1, c0 + chunk);
            auto const P = static_cast<std::size_t>((c1 - c0) * ow);
            poff.resize(P);
            float* yo = yrow;
            for (std::int64_t o1 = c0, i = 0; o1 < c1; ++o1) {
              TY const* yp = dy.at(n, o0, o1, r.lo[2], col.g[0], col.c[0]);
              for (std::int64_t p = 0; p < ow; ++p, ++i, yp += dy.stride[3], yo += VL) {
                poff[static_cast<std::size_t>(i)] = (o1 - s) * D[1].a * xs1 + p * D[2].a * xs2;
                if constexpr (std::is_same_v<TY, float>) {
                  if (ycontig) {
                    std::memcpy(yo, yp, yused * sizeof(float));
                    std::memset(yo + yused, 0, (VL - yused) * sizeof(float));
                    continue;
                  }
                }
                for (std::size_t l = 0; l < VL; ++l) yo[l] = yoff[l] < 0 ? 0.0f : to_f32(yp[yoff[l]]);
              }
            }
            with_column(col, [&]<std::size_t VV, bool Bc>() {
              constexpr std::size_t RB = block_rows(VV);
              for (std::size_t q0 = 0; q0 < Q; q0 += RB) {
                std::size_t const rows = std::min(RB, Q - q0);
                with_rows<VV, Bc>(rows, [&]<std::size_t RR, std::size_t V2, bool B2>() {
                  gradient_block<RR, V2, B2>(P, yrow, x, poff.data(), qoff.data() + q0, acc + q0 * VL);
                });
              }
            });
          }
        }
    float const* a = acc;
    for (std::int64_t t0 = 0; t0 < D[0].taps; ++t0)
      for (std::int64_t t1 = 0; t1 < D[1].taps; ++t1)
        for (std::int64_t t2 = 0; t2 < D[2].taps; ++t2)
          for (std::int64_t j = r.j0; j < r.j1; ++j, a += VL) {
            TD* d = dst.at(col.g[0], t0, t1, t2, j, col.c[0]);
            if constexpr (std::is_same_v<TD, float>) {
              if (dcontig) {
                std::memcpy(d, a, dused * sizeof(float));
                continue;
              }
            }
            for (std::size_t l = 0; l < VL; ++l)
              if (doff[l] >= 0) d[doff[l]] = TD(a[l]);
          }
  }
}

}  // namespace tilebsp::simd
