// expr::Code: an elementwise expression held as data instead of as a C++ type. ops::map takes it as it takes an
// expression template, but every Code runs through one interpreter compiled once (in tilebsp::compiled: once per
// instruction set) instead of a kernel compiled for each expression: for programs that build many different maps,
// such as a model importer, or that choose their expressions at run time.
#pragma once

#include <tilebsp/core/error.hpp>
#include <tilebsp/expr/expr.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace tilebsp::expr {

/// The operations of a Code, one per expression node kind (and per operator tag of expr/expr.hpp).
enum class Opcode : std::uint8_t {
  operand, constant,
  neg, abs, relu, square, sqrt, rsqrt, exp, log, tanh, sigmoid, not_,
  add, sub, mul, div, min, max, pow,
  less, less_equal, greater, greater_equal, equal, not_equal, and_, or_,
  select,
  cast_f32, cast_f16, cast_i32, cast_u32, cast_bool,
  erf,  // after the others: the values before it stay as they were
};

namespace detail {
template <class Op> inline constexpr Opcode opcode_of = Opcode::operand;  // not an operator tag
template <> inline constexpr Opcode opcode_of<op::Neg> = Opcode::neg;
template <> inline constexpr Opcode opcode_of<op::Abs> = Opcode::abs;
template <> inline constexpr Opcode opcode_of<op::Relu> = Opcode::relu;
template <> inline constexpr Opcode opcode_of<op::Square> = Opcode::square;
template <> inline constexpr Opcode opcode_of<op::Sqrt> = Opcode::sqrt;
template <> inline constexpr Opcode opcode_of<op::Rsqrt> = Opcode::rsqrt;
template <> inline constexpr Opcode opcode_of<op::Exp> = Opcode::exp;
template <> inline constexpr Opcode opcode_of<op::Log> = Opcode::log;
template <> inline constexpr Opcode opcode_of<op::Tanh> = Opcode::tanh;
template <> inline constexpr Opcode opcode_of<op::Sigmoid> = Opcode::sigmoid;
template <> inline constexpr Opcode opcode_of<op::Erf> = Opcode::erf;
template <> inline constexpr Opcode opcode_of<op::Not> = Opcode::not_;
template <> inline constexpr Opcode opcode_of<op::Add> = Opcode::add;
template <> inline constexpr Opcode opcode_of<op::Sub> = Opcode::sub;
template <> inline constexpr Opcode opcode_of<op::Mul> = Opcode::mul;
template <> inline constexpr Opcode opcode_of<op::Div> = Opcode::div;
template <> inline constexpr Opcode opcode_of<op::Min> = Opcode::min;
template <> inline constexpr Opcode opcode_of<op::Max> = Opcode::max;
template <> inline constexpr Opcode opcode_of<op::Pow> = Opcode::pow;
template <> inline constexpr Opcode opcode_of<op::Less> = Opcode::less;
template <> inline constexpr Opcode opcode_of<op::LessEqual> = Opcode::less_equal;
template <> inline constexpr Opcode opcode_of<op::Greater> = Opcode::greater;
template <> inline constexpr Opcode opcode_of<op::GreaterEqual> = Opcode::greater_equal;
template <> inline constexpr Opcode opcode_of<op::Equal> = Opcode::equal;
template <> inline constexpr Opcode opcode_of<op::NotEqual> = Opcode::not_equal;
template <> inline constexpr Opcode opcode_of<op::And> = Opcode::and_;
template <> inline constexpr Opcode opcode_of<op::Or> = Opcode::or_;
constexpr Opcode cast_opcode(VT t) noexcept {
  switch (t) {
    case VT::f16: return Opcode::cast_f16;
    case VT::i32: return Opcode::cast_i32;
    case VT::u32: return Opcode::cast_u32;
    case VT::boolean: return Opcode::cast_bool;
    default: return Opcode::cast_f32;
  }
}
}  // namespace detail

/// An elementwise expression as data: nodes in post-order (children before their parent; the last node is the
/// result). Made from any expression template (`Code{_1 * 2.0f + _2}`) or composed at run time from operands,
/// constants and operations; typed only when ops::map meets its operands, by the rules of the templates.
class Code {
 public:
  struct Node {
    Opcode op = Opcode::operand;
    std::uint32_t a = 0, b = 0, c = 0;  ///< children (node indices); an operand's index (0-based) in `a`
    double value = 0;                   ///< a constant's value
  };

