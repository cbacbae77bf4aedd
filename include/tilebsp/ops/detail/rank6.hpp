// Rank-6 views shared by the convolution-like operators (conv, max_pool): activations (n, x0, x1, x2, g, c) and
// weights (g, t0, t1, t2, c_in, c_out) of rank-1 to rank-3 problems, blocks of them, and kernel operands.
#pragma once

#include <tilebsp/core/shape.hpp>
#include <tilebsp/core/tensor.hpp>
#include <tilebsp/simd/conv_loop.hpp>

#include <array>
#include <cstddef>
#include <cstdint>

namespace tilebsp::ops::detail {

using Index6 = std::array<std::int64_t, 6>;

/// Where a vertex's contiguous (gathered) block sits in its rank-6 operand: origin and shape.
struct Block6 {
  Index6 origin{}, shape{};
  template <class T>
  simd::Operand6<T> operand(T* data) const noexcept {
    simd::Operand6<T> op{data, {}, origin};
    std::ptrdiff_t s = 1;
    for (int d = 5; d >= 0; --d) {
      op.stride[static_cast<std::size_t>(d)] = s;
      s *= static_cast<std::ptrdiff_t>(shape[static_cast<std::size_t>(d)]);
    }
    return op;
  }
  Tensor of(Tensor const& t6) const {
    Shape b(6), e(6);
    for (std::size_t d = 0; d < 6; ++d) {
      b[d] = static_cast<std::size_t>(origin[d]);
      e[d] = static_cast<std::size_t>(origin[d] + shape[d]);
    }
    return t6.slice(b, e);
  }
};

/// A rank-6 view of one variable (Tensor::affine) at its host address `base`, as a kernel operand: what the
/// whole-operator host kernels read and write in place.
template <class T>
simd::Operand6<T> affine_operand6(tilebsp::core::detail::Affine const& a, std::byte* base) {
  simd::Operand6<T> op;
  op.data = reinterpret_cast<T*>(base) + a.start;
  for (std::size_t d = 0; d < 6; ++d) op.stride[d] = static_cast<std::ptrdiff_t>(a.strides[d]);
  return op;
}

/// Rank-6 view of channels-last activations [N, field..., G * C] of a rank-r problem: (n, x0, x1, x2, g, c).
inline Tensor activations6(Tensor const& t, std::size_t rank, std::size_t groups) {
  Shape s = t.shape();
  std::size_t const ch = s.back();
  s.back() = groups;
  s.push_back(ch / groups);
  Tensor v = t.reshape(s);
  for (std::size_t i = rank; i < 3; ++i) v = v.expand(1);
  return v;
}
/// Rank-6 view of weights [G, kernel..., C_in, C_out]: (g, t0, t1, t2, c_in, c_out).
inline Tensor weights6(Tensor const& w, std::size_t rank) {
  Tensor v = w;
  for (std::size_t i = rank; i < 3; ++i) v = v.expand(1);
  return v;
}

}  // namespace tilebsp::ops::detail
