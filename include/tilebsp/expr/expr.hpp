// Elementwise expression templates: placeholders _1.._8, weakly typed constants, operators and math functions,
// with constexpr type inference (also used at compile time to prune kernel instantiations).
#pragma once

#include <tilebsp/core/types.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace tilebsp::expr {

/// Value types of expression nodes. `weak`: an untyped constant, which adopts its partner's type (like a NumPy
/// scalar); `any`: not known yet (used when pruning kernel instantiations); `error`: does not type-check.
enum class VT : std::uint8_t { f32, f16, i32, u32, boolean, weak, any, error };
using Types = std::array<VT, 8>;
inline constexpr std::size_t max_operands = 8;

namespace detail {
constexpr VT vt_of(ElementType t) noexcept {
  switch (t) {
    case ElementType::f32: return VT::f32;
    case ElementType::f16: return VT::f16;
    case ElementType::i32: return VT::i32;
    case ElementType::u32: return VT::u32;
    case ElementType::boolean: return VT::boolean;
    case ElementType::u8: return VT::error;
  }
  return VT::error;
}
constexpr ElementType element_of(VT t) noexcept {
  switch (t) {
    case VT::f16: return ElementType::f16;
    case VT::i32: return ElementType::i32;
    case VT::u32: return ElementType::u32;
    case VT::boolean: return ElementType::boolean;
    default: return ElementType::f32;
  }
}
constexpr char const* name_of(VT t) noexcept {
  switch (t) {
    case VT::f32: return "f32";
    case VT::f16: return "f16";
    case VT::i32: return "i32";
    case VT::u32: return "u32";
    case VT::boolean: return "bool";
    case VT::weak: return "constant";
    case VT::any: return "any";
    case VT::error: return "error";
  }
  return "?";
}
constexpr bool is_float(VT t) noexcept { return t == VT::f32 || t == VT::f16; }
constexpr bool is_numeric(VT t) noexcept { return is_float(t) || t == VT::i32 || t == VT::u32; }
/// A weak constant takes the type its context wants.
constexpr VT resolve(VT t, VT want) noexcept { return t == VT::weak ? want : t; }

/// Result of type inference; on error, the operator and operand types for the message.
struct Inferred {
  VT type = VT::any;
  char const* op = nullptr;
  VT a = VT::any, b = VT::any;
  bool mix = false;  ///< two different element types met without a cast
};
constexpr Inferred fail(char const* op, VT a, VT b, bool mix) noexcept { return {VT::error, op, a, b, mix}; }

/// The common type of two operands that must agree.
constexpr Inferred unify(char const* op, Inferred x, Inferred y) noexcept {
  if (x.type == VT::error) return x;
  if (y.type == VT::error) return y;
  if (x.type == VT::any) return {y.type == VT::weak ? VT::any : y.type};
  if (y.type == VT::any) return {x.type == VT::weak ? VT::any : x.type};
  if (x.type == VT::weak) return {y.type};
  if (y.type == VT::weak) return {x.type};
  if (x.type == y.type) return {x.type};
  return fail(op, x.type, y.type, true);
}
/// Checks a single operand against a predicate (weak and any always pass).
template <class P>
constexpr Inferred require(char const* op, Inferred x, P ok) noexcept {
  if (x.type == VT::error || x.type == VT::weak || x.type == VT::any) return x;
  return ok(x.type) ? x : fail(op, x.type, VT::any, false);
}
/// A human-readable type error, e.g. "operator '+' mixes f32 and i32 operands; add a cast<T>".
inline std::string describe(Inferred const& r) {
  if (r.mix)
    return std::string("mixing element types without a cast: operator '") + r.op + "' has " + name_of(r.a) + " and " +
           name_of(r.b) + " operands (use cast<T>)";
  return std::string("operator '") + r.op + "' does not accept a " + name_of(r.a) + " operand";
}
}  // namespace detail

// ---- nodes ----------------------------------------------------------------------------------------------

