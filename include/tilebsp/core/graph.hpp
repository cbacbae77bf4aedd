// Graph: variables and constants mapped to tiles, compute sets of vertices, and host FIFOs; g.shard(i) views.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/detail/variable_mapping.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/core/target.hpp>
#include <tilebsp/core/tensor.hpp>
#include <tilebsp/core/tile_mapping.hpp>
#include <tilebsp/core/types.hpp>
#include <tilebsp/core/vertex_record.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tilebsp {

/// A compute set: vertices that run in one BSP compute phase.
struct ComputeSet {
  std::uint32_t id = 0;
  std::uint32_t graph = 0;
};

/// Handle to a host FIFO: host-to-device (an infeed) or device-to-host (an outfeed).
struct Fifo {
  std::uint32_t id = 0;
  std::uint32_t graph = 0;
  ElementType type = ElementType::f32;
  std::size_t elements = 0;  ///< elements moved by one stream_in / stream_out
  bool to_device = true;
};

/// Options of a variable.
struct VariableOptions {
  /// Live only between its first and last use in the schedule (counted as temporary memory).
  bool temporary = false;
};

namespace core::detail {

struct Variable {
  std::string name;
  ElementType type = ElementType::f32;
  Shape shape;
  std::int64_t size = 0;
  bool constant = false;
  bool temporary = false;
  std::vector<std::byte> initial;  ///< constants only
  VariableMapping mapping;
};

struct FifoInfo {
  std::string name;
  ElementType type = ElementType::f32;
  std::size_t elements = 0;
  bool to_device = true;
};

/// An operator that built compute sets (ops::matmul, ops::conv, a map, ...), for the profile: its kind, the name
/// it was given, and the plans it chose (their describe() text).
struct OperatorRecord {
  std::string kind, name;
  std::vector<std::string> plans;
  std::string kernels;  ///< the instruction set its kernels were compiled for (simd::isa_name()); empty: not said
};

struct GraphImpl {
  Target target;
  std::uint32_t id = 0;
  std::vector<Variable> variables;
  std::vector<std::string> compute_sets;
  std::vector<std::int32_t> compute_set_ops;  ///< each compute set's operator (index into operators; -1: none)
  std::vector<OperatorRecord> operators;
  std::vector<VertexRecord> vertices;
  /// Every vertex's own hash (hash_vertex), in order, folded in as it is added: the executable cache's key takes
  /// the vertices from here instead of walking them (their tensors are hot in the cache only while they are
  /// connected).
  Hasher vertex_hash;
  std::vector<FifoInfo> fifos;

  static std::uint32_t next_id() {
    static std::atomic<std::uint32_t> n{1};
    return n++;
  }
};

/// Calls f(flat_begin, flat_end, global_tile) over a tensor's elements in order; returns unmapped count.
template <class F>
std::int64_t for_each_mapped(GraphImpl const& g, Tensor const& t, F&& f) {
  std::int64_t flat = 0, unmapped = 0;
  t.for_each_run([&](std::uint32_t var, std::int64_t start, std::int64_t stride, std::int64_t count) {
    auto const& m = g.variables[var].mapping;
    if (stride == 1) {
      unmapped += m.for_each(start, start + count, [&](std::int64_t b, std::int64_t e, std::uint32_t tile) {
        f(flat + (b - start), flat + (e - start), tile);
      });
    } else {
      for (std::int64_t i = 0; i < count; ++i) {
        auto const tile = m.tile_of(start + i * stride);
        if (tile < 0) ++unmapped;
        else f(flat + i, flat + i + 1, static_cast<std::uint32_t>(tile));
      }
    }
    flat += count;
  });
  return unmapped;
}

/// The distinct non-empty `kernels` of operator records (the graph's or a profile's), in order of first use.
template <class Records>
std::vector<std::string> distinct_kernels(Records const& records) {
  std::vector<std::string> k;
  for (auto const& o : records)
    if (!o.kernels.empty() && std::find(k.begin(), k.end(), o.kernels) == k.end()) k.push_back(o.kernels);
  return k;
}

/// The instruction sets of the kernels that built `g`'s operators (OperatorRecord::kernels), each once in order of
/// first use, joined by ", "; empty where no operator names one. Executable-cache entries record it and processes
/// that share replicas compare it: another set of kernels computes other bits (docs/11).
inline std::string operator_kernels(GraphImpl const& g) {
  std::string out;
  for (std::string const& k : distinct_kernels(g.operators)) out += (out.empty() ? "" : ", ") + k;
  return out;
}

}  // namespace core::detail

/// A static graph for one target. Graph is a handle: copies refer to the same graph. A shard view
/// (`shard(i)`) numbers tiles locally (0 .. tiles_per_ipu - 1) and places everything on IPU i.
class Graph {
 public:
  explicit Graph(Target target);

  Target const& target() const noexcept { return impl().target; }
  /// Tiles addressable through this graph (all tiles, or one IPU's tiles for a shard view).
  std::size_t num_tiles() const noexcept { return tile_count_; }
  /// Global index of this view's tile 0.
  std::size_t first_tile() const noexcept { return tile_begin_; }
  std::uint32_t id() const noexcept { return impl().id; }

  /// A view of this graph whose tiles are IPU `ipu`'s tiles.
  Graph shard(std::size_t ipu) const;

