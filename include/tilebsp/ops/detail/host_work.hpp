// Plumbing of the operators' host tasks: a first-come queue of work units, caches of operands only the host
// writes, and the HostKernel of an operator state.
#pragma once

#include <tilebsp/core/tensor.hpp>
#include <tilebsp/program/host_task.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace tilebsp::ops::detail {

/// Hands the units 0..count-1 of one run of a host task to its threads. Thread t of T first takes the units of
/// its own share, [t count / T, (t + 1) count / T), in order; then, first come first served, what is left of the
/// others' shares. Units are numbered so that a share is a block of images or rows of the result: a thread then
/// reads what it wrote in the layer before from its own caches rather than from another core's (where the two
/// cores are far apart, a layer that handed units out in any order ran slower on two threads than on one); and a
/// thread that the machine runs slower (another process, a hypervisor) still takes fewer units instead of holding
/// the others at the barrier. Use it only where a unit's values do not depend on the thread that computes it; then
/// results do not depend on the division either. Every thread of the run calls run() once; the last to finish
/// resets the queue for the next run (before the span's barrier, which publishes the reset), also when a unit
/// throws.
class UnitQueue {
 public:
  /// For runs on `threads` threads (a run on another number of threads hands every unit out first come).
  explicit UnitQueue(unsigned threads = 1) : shares_(std::max(1u, threads)), taken_(new Counter[shares_]) {}

  template <class F>
  void run(std::size_t count, unsigned t, unsigned threads, F&& unit) {
    struct Finish {
      UnitQueue& q;
      unsigned threads;
      ~Finish() {
        if (q.finished_.fetch_add(1, std::memory_order_acq_rel) + 1 == threads) {
          for (unsigned s = 0; s < q.shares_; ++s) q.taken_[s].n.store(0, std::memory_order_relaxed);
          q.finished_.store(0, std::memory_order_relaxed);
        }
      }
    } const finish{*this, threads};
    unsigned const shares = threads == shares_ ? shares_ : 1;
    for (unsigned k = 0; k < shares; ++k) {
      unsigned const s = (t + k) % shares;
      std::size_t const b = count * s / shares, n = count * (s + 1) / shares - b;
      for (std::size_t u; (u = taken_[s].n.fetch_add(1, std::memory_order_relaxed)) < n;) unit(b + u);
    }
  }

 private:
  struct alignas(64) Counter {
    std::atomic<std::size_t> n{0};  ///< units of the share taken (or tried: past its size once all are)
  };
  unsigned shares_;
  std::unique_ptr<Counter[]> taken_;
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

/// The elements a tensor views as a VarRange (in the variable's element order): when it is a strided view of one
/// variable that covers a range of it exactly, each element once (its dimensions in any order), or a row series of
/// one (Tensor::row_series: rows of consecutive elements at one pitch, a channel slice of a channels-last tensor).
/// None otherwise.
inline std::optional<VarRange> row_range(Tensor const& t) {
  auto const a = t.affine();
  if (!a) return std::nullopt;
  auto const shape = t.shape();
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (stride, extent) of the dimensions that vary
  std::int64_t count = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    count *= static_cast<std::int64_t>(shape[d]);
    if (shape[d] > 1) dims.emplace_back(a->strides[d], static_cast<std::int64_t>(shape[d]));
  }
  std::sort(dims.begin(), dims.end());
  std::int64_t inner = 1;
  for (auto const& [stride, extent] : dims) {
    if (stride != inner) {
      if (core::detail::RowSeries rs; t.row_series(rs)) return VarRange{rs.var, rs.start, count, rs.len, rs.step};
      return std::nullopt;
    }
    inner *= extent;
  }
  return VarRange{a->var, a->start, count};
}

/// Hands a producer's finished parts to its epilogue as runs of consecutive elements of its range (VarRange), joining
/// adjacent runs.
class EpilogueRuns {
 public:
  /// `first`: the address of the range's first element.
  EpilogueRuns(Epilogue const* epilogue, void const* first, std::size_t element_bytes, VarRange const& range)
      : f_(epilogue), first_(static_cast<std::byte const*>(first)), bytes_(static_cast<std::ptrdiff_t>(element_bytes)),
        row_(range.row), pitch_(range.pitch) {}
  /// Elements of the range at addresses [p, p + n elements), which lie within one of its rows.
  void add(void const* p, std::int64_t n) {
    std::int64_t b = (static_cast<std::byte const*>(p) - first_) / bytes_;
    if (row_ > 0) b = b / pitch_ * row_ + b % pitch_;
    if (b != end_) flush();
    if (end_ == begin_) begin_ = b, end_ = b;
    end_ += n;
  }
  /// Runs the epilogue on the runs added so far.
  void flush() {
    if (end_ > begin_) (*f_)(begin_, end_);
    begin_ = end_ = -1;
  }

 private:
  Epilogue const* f_;
  std::byte const* first_;
  std::ptrdiff_t bytes_;
  std::int64_t row_, pitch_;
  std::int64_t begin_ = -1, end_ = -1;
};

/// The HostKernel of an operator whose host implementation is `State`: `state->bind(HostBinding const&)` returns
/// what `state->run(bound, thread, threads)` needs. A null state gives an empty kernel (the body runs).
/// A State with a `writes` range (std::optional<VarRange>), run(bound, thread, threads, Epilogue const*) and
/// fuses(HostBinding const&) (whether an epilogue pays in a run on that many threads) is a producer; one with an
/// `elementwise` range and range(bound, begin, end) an elementwise span (HostKernel).
template <class State>
HostKernel host_kernel_of(std::shared_ptr<State const> const& state) {
  if (!state) return {};
  HostKernel k;
  k.bind = [s = state](HostBinding const& at) -> HostTask {
    auto const bound = s->bind(at);
    return [s, bound](unsigned t, unsigned threads) { s->run(bound, t, threads); };
  };
  if constexpr (requires { state->writes; }) {
    if (state->writes) {
      k.writes = state->writes;
      k.bind_with = [s = state](HostBinding const& at, Epilogue epilogue, std::optional<ColumnOp> const& op) -> HostTask {
        // A producer that can apply the span as a post-op (post_op: a bound simd::PostOp, or none) needs no
        // epilogue, whatever its blocks.
        if constexpr (requires { s->post_op(at, *op); }) {
          if (op)
            if (auto const post = s->post_op(at, *op))
              return [s, bound = s->bind(at), post = *post](unsigned t, unsigned threads) { s->run(bound, t, threads, nullptr, &post); };
        }
        if (!s->fuses(at)) return {};
        auto const bound = s->bind(at);
        return [s, bound, epilogue = std::move(epilogue)](unsigned t, unsigned threads) { s->run(bound, t, threads, &epilogue); };
      };
    }
  }
  if constexpr (requires { state->elementwise; }) {
    if (state->elementwise) {
      k.elementwise = state->elementwise;
      k.bind_elements = [s = state](HostBinding const& at) -> Epilogue {
        auto const bound = s->bind(at);
        return [s, bound](std::int64_t begin, std::int64_t end) { s->range(bound, begin, end); };
      };
      if constexpr (requires { state->column_op; }) k.column_op = state->column_op;
    }
  }
  return k;
}

}  // namespace tilebsp::ops::detail
