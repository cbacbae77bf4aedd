// Warnings: conditions a user should hear about that are not errors (a planner relaxing a memory bound).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/log.hpp>

#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace tilebsp {

/// Receives each warning; the default writes it to the log at level warn ("[s] tilebsp warning: <text>", to
/// TILEBSP_LOG_DEST, standard error by default; nothing when TILEBSP_LOG_LEVEL is off or err).
using WarningHandler = std::function<void(std::string_view)>;

namespace core::detail {
struct Warnings {
  std::mutex m;
  WarningHandler handler;
};
// One handler per process, as the log state (core/log.hpp).
#if defined(TILEBSP_COMPILED) && !defined(TILEBSP_PROCESS_STATE)
Warnings& warnings();
#else
TILEBSP_INLINE Warnings& warnings() {
  static Warnings w;
  return w;
}
#endif
}  // namespace core::detail

/// Installs `h` (an empty handler restores the default); returns the previous handler.
inline WarningHandler set_warning_handler(WarningHandler h) {
  auto& w = core::detail::warnings();
  std::lock_guard lock(w.m);
  return std::exchange(w.handler, std::move(h));
}

/// Reports a warning through the installed handler.
inline void warn(std::string const& text) {
  auto& w = core::detail::warnings();
  std::lock_guard lock(w.m);
  if (w.handler) w.handler(text);
  else logging::write(LogLevel::warn, text);
}

}  // namespace tilebsp
