// expr::Program: an expr::Code typed for its operands and lowered to instructions over registers of a block of
// elements, and the interpreter that runs it. Each instruction runs the templates' own evaluation of its node
// (expr/eval.hpp) over the block, so an interpreted map computes what the expression template computes, element
// for element (up to the compiler's contraction of a * b + c into one rounding inside a fused kernel).
#pragma once

#include <tilebsp/core/error.hpp>
#include <tilebsp/expr/code.hpp>
#include <tilebsp/expr/eval.hpp>
#include <tilebsp/expr/expr.hpp>
#include <tilebsp/simd/arch.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace tilebsp::expr {

/// A Code lowered for operand types: at most 64 instructions (shared subexpressions computed once), 32 constants
/// and 24 registers. Trivially copyable with no padding: it is a vertex parameter, hashed and cached as bytes.
struct Program {
  static constexpr std::size_t max_instructions = 64, max_constants = 32, max_registers = 24;
  /// `type`: the value type the operation is computed in (an f16 value computes as f32; a comparison's is its
  /// operands' type; an operand's is its storage type); a..c: argument instructions (an operand's index, a
  /// constant's slot in `constants`); `reg`: where its block of values is kept.
  struct Instruction {
    Opcode op = Opcode::operand;
    VT type = VT::f32;
    std::uint8_t a = 0, b = 0, c = 0, reg = 0;
  };
  std::array<double, max_constants> constants{};
  std::array<Instruction, max_instructions> code{};
  std::array<VT, max_operands> operands{};  ///< the operands' storage types
  std::uint8_t size = 0, registers = 0;
  VT out = VT::f32;  ///< the output's storage type
  std::uint8_t reserved[5] = {};

  /// Operations other than reading operands and constants: the cost model's node count.
  std::size_t operations() const noexcept {
    std::size_t n = 0;
    for (std::size_t i = 0; i < size; ++i) n += code[i].op != Opcode::operand && code[i].op != Opcode::constant;
    return n;
  }
};
static_assert(std::is_trivially_copyable_v<Program> && sizeof(Program) == 256 + 64 * 6 + 8 + 8);

