// The importer's state while it builds a model: the values by name (folded constants or graph tensors in ONNX's
// layout), the node being built (for errors and attributes) and the helpers every operator uses.
#pragma once

#include "ir.hpp"

#include <tilebsp/onnx/import.hpp>
#include <tilebsp/expr/code.hpp>
#include <tilebsp/ops/map.hpp>
#include <tilebsp/plan/conv.hpp>
#include <tilebsp/plan/matmul.hpp>
#include <tilebsp/program/pipeline.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tilebsp::onnx::detail {

using Dims = std::vector<std::int64_t>;

/// A value of the model: known at import (`constant`), or a graph tensor in ONNX's logical layout. `layout`, when
/// not empty, says how the tensor's elements lie: tensor == physical.dimshuffle(layout) for a physical view that
/// is in row-major order (the channels-last result of a convolution seen as NCHW has layout {0, 3, 1, 2}).
struct Value {
  DataType type = DataType::float32;
  Dims shape;
  std::optional<HostTensor> constant;
  Tensor tensor;
  std::vector<std::size_t> layout;
  /// The pipeline stage that computed a graph value (0 unpipelined; the model's inputs are stage 0's).
  std::size_t stage = 0;
  /// A node run on the host (excluded_nodes): a value it reads from the tiles, `constant` when it runs, of which
  /// only the shape is known at import (known() refuses it).
  bool host_read = false;
  /// A Pad with zeros that only a Conv or an AveragePool reads, left to that node to fold into its own padding:
  /// the value is `tensor` (of the unpadded shape, `shape` less the pads) with zero_lower[d] zeros before and
  /// zero_upper[d] after it along each spatial axis d + 2. Empty: not such a value.
  std::vector<std::int64_t> zero_lower, zero_upper;
};

/// Channels-first (ONNX) to channels-last (tilebsp) and back, as dimension orders for dimshuffle.
std::vector<std::size_t> to_last(std::size_t rank);
std::vector<std::size_t> to_first(std::size_t rank);

class Importer;
using OpFn = void (*)(Importer&, Node const&);
using Registry = std::map<std::string, OpFn>;
void add_tensor_ops(Registry& r);
void add_math_ops(Registry& r);
void add_nn_ops(Registry& r);

/// Bounds on what a model can make the importer allocate: a graph value (2^31 elements, the tiles' 32-bit
/// indices) and a value folded on the host at import (2^27 elements: 1 GiB of 64-bit integers).
inline constexpr std::size_t max_graph_elements = std::size_t{1} << 31;
inline constexpr std::size_t max_folded_elements = std::size_t{1} << 27;

/// Host tensors: element counts, strides and indexing shared by the folding code. count() throws shape_error for a
/// negative dimension or more than max_graph_elements elements.
std::size_t count(Dims const& shape);
Dims broadcast(Dims const& a, Dims const& b);
/// The element of `t` (of shape `from`) at flat index i of the broadcast shape `to`.
std::size_t broadcast_index(Dims const& from, Dims const& to, std::size_t i);
/// A host tensor of `type` and `shape` whose element i is f(i) (doubles, rounded to the type).
HostTensor make_host(DataType type, Dims shape, std::function<double(std::size_t)> const& f);
/// The elements of `t` chosen by `source` (flat indices), as a tensor of `shape`.
HostTensor gather_host(HostTensor const& t, Dims shape, std::vector<std::size_t> const& source);

class Importer {
 public:
  Importer(Graph& g, Sequence& prog, ModelData const& m, ImportOptions const& o);

