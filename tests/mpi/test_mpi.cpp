// Replicas across processes (run under mpirun -np 2): the MPI backend gives bitwise the results of the same
// replicas in one process, one replica per rank or several; ranks with different executables are refused.
#define DOCTEST_CONFIG_IMPLEMENT
#include "helpers.hpp"
#include "replicated_sgd.hpp"

#include <tilebsp/mpi.hpp>

#include <doctest/doctest.h>

#include <memory>
#include <vector>

namespace tb = tilebsp;
using tb::expr::_1;
using tb::expr::_2;

namespace {
std::shared_ptr<tb::mpi::Communicator> world() { return std::make_shared<tb::mpi::Communicator>(); }
}  // namespace

TEST_CASE("mpi: replicas across ranks are bitwise the in-process replicas") {
  auto comm = world();
  REQUIRE(comm->size() == 2);
  tbt::ReplicatedSgd m(1000);
  for (std::size_t replicas : {2u, 4u}) {  // one replica per rank, then two per rank
    CAPTURE(replicas);
    auto const alone = m.run(replicas, 2, 3);
    auto const shared = m.run(replicas, 1, 3, comm);
    std::size_t const per = replicas / 2, first = comm->rank() * per;
    for (std::size_t r = first; r < first + per; ++r) {
      CAPTURE(r);
      CHECK(shared[r].first == alone[r].first);
      CHECK(std::memcmp(shared[r].second.data(), alone[r].second.data(), 37 * sizeof(tb::half)) == 0);
    }
    CHECK(alone[0].first == alone[replicas - 1].first);  // the update kept the replicas together
  }
}

TEST_CASE("mpi: the engine knows its share of the replicas; others' are an index_error") {
  auto comm = world();
  tbt::ReplicatedSgd m(1000);
  tb::Engine e(tb::compile(m.g, {.replicas = 4}, m.step), {.host_threads = 1, .communicator = comm});
  CHECK(e.replicas() == 4);
  CHECK(e.local_replicas() == 2);
  CHECK(e.first_replica() == 2 * comm->rank());
  std::size_t const other = comm->rank() == 0 ? 2 : 0;
  CHECK_THROWS_WITH_AS(e.read<float>(m.w, other),
                       ("replica: replica " + std::to_string(other) + " runs in process " + std::to_string(other / 2) +
                        ", not in this one (process " + std::to_string(comm->rank()) + " runs replicas " +
                        std::to_string(2 * comm->rank()) + " to " + std::to_string(2 * comm->rank() + 1) + ")")
                           .c_str(),
                       tb::index_error);
  CHECK_THROWS_WITH_AS(tb::Engine(tb::compile(m.g, {.replicas = 3}, m.step), {.communicator = comm}),
                       "engine: the executable has 3 replica(s), which 2 processes cannot share evenly "
                       "(CompileOptions::replicas must be a multiple of the number of processes)",
                       tb::replica_error);
  auto const p = e.profile();
  CHECK(p.first_replica == 2 * comm->rank());
  CHECK(p.local_replicas == 2);
}

TEST_CASE("mpi: ranks whose executables differ are refused at startup, naming the rank") {
  auto comm = world();
  tbt::ReplicatedSgd m(1000);
  tb::Sequence more = m.step;
  if (comm->rank() == 1) tb::ops::map_in_place(m.g, more, _1 * 2.0f, m.w);  // rank 1 has one more step
  CHECK_THROWS_WITH_AS(tb::Engine(tb::compile(m.g, {.replicas = 2}, more), {.communicator = comm}),
                       "engine: the executable of rank(s) 1 differs from rank 0's (another graph, programs, target "
                       "or replica count): every process must compile the same program",
                       tb::replica_error);
}

TEST_CASE("mpi: ranks whose graphs were built by other kernels are refused at startup, naming the rank") {
  auto comm = world();
  tbt::ReplicatedSgd m(1000);
  tb::Sequence more = m.step;
  {
    // What another TILEBSP_ISA gives: an operator built by other kernels (here a scope that says so).
    tb::OperatorScope const scope(m.g, "scale", "scale", comm->rank() == 1 ? "sse9" : "sse8");
    tb::ops::map_in_place(m.g, more, _1 * 2.0f, m.w);
  }
  std::string const kernels = tb::core::detail::operator_kernels(m.g.impl());
  CHECK_THROWS_WITH_AS(tb::Engine(tb::compile(m.g, {.replicas = 2}, more), {.communicator = comm}),
                       ("engine: rank(s) 1 built the graph with other kernels than rank 0 (this process: " + kernels +
                        "): every process must run the same instruction set; set TILEBSP_ISA to a level all their "
                        "CPUs run (docs/11)")
                           .c_str(),
                       tb::replica_error);
}

int main(int argc, char** argv) {
  tb::mpi::Session session(&argc, &argv);
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
