// The Engine's definitions: included by <tilebsp/exec/engine.hpp> (header-only) or compiled once into
// tilebsp::compiled (src/engine.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/log.hpp>
#include <tilebsp/exec/detail/engine_core.hpp>
#include <tilebsp/exec/engine.hpp>
#include <tilebsp/program/collective.hpp>
#include <tilebsp/program/executable_cache.hpp>

#include <array>
#include <span>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace tilebsp {

TILEBSP_INLINE exec::detail::EngineCore::EngineCore(Executable exe, EngineOptions const& opt)
    : exe_(std::move(exe)), s_(exe_.schedule()), g_(*s_.graph), threads_(static_cast<unsigned>(opt.host_threads ? opt.host_threads : std::max(1u, std::thread::hardware_concurrency()))), profiling_(opt.profiling), host_kernels_(opt.host_kernels), comm_(opt.communicator), team_(threads_), barrier_(threads_) {
  auto const started = std::chrono::steady_clock::now();
  logging::check_environment();
  auto_ = exec::detail::auto_report_from_environment();
  profiling_ = profiling_ || auto_.execution;
  replicas_ = s_.replicas;
  local_ = replicas_;
  if (comm_) {
    std::size_t const p = comm_->size();
    if (p == 0 || replicas_ % p != 0)
      throw replica_error("engine: the executable has " + std::to_string(replicas_) + " replica(s), which " +
                          std::to_string(p) + " processes cannot share evenly (CompileOptions::replicas must be a "
                          "multiple of the number of processes)");
    local_ = replicas_ / p;
    first_ = comm_->rank() * local_;
    check_processes();
  }
  reps_.resize(local_);
  for (std::size_t l = 0; l < local_; ++l) {
    auto& r = reps_[l];
    for (auto const& v : g_.variables) {
      r.data.push_back(exec::detail::allocate(static_cast<std::size_t>(v.size) * size_of(v.type)));
      if (v.constant && !v.initial.empty()) std::memcpy(r.data.back().get(), v.initial.data(), v.initial.size());
    }
    r.context = std::make_unique<ReplicaContext>(*this, l);
  }
  mark_program_writes();
  bind_host_paths();
  // Pipeline steps: the threads in groups, one per IPU slot (modulo their number).
  for (auto const& pp : s_.parallels) {
    auto& gr = groups_.emplace_back();
    gr.count = std::min<unsigned>(threads_, std::max<std::uint32_t>(pp.slots, 1));
    for (unsigned g = 0; g <= gr.count; ++g) gr.first.push_back(g * threads_ / gr.count);
    for (unsigned g = 0; g < gr.count; ++g) gr.barriers.push_back(std::make_unique<exec::detail::Barrier>(gr.size(g)));
  }
  // The team that runs each instruction: the engine's, or the group of the stage it belongs to.
  std::vector<std::vector<unsigned>> team(s_.programs.size());
  for (std::size_t pi = 0; pi < s_.programs.size(); ++pi) team[pi].assign(s_.programs[pi].code.size(), threads_);
  for (std::size_t pp = 0; pp < s_.parallels.size(); ++pp)
    for (auto bi : s_.parallels[pp].branches) {
      auto const& b = s_.branches[bi];
      auto const& gr = groups_[pp];
      std::fill(team[b.program].begin() + b.begin, team[b.program].begin() + b.end, gr.size(gr.of_slot(b.slot)));
    }
  // Compute sets and exchanges that only a bound host path's body reaches are never run: not bound either (no
  // vertex objects, staging or copy lists). Host paths are bound alike in every replica.
  std::vector<std::vector<unsigned>> cs_runs(s_.compute_sets.size()), ex_runs(s_.exchanges.size());
  auto const note = [](std::vector<unsigned>& teams, unsigned n) {
    if (std::find(teams.begin(), teams.end(), n) == teams.end()) teams.push_back(n);
  };
  for (std::size_t pi = 0; pi < s_.programs.size(); ++pi) {
    auto const& p = s_.programs[pi];
    for (std::size_t pc = 0; pc < p.code.size(); ++pc) {
      auto const& in = p.code[pc];
      if (in.op == program::detail::Op::host_path && reps_[0].paths[static_cast<std::size_t>(in.a)]) {
        pc = static_cast<std::size_t>(in.b) - 1;
      } else if (in.op == program::detail::Op::superstep) {
        if (in.a >= 0) note(cs_runs[static_cast<std::size_t>(in.a)], team[pi][pc]);
        if (in.b >= 0) note(ex_runs[static_cast<std::size_t>(in.b)], team[pi][pc]);
      }
    }
  }
  cs_.resize(cs_runs.size());
  for (std::size_t i = 0; i < cs_runs.size(); ++i)
    for (unsigned n : cs_runs[i]) cs_[i].emplace_back(n, bind_compute_set(s_.compute_sets[i], n));
  ex_.resize(ex_runs.size());
  for (std::size_t i = 0; i < ex_runs.size(); ++i)
    for (unsigned n : ex_runs[i]) ex_[i].emplace_back(n, bind_exchange(s_.exchanges[i], n));
  fifos_.resize(g_.fifos.size());
  for (auto& f : fifos_) f = std::vector<FifoConnection>(local_);
  fifo_shared_.assign(g_.fifos.size(), 1);
  // Flags of repeat_while / if_ are single elements: resolve their host addresses once.
  for (auto& r : reps_) {
    std::size_t const l = static_cast<std::size_t>(&r - reps_.data());
    for (auto const& t : s_.slots) {
      auto const runs = t.runs();
      r.flags.push_back(runs.size() == 1 ? at(l, runs[0].var, runs[0].start, size_of(t.element_type())) : nullptr);
    }
  }
  for (auto const& c : s_.collectives) {
    auto& cr = collectives_.emplace_back();
    cr.runs = s_.slots[static_cast<std::size_t>(c.slot)].runs();
    cr.offsets.push_back(0);
    for (auto const& r : cr.runs) cr.offsets.push_back(cr.offsets.back() + r.count);
  }
  counters_.assign(threads_, std::vector<std::int64_t>(s_.counters, 0));
  for (auto const& p : s_.programs) {
    counts_.emplace_back(p.code.size(), 0);
    ns_.emplace_back(p.code.size(), 0);
  }
  if (auto_.any()) {
    // Each engine of the process its own directory: the first the one asked for, the k-th engine<k> in it; under
    // several processes, rank<r> in it first.
    static std::atomic<unsigned> engines{0};
    unsigned const k = engines.fetch_add(1) + 1;
    std::filesystem::path d = auto_.directory;
    if (comm_) d /= "rank" + std::to_string(comm_->rank());
    if (k > 1) d /= "engine" + std::to_string(k);
    report_dir_ = d.string();
    // Through a pointer: the destructor, which every file that includes the Engine compiles, does not reach the
    // report's code; only a file that creates an Engine does.
    write_report_ = [](EngineCore const& core) noexcept {
      try {
        core.profile().write_report(core.report_dir_);
        logging::info("engine: wrote its report (profile.json, report.html, summary.txt) to " + core.report_dir_);
      } catch (std::exception const& e) {
        logging::error(std::string("engine: cannot write the report TILEBSP_ENGINE_OPTIONS asks for: ") + e.what());
      }
    };
  }
  if (logging::enabled(LogLevel::info))
    logging::info("engine: " + std::to_string(threads_) + " host thread(s), " + std::to_string(local_) + " of " +
                  std::to_string(replicas_) + " replica(s), " + std::to_string(s_.programs.size()) +
                  " program(s), ready in " +
                  std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count()) +
                  " ms" + (report_dir_.empty() ? "" : "; it writes its report to " + report_dir_));
}

