// compile(): lowers programs once into an Executable, checks mapping, estimates cycles and accounts tile memory.
#pragma once

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/program/cost.hpp>
#include <tilebsp/program/lower.hpp>
#include <tilebsp/program/programs.hpp>
#include <tilebsp/program/schedule.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tilebsp {

/// Options of compile().
struct CompileOptions {
  /// Compile even when a tile's memory is over-subscribed (for inspecting the profile), as Poplar's
  /// debug.allowOutOfMemory. The engine still runs: host memory is not tile memory.
  bool allow_out_of_memory = false;
};

/// Bytes used on one tile: data live for the whole program plus the peak of temporary data.
struct TileMemory {
  std::uint64_t always_live = 0;
  std::uint64_t peak_temporary = 0;
  std::uint64_t total() const noexcept { return always_live + peak_temporary; }
};

/// The result of compile(): a flat schedule per program, ready for an Engine.
class Executable {
 public:
  Target const& target() const noexcept { return s_->graph->target; }
  std::size_t num_programs() const noexcept { return s_->programs.size(); }
  std::vector<TileMemory> const& memory() const noexcept { return memory_; }
  detail::Schedule const& schedule() const noexcept { return *s_; }

 private:
  template <class... P>
  friend Executable compile(Graph const&, CompileOptions const&, P const&...);
  std::shared_ptr<detail::Schedule const> s_;
  std::vector<TileMemory> memory_;
};

