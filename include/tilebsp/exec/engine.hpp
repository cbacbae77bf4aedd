// Engine: binds an Executable to host memory and runs its programs on a team of host threads.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/exec/communicator.hpp>
#include <tilebsp/exec/profile.hpp>
#include <tilebsp/program/compile.hpp>
#include <tilebsp/program/host_context.hpp>

#include <concepts>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

namespace tilebsp {

/// Options of an Engine.
struct EngineOptions {
  /// Host threads executing the BSP program (0: all hardware threads). Results do not depend on it.
  std::size_t host_threads = 0;
  /// Measure host time per schedule step (adds two clock reads per step on thread 0).
  bool profiling = false;
  /// Run the host task of each host path (host_path(): an operator's faster host implementation) in place of its
  /// body (same results, bitwise). Off: every body runs, vertex by vertex, for checking or debugging a kernel.
  bool host_kernels = true;
  /// Where a host path that writes a range (a convolution, a matmul) is followed directly by one that computes that
  /// range element by element (its bias and activation map), run the second on each part of the range as the
  /// first finishes it, while the part is in the cache (HostKernel::writes / elementwise). The same values.
  bool fuse_host_paths = true;
  /// Give variables whose live ranges do not overlap (compile's liveness: live part of the time, every program that
  /// uses one writes it in full first) the same host memory, as Poplar reuses a tile's memory: a network's
  /// activations then stay in the caches instead of each writing memory of its own. Such a variable can be read
  /// between runs only where the last program run leaves it live at its end (its outputs), and not written (an
  /// `error` says so); host callbacks access anything that is live. Not for schedules with parallel branches
  /// (pipelines), which share nothing. The same values either way.
  bool reuse_host_memory = false;
  /// The processes sharing a replicated executable's replicas (e.g. tilebsp::mpi::Communicator): this engine runs
  /// its share and the collectives go through it. None: this engine runs every replica.
  std::shared_ptr<Communicator> communicator{};
};

/// How Engine::connect attaches a callback to a FIFO.
struct ConnectOptions {
  /// Infeeds only: call the callback for transfer k + 1 on a helper thread as soon as transfer k has been copied
  /// in, so that the host prepares the next batch while the device computes (Poplar's stream prefetch). The
  /// callback then runs concurrently with the program, never with itself and never after Engine::run returns
  /// (run waits for a prefetch in flight, whose data the next run's first transfer takes), so it is called once
  /// more than the program consumes. An exception it throws surfaces at the transfer that needed its data.
  bool prefetch = false;
};

namespace exec::detail {
class EngineCore;
}

/// Runs an Executable. Owns host memory for every variable, the vertex objects, and a team of host threads.
/// Also a HostContext: engine.write(t, values) / engine.read<T>(t) between runs.
class Engine : public HostContext {
 public:
  explicit Engine(Executable exe, EngineOptions opt = {});
  TILEBSP_INLINE_VIRTUAL ~Engine() override;
  Engine(Engine const&) = delete;
  Engine& operator=(Engine const&) = delete;

  std::size_t host_threads() const noexcept;
  Executable const& executable() const noexcept;

  /// Replicas of the executable (CompileOptions::replicas), and those this engine runs: first_replica() ..
  /// first_replica() + local_replicas() - 1 (all of them without a communicator).
  std::size_t replicas() const noexcept;
  std::size_t first_replica() const noexcept;
  std::size_t local_replicas() const noexcept;
  /// Replica r's tensors: engine.replica(r).read<float>(t). Throws index_error when r is out of range or run by
  /// another process. (engine.read(t) itself needs one replica: with several it throws replica_error; engine.write(t,
  /// values) writes every replica this engine runs.)
  HostContext& replica(std::size_t r);
  HostContext const& replica(std::size_t r) const;
  using HostContext::replica;  // engine.replica() without an index: 0, as any context that is not one replica's
  using HostContext::read;
  using HostContext::write;
  template <ElementLike T>
  std::vector<T> read(Tensor const& t, std::size_t replica_index) const {
    return replica(replica_index).template read<T>(t);
  }
  template <ElementLike T>
  void write(Tensor const& t, std::size_t replica_index, std::vector<T> const& values) {
    replica(replica_index).write(t, values);
  }
  template <ElementLike T>
  void write(Tensor const& t, std::size_t replica_index, std::span<T const> values) {
    replica(replica_index).write(t, values);
  }

  /// Runs program `program` (the position of the program in compile()). Rethrows the first exception a
  /// vertex or host callback threw; throws stream_error when a FIFO the program uses is not connected.
  void run(std::size_t program = 0);

