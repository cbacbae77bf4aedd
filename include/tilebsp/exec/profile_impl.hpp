// Profile's definitions: included by <tilebsp/exec/profile.hpp> (header-only) or compiled once into
// tilebsp::compiled (src/engine.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/exec/profile.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace tilebsp {

TILEBSP_INLINE std::uint64_t Profile::estimated_cycles() const {
  std::uint64_t c = 0;
  for (auto const& p : programs)
    for (auto const& s : p)
      if (s.stage < 0) c += s.est_cycles * s.executions;
  return c;
}
TILEBSP_INLINE std::uint64_t Profile::host_ns() const {
  std::uint64_t c = 0;
  for (auto const& p : programs)
    for (auto const& s : p)
      if (s.stage < 0) c += s.host_ns;
  return c;
}
TILEBSP_INLINE std::uint64_t Profile::collective_bytes() const {
  std::uint64_t c = 0;
  for (auto const& p : programs)
    for (auto const& s : p) c += s.collective_bytes * s.executions;
  return c;
}

TILEBSP_INLINE std::uint64_t Profile::inter_ipu_bytes() const {
  std::uint64_t c = 0;
  for (auto const& p : programs)
    for (auto const& s : p) c += s.inter_ipu_bytes * s.executions;
  return c;
}
TILEBSP_INLINE std::uint64_t Profile::max_tile_bytes(std::size_t ipu) const {
  std::uint64_t m = 0;
  for (std::size_t t = ipu * target.tiles_per_ipu; t < std::min(memory.size(), (ipu + 1) * target.tiles_per_ipu); ++t)
    m = std::max(m, memory[t].total());
  return m;
}
TILEBSP_INLINE std::uint64_t Profile::max_tile_bytes() const {
  std::uint64_t m = 0;
  for (auto const& t : memory) m = std::max(m, t.total());
  return m;
}

TILEBSP_INLINE std::string Profile::summary() const {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "target %s: %zu IPU(s) x %zu tiles x %zu KiB, %zu host thread(s)\n",
                target.name.c_str(), target.ipus, target.tiles_per_ipu, target.bytes_per_tile / 1024, host_threads);
  out += buf;
  if (replicas > 1) {
    std::snprintf(buf, sizeof buf, "replicas: %zu (this engine ran %zu to %zu); figures are per replica\n", replicas,
                  first_replica, first_replica + local_replicas - 1);
    out += buf;
  }
  double const cyc = static_cast<double>(estimated_cycles());
  std::snprintf(buf, sizeof buf, "estimated IPU time: %.0f cycles = %.3f ms at %.2f GHz\n", cyc,
                cyc / target.clock_hz * 1e3, target.clock_hz / 1e9);
  out += buf;
  if (host_timing) {
    std::snprintf(buf, sizeof buf, "measured host time: %.3f ms\n", static_cast<double>(host_ns()) / 1e6);
    out += buf;
  } else {
    out += "measured host time: off (EngineOptions::profiling)\n";
  }
  for (std::size_t p = 0; p < programs.size(); ++p) {
    std::vector<StepProfile const*> steps;
    for (auto const& s : programs[p])
      if (s.stage < 0 && s.executions > 0 && (s.est_cycles > 0 || s.host_ns > 0)) steps.push_back(&s);
    std::stable_sort(steps.begin(), steps.end(), [](auto* a, auto* b) {
      return a->est_cycles * a->executions > b->est_cycles * b->executions;
    });
    std::snprintf(buf, sizeof buf, "program %zu: %zu steps ran\n  %-44s %10s %14s %14s\n", p, steps.size(), "step",
                  "runs", "est cycles/run", "host ns/run");
    out += buf;
    for (std::size_t i = 0; i < steps.size() && i < 12; ++i) {
      auto const& s = *steps[i];
      std::string label = s.label.size() > 44 ? s.label.substr(0, 41) + "..." : s.label;
      std::snprintf(buf, sizeof buf, "  %-44s %10llu %14llu %14.0f\n", label.c_str(),
                    static_cast<unsigned long long>(s.executions), static_cast<unsigned long long>(s.est_cycles),
                    host_timing ? static_cast<double>(s.host_ns) / static_cast<double>(s.executions) : 0.0);
      out += buf;
    }
    if (steps.size() > 12) out += "  ... " + std::to_string(steps.size() - 12) + " more steps\n";
    for (auto const& st : stages)
      if (st.program == p) {
        std::snprintf(buf, sizeof buf, "  pipeline stage %zu on IPU %zu: %llu micro-batches, %llu est cycles each\n",
                      st.stage, st.ipu, static_cast<unsigned long long>(st.runs),
                      static_cast<unsigned long long>(st.est_cycles));
        out += buf;
      }
  }
  if (std::uint64_t const link = inter_ipu_bytes(); target.ipus > 1) {
    std::snprintf(buf, sizeof buf, "inter-IPU traffic: %llu bytes over IPU-Links\n", static_cast<unsigned long long>(link));
    out += buf;
  }
  if (std::uint64_t const all = collective_bytes(); replicas > 1) {
    std::snprintf(buf, sizeof buf, "cross-replica collectives: %llu bytes per replica reduced\n",
                  static_cast<unsigned long long>(all));
    out += buf;
  }
  std::uint64_t sum = 0, live = 0, part = 0, temp = 0;
  std::size_t used = 0, worst = 0;
  for (std::size_t t = 0; t < memory.size(); ++t) {
    sum += memory[t].total();
    live = std::max(live, memory[t].always_live);
    part = std::max(part, memory[t].peak_live);
    temp = std::max(temp, memory[t].peak_temporary);
    used += memory[t].total() > 0;
    if (memory[t].total() > memory[worst].total()) worst = t;
  }
  double const mean = memory.empty() ? 0 : static_cast<double>(sum) / static_cast<double>(memory.size());
  std::snprintf(buf, sizeof buf,
                "memory: max %llu B on tile %zu of %zu B (%.1f%%), mean %.0f B, max always-live %llu B, max "
                "not-always-live peak %llu B (temporary %llu B), %zu/%zu tiles used, balance max/mean %.2f%s\n",
                static_cast<unsigned long long>(max_tile_bytes()), worst, target.bytes_per_tile,
                100.0 * static_cast<double>(max_tile_bytes()) / static_cast<double>(target.bytes_per_tile), mean,
                static_cast<unsigned long long>(live), static_cast<unsigned long long>(part),
                static_cast<unsigned long long>(temp), used, memory.size(),
                mean > 0 ? static_cast<double>(max_tile_bytes()) / mean : 0.0,
                max_tile_bytes() > target.bytes_per_tile ? " -- OUT OF MEMORY" : "");
  out += buf;
  return out;
}

