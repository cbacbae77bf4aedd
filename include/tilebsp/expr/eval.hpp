// SIMD evaluation of elementwise expressions: every node maps batches to batches; a padded final batch gives the
// tail exactly the same arithmetic as the body, for any length and alignment.
#pragma once

#include <tilebsp/core/half.hpp>
#include <tilebsp/expr/expr.hpp>
#include <tilebsp/simd/arch.hpp>

#include <xsimd/xsimd.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <limits>
#include <type_traits>

namespace tilebsp::expr {

namespace detail {
template <VT T> struct storage;
template <> struct storage<VT::f32> { using type = float; };
template <> struct storage<VT::f16> { using type = half; };
template <> struct storage<VT::i32> { using type = std::int32_t; };
template <> struct storage<VT::u32> { using type = std::uint32_t; };
template <> struct storage<VT::boolean> { using type = bool; };
template <VT T> struct compute { using type = simd::batch<float>; };
template <> struct compute<VT::i32> { using type = simd::batch<std::int32_t>; };
template <> struct compute<VT::u32> { using type = simd::batch<std::uint32_t>; };
template <> struct compute<VT::boolean> { using type = simd::mask; };
}  // namespace detail

/// The C++ element type stored for a value type.
template <VT T>
using storage_t = typename detail::storage<T>::type;
/// The SIMD batch a value type is computed in (f16 computes in f32).
template <VT T>
using value_t = typename detail::compute<T>::type;
template <VT T>
using scalar_t = std::conditional_t<T == VT::i32, std::int32_t, std::conditional_t<T == VT::u32, std::uint32_t, float>>;

/// Where the operands are: pointers, which are scalars (broadcast one value), and the current element offset.
struct Operands {
  void const* ptr[max_operands] = {};
  std::uint32_t scalar = 0;
  std::size_t offset = 0;
};
/// Operands as the kernels see them: when Scalars is false no operand is a scalar and the check compiles away.
template <bool Scalars>
struct Access : Operands {
  static constexpr bool scalars = Scalars;
};

namespace detail {

using i32b = simd::batch<std::int32_t>;
using u32b = simd::batch<std::uint32_t>;
using f32b = simd::batch<float>;

inline simd::mask to_mask(xsimd::batch_bool<float, simd::arch> const& m) { return m; }
inline simd::mask to_mask(xsimd::batch_bool<std::int32_t, simd::arch> const& m) { return xsimd::bool_cast(m); }
inline xsimd::batch_bool<std::int32_t, simd::arch> int_mask(simd::mask const& m) { return xsimd::bool_cast(m); }

/// Unsigned order as signed order after flipping the sign bits (SIMD has no unsigned compares everywhere).
inline i32b flip(u32b const& x) { return simd::reinterpret<std::int32_t>(x ^ u32b(0x80000000u)); }

/// i32 arithmetic that wraps (as on the IPU) instead of overflowing: computed on the unsigned bits.
template <class F>
i32b wrapping(i32b const& a, i32b const& b, F f) {
  return simd::reinterpret<std::int32_t>(f(simd::reinterpret<std::uint32_t>(a), simd::reinterpret<std::uint32_t>(b)));
}

template <class F, class B>
B lanewise(B const& a, B const& b, F f) {
  using T = typename B::value_type;
  alignas(64) T x[B::size], y[B::size];
  a.store_aligned(x);
  b.store_aligned(y);
  for (std::size_t i = 0; i < B::size; ++i) x[i] = f(x[i], y[i]);
  return B::load_aligned(x);
}

template <VT T>
value_t<T> load(void const* p, std::size_t i) {
  if constexpr (T == VT::f16) return simd::load_f16(static_cast<half const*>(p) + i);
  else if constexpr (T == VT::boolean) return simd::mask::load_unaligned(static_cast<bool const*>(p) + i);
  else return value_t<T>::load_unaligned(static_cast<storage_t<T> const*>(p) + i);
}
template <VT T>
value_t<T> splat(void const* p) {
  if constexpr (T == VT::f16) return value_t<T>(float(*static_cast<half const*>(p)));
  else if constexpr (T == VT::boolean) return simd::mask(*static_cast<bool const*>(p));
  else return value_t<T>(*static_cast<storage_t<T> const*>(p));
}
template <VT T>
void store(value_t<T> const& v, void* p, std::size_t i) {
  if constexpr (T == VT::f16) simd::store_f16(v, static_cast<half*>(p) + i);
  else if constexpr (T == VT::boolean) v.store_unaligned(static_cast<bool*>(p) + i);
  else v.store_unaligned(static_cast<storage_t<T>*>(p) + i);
}

/// Converts a value from type F to type T.
template <VT T, VT F>
value_t<T> convert(value_t<F> const& x) {
  constexpr bool ff = is_float(F), tf = is_float(T);
  if constexpr (F == T || (ff && tf)) {
    return x;
  } else if constexpr (T == VT::boolean) {
    if constexpr (F == VT::u32) return to_mask(simd::reinterpret<std::int32_t>(x) != i32b(0));
    else return to_mask(x != value_t<F>(0));
  } else if constexpr (F == VT::boolean) {
    if constexpr (tf) return xsimd::select(x, f32b(1), f32b(0));
    else if constexpr (T == VT::i32) return xsimd::select(int_mask(x), i32b(1), i32b(0));
    else return simd::reinterpret<std::uint32_t>(xsimd::select(int_mask(x), i32b(1), i32b(0)));
  } else if constexpr (ff && T == VT::i32) {
    return xsimd::batch_cast<std::int32_t>(x);
  } else if constexpr (F == VT::i32 && tf) {
    return xsimd::batch_cast<float>(x);
  } else if constexpr ((F == VT::i32 && T == VT::u32) || (F == VT::u32 && T == VT::i32)) {
    return simd::reinterpret<scalar_t<T>>(x);
  } else {  // f32 <-> u32, lane by lane; floats outside [0, 2^32) saturate and NaN gives 0 (never undefined)
    alignas(64) scalar_t<F> in[simd::lanes];
    alignas(64) scalar_t<T> out[simd::lanes];
    x.store_aligned(in);
    for (std::size_t i = 0; i < simd::lanes; ++i) {
      if constexpr (T == VT::u32) {
        float const v = in[i];
        out[i] = !(v > 0) ? 0u : v >= 4294967296.0f ? 0xffffffffu : static_cast<std::uint32_t>(v);
      } else {
        out[i] = static_cast<scalar_t<T>>(in[i]);
      }
    }
    return value_t<T>::load_aligned(out);
  }
}

}  // namespace detail

// ---- evaluation of each node kind ----------------------------------------------------------------------

template <Types In, VT Want, std::size_t I, class O>
value_t<detail::resolve(In[I - 1], Want)> eval(Placeholder<I> const&, O const& o) {
  constexpr VT T = In[I - 1];
  if constexpr (O::scalars)
    if (o.scalar >> (I - 1) & 1u) return detail::splat<T>(o.ptr[I - 1]);
  return detail::load<T>(o.ptr[I - 1], o.offset);
}

template <Types In, VT Want, class O>
value_t<Want> eval(Constant const& c, O const&) {
  if constexpr (Want == VT::boolean) return simd::mask(c.value != 0);
  else return value_t<Want>(static_cast<scalar_t<Want>>(c.value));
}

template <Types In, VT Want, VT T, class A, class O>
value_t<T> eval(Cast<T, A> const& e, O const& o) {
  constexpr VT F = detail::resolve(A::infer(In).type, T);
  return detail::convert<T, F>(eval<In, F>(e.a, o));
}

template <Types In, VT Want, class C, class A, class B, class O>
auto eval(Select<C, A, B> const& e, O const& o) {
  constexpr VT T = detail::resolve(Select<C, A, B>::infer(In).type, Want);
  auto const c = eval<In, VT::boolean>(e.c, o);
  auto const a = eval<In, T>(e.a, o);
  auto const b = eval<In, T>(e.b, o);
  if constexpr (T == VT::boolean) return (c & a) | (~c & b);
  else if constexpr (detail::is_float(T)) return xsimd::select(c, a, b);
  else if constexpr (T == VT::i32) return xsimd::select(detail::int_mask(c), a, b);
  else
    return simd::reinterpret<std::uint32_t>(
        xsimd::select(detail::int_mask(c), simd::reinterpret<std::int32_t>(a), simd::reinterpret<std::int32_t>(b)));
}

template <Types In, VT Want, class Op, class A, class O>
auto eval(Unary<Op, A> const& e, O const& o) {
  constexpr VT T = detail::resolve(Unary<Op, A>::infer(In).type, Want);
  if constexpr (std::is_same_v<Op, op::Not>) {
    return ~eval<In, VT::boolean>(e.a, o);
  } else {
    auto const x = eval<In, T>(e.a, o);
    using B = value_t<T>;
    constexpr bool i32 = T == VT::i32;
    auto const sub = [](auto p, auto q) { return p - q; };
    if constexpr (std::is_same_v<Op, op::Neg>) {
      if constexpr (i32) return detail::wrapping(B(0), x, sub);
      else return B(0) - x;
    } else if constexpr (std::is_same_v<Op, op::Abs>) {
      if constexpr (T == VT::u32) return x;
      else if constexpr (i32) return detail::wrapping(x ^ (x >> 31), x >> 31, sub);  // abs(INT_MIN) wraps
      else return xsimd::abs(x);
    } else if constexpr (std::is_same_v<Op, op::Relu>) return xsimd::max(x, B(0));
    else if constexpr (std::is_same_v<Op, op::Square>) {
      if constexpr (i32) return detail::wrapping(x, x, [](auto p, auto q) { return p * q; });
      else return x * x;
    }
    else if constexpr (std::is_same_v<Op, op::Sqrt>) return xsimd::sqrt(x);
    else if constexpr (std::is_same_v<Op, op::Rsqrt>) return B(1) / xsimd::sqrt(x);
    else if constexpr (std::is_same_v<Op, op::Exp>) return simd::exp(x);
    else if constexpr (std::is_same_v<Op, op::Log>) return xsimd::log(x);
    else if constexpr (std::is_same_v<Op, op::Tanh>) return xsimd::tanh(x);
    else if constexpr (std::is_same_v<Op, op::Sigmoid>) return simd::sigmoid(x);
    else if constexpr (std::is_same_v<Op, op::Erf>) return xsimd::erf(x);
    else static_assert(sizeof(Op) == 0, "eval: unknown detail::unary operator");
  }
}

template <Types In, VT Want, class Op, class A, class B, class O>
auto eval(Binary<Op, A, B> const& e, O const& o) {
  constexpr bool logical = std::is_same_v<Op, op::And> || std::is_same_v<Op, op::Or>;
  constexpr bool compare = std::is_same_v<Op, op::Less> || std::is_same_v<Op, op::LessEqual> ||
                           std::is_same_v<Op, op::Greater> || std::is_same_v<Op, op::GreaterEqual> ||
                           std::is_same_v<Op, op::Equal> || std::is_same_v<Op, op::NotEqual>;
  if constexpr (logical) {
    auto const x = eval<In, VT::boolean>(e.a, o), y = eval<In, VT::boolean>(e.b, o);
    if constexpr (std::is_same_v<Op, op::And>) return x & y;
    else return x | y;
  } else if constexpr (compare) {
    constexpr VT T = detail::resolve(detail::unify("", A::infer(In), B::infer(In)).type, VT::f32);
    auto x = eval<In, T>(e.a, o);
    auto y = eval<In, T>(e.b, o);
    if constexpr (T == VT::boolean) {
      // Mask equality, not x ^ y: xsimd 8.1's AVX-512 xor of two masks is their or (true ^ true gave true), and
      // its SSE2 != on masks compares them as floats (all ones is a NaN: true != true gave true).
      if constexpr (std::is_same_v<Op, op::Equal>) return x == y;
      else return ~(x == y);
    } else {
      auto const cmp = [&](auto const& p, auto const& q) {
        if constexpr (std::is_same_v<Op, op::Less>) return detail::to_mask(p < q);
        else if constexpr (std::is_same_v<Op, op::LessEqual>) return detail::to_mask(p <= q);
        else if constexpr (std::is_same_v<Op, op::Greater>) return detail::to_mask(p > q);
        else if constexpr (std::is_same_v<Op, op::GreaterEqual>) return detail::to_mask(p >= q);
        else if constexpr (std::is_same_v<Op, op::Equal>) return detail::to_mask(p == q);
        else return detail::to_mask(p != q);
      };
      if constexpr (T == VT::u32) return cmp(detail::flip(x), detail::flip(y));
      else return cmp(x, y);
    }
  } else {
    constexpr VT T = detail::resolve(Binary<Op, A, B>::infer(In).type, Want);
    auto const x = eval<In, T>(e.a, o);
    auto const y = eval<In, T>(e.b, o);
    constexpr bool i32 = T == VT::i32;  // signed overflow wraps instead of being undefined
    if constexpr (std::is_same_v<Op, op::Add>) {
      if constexpr (i32) return detail::wrapping(x, y, [](auto p, auto q) { return p + q; });
      else return x + y;
    } else if constexpr (std::is_same_v<Op, op::Sub>) {
      if constexpr (i32) return detail::wrapping(x, y, [](auto p, auto q) { return p - q; });
      else return x - y;
    } else if constexpr (std::is_same_v<Op, op::Mul>) {
      if constexpr (i32) return detail::wrapping(x, y, [](auto p, auto q) { return p * q; });
      else return x * y;
    }
    else if constexpr (std::is_same_v<Op, op::Min>) return xsimd::min(x, y);
    else if constexpr (std::is_same_v<Op, op::Max>) return xsimd::max(x, y);
    else if constexpr (std::is_same_v<Op, op::Pow>) return xsimd::pow(x, y);
    else if constexpr (std::is_same_v<Op, op::Div>) {
      if constexpr (detail::is_float(T)) {
        return x / y;
      } else {
        // Integer division never traps: x / 0 is 0, and INT_MIN / -1 wraps to INT_MIN.
        using S = scalar_t<T>;
        return detail::lanewise(x, y, [](S p, S q) -> S {
          if (q == 0) return 0;
          if constexpr (std::is_signed_v<S>)
            if (p == std::numeric_limits<S>::min() && q == -1) return p;
          return static_cast<S>(p / q);
        });
      }
    } else {
      static_assert(sizeof(Op) == 0, "eval: unknown detail::binary operator");
    }
  }
}

namespace detail {
constexpr std::size_t width(VT v) noexcept { return v == VT::boolean ? 1 : v == VT::f16 ? 2 : 4; }

/// Elements [i, i + count) (count < lanes) through one padded batch: the same instructions as full batches.
template <Types In, VT Out, class E, class O>
void partial(E const& e, O const& o, std::size_t num_operands, void* out, std::size_t i, std::size_t count) {
  constexpr std::size_t L = simd::lanes;
  alignas(64) std::byte buf[max_operands][L * 4] = {};
  alignas(64) std::byte result[L * 4];
  O t = o;
  t.offset = 0;
  for (std::size_t k = 0; k < num_operands; ++k) {
    if (t.scalar >> k & 1u) continue;
    std::memcpy(buf[k], static_cast<std::byte const*>(o.ptr[k]) + i * width(In[k]), count * width(In[k]));
    t.ptr[k] = buf[k];
  }
  store<Out>(eval<In, Out>(e, t), result, 0);
  std::memcpy(static_cast<std::byte*>(out) + i * width(Out), result, count * width(Out));
}

/// With `stream`, whole batches go past the cache; `fence` orders those stores before the caller's next step (a
/// caller that streams several runs fences once, after the last).
// Flattened, on a copy of the expression: its evaluation inlined into the loop, with its constants converted and
// broadcast once per run instead of once per batch (GCC left a long expression, an erf, as a call per batch, and the
// stores through `out` might alias the caller's expression, whose constants it then loaded again per batch). The
// operands too are a copy: through the caller's, every batch loaded the pointers and stored the offset again (the
// stores may alias anything), which took a fifth of a bias and SiLU map's time.
template <Types In, VT Out, class E0, class O>
[[gnu::flatten]] void run(E0 const& e0, O const& o0, std::size_t num_operands, void* out, std::size_t n, bool stream,
                          bool fence = true) {
  constexpr std::size_t L = simd::lanes;
  E0 const e = e0;
  O o = o0;
  std::size_t i = 0;
  if constexpr (width(Out) == 4) {
    if (stream && n >= 8 * L) {
      // Peel a head up to the batch alignment, then stream whole batches past the cache.
      std::size_t const mis = (reinterpret_cast<std::uintptr_t>(out) % (4 * L)) / 4;
      std::size_t const head = std::min(n, (L - mis) % L);
      if (head) partial<In, Out>(e, o, num_operands, out, 0, head);
      for (i = head; i + L <= n; i += L) {
        o.offset = i;
        simd::store_stream(eval<In, Out>(e, o), static_cast<storage_t<Out>*>(out) + i);
      }
      if (fence) simd::stream_fence();
      if (i < n) partial<In, Out>(e, o, num_operands, out, i, n - i);
      return;
    }
  }
  for (; i + L <= n; i += L) {
    o.offset = i;
    store<Out>(eval<In, Out>(e, o), out, i);
  }
  if (i < n) partial<In, Out>(e, o, num_operands, out, i, n - i);
}
}  // namespace detail

/// out[i] = e(operands at i) for i < n, computed in batches; partial batches are padded so every element sees
/// the same instructions whatever its position. Operands may alias the output element for element. With
/// `stream`, 32-bit outputs are written with non-temporal stores (for outputs much larger than the cache).
template <Types In, VT Out, class E>
void evaluate(E const& e, Operands const& o, std::size_t num_operands, void* out, std::size_t n, bool stream = false) {
  if (o.scalar) {
    Access<true> a{o};
    detail::run<In, Out>(e, a, num_operands, out, n, stream);
  } else {
    Access<false> a{o};
    detail::run<In, Out>(e, a, num_operands, out, n, stream);
  }
}

/// `rows` runs of evaluate(e, o, num_operands, out, n, stream), run r with each operand k at o.ptr[k] + r *
/// step[k] bytes and the output at out + r * out_step bytes: bitwise one evaluate call per row, without the cost
/// of a call (and of setting up its operands) per row, for rows as short as a layer's channels.
template <Types In, VT Out, class E>
void evaluate_rows(E const& e, Operands const& o, std::size_t num_operands, void* out, std::size_t n, std::size_t rows,
                   std::ptrdiff_t const* step, std::ptrdiff_t out_step, bool stream = false) {
  auto const each = [&](auto a) {
    auto* dst = static_cast<std::byte*>(out);
    for (std::size_t r = 0; r < rows; ++r, dst += out_step) {
      detail::run<In, Out>(e, a, num_operands, dst, n, stream, false);
      for (std::size_t k = 0; k < num_operands; ++k) a.ptr[k] = static_cast<std::byte const*>(a.ptr[k]) + step[k];
    }
  };
  if (o.scalar) each(Access<true>{o});
  else each(Access<false>{o});
  // One fence for all the rows' streamed stores: a fence per row (a layer's channels, 1 KiB) stalled every row.
  if (stream) simd::stream_fence();
}

}  // namespace tilebsp::expr
