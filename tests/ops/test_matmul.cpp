// ops::matmul / matmul_acc against a double-precision reference (PopLibs-style tolerances), plan_matmul's
// availableMemoryProportion contract, errors, and determinism across host thread counts.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace tb = tilebsp;

namespace {

using tbt::values;

struct Case {
  std::size_t groups, m, n, k;
  bool ta = false, tb = false;  ///< operand stored transposed (the op sees a transpose view)
};

/// Builds c = a x b (or c += alpha * a x b) on `target`, runs it, and checks every element against double math:
/// exact for +-1 data, else relative 0.01 / absolute 1e-6 (f32 results) or 0.1 / 1e-5 (f16 results).
template <class TI, class TO = TI>
void check(tb::Target const& target, Case cs, bool ones, tb::MatmulOptions o = {}, bool acc = false,
           std::size_t threads = 2) {
  std::string const label = target.name + " " + std::to_string(cs.groups) + "x[" + std::to_string(cs.m) + "x" +
                            std::to_string(cs.k) + " * " + std::to_string(cs.k) + "x" + std::to_string(cs.n) + "]" +
                            (cs.ta ? " A^T" : "") + (cs.tb ? " B^T" : "") + (ones ? " +-1" : "") + " amp " +
                            std::to_string(o.available_memory_proportion) + (acc ? " acc" : "");
  INFO(label);
  tb::Graph g{target};
  bool const grouped = cs.groups > 1;
  auto shape = [&](std::size_t r, std::size_t c) { return grouped ? tb::Shape{cs.groups, r, c} : tb::Shape{r, c}; };
  auto swap = [&](tb::Tensor const& t) { return grouped ? t.dimshuffle({0, 2, 1}) : t.transpose(); };
  auto as = g.add_variable<TI>(cs.ta ? shape(cs.k, cs.m) : shape(cs.m, cs.k), "a");
  auto bs = g.add_variable<TI>(cs.tb ? shape(cs.n, cs.k) : shape(cs.k, cs.n), "b");
  tb::map_linearly(g, as);
  tb::map_linearly(g, bs);
  tb::Tensor const a = cs.ta ? swap(as) : as, b = cs.tb ? swap(bs) : bs;
  tb::Sequence prog;
  tb::Tensor c;
  float const alpha = -0.5f;
  if (acc) {
    c = g.add_variable<TO>(shape(cs.m, cs.n), "c");
    tb::map_linearly(g, c);
    tb::ops::matmul_acc(g, prog, c, alpha, a, b, o);
  } else {
    o.output_type = tb::element_type_v<TO>;
    c = tb::ops::matmul(g, prog, a, b, o);
  }
  auto const exe = tb::compile(g, prog);
  auto const av = values<TI>(as.num_elements(), ones, 1), bv = values<TI>(bs.num_elements(), ones, 2);
  auto const c0 = values<TO>(c.num_elements(), ones, 3);
  auto const run = [&](bool host_kernels) {
    tb::Engine e{exe, {.host_threads = threads, .host_kernels = host_kernels}};
    if (!av.empty()) e.write(as, av);
    if (!bv.empty()) e.write(bs, bv);
    if (acc && !c0.empty()) e.write(c, c0);
    e.run();
    return e.read<TO>(c);
  };
  auto const got = run(true);
  // The host kernel's contract: bitwise what the vertices compute.
  auto const by_vertices = run(false);
  CHECK(std::memcmp(got.data(), by_vertices.data(), got.size() * sizeof(TO)) == 0);
  bool const f16 = std::is_same_v<TO, tb::half>;
  std::size_t bad = 0;
  for (std::size_t gi = 0; gi < cs.groups; ++gi)
    for (std::size_t i = 0; i < cs.m; ++i)
      for (std::size_t j = 0; j < cs.n; ++j) {
        double s = 0;
        for (std::size_t p = 0; p < cs.k; ++p) {
          std::size_t const ai = gi * cs.m * cs.k + (cs.ta ? p * cs.m + i : i * cs.k + p);
          std::size_t const bi = gi * cs.k * cs.n + (cs.tb ? j * cs.k + p : p * cs.n + j);
          s += double(static_cast<float>(av[ai])) * double(static_cast<float>(bv[bi]));
        }
        std::size_t const ci = (gi * cs.m + i) * cs.n + j;
        double const want = acc ? double(static_cast<float>(c0[ci])) + alpha * s : s;
        double const v = static_cast<float>(got[ci]);
        bool const ok = ones ? v == want : std::abs(v - want) <= (f16 ? 1e-5 : 1e-6) + (f16 ? 0.1 : 0.01) * std::abs(want);
        bad += !ok;
      }
  CHECK(bad == 0);
}

std::vector<tb::Target> targets() { return {tb::targets::tiny(16, 256 * 1024), tb::targets::tiny(3, 1 << 20)}; }

}  // namespace

