// parallel_for: the one way graph building, compile, lowering and the executable cache use several host threads
// (the Engine keeps its own team of spinning threads for running programs, exec/detail/team.hpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

namespace tilebsp::core::detail {

/// Calls body(i, thread) for every i in [0, count), on up to `threads` host threads: the calling thread is thread 0,
/// and max(threads, 1) - 1 new ones are started (no more than there are blocks) and joined before it returns. The
/// items go out in blocks of `grain` consecutive items, first come first served, each block's in order, so what
/// the body computes must not depend on which thread took an item (per-thread partial results are indexed by
/// `thread`, in [0, threads)).
///
/// When bodies throw, a block stops at its first throwing item, blocks after one that threw are skipped, and the
/// exception of the lowest throwing item is rethrown once every thread has stopped: the same error as on one
/// thread, for any number of threads.
template <class F>
void parallel_for(std::size_t threads, std::size_t count, std::size_t grain, F&& body) {
  if (count == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  std::size_t const blocks = (count + grain - 1) / grain;
  std::size_t const n = std::clamp<std::size_t>(threads, 1, blocks);
  std::vector<std::exception_ptr> errors(blocks);
  std::atomic<std::size_t> next{0}, failed{blocks};  // failed: the lowest block that threw so far
  auto const work = [&](std::size_t thread) {
    for (std::size_t b; (b = next.fetch_add(1, std::memory_order_relaxed)) < blocks;) {
      if (b > failed.load(std::memory_order_relaxed)) continue;
      try {
        for (std::size_t i = b * grain, e = std::min(count, i + grain); i < e; ++i) body(i, thread);
      } catch (...) {
        errors[b] = std::current_exception();
        for (std::size_t f = failed.load(); b < f && !failed.compare_exchange_weak(f, b);) {}
      }
    }
  };
  if (n == 1) {
    work(0);
  } else {
    std::vector<std::thread> team;
    team.reserve(n - 1);
    for (std::size_t t = 1; t < n; ++t) team.emplace_back(work, t);
    work(0);
    for (auto& t : team) t.join();
  }
  if (std::size_t const f = failed.load(); f < blocks) std::rethrow_exception(errors[f]);
}

}  // namespace tilebsp::core::detail
