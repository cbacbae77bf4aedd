// Strided view fields (input_view / output_view / inout_view), fetch() connections and supervisor vertices.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <numeric>
#include <vector>

namespace tb = tilebsp;

namespace {
/// out(i, j) = k * in(i, j) + bias, any strides.
struct ScaleView {
  BOOST_HANA_DEFINE_STRUCT(ScaleView, (tb::input_view<float>, in), (tb::output_view<float>, out), (tb::param<float>, k));
  void compute() {
    for (std::size_t i = 0; i < out.dim(0); ++i)
      for (std::size_t j = 0; j < out.dim(1); ++j) out(i, j) = k * in(i, j);
  }
};
/// Sums a rank-3 view over its first dimension into a rank-2 view (inout: adds to what is there).
struct SumPlanes {
  BOOST_HANA_DEFINE_STRUCT(SumPlanes, (tb::input_view<float, 3>, in), (tb::inout_view<float>, acc));
  static constexpr bool supervisor = true;
  void compute() {
    for (std::size_t p = 0; p < in.dim(0); ++p)
      for (std::size_t i = 0; i < acc.dim(0); ++i)
        for (std::size_t j = 0; j < acc.dim(1); ++j) acc(i, j) += in(p, i, j);
  }
  std::uint64_t cycle_estimate() const { return 1000; }
};
/// out = sum of in (a plain span input, possibly fetched).
struct Total {
  BOOST_HANA_DEFINE_STRUCT(Total, (tb::input<float>, in), (tb::output<float>, out));
  void compute() { out[0] = std::accumulate(in.begin(), in.end(), 0.0f); }
};
std::vector<float> iota(std::size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}
}  // namespace

TEST_CASE("view fields bind transposed blocks in place and write strided blocks") {
  tb::Graph g{tb::targets::tiny(1)};
  auto a = g.add_variable<float>({4, 6}, "a"), c = g.add_variable<float>({6, 4}, "c");
  g.set_tile_mapping(a, 0);
  g.set_tile_mapping(c, 0);
  auto cs = g.add_compute_set("scale");
  // c[1:5, 1:3] = 2 * a[1:3, 1:5]^T
  g.add_vertex<ScaleView>(cs, 0, a.slice({1, 1}, {3, 5}).transpose(), c.slice({1, 1}, {5, 3}), 2.0f);
  auto exe = tb::compile(g, tb::execute(cs));
  CHECK(exe.schedule().compute_sets[0].vertices[0].staging.empty());  // affine views bind in place
  tb::Engine e{std::move(exe), {.host_threads = 1}};
  e.write(a, iota(24));
  e.write(c, std::vector<float>(24, -1.0f));
  e.run();
  auto const out = e.read<float>(c);
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      bool const inside = i >= 1 && i < 5 && j >= 1 && j < 3;
      CHECK(out[i * 4 + j] == (inside ? 2.0f * static_cast<float>(j * 6 + i) : -1.0f));
    }
}

TEST_CASE("a view over several variables is gathered and scattered around compute") {
  tb::Graph g{tb::targets::tiny(1)};
  auto a = g.add_variable<float>({2, 3}, "a"), b = g.add_variable<float>({2, 3}, "b");
  auto c = g.add_variable<float>({2, 3}, "c"), d = g.add_variable<float>({2, 3}, "d");
  for (auto const& t : {a, b, c, d}) g.set_tile_mapping(t, 0);
  auto cs = g.add_compute_set("scale");
  g.add_vertex<ScaleView>(cs, 0, tb::concat({a, b}).transpose(), tb::concat({c, d}, 1).reshape({3, 4}), 3.0f);
  auto exe = tb::compile(g, tb::execute(cs));
  CHECK(exe.schedule().compute_sets[0].vertices[0].staging.size() == 2);
  tb::Engine e{std::move(exe), {.host_threads = 1}};
  e.write(a, iota(6));
  e.write(b, std::vector<float>{10, 11, 12, 13, 14, 15});
  e.run();
  // concat({a, b}) is [[0 1 2] [3 4 5] [10 11 12] [13 14 15]]; its transpose row-major is 0 3 10 13 1 4 11 14 ...
  std::vector<float> const t{0, 3, 10, 13, 1, 4, 11, 14, 2, 5, 12, 15};
  // concat({c, d}, 1) is [[c0 c1 c2 d0 d1 d2] [c3 c4 c5 d3 d4 d5]]: written row-major as 3 x 4.
  std::vector<float> cv = e.read<float>(c), dv = e.read<float>(d);
  std::vector<float> const got{cv[0], cv[1], cv[2], dv[0], dv[1], dv[2], cv[3], cv[4], cv[5], dv[3], dv[4], dv[5]};
  for (std::size_t i = 0; i < 12; ++i) CHECK(got[i] == 3.0f * t[i]);
}