TEST_CASE("matmul: the issue's shapes, f32, exact for +-1 data") {
  for (auto const& t : targets())
    for (bool ones : {true, false}) {
      check<float>(t, {1, 1, 1, 1000}, ones);
      check<float>(t, {1, 1, 1000, 1}, ones);
      check<float>(t, {1, 1, 1, 3}, ones);
      check<float>(t, {5, 10, 30, 20}, ones);
      check<float>(t, {1, 100, 100, 100}, ones);
      check<float>(t, {1, 3, 5, 100}, ones);
      for (bool ta : {false, true})
        for (bool tb_ : {false, true}) check<float>(t, {1, 40, 38, 39, ta, tb_}, ones);
    }
  check<float>(tb::targets::tiny(64, 256 * 1024), {1, 1024, 100, 256}, false);
  check<float>(tb::targets::ipu_mk2(1), {1, 1024, 100, 256}, true);
}

TEST_CASE("matmul: f16 operands with f32 or f16 partials and results") {
  auto const t = tb::targets::tiny(16, 256 * 1024);
  for (bool ones : {true, false}) {
    check<tb::half>(t, {1, 40, 38, 39, true, false}, ones);
    check<tb::half, float>(t, {5, 10, 30, 20}, ones);
    check<tb::half>(t, {1, 100, 100, 100}, ones, {.partials = tb::f16});
    check<tb::half>(t, {1, 3, 5, 100}, ones, {.available_memory_proportion = 0.01, .partials = tb::f16});
  }
}

TEST_CASE("matmul: serial K steps and cross-tile reductions at low availableMemoryProportion") {
  auto const t = tb::targets::tiny(8, 64 * 1024);
  for (double amp : {0.0, 0.05, 0.1, 0.3}) {
    check<float>(t, {1, 200, 64, 300}, false, {.available_memory_proportion = amp});
    check<float>(t, {2, 50, 64, 300, true, false}, true, {.available_memory_proportion = amp});
  }
}

TEST_CASE("matmul_acc: c += k * a x b where c keeps its own mapping") {
  auto const t = tb::targets::tiny(16, 256 * 1024);
  for (bool ones : {true, false}) {
    check<float>(t, {1, 40, 38, 39, false, true}, ones, {}, true);
    check<float>(t, {5, 10, 30, 20}, ones, {.available_memory_proportion = 0.02}, true);
    check<tb::half>(t, {1, 33, 17, 64}, ones, {}, true);
  }
}

TEST_CASE("matmul: every host-kernel path matches the vertices bitwise") {
  // check() compares the host kernel with the vertices on every case; these reach its less common paths.
  auto const t4 = tb::targets::tiny(4, 4 << 20);
  check<float>(t4, {1, 8, 40, 1500}, false);                        // K blocks longer than the kernel's cache block
  check<float>(t4, {1, 8, 40, 1500}, false, {}, true);              // ... accumulated
  check<tb::half>(t4, {1, 8, 40, 1500}, false, {.partials = tb::f16});  // f16 partials
  check<float, tb::half>(t4, {1, 30, 70, 600}, false);              // f16 result through an f32 sum
  check<float>(tb::targets::ipu_mk2(1), {1, 32, 10, 784}, false);   // MNIST shapes on a real target
  check<float>(tb::targets::ipu_mk2(1), {1, 4, 1000, 2048}, false);
  check<float>(tb::targets::ipu_mk2(1), {3, 20, 70, 90, true, true}, false, {}, false, 3);
  // Equal row blocks that start off the register block (196 rows as 98 + 98), and panels that do not divide among
  // the threads (576 columns as 3 x 192), whose rows then split into a multiple of the threads.
  check<float>(tb::targets::ipu_mk2(1), {1, 196, 160, 96}, false, {}, false, 2);
  check<float>(tb::targets::ipu_mk2(1), {1, 200, 576, 40}, false, {}, false, 2);
  check<float>(tb::targets::ipu_mk2(1), {1, 310, 576, 40}, false, {}, false, 3);
}