  /// Connects a FIFO to host memory used as a circular buffer (or consumed once, when circular is false).
  /// Infeeds read it; outfeeds write it. Its size must be a positive multiple of the FIFO's transfer size. With
  /// several replicas, they share it: each stream step moves one transfer per replica, in replica order.
  template <ElementLike T>
  void connect(Fifo const& f, std::span<T> buffer, bool circular = true) {
    connect(f, all_replicas, buffer, circular);
  }
  template <ElementLike T>
  void connect(Fifo const& f, std::span<T const> buffer, bool circular = true) {
    connect(f, all_replicas, buffer, circular);
  }
  /// The same for one replica's stream (index_error when out of range or run by another process); connecting
  /// replica by replica replaces a shared connection, and the other way round.
  template <ElementLike T>
  void connect(Fifo const& f, std::size_t replica_index, std::span<T> buffer, bool circular = true) {
    auto* data = reinterpret_cast<std::byte*>(const_cast<std::remove_const_t<T>*>(buffer.data()));
    connect_buffer(f, replica_index, element_type_v<T>, data, buffer.size(), buffer.size_bytes(), circular, false);
  }
  template <ElementLike T>
  void connect(Fifo const& f, std::size_t replica_index, std::span<T const> buffer, bool circular = true) {
    connect_buffer(f, replica_index, element_type_v<T>, reinterpret_cast<std::byte*>(const_cast<T*>(buffer.data())),
                   buffer.size(), buffer.size_bytes(), circular, true);
  }
  template <ElementLike T>
  void connect(Fifo const& f, std::size_t replica_index, std::vector<T>& buffer, bool circular = true) {
    connect<T>(f, replica_index, std::span<T>(buffer), circular);
  }
  template <ElementLike T>
  void connect(Fifo const& f, std::size_t replica_index, std::vector<T> const& buffer, bool circular = true) {
    connect<T>(f, replica_index, std::span<T const>(buffer), circular);
  }
  template <ElementLike T>
  void connect(Fifo const& f, std::vector<T>& buffer, bool circular = true) {
    connect<T>(f, std::span<T>(buffer), circular);
  }
  template <ElementLike T>
  void connect(Fifo const& f, std::vector<T> const& buffer, bool circular = true) {
    connect<T>(f, std::span<T const>(buffer), circular);
  }
  /// Connects a FIFO to a callback: infeeds call fn(std::span<T>) to fill the next transfer; outfeeds call
  /// fn(std::span<T const>) with each transfer. With several replicas, they share it: it is called once per
  /// replica at each stream step, in replica order (connect one per replica to tell them apart).
  template <ElementLike T, class F>
    requires std::invocable<F&, std::span<T>> || std::invocable<F&, std::span<T const>>
  void connect(Fifo const& f, F fn, ConnectOptions options = {}) {
    connect<T>(f, all_replicas, std::move(fn), options);
  }
  /// The same for one replica's stream.
  template <ElementLike T, class F>
    requires std::invocable<F&, std::span<T>> || std::invocable<F&, std::span<T const>>
  void connect(Fifo const& f, std::size_t replica_index, F fn, ConnectOptions options = {}) {
    std::size_t const n = f.elements;
    std::function<void(std::byte*)> fill;
    std::function<void(std::byte const*)> drain;
    if constexpr (std::invocable<F&, std::span<T>>)
      fill = [fn, n](std::byte* p) mutable { fn(std::span<T>(reinterpret_cast<T*>(p), n)); };
    if constexpr (std::invocable<F&, std::span<T const>>)
      drain = [fn, n](std::byte const* p) mutable { fn(std::span<T const>(reinterpret_cast<T const*>(p), n)); };
    connect_callback(f, replica_index, element_type_v<T>, sizeof(T), std::move(fill), std::move(drain), options);
  }

  /// Counters and timings so far, with the executable's cycle estimates and memory.
  Profile profile() const;

  TILEBSP_INLINE_VIRTUAL void read_bytes(Tensor const& t, void* dst, std::size_t bytes) const override;
  TILEBSP_INLINE_VIRTUAL void write_bytes(Tensor const& t, void const* src, std::size_t bytes) override;

 private:
  static constexpr std::size_t all_replicas = ~std::size_t{0};
  /// connect() to host memory: `elements` of `type` at `data` (`read_only`: the caller's buffer is const), for one
  /// replica or shared by all (all_replicas).
  void connect_buffer(Fifo const& f, std::size_t replica, ElementType type, std::byte* data, std::size_t elements,
                      std::size_t bytes, bool circular, bool read_only);
  /// connect() to a callback: an infeed takes `fill`, an outfeed `drain` (empty: the callback's signature does
  /// not fit that direction).
  void connect_callback(Fifo const& f, std::size_t replica, ElementType type, std::size_t element_bytes,
                        std::function<void(std::byte*)> fill, std::function<void(std::byte const*)> drain,
                        ConnectOptions options);

  std::unique_ptr<exec::detail::EngineCore> core_;
};

}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/engine.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/exec/engine_impl.hpp>
#endif
