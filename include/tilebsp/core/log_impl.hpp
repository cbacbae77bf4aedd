// The log's state and the definitions of core/log.hpp (header-only: included by it; tilebsp::compiled: compiled
// once in src/core.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/core/log.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace tilebsp {
namespace core::detail {

/// The log's level, destination and what was wrong with the environment.
struct LogState {
  std::atomic<int> level{static_cast<int>(LogLevel::warn)};
  std::mutex m;
  std::FILE* out = stderr;
  bool owned = false;  ///< `out` is a file opened here
  std::string dest = "stderr";
  std::string problem;  ///< what was wrong with the environment (empty: nothing)
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  ~LogState() {
    if (owned) std::fclose(out);
  }
  /// Opens `d` (stdout, stderr or a file, appended to); returns an error text or "".
  std::string open(std::string const& d) {
    std::FILE* f = d == "stdout" ? stdout : d == "stderr" ? stderr : std::fopen(d.c_str(), "a");
    if (!f) return "TILEBSP_LOG_DEST: cannot open '" + d + "' for appending";
    if (owned) std::fclose(out);
    out = f, owned = d != "stdout" && d != "stderr", dest = d;
    return "";
  }
  /// Reads the environment; a bad value keeps the default and is remembered for check_environment().
  void read_environment() {
    std::lock_guard lock(m);
    problem.clear();
    int lv = static_cast<int>(LogLevel::warn);
    if (char const* e = std::getenv("TILEBSP_LOG_LEVEL"); e && *e) {
      auto const parsed = parse_level(e);
      if (parsed) lv = static_cast<int>(*parsed);
      else problem = "TILEBSP_LOG_LEVEL: '" + std::string(e) + "' is not one of off, err, warn, info, debug, trace";
    }
    level.store(lv, std::memory_order_relaxed);
    char const* d = std::getenv("TILEBSP_LOG_DEST");
    std::string const why = open(d && *d ? d : "stderr");
    if (!why.empty()) {
      open("stderr");
      if (problem.empty()) problem = why;
    }
  }
  static std::optional<LogLevel> parse_level(std::string_view s) {
    for (int i = 0; i <= 5; ++i)
      if (name_of(static_cast<LogLevel>(i)) == s) return static_cast<LogLevel>(i);
    if (s == "error") return LogLevel::err;
    if (s == "warning") return LogLevel::warn;
    return std::nullopt;
  }
};

TILEBSP_INLINE LogState& log_state() {
  static LogState* s = [] {
    static LogState st;
    st.read_environment();
    return &st;
  }();
  return *s;
}

TILEBSP_INLINE std::atomic<int>& log_level() noexcept { return log_state().level; }

}  // namespace core::detail

namespace logging {

TILEBSP_INLINE void set_destination(std::string const& dest) {
  auto& s = core::detail::log_state();
  std::lock_guard lock(s.m);
  if (std::string const why = s.open(dest); !why.empty()) throw option_error(why);
}

TILEBSP_INLINE void reload_environment() { core::detail::log_state().read_environment(); }

TILEBSP_INLINE void check_environment() {
  auto& s = core::detail::log_state();
  std::lock_guard lock(s.m);
  if (!s.problem.empty()) throw option_error(s.problem);
}

TILEBSP_INLINE void write(LogLevel l, std::string_view text) {
  if (!enabled(l)) return;
  auto& s = core::detail::log_state();
  double const t = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.start).count();
  char head[64];
  std::snprintf(head, sizeof head, "[%.3f] tilebsp %s: ", t,
                l == LogLevel::warn ? "warning" : l == LogLevel::err ? "error" : name_of(l).data());
  std::lock_guard lock(s.m);
  std::fputs(head, s.out);
  std::fwrite(text.data(), 1, text.size(), s.out);
  std::fputc('\n', s.out);
  std::fflush(s.out);
}

}  // namespace logging
}  // namespace tilebsp
