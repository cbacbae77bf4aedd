// The SIMD architecture tilebsp's kernels compile for, and the primitives they use beyond xsimd (fused multiply-add,
// f16 <-> f32, partial and streaming loads and stores), each dispatched on the architecture tag to simd/isa/.
#pragma once

#include <tilebsp/core/half.hpp>
#include <tilebsp/simd/isa/cpu_check.hpp>
#include <tilebsp/simd/isa/generic.hpp>
#include <tilebsp/simd/isa/x86.hpp>

#include <xsimd/xsimd.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

/// Put before a loop whose trip count is a template constant (a register block's rows, vectors or taps): it is
/// unrolled at every optimisation level. GCC unrolls such loops completely only from -O3 on, and a block whose
/// accumulators are indexed by a rolled loop lives in memory: the conv kernels ran several times slower at -O2
/// without it (the optimisation level of CMake's RelWithDebInfo and of many projects).
#define TILEBSP_UNROLL _Pragma("GCC unroll 64")

namespace tilebsp::simd {

/// The best instruction set enabled at compile time (AVX-512 with -march=native on this machine; SSE2 on a
/// plain x86-64 build). Kernels are instantiated for this one architecture.
using arch = xsimd::default_arch;
template <class T>
using batch = xsimd::batch<T, arch>;
using mask = xsimd::batch_bool<float, arch>;
/// Lanes of a 32-bit batch.
inline constexpr std::size_t lanes = batch<float>::size;

/// The instruction set the kernels were compiled for, as xsimd names it ("avx512bw", "fma3+avx2", "sse2", ...).
constexpr char const* isa_name() noexcept { return arch::name(); }

/// x * y + z rounded once wherever the target has FMA instructions. xsimd 8.1 implements fma for AVX-512 as
/// x * y + z, which GCC fuses only where it contracts (-O2 and above, -ffp-contract=fast): at -O1 the same code
/// gave other bits than at -O2, and than a kernel's explicit FMA. Elsewhere (no FMA: SSE, AVX) xsimd::fma.
inline batch<float> fma(batch<float> const& x, batch<float> const& y, batch<float> const& z) noexcept {
  return isa::fma<arch>(x, y, z, arch{});
}

/// e^x lane by lane, within 2 ulp (simd/isa/: one vscalefps for the power of two on AVX-512).
inline batch<float> exp(batch<float> const& x) noexcept { return isa::exp<arch>(x, arch{}); }

/// 1 / (1 + e^-x) lane by lane: the expressions' sigmoid (expr/eval.hpp) and the SiLU post-op (simd::silu), one
/// formula so that the two keep the same bits. Inlined: a call from a kernel's store loop would spill its register
/// block (every vector register is caller-saved).
[[gnu::always_inline]] inline batch<float> sigmoid(batch<float> const& x) noexcept {
  return batch<float>(1.0f) / (batch<float>(1.0f) + exp(-x));
}

/// acc += a * b with all three in vector registers where the target has a form that guarantees it (AVX-512: GCC
/// 12 otherwise keeps b in memory in large register blocks); elsewhere simd::fma.
[[gnu::always_inline]] inline void fma_in_registers(batch<float>& acc, batch<float> const& a,
                                                    batch<float> const& b) noexcept {
  if (!isa::fma_in_registers<arch>(acc, a, b, arch{})) acc = fma(a, b, acc);
}

/// Keeps v's value in a vector register at this point: the compiler then loads it once instead of folding the load
/// into each use (a compiler barrier on it; nothing without SSE2).
[[gnu::always_inline]] inline void in_register(batch<float>& v) noexcept { isa::in_register<arch>(v, arch{}); }

/// Loads `lanes` halves as floats (F16C when the target has it).
inline batch<float> load_f16(half const* p) noexcept { return isa::load_f16<arch>(p, arch{}); }

/// Stores a batch of floats as halves, rounding to nearest even.
inline void store_f16(batch<float> const& x, half* p) noexcept { isa::store_f16<arch>(x, p, arch{}); }

/// Loads the first `n` (<= lanes) floats at p, zeros past them; never touches memory past p + n.
inline batch<float> load_partial(float const* p, std::size_t n) noexcept { return isa::load_partial<arch>(p, n, arch{}); }

/// Stores the first `n` (<= lanes) floats of x at p; never touches memory past p + n.
inline void store_partial(batch<float> const& x, float* p, std::size_t n) noexcept {
  isa::store_partial<arch>(x, p, n, arch{});
}

/// Stores a 32-bit batch to aligned memory, bypassing the cache (for outputs too large to stay in it).
/// `p` must be aligned to the batch size.
template <class T>
void store_stream(batch<T> const& x, T* p) noexcept {
  static_assert(sizeof(T) == 4);
  isa::store_stream<arch, T>(x, p, arch{});
}
/// Orders streaming stores before later stores (call once after a run of store_stream).
inline void stream_fence() noexcept { isa::stream_fence<arch>(arch{}); }

/// Reinterprets the bits of a 32-bit integer batch as another 32-bit integer type.
template <class To, class From>
batch<To> reinterpret(batch<From> const& x) noexcept {
  return isa::reinterpret<To, arch, From>(x, arch{});
}

}  // namespace tilebsp::simd
