// tilebsp's ISA primitives in x86 instructions: overloads on xsimd's architecture tags (SSE2, AVX, AVX2 and FMA,
// AVX-512), each compiled only where the target enables its instruction set. The portable forms are in
// simd/isa/generic.hpp; overload resolution on the tag picks the most specific one for simd::arch.
#pragma once

#include <tilebsp/core/half.hpp>
#include <tilebsp/simd/isa/generic.hpp>

#include <xsimd/xsimd.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
// The intrinsics of the enabled instruction sets only: <immintrin.h> declares every x86 extension and takes
// longer to parse than xsimd itself (0.45 s with GCC 12), which a plain x86-64 build (SSE2) does not need.
#if XSIMD_WITH_AVX
#include <immintrin.h>
#elif XSIMD_WITH_SSE2
#include <emmintrin.h>
#endif

namespace tilebsp::simd::isa {

#if XSIMD_WITH_SSE2
/// An empty asm that names a copy of v's register as its operand: GCC must then hold the value in a vector
/// register there (on the batch's member itself GCC 12 also stored each vector to the stack on every step).
template <class A>
[[gnu::always_inline]] inline void in_register(fbatch<A>& v, requires_arch<xsimd::sse2>) noexcept {
  auto r = v.data;
  asm("" : "+v"(r));
  v = fbatch<A>(r);
}
template <class A, class T>
[[gnu::always_inline]] inline void store_stream(xsimd::batch<T, A> const& x, T* p,
                                                requires_arch<xsimd::sse2>) noexcept {
  if constexpr (std::is_same_v<T, float>) _mm_stream_ps(p, x);
  else _mm_stream_si128(reinterpret_cast<__m128i*>(p), x);
}
template <class A>
[[gnu::always_inline]] inline void stream_fence(requires_arch<xsimd::sse2>) noexcept {
  _mm_sfence();
}
template <class To, class A, class From>
[[gnu::always_inline]] inline xsimd::batch<To, A> reinterpret(xsimd::batch<From, A> const& x,
                                                              requires_arch<xsimd::sse2>) noexcept {
  return xsimd::batch<To, A>(x.data);  // x86 integer registers do not carry the element type
}
template <std::size_t XL, class A>
[[gnu::always_inline]] inline fbatch<A> load_repeated(float const* p, requires_arch<xsimd::sse2>) noexcept {
  double d;
  std::memcpy(&d, p, sizeof d);
  return _mm_castpd_ps(_mm_set1_pd(d));
}
template <class A>
[[gnu::always_inline]] inline void transpose4(float const* p, std::ptrdiff_t st, float* o0, float* o1, float* o2,
                                              float* o3,
                requires_arch<xsimd::sse2>) noexcept {
  __m128 r0 = _mm_loadu_ps(p), r1 = _mm_loadu_ps(p + st), r2 = _mm_loadu_ps(p + 2 * st), r3 = _mm_loadu_ps(p + 3 * st);
  _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
  _mm_storeu_ps(o0, r0);
  _mm_storeu_ps(o1, r1);
  _mm_storeu_ps(o2, r2);
  _mm_storeu_ps(o3, r3);
}
#endif

#if XSIMD_WITH_AVX
template <class A, class T>
[[gnu::always_inline]] inline void store_stream(xsimd::batch<T, A> const& x, T* p, requires_arch<xsimd::avx>) noexcept {
  if constexpr (std::is_same_v<T, float>) _mm256_stream_ps(p, x);
  else _mm256_stream_si256(reinterpret_cast<__m256i*>(p), x);
}
template <class A>
[[gnu::always_inline]] inline void stream_fence(requires_arch<xsimd::avx>) noexcept {
  _mm_sfence();
}
template <class To, class A, class From>
[[gnu::always_inline]] inline xsimd::batch<To, A> reinterpret(xsimd::batch<From, A> const& x,
                                                              requires_arch<xsimd::avx>) noexcept {
  return xsimd::batch<To, A>(x.data);
}
template <std::size_t XL, class A>
[[gnu::always_inline]] inline fbatch<A> load_repeated(float const* p, requires_arch<xsimd::avx>) noexcept {
  if constexpr (XL == 2) {
    double d;
    std::memcpy(&d, p, sizeof d);
    return _mm256_castpd_ps(_mm256_set1_pd(d));
  } else {
    return _mm256_broadcast_ps(reinterpret_cast<__m128 const*>(p));
  }
}
template <class A>
[[gnu::always_inline]] inline void transpose4(float const* p, std::ptrdiff_t st, float* o0, float* o1, float* o2,
                                              float* o3,
                requires_arch<xsimd::avx>) noexcept {
  transpose4<xsimd::sse2>(p, st, o0, o1, o2, o3, xsimd::sse2{});
}
#if defined(__F16C__)
template <class A>
[[gnu::always_inline]] inline fbatch<A> load_f16(half const* p, requires_arch<xsimd::avx>) noexcept {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<__m128i const*>(p)));
}
template <class A>
[[gnu::always_inline]] inline void store_f16(fbatch<A> const& x, half* p, requires_arch<xsimd::avx>) noexcept {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}
#endif
#endif

