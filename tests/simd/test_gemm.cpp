// simd::gemm, the register-blocked micro-kernel under tile matmuls, against a double reference: f32 and f16
// operands and results, transposed operands, strided results, alpha and beta.
#include <tilebsp/simd/gemm.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace sd = tilebsp::simd;
using tilebsp::half;

namespace {
/// Runs C = alpha * op(A) * op(B) + beta * C with A and/or B stored transposed and C stored transposed when tc,
/// checks PopLibs-style tolerances (relative 0.01 / absolute 1e-6 for f32 results, 0.1 / 1e-5 for f16) or exact
/// equality for +-1 data.
template <class TA = float, class TB = float, class TC = float>
void check(std::size_t m, std::size_t n, std::size_t k, bool ta, bool tb, bool ones, float alpha = 1, float beta = 0,
           bool tc = false) {
  std::string const label = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + (ta ? " A^T" : "") +
                            (tb ? " B^T" : "") + (tc ? " C^T" : "") + (ones ? " +-1" : "");
  INFO(label);
  std::mt19937 rng(static_cast<unsigned>(m * 131 + n * 17 + k));
  std::uniform_real_distribution<float> d(-1, 1);
  auto value = [&] { return ones ? (d(rng) < 0 ? -1.0f : 1.0f) : d(rng); };
  std::vector<TA> a(m * k);
  std::vector<TB> b(k * n);
  std::vector<TC> c(m * n);
  for (auto& x : a) x = TA(value());
  for (auto& x : b) x = TB(value());
  for (auto& x : c) x = TC(value());
  auto const c0 = c;
  auto const M = static_cast<std::ptrdiff_t>(m), N = static_cast<std::ptrdiff_t>(n), K = static_cast<std::ptrdiff_t>(k);
  // A stored [m][k] or, transposed, [k][m]; B stored [k][n] or [n][k]; C [m][n] or [n][m].
  sd::Matrix<TA> const ar = ta ? sd::Matrix<TA>{a.data(), 1, M} : sd::Matrix<TA>{a.data(), K, 1};
  sd::Matrix<TB> const br = tb ? sd::Matrix<TB>{b.data(), 1, K} : sd::Matrix<TB>{b.data(), N, 1};
  sd::MatrixOut<TC> const cr = tc ? sd::MatrixOut<TC>{c.data(), 1, M} : sd::MatrixOut<TC>{c.data(), N, 1};
  sd::gemm(m, n, k, alpha, ar, br, beta, cr);
  std::size_t bad = 0;
  bool const f16 = std::is_same_v<TC, half>;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::size_t p = 0; p < k; ++p)
        s += double(static_cast<float>(ar.data[static_cast<std::ptrdiff_t>(i) * ar.rs + static_cast<std::ptrdiff_t>(p) * ar.cs])) *
             static_cast<float>(br.data[static_cast<std::ptrdiff_t>(p) * br.rs + static_cast<std::ptrdiff_t>(j) * br.cs]);
      auto const at = static_cast<std::ptrdiff_t>(i) * cr.rs + static_cast<std::ptrdiff_t>(j) * cr.cs;
      double const want = alpha * s + beta * double(static_cast<float>(c0[static_cast<std::size_t>(at)]));
      double const got = static_cast<float>(c[static_cast<std::size_t>(at)]);
      bool const ok = ones ? got == want
                           : std::abs(got - want) <= (f16 ? 1e-5 : 1e-6) + (f16 ? 0.1 : 0.01) * std::abs(want);
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
  check(7, 65, 300, true, false, false, -1.0f, 1.0f);   // B read in place (few rows), tail panel packed
  check(12, 64, 600, false, false, false, 1.0f, 0.5f);  // B read in place over several K blocks
  check(13, 70, 40, false, false, false, 1.0f, 0.0f, true);  // strided (transposed) C
}

TEST_CASE("gemm: f16 operands and results accumulate in f32") {
  for (bool ones : {true, false}) {
    check<half, half, float>(40, 39, 38, false, false, ones);
    check<half, half, half>(100, 100, 100, false, true, ones);
    check<half, float, half>(3, 100, 5, true, false, ones);
    check<float, half, float>(1, 1000, 1, false, false, ones);
  }
  check<half, half, half>(37, 300, 513, false, false, false, 0.5f, 2.0f);
  check<half, half, half>(20, 33, 17, false, false, false, 1.0f, 0.0f, true);
}

