// A program whose kernels were compiled for instructions the CPU lacks (built with -march=native on an AVX-512
// host, run on an AVX2 one) would die of SIGILL somewhere in a kernel. Instead, every file that includes the
// kernels carries a start-up check, for the instruction set it was compiled for, that runs before any static
// constructor of the program (priority 101) and stops it with a message naming what is missing. The check itself
// is compiled for baseline x86-64 and calls only the C library, so that it runs on any x86-64 CPU. One check per
// instruction-set level (its own function name), so that files built for different levels each keep theirs.
#pragma once

// The compiled library's sets of kernels (TILEBSP_KERNELS_VARIANT) have none: the library runs only the set this CPU
// supports (<tilebsp/ops/kernels.hpp>), and a set's start-up check would stop every program on a CPU without it.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(TILEBSP_KERNELS_VARIANT)

#include <cstdio>
#include <cstdlib>

namespace tilebsp::simd::detail {

/// Prints what the kernels need and the CPU lacks, and exits with status 1.
[[gnu::target("arch=x86-64"), gnu::cold, noreturn]] inline void cpu_lacks(char const* built_for, char const* feature) noexcept {
  std::fprintf(stderr,
               "tilebsp: this program's kernels were compiled for %s (its -march), but this CPU has no %s; build it "
               "for this CPU (for example with -march=native here, or with no -march)\n",
               built_for, feature);
  std::_Exit(1);
}

#define TILEBSP_REQUIRE_CPU(built_for, feature) \
  if (!__builtin_cpu_supports(feature)) cpu_lacks(built_for, feature)

#if defined(__AVX512F__)
[[gnu::constructor(101), gnu::target("arch=x86-64")]] inline void check_cpu_avx512() noexcept {
  __builtin_cpu_init();
  TILEBSP_REQUIRE_CPU("AVX-512", "avx512f");
#if defined(__AVX512BW__)
  TILEBSP_REQUIRE_CPU("AVX-512", "avx512bw");
#endif
#if defined(__AVX512DQ__)
  TILEBSP_REQUIRE_CPU("AVX-512", "avx512dq");
#endif
#if defined(__AVX512VL__)
  TILEBSP_REQUIRE_CPU("AVX-512", "avx512vl");
#endif
  TILEBSP_REQUIRE_CPU("AVX-512", "avx2");
#if defined(__FMA__)
  TILEBSP_REQUIRE_CPU("AVX-512", "fma");
#endif
}
#elif defined(__AVX2__)
[[gnu::constructor(101), gnu::target("arch=x86-64")]] inline void check_cpu_avx2() noexcept {
  __builtin_cpu_init();
  TILEBSP_REQUIRE_CPU("AVX2", "avx2");
#if defined(__FMA__)
  TILEBSP_REQUIRE_CPU("AVX2", "fma");
#endif
}
#elif defined(__AVX__)
[[gnu::constructor(101), gnu::target("arch=x86-64")]] inline void check_cpu_avx() noexcept {
  __builtin_cpu_init();
  TILEBSP_REQUIRE_CPU("AVX", "avx");
}
#endif

#undef TILEBSP_REQUIRE_CPU

}  // namespace tilebsp::simd::detail

#endif
