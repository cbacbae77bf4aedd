// The operators' kernels in use, and how the compiled library chooses them when the program starts (docs/11).
//
// Header-only, the operators' kernels are compiled in the caller's files for the caller's -march, and these
// functions name that instruction set. The compiled library (tilebsp::compiled) holds one set of kernels per
// instruction-set level it was built for (TILEBSP_KERNEL_ISAS: generic x86-64, AVX2 + FMA, AVX-512) and its entry
// points (ops::conv, ops::matmul, ...) forward to the best set this CPU runs, capped by the environment variable
// TILEBSP_ISA=avx512|avx2|generic.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/ops/conv.hpp>
#include <tilebsp/ops/loss.hpp>
#include <tilebsp/ops/map.hpp>
#include <tilebsp/ops/matmul.hpp>
#include <tilebsp/ops/pool.hpp>
#include <tilebsp/ops/reduce.hpp>
#include <tilebsp/simd/arch.hpp>

#include <cstdint>
#include <string_view>

namespace tilebsp::ops {

namespace detail {

/// The instruction-set level a file's kernels are compiled for: "avx512" (AVX-512 F, BW, DQ and VL), "avx2"
/// (AVX2 with FMA), else "generic".
constexpr char const* compiled_level() noexcept {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
  return "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
  return "avx2";
#else
  return "generic";
#endif
}

/// One instruction set's kernels in the compiled library: a pointer to each entry point's instance built for it.
#define TILEBSP_DETAIL_TABLE_MEMBER(R, NAME, PARAMS) R(*NAME) PARAMS;
struct KernelTable {
  std::uint32_t size;  ///< sizeof(KernelTable) where the table was built: the entry points and the kernels agree
  char const* level;   ///< "avx512", "avx2" or "generic"
  char const* isa;     ///< as xsimd names it (simd::isa_name() in the kernels' files)
  TILEBSP_OPS_ALL_INSTANCES(TILEBSP_DETAIL_TABLE_MEMBER)
};
#undef TILEBSP_DETAIL_TABLE_MEMBER

#ifdef TILEBSP_COMPILED
/// The kernels the library's entry points use, chosen on the first call by choose_kernels(getenv("TILEBSP_ISA")).
KernelTable const& kernels();
/// The best set of kernels the library holds that this CPU runs, no higher than `cap` ("avx512", "avx2",
/// "generic"; null or empty: no cap). Throws option_error for another value, for a cap above what the CPU runs, and
/// where the library holds no set at or below the cap.
KernelTable const& choose_kernels(char const* cap);
#endif

}  // namespace detail

#ifdef TILEBSP_COMPILED
/// The instruction-set level of the operators' kernels in use: "avx512", "avx2" or "generic" (TILEBSP_ISA's
/// values). Throws option_error where TILEBSP_ISA asks for what cannot run.
std::string_view kernels_level();
/// The instruction set of the operators' kernels in use, as xsimd names it ("avx512bw", "fma3+avx2", "sse2").
std::string_view kernels_isa();
#else
inline std::string_view kernels_level() noexcept { return detail::compiled_level(); }
inline std::string_view kernels_isa() noexcept { return simd::isa_name(); }
#endif

}  // namespace tilebsp::ops

// The compiled library's sets of kernels (src/kernels/table.cpp); only those it was built with are defined.
extern "C" {
extern tilebsp::ops::detail::KernelTable const tilebsp_kernels_avx512;
extern tilebsp::ops::detail::KernelTable const tilebsp_kernels_avx2;
extern tilebsp::ops::detail::KernelTable const tilebsp_kernels_generic;
}