TILEBSP_INLINE void exec::detail::EngineCore::check_processes() {
  // Every process sends its executable's fingerprint to every other; all compare them with rank 0's.
  auto const mine = program::detail::schedule_fingerprint(s_);
  std::size_t const p = comm_->size();
  std::vector<std::array<std::uint64_t, 2>> got(p);
  std::array<std::uint64_t, 2> const send{mine.name, mine.check};
  std::vector<std::span<std::byte const>> out(p, std::as_bytes(std::span(send)));
  std::vector<std::span<std::byte>> in;
  for (auto& x : got) in.push_back(std::as_writable_bytes(std::span(x)));
  comm_->exchange(out, in);
  std::string differ;
  for (std::size_t r = 1; r < p; ++r)
    if (got[r] != got[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
  if (!differ.empty())
    throw replica_error("engine: the executable of rank(s) " + differ + " differs from rank 0's (another graph, "
                        "programs, target or replica count): every process must compile the same program");
}

TILEBSP_INLINE void exec::detail::EngineCore::run(std::size_t program) {
  if (program >= s_.programs.size())
    throw index_error("run: program " + std::to_string(program) + " out of range (the executable has " +
                      std::to_string(s_.programs.size()) + " programs)");
  for (auto f : s_.programs[program].fifos)
    for (std::size_t l = 0; l < (fifo_shared_[f] ? 1 : local_); ++l)
      if (!fifos_[f][l].connected)
        throw stream_error("run: program " + std::to_string(program) + " streams through FIFO '" + g_.fifos[f].name +
                           "', which is not connected" +
                           (fifo_shared_[f] ? std::string() : " for replica " + std::to_string(first_ + l)) +
                           " (Engine::connect)");
  error_ = nullptr;
  trace_ = logging::enabled(LogLevel::trace);
  if (trace_) logging::trace("engine: run program " + std::to_string(program));
  auto job = [this, program](unsigned tid) { execute(program, tid); };
  team_.run(job);
  // A prefetch in flight completes before run returns: callbacks never run outside Engine::run, so what they
  // capture need only outlive the run (its data is kept for the next run's first transfer).
  for (auto& f : fifos_)
    for (auto& c : f) c.wait();
  if (error_ && logging::enabled(LogLevel::err)) {
    try {
      std::rethrow_exception(error_);
    } catch (std::exception const& e) {
      logging::error("engine: program " + std::to_string(program) + " failed: " + e.what());
    } catch (...) {
    }
  }
  if (error_) {
    // The other processes must not wait for this one at their next collective.
    if (comm_) {
      try {
        std::rethrow_exception(error_);
      } catch (std::exception const& e) {
        comm_->fail(e.what());
      } catch (...) {
        comm_->fail("a non-standard exception");
      }
    }
    std::rethrow_exception(error_);
  }
}

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
  for (auto const& r : g_.operators) p.operators.push_back({r.kind, r.name, r.plans, 0, 0, 0});
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
      if (code[pc].op == program::detail::Op::parallel)
        for (auto bi : s_.parallels[static_cast<std::size_t>(code[pc].a)].branches)
          if (&s_.branches[bi] == &b) st.runs += counts_[b.program][pc];
    p.stages.push_back(st);
  }
  return p;
}

