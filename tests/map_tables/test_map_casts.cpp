// ops::map casts between float, integer and bool types.
#include "ops/map_harness.hpp"

namespace tb = tilebsp;
using namespace tb::expr;
using tb::half;
using tbt::rounded;

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
