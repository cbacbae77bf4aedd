// A padded 3x3 grouped convolution problem with a double reference, shared by the kernel tests of tests/simd.
#pragma once

#include <tilebsp/simd/conv.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace tilebsp_test {

namespace sd = tilebsp::simd;

/// A padded 3x3 convolution of G groups (J input and C output channels each) over an H x W field, batch N,
/// channels-last activations [N][H][W][G][channels] and weights [G][3][3][J][C]; run as Winograd or direct.
template <class T>
struct Problem {
  std::int64_t N, H, W, G, J, C;
  std::vector<T> x, w;
  sd::ConvLoop L;

  Problem(std::int64_t n, std::int64_t h, std::int64_t wd, std::int64_t g, std::int64_t j, std::int64_t c, bool ones, unsigned seed,
          bool winograd = true)
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
    L.winograd = winograd;
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

}  // namespace tilebsp_test
