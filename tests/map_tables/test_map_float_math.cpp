// ops::map on f32 and f16: exp, log, tanh, erf, sigmoid, rsqrt and pow against double references.
#include "ops/map_harness.hpp"

namespace tb = tilebsp;
using namespace tb::expr;
using tb::half;
using tbt::rounded;

TEST_CASE_TEMPLATE("transcendental float operators", T, float, half) {
  double const rel = std::is_same_v<T, half> ? 2e-3 : 4e-6, abs = std::is_same_v<T, half> ? 1e-3 : 1e-7;
  tbt::check_map<T, T>("exp", exp(_1), [](T a, T) { return std::exp(double(float(a))); }, -10, 10, rel, abs, 1);  // e^10 < 65504
  tbt::check_map<T, T>("log", log(_1), [](T a, T) { return std::log(double(float(a))); }, 1e-3, 1e3, rel, abs, 1);
  tbt::check_map<T, T>("tanh", tanh(_1), [](T a, T) { return std::tanh(double(float(a))); }, -6, 6, rel, abs, 1);
  tbt::check_map<T, T>("erf", erf(_1), [](T a, T) { return std::erf(double(float(a))); }, -5, 5, rel, abs, 1);
  tbt::check_map<T, T>("sigmoid", sigmoid(_1), [](T a, T) { return 1 / (1 + std::exp(-double(float(a)))); }, -12, 12,
                       rel, abs, 1);
  tbt::check_map<T, T>("rsqrt", rsqrt(_1), [](T a, T) { return 1 / std::sqrt(double(float(a))); }, 1e-2, 1e3, rel, abs, 1);
  tbt::check_map<T, T>("pow", pow(_1, _2), [](T a, T b) { return std::pow(double(float(a)), double(float(b))); }, 0.1, 4,
                       rel * 4, abs, 2);
}
