// Engine: binds an Executable to host memory and runs its programs on a team of host threads.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/exec/barrier.hpp>
#include <tilebsp/exec/profile.hpp>
#include <tilebsp/exec/team.hpp>
#include <tilebsp/program/compile.hpp>
#include <tilebsp/program/host_context.hpp>

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <thread>
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

namespace detail {

/// One host copy: `count` elements of `elem` bytes with byte strides.
struct CopyOp {
  std::byte const* src = nullptr;
  std::byte* dst = nullptr;
  std::int64_t src_stride = 0, dst_stride = 0, count = 0;
  std::uint32_t elem = 4;
};

template <class T>
inline void strided_copy(CopyOp const& c) noexcept {
  for (std::int64_t i = 0; i < c.count; ++i)
    std::memcpy(c.dst + i * c.dst_stride, c.src + i * c.src_stride, sizeof(T));
}
inline void run_copy(CopyOp const& c) noexcept {
  if (c.src_stride == c.elem && c.dst_stride == c.elem) {
    std::memcpy(c.dst, c.src, static_cast<std::size_t>(c.count) * c.elem);
    return;
  }
  switch (c.elem) {
    case 4: strided_copy<std::uint32_t>(c); break;
    case 2: strided_copy<std::uint16_t>(c); break;
    default: strided_copy<std::uint8_t>(c); break;
  }
}
inline bool contiguous(CopyOp const& c) noexcept { return c.src_stride == c.elem && c.dst_stride == c.elem; }


struct WorkItem {
  std::size_t tile = 0;
  std::size_t size = 0;  ///< bytes per vertex object
  void (*compute)(void*, std::size_t) = nullptr;
  void* first = nullptr;
  std::size_t count = 0;
  std::uint32_t gather_begin = 0, gather_end = 0, scatter_begin = 0, scatter_end = 0;
  std::uint64_t weight = 0;
};

struct ComputeSetExec {
  std::vector<WorkItem> items;
  std::vector<CopyOp> gathers, scatters;
  std::vector<std::size_t> split;  ///< thread t runs items [split[t], split[t + 1])
};

struct ExchangeExec {
  std::vector<std::vector<CopyOp>> phase1, phase2;  ///< per thread; phase2 only when staged
  bool staged = false;
  std::unique_ptr<std::byte[]> stage;
};

struct AlignedFree {
  void operator()(std::byte* p) const noexcept { ::operator delete(p, std::align_val_t{64}); }
};
using Buffer = std::unique_ptr<std::byte, AlignedFree>;
inline Buffer allocate(std::size_t bytes) {
  auto* p = static_cast<std::byte*>(::operator new(std::max<std::size_t>(bytes, 64), std::align_val_t{64}));
  std::memset(p, 0, std::max<std::size_t>(bytes, 64));
  return Buffer(p);
}

struct FifoConnection {
  bool connected = false;
  std::byte* buffer = nullptr;  ///< host buffer (read for infeeds, written for outfeeds)
  std::size_t buffer_bytes = 0, pos = 0, transfers = 0;
  bool circular = true;
  std::function<void(std::byte*)> fill;          ///< infeed callback
  std::function<void(std::byte const*)> drain;   ///< outfeed callback
  std::vector<std::byte> scratch;
  bool prefetch = false;
  std::vector<std::byte> next;  ///< filled by the pending prefetch
  std::future<void> pending;    ///< the prefetch in flight (destruction waits for it)

  /// The next infeed transfer in scratch: from the prefetch when there is one, and starts the following one.
  void take_next() {
    if (!prefetch) {
      fill(scratch.data());
      return;
    }
    if (!pending.valid()) fill(next.data());
    else pending.get();  // rethrows the callback's exception
    scratch.swap(next);
    pending = std::async(std::launch::async, [this] { fill(next.data()); });
  }
  void wait() {
    if (pending.valid()) pending.wait();
  }
};

}  // namespace detail

/// Runs an Executable. Owns host memory for every variable, the vertex objects, and a team of host threads.
/// Also a HostContext: engine.write(t, values) / engine.read<T>(t) between runs.
class Engine : public HostContext {
 public:
  explicit Engine(Executable exe, EngineOptions opt = {});
  ~Engine() override {
    for (auto& c : fifos_) c.wait();
    for (auto const& [ops, p] : objects_) ops->destroy(p);
  }
  Engine(Engine const&) = delete;
  Engine& operator=(Engine const&) = delete;

  std::size_t host_threads() const noexcept { return threads_; }
  Executable const& executable() const noexcept { return exe_; }

  /// Runs program `program` (the position of the program in compile()). Rethrows the first exception a
  /// vertex or host callback threw; throws stream_error when a FIFO the program uses is not connected.
  void run(std::size_t program = 0);

