// Shape and Interval: the small value types that describe tensor extents and element ranges.
#pragma once

#include <cstddef>
#include <numeric>
#include <string>
#include <vector>

namespace tilebsp {

/// Extents of a tensor, outermost dimension first (row-major).
using Shape = std::vector<std::size_t>;

/// Half-open range [begin, end) of element indices.
struct Interval {
  std::size_t begin = 0;
  std::size_t end = 0;
  constexpr std::size_t size() const noexcept { return end - begin; }
  friend constexpr bool operator==(Interval, Interval) = default;
};

inline std::size_t product(Shape const& s) noexcept {
  return std::accumulate(s.begin(), s.end(), std::size_t{1}, [](std::size_t a, std::size_t b) { return a * b; });
}

/// "[2, 3, 4]".
inline std::string to_string(Shape const& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace tilebsp