TILEBSP_COLD TILEBSP_INLINE void exec::detail::EngineCore::trace_step(std::size_t pi, std::size_t pc, std::uint64_t ns) const {
  auto const op = s_.programs[pi].code[pc].op;
  if (op == program::detail::Op::repeat_begin || op == program::detail::Op::repeat_end || op == program::detail::Op::jump) return;
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
        case program::detail::Op::superstep: {
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
        case program::detail::Op::stream_in: sp.kind = "stream_in"; sp.label = "stream_in '" + g_.fifos[static_cast<std::size_t>(in.a)].name + "'"; break;
        case program::detail::Op::stream_out: sp.kind = "stream_out"; sp.label = "stream_out '" + g_.fifos[static_cast<std::size_t>(in.a)].name + "'"; break;
        case program::detail::Op::host: sp.kind = "host"; sp.label = "host callback"; break;
        case program::detail::Op::sync: sp.kind = "sync"; sp.label = "sync"; break;
        case program::detail::Op::branch_if_false: sp.kind = "branch"; sp.label = "branch on flag"; break;
        case program::detail::Op::host_path:
          sp.kind = "host_path";
          sp.label = "host path '" + s_.host_paths[static_cast<std::size_t>(in.a)].name + "'" +
                     (reps_[0].paths[static_cast<std::size_t>(in.a)] ? "" : " (body runs)");
          // The operator whose compute sets the body runs (host time stays on this step when the task runs).
          for (std::size_t q = pc + 1; q < static_cast<std::size_t>(in.b) && sp.op < 0; ++q)
            if (auto const& bi = s_.programs[pi].code[q]; bi.op == program::detail::Op::superstep && bi.a >= 0) {
              auto const id = s_.compute_sets[static_cast<std::size_t>(bi.a)].id;
              if (id < g_.compute_set_ops.size()) sp.op = g_.compute_set_ops[id];
            }
          break;
        case program::detail::Op::collective: {
          auto const& c = s_.collectives[static_cast<std::size_t>(in.a)];
          Tensor const& tn = s_.slots[static_cast<std::size_t>(c.slot)];
          sp.kind = "collective";
          sp.collective_bytes = tn.num_elements() * size_of(tn.element_type());
          sp.label = std::string("cross-replica ") + name_of(static_cast<CollectiveOp>(c.op)) + " '" + c.name + "' " +
                     std::to_string(sp.collective_bytes) + " B";
          break;
        }
        case program::detail::Op::parallel: {
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
    else if (in.op != program::detail::Op::repeat_begin && in.op != program::detail::Op::repeat_end &&
             in.op != program::detail::Op::jump)
      for (std::uint32_t i = 0; i < t.ipus; ++i) sp.ipus.push_back(i);
  }
}

TILEBSP_INLINE void exec::detail::EngineCore::read_bytes(std::size_t local, Tensor const& t, void* dst, std::size_t bytes) const {
  check_access("read", t, bytes);
  auto* out = static_cast<std::byte*>(dst);
  std::size_t const eb = size_of(t.element_type());
  t.for_each_run([&](std::uint32_t var, std::int64_t start, std::int64_t stride, std::int64_t count) {
    exec::detail::run_copy({at(local, var, start, eb), out, stride * static_cast<std::int64_t>(eb),
                      static_cast<std::int64_t>(eb), count, static_cast<std::uint32_t>(eb)});
    out += count * static_cast<std::int64_t>(eb);
  });
}

TILEBSP_INLINE void exec::detail::EngineCore::write_bytes(std::size_t local, Tensor const& t, void const* src, std::size_t bytes) {
  check_access("write", t, bytes);
  auto const* in = static_cast<std::byte const*>(src);
  std::size_t const eb = size_of(t.element_type());
  t.for_each_run([&](std::uint32_t var, std::int64_t start, std::int64_t stride, std::int64_t count) {
    if (g_.variables[var].constant) throw error("write: '" + g_.variables[var].name + "' is a constant");
    if (auto& w = reps_[local].host_writes[var]) ++*w;
    exec::detail::run_copy({in, at(local, var, start, eb), static_cast<std::int64_t>(eb),
                      stride * static_cast<std::int64_t>(eb), count, static_cast<std::uint32_t>(eb)});
    in += count * static_cast<std::int64_t>(eb);
  });
}

TILEBSP_INLINE void exec::detail::EngineCore::bind_host_paths() {
  for (auto& r : reps_) {
    HostBinding const at{[&r](std::uint32_t var) { return r.data.at(var).get(); },
                         [&r](std::uint32_t var) { return r.host_writes.at(var) ? &*r.host_writes[var] : nullptr; }};
    for (auto const& hp : s_.host_paths) r.paths.push_back(host_kernels_ && hp.kernel ? hp.kernel.bind(at) : HostTask{});
  }
}

TILEBSP_INLINE void exec::detail::EngineCore::mark_program_writes() {
  std::vector<bool> written(g_.variables.size(), false);
  for (auto const& cs : s_.compute_sets)
    for (auto v : cs.writes) written[v] = true;
  for (auto const& ex : s_.exchanges)
    for (auto const& tr : ex.transfers) written[tr.dst_var] = true;
  for (auto const& p : s_.programs)
    for (auto const& in : p.code)
      if (in.op == program::detail::Op::stream_in)
        for (auto const& r : s_.slots[static_cast<std::size_t>(in.b)].runs()) written[r.var] = true;
  for (std::size_t v = 0; v < written.size(); ++v)
    for (auto const& c : s_.collectives)
      s_.slots[static_cast<std::size_t>(c.slot)].for_each_run(
          [&](std::uint32_t var, std::int64_t, std::int64_t, std::int64_t) { written[var] = true; });
  for (auto& r : reps_) {
    r.host_writes.resize(g_.variables.size());
    for (std::size_t v = 0; v < written.size(); ++v)
      if (!written[v]) r.host_writes[v] = 1;
  }
}

TILEBSP_INLINE void exec::detail::EngineCore::check_access(char const* op, Tensor const& t, std::size_t bytes) const {
  if (!t.valid()) throw error(std::string(op) + ": the tensor is empty (default-constructed)");
  if (t.graph_id() != g_.id) throw error(std::string(op) + ": the tensor belongs to another graph");
  t.for_each_run([&](std::uint32_t var, std::int64_t, std::int64_t, std::int64_t) {
    if (var >= g_.variables.size())
      throw error(std::string(op) + ": the tensor's variable was added to the graph after this program was compiled");
  });
  if (bytes != t.num_elements() * size_of(t.element_type()))
    throw shape_error(std::string(op) + ": the tensor has " + std::to_string(t.num_elements()) + " elements");
}

TILEBSP_INLINE std::vector<exec::detail::CopyOp> exec::detail::EngineCore::tensor_ops(std::size_t local, std::vector<core::detail::Run> const& runs, std::byte* buffer,
                                                             std::uint32_t eb, bool to_buffer) const {
  std::vector<exec::detail::CopyOp> ops;
  std::int64_t off = 0;
  for (auto const& r : runs) {
    std::byte* p = at(local, r.var, r.start, eb);
    std::byte* b = buffer + off * eb;
    ops.push_back(to_buffer ? exec::detail::CopyOp{p, b, r.stride * eb, eb, r.count, eb}
                            : exec::detail::CopyOp{b, p, eb, r.stride * eb, r.count, eb});
    off += r.count;
  }
  return ops;
}

TILEBSP_INLINE exec::detail::ComputeSetExec const& exec::detail::EngineCore::compute_exec(std::size_t plan, unsigned team) const {
  for (auto const& [n, e] : cs_[plan])
    if (n == team) return e;
  throw error("engine: compute set plan " + std::to_string(plan) + " is not bound for " + std::to_string(team) + " threads");
}

TILEBSP_INLINE exec::detail::ExchangeExec const& exec::detail::EngineCore::exchange_exec(std::size_t plan, unsigned team) const {
  for (auto const& [n, e] : ex_[plan])
    if (n == team) return e;
  throw error("engine: exchange " + std::to_string(plan) + " is not bound for " + std::to_string(team) + " threads");
}

TILEBSP_INLINE exec::detail::ComputeSetExec exec::detail::EngineCore::bind_compute_set(program::detail::ComputeSetPlan const& plan, unsigned team) {
  exec::detail::ComputeSetExec e;
  // Every local replica's vertices, replica after replica, each bound to its replica's memory.
  for (std::size_t l = 0; l < local_; ++l) {
    std::size_t arena = 0;
    for (auto const& pv : plan.vertices) {
      auto const* ops = g_.vertices[pv.record].ops;
      arena = (arena + ops->align - 1) / ops->align * ops->align + ops->size;
    }
    arenas_.push_back(exec::detail::allocate(arena));
    std::byte* base = arenas_.back().get();
    std::size_t off = 0;
    for (auto const& pv : plan.vertices) {
      auto const& rec = g_.vertices[pv.record];
      auto const* ops = rec.ops;
      off = (off + ops->align - 1) / ops->align * ops->align;
      void* obj = base + off;
      off += ops->size;
      ops->copy_construct(obj, rec.prototype.get());
      objects_.emplace_back(ops, obj);
      exec::detail::WorkItem item{rec.tile, l, ops->size, ops->compute, obj, 1, static_cast<std::uint32_t>(e.gathers.size()), 0,
                            static_cast<std::uint32_t>(e.scatters.size()), 0, pv.cycles};
      std::vector<core::detail::FieldBinding> b(rec.fields.size());
      for (std::uint32_t fi = 0; fi < rec.fields.size(); ++fi) {
        auto const& f = rec.fields[fi];
        if (f.kind == core::detail::FieldKind::param) continue;
        std::vector<core::detail::FieldBinding> items(rec.tensors_of(f).size());
        for (std::uint32_t k = 0; k < rec.tensors_of(f).size(); ++k) {
          auto const& t = rec.tensors_of(f)[k];
          auto const eb = static_cast<std::uint32_t>(size_of(t.element_type()));
          auto const* st = find_staging(pv, fi, k);
          if (st) {
            staging_.push_back(exec::detail::allocate(static_cast<std::size_t>(st->elements) * eb));
            std::byte* buf = staging_.back().get();
            auto const runs = t.runs();
            if (st->gather)
              for (auto const& op : tensor_ops(l, runs, buf, eb, true)) e.gathers.push_back(op);
            if (st->scatter)
              for (auto const& op : tensor_ops(l, runs, buf, eb, false)) e.scatters.push_back(op);
            items[k] = {buf, static_cast<std::size_t>(st->elements)};
            std::ptrdiff_t step = 1;
            for (std::size_t d = f.rank; d-- > 0;) {
              items[k].shape[d] = t.dim(d);
              items[k].stride[d] = step;
              step *= static_cast<std::ptrdiff_t>(t.dim(d));
            }
          } else if (f.rank > 0) {
            auto const a = *t.affine();  // planned as direct only when affine
            items[k] = {at(l, a.var, a.start, eb), t.num_elements()};
            for (std::size_t d = 0; d < f.rank; ++d) {
              items[k].shape[d] = t.dim(d);
              items[k].stride[d] = a.strides[d];
            }
          } else {
            auto const runs = t.runs();
            items[k] = {runs.empty() ? nullptr : at(l, runs[0].var, runs[0].start, eb), t.num_elements()};
          }
        }
        if (f.kind == core::detail::FieldKind::input_list) {
          lists_.emplace_back(new core::detail::FieldBinding[std::max<std::size_t>(items.size(), 1)]);
          std::copy(items.begin(), items.end(), lists_.back().get());
          b[fi] = {lists_.back().get(), items.size()};
        } else {
          b[fi] = items[0];
        }
      }
      ops->bind(obj, b.data());
      item.gather_end = static_cast<std::uint32_t>(e.gathers.size());
      item.scatter_end = static_cast<std::uint32_t>(e.scatters.size());
      e.items.push_back(item);
    }
  }
  // Deal tiles (their items) to threads by estimated work, in order.
  std::uint64_t total = 0;
  for (auto const& it : e.items) total += it.weight;
  std::vector<std::size_t> split(team + 1, e.items.size());
  split[0] = 0;
  std::uint64_t acc = 0;
  std::size_t i = 0;
  for (unsigned t = 1; t < team; ++t) {
    std::uint64_t const goal = total * t / team;
    while (i < e.items.size() && acc + e.items[i].weight / 2 < goal) acc += e.items[i++].weight;
    while (i > 0 && i < e.items.size() && e.items[i].tile == e.items[i - 1].tile &&
           e.items[i].replica == e.items[i - 1].replica)
      acc += e.items[i++].weight;
    split[t] = i;
  }
  // Within each thread's share, runs of same-type vertices stored contiguously become one call.
  std::vector<exec::detail::WorkItem> merged;
  e.split.assign(team + 1, 0);
  for (unsigned t = 0; t < team; ++t) {
    e.split[t] = merged.size();
    for (std::size_t k = split[t]; k < split[t + 1]; ++k) {
      auto const& it = e.items[k];
      auto const staged = [](exec::detail::WorkItem const& w) {
        return w.gather_begin != w.gather_end || w.scatter_begin != w.scatter_end;
      };
      if (merged.size() > e.split[t] && !staged(it) && !staged(merged.back()) && merged.back().compute == it.compute &&
          static_cast<std::byte*>(merged.back().first) + merged.back().count * it.size == static_cast<std::byte*>(it.first)) {
        merged.back().count += it.count;
        merged.back().weight += it.weight;
      } else {
        merged.push_back(it);
      }
    }
  }
  e.split[team] = merged.size();
  e.items = std::move(merged);
  return e;
}

TILEBSP_INLINE program::detail::Staging const* exec::detail::EngineCore::find_staging(program::detail::PlacedVertex const& pv, std::uint32_t field,
                                                           std::uint32_t item) {
  for (auto const& st : pv.staging)
    if (st.field == field && st.item == item) return &st;
  return nullptr;
}

TILEBSP_INLINE exec::detail::ExchangeExec exec::detail::EngineCore::bind_exchange(program::detail::ExchangePlan const& plan, unsigned team) {
  exec::detail::ExchangeExec e;
  e.staged = plan.staged;
  std::vector<exec::detail::CopyOp> direct, in, out;
  if (plan.staged) {
    e.stage = std::make_unique<std::byte[]>(std::max<std::uint64_t>(plan.bytes * local_, 1));
  }
  std::int64_t off = 0;
  for (std::size_t l = 0; l < local_; ++l)
    for (auto const& x : plan.transfers) {
      std::int64_t const eb = x.elem_bytes;
      auto const* src = at(l, x.src_var, x.src_start, x.elem_bytes);
      auto* dst = at(l, x.dst_var, x.dst_start, x.elem_bytes);
      if (plan.staged) {
        in.push_back({src, e.stage.get() + off, x.src_stride * eb, eb, x.count, x.elem_bytes});
        out.push_back({e.stage.get() + off, dst, eb, x.dst_stride * eb, x.count, x.elem_bytes});
        off += x.count * eb;
      } else {
        direct.push_back({src, dst, x.src_stride * eb, x.dst_stride * eb, x.count, x.elem_bytes});
      }
    }
  e.phase1 = exec::detail::split_copies(plan.staged ? in : direct, team);
  if (plan.staged) e.phase2 = exec::detail::split_copies(out, team);
  return e;
}

TILEBSP_INLINE void exec::detail::EngineCore::fail(bool& failed) {
  std::lock_guard lock(error_mutex_);
  if (!error_) error_ = std::current_exception();
  failed = true;
}

TILEBSP_INLINE void exec::detail::EngineCore::run_compute(exec::detail::ComputeSetExec const& e, unsigned tid) const {
  for (std::size_t i = e.split[tid]; i < e.split[tid + 1]; ++i) {
    auto const& it = e.items[i];
    for (auto g = it.gather_begin; g < it.gather_end; ++g) exec::detail::run_copy(e.gathers[g]);
    it.compute(it.first, it.count);
    for (auto s = it.scatter_begin; s < it.scatter_end; ++s) exec::detail::run_copy(e.scatters[s]);
  }
}

TILEBSP_INLINE void exec::detail::EngineCore::stream(program::detail::Instr const& in, std::size_t local) {
  auto const& fifo = g_.fifos[static_cast<std::size_t>(in.a)];
  auto const f = static_cast<std::size_t>(in.a);
  auto& c = fifos_[f][fifo_shared_[f] ? 0 : local];
  Tensor const& t = s_.slots[static_cast<std::size_t>(in.b)];
  std::size_t const bytes = t.num_elements() * size_of(t.element_type());
  bool const to_device = in.op == program::detail::Op::stream_in;
  std::byte* host = nullptr;
  if (c.fill || c.drain) {
    if (to_device) c.take_next();
    host = c.scratch.data();
  } else {
    if (c.pos + bytes > c.buffer_bytes) {
      if (!c.circular || bytes == 0)
        throw stream_error(std::string(to_device ? "stream_in" : "stream_out") + ": FIFO '" + fifo.name +
                           "' is exhausted after " + std::to_string(c.transfers) + " transfers");
      c.pos = 0;
    }
    host = c.buffer + c.pos;
    c.pos += bytes;
  }
  ++c.transfers;
  if (to_device) write_bytes(local, t, host, bytes);
  else read_bytes(local, t, host, bytes);
  if (c.drain) c.drain(host);
}

TILEBSP_INLINE bool exec::detail::EngineCore::flag_value(std::size_t local, std::size_t slot) const noexcept {
  std::uint32_t v = 0;
  std::memcpy(&v, reps_[local].flags[slot], size_of(s_.slots[slot].element_type()));
  return v != 0;
}

TILEBSP_INLINE void exec::detail::EngineCore::execute(std::size_t program, unsigned tid) {
  run_code(program, 0, s_.programs[program].code.size(), exec::detail::Lane{tid, threads_, &barrier_, tid, true});
}

TILEBSP_INLINE bool exec::detail::EngineCore::run_code(std::size_t program, std::size_t begin, std::size_t end,
                                                       exec::detail::Lane const& lane) {
  auto const& code = s_.programs[program].code;
  auto& counters = counters_[lane.global];
  auto* counts = counts_[program].data();
  auto* ns = ns_[program].data();
  unsigned const tid = lane.tid;
  auto& barrier = *lane.barrier;
  bool failed = false;
  auto const guarded = [&](auto&& f) {
    try {
      f();
    } catch (...) {
      fail(failed);
    }
  };
  // Host work of concurrent stages (streams, callbacks) one at a time: user callbacks never run concurrently.
  auto const host_side = [&](auto&& f) {
    if (lane.top) return f();
    std::lock_guard lock(io_mutex_);
    f();
  };
  auto last = profiling_ && tid == 0 ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  std::size_t pc = begin;
  while (pc < end) {
    auto const& in = code[pc];
    std::size_t next = pc + 1;
    switch (in.op) {
      case program::detail::Op::superstep:
        if (in.a >= 0) {
          guarded([&] { run_compute(compute_exec(static_cast<std::size_t>(in.a), lane.threads), tid); });
          if (barrier.arrive_and_wait(failed)) return false;
        }
        if (in.b >= 0) {
          auto const& ex = exchange_exec(static_cast<std::size_t>(in.b), lane.threads);
          for (auto const& op : ex.phase1[tid]) exec::detail::run_copy(op);
          if (barrier.arrive_and_wait(failed)) return false;
          if (ex.staged) {
            for (auto const& op : ex.phase2[tid]) exec::detail::run_copy(op);
            if (barrier.arrive_and_wait(failed)) return false;
          }
        }
        break;
      case program::detail::Op::stream_in:
      case program::detail::Op::stream_out:
        // Replica after replica: a FIFO shared by the replicas hands them consecutive transfers.
        if (tid == 0)
          guarded([&] {
            host_side([&] {
              for (std::size_t l = 0; l < local_; ++l) stream(in, l);
            });
          });
        if (barrier.arrive_and_wait(failed)) return false;
        break;
      case program::detail::Op::host:
        if (tid == 0)
          guarded([&] {
            host_side([&] {
              for (auto& r : reps_) s_.callbacks[static_cast<std::size_t>(in.a)](*r.context);
            });
          });
        if (barrier.arrive_and_wait(failed)) return false;
        break;
      case program::detail::Op::collective:
        if (replicas_ > 1) {
          if (!comm_) guarded([&] { collective_local(static_cast<std::size_t>(in.a), tid, lane.threads); });
          else if (tid == 0) guarded([&] { collective_processes(static_cast<std::size_t>(in.a)); });
          if (barrier.arrive_and_wait(failed)) return false;
        }
        break;
      case program::detail::Op::sync:
        if (barrier.arrive_and_wait(failed)) return false;
        break;
      case program::detail::Op::repeat_begin:
        counters[static_cast<std::size_t>(in.a)] = in.n;
        if (in.n == 0) next = static_cast<std::size_t>(in.b);
        break;
      case program::detail::Op::repeat_end:
        if (--counters[static_cast<std::size_t>(in.a)] > 0) next = static_cast<std::size_t>(in.b);
        break;
      case program::detail::Op::branch_if_false: {
        // Every thread reads the flag, then syncs so that nobody overwrites it before all have read it. The replicas
        // run in lockstep here: their flags must agree.
        bool const f = flag_value(0, static_cast<std::size_t>(in.a));
        std::size_t differs = 0;
        for (std::size_t l = 1; l < local_ && !differs; ++l)
          if (flag_value(l, static_cast<std::size_t>(in.a)) != f) differs = l;
        if (differs && tid == 0)
          guarded([&] {
            throw replica_error("engine: the replicas' control flow diverged: the flag '" +
                                g_.variables[s_.slots[static_cast<std::size_t>(in.a)].runs()[0].var].name + "' is " +
                                (f ? "true" : "false") + " in replica " + std::to_string(first_) + " but " +
                                (f ? "false" : "true") + " in replica " + std::to_string(first_ + differs) +
                                " (replicas must take the same branches: derive flags from replicated data)");
          });
        if (barrier.arrive_and_wait(failed)) return false;
        if (!f) next = static_cast<std::size_t>(in.b);
        break;
      }
      case program::detail::Op::jump: next = static_cast<std::size_t>(in.b); break;
      case program::detail::Op::host_path:
        // The one place that chooses between a span's host task and its body.
        if (reps_[0].paths[static_cast<std::size_t>(in.a)]) {
          for (auto& r : reps_) {
            guarded([&] { r.paths[static_cast<std::size_t>(in.a)](tid, lane.threads); });
            if (barrier.arrive_and_wait(failed)) return false;
          }
          next = static_cast<std::size_t>(in.b);
          // The model runs the body: its steps count once each (their estimated cycles), the host time stays on
          // this step.
          if (tid == 0)
            for (std::size_t q = pc + 1; q < next; ++q) ++counts[q];
        }
        break;
      case program::detail::Op::parallel: {
        // A pipeline step: each group of threads runs the stages of its IPU slots, in stage order; then all join.
        auto const& pp = s_.parallels[static_cast<std::size_t>(in.a)];
        auto const& gr = groups_[static_cast<std::size_t>(in.a)];
        unsigned const g = gr.of_thread(tid);
        exec::detail::Lane const sub{tid - gr.first[g], gr.size(g), gr.barriers[g].get(), lane.global, false};
        for (auto bi : pp.branches)
          if (auto const& b = s_.branches[bi]; gr.of_slot(b.slot) == g && !run_code(program, b.begin, b.end, sub)) {
            failed = true;
            break;
          }
        if (barrier.arrive_and_wait(failed)) return false;
        break;
      }
    }
    if (tid == 0) {
      ++counts[pc];
      std::uint64_t took = 0;
      if (profiling_) {
        auto const now = std::chrono::steady_clock::now();
        took = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - last).count());
        ns[pc] += took;
        last = now;
      }
      if (trace_) trace_step(program, pc, took);
    }
    pc = next;
  }
  return true;
}

