// f16 storage type: exact round trips, round-to-nearest-even, overflow, subnormals, NaN.
#include <tilebsp/core/half.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>

using tilebsp::half;

TEST_CASE("every finite half survives half -> float -> half") {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    auto const h = half::from_bits(static_cast<std::uint16_t>(b));
    float const f = h;
    if (std::isnan(f)) {
      CHECK(std::isnan(float(half(f))));
      continue;
    }
    CHECK(half(f).bits() == b);
  }
}

TEST_CASE("float -> half rounds to nearest, ties to even, against a double reference") {
  // Every value halfway between two adjacent halves, and a quarter either side of it.
  for (std::uint32_t b = 0; b < 0x7bff; ++b) {
    double const lo = float(half::from_bits(static_cast<std::uint16_t>(b)));
    double const hi = float(half::from_bits(static_cast<std::uint16_t>(b + 1)));
    double const mid = (lo + hi) / 2;
    std::uint16_t const even = (b % 2 == 0) ? static_cast<std::uint16_t>(b) : static_cast<std::uint16_t>(b + 1);
    CHECK(half(static_cast<float>(mid)).bits() == even);
    CHECK(half(static_cast<float>(lo + (hi - lo) / 4)).bits() == b);
    CHECK(half(static_cast<float>(hi - (hi - lo) / 4)).bits() == b + 1);
    CHECK(half(static_cast<float>(-mid)).bits() == (even | 0x8000));
  }
}

TEST_CASE("overflow, infinities, NaN, subnormals and signed zero") {
  CHECK(float(half(65504.0f)) == 65504.0f);
  CHECK(half(65519.0f).bits() == 0x7bff);  // below the halfway point to 65536: rounds down
  CHECK(half(65520.0f).bits() == 0x7c00);  // halfway: ties to even, which is infinity
  CHECK(half(1e10f).bits() == 0x7c00);
  CHECK(half(-1e10f).bits() == 0xfc00);
  CHECK(half(std::numeric_limits<float>::infinity()).bits() == 0x7c00);
  CHECK(std::isnan(float(half(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(float(half::from_bits(0x0001)) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(half(std::ldexp(1.0f, -25)).bits() == 0);                  // halfway to it: ties to even (zero)
  CHECK(half(std::ldexp(1.5f, -25)).bits() == 1);
  CHECK(half(-0.0f).bits() == 0x8000);
  CHECK(float(half(0.1f)) == doctest::Approx(0.0999755859375).epsilon(1e-12));
}
