// The Engine's definitions: included by <tilebsp/exec/engine.hpp> (header-only) or compiled once into
// tilebsp::compiled (src/engine.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/caches.hpp>
#include <tilebsp/core/log.hpp>
#include <tilebsp/exec/detail/engine_core.hpp>
#include <tilebsp/exec/detail/engine_bind.hpp>
#include <tilebsp/exec/detail/engine_collectives.hpp>
#include <tilebsp/exec/detail/engine_interpreter.hpp>
#include <tilebsp/exec/detail/engine_profile.hpp>
#include <tilebsp/exec/detail/engine_streams.hpp>
#include <tilebsp/exec/engine.hpp>
#include <tilebsp/program/all_reduce.hpp>
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
    : exe_(std::move(exe)), s_(exe_.schedule()), g_(*s_.graph), threads_(static_cast<unsigned>(opt.host_threads ? opt.host_threads : std::max(1u, std::thread::hardware_concurrency()))), profiling_(opt.profiling), host_kernels_(opt.host_kernels), fuse_host_paths_(opt.fuse_host_paths), comm_(opt.communicator), team_(threads_), barrier_(threads_) {
  auto const started = std::chrono::steady_clock::now();
  logging::check_environment();
  CacheSizes const caches = cache_sizes();  // a malformed TILEBSP_CACHE_SIZES: option_error, before a kernel runs
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
  if (opt.reuse_host_memory) memory_ = exec::detail::plan_host_memory(s_);
  for (std::size_t l = 0; l < local_; ++l) {
    auto& r = reps_[l];
    if (memory_.bytes) r.shared = exec::detail::allocate(memory_.bytes);
    for (std::uint32_t vi = 0; vi < g_.variables.size(); ++vi) {
      auto const& v = g_.variables[vi];
      if (memory_.shared(vi))  // within the shared block, which frees it
        r.data.push_back(exec::detail::Buffer(r.shared.get() + memory_.offset[vi], exec::detail::BufferFree{.borrowed = true}));
      else r.data.push_back(exec::detail::allocate(static_cast<std::size_t>(v.size) * size_of(v.type)));
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
      if (in.op == schedule::Op::host_path && reps_[0].paths[static_cast<std::size_t>(in.a)]) {
        pc = static_cast<std::size_t>(in.b) - 1;
      } else if (in.op == schedule::Op::superstep) {
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
    if (!exec::detail::report_writer)
      throw option_error("TILEBSP_ENGINE_OPTIONS asks for a report, but this program has no report writer: include "
                         "<tilebsp/report/auto_report.hpp> in one of its files (or link tilebsp::compiled)");
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
        exec::detail::report_writer(core.profile(), core.report_dir_);
        logging::info("engine: wrote its report (profile.json, report.html, summary.txt) to " + core.report_dir_);
      } catch (std::exception const& e) {
        logging::error(std::string("engine: cannot write the report TILEBSP_ENGINE_OPTIONS asks for: ") + e.what());
      }
    };
  }
  if (logging::enabled(LogLevel::info))
    logging::info("engine: " + std::to_string(threads_) + " host thread(s), " + std::to_string(local_) + " of " +
                  std::to_string(replicas_) + " replica(s), " + std::to_string(s_.programs.size()) +
                  " program(s), blocks for caches " + to_string(caches) + ", ready in " +
                  std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count()) +
                  " ms" + (report_dir_.empty() ? "" : "; it writes its report to " + report_dir_));
}

TILEBSP_INLINE void exec::detail::EngineCore::check_processes() {
  // Every process sends its executable's fingerprint and a hash of the kernels that built its graph to every other;
  // all compare them with rank 0's. Another set of kernels (TILEBSP_ISA, another CPU) computes other bits, and the
  // replicas would drift apart.
  auto const mine = program::detail::schedule_fingerprint(s_);
  std::size_t const p = comm_->size();
  std::vector<std::array<std::uint64_t, 3>> got(p);
  std::array<std::uint64_t, 3> const send{mine.name, mine.check, program::detail::kernels_fingerprint(g_)};
  std::vector<std::span<std::byte const>> out(p, std::as_bytes(std::span(send)));
  std::vector<std::span<std::byte>> in;
  for (auto& x : got) in.push_back(std::as_writable_bytes(std::span(x)));
  comm_->exchange(out, in);
  std::string differ, other_kernels;
  for (std::size_t r = 1; r < p; ++r) {
    if (got[r][2] != got[0][2]) other_kernels += (other_kernels.empty() ? "" : ", ") + std::to_string(r);
    if (got[r][0] != got[0][0] || got[r][1] != got[0][1]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
  }
  if (!differ.empty())
    throw replica_error("engine: the executable of rank(s) " + differ + " differs from rank 0's (another graph, "
                        "programs, target or replica count): every process must compile the same program");
  if (!other_kernels.empty()) {
    std::string const kernels = core::detail::operator_kernels(g_);
    throw replica_error("engine: rank(s) " + other_kernels + " built the graph with other kernels than rank 0 (this "
                        "process: " + (kernels.empty() ? std::string("none") : kernels) +
                        "): every process must run the same instruction set; set TILEBSP_ISA to a level all their "
                        "CPUs run (docs/11)");
  }
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
  last_program_ = program;
  struct Running {  // host callbacks read and write while it is set
    bool& on;
    explicit Running(bool& b) : on(b) { on = true; }
    ~Running() { on = false; }
  };
  {
    Running const running{running_};
    team_.run(job);
  }
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

TILEBSP_INLINE void exec::detail::EngineCore::read_bytes(std::size_t local, Tensor const& t, void* dst, std::size_t bytes) const {
  check_access("read", t, bytes);
  t.for_each_run([&](std::uint32_t var, std::int64_t, std::int64_t, std::int64_t) {
    if (!running_ && memory_.shared(var) && (last_program_ >= memory_.live_at_end.size() || !memory_.live_at_end[last_program_][var]))
      throw error("read: '" + g_.variables[var].name + "' shares host memory with variables whose live ranges do not overlap its own "
                  "(EngineOptions::reuse_host_memory), and the last program run does not leave it live at its end: read it "
                  "from a host callback while it is live, or turn the option off");
  });
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
    if (!running_ && memory_.shared(var))
      throw error("write: '" + g_.variables[var].name + "' shares host memory with variables whose live ranges do not overlap "
                  "its own (EngineOptions::reuse_host_memory): every program writes it in full before reading it, so a value "
                  "written between runs would never be read, and would overwrite the variables sharing its memory");
    if (auto& w = reps_[local].host_writes[var]) ++*w;
    exec::detail::run_copy({in, at(local, var, start, eb), static_cast<std::int64_t>(eb),
                      stride * static_cast<std::int64_t>(eb), count, static_cast<std::uint32_t>(eb)});
    in += count * static_cast<std::int64_t>(eb);
  });
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

TILEBSP_INLINE exec::detail::EngineCore::~EngineCore() {
  if (write_report_) write_report_(*this);
  for (auto& f : fifos_)
    for (auto& c : f) c.wait();
  for (auto const& [ops, p] : objects_) ops->destroy(p);
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

}  // namespace tilebsp