TILEBSP_INLINE exec::detail::EngineCore::~EngineCore() {
  if (write_report_) write_report_(*this);
  for (auto& f : fifos_)
    for (auto& c : f) c.wait();
  for (auto const& [ops, p] : objects_) ops->destroy(p);
}

TILEBSP_INLINE exec::detail::FifoConnection& exec::detail::EngineCore::connection(char const* op, Fifo const& f,
                                                                                ElementType type, std::size_t local) {
  if (f.graph != g_.id || f.id >= fifos_.size()) throw error(std::string(op) + ": the FIFO belongs to another graph");
  if (f.type != type)
    throw type_error(std::string(op) + ": FIFO '" + g_.fifos[f.id].name + "' carries " + std::string(name_of(f.type)) +
                     " but the host type is " + std::string(name_of(type)));
  // Switching between one shared connection and one per replica drops the old ones.
  bool const shared = local == all;
  if (static_cast<bool>(fifo_shared_[f.id]) != shared) {
    for (auto& c : fifos_[f.id]) c.wait(), c = {};
    fifo_shared_[f.id] = shared;
  }
  return fifos_[f.id][shared ? 0 : local];
}

TILEBSP_INLINE std::size_t exec::detail::EngineCore::local_of(char const* op, std::size_t replica) const {
  if (replica >= replicas_)
    throw index_error(std::string(op) + ": replica " + std::to_string(replica) + " out of range (the executable has " +
                      std::to_string(replicas_) + " replica(s))");
  if (replica < first_ || replica >= first_ + local_)
    throw index_error(std::string(op) + ": replica " + std::to_string(replica) + " runs in process " +
                      std::to_string(replica / local_) + ", not in this one (process " +
                      std::to_string(first_ / local_) + " runs replicas " + std::to_string(first_) + " to " +
                      std::to_string(first_ + local_ - 1) + ")");
  return replica - first_;
}

