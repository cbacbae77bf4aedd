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
