// Vertex reflection: fields in declaration order, params, input lists, type checks, cycle estimates.
#include "helpers.hpp"

#include <doctest/doctest.h>

namespace tb = tilebsp;

namespace {
struct Sum3 {
  BOOST_HANA_DEFINE_STRUCT(Sum3, (tb::input_list<float>, ins), (tb::output<float>, out), (tb::param<float>, bias));
  void compute() {
    for (std::size_t i = 0; i < out.size(); ++i) {
      float s = bias;
      for (auto in : ins) s += in[i];
      out[i] = s;
    }
  }
  std::uint64_t cycle_estimate() const { return 1000 + 10 * out.size(); }
};
struct Half2 {
  BOOST_HANA_DEFINE_STRUCT(Half2, (tb::input<tb::half>, in), (tb::output<tb::half>, out));
  void compute() {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = tb::half(2.0f * float(in[i]));
  }
};
}  // namespace

TEST_CASE("reflection: field count, names and kinds") {
  CHECK(tb::vertex::detail::num_fields<Sum3>() == 3);
  CHECK(tb::vertex::detail::field_name<Sum3, 0>() == "ins");
  CHECK(tb::vertex::detail::field_name<Sum3, 2>() == "bias");
  CHECK(tb::VertexLike<Sum3>);
  CHECK(tb::vertex::detail::type_name<Sum3>().find("Sum3") != std::string_view::npos);
}

TEST_CASE("input_list, params and the vertex's own cycle estimate") {
  tb::Graph g{tb::targets::tiny(2)};
  auto a = g.add_variable<float>({3}, "a"), b = g.add_variable<float>({3}, "b"), out = g.add_variable<float>({3}, "out");
  for (auto const& t : {a, b, out}) g.set_tile_mapping(t, 1);
  auto cs = g.add_compute_set("sum");
  g.add_vertex<Sum3>(cs, 1, std::vector<tb::Tensor>{a, b, a}, out, 0.5f);
  tb::Engine e{tb::compile(g, tb::execute(cs)), {.host_threads = 1}};
  e.write(a, std::vector<float>{1, 2, 3});
  e.write(b, std::vector<float>{10, 20, 30});
  e.run();
  CHECK(e.read<float>(out) == std::vector<float>{12.5f, 24.5f, 36.5f});
  auto const profile = e.profile();
  auto const& steps = profile.programs[0];
  REQUIRE(steps.size() == 1);
  // 6 workers x (1000 + 30) worker cycles + compute set overhead, plus one sync.
  CHECK(steps[0].est_cycles == 100 + 6 * 1030 + tb::targets::tiny(2).sync_cycles);
}

TEST_CASE("f16 fields see half storage") {
  tb::Graph g{tb::targets::tiny(1)};
  auto in = g.add_constant<tb::half>({2}, {tb::half(1.5f), tb::half(-3.0f)}, "in");
  auto out = g.add_variable<tb::half>({2}, "out");
  g.set_tile_mapping(in, 0);
  g.set_tile_mapping(out, 0);
  auto cs = g.add_compute_set("double");
  g.add_vertex<Half2>(cs, 0, in, out);
  tb::Engine e{tb::compile(g, tb::execute(cs)), {.host_threads = 1}};
  e.run();
  auto r = e.read<tb::half>(out);
  CHECK(float(r[0]) == 3.0f);
  CHECK(float(r[1]) == -6.0f);
}

TEST_CASE("add_vertex: runtime checks of element types, tiles and compute sets") {
  tb::Graph g{tb::targets::tiny(2)};
  auto f = g.add_variable<float>({2}, "f");
  auto i = g.add_variable<std::int32_t>({2}, "i");
  auto cs = g.add_compute_set("cs");
  CHECK_THROWS_WITH_AS(g.add_vertex<tbt::Add>(cs, 0, f, i, f),
                       "add_vertex<tbt::Add>: field 'b' is input<f32> but is connected to a i32 tensor", tb::type_error);
  CHECK_THROWS_WITH_AS(g.add_vertex<tbt::Add>(cs, 2, f, f, f), "add_vertex: tile 2 out of range (this graph has 2 tiles)",
                       tb::index_error);
  tb::Graph h{tb::targets::tiny(2)};
  auto other = h.add_compute_set("other");
  CHECK_THROWS_AS(g.add_vertex<tbt::Add>(other, 0, f, f, f), tb::error);
}
