// EngineCore: the state and the interpreter behind an Engine (its memory, bound compute sets and exchanges, FIFO
// connections, thread team); <tilebsp/exec/engine.hpp> holds only a pointer to it.
#pragma once

#include <tilebsp/exec/communicator.hpp>
#include <tilebsp/exec/detail/barrier.hpp>
#include <tilebsp/exec/detail/copy.hpp>
#include <tilebsp/exec/detail/host_memory.hpp>
#include <tilebsp/exec/detail/team.hpp>
#include <tilebsp/exec/detail/auto_report.hpp>
#include <tilebsp/exec/profile.hpp>
#include <tilebsp/program/compile.hpp>
#include <tilebsp/program/host_context.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace tilebsp {
struct EngineOptions;
namespace exec::detail {
using core::detail::FieldBinding;
using core::detail::GraphImpl;
using core::detail::Run;
using core::detail::VertexOps;
using schedule::ComputeSetPlan;
using schedule::ExchangePlan;
using schedule::Instr;
using schedule::PlacedVertex;
using schedule::Schedule;
using schedule::Staging;

struct WorkItem {
  std::size_t tile = 0;
  std::size_t replica = 0;  ///< local replica whose memory the vertices are bound to
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

/// How a host thread runs a range of code: alone in its team (the engine's, or its group's in a pipeline step).
struct Lane {
  unsigned tid = 0, threads = 1;  ///< within the team
  Barrier* barrier = nullptr;     ///< the team's
  unsigned global = 0;            ///< within the engine (its repeat counters)
  bool top = true;                ///< false in a pipeline stage
};

/// The host threads of one pipeline step in groups, one group per IPU slot (Branch::slot) modulo their number:
/// group g holds threads [first[g], first[g + 1]); each runs its branches in stage order.
struct Groups {
  unsigned count = 1;
  std::vector<unsigned> first;
  std::vector<std::unique_ptr<Barrier>> barriers;
  /// The group of a slot, and the size of group g.
  unsigned of_slot(std::uint32_t slot) const noexcept { return slot % count; }
  unsigned size(unsigned g) const noexcept { return first[g + 1] - first[g]; }
  unsigned of_thread(unsigned tid) const noexcept {
    unsigned g = 0;
    while (first[g + 1] <= tid) ++g;
    return g;
  }
};

class EngineCore;

/// What host callbacks and Engine::replica(r) see of one replica: its tensors.
class ReplicaContext final : public HostContext {
 public:
  ReplicaContext(EngineCore& core, std::size_t local) : core_(core), local_(local) {}
  inline void read_bytes(Tensor const& t, void* dst, std::size_t bytes) const override;
  inline void write_bytes(Tensor const& t, void const* src, std::size_t bytes) override;
  inline std::size_t replica() const noexcept override;

 private:
  EngineCore& core_;
  std::size_t local_;
};

/// One replica's state in this engine (index: its local number, the global one less first_).
struct ReplicaState {
  Buffer shared;             ///< the variables that share host memory (EngineOptions::reuse_host_memory)
  std::vector<Buffer> data;  ///< per variable
  std::vector<std::optional<std::uint64_t>> host_writes;  ///< per variable: host writes so far (program-written: none)
  std::vector<HostTask> paths;  ///< per host path: its bound task, or empty (the body runs)
  std::vector<std::byte const*> flags;  ///< per slot: host address of a one-element tensor
  std::unique_ptr<ReplicaContext> context;
};

/// Everything an Engine owns.
class EngineCore {
 public:
  EngineCore(Executable exe, EngineOptions const& opt);
  ~EngineCore();
  EngineCore(EngineCore const&) = delete;
  EngineCore& operator=(EngineCore const&) = delete;

  void run(std::size_t program);
  Profile profile() const;
  /// A step's kind, label, cycle split, compute set, operator and IPUs (profile(), trace logging).
  void describe_step(std::size_t program, std::size_t pc, StepProfile& sp) const;
  /// Logs one step run at level trace (run() turns trace_ on when the level is enabled).
  void trace_step(std::size_t program, std::size_t pc, std::uint64_t ns) const;
  /// Local replica `local`'s tensors.
  void read_bytes(std::size_t local, Tensor const& t, void* dst, std::size_t bytes) const;
  void write_bytes(std::size_t local, Tensor const& t, void const* src, std::size_t bytes);
  /// The local number of global replica `replica`; index_error when out of range or run by another process.
  std::size_t local_of(char const* op, std::size_t replica) const;
  /// The connection of FIFO f for local replica `local` (all: the one all local replicas share), after checking
  /// that f belongs to this graph and carries `type`; marks the FIFO shared or per replica accordingly.
  static constexpr std::size_t all = ~std::size_t{0};
  FifoConnection& connection(char const* op, Fifo const& f, ElementType type, std::size_t local);
  std::string const& fifo_name(Fifo const& f) const { return g_.fifos[f.id].name; }

