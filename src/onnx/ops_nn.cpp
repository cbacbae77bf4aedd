// ONNX's network operators: convolutions (batch norms and ReLUs after them folded in), pooling, matrix products,
// normalisations, softmax and reductions, on tilebsp's planned operators.
#include "elementwise.hpp"

#include <tilebsp/ops/conv.hpp>
#include <tilebsp/ops/matmul.hpp>
#include <tilebsp/ops/pool.hpp>
#include <tilebsp/ops/reduce.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tilebsp::onnx::detail {
namespace {

using namespace expr;

Shape to_shape(Dims const& d) { return Shape(d.begin(), d.end()); }


void require_float(Importer& imp, Value const& v) {
  if (!is_floating(v.type)) imp.unsupported("element type " + to_string(v.type) + " (this operator takes floating types)");
}

/// A float host tensor on the graph in the model's float type.
Tensor host_tensor(Importer& imp, Dims shape, std::vector<float> values) {
  Value v;
  v.type = DataType::float32;
  v.shape = shape;
  HostTensor h;
  h.type = DataType::float32;
  h.shape = std::move(shape);
  h.floats = std::move(values);
  v.constant = std::move(h);
  return imp.tensor(v);
}

/// Window geometry shared by Conv and the pools: strides, pads (after auto_pad and ceil_mode) and dilations.
struct Window {
  std::vector<std::int64_t> kernel, stride, lower, upper, dilation;
};

Window window(Importer& imp, Dims const& field, std::vector<std::int64_t> kernel, bool ceil_mode) {
  std::size_t const r = field.size();
  Window w;
  w.kernel = std::move(kernel);
  if (w.kernel.size() != r) imp.invalid("kernel_shape names " + std::to_string(w.kernel.size()) + " dimensions for a field of " + std::to_string(r));
  w.stride = imp.attr_ints("strides", std::vector<std::int64_t>(r, 1));
  w.dilation = imp.attr_ints("dilations", std::vector<std::int64_t>(r, 1));
  auto const pads = imp.attr_ints("pads", std::vector<std::int64_t>(2 * r, 0));
  if (w.stride.size() != r || w.dilation.size() != r || pads.size() != 2 * r) imp.invalid("strides, dilations or pads do not match the field's rank");
  for (std::size_t d = 0; d < r; ++d) {
    if (w.stride[d] < 1 || w.dilation[d] < 1 || w.kernel[d] < 1) imp.invalid("kernel sizes, strides and dilations must be positive");
    if (pads[d] < 0 || pads[d + r] < 0) imp.unsupported("negative pads");
  }
  w.lower.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(r));
  w.upper.assign(pads.begin() + static_cast<std::ptrdiff_t>(r), pads.end());
  std::string const auto_pad = imp.attr_string("auto_pad", "NOTSET");
  for (std::size_t d = 0; d < r; ++d) {
    std::int64_t const k = (w.kernel[d] - 1) * w.dilation[d] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      std::int64_t const out = (field[d] + w.stride[d] - 1) / w.stride[d];
      std::int64_t const total = std::max<std::int64_t>(0, (out - 1) * w.stride[d] + k - field[d]);
      std::int64_t const small = total / 2;
      w.lower[d] = auto_pad == "SAME_UPPER" ? small : total - small;
      w.upper[d] = total - w.lower[d];
    } else if (auto_pad == "VALID") {
      w.lower[d] = w.upper[d] = 0;
    } else if (auto_pad != "NOTSET") {
      imp.invalid("auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER and VALID");
    }
    std::int64_t const span = field[d] + w.lower[d] + w.upper[d] - k;
    if (span < 0) imp.invalid("the (dilated) kernel is larger than the padded input");
    if (ceil_mode) {
      std::int64_t out = (span + w.stride[d] - 1) / w.stride[d] + 1;
      if ((out - 1) * w.stride[d] >= field[d] + w.lower[d]) --out;  // the last window must start in the input
      w.upper[d] += std::max<std::int64_t>(0, (out - 1) * w.stride[d] + k - (field[d] + w.lower[d] + w.upper[d]));
    }
  }
  return w;
}

std::int64_t out_size(Window const& w, Dims const& field, std::size_t d) {
  std::int64_t const k = (w.kernel[d] - 1) * w.dilation[d] + 1;
  return (field[d] + w.lower[d] + w.upper[d] - k) / w.stride[d] + 1;
}

/// The activation a convolution's bias map applies on the way: what a ReLU, a Clip with known bounds (ReLU6), a
/// SiLU (x * Sigmoid(x), EfficientNet's) or an exact GELU (x * (erf(x / a) + b) * c as PyTorch exports it, with
/// a = sqrt 2, b = 1, c = 0.5: a transformer's MLP) that alone reads the convolution would do in passes of its own.
struct Epilogue {
  enum class Kind { none, relu, clip, silu, gelu } kind = Kind::none;
  double lo = 0, hi = 0, scale = 0;  ///< clip: bounds; gelu: a, b, c
};

template <class T, class>
using as = T;

/// y = act(y + bias) (or act(y) without a bias) in place, in one map over the channels-last result: fused kernels
/// (the hottest maps of a CNN, one per activation and float type), unlike the importer's other maps.
/// f(e's activation of expression v): one expression per kind, each compiled where f builds a map of it.
template <class V, class F>
auto activated(Epilogue const& e, V const& v, F&& f) {
  switch (e.kind) {
    case Epilogue::Kind::relu: return f(relu(v));
    case Epilogue::Kind::clip: return f(min(max(v, constant(e.lo)), constant(e.hi)));
    case Epilogue::Kind::silu: return f(v * sigmoid(v));
    case Epilogue::Kind::gelu: return f(v * (erf(v / constant(e.lo)) + constant(e.hi)) * constant(e.scale));
    case Epilogue::Kind::none: break;
  }
  return f(v);
}

template <class T, class... B>
void epilogue(Importer& imp, Tensor const& y, Epilogue const& e, B const&... bias) {
  auto const run = [&](auto const& v) {
    activated(e, v, [&](auto const& a) { ops::map_in_place<T, as<T, B>...>(imp.g, imp.prog, a, y, bias...); });
  };
  if constexpr (sizeof...(B) > 0) run(_1 + _2);
  else if (e.kind != Epilogue::Kind::none) run(_1);
}

/// A residual operand of a convolution's result (fuse_residual): the value, and whether the convolution may write
/// the sum into it (Importer::last_reader, Importer::sole_holder).
struct Residual {
  Value const* value = nullptr;
  bool writable = false;
};

