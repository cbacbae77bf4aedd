// simd::winograd_forward, the Winograd F(2x2, 3x3) kernel of tile convolutions, on its own: against a double
// reference, and bitwise on blocks of work at odd boundaries against the whole run — the property that lets tile
// vertices and host kernels split a convolution differently and still agree. Built for the baseline ISA
// (test_simd) and for the build machine's (test_simd_native: the AVX-512 paths the samples and benchmarks run).
#include "conv_problem.hpp"

#include <tilebsp/simd/conv.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace sd = tilebsp::simd;
using tilebsp::half;
using tilebsp_test::Problem;

namespace {

/// winograd_forward over r into y (continuing from y with `load`).
template <class T, class TD>
void run(Problem<T> const& p, sd::ConvRange const& r, std::vector<TD>& y, bool load = false) {
  sd::winograd_forward(p.L, r, p.src(), p.weights(), p.template dst<TD>(y), load);
}

void check_shape(std::int64_t G, std::int64_t J, std::int64_t C, std::int64_t H, std::int64_t W) {
  std::string const label = std::to_string(G) + " groups of " + std::to_string(J) + " -> " + std::to_string(C) + " channels, " +
                            std::to_string(H) + "x" + std::to_string(W);
  INFO(label);
  for (bool ones : {true, false}) {
    INFO((ones ? "+-1" : "uniform"));
    Problem<float> const p(2, H, W, G, J, C, ones, static_cast<unsigned>(G * 1000 + J * 100 + C * 10 + H));
    std::vector<float> whole(p.outputs(), 7.0f);
    run(p, p.all(), whole);
    std::size_t bad = 0;
    p.each_output([&](std::size_t i, std::int64_t n, std::int64_t y, std::int64_t x, std::int64_t g, std::int64_t c) {
      double const want = p.reference(n, y, x, g, c), got = whole[i];
      bad += (ones ? got == want : std::abs(got - want) <= 1e-6 + 0.01 * std::abs(want)) ? 0 : 1;
    });
    CHECK(bad == 0);
    // A block at odd boundaries in both dimensions, from the second image and group: it writes exactly its
    // outputs, bitwise those of the whole run.
    sd::ConvRange r = p.all();
    r.n0 = 1, r.lo[1] = 1, r.hi[1] = H - 1, r.lo[2] = std::min<std::int64_t>(1, W - 1), r.hi[2] = W, r.g0 = G > 1 ? 1 : 0;
    std::vector<float> part(p.outputs(), 7.0f);
    run(p, r, part);
    std::size_t wrong = 0;
    p.each_output([&](std::size_t i, std::int64_t n, std::int64_t y, std::int64_t x, std::int64_t g, std::int64_t) {
      bool const inside = n >= r.n0 && y >= r.lo[1] && y < r.hi[1] && x >= r.lo[2] && x < r.hi[2] && g >= r.g0;
      wrong += (inside ? part[i] == whole[i] : part[i] == 7.0f) ? 0 : 1;
    });
    CHECK(wrong == 0);
    // Reduction channels in two serial steps (the second continues from dst): within tolerance of the one-step
    // result, and exact for +-1 data.
    if (J > 1) {
      std::vector<float> two(p.outputs());
      sd::ConvRange first = p.all(), second = p.all();
      first.j1 = J / 2, second.j0 = J / 2;
      run(p, first, two);
      run(p, second, two, true);
      std::size_t off = 0;
      for (std::size_t i = 0; i < two.size(); ++i)
        off += (ones ? two[i] == whole[i] : std::abs(two[i] - whole[i]) <= 1e-5f + 1e-4f * std::abs(whole[i])) ? 0 : 1;
      CHECK(off == 0);
    }
  }
  // f16 operands and results: the f32 kernel's results rounded once, within f16 tolerance of the reference.
  Problem<half> const h(1, H, W, G, J, C, false, 99);
  std::vector<half> hy(h.outputs());
  run(h, h.all(), hy);
  std::size_t bad = 0;
  h.each_output([&](std::size_t i, std::int64_t n, std::int64_t y, std::int64_t x, std::int64_t g, std::int64_t c) {
    double const want = h.reference(n, y, x, g, c), got = static_cast<float>(hy[i]);
    bad += std::abs(got - want) <= 1e-5 + 0.1 * std::abs(want) ? 0 : 1;
  });
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("winograd: against a double reference, and bitwise on blocks at odd boundaries") {
  check_shape(4, 8, 8, 8, 10);     // ResNeXt's 28² shape: half a vector per group (AVX-512)
  check_shape(3, 8, 8, 7, 9);      // odd fields (half tiles)
  check_shape(2, 16, 16, 6, 6);    // ResNeXt's 14² shape: a vector per group
  check_shape(1, 32, 48, 5, 6);    // two vectors of lane channels, two of reduction channels
  check_shape(5, 4, 8, 9, 5);      // fewer reduction than lane channels
  check_shape(2, 20, 4, 5, 8);     // more: a part vector of reduction channels
  check_shape(9, 1, 1, 5, 5);      // depthwise
  check_shape(3, 3, 5, 6, 5);      // channel counts that do not divide a vector
  check_shape(1, 16, 16, 26, 26);  // 169 tiles: many batches of tiles, most starting inside a row of 13
}
