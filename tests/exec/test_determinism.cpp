// Results are bitwise identical for 1, 2, 3 and 7 host threads.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

namespace tb = tilebsp;

namespace {
/// A float-rounding-sensitive stencil: out[i] = (l * 0.25 + c * 0.5 + r * 0.25) * 1.0001 - 1e-3 * c * c.
struct Stencil {
  BOOST_HANA_DEFINE_STRUCT(Stencil, (tb::input<float>, left), (tb::input<float>, mid), (tb::input<float>, right),
                           (tb::output<float>, out));
  void compute() {
    std::size_t const n = out.size();
    for (std::size_t i = 0; i < n; ++i) {
      float const l = i == 0 ? left[0] : mid[i - 1];
      float const r = i + 1 == n ? right[0] : mid[i + 1];
      out[i] = (l * 0.25f + mid[i] * 0.5f + r * 0.25f) * 1.0001f - 1e-3f * mid[i] * mid[i];
    }
  }
};

std::vector<float> run_stencil(std::size_t threads) {
  std::size_t const tiles = 37, per = 50, n = tiles * per;
  tb::Graph g{tb::targets::tiny(tiles)};
  auto x = g.add_variable<float>({n}, "x"), y = g.add_variable<float>({n}, "y");
  auto halo_l = g.add_variable<float>({tiles}, "halo_l"), halo_r = g.add_variable<float>({tiles}, "halo_r");
  tb::map_linearly(g, x);
  tb::map_linearly(g, y);
  tb::map_linearly(g, halo_l);
  tb::map_linearly(g, halo_r);
  auto cs = g.add_compute_set("stencil");
  tb::Sequence halos;
  for (std::size_t t = 0; t < tiles; ++t) {
    auto const lo = t * per, hi = lo + per;
    g.add_vertex<Stencil>(cs, t, halo_l.slice(t, t + 1), x.slice(lo, hi), halo_r.slice(t, t + 1), y.slice(lo, hi));
    halos.add(tb::copy(x.slice(lo == 0 ? n - 1 : lo - 1, lo == 0 ? n : lo), halo_l.slice(t, t + 1)));
    halos.add(tb::copy(x.slice(hi == n ? 0 : hi, hi == n ? 1 : hi + 1), halo_r.slice(t, t + 1)));
  }
  auto prog = tb::repeat(20, tb::seq(std::move(halos), tb::execute(cs), tb::copy(y, x)));
  tb::Engine e{tb::compile(g, prog), {.host_threads = threads}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> init(n);
  for (auto& v : init) v = d(rng);
  e.write(x, init);
  e.run();
  return e.read<float>(x);
}
}  // namespace

TEST_CASE("a multi-tile stencil with halo exchanges is bitwise identical for 1, 2, 3 and 7 host threads") {
  auto const ref = run_stencil(1);
  for (std::size_t threads : {2, 3, 7}) {
    auto const r = run_stencil(threads);
    REQUIRE(r.size() == ref.size());
    CHECK(std::memcmp(r.data(), ref.data(), r.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("UnitQueue: every unit runs once per run, on any thread, over repeated runs and after a throw") {
  for (unsigned made_for : {1u, 2u, 3u, 7u}) {
    tb::ops::detail::UnitQueue q(made_for);
    for (unsigned threads : {1u, 2u, 3u, 7u}) {  // runs on as many threads as it was made for, and on others
      for (std::size_t units : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{64}}) {
        for (int run = 0; run < 3; ++run) {
          std::vector<std::atomic<int>> hits(units);
          std::vector<std::thread> team;
          for (unsigned t = 0; t < threads; ++t)
            team.emplace_back([&, t] { q.run(units, t, threads, [&](std::size_t u) { hits[u].fetch_add(1); }); });
          for (auto& th : team) th.join();
          for (auto const& h : hits) CHECK(h.load() == 1);
        }
      }
    }
  }
  // A unit that throws: the thread stops, the queue still resets for the next run.
  tb::ops::detail::UnitQueue q;
  CHECK_THROWS_AS(q.run(4, 0, 1, [](std::size_t u) {
    if (u == 1) throw std::runtime_error("unit 1");
  }), std::runtime_error);
  std::vector<std::size_t> seen;
  q.run(3, 0, 1, [&](std::size_t u) { seen.push_back(u); });
  CHECK(seen == std::vector<std::size_t>{0, 1, 2});
}

TEST_CASE("UnitQueue: a thread takes its own share first, then what the others left") {
  // Thread 1 of 3 comes first and alone: its share (units 3..5 of 10), then thread 2's (6..9), then thread 0's.
  tb::ops::detail::UnitQueue q(3);
  std::vector<std::size_t> first, later;
  q.run(10, 1, 3, [&](std::size_t u) { first.push_back(u); });
  q.run(10, 0, 3, [&](std::size_t u) { later.push_back(u); });
  q.run(10, 2, 3, [&](std::size_t u) { later.push_back(u); });
  CHECK(first == std::vector<std::size_t>{3, 4, 5, 6, 7, 8, 9, 0, 1, 2});
  CHECK(later.empty());
  // The run is over: the next one starts again from the shares.
  std::vector<std::size_t> again;
  q.run(10, 2, 3, [&](std::size_t u) { again.push_back(u); });
  CHECK(again == std::vector<std::size_t>{6, 7, 8, 9, 0, 1, 2, 3, 4, 5});
  q.run(10, 0, 3, [](std::size_t) {});
  q.run(10, 1, 3, [](std::size_t) {});
  // A run on another number of threads than the queue was made for: first come first served, in order.
  std::vector<std::size_t> other;
  q.run(4, 1, 2, [&](std::size_t u) { other.push_back(u); });
  CHECK(other == std::vector<std::size_t>{0, 1, 2, 3});
}