namespace detail {

/// The type a value of type t is kept in by the interpreter (f16 computes as f32).
constexpr VT compute_type(VT t) noexcept { return t == VT::f16 ? VT::f32 : t; }

/// The type of the value an instruction leaves in its register.
constexpr VT result_type(Program::Instruction const& i) noexcept {
  switch (i.op) {
    case Opcode::less:
    case Opcode::less_equal:
    case Opcode::greater:
    case Opcode::greater_equal:
    case Opcode::equal:
    case Opcode::not_equal:
    case Opcode::and_:
    case Opcode::or_:
    case Opcode::not_:
    case Opcode::cast_bool: return VT::boolean;
    case Opcode::cast_f32:
    case Opcode::cast_f16: return VT::f32;
    case Opcode::cast_i32: return VT::i32;
    case Opcode::cast_u32: return VT::u32;
    default: return compute_type(i.type);
  }
}

constexpr VT cast_target(Opcode op) noexcept {
  switch (op) {
    case Opcode::cast_f16: return VT::f16;
    case Opcode::cast_i32: return VT::i32;
    case Opcode::cast_u32: return VT::u32;
    case Opcode::cast_bool: return VT::boolean;
    default: return VT::f32;
  }
}

/// Type inference over a Code's nodes, by the operator tags' rules (as the templates infer at compile time).
inline Inferred infer_node(Opcode op, Types const& in, std::uint32_t index, double, Inferred const* k) {
  switch (op) {
    case Opcode::operand: return {in[index]};
    case Opcode::constant: return {VT::weak};
    case Opcode::neg: return op::Neg::infer(k[0]);
    case Opcode::abs: return op::Abs::infer(k[0]);
    case Opcode::relu: return op::Relu::infer(k[0]);
    case Opcode::square: return op::Square::infer(k[0]);
    case Opcode::sqrt: return op::Sqrt::infer(k[0]);
    case Opcode::rsqrt: return op::Rsqrt::infer(k[0]);
    case Opcode::exp: return op::Exp::infer(k[0]);
    case Opcode::log: return op::Log::infer(k[0]);
    case Opcode::tanh: return op::Tanh::infer(k[0]);
    case Opcode::sigmoid: return op::Sigmoid::infer(k[0]);
    case Opcode::erf: return op::Erf::infer(k[0]);
    case Opcode::not_: return op::Not::infer(k[0]);
    case Opcode::add: return op::Add::infer(k[0], k[1]);
    case Opcode::sub: return op::Sub::infer(k[0], k[1]);
    case Opcode::mul: return op::Mul::infer(k[0], k[1]);
    case Opcode::div: return op::Div::infer(k[0], k[1]);
    case Opcode::min: return op::Min::infer(k[0], k[1]);
    case Opcode::max: return op::Max::infer(k[0], k[1]);
    case Opcode::pow: return op::Pow::infer(k[0], k[1]);
    case Opcode::less: return op::Less::infer(k[0], k[1]);
    case Opcode::less_equal: return op::LessEqual::infer(k[0], k[1]);
    case Opcode::greater: return op::Greater::infer(k[0], k[1]);
    case Opcode::greater_equal: return op::GreaterEqual::infer(k[0], k[1]);
    case Opcode::equal: return op::Equal::infer(k[0], k[1]);
    case Opcode::not_equal: return op::NotEqual::infer(k[0], k[1]);
    case Opcode::and_: return op::And::infer(k[0], k[1]);
    case Opcode::or_: return op::Or::infer(k[0], k[1]);
    case Opcode::select: {
      Inferred const c = require("select", k[0], [](VT v) { return v == VT::boolean; });
      if (c.type == VT::error) return c;
      return unify("select", k[1], k[2]);
    }
    default: return k[0].type == VT::error ? k[0] : Inferred{cast_target(op)};
  }
}

}  // namespace detail

/// Lowers a Code for its operands' types: each node evaluated at the type its context wants (a weak constant
/// takes its partner's), as eval<In, Want> does; identical instructions are emitted once. result() is the type
/// the Code gives (VT::error, with the reason for detail::describe, when it does not type-check); lower(out)
/// the program, which throws option_error beyond Program's limits.
class Lowering {
 public:
  Lowering(Code const& code, Types const& in) : code_(code), in_(in) {
    auto const& nodes = code.nodes();
    inferred_.resize(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      Code::Node const& n = nodes[i];
      std::size_t const arity = Code::arity(n.op);
      std::uint32_t const kids[3] = {n.a, n.b, n.c};
      for (std::size_t k = 0; k < arity; ++k)
        if (kids[k] >= i)
          throw option_error("expr::Code: node " + std::to_string(i) + " reads node " + std::to_string(kids[k]) +
                             ", which does not come before it");
      if (n.op == Opcode::operand && n.a >= max_operands)
        throw index_error("expr::Code: operand " + std::to_string(n.a) + " is beyond the " + std::to_string(max_operands) +
                          " a map takes");
      detail::Inferred const k[3] = {arity > 0 ? inferred_[n.a] : detail::Inferred{}, arity > 1 ? inferred_[n.b] : detail::Inferred{},
                             arity > 2 ? inferred_[n.c] : detail::Inferred{}};
      inferred_[i] = detail::infer_node(n.op, in, n.a, n.value, k);
    }
  }

  /// The root's type (error: it does not type-check; describe() says why).
  detail::Inferred result() const { return inferred_.empty() ? detail::Inferred{VT::error} : inferred_.back(); }