/// Any elementwise expression node.
template <class E>
concept ExprLike = requires { typename std::remove_cvref_t<E>::is_expr; };

/// The I-th tensor operand (1-based).
template <std::size_t I>
struct Placeholder {
  static_assert(I >= 1 && I <= max_operands, "expr: placeholders are _1 to _8");
  using is_expr = void;
  static constexpr std::size_t max_index = I;
  static constexpr std::size_t nodes = 0;
  static constexpr detail::Inferred infer(Types const& t) noexcept { return {t[I - 1]}; }
};
inline constexpr Placeholder<1> _1{};
inline constexpr Placeholder<2> _2{};
inline constexpr Placeholder<3> _3{};
inline constexpr Placeholder<4> _4{};
inline constexpr Placeholder<5> _5{};
inline constexpr Placeholder<6> _6{};
inline constexpr Placeholder<7> _7{};
inline constexpr Placeholder<8> _8{};

/// A numeric constant; it takes the type of the operand it meets.
struct Constant {
  using is_expr = void;
  static constexpr std::size_t max_index = 0;
  static constexpr std::size_t nodes = 0;
  double value = 0;
  static constexpr detail::Inferred infer(Types const&) noexcept { return {VT::weak}; }
};

template <class Op, class A>
struct Unary {
  using is_expr = void;
  static constexpr std::size_t max_index = A::max_index;
  static constexpr std::size_t nodes = A::nodes + 1;
  A a;
  static constexpr detail::Inferred infer(Types const& t) noexcept { return Op::infer(A::infer(t)); }
};

template <class Op, class A, class B>
struct Binary {
  using is_expr = void;
  static constexpr std::size_t max_index = A::max_index > B::max_index ? A::max_index : B::max_index;
  static constexpr std::size_t nodes = A::nodes + B::nodes + 1;
  A a;
  B b;
  static constexpr detail::Inferred infer(Types const& t) noexcept { return Op::infer(A::infer(t), B::infer(t)); }
};

template <class C, class A, class B>
struct Select {
  using is_expr = void;
  static constexpr std::size_t max_index =
      std::max({C::max_index, A::max_index, B::max_index});
  static constexpr std::size_t nodes = C::nodes + A::nodes + B::nodes + 1;
  C c;
  A a;
  B b;
  static constexpr detail::Inferred infer(Types const& t) noexcept {
    detail::Inferred const c = detail::require("select", C::infer(t), [](VT v) { return v == VT::boolean; });
    if (c.type == VT::error) return c;
    return detail::unify("select", A::infer(t), B::infer(t));
  }
};

template <VT T, class A>
struct Cast {
  using is_expr = void;
  static constexpr std::size_t max_index = A::max_index;
  static constexpr std::size_t nodes = A::nodes + 1;
  A a;
  static constexpr detail::Inferred infer(Types const& t) noexcept {
    detail::Inferred const r = A::infer(t);
    return r.type == VT::error ? r : detail::Inferred{T};
  }
};

// ---- operator tags: type rules (evaluation lives in expr/eval.hpp) ---------------------------------------

