// simd::gemm, the packed register-blocked micro-kernel under tile matmuls, against a double reference.
#include <tilebsp/simd/gemm.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

namespace sd = tilebsp::simd;

namespace {
/// Runs C = alpha * op(A) * op(B) + beta * C with A and/or B stored transposed, checks PopLibs-style tolerances
/// (relative 0.01, absolute 1e-6) or exact equality for +-1 data.
void check(std::size_t m, std::size_t n, std::size_t k, bool ta, bool tb, bool ones, float alpha = 1, float beta = 0) {
  INFO(m << "x" << n << "x" << k << (ta ? " A^T" : "") << (tb ? " B^T" : "") << (ones ? " +-1" : ""));
  std::mt19937 rng(static_cast<unsigned>(m * 131 + n * 17 + k));
  std::uniform_real_distribution<float> d(-1, 1);
  auto value = [&] { return ones ? (d(rng) < 0 ? -1.0f : 1.0f) : d(rng); };
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (auto& x : a) x = value();
  for (auto& x : b) x = value();
  for (auto& x : c) x = value();
  auto const c0 = c;
  // A stored [m][k] or, transposed, [k][m]; B stored [k][n] or [n][k].
  sd::MatrixRef const ar = ta ? sd::MatrixRef{a.data(), 1, m} : sd::MatrixRef{a.data(), k, 1};
  sd::MatrixRef const br = tb ? sd::MatrixRef{b.data(), 1, k} : sd::MatrixRef{b.data(), n, 1};
  sd::gemm(m, n, k, alpha, ar, br, beta, c.data(), n);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::size_t p = 0; p < k; ++p) s += double(ar.data[i * ar.rs + p * ar.cs]) * br.data[p * br.rs + j * br.cs];
      double const want = alpha * s + beta * double(c0[i * n + j]);
      double const got = c[i * n + j];
      bool const ok = ones ? got == want : std::abs(got - want) <= 1e-6 + 0.01 * std::abs(want);
      bad += !ok;
    }
  CHECK(bad == 0);
}
}  // namespace

TEST_CASE("gemm: the matmul issue's shapes, transposed operands, +-1 data exact") {
  for (bool ones : {true, false}) {
    check(1, 1000, 1, false, false, ones);
    check(1, 3, 1, false, false, ones);
    check(100, 100, 100, false, false, ones);
    check(3, 100, 5, false, false, ones);
    check(1024, 256, 100, false, false, ones);
    for (bool ta : {false, true})
      for (bool tb : {false, true}) check(40, 39, 38, ta, tb, ones);
  }
  check(37, 300, 513, false, true, false, 0.5f, 2.0f);  // several K blocks accumulate onto beta * C
  check(7, 65, 300, true, false, false, -1.0f, 1.0f);
}

TEST_CASE("gemm: zero-size M, N or K") {
  std::vector<float> c(6, 3.0f);
  float const* none = nullptr;
  sd::gemm(0, 3, 4, 1, {none, 4, 1}, {none, 3, 1}, 0, c.data(), 3);  // nothing to write
  CHECK(c == std::vector<float>(6, 3.0f));
  sd::gemm(2, 3, 0, 1, {none, 0, 1}, {none, 3, 1}, 0.5f, c.data(), 3);  // empty sum: C = beta * C
  CHECK(c == std::vector<float>(6, 1.5f));
}
