// The register blocks and prefetch distances of tilebsp's kernels, chosen per instruction set: one overload of
// isa::tuning per architecture tag (xsimd's), the most derived one for simd::arch taken by overload resolution,
// as for the primitives of simd/isa/. The kernels read simd::tuning; their results never depend on it (each
// element is the same chain of multiply-adds whatever the blocks), only their speed does.
#pragma once

#include <tilebsp/simd/arch.hpp>
#include <tilebsp/simd/isa/generic.hpp>

#include <xsimd/xsimd.hpp>

#include <cstddef>

namespace tilebsp::simd {

/// Register blocks (accumulators in registers, beside the operands a step loads) and prefetch distances. Arrays
/// indexed [V - 1] are per column width: one or two vectors of output channels.
struct Tuning {
  std::size_t registers;            ///< vector registers of the instruction set
  std::size_t gemm_mr;              ///< rows of the gemm micro-kernel (x two vectors of B columns)
  std::size_t gemm_ksum_mr;         ///< rows of gemm_ksum's block with its running sums in registers (0: none)
  std::size_t gemm_prefetch_k;      ///< rows of K ahead that the gemm prefetches a B read in place
  std::size_t conv_block_rows[2];   ///< output positions of the convolutions' forward_block
  std::size_t row_rows_min[2];      ///< output positions of a row_block (3-wide rows), at least ...
  std::size_t row_rows_max[2];      ///< ... and at most (0: no row blocks for that width)
  std::size_t grad_kernel_vectors[2];  ///< vectors per weight-gradient row kernel of a column of V vectors
  std::size_t grad_row_channels[2];    ///< reduction channels per weight-gradient row kernel of V vectors
  std::size_t wino_rows[2];         ///< Winograd tiles per GEMM block
};

namespace isa {

/// 16 vector registers (SSE, AVX): 6 x 2 gemm accumulators (and two B vectors and a broadcast); conv blocks of 8
/// one-vector or 6 two-vector rows; row blocks of 8 to 12 positions on one vector (3 weights and an input beside
/// them), none on two; weight-gradient rows of 3 channels x 3 taps on one vector.
template <class A>
constexpr Tuning tuning(requires_arch<xsimd::generic>) noexcept {
  return {16, 6, 0, 8, {8, 6}, {8, 0}, {12, 0}, {1, 2}, {3, 1}, {12, 6}};
}

/// AVX2 (16 registers of 8 lanes): as above, but a two-vector column's weight gradients run one vector at a time,
/// 4 channels x 3 taps (12 chains: 6, with one channel on two vectors, left the multiply-add latency showing: the
/// 7² ResNeXt weight update ran at half oneDNN's rate).
template <class A>
constexpr Tuning tuning(requires_arch<xsimd::avx2>) noexcept {
  return {16, 6, 0, 8, {8, 6}, {8, 0}, {12, 0}, {1, 1}, {4, 1}, {12, 6}};
}

/// AVX-512 (32 registers of 16 lanes): 12 x 2 gemm accumulators (against 8 x 2, 50176x64x96 and 12544x128x256 ran
/// 5-10% faster on Zen 5: fewer broadcasts of A per multiply-add), gemm_ksum's 6 x 2 beside 6 x 2 sums; conv
/// blocks of 12 rows; row blocks of 7 to 14 positions on one vector (7: the 7² depthwise layers' rows, 1,152
/// channels 3x3 at batch 4 in 106-111 us against 206-231 in register blocks over boxes), 6 to 12 on two;
/// weight-gradient rows of 8 / V channels on all of a column's vectors.
template <class A>
constexpr Tuning tuning(requires_arch<xsimd::avx512f>) noexcept {
  return {32, 12, 6, 8, {12, 12}, {7, 6}, {14, 12}, {1, 2}, {8, 4}, {14, 14}};
}

}  // namespace isa

/// The tuning of the instruction set the kernels are compiled for.
inline constexpr Tuning tuning = isa::tuning<arch>(arch{});

}  // namespace tilebsp::simd