TILEBSP_INLINE void exec::detail::ReplicaContext::read_bytes(Tensor const& t, void* dst, std::size_t bytes) const {
  core_.read_bytes(local_, t, dst, bytes);
}
TILEBSP_INLINE void exec::detail::ReplicaContext::write_bytes(Tensor const& t, void const* src, std::size_t bytes) {
  core_.write_bytes(local_, t, src, bytes);
}
TILEBSP_INLINE std::size_t exec::detail::ReplicaContext::replica() const noexcept { return core_.first_ + local_; }

namespace exec::detail {
/// Calls f(run, first, count) for the pieces of elements [begin, end) of a tensor with runs `runs` (offsets[k]: the
/// elements before run k): `count` elements of `run` from the variable's element `first`, `run.stride` apart.
template <class F>
void for_each_piece(std::vector<core::detail::Run> const& runs, std::vector<std::int64_t> const& offsets,
                    std::int64_t begin, std::int64_t end, F&& f) {
  auto k = static_cast<std::size_t>(std::upper_bound(offsets.begin(), offsets.end(), begin) - offsets.begin() - 1);
  for (std::int64_t i = begin; i < end; ++k) {
    auto const& r = runs[k];
    std::int64_t const n = std::min(end, offsets[k] + r.count) - i;
    f(r, r.start + (i - offsets[k]) * r.stride, n);
    i += n;
  }
}
/// The copy of `count` elements of size eb, `stride` elements apart at `p`, into a contiguous buffer or out of it.
inline CopyOp piece_copy(std::byte* p, std::int64_t stride, std::int64_t count, std::byte* buf, std::size_t eb,
                         bool to_buf) {
  auto const e = static_cast<std::int64_t>(eb);
  return to_buf ? CopyOp{p, buf, stride * e, e, count, static_cast<std::uint32_t>(eb)}
                : CopyOp{buf, p, e, stride * e, count, static_cast<std::uint32_t>(eb)};
}
}  // namespace exec::detail

