// Plumbing of the operators' host tasks: a first-come queue of work units, caches of operands only the host
// writes, and the HostKernel of an operator state.
#pragma once

#include <tilebsp/program/host_task.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace tilebsp::ops::detail {

/// Hands the units 0..count-1 of one run of a host task to its threads, first come first served: a thread that
/// the machine runs slower (another process, a hypervisor) takes fewer units instead of holding the others at the
/// barrier. Use it only where a unit's values do not depend on the thread that computes it; then results do not
/// depend on the division either. Every thread of the run calls run() once; the last to finish resets the queue
/// for the next run (before the span's barrier, which publishes the reset), also when a unit throws.
class UnitQueue {
 public:
  template <class F>
  void run(std::size_t count, unsigned threads, F&& unit) {
    struct Finish {
      UnitQueue& q;
      unsigned threads;
      ~Finish() {
        if (q.finished_.fetch_add(1, std::memory_order_acq_rel) + 1 == threads) {
          q.next_.store(0, std::memory_order_relaxed);
          q.finished_.store(0, std::memory_order_relaxed);
        }
      }
    } const finish{*this, threads};
    for (std::size_t u; (u = next_.fetch_add(1, std::memory_order_relaxed)) < count;) unit(u);
  }

 private:
  alignas(64) std::atomic<std::size_t> next_{0};
  alignas(64) std::atomic<unsigned> finished_{0};
};

/// Pieces of data a host task derives from an operand that only the host writes (HostBinding::host_writes: packed
/// weights), each rebuilt once after each host write: the first thread that needs a stale piece builds it while
/// the others that need the same piece wait; pieces are independent. Reading the counter needs no lock: the host
/// writes between runs or in a host callback, both ordered before the span by a barrier.
class HostWriteCache {
 public:
  HostWriteCache(std::uint64_t const* writes, std::size_t pieces) : writes_(writes), pieces_(new Piece[pieces]) {}

  /// Returns once piece `i` holds the data of the operand's current contents, calling build() first if it does not.
  template <class F>
  void ensure(std::size_t i, F&& build) {
    std::uint64_t const want = *writes_;
    Piece& p = pieces_[i];
    while (p.ready.load(std::memory_order_acquire) != want) {
      if (p.busy.exchange(true, std::memory_order_acquire)) {
        p.busy.wait(true, std::memory_order_acquire);  // another thread builds it (or failed to: then try again)
        continue;
      }
      struct Release {
        Piece& p;
        ~Release() {
          p.busy.store(false, std::memory_order_release);
          p.busy.notify_all();
        }
      } const release{p};
      if (p.ready.load(std::memory_order_acquire) != want) {
        build();
        p.ready.store(want, std::memory_order_release);
      }
      return;
    }
  }

 private:
  struct alignas(64) Piece {
    std::atomic<std::uint64_t> ready{0};  ///< the host write its data reflects (0: none; the counter starts at 1)
    std::atomic<bool> busy{false};
  };
  std::uint64_t const* writes_;
  std::unique_ptr<Piece[]> pieces_;
};

/// The HostKernel of an operator whose host implementation is `State`: `state->bind(HostBinding const&)` returns
/// what `state->run(bound, thread, threads)` needs. A null state gives an empty kernel (the body runs).
template <class State>
HostKernel host_kernel_of(std::shared_ptr<State const> const& state) {
  if (!state) return {};
  return {[s = state](HostBinding const& at) -> HostTask {
    auto const bound = s->bind(at);
    return [s, bound](unsigned t, unsigned threads) { s->run(bound, t, threads); };
  }};
}

}  // namespace tilebsp::ops::detail