/// The convolution of logical (channels-first) `x` with tilebsp weights [G, k..., Ci, Co] and a per-channel
/// bias (empty: none), then `act`, adding `residual` (a value of the result's shape, if any) before the bias: the
/// convolution adds its sum to the residual's values (ops::conv_accumulate), in place where the residual is
/// writable and not a variable the convolution reads (ONNX Runtime's fused Conv + Add: the residual's lines read
/// and written once), else in a copy of them. Either way the same bits: act((residual + conv) + bias).
/// Returns the channels-first view of the channels-last result, which lies in `into` (Importer::join_slot) where
/// that is given and of the result's type, or in the residual's variable.
Value convolve(Importer& imp, Value const& x, Window const& w, std::int64_t groups, std::int64_t out_channels,
               std::vector<float> const& weights, std::vector<float> bias, Epilogue const& act, std::string const& name,
               Residual const& residual = {}, std::optional<Tensor> const& into = std::nullopt) {
  std::size_t const rank = x.shape.size();
  Dims const field(x.shape.begin() + 2, x.shape.end());
  ConvParams p;
  p.batch = x.shape[0];
  p.input_field = field;
  p.kernel_shape = w.kernel;
  p.channels(x.shape[1], out_channels, groups);
  p.stride = w.stride;
  p.padding_lower = w.lower;
  p.padding_upper = w.upper;
  p.kernel_dilation = w.dilation;
  Dims wshape{groups};
  wshape.insert(wshape.end(), w.kernel.begin(), w.kernel.end());
  wshape.push_back(p.input_channels);
  wshape.push_back(p.output_channels);
  Tensor const wt = host_tensor(imp, wshape, weights);
  Tensor const in = imp.tensor(x).dimshuffle(to_last(rank));
  bool const slot = into && into->element_type() == in.element_type();
  Tensor y;
  if (residual.value) {
    Tensor const r = imp.tensor(*residual.value).dimshuffle(to_last(rank));
    auto const var = r.affine()->var;  // one dense variable (fuse_residual)
    auto const runs = in.element_runs();
    bool const read =
        !runs || std::any_of(runs->runs.begin(), runs->runs.end(), [&](auto const& run) { return run.var == var; });
    if (residual.writable && !slot && !read) {
      y = r;
      imp.written_into(*residual.value, y);
    } else {
      y = slot ? *into : imp.g.add_variable(r.element_type(), p.output_shape(), name);
      imp.prog.add(copy(r, y));
    }
    ops::conv_accumulate(imp.g, imp.prog, in, wt, y, p, imp.conv_options(), name);
  } else if (slot) {
    y = *into;
    ops::conv_with_output(imp.g, imp.prog, in, wt, y, p, imp.conv_options(), name);
  } else {
    y = ops::conv(imp.g, imp.prog, in, wt, p, imp.conv_options(), name);
  }
  imp.multiply_adds += static_cast<double>(y.num_elements()) * static_cast<double>(p.input_channels) *
                       static_cast<double>(count(w.kernel));
  bool const half_type = y.element_type() == ElementType::f16;
  std::optional<Tensor> b;  // one value per channel: the map broadcasts it over the positions
  if (!bias.empty()) {
    auto const channels = static_cast<std::int64_t>(bias.size());
    b = host_tensor(imp, {channels}, std::move(bias));
  }
  if (b) {
    if (half_type) epilogue<half>(imp, y, act, *b);
    else epilogue<float>(imp, y, act, *b);
  } else {
    if (half_type) epilogue<half>(imp, y, act);
    else epilogue<float>(imp, y, act);
  }
  Value r;
  r.type = x.type;
  r.layout = to_first(rank);
  r.tensor = y.dimshuffle(r.layout);
  for (auto d : r.tensor.shape()) r.shape.push_back(static_cast<std::int64_t>(d));
  return r;
}

/// The exact GELU that alone reads `value` (`readers`, its two readers), as PyTorch exports it: Div(value, a) ->
/// Erf -> Add(b) -> Mul(value, .) -> Mul(c), a, b and c constants of one element and each intermediate read by the
/// next node alone; marked fused, with `value` renamed to the last Mul's result. None when it is not one.
Epilogue fuse_gelu(Importer& imp, std::string& value, std::size_t rank, std::vector<Node const*> const& readers) {
  // The other operand of binary node n (the one that is not `from`) when it is a constant of one element that does
  // not raise the rank: its value.
  auto const scalar = [&](Node const& n, std::string const& from) -> std::optional<double> {
    if (n.inputs.size() != 2 || n.outputs.size() != 1 || !n.attributes.empty() || n.inputs[0] == n.inputs[1])
      return std::nullopt;
    if (n.inputs[0] != from && n.inputs[1] != from) return std::nullopt;
    Value const* c = imp.lookup(n.inputs[0] == from ? n.inputs[1] : n.inputs[0]);
    if (!c || !c->constant || c->constant->size() != 1 || c->shape.size() > rank || !is_floating(c->type))
      return std::nullopt;
    return c->constant->value(0);
  };
  for (int s = 0; s < 2; ++s) {
    Node const* div = readers[static_cast<std::size_t>(s)];
    Node const* mul = readers[static_cast<std::size_t>(1 - s)];
    if (div->op_type != "Div" || div->inputs.size() != 2 || div->inputs[0] != value || mul->op_type != "Mul") continue;
    auto const a = scalar(*div, value);
    Node const* erf = a ? imp.sole_consumer(div->outputs[0]) : nullptr;
    if (!erf || erf->op_type != "Erf" || erf->inputs.size() != 1 || erf->outputs.size() != 1) continue;
    Node const* add = imp.sole_consumer(erf->outputs[0]);
    auto const b = add && add->op_type == "Add" ? scalar(*add, erf->outputs[0]) : std::nullopt;
    if (!b || imp.sole_consumer(add->outputs[0]) != mul) continue;
    auto const reads = [&](std::size_t i, std::string const& v) { return mul->inputs[i] == v; };
    if (mul->inputs.size() != 2 || mul->outputs.size() != 1 ||
        !((reads(0, value) && reads(1, add->outputs[0])) || (reads(1, value) && reads(0, add->outputs[0]))))
      continue;
    Node const* half_mul = imp.sole_consumer(mul->outputs[0]);
    auto const c = half_mul && half_mul->op_type == "Mul" ? scalar(*half_mul, mul->outputs[0]) : std::nullopt;
    if (!c) continue;
    for (Node const* n : {div, erf, add, mul, half_mul}) imp.fused.insert(n);
    value = half_mul->outputs[0];
    return {Epilogue::Kind::gelu, *a, *b, *c};
  }
  return {};
}

