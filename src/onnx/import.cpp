// onnx::import: the importer's driver (inputs, nodes in order, outputs), its shared helpers, and reading and
// writing a model's inputs and outputs through a host context.
#include "importer.hpp"

#include <tilebsp/core/checked.hpp>
#include <tilebsp/core/half.hpp>
#include <tilebsp/core/mapping.hpp>
#include <tilebsp/ops/conv.hpp>
#include <tilebsp/ops/kernels.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <regex>
#include <set>

namespace tilebsp::onnx {

namespace detail {

std::size_t count(Dims const& shape) {
  std::size_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw shape_error("a shape has the negative dimension " + std::to_string(d));
    if (d != 0 && n > max_graph_elements / static_cast<std::size_t>(d))
      n = max_graph_elements + 1;  // stays above the bound (a later 0 still gives 0)
    else
      n *= static_cast<std::size_t>(d);
  }
  if (n > max_graph_elements)
    throw shape_error("a value of more than 2^31 elements (the tiles index 32 bits); shape " + [&] {
      std::string r;
      for (std::size_t i = 0; i < shape.size(); ++i) r += (i ? " x " : "") + std::to_string(shape[i]);
      return r;
    }());
  return n;
}

namespace {
void check_folded(std::size_t n) {
  if (n > max_folded_elements)
    throw shape_error("a value folded at import would hold " + std::to_string(n) + " elements, more than the 2^27 the "
                      "importer computes on the host");
}
}  // namespace

Dims broadcast(Dims const& a, Dims const& b) {
  Dims r(std::max(a.size(), b.size()), 1);
  for (std::size_t i = 0; i < r.size(); ++i) {
    std::int64_t const x = i < r.size() - a.size() ? 1 : a[i - (r.size() - a.size())];
    std::int64_t const y = i < r.size() - b.size() ? 1 : b[i - (r.size() - b.size())];
    if (x != y && x != 1 && y != 1) return {-1};
    r[i] = x == 1 ? y : x;
  }
  return r;
}

std::size_t broadcast_index(Dims const& from, Dims const& to, std::size_t i) {
  std::size_t src = 0, stride = 1;
  for (std::size_t k = to.size(); k-- > 0;) {
    auto const n = static_cast<std::size_t>(to[k]);
    std::size_t const c = i % n;
    i /= n;
    std::size_t const fk = k + from.size();
    if (fk < to.size()) continue;
    auto const fn = static_cast<std::size_t>(from[fk - to.size()]);
    if (fn != 1) src += c * stride;
    stride *= fn;
  }
  return src;
}

HostTensor make_host(DataType type, Dims shape, std::function<double(std::size_t)> const& f) {
  HostTensor t;
  t.type = type;
  t.shape = std::move(shape);
  std::size_t const n = count(t.shape);
  check_folded(n);
  if (is_floating(type)) {
    t.floats.resize(n);
    for (std::size_t i = 0; i < n; ++i) t.floats[i] = static_cast<float>(f(i));
  } else {
    t.ints.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      double const v = f(i);
      t.ints[i] = type == DataType::boolean ? (v != 0) : static_cast<std::int64_t>(v);
    }
  }
  return t;
}

HostTensor gather_host(HostTensor const& t, Dims shape, std::vector<std::size_t> const& source) {
  check_folded(source.size());
  HostTensor r;
  r.type = t.type;
  r.shape = std::move(shape);
  if (is_floating(t.type))
    for (auto s : source) r.floats.push_back(t.floats[s]);
  else
    for (auto s : source) r.ints.push_back(t.ints[s]);
  return r;
}

Importer::Importer(Graph& g_, Sequence& prog_, ModelData const& m, ImportOptions const& o)
    : g(g_), prog(prog_), model(m), options(o) {}

std::string Importer::where() const {
  std::string s = model.name + ": ";
  if (node) s += "node '" + node->name + "' (" + node->op_type + ", opset " + std::to_string(model.opset) + "): ";
  return s;
}
void Importer::unsupported(std::string const& what) const { throw unsupported_error(where() + what); }
void Importer::invalid(std::string const& what) const { throw model_error(where() + what); }

Value const* Importer::lookup(std::string const& name) const {
  if (auto r = received_inputs_.find(name); r != received_inputs_.end()) return &r->second;
  auto it = values.find(name);
  return it == values.end() ? nullptr : &it->second;
}

Value const& Importer::in(std::size_t i) const {
  if (!has(i)) invalid("input " + std::to_string(i) + " is missing");
  if (auto c = converted_inputs_.find(node->inputs[i]); c != converted_inputs_.end()) return c->second;
  Value const* v = lookup(node->inputs[i]);
  if (!v) invalid("input '" + node->inputs[i] + "' is not produced before the node");
  return *v;
}

HostTensor const& Importer::known(std::size_t i, char const* what) const {
  Value const& v = in(i);
  if (!v.constant || v.host_read)
    unsupported(std::string(what) + " (input " + std::to_string(i) + ", '" + node->inputs[i] +
                "') must be known when the model is imported: a constant, an initializer or a folded shape "
                "computation (fix an input with ImportOptions::constant_inputs)");
  return *v.constant;
}

std::vector<std::int64_t> Importer::known_ints(std::size_t i, char const* what) const {
  HostTensor const& t = known(i, what);
  if (is_floating(t.type)) invalid(std::string(what) + " must be integers, got " + to_string(t.type));
  return t.ints;
}

void Importer::out(std::size_t i, Value v) {
  if (i >= node->outputs.size() || node->outputs[i].empty()) return;  // an optional output not asked for
  set(node->outputs[i], std::move(v));
}

