// ops::map on i32, u32 and bool: unsigned order, division that never traps, logic and select on bool.
#include "ops/map_harness.hpp"

#include <limits>

namespace tb = tilebsp;
using namespace tb::expr;

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
