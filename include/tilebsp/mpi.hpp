// tilebsp::mpi: replicas across processes and machines, through MPI (Open MPI and other MPI-3 libraries). Link the
// CMake target tilebsp::mpi (found when MPI is installed); nothing else in tilebsp needs MPI.
//
//   tilebsp::mpi::Session mpi(&argc, &argv);                     // MPI_Init_thread ... MPI_Finalize
//   auto comm = std::make_shared<tilebsp::mpi::Communicator>();  // MPI_COMM_WORLD: one process per rank
//   tilebsp::Engine engine(tilebsp::compile(g, {.replicas = comm->size()}, prog), {.communicator = comm});
//
// Each rank runs its share of the replicas; collectives exchange blocks point to point (reduce-scatter, then
// all-gather, docs/08-replication.md) and every element is reduced by one rank in replica order, so results are
// bitwise those of the same replicas in one process. A rank that fails tells the others (Communicator::fail);
// one that leaves early tells them in its destructor; one that stops answering is given up after a timeout.
#pragma once

#include <tilebsp/core/error.hpp>
#include <tilebsp/exec/communicator.hpp>

#include <mpi.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace tilebsp::mpi {

/// Whether an MPI launcher (mpirun, mpiexec, srun) started this process: a program can then choose between its
/// in-process replicas and MPI without initialising MPI when it runs alone.
inline bool launched() noexcept {
  for (char const* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

/// MPI for the lifetime of the object: MPI_Init_thread (calls serialised: the Engine makes them from the thread that
/// calls run()) unless MPI is already initialised, and MPI_Finalize in the destructor when it initialised it.
class Session {
 public:
  Session(int* argc, char*** argv) {
    int done = 0;
    MPI_Initialized(&done);
    if (done) return;
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
      throw replica_error("mpi: MPI_Init_thread failed");
    owner_ = true;
    if (provided < MPI_THREAD_SERIALIZED) {
      MPI_Finalize();
      throw replica_error("mpi: the MPI library does not support MPI_THREAD_SERIALIZED");
    }
  }
  ~Session() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owner_ && !finalized) MPI_Finalize();
  }
  Session(Session const&) = delete;
  Session& operator=(Session const&) = delete;

 private:
  bool owner_ = false;
};

/// Options of a Communicator.
struct Options {
  /// How long an exchange waits for another process before it gives up with replica_error (a process that hangs
  /// or a machine that went away). Generous: a peer may still be compiling or running a long step.
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
};