void Importer::hold(Tensor const& t, std::ptrdiff_t by) {
  if (!t.valid()) return;
  std::vector<std::uint32_t> seen;
  for (auto const& run : t.element_runs()->runs) {
    if (std::find(seen.begin(), seen.end(), run.var) != seen.end()) continue;
    seen.push_back(run.var);
    auto& n = holders[{t.graph_id(), run.var}];
    n = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(n) + by);
  }
}

bool Importer::sole_holder(Value const& v) const {
  auto const a = v.tensor.affine();
  if (!a) return false;
  auto const held = holders.find({v.tensor.graph_id(), a->var});
  return held == holders.end() || held->second <= 1;
}

void Importer::written_into(Value const& v, Tensor const& r) {
  if (auto const own = v.tensor.affine(); own && own->var == r.affine()->var) hold(v.tensor, -1);
}

void Importer::set(std::string const& name, Value v) {
  v.stage = stage;
  if (!v.constant) hold(v.tensor, 1);
  if (computed && !v.constant)
    (*computed)[name] = static_cast<std::uint64_t>(v.tensor.num_elements()) * size_of(v.tensor.element_type());
  values[name] = std::move(v);
}

void Importer::out_tensor(std::size_t i, DataType type, Tensor t, std::vector<std::size_t> layout) {
  Value v;
  v.type = type;
  for (auto d : t.shape()) v.shape.push_back(static_cast<std::int64_t>(d));
  count(v.shape);  // within the bound
  v.tensor = std::move(t);
  v.layout = std::move(layout);
  out(i, std::move(v));
}

void Importer::out_constant(std::size_t i, HostTensor t) {
  Value v;
  v.type = t.type;
  v.shape = t.shape;
  v.constant = std::move(t);
  out(i, std::move(v));
}

std::int64_t Importer::attr_int(char const* name, std::int64_t fallback) const {
  auto it = node->attributes.find(name);
  if (it == node->attributes.end()) return fallback;
  if (it->second.kind != Attribute::Kind::i) invalid(std::string("attribute '") + name + "' must be an integer");
  return it->second.i;
}
float Importer::attr_float(char const* name, float fallback) const {
  auto it = node->attributes.find(name);
  if (it == node->attributes.end()) return fallback;
  if (it->second.kind != Attribute::Kind::f) invalid(std::string("attribute '") + name + "' must be a float");
  return it->second.f;
}
std::string Importer::attr_string(char const* name, std::string fallback) const {
  auto it = node->attributes.find(name);
  if (it == node->attributes.end()) return fallback;
  if (it->second.kind != Attribute::Kind::s) invalid(std::string("attribute '") + name + "' must be a string");
  return it->second.s;
}
std::vector<std::int64_t> Importer::attr_ints(char const* name, std::vector<std::int64_t> fallback) const {
  auto it = node->attributes.find(name);
  if (it == node->attributes.end()) return fallback;
  if (it->second.kind != Attribute::Kind::ints) invalid(std::string("attribute '") + name + "' must be integers");
  return it->second.ints;
}
void Importer::only_attrs(std::initializer_list<char const*> names) const {
  for (auto const& [name, a] : node->attributes)
    if (std::none_of(names.begin(), names.end(), [&](char const* n) { return name == n; }))
      unsupported("attribute '" + name + "' is not supported");
}

ElementType Importer::graph_type(DataType t) const {
  switch (t) {
    case DataType::float32:
    case DataType::float16: return float_type();
    case DataType::int32:
    case DataType::int64: return ElementType::i32;
    case DataType::boolean: return ElementType::boolean;
    default: unsupported("element type " + to_string(t) + " is not supported (float, float16, int32, int64 and bool are)");
  }
}

Tensor Importer::tensor(Value const& v) {
  if (!v.constant) return v.tensor;
  HostTensor const& h = *v.constant;
  Shape shape;
  for (auto d : h.shape) shape.push_back(static_cast<std::size_t>(d));
  ElementType const t = graph_type(h.type);
  std::string const name = "onnx/constant" + std::to_string(next_constant_++);
  Tensor r;
  switch (t) {
    case ElementType::f32: r = g.add_constant<float>(shape, std::span<float const>(h.floats), name); break;
    case ElementType::f16: {
      std::vector<half> hv(h.floats.begin(), h.floats.end());
      r = g.add_constant<half>(shape, std::span<half const>(hv), name);
      break;
    }
    case ElementType::i32: {
      std::vector<std::int32_t> iv;
      for (auto x : h.ints) {
        if (x < std::numeric_limits<std::int32_t>::min() || x > std::numeric_limits<std::int32_t>::max())
          unsupported("the constant value " + std::to_string(x) + " does not fit the 32-bit integers of the tiles");
        iv.push_back(static_cast<std::int32_t>(x));
      }
      r = g.add_constant<std::int32_t>(shape, std::span<std::int32_t const>(iv), name);
      break;
    }
    default: {
      std::unique_ptr<bool[]> bv(new bool[h.ints.size()]);
      for (std::size_t i = 0; i < h.ints.size(); ++i) bv[i] = h.ints[i] != 0;
      r = g.add_constant<bool>(shape, std::span<bool const>(bv.get(), h.ints.size()), name);
      break;
    }
  }
  map_linearly(g, r);
  return r;
}

bool Importer::last_reader(std::string const& value, Node const* reader) const {
  if (stages) return sole_consumer(value) == reader;
  auto it = consumers.find(value);
  if (graph_outputs.contains(value) || it == consumers.end()) return false;
  return std::all_of(it->second.begin(), it->second.end(), [&](Node const* c) {
    return c == reader || (!on_host.contains(c) && (built.contains(c) || fused.contains(c)));
  });
}