/// The activation that alone reads `value` (Relu; Clip with known bounds; Sigmoid whose result only a Mul by
/// `value` reads, that Mul being the only other reader of `value`: SiLU; an exact GELU, fuse_gelu), marked fused,
/// with `value` (of rank `rank`) renamed to the activation's result. None when there is no such node.
Epilogue fuse_activation(Importer& imp, std::string& value, std::size_t rank) {
  auto const it = imp.consumers.find(value);
  if (it == imp.consumers.end() || imp.graph_outputs.contains(value)) return {};
  auto const& readers = it->second;
  if (std::any_of(readers.begin(), readers.end(), [&](Node const* r) { return imp.on_host.contains(r); })) return {};
  if (readers.size() == 1 && readers[0]->op_type == "Relu") {
    imp.fused.insert(readers[0]);
    value = readers[0]->outputs[0];
    return {Epilogue::Kind::relu};
  }
  if (readers.size() == 1 && readers[0]->op_type == "Clip" && readers[0]->outputs.size() == 1) {
    Node const& c = *readers[0];
    auto known = [&](std::size_t i) -> HostTensor const* {
      if (i >= c.inputs.size() || c.inputs[i].empty()) return nullptr;
      auto v = imp.values.find(c.inputs[i]);
      return v != imp.values.end() && v->second.constant && v->second.constant->size() == 1 ? &*v->second.constant : nullptr;
    };
    HostTensor const *lo = known(1), *hi = known(2);
    if (lo && hi && c.attributes.empty()) {
      imp.fused.insert(readers[0]);
      value = c.outputs[0];
      return {Epilogue::Kind::clip, lo->value(0), hi->value(0)};
    }
  }
  if (readers.size() == 2) {
    if (Epilogue const g = fuse_gelu(imp, value, rank, readers); g.kind != Epilogue::Kind::none) return g;
    for (int s = 0; s < 2; ++s) {
      Node const* sig = readers[static_cast<std::size_t>(s)];
      Node const* mul = readers[static_cast<std::size_t>(1 - s)];
      if (sig->op_type != "Sigmoid" || mul->op_type != "Mul" || sig->outputs.size() != 1) continue;
      if (imp.sole_consumer(sig->outputs[0]) != mul || mul->inputs.size() != 2) continue;
      bool const pair = (mul->inputs[0] == value && mul->inputs[1] == sig->outputs[0]) ||
                        (mul->inputs[1] == value && mul->inputs[0] == sig->outputs[0]);
      if (!pair) continue;
      imp.fused.insert(sig);
      imp.fused.insert(mul);
      value = mul->outputs[0];
      return {Epilogue::Kind::silu};
    }
  }
  return {};
}

/// The residual Add that alone reads a convolution's result `value` (of logical shape `shape`, channels last on the
/// tiles), when its other operand is a tensor of that shape already computed (in this pipeline stage or received
/// from an earlier one), lying channels last as well (ResNet's identity, or the projection its ONNX order computes
/// first): marked fused, with `value` renamed to the Add's result, and that operand returned. The convolution then
/// adds its sum to the operand (convolve): in place where the Add is its last reader and no other value holds it
/// (Residual::writable), else in a copy. None: Residual::value null.
Residual fuse_residual(Importer& imp, std::string& value, Dims const& shape, ElementType type) {
  Node const* add = imp.sole_consumer(value);
  if (!add || add->op_type != "Add" || add->inputs.size() != 2 || add->outputs.size() != 1 || add->inputs[0] == add->inputs[1] ||
      !add->attributes.empty())
    return {};
  std::string const& name = add->inputs[0] == value ? add->inputs[1] : add->inputs[0];
  Value const* other = imp.lookup(name);
  if (!other || other->constant || other->host_read || !other->zero_lower.empty() || other->shape != shape ||
      other->stage > imp.stage || !other->tensor.valid() || other->tensor.element_type() != type)
    return {};
  auto const flat = imp.tensor(*other).dimshuffle(to_last(shape.size())).flatten().affine();
  if (!flat || flat->strides.size() != 1 || flat->strides[0] != 1) return {};
  // Computed by an earlier pipeline stage: received into this one, never written (the reception is shared).
  Value const* received = imp.receive(name);
  imp.fused.insert(add);
  value = add->outputs[0];
  if (received) return {received, false};
  return {other, imp.last_reader(name, add) && imp.sole_holder(*other)};
}

/// A value whose zeros a Pad left to this node (Value::zero_lower): the unpadded value, the zeros added to `w`'s
/// padding. Any other value as it is.
Value unpadded(Value x, Window& w) {
  for (std::size_t d = 0; d < x.zero_lower.size(); ++d) {
    w.lower[d] += x.zero_lower[d];
    w.upper[d] += x.zero_upper[d];
    x.shape[d + 2] -= x.zero_lower[d] + x.zero_upper[d];
  }
  x.zero_lower.clear();
  x.zero_upper.clear();
  return x;
}

