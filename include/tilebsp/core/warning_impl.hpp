// The warning handler and the definitions of core/warning.hpp (header-only: included by it; tilebsp::compiled:
// compiled once in src/core.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/log.hpp>
#include <tilebsp/core/warning.hpp>

#include <mutex>
#include <string>
#include <utility>

namespace tilebsp {
namespace core::detail {
struct Warnings {
  std::mutex m;
  WarningHandler handler;
};
TILEBSP_INLINE Warnings& warnings() {
  static Warnings w;
  return w;
}
}  // namespace core::detail

TILEBSP_INLINE WarningHandler set_warning_handler(WarningHandler h) {
  auto& w = core::detail::warnings();
  std::lock_guard lock(w.m);
  return std::exchange(w.handler, std::move(h));
}

TILEBSP_INLINE void warn(std::string const& text) {
  auto& w = core::detail::warnings();
  std::lock_guard lock(w.m);
  if (w.handler) w.handler(text);
  else logging::write(LogLevel::warn, text);
}

}  // namespace tilebsp