#if XSIMD_WITH_FMA3_AVX
template <class A>
[[gnu::always_inline]] inline fbatch<A> fma(fbatch<A> const& x, fbatch<A> const& y, fbatch<A> const& z,
                                            requires_arch<xsimd::fma3<xsimd::avx>>) noexcept {
  return _mm256_fmadd_ps(x, y, z);
}
#endif
#if XSIMD_WITH_FMA3_AVX2
template <class A>
[[gnu::always_inline]] inline fbatch<A> fma(fbatch<A> const& x, fbatch<A> const& y, fbatch<A> const& z,
              requires_arch<xsimd::fma3<xsimd::avx2>>) noexcept {
  return _mm256_fmadd_ps(x, y, z);
}
#endif

#if XSIMD_WITH_AVX2
namespace detail {
/// The AVX2 mask of lanes [0, n) (n <= 8) for maskload/maskstore.
inline __m256i first_lanes(std::size_t n) noexcept {
  alignas(32) static constexpr std::int32_t ramp[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<__m256i const*>(ramp + 8 - n));
}
}  // namespace detail
template <class A>
[[gnu::always_inline]] inline fbatch<A> load_partial(float const* p, std::size_t n,
                                                     requires_arch<xsimd::avx2>) noexcept {
  return _mm256_maskload_ps(p, detail::first_lanes(n));
}
template <class A>
[[gnu::always_inline]] inline void store_partial(fbatch<A> const& x, float* p, std::size_t n,
                                                 requires_arch<xsimd::avx2>) noexcept {
  _mm256_maskstore_ps(p, detail::first_lanes(n), x);
}
template <class A>
[[gnu::always_inline]] inline fbatch<A> permute_lanes(fbatch<A> const& x, std::int32_t const* idx,
                                                      requires_arch<xsimd::avx2>) noexcept {
  return _mm256_permutevar8x32_ps(x, _mm256_loadu_si256(reinterpret_cast<__m256i const*>(idx)));
}
template <class A>
  requires std::derived_from<A, xsimd::avx2>
struct LanePermuter<A> {
  fbatch<A> in;
  LanePermuter(float const* p, std::size_t span) noexcept : in(load_partial<A>(p, span, A{})) {}
  [[gnu::always_inline]] fbatch<A> operator()(std::int32_t const* idx) const noexcept {
    __m256i const ix = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(idx));
    __m256 const used = _mm256_castsi256_ps(_mm256_cmpgt_epi32(ix, _mm256_set1_epi32(-1)));
    return _mm256_and_ps(_mm256_permutevar8x32_ps(in, ix), used);
  }
};
template <class A>
  requires std::derived_from<A, xsimd::avx2>
class LaneIndex<A> {
 public:
  explicit LaneIndex(std::int32_t const* idx) noexcept
      : ix_(_mm256_loadu_si256(reinterpret_cast<__m256i const*>(idx))) {}
  [[gnu::always_inline]] fbatch<A> load(float const* p) const noexcept {
    return _mm256_permutevar8x32_ps(_mm256_loadu_ps(p), ix_);
  }

 private:
  __m256i ix_;
};
#endif

#if XSIMD_WITH_AVX512F
template <class A>
[[gnu::always_inline]] inline fbatch<A> fma(fbatch<A> const& x, fbatch<A> const& y, fbatch<A> const& z,
                                            requires_arch<xsimd::avx512f>) noexcept {
  return _mm512_fmadd_ps(x, y, z);
}
/// acc += a * b as one vfmadd231ps on three registers: with many accumulators live GCC 12 keeps b in memory and
/// folds it into each FMA (or spills it), which the explicit instruction rules out.
template <class A>
[[gnu::always_inline]] inline bool fma_in_registers(fbatch<A>& acc, fbatch<A> const& a, fbatch<A> const& b,
                                                    requires_arch<xsimd::avx512f>) noexcept {
  if constexpr (sizeof(acc.data) == 64) {
    asm("vfmadd231ps %2, %1, %0" : "+v"(acc.data) : "v"(a.data), "v"(b.data));
    return true;
  }
  return false;
}
/// e^x as xsimd computes it (x = n ln 2 + r, Cephes' polynomial for e^r, within 2 ulp), with r reduced by two FMAs
/// and 2^n applied by one vscalefps, which also gives the overflow (inf), gradual underflow and NaN that xsimd
/// selects separately: 15 instructions instead of about 23 (SiLU over 16,384 floats in L1: 0.148 against 0.186 ns
/// a float). x is clamped to [-104, 89] first (beyond it the result is 0 or inf either way; a NaN passes, as the
/// second operand of each), and up to FLT_MAX the product p 2^128 does not overflow on the way.
template <class A>
[[gnu::always_inline]] inline fbatch<A> exp(fbatch<A> const& x, requires_arch<xsimd::avx512f>) noexcept {
  __m512 const t = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
  __m512 const n = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), t);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}