Node const* Importer::sole_consumer(std::string const& value) const {
  auto it = consumers.find(value);
  if (graph_outputs.contains(value) || it == consumers.end() || it->second.size() != 1 || on_host.contains(it->second[0]))
    return nullptr;
  return it->second[0];
}

std::size_t Importer::axis(std::int64_t a, std::size_t rank) const {
  auto const r = static_cast<std::int64_t>(rank);
  if (a < -r || a >= r) invalid("axis " + std::to_string(a) + " is outside [-" + std::to_string(r) + ", " + std::to_string(r) + ")");
  return static_cast<std::size_t>(a < 0 ? a + r : a);
}

std::vector<std::size_t> to_last(std::size_t rank) {
  std::vector<std::size_t> p{0};
  for (std::size_t d = 2; d < rank; ++d) p.push_back(d);
  p.push_back(1);
  return p;
}
std::vector<std::size_t> to_first(std::size_t rank) {
  std::vector<std::size_t> p{0, rank - 1};
  for (std::size_t d = 1; d + 1 < rank; ++d) p.push_back(d);
  return p;
}

namespace {
/// Whether node n is a Concat along axis 1 of inputs of `rank` (0: unknown, the axis attribute must then be 1).
bool joins_channels(Node const& n, std::size_t rank) {
  auto const a = n.attributes.find("axis");
  auto const r = static_cast<std::int64_t>(rank);
  return n.op_type == "Concat" && n.domain.empty() && a != n.attributes.end() && a->second.kind == Attribute::Kind::i &&
         (a->second.i == 1 || (r > 0 && a->second.i == 1 - r));
}
}  // namespace

std::optional<std::int64_t> Importer::static_channels(std::string const& name, int depth) const {
  if (depth > 64 || channel_visits == 0) return std::nullopt;
  --channel_visits;
  if (auto const v = values.find(name); v != values.end())
    return v->second.shape.size() > 1 ? std::optional<std::int64_t>{v->second.shape[1]} : std::nullopt;
  auto const p = producers.find(name);
  if (p == producers.end() || !p->second->domain.empty() || p->second->inputs.empty()) return std::nullopt;
  Node const& n = *p->second;
  if (n.op_type == "Conv") {
    auto const w = n.inputs.size() > 1 ? model.initializers.find(n.inputs[1]) : model.initializers.end();
    if (w == model.initializers.end() || w->second.shape.size() < 3) return std::nullopt;
    return w->second.shape[0];
  }
  static std::set<std::string> const keep{"Relu",    "Clip",    "Sigmoid",     "HardSigmoid", "HardSwish", "LeakyRelu",
                                          "MaxPool", "Dropout", "AveragePool", "Identity",    "BatchNormalization"};
  if (keep.contains(n.op_type)) return static_channels(n.inputs[0], depth + 1);
  if (joins_channels(n, 0)) {
    std::int64_t sum = 0;
    auto const most = static_cast<std::int64_t>(max_graph_elements);
    for (auto const& i : n.inputs) {
      auto const c = i.empty() ? std::nullopt : static_channels(i, depth + 1);
      if (!c || *c < 0 || *c > most - sum) return std::nullopt;  // beyond any graph value: no sum of them
      sum += *c;
    }
    return sum;
  }
  return std::nullopt;
}

std::optional<Tensor> Importer::join_slot(std::string const& value, Dims const& shape, ElementType type, int depth) {
  std::size_t const rank = shape.size();
  if (stages || computed || !options.manual_sharding.empty() || rank < 3 || depth > 16) return std::nullopt;
  Node const* x = sole_consumer(value);
  if (!x || !joins_channels(*x, rank) || x->outputs.size() != 1) return std::nullopt;
  auto it = joins.find(x);
  if (it == joins.end()) {
    // Not a chain of concatenations that extend one another (DenseNet's: chained copies each input once).
    auto const prefix = [](std::vector<std::string> const& a, std::vector<std::string> const& b) {
      return a.size() < b.size() && std::equal(a.begin(), a.end(), b.begin());
    };
    for (auto const& n : model.nodes)
      if (&n != x && n.op_type == "Concat" && (prefix(x->inputs, n.inputs) || prefix(n.inputs, x->inputs)))
        return std::nullopt;
    Join j;
    std::int64_t total = 0;
    auto const most = static_cast<std::int64_t>(max_graph_elements);
    channel_visits = 4096;
    for (auto const& i : x->inputs) {
      auto const c = i.empty() ? std::nullopt : static_channels(i);
      if (!c || *c <= 0 || *c > most - total) return std::nullopt;
      j.offset.push_back(total);
      j.size.push_back(*c);
      total += *c;
    }
    Dims joined = shape;
    joined[1] = total;
    try {
      count(joined);  // within the bound, or no buffer (the Concat refuses its shape itself)
    } catch (shape_error const&) {
      return std::nullopt;
    }
    // The buffer: the Concat's own slice of a further one's (Inception's nested joins), or a variable of its own.
    if (auto outer = join_slot(x->outputs[0], joined, type, depth + 1)) {
      j.buffer = *outer;
    } else {
      Shape physical{static_cast<std::size_t>(shape[0])};
      for (std::size_t d = 2; d < rank; ++d) physical.push_back(static_cast<std::size_t>(shape[d]));
      physical.push_back(static_cast<std::size_t>(total));
      j.buffer = g.add_variable(type, physical, x->name + "/joined");
    }
    it = joins.emplace(x, std::move(j)).first;
  }
  Join const& j = it->second;
  auto const i = static_cast<std::size_t>(std::find(x->inputs.begin(), x->inputs.end(), value) - x->inputs.begin());
  Shape want = j.buffer.shape();
  want.back() = static_cast<std::size_t>(shape[1]);
  Shape have{static_cast<std::size_t>(shape[0])};
  for (std::size_t d = 2; d < rank; ++d) have.push_back(static_cast<std::size_t>(shape[d]));
  have.push_back(static_cast<std::size_t>(shape[1]));
  if (i >= j.size.size() || j.size[i] != shape[1] || have != want || j.buffer.element_type() != type)
    return std::nullopt;
  auto const o = static_cast<std::size_t>(j.offset[i]);
  return j.buffer.slice(o, o + static_cast<std::size_t>(j.size[i]), rank - 1);
}

