// SerialSteps: how a plan divides a tile's share of a reduction into serial steps, walked alike by the vertices
// and the host paths.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>

namespace tilebsp {

/// How a plan divides one tile's share of a reduction (a matmul's K range; a convolution's input channels or, for
/// weight gradients, its output rows) into serial steps, each accumulated onto the ones before it: step s of
/// [lo, hi) is [lo + s * size, lo + (s + 1) * size) clipped to hi. An operator's vertices (one compute set per
/// step) and its host path (all steps in one task) both walk it through range() and each(), so they add the same
/// terms in the same order and their results agree bitwise by construction.
struct SerialSteps {
  std::size_t count = 1;  ///< steps per range
  std::size_t size = 0;   ///< elements per step

  /// Step s of [lo, hi): empty (first == second) once the range is done.
  template <class I>
  std::pair<I, I> range(I lo, I hi, std::size_t s) const {
    I const first = std::min(hi, static_cast<I>(lo + static_cast<I>(s * size)));
    return {first, std::min(hi, static_cast<I>(first + static_cast<I>(size)))};
  }
  /// Calls f(s, step_lo, step_hi) for the steps of [lo, hi) in order, up to the first empty one.
  template <class I, class F>
  void each(I lo, I hi, F&& f) const {
    for (std::size_t s = 0; s < count; ++s) {
      auto const [first, last] = range(lo, hi, s);
      if (first >= last) break;
      f(s, first, last);
    }
  }
};

}  // namespace tilebsp
