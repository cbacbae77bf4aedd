// ops::map on i32 and u32: integer arithmetic (including division by zero) and comparisons.
#include "ops/map_harness.hpp"

#include <limits>

namespace tb = tilebsp;
using namespace tb::expr;

TEST_CASE_TEMPLATE("integer operators", T, std::int32_t, std::uint32_t) {
  using W = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;
  auto const wrap = [](W v) { return double(static_cast<T>(v)); };
  double const lo = std::is_signed_v<T> ? -1e9 : 0, hi = 2e9;
  if constexpr (std::is_signed_v<T>) {
    tbt::check_map<T, T>("neg", -_1, [](T a, T) { return -double(a); }, -1e9, 1e9, 0, 0, 1);
    tbt::check_map<T, T>("abs", abs(_1), [](T a, T) { return std::abs(double(a)); }, -1e9, 1e9, 0, 0, 1);
  }
  tbt::check_map<T, T>("+", _1 + _2, [&](T a, T b) { return wrap(W(a) + W(b)); }, lo, hi / 2);
  tbt::check_map<T, T>("-", _1 - _2, [&](T a, T b) { return wrap(W(a) - W(b)); }, lo, hi / 2);
  tbt::check_map<T, T>("*", _1 * _2, [&](T a, T b) { return wrap(W(a) * W(b)); }, -50000, 50000);
  tbt::check_map<T, T>("/ (x / 0 is 0)", _1 / _2, [](T a, T b) { return b == 0 ? 0.0 : double(T(a / b)); }, -20, 20);
  tbt::check_map<T, T>("min", min(_1, _2), [](T a, T b) { return double(std::min(a, b)); }, lo, hi / 2);
  tbt::check_map<T, T>("max", max(_1, _2), [](T a, T b) { return double(std::max(a, b)); }, lo, hi / 2);
  tbt::check_map<T, T>("relu", relu(_1), [](T a, T) { return double(std::max<T>(a, 0)); }, lo, hi / 2, 0, 0, 1);
  tbt::check_map<T, T>("square", square(_1), [&](T a, T) { return wrap(W(a) * W(a)); }, -40000, 40000, 0, 0, 1);
  tbt::check_map<T, T>("constant", _1 * 3 + 7, [&](T a, T) { return wrap(W(a) * 3 + 7); }, lo / 8, hi / 8, 0, 0, 1);
  tbt::check_map<bool, T>("<", _1 < _2, [](T a, T b) { return double(a < b); }, lo, hi / 2);
  tbt::check_map<bool, T>(">=", _1 >= _2, [](T a, T b) { return double(a >= b); }, lo, hi / 2);
  tbt::check_map<bool, T>("==", _1 == _2, [](T a, T b) { return double(a == b); }, 0, 3);
  tbt::check_map<T, T>("select", select(_1 < _2, _2, _1), [](T a, T b) { return double(a < b ? b : a); }, lo, hi / 2);
}
