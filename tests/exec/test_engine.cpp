// Engine: control flow, streams, host callbacks, errors at run time, staging, profiles.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tb = tilebsp;

TEST_CASE("repeat, repeat_while and if_ follow the flag and counters") {
  tb::Graph g{tb::targets::tiny(2)};
  auto n = g.add_variable<std::int32_t>({1}, "n");
  auto more = g.add_variable<bool>({1}, "more");
  auto x = g.add_variable<float>({4}, "x"), one = g.add_constant<float>({4}, 1.0f, "one");
  for (auto const& t : {n, more, x, one}) g.set_tile_mapping(t, 1);
  auto step = g.add_compute_set("count"), inc = g.add_compute_set("inc");
  g.add_vertex<tbt::CountDown>(step, 1, n, more);
  g.add_vertex<tbt::Axpy>(inc, 1, one, x, 1.0f);
  auto prog = tb::seq(tb::repeat_while(more, tb::seq(tb::execute(step), tb::execute(inc))),
                      tb::repeat(3, tb::execute(inc)),
                      tb::if_(more, tb::repeat(100, tb::execute(inc)), tb::execute(inc)));
  for (std::size_t threads : {1, 2}) {
    tb::Engine e{tb::compile(g, prog), {.host_threads = threads}};
    e.write(n, std::vector<std::int32_t>{5});
    e.write(more, std::vector<bool>{true});
    e.run();
    // 5 loop iterations, 3 repeats, then the else branch: 9 increments.
    CHECK(e.read<float>(x) == std::vector<float>(4, 9.0f));
    CHECK(e.read<std::int32_t>(n)[0] == 0);
    e.write(n, std::vector<std::int32_t>{0});
    e.write(more, std::vector<bool>{false});
    e.write(x, std::vector<float>(4, 0.0f));
    e.run();
    CHECK(e.read<float>(x) == std::vector<float>(4, 4.0f));  // no loop, 3 repeats, else branch
    auto p = e.profile();
    CHECK(p.programs[0].size() == e.executable().schedule().programs[0].code.size());
  }
}

TEST_CASE("repeat(0) skips its body") {
  tb::Graph g{tb::targets::tiny(1)};
  auto x = g.add_variable<float>({1}, "x"), one = g.add_constant<float>({1}, 1.0f, "one");
  g.set_tile_mapping(x, 0);
  g.set_tile_mapping(one, 0);
  auto inc = g.add_compute_set("inc");
  g.add_vertex<tbt::Axpy>(inc, 0, one, x, 1.0f);
  tb::Engine e{tb::compile(g, tb::seq(tb::repeat(0, tb::execute(inc)), tb::repeat(2, tb::repeat(3, tb::execute(inc)))))};
  e.run();
  CHECK(e.read<float>(x)[0] == 6.0f);
}