TEST_CASE("gemm: zero-size M, N or K") {
  std::vector<float> c(6, 3.0f);
  float const* none = nullptr;
  sd::gemm(0, 3, 4, 1, {none, 4, 1}, {none, 3, 1}, 0, c.data(), 3);  // nothing to write
  CHECK(c == std::vector<float>(6, 3.0f));
  sd::gemm(2, 3, 0, 1, {none, 0, 1}, {none, 3, 1}, 0.5f, c.data(), 3);  // empty sum: C = beta * C
  CHECK(c == std::vector<float>(6, 1.5f));
}

namespace {
/// gemm_ksum against its definition: within each group of K columns, one gemm per segment accumulating onto the
/// group's partial (beta 0, then 1), then an in-order f32 sum of the groups' partials — bitwise.
template <class TA, class TB>
void check_ksum(std::size_t m, std::size_t n, std::size_t k, std::size_t kb, bool ta, bool tc, std::size_t group = 0,
                std::size_t ldb = 0) {
  if (group == 0) group = kb;
  if (ldb == 0) ldb = n;
  INFO(m << "x" << n << "x" << k << " groups of " << group << " segments of " << kb << (ta ? " A^T" : "")
         << (tc ? " C^T" : "") << " ldb " << ldb);
  std::mt19937 rng(static_cast<unsigned>(m * 7 + n * 11 + k * 13 + kb + group * 17));
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<TA> a(m * k);
  std::vector<TB> b(k * ldb);
  for (auto& x : a) x = TA(d(rng));
  for (auto& x : b) x = TB(d(rng));
  auto const M = static_cast<std::ptrdiff_t>(m), N = static_cast<std::ptrdiff_t>(n), K = static_cast<std::ptrdiff_t>(k);
  sd::Matrix<TA> const ar = ta ? sd::Matrix<TA>{a.data(), 1, M} : sd::Matrix<TA>{a.data(), K, 1};
  sd::Matrix<TB> const br{b.data(), static_cast<std::ptrdiff_t>(ldb), 1};
  std::vector<float> want(m * n, 0.0f), part(m * n), got(m * n, 7.0f);
  for (std::size_t g0 = 0; g0 < k; g0 += group) {
    std::size_t const g1 = std::min(k, g0 + group);
    for (std::size_t k0 = g0; k0 < g1; k0 += kb) {
      std::size_t const len = std::min(kb, g1 - k0);
      auto const o = static_cast<std::ptrdiff_t>(k0);
      sd::gemm(m, n, len, 1.0f, sd::Matrix<TA>{ar.data + o * ar.cs, ar.rs, ar.cs}, sd::Matrix<TB>{br.data + o * br.rs, br.rs, br.cs},
               k0 == g0 ? 0.0f : 1.0f, sd::MatrixOut<float>{part.data(), N, 1});
    }
    for (std::size_t i = 0; i < m * n; ++i) want[i] = g0 == 0 ? part[i] : want[i] + part[i];
  }
  sd::MatrixOut<float> const s = tc ? sd::MatrixOut<float>{got.data(), 1, M} : sd::MatrixOut<float>{got.data(), N, 1};
  if (group == kb) sd::gemm_ksum(m, n, k, kb, ar, br, s);
  else sd::gemm_ksum(m, n, k, group, kb, ar, br, s);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j)
      bad += got[static_cast<std::size_t>(static_cast<std::ptrdiff_t>(i) * s.rs + static_cast<std::ptrdiff_t>(j) * s.cs)] !=
             want[i * n + j];
  CHECK(bad == 0);
}
}  // namespace

TEST_CASE("gemm_ksum: bitwise one gemm per K segment summed in order") {
  check_ksum<float, float>(32, 10, 784, 22, false, false);   // direct B, masked tail, several cache blocks
  check_ksum<float, float>(128, 128, 784, 35, false, false);  // B read in place (rows 512 bytes apart)
  check_ksum<float, float>(4, 1000, 2048, 64, false, false);
  check_ksum<float, float>(79, 64, 1024, 147, true, false);   // one segment per cache block
  check_ksum<float, float>(13, 45, 300, 256, false, true);    // strided result
  check_ksum<half, half>(30, 40, 500, 37, false, false);
  check_ksum<half, float>(7, 17, 90, 1, false, true);
  // Groups of several segments (a tile's K range in serial steps), in every way B is read.
  check_ksum<float, float>(128, 128, 784, 20, false, false, 70);        // B read in place, last group shorter
  check_ksum<float, float>(300, 100, 700, 147, false, false, 293, 256); // packed B (1 KiB row stride, many rows)
  check_ksum<float, float>(3, 150, 1000, 64, false, false, 250);       // few rows: four-vector panels, masked tail
  check_ksum<float, float>(9, 40, 600, 512, true, true, 600);          // one group over two cache blocks' worth
  check_ksum<half, float>(20, 33, 333, 50, false, false, 111);
  // Single-segment groups with the running sums in registers (AVX-512), every edge block of rows: 101 = 16 x 6 + 5
  // on packed B over three cache blocks (the later ones continue the sum in C), 45 = 7 x 6 + 3 in place, 64 =
  // 10 x 6 + 4, transposed A with 2 rows left.
  check_ksum<float, float>(101, 64, 2100, 70, false, false, 0, 256);
  check_ksum<float, float>(45, 96, 500, 50, false, false);
  check_ksum<float, float>(64, 64, 784, 35, false, false, 0, 128);
  check_ksum<float, float>(38, 32, 1500, 100, true, false);
  std::vector<float> s(6, 3.0f);
  float const* none = nullptr;
  sd::gemm_ksum(2, 3, 0, 4, sd::Matrix<float>{none, 0, 1}, sd::Matrix<float>{none, 3, 1}, sd::MatrixOut<float>{s.data(), 3, 1});
  CHECK(s == std::vector<float>(6, 0.0f));  // an empty sum
}

