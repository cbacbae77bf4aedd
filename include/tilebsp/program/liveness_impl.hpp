// program/liveness.hpp's definitions: included by it (header-only) or compiled once into tilebsp::compiled
// (src/compile.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/detail/parallel.hpp>
#include <tilebsp/plan/cost.hpp>
#include <tilebsp/program/detail/pieces.hpp>
#include <tilebsp/program/lower.hpp>
#include <tilebsp/program/liveness.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace tilebsp::program::detail {
TILEBSP_INLINE std::vector<std::pair<std::uint32_t, std::uint64_t>> bytes_per_tile(GraphImpl const& g, std::uint32_t var) {
  std::vector<std::pair<std::uint32_t, std::uint64_t>> r;
  auto const& v = g.variables[var];
  // Counted a pattern at a time where the mapping repeats (a result split by channels has a piece per position
  // and block: a call per block rather than per piece), then summed per tile.
  core::detail::VariableMapping::Cursor(v.mapping).count(0, v.size, [&](std::uint32_t tile, std::int64_t n) {
    auto const bytes = static_cast<std::uint64_t>(n) * size_of(v.type);
    if (!r.empty() && r.back().first == tile) r.back().second += bytes;
    else r.emplace_back(tile, bytes);
  });
  if (std::adjacent_find(r.begin(), r.end(), [](auto const& a, auto const& b) { return a.first >= b.first; }) != r.end()) {
    std::sort(r.begin(), r.end(), [](auto const& a, auto const& b) { return a.first < b.first; });
    std::size_t k = 0;
    for (std::size_t i = 1; i < r.size(); ++i) {
      if (r[i].first == r[k].first) r[k].second += r[i].second;
      else r[++k] = r[i];
    }
    r.resize(k + 1);
  }
  return r;
}

TILEBSP_INLINE std::uint64_t vertex_state_bytes(VertexRecord const& rec) {
  std::uint64_t b = 4;
  for (auto const& f : rec.fields) {
    if (f.kind == FieldKind::param) b += (f.param_bytes + 3) / 4 * 4;
    else if (f.kind == FieldKind::input_list) b += 8 + 8 * rec.tensors_of(f).size();
    else b += 8 + 8 * std::uint64_t{f.rank};
  }
  return b;
}

TILEBSP_INLINE std::vector<std::vector<VariableUse>> variable_uses(Schedule const& s) {
  GraphImpl const& g = *s.graph;
  std::vector<std::vector<VariableUse>> uses;
  for (auto const& p : s.programs) {
    auto& u = uses.emplace_back(g.variables.size());
    // Instructions inside an if or else branch run conditionally: a write there does not kill the old value.
    std::vector<char> conditional(p.code.size() + 1, 0);
    for (std::size_t pc = 0; pc < p.code.size(); ++pc) {
      auto const& i = p.code[pc];
      if ((i.op == Op::branch_if_false || i.op == Op::jump) && i.b > static_cast<std::int32_t>(pc))
        for (std::size_t q = pc + 1; q < static_cast<std::size_t>(i.b) && q < p.code.size(); ++q) conditional[q] = 1;
    }
    auto const access = [&](std::uint32_t v, std::size_t step, bool read, bool write, bool full) {
      auto& x = u[v];
      if (x.first == VariableUse::never) x.first = step, x.first_is_full_write = full && !conditional[step / 2];
      x.last = step;
      if (read) x.read = true, x.last_read = step;
      if (write) x.written = true, x.last_write = step;
    };
    auto const has = [](std::vector<std::uint32_t> const& sorted, std::uint32_t v) {
      return std::binary_search(sorted.begin(), sorted.end(), v);
    };
    for (std::size_t pc = 0; pc < p.code.size(); ++pc) {
      auto const& i = p.code[pc];
      if (i.op == Op::superstep && i.a >= 0) {
        auto const& cs = s.compute_sets[static_cast<std::size_t>(i.a)];
        for (auto v : cs.vars) access(v, 2 * pc, has(cs.reads, v), has(cs.writes, v), has(cs.full_writes, v));
      }
      if (i.op == Op::superstep && i.b >= 0) {
        auto const& ex = s.exchanges[static_cast<std::size_t>(i.b)];
        for (auto const& x : ex.transfers) access(x.src_var, 2 * pc + 1, true, false, false);
        for (auto const& x : ex.transfers) access(x.dst_var, 2 * pc + 1, false, true, has(ex.full_writes, x.dst_var));
      }
      if (i.op == Op::stream_in) {
        auto const& t = s.slots[static_cast<std::size_t>(i.b)];
        auto const full = covered_variables(g, ElementSet::of(t).ranges(), {});
        t.for_each_run([&](std::uint32_t v, std::int64_t, std::int64_t, std::int64_t) {
          access(v, 2 * pc, false, true, has(full, v));
        });
      }
      if (i.op == Op::collective)  // in place: read, then written
        s.slots[static_cast<std::size_t>(s.collectives[static_cast<std::size_t>(i.a)].slot)].for_each_run(
            [&](std::uint32_t v, std::int64_t, std::int64_t, std::int64_t) { access(v, 2 * pc, true, true, false); });
      if (i.op == Op::stream_out || i.op == Op::branch_if_false)
        s.slots[static_cast<std::size_t>(i.op == Op::branch_if_false ? i.a : i.b)].for_each_run(
            [&](std::uint32_t v, std::int64_t, std::int64_t, std::int64_t) { access(v, 2 * pc, true, false, false); });
    }
  }
  return uses;
}