  Code() = default;
  /// The expression template `e` as data.
  template <ExprLike E>
  explicit Code(E const& e) { add(e); }

  /// Operand `index` (0-based: _1 is operand(0)).
  static Code operand(std::size_t index) {
    if (index >= max_operands)
      throw index_error("expr::Code: operand " + std::to_string(index) + " is beyond the " + std::to_string(max_operands) +
                        " a map takes");
    Code r;
    r.nodes_.push_back({Opcode::operand, static_cast<std::uint32_t>(index), 0, 0, 0});
    return r;
  }
  static Code constant(double v) {
    Code r;
    r.nodes_.push_back({Opcode::constant, 0, 0, 0, v});
    return r;
  }
  /// A unary operation (neg .. not_, or a cast_*) of x.
  static Code unary(Opcode op, Code const& x) { return combine(op, {&x}); }
  /// A binary operation (add .. or_) of x and y.
  static Code binary(Opcode op, Code const& x, Code const& y) { return combine(op, {&x, &y}); }
  /// c ? x : y.
  static Code select(Code const& c, Code const& x, Code const& y) { return combine(Opcode::select, {&c, &x, &y}); }

  std::vector<Node> const& nodes() const noexcept { return nodes_; }
  bool empty() const noexcept { return nodes_.empty(); }
  /// The highest operand the expression reads, 1-based (0: none).
  std::size_t max_index() const noexcept {
    std::size_t m = 0;
    for (auto const& n : nodes_)
      if (n.op == Opcode::operand && n.a + 1 > m) m = n.a + 1;
    return m;
  }

  /// How many children an operation takes.
  static constexpr std::size_t arity(Opcode op) noexcept {
    if (op == Opcode::operand || op == Opcode::constant) return 0;
    if (op == Opcode::select) return 3;
    if (op >= Opcode::add && op <= Opcode::or_) return 2;
    return 1;
  }

 private:
  std::vector<Node> nodes_;

  static Code combine(Opcode op, std::initializer_list<Code const*> parts) {
    if (parts.size() != arity(op))
      throw option_error("expr::Code: operation " + std::to_string(static_cast<int>(op)) + " takes " +
                         std::to_string(arity(op)) + " operands, got " + std::to_string(parts.size()));
    Code r;
    std::uint32_t kids[3] = {};
    std::size_t k = 0;
    for (Code const* p : parts) {
      if (p->empty()) throw option_error("expr::Code: an operand of an operation is an empty Code");
      auto const base = static_cast<std::uint32_t>(r.nodes_.size());
      for (Node n : p->nodes_) {
        if (arity(n.op) > 0) n.a += base;
        if (arity(n.op) > 1) n.b += base;
        if (arity(n.op) > 2) n.c += base;
        r.nodes_.push_back(n);
      }
      kids[k++] = static_cast<std::uint32_t>(r.nodes_.size() - 1);
    }
    r.nodes_.push_back({op, kids[0], kids[1], kids[2], 0});
    return r;
  }

  std::uint32_t push(Node n) {
    nodes_.push_back(n);
    return static_cast<std::uint32_t>(nodes_.size() - 1);
  }
  template <std::size_t I>
  std::uint32_t add(Placeholder<I> const&) { return push({Opcode::operand, I - 1, 0, 0, 0}); }
  std::uint32_t add(Constant const& c) { return push({Opcode::constant, 0, 0, 0, c.value}); }
  template <VT T, class A>
  std::uint32_t add(Cast<T, A> const& e) {
    std::uint32_t const a = add(e.a);
    return push({detail::cast_opcode(T), a, 0, 0, 0});
  }
  template <class Op, class A>
  std::uint32_t add(Unary<Op, A> const& e) {
    std::uint32_t const a = add(e.a);
    return push({detail::opcode_of<Op>, a, 0, 0, 0});
  }
  template <class Op, class A, class B>
  std::uint32_t add(Binary<Op, A, B> const& e) {
    std::uint32_t const a = add(e.a);
    std::uint32_t const b = add(e.b);
    return push({detail::opcode_of<Op>, a, b, 0, 0});
  }
  template <class C, class A, class B>
  std::uint32_t add(Select<C, A, B> const& e) {
    std::uint32_t const c = add(e.c);
    std::uint32_t const a = add(e.a);
    std::uint32_t const b = add(e.b);
    return push({Opcode::select, c, a, b, 0});
  }
};

}  // namespace tilebsp::expr
