// SIMD reduction of one contiguous segment to an f32 value: add, mul, max, min, square_add, log_add.
#pragma once

#include <tilebsp/core/half.hpp>
#include <tilebsp/simd/arch.hpp>
#include <tilebsp/simd/reduction.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>

namespace tilebsp::simd {

/// The value an empty reduction gives.
constexpr float identity(Reduction r) noexcept {
  switch (r) {
    case Reduction::mul: return 1.0f;
    case Reduction::max:
    case Reduction::log_add: return -std::numeric_limits<float>::infinity();
    case Reduction::min: return std::numeric_limits<float>::infinity();
    default: return 0.0f;
  }
}

/// Combines two partial results (how stage 2 folds partials: square_add partials are added, log_add partials
/// are log-added).
inline float combine(Reduction r, float a, float b) noexcept {
  switch (r) {
    case Reduction::mul: return a * b;
    case Reduction::max: return std::fmax(a, b);
    case Reduction::min: return std::fmin(a, b);
    case Reduction::log_add: {
      float const m = std::fmax(a, b);
      if (m == -std::numeric_limits<float>::infinity()) return m;
      return m + std::log(std::exp(a - m) + std::exp(b - m));
    }
    default: return a + b;
  }
}

namespace detail {
template <class T>
batch<float> load(T const* p) noexcept {
  if constexpr (std::is_same_v<T, half>) return load_f16(p);
  else return batch<float>::load_unaligned(p);
}
/// Folds a segment: step(acc, x) per batch into four independent accumulators (for throughput), a final
/// partial batch padded with `pad` (neutral for step), then merge(a, b) over accumulators and lanes in a fixed
/// order, so the result depends only on the segment.
template <class T, class Step, class Merge, class ScalarMerge>
float fold(T const* p, std::size_t n, float init, float pad, Step step, Merge merge, ScalarMerge smerge) noexcept {
  constexpr std::size_t L = lanes;
  batch<float> acc[4] = {batch<float>(init), batch<float>(init), batch<float>(init), batch<float>(init)};
  std::size_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L)
    for (std::size_t k = 0; k < 4; ++k) acc[k] = step(acc[k], load(p + i + k * L));
  for (; i + L <= n; i += L) acc[0] = step(acc[0], load(p + i));
  if (i < n) {
    alignas(64) T tail[L];
    for (std::size_t k = 0; k < L; ++k) tail[k] = k < n - i ? p[i + k] : T(pad);
    acc[1] = step(acc[1], load(tail));
  }
  alignas(64) float lane[L];
  merge(merge(acc[0], acc[1]), merge(acc[2], acc[3])).store_aligned(lane);
  float r = lane[0];
  for (std::size_t k = 1; k < L; ++k) r = smerge(r, lane[k]);
  return r;
}
}  // namespace detail

/// Reduces n elements of p (f32 or f16) in f32.
template <class T>
float reduce(Reduction r, T const* p, std::size_t n) noexcept {
  using B = batch<float>;
  auto const plus = [](auto a, auto b) { return a + b; };
  float const inf = std::numeric_limits<float>::infinity();
  switch (r) {
    case Reduction::add: return detail::fold(p, n, 0.0f, 0.0f, plus, plus, plus);
    case Reduction::mul: {
      auto const times = [](auto a, auto b) { return a * b; };
      return detail::fold(p, n, 1.0f, 1.0f, times, times, times);
    }
    case Reduction::max: {
      auto const mx = [](B a, B b) { return xsimd::max(a, b); };
      return detail::fold(p, n, -inf, -inf, mx, mx, [](float a, float b) { return b > a ? b : a; });
    }
    case Reduction::min: {
      auto const mn = [](B a, B b) { return xsimd::min(a, b); };
      return detail::fold(p, n, inf, inf, mn, mn, [](float a, float b) { return b < a ? b : a; });
    }
    case Reduction::square_add:
      return detail::fold(p, n, 0.0f, 0.0f, [](B a, B x) { return simd::fma(x, x, a); }, plus, plus);
    case Reduction::log_add: {
      // log(sum(exp(x))) = m + log(sum(exp(x - m))) with m the maximum, so nothing overflows.
      float const m = reduce(Reduction::max, p, n);
      if (std::isinf(m) || std::isnan(m)) return m;
      B const mb(m);
      float const s = detail::fold(p, n, 0.0f, -inf, [&](B a, B x) { return a + simd::exp(x - mb); }, plus, plus);
      return m + std::log(s);
    }
  }
  return 0.0f;
}

/// Folds n elements of a row-major block of `width` columns into per-column accumulators, in f32: element i is
/// in column (first + i) mod width and folds into acc[(first + i) mod width], rows in order, so the result depends
/// only on the elements and their order. Start acc at identity(r). For every reduction but log_add, whose two
/// passes need a second buffer (reduce() handles it).
template <class T>
void fold_columns(Reduction r, T const* p, std::size_t n, std::size_t first, std::size_t width, float* acc) noexcept {
  using B = batch<float>;
  auto const run = [&](auto vstep, auto sstep) {
    std::size_t col = first % width;
    for (std::size_t i = 0; i < n;) {
      std::size_t const len = n - i < width - col ? n - i : width - col;
      T const* x = p + i;
      float* a = acc + col;
      std::size_t j = 0;
      for (; j + lanes <= len; j += lanes) vstep(B::load_unaligned(a + j), detail::load(x + j)).store_unaligned(a + j);
      for (; j < len; ++j) a[j] = sstep(a[j], static_cast<float>(x[j]));
      i += len;
      col = 0;
    }
  };
  switch (r) {
    case Reduction::add: run([](B a, B x) { return a + x; }, [](float a, float x) { return a + x; }); break;
    case Reduction::mul: run([](B a, B x) { return a * x; }, [](float a, float x) { return a * x; }); break;
    case Reduction::max:  // as the vector instruction: the accumulator unless x is larger (or NaN)
      run([](B a, B x) { return xsimd::max(a, x); }, [](float a, float x) { return a > x ? a : x; });
      break;
    case Reduction::min: run([](B a, B x) { return xsimd::min(a, x); }, [](float a, float x) { return a < x ? a : x; }); break;
    case Reduction::square_add:
      run([](B a, B x) { return simd::fma(x, x, a); }, [](float a, float x) { return std::fma(x, x, a); });
      break;
    case Reduction::log_add: break;
  }
}

}  // namespace tilebsp::simd
