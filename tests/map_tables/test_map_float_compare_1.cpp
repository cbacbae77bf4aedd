// ops::map on f32 and f16: comparisons, select and a fused expression. Half 1 of the table (the rest in
// test_map_float_compare_2.cpp): each half compiles in under 3 GB.
#include "ops/map_harness.hpp"

namespace tb = tilebsp;
using namespace tb::expr;
using tb::half;
using tbt::rounded;

TEST_CASE_TEMPLATE("comparisons and select on floats (1 of 2)", T, float, half) {
  auto const f = [](T x) { return double(float(x)); };
  tbt::check_map<bool, T>("<", _1 < _2, [&](T a, T b) { return double(f(a) < f(b)); }, -3, 3);
  tbt::check_map<bool, T>("<=", _1 <= _2, [&](T a, T b) { return double(f(a) <= f(b)); }, -3, 3);
  tbt::check_map<bool, T>(">", _1 > _2, [&](T a, T b) { return double(f(a) > f(b)); }, -3, 3);
  tbt::check_map<bool, T>(">=", _1 >= _2, [&](T a, T b) { return double(f(a) >= f(b)); }, -3, 3);
}
