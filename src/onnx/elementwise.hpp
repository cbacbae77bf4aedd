// Elementwise operators: folded on the host when every operand is known at import, else one fused map on the
// graph (ops::map) compiled for the element types the operator takes.
#pragma once

#include "importer.hpp"

#include <tilebsp/core/half.hpp>

#include <cstdint>
#include <string>

namespace tilebsp::onnx::detail {

/// The C++ types a map is compiled for, per the graph type of its first operand.
struct FloatTypes {
  static constexpr bool f = true, i = false, b = false;
};
struct NumberTypes {
  static constexpr bool f = true, i = true, b = false;
};
struct AllTypes {
  static constexpr bool f = true, i = true, b = true;
};
struct BoolTypes {
  static constexpr bool f = false, i = false, b = true;
};

/// The map of `e` over the operands on the graph, compiled for the types of `Types` only.
template <class Types, class E, class... V>
Value graph_map(Importer& imp, E const& e, DataType out_type, V const&... v) {
  Value const* first = nullptr;
  ((first = first ? first : &v), ...);
  ElementType const t = imp.graph_type(first->type);
  Value r;
  r.type = out_type;
  bool const ok = ((t == ElementType::f32 || t == ElementType::f16) && Types::f) || (t == ElementType::i32 && Types::i) ||
                  (t == ElementType::boolean && Types::b);
  if (!ok) imp.unsupported("element type " + to_string(first->type) + " is not supported by this operator");
  try {
    r.tensor = imp.map(e, r.layout, v...);
  } catch (type_error const& err) {
    imp.unsupported(std::string("the operand types are not supported: ") + err.what());
  }
  for (auto d : r.tensor.shape()) r.shape.push_back(static_cast<std::int64_t>(d));
  return r;
}

/// erf in f32 without an erf primitive: its Taylor series below |x| = 0.5 (error under 2e-8), Abramowitz and Stegun
/// 7.1.26 above (absolute error under 1.5e-7, relative under 3e-7 there).
template <class X>
auto erf_expr(X const& x) {
  using namespace expr;
  auto const x2 = x * x;
  auto const taylor =
      x * (((((x2 * constant(-1.0 / 1320) + 1.0 / 216) * x2 - 1.0 / 42) * x2 + 0.1) * x2 - 1.0 / 3) * x2 + 1.0) *
      constant(1.1283791670955126);
  auto const ax = abs(x);
  auto const t = constant(1.0) / (ax * 0.3275911 + 1.0);
  auto const poly = ((((t * 1.061405429 - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t;
  auto const tail = constant(1.0) - poly * exp(-x2);
  return select(ax < 0.5, taylor, select(x < 0, -tail, tail));
}

/// Host folding: element i of the broadcast result is f(operand values at i).
template <class F, class... V>
Value host_map(Importer& imp, F const& f, DataType out_type, V const&... v) {
  Dims shape;
  ((shape = broadcast(shape, v.shape)), ...);
  if (shape == Dims{-1}) imp.invalid("the operands' shapes do not broadcast");
  Value r;
  r.type = out_type;
  r.shape = shape;
  r.constant = make_host(out_type, shape, [&](std::size_t i) { return f(v.constant->value(broadcast_index(v.shape, shape, i))...); });
  return r;
}

/// Both: folded when every operand is known, else mapped.
template <class Types, class E, class F, class... V>
Value elementwise(Importer& imp, E const& e, F const& f, DataType out_type, V const&... v) {
  if ((v.constant.has_value() && ...)) return host_map(imp, f, out_type, v...);
  Dims shape;
  ((shape = broadcast(shape, v.shape)), ...);
  if (shape == Dims{-1}) imp.invalid("the operands' shapes do not broadcast");
  return graph_map<Types>(imp, e, out_type, v...);
}

}  // namespace tilebsp::onnx::detail