  /// The graph the node being built goes on: the whole graph, or its IPU's shard (manual sharding).
  Graph g;
  Sequence& prog;
  ModelData const& model;
  ImportOptions const& options;
  Node const* node = nullptr;
  std::map<std::string, Value> values;
  /// The nodes that read each value, and the graph outputs: what a fusion may absorb.
  std::map<std::string, std::vector<Node const*>> consumers;
  std::set<std::string> graph_outputs;
  /// Multiply-adds of the convolutions and matrix products built so far.
  double multiply_adds = 0;
  /// Nodes already built into an earlier node (a batch norm folded into its convolution, a ReLU into its map).
  std::set<Node const*> fused;
  /// The single node reading `value` when nothing else (no other node, no graph output) does, and it is not one
  /// run on the host (those are never fused into the node before them).
  Node const* sole_consumer(std::string const& value) const;
  /// Nodes run on the host (ImportOptions::excluded_nodes), which no fusion absorbs.
  std::set<Node const*> on_host;
  /// Nodes built so far (fused ones are in `fused`): their reads are in the program already.
  std::set<Node const*> built;
  /// Whether the node being built is the last to read `value`: every other node that reads it is built (or fused
  /// into one that is), none runs on the host, and it is not a graph output. In a pipelined import, only where the
  /// node is its sole reader (a value may be sent to a later stage after this stage's nodes run).
  bool last_reader(std::string const& value) const { return last_reader(value, node); }
  /// The same for `reader`, a node fused into the one being built (a residual Add).
  bool last_reader(std::string const& value, Node const* reader) const;
  /// How many values hold each graph variable (graph id, variable): set() counts a value's variables, the model's
  /// inputs count twice (never written). A map writes in place only into a variable that no other value holds.
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::size_t> holders;
  void hold(Tensor const& t, std::ptrdiff_t by);
  /// Whether no value but `v` holds v's variable (v a view of one variable).
  bool sole_holder(Value const& v) const;
  /// A node wrote its result `r` into value `v`'s variable: `v` no longer holds it (the result's value will).
  void written_into(Value const& v, Tensor const& r);
  /// Concatenations that extend one another share a buffer (ops_tensor.cpp, chained): the buffer in its physical
  /// order, the inputs joined into it so far (their value names, in order), the axis and layout they were joined
  /// along and how far along the axis the buffer is filled.
  struct JoinChain {
    Tensor buffer;
    std::vector<std::string> parts;
    std::size_t axis = 0;
    std::vector<std::size_t> layout;
    std::int64_t filled = 0;
  };
  std::vector<JoinChain> chains;
  /// Concatenations along the channels whose inputs the convolutions computing them write in place (join_slot):
  /// the result's buffer (channels last; unmapped until each slice is written or copied into), and each input's
  /// channels in it, in the node's order.
  struct Join {
    Tensor buffer;
    std::vector<std::int64_t> offset, size;
  };
  std::map<Node const*, Join> joins;
  /// Where a convolution computing `value` (logical shape `shape`, channels at axis 1; a result of `type`) writes
  /// its channels-last result: its slice of the buffer of the Concat along the channels that alone reads it (no
  /// copy then joins it), when the channels of all that Concat's inputs follow from the model (static_channels).
  /// None where there is no such Concat, where a concatenation chain shares a buffer instead (ops_tensor.cpp,
  /// chained), or in a pipelined or sharded import.
  std::optional<Tensor> join_slot(std::string const& value, Dims const& shape, ElementType type, int depth = 0);
  /// The channels (axis 1) of value `name` as the nodes that compute it fix them (a Conv's weights, a Concat's
  /// inputs, operators that keep them), or none: also once it has visited `channel_visits` nodes since join_slot
  /// began (a crafted model's Concats of one value twice, nested, would double the walk per level).
  std::optional<std::int64_t> static_channels(std::string const& name, int depth = 0) const;
  mutable std::size_t channel_visits = 0;
  /// The node that computes each value.
  std::map<std::string, Node const*> producers;
  /// Builds the node being built as a host callback: `fn` folds it on the values read from the tiles when the model
  /// runs. unsupported_error when `fn` does not fold the operator.
  void run_on_host(OpFn fn);

  /// The errors of the node being built: "<model>: node '<name>' (<op>, opset <n>): <what>".
  std::string where() const;
  [[noreturn]] void unsupported(std::string const& what) const;
  [[noreturn]] void invalid(std::string const& what) const;

  std::size_t inputs() const { return node->inputs.size(); }
  bool has(std::size_t i) const { return i < node->inputs.size() && !node->inputs[i].empty(); }
  Value const& in(std::size_t i) const;
  /// Value `name` as the node being built sees it: received into its stage, else as computed (null: none).
  Value const* lookup(std::string const& name) const;
  /// Input i, which must be known at import (a shape, axes, indices, weights).
  HostTensor const& known(std::size_t i, char const* what) const;
  std::vector<std::int64_t> known_ints(std::size_t i, char const* what) const;
  void out(std::size_t i, Value v);
  void out_tensor(std::size_t i, DataType type, Tensor t, std::vector<std::size_t> layout = {});
  void out_constant(std::size_t i, HostTensor t);
  /// Stores value `name`, computed by the node being built (in its pipeline stage).
  void set(std::string const& name, Value v);

  bool has_attr(char const* name) const { return node->attributes.contains(name); }
  std::int64_t attr_int(char const* name, std::int64_t fallback) const;
  float attr_float(char const* name, float fallback) const;
  std::string attr_string(char const* name, std::string fallback) const;
  std::vector<std::int64_t> attr_ints(char const* name, std::vector<std::int64_t> fallback = {}) const;
  /// Refuses attributes this importer does not read.
  void only_attrs(std::initializer_list<char const*> names) const;

  /// The graph type of an ONNX type: f32 or f16 (per the precision) for floating types, i32 for integers, bool.
  ElementType graph_type(DataType t) const;
  /// `v` on the graph (a constant becomes a graph constant, once).
  Tensor tensor(Value const& v);
  /// An axis in [-rank, rank) made non-negative.
  std::size_t axis(std::int64_t a, std::size_t rank) const;

