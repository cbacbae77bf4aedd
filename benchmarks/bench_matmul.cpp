// Matmul on tiles (ipu_mk2(1) plan, 2 host threads) against oneDNN's and OpenBLAS's sgemm on the same shapes,
// in the same binary when those libraries were found. Counters: GFLOP/s.
#include <tilebsp/tilebsp.hpp>

#include <benchmark/benchmark.h>

#include "isa_context.hpp"

#if TILEBSP_HAVE_DNNL
#include <dnnl.h>
#endif
#if TILEBSP_HAVE_OPENBLAS
#include <cblas.h>
// OpenBLAS's worker threads spin for about 2^28 cycles after each call before they sleep (its THREAD_TIMEOUT): left
// spinning they would take the cores from whatever runs next in this binary (BM_Matmul/128x128x784 ran 5% slower
// after an OpenBLAS run). Exported by threaded builds of libopenblas, not declared in cblas.h (weak: a serial
// build has no threads and no such function); the next call starts them again.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));
#endif
#if TILEBSP_HAVE_OPENMP
#include <omp.h>
#endif

#include <cstdint>
#include <string>
#include <vector>

namespace tb = tilebsp;

namespace {

constexpr int kThreads = 2;

struct Shape {
  std::size_t m, n, k;
};
constexpr Shape kShapes[] = {{256, 256, 256},     {512, 512, 512},    {1024, 1024, 1024}, {2048, 2048, 2048},
                             {32, 10, 784},       {128, 128, 784},    {12544, 128, 256},  {784, 1024, 512},
                             {4, 1000, 2048}};

std::string name_of(Shape s) { return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k); }

void set_rate(benchmark::State& state, Shape s) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(s.m * s.n * s.k) * 1e-9 *
                                                     static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}

void BM_Matmul(benchmark::State& state, Shape s) {
  tb::Graph g{tb::targets::ipu_mk2(1)};
  auto a = g.add_variable<float>({s.m, s.k}, "a"), b = g.add_variable<float>({s.k, s.n}, "b");
  tb::map_linearly(g, a);
  tb::map_linearly(g, b);
  tb::Sequence prog;
  tb::ops::matmul(g, prog, a, b);
  tb::Engine engine{tb::compile(g, prog), {.host_threads = kThreads}};
  engine.write(a, std::vector<float>(s.m * s.k, 0.5f));
  engine.write(b, std::vector<float>(s.k * s.n, 0.25f));
  for (auto _ : state) engine.run();
  set_rate(state, s);
}

#if TILEBSP_HAVE_DNNL
void BM_Onednn_Matmul(benchmark::State& state, Shape s) {
  std::vector<float> a(s.m * s.k, 0.5f), b(s.k * s.n, 0.25f), c(s.m * s.n);
  auto const M = static_cast<dnnl_dim_t>(s.m), N = static_cast<dnnl_dim_t>(s.n), K = static_cast<dnnl_dim_t>(s.k);
  for (auto _ : state) {
    dnnl_sgemm('N', 'N', M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, c.data(), N);
    benchmark::DoNotOptimize(c.data());
  }
  set_rate(state, s);
}
#endif

#if TILEBSP_HAVE_OPENBLAS
void BM_Openblas_Matmul(benchmark::State& state, Shape s) {
  std::vector<float> a(s.m * s.k, 0.5f), b(s.k * s.n, 0.25f), c(s.m * s.n);
  auto const M = static_cast<int>(s.m), N = static_cast<int>(s.n), K = static_cast<int>(s.k);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, c.data(), N);
    benchmark::DoNotOptimize(c.data());
  }
  if (blas_thread_shutdown_) blas_thread_shutdown_();
  set_rate(state, s);
}
#endif

}  // namespace

int main(int argc, char** argv) {
#if TILEBSP_HAVE_OPENMP
  omp_set_num_threads(kThreads);  // oneDNN's OpenMP runtime
#endif
#if TILEBSP_HAVE_OPENBLAS
  openblas_set_num_threads(kThreads);
#endif
  for (Shape const s : kShapes) {
    benchmark::RegisterBenchmark(("BM_Matmul/" + name_of(s)).c_str(), BM_Matmul, s)->UseRealTime();
#if TILEBSP_HAVE_DNNL
    benchmark::RegisterBenchmark(("BM_Onednn_Matmul/" + name_of(s)).c_str(), BM_Onednn_Matmul, s)->UseRealTime();
#endif
#if TILEBSP_HAVE_OPENBLAS
    benchmark::RegisterBenchmark(("BM_Openblas_Matmul/" + name_of(s)).c_str(), BM_Openblas_Matmul, s)->UseRealTime();
#endif
  }
#if TILEBSP_HAVE_DNNL
  return tilebsp_bench::run_main(argc, argv, tilebsp_bench::onednn_isa());
#else
  return tilebsp_bench::run_main(argc, argv);
#endif
}