TILEBSP_INLINE std::string Profile::json() const {
  auto const esc = [](std::string const& s) {
    std::string r;
    for (char c : s) {
      if (c == '"' || c == '\\') r += '\\';
      if (static_cast<unsigned char>(c) < 0x20) continue;
      r += c;
    }
    return r;
  };
  std::string o = "{\n  \"target\": {\"name\": \"" + esc(target.name) + "\", \"ipus\": " +
                  std::to_string(target.ipus) + ", \"tiles_per_ipu\": " + std::to_string(target.tiles_per_ipu) +
                  ", \"bytes_per_tile\": " + std::to_string(target.bytes_per_tile) +
                  ", \"clock_hz\": " + std::to_string(target.clock_hz) + "},\n";
  o += "  \"replicas\": " + std::to_string(replicas) + ", \"first_replica\": " + std::to_string(first_replica) +
       ", \"local_replicas\": " + std::to_string(local_replicas) + ",\n";
  o += "  \"host_threads\": " + std::to_string(host_threads) + ",\n  \"host_timing\": " +
       (host_timing ? "true" : "false") + ",\n  \"estimated_cycles\": " + std::to_string(estimated_cycles()) +
       ",\n  \"host_ns\": " + std::to_string(host_ns()) + ",\n  \"programs\": [";
  for (std::size_t p = 0; p < programs.size(); ++p) {
    o += p ? ",\n    [" : "\n    [";
    for (std::size_t i = 0; i < programs[p].size(); ++i) {
      auto const& s = programs[p][i];
      o += (i ? ",\n      " : "\n      ") + std::string("{\"kind\": \"") + s.kind + "\", \"label\": \"" +
           esc(s.label) + "\", \"est_cycles\": " + std::to_string(s.est_cycles) + ", \"executions\": " +
           std::to_string(s.executions) + ", \"host_ns\": " + std::to_string(s.host_ns) +
           ", \"exchange_bytes\": " + std::to_string(s.exchange_bytes) +
           ", \"inter_ipu_bytes\": " + std::to_string(s.inter_ipu_bytes) +
           ", \"collective_bytes\": " + std::to_string(s.collective_bytes) + ", \"stage\": " + std::to_string(s.stage) +
           ", \"ipu\": " + std::to_string(s.ipu) + "}";
    }
    o += "]";
  }
  o += "\n  ],\n  \"stages\": [";
  for (std::size_t i = 0; i < stages.size(); ++i)
    o += (i ? ", " : "") + std::string("{\"program\": ") + std::to_string(stages[i].program) + ", \"stage\": " +
         std::to_string(stages[i].stage) + ", \"ipu\": " + std::to_string(stages[i].ipu) + ", \"est_cycles\": " +
         std::to_string(stages[i].est_cycles) + ", \"runs\": " + std::to_string(stages[i].runs) + "}";
  o += "],\n  \"memory\": [";
  for (std::size_t t = 0; t < memory.size(); ++t)
    o += (t ? ", " : "") + std::string("[") + std::to_string(memory[t].always_live) + ", " +
         std::to_string(memory[t].peak_live) + ", " + std::to_string(memory[t].peak_temporary) + "]";
  o += "]\n}\n";
  return o;
}
TILEBSP_INLINE void Profile::write_json(std::string const& path) const {
  std::ofstream f(path);
  if (!f) throw error("write_json: cannot open '" + path + "' for writing");
  f << json();
  if (!f) throw error("write_json: failed writing '" + path + "'");
}

}  // namespace tilebsp
