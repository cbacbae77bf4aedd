// ops::map on f32 and f16: comparisons, select and a fused expression.
#include "ops/map_harness.hpp"

namespace tb = tilebsp;
using namespace tb::expr;
using tb::half;
using tbt::rounded;

TEST_CASE_TEMPLATE("comparisons and select on floats", T, float, half) {
  auto const f = [](T x) { return double(float(x)); };
  tbt::check_map<bool, T>("<", _1 < _2, [&](T a, T b) { return double(f(a) < f(b)); }, -3, 3);
  tbt::check_map<bool, T>("<=", _1 <= _2, [&](T a, T b) { return double(f(a) <= f(b)); }, -3, 3);
  tbt::check_map<bool, T>(">", _1 > _2, [&](T a, T b) { return double(f(a) > f(b)); }, -3, 3);
  tbt::check_map<bool, T>(">=", _1 >= _2, [&](T a, T b) { return double(f(a) >= f(b)); }, -3, 3);
  tbt::check_map<bool, T>("==", _1 == _2, [&](T a, T b) { return double(f(a) == f(b)); }, -3, 3);
  tbt::check_map<bool, T>("!=", _1 != _2, [&](T a, T b) { return double(f(a) != f(b)); }, -3, 3);
  tbt::check_map<T, T>("select", select(_1 > _2, _1, _2 * 2), [&](T a, T b) { return f(a) > f(b) ? f(a) : rounded<T>(f(b) * 2); },
                       -3, 3);
  tbt::check_map<T, T>("fused relu(_1 * 2 + _2)", relu(_1 * 2 + _2),
                       [&](T a, T b) { return rounded<T>(std::max(0.0f, float(a) * 2.0f + float(b))); }, -9, 9,
                       std::is_same_v<T, half> ? 1e-3 : 1e-7);
}