TEST_CASE("matmul: B packed once per host write follows every write; a B the program writes is not kept") {
  // Shapes whose blocks pack B (f32 rows of 1 KiB, f16, K over several cache blocks and tiles), on a target that
  // splits K (gemm_ksum layout) and one that does not (serial steps).
  struct Shape {
    std::size_t m, n, k;
  };
  for (auto const& t : {tb::targets::ipu_mk2(1), tb::targets::tiny(4, 4 << 20)})
    for (Shape sh : {Shape{300, 256, 700}, Shape{130, 96, 1100}}) {
      INFO(t.name << " " << sh.m << "x" << sh.n << "x" << sh.k);
      tb::Graph g{t};
      auto a = g.add_variable<float>({sh.m, sh.k}, "a"), b = g.add_variable<float>({sh.k, sh.n}, "b");
      auto src = g.add_variable<float>({sh.k, sh.n}, "src"), b2 = g.add_variable<float>({sh.k, sh.n}, "b2");
      for (auto const& v : {a, b, src, b2}) tb::map_linearly(g, v);
      auto const bv = [&](unsigned seed) { return values<float>(sh.k * sh.n, false, seed); };
      // Host writes: before a run, and by a callback between two products of one run.
      tb::Sequence prog;
      auto c1 = tb::ops::matmul(g, prog, a, b);
      prog.add(tb::host([&](tb::HostContext& h) { h.write(b, bv(9)); }));
      auto c2 = tb::ops::matmul(g, prog, a, b);
      // Program writes: b2 is copied from src before each product (never kept packed).
      prog.add(tb::copy(src, b2));
      auto c3 = tb::ops::matmul(g, prog, a, b2);
      auto const exe = tb::compile(g, prog);
      tb::Engine host{exe, {.host_threads = 2}}, vertices{exe, {.host_threads = 2, .host_kernels = false}};
      auto const av = values<float>(sh.m * sh.k, false, 1);
      for (unsigned round = 0; round < 3; ++round) {
        INFO("round " << round);
        for (tb::Engine* e : {&host, &vertices}) {
          if (round == 0) e->write(a, av);
          if (round != 1) e->write(b, bv(10 + round));  // round 1 keeps b as the callback left it
          e->write(src, bv(20 + round));
          e->run();
        }
        for (auto const& c : {c1, c2, c3}) CHECK(host.read<float>(c) == vertices.read<float>(c));
        // Each product used the B of its moment: c1 and c2 agree only in round 1, when b is still the callback's.
        CHECK((host.read<float>(c1) == host.read<float>(c2)) == (round == 1));
      }
    }
}

TEST_CASE("matmul_acc: an accumulator that is also an operand falls back to the vertices") {
  tb::Graph g{tb::targets::tiny(8, 256 * 1024)};
  auto c = g.add_variable<float>({24, 24}, "c"), b = g.add_variable<float>({24, 24}, "b");
  tb::map_linearly(g, c);
  tb::map_linearly(g, b);
  tb::Sequence prog;
  tb::ops::matmul_acc(g, prog, c, 0.5f, c, b);  // c += 0.5 * c x b, reading c before writing it
  auto const exe = tb::compile(g, prog);
  auto const cv = values<float>(c.num_elements(), true, 7), bv = values<float>(b.num_elements(), true, 8);
  for (bool host : {true, false}) {
    tb::Engine e{exe, {.host_threads = 2, .host_kernels = host}};
    e.write(c, cv);
    e.write(b, bv);
    e.run();
    auto const got = e.read<float>(c);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < 24; ++i)
      for (std::size_t j = 0; j < 24; ++j) {
        double s = 0;
        for (std::size_t p = 0; p < 24; ++p) s += double(cv[i * 24 + p]) * bv[p * 24 + j];
        bad += got[i * 24 + j] != static_cast<float>(cv[i * 24 + j] + 0.5 * s);
      }
    CHECK(bad == 0);
  }
}

