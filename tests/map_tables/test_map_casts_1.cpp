// ops::map casts between float, integer and bool types. Half 1 of the table (the rest in test_map_casts_2.cpp): each
// half compiles in under 3 GB.
#include "ops/map_harness.hpp"

namespace tb = tilebsp;
using namespace tb::expr;
using tb::half;
using tbt::rounded;

TEST_CASE("casts between float, integer and bool types (1 of 2)") {
  tbt::check_map<std::int32_t, float>("cast<i32>", cast<std::int32_t>(_1), [](float a, float) { return double(std::int32_t(a)); },
                                      -1e6, 1e6, 0, 0, 1);
  tbt::check_map<std::uint32_t, float>("cast<u32>", cast<std::uint32_t>(_1),
                                       [](float a, float) { return double(std::uint32_t(a)); }, 0, 1e6, 0, 0, 1);
  tbt::check_map<half, float>("cast<f16>", cast<half>(_1), [](float a, float) { return double(float(half(a))); }, -6e4,
                              6e4, 0, 0, 1);
  tbt::check_map<float, half>("cast<f32> from f16", cast<float>(_1), [](half a, half) { return double(float(a)); }, -6e4,
                              6e4, 0, 0, 1);
}
