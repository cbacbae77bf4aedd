// Host memory shared between variables whose live ranges do not overlap (EngineOptions::reuse_host_memory), as
// Poplar reuses a tile's not-always-live memory and ONNX Runtime's arena reuses its buffers.
#pragma once

#include <tilebsp/program/liveness.hpp>
#include <tilebsp/program/schedule.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tilebsp::exec::detail {

/// Where each variable's host memory lies: at `offset` in one shared block of `bytes`, or (offset -1) in a buffer of
/// its own; and, per program, which shared variables are live at its end (readable after it runs).
struct HostMemoryPlan {
  std::vector<std::int64_t> offset;
  std::vector<std::vector<char>> live_at_end;
  std::size_t bytes = 0;

  bool shared(std::uint32_t var) const noexcept { return var < offset.size() && offset[var] >= 0; }
};

/// Places the variables that account_memory tracks (live part of the time: every program that uses one writes it in
/// full before reading it) at offsets of one block, largest first, each at the lowest offset free of the variables
/// whose ranges overlap its own in some program; the others keep buffers of their own. A range that touches a host
/// path's span covers the whole span: its task reads and writes the span's variables in any order. Schedules with
/// parallel branches (pipelines) share nothing: their instructions do not run in program order.
inline HostMemoryPlan plan_host_memory(schedule::Schedule const& s) {
  auto const& g = *s.graph;
  HostMemoryPlan plan;
  plan.offset.assign(g.variables.size(), -1);
  plan.live_at_end.assign(s.programs.size(), std::vector<char>(g.variables.size(), 0));
  if (!s.parallels.empty()) return plan;
  program::detail::MemoryDetail md;
  program::detail::account_memory(s, 1, &md);
  // A variable whose last access writes it (an output's bias added in place: read and written at one step) keeps
  // that value to the program's end, where the host may read it: account_memory ends such a range at the step.
  auto const uses = program::detail::variable_uses(s);
  // Per variable: its ranges (program, first, last instruction), widened to the host-path spans they touch.
  std::vector<std::vector<std::array<std::size_t, 3>>> ranges(g.variables.size());
  for (std::size_t p = 0; p < md.ranges.size(); ++p) {
    auto const& code = s.programs[p].code;
    std::vector<std::pair<std::size_t, std::size_t>> spans;
    for (std::size_t pc = 0; pc < code.size(); ++pc)
      if (code[pc].op == schedule::Op::host_path) spans.emplace_back(pc, static_cast<std::size_t>(code[pc].b));
    for (auto const& r : md.ranges[p]) {
      std::size_t first = r.first, last = r.last;
      auto const& u = uses[p][r.var];
      if (u.written && u.last_write >= u.last_read) last = code.size() - 1;
      for (auto const& [a, b] : spans) {
        if (first >= a && first < b) first = a;
        if (last >= a && last < b) last = b - 1;
      }
      ranges[r.var].push_back({p, first, last});
      if (last + 1 >= code.size()) plan.live_at_end[p][r.var] = 1;
    }
  }
  auto const bytes = [&](std::uint32_t v) {
    return (static_cast<std::size_t>(g.variables[v].size) * size_of(g.variables[v].type) + 63) / 64 * 64;
  };
  std::vector<std::uint32_t> order;
  for (std::uint32_t v = 0; v < g.variables.size(); ++v)
    if (v < md.tracked.size() && md.tracked[v] && !ranges[v].empty() && bytes(v) > 0) order.push_back(v);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return bytes(a) > bytes(b); });
  auto const overlap = [&](std::uint32_t a, std::uint32_t b) {
    for (auto const& x : ranges[a])
      for (auto const& y : ranges[b])
        if (x[0] == y[0] && x[1] <= y[2] && y[1] <= x[2]) return true;
    return false;
  };
  std::vector<std::uint32_t> placed;
  std::vector<std::pair<std::size_t, std::size_t>> busy;
  for (auto const v : order) {
    busy.clear();
    for (auto const u : placed)
      if (overlap(u, v)) busy.emplace_back(static_cast<std::size_t>(plan.offset[u]), static_cast<std::size_t>(plan.offset[u]) + bytes(u));
    std::sort(busy.begin(), busy.end());
    std::size_t at = 0;
    for (auto const& [a, b] : busy) {
      if (at + bytes(v) <= a) break;
      at = std::max(at, b);
    }
    plan.offset[v] = static_cast<std::int64_t>(at);
    plan.bytes = std::max(plan.bytes, at + bytes(v));
    placed.push_back(v);
  }
  return plan;
}

}  // namespace tilebsp::exec::detail
