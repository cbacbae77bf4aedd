// The report layer's definitions: included by <tilebsp/report/report.hpp> (header-only) or compiled once into
// tilebsp::compiled (src/report.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/detail/json.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/report/detail/html_page.hpp>
#include <tilebsp/report/report.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace tilebsp {

TILEBSP_COLD TILEBSP_INLINE std::string report::summary(Profile const& profile) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "target %s: %zu IPU(s) x %zu tiles x %zu KiB, %zu host thread(s)\n",
                profile.target.name.c_str(), profile.target.ipus, profile.target.tiles_per_ipu, profile.target.bytes_per_tile / 1024, profile.host_threads);
  out += buf;
  if (profile.replicas > 1) {
    std::snprintf(buf, sizeof buf, "replicas: %zu (this engine ran %zu to %zu); figures are per replica\n", profile.replicas,
                  profile.first_replica, profile.first_replica + profile.local_replicas - 1);
    out += buf;
  }
  double const cyc = static_cast<double>(profile.estimated_cycles());
  std::snprintf(buf, sizeof buf, "estimated IPU time: %.0f cycles = %.3f ms at %.2f GHz\n", cyc,
                cyc / profile.target.clock_hz * 1e3, profile.target.clock_hz / 1e9);
  out += buf;
  if (profile.host_timing) {
    std::snprintf(buf, sizeof buf, "measured host time: %.3f ms\n", static_cast<double>(profile.host_ns()) / 1e6);
    out += buf;
  } else {
    out += "measured host time: off (EngineOptions::profiling)\n";
  }
  if (auto const kernels = profile.kernels(); !kernels.empty()) {
    out += "operators' kernels:";
    for (auto const& k : kernels) out += " " + k;
    out += "\n";
  }
  for (std::size_t p = 0; p < profile.programs.size(); ++p) {
    std::vector<StepProfile const*> steps;
    for (auto const& s : profile.programs[p])
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
                    profile.host_timing ? static_cast<double>(s.host_ns) / static_cast<double>(s.executions) : 0.0);
      out += buf;
    }
    if (steps.size() > 12) out += "  ... " + std::to_string(steps.size() - 12) + " more steps\n";
    for (auto const& st : profile.stages)
      if (st.program == p) {
        std::snprintf(buf, sizeof buf, "  pipeline stage %zu on IPU %zu: %llu micro-batches, %llu est cycles each\n",
                      st.stage, st.ipu, static_cast<unsigned long long>(st.runs),
                      static_cast<unsigned long long>(st.est_cycles));
        out += buf;
      }
  }
  if (std::uint64_t const link = profile.inter_ipu_bytes(); profile.target.ipus > 1) {
    std::snprintf(buf, sizeof buf, "inter-IPU traffic: %llu bytes over IPU-Links\n", static_cast<unsigned long long>(link));
    out += buf;
  }
  if (std::uint64_t const all = profile.collective_bytes(); profile.replicas > 1) {
    std::snprintf(buf, sizeof buf, "cross-replica collectives: %llu bytes per replica reduced\n",
                  static_cast<unsigned long long>(all));
    out += buf;
  }
  std::uint64_t sum = 0, live = 0, part = 0, temp = 0;
  std::size_t used = 0, worst = 0;
  for (std::size_t t = 0; t < profile.memory.size(); ++t) {
    sum += profile.memory[t].total();
    live = std::max(live, profile.memory[t].always_live);
    part = std::max(part, profile.memory[t].peak_live);
    temp = std::max(temp, profile.memory[t].peak_temporary);
    used += profile.memory[t].total() > 0;
    if (profile.memory[t].total() > profile.memory[worst].total()) worst = t;
  }
  double const mean = profile.memory.empty() ? 0 : static_cast<double>(sum) / static_cast<double>(profile.memory.size());
  std::snprintf(buf, sizeof buf,
                "memory: max %llu B on tile %zu of %zu B (%.1f%%), mean %.0f B, max always-live %llu B, max "
                "not-always-live peak %llu B (temporary %llu B), %zu/%zu tiles used, balance max/mean %.2f%s\n",
                static_cast<unsigned long long>(profile.max_tile_bytes()), worst, profile.target.bytes_per_tile,
                100.0 * static_cast<double>(profile.max_tile_bytes()) / static_cast<double>(profile.target.bytes_per_tile), mean,
                static_cast<unsigned long long>(live), static_cast<unsigned long long>(part),
                static_cast<unsigned long long>(temp), used, profile.memory.size(),
                mean > 0 ? static_cast<double>(profile.max_tile_bytes()) / mean : 0.0,
                profile.max_tile_bytes() > profile.target.bytes_per_tile ? " -- OUT OF MEMORY" : "");
  out += buf;
  return out;
}

namespace report::detail {
inline void write_file(char const* op, std::string const& path, std::string const& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw error(std::string(op) + ": cannot open '" + path + "' for writing");
  f << text;
  if (!f) throw error(std::string(op) + ": failed writing '" + path + "'");
}
}  // namespace report::detail


