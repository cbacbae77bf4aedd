// Auto-reports: lets the Engines of a program write the report TILEBSP_ENGINE_OPTIONS asks for, by setting the
// function pointer through which an Engine writes it (exec::detail::report_writer). A program linking
// tilebsp::compiled has this already; a header-only program includes it in one of its files. It is not in
// <tilebsp/tilebsp.hpp>: setting the pointer compiles the whole report (JSON, the HTML page, the liveness detail)
// into the file, which a file that only includes the headers should not pay for.
#pragma once

#include <tilebsp/exec/detail/auto_report.hpp>
#include <tilebsp/report/report.hpp>

namespace tilebsp::report::detail {

inline bool const auto_reports_enabled = (exec::detail::report_writer = &report::write_report, true);

}  // namespace tilebsp::report::detail
