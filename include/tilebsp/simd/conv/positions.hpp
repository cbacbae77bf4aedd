// Convolution kernels, forward register blocks over lists of output positions: one column over positions that
// each name where their inputs lie (forward_positions), and the pass that reads the source where it lies
// (forward_in_place) for columns of lanes over groups of one channel each, the depthwise layers' columns.
#pragma once

#include <tilebsp/simd/blocks.hpp>
#include <tilebsp/simd/conv/blocks.hpp>
#include <tilebsp/simd/conv/forms.hpp>
#include <tilebsp/simd/conv/rows.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace tilebsp::simd::detail {

/// Column `col` (its weights packed at wc, T x K steps) over P output positions: position i's step (t, k) reads
/// x[i] + toff[t] + k * ks, and its results go to base + d[i] (elements of dst), from the registers where
/// forward_block_results allows, else through accumulator rows; with `load`, the chains continue from dst.
template <class TD>
void forward_positions(ConvColumn const& col, std::size_t P, float const* const* x, std::ptrdiff_t const* d, std::size_t T,
                       std::size_t K, std::ptrdiff_t const* toff, std::ptrdiff_t ks, float const* wc, Operand6<TD> const& dst,
                       TD* base, bool load) {
  if (P == 0) return;
  ForwardScratch& fs = forward_scratch();
  std::size_t const VL = col.vectors * lanes;
  BlockResults const res = forward_block_results(dst, col, load);
  std::ptrdiff_t const* const off = res.off;
  // Sums go from the registers into their rows of dst, or pass through accumulator rows.
  float* const* rows_out = nullptr;
  if (res.from_registers) {
    fs.rows.resize(P);
    for (std::size_t i = 0; i < P; ++i) fs.rows[i] = reinterpret_cast<float*>(base + d[i]);
    rows_out = fs.rows.data();
  }
  float* accrow = rows_out ? nullptr : conv_scratch(1).get(P * VL);
  for (std::size_t i = 0; !rows_out && i < P; ++i) {  // initial values
    float* a = accrow + i * VL;
    if (!load) std::memset(a, 0, VL * sizeof(float));
    else load_lanes(a, base + d[i], off, VL);
  }
  with_column(col, [&]<std::size_t VV, std::size_t XX>() {
    std::int32_t const* const pm = rows_out && res.permuted ? res.perm : nullptr;
    auto const at = [&](std::size_t i0) { return rows_out ? rows_out + i0 : nullptr; };
    auto const acc_at = [&](std::size_t i0) { return accrow ? accrow + i0 * VL : nullptr; };
    // Blocks of nearly equal rows: no short block left over to run at the latency of a few chains.
    constexpr std::size_t RB = block_rows(VV);
    std::size_t const np = (P + RB - 1) / RB;
    for (std::size_t b = 0; b < np; ++b) {
      std::size_t const i0 = P * b / np, i1 = P * (b + 1) / np;
      // The next block's destination rows, for writing: each is a cache miss when dst is large (the stem's output
      // is 12.8 MB at batch 4), which a store would otherwise wait for at the block's end.
      std::size_t const nnext = rows_out && b + 1 < np ? P * (b + 2) / np - i1 : 0;
      with_rows<VV, XX>(i1 - i0, [&]<std::size_t RR, std::size_t V2, std::size_t X2>() {
        forward_block<RR, V2, X2>(T, K, toff, ks, wc, x + i0, acc_at(i0), at(i0), pm, at(i1), nnext);
      });
    }
  });
  for (std::size_t i = 0; !rows_out && i < P; ++i) store_lanes(base + d[i], accrow + i * VL, off, VL, res.contiguous, res.used);
}

