// compile()'s definitions (mapping checks, cycle estimates, memory accounting): included by
// <tilebsp/program/compile.hpp> (header-only) or compiled once into tilebsp::compiled (src/compile.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/detail/parallel.hpp>
#include <tilebsp/core/log.hpp>
#include <tilebsp/core/warning.hpp>
#include <tilebsp/program/compile.hpp>
#include <tilebsp/program/executable_cache_impl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace tilebsp::program::detail {
// Besides the names compile.hpp imports:
using plan::detail::exchange_cycles;
using plan::detail::sync_cycles;

TILEBSP_INLINE void check_mapped(GraphImpl const& g, std::size_t threads) {
  // Each variable's queued assignments are resolved here, on up to `threads` threads (variables are independent),
  // before anything reads the mappings from several threads; the error names the first unmapped variable.
  core::detail::parallel_for(threads, g.variables.size(), 64, [&](std::size_t i, std::size_t) {
    auto const& v = g.variables[i];
    if (v.mapping.mapped() >= v.size) return;
    std::int64_t first = -1, at = 0;
    auto const unmapped = v.mapping.for_each(0, v.size, [&](std::int64_t b, std::int64_t e, std::uint32_t) {
      if (first < 0 && b > at) first = at;
      at = e;
    });
    if (first < 0 && at < v.size) first = at;
    throw mapping_error("compile: " + std::string(v.constant ? "constant" : "variable") + " '" + v.name + "' has " +
                        std::to_string(unmapped) + " of " + std::to_string(v.size) +
                        " elements not mapped to any tile (first unmapped element: " + std::to_string(first) + ")");
  });
}

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

TILEBSP_INLINE std::vector<std::uint32_t> ipus_of(GraphImpl const& g, Tensor const& x) {
  std::vector<char> seen(g.target.ipus, 0);
  for_each_tile_of(g, x, [&](std::uint32_t, std::uint32_t tile, std::int64_t) {
    seen[g.target.ipu_of(tile)] = 1;
    return true;
  });
  std::vector<std::uint32_t> r;
  for (std::uint32_t i = 0; i < seen.size(); ++i)
    if (seen[i]) r.push_back(i);
  return r;
}

TILEBSP_INLINE std::uint64_t collective_cycles(Target const& t, std::size_t replicas, std::uint64_t bytes) {
  if (replicas <= 1) return 0;
  // A ring all-reduce: R - 1 steps of reduce-scatter and R - 1 of all-gather, each moving a 1/R share of the
  // tensor one hop along the ring (every replica sends and receives at once) and paying the link latency.
  double const bw = replicas * t.ipus <= t.ipus_per_pod ? t.inter_ipu_bytes_per_cycle : t.gateway_bytes_per_cycle;
  auto const share = static_cast<double>((bytes + replicas - 1) / replicas);
  auto const hop = static_cast<std::uint64_t>(share / bw) + t.inter_ipu_latency_cycles;
  return 2 * (replicas - 1) * hop + t.inter_ipu_sync_cycles;
}