TEST_CASE("matmul: zero-size M, N or groups give an empty result; K = 0 gives zeros") {
  tb::Graph g{tb::targets::tiny(4)};
  tb::Sequence prog;
  std::vector<tb::Tensor> const inputs{g.add_variable<float>({0, 5}, "a"), g.add_variable<float>({5, 3}, "b"),
                                       g.add_variable<float>({0, 2, 5}, "ga"), g.add_variable<float>({0, 5, 3}, "gb"),
                                       g.add_variable<float>({4, 0}, "a0"), g.add_variable<float>({0, 3}, "b0")};
  auto empty_m = tb::ops::matmul(g, prog, inputs[0], inputs[1]);
  CHECK(empty_m.shape() == tb::Shape{0, 3});
  auto empty_g = tb::ops::matmul(g, prog, inputs[2], inputs[3]);
  CHECK(empty_g.shape() == tb::Shape{0, 2, 3});
  auto zeros = tb::ops::matmul(g, prog, inputs[4], inputs[5]);
  CHECK(zeros.shape() == tb::Shape{4, 3});
  for (auto const& t : inputs) tb::map_linearly(g, t);
  tb::Engine e{tb::compile(g, prog), {.host_threads = 2}};
  e.write(zeros, std::vector<float>(12, 7.0f));
  e.run();
  CHECK(e.read<float>(zeros) == std::vector<float>(12, 0.0f));
}

TEST_CASE("matmul: errors") {
  tb::Graph g{tb::targets::tiny(4)};
  tb::Sequence prog;
  auto a = g.add_variable<float>({4, 5}, "a"), b = g.add_variable<float>({5, 3}, "b");
  auto bad = g.add_variable<float>({6, 3}, "bad");
  CHECK_THROWS_WITH_AS(tb::ops::matmul(g, prog, a, b, {.available_memory_proportion = 1.5}),
                       "matmul: available_memory_proportion must be in [0, 1], got 1.500000", tb::option_error);
  CHECK_THROWS_WITH_AS(tb::ops::matmul(g, prog, a, b, {.available_memory_proportion = -0.1}),
                       "matmul: available_memory_proportion must be in [0, 1], got -0.100000", tb::option_error);
  CHECK_THROWS_WITH_AS(tb::plan_matmul(g.target(), {1, 4, 3, 5}, {.available_memory_proportion = 2}),
                       "matmul: available_memory_proportion must be in [0, 1], got 2.000000", tb::option_error);
  CHECK_THROWS_WITH_AS(tb::ops::matmul(g, prog, a, bad),
                       "matmul: inner dimensions differ: [4, 5] x [6, 3] (5 vs 6)", tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::matmul(g, prog, g.add_variable<float>({2, 4, 5}, "ga"), g.add_variable<float>({3, 5, 3}, "gb")),
                       "matmul: group counts differ: [2, 4, 5] has 2 groups, [3, 5, 3] has 3", tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::matmul(g, prog, a, g.add_variable<float>({5}, "v")),
                       "matmul: operands must both be matrices [M, K] x [K, N] or grouped [G, M, K] x [G, K, N]; got "
                       "[4, 5] and [5]",
                       tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::matmul(g, prog, a, g.add_variable<tb::half>({5, 3}, "h")),
                       "matmul: unsupported operand types f32 x f16 (both f32 or both f16)", tb::type_error);
  CHECK_THROWS_WITH_AS(tb::ops::matmul(g, prog, g.add_variable<std::int32_t>({4, 5}, "i"), g.add_variable<std::int32_t>({5, 3}, "j")),
                       "matmul: unsupported operand types i32 x i32 (both f32 or both f16)", tb::type_error);
  CHECK_THROWS_WITH_AS(tb::ops::matmul(g, prog, a, b, {.partials = tb::i32}), "matmul: partials must be f32 or f16, not i32",
                       tb::type_error);
  CHECK_THROWS_WITH_AS(tb::ops::matmul(g, prog, a, b, {.output_type = tb::u8}),
                       "matmul: the output type must be f32 or f16, not u8", tb::type_error);
  CHECK_THROWS_WITH_AS(tb::ops::matmul_acc(g, prog, g.add_variable<float>({3, 4}, "c"), 1.0f, a, b),
                       "matmul_acc: the accumulator is [3, 4] but the product is [4, 3]", tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::matmul_acc(g, prog, g.add_variable<float>({4, 3}, "c"), 1.0f, a, b, {.output_type = tb::f16}),
                       "matmul_acc: the accumulator is f32 but output_type is f16", tb::type_error);
}