TEST_CASE("gemm and gemm_ksum on B packed ahead: bitwise the same as on B itself") {
  // B (f32 or f16, possibly transposed) packed once by column ranges (as threads would), products over a column
  // range starting inside it; K shorter than, equal to and longer than the cache block; ksum groups and segments.
  auto const run = [](auto tag, std::size_t m, std::size_t n, std::size_t k, bool tb, std::size_t group, std::size_t kb) {
    using TB = decltype(tag);
    INFO(m << "x" << n << "x" << k << (tb ? " B^T" : "") << " group " << group << " kb " << kb
            << (std::is_same_v<TB, half> ? " f16" : ""));
    std::size_t const wide = n + 2 * sd::gemm_nr, ld = (wide + sd::gemm_nr - 1) / sd::gemm_nr * sd::gemm_nr;
    std::vector<float> a(m * k), packed(k * ld, -7.0f), in_place(m * n), ahead(m * n);
    std::vector<TB> b(k * wide);
    std::mt19937 rng(static_cast<unsigned>(m + n * 7 + k * 31));
    std::uniform_real_distribution<float> d(-1, 1);
    for (auto& v : a) v = d(rng);
    for (auto& v : b) v = TB(d(rng));
    sd::Matrix<TB> const bm = tb ? sd::Matrix<TB>{b.data(), 1, static_cast<std::ptrdiff_t>(k)}
                                 : sd::Matrix<TB>{b.data(), static_cast<std::ptrdiff_t>(wide), 1};
    std::size_t const block = sd::gemm_b_block(group);
    for (std::size_t c0 = 0; c0 < wide; c0 += 3 * sd::gemm_nr)  // three panels per call
      sd::pack_b_panels(sd::Matrix<TB>{bm.data + static_cast<std::ptrdiff_t>(c0) * bm.cs, bm.rs, bm.cs}, k,
                        std::min(3 * sd::gemm_nr, wide - c0), block, packed.data(), ld, c0);
    std::size_t const col = sd::gemm_nr;  // the product reads columns [NR, NR + n)
    sd::Matrix<float> const am{a.data(), static_cast<std::ptrdiff_t>(k), 1};
    sd::Matrix<TB> const bc{bm.data + static_cast<std::ptrdiff_t>(col) * bm.cs, bm.rs, bm.cs};
    sd::MatrixOut<float> const c1{in_place.data(), static_cast<std::ptrdiff_t>(n), 1}, c2{ahead.data(), static_cast<std::ptrdiff_t>(n), 1};
    sd::PackedB const pb{packed.data(), ld, col};
    if (group == 0) {
      sd::gemm(m, n, k, 0.75f, am, bc, 0.0f, c1);
      sd::gemm(m, n, k, 0.75f, am, pb, 0.0f, c2);
    } else {
      sd::gemm_ksum(m, n, k, group, kb, am, bc, c1);
      sd::gemm_ksum(m, n, k, group, kb, am, pb, c2);
    }
    CHECK(in_place == ahead);
  };
  for (std::size_t k : {1, 200, 512, 1300})
    for (bool tb : {false, true}) {
      run(float{}, 40, 70, k, tb, 0, 0);
      run(float{}, 300, 256, k, tb, 0, 0);
      run(half{}, 17, 33, k, tb, 0, 0);
      run(float{}, 100, 64, k, tb, 147, 49);
      run(float{}, 100, 64, k, tb, 35, 35);
      run(half{}, 9, 100, k, tb, 600, 512);
    }
}