TILEBSP_INLINE void estimate_cycles(Schedule& s) {
  Target const& t = s.graph->target;
  for (auto& ex : s.exchanges) {
    ex.cycles = exchange_cycles(t, ex.transfers);
    ex.bytes = 0;
    std::vector<char> seen(t.ipus, 0);
    for (auto const& x : ex.transfers) {
      ex.bytes += static_cast<std::uint64_t>(x.count) * x.elem_bytes;
      seen[t.ipu_of(x.src_tile)] = seen[t.ipu_of(x.dst_tile)] = 1;
    }
    ex.ipus.clear();
    for (std::uint32_t i = 0; i < seen.size(); ++i)
      if (seen[i]) ex.ipus.push_back(i);
  }
  for (std::size_t pi = 0; pi < s.programs.size(); ++pi) {
    auto& p = s.programs[pi];
    // Steps of a pipeline stage run on its IPU alone; the others sync every IPU they involve (control flow and host
    // callbacks: all of them).
    std::vector<char> staged(p.code.size(), 0);
    for (auto const& b : s.branches)
      if (b.program == pi) std::fill(staged.begin() + b.begin, staged.begin() + b.end, 1);
    p.cycles.assign(p.code.size(), 0);
    for (std::size_t pc = 0; pc < p.code.size(); ++pc) {
      auto const& i = p.code[pc];
      auto const sync = [&](std::size_t ipus) { return sync_cycles(t, staged[pc] ? 1 : ipus); };
      std::uint64_t c = 0;
      switch (i.op) {
        case Op::superstep:
          if (i.a >= 0) {
            auto const& cs = s.compute_sets[static_cast<std::size_t>(i.a)];
            c += cs.cycles + sync(cs.ipus.size());
            if (cs.fetch_bytes > 0) c += cs.fetch_cycles + sync(cs.ipus.size());
          }
          if (i.b >= 0) {
            auto const& ex = s.exchanges[static_cast<std::size_t>(i.b)];
            c += ex.cycles + sync(ex.ipus.size());
          }
          break;
        case Op::stream_in:
        case Op::stream_out: {
          auto const& tn = s.slots[static_cast<std::size_t>(i.b)];
          c = sync(staged[pc] ? 1 : ipus_of(*s.graph, tn).size()) +
              static_cast<std::uint64_t>(static_cast<double>(tn.num_elements() * size_of(tn.element_type())) /
                                         t.host_bytes_per_cycle);
          break;
        }
        case Op::host:
        case Op::sync:
        case Op::branch_if_false: c = sync(t.ipus); break;
        case Op::collective: {
          auto const& tn = s.slots[static_cast<std::size_t>(s.collectives[static_cast<std::size_t>(i.a)].slot)];
          c = collective_cycles(t, s.replicas, tn.num_elements() * size_of(tn.element_type()));
          break;
        }
        default: break;
      }
      p.cycles[pc] = c;
    }
  }
  // A stage's run: its steps, those in a repeat as many times as it runs (a conditional step counts once).
  for (auto& b : s.branches) b.cycles = run_cycles(s, b.program, b.begin, b.end);
  // A pipeline step: the IPUs work concurrently, each running its stages one after another, then sync together.
  for (auto& p : s.programs)
    for (std::size_t pc = 0; pc < p.code.size(); ++pc)
      if (auto const& i = p.code[pc]; i.op == Op::parallel) {
        std::vector<std::uint64_t> busy(t.ipus, 0);
        std::vector<char> seen(t.ipus, 0);
        std::size_t ipus = 0;
        for (auto bi : s.parallels[static_cast<std::size_t>(i.a)].branches) {
          auto const& b = s.branches[bi];
          busy[b.ipu] += b.cycles;
          if (!seen[b.ipu]) seen[b.ipu] = 1, ++ipus;
        }
        p.cycles[pc] = *std::max_element(busy.begin(), busy.end()) + sync_cycles(t, ipus);
      }
}

TILEBSP_INLINE std::uint64_t run_cycles(Schedule const& s, std::size_t program, std::size_t begin, std::size_t end) {
  auto const& p = s.programs[program];
  std::vector<std::uint64_t> times{1};
  std::uint64_t c = 0;
  for (std::size_t pc = begin; pc < end; ++pc) {
    auto const& i = p.code[pc];
    if (i.op == Op::repeat_begin) {
      times.push_back(times.back() * static_cast<std::uint64_t>(i.n));
    } else if (i.op == Op::repeat_end) {
      if (times.size() > 1) times.pop_back();
    } else {
      bool staged = false;  // a stage's code, reached through the pipeline steps
      for (auto const& b : s.branches)
        if (b.program == program && b.begin <= pc && pc < b.end && !(b.begin <= begin && end <= b.end)) {
          staged = true;
          pc = b.end - 1;
          break;
        }
      if (!staged) c += p.cycles[pc] * times.back();
    }
  }
  return c;
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

/// The executable cache's directory: the option, else TILEBSP_EXECUTABLE_CACHE, else none (empty).
TILEBSP_INLINE std::string cache_directory(CompileOptions const& options) {
  if (!options.cache_dir.empty()) return options.cache_dir;
  char const* env = std::getenv("TILEBSP_EXECUTABLE_CACHE");
  return env ? env : "";
}

/// The process's resident memory now and at its peak, bytes (Linux: /proc/self/status; elsewhere 0).
inline std::pair<std::uint64_t, std::uint64_t> process_memory() {
  std::uint64_t rss = 0, peak = 0;
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      unsigned long long kb = 0;
      if (std::sscanf(line, "VmRSS: %llu kB", &kb) == 1) rss = kb * 1024;
      if (std::sscanf(line, "VmHWM: %llu kB", &kb) == 1) peak = kb * 1024;
    }
    std::fclose(f);
  }
  return {rss, peak};
}

