// Warnings: conditions a user should hear about that are not errors (a planner relaxing a memory bound).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/log.hpp>

#include <functional>
#include <string>
#include <string_view>

namespace tilebsp {

/// Receives each warning; the default writes it to the log at level warn ("[s] tilebsp warning: <text>", to
/// TILEBSP_LOG_DEST, standard error by default; nothing when TILEBSP_LOG_LEVEL is off or err).
using WarningHandler = std::function<void(std::string_view)>;

/// Installs `h` (an empty handler restores the default); returns the previous handler. One handler per process,
/// as the log's state (core/log.hpp).
TILEBSP_INLINE WarningHandler set_warning_handler(WarningHandler h);

/// Reports a warning through the installed handler.
TILEBSP_INLINE void warn(std::string const& text);

}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/core.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/core/warning_impl.hpp>
#endif
