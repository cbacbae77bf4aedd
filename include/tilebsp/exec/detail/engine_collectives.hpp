// Collectives at run time: all-reduce and friends among the replicas of this process (collective_local) and
// across processes through the Communicator (collective_processes). Part of the Engine's definitions
// (exec/engine_impl.hpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/exec/detail/engine_core.hpp>
#include <tilebsp/program/all_reduce.hpp>

#include <span>
#include <vector>

namespace tilebsp {

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
        schedule::reduce_in_order(t.element_type(), op, src.data(), local_, at_l(0), static_cast<std::size_t>(m));
        for (std::size_t l = 1; l < local_; ++l) std::memcpy(at_l(l), at_l(0), static_cast<std::size_t>(m) * eb);
      } else {
        std::size_t const span = static_cast<std::size_t>(m) * eb;
        buf.resize(span * local_);
        for (std::size_t l = 0; l < local_; ++l) {
          exec::detail::run_copy(exec::detail::piece_copy(at_l(l), r.stride, m, buf.data() + l * span, eb, true));
          src[l] = buf.data() + l * span;
        }
        schedule::reduce_in_order(t.element_type(), op, src.data(), local_, buf.data(), static_cast<std::size_t>(m));
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
  schedule::reduce_in_order(t.element_type(), static_cast<CollectiveOp>(c.op), src.data(), src.size(),
                                   part.data(), len(me));
  std::vector<std::byte> result(n * eb);
  for (std::size_t q = 0; q < P; ++q) {
    send[q] = std::span<std::byte const>(part.data(), len(me) * eb);
    recv[q] = std::span<std::byte>(result.data() + lo(q) * eb, len(q) * eb);
  }
  comm_->exchange(send, recv);
  for (std::size_t l = 0; l < local_; ++l) copy_tensor(l, 0, static_cast<std::int64_t>(n), result.data(), false);
}

}  // namespace tilebsp