void conv(Importer& imp, Node const& n) {
  imp.only_attrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  Value const& x = imp.in(0);
  require_float(imp, x);
  HostTensor const& W = imp.known(1, "the weights");
  std::size_t const rank = x.shape.size();
  if (rank < 3 || rank > 5) imp.unsupported("a convolution over " + std::to_string(rank - 2) + " spatial dimensions (1 to 3 are supported)");
  if (W.shape.size() != rank) imp.invalid("the weights' rank differs from the input's");
  std::int64_t const G = imp.attr_int("group", 1), M = W.shape[0], C = x.shape[1];
  if (G < 1 || C % G != 0 || M % G != 0 || W.shape[1] != C / G)
    imp.invalid("weights of shape [" + std::to_string(M) + ", " + std::to_string(W.shape[1]) + ", ...] do not fit " +
                std::to_string(C) + " input channels in " + std::to_string(G) + " groups");
  Dims const field(x.shape.begin() + 2, x.shape.end());
  Dims const kernel(W.shape.begin() + 2, W.shape.end());
  auto const ks = imp.attr_ints("kernel_shape", kernel);
  if (ks != kernel) imp.invalid("kernel_shape differs from the weights' shape");
  Window const w = window(imp, field, kernel, false);
  // ONNX weights [M, C/G, k...] to tilebsp's [G, k..., C/G, M/G].
  std::int64_t const Ci = C / G, Co = M / G;
  std::size_t const K = count(kernel);
  std::vector<float> wt(W.floats.size());
  std::vector<float> bias;
  if (imp.has(2)) {
    HostTensor const& B = imp.known(2, "the bias");
    if (B.size() != static_cast<std::size_t>(M)) imp.invalid("the bias holds " + std::to_string(B.size()) + " values for " + std::to_string(M) + " channels");
    bias = B.floats;
  }
  std::vector<double> scale(static_cast<std::size_t>(M), 1.0);
  // A batch norm that alone reads the convolution's result folds into its weights and bias.
  Node const* bn = imp.sole_consumer(n.outputs[0]);
  std::string out_name = n.outputs[0];
  if (bn && bn->op_type == "BatchNormalization" && bn->inputs.size() == 5 && bn->outputs.size() == 1) {
    auto known = [&](std::size_t i) -> HostTensor const* {
      auto it = imp.values.find(bn->inputs[i]);
      return it != imp.values.end() && it->second.constant && it->second.constant->size() == static_cast<std::size_t>(M)
                 ? &*it->second.constant : nullptr;
    };
    HostTensor const *s = known(1), *b = known(2), *mean = known(3), *var = known(4);
    auto const eps = bn->attributes.contains("epsilon") ? bn->attributes.at("epsilon").f : 1e-5f;
    bool const training = bn->attributes.contains("training_mode") && bn->attributes.at("training_mode").i != 0;
    if (s && b && mean && var && !training) {
      if (bias.empty()) bias.assign(static_cast<std::size_t>(M), 0.0f);
      for (std::size_t m = 0; m < static_cast<std::size_t>(M); ++m) {
        scale[m] = s->floats[m] / std::sqrt(static_cast<double>(var->floats[m]) + eps);
        bias[m] = static_cast<float>((bias[m] - mean->floats[m]) * scale[m] + b->floats[m]);
      }
      imp.fused.insert(bn);
      out_name = bn->outputs[0];
    }
  }
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t c = 0; c < Ci; ++c)
      for (std::size_t k = 0; k < K; ++k) {
        std::int64_t const g = m / Co, o = m % Co;
        std::size_t const dst = ((static_cast<std::size_t>(g) * K + k) * static_cast<std::size_t>(Ci) + static_cast<std::size_t>(c)) * static_cast<std::size_t>(Co) + static_cast<std::size_t>(o);
        wt[dst] = static_cast<float>(W.floats[(static_cast<std::size_t>(m * Ci + c)) * K + k] * scale[static_cast<std::size_t>(m)]);
      }
  Window padded = w;
  Value const src = unpadded(x, padded);
  Dims out_shape{x.shape[0], M};
  for (std::size_t d = 0; d + 2 < rank; ++d) out_shape.push_back(out_size(padded, Dims(src.shape.begin() + 2, src.shape.end()), d));
  Residual const residual = fuse_residual(imp, out_name, out_shape, imp.float_type());
  Epilogue const act = fuse_activation(imp, out_name, out_shape.size());
  std::optional<Tensor> const into = imp.join_slot(out_name, out_shape, imp.tensor(src).element_type());
  Value y = convolve(imp, src, padded, G, M, wt, std::move(bias), act, n.name, residual, into);
  imp.set(out_name, std::move(y));
}

void batch_norm(Importer& imp, Node const&) {
  imp.only_attrs({"epsilon", "momentum", "training_mode"});
  if (imp.attr_int("training_mode", 0) != 0) imp.unsupported("training_mode 1: tilebsp imports models for inference");
  Value const& x = imp.in(0);
  require_float(imp, x);
  double const eps = imp.attr_float("epsilon", 1e-5f);
  Dims pshape{x.shape.size() > 1 ? x.shape[1] : 1};
  for (std::size_t d = 2; d < x.shape.size(); ++d) pshape.push_back(1);
  std::vector<Value> p;
  for (std::size_t i = 1; i < 5; ++i) {
    Value v = imp.in(i);
    if (count(v.shape) != static_cast<std::size_t>(pshape[0])) imp.invalid("input " + std::to_string(i) + " must hold one value per channel");
    v.shape = pshape;
    if (v.constant) v.constant->shape = pshape;
    else v.tensor = v.tensor.reshape(to_shape(pshape));
    p.push_back(std::move(v));
  }
  if (p[0].constant && p[1].constant && p[2].constant && p[3].constant) {
    // Known statistics: one multiply-add per element.
    std::size_t const C = static_cast<std::size_t>(pshape[0]);
    std::vector<float> a(C), b(C);
    for (std::size_t c = 0; c < C; ++c) {
      double const s = p[0].constant->floats[c] / std::sqrt(static_cast<double>(p[3].constant->floats[c]) + eps);
      a[c] = static_cast<float>(s);
      b[c] = static_cast<float>(p[1].constant->floats[c] - p[2].constant->floats[c] * s);
    }
    Value va = p[0], vb = p[1];
    va.constant->floats = std::move(a);
    vb.constant->floats = std::move(b);
    if (x.constant) return imp.out(0, graph_map<FloatTypes>(imp, _1 * _2 + _3, x.type, x, va, vb));
    // A batch norm that no convolution precedes (DenseNet's, after each concatenation) is a compiled map, with
    // the activation that alone reads it: one pass over the activations instead of two interpreted ones.
    std::string out = imp.node->outputs[0];
    Epilogue const act = fuse_activation(imp, out, x.shape.size());
    Value r;
    r.type = x.type;
    auto const build = [&](auto type) {
      using T = decltype(type);
      return activated(act, _1 * _2 + _3, [&](auto const& e) { return imp.map_fused<T, T, T>(e, r.layout, x, va, vb); });
    };
    r.tensor = imp.float_type() == ElementType::f16 ? build(half{}) : build(0.0f);
    for (auto d : r.tensor.shape()) r.shape.push_back(static_cast<std::int64_t>(d));
    imp.set(out, std::move(r));
    return;
  }
  imp.out(0, graph_map<FloatTypes>(imp, (_1 - _4) * _2 * rsqrt(_5 + constant(eps)) + _3, x.type, x, p[0], p[1], p[2], p[3]));
}

PoolParams pool_params(Window const& w) {
  return {.kernel_shape = w.kernel, .stride = w.stride, .padding_lower = w.lower, .padding_upper = w.upper};
}

