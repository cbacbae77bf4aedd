// Overflow-safe arithmetic for numbers read from disk: the one place where every reader of untrusted bytes
// (executable-cache entries, the samples' weights and IDX files) checks sizes, counts, starts and strides.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>

namespace tilebsp::checked {

/// a + b, or nothing when the sum does not fit T.
template <std::integral T>
constexpr std::optional<T> add(T a, T b) noexcept {
  T r{};
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// a * b, or nothing when the product does not fit T.
template <std::integral T>
constexpr std::optional<T> mul(T a, T b) noexcept {
  T r{};
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// The product of `dims` (1 for none) as std::size_t, or nothing when it does not fit: a file's dimensions
/// multiply to its element count only when no partial product wraps.
template <class Range>
constexpr std::optional<std::size_t> product(Range const& dims) noexcept {
  std::size_t r = 1;
  for (auto d : dims) {
    if constexpr (std::is_signed_v<decltype(d)>)
      if (d < 0) return std::nullopt;
    auto const next = mul(r, static_cast<std::size_t>(d));
    if (!next) return std::nullopt;
    r = *next;
  }
  return r;
}

/// Whether a strided run lies in a buffer of `size` elements: `count` elements at `start`, `start + stride`, ...,
/// `start + (count - 1) * stride`, each in [0, size), with |stride| <= size when count > 0 (so that the stride in
/// bytes, and a cursor advanced past the run's last element, stay as small as the buffer). Any value of the int64
/// range is handled without overflow: a run whose last element cannot even be computed does not fit. An empty run
/// (count 0) fits where its start is in [0, size], so that a pointer formed from it stays within the buffer; a
/// negative count never fits.
constexpr bool run_fits(std::int64_t start, std::int64_t stride, std::int64_t count, std::int64_t size) noexcept {
  if (count < 0 || size < 0 || start < 0) return false;
  if (count == 0) return start <= size;
  if (start >= size || stride < -size || stride > size) return false;
  auto const span = mul(count - 1, stride);
  if (!span) return false;
  auto const last = add(start, *span);
  return last && *last >= 0 && *last < size;
}

/// Whether `count` elements of `elem_bytes` bytes each fit in `available` bytes (no product overflow).
constexpr bool bytes_fit(std::uint64_t count, std::uint64_t elem_bytes, std::uint64_t available) noexcept {
  auto const bytes = mul(count, elem_bytes);
  return bytes && *bytes <= available;
}

}  // namespace tilebsp::checked
