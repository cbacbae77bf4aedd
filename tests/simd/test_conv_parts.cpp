// simd::conv_forward_parts: a forward pass split over reduction parts, the partials summed in the kernel. Bitwise
// against the reduction it replaces (conv_forward per part into f32 partials, summed in part order, then
// scale_into), with the weights packed here or ahead, a box or the source in place, f32 or f16 results, stored or
// accumulated; checked against a double reference; and where it declines. Built for the baseline ISA (test_simd)
// and for the build machine's (test_simd_native, test_simd_avx2).
#include "conv_problem.hpp"

#include <tilebsp/simd/conv.hpp>
#include <tilebsp/simd/partials.hpp>
#include <tilebsp/simd/scratch.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace sd = tilebsp::simd;
using tilebsp_test::Problem;

namespace {

/// Reduction parts of nearly equal size over [0, J).
std::vector<sd::ForwardPart> split(std::int64_t J, std::int64_t n) {
  std::vector<sd::ForwardPart> parts;
  for (std::int64_t i = 0; i < n; ++i) parts.push_back({J * i / n, J * (i + 1) / n, nullptr});
  return parts;
}

/// What the host kernel computed before conv_forward_parts: each part's f32 partial of block r, summed in part
/// order (the first as it is), then scaled into y.
template <class TO>
void reduced(Problem<float> const& p, sd::ConvRange const& r, std::vector<sd::ForwardPart> const& parts,
             std::vector<TO>& y, float alpha, bool accumulate) {
  std::vector<float> sum(p.outputs()), partial(p.outputs());
  for (std::size_t k = 0; k < parts.size(); ++k) {
    sd::ConvRange q = r;
    q.j0 = parts[k].j0, q.j1 = parts[k].j1;
    sd::conv_forward(p.L, q, p.src(), p.weights(), p.dst(k == 0 ? sum : partial), false);
    if (k > 0)
      for (std::size_t e = 0; e < sum.size(); ++e) sum[e] += partial[e];
  }
  // Every output of r, one element at a time: the block's outputs are all that change.
  p.each_output([&](std::size_t i, std::int64_t n, std::int64_t oy, std::int64_t ox, std::int64_t g, std::int64_t c) {
    bool const inside = n >= r.n0 && n < r.n1 && oy >= r.lo[1] && oy < r.hi[1] && ox >= r.lo[2] && ox < r.hi[2] &&
                        g >= r.g0 && g < r.g1 && c >= r.c0 && c < r.c1;
    if (!inside) return;
    if (accumulate) sd::scale_into<TO, true>(&sum[i], &y[i], 1, 1, alpha);
    else sd::scale_into<TO, false>(&sum[i], &y[i], 1, 1, alpha);
  });
}

template <class T>
bool same_bits(std::vector<T> const& a, std::vector<T> const& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

/// conv_forward_parts over block r agrees bitwise with `reduced`, stored and accumulated, into f32 and f16, with the
/// weights packed here and packed ahead; and (f32, all of the problem, a 3x3 stride-1 loop) with the double
/// reference.
void check(Problem<float> const& p, sd::ConvRange const& r, std::vector<sd::ForwardPart> parts, bool reference = true) {
  for (bool const accumulate : {false, true}) {
    INFO("accumulate " << accumulate);
    std::vector<float> got(p.outputs(), 0.75f), want(p.outputs(), 0.75f);
    REQUIRE(sd::conv_forward_parts(p.L, r, p.src(), p.weights(), p.dst(got), parts, 0.5f, accumulate));
    reduced(p, r, parts, want, 0.5f, accumulate);
    CHECK(same_bits(got, want));
    std::vector<tilebsp::half> hgot(p.outputs(), tilebsp::half(0.75f)), hwant(p.outputs(), tilebsp::half(0.75f));
    REQUIRE(sd::conv_forward_parts(p.L, r, p.src(), p.weights(), p.dst(hgot), parts, 0.5f, accumulate));
    reduced(p, r, parts, hwant, 0.5f, accumulate);
    CHECK(same_bits(hgot, hwant));
  }
  // Weights packed ahead for every part (inference), and for the first only (the others packed here).
  std::vector<sd::detail::Scratch> store(parts.size());  // 64-byte aligned, as the host kernel's
  std::vector<sd::PackedForwardWeights> packed(parts.size());
  for (std::size_t k = 0; k < parts.size(); ++k) {
    std::size_t const floats = sd::packed_forward_group_floats(p.L, p.C, parts[k].j1 - parts[k].j0);
    float* const data = store[k].get(static_cast<std::size_t>(p.G) * floats);
    for (std::int64_t g = 0; g < p.G; ++g)
      sd::pack_forward_weights(p.L, p.weights(), g, p.C, parts[k].j0, parts[k].j1,
                               data + g * static_cast<std::int64_t>(floats));
    packed[k] = {data, static_cast<std::ptrdiff_t>(floats), parts[k].j0, parts[k].j1};
  }
  std::vector<float> want(p.outputs(), 0.75f);
  reduced(p, r, parts, want, 0.5f, false);
  for (std::size_t ahead : {parts.size(), std::size_t{1}}) {
    INFO("packed ahead: " << ahead << " of " << parts.size());
    for (std::size_t k = 0; k < parts.size(); ++k) parts[k].packed = k < ahead ? &packed[k] : nullptr;
    std::vector<float> got(p.outputs(), 0.75f);
    REQUIRE(sd::conv_forward_parts(p.L, r, p.src(), p.weights(), p.dst(got), parts, 0.5f, false));
    CHECK(same_bits(got, want));
  }
  if (!reference) return;  // Problem::reference: the 3x3 stride-1 loop
  std::size_t bad = 0;
  std::vector<float> whole(p.outputs());
  REQUIRE(sd::conv_forward_parts(p.L, p.all(), p.src(), p.weights(), p.dst(whole), parts, 1.0f, false));
  p.each_output([&](std::size_t i, std::int64_t n, std::int64_t oy, std::int64_t ox, std::int64_t g, std::int64_t c) {
    double const ref = p.reference(n, oy, ox, g, c);
    bad += std::abs(whole[i] - ref) <= 1e-4 * (1.0 + std::abs(ref)) ? 0 : 1;
  });
  CHECK(bad == 0);
}

/// A 3x3 problem whose rows are too short for row blocks (register blocks over boxes).
Problem<float> problem(std::int64_t G, std::int64_t J, std::int64_t C, unsigned seed) {
  return Problem<float>(2, 5, 5, G, J, C, false, seed, false);
}

}  // namespace

TEST_CASE("conv_forward_parts: bitwise the partials' sum, over boxes and the source in place") {
  SUBCASE("padded: boxes; parts of 5 and 6 channels; two column pairs and a part of one") {
    auto const p = problem(1, 33, 2 * static_cast<std::int64_t>(sd::lanes) + 8, 1);
    REQUIRE(!sd::detail::box_in_place<float>(p.L, p.all(), p.src(), sd::detail::conv_columns(0, 1, 0, p.C)));
    check(p, p.all(), split(p.J, 6));
  }
  SUBCASE("a block of one image's interior reads the source in place") {
    auto const p = problem(1, 24, static_cast<std::int64_t>(sd::lanes), 2);
    sd::ConvRange r = p.all();
    r.n0 = 1, r.lo[1] = r.lo[2] = 1, r.hi[1] = r.hi[2] = 4;
    REQUIRE(sd::detail::box_in_place<float>(p.L, r, p.src(), sd::detail::conv_columns(0, 1, 0, p.C)));
    check(p, r, split(p.J, 3));
  }
  SUBCASE("groups, a block of channels, parts of one channel") {
    auto const p = problem(3, 4, 2 * static_cast<std::int64_t>(sd::lanes), 3);
    sd::ConvRange r = p.all();
    r.g0 = 1, r.c0 = static_cast<std::int64_t>(sd::lanes);
    check(p, r, split(p.J, 4));
  }
  SUBCASE("other kernels: 1x3 (steps of three taps), 3x1, 3x1 in one part (taps and channels joined), stride 2") {
    struct Case {
      std::size_t one_tap;  // the dimension reduced to one tap (0: none)
      std::int64_t parts, stride;
    };
    for (Case const k : {Case{1, 2, 1}, Case{2, 3, 1}, Case{2, 1, 1}, Case{0, 3, 2}}) {
      INFO("one tap in dimension " << k.one_tap << ", " << k.parts << " parts, stride " << k.stride);
      auto p = problem(1, 12, static_cast<std::int64_t>(sd::lanes), 4 + static_cast<unsigned>(k.parts));
      if (k.one_tap) p.L.dim[k.one_tap] = sd::ConvDim{p.L.dim[k.one_tap].out, p.L.dim[k.one_tap].in, 1, 1, 1, 0, 1};
      for (std::size_t d = 1; d < 3 && k.stride > 1; ++d) p.L.dim[d].a = k.stride, p.L.dim[d].out = 3;
      check(p, p.all(), split(p.J, k.parts), false);
    }
  }
}

TEST_CASE("conv_forward_parts: declines where the partials take another form") {
  std::vector<float> y;
  SUBCASE("rows long enough for row blocks") {
    Problem<float> const p(1, 6, 24, 1, 8, static_cast<std::int64_t>(sd::lanes), false, 7, false);
    y.assign(p.outputs(), 0.0f);
    CHECK(!sd::conv_forward_parts(p.L, p.all(), p.src(), p.weights(), p.dst(y), split(p.J, 2), 1.0f, false));
  }
  SUBCASE("groups narrower than half a vector share vectors (no broadcast columns)") {
    auto const p = problem(4, 8, 2, 8);
    y.assign(p.outputs(), 0.0f);
    CHECK(!sd::conv_forward_parts(p.L, p.all(), p.src(), p.weights(), p.dst(y), split(p.J, 2), 1.0f, false));
  }
  SUBCASE("Winograd") {
    Problem<float> const p(1, 6, 6, 1, 8, static_cast<std::int64_t>(sd::lanes), false, 9, true);
    y.assign(p.outputs(), 0.0f);
    CHECK(!sd::conv_forward_parts(p.L, p.all(), p.src(), p.weights(), p.dst(y), split(p.J, 2), 1.0f, false));
  }
  SUBCASE("an empty part") {
    auto const p = problem(1, 8, static_cast<std::int64_t>(sd::lanes), 10);
    y.assign(p.outputs(), 0.0f);
    std::vector<sd::ForwardPart> const parts{{0, 4, nullptr}, {4, 4, nullptr}};
    CHECK(!sd::conv_forward_parts(p.L, p.all(), p.src(), p.weights(), p.dst(y), parts, 1.0f, false));
  }
}
