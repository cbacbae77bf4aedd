// Elementwise maps and reductions against a hand-vectorised loop and memcpy (2 host threads, ipu_mk2 mapping).
#include <tilebsp/tilebsp.hpp>

#include <benchmark/benchmark.h>

#include "isa_context.hpp"

#include <cstring>
#include <thread>
#include <vector>

namespace tb = tilebsp;
using namespace tb::expr;

namespace {

constexpr int kThreads = 2;

/// Runs body(t) on kThreads threads (the caller is thread 0).
template <class F>
void parallel(F const& body) {
  std::thread other(body, 1);
  body(0);
  other.join();
}

template <class E>
void run_map(benchmark::State& state, E const& e) {
  auto const n = static_cast<std::size_t>(state.range(0));
  tb::Graph g{tb::targets::ipu_mk2()};
  auto x = g.add_variable<float>({n}, "x"), y = g.add_variable<float>({n}, "y");
  tb::map_linearly(g, x);
  tb::map_linearly(g, y);
  tb::Sequence prog;
  tb::ops::map<float, float>(g, prog, e, x, y);  // the f32 kernels only
  tb::Engine engine{tb::compile(g, prog), {.host_threads = kThreads}};
  engine.write(x, std::vector<float>(n, 1.5f));
  engine.write(y, std::vector<float>(n, -2.0f));
  for (auto _ : state) engine.run();
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * 3 * sizeof(float)));  // 2 in, 1 out
}

/// relu(x * 2 + y): the fused SGD-style map the issue measures.
void BM_Map_axpy_relu(benchmark::State& state) { run_map(state, relu(_1 * 2 + _2)); }
/// One operator, for the fusion comparison.
void BM_Map_one_op(benchmark::State& state) { run_map(state, _1 + _2); }
/// Five operators (*, +, relu, *, -) over the same data.
void BM_Map_five_ops(benchmark::State& state) { run_map(state, relu(_1 * 2 + _2) * _1 - 0.5); }

BENCHMARK(BM_Map_axpy_relu)->Name("BM_Map/axpy_relu")->Arg(1 << 16)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();
BENCHMARK(BM_Map_one_op)->Name("BM_Map/one_op")->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();
BENCHMARK(BM_Map_five_ops)->Name("BM_Map/five_ops")->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();

/// Peer: the same relu(x * 2 + y) as a plain vectorised loop over two threads.
void BM_Peer_HandLoop(benchmark::State& state) {
  using B = xsimd::batch<float>;
  auto const n = static_cast<std::size_t>(state.range(0));
  std::vector<float> x(n, 1.5f), y(n, -2.0f), z(n);
  for (auto _ : state) {
    parallel([&](int t) {
      std::size_t const lo = n * t / kThreads, hi = n * (t + 1) / kThreads;
      std::size_t i = lo;
      for (; i + B::size <= hi; i += B::size)
        xsimd::max(B::load_unaligned(&x[i]) * B(2.0f) + B::load_unaligned(&y[i]), B(0.0f)).store_unaligned(&z[i]);
      for (; i < hi; ++i) z[i] = std::max(x[i] * 2.0f + y[i], 0.0f);
    });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * 3 * sizeof(float)));
}
BENCHMARK(BM_Peer_HandLoop)->Arg(1 << 16)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();

/// Peer: memcpy of n floats over two threads (bytes read plus bytes written).
void BM_Peer_Memcpy(benchmark::State& state) {
  auto const n = static_cast<std::size_t>(state.range(0));
  std::vector<float> x(n, 1.0f), z(n);
  for (auto _ : state) {
    parallel([&](int t) {
      std::size_t const lo = n * t / kThreads, hi = n * (t + 1) / kThreads;
      std::memcpy(&z[lo], &x[lo], (hi - lo) * sizeof(float));
    });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * 2 * sizeof(float)));
}
BENCHMARK(BM_Peer_Memcpy)->Arg(1 << 16)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();

/// Sum of n floats: stage 1 on every tile, then the fixed-order cross-tile stage.
void BM_Reduce_add(benchmark::State& state) {
  auto const n = static_cast<std::size_t>(state.range(0));
  tb::Graph g{tb::targets::ipu_mk2()};
  auto x = g.add_variable<float>({n}, "x");
  tb::map_linearly(g, x);
  tb::Sequence prog;
  tb::ops::reduce(g, prog, x, {0}, tb::ops::ReduceOp::add);
  tb::Engine engine{tb::compile(g, prog), {.host_threads = kThreads}};
  engine.write(x, std::vector<float>(n, 0.5f));
  for (auto _ : state) engine.run();
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float)));
}
BENCHMARK(BM_Reduce_add)->Name("BM_Reduce/add")->Arg(1 << 16)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();

/// Peer: a hand-written vectorised sum over two threads (four accumulators each), then the two partials.
void BM_Peer_HandReduce(benchmark::State& state) {
  using B = xsimd::batch<float>;
  auto const n = static_cast<std::size_t>(state.range(0));
  std::vector<float> x(n, 0.5f);
  float partial[kThreads];
  for (auto _ : state) {
    parallel([&](int t) {
      std::size_t const lo = n * t / kThreads, hi = n * (t + 1) / kThreads;
      B a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
      std::size_t i = lo;
      for (; i + 4 * B::size <= hi; i += 4 * B::size) {
        a0 += B::load_unaligned(&x[i]);
        a1 += B::load_unaligned(&x[i + B::size]);
        a2 += B::load_unaligned(&x[i + 2 * B::size]);
        a3 += B::load_unaligned(&x[i + 3 * B::size]);
      }
      float s = xsimd::hadd((a0 + a1) + (a2 + a3));
      for (; i < hi; ++i) s += x[i];
      partial[t] = s;
    });
    benchmark::DoNotOptimize(partial[0] + partial[1]);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float)));
}
BENCHMARK(BM_Peer_HandReduce)->Arg(1 << 16)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();

}  // namespace

int main(int argc, char** argv) { return tilebsp_bench::run_main(argc, argv); }