namespace detail {

inline void check_mapped(GraphImpl const& g) {
  for (auto const& v : g.variables) {
    std::int64_t first = -1, at = 0;
    auto const unmapped = v.mapping.for_each(0, v.size, [&](std::int64_t b, std::int64_t e, std::uint32_t) {
      if (first < 0 && b > at) first = at;
      at = e;
    });
    if (first < 0 && at < v.size) first = at;
    if (unmapped > 0)
      throw mapping_error("compile: " + std::string(v.constant ? "constant" : "variable") + " '" + v.name + "' has " +
                          std::to_string(unmapped) + " of " + std::to_string(v.size) +
                          " elements not mapped to any tile (first unmapped element: " + std::to_string(first) + ")");
  }
}

/// Bytes of variable `var` on each tile.
inline std::vector<std::pair<std::uint32_t, std::uint64_t>> bytes_per_tile(GraphImpl const& g, std::uint32_t var) {
  std::vector<std::pair<std::uint32_t, std::uint64_t>> r;
  auto const& v = g.variables[var];
  v.mapping.for_each(0, v.size, [&](std::int64_t b, std::int64_t e, std::uint32_t tile) {
    auto const bytes = static_cast<std::uint64_t>(e - b) * size_of(v.type);
    if (!r.empty() && r.back().first == tile) r.back().second += bytes;
    else r.emplace_back(tile, bytes);
  });
  return r;
}

/// Device-side vertex state: a 4-byte header, 8 bytes (pointer, size) per tensor field, 8 per list plus 8 per
/// entry, and params rounded up to 4 bytes.
inline std::uint64_t vertex_state_bytes(VertexRecord const& rec) {
  std::uint64_t b = 4;
  for (auto const& f : rec.fields) {
    if (f.kind == FieldKind::param) b += (f.param_bytes + 3) / 4 * 4;
    else if (f.kind == FieldKind::input_list) b += 8 + 8 * f.tensors.size();
    else b += 8;
  }
  return b;
}

inline void estimate_cycles(Schedule& s) {
  Target const& t = s.graph->target;
  for (auto& cs : s.compute_sets) {
    cs.fetch_cycles = cs.fetches.empty() ? 0 : exchange_cycles(t, cs.fetches);
    cs.fetch_bytes = 0;
    for (auto const& x : cs.fetches) cs.fetch_bytes += static_cast<std::uint64_t>(x.count) * x.elem_bytes;
  }
  for (auto& ex : s.exchanges) {
    ex.cycles = exchange_cycles(t, ex.transfers);
    ex.bytes = 0;
    for (auto const& x : ex.transfers) ex.bytes += static_cast<std::uint64_t>(x.count) * x.elem_bytes;
  }
  auto const sync = sync_cycles(t);
  for (auto& p : s.programs) {
    p.cycles.assign(p.code.size(), 0);
    for (std::size_t pc = 0; pc < p.code.size(); ++pc) {
      auto const& i = p.code[pc];
      std::uint64_t c = 0;
      switch (i.op) {
        case Op::superstep:
          if (i.a >= 0) {
            auto const& cs = s.compute_sets[static_cast<std::size_t>(i.a)];
            c += cs.cycles + sync;
            if (!cs.fetches.empty()) c += cs.fetch_cycles + sync;
          }
          if (i.b >= 0) c += s.exchanges[static_cast<std::size_t>(i.b)].cycles + sync;
          break;
        case Op::stream_in:
        case Op::stream_out: {
          auto const& tn = s.slots[static_cast<std::size_t>(i.b)];
          c = sync + static_cast<std::uint64_t>(static_cast<double>(tn.num_elements() * size_of(tn.element_type())) /
                                                t.host_bytes_per_cycle);
          break;
        }
        case Op::host:
        case Op::sync:
        case Op::branch_if_false: c = sync; break;
        default: break;
      }
      p.cycles[pc] = c;
    }
  }
}

/// Per-tile memory: always-live data, and the peak over each program's instructions of temporary data
/// (staging buffers, staged exchanges, fetched inputs received for a compute set, and temporary variables live
/// from first to last use, whole loops included when used inside them).
inline std::vector<TileMemory> account_memory(Schedule const& s) {
  GraphImpl const& g = *s.graph;
  std::size_t const tiles = g.target.num_tiles();
  std::vector<TileMemory> mem(tiles);
  std::vector<std::vector<std::pair<std::uint32_t, std::uint64_t>>> temp_bytes(g.variables.size());
  for (std::uint32_t v = 0; v < g.variables.size(); ++v) {
    auto per = bytes_per_tile(g, v);
    if (g.variables[v].temporary) temp_bytes[v] = std::move(per);
    else
      for (auto const& [tile, b] : per) mem[tile].always_live += b;
  }
  for (auto const& cs : s.compute_sets)
    for (auto const& pv : cs.vertices) mem[g.vertices[pv.record].tile].always_live += vertex_state_bytes(g.vertices[pv.record]);

  for (auto const& p : s.programs) {
    std::vector<std::vector<std::pair<std::size_t, std::int64_t>>> events(tiles);
    auto const at = [&](std::uint32_t tile, std::size_t pc, std::size_t end_pc, std::uint64_t bytes) {
      events[tile].emplace_back(pc, static_cast<std::int64_t>(bytes));
      events[tile].emplace_back(end_pc + 1, -static_cast<std::int64_t>(bytes));
    };
    std::vector<std::pair<std::size_t, std::size_t>> live(g.variables.size(), {SIZE_MAX, 0});
    auto const use = [&](std::uint32_t var, std::size_t pc) {
      if (!g.variables[var].temporary) return;
      live[var].first = std::min(live[var].first, pc);
      live[var].second = std::max(live[var].second, pc);
    };
    for (std::size_t pc = 0; pc < p.code.size(); ++pc) {
      auto const& i = p.code[pc];
      if (i.op == Op::superstep && i.a >= 0) {
        auto const& cs = s.compute_sets[static_cast<std::size_t>(i.a)];
        for (auto v : cs.vars) use(v, pc);
        for (auto const& pv : cs.vertices)
          for (auto const& st : pv.staging)
            at(static_cast<std::uint32_t>(g.vertices[pv.record].tile), pc, pc,
               static_cast<std::uint64_t>(st.elements) * st.elem_bytes);
        for (auto const& x : cs.fetches) at(x.dst_tile, pc, pc, static_cast<std::uint64_t>(x.count) * x.elem_bytes);
      }
      if (i.op == Op::superstep && i.b >= 0) {
        auto const& ex = s.exchanges[static_cast<std::size_t>(i.b)];
        for (auto const& x : ex.transfers) {
          use(x.src_var, pc);
          use(x.dst_var, pc);
          if (ex.staged) at(x.dst_tile, pc, pc, static_cast<std::uint64_t>(x.count) * x.elem_bytes);
        }
      }
      if (i.op == Op::stream_in || i.op == Op::stream_out || i.op == Op::branch_if_false)
        s.slots[static_cast<std::size_t>(i.op == Op::branch_if_false ? i.a : i.b)].for_each_run(
            [&](std::uint32_t v, std::int64_t, std::int64_t, std::int64_t) { use(v, pc); });
    }
    auto loops = p.loops;
    std::sort(loops.begin(), loops.end(), [](auto const& a, auto const& b) { return a.end - a.begin < b.end - b.begin; });
    for (std::uint32_t v = 0; v < g.variables.size(); ++v) {
      auto& [b, e] = live[v];
      if (b == SIZE_MAX) continue;
      for (auto const& l : loops)
        if (b <= l.end && e >= l.begin) b = std::min(b, l.begin), e = std::max(e, l.end);
      for (auto const& [tile, bytes] : temp_bytes[v]) at(tile, b, e, bytes);
    }
    for (std::size_t tile = 0; tile < tiles; ++tile) {
      auto& ev = events[tile];
      std::sort(ev.begin(), ev.end());
      std::int64_t cur = 0;
      for (auto const& [pc, d] : ev) {
        cur += d;
        mem[tile].peak_temporary = std::max(mem[tile].peak_temporary, static_cast<std::uint64_t>(std::max<std::int64_t>(cur, 0)));
      }
    }
  }
  return mem;
}

inline void check_memory(Schedule const& s, std::vector<TileMemory> const& mem) {
  GraphImpl const& g = *s.graph;
  std::size_t over = 0, first = 0;
  for (std::size_t t = 0; t < mem.size(); ++t)
    if (mem[t].total() > g.target.bytes_per_tile && over++ == 0) first = t;
  if (over == 0) return;
  std::vector<std::pair<std::uint64_t, std::string>> occ;
  for (std::uint32_t v = 0; v < g.variables.size(); ++v)
    for (auto const& [tile, b] : bytes_per_tile(g, v))
      if (tile == first) occ.emplace_back(b, "'" + g.variables[v].name + "'" + (g.variables[v].temporary ? " (temporary)" : ""));
  std::uint64_t state = 0;
  for (auto const& cs : s.compute_sets)
    for (auto const& pv : cs.vertices)
      if (g.vertices[pv.record].tile == first) state += vertex_state_bytes(g.vertices[pv.record]);
  if (state) occ.emplace_back(state, "vertex state");
  std::sort(occ.begin(), occ.end(), [](auto const& a, auto const& b) { return a.first > b.first; });
  std::string list;
  for (std::size_t i = 0; i < occ.size() && i < 5; ++i)
    list += (i ? ", " : "") + occ[i].second + " " + std::to_string(occ[i].first) + " B";
  auto const& m = mem[first];
  throw out_of_memory("compile: tile " + std::to_string(first) + " is out of memory: it needs " +
                      std::to_string(m.total()) + " bytes (always-live " + std::to_string(m.always_live) +
                      ", peak temporary " + std::to_string(m.peak_temporary) + ") but has " +
                      std::to_string(g.target.bytes_per_tile) + "; largest occupants: " + list +
                      (over > 1 ? " (" + std::to_string(over - 1) + " more tiles are out of memory)" : ""));
}

}  // namespace detail

/// Lowers `programs` (run later as engine.run(0), run(1), ...) into an Executable. Throws mapping_error for
/// unmapped data or fields reaching other tiles, write_conflict_error, and out_of_memory.
template <class... P>
Executable compile(Graph const& g, CompileOptions const& options, P const&... programs) {
  static_assert((ProgramLike<P> && ...), "compile: every argument after the options must be a program");
  detail::check_mapped(g.impl());
  auto s = std::make_shared<detail::Schedule>();
  s->graph = std::make_shared<detail::GraphImpl const>(g.impl());
  detail::Lowering l(*s->graph, *s);
  ((l.begin_program(), programs.lower(l), l.end_program()), ...);
  detail::estimate_cycles(*s);
  Executable e;
  e.memory_ = detail::account_memory(*s);
  if (!options.allow_out_of_memory) detail::check_memory(*s, e.memory_);
  e.s_ = std::move(s);
  return e;
}
template <ProgramLike... P>
Executable compile(Graph const& g, P const&... programs) {
  return compile(g, CompileOptions{}, programs...);
}

}  // namespace tilebsp
