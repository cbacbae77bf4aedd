// Vertex reflection: fields in declaration order, params, input lists, type checks, cycle estimates.
#include "helpers.hpp"
#include "program/same_executable.hpp"

#include <doctest/doctest.h>

#include <memory>
#include <utility>

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

TEST_CASE("add_vertices: records made on the build threads, added in order; the lowest failing index's error") {
  // 2,000 vertices, each copying element i of x to element i of y on tile i % 4, then a map over every tile of
  // an IPU (1,472 vertices, one per tile) and a K-splitting matmul with its reduction stage: the same graph for 1 to 8 threads.
  auto build = [](std::size_t threads) {
    auto g = std::make_unique<tb::Graph>(tb::targets::ipu_mk2());
    g->set_build_threads(threads);
    CHECK(g->build_threads() == threads);
    auto x = g->add_variable<float>({2000}, "x"), y = g->add_variable<float>({2000}, "y");
    for (std::size_t i = 0; i < 2000; ++i) g->set_tile_mapping(x.slice(i, i + 1), i % 4), g->set_tile_mapping(y.slice(i, i + 1), i % 4);
    auto cs = g->add_compute_set("copies");
    tb::vertex::add_vertices(*g, 2000, [&](std::size_t i) {
      return tb::vertex::record<tbt::Copy>(*g, cs, i % 4, x.slice(i, i + 1), y.slice(i, i + 1));
    });
    tb::Sequence prog;
    prog.add(tb::execute(cs));
    auto big = g->add_variable<float>({1472 * 6 * 16}, "big");
    tb::map_linearly(*g, big);
    using namespace tb::expr;
    static_cast<void>(tb::ops::map(*g, prog, _1 * 2.0f + 1.0f, big));
    auto a = g->add_variable<float>({48, 3000}, "a"), b = g->add_variable<float>({3000, 40}, "b");
    tb::map_linearly(*g, a);
    tb::map_linearly(*g, b);
    static_cast<void>(tb::ops::matmul(*g, prog, a, b, {.available_memory_proportion = 0.01}));
    return std::pair{std::move(g), std::move(prog)};
  };
  auto [one, prog1] = build(1);
  auto const& v1 = one->impl().vertices;
  REQUIRE(v1.size() > 2000 + 1472);
  for (std::size_t i = 0; i < 2000; ++i) {
    CHECK(v1[i].tile == i % 4);
    CHECK(v1[i].tensors[0].runs().front().start == static_cast<std::int64_t>(i));
  }
  auto const exe1 = tb::compile(*one, prog1);
  for (std::size_t threads : {2u, 3u, 8u}) {
    CAPTURE(threads);
    auto [g, prog] = build(threads);
    auto const& v = g->impl().vertices;
    REQUIRE(v.size() == v1.size());
    CHECK(g->impl().vertex_hash.first() == one->impl().vertex_hash.first());
    CHECK(g->impl().vertex_hash.second() == one->impl().vertex_hash.second());
    for (std::size_t i = 0; i < v.size(); ++i) {
      CHECK(v[i].ops == v1[i].ops);
      CHECK(v[i].tile == v1[i].tile);
      CHECK(v[i].compute_set == v1[i].compute_set);
      REQUIRE(v[i].tensors.size() == v1[i].tensors.size());
      for (std::size_t k = 0; k < v[i].tensors.size(); ++k) CHECK(v[i].tensors[k].runs().front().start == v1[i].tensors[k].runs().front().start);
    }
    tbt::check_same_executable(exe1, tb::compile(*g, prog));
  }

  // Errors: vertices 700 and 1500 are on a tile out of range; every thread count reports vertex 700's, and the
  // graph is left without any of the vertices.
  for (std::size_t threads : {1u, 2u, 5u}) {
    CAPTURE(threads);
    tb::Graph g{tb::targets::tiny(4)};
    g.set_build_threads(threads);
    auto x = g.add_variable<float>({2000}, "x");
    tb::map_linearly(g, x);
    auto cs = g.add_compute_set("bad");
    auto const tile_of = [](std::size_t i) -> std::size_t { return i == 700 ? 9 : i == 1500 ? 11 : 0; };
    CHECK_THROWS_WITH_AS(tb::vertex::add_vertices(g, 2000, [&](std::size_t i) {
                           return tb::vertex::record<tbt::Copy>(g, cs, tile_of(i), x.slice(i, i + 1), x.slice(i, i + 1));
                         }),
                         "add_vertex: tile 9 out of range (this graph has 4 tiles)", tb::index_error);
    CHECK(g.impl().vertices.empty());
  }
}
