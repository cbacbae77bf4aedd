// program/estimate.hpp's definitions: included by it (header-only) or compiled once into tilebsp::compiled
// (src/compile.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/detail/parallel.hpp>
#include <tilebsp/plan/cost.hpp>
#include <tilebsp/program/detail/pieces.hpp>
#include <tilebsp/program/lower.hpp>
#include <tilebsp/program/estimate.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace tilebsp::program::detail {
using plan::detail::exchange_cycles;
using plan::detail::sync_cycles;

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

}  // namespace tilebsp::program::detail