#if defined(__F16C__)
template <class A>
[[gnu::always_inline]] inline fbatch<A> load_f16(half const* p, requires_arch<xsimd::avx512f>) noexcept {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<__m256i const*>(p)));
}
template <class A>
[[gnu::always_inline]] inline void store_f16(fbatch<A> const& x, half* p, requires_arch<xsimd::avx512f>) noexcept {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}
#endif
template <class A>
[[gnu::always_inline]] inline fbatch<A> load_partial(float const* p, std::size_t n,
                                                     requires_arch<xsimd::avx512f>) noexcept {
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), p);
}
template <class A>
[[gnu::always_inline]] inline void store_partial(fbatch<A> const& x, float* p, std::size_t n,
                                                 requires_arch<xsimd::avx512f>) noexcept {
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1u), x);
}
template <class A, class T>
[[gnu::always_inline]] inline void store_stream(xsimd::batch<T, A> const& x, T* p,
                                                requires_arch<xsimd::avx512f>) noexcept {
  if constexpr (std::is_same_v<T, float>) _mm512_stream_ps(p, x);
  else _mm512_stream_si512(reinterpret_cast<__m512i*>(p), x);
}
template <class A>
[[gnu::always_inline]] inline void stream_fence(requires_arch<xsimd::avx512f>) noexcept {
  _mm_sfence();
}
template <class To, class A, class From>
[[gnu::always_inline]] inline xsimd::batch<To, A> reinterpret(xsimd::batch<From, A> const& x,
                                                              requires_arch<xsimd::avx512f>) noexcept {
  return xsimd::batch<To, A>(x.data);
}
template <std::size_t XL, class A>
[[gnu::always_inline]] inline fbatch<A> load_repeated(float const* p, requires_arch<xsimd::avx512f>) noexcept {
  if constexpr (XL == 2) {
    double d;
    std::memcpy(&d, p, sizeof d);
    return _mm512_castpd_ps(_mm512_set1_pd(d));
  } else if constexpr (XL == 4) {
    return _mm512_broadcast_f32x4(_mm_loadu_ps(p));
  } else {
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd(reinterpret_cast<double const*>(p))));
  }
}
template <class A>
[[gnu::always_inline]] inline void transpose4(float const* p, std::ptrdiff_t st, float* o0, float* o1, float* o2,
                                              float* o3,
                requires_arch<xsimd::avx512f>) noexcept {
  transpose4<xsimd::sse2>(p, st, o0, o1, o2, o3, xsimd::sse2{});
}
template <class A>
[[gnu::always_inline]] inline fbatch<A> permute_lanes(fbatch<A> const& x, std::int32_t const* idx,
                                                      requires_arch<xsimd::avx512f>) noexcept {
  return _mm512_permutexvar_ps(_mm512_loadu_si512(idx), x);
}
template <class A>
  requires std::derived_from<A, xsimd::avx512f>
struct LanePermuter<A> {
  fbatch<A> in;
  LanePermuter(float const* p, std::size_t span) noexcept : in(load_partial<A>(p, span, A{})) {}
  [[gnu::always_inline]] fbatch<A> operator()(std::int32_t const* idx) const noexcept {
    __m512i const ix = _mm512_loadu_si512(idx);
    __mmask16 const used = _mm512_cmpge_epi32_mask(ix, _mm512_setzero_si512());
    return _mm512_maskz_permutexvar_ps(used, ix, in);
  }
};
template <class A>
  requires std::derived_from<A, xsimd::avx512f>
class LaneIndex<A> {
 public:
  explicit LaneIndex(std::int32_t const* idx) noexcept : ix_(_mm512_loadu_si512(idx)) {}
  [[gnu::always_inline]] fbatch<A> load(float const* p) const noexcept { return _mm512_permutexvar_ps(ix_,
                                        _mm512_loadu_ps(p)); }

 private:
  __m512i ix_;
};
#endif

}  // namespace tilebsp::simd::isa
