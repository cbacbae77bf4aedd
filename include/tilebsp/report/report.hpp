// The report layer: a Profile (plain data, exec/profile.hpp) as text, JSON and one self-contained HTML page. It sits
// above exec, which never includes it; the Engine's auto-reports (TILEBSP_ENGINE_OPTIONS) reach it through a
// function pointer that <tilebsp/report/auto_report.hpp> sets (docs/09-profiling.md).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/exec/profile.hpp>

#include <string>

namespace tilebsp::report {

/// Human-readable report: totals, the costliest steps, memory per tile.
std::string summary(Profile const& profile);
/// The profile as JSON (target, per-step figures for every program, operators, and each tile's memory as
/// [always-live, not-always-live peak, temporary peak] bytes); with `detail`, its "detail" object too. The format is
/// docs/profile.schema.json.
std::string json(Profile const& profile, ProfileDetail const* detail = nullptr);
/// Writes json(profile, detail) to `path`; throws tilebsp::error when the file cannot be written.
void write_json(Profile const& profile, std::string const& path, ProfileDetail const* detail = nullptr);
/// One self-contained HTML page (inline SVG and script; no network, no other files): memory per tile as a heatmap,
/// liveness over the steps, a timeline of the steps per IPU, cycle balance across tiles, operators ranked by
/// estimated cycles and host time, and their plans. See docs/09-profiling.md.
std::string html(Profile const& profile, ProfileDetail const& detail);
inline std::string html(Profile const& profile) { return html(profile, profile.detail()); }
/// Writes html(profile) to `path`; throws tilebsp::error when the file cannot be written.
void write_html(Profile const& profile, std::string const& path);
/// Writes profile.json (with the detail), report.html and summary.txt into `dir` (created when missing).
void write_report(Profile const& profile, std::string const& dir);

}  // namespace tilebsp::report

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/report.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/report/report_impl.hpp>
#endif
