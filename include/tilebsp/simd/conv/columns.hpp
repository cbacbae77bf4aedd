// Convolution kernels, their columns: how output channels of groups [g0, g1) map onto vector lanes (ConvColumn,
// conv_columns) and the per-thread scratch lists of the passes.
#pragma once

#include <tilebsp/core/half.hpp>
#include <tilebsp/simd/arch.hpp>
#include <tilebsp/simd/conv_loop.hpp>
#include <tilebsp/simd/gemm.hpp>

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
  /// forward_in_place: a column's step offsets in the source, and the positions read from boxes of their own
  /// (output positions (o1, o2), their boxes and destinations).
  std::vector<std::ptrdiff_t> tcol, db;
  std::vector<std::array<std::int64_t, 2>> bpos;
  std::vector<float const*> xb;
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

}  // namespace tilebsp::simd::detail
