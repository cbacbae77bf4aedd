// tilebsp::compiled: the Engine's and the Profile's definitions, compiled once for every target that links the
// library.
#include <tilebsp/exec/engine_impl.hpp>
#include <tilebsp/exec/profile_impl.hpp>
// The library's Engines write the auto-reports TILEBSP_ENGINE_OPTIONS asks for: a program that makes an Engine
// links this file, and with it the report layer (src/report.cpp).
#include <tilebsp/report/auto_report.hpp>

namespace tilebsp::exec::detail {
TILEBSP_API ReportWriter report_writer = nullptr;
}