  /// Connects a FIFO to host memory used as a circular buffer (or consumed once, when circular is false).
  /// Infeeds read it; outfeeds write it. Its size must be a positive multiple of the FIFO's transfer size.
  template <ElementLike T>
  void connect(Fifo const& f, std::span<T> buffer, bool circular = true) {
    auto& c = connection<T>("connect", f);
    c.wait();
    std::size_t const per = f.elements * sizeof(T);
    if (buffer.size() % std::max<std::size_t>(f.elements, 1) != 0 || (per > 0 && buffer.empty()))
      throw stream_error("connect: FIFO '" + g_.fifos[f.id].name + "' moves " + std::to_string(f.elements) +
                         " elements per transfer; the host buffer of " + std::to_string(buffer.size()) +
                         " elements is not a positive multiple of that");
    c = {};
    c.connected = true;
    c.buffer = reinterpret_cast<std::byte*>(const_cast<std::remove_const_t<T>*>(buffer.data()));
    c.buffer_bytes = buffer.size_bytes();
    c.circular = circular;
  }
  template <ElementLike T>
  void connect(Fifo const& f, std::span<T const> buffer, bool circular = true) {
    if (!f.to_device)
      throw stream_error("connect: device-to-host FIFO '" + g_.fifos.at(f.id).name + "' needs writable host memory");
    connect<T>(f, std::span<T>(const_cast<T*>(buffer.data()), buffer.size()), circular);
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
  /// fn(std::span<T const>) with each transfer.
  template <ElementLike T, class F>
    requires std::invocable<F&, std::span<T>> || std::invocable<F&, std::span<T const>>
  void connect(Fifo const& f, F fn, ConnectOptions options = {}) {
    auto& c = connection<T>("connect", f);
    if (options.prefetch && !f.to_device)
      throw stream_error("connect: prefetch applies to infeeds; FIFO '" + g_.fifos[f.id].name + "' is an outfeed");
    c.wait();
    c = {};
    c.connected = true;
    c.prefetch = options.prefetch;
    std::size_t const n = f.elements;
    if (f.to_device) {
      if constexpr (std::invocable<F&, std::span<T>>)
        c.fill = [fn, n](std::byte* p) mutable { fn(std::span<T>(reinterpret_cast<T*>(p), n)); };
      else throw stream_error("connect: an infeed callback must accept std::span<T>");
    } else {
      if constexpr (std::invocable<F&, std::span<T const>>)
        c.drain = [fn, n](std::byte const* p) mutable { fn(std::span<T const>(reinterpret_cast<T const*>(p), n)); };
      else throw stream_error("connect: an outfeed callback must accept std::span<T const>");
    }
    c.scratch.resize(n * sizeof(T) + 1);
    if (c.prefetch) c.next.resize(c.scratch.size());
  }

  /// Counters and timings so far, with the executable's cycle estimates and memory.
  Profile profile() const;

  void read_bytes(Tensor const& t, void* dst, std::size_t bytes) const override;
  void write_bytes(Tensor const& t, void const* src, std::size_t bytes) override;

 private:
  /// Binds each host path's kernel to this engine's memory (host kernels on); an empty task runs the body.
  void bind_host_paths();
  /// Variables no step writes get a host-write counter (HostBinding::host_writes); the others none.
  void mark_program_writes();
  std::byte* at(std::uint32_t var, std::int64_t elem, std::size_t eb) const {
    return data_[var].get() + elem * static_cast<std::int64_t>(eb);
  }
  void check_access(char const* op, Tensor const& t, std::size_t bytes) const;
  template <class T>
  detail::FifoConnection& connection(char const* op, Fifo const& f) {
    if (f.graph != g_.id || f.id >= fifos_.size()) throw error(std::string(op) + ": the FIFO belongs to another graph");
    if (f.type != element_type_v<T>)
      throw type_error(std::string(op) + ": FIFO '" + g_.fifos[f.id].name + "' carries " + std::string(name_of(f.type)) +
                       " but the host type is " + std::string(name_of(element_type_v<T>)));
    return fifos_[f.id];
  }

  /// Copy ops between a tensor's elements and a contiguous host buffer.
  std::vector<detail::CopyOp> tensor_ops(std::vector<detail::Run> const& runs, std::byte* buffer, std::uint32_t eb,
                                         bool to_buffer) const;

  detail::ComputeSetExec bind_compute_set(detail::ComputeSetPlan const& plan);
  static detail::Staging const* find_staging(detail::PlacedVertex const& pv, std::uint32_t field, std::uint32_t item);

  detail::ExchangeExec bind_exchange(detail::ExchangePlan const& plan);

  void fail(bool& failed);

  void run_compute(detail::ComputeSetExec const& e, unsigned tid) const;

  void stream(detail::Instr const& in);

  /// A flag's value, read without allocating (every thread evaluates it at each branch).
  bool flag_value(std::size_t slot) const noexcept;

  void execute(std::size_t program, unsigned tid);

  Executable exe_;
  detail::Schedule const& s_;
  detail::GraphImpl const& g_;
  unsigned threads_;
  bool profiling_;
  bool host_kernels_;
  std::vector<std::optional<std::uint64_t>> host_writes_;  ///< per variable: host writes so far (program-written: none)
  detail::Team team_;
  detail::Barrier barrier_;
  std::vector<detail::Buffer> data_, arenas_, staging_;
  std::vector<std::unique_ptr<detail::FieldBinding[]>> lists_;
  std::vector<std::pair<detail::VertexOps const*, void*>> objects_;
  std::vector<detail::ComputeSetExec> cs_;
  std::vector<detail::ExchangeExec> ex_;
  std::vector<HostTask> paths_;  ///< per host path: its bound task, or empty (the body runs)
  std::vector<detail::FifoConnection> fifos_;
  std::vector<std::byte const*> flags_;  ///< per slot: host address of a one-element tensor
  std::vector<std::vector<std::int64_t>> counters_;
  std::vector<std::vector<std::uint64_t>> counts_, ns_;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/engine.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/exec/engine_impl.hpp>
#endif
