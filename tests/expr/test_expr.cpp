// Expression type inference: weak constants, mixing errors, operator rules; compile-time pruning inputs.
#include <tilebsp/expr/expr.hpp>

#include <doctest/doctest.h>

#include <string>

namespace tb = tilebsp;
using namespace tb::expr;

namespace {
constexpr Types types(VT a, VT b = VT::any, VT c = VT::any) { return {a, b, c, VT::any, VT::any, VT::any, VT::any, VT::any}; }
}  // namespace

TEST_CASE("inference is constexpr: constants adopt their partner's type") {
  static_assert(decltype(_1 * 2 + 1)::infer(types(VT::f16)).type == VT::f16);
  static_assert(decltype(_1 * 2 + 1)::infer(types(VT::i32)).type == VT::i32);
  static_assert(decltype(constant(3))::infer(types(VT::any)).type == VT::weak);
  static_assert(decltype(_1 < 2)::infer(types(VT::u32)).type == VT::boolean);
  static_assert(decltype(cast<float>(_1) + _2)::infer(types(VT::i32, VT::f32)).type == VT::f32);
  static_assert(decltype(select(_1, _2, 0))::infer(types(VT::boolean, VT::u32)).type == VT::u32);
  static_assert(decltype(_1 + _2)::max_index == 2);
  static_assert(decltype(relu(_1 * 2 + _2))::nodes == 3);
  // Partially known types still type-check (the basis of pruning kernel instantiations).
  static_assert(decltype(_1 + _2)::infer(types(VT::f32, VT::any)).type == VT::f32);
  static_assert(decltype(_1 + _2)::infer(types(VT::f32, VT::i32)).type == VT::error);
}

TEST_CASE("type errors say which operator and which types") {
  auto const r = decltype(_1 + _2)::infer(types(VT::f32, VT::i32));
  CHECK(describe(r) == "mixing element types without a cast: operator '+' has f32 and i32 operands (use cast<T>)");
  CHECK(describe(decltype(exp(_1))::infer(types(VT::i32))) == "operator 'exp' does not accept a i32 operand");
  CHECK(describe(decltype(_1 && _2)::infer(types(VT::boolean, VT::f32))) == "operator '&&' does not accept a f32 operand");
  CHECK(describe(decltype(_1 + _2)::infer(types(VT::boolean, VT::boolean))) == "operator '+' does not accept a bool operand");
  CHECK(decltype(_1 == _2)::infer(types(VT::boolean, VT::boolean)).type == VT::boolean);
  CHECK(decltype(pow(_1, 2))::infer(types(VT::i32)).type == VT::error);
  CHECK(decltype(sqrt(_1 * 1.5))::infer(types(VT::f16)).type == VT::f16);
}