  /// The program computing the root as `out` (its storage type).
  Program lower(VT out) {
    p_ = Program{};
    p_.out = out;
    for (std::size_t k = 0; k < max_operands; ++k) p_.operands[k] = in_[k] == VT::any ? VT::f32 : in_[k];
    std::uint8_t const root = node(static_cast<std::uint32_t>(code_.nodes().size() - 1), out);
    // Registers: operands and constants keep theirs (their blocks are filled once or point at the operand);
    // other values free theirs after their last reader.
    std::array<std::size_t, Program::max_instructions> last{};
    for (std::size_t i = 0; i < p_.size; ++i) {
      auto const& ins = p_.code[i];
      std::size_t const arity = ins.op == Opcode::operand || ins.op == Opcode::constant ? 0 : Code::arity(ins.op);
      if (arity > 0) last[ins.a] = i;
      if (arity > 1) last[ins.b] = i;
      if (arity > 2) last[ins.c] = i;
    }
    last[root] = p_.size;
    std::vector<std::uint8_t> free;
    std::uint8_t next = 0;
    auto const leaf = [](Program::Instruction const& ins) { return ins.op == Opcode::operand || ins.op == Opcode::constant; };
    // Leaves first: their registers are filled before the first block and never shared.
    for (std::size_t i = 0; i < p_.size; ++i)
      if (leaf(p_.code[i])) {
        if (next == Program::max_registers)
          throw option_error("expr::Code: the expression needs more than " + std::to_string(Program::max_registers) +
                             " values at once; split it into several maps");
        p_.code[i].reg = next++;
      }
    for (std::size_t i = 0; i < p_.size; ++i) {
      auto& ins = p_.code[i];
      if (leaf(ins)) continue;
      if (free.empty()) {
        if (next == Program::max_registers)
          throw option_error("expr::Code: the expression needs more than " + std::to_string(Program::max_registers) +
                             " values at once; split it into several maps");
        ins.reg = next++;
      } else {
        ins.reg = free.back();
        free.pop_back();
      }
      bool const pinned = ins.op == Opcode::operand || ins.op == Opcode::constant;
      std::size_t const arity = pinned ? 0 : Code::arity(ins.op);
      std::uint8_t const args[3] = {ins.a, ins.b, ins.c};
      for (std::size_t k = 0; k < arity; ++k) {
        auto const& arg = p_.code[args[k]];
        bool const arg_pinned = arg.op == Opcode::operand || arg.op == Opcode::constant;
        bool const repeated = (k > 0 && args[k] == args[0]) || (k > 1 && args[k] == args[1]);
        if (!arg_pinned && last[args[k]] == i && !repeated) free.push_back(arg.reg);
      }
    }
    p_.registers = next;
    (void)root;  // the root is the last instruction (its children come first, and nothing below it equals it)
    return p_;
  }

 private:
  Code const& code_;
  Types in_;
  std::vector<detail::Inferred> inferred_;
  Program p_;
  std::vector<std::pair<std::uint64_t, std::uint8_t>> memo_;  // (node, wanted type) -> instruction

  std::uint8_t emit(Program::Instruction ins) {
    for (std::uint8_t i = 0; i < p_.size; ++i) {
      auto const& e = p_.code[i];
      if (e.op == ins.op && e.type == ins.type && e.a == ins.a && e.b == ins.b && e.c == ins.c) return i;
    }
    if (p_.size == Program::max_instructions)
      throw option_error("expr::Code: the expression has more than " + std::to_string(Program::max_instructions) +
                         " distinct operations; split it into several maps");
    p_.code[p_.size] = ins;
    return p_.size++;
  }

  std::uint8_t constant(double v, VT t) {
    std::size_t k = 0;
    for (; k < p_.constants.size(); ++k) {
      bool used = false;
      for (std::size_t i = 0; i < p_.size; ++i)
        if (p_.code[i].op == Opcode::constant && p_.code[i].a == k) used = true;
      if (!used || std::memcmp(&p_.constants[k], &v, sizeof v) == 0) break;
    }
    if (k == p_.constants.size())
      throw option_error("expr::Code: the expression has more than " + std::to_string(Program::max_constants) + " constants");
    p_.constants[k] = v;
    return emit({Opcode::constant, t, static_cast<std::uint8_t>(k), 0, 0, 0});
  }

