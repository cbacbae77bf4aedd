// The operators' kernels in use (<tilebsp/ops/kernels.hpp>): in tilebsp::compiled, the choice among the library's
// sets (TILEBSP_ISA's cap and its errors), and every set this CPU runs against a double reference, bitwise the same
// for any number of host threads; header-only, the level of this file's -march.
#include "helpers.hpp"

#include <tilebsp/ops/kernels.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

namespace tb = tilebsp;

namespace {

using Table = tb::ops::detail::KernelTable;

// A grouped product and a strided 3x3 convolution built with one set's entry points, run with 1 and 2 host threads:
// the product against double math, both bitwise the same across thread counts. Returns the convolution's result.
[[maybe_unused]] std::vector<float> run_set(Table const& t) {  // used only with tilebsp::compiled (TILEBSP_COMPILED)
  INFO("kernels " << t.level << " (" << t.isa << ")");
  tb::Graph g{tb::targets::tiny(4, 256 * 1024)};
  tb::Sequence prog;
  std::size_t const groups = 2, m = 19, k = 37, n = 23;
  auto a = g.add_variable<float>({groups, m, k}, "a"), b = g.add_variable<float>({groups, k, n}, "b");
  tb::map_linearly(g, a);
  tb::map_linearly(g, b);
  auto const c = t.matmul(g, prog, a, b, {}, "product");
  tb::ConvParams p;
  p.batch = 2;
  p.input_field = {9, 11};
  p.kernel_shape = {3, 3};
  p.stride = {2, 1};
  p.padding_lower = {1, 1};
  p.padding_upper = {1, 1};
  p.channels(8, 12, 2);
  auto const x = t.create_conv_input(g, p, tb::ElementType::f32, {}, "x");
  auto const w = t.create_conv_weights(g, p, tb::ElementType::f32, {}, "w");
  auto const y = t.conv(g, prog, x, w, p, {}, "conv");
  auto const exe = tb::compile(g, prog);
  auto const av = tbt::values<float>(a.num_elements(), false, 1), bv = tbt::values<float>(b.num_elements(), false, 2);
  auto const xv = tbt::values<float>(x.num_elements(), false, 3), wv = tbt::values<float>(w.num_elements(), false, 4);
  std::vector<float> products[2], convs[2];
  for (std::size_t threads : {1, 2}) {
    tb::Engine e{exe, {.host_threads = threads}};
    e.write(a, av);
    e.write(b, bv);
    e.write(x, xv);
    e.write(w, wv);
    e.run();
    products[threads - 1] = e.read<float>(c);
    convs[threads - 1] = e.read<float>(y);
  }
  CHECK(std::memcmp(products[0].data(), products[1].data(), products[0].size() * sizeof(float)) == 0);
  CHECK(std::memcmp(convs[0].data(), convs[1].data(), convs[0].size() * sizeof(float)) == 0);
  std::size_t bad = 0;
  for (std::size_t gi = 0; gi < groups; ++gi)
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::size_t q = 0; q < k; ++q) s += double(av[(gi * m + i) * k + q]) * double(bv[(gi * k + q) * n + j]);
        double const got = products[0][(gi * m + i) * n + j];
        if (std::abs(got - s) > 1e-5 + 1e-5 * std::abs(s)) ++bad;
      }
  CHECK(bad == 0);
  return convs[0];
}

}  // namespace

TEST_CASE("the kernels in use are named") {
  std::string const level(tb::ops::kernels_level());
  CHECK((level == "avx512" || level == "avx2" || level == "generic"));
  CHECK(!tb::ops::kernels_isa().empty());
#ifndef TILEBSP_COMPILED
  // Header-only: this file's own kernels.
  CHECK(level == tb::ops::detail::compiled_level());
  CHECK(tb::ops::kernels_isa() == tb::simd::isa_name());
#endif
}

#ifdef TILEBSP_COMPILED
namespace {
bool cpu_runs(std::string const& level) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (level == "avx512") return __builtin_cpu_supports("x86-64-v4");
  if (level == "avx2") return __builtin_cpu_supports("x86-64-v3");
  return true;
#else
  return level == "generic";
#endif
}

// The levels this library holds (TILEBSP_TEST_KERNEL_LEVELS, from the build) that this CPU runs, highest first.
std::vector<std::string> runnable_levels() {
  std::vector<std::string> out;
  std::string const built = TILEBSP_TEST_KERNEL_LEVELS;
  for (std::string l : {"avx512", "avx2", "generic"})
    if (built.find(l) != std::string::npos && cpu_runs(l)) out.push_back(l);
  return out;
}
}  // namespace

TEST_CASE("tilebsp::compiled runs the best kernels the CPU supports, capped by TILEBSP_ISA") {
  auto const levels = runnable_levels();
  REQUIRE(!levels.empty());
  CHECK(std::string(tb::ops::detail::choose_kernels(nullptr).level) == levels.front());
  CHECK(std::string(tb::ops::detail::choose_kernels("").level) == levels.front());
  // The level in use is the one TILEBSP_ISA (this test's environment) allows.
  char const* cap = std::getenv("TILEBSP_ISA");
  CHECK(tb::ops::kernels_level() == tb::ops::detail::choose_kernels(cap).level);
  for (auto const& l : levels) {
    auto const& t = tb::ops::detail::choose_kernels(l.c_str());
    CHECK(std::string(t.level) == l);
    CHECK(t.size == sizeof(Table));
  }
}

TEST_CASE("TILEBSP_ISA: what cannot run is an option_error") {
  CHECK_THROWS_WITH_AS(tb::ops::detail::choose_kernels("sse9"),
                       "TILEBSP_ISA=sse9: not an instruction-set level; expected avx512, avx2 or generic",
                       tb::option_error);
  CHECK_THROWS_WITH_AS(tb::ops::detail::choose_kernels("AVX2"),
                       "TILEBSP_ISA=AVX2: not an instruction-set level; expected avx512, avx2 or generic",
                       tb::option_error);
  if (!cpu_runs("avx512"))
    CHECK_THROWS_WITH_AS(tb::ops::detail::choose_kernels("avx512"),
                         "TILEBSP_ISA=avx512: this CPU does not run AVX-512 (F, BW, DQ, VL) kernels; ask for a lower "
                         "level (avx2 or generic) or unset it",
                         tb::option_error);
  std::string const built = TILEBSP_TEST_KERNEL_LEVELS;
  if (built.find("generic") == std::string::npos)  // e.g. the ThreadSanitizer preset: the host's level only
    CHECK_THROWS_WITH_AS(tb::ops::detail::choose_kernels("generic"),
                         ("tilebsp::compiled holds kernels for " + built +
                          " only, and none at or below TILEBSP_ISA=generic that this CPU runs; rebuild it with "
                          "TILEBSP_KERNEL_ISAS including generic")
                             .c_str(),
                         tb::option_error);
}

TEST_CASE("every set of kernels this CPU runs against the reference, deterministic across host threads") {
  auto const levels = runnable_levels();
  std::vector<std::vector<float>> convs;
  for (auto const& l : levels) convs.push_back(run_set(tb::ops::detail::choose_kernels(l.c_str())));
  // The sets may round differently (FMA or not, lane counts), never by more than float noise.
  for (std::size_t s = 1; s < convs.size(); ++s) {
    INFO(levels[s] << " against " << levels[0]);
    REQUIRE(convs[s].size() == convs[0].size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < convs[0].size(); ++i)
      if (std::abs(convs[s][i] - convs[0][i]) > 1e-5f + 1e-5f * std::abs(convs[0][i])) ++bad;
    CHECK(bad == 0);
  }
}
#endif
