// The kernels' cache blocks, derived from the host's caches (core/caches.hpp: detected, or TILEBSP_CACHE_SIZES):
// what a gemm keeps in L2 and L3, what a convolution's boxes and packed weights keep in L2, and what a pass over
// rows keeps in L1. Each is a fraction of its cache that gives the blocks tuned on a Zen 4 core (32K L1d, 1M L2).
// Blocks change the order in which independent outputs are computed, never the chain of multiply-adds of one
// output: results are bitwise the same under any cache sizes (tests/simd/test_blocks.cpp).
#pragma once

#include <tilebsp/core/caches.hpp>
#include <tilebsp/simd/tuning.hpp>

#include <algorithm>
#include <cstddef>

namespace tilebsp::simd {

/// Rows of K per cache block of a gemm. Fixed rather than derived: a K block is a chain of multiply-adds that
/// starts from zero (its sum then joins C's), so it is part of what a product computes, and an executable gives the
/// same bits on hosts of any caches. An MR x KC micro-panel of A is 12K (AVX2) to 16K (AVX-512), within every
/// x86 L1d; a KC x NR panel of B, 32K to 64K, streams from L2.
inline constexpr std::size_t gemm_kc = 512;

/// The cache blocks for caches of sizes c.
struct Blocks {
  std::size_t gemm_mc;     ///< rows of A per L2 block of a gemm: MC x KC floats within 3/16 of L2 (96 at 1M, 48 at 512K)
  std::size_t gemm_nc;     ///< columns of B packed per block: KC x NC floats within a quarter of L3
  std::size_t conv_box;    ///< bytes of input boxes a convolution pass keeps in L2: 3/16 of it (192K at 1M)
  std::size_t conv_weights;  ///< bytes of packed weights a batch of convolution columns shares: a quarter of L2
  std::size_t l1;          ///< bytes a pass over rows keeps in L1 (the convolutions' row chunks, Winograd's batches)
  std::size_t epilogue;    ///< bytes of a result a host task hands its epilogue at once, still in L2: a quarter of it
};

constexpr Blocks blocks_for(CacheSizes const& c) noexcept {
  std::size_t const mr = tuning.gemm_mr, nr = 2 * lanes;
  std::size_t const mc = c.l2 * 3 / 16 / (gemm_kc * sizeof(float)) / mr * mr;
  std::size_t const nc = c.l3 / 4 / (gemm_kc * sizeof(float)) / nr * nr;
  return {std::clamp<std::size_t>(mc, mr, 1024 / mr * mr), std::max<std::size_t>(nc, 4 * nr), std::max<std::size_t>(c.l2 * 3 / 16, 4096),
          std::max<std::size_t>(c.l2 / 4, 4096), std::max<std::size_t>(c.l1d, 4096), std::max<std::size_t>(c.l2 / 4, 4096)};
}

/// The blocks for the caches in force (TILEBSP_CACHE_SIZES or detected).
inline Blocks blocks() noexcept { return blocks_for(core::detail::blocking_cache_sizes()); }

}  // namespace tilebsp::simd
