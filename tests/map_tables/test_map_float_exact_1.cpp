// ops::map on f32 and f16: exact arithmetic, min, max, neg, abs, relu, square, sqrt, scalar constants and operands.
// Half 1 of the table (the rest in test_map_float_exact_2.cpp): each half compiles in under 3 GB.
#include "ops/map_harness.hpp"

namespace tb = tilebsp;
using namespace tb::expr;
using tb::half;
using tbt::rounded;

TEST_CASE_TEMPLATE("exact float operators (1 of 2)", T, float, half) {
  double const tol = std::is_same_v<T, half> ? 1e-3 : 0;
  tbt::check_map<T, T>("+", _1 + _2, [](T a, T b) { return rounded<T>(float(a) + float(b)); }, -100, 100, tol);
  tbt::check_map<T, T>("-", _1 - _2, [](T a, T b) { return rounded<T>(float(a) - float(b)); }, -100, 100, tol);
  tbt::check_map<T, T>("*", _1 * _2, [](T a, T b) { return rounded<T>(float(a) * float(b)); }, -100, 100, tol);
  tbt::check_map<T, T>("/", _1 / _2, [](T a, T b) { return rounded<T>(float(a) / float(b)); }, 0.5, 100, tol);
  tbt::check_map<T, T>("min", min(_1, _2), [](T a, T b) { return rounded<T>(std::min(float(a), float(b))); }, -9, 9);
  tbt::check_map<T, T>("max", max(_1, _2), [](T a, T b) { return rounded<T>(std::max(float(a), float(b))); }, -9, 9);
  tbt::check_map<T, T>("neg", -_1, [](T a, T) { return -rounded<T>(float(a)); }, -9, 9, 0, 0, 1);
}