  static VT concrete(VT t) { return t == VT::weak || t == VT::any ? VT::f32 : t; }

  std::uint8_t node(std::uint32_t i, VT want) {
    std::uint64_t const key = std::uint64_t{i} << 8 | static_cast<std::uint8_t>(want);
    for (auto const& [k, v] : memo_)
      if (k == key) return v;
    std::uint8_t const r = build(i, want);
    memo_.emplace_back(key, r);
    return r;
  }

  std::uint8_t build(std::uint32_t i, VT want) {
    Code::Node const& n = code_.nodes()[i];
    auto const type_of = [&](std::uint32_t k) { return inferred_[k].type; };
    switch (n.op) {
      case Opcode::operand: return emit({Opcode::operand, in_[n.a], static_cast<std::uint8_t>(n.a), 0, 0, 0});
      case Opcode::constant: return constant(n.value, detail::compute_type(concrete(want)));
      case Opcode::not_: return emit({n.op, VT::boolean, node(n.a, VT::boolean), 0, 0, 0});
      case Opcode::and_:
      case Opcode::or_: {
        std::uint8_t const x = node(n.a, VT::boolean), y = node(n.b, VT::boolean);
        return emit({n.op, VT::boolean, x, y, 0, 0});
      }
      case Opcode::less:
      case Opcode::less_equal:
      case Opcode::greater:
      case Opcode::greater_equal:
      case Opcode::equal:
      case Opcode::not_equal: {
        VT const t = detail::resolve(detail::unify("", inferred_[n.a], inferred_[n.b]).type, VT::f32);
        std::uint8_t const x = node(n.a, t), y = node(n.b, t);
        return emit({n.op, detail::compute_type(concrete(t)), x, y, 0, 0});
      }
      case Opcode::select: {
        VT const t = concrete(detail::resolve(inferred_[i].type, want));
        std::uint8_t const c = node(n.a, VT::boolean), x = node(n.b, t), y = node(n.c, t);
        return emit({n.op, detail::compute_type(t), c, x, y, 0});
      }
      case Opcode::cast_f32:
      case Opcode::cast_f16:
      case Opcode::cast_i32:
      case Opcode::cast_u32:
      case Opcode::cast_bool: {
        VT const f = concrete(detail::resolve(type_of(n.a), detail::cast_target(n.op)));
        return emit({n.op, detail::compute_type(f), node(n.a, f), 0, 0, 0});
      }
      default: {
        VT const t = concrete(detail::resolve(inferred_[i].type, want));
        std::uint8_t const x = node(n.a, t);
        std::uint8_t const y = Code::arity(n.op) > 1 ? node(n.b, t) : 0;
        return emit({n.op, detail::compute_type(t), x, y, 0, 0});
      }
    }
  }
};

