// ops::map on i32, u32 and bool: integer arithmetic (including division by zero), comparisons, logic, select.
#include "ops/map_harness.hpp"

#include <limits>

namespace tb = tilebsp;
using namespace tb::expr;

TEST_CASE_TEMPLATE("integer operators", T, std::int32_t, std::uint32_t) {
  using W = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;
  auto const wrap = [](W v) { return double(static_cast<T>(v)); };
  double const lo = std::is_signed_v<T> ? -1e9 : 0, hi = 2e9;
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
  if constexpr (std::is_signed_v<T>) {
    tbt::check_map<T, T>("neg", -_1, [](T a, T) { return -double(a); }, -1e9, 1e9, 0, 0, 1);
    tbt::check_map<T, T>("abs", abs(_1), [](T a, T) { return std::abs(double(a)); }, -1e9, 1e9, 0, 0, 1);
  }
}

TEST_CASE("unsigned comparisons use unsigned order above 2^31") {
  tbt::check_map<bool, std::uint32_t>("u32 <", _1 < _2, [](std::uint32_t a, std::uint32_t b) { return double(a < b); },
                                      0, 4294967295.0);
}

TEST_CASE("signed division never traps") {
  tb::Graph g{tb::targets::tiny(1)};
  auto a = g.add_constant<std::int32_t>({4}, {std::numeric_limits<std::int32_t>::min(), 7, -7, 5}, "a");
  auto b = g.add_constant<std::int32_t>({4}, {-1, 0, 2, -2}, "b");
  g.set_tile_mapping(a, 0);
  g.set_tile_mapping(b, 0);
  tb::Sequence prog;
  auto q = tb::ops::map(g, prog, _1 / _2, a, b);
  tb::Engine e{tb::compile(g, prog), {.host_threads = 1}};
  e.run();
  CHECK(e.read<std::int32_t>(q) == std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::min(), 0, -3, -2});
}

TEST_CASE("bool operators") {
  tbt::check_map<bool, bool>("&&", _1 && _2, [](bool a, bool b) { return double(a && b); }, 0, 1);
  tbt::check_map<bool, bool>("||", _1 || _2, [](bool a, bool b) { return double(a || b); }, 0, 1);
  tbt::check_map<bool, bool>("!", !_1, [](bool a, bool) { return double(!a); }, 0, 1, 0, 0, 1);
  tbt::check_map<bool, bool>("== on bools", _1 == _2, [](bool a, bool b) { return double(a == b); }, 0, 1);
  tbt::check_map<bool, bool>("!= on bools", _1 != _2, [](bool a, bool b) { return double(a != b); }, 0, 1);
  tbt::check_map<bool, bool>("select on bools", select(_1, _2, !_2), [](bool a, bool b) { return double(a ? b : !b); }, 0, 1);
  tbt::check_map<std::int32_t, bool>("cast<i32> from bool", cast<std::int32_t>(_1), [](bool a, bool) { return a ? 1.0 : 0.0; },
                                     0, 1, 0, 0, 1);
}
