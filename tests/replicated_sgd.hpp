// A data-parallel SGD step on a tiny machine, for the replica tests in one process (tests/exec) and over MPI
// (tests/mpi): w -= 0.1 x mean over the replicas of (w * x - 0.5 x), every replica its own x; and a half-precision
// tensor h summed over the replicas alongside.
#pragma once

#include "helpers.hpp"

#include <memory>
#include <utility>
#include <vector>

namespace tbt {

struct ReplicatedSgd {
  std::size_t n;
  tb::Graph g{tb::targets::tiny(4)};
  tb::Tensor w, x, h;
  tb::Fifo in;
  tb::Sequence step;

  explicit ReplicatedSgd(std::size_t elements) : n(elements) {
    using tb::expr::_1;
    using tb::expr::_2;
    w = g.add_variable<float>({n}, "w");
    x = g.add_variable<float>({n}, "x");
    h = g.add_variable<tb::half>({37}, "h");
    in = g.add_host_to_device_fifo<float>("x_in", n);
    for (auto const& t : {w, x, h}) tb::map_linearly(g, t);
    step.add(tb::stream_in(in, x));
    tb::Tensor const grad = tb::ops::map(g, step, _1 * _2 - _2 * 0.5f, w, x);
    tb::ops::cross_replica_mean_in_place(step, grad, "grad");
    tb::ops::map_in_place(g, step, _1 - _2 * 0.1f, w, grad);
    tb::ops::cross_replica_sum_in_place(step, h, "h");
  }
  /// Replica r's input at step k, and its initial h.
  std::vector<float> input(std::size_t r, std::size_t k) const {
    return values<float>(n, false, static_cast<unsigned>(100 * r + k + 1));
  }
  static std::vector<tb::half> initial_h(std::size_t r) { return values<tb::half>(37, false, static_cast<unsigned>(50 + r)); }
  std::vector<float> initial_w() const { return values<float>(n, false, 7); }

  /// Every replica's w and h after `steps` steps (those another process runs: empty), by replica.
  std::vector<std::pair<std::vector<float>, std::vector<tb::half>>> run(std::size_t replicas, std::size_t threads,
                                                                         std::size_t steps,
                                                                         std::shared_ptr<tb::Communicator> comm = {}) {
    tb::Engine e(tb::compile(g, {.replicas = replicas}, tb::repeat(steps, step)),
                 {.host_threads = threads, .communicator = std::move(comm)});
    e.write(w, initial_w());  // every replica
    for (std::size_t r = e.first_replica(); r < e.first_replica() + e.local_replicas(); ++r) {
      e.write(h, r, initial_h(r));
      e.connect<float>(in, r, [this, r, k = std::size_t{0}](std::span<float> b) mutable {
        auto const v = input(r, k++);
        std::copy(v.begin(), v.end(), b.begin());
      });
    }
    e.run();
    std::vector<std::pair<std::vector<float>, std::vector<tb::half>>> out(replicas);
    for (std::size_t r = e.first_replica(); r < e.first_replica() + e.local_replicas(); ++r)
      out[r] = {e.read<float>(w, r), e.read<tb::half>(h, r)};
    return out;
  }
};

}  // namespace tbt