TILEBSP_INLINE void exec::detail::EngineCore::collective_local(std::size_t plan, unsigned tid, unsigned threads) {
  auto const& c = s_.collectives[plan];
  Tensor const& t = s_.slots[static_cast<std::size_t>(c.slot)];
  auto const& runs = collectives_[plan].runs;
  auto const& offsets = collectives_[plan].offsets;
  std::int64_t const n = offsets.back();
  std::size_t const eb = size_of(t.element_type());
  auto const op = static_cast<CollectiveOp>(c.op);
  // This thread's share of the elements, block by block: reduced over the replicas in replica order into replica
  // 0's memory (in place where the elements are contiguous, else through a buffer), then copied to the others.
  // The replicas' layouts are the same: a run's elements sit at the same offsets of each replica's variable.
  // Shares are disjoint, so the threads need no sync until the end.
  std::int64_t const lo = n * tid / threads, hi = n * (tid + 1) / threads;
  constexpr std::int64_t block = 4096;
  std::vector<std::byte const*> src(local_);
  std::vector<std::byte> buf;
  exec::detail::for_each_piece(runs, offsets, lo, hi, [&](core::detail::Run const& r, std::int64_t start, std::int64_t len) {
    for (std::int64_t b = 0; b < len; b += block) {
      std::int64_t const m = std::min(block, len - b);
      std::int64_t const first = start + b * r.stride;  // element of the variable
      auto const at_l = [&](std::size_t l) { return reps_[l].data[r.var].get() + first * static_cast<std::int64_t>(eb); };
      if (r.stride == 1) {
        for (std::size_t l = 0; l < local_; ++l) src[l] = at_l(l);
        program::detail::reduce_in_order(t.element_type(), op, src.data(), local_, at_l(0), static_cast<std::size_t>(m));
        for (std::size_t l = 1; l < local_; ++l) std::memcpy(at_l(l), at_l(0), static_cast<std::size_t>(m) * eb);
      } else {
        std::size_t const span = static_cast<std::size_t>(m) * eb;
        buf.resize(span * local_);
        for (std::size_t l = 0; l < local_; ++l) {
          exec::detail::run_copy(exec::detail::piece_copy(at_l(l), r.stride, m, buf.data() + l * span, eb, true));
          src[l] = buf.data() + l * span;
        }
        program::detail::reduce_in_order(t.element_type(), op, src.data(), local_, buf.data(), static_cast<std::size_t>(m));
        for (std::size_t l = 0; l < local_; ++l)
          exec::detail::run_copy(exec::detail::piece_copy(at_l(l), r.stride, m, buf.data(), eb, false));
      }
    }
  });
}

