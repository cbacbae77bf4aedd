// Direct convolution kernels with f32 accumulation, the kernels of tile convolutions: a forward-like pass (the
// forward convolution, and the backward-input pass written as one) and the weight-gradient pass.
//
// Vectors run over output channels. When a group has fewer output channels than a vector has lanes, one vector
// spans several groups: each lane then needs its own group's input channel, so the input window is expanded
// once per block (a lane permute per input element) into a buffer the kernel reads with plain vector loads.
// Otherwise every lane of a vector shares one input value, which the kernel broadcasts.
//
// Arithmetic (what makes tile vertices and host kernels agree bitwise): each result is one chain of f32 fused
// multiply-adds from zero (or from the value it is continued from) in a fixed order — forward: steps (t0, t1, t2,
// j) in row-major order (taps, then reduction channels), except for a 3-wide kernel with stride and dilation 1 in
// dimension 2: (t0, t1, j, t2), the order in which one loaded input serves three neighbouring positions; weight
// gradient: positions (n, o0, o1, o2) in row-major order. Padding and dilation holes read zeros. The result of a
// lane never depends on the other lanes, the block sizes or the instruction set's vector width (given fused
// multiply-add).
#pragma once

#include <tilebsp/core/half.hpp>
#include <tilebsp/simd/arch.hpp>
#include <tilebsp/simd/conv_loop.hpp>
#include <tilebsp/simd/gemm.hpp>
#include <tilebsp/simd/winograd.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

namespace tilebsp::simd {

namespace detail {

/// Up to two vectors of lanes computed together. bcast: every used lane belongs to one group. xl: the floats of
/// the input box per step: 1 (broadcast columns), lanes (expanded: each lane's own input), or the number of
/// groups of an interleaved column, whose lane l holds group l % xl, channel l / xl — a step's xl inputs, one per
/// group, repeat across the vector, and the kernel loads them with a broadcast. xl_source: no box; see
/// source_columns.
struct ConvColumn {
  std::size_t vectors = 1, xl = 1;
  bool bcast = true;
  std::int64_t g[2 * lanes], c[2 * lanes];  // g < 0: unused lane
  std::int64_t first_group() const noexcept { return g[0]; }
};

/// xl of a source column: lanes over several groups in their natural order (lane l: the column's l / ct-th group,
/// channel l % ct), reading the source in place — each step loads a position's channels of all the column's
/// groups (one vector) and permutes them so that every lane gets its own group's input channel.
inline constexpr std::size_t xl_source = 0;

/// The columns of groups [g0, g1) x channels [c0, c1): a group with at least a vector of channels gets its own
/// (broadcast) columns of up to two vectors; smaller groups share a vector, lanes / (c1 - c0) groups each,
/// interleaved when the channels divide the lanes, expanded otherwise.
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
    bool const inter = !col.bcast && L % ct == 0;
    col.xl = col.bcast ? 1 : inter ? static_cast<std::size_t>(per) : lanes;
    for (std::int64_t l = 0; l < 2 * L; ++l) {
      bool const used = l < L && (inter ? l % per < ng : l < ng * ct);
      col.g[l] = used ? g + (inter ? l % per : l / ct) : -1;
      col.c[l] = used ? c0 + (inter ? l / per : l % ct) : 0;
    }
    cols.push_back(col);
  }
  return cols;
}

/// Per-thread lists of conv_forward: outer step offsets in the box (and in the weights, for row blocks), and for
/// each output position of a pass its
/// box position, its destination (elements from dst's origin) and its row of the direct-store path.
struct ForwardScratch {
  /// Where a column's weights lie for forward_rows: base, and the offsets of t0, t1, j and t2.
  struct RowWeights {
    float const* base;
    std::ptrdiff_t o0, o1, oj, wk;
  };
  std::vector<RowWeights> w;
  std::vector<std::ptrdiff_t> toff, woff, d, trow, wrow;
  std::vector<std::int32_t> sidx;  ///< lane indices of source columns (source_columns)
  std::vector<float const*> x;
  std::vector<float*> rows;
};
inline ForwardScratch& forward_scratch() {
  thread_local ForwardScratch s;
  return s;
}
/// Per-thread lists of conv_weight_gradient: the box offset and destination row of each step (taps, j), and the
/// box offset of each position of a chunk.
struct GradientScratch {
  std::vector<std::ptrdiff_t> qoff, drow, poff;
  std::vector<unsigned char> touched;  // row blocks (t0, t1, channel chunk) that a kernel has started
};
inline GradientScratch& gradient_scratch() {
  thread_local GradientScratch s;
  return s;
}

inline Scratch& conv_scratch(int which) {
  thread_local Scratch s[4];
  return s[which];
}

template <class T>
float to_f32(T v) noexcept {
  return static_cast<float>(v);
}

/// A lane permutation of the first `span` floats at p: out[l] = p[idx[l]], zero where idx[l] < 0, the floats
/// loaded once for several permutations where the instruction set has a permute (simd/isa/).
using LanePermuter = isa::LanePermuter<arch>;

/// The lanes of a source column's step: lane l takes the float at p + idx[l] (0 <= idx[l] < lanes) — one load of
/// the vector at p and one permutation, the indices held in a register across a step's loads.
using LaneIndex = isa::LaneIndex<arch>;

/// Copies the n floats at p to out (one position of a box: a call to memcpy costs more than the copy).
inline void copy_floats(float* out, float const* p, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) batch<float>::load_unaligned(p + i).store_unaligned(out + i);
  for (; i < n; ++i) out[i] = p[i];
}

/// `count` positions of a box row, `ps` floats apart at p, each permuted by idx into one vector at o (a vector
/// apart), prefetching pf_span bytes at pf (when not null) and `pfs` bytes on per position. Out of build_box's
/// general loop, whose state lived on the stack: the loop-carried pointers went through memory on every
/// position.
inline void permute_positions(float* o, float const* p, std::ptrdiff_t ps, std::int64_t count, std::int32_t const* idx,
                              std::size_t span, char const* pf, std::ptrdiff_t pfs, std::ptrdiff_t pf_span) noexcept {
  for (std::int64_t i = 0; i < count; ++i, p += ps, o += lanes) {
    if (pf) {
      for (std::ptrdiff_t k = 0; k < pf_span; k += 64) __builtin_prefetch(pf + k, 0, 2);
      pf += pfs;
    }
    LanePermuter const permute(p, span);
    permute(idx).store_unaligned(o);
  }
}

