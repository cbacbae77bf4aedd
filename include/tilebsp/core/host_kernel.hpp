// Host kernels: an operator's faster host implementation of one of its compute sets. The vertices stay the model
// (mapping checks, memory, exchange and cycle estimates, profile); the engine runs the host kernel in their place.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace tilebsp {

/// What an Engine runs for a compute set that has a host kernel: called by every host thread as
/// task(thread, threads) between the same barriers as the vertices would be. Work must be divided so that the
/// values written do not depend on `threads`.
using HostTask = std::function<void(unsigned thread, unsigned threads)>;

/// What a host kernel's bind() gets from the Engine about the graph's variables.
struct HostBinding {
  /// The host address of variable `var`'s first element.
  std::function<std::byte*(std::uint32_t var)> address;
  /// For a variable that no step of the executable writes (only the host does: Engine::write, a host callback), a
  /// counter the Engine bumps on each such write: a kernel may keep a derived form of the operand across runs
  /// (weights packed for its micro-kernel) and rebuild it when the counter has moved. Null for a variable the
  /// program writes (compute sets, exchanges, input streams).
  std::function<std::uint64_t const*(std::uint32_t var)> host_writes;

  std::byte* operator()(std::uint32_t var) const { return address(var); }
};

/// A host implementation of a compute set. Contract: running the task writes bitwise the same values that the
/// compute set's vertices would write to every tensor read after it (an operator's internal temporaries
/// excepted), so an Engine with host kernels turned off (EngineOptions::host_kernels) computes the same results.
/// bind() is called once per Engine; an empty task means "run the vertices" (for example when an operand is not
/// one strided variable).
struct HostKernel {
  std::function<HostTask(HostBinding const&)> bind;
  /// The compute set's work is done by an earlier compute set's host kernel that always binds (for example the
  /// later stages of one operator): the engine then skips the compute set, barrier included. bind is unused.
  bool covered = false;
};

namespace detail {

/// Hands the units 0..count-1 of one run of a host task to its threads, first come first served: a thread that
/// the machine runs slower (another process, a hypervisor) takes fewer units instead of holding the others at the
/// barrier. Use it only where a unit's values do not depend on the thread that computes it; then results do not
/// depend on the division either. Every thread of the run calls run() once; the last to finish resets the queue
/// for the next run (before the compute set's barrier, which publishes the reset), also when a unit throws.
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

/// Pieces of data a host kernel derives from an operand that only the host writes (HostBinding::host_writes: packed
/// weights), each rebuilt once after each host write: the first thread that needs a stale piece builds it while
/// the others that need the same piece wait; pieces are independent. Reading the counter needs no lock: the host
/// writes between runs or in a host callback, both ordered before the compute set by a barrier.
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

/// The host kernels of an operator whose first compute set's task computes the whole operator, the later compute
/// sets being covered. `State` provides `bind(HostBinding const&)`, returning what `run(bound, thread, threads)`
/// needs; a null state means "run the vertices" for every compute set.
template <class State>
HostKernel whole_operator_first(std::shared_ptr<State const> const& state) {
  if (!state) return {};
  return {[s = state](HostBinding const& at) -> HostTask {
    auto const bound = s->bind(at);
    return [s, bound](unsigned t, unsigned threads) { s->run(bound, t, threads); };
  }};
}
template <class State>
HostKernel whole_operator_rest(std::shared_ptr<State const> const& state) {
  if (!state) return {};
  return {{}, true};
}

}  // namespace detail
}  // namespace tilebsp