TEST_CASE("plan_matmul: temporary memory within availableMemoryProportion, monotone in it") {
  std::vector<std::string> warnings;
  auto const previous = tb::set_warning_handler([&](std::string_view w) { warnings.emplace_back(w); });
  struct P {
    std::size_t g, m, n, k;
  };
  std::vector<P> const problems{{1, 1024, 1024, 1024}, {1, 32, 10, 784}, {1, 12544, 128, 256}, {1, 4, 1000, 2048},
                                {32, 56, 4, 36},       {1, 1, 1, 1000},   {1, 1000, 1000, 1},   {5, 10, 30, 20}};
  std::vector<tb::Target> const machines{tb::targets::ipu_mk2(1), tb::targets::tiny(16, 64 * 1024), tb::targets::tiny(4, 16 * 1024)};
  std::size_t relaxed = 0;
  for (auto const& t : machines)
    for (auto const& pr : problems)
      for (auto input : {tb::f32, tb::f16}) {
        std::uint64_t previous_temp = 0;
        for (double amp : {0.0, 0.05, 0.1, 0.3, 0.6, 1.0}) {
          tb::MatmulProblem q{pr.g, pr.m, pr.n, pr.k, input, tb::f32, input, false};
          auto const p = tb::plan_matmul(t, q, {.available_memory_proportion = amp});
          INFO(p.describe());
          CHECK(p.bound == static_cast<std::uint64_t>(amp * static_cast<double>(t.bytes_per_tile)));
          if (p.fit == tb::PlanFit::within_bound) CHECK(p.temp_bytes <= p.bound);
          if (p.fit == tb::PlanFit::relaxed) {
            CHECK(p.temp_bytes <= p.relaxed_bound);
            CHECK(p.relaxed_bound <= 2 * t.bytes_per_tile);
            ++relaxed;
          }
          CHECK((amp == 0.0) == (p.fit == tb::PlanFit::least_memory));
          CHECK(p.tiles <= t.num_tiles());
          CHECK(p.g_split * p.g_tile >= pr.g);
          CHECK(p.m_split * p.m_tile >= pr.m);
          CHECK(p.n_split * p.n_tile >= pr.n);
          CHECK(p.k_split * p.k_tile >= pr.k);
          if (amp > 0.0) CHECK(p.temp_bytes >= previous_temp);  // lower AMP never needs more temporary memory
          previous_temp = p.temp_bytes;
        }
      }
  CHECK(relaxed > 0);  // the 16 KiB tiles force relaxations at low AMP
  CHECK(warnings.size() >= relaxed);
  tb::set_warning_handler(previous);
}

TEST_CASE("plan_matmul: the compiled program's temporary memory stays within the plan") {
  for (double amp : {0.05, 0.3, 0.6}) {
    tb::Graph g{tb::targets::tiny(16, 64 * 1024)};
    auto a = g.add_variable<float>({300, 200}, "a"), b = g.add_variable<float>({200, 100}, "b");
    tb::map_linearly(g, a);
    tb::map_linearly(g, b);
    tb::MatmulOptions const o{.available_memory_proportion = amp};
    auto const p = tb::ops::plan_matmul(g, a, b, o);
    tb::Sequence prog;
    tb::ops::matmul(g, prog, a, b, o);
    auto const exe = tb::compile(g, {.allow_out_of_memory = true}, prog);  // AMP bounds temporaries, not the total
    for (auto const& m : exe.memory()) CHECK(m.peak_temporary <= p.temp_bytes);
    // The compiled program's estimate is close to the plan's (which assumes linearly mapped operands).
    std::uint64_t total = 0;
    for (auto c : exe.schedule().programs[0].cycles) total += c;
    CHECK(static_cast<double>(total) <= 1.3 * static_cast<double>(p.cycles));
    CHECK(static_cast<double>(total) >= 0.7 * static_cast<double>(p.cycles));
  }
}

