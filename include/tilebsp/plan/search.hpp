// What every plan carries (plan_matmul, plan_conv): its memory and cycle estimates and how they relate to its
// bound. The search the planners share is in plan/detail/search.hpp.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/core/target.hpp>
#include <tilebsp/core/types.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tilebsp {

/// How a plan relates to its memory bound.
enum class PlanFit {
  within_bound,  ///< every tile's temporary memory is within the bound
  least_memory,  ///< AMP 0: the plan with the least temporary memory
  relaxed,       ///< nothing fitted: the bound was doubled (up to 2x tile memory) and the least-memory plan taken
  over_memory,   ///< nothing fits even 2x tile memory: planned for speed
};

/// The memory and cycle estimates of a plan (matmul or convolution) and how they relate to its bound.
struct PlanCosts {
  /// Temporary bytes per tile: during each serial step, during the reduction, and their maximum.
  std::uint64_t step_bytes = 0, reduce_bytes = 0, temp_bytes = 0;
  std::uint64_t bound = 0;          ///< amp × bytes_per_tile
  std::uint64_t relaxed_bound = 0;  ///< the doubled bound it fits (PlanFit::relaxed)
  PlanFit fit = PlanFit::within_bound;
  std::uint64_t cycles = 0, compute_cycles = 0, exchange_cycles = 0, reduce_cycles = 0;

  /// "temporary memory per tile: ... estimated cycles: ..." lines of describe().
  std::string describe_costs() const;
};

namespace plan::detail {

inline std::size_t ceil_div(std::size_t a, std::size_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

inline double macs_per_cycle(Target const& t, ElementType input) {
  return input == ElementType::f16 ? t.f16_macs_per_cycle : t.f32_macs_per_cycle;
}

/// Tile cycles of a partial-sum vertex (ops/detail/partials.hpp): `elements` results from `parts` partials each, one 64-bit add per cycle.
inline std::uint64_t sum_partials_cycles(std::size_t elements, std::size_t parts, std::size_t partial_bytes) {
  return 20 + static_cast<std::uint64_t>(ceil_div(elements * parts * partial_bytes, 8));
}

}  // namespace plan::detail

}  // namespace tilebsp