void max_pool(Importer& imp, Node const& n) {
  imp.only_attrs({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"});
  Value const& x = imp.in(0);
  require_float(imp, x);
  if (n.outputs.size() > 1 && !n.outputs[1].empty()) imp.unsupported("the Indices output");
  if (imp.attr_int("storage_order", 0) != 0) imp.unsupported("storage_order 1");
  std::size_t const rank = x.shape.size();
  if (rank < 3 || rank > 5) imp.unsupported("pooling over " + std::to_string(rank - 2) + " spatial dimensions");
  Dims const field(x.shape.begin() + 2, x.shape.end());
  Window const w = window(imp, field, imp.attr_ints("kernel_shape"), imp.attr_int("ceil_mode", 0) != 0);
  for (auto d : w.dilation)
    if (d != 1) imp.unsupported("dilated max pooling");
  for (std::size_t d = 0; d < field.size(); ++d)
    if (w.lower[d] >= w.kernel[d] || w.upper[d] >= w.kernel[d]) imp.unsupported("pads as large as the kernel");
  Tensor y = ops::max_pool(imp.g, imp.prog, imp.tensor(x).dimshuffle(to_last(rank)), pool_params(w), n.name);
  Value r;
  r.type = x.type;
  r.layout = to_first(rank);
  r.tensor = y.dimshuffle(r.layout);
  for (auto d : r.tensor.shape()) r.shape.push_back(static_cast<std::int64_t>(d));
  imp.out(0, r);
}

void average_pool(Importer& imp, Node const& n) {
  imp.only_attrs({"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"});
  Value const& x = imp.in(0);
  require_float(imp, x);
  std::size_t const rank = x.shape.size();
  if (rank < 3 || rank > 5) imp.unsupported("pooling over " + std::to_string(rank - 2) + " spatial dimensions");
  Dims const field(x.shape.begin() + 2, x.shape.end());
  auto const pads = imp.attr_ints("pads", std::vector<std::int64_t>(2 * field.size(), 0));
  Window const w = window(imp, field, imp.attr_ints("kernel_shape"), imp.attr_int("ceil_mode", 0) != 0);
  bool const include_pad = imp.attr_int("count_include_pad", 0) != 0;
  // A depthwise convolution with weights 1, then each output position divided by its window's count: the
  // elements inside the input (and the explicit pads, with count_include_pad; never ceil_mode's extension).
  std::int64_t const C = x.shape[1];
  std::size_t const K = count(w.kernel);
  Dims out;
  for (std::size_t d = 0; d < field.size(); ++d) out.push_back(out_size(w, field, d));
  // Zeros a Pad left to this pool (Value::zero_lower) are inputs the windows count, whatever count_include_pad.
  Window all = w;
  Value const src = unpadded(x, all);
  std::string const ap = imp.attr_string("auto_pad", "NOTSET");
  // A window's count is the product of its counts along each axis: the taps k < kernel with lo <= start + k *
  // dilation < hi, in the unpadded input's coordinates (the window's start, the range it counts).
  std::vector<std::int64_t> lo(field.size()), hi(field.size());
  for (std::size_t d = 0; d < field.size(); ++d) {
    lo[d] = -(x.zero_lower.empty() ? 0 : x.zero_lower[d]);
    hi[d] = src.shape[d + 2] + (x.zero_upper.empty() ? 0 : x.zero_upper[d]);
    if (include_pad) {
      lo[d] -= ap == "NOTSET" ? pads[d] : w.lower[d];
      hi[d] += ap == "NOTSET" ? pads[d + field.size()] : w.upper[d];
    }
  }
  auto const taps = [&](std::size_t d, std::int64_t o) {
    std::int64_t const start = o * w.stride[d] - all.lower[d], dil = w.dilation[d];
    auto const first_at_least = [&](std::int64_t v) {  // the least k >= 0 with start + k * dil >= v
      std::int64_t const gap = v - start;
      return gap <= 0 ? std::int64_t{0} : (gap + dil - 1) / dil;
    };
    std::int64_t const a = first_at_least(lo[d]), b = std::min(w.kernel[d], first_at_least(hi[d]));
    return static_cast<double>(std::max<std::int64_t>(0, b - a));
  };
  count(out);  // within the bound
  bool uniform = true;
  for (std::size_t d = 0; d < field.size(); ++d) {
    if (static_cast<std::size_t>(out[d]) > max_folded_elements)
      imp.unsupported("an average pool of " + std::to_string(out[d]) + " output positions along an axis (its divisors, "
                      "computed at import, are limited to 2^27 per axis)");
    for (std::int64_t o = 1; o < out[d] && uniform; ++o) uniform = taps(d, o) == taps(d, 0);
  }
  if (static_cast<double>(C) * static_cast<double>(K) > static_cast<double>(max_folded_elements))
    imp.unsupported("an average pool of " + std::to_string(K) + "-tap windows over " + std::to_string(C) +
                    " channels (its weights, computed at import, are limited to 2^27 values)");
  // Every window counting the same (no padding counted apart, or count_include_pad): the weights are the one
  // divisor, and no map follows (Inception's pools after their Pads).
  if (uniform) {
    double cnt = 1;
    for (std::size_t d = 0; d < field.size(); ++d) cnt *= taps(d, 0);
    return imp.out(0, convolve(imp, src, all, C, C, std::vector<float>(static_cast<std::size_t>(C) * K, static_cast<float>(1.0 / cnt)),
                               {}, {}, n.name));
  }
  // Else the sums times each axis' 1 / count at the position ([out[d], 1, ...] operands: no per-position table).
  Value y = convolve(imp, src, all, C, C, std::vector<float>(static_cast<std::size_t>(C) * K, 1.0f), {}, {}, n.name);
  std::vector<Value> inv(field.size());
  for (std::size_t d = 0; d < field.size(); ++d) {
    Dims shape(field.size() - d, 1);
    shape[0] = out[d];
    inv[d].type = x.type;
    inv[d].shape = shape;
    inv[d].constant = make_host(DataType::float32, shape, [&](std::size_t o) { return 1.0 / taps(d, static_cast<std::int64_t>(o)); });
  }
  if (field.size() == 1) return imp.out(0, graph_map<FloatTypes>(imp, _1 * _2, x.type, y, inv[0]));
  if (field.size() == 2) return imp.out(0, graph_map<FloatTypes>(imp, _1 * _2 * _3, x.type, y, inv[0], inv[1]));
  imp.out(0, graph_map<FloatTypes>(imp, _1 * _2 * _3 * _4, x.type, y, inv[0], inv[1], inv[2]));
}

/// Reduces `x` over `axes` with `op`, times `scale` (in f32, before rounding: means stay within f16's range),
/// keeping the dimensions (size 1) when `keep`.
Value reduced(Importer& imp, Value const& x, std::vector<std::size_t> const& axes, ops::ReduceOp op, bool keep,
              double scale = 1.0) {
  Value r;
  r.type = x.type;
  Dims kept;
  for (std::size_t d = 0; d < x.shape.size(); ++d) {
    bool const gone = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!gone) r.shape.push_back(x.shape[d]);
    kept.push_back(gone ? 1 : x.shape[d]);
  }
  if (axes.empty()) {
    r = x;
    return r;
  }
  Tensor t = ops::scaled_reduce(imp.g, imp.prog, imp.tensor(x), axes, op, static_cast<float>(scale), imp.node->name);
  if (keep) r.shape = kept;
  r.tensor = t.reshape(to_shape(r.shape));
  return r;
}

void global_pool(Importer& imp, Node const& n) {
  imp.only_attrs({});
  Value const& x = imp.in(0);
  require_float(imp, x);
  std::vector<std::size_t> axes;
  double positions = 1;
  for (std::size_t d = 2; d < x.shape.size(); ++d) axes.push_back(d), positions *= static_cast<double>(x.shape[d]);
  bool const avg = n.op_type == "GlobalAveragePool";
  // The average of a channels-last activation (a convolution's result) as a product: per image, a row of
  // 1 / positions times its [positions, channels] matrix. One pass over the activation on the matmul's host kernel,
  // vectorised along the channels; ops::reduce would take each position of each channel as a segment of its own.
  std::size_t const r = x.shape.size();
  bool channels_last = !x.constant && r >= 3 && x.layout.size() == r && x.layout[0] == 0 && x.layout[1] == r - 1;
  for (std::size_t d = 2; channels_last && d < r; ++d) channels_last = x.layout[d] == d - 1;
  if (avg && channels_last) {
    auto const N = static_cast<std::size_t>(x.shape[0]), C = static_cast<std::size_t>(x.shape[1]);
    auto const P = static_cast<std::size_t>(positions);
    std::vector<std::size_t> inverse(r);
    for (std::size_t d = 0; d < r; ++d) inverse[x.layout[d]] = d;
    Tensor const rows = imp.tensor(x).dimshuffle(inverse).reshape({N, P, C});  // [N, positions, C], row-major
    Value weights;
    weights.type = x.type;
    weights.shape = {1, static_cast<std::int64_t>(P)};
    weights.constant = make_host(x.type, weights.shape, [&](std::size_t) { return 1.0 / positions; });
    Tensor const w = imp.tensor(weights).reshape({1, 1, P}).broadcast({N, 1, P});
    MatmulOptions options = imp.matmul_options();
    options.partials = ElementType::f32;  // a pool sums in float, whatever partials the model's MatMuls take
    Tensor const y = ops::matmul(imp.g, imp.prog, w, rows, options, n.name);  // [N, 1, C]
    Value out;
    out.type = x.type;
    out.shape = {x.shape[0], x.shape[1]};
    Shape shape{N, C};
    for (std::size_t d = 2; d < r; ++d) out.shape.push_back(1), shape.push_back(1);
    out.tensor = y.reshape(shape);
    return imp.out(0, std::move(out));
  }
  imp.out(0, reduced(imp, x, axes, avg ? ops::ReduceOp::add : ops::ReduceOp::max, true, avg ? 1.0 / positions : 1.0));
}

void reduce_op(Importer& imp, Node const& n) {
  imp.only_attrs({"axes", "keepdims", "noop_with_empty_axes"});
  Value const& x = imp.in(0);
  require_float(imp, x);
  std::vector<std::int64_t> axes = imp.attr_ints("axes");
  if (imp.has(1)) axes = imp.known_ints(1, "the axes");
  bool const keep = imp.attr_int("keepdims", 1) != 0;
  std::vector<std::size_t> dims;
  if (axes.empty()) {
    if (imp.attr_int("noop_with_empty_axes", 0) != 0) return imp.out(0, x);
    for (std::size_t d = 0; d < x.shape.size(); ++d) dims.push_back(d);
  } else {
    for (auto a : axes) dims.push_back(imp.axis(a, x.shape.size()));
    std::sort(dims.begin(), dims.end());
    dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  }
  double n_reduced = 1;
  for (auto d : dims) n_reduced *= static_cast<double>(x.shape[d]);
  std::string const& op = n.op_type;
  if (op == "ReduceSum") return imp.out(0, reduced(imp, x, dims, ops::ReduceOp::add, keep));
  if (op == "ReduceMax") return imp.out(0, reduced(imp, x, dims, ops::ReduceOp::max, keep));
  if (op == "ReduceMin") return imp.out(0, reduced(imp, x, dims, ops::ReduceOp::min, keep));
  if (op == "ReduceProd") return imp.out(0, reduced(imp, x, dims, ops::ReduceOp::mul, keep));
  if (op == "ReduceSumSquare") return imp.out(0, reduced(imp, x, dims, ops::ReduceOp::square_add, keep));
  if (op == "ReduceLogSumExp") return imp.out(0, reduced(imp, x, dims, ops::ReduceOp::log_add, keep));
  if (op == "ReduceL2") {
    Value s = reduced(imp, x, dims, ops::ReduceOp::square_add, keep);
    return imp.out(0, graph_map<FloatTypes>(imp, sqrt(_1), x.type, s));
  }
  if (op == "ReduceL1") {
    Value a = graph_map<FloatTypes>(imp, abs(_1), x.type, x);
    return imp.out(0, reduced(imp, a, dims, ops::ReduceOp::add, keep));
  }
  if (op == "ReduceLogSum") {
    Value s = reduced(imp, x, dims, ops::ReduceOp::add, keep);
    return imp.out(0, graph_map<FloatTypes>(imp, log(_1), x.type, s));
  }
  imp.out(0, reduced(imp, x, dims, ops::ReduceOp::add, keep, 1.0 / n_reduced));  // ReduceMean
}

/// The map of `e` over the operands as one kernel compiled for the node's float type (Importer::map_fused): for
/// the maps of a transformer's every layer (softmax, layer norm), where the interpreter's passes over each block
/// cost more than the arithmetic.
template <class E, class... V>
Value compiled_map(Importer& imp, E const& e, DataType out_type, V const&... v) {
  Value r;
  r.type = out_type;
  auto const build = [&](auto type) {
    using T = decltype(type);
    return imp.map_fused<as<T, V>...>(e, r.layout, v...);
  };
  r.tensor = imp.float_type() == ElementType::f16 ? build(half{}) : build(0.0f);
  for (auto d : r.tensor.shape()) r.shape.push_back(static_cast<std::int64_t>(d));
  return r;
}

void softmax(Importer& imp, Node const& n) {
  imp.only_attrs({"axis"});
  Value const& x = imp.in(0);
  require_float(imp, x);
  std::size_t const a = imp.axis(imp.attr_int("axis", -1), x.shape.size());
  Value const m = reduced(imp, x, {a}, ops::ReduceOp::max, true);
  if (n.op_type == "LogSoftmax") {
    Value const e = graph_map<FloatTypes>(imp, exp(_1 - _2), x.type, x, m);
    Value const s = reduced(imp, e, {a}, ops::ReduceOp::add, true);
    return imp.out(0, graph_map<FloatTypes>(imp, _1 - _2 - log(_3), x.type, x, m, s));
  }
  Value const e = compiled_map(imp, exp(_1 - _2), x.type, x, m);
  Value const s = reduced(imp, e, {a}, ops::ReduceOp::add, true);
  imp.out(0, compiled_map(imp, _1 / _2, x.type, e, s));
}

void layer_norm(Importer& imp, Node const& n) {
  imp.only_attrs({"axis", "epsilon", "stash_type"});
  Value const& x = imp.in(0);
  require_float(imp, x);
  std::size_t const a = imp.axis(imp.attr_int("axis", -1), x.shape.size());
  double const eps = imp.attr_float("epsilon", 1e-5f);
  std::vector<std::size_t> dims;
  double cnt = 1;
  for (std::size_t d = a; d < x.shape.size(); ++d) dims.push_back(d), cnt *= static_cast<double>(x.shape[d]);
  double const inv = 1.0 / cnt;
  Value const mean = reduced(imp, x, dims, ops::ReduceOp::add, true, inv);
  Value const centred = compiled_map(imp, _1 - _2, x.type, x, mean);
  Value const var = reduced(imp, centred, dims, ops::ReduceOp::square_add, true, inv);
  Value const& scale = imp.in(1);
  if (imp.has(2)) {
    Value const& bias = imp.in(2);
    imp.out(0, compiled_map(imp, _1 * rsqrt(_2 + constant(eps)) * _3 + _4, x.type, centred, var, scale, bias));
  } else {
    imp.out(0, graph_map<FloatTypes>(imp, _1 * rsqrt(_2 + constant(eps)) * _3, x.type, centred, var, scale));
  }
  if (n.outputs.size() > 1 && !n.outputs[1].empty()) imp.out(1, mean);
  if (n.outputs.size() > 2 && !n.outputs[2].empty()) imp.out(2, graph_map<FloatTypes>(imp, rsqrt(_1 + constant(eps)), x.type, var));
}

/// a x b with NumPy's matmul broadcasting, on ops::matmul (grouped for batched operands).
Value matmul_values(Importer& imp, Value const& a0, Value const& b0) {
  require_float(imp, a0);
  if (a0.type != b0.type) imp.invalid("the operands' types differ");
  if (a0.shape.empty() || b0.shape.empty()) imp.invalid("an operand of rank 0 (MatMul takes tensors of rank 1 or more)");
  Tensor a = imp.tensor(a0), b = imp.tensor(b0);
  Dims as = a0.shape, bs = b0.shape;
  bool const a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1), a = a.reshape(to_shape(as));
  if (b_vec) bs.push_back(1), b = b.reshape(to_shape(bs));
  std::int64_t const M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K) imp.invalid("inner dimensions differ: " + std::to_string(K) + " and " + std::to_string(bs[bs.size() - 2]));
  Dims const abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  Dims const batch = broadcast(abatch, bbatch);
  if (batch == Dims{-1}) imp.invalid("the batch dimensions do not broadcast");
  Tensor y;
  auto const opts = imp.matmul_options();
  std::string const& name = imp.node->name;
  // The product's host kernel reads each operand as one strided variable. An operand that is not one (a reshape
  // of a transposed activation: attention's heads, a batch-second sequence) is first copied into a row-major
  // tensor: one exchange of the operand instead of the product's vertices run one by one.
  auto const strided = [&](Tensor const& t) {
    if (t.affine()) return t;
    Tensor c = imp.g.add_variable(t.element_type(), t.shape(), name + "/operand");
    map_linearly(imp.g, c);
    imp.prog.add(tilebsp::copy(t, c));
    return c;
  };
  if (bbatch.empty() || count(bbatch) == 1) {
    // One right operand (weights): the batch joins the rows, one product.
    std::int64_t const rows = static_cast<std::int64_t>(count(abatch)) * M;
    Tensor const a2 = a.reshape({static_cast<std::size_t>(rows), static_cast<std::size_t>(K)});
    y = ops::matmul(imp.g, imp.prog, strided(a2), strided(b.reshape({static_cast<std::size_t>(K), static_cast<std::size_t>(N)})),
                    opts, name);
    Dims shape = batch;
    shape.push_back(M);
    shape.push_back(N);
    if (count(abatch) != count(batch)) {  // a broadcast over b's batch of one
      Dims s = abatch;
      s.push_back(M), s.push_back(N);
      y = y.reshape(to_shape(s));
      Shape full(shape.size() - s.size(), 1);
      full.insert(full.end(), s.begin(), s.end());
      y = y.reshape(full).broadcast(to_shape(shape));
    }
    y = y.reshape(to_shape(shape));
  } else {
    auto const groups = count(batch);
    auto grouped = [&](Tensor const& t, Dims const& tb, std::int64_t r, std::int64_t c) {
      Shape full(batch.size() - tb.size(), 1);
      full.insert(full.end(), tb.begin(), tb.end());
      full.push_back(static_cast<std::size_t>(r)), full.push_back(static_cast<std::size_t>(c));
      Shape target = to_shape(batch);
      target.push_back(static_cast<std::size_t>(r)), target.push_back(static_cast<std::size_t>(c));
      return t.reshape(full).broadcast(target).reshape({groups, static_cast<std::size_t>(r), static_cast<std::size_t>(c)});
    };
    y = ops::matmul(imp.g, imp.prog, strided(grouped(a, abatch, M, K)), strided(grouped(b, bbatch, K, N)), opts, name);
    Shape shape = to_shape(batch);
    shape.push_back(static_cast<std::size_t>(M)), shape.push_back(static_cast<std::size_t>(N));
    y = y.reshape(shape);
  }
  imp.multiply_adds += static_cast<double>(count(batch)) * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  Dims out = batch;
  if (!a_vec) out.push_back(M);
  if (!b_vec) out.push_back(N);
  Value r;
  r.type = a0.type;
  r.shape = out;
  r.tensor = y.reshape(to_shape(out));
  return r;
}

