// simd::conv_weight_gradient and simd::conv_forward (direct, 3x3) against the chains they document: each
// gradient is one chain of f32 fused multiply-adds from zero (or from the value it continues) over the positions
// in row-major order, each output one chain over (kernel row, reduction channel, kernel column); computed here one
// element at a time with the same multiply-add, so the kernels must agree bitwise whatever register blocks they
// choose (two-vector columns run one vector at a time with AVX2's 16 registers, all at once with AVX-512's 32);
// and against a double reference. Built for the baseline ISA (test_simd), the build machine's (test_simd_native)
// and, on an AVX-512 machine, AVX2 (test_simd_avx2).
#include "conv_problem.hpp"

#include <tilebsp/simd/conv.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace sd = tilebsp::simd;
using tilebsp_test::Problem;

namespace {

/// The target's multiply-add on one element (fused wherever the kernels' is).
float fused(float a, float b, float c) { return sd::fma(sd::batch<float>(a), sd::batch<float>(b), sd::batch<float>(c)).get(0); }

/// Weight gradients [G][3][3][J][C] of problem p with output gradients dy over output rows [y0, y1), continued
/// from `start`: the chains one element at a time (exact) and in double.
struct Reference {
  std::vector<float> chain;
  std::vector<double> exact;
};
Reference reference(Problem<float> const& p, std::vector<float> const& dy, std::int64_t y0, std::int64_t y1, std::vector<float> const& start) {
  Reference r{start, std::vector<double>(start.begin(), start.end())};
  for (std::int64_t g = 0; g < p.G; ++g)
    for (std::int64_t t1 = 0; t1 < 3; ++t1)
      for (std::int64_t t2 = 0; t2 < 3; ++t2)
        for (std::int64_t j = 0; j < p.J; ++j)
          for (std::int64_t c = 0; c < p.C; ++c) {
            auto const i = static_cast<std::size_t>((((g * 3 + t1) * 3 + t2) * p.J + j) * p.C + c);
            for (std::int64_t n = 0; n < p.N; ++n)
              for (std::int64_t y = y0; y < y1; ++y)
                for (std::int64_t z = 0; z < p.W; ++z) {
                  std::int64_t const sy = y + t1 - 1, sx = z + t2 - 1;
                  if (sy < 0 || sy >= p.H || sx < 0 || sx >= p.W) continue;  // padding: a zero product
                  float const xv = p.x[static_cast<std::size_t>((((n * p.H + sy) * p.W + sx) * p.G + g) * p.J + j)];
                  float const yv = dy[static_cast<std::size_t>((((n * p.H + y) * p.W + z) * p.G + g) * p.C + c)];
                  r.chain[i] = fused(xv, yv, r.chain[i]);
                  r.exact[i] += static_cast<double>(xv) * yv;
                }
          }
  return r;
}

void check_gradient(std::int64_t G, std::int64_t J, std::int64_t C, std::int64_t H, std::int64_t W) {
  std::string const label = std::to_string(G) + " groups, " + std::to_string(J) + " -> " + std::to_string(C) + " channels, " +
                            std::to_string(H) + "x" + std::to_string(W);
  INFO(label);
  Problem<float> const p(2, H, W, G, J, C, false, static_cast<unsigned>(G * 1000 + J * 100 + C + W), false);
  std::mt19937 rng(static_cast<unsigned>(H * 31 + C));
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> dy(p.outputs());
  for (auto& v : dy) v = d(rng);
  sd::Operand6<float const> const y{dy.data(), {H * W * G * C, H * W * G * C, W * G * C, G * C, C, 1}, {}};
  auto const weights = static_cast<std::size_t>(G * 9 * J * C);
  std::vector<float> dw(weights, 123.0f);
  sd::Operand6<float> const out{dw.data(), {9 * J * C, 9 * J * C, 3 * J * C, J * C, C, 1}, {}};
  // All rows from zero, then rows [1, H - 1) continued from those results.
  sd::ConvRange r = p.all();
  sd::conv_weight_gradient(p.L, r, p.src(), y, out, false);
  auto const first = reference(p, dy, 0, H, std::vector<float>(weights, 0.0f));
  std::size_t mismatched = 0;
  for (std::size_t i = 0; i < weights; ++i) {
    mismatched += dw[i] != first.chain[i];
    REQUIRE(std::abs(dw[i] - first.exact[i]) <= 1e-4 * (1 + std::abs(first.exact[i])));
  }
  CHECK(mismatched == 0);
  r.lo[1] = 1, r.hi[1] = H - 1;
  sd::conv_weight_gradient(p.L, r, p.src(), y, out, true);
  auto const second = reference(p, dy, 1, H - 1, first.chain);
  mismatched = 0;
  for (std::size_t i = 0; i < weights; ++i) mismatched += dw[i] != second.chain[i];
  CHECK(mismatched == 0);
}

/// conv_forward (direct) of G groups, J -> C channels over H x W, from zero and then continued over rows [1, H - 1):
/// bitwise the chains (kernel row, reduction channel, kernel column) of the same multiply-add.
void check_forward(std::int64_t G, std::int64_t J, std::int64_t C, std::int64_t H, std::int64_t W) {
  std::string const label = std::to_string(G) + " groups, " + std::to_string(J) + " -> " + std::to_string(C) + " channels, " +
                            std::to_string(H) + "x" + std::to_string(W);
  INFO(label);
  Problem<float> const p(2, H, W, G, J, C, false, static_cast<unsigned>(G * 1000 + J * 100 + C + H), false);
  std::vector<float> y(p.outputs(), 5.0f), chain(p.outputs(), 0.0f);
  sd::ConvRange r = p.all();
  auto const step = [&](std::int64_t y0, std::int64_t y1) {
    p.each_output([&](std::size_t i, std::int64_t n, std::int64_t oy, std::int64_t ox, std::int64_t g, std::int64_t c) {
      if (oy < y0 || oy >= y1) return;
      for (std::int64_t t1 = 0; t1 < 3; ++t1)
        for (std::int64_t j = 0; j < p.J; ++j)
          for (std::int64_t t2 = 0; t2 < 3; ++t2) {
            std::int64_t const sy = oy + t1 - 1, sx = ox + t2 - 1;
            if (sy < 0 || sy >= p.H || sx < 0 || sx >= p.W) continue;
            chain[i] = fused(p.x[static_cast<std::size_t>((((n * p.H + sy) * p.W + sx) * p.G + g) * p.J + j)],
                             p.w[static_cast<std::size_t>((((g * 3 + t1) * 3 + t2) * p.J + j) * p.C + c)], chain[i]);
          }
    });
  };
  sd::conv_forward(p.L, r, p.src(), p.weights(), p.dst(y), false);
  step(0, H);
  std::size_t mismatched = 0;
  p.each_output([&](std::size_t i, std::int64_t n, std::int64_t oy, std::int64_t ox, std::int64_t g, std::int64_t c) {
    mismatched += y[i] != chain[i];
    REQUIRE(std::abs(y[i] - p.reference(n, oy, ox, g, c)) <= 1e-4 * (1 + std::abs(p.reference(n, oy, ox, g, c))));
  });
  CHECK(mismatched == 0);
  r.lo[1] = 1, r.hi[1] = H - 1;
  sd::conv_forward(p.L, r, p.src(), p.weights(), p.dst(y), true);
  step(1, H - 1);
  mismatched = 0;
  for (std::size_t i = 0; i < y.size(); ++i) mismatched += y[i] != chain[i];
  CHECK(mismatched == 0);
}

}  // namespace

