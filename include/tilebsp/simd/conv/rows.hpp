// Convolution kernels, their strips: the input box of a strip of output positions and the forward pass over
// rows of 3-wide kernels (forward_rows), reading the source in place where it can.
#pragma once

#include <tilebsp/simd/blocks.hpp>
#include <tilebsp/simd/conv/blocks.hpp>
#include <tilebsp/simd/conv/forms.hpp>

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

/// Output positions of dimension 1 per box, so that a box stays within Blocks::conv_box (3/16 of L2).
inline std::int64_t strip_rows(ConvLoop const& L, std::array<std::int64_t, 3> const& ext_other, std::size_t row_floats) {
  std::int64_t const per_v1 = ext_other[0] * ext_other[2] * static_cast<std::int64_t>(row_floats);
  std::int64_t const budget = static_cast<std::int64_t>(blocks().conv_box / sizeof(float));
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

/// Whether forward_rows applies a post-op to every column of `cols` as it stores: all have whole, contiguous lanes.
template <class TD>
bool forward_rows_post(Operand6<TD> const& dst, std::vector<ConvColumn> const& cols) {
  std::ptrdiff_t off[2 * lanes];
  std::size_t used = 0;
  return std::all_of(cols.begin(), cols.end(), [&](ConvColumn const& col) {
    return lane_offsets(dst, col, off, used) && used == col.vectors * lanes;
  });
}

/// conv_forward for a 3-wide kernel with stride and dilation 1 in dimension 2 (steps (t0, t1, j, t2)) whose
/// columns all pass row_column: strip by strip, one box each (or the source read in place), output rows in blocks
/// of row_block, results straight from the registers to dst; weights read in place where a column's lanes are
/// contiguous f32 there, else packed. With `post`, where no column's lanes are permuted (forward_rows_post), each
/// result gets it as row_block stores it, bias[channel] for channel g * dst.stride[4] + c * dst.stride[5] (the
/// channels of a channels-last result).
template <class TS, class TW>
void forward_rows(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, Operand6<TW const> const& w,
                  Operand6<float> const& dst, bool load, std::vector<ConvColumn> const& cols, SourceSteps const& sl,
                  PostOp const* post = nullptr) {
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
    // In place (simd/conv/forms.hpp), padded rows are skipped below, and the padding of a row is at most its first
    // and last input, which row_block skips.
    bool const direct = forward_rows_source_in_place<TS>(L, first, r.lo[2], r.hi[2]);
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
      std::size_t const VL = cols[c].vectors * lanes;
      if (forward_rows_weights_in_place(w, cols[c])) {
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
            PostOp col_post{nullptr};
            if (post) col_post = *post, col_post.bias += col.g[0] * dst.stride[4] + col.c[0] * dst.stride[5];
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
                                            permuted ? gather : nullptr, load, z0, z1, sl, post ? &col_post : nullptr);
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

}  // namespace tilebsp::simd::detail
