// Profile's definitions: included by <tilebsp/exec/profile.hpp> (header-only) or compiled once into
// tilebsp::compiled (src/engine.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/exec/profile.hpp>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <string>
#include <vector>

namespace tilebsp {

TILEBSP_INLINE std::uint64_t Profile::estimated_cycles() const {
  std::uint64_t c = 0;
  for (auto const& p : programs)
    for (auto const& s : p)
      if (s.stage < 0) c += s.est_cycles * s.executions;
  return c;
}
TILEBSP_INLINE std::uint64_t Profile::host_ns() const {
  std::uint64_t c = 0;
  for (auto const& p : programs)
    for (auto const& s : p)
      if (s.stage < 0) c += s.host_ns;
  return c;
}
TILEBSP_INLINE std::uint64_t Profile::collective_bytes() const {
  std::uint64_t c = 0;
  for (auto const& p : programs)
    for (auto const& s : p) c += s.collective_bytes * s.executions;
  return c;
}

TILEBSP_INLINE std::vector<std::string> Profile::kernels() const { return core::detail::distinct_kernels(operators); }
TILEBSP_INLINE std::uint64_t Profile::inter_ipu_bytes() const {
  std::uint64_t c = 0;
  for (auto const& p : programs)
    for (auto const& s : p) c += s.inter_ipu_bytes * s.executions;
  return c;
}
TILEBSP_INLINE std::uint64_t Profile::max_tile_bytes(std::size_t ipu) const {
  std::uint64_t m = 0;
  for (std::size_t t = ipu * target.tiles_per_ipu; t < std::min(memory.size(), (ipu + 1) * target.tiles_per_ipu); ++t)
    m = std::max(m, memory[t].total());
  return m;
}
TILEBSP_INLINE std::uint64_t Profile::max_tile_bytes() const {
  std::uint64_t m = 0;
  for (auto const& t : memory) m = std::max(m, t.total());
  return m;
}

TILEBSP_COLD TILEBSP_INLINE ProfileDetail Profile::detail(std::size_t threads) const {
  ProfileDetail d;
  if (executable.empty()) return d;
  auto const& s = executable.schedule();
  auto const& g = *s.graph;
  program::detail::MemoryDetail md;
  program::detail::account_memory(s, threads ? threads : std::max(1u, std::thread::hardware_concurrency()), &md);
  auto const name_of_var = [&](std::int64_t v) {
    return v < 0 ? std::string("vertex state") : g.variables[static_cast<std::size_t>(v)].name;
  };
  auto const always = [&](std::int64_t v) { return v < 0 || !md.tracked[static_cast<std::size_t>(v)]; };
  d.tiles.resize(md.occupants.size());
  for (std::size_t t = 0; t < md.occupants.size(); ++t)
    for (auto const& [what, bytes] : md.occupants[t]) d.tiles[t].push_back({name_of_var(what), bytes, always(what)});
  for (auto const& m : memory) d.always_live_bytes += m.always_live;
  for (std::size_t pi = 0; pi < md.live.size(); ++pi) {
    auto& l = d.liveness.emplace_back();
    l.bytes = md.live[pi];
    l.peak_step = static_cast<std::size_t>(std::max_element(l.bytes.begin(), l.bytes.end()) - l.bytes.begin());
    std::uint64_t vars = 0;
    for (auto const& r : md.ranges[pi]) {
      auto const& v = g.variables[r.var];
      std::uint64_t const b = static_cast<std::uint64_t>(v.size) * size_of(v.type);
      l.ranges.push_back({v.name, b, r.first, std::min(r.last, l.bytes.empty() ? 0 : l.bytes.size() - 1)});
      if (r.first <= l.peak_step && l.peak_step <= r.last) {
        vars += b;
        l.peak_variables.push_back({v.name, b, false});
      }
    }
    std::stable_sort(l.peak_variables.begin(), l.peak_variables.end(),
                     [](auto const& a, auto const& b) { return a.bytes > b.bytes; });
    if (l.peak_variables.size() > 40) l.peak_variables.resize(40);
    l.peak_buffers = l.bytes.empty() || l.bytes[l.peak_step] < vars ? 0 : l.bytes[l.peak_step] - vars;
  }
  // Compute cycles per tile: each compute set's per-tile estimate (as the lowering's) times its executions.
  bool ran = false;
  for (auto const& p : programs)
    for (auto const& st : p) ran = ran || st.executions > 0;
  std::vector<std::uint64_t> weight(s.compute_sets.size(), 0);
  for (std::size_t pi = 0; pi < s.programs.size() && pi < programs.size(); ++pi)
    for (std::size_t pc = 0; pc < s.programs[pi].code.size(); ++pc)
      if (auto const& in = s.programs[pi].code[pc]; in.op == schedule::Op::superstep && in.a >= 0)
        weight[static_cast<std::size_t>(in.a)] += ran ? programs[pi][pc].executions : 1;
  d.tile_cycles.assign(target.num_tiles(), 0);
  for (std::size_t c = 0; c < s.compute_sets.size(); ++c)
    if (weight[c] > 0)
      schedule::for_each_tile_cycles(g, s.compute_sets[c], [&](std::uint32_t tile, std::uint64_t cycles) {
        d.tile_cycles[tile] += weight[c] * cycles;
      });
  return d;
}

}  // namespace tilebsp