namespace detail {

// ---- the interpreter ---------------------------------------------------------------------------------------

/// Elements per block: each instruction runs over a block before the next one starts.
inline constexpr std::size_t block = 256;

template <std::size_t N>
constexpr Types types_of(std::array<VT, N> const& t) {
  Types r{};
  r.fill(VT::any);
  for (std::size_t i = 0; i < N; ++i) r[i] = t[i];
  return r;
}

/// dst[0, n) = e(x, y, z at the same positions), n a multiple of the lanes: the templates' evaluation.
template <class E, Types In, VT Out>
void apply(void const* x, void const* y, void const* z, void* dst, std::size_t n) {
  Access<false> o;
  o.ptr[0] = x, o.ptr[1] = y, o.ptr[2] = z;
  for (std::size_t i = 0; i < n; i += simd::lanes) {
    o.offset = i;
    store<Out>(eval<In, Out>(E{}, o), dst, i);
  }
}

/// Runs operation E on arguments of value type t (K of them; a select's first is bool).
template <class E, std::size_t K>
void apply_typed(VT t, void const* x, void const* y, void const* z, void* dst, std::size_t n) {
  auto const go = [&]<VT T>() {
    constexpr Types in = K == 3 ? types_of<3>({VT::boolean, T, T}) : K == 2 ? types_of<2>({T, T}) : types_of<1>({T});
    constexpr Inferred r = E::infer(in);
    if constexpr (r.type != VT::error) apply<E, in, resolve(r.type, T)>(x, y, z, dst, n);
  };
  switch (t) {
    case VT::f32: go.template operator()<VT::f32>(); break;
    case VT::i32: go.template operator()<VT::i32>(); break;
    case VT::u32: go.template operator()<VT::u32>(); break;
    case VT::boolean: go.template operator()<VT::boolean>(); break;
    default: break;
  }
}

using P1 = Placeholder<1>;
using P2 = Placeholder<2>;
using P3 = Placeholder<3>;

/// One instruction over n elements (a multiple of the lanes). Not inlined: one copy serves every map.
template <class = void>
[[gnu::noinline]] void run_instruction(Program::Instruction const& ins, void const* x, void const* y, void const* z, void* dst, std::size_t n) {
  VT const t = ins.type;
  switch (ins.op) {
    case Opcode::neg: return apply_typed<Unary<op::Neg, P1>, 1>(t, x, y, z, dst, n);
    case Opcode::abs: return apply_typed<Unary<op::Abs, P1>, 1>(t, x, y, z, dst, n);
    case Opcode::relu: return apply_typed<Unary<op::Relu, P1>, 1>(t, x, y, z, dst, n);
    case Opcode::square: return apply_typed<Unary<op::Square, P1>, 1>(t, x, y, z, dst, n);
    case Opcode::sqrt: return apply_typed<Unary<op::Sqrt, P1>, 1>(t, x, y, z, dst, n);
    case Opcode::rsqrt: return apply_typed<Unary<op::Rsqrt, P1>, 1>(t, x, y, z, dst, n);
    case Opcode::exp: return apply_typed<Unary<op::Exp, P1>, 1>(t, x, y, z, dst, n);
    case Opcode::log: return apply_typed<Unary<op::Log, P1>, 1>(t, x, y, z, dst, n);
    case Opcode::tanh: return apply_typed<Unary<op::Tanh, P1>, 1>(t, x, y, z, dst, n);
    case Opcode::sigmoid: return apply_typed<Unary<op::Sigmoid, P1>, 1>(t, x, y, z, dst, n);
    case Opcode::erf: return apply_typed<Unary<op::Erf, P1>, 1>(t, x, y, z, dst, n);
    case Opcode::not_: return apply_typed<Unary<op::Not, P1>, 1>(t, x, y, z, dst, n);
    case Opcode::add: return apply_typed<Binary<op::Add, P1, P2>, 2>(t, x, y, z, dst, n);
    case Opcode::sub: return apply_typed<Binary<op::Sub, P1, P2>, 2>(t, x, y, z, dst, n);
    case Opcode::mul: return apply_typed<Binary<op::Mul, P1, P2>, 2>(t, x, y, z, dst, n);
    case Opcode::div: return apply_typed<Binary<op::Div, P1, P2>, 2>(t, x, y, z, dst, n);
    case Opcode::min: return apply_typed<Binary<op::Min, P1, P2>, 2>(t, x, y, z, dst, n);
    case Opcode::max: return apply_typed<Binary<op::Max, P1, P2>, 2>(t, x, y, z, dst, n);
    case Opcode::pow: return apply_typed<Binary<op::Pow, P1, P2>, 2>(t, x, y, z, dst, n);
    case Opcode::less: return apply_typed<Binary<op::Less, P1, P2>, 2>(t, x, y, z, dst, n);
    case Opcode::less_equal: return apply_typed<Binary<op::LessEqual, P1, P2>, 2>(t, x, y, z, dst, n);
    case Opcode::greater: return apply_typed<Binary<op::Greater, P1, P2>, 2>(t, x, y, z, dst, n);
    case Opcode::greater_equal: return apply_typed<Binary<op::GreaterEqual, P1, P2>, 2>(t, x, y, z, dst, n);
    case Opcode::equal: return apply_typed<Binary<op::Equal, P1, P2>, 2>(t, x, y, z, dst, n);
    case Opcode::not_equal: return apply_typed<Binary<op::NotEqual, P1, P2>, 2>(t, x, y, z, dst, n);
    case Opcode::and_: return apply_typed<Binary<op::And, P1, P2>, 2>(t, x, y, z, dst, n);
    case Opcode::or_: return apply_typed<Binary<op::Or, P1, P2>, 2>(t, x, y, z, dst, n);
    case Opcode::select: return apply_typed<Select<P1, P2, P3>, 3>(t, x, y, z, dst, n);
    case Opcode::cast_f32:
    case Opcode::cast_f16: return apply_typed<Cast<VT::f32, P1>, 1>(t, x, y, z, dst, n);
    case Opcode::cast_i32: return apply_typed<Cast<VT::i32, P1>, 1>(t, x, y, z, dst, n);
    case Opcode::cast_u32: return apply_typed<Cast<VT::u32, P1>, 1>(t, x, y, z, dst, n);
    case Opcode::cast_bool: return apply_typed<Cast<VT::boolean, P1>, 1>(t, x, y, z, dst, n);
    default: return;
  }
}

/// n values of storage type `from` at src into `to` (its compute type) at dst, through the templates' load.
template <VT From>
void load_block(void const* src, void* dst, std::size_t n) {
  apply<P1, types_of<1>({From}), compute_type(From)>(src, nullptr, nullptr, dst, n);
}
template <class = void>
[[gnu::noinline]] void load_typed(VT from, void const* src, void* dst, std::size_t n) {
  switch (from) {
    case VT::f32: return load_block<VT::f32>(src, dst, n);
    case VT::f16: return load_block<VT::f16>(src, dst, n);
    case VT::i32: return load_block<VT::i32>(src, dst, n);
    case VT::u32: return load_block<VT::u32>(src, dst, n);
    default: return load_block<VT::boolean>(src, dst, n);
  }
}
/// A register's block (of type `from`) as the output's storage type `out`.
template <VT Out>
void store_as(VT from, void const* src, void* dst, std::size_t n) {
  switch (from) {
    case VT::f32: return apply<Cast<Out, P1>, types_of<1>({VT::f32}), Out>(src, nullptr, nullptr, dst, n);
    case VT::i32: return apply<Cast<Out, P1>, types_of<1>({VT::i32}), Out>(src, nullptr, nullptr, dst, n);
    case VT::u32: return apply<Cast<Out, P1>, types_of<1>({VT::u32}), Out>(src, nullptr, nullptr, dst, n);
    default: return apply<Cast<Out, P1>, types_of<1>({VT::boolean}), Out>(src, nullptr, nullptr, dst, n);
  }
}
template <class = void>
[[gnu::noinline]] void store_block(VT out, VT from, void const* src, void* dst, std::size_t n) {
  switch (out) {
    case VT::f32: return store_as<VT::f32>(from, src, dst, n);
    case VT::f16: return store_as<VT::f16>(from, src, dst, n);
    case VT::i32: return store_as<VT::i32>(from, src, dst, n);
    case VT::u32: return store_as<VT::u32>(from, src, dst, n);
    default: return store_as<VT::boolean>(from, src, dst, n);
  }
}

/// One value of type t (a compute type) written n times at dst.
inline void fill_block(VT t, double v, void* dst, std::size_t n) {
  switch (t) {
    case VT::f32: std::fill_n(static_cast<float*>(dst), n, static_cast<float>(v)); break;
    case VT::i32: std::fill_n(static_cast<std::int32_t*>(dst), n, static_cast<std::int32_t>(v)); break;
    case VT::u32: std::fill_n(static_cast<std::uint32_t*>(dst), n, static_cast<std::uint32_t>(v)); break;
    default: std::fill_n(static_cast<bool*>(dst), n, v != 0); break;
  }
}

/// out[i] = the program at element i, i < n, in blocks; the final partial batch is padded with zeros as the
/// templates' evaluation pads it. Operands as in evaluate (scalars broadcast). `rows` such runs, run r with operand
/// k at o.ptr[k] + r * step[k] bytes (step null: one run) and the output at out + r * out_step: the constants' and
/// the fixed scalars' registers are filled once for all of them, each as wide as the longest block.
template <class = void>
[[gnu::noinline]] void interpret(Program const& p, Operands const& o, void* out, std::size_t n, std::size_t rows = 1,
                                 std::ptrdiff_t const* step = nullptr, std::ptrdiff_t out_step = 0) {
  constexpr std::size_t L = simd::lanes;
  if (n == 0 || rows == 0) return;
  std::size_t const wide = (std::min(block, n) + L - 1) / L * L;  // elements any block reads
  alignas(64) std::byte reg[Program::max_registers][block * 4];
  void const* at[Program::max_instructions] = {};
  Operands row = o;
  // A scalar operand's register: its value broadcast.
  auto const fill_scalar = [&](Program::Instruction const& ins) {
    alignas(64) std::byte raw[4 * simd::lanes] = {}, one[4 * simd::lanes] = {};
    std::memcpy(raw, row.ptr[ins.a], width(ins.type));
    load_typed(ins.type, raw, one, L);  // lane 0 is the value
    // Compute types are 4 bytes wide or bool: one typed fill (a copy of w bytes per element, w unknown to the
    // compiler, ran byte by byte: most of a softmax's or a layer norm's time, whose scalars step every row).
    if (width(compute_type(ins.type)) == 4) {
      std::uint32_t v;
      std::memcpy(&v, one, 4);
      std::fill_n(reinterpret_cast<std::uint32_t*>(reg[ins.reg]), wide, v);
    } else {
      std::memset(reg[ins.reg], static_cast<int>(one[0]), wide);
    }
  };
  // Constants and broadcast operands: their registers filled once (a scalar that steps from row to row, per row).
  for (std::size_t i = 0; i < p.size; ++i) {
    auto const& ins = p.code[i];
    if (ins.op == Opcode::constant) fill_block(ins.type, p.constants[ins.a], reg[ins.reg], wide);
    else if (ins.op == Opcode::operand && (o.scalar >> ins.a & 1u)) fill_scalar(ins);
  }
  // Where the root is an instruction whose result type is the output's storage type (f32, i32, u32: a store
  // would copy its register unchanged), it writes whole blocks straight into the output: an operand that shares
  // the output's memory is the output's own view (ops::map), read at the element it writes, before it writes it.
  auto const& last = p.code[p.size - 1];
  bool const direct = last.op != Opcode::operand && last.op != Opcode::constant && result_type(last) == p.out &&
                      (p.out == VT::f32 || p.out == VT::i32 || p.out == VT::u32);
  for (std::size_t r = 0; r < rows; ++r) {
    if (r > 0) {
      for (std::size_t k = 0; k < max_operands; ++k)
        if (row.ptr[k]) row.ptr[k] = static_cast<std::byte const*>(row.ptr[k]) + step[k];
      for (std::size_t i = 0; i < p.size; ++i) {
        auto const& ins = p.code[i];
        if (ins.op == Opcode::operand && (o.scalar >> ins.a & 1u) && step[ins.a] != 0) fill_scalar(ins);
      }
    }
    auto* const row_out = static_cast<std::byte*>(out) + static_cast<std::ptrdiff_t>(r) * out_step;
    for (std::size_t s = 0; s < n; s += block) {
      std::size_t const len = std::min(block, n - s), full = (len + L - 1) / L * L;
      bool const into_out = direct && len == full;  // the root writes this block into the output
      auto* dst = row_out + s * width(p.out);
      for (std::size_t i = 0; i < p.size; ++i) {
        auto const& ins = p.code[i];
        if (ins.op == Opcode::constant) {
          at[i] = reg[ins.reg];
        } else if (ins.op == Opcode::operand) {
          if (o.scalar >> ins.a & 1u) {
            at[i] = reg[ins.reg];
            continue;
          }
          std::size_t const w = width(ins.type);
          auto const* src = static_cast<std::byte const*>(row.ptr[ins.a]) + s * w;
          if (len == full && w == width(compute_type(ins.type))) {
            at[i] = src;  // read in place
          } else if (len == full) {
            load_typed(ins.type, src, reg[ins.reg], full);
            at[i] = reg[ins.reg];
          } else {
            alignas(64) std::byte tail[block * 4];
            std::memcpy(tail, src, len * w);
            std::memset(tail + len * w, 0, (full - len) * w);  // the padding the templates' evaluation reads
            load_typed(ins.type, tail, reg[ins.reg], full);
            at[i] = reg[ins.reg];
          }
        } else if (i + 1 == p.size && into_out) {
          run_instruction(ins, at[ins.a], at[ins.b], at[ins.c], dst, full);
        } else {
          run_instruction(ins, at[ins.a], at[ins.b], at[ins.c], reg[ins.reg], full);
          at[i] = reg[ins.reg];
        }
      }
      if (into_out) continue;
      auto const& root = p.code[p.size - 1];
      if (len == full) {
        store_block(p.out, result_type(root), at[p.size - 1], dst, full);
      } else {
        alignas(64) std::byte tail[block * 4];
        store_block(p.out, result_type(root), at[p.size - 1], tail, full);
        std::memcpy(dst, tail, len * width(p.out));
      }
    }
  }
}

}  // namespace detail

