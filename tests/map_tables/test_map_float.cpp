// ops::map on f32 and f16: every arithmetic, comparison and math operator against a scalar reference.
#include "ops/map_harness.hpp"

namespace tb = tilebsp;
using namespace tb::expr;
using tb::half;

namespace {
// References computed in float like the kernels, rounded to the output type.
template <class T>
double r(float x) {
  return static_cast<double>(static_cast<float>(T(x)));
}
}  // namespace

TEST_CASE_TEMPLATE("exact float operators", T, float, half) {
  double const tol = std::is_same_v<T, half> ? 1e-3 : 0;
  tbt::check_map<T, T>("+", _1 + _2, [](T a, T b) { return r<T>(float(a) + float(b)); }, -100, 100, tol);
  tbt::check_map<T, T>("-", _1 - _2, [](T a, T b) { return r<T>(float(a) - float(b)); }, -100, 100, tol);
  tbt::check_map<T, T>("*", _1 * _2, [](T a, T b) { return r<T>(float(a) * float(b)); }, -100, 100, tol);
  tbt::check_map<T, T>("/", _1 / _2, [](T a, T b) { return r<T>(float(a) / float(b)); }, 0.5, 100, tol);
  tbt::check_map<T, T>("min", min(_1, _2), [](T a, T b) { return r<T>(std::min(float(a), float(b))); }, -9, 9);
  tbt::check_map<T, T>("max", max(_1, _2), [](T a, T b) { return r<T>(std::max(float(a), float(b))); }, -9, 9);
  tbt::check_map<T, T>("neg", -_1, [](T a, T) { return -r<T>(float(a)); }, -9, 9, 0, 0, 1);
  tbt::check_map<T, T>("abs", abs(_1), [](T a, T) { return std::abs(r<T>(float(a))); }, -9, 9, 0, 0, 1);
  tbt::check_map<T, T>("relu", relu(_1), [](T a, T) { return std::max(0.0, r<T>(float(a))); }, -9, 9, 0, 0, 1);
  tbt::check_map<T, T>("square", square(_1), [](T a, T) { return r<T>(float(a) * float(a)); }, -9, 9, tol, 0, 1);
  tbt::check_map<T, T>("sqrt", sqrt(_1), [](T a, T) { return r<T>(std::sqrt(float(a))); }, 0, 100, tol, 0, 1);
  tbt::check_map<T, T>("scalar constant", _1 * 2 + 1, [](T a, T) { return r<T>(float(a) * 2.0f + 1.0f); }, -9, 9, tol, 0, 1);
  tbt::check_map<T, T>("broadcast scalar operand", _1 - _2, [](T a, T b) { return r<T>(float(a) - float(b)); }, -9, 9,
                       tol, 0, 2, true);
}

TEST_CASE_TEMPLATE("transcendental float operators", T, float, half) {
  double const rel = std::is_same_v<T, half> ? 2e-3 : 4e-6, abs = std::is_same_v<T, half> ? 1e-3 : 1e-7;
  tbt::check_map<T, T>("exp", exp(_1), [](T a, T) { return std::exp(double(float(a))); }, -10, 10, rel, abs, 1);  // e^10 < 65504
  tbt::check_map<T, T>("log", log(_1), [](T a, T) { return std::log(double(float(a))); }, 1e-3, 1e3, rel, abs, 1);
  tbt::check_map<T, T>("tanh", tanh(_1), [](T a, T) { return std::tanh(double(float(a))); }, -6, 6, rel, abs, 1);
  tbt::check_map<T, T>("sigmoid", sigmoid(_1), [](T a, T) { return 1 / (1 + std::exp(-double(float(a)))); }, -12, 12,
                       rel, abs, 1);
  tbt::check_map<T, T>("rsqrt", rsqrt(_1), [](T a, T) { return 1 / std::sqrt(double(float(a))); }, 1e-2, 1e3, rel, abs, 1);
  tbt::check_map<T, T>("pow", pow(_1, _2), [](T a, T b) { return std::pow(double(float(a)), double(float(b))); }, 0.1, 4,
                       rel * 4, abs, 2);
}

TEST_CASE_TEMPLATE("comparisons and select on floats", T, float, half) {
  auto const f = [](T x) { return double(float(x)); };
  tbt::check_map<bool, T>("<", _1 < _2, [&](T a, T b) { return double(f(a) < f(b)); }, -3, 3);
  tbt::check_map<bool, T>("<=", _1 <= _2, [&](T a, T b) { return double(f(a) <= f(b)); }, -3, 3);
  tbt::check_map<bool, T>(">", _1 > _2, [&](T a, T b) { return double(f(a) > f(b)); }, -3, 3);
  tbt::check_map<bool, T>(">=", _1 >= _2, [&](T a, T b) { return double(f(a) >= f(b)); }, -3, 3);
  tbt::check_map<bool, T>("==", _1 == _2, [&](T a, T b) { return double(f(a) == f(b)); }, -3, 3);
  tbt::check_map<bool, T>("!=", _1 != _2, [&](T a, T b) { return double(f(a) != f(b)); }, -3, 3);
  tbt::check_map<T, T>("select", select(_1 > _2, _1, _2 * 2), [&](T a, T b) { return f(a) > f(b) ? f(a) : r<T>(f(b) * 2); },
                       -3, 3);
  tbt::check_map<T, T>("fused relu(_1 * 2 + _2)", relu(_1 * 2 + _2),
                       [&](T a, T b) { return r<T>(std::max(0.0f, float(a) * 2.0f + float(b))); }, -9, 9,
                       std::is_same_v<T, half> ? 1e-3 : 1e-7);
}

TEST_CASE("casts between float, integer and bool types") {
  tbt::check_map<std::int32_t, float>("cast<i32>", cast<std::int32_t>(_1), [](float a, float) { return double(std::int32_t(a)); },
                                      -1e6, 1e6, 0, 0, 1);
  tbt::check_map<std::uint32_t, float>("cast<u32>", cast<std::uint32_t>(_1),
                                       [](float a, float) { return double(std::uint32_t(a)); }, 0, 1e6, 0, 0, 1);
  tbt::check_map<half, float>("cast<f16>", cast<half>(_1), [](float a, float) { return double(float(half(a))); }, -6e4,
                              6e4, 0, 0, 1);
  tbt::check_map<float, half>("cast<f32> from f16", cast<float>(_1), [](half a, half) { return double(float(a)); }, -6e4,
                              6e4, 0, 0, 1);
  tbt::check_map<bool, float>("cast<bool>", cast<bool>(_1), [](float a, float) { return double(a != 0); }, -1, 1, 0, 0, 1);
  tbt::check_map<float, std::int32_t>("cast<f32> from i32", cast<float>(_1),
                                      [](std::int32_t a, std::int32_t) { return double(float(a)); }, -1e8, 1e8, 0, 0, 1);
  tbt::check_map<float, bool>("cast<f32> from bool", cast<float>(_1), [](bool a, bool) { return a ? 1.0 : 0.0; }, 0, 1,
                              0, 0, 1);
}
