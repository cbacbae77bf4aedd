// simd::winograd_forward, the Winograd F(2x2, 3x3) kernel of tile convolutions, on its own: against a double
// reference, and bitwise on blocks of work at odd boundaries against the whole run — the property that lets tile
// vertices and host kernels split a convolution differently and still agree. Built for the baseline ISA
// (test_simd) and for the build machine's (test_simd_native: the AVX-512 paths the samples and benchmarks run).
#include <tilebsp/simd/conv.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace sd = tilebsp::simd;
using tilebsp::half;

namespace {

/// A padded 3x3 convolution of G groups (J input and C output channels each) over an H x W field, batch N,
/// channels-last activations [N][H][W][G][channels] and weights [G][3][3][J][C].
template <class T>
struct Problem {
  std::int64_t N, H, W, G, J, C;
  std::vector<T> x, w;
  sd::ConvLoop L;

  Problem(std::int64_t n, std::int64_t h, std::int64_t wd, std::int64_t g, std::int64_t j, std::int64_t c, bool ones, unsigned seed)
      : N(n), H(h), W(wd), G(g), J(j), C(c) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-1, 1);
    auto value = [&] { return T(ones ? (d(rng) < 0 ? -1.0f : 1.0f) : d(rng)); };
    x.resize(static_cast<std::size_t>(N * H * W * G * J));
    w.resize(static_cast<std::size_t>(G * 9 * J * C));
    std::generate(x.begin(), x.end(), value);
    std::generate(w.begin(), w.end(), value);
    L.dim[1] = sd::ConvDim{H, H, 3, 1, 1, -1, 1};
    L.dim[2] = sd::ConvDim{W, W, 3, 1, 1, -1, 1};
    L.winograd = true;
  }
  sd::Operand6<T const> src() const { return {x.data(), {H * W * G * J, H * W * G * J, W * G * J, G * J, J, 1}, {}}; }
  sd::Operand6<T const> weights() const { return {w.data(), {9 * J * C, 9 * J * C, 3 * J * C, J * C, C, 1}, {}}; }
  template <class TD>
  sd::Operand6<TD> dst(std::vector<TD>& y) const {
    return {y.data(), {H * W * G * C, H * W * G * C, W * G * C, G * C, C, 1}, {}};
  }
  std::size_t outputs() const { return static_cast<std::size_t>(N * H * W * G * C); }
  sd::ConvRange all() const {
    sd::ConvRange r;
    r.n0 = 0, r.n1 = N, r.lo = {0, 0, 0}, r.hi = {1, H, W}, r.g0 = 0, r.g1 = G, r.c0 = 0, r.c1 = C, r.j0 = 0, r.j1 = J;
    return r;
  }
  /// f(i, n, y, x, g, c) for every output, i its index in the output vector.
  template <class F>
  void each_output(F&& f) const {
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t y = 0; y < H; ++y)
        for (std::int64_t z = 0; z < W; ++z)
          for (std::int64_t g = 0; g < G; ++g)
            for (std::int64_t c = 0; c < C; ++c) f(static_cast<std::size_t>((((n * H + y) * W + z) * G + g) * C + c), n, y, z, g, c);
  }
  double reference(std::int64_t n, std::int64_t y, std::int64_t xx, std::int64_t g, std::int64_t c) const {
    double s = 0;
    for (std::int64_t t1 = 0; t1 < 3; ++t1)
      for (std::int64_t t2 = 0; t2 < 3; ++t2) {
        std::int64_t const sy = y + t1 - 1, sx = xx + t2 - 1;
        if (sy < 0 || sy >= H || sx < 0 || sx >= W) continue;
        for (std::int64_t j = 0; j < J; ++j)
          s += static_cast<double>(static_cast<float>(x[static_cast<std::size_t>((((n * H + sy) * W + sx) * G + g) * J + j)])) *
               static_cast<double>(static_cast<float>(w[static_cast<std::size_t>((((g * 3 + t1) * 3 + t2) * J + j) * C + c)]));
      }
    return s;
  }
};

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
}
