// Team: a fixed pool of host threads that run one job at a time in lockstep with the calling thread.
#pragma once

#include <tilebsp/exec/detail/barrier.hpp>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace tilebsp::exec::detail {

/// Thread 0 is the caller of run(); threads 1..n-1 are owned by the team and park when idle.
class Team {
 public:
  explicit Team(unsigned n) : n_(n ? n : 1), end_(n_) {
    for (unsigned t = 1; t < n_; ++t) threads_.emplace_back([this, t] { loop(t); });
  }
  ~Team() {
    stop_ = true;
    publish(epoch_, epoch_.load() + 1, sleepers_);
    for (auto& t : threads_) t.join();
  }
  Team(Team const&) = delete;
  Team& operator=(Team const&) = delete;

  unsigned size() const noexcept { return n_; }

  /// Runs job(tid) on every thread and returns when all are done. `job` must not throw.
  template <class F>
  void run(F& job) {
    job_ = [](void* f, unsigned tid) { (*static_cast<F*>(f))(tid); };
    arg_ = &job;
    publish(epoch_, epoch_.load(std::memory_order_relaxed) + 1, sleepers_);
    job(0);
    end_.arrive_and_wait();
  }

 private:
  void loop(unsigned tid) {
    std::uint32_t seen = 0;
    for (;;) {
      spin_then_wait(epoch_, seen, sleepers_);
      seen = epoch_.load(std::memory_order_acquire);
      if (stop_) return;
      job_(arg_, tid);
      end_.arrive_and_wait();
    }
  }

  unsigned const n_;
  Barrier end_;
  std::atomic<bool> stop_{false};
  alignas(64) std::atomic<std::uint32_t> epoch_{0};
  alignas(64) std::atomic<std::uint32_t> sleepers_{0};
  void (*job_)(void*, unsigned) = nullptr;
  void* arg_ = nullptr;
  std::vector<std::thread> threads_;
};

}  // namespace tilebsp::exec::detail