/// Logs each compile phase at level info as it ends: its time and the process's memory.
class PhaseLog {
 public:
  PhaseLog() : on_(logging::enabled(LogLevel::info)), begin_(std::chrono::steady_clock::now()) {}
  ~PhaseLog() {
    if (!on_) return;
    end_phase();
    logging::info("compile: done in " + seconds(begin_) + " s");
  }
  void enter(std::string_view name) {
    if (!on_ || name == name_) return;
    end_phase();
    name_ = name;
    since_ = std::chrono::steady_clock::now();
  }

 private:
  static std::string seconds(std::chrono::steady_clock::time_point from) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count());
    return b;
  }
  void end_phase() {
    if (name_.empty()) return;
    auto const [rss, peak] = process_memory();
    logging::info("compile: " + name_ + ": " + seconds(since_) + " s; process memory " + std::to_string(rss >> 20) +
                  " MiB (peak " + std::to_string(peak >> 20) + " MiB)");
    name_.clear();
  }
  bool on_;
  std::chrono::steady_clock::time_point begin_, since_;
  std::string name_;
};

TILEBSP_INLINE Executable compile_programs(Graph const& g, CompileOptions const& options,
                                           std::function<void(Lowering&)> const& lower) {
  logging::check_environment();
  PhaseLog log;
  auto const phase = [&](std::string_view name, std::size_t done = 0, std::size_t total = 0) {
    if (options.progress) options.progress(name, done, total);
    log.enter(name);
  };
  std::size_t const threads = options.threads != 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  phase("checking the mapping");
  if (options.replicas == 0) throw option_error("compile: replicas must be at least 1");
  check_mapped(g.impl(), threads);
  auto const graph = g.snapshot();
  std::string dir = cache_directory(options);
  if (!dir.empty()) {
    char const* trust = std::getenv("TILEBSP_EXECUTABLE_CACHE_TRUST");
    if (std::string const why = use_cache_directory(dir, options.trust_cache_dir || (trust && std::string_view(trust) == "1"));
        !why.empty()) {
      warn("executable cache: not using '" + dir + "': it " + why +
           "; compiling without the cache (make it this user's and owner-only, chmod 700, or trust it with "
           "CompileOptions::trust_cache_dir or TILEBSP_EXECUTABLE_CACHE_TRUST=1)");
      dir.clear();
    }
  }
  std::string entry;
  std::optional<CacheKey> key;
  if (!dir.empty()) {
    // Record the programs (no planning), hash them with the graph, and look for the entry.
    phase("hashing the graph and programs");
    auto walked = std::make_shared<Schedule>();
    walked->graph = graph;
    walked->replicas = options.replicas;
    Lowering recorder(*graph, *walked, LowerMode::record);
    lower(recorder);
    key = executable_key(*graph, *walked, recorder.copies_hash(), threads);
    {
      entry = (std::filesystem::path(dir) / key->file_name()).string();
      phase("loading the executable cache");
      std::vector<TileMemory> memory;
      std::string why;
      switch (load_executable(entry, *key, *walked, memory, why, threads)) {
        case CacheLoad::hit: {
          if (!options.allow_out_of_memory) check_memory(*walked, memory);
          Executable exe(std::move(walked), std::move(memory));
          exe.cache_entry_ = entry;
          exe.loaded_ = true;
          return exe;
        }
        case CacheLoad::bad:
          warn("executable cache: " + entry + " is unusable (" + why + "); compiling afresh and replacing it");
          break;
        case CacheLoad::absent: break;
      }
    }
  }
  auto s = std::make_shared<Schedule>();
  s->graph = graph;
  s->replicas = options.replicas;
  Lowering l(*s->graph, *s);
  l.plan_compute_sets(threads, [&](std::size_t done, std::size_t total) { phase("planning compute sets", done, total); });
  phase("lowering the programs");
  lower(l);
  phase("estimating cycles");
  estimate_cycles(*s);
  phase("accounting memory");
  auto memory = account_memory(*s, threads);
  // The fetched bytes per tile were for the memory report, now made: the host reads fetched data in place.
  for (auto& cs : s->compute_sets) decltype(cs.fetched_in)().swap(cs.fetched_in);
  if (key) {
    phase("writing the executable cache");
    if (std::string const why = save_executable(entry, *key, *s, memory); !why.empty())
      warn("executable cache: cannot store " + entry + " (" + why + ")");
  }
  if (!options.allow_out_of_memory) check_memory(*s, memory);
  Executable exe(std::move(s), std::move(memory));
  exe.cache_entry_ = entry;
  return exe;
}

}  // namespace tilebsp::program::detail
