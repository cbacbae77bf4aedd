// simd::conv_forward's row kernel for groups that share a vector: where their channels fill a vector and lie
// together at each position, the lanes read the source in place (source columns: one load and a lane permutation
// per input, no box). Checked against a double reference, and bitwise against running the groups one at a time
// (broadcast columns): each lane is the same chain of multiply-adds. Built for the baseline ISA (test_simd) and
// for the build machine's (test_simd_native: AVX-512, 16 lanes).
#include "conv_problem.hpp"

#include <tilebsp/simd/conv.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace sd = tilebsp::simd;
using tilebsp_test::Problem;

namespace {

/// conv_forward over r into y (continuing from y with `load`), or over each of r's groups on its own.
void run_rows(Problem<float> const& p, sd::ConvRange const& r, std::vector<float>& y, bool load, bool per_group) {
  for (std::int64_t g = r.g0; g < r.g1; g += per_group ? 1 : r.g1 - r.g0) {
    sd::ConvRange q = r;
    if (per_group) q.g0 = g, q.g1 = g + 1;
    sd::conv_forward(p.L, q, p.src(), p.weights(), p.dst(y), load);
  }
}

/// G groups of C channels in and out over an H x W field: the whole range takes source columns (checked), and
/// agrees with the reference and bitwise with the groups one at a time, for a first step and one continued from
/// the results; a block of rows and positions writes exactly its outputs, bitwise.
void check_source_rows(std::int64_t G, std::int64_t C, std::int64_t H, std::int64_t W) {
  std::string const label =
      std::to_string(G) + " groups of " + std::to_string(C) + " channels, " + std::to_string(H) + "x" + std::to_string(W);
  INFO(label);
  for (bool ones : {true, false}) {
    INFO((ones ? "+-1" : "uniform"));
    Problem<float> const p(2, H, W, G, C, C, ones, static_cast<unsigned>(G * 100 + C * 10 + W), false);
    sd::ConvRange const all = p.all();
    std::vector<float> y0(p.outputs(), 7.0f);
    auto cols = sd::detail::conv_columns(all.g0, all.g1, all.c0, all.c1);
    std::vector<std::int32_t> idx;
    CHECK(std::all_of(cols.begin(), cols.end(), [&](auto const& c) { return sd::detail::row_column(c, p.dst(y0), W); }));
    CHECK(sd::detail::source_columns(p.L, all, p.src(), p.dst(y0), cols, idx));
    CHECK(std::all_of(cols.begin(), cols.end(), [](auto const& c) { return c.xl == sd::detail::xl_source; }));

    std::vector<float> whole(p.outputs(), 7.0f), alone(p.outputs(), 7.0f);
    run_rows(p, all, whole, false, false);
    run_rows(p, all, alone, false, true);
    CHECK(whole == alone);
    std::size_t bad = 0;
    p.each_output([&](std::size_t i, std::int64_t n, std::int64_t y, std::int64_t x, std::int64_t g, std::int64_t c) {
      double const want = p.reference(n, y, x, g, c), got = whole[i];
      bad += (ones ? got == want : std::abs(got - want) <= 1e-6 + 0.01 * std::abs(want)) ? 0 : 1;
    });
    CHECK(bad == 0);
    // A second step continues each chain from the results (as a later serial step does).
    run_rows(p, all, whole, true, false);
    run_rows(p, all, alone, true, true);
    CHECK(whole == alone);

    sd::ConvRange r = all;
    r.n0 = 1, r.lo[1] = 1, r.hi[1] = H - 1, r.lo[2] = 1, r.hi[2] = W;
    std::vector<float> part(p.outputs(), 7.0f), first(p.outputs(), 7.0f);
    run_rows(p, all, first, false, false);
    run_rows(p, r, part, false, false);
    std::size_t wrong = 0;
    p.each_output([&](std::size_t i, std::int64_t n, std::int64_t y, std::int64_t x, std::int64_t, std::int64_t) {
      bool const inside = n >= r.n0 && y >= r.lo[1] && y < r.hi[1] && x >= r.lo[2] && x < r.hi[2];
      wrong += (inside ? part[i] == first[i] : part[i] == 7.0f) ? 0 : 1;
    });
    CHECK(wrong == 0);
  }
}

}  // namespace

TEST_CASE("conv_forward: groups sharing a vector read the source in place, bitwise as one group at a time") {
  auto const L = static_cast<std::int64_t>(sd::lanes);
  for (std::int64_t per : {std::int64_t{2}, std::int64_t{4}}) {  // groups per vector (AVX-512: ResNeXt's 28² and 56² layers)
    check_source_rows(per, L / per, 4, 20);
    check_source_rows(3 * per, L / per, 6, 31);
  }
  // Not whole vectors, or a reduction split: no source columns.
  Problem<float> const p(1, 4, 20, 2, L / 2, L / 2, false, 5, false);
  std::vector<float> y(p.outputs());
  std::vector<std::int32_t> idx;
  sd::ConvRange half = p.all();
  half.j1 = L / 4;
  auto cols = sd::detail::conv_columns(half.g0, half.g1, half.c0, half.c1);
  CHECK_FALSE(sd::detail::source_columns(p.L, half, p.src(), p.dst(y), cols, idx));
  sd::ConvRange one = p.all();
  one.g1 = 1;
  cols = sd::detail::conv_columns(one.g0, one.g1, one.c0, one.c1);
  CHECK_FALSE(sd::detail::source_columns(p.L, one, p.src(), p.dst(y), cols, idx));
}
