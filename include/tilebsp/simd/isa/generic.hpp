// The portable implementations of tilebsp's ISA primitives: the overloads for xsimd::generic, which every
// architecture tag derives from, so they apply wherever no instruction set offers a better one (simd/isa/x86.hpp).
#pragma once

#include <tilebsp/core/half.hpp>

#include <xsimd/xsimd.hpp>

#include <cstddef>
#include <cstdint>

namespace tilebsp::simd::isa {

/// The tag parameter of an overload: A or any architecture derived from it; overload resolution takes the most
/// derived (xsimd's own dispatch).
template <class A>
using requires_arch = A const&;

template <class A>
using fbatch = xsimd::batch<float, A>;

template <class A>
[[gnu::always_inline]] inline fbatch<A> fma(fbatch<A> const& x, fbatch<A> const& y, fbatch<A> const& z,
                                            requires_arch<xsimd::generic>) noexcept {
  return xsimd::fma(x, y, z);
}

/// acc += a * b with acc, a and b held in vector registers, where an instruction form says so (x86.hpp: AVX-512);
/// false here, and the caller computes simd::fma instead.
template <class A>
[[gnu::always_inline]] inline bool fma_in_registers(fbatch<A>&, fbatch<A> const&, fbatch<A> const&,
                                                    requires_arch<xsimd::generic>) noexcept {
  return false;
}

/// A compiler barrier on v's value that leaves it in a vector register (x86.hpp); nothing here.
template <class A>
[[gnu::always_inline]] inline void in_register(fbatch<A>&, requires_arch<xsimd::generic>) noexcept {}

template <class A>
[[gnu::always_inline]] inline fbatch<A> load_f16(half const* p, requires_arch<xsimd::generic>) noexcept {
  alignas(64) float tmp[fbatch<A>::size];
  for (std::size_t i = 0; i < fbatch<A>::size; ++i) tmp[i] = p[i];
  return fbatch<A>::load_aligned(tmp);
}

template <class A>
[[gnu::always_inline]] inline void store_f16(fbatch<A> const& x, half* p, requires_arch<xsimd::generic>) noexcept {
  alignas(64) float tmp[fbatch<A>::size];
  x.store_aligned(tmp);
  for (std::size_t i = 0; i < fbatch<A>::size; ++i) p[i] = half(tmp[i]);
}

template <class A>
[[gnu::always_inline]] inline fbatch<A> load_partial(float const* p, std::size_t n,
                                                     requires_arch<xsimd::generic>) noexcept {
  alignas(64) float tmp[fbatch<A>::size] = {};
  for (std::size_t i = 0; i < n; ++i) tmp[i] = p[i];
  return fbatch<A>::load_aligned(tmp);
}

template <class A>
[[gnu::always_inline]] inline void store_partial(fbatch<A> const& x, float* p, std::size_t n,
                                                 requires_arch<xsimd::generic>) noexcept {
  alignas(64) float tmp[fbatch<A>::size];
  x.store_aligned(tmp);
  for (std::size_t i = 0; i < n; ++i) p[i] = tmp[i];
}

template <class A, class T>
[[gnu::always_inline]] inline void store_stream(xsimd::batch<T, A> const& x, T* p,
                                                requires_arch<xsimd::generic>) noexcept {
  x.store_aligned(p);
}

template <class A>
[[gnu::always_inline]] inline void stream_fence(requires_arch<xsimd::generic>) noexcept {}

template <class To, class A, class From>
[[gnu::always_inline]] inline xsimd::batch<To, A> reinterpret(xsimd::batch<From, A> const& x,
                                                              requires_arch<xsimd::generic>) noexcept {
  return xsimd::bitwise_cast<To>(x);
}

/// The XL floats at p repeated across a vector.
template <std::size_t XL, class A>
[[gnu::always_inline]] inline fbatch<A> load_repeated(float const* p, requires_arch<xsimd::generic>) noexcept {
  alignas(64) float tmp[fbatch<A>::size];
  for (std::size_t l = 0; l < fbatch<A>::size; ++l) tmp[l] = p[l % XL];
  return fbatch<A>::load_aligned(tmp);
}

/// e^x lane by lane: xsimd's (Cephes' range reduction and polynomial, 2 ulp).
template <class A>
[[gnu::always_inline]] inline fbatch<A> exp(fbatch<A> const& x, requires_arch<xsimd::generic>) noexcept {
  return xsimd::exp(x);
}

/// The 4 x 4 floats at rows p, p + st, p + 2 st, p + 3 st, transposed: o_r[c] = p[c * st + r].
template <class A>
[[gnu::always_inline]] inline void transpose4(float const* p, std::ptrdiff_t st, float* o0, float* o1, float* o2,
                                              float* o3,
                requires_arch<xsimd::generic>) noexcept {
  float* const o[4] = {o0, o1, o2, o3};
  for (std::ptrdiff_t r = 0; r < 4; ++r)
    for (std::ptrdiff_t c = 0; c < 4; ++c) o[r][c] = p[c * st + r];
}

/// x permuted: lane m takes lane idx[m].
template <class A>
[[gnu::always_inline]] inline fbatch<A> permute_lanes(fbatch<A> const& x, std::int32_t const* idx,
                                                      requires_arch<xsimd::generic>) noexcept {
  alignas(64) float in[fbatch<A>::size], out[fbatch<A>::size];
  x.store_aligned(in);
  for (std::size_t l = 0; l < fbatch<A>::size; ++l) out[l] = in[idx[l]];
  return fbatch<A>::load_aligned(out);
}

/// A lane permutation: lane l of the result takes the float at idx[l] (< 0: zero) of a span of floats.
/// The generic form reads the span in memory; instruction sets with a permute load it once into a register.
template <class A, class = void>
struct LanePermuter {
  float const* p;
  LanePermuter(float const* p_, std::size_t) noexcept : p(p_) {}
  [[gnu::always_inline]] fbatch<A> operator()(std::int32_t const* idx) const noexcept {
    alignas(64) float tmp[fbatch<A>::size];
    for (std::size_t l = 0; l < fbatch<A>::size; ++l) tmp[l] = idx[l] >= 0 ? p[idx[l]] : 0.0f;
    return fbatch<A>::load_aligned(tmp);
  }
};

/// Lane l of load(p) takes the float at p + idx[l] (0 <= idx[l] < lanes), the indices held across loads.
template <class A, class = void>
class LaneIndex {
 public:
  explicit LaneIndex(std::int32_t const* idx) noexcept : ix_(idx) {}
  [[gnu::always_inline]] fbatch<A> load(float const* p) const noexcept {
    alignas(64) float tmp[fbatch<A>::size];
    for (std::size_t l = 0; l < fbatch<A>::size; ++l) tmp[l] = p[ix_[l]];
    return fbatch<A>::load_aligned(tmp);
  }

 private:
  std::int32_t const* ix_;
};

}  // namespace tilebsp::simd::isa
