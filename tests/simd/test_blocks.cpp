// The cache sizes the kernels block for (core/caches.hpp: TILEBSP_CACHE_SIZES or detected) and the blocks derived
// from them (simd/blocks.hpp): the option's errors by type and message, the blocks of the hosts we tune on, and
// the kernels' results bitwise the same under caches from 4K to 2M of L2 (gemm in each of its paths, direct and
// Winograd convolutions, weight gradients).
#include "conv_problem.hpp"

#include <tilebsp/core/caches.hpp>
#include <tilebsp/simd/blocks.hpp>
#include <tilebsp/simd/conv.hpp>
#include <tilebsp/simd/gemm.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace sd = tilebsp::simd;
using tilebsp::CacheSizes;
using tilebsp::half;
using tilebsp_test::Problem;

namespace {

constexpr std::size_t KiB = 1024, MiB = KiB * KiB;

void check_error(char const* text, std::string const& message) {
  INFO(text);
  CHECK_THROWS_WITH_AS(tilebsp::parse_cache_sizes(text), message.c_str(), tilebsp::option_error);
}

/// Every output of the kernels under test, as raw bits, computed under the caches in force.
std::vector<std::uint32_t> run_kernels() {
  std::vector<std::uint32_t> bits;
  auto const keep = [&](auto const& values) {
    for (auto v : values) {
      float const f = static_cast<float>(v);
      std::uint32_t u;
      std::memcpy(&u, &f, sizeof u);
      bits.push_back(u);
    }
  };
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1, 1);
  auto const random = [&](std::size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
  };
  // gemm: 300 x 1024 x 1300 (three K blocks, several blocks of A rows and of packed B columns), B packed here
  // (rows 4K apart) and read in place (a 1000-column row stride), f16 A, f16 C, a transposed A, gemm_ksum.
  {
    std::size_t const m = 300, k = 1300;
    auto const a = random(m * k);
    for (std::size_t n : {std::size_t{1024}, std::size_t{1000}}) {
      auto const b = random(k * n);
      std::vector<float> c(m * n, 0.5f);
      auto const N = static_cast<std::ptrdiff_t>(n);
      sd::gemm(m, n, k, 1.0f, sd::Matrix<float>{a.data(), static_cast<std::ptrdiff_t>(k), 1}, sd::Matrix<float>{b.data(), N, 1}, 0.25f,
               sd::MatrixOut<float>{c.data(), N, 1});
      keep(c);
      sd::gemm(m, n, k, 1.0f, sd::Matrix<float>{a.data(), 1, static_cast<std::ptrdiff_t>(m)}, sd::Matrix<float>{b.data(), N, 1}, 0.0f,
               sd::MatrixOut<float>{c.data(), N, 1});
      keep(c);
      std::vector<half> ah(a.begin(), a.end()), ch(m * n);
      sd::gemm(m, n, k, 1.0f, sd::Matrix<half>{ah.data(), static_cast<std::ptrdiff_t>(k), 1}, sd::Matrix<float>{b.data(), N, 1}, 0.0f,
               sd::MatrixOut<half>{ch.data(), N, 1});
      keep(ch);
      sd::gemm_ksum(m, n, k, 35, 35, sd::Matrix<float>{a.data(), static_cast<std::ptrdiff_t>(k), 1}, sd::Matrix<float>{b.data(), N, 1},
                    sd::MatrixOut<float>{c.data(), N, 1});
      keep(c);
    }
  }
  // Convolutions at 28² with 2 groups of 16 -> 32 channels (boxes of many rows at 1M of L2, of one at 4K).
  {
    Problem<float> const direct(2, 28, 28, 2, 16, 32, false, 11, false), wino(2, 28, 28, 2, 16, 32, false, 12, true);
    for (Problem<float> const* p : {&direct, &wino}) {
      std::vector<float> y(p->outputs(), 0.0f);
      sd::conv_forward(p->L, p->all(), p->src(), p->weights(), p->dst(y), false);
      keep(y);
    }
    std::vector<float> dy = random(direct.outputs()), dw(static_cast<std::size_t>(2 * 9 * 16 * 32), 0.0f);
    sd::Operand6<float const> const g{dy.data(), {28 * 28 * 64, 28 * 28 * 64, 28 * 64, 64, 32, 1}, {}};
    sd::Operand6<float> const out{dw.data(), {9 * 16 * 32, 9 * 16 * 32, 3 * 16 * 32, 16 * 32, 32, 1}, {}};
    sd::conv_weight_gradient(direct.L, direct.all(), direct.src(), g, out, false);
    keep(dw);
  }
  return bits;
}

}  // namespace

