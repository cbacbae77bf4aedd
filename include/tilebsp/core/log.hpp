// Logging: levels and a destination from the environment (TILEBSP_LOG_LEVEL, TILEBSP_LOG_DEST), as Poplar's
// POPLAR_LOG_LEVEL and POPLAR_LOG_DEST. Warnings (warning.hpp) go through it. A check of a level is one relaxed
// atomic load: code that logs per step tests `logging::enabled(...)` once per run, not per line. The log's state
// (its destination, lock and clock) is in log_impl.hpp, out of the files that only log.
#pragma once

#include <tilebsp/config.hpp>

#include <atomic>
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
/// The log's level, read by every check. One per process: the library (TILEBSP_COMPILED) defines the log state
/// once in src/core.cpp, so that its kernel sets, which keep their own copies of every inline function, share it.
TILEBSP_INLINE std::atomic<int>& log_level() noexcept;
}  // namespace core::detail

namespace logging {

/// Whether messages of level `l` are written.
inline bool enabled(LogLevel l) noexcept {
  return static_cast<int>(l) <= core::detail::log_level().load(std::memory_order_relaxed) && l != LogLevel::off;
}
/// The current level.
inline LogLevel level() noexcept { return static_cast<LogLevel>(core::detail::log_level().load(std::memory_order_relaxed)); }
/// Sets the level (overriding TILEBSP_LOG_LEVEL).
inline void set_level(LogLevel l) noexcept { core::detail::log_level().store(static_cast<int>(l), std::memory_order_relaxed); }
/// Sends messages to "stdout", "stderr" or a file (appended to); throws option_error when it cannot be opened.
TILEBSP_INLINE void set_destination(std::string const& dest);
/// Reads TILEBSP_LOG_LEVEL and TILEBSP_LOG_DEST again (they are read once, at the first message).
TILEBSP_INLINE void reload_environment();
/// Throws option_error when TILEBSP_LOG_LEVEL or TILEBSP_LOG_DEST is bad (compile() and Engine check it).
TILEBSP_INLINE void check_environment();

/// Writes "[<seconds since the first message>] tilebsp <level>: <text>" when `l` is enabled (level warn prints
/// "warning", err "error"). Lines from several threads do not interleave.
TILEBSP_INLINE void write(LogLevel l, std::string_view text);
inline void error(std::string_view text) { write(LogLevel::err, text); }
inline void info(std::string_view text) { write(LogLevel::info, text); }
inline void debug(std::string_view text) { write(LogLevel::debug, text); }
inline void trace(std::string_view text) { write(LogLevel::trace, text); }

}  // namespace logging
}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/core.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/core/log_impl.hpp>
#endif