ConvOptions Importer::conv_options() const {
  return {.available_memory_proportion = options.conv_amp, .partials = options.conv_partials};
}
MatmulOptions Importer::matmul_options() const {
  return {.available_memory_proportion = options.matmul_amp, .partials = options.matmul_partials};
}

std::vector<std::size_t> Importer::choose_layout(Dims const& out, std::vector<Value const*> const& ops) const {
  for (auto const* v : ops)
    if (!v->constant && !v->layout.empty() && v->shape == out) return v->layout;
  return {};
}

Tensor Importer::physical(Value const& v, Dims const& out, std::vector<std::size_t> const& layout) {
  Tensor t = tensor(v);
  if (!layout.empty()) {
    if (v.shape.size() < out.size()) {  // leading dimensions of 1 (a reshape of a strided view would lose its strides)
      Shape full(out.size() - v.shape.size(), 1);
      for (auto d : v.shape) full.push_back(static_cast<std::size_t>(d));
      t = t.reshape(full);
    }
    std::vector<std::size_t> inverse(layout.size());
    for (std::size_t d = 0; d < layout.size(); ++d) inverse[layout[d]] = d;
    t = t.dimshuffle(inverse);
  }
  // A map's host kernel reads each operand as one strided variable; an operand that is not one (a concatenation,
  // a reshape of a transposed view) is copied into a row-major tensor first: one exchange instead of the map's
  // vertices run one by one.
  if (t.affine()) return t;
  Tensor c = g.add_variable(t.element_type(), t.shape(), "onnx/operand");
  map_linearly(g, c);
  prog.add(tilebsp::copy(t, c));
  return c;
}

namespace {
/// The row-major tensor of a value's elements (the inverse of its layout's dimshuffle).
Tensor physical_of(Value const& v) {
  if (v.layout.empty()) return v.tensor;
  std::vector<std::size_t> inverse(v.layout.size());
  for (std::size_t d = 0; d < v.layout.size(); ++d) inverse[v.layout[d]] = d;
  return v.tensor.dimshuffle(inverse);
}
}  // namespace

void Importer::convert_inputs() {
  converted_inputs_.clear();
  ElementType const want = float_type();
  for (auto const& name : node->inputs) {
    Value const* found = name.empty() ? nullptr : lookup(name);
    if (!found) continue;
    Value const& v = *found;
    if (v.constant || !is_floating(v.type)) continue;
    ElementType const have = v.tensor.element_type();
    if (have == want || (have != ElementType::f32 && have != ElementType::f16)) continue;
    auto key = std::make_tuple(name, want, v.stage);
    auto done = conversions_.find(key);
    if (done == conversions_.end()) {
      // Converted in its physical order, so that the result keeps the value's layout.
      Value c = v;
      c.tensor = ops::cast(g, prog, physical_of(v), want);
      if (!v.layout.empty()) c.tensor = c.tensor.dimshuffle(v.layout);
      done = conversions_.emplace(key, std::move(c)).first;
    }
    converted_inputs_[name] = done->second;
  }
}

namespace {

/// What a node run on the host needs when the model runs: the node, its operator, the model's name and opset
/// (for errors), its constant inputs, and its graph inputs and outputs.
struct HostNode {
  ModelData model;  // name and opset only
  Node node;
  OpFn fn = nullptr;
  std::map<std::string, Value> constants;
  std::vector<ImportedValue> reads, writes;
};

/// Folds `h.node` on `read` (the values of h.reads, in order); its outputs, or none where it does not fold.
std::vector<std::optional<HostTensor>> fold_on_host(HostNode const& h, std::vector<HostTensor> read) {
  Graph scratch{targets::tiny(1, 1 << 16)};  // never built on: a node that folds adds nothing to it
  Sequence unused;
  ImportOptions const defaults;
  Importer x(scratch, unused, h.model, defaults);
  x.values = h.constants;
  for (std::size_t i = 0; i < h.reads.size(); ++i) {
    Value v;
    v.type = h.reads[i].type;
    v.shape = read[i].shape;
    v.constant = std::move(read[i]);
    v.host_read = true;
    x.values[h.reads[i].name] = std::move(v);
  }
  x.node = &h.node;
  h.fn(x, h.node);
  std::vector<std::optional<HostTensor>> r;
  for (auto const& o : h.node.outputs) {
    auto it = o.empty() ? x.values.end() : x.values.find(o);
    r.push_back(it != x.values.end() && it->second.constant ? it->second.constant : std::nullopt);
  }
  return r;
}

}  // namespace

