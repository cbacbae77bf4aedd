// The Engine's profile assembly: the schedule's steps, their estimates and counters as a Profile (plain data;
// report/ turns it into pages). Part of the Engine's definitions (exec/engine_impl.hpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/log.hpp>
#include <tilebsp/exec/detail/engine_core.hpp>
#include <tilebsp/program/all_reduce.hpp>
#include <tilebsp/exec/profile.hpp>

#include <string>
#include <vector>

namespace tilebsp {

TILEBSP_COLD TILEBSP_INLINE Profile exec::detail::EngineCore::profile() const {
  Profile p;
  p.target = g_.target;
  p.host_threads = threads_;
  p.host_timing = profiling_;
  p.replicas = replicas_, p.first_replica = first_, p.local_replicas = local_;
  p.memory = exe_.memory();
  p.executable = exe_;
  for (std::size_t pi = 0; pi < s_.programs.size(); ++pi) {
    auto const& code = s_.programs[pi];
    auto& steps = p.programs.emplace_back();
    std::vector<std::int32_t> branch_at(code.code.size(), -1);
    for (std::size_t bi = 0; bi < s_.branches.size(); ++bi)
      if (auto const& b = s_.branches[bi]; b.program == pi)
        std::fill(branch_at.begin() + b.begin, branch_at.begin() + b.end, static_cast<std::int32_t>(bi));
    for (std::size_t pc = 0; pc < code.code.size(); ++pc) {
      StepProfile sp;
      sp.est_cycles = code.cycles[pc];
      sp.executions = counts_[pi][pc];
      sp.host_ns = ns_[pi][pc];
      if (branch_at[pc] >= 0) {
        auto const& b = s_.branches[static_cast<std::size_t>(branch_at[pc])];
        sp.stage = static_cast<std::int32_t>(b.stage);
        sp.ipu = static_cast<std::int32_t>(b.ipu);
      }
      describe_step(pi, pc, sp);
      steps.push_back(std::move(sp));
    }
  }
  // Operators: the graph's records, with their steps' figures.
  for (auto const& r : g_.operators) p.operators.push_back({r.kind, r.name, r.plans, 0, 0, 0, r.kernels});
  for (std::size_t c = 0; c < g_.compute_sets.size() && c < g_.compute_set_ops.size(); ++c)
    if (g_.compute_set_ops[c] >= 0) ++p.operators[static_cast<std::size_t>(g_.compute_set_ops[c])].compute_sets;
  for (auto const& steps : p.programs)
    for (auto const& sp : steps)
      if (sp.op >= 0) {  // a pipeline stage's steps too: the pipeline step itself has no operator
        auto& o = p.operators[static_cast<std::size_t>(sp.op)];
        o.est_cycles += sp.est_cycles * sp.executions;
        o.host_ns += sp.host_ns;
      }
  for (auto const& b : s_.branches) {
    StageProfile st{b.program, b.stage, b.ipu, b.cycles, 0};
    // A stage's runs: the pipeline steps that ran it.
    auto const& code = s_.programs[b.program].code;
    for (std::size_t pc = 0; pc < code.size(); ++pc)
      if (code[pc].op == schedule::Op::parallel)
        for (auto bi : s_.parallels[static_cast<std::size_t>(code[pc].a)].branches)
          if (&s_.branches[bi] == &b) st.runs += counts_[b.program][pc];
    p.stages.push_back(st);
  }
  return p;
}

TILEBSP_COLD TILEBSP_INLINE void exec::detail::EngineCore::trace_step(std::size_t pi, std::size_t pc, std::uint64_t ns) const {
  auto const op = s_.programs[pi].code[pc].op;
  if (op == schedule::Op::repeat_begin || op == schedule::Op::repeat_end || op == schedule::Op::jump) return;
  StepProfile sp;
  describe_step(pi, pc, sp);
  logging::trace("program " + std::to_string(pi) + " step " + std::to_string(pc) + ": " + sp.label + " (" +
                 std::to_string(s_.programs[pi].cycles[pc]) + " est cycles" +
                 (profiling_ ? ", host " + std::to_string(ns) + " ns)" : ")"));
}

TILEBSP_COLD TILEBSP_INLINE void exec::detail::EngineCore::describe_step(std::size_t pi, std::size_t pc, StepProfile& sp) const {
  Target const& t = g_.target;
  auto const& in = s_.programs[pi].code[pc];
  auto const add_ipus = [&](std::vector<std::uint32_t> const& ipus) {
    for (auto i : ipus)
      if (std::find(sp.ipus.begin(), sp.ipus.end(), i) == sp.ipus.end()) sp.ipus.push_back(i);
  };
      switch (in.op) {
        case schedule::Op::superstep: {
          sp.kind = "superstep";
          if (in.a >= 0) {
            auto const& cs = s_.compute_sets[static_cast<std::size_t>(in.a)];
            sp.compute_set = g_.compute_sets[cs.id];
            sp.label = "compute set '" + sp.compute_set + "'";
            sp.compute_cycles = cs.cycles;
            if (cs.id < g_.compute_set_ops.size()) sp.op = g_.compute_set_ops[cs.id];
            add_ipus(cs.ipus);
            if (cs.fetch_bytes > 0) {
              sp.exchange_bytes += cs.fetch_bytes;
              sp.exchange_cycles += cs.fetch_cycles;
              sp.label = "fetch " + std::to_string(cs.fetch_bytes) + " B + " + sp.label;
            }
          }
          if (in.b >= 0) {
            auto const& ex = s_.exchanges[static_cast<std::size_t>(in.b)];
            sp.exchange_bytes += ex.bytes;
            sp.exchange_cycles += ex.cycles;
            add_ipus(ex.ipus);
            for (auto const& x : ex.transfers)
              if (t.ipu_of(x.src_tile) != t.ipu_of(x.dst_tile))
                sp.inter_ipu_bytes += static_cast<std::uint64_t>(x.count) * x.elem_bytes;
            sp.label += (sp.label.empty() ? "" : " + ") + std::string("exchange ") + std::to_string(ex.bytes) + " B";
          }
          std::sort(sp.ipus.begin(), sp.ipus.end());
          break;
        }
        case schedule::Op::stream_in: sp.kind = "stream_in"; sp.label = "stream_in '" + g_.fifos[static_cast<std::size_t>(in.a)].name + "'"; break;
        case schedule::Op::stream_out: sp.kind = "stream_out"; sp.label = "stream_out '" + g_.fifos[static_cast<std::size_t>(in.a)].name + "'"; break;
        case schedule::Op::host: sp.kind = "host"; sp.label = "host callback"; break;
        case schedule::Op::sync: sp.kind = "sync"; sp.label = "sync"; break;
        case schedule::Op::branch_if_false: sp.kind = "branch"; sp.label = "branch on flag"; break;
        case schedule::Op::host_path:
          sp.kind = "host_path";
          sp.label = "host path '" + s_.host_paths[static_cast<std::size_t>(in.a)].name + "'" +
                     (!reps_[0].paths[static_cast<std::size_t>(in.a)] ? " (body runs)"
                      : fused_away_[static_cast<std::size_t>(in.a)] ? " (fused into the host path before)" : "");
          // The operator whose compute sets the body runs (host time stays on this step when the task runs).
          for (std::size_t q = pc + 1; q < static_cast<std::size_t>(in.b) && sp.op < 0; ++q)
            if (auto const& bi = s_.programs[pi].code[q]; bi.op == schedule::Op::superstep && bi.a >= 0) {
              auto const id = s_.compute_sets[static_cast<std::size_t>(bi.a)].id;
              if (id < g_.compute_set_ops.size()) sp.op = g_.compute_set_ops[id];
            }
          break;
        case schedule::Op::collective: {
          auto const& c = s_.collectives[static_cast<std::size_t>(in.a)];
          Tensor const& tn = s_.slots[static_cast<std::size_t>(c.slot)];
          sp.kind = "collective";
          sp.collective_bytes = tn.num_elements() * size_of(tn.element_type());
          sp.label = std::string("cross-replica ") + name_of(static_cast<CollectiveOp>(c.op)) + " '" + c.name + "' " +
                     std::to_string(sp.collective_bytes) + " B";
          break;
        }
        case schedule::Op::parallel: {
          sp.kind = "pipeline_step";
          sp.label = "pipeline step: stages";
          for (auto bi : s_.parallels[static_cast<std::size_t>(in.a)].branches)
            sp.label += " " + std::to_string(s_.branches[bi].stage);
          break;
        }
        default: sp.kind = "control"; sp.label = "loop control"; break;
      }
  if (sp.ipus.empty()) {
    if (sp.ipu >= 0) sp.ipus.push_back(static_cast<std::uint32_t>(sp.ipu));
    else if (in.op != schedule::Op::repeat_begin && in.op != schedule::Op::repeat_end &&
             in.op != schedule::Op::jump)
      for (std::uint32_t i = 0; i < t.ipus; ++i) sp.ipus.push_back(i);
  }
}

}  // namespace tilebsp
