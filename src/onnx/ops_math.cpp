// ONNX's elementwise operators: arithmetic with broadcasting, activations, comparisons and selection.
#include "elementwise.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace tilebsp::onnx::detail {
namespace {

using namespace expr;

/// ONNX requires the operands of these operators to have one type.
void same_types(Importer& imp, Value const& a, Value const& b) {
  if (a.type != b.type) imp.invalid("the operands' types differ: " + to_string(a.type) + " and " + to_string(b.type));
}

template <class Types, class E, class F>
void binary(Importer& imp, E const& e, F const& f, bool bool_result = false) {
  imp.only_attrs({});
  Value const& a = imp.in(0);
  Value const& b = imp.in(1);
  same_types(imp, a, b);
  // A ReLU that alone reads a float result joins its map (a residual add and its ReLU: one pass over the data).
  Node const* next = imp.sole_consumer(imp.node->outputs[0]);
  if constexpr (!std::is_same_v<Types, BoolTypes>) {
    if (!bool_result && next && next->op_type == "Relu" && is_floating(a.type) && !(a.constant && b.constant)) {
      imp.fused.insert(next);
      imp.set(next->outputs[0], graph_map<FloatTypes>(imp, relu(e), a.type, a, b));
      return;
    }
  }
  imp.out(0, elementwise<Types>(imp, e, f, bool_result ? DataType::boolean : a.type, a, b));
}

template <class E, class F>
void unary_float(Importer& imp, E const& e, F const& f, std::initializer_list<char const*> attrs = {}) {
  imp.only_attrs(attrs);
  Value const& x = imp.in(0);
  if (!is_floating(x.type)) imp.unsupported("element type " + to_string(x.type) + " (this operator takes floating types)");
  imp.out(0, elementwise<FloatTypes>(imp, e, f, x.type, x));
}

double int_div(double a, double b) { return b == 0 ? 0 : std::trunc(a / b); }
bool is_int(Value const& v) { return !is_floating(v.type); }

void add(Importer& imp, Node const&) { binary<NumberTypes>(imp, _1 + _2, [](double a, double b) { return a + b; }); }
void sub(Importer& imp, Node const&) { binary<NumberTypes>(imp, _1 - _2, [](double a, double b) { return a - b; }); }
void mul(Importer& imp, Node const&) { binary<NumberTypes>(imp, _1 * _2, [](double a, double b) { return a * b; }); }
void div(Importer& imp, Node const&) {
  bool const ints = is_int(imp.in(0));
  binary<NumberTypes>(imp, _1 / _2, [ints](double a, double b) { return ints ? int_div(a, b) : a / b; });
}
void pow_op(Importer& imp, Node const&) {
  imp.only_attrs({});
  Value const& a = imp.in(0);
  Value const& b = imp.in(1);
  if (!is_floating(a.type)) imp.unsupported("an integer base");
  auto const f = [](double x, double y) { return std::pow(x, y); };
  if (b.constant && b.constant->size() == 1 && !a.constant) {
    // The common case (x ** 2, x ** 0.5 in decomposed normalisations): one operand.
    double const y = b.constant->value(0);
    if (y == 2) return imp.out(0, graph_map<FloatTypes>(imp, square(_1), a.type, a));
    if (y == 1) return imp.out(0, a);
    if (y == 0.5) return imp.out(0, graph_map<FloatTypes>(imp, sqrt(_1), a.type, a));
  }
  Value bb = b;
  if (b.type != a.type) {  // Pow takes an exponent of another type: convert a known one
    if (!b.constant) imp.unsupported("an exponent of type " + to_string(b.type) + " computed at run time");
    bb.constant = make_host(a.type, b.shape, [&](std::size_t i) { return b.constant->value(i); });
    bb.type = a.type;
  }
  imp.out(0, elementwise<FloatTypes>(imp, pow(_1, _2), f, a.type, a, bb));
}

template <class E, class F>
void compare(Importer& imp, E const& e, F const& f) {
  binary<NumberTypes>(imp, e, [f](double a, double b) { return f(a, b) ? 1.0 : 0.0; }, true);
}

void equal(Importer& imp, Node const&) {
  imp.only_attrs({});
  Value const& a = imp.in(0);
  Value const& b = imp.in(1);
  same_types(imp, a, b);
  imp.out(0, elementwise<AllTypes>(imp, _1 == _2, [](double x, double y) { return x == y ? 1.0 : 0.0; }, DataType::boolean, a, b));
}

void logical(Importer& imp, char op) {
  imp.only_attrs({});
  Value const& a = imp.in(0);
  Value const& b = imp.in(1);
  if (a.type != DataType::boolean || b.type != DataType::boolean) imp.invalid("the operands must be bool");
  auto const t = DataType::boolean;
  if (op == '&') imp.out(0, elementwise<BoolTypes>(imp, _1 && _2, [](double x, double y) { return (x != 0 && y != 0) ? 1.0 : 0.0; }, t, a, b));
  else if (op == '|') imp.out(0, elementwise<BoolTypes>(imp, _1 || _2, [](double x, double y) { return (x != 0 || y != 0) ? 1.0 : 0.0; }, t, a, b));
  else imp.out(0, elementwise<BoolTypes>(imp, _1 != _2, [](double x, double y) { return ((x != 0) != (y != 0)) ? 1.0 : 0.0; }, t, a, b));
}

void not_op(Importer& imp, Node const&) {
  imp.only_attrs({});
  Value const& a = imp.in(0);
  if (a.type != DataType::boolean) imp.invalid("the operand must be bool");
  imp.out(0, elementwise<BoolTypes>(imp, !_1, [](double x) { return x != 0 ? 0.0 : 1.0; }, DataType::boolean, a));
}

void where(Importer& imp, Node const&) {
  imp.only_attrs({});
  Value const& c = imp.in(0);
  Value const& a = imp.in(1);
  Value const& b = imp.in(2);
  if (c.type != DataType::boolean) imp.invalid("the condition must be bool");
  same_types(imp, a, b);
  auto const f = [](double k, double x, double y) { return k != 0 ? x : y; };
  if (c.constant && a.constant && b.constant) return imp.out(0, host_map(imp, f, a.type, c, a, b));
  imp.graph_type(a.type);  // refuses types the tiles lack
  Value r;
  r.type = a.type;
  r.tensor = imp.map(select(_1, _2, _3), r.layout, c, a, b);
  for (auto d : r.tensor.shape()) r.shape.push_back(static_cast<std::int64_t>(d));
  imp.out(0, r);
}

/// Max, Min, Sum, Mean: variadic with broadcasting, folded pairwise.
template <class E, class F>
void variadic(Importer& imp, E const& e, F const& f, bool mean = false) {
  imp.only_attrs({});
  Value acc = imp.in(0);
  for (std::size_t i = 1; i < imp.inputs(); ++i) {
    Value const& b = imp.in(i);
    same_types(imp, acc, b);
    acc = elementwise<NumberTypes>(imp, e, f, acc.type, acc, b);
  }
  if (mean && imp.inputs() > 1) {
    double const k = 1.0 / static_cast<double>(imp.inputs());
    if (!is_floating(acc.type)) imp.unsupported("Mean of integers");
    acc = elementwise<FloatTypes>(imp, _1 * constant(k), [k](double x) { return x * k; }, acc.type, acc);
  }
  imp.out(0, acc);
}

void clip(Importer& imp, Node const&) {
  imp.only_attrs({});
  Value const& x = imp.in(0);
  bool const lo = imp.has(1), hi = imp.has(2);
  double const l = lo ? imp.known(1, "min").value(0) : 0, h = hi ? imp.known(2, "max").value(0) : 0;
  auto const f = [&](double v) { return std::min(hi ? h : v, std::max(lo ? l : v, v)); };
  if (lo && hi) imp.out(0, elementwise<NumberTypes>(imp, min(max(_1, constant(l)), constant(h)), f, x.type, x));
  else if (lo) imp.out(0, elementwise<NumberTypes>(imp, max(_1, constant(l)), f, x.type, x));
  else if (hi) imp.out(0, elementwise<NumberTypes>(imp, min(_1, constant(h)), f, x.type, x));
  else imp.out(0, x);
}

void relu_op(Importer& imp, Node const&) {
  imp.only_attrs({});
  Value const& x = imp.in(0);
  imp.out(0, elementwise<NumberTypes>(imp, relu(_1), [](double v) { return v > 0 ? v : 0.0; }, x.type, x));
}

void leaky_relu(Importer& imp, Node const&) {
  double const a = imp.attr_float("alpha", 0.01f);
  unary_float(imp, select(_1 < 0, _1 * constant(a), _1), [a](double v) { return v < 0 ? v * a : v; }, {"alpha"});
}

void prelu(Importer& imp, Node const&) {
  imp.only_attrs({});
  Value const& x = imp.in(0);
  Value const& s = imp.in(1);
  same_types(imp, x, s);
  imp.out(0, elementwise<FloatTypes>(imp, select(_1 < 0, _1 * _2, _1), [](double v, double k) { return v < 0 ? v * k : v; }, x.type, x, s));
}

void elu(Importer& imp, Node const&) {
  double const a = imp.attr_float("alpha", 1.0f);
  unary_float(imp, select(_1 < 0, (exp(_1) - 1.0) * constant(a), _1), [a](double v) { return v < 0 ? a * (std::exp(v) - 1) : v; }, {"alpha"});
}

void hard_sigmoid(Importer& imp, Node const&) {
  double const a = imp.attr_float("alpha", 0.2f), b = imp.attr_float("beta", 0.5f);
  unary_float(imp, max(min(_1 * constant(a) + constant(b), 1.0), 0.0),
              [a, b](double v) { return std::max(0.0, std::min(1.0, a * v + b)); }, {"alpha", "beta"});
}

void hard_swish(Importer& imp, Node const&) {
  unary_float(imp, _1 * max(min(_1 * constant(1.0 / 6) + 0.5, 1.0), 0.0),
              [](double v) { return v * std::max(0.0, std::min(1.0, v / 6 + 0.5)); });
}

void softplus(Importer& imp, Node const&) {
  // log(1 + e^x) without overflow: max(x, 0) + log(1 + e^-|x|).
  unary_float(imp, relu(_1) + log(exp(-abs(_1)) + 1.0), [](double v) { return std::max(v, 0.0) + std::log1p(std::exp(-std::abs(v))); });
}

void unary(Importer& imp, Node const& n) {
  if (n.op_type == "Sigmoid") return unary_float(imp, sigmoid(_1), [](double v) { return 1 / (1 + std::exp(-v)); });
  if (n.op_type == "Tanh") return unary_float(imp, tanh(_1), [](double v) { return std::tanh(v); });
  if (n.op_type == "Erf") return unary_float(imp, erf(_1), [](double v) { return std::erf(v); });
  if (n.op_type == "Exp") return unary_float(imp, exp(_1), [](double v) { return std::exp(v); });
  if (n.op_type == "Log") return unary_float(imp, log(_1), [](double v) { return std::log(v); });
  if (n.op_type == "Sqrt") return unary_float(imp, sqrt(_1), [](double v) { return std::sqrt(v); });
  if (n.op_type == "Reciprocal") return unary_float(imp, constant(1.0) / _1, [](double v) { return 1 / v; });
  imp.only_attrs({});
  Value const& x = imp.in(0);
  if (n.op_type == "Abs") return imp.out(0, elementwise<NumberTypes>(imp, abs(_1), [](double v) { return std::abs(v); }, x.type, x));
  return imp.out(0, elementwise<NumberTypes>(imp, -_1, [](double v) { return -v; }, x.type, x));  // Neg
}

}  // namespace

