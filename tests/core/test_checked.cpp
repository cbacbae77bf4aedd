// tilebsp::checked: the overflow-safe arithmetic every reader of untrusted bytes uses, at the edges of the int64
// range (a wrapped result must never pass a check).
#include <tilebsp/core/checked.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

namespace ck = tilebsp::checked;
using i64 = std::int64_t;

namespace {
constexpr i64 max64 = std::numeric_limits<i64>::max();
constexpr i64 min64 = std::numeric_limits<i64>::min();
}  // namespace

TEST_CASE("checked::add and checked::mul give nothing where the result does not fit") {
  CHECK(ck::add(i64{2}, i64{3}) == 5);
  CHECK(ck::add(max64, i64{0}) == max64);
  CHECK_FALSE(ck::add(max64, i64{1}).has_value());
  CHECK_FALSE(ck::add(min64, i64{-1}).has_value());
  CHECK(ck::add(min64, max64) == -1);
  CHECK_FALSE(ck::add(std::uint64_t{~0ull}, std::uint64_t{1}).has_value());
  CHECK(ck::mul(i64{-4}, i64{5}) == -20);
  CHECK_FALSE(ck::mul(i64{1} << 62, i64{2}).has_value());
  CHECK_FALSE(ck::mul(min64, i64{-1}).has_value());
  CHECK(ck::mul(min64, i64{1}) == min64);
  CHECK(ck::mul(max64, i64{0}) == 0);
  CHECK_FALSE(ck::mul(std::uint32_t{1} << 16, std::uint32_t{1} << 16).has_value());
  static_assert(ck::add(1, 2) == 3);  // usable in constant expressions
}

TEST_CASE("checked::product refuses dimensions whose product wraps, even to a small number") {
  CHECK(ck::product(std::vector<std::size_t>{}) == 1);
  CHECK(ck::product(std::vector<std::size_t>{60000, 28, 28}) == 47040000);
  CHECK(ck::product(std::vector<std::size_t>{7, 0, 9}) == 0);
  // 4 x 2^31 x 2^31 = 2^64, which wraps to 0: an IDX header that claims that many bytes must not match an empty file
  CHECK_FALSE(ck::product(std::vector<std::size_t>{4, std::size_t{1} << 31, std::size_t{1} << 31}).has_value());
  CHECK_FALSE(ck::product(std::array<std::uint32_t, 3>{0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}).has_value());
  CHECK_FALSE(ck::product(std::vector<i64>{3, -1}).has_value());
  CHECK(ck::product(std::vector<i64>{3, 5}) == 15);
}

TEST_CASE("checked::run_fits: a strided run inside its buffer, never fooled by wrapping") {
  // The case an executable-cache entry used: start + (count - 1) * stride = 5 + 4 * 2^62 wraps to 5.
  CHECK_FALSE(ck::run_fits(5, i64{1} << 62, 5, 100));
  CHECK_FALSE(ck::run_fits(5, i64{1} << 61, 9, 100));
  CHECK_FALSE(ck::run_fits(0, max64, 2, max64));
  CHECK_FALSE(ck::run_fits(max64 - 1, 1, 3, max64));
  CHECK_FALSE(ck::run_fits(0, min64, 2, 100));
  CHECK_FALSE(ck::run_fits(min64, 1, 1, 100));
  CHECK_FALSE(ck::run_fits(max64, -1, 1, 100));
  CHECK_FALSE(ck::run_fits(0, 1, max64, 100));
  CHECK_FALSE(ck::run_fits(0, 1, min64, 100));
  // ordinary runs
  CHECK(ck::run_fits(0, 1, 100, 100));
  CHECK_FALSE(ck::run_fits(0, 1, 101, 100));
  CHECK(ck::run_fits(1, 3, 33, 100));  // last = 97
  CHECK_FALSE(ck::run_fits(1, 3, 34, 100));
  CHECK(ck::run_fits(max64 - 1, 1, 1, max64));
  // negative strides run backwards from the start
  CHECK(ck::run_fits(99, -1, 100, 100));
  CHECK_FALSE(ck::run_fits(99, -1, 101, 100));
  CHECK_FALSE(ck::run_fits(100, -1, 1, 100));
  CHECK(ck::run_fits(50, -25, 3, 100));
  CHECK_FALSE(ck::run_fits(50, -25, 4, 100));
  // a zero stride repeats the start (a broadcast)
  CHECK(ck::run_fits(7, 0, 1000, 8));
  CHECK_FALSE(ck::run_fits(8, 0, 1, 8));
  // a stride larger than the buffer is refused, even for one element (the copier advances past the run by it)
  CHECK(ck::run_fits(0, 100, 1, 100));
  CHECK_FALSE(ck::run_fits(0, 101, 1, 100));
  CHECK_FALSE(ck::run_fits(0, -101, 1, 100));
  CHECK_FALSE(ck::run_fits(0, max64, 1, 100));
  // zero counts: the start may be the end of the buffer, not past it; negative counts and sizes never fit
  CHECK(ck::run_fits(0, 1, 0, 0));
  CHECK(ck::run_fits(100, 1, 0, 100));
  CHECK_FALSE(ck::run_fits(101, 1, 0, 100));
  CHECK_FALSE(ck::run_fits(-1, 1, 0, 100));
  CHECK_FALSE(ck::run_fits(max64, 1, 0, 100));
  CHECK_FALSE(ck::run_fits(0, 1, -1, 100));
  CHECK_FALSE(ck::run_fits(0, 1, 1, -1));
  CHECK_FALSE(ck::run_fits(0, 1, 1, 0));
}

TEST_CASE("checked::bytes_fit: elements times their size within a byte count, without wrapping") {
  CHECK(ck::bytes_fit(25, 4, 100));
  CHECK_FALSE(ck::bytes_fit(26, 4, 100));
  CHECK(ck::bytes_fit(0, 8, 0));
  CHECK_FALSE(ck::bytes_fit(std::uint64_t{1} << 62, 4, 100));  // 2^64 wraps to 0
  CHECK_FALSE(ck::bytes_fit(~std::uint64_t{0}, ~std::uint64_t{0}, ~std::uint64_t{0}));
}