namespace op {
using detail::Inferred;
using detail::is_float;
using detail::is_numeric;
using detail::require;
using detail::unify;
#define TILEBSP_ARITH(Name, sym)                                                          \
  struct Name {                                                                           \
    static constexpr char const* name = sym;                                              \
    static constexpr Inferred infer(Inferred a, Inferred b) noexcept {                    \
      return require(name, unify(name, a, b), [](VT v) { return is_numeric(v); });        \
    }                                                                                     \
  };
TILEBSP_ARITH(Add, "+")
TILEBSP_ARITH(Sub, "-")
TILEBSP_ARITH(Mul, "*")
TILEBSP_ARITH(Div, "/")
TILEBSP_ARITH(Min, "min")
TILEBSP_ARITH(Max, "max")
#undef TILEBSP_ARITH
struct Pow {
  static constexpr char const* name = "pow";
  static constexpr Inferred infer(Inferred a, Inferred b) noexcept {
    return require(name, unify(name, a, b), [](VT v) { return is_float(v); });
  }
};
#define TILEBSP_COMPARE(Name, sym, allow_bool)                                                              \
  struct Name {                                                                                             \
    static constexpr char const* name = sym;                                                                \
    static constexpr Inferred infer(Inferred a, Inferred b) noexcept {                                      \
      Inferred const u = require(name, unify(name, a, b),                                                   \
                                 [](VT v) { return is_numeric(v) || (allow_bool && v == VT::boolean); });   \
      return u.type == VT::error ? u : Inferred{VT::boolean};                                               \
    }                                                                                                       \
  };
TILEBSP_COMPARE(Less, "<", false)
TILEBSP_COMPARE(LessEqual, "<=", false)
TILEBSP_COMPARE(Greater, ">", false)
TILEBSP_COMPARE(GreaterEqual, ">=", false)
TILEBSP_COMPARE(Equal, "==", true)
TILEBSP_COMPARE(NotEqual, "!=", true)
#undef TILEBSP_COMPARE
#define TILEBSP_LOGICAL(Name, sym)                                                                   \
  struct Name {                                                                                      \
    static constexpr char const* name = sym;                                                         \
    static constexpr Inferred infer(Inferred a, Inferred b) noexcept {                               \
      auto const is_bool = [](VT v) { return v == VT::boolean; };                                    \
      Inferred const x = require(name, a, is_bool), y = require(name, b, is_bool);                   \
      return x.type == VT::error ? x : y.type == VT::error ? y : Inferred{VT::boolean};              \
    }                                                                                                \
  };
TILEBSP_LOGICAL(And, "&&")
TILEBSP_LOGICAL(Or, "||")
#undef TILEBSP_LOGICAL
struct Not {
  static constexpr char const* name = "!";
  static constexpr Inferred infer(Inferred a) noexcept {
    Inferred const x = require(name, a, [](VT v) { return v == VT::boolean; });
    return x.type == VT::error ? x : Inferred{VT::boolean};
  }
};
#define TILEBSP_UNARY(Name, sym, pred)                                                             \
  struct Name {                                                                                    \
    static constexpr char const* name = sym;                                                       \
    static constexpr Inferred infer(Inferred a) noexcept { return require(name, a, pred); }        \
  };
TILEBSP_UNARY(Neg, "-", [](VT v) { return is_numeric(v); })
TILEBSP_UNARY(Abs, "abs", [](VT v) { return is_numeric(v); })
TILEBSP_UNARY(Relu, "relu", [](VT v) { return is_numeric(v); })
TILEBSP_UNARY(Square, "square", [](VT v) { return is_numeric(v); })
TILEBSP_UNARY(Sqrt, "sqrt", [](VT v) { return is_float(v); })
TILEBSP_UNARY(Rsqrt, "rsqrt", [](VT v) { return is_float(v); })
TILEBSP_UNARY(Exp, "exp", [](VT v) { return is_float(v); })
TILEBSP_UNARY(Log, "log", [](VT v) { return is_float(v); })
TILEBSP_UNARY(Tanh, "tanh", [](VT v) { return is_float(v); })
TILEBSP_UNARY(Sigmoid, "sigmoid", [](VT v) { return is_float(v); })
TILEBSP_UNARY(Erf, "erf", [](VT v) { return is_float(v); })
#undef TILEBSP_UNARY
}  // namespace op

// ---- building expressions -------------------------------------------------------------------------------

template <class T>
concept Scalar = std::is_arithmetic_v<std::remove_cvref_t<T>>;
template <class T>
concept Operand = ExprLike<T> || Scalar<T>;

namespace detail {
template <class T>
constexpr auto as_expr(T const& x) {
  if constexpr (ExprLike<T>) return x;
  else return Constant{static_cast<double>(x)};
}
template <class T>
using as_expr_t = decltype(as_expr(std::declval<T>()));

template <class Op, class A, class B>
constexpr auto binary(A const& a, B const& b) {
  return Binary<Op, as_expr_t<A>, as_expr_t<B>>{as_expr(a), as_expr(b)};
}
template <class Op, class A>
constexpr auto unary(A const& a) {
  return Unary<Op, as_expr_t<A>>{as_expr(a)};
}
}  // namespace detail

