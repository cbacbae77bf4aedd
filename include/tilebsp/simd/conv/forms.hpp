// The direct convolution's forms, in one list: how simd/conv.hpp walks a block of a pass, and where it reads its
// inputs and weights and keeps its sums, each with the condition under which it applies (the loop's shape, the
// element types, the operands' layout on the tile, and the instruction set's register blocks in simd/tuning.hpp).
// conv_forward and conv_weight_gradient ask the functions below and do what they say; a tile's vertices and the
// host kernel call the same kernels, so they make the same choices. plan/conv_implementations.hpp lists the
// implementations above these (pointwise as matmul, Winograd, direct).
#pragma once

#include <tilebsp/simd/conv/blocks.hpp>
#include <tilebsp/simd/conv/box.hpp>
#include <tilebsp/simd/conv/columns.hpp>
#include <tilebsp/simd/conv_loop.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <string_view>
#include <type_traits>
#include <vector>

namespace tilebsp::simd {

/// How a direct pass walks its block.
enum class DirectForm : std::uint8_t { forward_rows, forward_blocks, gradient_rows, gradient_blocks, forward_depthwise };

/// A form or a placement, and when it applies.
struct DirectFormInfo {
  std::string_view name;
  std::string_view applies;  ///< the condition, as the function named in `chosen_by` checks it
  std::string_view kernel;   ///< what runs
  std::string_view chosen_by;
};

/// The forms, indexed by DirectForm. Every form runs on every instruction set; the register blocks and, where a
/// condition says so, whether a form applies come from simd/tuning.hpp for the build's instruction set.
inline constexpr std::array<DirectFormInfo, 5> direct_forms{{
    {"forward row blocks",
     "a forward-like pass of a 3-wide kernel with stride and dilation 1 along the row (dimension 2), f32 results, "
     "every column's lanes contiguous in dst or a permutation of one vector, and rows long enough for the "
     "instruction set's row blocks (tuning.row_rows_min / row_rows_max for the column's vectors; none for "
     "two-vector columns with 16 registers)",
     "forward_rows (simd/conv/rows.hpp), row_block (simd/conv/blocks.hpp): an input loaded once serves three "
     "neighbouring positions; sums go from the registers to dst",
     "detail::forward_form"},
    {"forward register blocks", "any other forward-like pass",
     "forward_block over an input box per strip: rows of positions x vectors of output channels", "detail::forward_form"},
    {"weight-gradient row blocks",
     "a 3-wide kernel with stride and dilation 1 along the row, the block spanning whole output rows of at least 2 "
     "positions, and enough reduction channels for the chains to cover the multiply-add latency: min(channels, "
     "tuning.grad_row_channels) >= min(tuning.grad_row_channels, 4 / vectors)",
     "gradient_row_block: the three taps along a row over whole rows of positions", "detail::gradient_column"},
    {"weight-gradient register blocks", "any other weight-gradient pass",
     "gradient_block: rows of (tap, channel) steps over the positions of a box", "detail::gradient_column"},
    {"forward depthwise blocks",
     "a forward-like pass over at least a vector of groups of one reduction and one output channel each, f32 "
     "operands, the groups consecutive in the source and the result, no input dilation, a stride in dimension 1 or "
     "2, and 32 vector registers (AVX-512): where the other forms measured slower",
     "depthwise_forward (simd/conv/depthwise.hpp): per output row, blocks of positions over every vector of groups, "
     "the source read where it lies; for 3- and 5-wide kernels at stride 1 or 2, each source vector of a row loaded "
     "once for every position it serves",
     "detail::depthwise_applies"},
}};

/// Where a form reads and writes, beside the default (inputs from a box built per strip, packed weights, sums in
/// accumulator rows copied to dst).
inline constexpr std::array<DirectFormInfo, 8> direct_placements{{
    {"source in place (forward row blocks)",
     "an f32 source, a broadcast column (or a source column: lanes over groups whose channels span one vector), no "
     "input dilation, and a row's padding at most its first and last input (which the row kernel skips)",
     "forward_rows reads src where it lies", "detail::forward_rows_source_in_place"},
    {"weights in place (forward row blocks)", "f32 weights whose column lanes are contiguous",
     "forward_rows reads w where it lies", "detail::forward_rows_weights_in_place"},
    {"source in place (forward register blocks)",
     "an f32 source, one reduction channel, no input dilation, and every column's lanes a whole vector of "
     "consecutive floats at each position (lanes over groups of one channel each: depthwise layers)",
     "forward_in_place (simd/conv/positions.hpp): strips of rows, each column in turn over a strip, reading src "
     "where it lies; positions whose taps read padding copy their steps into boxes of their own",
     "detail::forward_blocks_source_in_place"},
    {"source as the box (forward register blocks)",
     "an f32 source with unit channel stride, broadcast columns (a group's channels per position), and no tap of "
     "the block that reads padding or an input dilation hole",
     "forward_block reads each position's channels where they lie in src, with its strides: no unit of a channel "
     "split copies the inputs every other unit copies",
     "detail::box_in_place"},
    {"partials summed in the kernel (forward register blocks)",
     "a forward pass split into reduction parts of one serial step each, f32 partials, broadcast columns, and "
     "register blocks over boxes for the partials (the host kernel's plans)",
     "conv_forward_parts (simd/conv.hpp): one box over every part's channels, each part's register blocks adding "
     "their partial to the block's sums, which are scaled into dst",
     "conv_forward_parts"},
    {"sums from the registers (forward register blocks)",
     "f32 results not continued from dst whose column lanes are whole contiguous vectors or a permutation of one "
     "vector", "forward_block stores (permuted) results to dst", "detail::forward_block_results"},
    {"sums in dst (weight gradient)",
     "an f32 destination whose column lanes are contiguous and whose (tap, channel) rows are consecutive vectors",
     "the kernels accumulate in dst, with no copy in or out", "detail::gradient_column"},
    {"source in place (weight-gradient row blocks)",
     "row blocks, an f32 source with unit channel stride, as for forward row blocks, and positions that do not all "
     "fall into one set of the L1 cache (l1_sets > 1); with 4 sets or more and positions a line or more apart, each "
     "position's next row is prefetched a row ahead",
     "the row kernels read src where it lies", "detail::gradient_column"},
}};

/// The entry of `f` in direct_forms.
constexpr DirectFormInfo const& direct_form_info(DirectForm f) noexcept { return direct_forms[static_cast<std::size_t>(f)]; }

namespace detail {

/// The sets of the L1 data cache that f32 source positions `stride` floats apart fall into, a row of them competing
/// for those sets' 8 to 12 ways: 64 sets of 64-byte lines on the x86 cores we target (AMD's and Intel's), so 1 set
/// where positions are a multiple of 4 KiB apart (1,024 channels), 2 at 2 KiB, 4 at 1 KiB; 64 when they are not a
/// whole number of lines apart.
inline std::size_t l1_sets(std::ptrdiff_t stride) noexcept {
  std::size_t const bytes = static_cast<std::size_t>(std::abs(stride)) * sizeof(float);
  return bytes == 0 || bytes % 64 ? 64 : 64 / std::gcd<std::size_t>(bytes / 64, 64);
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

/// Whether forward row blocks can run column `col`: f32 results whose lanes are contiguous or a permutation of a
/// vector, and rows that split into blocks of the kernel's range.
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

/// The form of a forward-like block over columns `cols` writing `dst`, rows of `ow` positions.
template <class TD>
DirectForm forward_form(ConvLoop const& L, std::vector<ConvColumn> const& cols, Operand6<TD> const& dst, std::int64_t ow) {
  bool const rows = std::is_same_v<TD, float> && row_kernel(L) &&
                    std::all_of(cols.begin(), cols.end(), [&](ConvColumn const& c) { return row_column(c, dst, ow); });
  return rows ? DirectForm::forward_rows : DirectForm::forward_blocks;
}

/// Whether forward row blocks read the source of columns like `first` in place over positions [lo2, hi2).
template <class TS>
bool forward_rows_source_in_place(ConvLoop const& L, ConvColumn const& first, std::int64_t lo2, std::int64_t hi2) noexcept {
  return std::is_same_v<TS, float> && row_source_in_place(L, first, lo2, hi2);
}

/// Whether forward row blocks read column `col`'s weights in place (else they pack them).
template <class TW>
bool forward_rows_weights_in_place(Operand6<TW const> const& w, ConvColumn const& col) {
  std::ptrdiff_t off[2 * lanes];
  std::size_t used = 0;
  return std::is_same_v<TW, float> && lane_offsets(w, col, off, used, 0) && used == col.vectors * lanes;
}

}  // namespace detail

/// Whether forward register blocks reading the source in place (detail::forward_in_place) copy fewer inputs than
/// boxes would over the positions [lo, hi) of loop `L` (no input dilation). A strip's box copies about a1 x a2
/// source positions per output position (the strides), each a vector of a position's channels spread over the
/// tile's memory (64 of 384 bytes at 96 channels): at stride 2 the copy was most of the pass. In place, a position
/// next to padding copies its taps into a box of its own instead, so the positions next to padding, times the
/// taps, must not outnumber the box's copies: strided layers over large fields qualify, 5x5 stride-1 layers do not.
inline bool in_place_copies_fewer(ConvLoop const& L, std::array<std::int64_t, 3> const& lo, std::array<std::int64_t, 3> const& hi) noexcept {
  std::int64_t inside = 1, all = 1, box = 1;
  for (std::size_t k = 0; k < 3; ++k) {
    ConvDim const& d = L.dim[k];
    if (d.div != 1) return false;
    std::int64_t n = 0;  // positions whose taps all read the source (an interval)
    for (std::int64_t o = lo[k]; o < hi[k]; ++o) n += d.reads(o, 0) && d.reads(o, d.taps - 1);
    inside *= n, all *= hi[k] - lo[k], box *= d.a;
  }
  return (all - inside) * L.taps() <= box * all;
}

namespace detail {

/// Whether forward register blocks read the source in place (forward_in_place) for block `r` over columns `cols`:
/// an f32 source, one reduction channel, every column a whole vector of lanes at consecutive floats of a position,
/// and in_place_copies_fewer.
template <class TS>
bool forward_blocks_source_in_place(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src,
                                    std::vector<ConvColumn> const& cols) noexcept {
  if (!std::is_same_v<TS, float> || r.j1 - r.j0 != 1 || cols.empty() || !in_place_copies_fewer(L, r.lo, r.hi)) return false;
  return std::all_of(cols.begin(), cols.end(), [&](ConvColumn const& col) {
    if (col.bcast || col.xl != lanes || col.vectors != 1) return false;
    for (std::size_t l = 0; l < lanes; ++l)
      if (col.g[l] < 0 || (col.g[l] - col.g[0]) * src.stride[4] != static_cast<std::ptrdiff_t>(l)) return false;
    return true;
  });
}

/// Whether every column is a broadcast column (one group's channels, one input per step for all lanes).
inline bool broadcast_columns(std::vector<ConvColumn> const& cols) noexcept {
  return !cols.empty() && std::all_of(cols.begin(), cols.end(), [](ConvColumn const& c) { return c.bcast && c.xl == 1; });
}

/// Whether the register blocks over boxes of block `r` read their boxes from the source where it lies: broadcast
/// columns (each position's channels, as a box row holds them) of an f32 source with unit channel stride, and no
/// tap of the block that reads padding or an input dilation hole. Every column of a channel split would otherwise
/// copy the same inputs into a box of its own.
template <class TS>
bool box_in_place(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src,
                  std::vector<ConvColumn> const& cols) noexcept {
  if (!std::is_same_v<TS, float> || src.stride[5] != 1 || !broadcast_columns(cols)) return false;
  for (std::size_t k = 0; k < 3; ++k) {
    ConvDim const& d = L.dim[k];
    if (d.div != 1 || r.lo[k] * d.a + d.c < 0 || (r.hi[k] - 1) * d.a + d.c + (d.taps - 1) * d.b >= d.in) return false;
  }
  return true;
}

/// How forward register blocks write a column's sums: the lanes' offsets in dst (lane_offsets), whether they are
/// contiguous or (one vector) a permutation `perm`, and whether the sums go from the registers to dst.
struct BlockResults {
  std::ptrdiff_t off[2 * lanes];
  std::size_t used = 0;
  bool contiguous = false, permuted = false, from_registers = false;
  alignas(64) std::int32_t perm[lanes];
};

template <class TD>
BlockResults forward_block_results(Operand6<TD> const& dst, ConvColumn const& col, bool load) {
  BlockResults b;
  std::size_t const VL = col.vectors * lanes;
  b.contiguous = lane_offsets(dst, col, b.off, b.used) && std::is_same_v<TD, float>;
  b.permuted = !b.contiguous && std::is_same_v<TD, float> && VL == lanes && lane_permutation(b.off, VL, b.perm);
  b.from_registers = std::is_same_v<TD, float> && ((b.contiguous && b.used == VL) || b.permuted) && !load;
  return b;
}

/// A weight-gradient column's form and placements: the lanes' offsets in dst, the form, whether the sums
/// accumulate in dst, whether the row blocks read the source in place and prefetch its rows, and the reduction
/// channels of a row block (`nj`).
struct GradientColumn {
  std::ptrdiff_t doff[2 * lanes];
  std::size_t dused = 0;
  bool dcontig = false, in_place = false, source_in_place = false, prefetch_rows = false;
  DirectForm form = DirectForm::gradient_blocks;
  std::int64_t nj = 1;
};

/// The GradientColumn of column `col` in block `r` of loop `L`.
template <class TS, class TD>
GradientColumn gradient_column(ConvLoop const& L, ConvRange const& r, Operand6<TS const> const& src, Operand6<TD> const& dst,
                               ConvColumn const& col) {
  GradientColumn c;
  auto const& D = L.dim;
  std::size_t const V = col.vectors, VL = V * lanes;
  std::int64_t const cj = r.j1 - r.j0, ow = r.hi[2] - r.lo[2];
  c.dcontig = lane_offsets(dst, col, c.doff, c.dused, 0) && std::is_same_v<TD, float>;
  // Row q = ((t0 * taps1 + t1) * taps2 + t2) * cj + j is at q * VL when each dimension's stride is the extent of
  // the ones inside it (a dimension of one element may have any stride).
  c.in_place = c.dcontig && c.dused == VL;
  std::int64_t const extent[5] = {1, D[0].taps, D[1].taps, D[2].taps, cj};
  auto inner = static_cast<std::ptrdiff_t>(VL);
  for (std::size_t d = 4; d >= 1; --d) {
    c.in_place = c.in_place && (extent[d] == 1 || dst.stride[d] == inner);
    inner *= extent[d];
  }
  // Row blocks need enough reduction channels for their chains to cover the multiply-add latency (with fewer, say
  // 2 channels x 3 taps, the register blocks, which read positions through offsets, are faster).
  c.nj = static_cast<std::int64_t>(grad_row_channels(grad_kernel_vectors(V)));
  bool const rows = row_kernel(L) && ow == D[2].out && r.lo[2] == 0 && ow >= 2 &&
                    std::min(cj, c.nj) >= std::min<std::int64_t>(c.nj, 4 / static_cast<std::int64_t>(V));
  c.form = rows ? DirectForm::gradient_rows : DirectForm::gradient_blocks;
  // Not where the positions fall into one L1 set: the row kernels pass over a row once per kernel row, vector
  // (AVX2 runs a column's vectors one at a time) and chunk of reduction channels, and 8 ways cannot keep it
  // between passes; the box holds the same values contiguously (docs/04).
  std::size_t const sets = l1_sets(src.stride[3]);
  c.source_in_place = std::is_same_v<TS, float> && rows && src.stride[5] == 1 && sets > 1 &&
                      row_source_in_place(L, col, r.lo[2], r.hi[2]);
  // In place, positions a line or more apart over 4 sets or more (1 KiB apart at 28²) come from L2 on every pass
  // over their rows: the row kernel prefetches each position's next row a row ahead. Over 2 sets (2 KiB) the
  // prefetched row evicts the one still being passed over; positions less than a line apart, hardware
  // prefetchers follow.
  c.prefetch_rows = c.source_in_place && static_cast<std::size_t>(std::abs(src.stride[3])) * sizeof(float) >= 64 && sets >= 4;
  return c;
}

}  // namespace detail
}  // namespace tilebsp::simd