  /// The planning options of the node's operators.
  ConvOptions conv_options() const;
  MatmulOptions matmul_options() const;
  ElementType float_type() const {
    return options.precision == Precision::fp16 && !keep_float ? ElementType::f16 : ElementType::f32;
  }
  /// The node being built stays in float (precision_conversion_excluded_nodes).
  bool keep_float = false;
  /// Makes the node's floating inputs its float type (converted once per value, type and stage).
  void convert_inputs();

  /// A pipelined import: the stage of the node being built and every stage (its shard, the transfers it receives).
  std::size_t stage = 0;
  std::vector<Stage>* stages = nullptr;
  /// Where set() records the bytes of each graph value it stores (planning a pipeline), when not null.
  std::map<std::string, std::uint64_t>* computed = nullptr;
  /// Pipelined: the node's graph inputs computed by earlier stages, received into its stage (once per value and
  /// stage) through pipeline transfers. Throws option_error for an input computed by a later stage.
  void receive_inputs();
  /// Pipelined: value `name`, computed by an earlier stage, received into the node's stage as receive_inputs
  /// receives the node's own inputs (a fused node's input: a residual Add's). Its value in this stage, or null where
  /// it is not such a value.
  Value const* receive(std::string const& name);

  /// An elementwise map of `code` over the operands (NumPy broadcasting): in the layout of the largest operand
  /// that has one, so that maps after convolutions run over channels-last data in order. Interpreted (ops::map of
  /// an expr::Code): the importer compiles no kernel of its own for its many expressions.
  Tensor map(expr::Code const& code, std::vector<std::size_t>& layout, std::vector<Value const*> const& operands);
  template <class E, class... V>
  Tensor map(E const& e, std::vector<std::size_t>& layout, V const&... operands) {
    return map(expr::Code{e}, layout, {&operands...});
  }
  /// The same map as one fused kernel compiled for the element types T... (ops::map of the expression template):
  /// for the few long expressions that run often enough to pay for their compile time (Erf, in every GELU).
  template <class... T, class E, class... V>
  Tensor map_fused(E const& e, std::vector<std::size_t>& layout, V const&... operands) {
    Dims out;
    ((out = broadcast(out, operands.shape)), ...);
    count(out);  // within the bound
    layout = choose_layout(out, {&operands...});
    std::vector<Tensor> const ph{physical(operands, out, layout)...};
    // Into an operand nothing reads after this node, as map does.
    expr::VT result = expr::infer_of(e, types_of(ph)).type;
    if (result == expr::VT::weak || result == expr::VT::any) result = expr::VT::f32;
    Tensor r;
    std::vector<Value const*> const all{&operands...};
    if (auto const k = reusable_operand(result, all, ph, out)) {
      r = ph[*k];
      [&]<std::size_t... I>(std::index_sequence<I...>) { ops::map_with_output<T...>(g, prog, e, r, ph[I]...); }(
          std::index_sequence_for<V...>{});
      written_into(*all[*k], r);
    } else {
      r = [&]<std::size_t... I>(std::index_sequence<I...>) { return ops::map<T...>(g, prog, e, ph[I]...); }(
          std::index_sequence_for<V...>{});
    }
    return layout.empty() ? r : r.dimshuffle(layout);
  }

 private:
  std::size_t next_constant_ = 0;
  /// Inputs of the node being built converted to its float type, and every conversion made so far.
  std::map<std::string, Value> converted_inputs_;
  std::map<std::tuple<std::string, ElementType, std::size_t>, Value> conversions_;
  /// Inputs of the node being built received from earlier stages, and every reception made so far.
  std::map<std::string, Value> received_inputs_;
  std::map<std::pair<std::string, std::size_t>, Value> receptions_;

  std::vector<std::size_t> choose_layout(Dims const& out, std::vector<Value const*> const& ops) const;
  /// The operand a map of `code` over `physical` (the operands in the map's layout) may write its result into, or
  /// none: see Importer::map.
  std::optional<std::size_t> reusable_operand(expr::VT result, std::vector<Value const*> const& operands,
                                              std::vector<Tensor> const& physical, Dims const& out) const;
  static expr::Types types_of(std::vector<Tensor> const& physical);
  Tensor physical(Value const& v, Dims const& out, std::vector<std::size_t> const& layout);
};

/// One node as import_model built it: its program, and the graph values it computed with their bytes.
struct NodeBuild {
  Sequence program;
  std::map<std::string, std::uint64_t> computed;
};
/// import(), and where `nodes` is not null, each node built into its own program (nodes[i] for model node i; a
/// node fused into an earlier one has none) instead of into `prog`.
Imported import_model(Graph& g, Sequence& prog, Model const& model, ImportOptions const& options, std::vector<NodeBuild>* nodes);

}  // namespace tilebsp::onnx::detail
