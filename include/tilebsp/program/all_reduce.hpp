// Cross-replica collectives as program values: all_reduce(t, op) reduces a tensor over the replicas of a
// replicated executable (CompileOptions::replicas), in place, in a fixed replica order.
#pragma once

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/half.hpp>
#include <tilebsp/core/tensor.hpp>
#include <tilebsp/core/types.hpp>
#include <tilebsp/program/lower.hpp>

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

namespace tilebsp {

/// What a cross-replica reduction computes, element by element.
enum class CollectiveOp : std::uint8_t {
  sum,   ///< x_0 + x_1 + ... + x_{R-1}, added in that order (f16: in f32, rounded once; integers: modulo 2^32)
  mean,  ///< the sum divided by R (floating-point types only)
  max,   ///< the largest (any numeric type): a flag "any replica overflowed", a global norm's maximum
};

inline char const* name_of(CollectiveOp op) noexcept {
  switch (op) {
    case CollectiveOp::sum: return "sum";
    case CollectiveOp::mean: return "mean";
    case CollectiveOp::max: return "max";
  }
  return "?";
}

/// Replaces `t` in every replica by its reduction over all replicas (Poplar's allReduceInPlaceCrossReplica).
/// The order of the reduction is fixed (replica 0 first), so results are bitwise the same for any number of
/// host threads, any assignment of replicas to threads or processes (the MPI backend included).
struct AllReduce {
  Tensor t;
  CollectiveOp op = CollectiveOp::sum;
  std::string name;
  void lower(Lowering& l) const { l.all_reduce(t, static_cast<std::uint8_t>(op), name); }
};

/// Checks the tensor and the operation at once: empty tensor (error), bool elements or mean of integers
/// (type_error).
inline AllReduce all_reduce(Tensor const& t, CollectiveOp op, std::string name = "all_reduce") {
  if (!t.valid()) throw error("all_reduce: the tensor is empty (default-constructed)");
  ElementType const ty = t.element_type();
  if (ty == ElementType::boolean)
    throw type_error("all_reduce: '" + name + "' holds bool; reduce u8, i32, u32, f16 or f32 tensors");
  if (op == CollectiveOp::mean && ty != ElementType::f32 && ty != ElementType::f16)
    throw type_error("all_reduce: the mean of '" + name + "' (" + std::string(name_of(ty)) +
                     ") needs a floating-point tensor; use CollectiveOp::sum for integers");
  return {t, op, std::move(name)};
}

namespace schedule {

/// What Op::collective computes: the reduction of `n` elements of type `type` over `count` contributions src[0], ..., src[count - 1] (in that
/// order) into `dst` (which may be src[0]). The one definition every backend uses: results are bitwise the same
/// whichever process or thread computes an element.
inline void reduce_in_order(ElementType type, CollectiveOp op, std::byte const* const* src, std::size_t count,
                            std::byte* dst, std::size_t n) {
  // Element by element the order is ((x0 + x1) + x2) + ...: done one contribution at a time over the whole range
  // (loops the compiler vectorises), it is the same order.
  auto const each = [&](auto tag) {
    using T = decltype(tag);
    T* d = reinterpret_cast<T*>(dst);
    auto const in = [&](std::size_t r) { return reinterpret_cast<T const*>(src[r]); };
    if (dst != src[0]) std::memcpy(dst, src[0], n * sizeof(T));
    for (std::size_t r = 1; r < count; ++r) {
      T const* x = in(r);
      if (op == CollectiveOp::max) {
        for (std::size_t i = 0; i < n; ++i) d[i] = x[i] > d[i] ? x[i] : d[i];
      } else if constexpr (std::is_integral_v<T>) {
        for (std::size_t i = 0; i < n; ++i)
          d[i] = static_cast<T>(static_cast<std::uint32_t>(d[i]) + static_cast<std::uint32_t>(x[i]));
      } else {
        for (std::size_t i = 0; i < n; ++i) d[i] += x[i];
      }
    }
    if constexpr (std::is_floating_point_v<T>)
      if (op == CollectiveOp::mean) {
        T const c = static_cast<T>(count);
        for (std::size_t i = 0; i < n; ++i) d[i] /= c;
      }
  };
  switch (type) {
    case ElementType::f32: each(float{}); break;
    case ElementType::f16: {  // in f32, rounded once, a block at a time
      float acc[256];
      for (std::size_t b = 0; b < n; b += 256) {
        std::size_t const m = std::min<std::size_t>(256, n - b);
        auto const at = [&](std::size_t r) { return reinterpret_cast<half const*>(src[r]) + b; };
        for (std::size_t i = 0; i < m; ++i) acc[i] = static_cast<float>(at(0)[i]);
        for (std::size_t r = 1; r < count; ++r)
          for (std::size_t i = 0; i < m; ++i) {
            float const x = static_cast<float>(at(r)[i]);
            acc[i] = op == CollectiveOp::max ? (x > acc[i] ? x : acc[i]) : acc[i] + x;
          }
        if (op == CollectiveOp::mean)
          for (std::size_t i = 0; i < m; ++i) acc[i] /= static_cast<float>(count);
        half* d = reinterpret_cast<half*>(dst) + b;
        for (std::size_t i = 0; i < m; ++i) d[i] = half(acc[i]);
      }
      break;
    }
    case ElementType::i32: each(std::int32_t{}); break;
    case ElementType::u32: each(std::uint32_t{}); break;
    case ElementType::u8: each(std::uint8_t{}); break;
    case ElementType::boolean: break;  // refused by all_reduce()
  }
}

}  // namespace schedule
}  // namespace tilebsp