TEST_CASE("a view field connected to a tensor of another rank") {
  tb::Graph g{tb::targets::tiny(1)};
  auto a = g.add_variable<float>({24}, "a");
  g.set_tile_mapping(a, 0);
  auto cs = g.add_compute_set("scale");
  CHECK_THROWS_WITH_AS(g.add_vertex<ScaleView>(cs, 0, a, a.reshape({4, 6}), 1.0f),
                       "add_vertex<{anonymous}::ScaleView>: field 'in' is a rank-2 view but is connected to a tensor of "
                       "shape [24]",
                       tb::shape_error);
}

/// Compute set `cs`'s plan as the lowering makes it, with the fetched bytes each tile receives (compile() drops
/// those once it has accounted memory).
tilebsp::schedule::ComputeSetPlan lowered_plan(tilebsp::Graph const& g, tilebsp::ComputeSet cs) {
  tilebsp::schedule::Schedule s;
  s.graph = g.snapshot();
  tilebsp::Lowering l(*s.graph, s);
  l.begin_program();
  l.execute(cs);
  l.end_program();
  return s.compute_sets.at(0);
}

TEST_CASE("fetched inputs are read in place on the host and modelled as an exchange") {
  tb::Graph g{tb::targets::tiny(4, 4096)};
  auto x = g.add_variable<float>({100}, "x"), out = g.add_variable<float>({1}, "out");
  g.set_tile_mapping(x.slice(0, 60), 0);
  g.set_tile_mapping(x.slice(60, 100), 1);
  g.set_tile_mapping(out, 3);
  auto cs = g.add_compute_set("total");
  g.add_vertex<Total>(cs, 3, tb::fetch(x), out);
  auto exe = tb::compile(g, tb::execute(cs));
  auto const& plan = exe.schedule().compute_sets[0];
  CHECK(plan.fetch_bytes == 400);
  CHECK(plan.fetched_in.empty());  // accounted
  CHECK(lowered_plan(g, cs).fetched_in == std::vector<std::pair<std::uint32_t, std::uint64_t>>{{3, 400}});
  // Tile 3 receives 400 bytes (its busiest link: 400 B at 4 B/cycle).
  CHECK(plan.fetch_cycles == 100);
  CHECK(exe.memory()[3].peak_temporary == 400);
  CHECK(exe.memory()[0].peak_temporary == 0);
  auto const cycles = exe.schedule().programs[0].cycles[0];
  CHECK(cycles == plan.cycles + plan.fetch_cycles + 2 * tb::plan::detail::sync_cycles(g.target(), 1));
  tb::Engine e{std::move(exe), {.host_threads = 2}};
  e.write(x, iota(100));
  e.run();
  CHECK(e.read<float>(out)[0] == 4950.0f);
  auto const p = e.profile();
  CHECK(p.programs[0][0].exchange_bytes == 400);
  CHECK(p.programs[0][0].label == "fetch 400 B + compute set 'total'");
}