TILEBSP_COLD TILEBSP_INLINE std::string report::json(Profile const& profile, ProfileDetail const* detail) {
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
  put("{\n  \"format\": \"tilebsp-profile\", \"version\": 3,\n  \"target\": {\"name\": ");
  str(profile.target.name);
  put(", \"ipus\": ", profile.target.ipus, ", \"tiles_per_ipu\": ", profile.target.tiles_per_ipu, ", \"bytes_per_tile\": ",
      profile.target.bytes_per_tile, ", \"clock_hz\": ", profile.target.clock_hz, "},\n  \"replicas\": ", profile.replicas,
      ", \"first_replica\": ", profile.first_replica, ", \"local_replicas\": ", profile.local_replicas, ",\n  \"host_threads\": ",
      profile.host_threads, ",\n  \"host_timing\": ", profile.host_timing, ",\n  \"kernels\": [");
  {
    auto const kernels = profile.kernels();
    for (std::size_t i = 0; i < kernels.size(); ++i) put(i ? ", " : ""), str(kernels[i]);
  }
  put("],\n  \"estimated_cycles\": ", profile.estimated_cycles(), ",\n  \"host_ns\": ", profile.host_ns(),
      ",\n  \"programs\": [");
  for (std::size_t p = 0; p < profile.programs.size(); ++p) {
    put(p ? ",\n    [" : "\n    [");
    for (std::size_t i = 0; i < profile.programs[p].size(); ++i) {
      auto const& s = profile.programs[p][i];
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
  for (std::size_t i = 0; i < profile.stages.size(); ++i)
    put(i ? ", " : "", "{\"program\": ", profile.stages[i].program, ", \"stage\": ", profile.stages[i].stage, ", \"ipu\": ",
        profile.stages[i].ipu, ", \"est_cycles\": ", profile.stages[i].est_cycles, ", \"runs\": ", profile.stages[i].runs, "}");
  put("],\n  \"operators\": [");
  for (std::size_t i = 0; i < profile.operators.size(); ++i) {
    auto const& op = profile.operators[i];
    put(i ? ",\n    " : "\n    ", "{\"kind\": ");
    str(op.kind);
    put(", \"name\": ");
    str(op.name);
    put(", \"kernels\": ");
    str(op.kernels);
    put(", \"compute_sets\": ", op.compute_sets, ", \"est_cycles\": ", op.est_cycles, ", \"host_ns\": ", op.host_ns,
        ", \"plans\": [");
    for (std::size_t k = 0; k < op.plans.size(); ++k) put(k ? ", " : ""), str(op.plans[k]);
    put("]}");
  }
  put("],\n  \"memory\": [");
  for (std::size_t t = 0; t < profile.memory.size(); ++t)
    put(t ? ", [" : "[", profile.memory[t].always_live, ", ", profile.memory[t].peak_live, ", ", profile.memory[t].peak_temporary, "]");
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
TILEBSP_COLD TILEBSP_INLINE void report::write_json(Profile const& profile, std::string const& path, ProfileDetail const* detail) {
  report::detail::write_file("write_json", path, json(profile, detail));
}
TILEBSP_COLD TILEBSP_INLINE std::string report::html(Profile const& profile, ProfileDetail const& detail) {
  std::string data = json(profile, &detail);
  // Inside <script>: "</" would end the element.
  for (std::size_t at = 0; (at = data.find("</", at)) != std::string::npos; at += 3) data.replace(at, 2, "<\\/");
  return std::string(report::detail::report_head) + data + report::detail::report_tail;
}
TILEBSP_COLD TILEBSP_INLINE void report::write_html(Profile const& profile, std::string const& path) {
  report::detail::write_file("write_html", path, html(profile, profile.detail()));
}
TILEBSP_COLD TILEBSP_INLINE void report::write_report(Profile const& profile, std::string const& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw error("write_report: cannot create the directory '" + dir + "': " + ec.message());
  ProfileDetail const d = profile.detail();
  auto const at = [&](char const* name) { return (std::filesystem::path(dir) / name).string(); };
  write_json(profile, at("profile.json"), &d);
  report::detail::write_file("write_report", at("report.html"), html(profile, d));
  report::detail::write_file("write_report", at("summary.txt"), summary(profile));
}

// The deprecated members of Profile, forwarding.
TILEBSP_COLD TILEBSP_INLINE std::string Profile::summary() const { return report::summary(*this); }
TILEBSP_COLD TILEBSP_INLINE std::string Profile::json(ProfileDetail const* detail) const { return report::json(*this, detail); }
TILEBSP_COLD TILEBSP_INLINE void Profile::write_json(std::string const& path, ProfileDetail const* detail) const {
  report::write_json(*this, path, detail);
}
TILEBSP_COLD TILEBSP_INLINE std::string Profile::html(ProfileDetail const& detail) const { return report::html(*this, detail); }
TILEBSP_COLD TILEBSP_INLINE std::string Profile::html() const { return report::html(*this); }
TILEBSP_COLD TILEBSP_INLINE void Profile::write_html(std::string const& path) const { report::write_html(*this, path); }
TILEBSP_COLD TILEBSP_INLINE void Profile::write_report(std::string const& dir) const { report::write_report(*this, dir); }

}  // namespace tilebsp
