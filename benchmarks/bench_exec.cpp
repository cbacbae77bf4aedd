// Executor benchmarks: empty supersteps against spin and OpenMP barriers; exchanges against memcpy.
#include <tilebsp/exec/detail/barrier.hpp>  // cpu_relax, for the spin barrier it is measured against
#include <tilebsp/tilebsp.hpp>

#include <benchmark/benchmark.h>

#include "isa_context.hpp"
#if TILEBSP_HAVE_OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace tb = tilebsp;

namespace {

constexpr int kThreads = 2;
constexpr std::size_t kSteps = 20000;

struct Nop {
  BOOST_HANA_DEFINE_STRUCT(Nop, (tb::inout<std::uint32_t>, x));
  void compute() { x[0] += 1; }
};

/// ns per empty superstep: a compute set with one trivial vertex per tile, kSteps times per run.
void BM_Superstep_empty(benchmark::State& state) {
  tb::Target const target = state.range(0) == 0 ? tb::targets::tiny(2) : tb::targets::ipu_mk2();
  tb::Graph g{target};
  auto x = g.add_variable<std::uint32_t>({g.num_tiles()}, "x");
  tb::map_linearly(g, x);
  auto cs = g.add_compute_set("nop");
  for (std::size_t t = 0; t < g.num_tiles(); ++t) g.add_vertex<Nop>(cs, t, x.slice(t, t + 1));
  tb::Engine engine{tb::compile(g, tb::repeat(kSteps, tb::execute(cs))), {.host_threads = kThreads}};
  for (auto _ : state) engine.run();
  state.counters["ns_per_superstep"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kSteps) / 1e9,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(target.name);
}
BENCHMARK(BM_Superstep_empty)->Name("BM_Superstep/empty")->Arg(0)->Arg(1)->ArgName("mk2")->UseRealTime()->Unit(benchmark::kMillisecond);

/// Peer: a sense-reversing spin barrier (as in shared/peers/barrier_peers.cpp), two threads.
struct SpinBarrier {
  explicit SpinBarrier(int n) : n_(n) {}
  void arrive_and_wait() {
    int const gen = gen_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) == n_ - 1) {
      count_.store(0, std::memory_order_relaxed);
      gen_.store(gen + 1, std::memory_order_release);
    } else {
      while (gen_.load(std::memory_order_acquire) == gen) tb::exec::detail::cpu_relax();
    }
  }
  int n_;
  alignas(64) std::atomic<int> count_{0};
  alignas(64) std::atomic<int> gen_{0};
};

void BM_Peer_SpinBarrier(benchmark::State& state) {
  SpinBarrier bar(kThreads);
  for (auto _ : state) {
    std::thread other([&] {
      for (std::size_t s = 0; s < kSteps; ++s) bar.arrive_and_wait();
    });
    for (std::size_t s = 0; s < kSteps; ++s) bar.arrive_and_wait();
    other.join();
  }
  state.counters["ns_per_superstep"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kSteps) / 1e9,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Peer_SpinBarrier)->UseRealTime()->Unit(benchmark::kMillisecond);

#if TILEBSP_HAVE_OPENMP
void BM_Peer_OmpBarrier(benchmark::State& state) {
  for (auto _ : state) {
#pragma omp parallel num_threads(kThreads)
    for (std::size_t s = 0; s < kSteps; ++s) {
#pragma omp barrier
    }
  }
  state.counters["ns_per_superstep"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kSteps) / 1e9,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Peer_OmpBarrier)->UseRealTime()->Unit(benchmark::kMillisecond);
#endif

constexpr std::size_t kExchangeTiles = 16;
std::size_t repetitions(std::size_t bytes) { return std::max<std::size_t>(1, (std::size_t{256} << 20) / bytes); }

/// GB/s of a shift of every tile's data to the next tile (a ring), `bytes` in total per exchange.
void BM_Exchange(benchmark::State& state) {
  auto const bytes = static_cast<std::size_t>(state.range(0));
  std::size_t const per = bytes / sizeof(float) / kExchangeTiles;
  tb::Graph g{tb::targets::tiny(kExchangeTiles, 64 << 20)};
  auto a = g.add_variable<float>({kExchangeTiles * per}, "a"), b = g.add_variable<float>({kExchangeTiles * per}, "b");
  tb::map_linearly(g, a);
  tb::map_linearly(g, b);
  tb::Sequence shift;
  for (std::size_t t = 0; t < kExchangeTiles; ++t) {
    std::size_t const u = (t + 1) % kExchangeTiles;
    shift.add(tb::copy(a.slice(t * per, (t + 1) * per), b.slice(u * per, (u + 1) * per)));
  }
  std::size_t const reps = repetitions(bytes);
  tb::Engine engine{tb::compile(g, tb::repeat(reps, shift)), {.host_threads = kThreads}};
  for (auto _ : state) engine.run();
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * reps * kExchangeTiles * per * sizeof(float)));
}
BENCHMARK(BM_Exchange)->RangeMultiplier(4)->Range(64 << 10, 64 << 20)->UseRealTime()->Unit(benchmark::kMillisecond);

/// Peer: memcpy of the same bytes split over the same threads, the same number of times.
void BM_Peer_Memcpy(benchmark::State& state) {
  auto const bytes = static_cast<std::size_t>(state.range(0));
  std::size_t const half = bytes / kThreads, reps = repetitions(bytes);
  std::vector<std::vector<char>> src(kThreads, std::vector<char>(half, 1)), dst(kThreads, std::vector<char>(half, 0));
  auto body = [&](int t) {
    for (std::size_t r = 0; r < reps; ++r) {
      std::memcpy(dst[t].data(), src[t].data(), half);
      benchmark::ClobberMemory();
    }
  };
  for (auto _ : state) {
    std::thread other(body, 1);
    body(0);
    other.join();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * reps * half * kThreads));
}
BENCHMARK(BM_Peer_Memcpy)->RangeMultiplier(4)->Range(64 << 10, 64 << 20)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) { return tilebsp_bench::run_main(argc, argv); }