TEST_CASE("a fetched input overlapping an output of the same compute set is a write conflict") {
  tb::Graph g{tb::targets::tiny(2)};
  auto x = g.add_variable<float>({8}, "x");
  g.set_tile_mapping(x, 0);
  auto cs = g.add_compute_set("racy");
  auto o = g.add_variable<float>({1}, "o");
  g.set_tile_mapping(o, 1);
  g.add_vertex<Total>(cs, 1, tb::fetch(x), o);
  g.add_vertex<tbt::Copy>(cs, 0, x.slice(0, 4), x.slice(4, 8));
  CHECK_THROWS_WITH_AS(tb::compile(g, tb::execute(cs)),
                       "compute set 'racy': vertex {anonymous}::Total (tile 1) field 'in' reads element 4 of 'x', which "
                       "vertex tbt::Copy (tile 0) field 'out' writes in the same compute set",
                       tb::write_conflict_error);
}

TEST_CASE("supervisor vertices add their tile cycles; rank-3 views") {
  tb::Graph g{tb::targets::tiny(1)};
  auto p = g.add_variable<float>({3, 2, 2}, "planes"), acc = g.add_variable<float>({2, 2}, "acc");
  g.set_tile_mapping(p, 0);
  g.set_tile_mapping(acc, 0);
  auto cs = g.add_compute_set("sum");
  g.add_vertex<SumPlanes>(cs, 0, p, acc);
  auto exe = tb::compile(g, tb::execute(cs));
  CHECK(exe.schedule().compute_sets[0].cycles == tb::plan::detail::compute_set_overhead_cycles + 1000);
  tb::Engine e{std::move(exe), {.host_threads = 1}};
  e.write(p, iota(12));
  e.write(acc, std::vector<float>{1, 1, 1, 1});
  e.run();
  CHECK(e.read<float>(acc) == std::vector<float>{1 + 0 + 4 + 8, 1 + 1 + 5 + 9, 1 + 2 + 6 + 10, 1 + 3 + 7 + 11});
}

TEST_CASE("fetched strided and reversed inputs count the bytes each tile sends, piece by piece") {
  // x: 100 elements in pieces of 10 on tiles 0, 1, 2, 0, 1, 2, ... (piece i on tile i % 3). The vertex on tile 3
  // reads every element of x's transpose-like view [10, 10] -> column-major (stride 10: a strided run crossing
  // every piece), and the reversed x (stride -1).
  tb::Graph g{tb::targets::tiny(4, 4096)};
  auto x = g.add_variable<float>({100}, "x");
  auto out = g.add_variable<float>({1}, "out"), back = g.add_variable<float>({1}, "back");
  for (std::size_t i = 0; i < 10; ++i) g.set_tile_mapping(x.slice(10 * i, 10 * i + 10), i % 3);
  g.set_tile_mapping(out, 3);
  g.set_tile_mapping(back, 3);
  auto cs = g.add_compute_set("total");
  g.add_vertex<Total>(cs, 3, tb::fetch(x.reshape({10, 10}).transpose()), out);
  g.add_vertex<Total>(cs, 3, tb::fetch(x.reverse(0)), back);
  auto exe = tb::compile(g, tb::execute(cs));
  auto const& plan = exe.schedule().compute_sets[0];
  // Per view: tiles 0 (pieces 0, 3, 6, 9), 1 (1, 4, 7) and 2 (2, 5, 8) send 40, 30 and 30 elements.
  // Tile 3 receives them all (800 bytes at 4 B/cycle); the busiest sender, tile 0, sends 320.
  CHECK(lowered_plan(g, cs).fetched_in == std::vector<std::pair<std::uint32_t, std::uint64_t>>{{3, 800}});
  CHECK(plan.fetch_cycles == 200);
  CHECK(plan.fetch_bytes == 800);
  tb::Engine e{std::move(exe), {.host_threads = 2}};
  e.write(x, iota(100));
  e.run();
  CHECK(e.read<float>(out)[0] == 4950.0f);
  CHECK(e.read<float>(back)[0] == 4950.0f);
}
