// Host tasks: what an Engine runs in place of a span of program that has a faster host implementation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>

namespace tilebsp {

/// A bound host implementation: called by every host thread as task(thread, threads) between the same barriers as
/// the span it replaces. Work must be divided so that the values written do not depend on `threads`.
using HostTask = std::function<void(unsigned thread, unsigned threads)>;

/// What a host kernel's bind() gets from the Engine about the graph's variables.
struct HostBinding {
  /// The host address of variable `var`'s first element.
  std::function<std::byte*(std::uint32_t var)> address;
  /// For a variable that no step of the executable writes (only the host does: Engine::write, a host callback), a
  /// counter the Engine bumps on each such write: a kernel may keep a derived form of the operand across runs
  /// (weights packed for its micro-kernel) and rebuild it when the counter has moved. Null for a variable the
  /// program writes (compute sets, exchanges, input streams).
  std::function<std::uint64_t const*(std::uint32_t var)> host_writes;
  /// The threads that will run the task (a kernel may divide its work, or decide to fuse, by it).
  unsigned threads = 1;

  std::byte* operator()(std::uint32_t var) const { return address(var); }
};

/// `count` elements of variable `var` from `start`, in its element order: consecutive (row 0), or rows of `row`
/// consecutive elements whose starts lie `pitch` apart (a channel slice of a channels-last tensor): element i of the
/// range at start + (i / row) * pitch + i % row. Consecutive ranges always have row = pitch = 0.
struct VarRange {
  std::uint32_t var = 0;
  std::int64_t start = 0, count = 0;
  std::int64_t row = 0, pitch = 0;
  /// The offset from `start` of element i of the range.
  constexpr std::int64_t offset(std::int64_t i) const noexcept { return row > 0 ? i / row * pitch + i % row : i; }
  friend bool operator==(VarRange const&, VarRange const&) = default;
};

/// An elementwise step bound to run on part of its range: computes elements [begin, end) (offsets from the range's
/// start) on the calling thread.
using Epilogue = std::function<void(std::int64_t begin, std::int64_t end)>;

/// An elementwise span that is y[i] = act(y[i] + bias[i % columns]) over its range, in place: the bias an f32
/// vector of `columns` elements at `bias_start` of variable `bias_var` (which the span does not write), then, where
/// set, max(v, lo) and min(v, hi) as xsimd computes them (ReLU: lo = 0; ReLU6: lo = 0, hi = 6), or v * sigmoid(v)
/// as a map computes it (`silu`: EfficientNet's activation). A producer whose
/// result has `columns` columns may apply it to each value as it stores it, as oneDNN's bias and eltwise post-ops
/// do, instead of calling the epilogue on the stored result: the same bits.
struct ColumnOp {
  std::uint32_t bias_var = 0;
  std::int64_t bias_start = 0, columns = 0;
  bool max_lo = false, min_hi = false, silu = false;
  float lo = 0.0f, hi = 0.0f;
};

/// A host implementation of a span of program (see host_path()). Contract: running the bound task writes bitwise
/// the same values that the span's body would write to every tensor read after it (an operator's internal
/// temporaries excepted), so an Engine with host kernels turned off (EngineOptions::host_kernels) computes the
/// same results. bind() is called once per Engine and replica (each replica's memory; the Engine runs the replicas'
/// tasks one after another, a barrier between them); an empty task (or an empty bind) means "run the body", for
/// example when an operand is not one strided variable.
///
/// Two optional descriptions let the Engine run a span's elementwise successor inside it (EngineOptions::
/// fuse_host_paths), on each part of a result while that part is still in the cache, as oneDNN's post-ops and
/// ONNX Runtime's fused activations do:
/// - a producer sets `writes` (every element of the range, and nothing else that a later step reads) and
///   `bind_with`, which binds a task that also calls the epilogue on each part of `writes` once the part's values
///   are final: every element exactly once, on the thread that wrote it, before the task returns (or binds nothing
///   where fusing would not pay: the spans then run one after the other);
/// - an elementwise span sets `elementwise` (element e of the range is written from element e of the range and
///   from variables the span does not write) and `bind_elements`, which binds that computation for any part; and
///   `column_op` where it is one (ColumnOp), which bind_with then gets too.
/// The values are those of the two spans run one after the other.
struct HostKernel {
  HostKernel() = default;
  /// A kernel of `bind` alone (HostKernel{[](HostBinding const& at) { ... }}).
  HostKernel(std::function<HostTask(HostBinding const&)> b) : bind(std::move(b)) {}  // NOLINT: implicit, as the aggregate was

  std::function<HostTask(HostBinding const&)> bind;
  std::optional<VarRange> writes;
  std::function<HostTask(HostBinding const&, Epilogue, std::optional<ColumnOp> const&)> bind_with;
  std::optional<VarRange> elementwise;
  std::function<Epilogue(HostBinding const&)> bind_elements;
  std::optional<ColumnOp> column_op;
  explicit operator bool() const noexcept { return static_cast<bool>(bind); }
};

}  // namespace tilebsp
