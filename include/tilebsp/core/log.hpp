// Logging: levels and a destination from the environment (TILEBSP_LOG_LEVEL, TILEBSP_LOG_DEST), as Poplar's
// POPLAR_LOG_LEVEL and POPLAR_LOG_DEST. Warnings (warning.hpp) go through it. A check of a level is one relaxed
// atomic load: code that logs per step tests `logging::enabled(...)` once per run, not per line.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace tilebsp {

/// How much tilebsp says: err (failures), warn (the default: conditions a user should hear about), info (compile
/// phases with time and memory, engines, reports), debug (each operator's plan), trace (each step run).
enum class LogLevel : int { off = 0, err = 1, warn = 2, info = 3, debug = 4, trace = 5 };

inline constexpr std::string_view name_of(LogLevel l) {
  constexpr std::string_view names[] = {"off", "err", "warn", "info", "debug", "trace"};
  return names[static_cast<int>(l)];
}

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
// One log state per process: the library (TILEBSP_COMPILED) defines it once in src/core.cpp
// (TILEBSP_PROCESS_STATE), so that its kernel sets, which keep their own copies of every inline function, share it.
#if defined(TILEBSP_COMPILED) && !defined(TILEBSP_PROCESS_STATE)
LogState& log_state();
#else
TILEBSP_INLINE LogState& log_state() {
  static LogState* s = [] {
    static LogState st;
    st.read_environment();
    return &st;
  }();
  return *s;
}
#endif
}  // namespace core::detail

namespace logging {

/// Whether messages of level `l` are written.
inline bool enabled(LogLevel l) noexcept {
  return static_cast<int>(l) <= core::detail::log_state().level.load(std::memory_order_relaxed) && l != LogLevel::off;
}
/// The current level.
inline LogLevel level() noexcept { return static_cast<LogLevel>(core::detail::log_state().level.load(std::memory_order_relaxed)); }
/// Sets the level (overriding TILEBSP_LOG_LEVEL).
inline void set_level(LogLevel l) noexcept { core::detail::log_state().level.store(static_cast<int>(l), std::memory_order_relaxed); }
/// Sends messages to "stdout", "stderr" or a file (appended to); throws option_error when it cannot be opened.
inline void set_destination(std::string const& dest) {
  auto& s = core::detail::log_state();
  std::lock_guard lock(s.m);
  if (std::string const why = s.open(dest); !why.empty()) throw option_error(why);
}
/// Reads TILEBSP_LOG_LEVEL and TILEBSP_LOG_DEST again (they are read once, at the first message).
inline void reload_environment() { core::detail::log_state().read_environment(); }
/// Throws option_error when TILEBSP_LOG_LEVEL or TILEBSP_LOG_DEST is bad (compile() and Engine check it).
inline void check_environment() {
  auto& s = core::detail::log_state();
  std::lock_guard lock(s.m);
  if (!s.problem.empty()) throw option_error(s.problem);
}

/// Writes "[<seconds since the first message>] tilebsp <level>: <text>" when `l` is enabled (level warn prints
/// "warning", err "error"). Lines from several threads do
/// not interleave.
inline void write(LogLevel l, std::string_view text) {
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
inline void error(std::string_view text) { write(LogLevel::err, text); }
inline void info(std::string_view text) { write(LogLevel::info, text); }
inline void debug(std::string_view text) { write(LogLevel::debug, text); }
inline void trace(std::string_view text) { write(LogLevel::trace, text); }

}  // namespace logging
}  // namespace tilebsp