/// The bias a linear layer adds to product `y` (the other operand of `add`, or Gemm's C): known at import, one
/// value per column ([N] or [1, ..., N]). Null when it is not such a bias.
HostTensor const* column_bias(Value const& y, Value const* bias) {
  if (!bias || !bias->constant || !is_floating(bias->type) || bias->type != y.type || y.shape.empty()) return nullptr;
  if (bias->shape.size() > y.shape.size() || bias->shape.empty() || bias->shape.back() != y.shape.back()) return nullptr;
  for (std::size_t d = 0; d + 1 < bias->shape.size(); ++d)
    if (bias->shape[d] != 1) return nullptr;
  // y must be its own elements, each once (not a broadcast view), for the map to run in place.
  auto const a = y.tensor.affine();
  if (!a) return nullptr;
  for (std::size_t d = 0; d < y.tensor.rank(); ++d)
    if (y.tensor.dim(d) > 1 && a->strides[d] == 0) return nullptr;
  return &*bias->constant;
}

/// y += bias, then the activation that alone reads `out_name` (renamed to its result): one compiled map in place
/// on the product, as after a convolution.
void add_bias_in_place(Importer& imp, Value& y, HostTensor const& bias, std::string& out_name) {
  Epilogue const act = fuse_activation(imp, out_name, y.shape.size());
  Tensor const b = host_tensor(imp, {y.shape.back()}, bias.floats);
  if (y.tensor.element_type() == ElementType::f16) epilogue<half>(imp, y.tensor, act, b);
  else epilogue<float>(imp, y.tensor, act, b);
}