TILEBSP_INLINE void exec::detail::EngineCore::collective_processes(std::size_t plan) {
  auto const& c = s_.collectives[plan];
  Tensor const& t = s_.slots[static_cast<std::size_t>(c.slot)];
  auto const& runs = collectives_[plan].runs;
  auto const& offsets = collectives_[plan].offsets;
  auto const n = static_cast<std::size_t>(offsets.back());
  std::size_t const eb = size_of(t.element_type()), P = comm_->size(), me = comm_->rank();
  // Process q owns elements [n q / P, n (q + 1) / P): every process sends it its replicas' values there
  // (reduce-scatter), q reduces them over all replicas in replica order, and sends the result to every process
  // (all-gather). An element is so reduced by one process, in the order of the in-process engine: bitwise the same.
  auto const lo = [&](std::size_t q) { return n * q / P; };
  auto const len = [&](std::size_t q) { return lo(q + 1) - lo(q); };
  // Elements [begin, end) of local replica l's tensor to or from a contiguous buffer.
  auto const copy_tensor = [&](std::size_t l, std::int64_t begin, std::int64_t end, std::byte* buf, bool to_buf) {
    exec::detail::for_each_piece(runs, offsets, begin, end, [&](core::detail::Run const& r, std::int64_t first, std::int64_t m) {
      exec::detail::run_copy(exec::detail::piece_copy(reps_[l].data[r.var].get() + first * static_cast<std::int64_t>(eb),
                                                      r.stride, m, buf, eb, to_buf));
      buf += m * static_cast<std::int64_t>(eb);
    });
  };
  std::vector<std::vector<std::byte>> to(P), from(P);
  std::vector<std::span<std::byte const>> send(P);
  std::vector<std::span<std::byte>> recv(P);
  for (std::size_t q = 0; q < P; ++q) {
    to[q].resize(len(q) * eb * local_);  // [local replica][q's elements]
    for (std::size_t l = 0; l < local_; ++l) {
      copy_tensor(l, static_cast<std::int64_t>(lo(q)), static_cast<std::int64_t>(lo(q + 1)),
                  to[q].data() + l * len(q) * eb, true);
    }
    from[q].resize(len(me) * eb * local_);
    send[q] = to[q];
    recv[q] = from[q];
  }
  comm_->exchange(send, recv);
  std::vector<std::byte const*> src;
  for (std::size_t p = 0; p < P; ++p)
    for (std::size_t l = 0; l < local_; ++l) src.push_back(from[p].data() + l * len(me) * eb);
  std::vector<std::byte> part(std::max<std::size_t>(len(me) * eb, 1));
  program::detail::reduce_in_order(t.element_type(), static_cast<CollectiveOp>(c.op), src.data(), src.size(),
                                   part.data(), len(me));
  std::vector<std::byte> result(n * eb);
  for (std::size_t q = 0; q < P; ++q) {
    send[q] = std::span<std::byte const>(part.data(), len(me) * eb);
    recv[q] = std::span<std::byte>(result.data() + lo(q) * eb, len(q) * eb);
  }
  comm_->exchange(send, recv);
  for (std::size_t l = 0; l < local_; ++l) copy_tensor(l, 0, static_cast<std::int64_t>(n), result.data(), false);
}

