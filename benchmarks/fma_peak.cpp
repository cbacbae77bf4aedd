// The f32 multiply-add peak of this host for the instruction set this file is compiled for (-march of the
// benchmarks): independent chains of fused multiply-adds in registers, on one thread and on each hardware thread
// at once. What no kernel can pass: with it, a benchmark's GFLOP/s reads as a fraction of the machine.
// Usage: fma_peak [threads (default: all)]
#include <tilebsp/simd/arch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

namespace sd = tilebsp::simd;
using B = sd::batch<float>;

/// Rounds of `chains` independent multiply-add chains (enough to cover the latency of two pipes); returns a sum
/// so that the work is not removed.
float run(long rounds) {
  constexpr int chains = 12;
  B acc[chains];
  for (int i = 0; i < chains; ++i) acc[i] = B(1.0f + static_cast<float>(i) * 1e-7f);
  B const m(0.9999999f), a(1e-7f);
  for (long k = 0; k < rounds; ++k) {
    TILEBSP_UNROLL
    for (int i = 0; i < chains; ++i) acc[i] = sd::fma(acc[i], m, a);
  }
  B s = acc[0];
  for (int i = 1; i < chains; ++i) s += acc[i];
  return xsimd::hadd(s);
}

double gflops(unsigned threads, long rounds) {
  std::vector<std::thread> ts;
  std::vector<float> sink(threads);
  auto const t0 = std::chrono::steady_clock::now();
  for (unsigned t = 0; t < threads; ++t) ts.emplace_back([&, t] { sink[t] = run(rounds); });
  for (auto& t : ts) t.join();
  double const s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  float total = 0;
  for (float v : sink) total += v;
  if (total == 12345.0f) std::puts("");  // keeps the sums alive
  return 2.0 * static_cast<double>(sd::lanes) * 12.0 * static_cast<double>(rounds) * threads / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned const all = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : std::thread::hardware_concurrency();
  long const rounds = 400'000'000L / 12;
  gflops(1, rounds / 10);  // warm-up: clocks up
  double best1 = 0, bestn = 0;
  for (int rep = 0; rep < 3; ++rep) {
    best1 = std::max(best1, gflops(1, rounds));
    bestn = std::max(bestn, gflops(all, rounds));
  }
  std::printf("isa: %s (%zu lanes)\n", sd::isa_name(), sd::lanes);
  std::printf("fma_peak_gflops_1_thread: %.1f\n", best1);
  std::printf("fma_peak_gflops_%u_threads: %.1f\n", all, bestn);
  return 0;
}