TEST_CASE("streams: circular buffers, callbacks, exhaustion and unconnected FIFOs") {
  tb::Graph g{tb::targets::tiny(2)};
  auto x = g.add_variable<float>({2}, "x");
  tb::map_linearly(g, x);
  auto in = g.add_host_to_device_fifo<float>("in", 2);
  auto out = g.add_device_to_host_fifo<float>("out", 2);
  auto prog = tb::repeat(3, tb::seq(tb::stream_in(in, x), tb::stream_out(x.reverse(0), out)));
  tb::Engine e{tb::compile(g, prog), {.host_threads = 2}};
  CHECK_THROWS_WITH_AS(e.run(), "run: program 0 streams through FIFO 'in', which is not connected (Engine::connect)",
                       tb::stream_error);
  std::vector<float> feed{1, 2, 3, 4};  // two transfers, reused circularly
  std::vector<float> got;
  e.connect(in, feed);
  e.connect<float>(out, [&](std::span<float const> s) { got.insert(got.end(), s.begin(), s.end()); });
  e.run();
  CHECK(got == std::vector<float>{2, 1, 4, 3, 2, 1});
  // Consumed once: the fourth transfer finds the buffer exhausted.
  std::vector<float> once{1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> sink(2);
  e.connect(in, once, false);
  e.connect(out, sink);
  e.run();
  CHECK(sink == std::vector<float>{6, 5});
  CHECK_THROWS_WITH_AS(e.run(), "stream_in: FIFO 'in' is exhausted after 4 transfers", tb::stream_error);
  // An infeed callback that fills each transfer.
  float next = 10;
  e.connect<float>(in, [&](std::span<float> s) {
    for (auto& v : s) v = next++;
  });
  e.run();
  CHECK(sink == std::vector<float>{15, 14});
  std::vector<float> odd(3);
  CHECK_THROWS_AS(e.connect(in, odd), tb::stream_error);
  std::vector<std::int32_t> ints(2);
  CHECK_THROWS_AS(e.connect(in, ints), tb::type_error);
}

TEST_CASE("prefetching infeeds: order kept, one call ahead within run, errors at the transfer that needs them") {
  for (std::size_t threads : {1u, 3u}) {
    tb::Graph g{tb::targets::tiny(2)};
    auto x = g.add_variable<float>({2}, "x");
    tb::map_linearly(g, x);
    auto in = g.add_host_to_device_fifo<float>("in", 2);
    auto out = g.add_device_to_host_fifo<float>("out", 2);
    tb::Engine e{tb::compile(g, tb::repeat(3, tb::seq(tb::stream_in(in, x), tb::stream_out(x, out)))), {.host_threads = threads}};
    std::vector<float> got;
    int calls = 0;
    e.connect<float>(in, [&](std::span<float> s) {
      for (auto& v : s) v = static_cast<float>(calls);
      if (++calls == 6) throw std::runtime_error("no more images");
    }, {.prefetch = true});
    e.connect<float>(out, [&](std::span<float const> s) { got.insert(got.end(), s.begin(), s.end()); });
    e.run();
    CHECK(got == std::vector<float>{0, 0, 1, 1, 2, 2});
    CHECK(calls == 4);  // one transfer ahead, finished before run returned
    got.clear();
    // The fifth call fills the second transfer of this run; the sixth throws, and the third transfer needs it.
    CHECK_THROWS_WITH(e.run(), "no more images");
    CHECK(got == std::vector<float>{3, 3, 4, 4});
    CHECK_THROWS_WITH_AS(e.connect<float>(out, [](std::span<float const>) {}, {.prefetch = true}),
                         "connect: prefetch applies to infeeds; FIFO 'out' is an outfeed", tb::stream_error);
  }
}

TEST_CASE("host callbacks read and write tensors; their exceptions surface from run") {
  tb::Graph g{tb::targets::tiny(2)};
  auto x = g.add_variable<float>({4}, "x");
  tb::map_linearly(g, x);
  int calls = 0;
  auto prog = tb::repeat(2, tb::host([&](tb::HostContext& h) {
    auto v = h.read<float>(x);
    for (auto& e : v) e += 1;
    h.write(x, v);
    ++calls;
  }));
  auto boom = tb::seq(tb::host([] {}), tb::host([]() { throw std::runtime_error("boom"); }), tb::sync());
  tb::Engine e{tb::compile(g, prog, boom), {.host_threads = 3}};
  e.run(0);
  CHECK(calls == 2);
  CHECK(e.read<float>(x) == std::vector<float>(4, 2.0f));
  CHECK_THROWS_WITH_AS(e.run(1), "boom", std::runtime_error);
  e.run(0);  // the engine is still usable
  CHECK(e.read<float>(x) == std::vector<float>(4, 4.0f));
  CHECK_THROWS_WITH_AS(e.run(2), "run: program 2 out of range (the executable has 2 programs)", tb::index_error);
}

namespace {
struct Throwing {
  BOOST_HANA_DEFINE_STRUCT(Throwing, (tb::input<float>, x));
  void compute() {
    if (x[0] < 0) throw tb::error("negative input");
  }
};
}  // namespace

TEST_CASE("an exception in a vertex on any thread stops the run cleanly") {
  tb::Graph g{tb::targets::tiny(8)};
  auto x = g.add_variable<float>({8}, "x");
  tb::map_linearly(g, x);
  auto cs = g.add_compute_set("check");
  for (std::size_t t = 0; t < 8; ++t) g.add_vertex<Throwing>(cs, t, x.slice(t, t + 1));
  tb::Engine e{tb::compile(g, tb::repeat(10, tb::execute(cs))), {.host_threads = 4}};
  e.run();
  e.write(x, std::vector<float>{0, 0, 0, 0, 0, 0, 0, -1});
  CHECK_THROWS_WITH_AS(e.run(), "negative input", tb::error);
  e.write(x, std::vector<float>(8, 0.0f));
  CHECK_NOTHROW(e.run());
}

TEST_CASE("non-contiguous fields are gathered and scattered; overlapping copies are staged") {
  tb::Graph g{tb::targets::tiny(1)};
  auto m = g.add_variable<float>({3, 4}, "m"), t = g.add_variable<float>({4, 3}, "t");
  g.set_tile_mapping(m, 0);
  g.set_tile_mapping(t, 0);
  auto cs = g.add_compute_set("transpose");
  g.add_vertex<tbt::Copy>(cs, 0, m.flatten(), t.transpose().flatten());  // scatter into a transposed view
  auto v = g.add_variable<float>({6}, "v");
  g.set_tile_mapping(v, 0);
  // Shift v right by one within itself: source and destination overlap, so the exchange is staged.
  tb::Engine e{tb::compile(g, tb::seq(tb::execute(cs), tb::copy(v.slice(0, 5), v.slice(1, 6))))};
  std::vector<float> in(12);
  for (std::size_t i = 0; i < 12; ++i) in[i] = static_cast<float>(i);
  e.write(m, in);
  e.write(v, std::vector<float>{1, 2, 3, 4, 5, 6});
  e.run();
  CHECK(e.read<float>(t) == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  CHECK(e.read<float>(v) == std::vector<float>{1, 1, 2, 3, 4, 5});
}

TEST_CASE("profile: summary text and JSON") {
  tb::Graph g{tb::targets::tiny(4)};
  auto a = g.add_variable<float>({64}, "a"), b = g.add_variable<float>({64}, "b");
  tb::map_linearly(g, a);
  tb::map_linearly(g, b);
  auto cs = g.add_compute_set("axpy");
  for (auto const& [tile, r] : g.tile_mapping(b)) g.add_vertex<tbt::Axpy>(cs, tile, a.slice(r), b.slice(r), 1.0f);
  tb::Engine e{tb::compile(g, tb::repeat(5, tb::seq(tb::execute(cs), tb::copy(b, a)))), {.host_threads = 2, .profiling = true}};
  e.run();
  auto p = e.profile();
  CHECK(p.estimated_cycles() > 0);
  CHECK(p.host_ns() > 0);
  auto s = tb::report::summary(p);
  CHECK(s.find("compute set 'axpy' + exchange 256 B") != std::string::npos);
  CHECK(s.find("tiles used") != std::string::npos);
  std::string const path = "tilebsp_profile_test.json";
  tb::report::write_json(p, path);
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  CHECK(ss.str().find("\"executions\": 5") != std::string::npos);
  CHECK(ss.str().find("\"memory\": [[") != std::string::npos);
  std::remove(path.c_str());
  CHECK_THROWS_AS(tb::report::write_json(p, "/nonexistent-dir/x.json"), tb::error);
}

namespace {
/// How often the profile says the steps labelled `label` (or, with `prefix`, starting with it) ran.
std::size_t executions(tb::Profile const& p, std::string const& label, bool prefix = false) {
  std::size_t n = 0;
  for (auto const& step : p.programs[0])
    n += (prefix ? step.label.rfind(label, 0) == 0 : step.label == label) ? step.executions : 0;
  return n;
}
/// A host kernel adding `by` to every element of x (8 floats), each thread its share.
tb::HostKernel add_on_host(tb::Tensor const& x, float by) {
  auto const var = x.affine()->var;
  return {[var, by](tb::HostBinding const& at) -> tb::HostTask {
    auto* p = reinterpret_cast<float*>(at(var));
    return [p, by](unsigned t, unsigned threads) {
      for (std::size_t i = 8 * t / threads; i < 8 * (t + 1) / threads; ++i) p[i] += by;
    };
  }};
}
}  // namespace

TEST_CASE("a host path runs its task in place of its body, which still defines the model") {
  tb::Graph g{tb::targets::tiny(2)};
  auto x = g.add_variable<float>({8}, "x"), y = g.add_variable<float>({8}, "y");
  auto one = g.add_constant<float>({8}, 1.0f, "one");
  for (auto const& t : {x, y, one}) tb::map_linearly(g, t);
  auto inc = g.add_compute_set("inc"), again = g.add_compute_set("again");
  for (auto const& cs : {inc, again})
    for (auto const& [tile, iv] : g.tile_mapping(x))
      g.add_vertex<tbt::Axpy>(cs, tile, one.slice(iv.begin, iv.end), x.slice(iv.begin, iv.end), 1.0f);
  // A body of two compute sets and a copy into a temporary-like variable; the task does what the body does to x.
  auto const body = tb::seq(tb::execute(inc), tb::copy(x, y), tb::execute(again));
  // The copy after the span reads x as the body left it: it must not join the body's last superstep (skipped when
  // the task runs).
  auto const prog = tb::seq(tb::repeat(3, tb::host_path("add two", add_on_host(x, 2.0f), body)), tb::copy(x, y));
  auto const exe = tb::compile(g, prog);
  for (std::size_t threads : {1, 2, 3, 7})
    for (bool host : {true, false}) {
      CAPTURE(threads);
      CAPTURE(host);
      tb::Engine e{exe, {.host_threads = threads, .profiling = true, .host_kernels = host}};
      e.run();
      CHECK(e.read<float>(x) == std::vector<float>(8, 6.0f));
      CHECK(e.read<float>(y) == std::vector<float>(8, 6.0f));
      auto const profile = e.profile();
      std::uint64_t cycles = 0;  // estimated from the body either way
      for (auto const& step : profile.programs[0]) cycles += step.kind == "superstep" ? step.est_cycles : 0;
      CHECK(cycles > 0);
      // The task runs on the span's own step, which takes its host time; the body's steps count as run in the
      // model either way (their estimated cycles), but take host time only when they run.
      CHECK(executions(profile, "host path 'add two'") == (host ? 3 : 0));
      CHECK(executions(profile, "host path 'add two' (body runs)") == (host ? 0 : 3));
      CHECK(executions(profile, "compute set 'inc'", true) == 3);
      std::uint64_t body_ns = 0, path_ns = 0;
      for (auto const& step : profile.programs[0]) {
        if (step.label.rfind("compute set", 0) == 0) body_ns += step.host_ns;  // the body's (not the last copy)
        if (step.kind == "host_path") path_ns += step.host_ns;
      }
      CHECK((host ? body_ns == 0 && path_ns > 0 : body_ns > 0));
    }
  // A kernel whose bind() gives no task leaves the body to run; an empty kernel lowers to the body alone.
  tb::Engine none{tb::compile(g, tb::host_path("none", {[](tb::HostBinding const&) { return tb::HostTask{}; }},
                                               tb::execute(inc))),
                  {.host_threads = 2}};
  none.run();
  CHECK(none.read<float>(x) == std::vector<float>(8, 1.0f));
  auto const plain = tb::compile(g, tb::host_path("empty", {}, tb::execute(inc)));
  CHECK(plain.schedule().programs[0].code.size() == 1);
  CHECK(plain.schedule().host_paths.empty());
  // A body with control flow cannot be replaced by one task: the model could not count its steps.
  CHECK_THROWS_WITH_AS(tb::compile(g, tb::host_path("looped", add_on_host(x, 2.0f), tb::repeat(2, tb::execute(inc)))),
                       "host_path: the body of 'looped' is not straight-line supersteps (it has a repeat, branch, "
                       "stream, host callback, collective or host path)",
                       tb::error);
}

TEST_CASE("host kernels see a write counter for each variable only the host writes") {
  // host_writes: a counter for each variable only the host writes, bumped by Engine::write and host callbacks;
  // none for what a step writes (compute sets, copies, input streams).
  tb::Graph h{tb::targets::tiny(2)};
  auto w = h.add_variable<float>({8}, "w"), y = h.add_variable<float>({8}, "y"), s = h.add_variable<float>({8}, "s");
  auto z = h.add_variable<float>({8}, "z"), k = h.add_constant<float>({8}, 2.0f, "k");
  for (auto const& v : {w, y, s, z}) tb::map_linearly(h, v);
  tb::map_linearly(h, k);
  auto in = h.add_host_to_device_fifo<float>("in", 8);
  auto acs = h.add_compute_set("axpy");
  for (auto const& [tile, iv] : h.tile_mapping(y))
    h.add_vertex<tbt::Axpy>(acs, tile, w.slice(iv.begin, iv.end), y.slice(iv.begin, iv.end), 1.0f);
  std::vector<std::uint64_t const*> counters;
  tb::HostKernel const probe{[&](tb::HostBinding const& at) -> tb::HostTask {
    for (auto const& v : {w, y, s, z, k}) counters.push_back(at.host_writes(v.affine()->var));
    return {};  // the body runs
  }};
  auto prog = tb::seq(tb::host_path("probe", probe, tb::execute(acs)), tb::copy(w, s), tb::stream_in(in, z),
                      tb::host([&](tb::HostContext& c) { c.write(w, std::vector<float>(8, 1.0f)); }));
  tb::Engine he{tb::compile(h, prog), {.host_threads = 2}};
  REQUIRE(counters.size() == 5);
  CHECK(counters[1] == nullptr);  // y: the compute set
  CHECK(counters[2] == nullptr);  // s: a copy
  CHECK(counters[3] == nullptr);  // z: an input stream
  REQUIRE(counters[0] != nullptr);
  REQUIRE(counters[4] != nullptr);
  std::uint64_t const w0 = *counters[0], k0 = *counters[4];
  he.write(w, std::vector<float>(8, 0.5f));
  CHECK(*counters[0] == w0 + 1);
  std::vector<float> feed(8, 3.0f);
  he.connect(in, feed);
  he.write(y, std::vector<float>(8, 0.0f));
  he.run();  // the callback writes w once more
  CHECK(*counters[0] == w0 + 2);
  CHECK(*counters[4] == k0);  // a constant never changes
  CHECK(he.read<float>(y) == std::vector<float>(8, 0.5f));
}

TEST_CASE("variables start zero whatever their size, constants keep their values, and engines come and go") {
  // 1 MiB and more are anonymous mappings (huge pages from 2 MiB), smaller ones heap buffers: the same contract.
  tb::Graph g{tb::targets::tiny(4, 4 * 1024 * 1024)};
  std::vector<tb::Tensor> vars;
  for (std::size_t n : {16u, 300000u, 700000u, 1000000u})  // 64 B, ~1.1 MiB, ~2.7 MiB, ~3.8 MiB of f32
    vars.push_back(g.add_variable<float>({n}, "v" + std::to_string(n)));
  auto c = g.add_constant<float>({600000}, 2.5f, "c");
  for (auto const& t : vars) tb::map_linearly(g, t);
  tb::map_linearly(g, c);
  auto const exe = tb::compile(g, {.allow_out_of_memory = true}, tb::Sequence{});
  for (int round = 0; round < 3; ++round) {
    tb::Engine e{exe, {.host_threads = 2}};
    for (auto const& t : vars) {
      auto const v = e.read<float>(t);
      CHECK(std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; }));
      std::vector<float> w(v.size());
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 1000) + static_cast<float>(round);
      e.write(t, w);
      CHECK(e.read<float>(t) == w);
    }
    auto const cv = e.read<float>(c);
    CHECK(std::all_of(cv.begin(), cv.end(), [](float x) { return x == 2.5f; }));
  }
}
