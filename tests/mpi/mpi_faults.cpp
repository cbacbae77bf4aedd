// Faults across ranks (run by check_faults.cmake under mpirun -np 2): rank 1 misbehaves in the way argv[1] names
// and rank 0 must fail with a clear error in bounded time, never hang. Each rank prints "rank R: <outcome>".
#include <tilebsp/mpi.hpp>
#include <tilebsp/tilebsp.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

namespace tb = tilebsp;

int main(int argc, char** argv) {
  tb::mpi::Session session(&argc, &argv);
  std::string const mode = argc > 1 ? argv[1] : "";
  int rank = -1;
  try {
    auto comm = std::make_shared<tb::mpi::Communicator>(MPI_COMM_WORLD, tb::mpi::Options{std::chrono::seconds(3)});
    rank = static_cast<int>(comm->rank());
    bool const bad = comm->rank() == 1;
    tb::Graph g(tb::targets::tiny(2));
    auto x = g.add_variable<float>({8}, "x");
    tb::map_linearly(g, x);
    tb::Sequence prog;
    prog.add(tb::host([&] {
      if (bad && mode == "throw") throw std::runtime_error("injected fault in a host callback");
      if (bad && mode == "hang") std::this_thread::sleep_for(std::chrono::seconds(6));
    }));
    tb::ops::cross_replica_sum_in_place(prog, x, "x");
    if (bad && mode == "differ") tb::ops::map_in_place(g, prog, tb::expr::_1 * 2.0f, x);
    tb::Engine e(tb::compile(g, {.replicas = 2}, prog), {.host_threads = 1, .communicator = comm});
    if (bad && mode == "exit") {
      std::printf("rank 1: leaving early\n");
      return 0;  // the communicator's destructor tells rank 0
    }
    e.write(x, std::vector<float>(8, 1.0f));
    e.run();
    std::printf("rank %d: ok %g\n", rank, static_cast<double>(e.read<float>(x, comm->rank())[0]));
    return 0;
  } catch (tb::replica_error const& err) {
    std::printf("rank %d: replica_error: %s\n", rank, err.what());
  } catch (std::exception const& err) {
    std::printf("rank %d: error: %s\n", rank, err.what());
  }
  std::fflush(stdout);
  return 1;
}