/// Runs `p` over n elements: out[i] = the program at element i of the operands (o.ptr, scalars broadcast). A
/// template, as detail::interpret is, so that a file that never runs a program does not instantiate the interpreter
/// (a template named in an inline function's body is instantiated in every file that includes it).
template <class = void>
void interpret(Program const& p, Operands const& o, void* out, std::size_t n) {
  detail::interpret(p, o, out, n);
}

/// A lowered Code as ops::map's expression type. Its operand and output types are data (the program's), so one
/// instance of the map serves every type: ops::map instantiates it with operand and output types VT::any.
struct Interpreted {
  using is_expr = void;
  static constexpr std::size_t max_index = 0;  // checked when the Code is lowered
  static constexpr std::size_t nodes = 1;
  Program program;
  static constexpr detail::Inferred infer(Types const&) noexcept { return {VT::any}; }
};
template <class E>
inline constexpr bool is_interpreted = std::is_same_v<E, Interpreted>;

/// The interpreted form of evaluate (expr/eval.hpp): the same values, one instruction at a time over blocks.
template <Types In, VT Out>
void evaluate(Interpreted const& e, Operands const& o, std::size_t, void* out, std::size_t n, bool = false) {
  detail::interpret(e.program, o, out, n);
}
/// The interpreted form of evaluate_rows: one interpretation of all the rows.
template <Types In, VT Out>
void evaluate_rows(Interpreted const& e, Operands const& o, std::size_t num_operands, void* out, std::size_t n, std::size_t rows,
                   std::ptrdiff_t const* step, std::ptrdiff_t out_step, bool = false) {
  std::ptrdiff_t all[max_operands] = {};
  std::copy(step, step + std::min(num_operands, max_operands), all);
  detail::interpret(e.program, o, out, n, rows, all, out_step);
}

/// The type an expression gives for operand types t (an interpreted one: its program's output type).
template <class E>
constexpr detail::Inferred infer_of(E const&, Types const& t) noexcept {
  return E::infer(t);
}
inline detail::Inferred infer_of(Interpreted const& e, Types const&) noexcept { return {e.program.out}; }

}  // namespace tilebsp::expr
