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

/// Resolves variable `var` of the graph to the host address of its first element.
using HostAddressOf = std::function<std::byte*(std::uint32_t var)>;

/// A host implementation of a compute set. Contract: running the task writes bitwise the same values that the
/// compute set's vertices would write to every tensor read after it (an operator's internal temporaries
/// excepted), so an Engine with host kernels turned off (EngineOptions::host_kernels) computes the same results.
/// bind() is called once per Engine; an empty task means "run the vertices" (for example when an operand is not
/// one strided variable).
struct HostKernel {
  std::function<HostTask(HostAddressOf const&)> bind;
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

/// The host kernels of an operator whose first compute set's task computes the whole operator, the later compute
/// sets being covered. `State` provides `bind(HostAddressOf const&)`, returning what `run(bound, thread, threads)`
/// needs; a null state means "run the vertices" for every compute set.
template <class State>
HostKernel whole_operator_first(std::shared_ptr<State const> const& state) {
  if (!state) return {};
  return {[s = state](HostAddressOf const& at) -> HostTask {
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
