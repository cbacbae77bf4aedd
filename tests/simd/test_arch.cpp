// simd::load_partial and simd::store_partial: the first n lanes move, nothing past them is read into the result
// or written.
#include <tilebsp/simd/arch.hpp>

#include <doctest/doctest.h>

#include <vector>

namespace sd = tilebsp::simd;

TEST_CASE("load_partial and store_partial move the first n lanes only") {
  constexpr std::size_t L = sd::lanes;
  for (std::size_t n = 0; n <= L; ++n) {
    CAPTURE(n);
    std::vector<float> src(L + 2), dst(L + 2, -7.0f);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i + 1);
    alignas(64) float got[L];
    sd::load_partial(src.data() + 1, n).store_aligned(got);
    for (std::size_t i = 0; i < L; ++i) CHECK(got[i] == (i < n ? src[i + 1] : 0.0f));
    sd::store_partial(sd::batch<float>::load_unaligned(src.data()), dst.data() + 1, n);
    CHECK(dst[0] == -7.0f);
    for (std::size_t i = 0; i < L; ++i) CHECK(dst[i + 1] == (i < n ? src[i] : -7.0f));
    CHECK(dst[L + 1] == -7.0f);
  }
}