TEST_CASE("TILEBSP_CACHE_SIZES: three sizes L1D,L2,L3 in bytes, K, M or G") {
  CHECK(tilebsp::parse_cache_sizes("32K,512K,32M") == CacheSizes{32 * KiB, 512 * KiB, 32 * MiB});
  CHECK(tilebsp::parse_cache_sizes("49152,2m,1G") == CacheSizes{48 * KiB, 2 * MiB, 1024 * MiB});
  CHECK(tilebsp::to_string(CacheSizes{48 * KiB, 1280 * KiB, 96 * MiB}) == "48K,1280K,96M");
  CHECK(tilebsp::to_string(CacheSizes{3000, 2 * MiB, 2 * MiB}) == "3000,2M,2M");
  CHECK(tilebsp::parse_cache_sizes(tilebsp::to_string(CacheSizes{3000, 1280 * KiB, 96 * MiB})) == CacheSizes{3000, 1280 * KiB, 96 * MiB});
  check_error("32K,512K", "TILEBSP_CACHE_SIZES=32K,512K: 2 size(s); expected L1D,L2,L3 such as 32K,512K,32M");
  check_error("32K,512K,32M,1G", "TILEBSP_CACHE_SIZES=32K,512K,32M,1G: more than three sizes; expected L1D,L2,L3 such as 32K,512K,32M");
  check_error("32K,,32M", "TILEBSP_CACHE_SIZES=32K,,32M: '' is not a size (digits, then K, M or G)");
  check_error("32K,512KiB,32M", "TILEBSP_CACHE_SIZES=32K,512KiB,32M: '512KiB' is not a size (digits, then K, M or G)");
  check_error("-32K,512K,32M", "TILEBSP_CACHE_SIZES=-32K,512K,32M: '-32K' is not a size (digits, then K, M or G)");
  check_error("100,512K,32M", "TILEBSP_CACHE_SIZES=100,512K,32M: '100' is outside 1K to 64G");
  check_error("32K,512K,99999999999999999999999G",
              "TILEBSP_CACHE_SIZES=32K,512K,99999999999999999999999G: '99999999999999999999999G' is outside 1K to 64G");
  check_error("32K,512K,65G", "TILEBSP_CACHE_SIZES=32K,512K,65G: '65G' is outside 1K to 64G");
  check_error("1M,512K,32M", "TILEBSP_CACHE_SIZES=1M,512K,32M: the sizes decrease; expected L1D <= L2 <= L3");
}

TEST_CASE("detected caches: every level reported, none smaller than the one below") {
  CacheSizes const c = tilebsp::detect_cache_sizes();
  INFO(tilebsp::to_string(c));
  CHECK(c.l1d >= 4 * KiB);
  CHECK(c.l2 >= c.l1d);
  CHECK(c.l3 >= c.l2);
}

TEST_CASE("blocks: the Zen 4 core's caches give the blocks tuned on it; Zen 3's half its L2") {
  std::size_t const mr = sd::tuning.gemm_mr, nr = 2 * sd::lanes;
  sd::Blocks const zen4 = sd::blocks_for({32 * KiB, MiB, 32 * MiB});
  CHECK(zen4.gemm_mc == 96);
  CHECK(zen4.gemm_nc == 4096);
  CHECK(zen4.conv_box == 192 * KiB);
  CHECK(zen4.conv_weights == 256 * KiB);
  CHECK(zen4.l1 == 32 * KiB);
  sd::Blocks const zen3 = sd::blocks_for({32 * KiB, 512 * KiB, 32 * MiB});
  CHECK(zen3.gemm_mc == 48);
  CHECK(zen3.conv_box == 96 * KiB);
  // Tiny caches still give whole register blocks.
  sd::Blocks const tiny = sd::blocks_for({KiB, KiB, KiB});
  CHECK(tiny.gemm_mc == mr);
  CHECK(tiny.gemm_nc == 4 * nr);
  CHECK(tiny.gemm_mc % mr == 0);
  CHECK(sd::blocks_for({32 * KiB, 64 * MiB, 64 * MiB}).gemm_mc == 1024 / mr * mr);
}

TEST_CASE("kernels: bitwise the same results under any cache sizes") {
  auto const want = run_kernels();
  for (CacheSizes const c : {CacheSizes{4 * KiB, 16 * KiB, 64 * KiB}, CacheSizes{32 * KiB, 512 * KiB, 32 * MiB}, CacheSizes{48 * KiB, 2 * MiB, 256 * MiB}}) {
    INFO(tilebsp::to_string(c));
    tilebsp::core::detail::override_cache_sizes(c);
    auto const got = run_kernels();
    tilebsp::core::detail::override_cache_sizes(std::nullopt);
    REQUIRE(got.size() == want.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
    CHECK(differ == 0);
  }
}