#define TILEBSP_BINARY_OPERATOR(sym, Op)                                      \
  template <Operand A, Operand B>                                             \
    requires(ExprLike<A> || ExprLike<B>)                                      \
  constexpr auto operator sym(A const& a, B const& b) {                       \
    return detail::binary<op::Op>(a, b);                                      \
  }
TILEBSP_BINARY_OPERATOR(+, Add)
TILEBSP_BINARY_OPERATOR(-, Sub)
TILEBSP_BINARY_OPERATOR(*, Mul)
TILEBSP_BINARY_OPERATOR(/, Div)
TILEBSP_BINARY_OPERATOR(<, Less)
TILEBSP_BINARY_OPERATOR(<=, LessEqual)
TILEBSP_BINARY_OPERATOR(>, Greater)
TILEBSP_BINARY_OPERATOR(>=, GreaterEqual)
TILEBSP_BINARY_OPERATOR(==, Equal)
TILEBSP_BINARY_OPERATOR(!=, NotEqual)
TILEBSP_BINARY_OPERATOR(&&, And)
TILEBSP_BINARY_OPERATOR(||, Or)
#undef TILEBSP_BINARY_OPERATOR

template <ExprLike A>
constexpr auto operator-(A const& a) {
  return detail::unary<op::Neg>(a);
}
template <ExprLike A>
constexpr auto operator!(A const& a) {
  return detail::unary<op::Not>(a);
}

#define TILEBSP_FUNCTION1(fn, Op)                 \
  template <ExprLike A>                           \
  constexpr auto fn(A const& a) {                 \
    return detail::unary<op::Op>(a);              \
  }
TILEBSP_FUNCTION1(abs, Abs)
TILEBSP_FUNCTION1(relu, Relu)
TILEBSP_FUNCTION1(square, Square)
TILEBSP_FUNCTION1(sqrt, Sqrt)
TILEBSP_FUNCTION1(rsqrt, Rsqrt)
TILEBSP_FUNCTION1(exp, Exp)
TILEBSP_FUNCTION1(log, Log)
TILEBSP_FUNCTION1(tanh, Tanh)
TILEBSP_FUNCTION1(sigmoid, Sigmoid)
TILEBSP_FUNCTION1(erf, Erf)
#undef TILEBSP_FUNCTION1

#define TILEBSP_FUNCTION2(fn, Op)                 \
  template <Operand A, Operand B>                 \
    requires(ExprLike<A> || ExprLike<B>)          \
  constexpr auto fn(A const& a, B const& b) {     \
    return detail::binary<op::Op>(a, b);          \
  }
TILEBSP_FUNCTION2(min, Min)
TILEBSP_FUNCTION2(max, Max)
TILEBSP_FUNCTION2(pow, Pow)
#undef TILEBSP_FUNCTION2

/// c ? a : b, elementwise; c must be bool.
template <Operand C, Operand A, Operand B>
  requires(ExprLike<C> || ExprLike<A> || ExprLike<B>)
constexpr auto select(C const& c, A const& a, B const& b) {
  return Select<detail::as_expr_t<C>, detail::as_expr_t<A>, detail::as_expr_t<B>>{detail::as_expr(c), detail::as_expr(a),
                                                                                  detail::as_expr(b)};
}

/// Converts to element type T (float to integer truncates toward zero; to bool tests != 0).
template <ElementLike T, Operand A>
constexpr auto cast(A const& a) {
  static_assert(!std::is_same_v<T, std::uint8_t>, "cast: u8 is not an expression type");
  return Cast<detail::vt_of(element_type_v<T>), detail::as_expr_t<A>>{detail::as_expr(a)};
}

/// A constant of the type its context needs.
constexpr Constant constant(double v) noexcept { return {v}; }

}  // namespace tilebsp::expr