TEST_CASE("plan_matmul, plan_conv: a question asked again gets the same plan, and its warning again") {
  std::vector<std::string> warnings;
  auto const previous = tb::set_warning_handler([&](std::string_view w) { warnings.emplace_back(w); });
  tb::MatmulProblem const q{1, 64, 64, 64};
  tb::MatmulOptions const tight{.available_memory_proportion = 0.05};
  auto const a = tb::plan_matmul(tb::targets::tiny(2, 4096), q, tight);
  auto const b = tb::plan_matmul(tb::targets::tiny(2, 4096), q, tight);
  // Any difference in the target, the problem or the options is another question.
  auto const more_tiles = tb::plan_matmul(tb::targets::tiny(4, 4096), q, tight);
  auto const roomier = tb::plan_matmul(tb::targets::tiny(2, 4096), q, {.available_memory_proportion = 0.9});
  auto const f16 = tb::plan_matmul(tb::targets::tiny(2, 4096), {1, 64, 64, 64, tb::f16, tb::f32, tb::f16}, tight);
  tb::set_warning_handler(previous);
  CHECK(a.describe() == b.describe());
  CHECK(a.fit == tb::PlanFit::relaxed);
  REQUIRE(warnings.size() >= 3);
  CHECK(warnings[0] == warnings[1]);
  CHECK(more_tiles.describe() != a.describe());
  CHECK(roomier.fit == tb::PlanFit::within_bound);
  CHECK(f16.problem.input == tb::f16);

  tb::Graph g{tb::targets::tiny(16, 1 << 16)};
  tb::ConvParams p;
  p.batch = 2;
  p.input_field = {8, 8};
  p.kernel_shape = {3, 3};
  p.channels(8, 8, 1);
  auto const c1 = tb::ops::plan_conv(g, p, tb::ConvPass::forward, tb::f32, {});
  auto const c2 = tb::ops::plan_conv(g, p, tb::ConvPass::forward, tb::f32, {});
  CHECK(c1.describe() == c2.describe());
  p.padding_lower = p.padding_upper = {1, 1};
  auto const padded = tb::ops::plan_conv(g, p, tb::ConvPass::forward, tb::f32, {});
  CHECK(padded.describe() != c1.describe());
  CHECK(tb::ops::plan_conv(g, p, tb::ConvPass::backward_input, tb::f32, {}).problem.kind == tb::ConvPass::backward_input);
}

TEST_CASE("plan_matmul: describe() names splits, memory and cycles") {
  auto const p = tb::plan_matmul(tb::targets::ipu_mk2(1), {1, 1024, 1024, 1024}, {.available_memory_proportion = 0.1});
  auto const d = p.describe();
  CHECK(d.find("matmul 1024x1024 * 1024x1024 (f32 operands, f32 partials, f32 result), pass inference") != std::string::npos);
  CHECK(d.find("parallel splits: groups 1") != std::string::npos);
  CHECK(d.find("temporary memory per tile: " + std::to_string(p.temp_bytes) + " B") != std::string::npos);
  CHECK(d.find("estimated cycles: " + std::to_string(p.cycles)) != std::string::npos);
  std::string warning;
  auto const previous = tb::set_warning_handler([&](std::string_view w) { warning = w; });
  auto const r = tb::plan_matmul(tb::targets::tiny(2, 4096), {1, 64, 64, 64}, {.available_memory_proportion = 0.05});
  tb::set_warning_handler(previous);
  CHECK(r.fit == tb::PlanFit::relaxed);
  CHECK(r.describe().find("RELAXED") != std::string::npos);
  CHECK(warning.find("matmul 64x64 * 64x64: no plan keeps temporary memory within 204 B per tile") == 0);
}

TEST_CASE("matmul: results do not depend on the number of host threads") {
  auto run = [](std::size_t threads) {
    tb::Graph g{tb::targets::tiny(24, 128 * 1024)};
    auto a = g.add_variable<float>({3, 70, 90}, "a"), b = g.add_variable<float>({3, 90, 50}, "b");
    tb::map_linearly(g, a);
    tb::map_linearly(g, b);
    tb::Sequence prog;
    auto c = tb::ops::matmul(g, prog, a, b, {.available_memory_proportion = 0.05});
    tb::Engine e{tb::compile(g, prog), {.host_threads = threads}};
    e.write(a, values<float>(a.num_elements(), false, 5));
    e.write(b, values<float>(b.num_elements(), false, 6));
    e.run();
    return e.read<float>(c);
  };
  auto const one = run(1);
  for (std::size_t t : {2, 3, 7}) CHECK(run(t) == one);
}

TEST_CASE("matmul refuses a result larger than the whole target before planning it") {
  // Operators create their results and temporaries with Graph::add_variable, which refuses a variable larger than
  // the whole target's memory: an impossible matmul fails at once, naming the result.
  tb::Graph g{tb::targets::tiny(2, 1 << 16)};
  tb::Tensor a = g.add_variable<float>({8192, 1}, "a");
  tb::Tensor b = g.add_variable<float>({1, 8192}, "b");
  tb::map_linearly(g, a);
  tb::map_linearly(g, b);
  tb::Sequence prog;
  CHECK_THROWS_WITH_AS(tb::ops::matmul(g, prog, a, b, {}, "ab"),
                       doctest::Contains("'ab"), tb::out_of_memory);
}
