// compile()'s definitions (the mapping check and the driver; cycle estimates and memory accounting are
// estimate_impl.hpp's and liveness_impl.hpp's): included by
// <tilebsp/program/compile.hpp> (header-only) or compiled once into tilebsp::compiled (src/compile.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/detail/parallel.hpp>
#include <tilebsp/core/log.hpp>
#include <tilebsp/core/warning.hpp>
#include <tilebsp/program/compile.hpp>
#include <tilebsp/program/estimate_impl.hpp>
#include <tilebsp/program/liveness_impl.hpp>
#include <tilebsp/program/executable_cache_impl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace tilebsp::program::detail {
TILEBSP_INLINE void check_mapped(GraphImpl const& g, std::size_t threads) {
  // Each variable's queued assignments are resolved here, on up to `threads` threads (variables are independent),
  // before anything reads the mappings from several threads; the error names the first unmapped variable.
  core::detail::parallel_for(threads, g.variables.size(), 64, [&](std::size_t i, std::size_t) {
    auto const& v = g.variables[i];
    if (v.mapping.mapped() >= v.size) return;
    std::int64_t first = -1, at = 0;
    auto const unmapped = v.mapping.for_each(0, v.size, [&](std::int64_t b, std::int64_t e, std::uint32_t) {
      if (first < 0 && b > at) first = at;
      at = e;
    });
    if (first < 0 && at < v.size) first = at;
    throw mapping_error("compile: " + std::string(v.constant ? "constant" : "variable") + " '" + v.name + "' has " +
                        std::to_string(unmapped) + " of " + std::to_string(v.size) +
                        " elements not mapped to any tile (first unmapped element: " + std::to_string(first) + ")");
  });
}

/// The executable cache's directory: the option, else TILEBSP_EXECUTABLE_CACHE, else none (empty).
TILEBSP_INLINE std::string cache_directory(CompileOptions const& options) {
  if (!options.cache_dir.empty()) return options.cache_dir;
  char const* env = std::getenv("TILEBSP_EXECUTABLE_CACHE");
  return env ? env : "";
}

/// The process's resident memory now and at its peak, bytes (Linux: /proc/self/status; elsewhere 0).
inline std::pair<std::uint64_t, std::uint64_t> process_memory() {
  std::uint64_t rss = 0, peak = 0;
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      unsigned long long kb = 0;
      if (std::sscanf(line, "VmRSS: %llu kB", &kb) == 1) rss = kb * 1024;
      if (std::sscanf(line, "VmHWM: %llu kB", &kb) == 1) peak = kb * 1024;
    }
    std::fclose(f);
  }
  return {rss, peak};
}

/// Logs each compile phase at level info as it ends: its time and the process's memory.
class PhaseLog {
 public:
  PhaseLog() : on_(logging::enabled(LogLevel::info)), begin_(std::chrono::steady_clock::now()) {}
  ~PhaseLog() {
    if (!on_) return;
    end_phase();
    logging::info("compile: done in " + seconds(begin_) + " s");
  }
  void enter(std::string_view name) {
    if (!on_ || name == name_) return;
    end_phase();
    name_ = name;
    since_ = std::chrono::steady_clock::now();
  }

 private:
  static std::string seconds(std::chrono::steady_clock::time_point from) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count());
    return b;
  }
  void end_phase() {
    if (name_.empty()) return;
    auto const [rss, peak] = process_memory();
    logging::info("compile: " + name_ + ": " + seconds(since_) + " s; process memory " + std::to_string(rss >> 20) +
                  " MiB (peak " + std::to_string(peak >> 20) + " MiB)");
    name_.clear();
  }
  bool on_;
  std::chrono::steady_clock::time_point begin_, since_;
  std::string name_;
};

TILEBSP_INLINE Executable compile_programs(Graph const& g, CompileOptions const& options,
                                           std::function<void(Lowering&)> const& lower) {
  logging::check_environment();
  PhaseLog log;
  auto const phase = [&](std::string_view name, std::size_t done = 0, std::size_t total = 0) {
    if (options.progress) options.progress(name, done, total);
    log.enter(name);
  };
  std::size_t const threads = options.threads != 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  phase("checking the mapping");
  if (options.replicas == 0) throw option_error("compile: replicas must be at least 1");
  check_mapped(g.impl(), threads);
  auto const graph = g.snapshot();
  std::string dir = cache_directory(options);
  if (!dir.empty()) {
    char const* trust = std::getenv("TILEBSP_EXECUTABLE_CACHE_TRUST");
    if (std::string const why = use_cache_directory(dir, options.trust_cache_dir || (trust && std::string_view(trust) == "1"));
        !why.empty()) {
      warn("executable cache: not using '" + dir + "': it " + why +
           "; compiling without the cache (make it this user's and owner-only, chmod 700, or trust it with "
           "CompileOptions::trust_cache_dir or TILEBSP_EXECUTABLE_CACHE_TRUST=1)");
      dir.clear();
    }
  }
  std::string entry;
  std::optional<CacheKey> key;
  if (!dir.empty()) {
    // Record the programs (no planning), hash them with the graph, and look for the entry.
    phase("hashing the graph and programs");
    auto walked = std::make_shared<Schedule>();
    walked->graph = graph;
    walked->replicas = options.replicas;
    Lowering recorder(*graph, *walked, LowerMode::record);
    lower(recorder);
    key = executable_key(*graph, *walked, recorder.copies_hash(), threads, true);
    {
      entry = (std::filesystem::path(dir) / key->file_name()).string();
      phase("loading the executable cache");
      std::vector<TileMemory> memory;
      std::string why;
      switch (load_executable(entry, *key, *walked, memory, why, threads)) {
        case CacheLoad::hit: {
          if (!options.allow_out_of_memory) check_memory(*walked, memory);
          Executable exe(std::move(walked), std::move(memory));
          exe.cache_entry_ = entry;
          exe.loaded_ = true;
          return exe;
        }
        case CacheLoad::bad:
          warn("executable cache: " + entry + " is unusable (" + why + "); compiling afresh and replacing it");
          break;
        case CacheLoad::absent: break;
      }
    }
  }
  auto s = std::make_shared<Schedule>();
  s->graph = graph;
  s->replicas = options.replicas;
  Lowering l(*s->graph, *s);
  l.plan_compute_sets(threads, [&](std::size_t done, std::size_t total) { phase("planning compute sets", done, total); });
  phase("lowering the programs");
  lower(l);
  phase("estimating cycles");
  estimate_cycles(*s);
  phase("accounting memory");
  auto memory = account_memory(*s, threads);
  // The fetched bytes per tile were for the memory report, now made: the host reads fetched data in place.
  for (auto& cs : s->compute_sets) decltype(cs.fetched_in)().swap(cs.fetched_in);
  if (key) {
    phase("writing the executable cache");
    if (std::string const why = save_executable(entry, *key, *s, memory); !why.empty())
      warn("executable cache: cannot store " + entry + " (" + why + ")");
  }
  if (!options.allow_out_of_memory) check_memory(*s, memory);
  Executable exe(std::move(s), std::move(memory));
  exe.cache_entry_ = entry;
  return exe;
}

}  // namespace tilebsp::program::detail
