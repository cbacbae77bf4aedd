// Barrier: a sense-reversing barrier that spins briefly, then parks on a futex; it also ORs a failure flag.
#pragma once

#include <atomic>
#include <cstdint>

namespace tilebsp::exec::detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();  // PAUSE, without <immintrin.h>
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Spins before parking: long enough to cover a superstep's imbalance, short enough that an idle
/// engine stops burning CPU within tens of microseconds.
inline constexpr int spin_iterations = 4000;

/// Waits until `word` differs from `old`: spins, then sleeps on the futex. `sleepers` lets the waker skip the
/// system call when nobody sleeps (seq_cst on both sides makes the check race-free).
inline void spin_then_wait(std::atomic<std::uint32_t> const& word, std::uint32_t old,
                           std::atomic<std::uint32_t>& sleepers) noexcept {
  for (int i = 0; i < spin_iterations; ++i) {
    if (word.load(std::memory_order_acquire) != old) return;
    cpu_relax();
  }
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  while (word.load(std::memory_order_seq_cst) == old) word.wait(old, std::memory_order_seq_cst);
  sleepers.fetch_sub(1, std::memory_order_relaxed);
}

inline void publish(std::atomic<std::uint32_t>& word, std::uint32_t value, std::atomic<std::uint32_t>& sleepers) noexcept {
  word.store(value, std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_seq_cst) != 0) word.notify_all();
}

/// A reusable barrier for a fixed number of threads.
class Barrier {
 public:
  explicit Barrier(unsigned n) : n_(n) {}

  /// Waits for all threads; returns true when any of them passed `failed` = true in this round.
  bool arrive_and_wait(bool failed = false) noexcept {
    if (n_ == 1) return failed;
    std::uint32_t const gen = gen_.load(std::memory_order_acquire);
    auto& flag = failed_[gen & 1].v;
    if (failed) flag.store(true, std::memory_order_relaxed);
    if (count_.fetch_add(1, std::memory_order_acq_rel) == n_ - 1) {
      count_.store(0, std::memory_order_relaxed);
      auto& next = failed_[(gen + 1) & 1].v;  // nobody touches it before this round ends
      if (next.load(std::memory_order_relaxed)) next.store(false, std::memory_order_relaxed);  // keep the line shared
      publish(gen_, gen + 1, sleepers_);
    } else {
      spin_then_wait(gen_, gen, sleepers_);
    }
    return flag.load(std::memory_order_relaxed);
  }

 private:
  struct alignas(64) Flag {
    std::atomic<bool> v{false};
  };
  unsigned const n_;
  alignas(64) std::atomic<std::uint32_t> count_{0};
  alignas(64) std::atomic<std::uint32_t> gen_{0};
  alignas(64) std::atomic<std::uint32_t> sleepers_{0};
  Flag failed_[2];
};

}  // namespace tilebsp::exec::detail