/// A tilebsp::Communicator over an MPI communicator (duplicated: its messages never meet the application's).
class Communicator final : public tilebsp::Communicator {
 public:
  explicit Communicator(MPI_Comm comm = MPI_COMM_WORLD, Options options = {}) : opt_(options) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) throw replica_error("mpi: MPI is not initialised (create a tilebsp::mpi::Session first)");
    check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    int r = 0, n = 0;
    MPI_Comm_rank(comm_, &r);
    MPI_Comm_size(comm_, &n);
    rank_ = static_cast<std::size_t>(r);
    size_ = static_cast<std::size_t>(n);
    left_after_.assign(size_, never);
  }
  /// Tells the others that this process leaves after the exchanges it made: one waiting for a later exchange
  /// then fails at once rather than after the timeout.
  ~Communicator() override {
    if (!failed_) notify(left, "left (its tilebsp::mpi::Communicator was destroyed)");
  }
  Communicator(Communicator const&) = delete;
  Communicator& operator=(Communicator const&) = delete;

  std::size_t rank() const override { return rank_; }
  std::size_t size() const override { return size_; }
  MPI_Comm comm() const noexcept { return comm_; }
  /// Exchanges made so far.
  std::uint64_t exchanges() const noexcept { return count_; }

  void exchange(std::span<std::span<std::byte const> const> send, std::span<std::span<std::byte> const> recv) override {
    if (send.size() != size_ || recv.size() != size_)
      throw error("mpi: exchange needs one block per process (" + std::to_string(size_) + ")");
    poll_notices();
    // Per peer two messages: a header (exchange number, payload bytes), checked first, and the payload itself,
    // straight from and into the caller's blocks. Messages between two ranks on one tag arrive in order.
    std::vector<std::array<std::uint64_t, 2>> hin(size_), hout(size_);
    std::vector<MPI_Request> req(4 * size_, MPI_REQUEST_NULL);  // per peer: header in, payload in, header out, payload out
    for (std::size_t p = 0; p < size_; ++p) {
      if (p == rank_) {
        if (send[p].size() != recv[p].size()) throw error("mpi: exchange: this process's own blocks differ in size");
        if (!send[p].empty()) std::memcpy(recv[p].data(), send[p].data(), send[p].size());
        continue;
      }
      int const peer = static_cast<int>(p);
      hout[p] = {count_, send[p].size()};
      check(MPI_Irecv(hin[p].data(), 2, MPI_UINT64_T, peer, header_tag, comm_, &req[4 * p]), "MPI_Irecv");
      check(MPI_Irecv(recv[p].data(), static_cast<int>(recv[p].size()), MPI_BYTE, peer, data_tag, comm_, &req[4 * p + 1]),
            "MPI_Irecv");
      check(MPI_Isend(hout[p].data(), 2, MPI_UINT64_T, peer, header_tag, comm_, &req[4 * p + 2]), "MPI_Isend");
      check(MPI_Isend(send[p].data(), static_cast<int>(send[p].size()), MPI_BYTE, peer, data_tag, comm_, &req[4 * p + 3]),
            "MPI_Isend");
    }
    auto const begin = std::chrono::steady_clock::now();
    auto const deadline = begin + opt_.timeout;
    auto const abandon = [&] {  // receives are cancelled; sends finish (or not) on their own
      for (std::size_t i = 0; i < req.size(); ++i)
        if (req[i] != MPI_REQUEST_NULL) {
          if (i % 4 < 2) MPI_Cancel(&req[i]);
          MPI_Request_free(&req[i]);
        }
    };
    std::vector<int> got(size_, 0);  // 1: header checked, 2: payload in too
    for (;;) {
      bool all = true;
      for (std::size_t p = 0; p < size_; ++p) {
        if (p == rank_ || got[p] == 2) continue;
        int flag = 0;
        MPI_Status st;
        if (got[p] == 0) {
          MPI_Test(&req[4 * p], &flag, MPI_STATUS_IGNORE);
          if (flag) {
            if (hin[p][0] != count_ || hin[p][1] != recv[p].size()) {
              abandon();
              throw replica_error("mpi: rank " + std::to_string(p) + " is at exchange #" + std::to_string(hin[p][0]) +
                                  " with " + std::to_string(hin[p][1]) + " bytes, this rank (" + std::to_string(rank_) +
                                  ") at #" + std::to_string(count_) + " expecting " + std::to_string(recv[p].size()) +
                                  ": the ranks' programs diverged");
            }
            got[p] = 1;
          }
        }
        if (got[p] == 1) {
          if (MPI_Test(&req[4 * p + 1], &flag, &st) != MPI_SUCCESS) {
            abandon();
            throw replica_error("mpi: receiving from rank " + std::to_string(p) + " failed at exchange #" +
                                std::to_string(count_));
          }
          if (flag) got[p] = 2;
        }
        if (got[p] != 2) all = false;
      }
      if (all) break;
      try {
        poll_notices();
      } catch (...) {
        abandon();
        throw;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        std::string late;
        for (std::size_t p = 0; p < size_; ++p)
          if (p != rank_ && got[p] != 2) late += (late.empty() ? "" : ", ") + std::to_string(p);
        abandon();
        char secs[32];
        std::snprintf(secs, sizeof secs, "%g", std::chrono::duration<double>(opt_.timeout).count());
        throw replica_error("mpi: rank(s) " + late + " did not answer within " + secs + " s at exchange #" +
                            std::to_string(count_) + " (a process hangs or was lost)");
      }
      // Poll (yielding) for the first milliseconds: a peer a step behind arrives soon, and a sleep would cost each
      // exchange the scheduler's granularity; then sleep between polls.
      if (std::chrono::steady_clock::now() - begin < std::chrono::milliseconds(20)) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    MPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE);
    ++count_;
  }

  void fail(std::string const& what) noexcept override {
    if (failed_) return;
    failed_ = true;
    notify(failed, what);
  }

 private:
  static constexpr int data_tag = 1, notice_tag = 2, header_tag = 3;
  static constexpr std::size_t header = 16;  ///< of a notice: its kind, the exchanges made
  static constexpr std::uint64_t failed = 1, left = 2, never = ~std::uint64_t{0};

  static void check(int rc, char const* what) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw replica_error(std::string("mpi: ") + what + " failed: " + std::string(text, static_cast<std::size_t>(len)));
  }

  /// Sends a notice (kind, exchanges made, text) to every other process; waits for the sends a bounded time.
  void notify(std::uint64_t kind, std::string const& what) noexcept {
    try {
      int fin = 0;
      MPI_Finalized(&fin);
      if (fin) return;
      std::vector<std::byte> msg(header + what.size());
      std::uint64_t const h[2]{kind, count_};
      std::memcpy(msg.data(), h, header);
      std::memcpy(msg.data() + header, what.data(), what.size());
      std::vector<MPI_Request> req;
      for (std::size_t p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        MPI_Request r = MPI_REQUEST_NULL;
        if (MPI_Isend(msg.data(), static_cast<int>(msg.size()), MPI_BYTE, static_cast<int>(p), notice_tag, comm_, &r) ==
            MPI_SUCCESS)
          req.push_back(r);
      }
      auto const until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      int done = 0;
      while (!done && std::chrono::steady_clock::now() < until) {
        MPI_Testall(static_cast<int>(req.size()), req.data(), &done, MPI_STATUSES_IGNORE);
        if (!done) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      for (auto& r : req)
        if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    } catch (...) {
    }
  }

  /// Reads the notices that arrived; throws replica_error when one means this exchange cannot complete.
  void poll_notices() {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, notice_tag, comm_, &flag, &st);
      if (!flag) break;
      int bytes = 0;
      MPI_Get_count(&st, MPI_BYTE, &bytes);
      std::vector<std::byte> msg(static_cast<std::size_t>(bytes));
      MPI_Recv(msg.data(), bytes, MPI_BYTE, st.MPI_SOURCE, notice_tag, comm_, MPI_STATUS_IGNORE);
      std::uint64_t h[2]{};
      if (msg.size() >= header) std::memcpy(h, msg.data(), header);
      std::string const text(reinterpret_cast<char const*>(msg.data()) + std::min(msg.size(), header),
                             msg.size() - std::min(msg.size(), header));
      auto const src = static_cast<std::size_t>(st.MPI_SOURCE);
      if (h[0] == failed) {
        failed_ = true;  // the run is over: no need to tell the others this process left
        throw replica_error("mpi: rank " + std::to_string(src) + " failed: " + text);
      }
      left_after_[src] = h[1];
      left_text_ = text;
    }
    for (std::size_t p = 0; p < size_; ++p)
      if (left_after_[p] != never && left_after_[p] <= count_)
        throw replica_error("mpi: rank " + std::to_string(p) + " " + left_text_ + " after " +
                            std::to_string(left_after_[p]) + " exchange(s); this rank (" + std::to_string(rank_) +
                            ") needs it for exchange #" + std::to_string(count_));
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  Options opt_;
  std::size_t rank_ = 0, size_ = 1;
  std::uint64_t count_ = 0;
  bool failed_ = false;
  std::vector<std::uint64_t> left_after_;
  std::string left_text_;
};

}  // namespace tilebsp::mpi