TILEBSP_INLINE std::vector<TileMemory> account_memory(Schedule const& s, std::size_t threads, MemoryDetail* detail) {
  GraphImpl const& g = *s.graph;
  std::size_t const tiles = g.target.num_tiles();
  auto const uses = variable_uses(s);
  std::vector<char> tracked(g.variables.size(), 0);
  for (std::uint32_t v = 0; v < g.variables.size(); ++v) {
    auto const& var = g.variables[v];
    bool used = false, dies = true;
    for (auto const& u : uses)
      if (u[v].first != VariableUse::never) used = true, dies = dies && u[v].first_is_full_write;
    tracked[v] = !var.constant && (var.temporary || (used && dies));
  }
  std::vector<TileMemory> mem(tiles);
  // Each variable's bytes per tile, and the vertices' state per tile (summed per thread, then added: integers,
  // so the same for any number of threads), on the compile threads; the mappings are resolved by now.
  std::vector<std::vector<std::pair<std::uint32_t, std::uint64_t>>> var_bytes(g.variables.size());
  core::detail::parallel_for(threads, var_bytes.size(), 16, [&](std::size_t v, std::size_t) {
    var_bytes[v] = bytes_per_tile(g, static_cast<std::uint32_t>(v));
  });
  std::vector<std::vector<std::uint64_t>> state(std::max<std::size_t>(threads, 1), std::vector<std::uint64_t>(tiles, 0));
  core::detail::parallel_for(threads, s.compute_sets.size(), 1, [&](std::size_t c, std::size_t thread) {
    for (auto const& pv : s.compute_sets[c].vertices)
      state[thread][g.vertices[pv.record].tile] += vertex_state_bytes(g.vertices[pv.record]);
  });
  for (auto const& part : state)
    for (std::size_t t = 0; t < tiles; ++t) mem[t].always_live += part[t];
  if (detail) {
    // Each tile's largest occupants: the vertices' state and every variable's bytes there, the largest kept.
    std::size_t const k = MemoryDetail::occupants_per_tile;
    auto& occ = detail->occupants;
    occ.assign(tiles, {});
    auto const smaller = [](auto const& a, auto const& b) { return a.second > b.second || (a.second == b.second && a.first < b.first); };
    auto const offer = [&](std::size_t tile, std::int64_t what, std::uint64_t bytes) {
      auto& o = occ[tile];
      if (o.size() == k && !smaller(std::pair{what, bytes}, o.back())) return;
      if (o.size() == k) o.pop_back();
      o.insert(std::upper_bound(o.begin(), o.end(), std::pair{what, bytes}, smaller), {what, bytes});
    };
    for (std::size_t t = 0; t < tiles; ++t) {
      std::uint64_t st = 0;
      for (auto const& part : state) st += part[t];
      if (st) offer(t, -1, st);
    }
    for (std::uint32_t v = 0; v < g.variables.size(); ++v)
      for (auto const& [tile, b] : var_bytes[v]) offer(tile, v, b);
    detail->tracked = tracked;
    detail->live.assign(s.programs.size(), {});
    detail->ranges.assign(s.programs.size(), {});
  }
  for (std::uint32_t v = 0; v < g.variables.size(); ++v)
    if (!tracked[v]) {
      for (auto const& [tile, b] : var_bytes[v]) mem[tile].always_live += b;
      decltype(var_bytes)::value_type().swap(var_bytes[v]);
    }

  struct Event {
    std::size_t step;
    std::int64_t bytes;
    bool temporary;
  };
  for (std::size_t pi = 0; pi < s.programs.size(); ++pi) {
    auto const& p = s.programs[pi];
    std::vector<std::vector<Event>> events(tiles);
    // The report's bytes per step, summed over tiles: a difference array over steps.
    std::vector<std::int64_t> totals(detail ? 2 * p.code.size() + 2 : 0, 0);
    auto const total = [&](std::size_t b, std::size_t e, std::uint64_t bytes) {
      if (!detail) return;
      totals[b] += static_cast<std::int64_t>(bytes);
      totals[e + 1] -= static_cast<std::int64_t>(bytes);
    };
    auto const live = [&](std::uint32_t tile, std::size_t b, std::size_t e, std::uint64_t bytes, bool temporary) {
      total(b, e, bytes);
      auto& ev = events[tile];
      // A tile's buffers of one step (staging, fetches) arrive one after another: one pair of events for all.
      if (std::size_t const n = ev.size();
          n >= 2 && ev[n - 2].step == b && ev[n - 1].step == e + 1 && ev[n - 2].temporary == temporary) {
        ev[n - 2].bytes += static_cast<std::int64_t>(bytes);
        ev[n - 1].bytes -= static_cast<std::int64_t>(bytes);
        return;
      }
      ev.push_back({b, static_cast<std::int64_t>(bytes), temporary});
      ev.push_back({e + 1, -static_cast<std::int64_t>(bytes), temporary});
    };
    std::size_t last_host = 0;  // a callback at step 0 extends nothing
    for (std::size_t pc = 0; pc < p.code.size(); ++pc) {
      auto const& i = p.code[pc];
      if (i.op == Op::host) last_host = 2 * pc;
      if (i.op == Op::superstep && i.a >= 0) {
        auto const& cs = s.compute_sets[static_cast<std::size_t>(i.a)];
        for (auto const& pv : cs.vertices)
          for (auto const& st : pv.staging)
            live(static_cast<std::uint32_t>(g.vertices[pv.record].tile), 2 * pc, 2 * pc,
                 static_cast<std::uint64_t>(st.elements) * st.elem_bytes, true);
        for (auto const& [tile, bytes] : cs.fetched_in) live(tile, 2 * pc, 2 * pc, bytes, true);
        // After compile() the fetched bytes per tile are gone: their total still counts for the report.
        if (cs.fetched_in.empty()) total(2 * pc, 2 * pc, cs.fetch_bytes);
      }
      if (i.op == Op::superstep && i.b >= 0) {
        auto const& ex = s.exchanges[static_cast<std::size_t>(i.b)];
        if (ex.staged)
          for (auto const& x : ex.transfers)
            live(x.dst_tile, 2 * pc + 1, 2 * pc + 1, static_cast<std::uint64_t>(x.count) * x.elem_bytes, true);
      }
    }
    std::vector<LoopRange> loops;
    for (auto const& l : p.loops) loops.push_back({2 * l.begin, 2 * l.end + 1});
    std::sort(loops.begin(), loops.end(), [](auto const& a, auto const& b) { return a.end - a.begin < b.end - b.begin; });
    std::size_t const end_step = 2 * p.code.size();
    for (std::uint32_t v = 0; v < g.variables.size(); ++v) {
      auto const& u = uses[pi][v];
      if (!tracked[v] || u.first == VariableUse::never) continue;
      bool const temporary = g.variables[v].temporary;
      std::size_t b = u.first, e = u.last;
      if (!temporary) {
        if (!u.read || u.last_write > u.last_read) e = end_step;
        if (last_host > b) e = std::max(e, last_host);
      }
      for (auto const& l : loops)
        if (b <= l.end && e >= l.begin && (!u.first_is_full_write || b < l.begin || e > l.end))
          b = std::min(b, l.begin), e = std::max(e, l.end);
      for (auto const& [tile, bytes] : var_bytes[v]) live(tile, b, e, bytes, temporary);
      if (detail) detail->ranges[pi].push_back({v, b / 2, e / 2});
    }
    if (detail) {
      auto& out = detail->live[pi];
      out.assign(p.code.size(), 0);
      std::int64_t run = 0;
      for (std::size_t step = 0; step < 2 * p.code.size(); ++step) {
        run += totals[step];
        out[step / 2] = std::max(out[step / 2], static_cast<std::uint64_t>(std::max<std::int64_t>(run, 0)));
      }
    }
    // Each tile's peaks from its events, on the compile threads (tiles are independent), 64 tiles at a time.
    core::detail::parallel_for(threads, tiles, 64, [&](std::size_t tile, std::size_t) {
      auto& ev = events[tile];
      std::sort(ev.begin(), ev.end(), [](Event const& a, Event const& b) { return std::tie(a.step, a.bytes) < std::tie(b.step, b.bytes); });
      std::int64_t all = 0, temp = 0;
      for (auto const& x : ev) {
        all += x.bytes;
        if (x.temporary) temp += x.bytes;
        mem[tile].peak_live = std::max(mem[tile].peak_live, static_cast<std::uint64_t>(std::max<std::int64_t>(all, 0)));
        mem[tile].peak_temporary = std::max(mem[tile].peak_temporary, static_cast<std::uint64_t>(std::max<std::int64_t>(temp, 0)));
      }
      decltype(events)::value_type().swap(ev);
    });
  }
  return mem;
}

TILEBSP_INLINE void check_memory(Schedule const& s, std::vector<TileMemory> const& mem) {
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
                      ", not-always-live peak " + std::to_string(m.peak_live) + ") but has " +
                      std::to_string(g.target.bytes_per_tile) + "; largest occupants: " + list +
                      (over > 1 ? " (" + std::to_string(over - 1) + " more tiles are out of memory)" : ""));
}

}  // namespace tilebsp::program::detail
