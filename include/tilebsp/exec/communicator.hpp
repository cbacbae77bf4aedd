// Communicator: the processes that share the replicas of one executable (EngineOptions::communicator). tilebsp
// holds no network code: an implementation wraps a distributed engine (<tilebsp/mpi.hpp>: MPI).
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace tilebsp {

/// A group of `size()` processes, this one being `rank()`. Each process runs an Engine on the same executable
/// and runs replicas [rank × R / size, (rank + 1) × R / size). The Engine calls the members from one thread at a
/// time, in the same order on every process (the program's collectives in program order).
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::size_t rank() const = 0;
  virtual std::size_t size() const = 0;
  /// Sends send[p] to process p and receives recv[p] from process p, for every p (this process's own block is
  /// copied); the sizes of the blocks were agreed beforehand, so that send[p] on process q is as long as recv[q]
  /// on process p. Throws replica_error, naming the process, when another process failed (fail()), left before
  /// taking part, sent a block of another size or did not answer in time.
  virtual void exchange(std::span<std::span<std::byte const> const> send, std::span<std::span<std::byte> const> recv) = 0;
  /// Tells the other processes that this one failed with `what` and will not take part in further exchanges: those
  /// waiting in one, or reaching one, throw replica_error naming this process and quoting `what`. Best effort, in
  /// bounded time; never throws.
  virtual void fail(std::string const& what) noexcept = 0;
};

}  // namespace tilebsp