  Tensor add_variable(ElementType type, Shape shape, std::string name, VariableOptions opt = {});
  template <ElementLike T>
  Tensor add_variable(Shape shape, std::string name, VariableOptions opt = {}) {
    return add_variable(element_type_v<T>, std::move(shape), std::move(name), opt);
  }
  /// A read-only tensor holding `values` (row-major); it must still be mapped to tiles.
  template <ElementLike T>
  Tensor add_constant(Shape shape, std::span<T const> values, std::string name) {
    return add_constant_bytes(std::move(shape), element_type_v<T>, values.data(), values.size(), std::move(name));
  }
  template <ElementLike T>
  Tensor add_constant(Shape shape, std::initializer_list<T> values, std::string name) {
    return add_constant<T>(std::move(shape), std::span<T const>(values.begin(), values.size()), std::move(name));
  }
  /// A constant with every element equal to `value`.
  template <ElementLike T>
  Tensor add_constant(Shape shape, T value, std::string name) {
    std::vector<T> values(product(shape), value);
    return add_constant<T>(std::move(shape), std::span<T const>(values.data(), values.size()), std::move(name));
  }

  /// Maps every element of `t` to `tile` (a tile of this view).
  void set_tile_mapping(Tensor const& t, std::size_t tile);

  /// Maps each element of `t` to the tile of the element of `like` with the same flat index (Poplar's idiom
  /// setTileMapping(t, getTileMapping(like)) in one pass: an operator's result laid out as its operand, a piece
  /// per position and block of channels, costs a step per piece). Elements of `like` on tiles outside this view
  /// leave theirs unmapped, as tile_mapping leaves them out. Throws shape_error when the element counts differ,
  /// mapping_error when elements of `like` are unmapped.
  void set_tile_mapping_like(Tensor const& t, Tensor const& like);

  /// Where `t`'s elements live, as regions of its flattened indices per tile of this view. Elements on tiles
  /// outside the view (another shard) are left out. Throws mapping_error when some elements are unmapped.
  TileMapping tile_mapping(Tensor const& t) const;

  ComputeSet add_compute_set(std::string name);

  /// Adds a vertex of type V on `tile` of this view; connections match V's fields in declaration order.
  /// Defined in <tilebsp/vertex/add_vertex.hpp>.
  template <class V, class... Args>
  void add_vertex(ComputeSet cs, std::size_t tile, Args&&... connections);

  template <ElementLike T>
  Fifo add_host_to_device_fifo(std::string name, std::size_t elements) {
    return add_fifo(std::move(name), element_type_v<T>, elements, true);
  }
  template <ElementLike T>
  Fifo add_device_to_host_fifo(std::string name, std::size_t elements) {
    return add_fifo(std::move(name), element_type_v<T>, elements, false);
  }

  /// Host threads on which operators make the records of their vertices (vertex::add_vertices); 0, the default,
  /// means every hardware thread. The graph is the same for any number.
  void set_build_threads(std::size_t n) noexcept { shared_->build_threads = n; }
  std::size_t build_threads() const noexcept;

  /// Internal state, for the lowering and the engine. The non-const form is for building on it: where an
  /// executable still holds the state it was compiled from (snapshot()), the graph copies it first.
  core::detail::GraphImpl const& impl() const noexcept { return *shared_->impl; }
  core::detail::GraphImpl& impl();
  /// The graph as it is now, shared (not copied) until the graph next changes: compile keeps one. (Copying it
  /// was a third of compile's time for ResNeXt-101's 6.5 million vertices.)
  std::shared_ptr<core::detail::GraphImpl const> snapshot() const { return shared_->impl; }

  /// Global tile index of this view's `tile`; throws index_error when out of range.
  std::uint32_t global_tile(char const* op, std::size_t tile) const;
  void check_tensor(char const* op, Tensor const& t) const;

 private:
  Tensor add(core::detail::Variable v);
  /// add_constant of `count` elements of `type` at `values`.
  Tensor add_constant_bytes(Shape shape, ElementType type, void const* values, std::size_t count, std::string name);
  Fifo add_fifo(std::string name, ElementType type, std::size_t elements, bool to_device);

  friend class OperatorScope;
  /// Shared by every handle (copies, shard views) of one graph; `impl` also by the executables compiled from it.
  struct Shared {
    std::shared_ptr<core::detail::GraphImpl> impl;
    std::size_t build_threads = 0;
    std::int32_t op = -1;  ///< the open operator (OperatorScope), -1: none
  };
  std::shared_ptr<Shared> shared_;
  std::size_t tile_begin_ = 0;
  std::size_t tile_count_ = 0;
};

/// Names the operator that builds compute sets while it is alive: the profile ranks operators by their compute
/// sets' cycles and shows their plans. Scopes nest; the outermost names the operator (a convolution that runs as a
/// matmul is one convolution). Operators of tilebsp open one; so may a user's own.
class OperatorScope {
 public:
  /// `kernels`: the instruction set the operator's kernels were compiled for (tilebsp's operators pass
  /// simd::isa_name()), which the profile reports.
  OperatorScope(Graph& g, std::string kind, std::string name, std::string_view kernels = {});
  ~OperatorScope();
  OperatorScope(OperatorScope const&) = delete;
  OperatorScope& operator=(OperatorScope const&) = delete;
  /// Records a plan the operator chose (its describe() text), and logs it at level debug.
  void add_plan(std::string text);
  /// Records `text` as a plan of the operator open on `g` (logged at level debug either way).
  static void note_plan(Graph& g, std::string text);

 private:
  Graph g_;
  bool outer_ = false;
};

}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/core.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/core/graph_impl.hpp>
#endif