void matmul(Importer& imp, Node const&) {
  imp.only_attrs({});
  Value y = matmul_values(imp, imp.in(0), imp.in(1));
  // A bias Add that alone reads the product (a linear layer exported as MatMul + Add: ViT's) is one compiled map in
  // place with the activation after it, instead of an interpreted map into a new tensor.
  std::string const& out = imp.node->outputs[0];
  if (Node const* add = imp.sole_consumer(out); add && add->op_type == "Add" && add->inputs.size() == 2 &&
                                                 add->outputs.size() == 1 && add->inputs[0] != add->inputs[1] &&
                                                 !imp.on_host.contains(add)) {
    std::string const& other = add->inputs[0] == out ? add->inputs[1] : add->inputs[0];
    if (HostTensor const* bias = column_bias(y, imp.lookup(other))) {
      imp.fused.insert(add);
      std::string name = add->outputs[0];
      add_bias_in_place(imp, y, *bias, name);
      return imp.set(name, std::move(y));
    }
  }
  imp.out(0, std::move(y));
}

void gemm(Importer& imp, Node const&) {
  imp.only_attrs({"alpha", "beta", "transA", "transB"});
  Value const* a = &imp.in(0);
  Value const* b = &imp.in(1);
  if (a->shape.size() != 2 || b->shape.size() != 2) imp.invalid("A and B must be matrices");
  // A transposed operand: a view of a graph value; a constant's values transposed on the host in cache-sized
  // tiles (a classifier's weights are hundreds of megabytes: copied once, never twice).
  auto const transposed = [](Value const& v) {
    Value r;
    if (!v.constant) {
      r = v;
      r.tensor = r.tensor.transpose();
      r.layout.clear();
    } else {
      r.type = v.type;
      r.shape = v.shape;
      r.stage = v.stage;
      HostTensor t;
      t.type = v.constant->type;
      t.shape = {v.shape[1], v.shape[0]};
      auto const rows = static_cast<std::size_t>(v.shape[0]), cols = static_cast<std::size_t>(v.shape[1]);
      auto const transpose = [&](auto const& from, auto& to) {
        if (from.size() != rows * cols) return;  // values of the other kind (floats or ints)
        to.resize(from.size());
        constexpr std::size_t tile = 64;
        for (std::size_t i0 = 0; i0 < rows; i0 += tile)
          for (std::size_t j0 = 0; j0 < cols; j0 += tile)
            for (std::size_t i = i0; i < std::min(rows, i0 + tile); ++i)
              for (std::size_t j = j0; j < std::min(cols, j0 + tile); ++j) to[j * rows + i] = from[i * cols + j];
      };
      transpose(v.constant->floats, t.floats);
      transpose(v.constant->ints, t.ints);
      r.constant = std::move(t);
    }
    std::swap(r.shape[0], r.shape[1]);
    return r;
  };
  Value at, bt;
  if (imp.attr_int("transA", 0)) at = transposed(*a), a = &at;
  if (imp.attr_int("transB", 0)) bt = transposed(*b), b = &bt;
  double const alpha = imp.attr_float("alpha", 1.0f), beta = imp.attr_float("beta", 1.0f);
  Value y = matmul_values(imp, *a, *b);
  if (imp.has(2) && beta == 1 && alpha == 1) {
    if (HostTensor const* bias = column_bias(y, &imp.in(2))) {  // a classifier's bias: in place, compiled
      std::string name = imp.node->outputs[0];
      add_bias_in_place(imp, y, *bias, name);
      return imp.set(name, std::move(y));
    }
  }
  if (imp.has(2) && beta != 0) {
    Value const& c = imp.in(2);
    if (alpha == 1 && beta == 1) y = graph_map<FloatTypes>(imp, _1 + _2, y.type, y, c);
    else y = graph_map<FloatTypes>(imp, _1 * constant(alpha) + _2 * constant(beta), y.type, y, c);
  } else if (alpha != 1) {
    y = graph_map<FloatTypes>(imp, _1 * constant(alpha), y.type, y);
  }
  imp.out(0, y);
}

}  // namespace

void add_nn_ops(Registry& r) {
  r["Conv"] = conv;
  r["BatchNormalization"] = batch_norm;
  r["MaxPool"] = max_pool;
  r["AveragePool"] = average_pool;
  r["GlobalAveragePool"] = global_pool;
  r["GlobalMaxPool"] = global_pool;
  for (char const* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
                         "ReduceLogSumExp", "ReduceL1", "ReduceL2", "ReduceLogSum"})
    r[op] = reduce_op;
  r["Softmax"] = softmax;
  r["LogSoftmax"] = softmax;
  r["LayerNormalization"] = layer_norm;
  r["MatMul"] = matmul;
  r["Gemm"] = gemm;
}

}  // namespace tilebsp::onnx::detail