void Importer::run_on_host(OpFn fn) {
  auto h = std::make_shared<HostNode>();
  h->model.name = model.name;
  h->model.opset = model.opset;
  h->node = *node;
  h->fn = fn;
  std::vector<HostTensor> placeholders;  // zeros of the inputs' shapes: what the node makes, found at import
  for (std::size_t i = 0; i < node->inputs.size(); ++i) {
    if (!has(i)) continue;
    Value const& v = in(i);
    if (v.constant) {
      h->constants[node->inputs[i]] = v;
      continue;
    }
    if (std::any_of(h->reads.begin(), h->reads.end(), [&](ImportedValue const& r) { return r.name == node->inputs[i]; })) continue;
    h->reads.push_back({node->inputs[i], v.type, v.tensor});
    placeholders.push_back(make_host(v.type, v.shape, [](std::size_t) { return 0.0; }));
  }
  std::vector<std::optional<HostTensor>> const made = fold_on_host(*h, std::move(placeholders));
  for (std::size_t i = 0; i < made.size(); ++i) {
    if (node->outputs[i].empty()) continue;
    if (!made[i])
      unsupported("the node is excluded to run on the host (excluded_nodes), but the host runs only the operators the "
                  "importer folds (elementwise, casts, shape and data-movement operators), not " + node->op_type);
    Shape shape;
    for (auto d : made[i]->shape) shape.push_back(static_cast<std::size_t>(d));
    Tensor t = g.add_variable(graph_type(made[i]->type), shape, "onnx/host/" + node->outputs[i]);
    map_linearly(g, t);
    h->writes.push_back({node->outputs[i], made[i]->type, t});
    out_tensor(i, made[i]->type, t);
  }
  prog.add(tilebsp::host([h](HostContext& ctx) {
    std::vector<HostTensor> read;
    for (auto const& r : h->reads) read.push_back(onnx::read(ctx, r));
    std::vector<std::optional<HostTensor>> const results = fold_on_host(*h, std::move(read));
    std::size_t w = 0;
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (h->node.outputs[i].empty()) continue;
      ImportedValue const& out = h->writes[w++];
      if (!results[i] || results[i]->shape != out.shape())
        throw shape_error(h->model.name + ": node '" + h->node.name + "' (" + h->node.op_type + ", run on the host): output '" +
                          out.name + "' has the shape " + (results[i] ? shape_text(results[i]->shape) : "(none)") +
                          " where the import found " + shape_text(out.shape()));
      onnx::write(ctx, out, *results[i]);
    }
  }));
}

void Importer::receive_inputs() {
  received_inputs_.clear();
  for (auto const& name : node->inputs) receive(name);
}

Value const* Importer::receive(std::string const& name) {
  auto it = !stages || name.empty() ? values.end() : values.find(name);
  if (it == values.end() || it->second.constant || it->second.stage == stage) return nullptr;
  Value const& v = it->second;
  if (v.stage > stage)
    throw option_error(where() + "the node is in pipeline stage " + std::to_string(stage) + " but its input '" + name +
                       "' is computed in the later stage " + std::to_string(v.stage) +
                       "; a stage can only read what earlier stages computed");
  auto key = std::make_pair(name, stage);
  auto done = receptions_.find(key);
  if (done == receptions_.end()) {
    // Received in its physical order, laid out tile for tile as on the stage that computed it.
    Tensor const src = physical_of(v);
    Tensor dst = receive_buffer(g, src, "onnx/stage" + std::to_string(stage) + "/" + name);
    (*stages)[stage].receives.push_back(tilebsp::receive(src, dst, v.stage));
    Value r = v;
    r.tensor = v.layout.empty() ? dst : dst.dimshuffle(v.layout);
    r.stage = stage;
    done = receptions_.emplace(key, std::move(r)).first;
  }
  return &(received_inputs_[name] = done->second);
}

expr::Types Importer::types_of(std::vector<Tensor> const& physical) {
  expr::Types types{};
  types.fill(expr::VT::any);
  for (std::size_t k = 0; k < physical.size() && k < types.size(); ++k) types[k] = expr::detail::vt_of(physical[k].element_type());
  return types;
}

std::optional<std::size_t> Importer::reusable_operand(expr::VT result, std::vector<Value const*> const& operands,
                                                      std::vector<Tensor> const& physical, Dims const& out) const {
  for (std::size_t k = 0; k < operands.size(); ++k) {
    Value const& v = *operands[k];
    if (v.constant || v.host_read || !v.zero_lower.empty() || v.shape != out || expr::detail::vt_of(physical[k].element_type()) != result)
      continue;
    // The operand's name: the input of the node being built that it is.
    std::string const* name = nullptr;
    for (std::size_t i = 0; i < node->inputs.size() && !name; ++i) {
      if (!has(i)) continue;
      auto c = converted_inputs_.find(node->inputs[i]);
      if ((c != converted_inputs_.end() ? &c->second : lookup(node->inputs[i])) == &v) name = &node->inputs[i];
    }
    if (!name || !last_reader(*name) || received_inputs_.contains(*name)) continue;
    // In the map's order (a transposed view would turn the map's one pass into runs).
    auto const a = physical[k].affine();
    auto const flat = physical[k].flatten().affine();
    if (!a || !flat || flat->strides.size() != 1 || flat->strides[0] != 1) continue;
    auto const held = holders.find({physical[k].graph_id(), a->var});
    if (held == holders.end() || held->second <= 1) return k;
  }
  return std::nullopt;
}

