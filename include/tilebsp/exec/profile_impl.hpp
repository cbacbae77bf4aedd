// Profile's definitions: included by <tilebsp/exec/profile.hpp> (header-only) or compiled once into
// tilebsp::compiled (src/engine.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/detail/json.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/exec/detail/report_html.hpp>
#include <tilebsp/exec/profile.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <string_view>
#include <type_traits>
#include <unordered_map>
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

TILEBSP_COLD TILEBSP_INLINE std::string Profile::summary() const {
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

namespace exec::detail {
inline void write_file(char const* op, std::string const& path, std::string const& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw error(std::string(op) + ": cannot open '" + path + "' for writing");
  f << text;
  if (!f) throw error(std::string(op) + ": failed writing '" + path + "'");
}
}  // namespace exec::detail

TILEBSP_COLD TILEBSP_INLINE ProfileDetail Profile::detail(std::size_t threads) const {
  ProfileDetail d;
  if (executable.empty()) return d;
  auto const& s = executable.schedule();
  auto const& g = *s.graph;
  program::detail::MemoryDetail md;
  program::detail::account_memory(s, threads ? threads : std::max(1u, std::thread::hardware_concurrency()), &md);
  auto const name_of_var = [&](std::int64_t v) {
    return v < 0 ? std::string("vertex state") : g.variables[static_cast<std::size_t>(v)].name;
  };
  auto const always = [&](std::int64_t v) { return v < 0 || !md.tracked[static_cast<std::size_t>(v)]; };
  d.tiles.resize(md.occupants.size());
  for (std::size_t t = 0; t < md.occupants.size(); ++t)
    for (auto const& [what, bytes] : md.occupants[t]) d.tiles[t].push_back({name_of_var(what), bytes, always(what)});
  for (auto const& m : memory) d.always_live_bytes += m.always_live;
  for (std::size_t pi = 0; pi < md.live.size(); ++pi) {
    auto& l = d.liveness.emplace_back();
    l.bytes = md.live[pi];
    l.peak_step = static_cast<std::size_t>(std::max_element(l.bytes.begin(), l.bytes.end()) - l.bytes.begin());
    std::uint64_t vars = 0;
    for (auto const& r : md.ranges[pi]) {
      auto const& v = g.variables[r.var];
      std::uint64_t const b = static_cast<std::uint64_t>(v.size) * size_of(v.type);
      l.ranges.push_back({v.name, b, r.first, std::min(r.last, l.bytes.empty() ? 0 : l.bytes.size() - 1)});
      if (r.first <= l.peak_step && l.peak_step <= r.last) {
        vars += b;
        l.peak_variables.push_back({v.name, b, false});
      }
    }
    std::stable_sort(l.peak_variables.begin(), l.peak_variables.end(),
                     [](auto const& a, auto const& b) { return a.bytes > b.bytes; });
    if (l.peak_variables.size() > 40) l.peak_variables.resize(40);
    l.peak_buffers = l.bytes.empty() || l.bytes[l.peak_step] < vars ? 0 : l.bytes[l.peak_step] - vars;
  }
  // Compute cycles per tile: each compute set's per-tile estimate (as the lowering's) times its executions.
  bool ran = false;
  for (auto const& p : programs)
    for (auto const& st : p) ran = ran || st.executions > 0;
  std::vector<std::uint64_t> weight(s.compute_sets.size(), 0);
  for (std::size_t pi = 0; pi < s.programs.size() && pi < programs.size(); ++pi)
    for (std::size_t pc = 0; pc < s.programs[pi].code.size(); ++pc)
      if (auto const& in = s.programs[pi].code[pc]; in.op == program::detail::Op::superstep && in.a >= 0)
        weight[static_cast<std::size_t>(in.a)] += ran ? programs[pi][pc].executions : 1;
  d.tile_cycles.assign(target.num_tiles(), 0);
  for (std::size_t c = 0; c < s.compute_sets.size(); ++c)
    if (weight[c] > 0)
      program::detail::for_each_tile_cycles(g, s.compute_sets[c], [&](std::uint32_t tile, std::uint64_t cycles) {
        d.tile_cycles[tile] += weight[c] * cycles;
      });
  return d;
}

TILEBSP_COLD TILEBSP_INLINE std::string Profile::json(ProfileDetail const* detail) const {
  // Written piece by piece into one string (a chain of operator+ per field compiled to five times the code).
  std::string o;
  auto const put = [&o](auto const&... parts) {
    auto const one = [&o](auto const& v) {
      using V = std::decay_t<decltype(v)>;
      if constexpr (std::is_integral_v<V> && !std::is_same_v<V, bool>) {
        char b[24];
        o.append(b, std::to_chars(b, b + sizeof b, v).ptr);
      } else if constexpr (std::is_same_v<V, bool>) {
        o += v ? "true" : "false";
      } else if constexpr (std::is_floating_point_v<V>) {
        o += std::to_string(v);
      } else {
        o += v;
      }
    };
    (one(parts), ...);
  };
  auto const str = [&](std::string const& v) { put("\"", core::detail::json_escape(v), "\""); };
  auto const list = [&](auto const& v) {
    o += '[';
    for (std::size_t i = 0; i < v.size(); ++i) put(i ? "," : "", v[i]);
    o += ']';
  };
  put("{\n  \"format\": \"tilebsp-profile\", \"version\": 2,\n  \"target\": {\"name\": ");
  str(target.name);
  put(", \"ipus\": ", target.ipus, ", \"tiles_per_ipu\": ", target.tiles_per_ipu, ", \"bytes_per_tile\": ",
      target.bytes_per_tile, ", \"clock_hz\": ", target.clock_hz, "},\n  \"replicas\": ", replicas,
      ", \"first_replica\": ", first_replica, ", \"local_replicas\": ", local_replicas, ",\n  \"host_threads\": ",
      host_threads, ",\n  \"host_timing\": ", host_timing, ",\n  \"estimated_cycles\": ", estimated_cycles(),
      ",\n  \"host_ns\": ", host_ns(), ",\n  \"programs\": [");
  for (std::size_t p = 0; p < programs.size(); ++p) {
    put(p ? ",\n    [" : "\n    [");
    for (std::size_t i = 0; i < programs[p].size(); ++i) {
      auto const& s = programs[p][i];
      put(i ? ",\n      " : "\n      ", "{\"kind\": \"", s.kind, "\", \"label\": ");
      str(s.label);
      put(", \"est_cycles\": ", s.est_cycles, ", \"executions\": ", s.executions, ", \"host_ns\": ", s.host_ns,
          ", \"exchange_bytes\": ", s.exchange_bytes, ", \"inter_ipu_bytes\": ", s.inter_ipu_bytes,
          ", \"collective_bytes\": ", s.collective_bytes, ", \"stage\": ", s.stage, ", \"ipu\": ", s.ipu,
          ", \"compute_cycles\": ", s.compute_cycles, ", \"exchange_cycles\": ", s.exchange_cycles,
          ", \"compute_set\": ");
      str(s.compute_set);
      put(", \"op\": ", s.op, ", \"ipus\": ");
      list(s.ipus);
      o += '}';
    }
    o += ']';
  }
  put("\n  ],\n  \"stages\": [");
  for (std::size_t i = 0; i < stages.size(); ++i)
    put(i ? ", " : "", "{\"program\": ", stages[i].program, ", \"stage\": ", stages[i].stage, ", \"ipu\": ",
        stages[i].ipu, ", \"est_cycles\": ", stages[i].est_cycles, ", \"runs\": ", stages[i].runs, "}");
  put("],\n  \"operators\": [");
  for (std::size_t i = 0; i < operators.size(); ++i) {
    auto const& op = operators[i];
    put(i ? ",\n    " : "\n    ", "{\"kind\": ");
    str(op.kind);
    put(", \"name\": ");
    str(op.name);
    put(", \"compute_sets\": ", op.compute_sets, ", \"est_cycles\": ", op.est_cycles, ", \"host_ns\": ", op.host_ns,
        ", \"plans\": [");
    for (std::size_t k = 0; k < op.plans.size(); ++k) put(k ? ", " : ""), str(op.plans[k]);
    put("]}");
  }
  put("],\n  \"memory\": [");
  for (std::size_t t = 0; t < memory.size(); ++t)
    put(t ? ", [" : "[", memory[t].always_live, ", ", memory[t].peak_live, ", ", memory[t].peak_temporary, "]");
  o += ']';
  if (detail) {
    // Names once: tiles and liveness refer to them by index.
    std::vector<std::string const*> names;
    std::unordered_map<std::string_view, std::size_t> index;
    auto const id = [&](std::string const& n) {
      auto [it, fresh] = index.try_emplace(n, names.size());
      if (fresh) names.push_back(&n);
      return it->second;
    };
    put(",\n  \"detail\": {\"always_live_bytes\": ", detail->always_live_bytes, ",\n   \"tile_cycles\": ");
    list(detail->tile_cycles);
    put(",\n   \"tiles\": [");
    for (std::size_t t = 0; t < detail->tiles.size(); ++t) {
      o += t ? ",[" : "[";
      for (std::size_t k = 0; k < detail->tiles[t].size(); ++k) {
        auto const& m = detail->tiles[t][k];
        put(k ? ",[" : "[", id(m.name), ",", m.bytes, m.always_live ? ",1]" : ",0]");
      }
      o += ']';
    }
    put("],\n   \"liveness\": [");
    for (std::size_t p = 0; p < detail->liveness.size(); ++p) {
      auto const& l = detail->liveness[p];
      put(p ? ",\n    " : "\n    ", "{\"program\": ", p, ", \"peak_step\": ", l.peak_step, ", \"peak_buffers\": ",
          l.peak_buffers, ", \"bytes\": ");
      list(l.bytes);
      put(", \"peak_variables\": [");
      for (std::size_t k = 0; k < l.peak_variables.size(); ++k)
        put(k ? ",[" : "[", id(l.peak_variables[k].name), ",", l.peak_variables[k].bytes, "]");
      put("], \"ranges\": [");
      for (std::size_t k = 0; k < l.ranges.size(); ++k)
        put(k ? ",[" : "[", id(l.ranges[k].name), ",", l.ranges[k].bytes, ",", l.ranges[k].first, ",",
            l.ranges[k].last, "]");
      put("]}");
    }
    put("],\n   \"names\": [");
    for (std::size_t i = 0; i < names.size(); ++i) put(i ? "," : ""), str(*names[i]);
    put("]}");
  }
  put("\n}\n");
  return o;
}
TILEBSP_COLD TILEBSP_INLINE void Profile::write_json(std::string const& path, ProfileDetail const* detail) const {
  exec::detail::write_file("write_json", path, json(detail));
}
TILEBSP_COLD TILEBSP_INLINE std::string Profile::html(ProfileDetail const& detail) const {
  std::string data = json(&detail);
  // Inside <script>: "</" would end the element.
  for (std::size_t at = 0; (at = data.find("</", at)) != std::string::npos; at += 3) data.replace(at, 2, "<\\/");
  return std::string(exec::detail::report_head) + data + exec::detail::report_tail;
}
TILEBSP_COLD TILEBSP_INLINE void Profile::write_html(std::string const& path) const {
  exec::detail::write_file("write_html", path, html());
}
TILEBSP_COLD TILEBSP_INLINE void Profile::write_report(std::string const& dir) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw error("write_report: cannot create the directory '" + dir + "': " + ec.message());
  ProfileDetail const d = detail();
  auto const at = [&](char const* name) { return (std::filesystem::path(dir) / name).string(); };
  write_json(at("profile.json"), &d);
  exec::detail::write_file("write_report", at("report.html"), html(d));
  exec::detail::write_file("write_report", at("summary.txt"), summary());
}

}  // namespace tilebsp
