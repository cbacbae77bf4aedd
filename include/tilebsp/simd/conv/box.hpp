// Convolution kernels, their inputs: the virtual input box of a column (build_box, lane permutations), lane
// offsets into operands and the packed weights of a column.
#pragma once

#include <tilebsp/simd/conv/columns.hpp>

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

}  // namespace tilebsp::simd::detail