Tensor Importer::map(expr::Code const& code, std::vector<std::size_t>& layout, std::vector<Value const*> const& operands) {
  Dims out;
  for (auto const* v : operands) out = broadcast(out, v->shape);
  count(out);  // within the bound
  layout = choose_layout(out, operands);
  std::vector<Tensor> physical_operands;
  for (auto const* v : operands) physical_operands.push_back(physical(*v, out, layout));
  // Into an operand that nothing reads after this node, where there is one (a residual add into the convolution's
  // result, a squeeze-and-excitation's scaling into the activations it pooled): its lines are most often in the
  // cache (the convolution has just written them), where a new tensor
  // would cost a pass of read-for-ownership from memory, and its bytes on the tiles. The operand's value is dead
  // from here on: the result holds its variable instead.
  Tensor r;
  if (auto const k = reusable_operand(expr::Lowering(code, types_of(physical_operands)).result().type, operands, physical_operands, out)) {
    r = physical_operands[*k];
    ops::map_interpreted_with_output(g, prog, code, r, physical_operands);
    written_into(*operands[*k], r);
  } else {
    r = ops::map_interpreted(g, prog, code, physical_operands);
  }
  if (!layout.empty()) r = r.dimshuffle(layout);
  return r;
}

namespace {

Registry const& registry() {
  static Registry const r = [] {
    Registry x;
    add_tensor_ops(x);
    add_math_ops(x);
    add_nn_ops(x);
    return x;
  }();
  return r;
}

}  // namespace
}  // namespace detail

std::vector<std::int64_t> ImportedValue::shape() const {
  std::vector<std::int64_t> s;
  for (auto d : tensor.shape()) s.push_back(static_cast<std::int64_t>(d));
  return s;
}

std::vector<std::string> supported_operators() {
  std::vector<std::string> r;
  for (auto const& [name, fn] : detail::registry()) r.push_back(name);
  return r;
}

