// simd::conv_forward's register blocks reading the source in place (forward_in_place, simd/conv/positions.hpp):
// columns of lanes over groups of one channel each (depthwise layers) at strides, kernel sizes, paddings and
// dilations. Checked against a double reference, and bitwise against the groups one at a time (broadcast columns
// over boxes): each lane is the same chain of multiply-adds whichever way its inputs arrive. Built for the baseline
// ISA (test_simd) and for the build machine's (test_simd_native).
#include <tilebsp/simd/conv.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace sd = tilebsp::simd;

namespace {

/// A depthwise 2-D convolution of G groups: K x K kernel, stride S, lower padding P (the upper padding what the
/// field leaves), kernel dilation B, over an H x W field, batch N; activations [N][H][W][G] with groups `gs` floats
/// apart (1: consecutive), weights [G][K][K].
struct Depthwise {
  std::int64_t N, H, W, G, K, S, P, B, OH, OW, gs;
  std::vector<float> x, w;
  sd::ConvLoop L;

  Depthwise(std::int64_t n, std::int64_t h, std::int64_t wd, std::int64_t g, std::int64_t k, std::int64_t s, std::int64_t p,
            std::int64_t b = 1, std::int64_t group_stride = 1)
      : N(n), H(h), W(wd), G(g), K(k), S(s), P(p), B(b), OH((h + 2 * p - b * (k - 1) - 1) / s + 1),
        OW((wd + 2 * p - b * (k - 1) - 1) / s + 1), gs(group_stride) {
    std::mt19937 rng(static_cast<unsigned>(h * 1000 + k * 10 + s));
    std::uniform_real_distribution<float> d(-1, 1);
    x.resize(static_cast<std::size_t>(N * H * W * G * gs));
    w.resize(static_cast<std::size_t>(G * K * K));
    for (auto& v : x) v = d(rng);
    for (auto& v : w) v = d(rng);
    L.dim[1] = sd::ConvDim{OH, H, K, S, B, -P, 1};
    L.dim[2] = sd::ConvDim{OW, W, K, S, B, -P, 1};
  }
  sd::Operand6<float const> src() const {
    std::int64_t const row = W * G * gs;
    return {x.data(), {H * row, H * row, row, G * gs, gs, 1}, {}};
  }
  sd::Operand6<float const> weights() const { return {w.data(), {K * K, K * K, K, 1, 1, 1}, {}}; }
  sd::Operand6<float> dst(std::vector<float>& y) const { return {y.data(), {OH * OW * G, OH * OW * G, OW * G, G, 1, 1}, {}}; }
  std::size_t outputs() const { return static_cast<std::size_t>(N * OH * OW * G); }
  sd::ConvRange all() const {
    sd::ConvRange r;
    r.n0 = 0, r.n1 = N, r.lo = {0, 0, 0}, r.hi = {1, OH, OW}, r.g0 = 0, r.g1 = G, r.c0 = 0, r.c1 = 1, r.j0 = 0, r.j1 = 1;
    return r;
  }
  double reference(std::int64_t n, std::int64_t oy, std::int64_t ox, std::int64_t g) const {
    double s = 0;
    for (std::int64_t t1 = 0; t1 < K; ++t1)
      for (std::int64_t t2 = 0; t2 < K; ++t2) {
        std::int64_t const iy = oy * S + t1 * B - P, ix = ox * S + t2 * B - P;
        if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
        s += static_cast<double>(x[static_cast<std::size_t>(((n * H + iy) * W + ix) * G * gs + g * gs)]) *
             static_cast<double>(w[static_cast<std::size_t>((g * K + t1) * K + t2)]);
      }
    return s;
  }
  bool in_place(sd::ConvRange const& r) const {
    auto const cols = sd::detail::conv_columns(r.g0, r.g1, r.c0, r.c1);
    return sd::detail::forward_blocks_source_in_place(L, r, src(), cols);
  }
};

/// conv_forward over r into y (continuing from y with `load`), or over each of r's groups on its own.
void run(Depthwise const& p, sd::ConvRange const& r, std::vector<float>& y, bool load, bool per_group) {
  for (std::int64_t g = r.g0; g < r.g1; g += per_group ? 1 : r.g1 - r.g0) {
    sd::ConvRange q = r;
    if (per_group) q.g0 = g, q.g1 = g + 1;
    sd::conv_forward(p.L, q, p.src(), p.weights(), p.dst(y), load);
  }
}

bool same_bits(std::vector<float> const& a, std::vector<float> const& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// The whole range reads in place (checked where `in_place`) and agrees with the reference and bitwise with the
/// groups one at a time, for a first step and one continued from its results; a block of rows and positions writes
/// exactly its outputs.
void check_in_place(Depthwise const& p, bool in_place = true) {
  std::string const label = std::to_string(p.G) + " groups, " + std::to_string(p.H) + "x" + std::to_string(p.W) + ", " + std::to_string(p.K) +
       "x" + std::to_string(p.K) + " stride " + std::to_string(p.S) + " padding " + std::to_string(p.P) + " dilation " +
       std::to_string(p.B);
  INFO(label);
  sd::ConvRange const all = p.all();
  if (in_place) REQUIRE(p.in_place(all));
  std::vector<float> whole(p.outputs(), 7.0f), alone(p.outputs(), 7.0f);
  run(p, all, whole, false, false);
  run(p, all, alone, false, true);
  CHECK(same_bits(whole, alone));
  std::size_t bad = 0;
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t oy = 0; oy < p.OH; ++oy)
      for (std::int64_t ox = 0; ox < p.OW; ++ox)
        for (std::int64_t g = 0; g < p.G; ++g) {
          double const want = p.reference(n, oy, ox, g);
          double const got = whole[static_cast<std::size_t>(((n * p.OH + oy) * p.OW + ox) * p.G + g)];
          bad += std::abs(got - want) <= 1e-5 + 1e-5 * std::abs(want) ? 0 : 1;
        }
  CHECK(bad == 0);
  // A second step continues each chain from the results (as a later serial step does).
  run(p, all, whole, true, false);
  run(p, all, alone, true, true);
  CHECK(same_bits(whole, alone));
  // A block of rows and positions, some next to padding: its outputs as in the whole, the others untouched.
  sd::ConvRange part = all;
  part.lo[1] = 0, part.hi[1] = std::min<std::int64_t>(2, p.OH);
  part.lo[2] = 1, part.hi[2] = std::min<std::int64_t>(4, p.OW);
  part.n0 = p.N - 1;
  std::vector<float> block(p.outputs(), 7.0f), first(p.outputs(), 7.0f);
  run(p, part, block, false, false);
  run(p, all, first, false, false);
  std::size_t wrong = 0;
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t oy = 0; oy < p.OH; ++oy)
      for (std::int64_t ox = 0; ox < p.OW; ++ox)
        for (std::int64_t g = 0; g < p.G; ++g) {
          auto const i = static_cast<std::size_t>(((n * p.OH + oy) * p.OW + ox) * p.G + g);
          bool const inside = n >= part.n0 && oy >= part.lo[1] && oy < part.hi[1] && ox >= part.lo[2] && ox < part.hi[2];
          float const want = inside ? first[i] : 7.0f;
          wrong += std::memcmp(&block[i], &want, sizeof(float)) != 0;
        }
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("conv_forward: strided depthwise columns read the source in place, bitwise as one group at a time") {
  auto const L = static_cast<std::int64_t>(sd::lanes);
  check_in_place(Depthwise(2, 21, 21, 3 * L, 3, 2, 1));     // mobilenet's 3x3 stride 2
  check_in_place(Depthwise(1, 12, 9, 2 * L, 3, 2, 0));      // no padding, a field the stride does not divide
  check_in_place(Depthwise(1, 60, 60, L, 5, 2, 2));         // efficientnet's 5x5 stride 2
  check_in_place(Depthwise(2, 30, 29, 2 * L, 3, 2, 2, 2));  // kernel dilation 2
  check_in_place(Depthwise(1, 17, 16, L, 3, 3, 1));         // stride 3
  check_in_place(Depthwise(1, 40, 40, L, 3, 1, 1));         // stride 1 (row blocks where they apply)
}

TEST_CASE("conv_forward: depthwise blocks of a vector of groups or more, bitwise as one group at a time") {
  // depthwise_forward (simd/conv/depthwise.hpp) runs strided blocks of at least a vector of groups with 32
  // registers; one group at a time runs the box form. Groups that fill no whole last vector, fields smaller than a
  // block of positions, 5x5; the stride-1 cases check the other forms the same way.
  auto const L = static_cast<std::int64_t>(sd::lanes);
  auto const applies = [](Depthwise const& p) {
    std::vector<float> y(p.outputs());
    return sd::detail::depthwise_applies<float, float, float>(p.L, p.all(), p.src(), p.dst(y));
  };
  Depthwise const a(2, 7, 7, 3 * L + 5, 3, 2, 1);  // a partial last vector
  if (sd::lanes >= 16) REQUIRE(applies(a));          // strided, 32 registers
  CHECK_FALSE(applies(Depthwise(1, 7, 7, 2 * L, 3, 1, 1)));  // stride 1: the other forms
  check_in_place(a, false);
  check_in_place(Depthwise(2, 7, 7, 3 * L + 5, 3, 1, 1), false);
  check_in_place(Depthwise(1, 14, 13, L + 1, 5, 1, 2), false);    // efficientnet's 5x5, stride 1
  check_in_place(Depthwise(2, 5, 3, 2 * L, 3, 2, 1), false);      // fewer positions than a block
  check_in_place(Depthwise(1, 9, 11, 2 * L - 3, 3, 2, 1), false);  // stride 2, a partial vector
  // Rows long enough for blocks of 8 positions away from the padding (depthwise_inside), each kernel it has.
  check_in_place(Depthwise(1, 5, 30, 2 * L + 3, 3, 1, 1), false);
  check_in_place(Depthwise(1, 5, 40, L + 7, 3, 2, 1), false);
  check_in_place(Depthwise(1, 6, 30, L + 2, 5, 1, 2), false);
  check_in_place(Depthwise(1, 7, 50, L, 5, 2, 2), false);
  check_in_place(Depthwise(1, 5, 30, L, 3, 2, 1, 2), false);  // kernel dilation 2: the checked blocks only
  CHECK_FALSE(applies(Depthwise(1, 8, 8, L, 3, 1, 1, 1, 3)));     // groups not consecutive: other forms
  // Padding multiplies zeros, as the boxes do: an infinite weight makes NaN at every output next to padding.
  Depthwise inf(1, 6, 6, L, 3, 2, 1);
  inf.w[0] = std::numeric_limits<float>::infinity();
  std::vector<float> whole(inf.outputs(), 7.0f), alone(inf.outputs(), 7.0f);
  run(inf, inf.all(), whole, false, false);
  run(inf, inf.all(), alone, false, true);
  CHECK(same_bits(whole, alone));
  CHECK(std::isnan(whole[0]));
}

TEST_CASE("forward_blocks_source_in_place: lanes over whole vectors of consecutive groups, where copies are fewer") {
  auto const L = static_cast<std::int64_t>(sd::lanes);
  SUBCASE("3x3 stride 2 over 11x11 outputs: in place") {
    Depthwise const p(1, 21, 21, 2 * L, 3, 2, 1);
    CHECK(p.in_place(p.all()));
  }
  SUBCASE("groups spread out in memory: boxes") {
    Depthwise const p(1, 21, 21, 2 * L, 3, 2, 1, 1, 2);
    CHECK(!p.in_place(p.all()));
  }
  SUBCASE("groups that do not fill the last vector: boxes") {
    Depthwise const p(1, 21, 21, L + L / 2, 3, 2, 1);
    CHECK(!p.in_place(p.all()));
  }
  SUBCASE("a 5x5 kernel at stride 1 on a small field: most positions next to padding, boxes") {
    Depthwise const p(1, 7, 7, L, 5, 1, 2);
    CHECK(!p.in_place(p.all()));
    CHECK(!sd::in_place_copies_fewer(p.L, {0, 0, 0}, {1, 7, 7}));
  }
  SUBCASE("a 5x5 kernel at stride 2 over 7x7 outputs: half the positions next to padding, boxes") {
    Depthwise const p(1, 14, 14, L, 5, 2, 2);
    CHECK(!p.in_place(p.all()));
  }
}
