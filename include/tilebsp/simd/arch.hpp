// The SIMD architecture tilebsp's kernels compile for, and f16 <-> f32 batch conversion.
#pragma once

#include <tilebsp/core/half.hpp>

#include <xsimd/xsimd.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

/// Put before a loop whose trip count is a template constant (a register block's rows, vectors or taps): it is
/// unrolled at every optimisation level. GCC unrolls such loops completely only from -O3 on, and a block whose
/// accumulators are indexed by a rolled loop lives in memory: the conv kernels ran 2.5x slower at -O2 without it
/// (the optimisation level of CMake's RelWithDebInfo and of many projects).
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

/// x * y + z rounded once wherever the target has FMA instructions. xsimd 8.1 implements fma for AVX-512 as
/// x * y + z, which GCC fuses only where it contracts (-O2 and above, -ffp-contract=fast): at -O1 the same code
/// gave other bits than at -O2, and than a kernel's explicit FMA. Elsewhere (no FMA: SSE, AVX) xsimd::fma.
inline batch<float> fma(batch<float> const& x, batch<float> const& y, batch<float> const& z) noexcept {
#if defined(__AVX512F__)
  return _mm512_fmadd_ps(x, y, z);
#elif defined(__FMA__) && defined(__AVX__)
  return _mm256_fmadd_ps(x, y, z);
#else
  return xsimd::fma(x, y, z);
#endif
}

/// Loads `lanes` halves as floats (F16C when the target has it).
inline batch<float> load_f16(half const* p) noexcept {
#if defined(__F16C__) && defined(__AVX512F__)
  static_assert(lanes == 16);
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<__m256i const*>(p)));
#elif defined(__F16C__) && defined(__AVX__)
  static_assert(lanes == 8);
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<__m128i const*>(p)));
#else
  alignas(64) float tmp[lanes];
  for (std::size_t i = 0; i < lanes; ++i) tmp[i] = p[i];
  return batch<float>::load_aligned(tmp);
#endif
}

/// Stores a batch of floats as halves, rounding to nearest even.
inline void store_f16(batch<float> const& x, half* p) noexcept {
#if defined(__F16C__) && defined(__AVX512F__)
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
#elif defined(__F16C__) && defined(__AVX__)
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
#else
  alignas(64) float tmp[lanes];
  x.store_aligned(tmp);
  for (std::size_t i = 0; i < lanes; ++i) p[i] = half(tmp[i]);
#endif
}

#if defined(__AVX2__) && !defined(__AVX512F__)
namespace detail {
/// The AVX2 mask of lanes [0, n) (n <= 8) for maskload/maskstore.
inline __m256i first_lanes(std::size_t n) noexcept {
  alignas(32) static constexpr std::int32_t ramp[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<__m256i const*>(ramp + 8 - n));
}
}  // namespace detail
#endif

/// Loads the first `n` (<= lanes) floats at p, zeros past them; never touches memory past p + n.
inline batch<float> load_partial(float const* p, std::size_t n) noexcept {
#if defined(__AVX512F__)
  static_assert(lanes == 16);
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), p);
#elif defined(__AVX2__)
  static_assert(lanes == 8);
  return _mm256_maskload_ps(p, detail::first_lanes(n));
#else
  alignas(64) float tmp[lanes] = {};
  for (std::size_t i = 0; i < n; ++i) tmp[i] = p[i];
  return batch<float>::load_aligned(tmp);
#endif
}

/// Stores the first `n` (<= lanes) floats of x at p; never touches memory past p + n.
inline void store_partial(batch<float> const& x, float* p, std::size_t n) noexcept {
#if defined(__AVX512F__)
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1u), x);
#elif defined(__AVX2__)
  _mm256_maskstore_ps(p, detail::first_lanes(n), x);
#else
  alignas(64) float tmp[lanes];
  x.store_aligned(tmp);
  for (std::size_t i = 0; i < n; ++i) p[i] = tmp[i];
#endif
}

/// Stores a 32-bit batch to aligned memory, bypassing the cache (for outputs too large to stay in it).
/// `p` must be aligned to the batch size.
template <class T>
void store_stream(batch<T> const& x, T* p) noexcept {
  static_assert(sizeof(T) == 4);
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) _mm512_stream_ps(p, x);
  else _mm512_stream_si512(reinterpret_cast<__m512i*>(p), x);
#elif defined(__AVX__)
  if constexpr (std::is_same_v<T, float>) _mm256_stream_ps(p, x);
  else _mm256_stream_si256(reinterpret_cast<__m256i*>(p), x);
#elif defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) _mm_stream_ps(p, x);
  else _mm_stream_si128(reinterpret_cast<__m128i*>(p), x);
#else
  x.store_aligned(p);
#endif
}
/// Orders streaming stores before later stores (call once after a run of store_stream).
inline void stream_fence() noexcept {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

/// Reinterprets the bits of a 32-bit integer batch as another 32-bit integer type.
template <class To, class From>
batch<To> reinterpret(batch<From> const& x) noexcept {
#if defined(__SSE2__)
  return batch<To>(x.data);  // x86 integer registers (__m128i, __m256i, __m512i) do not carry the element type
#else
  return xsimd::bitwise_cast<To>(x);
#endif
}

}  // namespace tilebsp::simd