TEST_CASE("conv_forward: each output is its chain of multiply-adds, bitwise, on every register block") {
  for (std::int64_t C : {4, 8, 16, 32, 48})
    for (std::int64_t J : {2, 8, 16})
      for (std::int64_t W : {7, 14, 28}) check_forward(2, J, C, 5, W);
}

TEST_CASE("conv_weight_gradient: each gradient is its chain of multiply-adds in position order, bitwise") {
  // Channels per group across the register blocks: a vector shared by groups, one vector, two vectors (split into
  // one-vector kernels with 16 registers), and more than two; few and many reduction channels; short and long rows.
  for (std::int64_t C : {4, 8, 16, 32, 48})
    for (std::int64_t J : {2, 8, 16}) {
      check_gradient(2, J, C, 7, 7);
      check_gradient(1, J, C, 5, 12);
    }
  check_gradient(32, 4, 4, 6, 6);
  // 1,024 input channels per position (4 KiB apart: one L1 set), which the kernels read from a box, not in place.
  CHECK(sd::detail::l1_sets(32 * 32) == 1);
  CHECK(sd::detail::l1_sets(16 * 32) == 2);
  CHECK(sd::detail::l1_sets(256) == 4);
  CHECK(sd::detail::l1_sets(24) == 64);
  check_gradient(32, 32, 32, 4, 7);
  check_gradient(64, 16, 8, 3, 5);
}