void add_math_ops(Registry& r) {
  r["Add"] = add;
  r["Sub"] = sub;
  r["Mul"] = mul;
  r["Div"] = div;
  r["Pow"] = pow_op;
  r["Equal"] = equal;
  r["Less"] = [](Importer& imp, Node const&) { compare(imp, _1 < _2, [](double a, double b) { return a < b; }); };
  r["LessOrEqual"] = [](Importer& imp, Node const&) { compare(imp, _1 <= _2, [](double a, double b) { return a <= b; }); };
  r["Greater"] = [](Importer& imp, Node const&) { compare(imp, _1 > _2, [](double a, double b) { return a > b; }); };
  r["GreaterOrEqual"] = [](Importer& imp, Node const&) { compare(imp, _1 >= _2, [](double a, double b) { return a >= b; }); };
  r["And"] = [](Importer& imp, Node const&) { logical(imp, '&'); };
  r["Or"] = [](Importer& imp, Node const&) { logical(imp, '|'); };
  r["Xor"] = [](Importer& imp, Node const&) { logical(imp, '^'); };
  r["Not"] = not_op;
  r["Where"] = where;
  r["Max"] = [](Importer& imp, Node const&) { variadic(imp, max(_1, _2), [](double a, double b) { return std::max(a, b); }); };
  r["Min"] = [](Importer& imp, Node const&) { variadic(imp, min(_1, _2), [](double a, double b) { return std::min(a, b); }); };
  r["Sum"] = [](Importer& imp, Node const&) { variadic(imp, _1 + _2, [](double a, double b) { return a + b; }); };
  r["Mean"] = [](Importer& imp, Node const&) { variadic(imp, _1 + _2, [](double a, double b) { return a + b; }, true); };
  r["Clip"] = clip;
  r["Relu"] = relu_op;
  r["LeakyRelu"] = leaky_relu;
  r["PRelu"] = prelu;
  r["Elu"] = elu;
  r["HardSigmoid"] = hard_sigmoid;
  r["HardSwish"] = hard_swish;
  r["Softplus"] = softplus;
  for (char const* op : {"Sigmoid", "Tanh", "Erf", "Exp", "Log", "Sqrt", "Reciprocal", "Abs", "Neg"}) r[op] = unary;
}

}  // namespace tilebsp::onnx::detail