TILEBSP_INLINE Engine::Engine(Executable exe, EngineOptions opt)
    : core_(std::make_unique<exec::detail::EngineCore>(std::move(exe), opt)) {}
TILEBSP_INLINE Engine::~Engine() = default;
TILEBSP_INLINE std::size_t Engine::host_threads() const noexcept { return core_->threads_; }
TILEBSP_INLINE Executable const& Engine::executable() const noexcept { return core_->exe_; }
TILEBSP_INLINE std::size_t Engine::replicas() const noexcept { return core_->replicas_; }
TILEBSP_INLINE std::size_t Engine::first_replica() const noexcept { return core_->first_; }
TILEBSP_INLINE std::size_t Engine::local_replicas() const noexcept { return core_->local_; }
TILEBSP_INLINE HostContext& Engine::replica(std::size_t r) {
  return *core_->reps_[core_->local_of("replica", r)].context;
}
TILEBSP_INLINE HostContext const& Engine::replica(std::size_t r) const {
  return *core_->reps_[core_->local_of("replica", r)].context;
}
TILEBSP_INLINE void Engine::run(std::size_t program) { core_->run(program); }
TILEBSP_INLINE Profile Engine::profile() const { return core_->profile(); }
TILEBSP_INLINE void Engine::read_bytes(Tensor const& t, void* dst, std::size_t bytes) const {
  if (core_->replicas_ > 1)
    throw replica_error("read: the executable has " + std::to_string(core_->replicas_) +
                        " replicas, each with its own copy of the tensor: name one (engine.read<T>(t, replica))");
  core_->read_bytes(0, t, dst, bytes);
}
TILEBSP_INLINE void Engine::write_bytes(Tensor const& t, void const* src, std::size_t bytes) {
  for (std::size_t l = 0; l < core_->local_; ++l) core_->write_bytes(l, t, src, bytes);
}

TILEBSP_INLINE void Engine::connect_buffer(Fifo const& f, std::size_t replica, ElementType type, std::byte* data,
                                           std::size_t elements, std::size_t bytes, bool circular, bool read_only) {
  if (read_only && f.graph == core_->g_.id && f.id < core_->g_.fifos.size() && !f.to_device)
    throw stream_error("connect: device-to-host FIFO '" + core_->fifo_name(f) + "' needs writable host memory");
  std::size_t const local = replica == all_replicas ? exec::detail::EngineCore::all : core_->local_of("connect", replica);
  core_->connection("connect", f, type, local);  // checks the FIFO first
  if (elements % std::max<std::size_t>(f.elements, 1) != 0 || (f.elements > 0 && elements == 0))
    throw stream_error("connect: FIFO '" + core_->fifo_name(f) + "' moves " + std::to_string(f.elements) +
                       " elements per transfer; the host buffer of " + std::to_string(elements) +
                       " elements is not a positive multiple of that");
  auto& c = core_->connection("connect", f, type, local);
  c.wait();
  c = {};
  c.connected = true;
  c.buffer = data;
  c.buffer_bytes = bytes;
  c.circular = circular;
}

TILEBSP_INLINE void Engine::connect_callback(Fifo const& f, std::size_t replica, ElementType type,
                                             std::size_t element_bytes, std::function<void(std::byte*)> fill,
                                             std::function<void(std::byte const*)> drain, ConnectOptions options) {
  std::size_t const local = replica == all_replicas ? exec::detail::EngineCore::all : core_->local_of("connect", replica);
  core_->connection("connect", f, type, local);  // checks the FIFO first
  if (options.prefetch && !f.to_device)
    throw stream_error("connect: prefetch applies to infeeds; FIFO '" + core_->fifo_name(f) + "' is an outfeed");
  if (f.to_device && !fill) throw stream_error("connect: an infeed callback must accept std::span<T>");
  if (!f.to_device && !drain) throw stream_error("connect: an outfeed callback must accept std::span<T const>");
  auto& c = core_->connection("connect", f, type, local);
  c.wait();
  c = {};
  c.connected = true;
  c.prefetch = options.prefetch;
  if (f.to_device) c.fill = std::move(fill);
  else c.drain = std::move(drain);
  c.scratch.resize(f.elements * element_bytes + 1);
  if (c.prefetch) c.next.resize(c.scratch.size());
}

}  // namespace tilebsp
