// ops::map casts between float, integer and bool types. Half 2 of the table (the rest in test_map_casts_1.cpp): each
// half compiles in under 3 GB.
#include "ops/map_harness.hpp"

namespace tb = tilebsp;
using namespace tb::expr;
using tb::half;
using tbt::rounded;

TEST_CASE("casts between float, integer and bool types (2 of 2)") {
  tbt::check_map<bool, float>("cast<bool>", cast<bool>(_1), [](float a, float) { return double(a != 0); }, -1, 1, 0, 0, 1);
  tbt::check_map<float, std::int32_t>("cast<f32> from i32", cast<float>(_1),
                                      [](std::int32_t a, std::int32_t) { return double(float(a)); }, -1e8, 1e8, 0, 0, 1);
  tbt::check_map<float, bool>("cast<f32> from bool", cast<float>(_1), [](bool a, bool) { return a ? 1.0 : 0.0; }, 0, 1,
                              0, 0, 1);
}
