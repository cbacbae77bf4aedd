// The interpreter: run_code walks one program's instructions on every thread of the team; the hot loop of the
// executor. Part of the Engine's definitions (exec/engine_impl.hpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/exec/detail/engine_core.hpp>

#include <cstring>
#include <mutex>

namespace tilebsp {

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
      case schedule::Op::superstep:
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
      case schedule::Op::stream_in:
      case schedule::Op::stream_out:
        // Replica after replica: a FIFO shared by the replicas hands them consecutive transfers.
        if (tid == 0)
          guarded([&] {
            host_side([&] {
              for (std::size_t l = 0; l < local_; ++l) stream(in, l);
            });
          });
        if (barrier.arrive_and_wait(failed)) return false;
        break;
      case schedule::Op::host:
        if (tid == 0)
          guarded([&] {
            host_side([&] {
              for (auto& r : reps_) s_.callbacks[static_cast<std::size_t>(in.a)](*r.context);
            });
          });
        if (barrier.arrive_and_wait(failed)) return false;
        break;
      case schedule::Op::collective:
        if (replicas_ > 1) {
          if (!comm_) guarded([&] { collective_local(static_cast<std::size_t>(in.a), tid, lane.threads); });
          else if (tid == 0) guarded([&] { collective_processes(static_cast<std::size_t>(in.a)); });
          if (barrier.arrive_and_wait(failed)) return false;
        }
        break;
      case schedule::Op::sync:
        if (barrier.arrive_and_wait(failed)) return false;
        break;
      case schedule::Op::repeat_begin:
        counters[static_cast<std::size_t>(in.a)] = in.n;
        if (in.n == 0) next = static_cast<std::size_t>(in.b);
        break;
      case schedule::Op::repeat_end:
        if (--counters[static_cast<std::size_t>(in.a)] > 0) next = static_cast<std::size_t>(in.b);
        break;
      case schedule::Op::branch_if_false: {
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
      case schedule::Op::jump: next = static_cast<std::size_t>(in.b); break;
      case schedule::Op::host_path:
        // The one place that chooses between a span's host task and its body.
        if (reps_[0].paths[static_cast<std::size_t>(in.a)]) {
          for (auto& r : reps_) {
            guarded([&] { r.paths[static_cast<std::size_t>(in.a)](tid, lane.threads); });
            if (barrier.arrive_and_wait(failed)) return false;
          }
          // Past the body, or past the elementwise host path fused into this task and its body.
          auto const fused = fused_end_[static_cast<std::size_t>(in.a)];
          next = fused ? fused : static_cast<std::size_t>(in.b);
          // The model runs the body: its steps count once each (their estimated cycles), the host time stays on
          // this step.
          if (tid == 0)
            for (std::size_t q = pc + 1; q < next; ++q) ++counts[q];
        }
        break;
      case schedule::Op::parallel: {
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

}  // namespace tilebsp