  Executable exe_;
  Schedule const& s_;
  GraphImpl const& g_;
  unsigned threads_;
  bool profiling_;
  bool trace_ = false;  ///< log each step run (LogLevel::trace), decided per run()
  bool host_kernels_;
  bool fuse_host_paths_;
  /// Per host path: the pc after the body of the elementwise host path fused into its task (it then runs as an
  /// epilogue and the interpreter jumps past both), or 0 for none.
  std::vector<std::uint32_t> fused_end_;
  std::vector<bool> fused_away_;  ///< per host path: runs as the epilogue of the one before
  std::shared_ptr<Communicator> comm_;
  std::size_t replicas_ = 1, first_ = 0, local_ = 1;  ///< all replicas; this engine's: first_ .. first_ + local_ - 1
  std::vector<ReplicaState> reps_;                    ///< local replicas
  HostMemoryPlan memory_;                             ///< variables sharing host memory (none unless asked)
  bool running_ = false;                              ///< Engine::run in progress (host callbacks may access anything)
  std::size_t last_program_ = SIZE_MAX;               ///< the program run last
  AutoReport auto_;                                   ///< TILEBSP_ENGINE_OPTIONS
  std::string report_dir_;                            ///< where ~EngineCore writes the auto-report (empty: none)
  void (*write_report_)(EngineCore const&) noexcept = nullptr;  ///< writes it (set with report_dir_), logs a failure

 private:
  /// Binds each host path's kernel to this engine's memory (host kernels on); an empty task runs the body. Fuses
  /// elementwise host paths into the producers they follow (fuse_host_paths_).
  void bind_host_paths();
  /// Variables no step writes get a host-write counter (HostBinding::host_writes); the others none.
  void mark_program_writes();
  std::byte* at(std::size_t local, std::uint32_t var, std::int64_t elem, std::size_t eb) const {
    return reps_[local].data[var].get() + elem * static_cast<std::int64_t>(eb);
  }
  void check_access(char const* op, Tensor const& t, std::size_t bytes) const;
  /// Copy ops between a tensor's elements in local replica `local` and a contiguous host buffer.
  std::vector<CopyOp> tensor_ops(std::size_t local, std::vector<Run> const& runs, std::byte* buffer, std::uint32_t eb,
                                 bool to_buffer) const;
  /// Checks that the processes of comm_ run the same executable (throws replica_error naming those that do not).
  void check_processes();
  /// Op::collective: thread `tid` of `threads` reduces its share of the elements over the local replicas (all of
  /// them: no communicator); or, with a communicator, thread 0 reduces through it.
  void collective_local(std::size_t plan, unsigned tid, unsigned threads);
  void collective_processes(std::size_t plan);
  /// A compute set bound for a team of `team` threads.
  ComputeSetExec bind_compute_set(ComputeSetPlan const& plan, unsigned team);
  static Staging const* find_staging(PlacedVertex const& pv, std::uint32_t field, std::uint32_t item);
  ExchangeExec bind_exchange(ExchangePlan const& plan, unsigned team);
  /// The bindings for a team of `team` threads (the engine's, or a pipeline group's).
  ComputeSetExec const& compute_exec(std::size_t plan, unsigned team) const;
  ExchangeExec const& exchange_exec(std::size_t plan, unsigned team) const;
  void fail(bool& failed);
  void run_compute(ComputeSetExec const& e, unsigned tid) const;
  /// One transfer of a stream instruction for local replica `local`.
  void stream(Instr const& in, std::size_t local);
  /// A flag's value in local replica `local`, read without allocating (every thread evaluates it at each branch).
  bool flag_value(std::size_t local, std::size_t slot) const noexcept;
  void execute(std::size_t program, unsigned tid);
  /// Runs instructions [begin, end) of a program on `lane`; false when a thread of its team failed.
  bool run_code(std::size_t program, std::size_t begin, std::size_t end, Lane const& lane);

  Team team_;
  Barrier barrier_;
  std::vector<Buffer> arenas_, staging_;
  std::vector<std::unique_ptr<FieldBinding[]>> lists_;
  std::vector<std::pair<VertexOps const*, void*>> objects_;
  /// Per plan: its bindings, one per team size that runs it (mostly one: the engine's team).
  std::vector<std::vector<std::pair<unsigned, ComputeSetExec>>> cs_;
  std::vector<std::vector<std::pair<unsigned, ExchangeExec>>> ex_;
  std::vector<Groups> groups_;  ///< per parallel plan
  std::mutex io_mutex_;         ///< streams and host callbacks of concurrent stages, one at a time
  /// Per collective: its tensor's runs and their running element counts (offsets[k]: elements before run k).
  struct CollectiveRuns {
    std::vector<Run> runs;
    std::vector<std::int64_t> offsets;
  };
  std::vector<CollectiveRuns> collectives_;
  std::vector<std::vector<FifoConnection>> fifos_;  ///< per FIFO, per local replica (a shared one: the first)
  std::vector<char> fifo_shared_;                  ///< per FIFO: one connection for every local replica
  std::vector<std::vector<std::int64_t>> counters_;
  std::vector<std::vector<std::uint64_t>> counts_, ns_;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

// Defined here, inline in both builds and declared inline in the class: ReplicaContext then has no key function,
// so its vtable is compiled only where one is made (EngineCore's constructor), not in every file that includes
// this header, and a file that includes it alone has the definitions its vtable names.
inline void ReplicaContext::read_bytes(Tensor const& t, void* dst, std::size_t bytes) const {
  core_.read_bytes(local_, t, dst, bytes);
}
inline void ReplicaContext::write_bytes(Tensor const& t, void const* src, std::size_t bytes) {
  core_.write_bytes(local_, t, src, bytes);
}
inline std::size_t ReplicaContext::replica() const noexcept { return core_.first_ + local_; }

}  // namespace exec::detail
}  // namespace tilebsp