namespace detail {

Imported import_model(Graph& g, Sequence& prog, Model const& model, ImportOptions const& options, std::vector<NodeBuild>* nodes) {
  ModelData const& m = model.data();
  Sequence body;
  Importer imp(g, body, m, options);
  auto const& ops = registry();
  // Everything that can be refused without building is refused first: unsupported operators, unknown inputs.
  for (auto const& n : m.nodes) {
    if (!n.domain.empty())
      throw unsupported_error(m.name + ": node '" + n.name + "' (" + n.op_type + ") is in domain '" + n.domain +
                              "', which tilebsp does not support");
    if (!ops.contains(n.op_type))
      throw unsupported_error(m.name + ": node '" + n.name + "' uses operator " + n.op_type + " (opset " +
                              std::to_string(m.opset) + "), which tilebsp does not support");
  }
  for (auto const& [name, _] : options.constant_inputs)
    if (std::none_of(m.inputs.begin(), m.inputs.end(), [&](ValueInfo const& v) { return v.name == name; }))
      throw option_error(m.name + ": constant_inputs names '" + name + "', which is not an input of the model");
  if (options.batch_size < 0)
    throw option_error(m.name + ": the batch size must be positive, got " + std::to_string(options.batch_size));
  // Regular expressions: the nodes kept in float, and one per IPU for manual sharding.
  auto const compile_all = [&](std::vector<std::string> const& list, char const* what) {
    std::vector<std::regex> compiled;
    for (auto const& text : list) {
      try {
        compiled.emplace_back(text);
      } catch (std::regex_error const& e) {
        throw option_error(m.name + ": " + what + ": '" + text + "' is not a valid regular expression (" + e.what() + ")");
      }
    }
    return compiled;
  };
  std::vector<std::regex> const keep_float = compile_all(options.precision_conversion_excluded_nodes, "precision_conversion_excluded_nodes");
  std::vector<std::regex> const host_patterns = compile_all(options.excluded_nodes, "excluded_nodes");
  for (auto const& n : m.nodes)
    if (!n.name.empty() && std::any_of(host_patterns.begin(), host_patterns.end(), [&](std::regex const& x) { return std::regex_search(n.name, x); }))
      imp.on_host.insert(&n);
  std::vector<std::regex> const shards = compile_all(options.manual_sharding, "manual_sharding");
  std::size_t const ipus = g.num_tiles() / std::max<std::size_t>(1, g.target().tiles_per_ipu);
  if (shards.size() > ipus)
    throw option_error(m.name + ": manual_sharding names " + std::to_string(shards.size()) + " shards but the target has " +
                       std::to_string(ipus) + " IPU" + (ipus == 1 ? "" : "s"));
  // Pipeline stages: at most one way of giving them, no more than the IPUs, and not beside manual sharding.
  std::vector<std::regex> const stage_patterns = compile_all(options.pipeline_stages, "pipeline_stages");
  std::size_t const K = !options.pipeline_stages.empty() ? options.pipeline_stages.size()
                        : !options.pipeline_split.empty() ? options.pipeline_split.size() + 1 : 0;
  if (!options.pipeline_stages.empty() && !options.pipeline_split.empty())
    throw option_error(m.name + ": give the pipeline stages either as regular expressions (pipeline_stages) or as a split (pipeline_split), not both");
  if (K > 0 && !options.manual_sharding.empty())
    throw option_error(m.name + ": a pipeline places its stages on the IPUs itself; manual_sharding cannot be given beside it");
  if (K > ipus)
    throw option_error(m.name + ": the pipeline has " + std::to_string(K) + " stages but the target has " + std::to_string(ipus) +
                       " IPU" + (ipus == 1 ? "" : "s") + " (one stage per IPU)");
  for (std::size_t i = 0; i < options.pipeline_split.size(); ++i) {
    std::size_t const first = options.pipeline_split[i];
    if (first == 0 || first >= m.nodes.size() || (i > 0 && first <= options.pipeline_split[i - 1]))
      throw option_error(m.name + ": pipeline_split: stage " + std::to_string(i + 1) + " begins at node " + std::to_string(first) +
                         "; the first nodes of stages 1, 2, ... must increase strictly within the model's " +
                         std::to_string(m.nodes.size()) + " nodes, after node 0");
  }
  std::vector<Stage> stages;
  std::vector<Sequence> stage_programs(K);
  for (std::size_t k = 0; k < K; ++k) stages.push_back(Stage{g.shard(k), Program(Sequence{}), {}});
  if (K > 0) imp.stages = &stages;
  // A node's stage: the first pattern that matches its name, else the latest of its inputs' stages; or its run of
  // the split.
  auto const stage_of = [&](std::size_t index, Node const& n) -> std::size_t {
    if (!options.pipeline_split.empty())
      return static_cast<std::size_t>(std::upper_bound(options.pipeline_split.begin(), options.pipeline_split.end(), index) -
                                      options.pipeline_split.begin());
    for (std::size_t k = 0; k < stage_patterns.size(); ++k)
      if (!n.name.empty() && std::regex_search(n.name, stage_patterns[k])) return k;
    std::size_t latest = 0;
    for (auto const& i : n.inputs)
      if (auto it = i.empty() ? imp.values.end() : imp.values.find(i); it != imp.values.end() && !it->second.constant)
        latest = std::max(latest, it->second.stage);
    return latest;
  };
  // A node on the IPU of the first expression that matches its name, else on IPU 0; one IPU: the whole graph.
  auto const place = [&](std::string const& name) -> Graph {
    if (K > 0) return stages[0].shard;
    if (ipus <= 1) return g;
    std::size_t ipu = 0;
    for (std::size_t i = 0; i < shards.size(); ++i)
      if (!name.empty() && std::regex_search(name, shards[i])) {
        ipu = i;
        break;
      }
    return g.shard(ipu);
  };
  imp.g = place("");
  for (auto const& n : m.nodes) {
    for (auto const& i : n.inputs)
      if (!i.empty()) imp.consumers[i].push_back(&n);
    for (auto const& o : n.outputs)
      if (!o.empty()) imp.producers.emplace(o, &n);
  }
  for (auto const& o : m.outputs) imp.graph_outputs.insert(o.name);
  for (auto const& [name, t] : m.initializers) {
    Value v;
    v.type = t.type;
    v.shape = t.shape;
    v.constant = t;
    imp.values[name] = std::move(v);
  }
  // Inputs consumed by convolutions lie channels last, as the convolutions read them.
  std::set<std::string> conv_inputs;
  for (auto const& n : m.nodes)
    if (n.op_type == "Conv" && !n.inputs.empty()) conv_inputs.insert(n.inputs[0]);
  Imported r;
  for (auto const& vi : m.inputs) {
    if (auto it = options.constant_inputs.find(vi.name); it != options.constant_inputs.end()) {
      Value v;
      v.type = it->second.type;
      v.shape = it->second.shape;
      v.constant = it->second;
      imp.values[vi.name] = std::move(v);
      continue;
    }
    Value v;
    v.type = vi.type;
    for (std::size_t d = 0; d < vi.dims.size(); ++d) {
      std::int64_t x = vi.dims[d].value;
      if (x < 0 && d == 0 && options.batch_size > 0) x = options.batch_size;
      if (x < 0)
        throw shape_error(m.name + ": input '" + vi.name + "' has the symbolic dimension " + std::to_string(d) +
                          (vi.dims[d].param.empty() ? "" : " ('" + vi.dims[d].param + "')") +
                          (d == 0 ? "; fix it with the batch size" : "; tilebsp needs static shapes"));
      v.shape.push_back(x);
    }
    try {
      count(v.shape);
    } catch (shape_error const& e) {
      throw shape_error(m.name + ": input '" + vi.name + "': " + e.what());
    }
    ElementType const et = [&] {
      try {
        return imp.graph_type(vi.type);
      } catch (unsupported_error const&) {
        throw unsupported_error(m.name + ": input '" + vi.name + "' is of type " + to_string(vi.type) +
                                ", which tilebsp does not support");
      }
    }();
    Shape shape;
    for (auto x : v.shape) shape.push_back(static_cast<std::size_t>(x));
    if (conv_inputs.contains(vi.name) && shape.size() >= 3 && shape.size() <= 5) {
      Shape phys{shape[0]};
      phys.insert(phys.end(), shape.begin() + 2, shape.end());
      phys.push_back(shape[1]);
      Tensor p = imp.g.add_variable(et, phys, vi.name);
      map_linearly(imp.g, p);
      v.layout.push_back(0);
      v.layout.push_back(shape.size() - 1);
      for (std::size_t d = 1; d + 1 < shape.size(); ++d) v.layout.push_back(d);
      v.tensor = p.dimshuffle(v.layout);
    } else {
      v.tensor = imp.g.add_variable(et, shape, vi.name);
      map_linearly(imp.g, v.tensor);
    }
    r.inputs.push_back({vi.name, vi.type, v.tensor});
    imp.hold(v.tensor, 2);  // never written by a map in place
    imp.values[vi.name] = std::move(v);
  }
  if (nodes) nodes->assign(m.nodes.size(), NodeBuild{});
  // Constant nodes first: they read nothing, and a fusion may need their values before their turn in the model's
  // order (the bounds of a ReLU6 Clip, exported after the convolution it would join).
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < m.nodes.size(); ++i)
    if (m.nodes[i].op_type == "Constant" && m.nodes[i].inputs.empty()) order.push_back(i);
  for (std::size_t i = 0; i < m.nodes.size(); ++i)
    if (!(m.nodes[i].op_type == "Constant" && m.nodes[i].inputs.empty())) order.push_back(i);
  for (std::size_t index : order) {
    Node const& n = m.nodes[index];
    if (imp.fused.contains(&n)) continue;
    imp.node = &n;
    if (K > 0) {
      imp.stage = stage_of(index, n);
      imp.g = stages[imp.stage].shard;
    } else {
      imp.g = place(n.name);
    }
    imp.keep_float = options.precision == Precision::fp16 &&
                     std::any_of(keep_float.begin(), keep_float.end(), [&](std::regex const& x) { return std::regex_search(n.name, x); });
    imp.computed = nodes ? &(*nodes)[index].computed : nullptr;
    try {
      imp.receive_inputs();
      imp.convert_inputs();
      // A node run on the host when it reads values of the tiles (on known values alone it folds at import anyway).
      bool const host = imp.on_host.contains(&n) && std::any_of(n.inputs.begin(), n.inputs.end(), [&](std::string const& i) {
        Value const* v = i.empty() ? nullptr : imp.lookup(i);
        return v && !v->constant;
      });
      // The profile's operators are the model's nodes: what a node builds (its convolution, maps, copies) is
      // ranked and planned under its name and operator.
      OperatorScope const scope(imp.g, n.op_type, n.name.empty() ? n.op_type : n.name, ops::kernels_isa());
      if (host) imp.run_on_host(ops.at(n.op_type));
      else ops.at(n.op_type)(imp, n);
    } catch (onnx::model_error const&) {
      throw;
    } catch (onnx::unsupported_error const&) {
      throw;
    } catch (shape_error const& e) {
      throw shape_error(imp.where() + e.what());
    } catch (type_error const& e) {
      throw type_error(imp.where() + e.what());
    }
    imp.built.insert(&n);
    // The node's program: its own (planning), its stage's (a pipeline), or the step's.
    if (nodes) (*nodes)[index].program = std::move(body), body = Sequence{};
    else if (K > 0) stage_programs[imp.stage].add(std::move(body)), body = Sequence{};
  }
  imp.node = nullptr;
  imp.computed = nullptr;
  imp.g = place("");
  imp.keep_float = false;
  for (auto const& vi : m.outputs) {
    auto it = imp.values.find(vi.name);
    if (it == imp.values.end()) throw model_error(m.name + ": output '" + vi.name + "' is not computed by any node");
    Tensor t = imp.tensor(it->second);
    r.outputs.push_back({vi.name, it->second.type, t});
  }
  r.multiply_adds = imp.multiply_adds;
  if (K > 0) {
    for (std::size_t k = 0; k < K; ++k) stages[k].body = Program(std::move(stage_programs[k]));
    r.stages = std::move(stages);
  } else {
    prog.add(std::move(body));
  }
  return r;
}

}  // namespace detail

