// Auto-reports: TILEBSP_ENGINE_OPTIONS, a JSON object as Poplar's POPLAR_ENGINE_OPTIONS, makes every Engine write
// its report (report::write_report, through report_writer) when it is destroyed.
#pragma once

#include <tilebsp/core/detail/json.hpp>
#include <tilebsp/core/error.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace tilebsp {
struct Profile;
}

namespace tilebsp::exec::detail {

/// Writes an Engine's auto-report into a directory. exec does not include the report layer:
/// <tilebsp/report/auto_report.hpp> sets this (tilebsp::compiled includes it); an Engine that TILEBSP_ENGINE_OPTIONS
/// asks for a report while it is unset throws option_error when it is made.
using ReportWriter = void (*)(Profile const& profile, std::string const& dir);
#if defined(TILEBSP_COMPILED)
// One hook per process: tilebsp::compiled defines it (src/engine.cpp) and exports it, so that a program and the
// library (a shared one keeps its own copy of every inline variable) read and set the same pointer.
extern TILEBSP_API ReportWriter report_writer;
#else
inline ReportWriter report_writer = nullptr;
#endif

/// What TILEBSP_ENGINE_OPTIONS asks of an Engine.
struct AutoReport {
  bool graph = false;      ///< write profile.json, report.html and summary.txt (memory, liveness, cycles)
  bool execution = false;  ///< measure host time per step (EngineOptions::profiling), shown in the report
  std::string directory = ".";
  bool any() const noexcept { return graph || execution; }
};

/// The options in `text` (a JSON object). Keys: autoReport.all, autoReport.outputGraphProfile,
/// autoReport.outputExecutionProfile (true or false, as booleans or strings) and autoReport.directory (a
/// string). autoReport.all sets both outputs; a specific key given as well wins. Throws option_error on bad JSON,
/// an unknown key or a bad value.
inline AutoReport parse_engine_options(std::string_view text) {
  std::string const what = "TILEBSP_ENGINE_OPTIONS";
  AutoReport r;
  std::optional<bool> all, graph, execution;
  auto const flag = [&](std::string const& key, core::detail::JsonScalar const& v) {
    using K = core::detail::JsonScalar::Kind;
    if ((v.kind == K::boolean || v.kind == K::string) && (v.text == "true" || v.text == "false")) return v.text == "true";
    throw option_error(what + ": \"" + key + "\" must be true or false, not " +
                       (v.kind == K::string ? "\"" + v.text + "\"" : v.text));
  };
  for (auto const& [key, v] : core::detail::parse_json_object(text, what)) {
    if (key == "autoReport.all") {
      all = flag(key, v);
    } else if (key == "autoReport.outputGraphProfile") {
      graph = flag(key, v);
    } else if (key == "autoReport.outputExecutionProfile") {
      execution = flag(key, v);
    } else if (key == "autoReport.directory") {
      if (v.kind != core::detail::JsonScalar::Kind::string || v.text.empty())
        throw option_error(what + ": \"autoReport.directory\" must be a non-empty string");
      r.directory = v.text;
    } else {
      throw option_error(what + ": unknown option \"" + key + "\" (known: autoReport.all, autoReport.directory, "
                         "autoReport.outputExecutionProfile, autoReport.outputGraphProfile)");
    }
  }
  r.graph = graph.value_or(all.value_or(false));
  r.execution = execution.value_or(all.value_or(false));
  return r;
}

/// parse_engine_options of TILEBSP_ENGINE_OPTIONS; nothing when it is unset or empty.
inline AutoReport auto_report_from_environment() {
  char const* e = std::getenv("TILEBSP_ENGINE_OPTIONS");
  return e && *e ? parse_engine_options(e) : AutoReport{};
}

}  // namespace tilebsp::exec::detail