/// Builds the virtual input box of one column for batch n: X[v0][v1][v2][j][XL] over virtual positions
/// [vlo[d], vlo[d] + ext[d]) and reduction channels [j0, j1), slabs of dimension 0 xs0 floats apart; XL =
/// col.xl (see ConvColumn).
template <class TS>
void build_box(ConvLoop const& L, Operand6<TS const> const& src, ConvColumn const& col, std::int64_t n,
               std::array<std::int64_t, 3> const& vlo, std::array<std::int64_t, 3> const& ext, std::int64_t j0,
               std::int64_t j1, float* x, std::ptrdiff_t xs0) {
  std::size_t const XL = col.xl;
  bool const inter = XL != 1 && XL != lanes;
  std::size_t const cj = static_cast<std::size_t>(j1 - j0), row = cj * XL;
  // Expanded columns read each lane's channel relative to the column's first lane; interleaved ones transpose
  // a position's (group, channel) block into (channel, group) with one permutation when it fills a vector.
  alignas(64) std::int32_t idx[64][lanes];
  bool fast = false;
  std::size_t span = 0;
  // Interleaved rows of whole vectors, or of a fraction of one (a chunk of the reduction channels).
  std::size_t const ivec = (row + lanes - 1) / lanes;
  if (inter && std::is_same_v<TS, float> && src.stride[5] == 1 && (row % lanes == 0 || lanes % row == 0) && ivec <= 64) {
    fast = true;
    for (std::size_t m = 0; m < ivec * lanes && fast; ++m) {
      std::size_t const gi = m % XL, j = m / XL;
      std::ptrdiff_t const off = m >= row || col.g[gi] < 0 ? -1 : static_cast<std::ptrdiff_t>(gi) * src.stride[4] + static_cast<std::ptrdiff_t>(j);
      if (off >= static_cast<std::ptrdiff_t>(lanes)) fast = false;
      idx[m / lanes][m % lanes] = static_cast<std::int32_t>(off);
      span = std::max<std::size_t>(span, static_cast<std::size_t>(off + 1));
    }
  } else if (!col.bcast && !inter) {
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
  // One position's row of the box from its source element p (of group g, channel j0).
  auto const fill = [&](float* o, TS const* p, std::int64_t s0, std::int64_t s1, std::int64_t s2) {
    if (col.bcast) {
      if constexpr (std::is_same_v<TS, float>) {
        if (src.stride[5] == 1) return copy_floats(o, p, cj);
      }
      for (std::size_t j = 0; j < cj; ++j) o[j] = to_f32(p[static_cast<std::ptrdiff_t>(j) * src.stride[5]]);
    } else if (fast) {
      if constexpr (std::is_same_v<TS, float>) {
        LanePermuter const permute(p, span);
        if (inter && row < lanes) return store_partial(permute(idx[0]), o, row);
        for (std::size_t k = 0; k < (inter ? ivec : cj); ++k) permute(idx[k]).store_unaligned(o + k * lanes);
      }
    } else if (inter) {
      for (std::size_t j = 0; j < cj; ++j)
        for (std::size_t gi = 0; gi < XL; ++gi)
          o[j * XL + gi] = col.g[gi] < 0 ? 0.0f : to_f32(*src.at(n, s0, s1, s2, col.g[gi], j0 + static_cast<std::int64_t>(j)));
    } else {
      for (std::size_t j = 0; j < cj; ++j)
        for (std::size_t l = 0; l < lanes; ++l)
          o[j * lanes + l] = col.g[l] < 0 ? 0.0f : to_f32(*src.at(n, s0, s1, s2, col.g[l], j0 + static_cast<std::int64_t>(j)));
    }
  };
  auto const& D2 = L.dim[2];
  std::int64_t const e2 = ext[2];
  // Source positions are prefetched (into L2) two box rows ahead when they are a cache line or more apart (one
  // group's channels per position, which hardware prefetchers do not follow; contiguous runs they do): a short
  // row's lines (up to 16) all at its start, a longer row's one position's lines with each position filled. All
  // of a long row's lines at once (58 at 56²) fill the miss queue and stall the fills behind them. At
  // power-of-two position strides (512 channels: 2 KiB) a box's positions share a few cache sets, so prefetching
  // a whole box ahead evicts itself before use.
  constexpr std::int64_t ahead = 2;
  bool const far = std::abs(src.stride[3]) * static_cast<std::ptrdiff_t>(sizeof(TS)) >= 64 && D2.div == 1;
  std::int64_t glast = g;
  for (std::size_t l = 0; l < col.vectors * lanes; ++l) glast = std::max(glast, col.g[l]);
  // Bytes from a position's first element to its last (its first line only for negative strides).
  std::ptrdiff_t const line_span = src.stride[4] >= 0 && src.stride[5] >= 0
                                  ? ((glast - g) * src.stride[4] + (j1 - 1 - j0) * src.stride[5] + 1) * static_cast<std::ptrdiff_t>(sizeof(TS))
                                  : 1;
  std::ptrdiff_t const pstride = src.stride[3] * static_cast<std::ptrdiff_t>(sizeof(TS));
  // A row's positions with a source, [a_src, b_src).
  std::int64_t const a_src = std::clamp<std::int64_t>(-vlo[2], 0, e2), b_src = std::clamp<std::int64_t>(D2.in - vlo[2], a_src, e2);
  // The source of box row q's first position with one (a_src), or null when q is past the box or padding.
  auto const row_source = [&](std::int64_t q) -> char const* {
    if (!far || q >= ext[0] * ext[1]) return nullptr;
    std::int64_t const s0 = L.dim[0].source(vlo[0] + q / ext[1]), s1 = s0 < 0 ? -1 : L.dim[1].source(vlo[1] + q % ext[1]);
    return s1 < 0 ? nullptr : reinterpret_cast<char const*>(src.at(n, s0, s1, vlo[2] + a_src, g, j0));
  };
  bool const burst = (b_src - a_src) * ((line_span + 63) / 64) <= 16;
  // Prefetches the position at pf and moves pf to the next (nothing when null).
  auto const prefetch = [&](char const*& pf) {
    if (!pf) return;
    for (std::ptrdiff_t k = 0; k < line_span; k += 64) __builtin_prefetch(pf + k, 0, 2);
    pf += pstride;
  };
  for (std::int64_t v0 = vlo[0]; v0 < vlo[0] + ext[0]; ++v0) {
    std::int64_t const s0 = L.dim[0].source(v0);
    float* out = x + (v0 - vlo[0]) * xs0;
    for (std::int64_t v1 = vlo[1]; v1 < vlo[1] + ext[1]; ++v1, out += e2 * static_cast<std::ptrdiff_t>(row)) {
      char const* pf = row_source((v0 - vlo[0]) * ext[1] + (v1 - vlo[1]) + ahead);  // position a_src, two rows on
      if (pf && burst) {  // a short row: all its lines at once
        for (std::int64_t i = a_src; i < b_src; ++i) prefetch(pf);
        pf = nullptr;
      }
      std::int64_t const s1 = s0 < 0 ? -1 : L.dim[1].source(v1);
      if (s1 < 0) {
        std::memset(out, 0, static_cast<std::size_t>(e2) * row * sizeof(float));
        continue;
      }
      if (D2.div != 1) {  // input dilation: holes between the source positions
        for (std::int64_t v2 = vlo[2]; v2 < vlo[2] + e2; ++v2) {
          float* o = out + (v2 - vlo[2]) * static_cast<std::ptrdiff_t>(row);
          std::int64_t const s2 = D2.source(v2);
          if (s2 < 0) std::memset(o, 0, row * sizeof(float));
          else fill(o, src.at(n, s0, s1, s2, g, j0), s0, s1, s2);
        }
        continue;
      }
      std::int64_t const a = a_src, b = b_src;  // padding around them
      std::memset(out, 0, static_cast<std::size_t>(a) * row * sizeof(float));
      std::memset(out + b * static_cast<std::ptrdiff_t>(row), 0, static_cast<std::size_t>(e2 - b) * row * sizeof(float));
      TS const* p = src.at(n, s0, s1, vlo[2] + a, g, j0);
      if constexpr (std::is_same_v<TS, float>) {
        if (col.bcast && src.stride[5] == 1 && src.stride[3] == static_cast<std::ptrdiff_t>(cj)) {  // one run
          std::memcpy(out + a * static_cast<std::ptrdiff_t>(row), p, static_cast<std::size_t>(b - a) * cj * sizeof(float));
          continue;
        }
        if (col.bcast && src.stride[5] == 1) {  // one group's channels per position, positions far apart
          float* o = out + a * static_cast<std::ptrdiff_t>(row);
          for (std::int64_t i = a; i < b; ++i, p += src.stride[3], o += row) {
            prefetch(pf);
            copy_floats(o, p, cj);
          }
          continue;
        }
        if (fast && inter && row == lanes) {  // interleaved columns of one vector per position: their own loop
          permute_positions(out + a * static_cast<std::ptrdiff_t>(row), p, src.stride[3], b - a, idx[0], span, pf, pstride, line_span);
          continue;
        }
      }
      for (std::int64_t i = a; i < b; ++i, p += src.stride[3]) {
        prefetch(pf);
        fill(out + i * static_cast<std::ptrdiff_t>(row), p, s0, s1, vlo[2] + i);
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

/// a[l] = d[off[l]] as f32 for the VL lanes of a column (zero where off[l] < 0): a row of accumulators from an
/// operand whose lane offsets lane_offsets gave (`contiguous`: lanes 0..used-1 at consecutive elements).
template <class T>
void load_lanes(float* a, T const* d, std::ptrdiff_t const* off, std::size_t VL) noexcept {
  for (std::size_t l = 0; l < VL; ++l) a[l] = off[l] < 0 ? 0.0f : to_f32(d[off[l]]);
}
/// d[off[l]] = a[l] for the used lanes: the inverse of load_lanes.
template <class T>
void store_lanes(T* d, float const* a, std::ptrdiff_t const* off, std::size_t VL, bool contiguous, std::size_t used) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    if (contiguous) return copy_floats(d, a, used);
  }
  for (std::size_t l = 0; l < VL; ++l)
    if (off[l] >= 0) d[off[l]] = T(a[l]);
}

/// Whether the lanes' offsets are a permutation of 0 .. n-1 (an interleaved column over contiguous channels);
/// then perm[m] is the lane that goes to offset m.
inline bool lane_permutation(std::ptrdiff_t const* off, std::size_t n, std::int32_t* perm) noexcept {
  std::fill(perm, perm + n, -1);
  for (std::size_t l = 0; l < n; ++l) {
    if (off[l] < 0 || off[l] >= static_cast<std::ptrdiff_t>(n) || perm[off[l]] >= 0) return false;
    perm[off[l]] = static_cast<std::int32_t>(l);
  }
  return true;
}

/// Packs the weights of one column: wp[q][v][lanes] for the steps q = (t0, t1, t2, j) in row-major order, or
/// (t0, t1, j, t2) with `j_first` (see conv_forward).
template <class TW>
void pack_weights(ConvLoop const& L, Operand6<TW const> const& w, ConvColumn const& col, std::int64_t j0,
                  std::int64_t j1, float* wp, bool j_first) {
  std::size_t const VL = col.vectors * lanes;
  std::ptrdiff_t off[2 * lanes];
  std::size_t used = 0;
  // Lanes 0..used-1 reading consecutive floats: a copy per row.
  bool const contiguous = lane_offsets(w, col, off, used, 0) && std::is_same_v<TW, float>;
  std::int64_t const T1 = L.dim[1].taps, T2 = L.dim[2].taps, cj = j1 - j0;
  // The packed row of step (t0, t1, t2, j - j0).
  auto const row_of = [&](std::int64_t t0, std::int64_t t1, std::int64_t t2, std::int64_t jj) {
    std::int64_t const q = j_first ? ((t0 * T1 + t1) * cj + jj) * T2 + t2 : ((t0 * T1 + t1) * T2 + t2) * cj + jj;
    return wp + q * static_cast<std::ptrdiff_t>(VL);
  };
  if constexpr (std::is_same_v<TW, float>) {
    // Every lane at a constant stride st, reduction channels consecutive (the weights of a backward-input pass:
    // its lanes are the forward pass's reduction channels): per tap, a transpose in 4 x 4 blocks instead of a
    // gather per row (a scalar loop over the lanes, or a gather, costs a load per lane).
    std::ptrdiff_t const st = used > 1 ? off[1] : 0;
    bool strided = !contiguous && used == VL && st > 0 && w.stride[4] == 1 && cj >= 4 && VL % 4 == 0;
    for (std::size_t l = 0; strided && l < VL; ++l) strided = off[l] == static_cast<std::ptrdiff_t>(l) * st;
    if (strided) {
      for (std::int64_t t0 = 0; t0 < L.dim[0].taps; ++t0)
        for (std::int64_t t1 = 0; t1 < T1; ++t1)
          for (std::int64_t t2 = 0; t2 < T2; ++t2) {
            float const* base = w.at(col.g[0], t0, t1, t2, j0, col.c[0]);
            std::int64_t jj = 0;
            for (; jj + 4 <= cj; jj += 4)
              for (std::size_t l = 0; l < VL; l += 4)
                isa::transpose4<arch>(base + jj + static_cast<std::ptrdiff_t>(l) * st, st, row_of(t0, t1, t2, jj) + l,
                                      row_of(t0, t1, t2, jj + 1) + l, row_of(t0, t1, t2, jj + 2) + l,
                                      row_of(t0, t1, t2, jj + 3) + l, arch{});
            for (; jj < cj; ++jj)
              for (std::size_t l = 0; l < VL; ++l) row_of(t0, t1, t2, jj)[l] = base[jj + static_cast<std::ptrdiff_t>(l) * st];
          }
      return;
    }
  }
  for (std::int64_t t0 = 0; t0 < L.dim[0].taps; ++t0)
    for (std::int64_t t1 = 0; t1 < T1; ++t1)
      for (std::int64_t t2 = 0; t2 < T2; ++t2)
        for (std::int64_t jj = 0; jj < cj; ++jj) {
          float* o = row_of(t0, t1, t2, jj);
          TW const* row = w.at(col.g[0], t0, t1, t2, j0 + jj, col.c[0]);
          if constexpr (std::is_same_v<TW, float>) {
            if (contiguous) {
              std::memcpy(o, row, used * sizeof(float));
              std::fill(o + used, o + VL, 0.0f);
              continue;
            }
          }
          for (std::size_t l = 0; l < VL; ++l) o[l] = off[l] < 0 ? 0.0f : to_f32(row[off[l]]);
        }
}

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
/// per group), the vector at x (XL = lanes: lanes spanning groups) or the XL floats at x repeated (an
/// interleaved column).
template <std::size_t XL>
[[gnu::always_inline]] inline batch<float> load_step(float const* x) noexcept {
  if constexpr (XL == 1) return batch<float>(*x);
  else if constexpr (XL == lanes) return batch<float>::load_aligned(x);
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
/// out[r] (row r's V vectors stored contiguously there), permuted by `perm` when given. The `nnext` rows at
/// next[i] (V vectors each: the next block's results) are prefetched for writing, spread over the outer steps.
template <std::size_t R, std::size_t V, std::size_t XL>
void forward_block(std::size_t T, std::size_t K, std::ptrdiff_t const* toff, std::ptrdiff_t ks, float const* wp,
                   float const* const* xp, float* acc_io, float* const* out = nullptr,
                   std::int32_t const* perm = nullptr, float* const* next = nullptr, std::size_t nnext = 0) noexcept {
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
      if (out) (perm ? permute_lanes(acc[r][v], perm) : acc[r][v]).store_unaligned(out[r] + v * lanes);
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
/// `sl` (see SourceSteps).
template <std::size_t R, std::size_t V, std::size_t XL>
void row_block(std::size_t T, std::ptrdiff_t const* toff, std::ptrdiff_t s, float const* wp, std::ptrdiff_t const* woff,
               std::ptrdiff_t wk, float const* x, float* out, std::ptrdiff_t os, std::int32_t const* perm,
               std::int32_t const* inv, bool load, bool zero_first, bool zero_last, SourceSteps const& sl = {}) noexcept {
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
/// With `from_zero` the chains start from zero, not from the values at acc_io.
template <std::size_t RJ, std::size_t V, std::size_t XL>
void gradient_row_block(std::size_t rows, std::size_t ow, float const* y, float const* x, std::ptrdiff_t xrow,
                        std::ptrdiff_t xs, float* acc_io, std::ptrdiff_t ks, bool zero_first, bool zero_last, bool from_zero) noexcept {
  using B = batch<float>;
  constexpr std::size_t K = row_taps, VL = V * lanes;
  B acc[K][RJ][V];
  TILEBSP_UNROLL
  for (std::size_t k = 0; k < K; ++k)
    TILEBSP_UNROLL
    for (std::size_t r = 0; r < RJ; ++r)
      TILEBSP_UNROLL
      for (std::size_t v = 0; v < V; ++v)
        acc[k][r][v] = from_zero ? B(0.0f) : B::load_unaligned(acc_io + static_cast<std::ptrdiff_t>(k) * ks + (r * V + v) * lanes);
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
  for (std::size_t row = 0; row < rows; ++row) {
    float const* yr = y + row * ow * VL;
    float const* xr = x + static_cast<std::ptrdiff_t>(row) * xrow;
    auto const at = [&](std::size_t i) { return xr + static_cast<std::ptrdiff_t>(i) * xs; };
    if (!zero_first) step.template operator()<1>(yr, at(0), 0);
    step.template operator()<3>(yr, at(1), 1);
    for (std::size_t i = 2; i < ow; ++i) step.template operator()<7>(yr, at(i), i);
    step.template operator()<6>(yr, at(ow), ow);
    if (!zero_last) step.template operator()<4>(yr, at(ow + 1), ow + 1);
  }
  TILEBSP_UNROLL
  for (std::size_t k = 0; k < K; ++k)
    TILEBSP_UNROLL
    for (std::size_t r = 0; r < RJ; ++r)
      TILEBSP_UNROLL
      for (std::size_t v = 0; v < V; ++v) acc[k][r][v].store_unaligned(acc_io + static_cast<std::ptrdiff_t>(k) * ks + (r * V + v) * lanes);
}
/// Reduction channels of a gradient_row_block: 3 RJ V accumulators, 3 V output gradients and an input in the
/// registers (32 with AVX-512, 16 otherwise).
constexpr std::size_t grad_row_channels(std::size_t V) noexcept { return lanes >= 16 ? 8 / V : (V == 1 ? 3 : 1); }
/// Calls f.template operator()<RJ, V, XL>() for `n` (1 to grad_row_channels(V)) reduction channels.
template <std::size_t V, std::size_t XL, std::size_t RJ = 1, class F>
void with_grad_channels(std::size_t n, F&& f) {
  if constexpr (RJ < grad_row_channels(V)) {
    if (n != RJ) return with_grad_channels<V, XL, RJ + 1>(n, f);
  }
  f.template operator()<RJ, V, XL>();
}

/// Largest register block: 12 rows with AVX-512's 32 registers, 6 (or 8 one-vector rows) otherwise.
inline constexpr std::size_t max_block_rows = lanes >= 16 ? 12 : 8;
constexpr std::size_t block_rows(std::size_t V) noexcept { return lanes >= 16 ? 12 : (V == 2 ? 6 : 8); }

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
constexpr std::size_t row_rows_max(std::size_t V) noexcept { return lanes >= 16 ? (V == 1 ? 14 : 12) : (V == 1 ? 12 : 0); }
constexpr std::size_t row_rows_min(std::size_t V) noexcept { return lanes >= 16 ? (V == 1 ? 9 : 6) : (V == 1 ? 8 : 0); }
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

/// The input box of one strip — output positions (o0, [s, s1), [lo2, lo2 + ow)) of batch n — built for a column,
/// with the offset of every step q = (t0, t1, t2, j) in `qoff` when it is given.
struct StripBox {
  float const* x;
  std::ptrdiff_t xs0, xs1, xs2;  ///< strides of the box's dimensions 0, 1 and 2
};
template <class TS>
StripBox build_strip(ConvLoop const& L, Operand6<TS const> const& src, ConvColumn const& col, std::int64_t n,
                     std::int64_t o0, std::int64_t s, std::int64_t s1, std::int64_t lo2, std::int64_t ow, std::int64_t j0,
                     std::int64_t j1, std::ptrdiff_t* qoff) {
  auto const& D = L.dim;
  std::int64_t const cj = j1 - j0;
  auto const XL = static_cast<std::ptrdiff_t>(col.xl);
  // Dimension 0 covers one output position's taps, 1 the strip's, 2 the whole output range.
  std::array<std::int64_t, 3> const ext{(D[0].taps - 1) * D[0].b + 1, (s1 - 1 - s) * D[1].a + (D[1].taps - 1) * D[1].b + 1,
                                        (ow - 1) * D[2].a + (D[2].taps - 1) * D[2].b + 1};
  std::array<std::int64_t, 3> const vlo{o0 * D[0].a + D[0].c, s * D[1].a + D[1].c, lo2 * D[2].a + D[2].c};
  std::ptrdiff_t const xs2 = cj * XL, xs1 = xs2 * ext[2], xs0 = xs1 * ext[1];
  float* x = conv_scratch(2).get(static_cast<std::size_t>(xs0 * ext[0]));
  build_box(L, src, col, n, vlo, ext, j0, j1, x, xs0);
  std::size_t q = 0;
  for (std::int64_t t0 = 0; qoff && t0 < D[0].taps; ++t0)
    for (std::int64_t t1 = 0; t1 < D[1].taps; ++t1)
      for (std::int64_t t2 = 0; t2 < D[2].taps; ++t2)
        for (std::int64_t j = 0; j < cj; ++j) qoff[q++] = t0 * D[0].b * xs0 + t1 * D[1].b * xs1 + t2 * D[2].b * xs2 + j * XL;
  return {x, xs0, xs1, xs2};
}

/// Output positions of dimension 1 per box, so that a box stays within about 192 KiB.
inline std::int64_t strip_rows(ConvLoop const& L, std::array<std::int64_t, 3> const& ext_other, std::size_t row_floats) {
  std::int64_t const per_v1 = ext_other[0] * ext_other[2] * static_cast<std::int64_t>(row_floats);
  std::int64_t const budget = (192 << 10) / 4;
  std::int64_t const a = std::max<std::int64_t>(1, L.dim[1].a);
  std::int64_t const halo = (L.dim[1].taps - 1) * L.dim[1].b + 1;
  return std::max<std::int64_t>(1, (budget / std::max<std::int64_t>(1, per_v1) - halo) / a + 1);
}

/// Whether every kernel tap of dimensions 0 and 1 reads a source element (not padding or a dilation hole) at
/// output position (o0, o1).
inline bool all_rows_valid(ConvLoop const& L, std::int64_t o0, std::int64_t o1) noexcept {
  auto const valid = [](ConvDim const& d, std::int64_t o) {
    for (std::int64_t t = 0; t < d.taps; ++t)
      if (!d.reads(o, t)) return false;
    return true;
  };
  return valid(L.dim[0], o0) && valid(L.dim[1], o1);
}

/// Whether a row kernel (forward_rows, the weight gradient's row blocks) can read the source in place over output
/// positions [lo2, hi2) of dimension 2: no input dilation, and a row's padding at most its first and last input,
/// which the row kernels skip, as they skip kernel rows that read padding.
inline bool row_in_place(ConvLoop const& L, std::int64_t lo2, std::int64_t hi2) noexcept {
  auto const& D = L.dim;
  return D[0].div == 1 && D[1].div == 1 && D[2].div == 1 && lo2 + D[2].c >= -1 && hi2 + D[2].c + 1 <= D[2].in;
}
/// row_in_place for a broadcast column (one group's channels per position, as the box would hold them) or a
/// source column.
inline bool row_source_in_place(ConvLoop const& L, ConvColumn const& col, std::int64_t lo2, std::int64_t hi2) noexcept {
  return (col.xl == 1 || col.xl == xl_source) && row_in_place(L, lo2, hi2);
}

/// Whether conv_forward runs column `col` as row blocks (forward_rows): f32 results whose lanes are
/// contiguous or a permutation of a vector, and rows that split into blocks of the kernel's range.
template <class TD>
bool row_column(ConvColumn const& col, Operand6<TD> const& dst, std::int64_t ow) {
  std::size_t const rmax = row_rows_max(col.vectors), rmin = row_rows_min(col.vectors), VL = col.vectors * lanes;
  if (!std::is_same_v<TD, float> || rmax == 0 || ow <= 0) return false;
  auto const w2 = static_cast<std::size_t>(ow);
  if (w2 / ((w2 + rmax - 1) / rmax) < rmin) return false;
  std::ptrdiff_t off[2 * lanes];
  std::int32_t perm[lanes];
  std::size_t used = 0;
  return (lane_offsets(dst, col, off, used) && used == VL) || (VL == lanes && lane_permutation(off, VL, perm));
}

/// Prefetches (into L2) a source column's vector at each of the positions [v2, v2 + count) of virtual row v1, of
/// every kernel row of dimension 0 — read in place at p (virtual position v2), positions ps floats apart, rows of
/// dimension 0 xs0 apart — skipping padding.
inline void prefetch_source_row(ConvLoop const& L, float const* p, std::ptrdiff_t xs0, std::ptrdiff_t ps, std::int64_t v1,
                                std::int64_t v2, std::int64_t count) noexcept {
  auto const& D = L.dim;
  if (D[1].source(v1) < 0) return;
  std::int64_t const a = std::max<std::int64_t>(0, -v2), b = std::min(count, D[2].in - v2);
  constexpr auto bytes = static_cast<std::ptrdiff_t>(lanes * sizeof(float));
  for (std::int64_t t0 = 0; t0 < D[0].taps; ++t0) {
    float const* row = p + t0 * D[0].b * xs0;
    for (std::int64_t i = a; i < b; ++i)
      for (std::ptrdiff_t k = 0; k < bytes; k += 64) __builtin_prefetch(reinterpret_cast<char const*>(row + i * ps) + k, 0, 2);
  }
}

/// Turns the columns of forward_rows whose lanes span several groups into source columns (xl_source) where they
/// can read an f32 source in place: the column's groups fill a whole vector, a position's channels [j0, j1) of
/// all of them span exactly a vector of floats from its first (so that a whole load reads only their channels),
/// and the results land in dst in lane order. `idx` receives each reduction channel's lane indices (cj rows of
/// lanes); returns whether a column changed. The lanes' values are unchanged: each is the same chain of
/// multiply-adds, its input fetched from the source rather than from a box (the kernel then waits on the source
/// lines the box used to gather, so the gain is small).
template <class TS>
bool source_columns(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, Operand6<float> const& dst,
                    std::vector<ConvColumn>& cols, std::vector<std::int32_t>& idx) {
  if constexpr (!std::is_same_v<TS, float>) {
    return false;
  } else {
    auto const L_ = static_cast<std::int64_t>(lanes);
    std::int64_t const ct = r.c1 - r.c0, cj = r.j1 - r.j0, per = L_ / std::max<std::int64_t>(1, ct);
    if (ct <= 0 || L_ % ct != 0 || per < 2 || src.stride[5] != 1 || src.stride[4] < cj || dst.stride[5] != 1 ||
        dst.stride[4] != ct || (per - 1) * src.stride[4] + cj != L_ || !row_in_place(L, r.lo[2], r.hi[2]))
      return false;
    idx.resize(static_cast<std::size_t>(cj) * lanes);
    for (std::int64_t j = 0; j < cj; ++j)
      for (std::int64_t l = 0; l < L_; ++l)
        idx[static_cast<std::size_t>(j * L_ + l)] = static_cast<std::int32_t>(l / ct * src.stride[4] + j);
    bool changed = false;
    for (auto& col : cols) {
      if (col.bcast || col.vectors != 1 || col.g[L_ - 1] < 0) continue;  // one group, or not a whole vector
      std::int64_t const g0 = col.first_group();
      for (std::int64_t l = 0; l < L_; ++l) {
        col.g[l] = g0 + l / ct;
        col.c[l] = r.c0 + l % ct;
      }
      col.xl = xl_source;
      changed = true;
    }
    return changed;
  }
}

/// conv_forward for a 3-wide kernel with stride and dilation 1 in dimension 2 (steps (t0, t1, j, t2)) whose
/// columns all pass row_column: strip by strip, one box each (or the source read in place), output rows in blocks
/// of row_block, results straight from the registers to dst; weights read in place where a column's lanes are
/// contiguous f32 there, else packed.
template <class TS, class TW>
void forward_rows(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, Operand6<TW const> const& w,
                  Operand6<float> const& dst, bool load, std::vector<ConvColumn> const& cols, SourceSteps const& sl) {
  auto const& D = L.dim;
  std::int64_t const cj = r.j1 - r.j0, ow = r.hi[2] - r.lo[2], nrow = r.hi[1] - r.lo[1];
  std::int64_t const T01 = D[0].taps * D[1].taps, T2 = D[2].taps;
  auto const T = static_cast<std::size_t>(T01 * cj);
  ForwardScratch& fs = forward_scratch();
  fs.toff.resize(T);
  std::ptrdiff_t const ds = dst.stride[3];
  for (std::size_t c0 = 0; c0 < cols.size();) {
    // Broadcast columns of one group share a box.
    std::size_t c1 = c0 + 1;
    while (c1 < cols.size() && cols[c0].bcast && cols[c1].bcast && cols[c1].g[0] == cols[c0].g[0]) ++c1;
    ConvColumn const& first = cols[c0];
    auto const XL = static_cast<std::int64_t>(first.xl);
    std::array<std::int64_t, 3> ext{(D[0].taps - 1) * D[0].b + 1, 0, ow + T2 - 1};
    // Broadcast columns of an f32 source with no input dilation read it in place (one group's channels per
    // position, as the box would hold them): padded rows are skipped below, and the padding of a row is at most
    // its first and last input, which row_block skips.
    bool const direct = std::is_same_v<TS, float> && row_source_in_place(L, first, r.lo[2], r.hi[2]);
    std::int64_t const strip = direct ? nrow : std::min(nrow, strip_rows(L, ext, static_cast<std::size_t>(cj * XL)));
    std::ptrdiff_t xs2 = cj * XL, xs1 = xs2 * ext[2];
    std::ptrdiff_t xs0 = xs1 * ((strip - 1) * D[1].a + (D[1].taps - 1) * D[1].b + 1);
    std::ptrdiff_t xj = XL;
    // In place, a step's reduction channel is an offset from the position (broadcast columns) or in its lane
    // indices (source columns).
    if (direct) xs0 = src.stride[1], xs1 = src.stride[2], xs2 = src.stride[3], xj = XL == 1 ? src.stride[5] : 0;
    {
      std::size_t t = 0;
      for (std::int64_t t0 = 0; t0 < D[0].taps; ++t0)
        for (std::int64_t t1 = 0; t1 < D[1].taps; ++t1)
          for (std::int64_t j = 0; j < cj; ++j) fs.toff[t++] = t0 * D[0].b * xs0 + t1 * D[1].b * xs1 + j * xj;
    }
    // Each column's weights: in place, or packed (t0, t1, t2, j).
    auto& ws = fs.w;
    ws.clear();
    std::size_t packed = 0;
    for (std::size_t c = c0; c < c1; ++c) {
      std::ptrdiff_t off[2 * lanes];
      std::size_t used = 0;
      std::size_t const VL = cols[c].vectors * lanes;
      if (std::is_same_v<TW, float> && lane_offsets(w, cols[c], off, used, 0) && used == VL) {
        auto const* b = reinterpret_cast<float const*>(w.at(cols[c].g[0], 0, 0, 0, r.j0, cols[c].c[0]));
        ws.push_back({b, w.stride[1], w.stride[2], w.stride[4], w.stride[3]});
      } else {
        auto const q = static_cast<std::ptrdiff_t>(VL);
        ws.push_back({nullptr, D[1].taps * T2 * cj * q, T2 * cj * q, q, cj * q});
        packed += static_cast<std::size_t>(T01 * T2 * cj) * VL;
      }
    }
    float* wp = packed ? conv_scratch(0).get(packed) : nullptr;
    for (std::size_t c = c0, at = 0; c < c1; ++c)
      if (!ws[c - c0].base) {
        pack_weights(L, w, cols[c], r.j0, r.j1, wp + at, false);
        ws[c - c0].base = wp + at;
        at += static_cast<std::size_t>(T01 * T2 * cj) * cols[c].vectors * lanes;
      }
    // Each column's weight offsets per outer step, the same for every image and row.
    fs.woff.resize(T * (c1 - c0));
    for (std::size_t c = c0, t = 0; c < c1; ++c) {
      ForwardScratch::RowWeights const& wt = ws[c - c0];
      for (std::int64_t t0 = 0; t0 < D[0].taps; ++t0)
        for (std::int64_t t1 = 0; t1 < D[1].taps; ++t1)
          for (std::int64_t j = 0; j < cj; ++j) fs.woff[t++] = t0 * wt.o0 + t1 * wt.o1 + j * wt.oj;
    }
    float* x = direct ? nullptr : conv_scratch(2).get(static_cast<std::size_t>(xs0 * ext[0]));
    for (std::int64_t n = r.n0; n < r.n1; ++n)
      for (std::int64_t o0 = r.lo[0]; o0 < r.hi[0]; ++o0)
        for (std::int64_t s = r.lo[1]; s < r.hi[1]; s += strip) {
          std::int64_t const s1 = std::min(r.hi[1], s + strip);
          ext[1] = (s1 - 1 - s) * D[1].a + (D[1].taps - 1) * D[1].b + 1;
          // The strip's first virtual position (o0, s, lo2), in the source or in its box.
          float const* x0 = x;
          if constexpr (std::is_same_v<TS, float>) {
            if (direct) x0 = src.at(n, o0 * D[0].a + D[0].c, s * D[1].a + D[1].c, r.lo[2] + D[2].c, first.g[0], r.j0);
          }
          if (!direct)
            build_box(L, src, first, n, {o0 * D[0].a + D[0].c, s * D[1].a + D[1].c, r.lo[2] + D[2].c}, ext, r.j0, r.j1, x, xs0);
          for (std::size_t c = c0; c < c1; ++c) {
            ConvColumn const& col = cols[c];
            ForwardScratch::RowWeights const& wt = ws[c - c0];
            std::ptrdiff_t const* woff = fs.woff.data() + (c - c0) * T;
            std::ptrdiff_t off[2 * lanes];
            std::size_t used = 0;
            // Interleaved columns: stores permute lanes into offset order, loads gather them back.
            alignas(64) std::int32_t store[lanes], gather[lanes];
            bool const permuted = !lane_offsets(dst, col, off, used) && lane_permutation(off, lanes, store);
            for (std::size_t l = 0; permuted && l < lanes; ++l) gather[l] = static_cast<std::int32_t>(off[l]);
            with_column<true>(col, [&]<std::size_t VV, std::size_t XX>() {
              constexpr std::size_t RMAX = row_rows_max(VV);
              if constexpr (RMAX > 0) {
                auto const w2 = static_cast<std::size_t>(ow);
                std::size_t const nb = (w2 + RMAX - 1) / RMAX;
                for (std::int64_t o1 = s; o1 < s1; ++o1) {
                  float const* xr = x0 + (o1 - s) * D[1].a * xs1;
                  float* d = dst.at(n, o0, o1, r.lo[2], col.g[0], col.c[0]);
                  // Outer steps whose kernel row reads padding or a dilation hole (zeros in the box) are skipped,
                  // as are a block's first or last input when padding: a product of zero and a finite weight
                  // leaves a chain that starts at +0 bitwise unchanged, so only the work differs (and with
                  // non-finite weights, padding contributes nothing rather than NaN, as in oneDNN).
                  std::size_t tr = T;
                  std::ptrdiff_t const *to = fs.toff.data(), *wo = woff;
                  if (!all_rows_valid(L, o0, o1)) {
                    auto const ok = [&](std::int64_t t0, std::int64_t t1) {
                      return D[0].reads(o0, t0) && D[1].reads(o1, t1);
                    };
                    // The steps run (t0, t1, j): the valid ones of a 2-D kernel with no holes are one range.
                    std::int64_t a = 0, b = D[1].taps;
                    while (a < b && !ok(0, a)) ++a;
                    while (b > a && !ok(0, b - 1)) --b;
                    bool range = D[0].taps == 1;
                    for (std::int64_t t1 = a; t1 < b && range; ++t1) range = ok(0, t1);
                    if (range) {
                      to += a * cj, wo += a * cj;
                      tr = static_cast<std::size_t>((b - a) * cj);
                    } else {
                      fs.trow.clear();
                      fs.wrow.clear();
                      for (std::int64_t t0 = 0, t = 0; t0 < D[0].taps; ++t0)
                        for (std::int64_t t1 = 0; t1 < D[1].taps; ++t1, t += cj)
                          if (ok(t0, t1)) {
                            fs.trow.insert(fs.trow.end(), fs.toff.begin() + t, fs.toff.begin() + t + cj);
                            fs.wrow.insert(fs.wrow.end(), woff + t, woff + t + cj);
                          }
                      tr = fs.trow.size();
                      to = fs.trow.data();
                      wo = fs.wrow.data();
                    }
                  }
                  // The next row's destination, for writing, as conv_forward's blocks do (the results leave L2 at
                  // these sizes).
                  if (o1 + 1 < s1)
                    for (std::int64_t i = 0; i < ow; ++i)
                      for (std::size_t v = 0; v < VV; ++v) __builtin_prefetch(d + dst.stride[2] + i * ds + v * lanes, 1);
                  // A source column's next source row (the one the next output row's last kernel row adds), its
                  // positions a cache line or more apart, which hardware prefetchers do not follow across pages
                  // (broadcast columns read in place gain nothing from it, see docs/04).
                  if constexpr (XX == xl_source) {
                    if (o1 + 1 < s1 && std::abs(xs2) >= static_cast<std::ptrdiff_t>(64 / sizeof(float)))
                      prefetch_source_row(L, x0 + ((o1 + 1 - s) * D[1].a + (D[1].taps - 1) * D[1].b) * xs1, xs0, xs2,
                                          (o1 + 1) * D[1].a + (D[1].taps - 1) * D[1].b + D[1].c, r.lo[2] + D[2].c, ow + T2 - 1);
                  }
                  for (std::size_t b = 0; b < nb; ++b) {
                    auto const i0 = static_cast<std::ptrdiff_t>(w2 * b / nb), i1 = static_cast<std::ptrdiff_t>(w2 * (b + 1) / nb);
                    std::int64_t const v2 = r.lo[2] + D[2].c + i0;  // the block's first input
                    bool const z0 = D[2].source(v2) < 0, z1 = D[2].source(v2 + (i1 - i0) + 1) < 0;
                    with_row_rows<VV, XX>(static_cast<std::size_t>(i1 - i0), [&]<std::size_t RR, std::size_t V2, std::size_t X2>() {
                      row_block<RR, V2, X2>(tr, to, xs2, wt.base, wo, wt.wk, xr + i0 * xs2, d + i0 * ds, ds, permuted ? store : nullptr,
                                            permuted ? gather : nullptr, load, z0, z1, sl);
                    });
                  }
                }
              }
            });
          }
        }
    c0 = c1;
  }
}

}  // namespace detail

/// dst(n, o, g, c) = [dst +] sum over taps t (row-major), then j in [j0, j1), of src(n, v(o, t), g, j) *
/// w(g, t, j, c), for the block `r`; with `load`, each chain continues from the value in dst. A loop marked
/// winograd runs winograd_forward instead (on `wino`, its weights prepared ahead, when given).
template <class TS, class TW, class TD>
void conv_forward(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, Operand6<TW const> const& w,
                  Operand6<TD> const& dst, bool load, WinoWeights const* wino = nullptr) {
  using namespace detail;
  if (L.winograd) return winograd_forward(L, r, src, w, dst, load, wino);
  auto const& D = L.dim;
  std::int64_t const cj = r.j1 - r.j0;
  std::size_t const Q = static_cast<std::size_t>(L.taps() * cj);
  std::int64_t const ow = r.hi[2] - r.lo[2];
  if (r.n1 <= r.n0 || ow <= 0 || r.hi[0] <= r.lo[0] || r.hi[1] <= r.lo[1] || Q == 0) return;
  // Rows of a 3-wide kernel with stride and dilation 1 in dimension 2 run as row blocks: steps (t0, t1, j, t2),
  // outer (t0, t1, j) x inner t2. Otherwise steps (t0, t1, t2, j), outer (t0, t1[, t2]) x inner ([t2,] j): the
  // taps of dimension 2 join the inner steps when they are consecutive in the box (no kernel dilation there).
  bool const rows_k = row_kernel(L);
  bool const join2 = !rows_k && D[2].b == 1;
  std::size_t const K = static_cast<std::size_t>(rows_k ? D[2].taps : join2 ? D[2].taps * cj : cj), T = Q / K;
  auto cols = conv_columns(r.g0, r.g1, r.c0, r.c1);
  ForwardScratch& fs = forward_scratch();
  if constexpr (std::is_same_v<TD, float>) {
    if (rows_k && std::all_of(cols.begin(), cols.end(), [&](ConvColumn const& c) { return row_column(c, dst, ow); })) {
      source_columns(L, r, src, dst, cols, fs.sidx);
      return forward_rows(L, r, src, w, dst, load, cols, {fs.sidx.data(), static_cast<std::size_t>(cj)});
    }
  }
  fs.toff.resize(T);
  std::ptrdiff_t const ds = dst.stride[3];
  std::int64_t const nrow = r.hi[1] - r.lo[1], n0s = r.hi[0] - r.lo[0];
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
        pack_weights(L, w, cols[c], r.j0, r.j1, dstw, rows_k);
        dstw += Q * cols[c].vectors * lanes;
      }
    }
    ConvColumn const& first = cols[c0];
    auto const XL = static_cast<std::int64_t>(first.xl);
    std::array<std::int64_t, 3> ext{(D[0].taps - 1) * D[0].b + 1, 0, (ow - 1) * D[2].a + (D[2].taps - 1) * D[2].b + 1};
    std::int64_t const strip = std::min(nrow, strip_rows(L, ext, static_cast<std::size_t>(cj * XL)));
    auto const rows_of = [&](std::int64_t n) { return (n - 1) * D[1].a + (D[1].taps - 1) * D[1].b + 1; };
    // One box layout, X[v0][v1][v2][j][XL] with room for a whole strip, for every strip.
    std::ptrdiff_t const xs2 = cj * XL, xs1 = xs2 * ext[2], xs0 = xs1 * rows_of(strip), box = xs0 * ext[0];
    std::ptrdiff_t const ks = rows_k ? xs2 : XL;
    {
      std::size_t t = 0;
      for (std::int64_t t0 = 0; t0 < D[0].taps; ++t0)
        for (std::int64_t t1 = 0; t1 < D[1].taps; ++t1)
          for (std::int64_t m = 0; m < (rows_k ? cj : join2 ? 1 : D[2].taps); ++m)
            fs.toff[t++] = t0 * D[0].b * xs0 + t1 * D[1].b * xs1 + (rows_k ? m * XL : m * D[2].b * xs2);
    }
    // Strips (n, o0, rows) in order, as many per pass as fit in about 192 KiB of boxes; the register blocks of a
    // pass run across row, strip and image ends.
    std::int64_t const per_o0 = (nrow + strip - 1) / strip, strips = (r.n1 - r.n0) * n0s * per_o0;
    std::int64_t const per_pass = std::max<std::int64_t>(1, ((192 << 10) / 4) / box);
    for (std::int64_t k0 = 0; k0 < strips; k0 += per_pass) {
      std::int64_t const k1 = std::min(strips, k0 + per_pass);
      float* xbuf = conv_scratch(2).get(static_cast<std::size_t>((k1 - k0) * box));
      fs.x.clear();
      fs.d.clear();
      for (std::int64_t k = k0; k < k1; ++k) {
        std::int64_t const s = r.lo[1] + (k % per_o0) * strip, s1 = std::min(r.hi[1], s + strip);
        std::int64_t const o0 = r.lo[0] + (k / per_o0) % n0s, n = r.n0 + k / per_o0 / n0s;
        float* x = xbuf + (k - k0) * box;
        ext[1] = rows_of(s1 - s);
        build_box(L, src, first, n, {o0 * D[0].a + D[0].c, s * D[1].a + D[1].c, r.lo[2] * D[2].a + D[2].c}, ext, r.j0,
                  r.j1, x, xs0);
        for (std::int64_t o1 = s; o1 < s1; ++o1) {
          float const* xr = x + (o1 - s) * D[1].a * xs1;
          std::ptrdiff_t d = dst.at(n, o0, o1, r.lo[2], first.g[0], first.c[0]) - dst.data;
          for (std::int64_t o2 = 0; o2 < ow; ++o2, xr += D[2].a * xs2, d += ds) {
            fs.x.push_back(xr);
            fs.d.push_back(d);
          }
        }
      }
      std::size_t const P = fs.x.size();
      float const* wc = wp;
      for (std::size_t c = c0; c < c1; ++c) {
        ConvColumn const& col = cols[c];
        std::size_t const VL = col.vectors * lanes;
        std::ptrdiff_t off[2 * lanes];
        std::size_t used = 0;
        bool const contiguous = lane_offsets(dst, col, off, used) && std::is_same_v<TD, float>;
        alignas(64) std::int32_t perm[lanes];
        bool const permuted = !contiguous && std::is_same_v<TD, float> && VL == lanes && lane_permutation(off, VL, perm);
        TD* const base = dst.data + (col.g[0] - first.g[0]) * dst.stride[4] + (col.c[0] - first.c[0]) * dst.stride[5];
        // Whole vectors of contiguous f32 results starting from zero are stored from the registers into their
        // rows of dst; otherwise they pass through accumulator rows.
        float* const* rows_out = nullptr;
        if (std::is_same_v<TD, float> && ((contiguous && used == VL) || permuted) && !load) {
          fs.rows.resize(P);
          for (std::size_t i = 0; i < P; ++i) fs.rows[i] = reinterpret_cast<float*>(base + fs.d[i]);
          rows_out = fs.rows.data();
        }
        float* accrow = rows_out ? nullptr : conv_scratch(1).get(P * VL);
        for (std::size_t i = 0; !rows_out && i < P; ++i) {  // initial values
          float* a = accrow + i * VL;
          if (!load) {
            std::memset(a, 0, VL * sizeof(float));
          } else {
            TD const* d = base + fs.d[i];
            load_lanes(a, d, off, VL);
          }
        }
        with_column(col, [&]<std::size_t VV, std::size_t XX>() {
          float* const acc0 = rows_out ? nullptr : accrow;
          std::int32_t const* const pm = rows_out && permuted ? perm : nullptr;
          auto const at = [&](std::size_t i0) { return rows_out ? rows_out + i0 : nullptr; };
          auto const acc_at = [&](std::size_t i0) { return acc0 ? acc0 + i0 * VL : nullptr; };
          // Blocks of nearly equal rows: no short block left over to run at the latency of a few chains.
          constexpr std::size_t RB = block_rows(VV);
          std::size_t const np = (P + RB - 1) / RB;
          for (std::size_t b = 0; b < np; ++b) {
            std::size_t const i0 = P * b / np, i1 = P * (b + 1) / np;
            // The next block's destination rows, for writing: each is a cache miss when dst is large (the stem's
            // output is 12.8 MB at batch 4), which a store would otherwise wait for at the block's end.
            std::size_t const nnext = rows_out && b + 1 < np ? P * (b + 2) / np - i1 : 0;
            with_rows<VV, XX>(i1 - i0, [&]<std::size_t RR, std::size_t V2, std::size_t X2>() {
              forward_block<RR, V2, X2>(T, K, fs.toff.data(), ks, wc, fs.x.data() + i0, acc_at(i0), at(i0), pm, at(i1), nnext);
            });
          }
        });
        for (std::size_t i = 0; !rows_out && i < P; ++i) store_lanes(base + fs.d[i], accrow + i * VL, off, VL, contiguous, used);
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
  GradientScratch& gs = gradient_scratch();
  auto &qoff = gs.qoff, &drow = gs.drow, &poff = gs.poff;
  qoff.resize(Q);
  drow.resize(Q);
  for (auto const& col : conv_columns(r.g0, r.g1, r.c0, r.c1)) {
    std::size_t const V = col.vectors, VL = V * lanes, XL = col.xl;
    std::ptrdiff_t doff[2 * lanes], yoff[2 * lanes];
    std::size_t dused = 0, yused = 0;
    bool const dcontig = lane_offsets(dst, col, doff, dused, 0) && std::is_same_v<TD, float>;
    bool const ycontig = lane_offsets(dy, col, yoff, yused) && std::is_same_v<TY, float>;
    // The accumulator rows (t, j) in dst, relative to the column's first: when they are the whole vectors of
    // consecutive rows VL floats apart (a column's lanes contiguous in an f32 destination), the kernel
    // accumulates in dst itself, with no copy in or out.
    TD* const d0 = dst.at(col.g[0], 0, 0, 0, r.j0, col.c[0]);
    // Row q = ((t0 * taps1 + t1) * taps2 + t2) * cj + j is at q * VL when each dimension's stride is the extent
    // of the ones inside it (a dimension of one element may have any stride).
    bool in_place = dcontig && dused == VL;
    std::int64_t const extent[5] = {1, D[0].taps, D[1].taps, D[2].taps, cj};
    auto inner = static_cast<std::ptrdiff_t>(VL);
    for (std::size_t d = 4; d >= 1; --d) {
      in_place = in_place && (extent[d] == 1 || dst.stride[d] == inner);
      inner *= extent[d];
    }
    if (!in_place) {
      std::size_t q = 0;
      for (std::int64_t t0 = 0; t0 < D[0].taps; ++t0)
        for (std::int64_t t1 = 0; t1 < D[1].taps; ++t1)
          for (std::int64_t t2 = 0; t2 < D[2].taps; ++t2)
            for (std::int64_t j = 0; j < cj; ++j, ++q)
              drow[q] = t0 * dst.stride[1] + t1 * dst.stride[2] + t2 * dst.stride[3] + j * dst.stride[4];
    }
    float* acc = nullptr;
    if constexpr (std::is_same_v<TD, float>) {
      if (in_place) acc = d0;
    }
    if (!acc) acc = conv_scratch(0).get(Q * VL);
    // An interleaved column reads a position's output gradients with one load and one permutation.
    alignas(64) std::int32_t yidx[lanes], unused[lanes];
    bool const yperm = !ycontig && std::is_same_v<TY, float> && VL == lanes && lane_permutation(yoff, VL, unused);
    for (std::size_t l = 0; yperm && l < lanes; ++l) yidx[l] = static_cast<std::int32_t>(yoff[l]);
    // Row blocks (a 3-wide kernel with stride and dilation 1 along the row, over whole rows of positions): blocks
    // of (t0, t1) x channels [j, j + nj) x the three taps along the row, when there are enough reduction channels
    // for the chains to cover the multiply-add latency (with fewer, say 2 channels x 3 taps, the GEMM-style
    // block, which reads positions through poff, is faster).
    auto const nj = static_cast<std::int64_t>(grad_row_channels(V));
    bool const row_blocks = row_kernel(L) && ow == D[2].out && r.lo[2] == 0 && ow >= 2 &&
                            std::min(cj, nj) >= std::min<std::int64_t>(nj, 4 / static_cast<std::int64_t>(V));
    // Without `load` the accumulators start from zero: row blocks start each from zero in registers the first
    // time a kernel runs it, and those no kernel ran are zeroed at the end; the GEMM-style blocks zero them all.
    std::int64_t const chunks_j = (cj + nj - 1) / nj;
    if (row_blocks) gs.touched.assign(static_cast<std::size_t>(D[0].taps * D[1].taps * chunks_j), load ? 1 : 0);
    auto const started = [&](std::int64_t t01, std::int64_t j) -> unsigned char& {
      return gs.touched[static_cast<std::size_t>(t01 * chunks_j + j / nj)];
    };
    if (!load) {
      if (!row_blocks) std::memset(acc, 0, Q * VL * sizeof(float));
    } else if (!in_place) {  // initial values from dst
      for (std::size_t q = 0; q < Q; ++q) load_lanes(acc + q * VL, d0 + drow[q], doff, VL);
    }
    bool const work = r.n1 > r.n0 && ow > 0 && r.hi[0] > r.lo[0] && r.hi[1] > r.lo[1];
    std::array<std::int64_t, 3> const ext{(D[0].taps - 1) * D[0].b + 1, 0, (ow - 1) * D[2].a + (D[2].taps - 1) * D[2].b + 1};
    std::int64_t const strip = strip_rows(L, ext, static_cast<std::size_t>(cj) * XL);
    // Broadcast columns of an f32 source with no input dilation read it in place when a row's padding is at most
    // its first and last input (as forward_rows does): the row blocks skip padded rows and those inputs.
    bool const direct = std::is_same_v<TS, float> && row_blocks && src.stride[5] == 1 && row_source_in_place(L, col, r.lo[2], r.hi[2]);
    // A strip's positions in row-major order, in chunks of whole output rows that pass through the accumulators
    // once: up to about 128 positions whose rows of the input box stay within about 32 KiB (L1).
    std::int64_t const box_row = ext[2] * cj * static_cast<std::int64_t>(XL) * 4;
    std::int64_t const chunk = std::clamp<std::int64_t>((32 << 10) / std::max<std::int64_t>(1, box_row) - (D[1].taps - 1) * D[1].b,
                                                        1, std::max<std::int64_t>(1, 128 / ow));
    float* yrow = work ? conv_scratch(1).get(static_cast<std::size_t>(std::min(strip, chunk) * ow) * VL) : nullptr;
    for (std::int64_t n = r.n0; work && n < r.n1; ++n)
      for (std::int64_t o0 = r.lo[0]; o0 < r.hi[0]; ++o0)
        for (std::int64_t s = r.lo[1]; s < r.hi[1]; s += strip) {
          std::int64_t const s1 = std::min(r.hi[1], s + strip);
          StripBox box{};
          if constexpr (std::is_same_v<TS, float>) {
            if (direct)
              box = {src.at(n, o0 * D[0].a + D[0].c, s * D[1].a + D[1].c, D[2].c, col.g[0], r.j0), src.stride[1], src.stride[2],
                     src.stride[3]};
          }
          if (!direct) box = build_strip(L, src, col, n, o0, s, s1, r.lo[2], ow, r.j0, r.j1, row_blocks ? nullptr : qoff.data());
          auto const [x, xs0, xs1, xs2] = box;
          for (std::int64_t c0 = s; c0 < s1; c0 += chunk) {
            std::int64_t const c1 = std::min(s1, c0 + chunk);
            auto const P = static_cast<std::size_t>((c1 - c0) * ow);
            if (!row_blocks) poff.resize(P);
            float* yo = yrow;
            for (std::int64_t o1 = c0, i = 0; o1 < c1; ++o1) {
              TY const* yp = dy.at(n, o0, o1, r.lo[2], col.g[0], col.c[0]);
              for (std::int64_t p = 0; p < ow; ++p, ++i, yp += dy.stride[3], yo += VL) {
                if (!row_blocks) poff[static_cast<std::size_t>(i)] = (o1 - s) * D[1].a * xs1 + p * D[2].a * xs2;
                if constexpr (std::is_same_v<TY, float>) {
                  if (yperm) {
                    permute_lanes(batch<float>::load_unaligned(yp), yidx).store_aligned(yo);
                    continue;
                  }
                  if (ycontig && yused == VL) {
                    copy_floats(yo, yp, VL);
                    continue;
                  }
                }
                load_lanes(yo, yp, yoff, VL);
              }
            }
            with_column(col, [&]<std::size_t VV, std::size_t XX>() {
              // Rows of inputs that are padding or dilation holes, and a row's first and last input when padding,
              // are skipped (as in forward_rows: the sums do not change).
              if (row_blocks) {
                bool const z0 = D[2].source(D[2].c) < 0, z1 = D[2].source(D[2].c + ow + 1) < 0;
                for (std::int64_t t01 = 0; t01 < D[0].taps * D[1].taps; ++t01) {
                  std::int64_t const t0 = t01 / D[1].taps, t1 = t01 % D[1].taps;
                  if (!D[0].reads(o0, t0)) continue;
                  auto const valid = [&](std::int64_t o1) { return D[1].reads(o1, t1); };
                  for (std::int64_t a = c0; a < c1;) {  // runs [a, b) of rows with inputs
                    if (!valid(a)) {
                      ++a;
                      continue;
                    }
                    std::int64_t b = a + 1;
                    while (b < c1 && valid(b)) ++b;
                    for (std::int64_t j = 0; j < cj; j += nj) {
                      std::size_t const q0 = static_cast<std::size_t>(t01 * 3 * cj + j);
                      unsigned char& begun = started(t01, j);
                      with_grad_channels<VV, XX>(static_cast<std::size_t>(std::min(nj, cj - j)), [&]<std::size_t RJ, std::size_t V2, std::size_t X2>() {
                        gradient_row_block<RJ, V2, X2>(static_cast<std::size_t>(b - a), static_cast<std::size_t>(ow),
                                                       yrow + (a - c0) * ow * static_cast<std::int64_t>(VL),
                                                       x + t0 * D[0].b * xs0 + t1 * D[1].b * xs1 + j * static_cast<std::ptrdiff_t>(XX) +
                                                           (a - s) * D[1].a * xs1,
                                                       D[1].a * xs1, xs2, acc + q0 * VL,
                                                       static_cast<std::ptrdiff_t>(cj * VL), z0, z1, !begun);
                      });
                      begun = 1;
                    }
                    a = b;
                  }
                }
                return;
              }
              constexpr std::size_t RB = block_rows(VV);
              for (std::size_t q0 = 0; q0 < Q; q0 += RB) {
                std::size_t const rows = std::min(RB, Q - q0);
                with_rows<VV, XX>(rows, [&]<std::size_t RR, std::size_t V2, std::size_t X2>() {
                  gradient_block<RR, V2, X2>(P, yrow, x, poff.data(), qoff.data() + q0, acc + q0 * VL);
                });
              }
            });
          }
        }
    if (row_blocks)  // the blocks no kernel started
      for (std::int64_t t01 = 0; t01 < D[0].taps * D[1].taps; ++t01)
        for (std::int64_t j = 0; j < cj; j += nj)
          if (!started(t01, j))
            for (std::int64_t k = 0; k < 3; ++k)
              std::memset(acc + (t01 * 3 * cj + k * cj + j) * static_cast<std::int64_t>(VL), 0,
                          static_cast<std::size_t>(std::min(nj, cj - j)) * VL * sizeof(float));
    if (!in_place)
      for (std::size_t q = 0; q < Q; ++q) store_lanes(d0 + drow[q], acc + q * VL, doff, VL, dcontig, dused);
  }
}

}  // namespace tilebsp::simd
