// The instruction sets a benchmark ran with, added to Google Benchmark's context (printed above the table and in
// the JSON output): the one tilebsp's kernels were compiled for, the best one the host has, and oneDNN's where it
// is a peer (ONEDNN_MAX_CPU_ISA may cap it: set it to AVX2 beside a TILEBSP_MARCH=x86-64-v3 build to compare the
// AVX2 kernels on an AVX-512 host).
#pragma once

#include <tilebsp/ops/kernels.hpp>
#include <tilebsp/simd/arch.hpp>

#include <benchmark/benchmark.h>

#if TILEBSP_HAVE_DNNL
#include <dnnl.h>
#endif

#include <fstream>
#include <string>

namespace tilebsp_bench {

/// The best x86 vector instruction set the host runs (what `-march=native` would compile for).
inline std::string host_isa() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "avx512";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2+fma";
  if (__builtin_cpu_supports("avx")) return "avx";
  return "sse2";
#else
  return "non-x86";
#endif
}

/// The host's CPU model as /proc/cpuinfo names it (empty where there is none).
inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return {};
}

#if TILEBSP_HAVE_DNNL
/// The instruction set oneDNN's kernels dispatch to on this host (after ONEDNN_MAX_CPU_ISA).
inline std::string onednn_isa() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "oneDNN sse41";
    case dnnl_cpu_isa_avx: return "oneDNN avx";
    case dnnl_cpu_isa_avx2: return "oneDNN avx2";
    case dnnl_cpu_isa_avx2_vnni: return "oneDNN avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "oneDNN avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "oneDNN avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "oneDNN avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "oneDNN avx512_core_amx";
    default: return "oneDNN isa " + std::to_string(static_cast<int>(dnnl_get_effective_cpu_isa()));
  }
}
#endif

/// Adds tilebsp_isa (this file's kernels), tilebsp_ops_kernels (the operators' kernels in use: tilebsp::compiled's
/// choice, docs/11), host_isa, cpu_model and (given) peer_isa to the benchmark context.
inline void add_isa_context(std::string const& peer_isa = {}) {
  benchmark::AddCustomContext("tilebsp_isa", tilebsp::simd::isa_name());
  benchmark::AddCustomContext("tilebsp_ops_kernels", std::string(tilebsp::ops::kernels_isa()));
  benchmark::AddCustomContext("host_isa", host_isa());
  if (auto const m = cpu_model(); !m.empty()) benchmark::AddCustomContext("cpu_model", m);
  if (!peer_isa.empty()) benchmark::AddCustomContext("peer_isa", peer_isa);
}

/// A benchmark's main(): the instruction sets into the context, then Google Benchmark's usual run.
inline int run_main(int argc, char** argv, std::string const& peer_isa = {}) {
  add_isa_context(peer_isa);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace tilebsp_bench