/// conv_forward's register blocks for columns that all read the source in place (forward_blocks_source_in_place):
/// strips of output rows whose source rows, over all the columns, stay within Blocks::conv_box; each column in
/// turn over a strip, its positions whose taps all read the source straight from it, the others (padding) from
/// boxes of their own steps. The steps run (t0, t1) x t2 either way, as the box form's do (one reduction channel).
template <class TS, class TW, class TD>
void forward_in_place(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, Operand6<TW const> const& w,
                      Operand6<TD> const& dst, bool load, std::vector<ConvColumn> const& cols) {
  if constexpr (std::is_same_v<TS, float>) {
    auto const& D = L.dim;
    std::int64_t const ow = r.hi[2] - r.lo[2], nrow = r.hi[1] - r.lo[1];
    auto const K = static_cast<std::size_t>(D[2].taps), T = static_cast<std::size_t>(D[0].taps * D[1].taps), Q = T * K;
    ForwardScratch& fs = forward_scratch();
    fs.toff.resize(T);
    fs.tcol.resize(T);
    fs.trow.resize(T);
    for (std::int64_t t0 = 0, t = 0; t0 < D[0].taps; ++t0)
      for (std::int64_t t1 = 0; t1 < D[1].taps; ++t1, ++t) {
        fs.toff[static_cast<std::size_t>(t)] = t0 * D[0].b * src.stride[1] + t1 * D[1].b * src.stride[2];
        fs.trow[static_cast<std::size_t>(t)] = t * static_cast<std::ptrdiff_t>(K * lanes);  // in a position's box
      }
    std::ptrdiff_t const ks = D[2].b * src.stride[3];
    float* const wp = conv_scratch(0).get(cols.size() * Q * lanes);
    for (std::size_t c = 0; c < cols.size(); ++c) pack_weights(L, w, cols[c], r.j0, r.j1, wp + c * Q * lanes, false);
    std::array<std::int64_t, 3> const ext{(D[0].taps - 1) * D[0].b + 1, 0, (ow - 1) * D[2].a + (D[2].taps - 1) * D[2].b + 1};
    // At least 32 positions per strip, or the register blocks run in short lists (2 of 12 positions).
    std::int64_t const strip = std::min(nrow, std::max(strip_rows(L, ext, cols.size() * lanes), (32 + ow - 1) / ow));
    ConvColumn const& first = cols.front();
    auto const inside2 = [&](std::int64_t o2) { return D[2].reads(o2, 0) && D[2].reads(o2, D[2].taps - 1); };
    for (std::int64_t n = r.n0; n < r.n1; ++n)
      for (std::int64_t o0 = r.lo[0]; o0 < r.hi[0]; ++o0)
        for (std::int64_t s = r.lo[1]; s < r.hi[1]; s += strip) {
          std::int64_t const s1 = std::min(r.hi[1], s + strip);
          fs.x.clear(), fs.d.clear(), fs.bpos.clear(), fs.db.clear();
          for (std::int64_t o1 = s; o1 < s1; ++o1) {
            bool const rows = all_rows_valid(L, o0, o1);
            std::ptrdiff_t d = dst.at(n, o0, o1, r.lo[2], first.g[0], first.c[0]) - dst.data;
            for (std::int64_t o2 = r.lo[2]; o2 < r.hi[2]; ++o2, d += dst.stride[3]) {
              if (rows && inside2(o2)) {
                fs.x.push_back(src.at(n, o0 * D[0].a + D[0].c, o1 * D[1].a + D[1].c, o2 * D[2].a + D[2].c, first.g[0], r.j0));
                fs.d.push_back(d);
              } else {
                fs.bpos.push_back({o1, o2});
                fs.db.push_back(d);
              }
            }
          }
          for (std::size_t c = 0; c < cols.size(); ++c) {
            ConvColumn const& col = cols[c];
            TD* const base = dst.data + (col.g[0] - first.g[0]) * dst.stride[4] + (col.c[0] - first.c[0]) * dst.stride[5];
            std::ptrdiff_t const go = (col.g[0] - first.g[0]) * src.stride[4];
            for (std::size_t t = 0; t < T; ++t) fs.tcol[t] = fs.toff[t] + go;
            float const* const wc = wp + c * Q * lanes;
            forward_positions(col, fs.x.size(), fs.x.data(), fs.d.data(), T, K, fs.tcol.data(), ks, wc, dst, base, load);
            if (fs.bpos.empty()) continue;
            // The positions next to padding: their steps copied into a box each, zeros for padding.
            float* const box = conv_scratch(2).get(fs.bpos.size() * Q * lanes);
            fs.xb.resize(fs.bpos.size());
            for (std::size_t i = 0; i < fs.bpos.size(); ++i) {
              float* o = box + i * Q * lanes;
              fs.xb[i] = o;
              std::int64_t const o1 = fs.bpos[i][0], o2 = fs.bpos[i][1];
              for (std::int64_t t0 = 0; t0 < D[0].taps; ++t0)
                for (std::int64_t t1 = 0; t1 < D[1].taps; ++t1) {
                  std::int64_t const v0 = D[0].source(o0 * D[0].a + t0 * D[0].b + D[0].c);
                  std::int64_t const v1 = v0 < 0 ? -1 : D[1].source(o1 * D[1].a + t1 * D[1].b + D[1].c);
                  float const* const row = v1 < 0 ? nullptr : src.at(n, v0, v1, 0, col.g[0], r.j0);
                  for (std::int64_t t2 = 0, v2 = o2 * D[2].a + D[2].c; t2 < D[2].taps; ++t2, v2 += D[2].b, o += lanes) {
                    if (row && v2 >= 0 && v2 < D[2].in) batch<float>::load_unaligned(row + v2 * src.stride[3]).store_unaligned(o);
                    else batch<float>(0.0f).store_unaligned(o);
                  }
                }
            }
            forward_positions(col, fs.bpos.size(), fs.xb.data(), fs.db.data(), T, K, fs.trow.data(), lanes, wc, dst, base, load);
          }
        }
  }
}

}  // namespace tilebsp::simd::detail