Imported import(Graph& g, Sequence& prog, Model const& model, ImportOptions const& options) {
  return detail::import_model(g, prog, model, options, nullptr);
}

void write(HostContext& host, ImportedValue const& v, HostTensor const& values) {
  if (values.shape != v.shape()) {
    throw shape_error("input '" + v.name + "' has shape " + shape_text(v.shape()) + ", got values of shape " +
                      shape_text(values.shape));
  }
  bool const ok = values.type == v.type || (is_floating(v.type) && values.type == DataType::float32) ||
                  (v.type == DataType::int64 && values.type == DataType::int32);
  if (!ok)
    throw type_error("input '" + v.name + "' is of type " + to_string(v.type) + ", got values of type " + to_string(values.type));
  if (values.ints.size() + values.floats.size() != values.size())
    throw shape_error("input '" + v.name + "': the values hold " + std::to_string(values.ints.size() + values.floats.size()) +
                      " elements for their shape's " + std::to_string(values.size()));
  switch (v.tensor.element_type()) {
    case ElementType::f32: host.write(v.tensor, values.floats); break;
    case ElementType::f16: host.write(v.tensor, std::vector<half>(values.floats.begin(), values.floats.end())); break;
    case ElementType::i32: {
      std::vector<std::int32_t> x;
      for (auto i : values.ints) {
        if (i < std::numeric_limits<std::int32_t>::min() || i > std::numeric_limits<std::int32_t>::max())
          throw type_error("input '" + v.name + "': the value " + std::to_string(i) + " does not fit 32 bits");
        x.push_back(static_cast<std::int32_t>(i));
      }
      host.write(v.tensor, x);
      break;
    }
    default: {
      std::vector<bool> b;
      for (auto i : values.ints) b.push_back(i != 0);
      host.write(v.tensor, b);
      break;
    }
  }
}

HostTensor read(HostContext const& host, ImportedValue const& v) {
  HostTensor t;
  t.type = v.type;
  t.shape = v.shape();
  switch (v.tensor.element_type()) {
    case ElementType::f32: t.floats = host.read<float>(v.tensor); break;
    case ElementType::f16: {
      auto const h = host.read<half>(v.tensor);
      t.floats.assign(h.begin(), h.end());
      break;
    }
    case ElementType::i32: {
      auto const x = host.read<std::int32_t>(v.tensor);
      t.ints.assign(x.begin(), x.end());
      break;
    }
    default: {
      auto const b = host.read<bool>(v.tensor);
      t.ints.assign(b.begin(), b.end());
      break;
    }
  }
  return t;
}

}  // namespace tilebsp::onnx
