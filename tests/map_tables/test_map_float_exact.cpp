// ops::map on f32 and f16: exact arithmetic, min, max, neg, abs, relu, square, sqrt, scalar constants and operands.
#include "ops/map_harness.hpp"

namespace tb = tilebsp;
using namespace tb::expr;
using tb::half;
using tbt::rounded;

TEST_CASE_TEMPLATE("exact float operators", T, float, half) {
  double const tol = std::is_same_v<T, half> ? 1e-3 : 0;
  tbt::check_map<T, T>("+", _1 + _2, [](T a, T b) { return rounded<T>(float(a) + float(b)); }, -100, 100, tol);
  tbt::check_map<T, T>("-", _1 - _2, [](T a, T b) { return rounded<T>(float(a) - float(b)); }, -100, 100, tol);
  tbt::check_map<T, T>("*", _1 * _2, [](T a, T b) { return rounded<T>(float(a) * float(b)); }, -100, 100, tol);
  tbt::check_map<T, T>("/", _1 / _2, [](T a, T b) { return rounded<T>(float(a) / float(b)); }, 0.5, 100, tol);
  tbt::check_map<T, T>("min", min(_1, _2), [](T a, T b) { return rounded<T>(std::min(float(a), float(b))); }, -9, 9);
  tbt::check_map<T, T>("max", max(_1, _2), [](T a, T b) { return rounded<T>(std::max(float(a), float(b))); }, -9, 9);
  tbt::check_map<T, T>("neg", -_1, [](T a, T) { return -rounded<T>(float(a)); }, -9, 9, 0, 0, 1);
  tbt::check_map<T, T>("abs", abs(_1), [](T a, T) { return std::abs(rounded<T>(float(a))); }, -9, 9, 0, 0, 1);
  tbt::check_map<T, T>("relu", relu(_1), [](T a, T) { return std::max(0.0, rounded<T>(float(a))); }, -9, 9, 0, 0, 1);
  tbt::check_map<T, T>("square", square(_1), [](T a, T) { return rounded<T>(float(a) * float(a)); }, -9, 9, tol, 0, 1);
  tbt::check_map<T, T>("sqrt", sqrt(_1), [](T a, T) { return rounded<T>(std::sqrt(float(a))); }, 0, 100, tol, 0, 1);
  tbt::check_map<T, T>("scalar constant", _1 * 2 + 1, [](T a, T) { return rounded<T>(float(a) * 2.0f + 1.0f); }, -9, 9, tol, 0, 1);
  tbt::check_map<T, T>("broadcast scalar operand", _1 - _2, [](T a, T b) { return rounded<T>(float(a) - float(b)); }, -9, 9,
                       tol, 0, 2, true);
}
