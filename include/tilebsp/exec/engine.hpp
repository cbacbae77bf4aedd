// Engine: binds an Executable to host memory and runs its programs on a team of host threads.
#pragma once

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

/// Merges adjacent contiguous copies, then deals the bytes out evenly to `threads` lists.
inline std::vector<std::vector<CopyOp>> split_copies(std::vector<CopyOp> const& in, unsigned threads) {
  std::vector<CopyOp> ops;
  for (auto const& c : in) {
    if (!ops.empty()) {
      auto& p = ops.back();
      if (contiguous(p) && contiguous(c) && p.elem == c.elem && p.src + p.count * p.elem == c.src &&
          p.dst + p.count * p.elem == c.dst) {
        p.count += c.count;
        continue;
      }
    }
    ops.push_back(c);
  }
  std::int64_t total = 0;
  for (auto const& c : ops) total += c.count * c.elem;
  std::vector<std::vector<CopyOp>> out(threads);
  std::int64_t done = 0;
  unsigned t = 0;
  for (auto c : ops) {
    while (c.count > 0) {
      std::int64_t const quota = total * (t + 1) / threads - done;  // bytes thread t still takes
      std::int64_t n = t + 1 == threads ? c.count : std::min<std::int64_t>(c.count, (quota + c.elem - 1) / c.elem);
      if (n <= 0) {
        ++t;
        continue;
      }
      CopyOp part = c;
      part.count = n;
      out[t].push_back(part);
      done += n * c.elem;
      c.src += n * c.src_stride;
      c.dst += n * c.dst_stride;
      c.count -= n;
    }
  }
  return out;
}

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
  explicit Engine(Executable exe, EngineOptions opt = {})
      : exe_(std::move(exe)),
        s_(exe_.schedule()),
        g_(*s_.graph),
        threads_(static_cast<unsigned>(opt.host_threads ? opt.host_threads
                                                        : std::max(1u, std::thread::hardware_concurrency()))),
        profiling_(opt.profiling),
        host_kernels_(opt.host_kernels),
        team_(threads_),
        barrier_(threads_) {
    for (auto const& v : g_.variables) {
      data_.push_back(detail::allocate(static_cast<std::size_t>(v.size) * size_of(v.type)));
      if (v.constant && !v.initial.empty()) std::memcpy(data_.back().get(), v.initial.data(), v.initial.size());
    }
    mark_program_writes();
    bind_host_paths();
    // Compute sets and exchanges that only a bound host path's body reaches are never run: not bound either (no
    // vertex objects, staging or copy lists).
    std::vector<char> cs_runs(s_.compute_sets.size(), 0), ex_runs(s_.exchanges.size(), 0);
    for (auto const& p : s_.programs)
      for (std::size_t pc = 0; pc < p.code.size(); ++pc) {
        auto const& in = p.code[pc];
        if (in.op == detail::Op::host_path && paths_[static_cast<std::size_t>(in.a)]) {
          pc = static_cast<std::size_t>(in.b) - 1;
        } else if (in.op == detail::Op::superstep) {
          if (in.a >= 0) cs_runs[static_cast<std::size_t>(in.a)] = 1;
          if (in.b >= 0) ex_runs[static_cast<std::size_t>(in.b)] = 1;
        }
      }
    for (std::size_t i = 0; i < cs_runs.size(); ++i)
      cs_.push_back(cs_runs[i] ? bind_compute_set(s_.compute_sets[i]) : detail::ComputeSetExec{});
    for (std::size_t i = 0; i < ex_runs.size(); ++i)
      ex_.push_back(ex_runs[i] ? bind_exchange(s_.exchanges[i]) : detail::ExchangeExec{});
    fifos_.resize(g_.fifos.size());
    // Flags of repeat_while / if_ are single elements: resolve their host addresses once.
    for (auto const& t : s_.slots) {
      auto const runs = t.runs();
      flags_.push_back(runs.size() == 1 ? at(runs[0].var, runs[0].start, size_of(t.element_type())) : nullptr);
    }
    counters_.assign(threads_, std::vector<std::int64_t>(s_.counters, 0));
    for (auto const& p : s_.programs) {
      counts_.emplace_back(p.code.size(), 0);
      ns_.emplace_back(p.code.size(), 0);
    }
  }
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
  void run(std::size_t program = 0) {
    if (program >= s_.programs.size())
      throw index_error("run: program " + std::to_string(program) + " out of range (the executable has " +
                        std::to_string(s_.programs.size()) + " programs)");
    for (auto f : s_.programs[program].fifos)
      if (!fifos_[f].connected)
        throw stream_error("run: program " + std::to_string(program) + " streams through FIFO '" + g_.fifos[f].name +
                           "', which is not connected (Engine::connect)");
    error_ = nullptr;
    auto job = [this, program](unsigned tid) { execute(program, tid); };
    team_.run(job);
    // A prefetch in flight completes before run returns: callbacks never run outside Engine::run, so what they
    // capture need only outlive the run (its data is kept for the next run's first transfer).
    for (auto& c : fifos_) c.wait();
    if (error_) std::rethrow_exception(error_);
  }

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
  Profile profile() const {
    Profile p;
    p.target = g_.target;
    p.host_threads = threads_;
    p.host_timing = profiling_;
    p.memory = exe_.memory();
    for (std::size_t pi = 0; pi < s_.programs.size(); ++pi) {
      auto const& code = s_.programs[pi];
      auto& steps = p.programs.emplace_back();
      for (std::size_t pc = 0; pc < code.code.size(); ++pc) {
        auto const& in = code.code[pc];
        StepProfile sp;
        sp.est_cycles = code.cycles[pc];
        sp.executions = counts_[pi][pc];
        sp.host_ns = ns_[pi][pc];
        switch (in.op) {
          case detail::Op::superstep: {
            sp.kind = "superstep";
            if (in.a >= 0) {
              auto const& cs = s_.compute_sets[static_cast<std::size_t>(in.a)];
              sp.label = "compute set '" + g_.compute_sets[cs.id] + "'";
              if (cs.fetch_bytes > 0) {
                sp.exchange_bytes += cs.fetch_bytes;
                sp.label = "fetch " + std::to_string(cs.fetch_bytes) + " B + " + sp.label;
              }
            }
            if (in.b >= 0) {
              auto const& ex = s_.exchanges[static_cast<std::size_t>(in.b)];
              sp.exchange_bytes += ex.bytes;
              sp.label += (sp.label.empty() ? "" : " + ") + std::string("exchange ") + std::to_string(ex.bytes) + " B";
            }
            break;
          }
          case detail::Op::stream_in: sp.kind = "stream_in"; sp.label = "stream_in '" + g_.fifos[static_cast<std::size_t>(in.a)].name + "'"; break;
          case detail::Op::stream_out: sp.kind = "stream_out"; sp.label = "stream_out '" + g_.fifos[static_cast<std::size_t>(in.a)].name + "'"; break;
          case detail::Op::host: sp.kind = "host"; sp.label = "host callback"; break;
          case detail::Op::sync: sp.kind = "sync"; sp.label = "sync"; break;
          case detail::Op::branch_if_false: sp.kind = "branch"; sp.label = "branch on flag"; break;
          case detail::Op::host_path:
            sp.kind = "host_path";
            sp.label = "host path '" + s_.host_paths[static_cast<std::size_t>(in.a)].name + "'" +
                       (paths_[static_cast<std::size_t>(in.a)] ? "" : " (body runs)");
            break;
          default: sp.kind = "control"; sp.label = "loop control"; break;
        }
        steps.push_back(std::move(sp));
      }
    }
    return p;
  }

  void read_bytes(Tensor const& t, void* dst, std::size_t bytes) const override {
    check_access("read", t, bytes);
    auto* out = static_cast<std::byte*>(dst);
    std::size_t const eb = size_of(t.element_type());
    t.for_each_run([&](std::uint32_t var, std::int64_t start, std::int64_t stride, std::int64_t count) {
      detail::run_copy({data_[var].get() + start * static_cast<std::int64_t>(eb), out, stride * static_cast<std::int64_t>(eb),
                        static_cast<std::int64_t>(eb), count, static_cast<std::uint32_t>(eb)});
      out += count * static_cast<std::int64_t>(eb);
    });
  }
  void write_bytes(Tensor const& t, void const* src, std::size_t bytes) override {
    check_access("write", t, bytes);
    auto const* in = static_cast<std::byte const*>(src);
    std::size_t const eb = size_of(t.element_type());
    t.for_each_run([&](std::uint32_t var, std::int64_t start, std::int64_t stride, std::int64_t count) {
      if (g_.variables[var].constant) throw error("write: '" + g_.variables[var].name + "' is a constant");
      if (host_writes_[var]) ++*host_writes_[var];
      detail::run_copy({in, data_[var].get() + start * static_cast<std::int64_t>(eb), static_cast<std::int64_t>(eb),
                        stride * static_cast<std::int64_t>(eb), count, static_cast<std::uint32_t>(eb)});
      in += count * static_cast<std::int64_t>(eb);
    });
  }

 private:
  /// Binds each host path's kernel to this engine's memory (host kernels on); an empty task runs the body.
  void bind_host_paths() {
    HostBinding const at{[this](std::uint32_t var) { return data_.at(var).get(); },
                         [this](std::uint32_t var) { return host_writes_.at(var) ? &*host_writes_[var] : nullptr; }};
    for (auto const& hp : s_.host_paths) paths_.push_back(host_kernels_ && hp.kernel ? hp.kernel.bind(at) : HostTask{});
  }
  /// Variables no step writes get a host-write counter (HostBinding::host_writes); the others none.
  void mark_program_writes() {
    std::vector<bool> written(g_.variables.size(), false);
    for (auto const& cs : s_.compute_sets)
      for (auto v : cs.writes) written[v] = true;
    for (auto const& ex : s_.exchanges)
      for (auto const& tr : ex.transfers) written[tr.dst_var] = true;
    for (auto const& p : s_.programs)
      for (auto const& in : p.code)
        if (in.op == detail::Op::stream_in)
          for (auto const& r : s_.slots[static_cast<std::size_t>(in.b)].runs()) written[r.var] = true;
    host_writes_.resize(g_.variables.size());
    for (std::size_t v = 0; v < written.size(); ++v)
      if (!written[v]) host_writes_[v] = 1;
  }
  std::byte* at(std::uint32_t var, std::int64_t elem, std::size_t eb) const {
    return data_[var].get() + elem * static_cast<std::int64_t>(eb);
  }
  void check_access(char const* op, Tensor const& t, std::size_t bytes) const {
    if (!t.valid()) throw error(std::string(op) + ": the tensor is empty (default-constructed)");
    if (t.graph_id() != g_.id) throw error(std::string(op) + ": the tensor belongs to another graph");
    t.for_each_run([&](std::uint32_t var, std::int64_t, std::int64_t, std::int64_t) {
      if (var >= g_.variables.size())
        throw error(std::string(op) + ": the tensor's variable was added to the graph after this program was compiled");
    });
    if (bytes != t.num_elements() * size_of(t.element_type()))
      throw shape_error(std::string(op) + ": the tensor has " + std::to_string(t.num_elements()) + " elements");
  }
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
                                         bool to_buffer) const {
    std::vector<detail::CopyOp> ops;
    std::int64_t off = 0;
    for (auto const& r : runs) {
      std::byte* p = at(r.var, r.start, eb);
      std::byte* b = buffer + off * eb;
      ops.push_back(to_buffer ? detail::CopyOp{p, b, r.stride * eb, eb, r.count, eb}
                              : detail::CopyOp{b, p, eb, r.stride * eb, r.count, eb});
      off += r.count;
    }
    return ops;
  }

  detail::ComputeSetExec bind_compute_set(detail::ComputeSetPlan const& plan) {
    detail::ComputeSetExec e;
    std::size_t arena = 0;
    for (auto const& pv : plan.vertices) {
      auto const* ops = g_.vertices[pv.record].ops;
      arena = (arena + ops->align - 1) / ops->align * ops->align + ops->size;
    }
    arenas_.push_back(detail::allocate(arena));
    std::byte* base = arenas_.back().get();
    std::size_t off = 0;
    for (auto const& pv : plan.vertices) {
      auto const& rec = g_.vertices[pv.record];
      auto const* ops = rec.ops;
      off = (off + ops->align - 1) / ops->align * ops->align;
      void* obj = base + off;
      off += ops->size;
      ops->copy_construct(obj, rec.prototype.get());
      objects_.emplace_back(ops, obj);
      detail::WorkItem item{rec.tile, ops->size, ops->compute, obj, 1, static_cast<std::uint32_t>(e.gathers.size()), 0,
                            static_cast<std::uint32_t>(e.scatters.size()), 0, pv.cycles};
      std::vector<detail::FieldBinding> b(rec.fields.size());
      for (std::uint32_t fi = 0; fi < rec.fields.size(); ++fi) {
        auto const& f = rec.fields[fi];
        if (f.kind == detail::FieldKind::param) continue;
        std::vector<detail::FieldBinding> items(f.tensors.size());
        for (std::uint32_t k = 0; k < f.tensors.size(); ++k) {
          auto const& t = f.tensors[k];
          auto const eb = static_cast<std::uint32_t>(size_of(t.element_type()));
          auto const* st = find_staging(pv, fi, k);
          if (st) {
            staging_.push_back(detail::allocate(static_cast<std::size_t>(st->elements) * eb));
            std::byte* buf = staging_.back().get();
            auto const runs = t.runs();
            if (st->gather)
              for (auto const& op : tensor_ops(runs, buf, eb, true)) e.gathers.push_back(op);
            if (st->scatter)
              for (auto const& op : tensor_ops(runs, buf, eb, false)) e.scatters.push_back(op);
            items[k] = {buf, static_cast<std::size_t>(st->elements)};
            std::ptrdiff_t step = 1;
            for (std::size_t d = f.rank; d-- > 0;) {
              items[k].shape[d] = t.dim(d);
              items[k].stride[d] = step;
              step *= static_cast<std::ptrdiff_t>(t.dim(d));
            }
          } else if (f.rank > 0) {
            auto const a = *t.affine();  // planned as direct only when affine
            items[k] = {at(a.var, a.start, eb), t.num_elements()};
            for (std::size_t d = 0; d < f.rank; ++d) {
              items[k].shape[d] = t.dim(d);
              items[k].stride[d] = a.strides[d];
            }
          } else {
            auto const runs = t.runs();
            items[k] = {runs.empty() ? nullptr : at(runs[0].var, runs[0].start, eb), t.num_elements()};
          }
        }
        if (f.kind == detail::FieldKind::input_list) {
          lists_.emplace_back(new detail::FieldBinding[std::max<std::size_t>(items.size(), 1)]);
          std::copy(items.begin(), items.end(), lists_.back().get());
          b[fi] = {lists_.back().get(), items.size()};
        } else {
          b[fi] = items[0];
        }
      }
      ops->bind(obj, b.data());
      item.gather_end = static_cast<std::uint32_t>(e.gathers.size());
      item.scatter_end = static_cast<std::uint32_t>(e.scatters.size());
      e.items.push_back(item);
    }
    // Deal tiles (their items) to threads by estimated work, in order.
    std::uint64_t total = 0;
    for (auto const& it : e.items) total += it.weight;
    std::vector<std::size_t> split(threads_ + 1, e.items.size());
    split[0] = 0;
    std::uint64_t acc = 0;
    std::size_t i = 0;
    for (unsigned t = 1; t < threads_; ++t) {
      std::uint64_t const goal = total * t / threads_;
      while (i < e.items.size() && acc + e.items[i].weight / 2 < goal) acc += e.items[i++].weight;
      while (i > 0 && i < e.items.size() && e.items[i].tile == e.items[i - 1].tile) acc += e.items[i++].weight;
      split[t] = i;
    }
    // Within each thread's share, runs of same-type vertices stored contiguously become one call.
    std::vector<detail::WorkItem> merged;
    e.split.assign(threads_ + 1, 0);
    for (unsigned t = 0; t < threads_; ++t) {
      e.split[t] = merged.size();
      for (std::size_t k = split[t]; k < split[t + 1]; ++k) {
        auto const& it = e.items[k];
        auto const staged = [](detail::WorkItem const& w) {
          return w.gather_begin != w.gather_end || w.scatter_begin != w.scatter_end;
        };
        if (merged.size() > e.split[t] && !staged(it) && !staged(merged.back()) && merged.back().compute == it.compute &&
            static_cast<std::byte*>(merged.back().first) + merged.back().count * it.size == static_cast<std::byte*>(it.first)) {
          merged.back().count += it.count;
          merged.back().weight += it.weight;
        } else {
          merged.push_back(it);
        }
      }
    }
    e.split[threads_] = merged.size();
    e.items = std::move(merged);
    return e;
  }
  static detail::Staging const* find_staging(detail::PlacedVertex const& pv, std::uint32_t field, std::uint32_t item) {
    for (auto const& st : pv.staging)
      if (st.field == field && st.item == item) return &st;
    return nullptr;
  }

  detail::ExchangeExec bind_exchange(detail::ExchangePlan const& plan) {
    detail::ExchangeExec e;
    e.staged = plan.staged;
    std::vector<detail::CopyOp> direct, in, out;
    if (plan.staged) {
      e.stage = std::make_unique<std::byte[]>(std::max<std::uint64_t>(plan.bytes, 1));
    }
    std::int64_t off = 0;
    for (auto const& x : plan.transfers) {
      std::int64_t const eb = x.elem_bytes;
      auto const* src = at(x.src_var, x.src_start, x.elem_bytes);
      auto* dst = at(x.dst_var, x.dst_start, x.elem_bytes);
      if (plan.staged) {
        in.push_back({src, e.stage.get() + off, x.src_stride * eb, eb, x.count, x.elem_bytes});
        out.push_back({e.stage.get() + off, dst, eb, x.dst_stride * eb, x.count, x.elem_bytes});
        off += x.count * eb;
      } else {
        direct.push_back({src, dst, x.src_stride * eb, x.dst_stride * eb, x.count, x.elem_bytes});
      }
    }
    e.phase1 = detail::split_copies(plan.staged ? in : direct, threads_);
    if (plan.staged) e.phase2 = detail::split_copies(out, threads_);
    return e;
  }

  void fail(bool& failed) {
    std::lock_guard lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
    failed = true;
  }

  void run_compute(detail::ComputeSetExec const& e, unsigned tid) const {
    for (std::size_t i = e.split[tid]; i < e.split[tid + 1]; ++i) {
      auto const& it = e.items[i];
      for (auto g = it.gather_begin; g < it.gather_end; ++g) detail::run_copy(e.gathers[g]);
      it.compute(it.first, it.count);
      for (auto s = it.scatter_begin; s < it.scatter_end; ++s) detail::run_copy(e.scatters[s]);
    }
  }

  void stream(detail::Instr const& in) {
    auto const& fifo = g_.fifos[static_cast<std::size_t>(in.a)];
    auto& c = fifos_[static_cast<std::size_t>(in.a)];
    Tensor const& t = s_.slots[static_cast<std::size_t>(in.b)];
    std::size_t const bytes = t.num_elements() * size_of(t.element_type());
    bool const to_device = in.op == detail::Op::stream_in;
    std::byte* host = nullptr;
    if (c.fill || c.drain) {
      if (to_device) c.take_next();
      host = c.scratch.data();
    } else {
      if (c.pos + bytes > c.buffer_bytes) {
        if (!c.circular || bytes == 0)
          throw stream_error(std::string(to_device ? "stream_in" : "stream_out") + ": FIFO '" + fifo.name +
                             "' is exhausted after " + std::to_string(c.transfers) + " transfers");
        c.pos = 0;
      }
      host = c.buffer + c.pos;
      c.pos += bytes;
    }
    ++c.transfers;
    if (to_device) write_bytes(t, host, bytes);
    else read_bytes(t, host, bytes);
    if (c.drain) c.drain(host);
  }

  /// A flag's value, read without allocating (every thread evaluates it at each branch).
  bool flag_value(std::size_t slot) const noexcept {
    std::uint32_t v = 0;
    std::memcpy(&v, flags_[slot], size_of(s_.slots[slot].element_type()));
    return v != 0;
  }

  void execute(std::size_t program, unsigned tid) {
    auto const& code = s_.programs[program].code;
    auto& counters = counters_[tid];
    auto* counts = counts_[program].data();
    auto* ns = ns_[program].data();
    bool failed = false;
    auto const guarded = [&](auto&& f) {
      try {
        f();
      } catch (...) {
        fail(failed);
      }
    };
    auto last = profiling_ && tid == 0 ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    std::size_t pc = 0;
    while (pc < code.size()) {
      auto const& in = code[pc];
      std::size_t next = pc + 1;
      switch (in.op) {
        case detail::Op::superstep:
          if (in.a >= 0) {
            guarded([&] { run_compute(cs_[static_cast<std::size_t>(in.a)], tid); });
            if (barrier_.arrive_and_wait(failed)) return;
          }
          if (in.b >= 0) {
            auto const& ex = ex_[static_cast<std::size_t>(in.b)];
            for (auto const& op : ex.phase1[tid]) detail::run_copy(op);
            if (barrier_.arrive_and_wait(failed)) return;
            if (ex.staged) {
              for (auto const& op : ex.phase2[tid]) detail::run_copy(op);
              if (barrier_.arrive_and_wait(failed)) return;
            }
          }
          break;
        case detail::Op::stream_in:
        case detail::Op::stream_out:
          if (tid == 0) guarded([&] { stream(in); });
          if (barrier_.arrive_and_wait(failed)) return;
          break;
        case detail::Op::host:
          if (tid == 0) guarded([&] { s_.callbacks[static_cast<std::size_t>(in.a)](*this); });
          if (barrier_.arrive_and_wait(failed)) return;
          break;
        case detail::Op::sync:
          if (barrier_.arrive_and_wait(failed)) return;
          break;
        case detail::Op::repeat_begin:
          counters[static_cast<std::size_t>(in.a)] = in.n;
          if (in.n == 0) next = static_cast<std::size_t>(in.b);
          break;
        case detail::Op::repeat_end:
          if (--counters[static_cast<std::size_t>(in.a)] > 0) next = static_cast<std::size_t>(in.b);
          break;
        case detail::Op::branch_if_false: {
          // Every thread reads the flag, then syncs so that nobody overwrites it before all have read it.
          bool const f = flag_value(static_cast<std::size_t>(in.a));
          if (barrier_.arrive_and_wait(failed)) return;
          if (!f) next = static_cast<std::size_t>(in.b);
          break;
        }
        case detail::Op::jump: next = static_cast<std::size_t>(in.b); break;
        case detail::Op::host_path:
          // The one place that chooses between a span's host task and its body.
          if (auto const& task = paths_[static_cast<std::size_t>(in.a)]) {
            guarded([&] { task(tid, threads_); });
            if (barrier_.arrive_and_wait(failed)) return;
            next = static_cast<std::size_t>(in.b);
          }
          break;
      }
      if (tid == 0) {
        ++counts[pc];
        if (profiling_) {
          auto const now = std::chrono::steady_clock::now();
          ns[pc] += static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - last).count());
          last = now;
        }
      }
      pc = next;
    }
  }

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
