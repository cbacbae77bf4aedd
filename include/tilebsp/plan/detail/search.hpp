// The plan search every planner shares (plan_matmul, plan_conv): the split candidates of a dimension, one tile's
// work and its cost under the model of plan/cost.hpp, the three plans a search keeps, and how it settles on one
// within availableMemoryProportion (or relaxes the bound and warns). Internal: included by the planners and the
// operators' definitions, not by the public headers of tilebsp::compiled.
#pragma once

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/target.hpp>
#include <tilebsp/plan/cost.hpp>
#include <tilebsp/plan/memo.hpp>
#include <tilebsp/plan/search.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace tilebsp::plan::detail {

/// (pieces, piece size) for each distinct piece size when `d` is split into at most `limit` pieces.
inline std::vector<std::pair<std::size_t, std::size_t>> split_candidates(std::size_t d, std::size_t limit) {
  if (d == 0) return {{1, 0}};
  std::vector<std::pair<std::size_t, std::size_t>> r;
  for (std::size_t c = 1; c <= std::min(d, limit);) {
    std::size_t const p = ceil_div(d, c);
    r.emplace_back(ceil_div(d, p), p);  // the fewest pieces of this size
    if (p == 1) break;
    c = ceil_div(d, p - 1);  // the first count giving a smaller piece
  }
  return r;
}

/// Throws option_error, naming `op`, unless 0 <= amp <= 1.
inline void check_amp(std::string_view op, double amp) {
  if (!(amp >= 0.0 && amp <= 1.0))
    throw option_error(std::string(op) + ": available_memory_proportion must be in [0, 1], got " + std::to_string(amp));
}

inline std::string bytes_text(std::uint64_t b) { return std::to_string(b) + " B"; }

/// One tile's work in a plan: per serial step, the multiply-accumulates, the bytes it receives and sends and the
/// bytes of results it writes; the partials (or accumulated results) kept across steps; and, when `reduce`, the
/// final stage that sums `parts` partials of `result_elements` elements into the result.
struct TileWork {
  std::size_t steps = 1;
  double macs = 0;
  std::uint64_t recv = 0;
  double sent = 0;
  std::uint64_t written_bytes = 0;
  std::uint64_t resident_bytes = 0;
  bool reduce = false;
  std::uint64_t result_elements = 0;
  std::size_t parts = 1, partial_bytes = 4;
};

/// Fills the memory and cycle estimates of a plan from its tile work, with the cost model shared by every
/// planner: tile compute at the target's MAC rate, exchange at its bytes per cycle, a sync around each.
inline void cost_tile_work(PlanCosts& p, Target const& t, double macs_per_cycle, TileWork const& w) {
  p.step_bytes = w.recv + w.resident_bytes;
  auto const step_exchange =
      static_cast<std::uint64_t>(std::ceil(std::max(static_cast<double>(w.recv), w.sent) / t.exchange_bytes_per_cycle));
  std::uint64_t const sync = sync_cycles(t, t.ipus);
  std::uint64_t const work = 50 + static_cast<std::uint64_t>(std::ceil(w.macs / macs_per_cycle)) + ceil_div(w.written_bytes, 8);
  p.compute_cycles = w.steps * (compute_set_overhead_cycles + work);
  p.exchange_cycles = w.steps * step_exchange;
  p.cycles = w.steps * (step_exchange + sync + compute_set_overhead_cycles + work + sync);
  p.reduce_bytes = p.reduce_cycles = 0;
  if (w.reduce) {
    std::uint64_t const share = ceil_div(static_cast<std::size_t>(w.result_elements), w.parts);
    std::uint64_t const fetched = share * (w.parts - 1) * w.partial_bytes;
    p.reduce_bytes = w.resident_bytes + fetched;
    auto const ex = static_cast<std::uint64_t>(std::ceil(static_cast<double>(fetched) / t.exchange_bytes_per_cycle));
    p.reduce_cycles = ex + sync + compute_set_overhead_cycles +
                      sum_partials_cycles(static_cast<std::size_t>(share), w.parts, w.partial_bytes) + sync;
    p.cycles += p.reduce_cycles;
  }
  p.temp_bytes = std::max(p.step_bytes, p.reduce_bytes);
}

/// The plans a search keeps as it walks its candidates: the fastest within the bound, the one with the least
/// temporary memory, and the fastest of all. Each is a total order: cycles then memory (or memory then cycles),
/// then the plan's splits as `tie` lists them, so that ties are broken the same way on every host.
template <class Plan, class Tie>
struct Candidates {
  Candidates(std::uint64_t bound_bytes, Tie order) : bound(bound_bytes), tie(order) {}
  std::uint64_t bound;
  Tie tie;
  std::optional<Plan> fast, small, fastest;

  /// Considers `p`; returns whether it fits the bound.
  bool offer(Plan const& p) {
    auto const speed = [&](Plan const& x) { return std::tuple_cat(std::tuple(x.cycles, x.temp_bytes), tie(x)); };
    auto const memory = [&](Plan const& x) { return std::tuple_cat(std::tuple(x.temp_bytes, x.cycles), tie(x)); };
    bool const fits = p.temp_bytes <= bound;
    if (fits && (!fast || speed(p) < speed(*fast))) fast = p;
    if (!small || memory(p) < memory(*small)) small = p;
    if (!fastest || speed(p) < speed(*fastest)) fastest = p;
    return fits;
  }
};

/// The planners' common ending: the fastest plan within the bound; at AMP 0 the least-memory plan; when nothing
/// fits, a warning (in `warning`, for the caller to give) and the least-memory plan with the bound relaxed by
/// doubling (up to twice the tile memory), or beyond that the fastest plan.
template <class Plan>
Plan settle(Target const& t, double amp, std::uint64_t bound, std::string const& what, std::optional<Plan> fast,
            std::optional<Plan> small, std::optional<Plan> fastest, std::string& warning) {
  if (amp == 0.0) {
    small->fit = PlanFit::least_memory;
    return *small;
  }
  if (fast) return *fast;
  std::uint64_t const cap = 2 * static_cast<std::uint64_t>(t.bytes_per_tile);
  if (small->temp_bytes <= cap) {
    std::uint64_t relaxed = std::max<std::uint64_t>(bound, 1);
    while (relaxed < small->temp_bytes) relaxed *= 2;
    small->fit = PlanFit::relaxed;
    small->relaxed_bound = std::min(relaxed, cap);
    warning = (what + ": no plan keeps temporary memory within " + bytes_text(bound) + " per tile (available_memory_proportion " +
         std::to_string(amp) + "); relaxed the bound to " + bytes_text(small->relaxed_bound) +
         " and took the plan with the least temporary memory (" + bytes_text(small->temp_bytes) + ")");
    return *small;
  }
  fastest->fit = PlanFit::over_memory;
  warning = (what + ": even the plan with the least temporary memory needs " + bytes_text(small->temp_bytes) +
       " per tile, more than twice the tile's " + bytes_text(t.bytes_per_tile) + "; planning for speed");
  return *fastest;
}

/// A plan of `Plan` with no splits yet: the problem, pass, target and the AMP bound on temporary memory per
/// tile. Throws option_error (named after `op`) for an AMP outside [0, 1].
template <class Plan, class Problem, class Options>
Plan base_plan(char const* op, Target const& t, Problem const& q, Options const& o) {
  double const amp = o.available_memory_proportion;
  check_amp(op, amp);
  Plan p;
  p.problem = q;
  p.pass = o.pass;
  p.target = t.name;
  p.amp = amp;
  p.bound = static_cast<std::uint64_t>(amp * static_cast<double>(t.bytes_per_tile));
  return p;
}

/// settle() of what a search kept.
template <class Plan, class Tie>
Plan settle(Target const& t, double amp, std::string const& what, Candidates<Plan, Tie>&& c, std::string& warning) {
  return settle(t, amp, c.bound, what, std::move(c.fast), std::move(c.small), std::move(c.fastest), warning);
}

}  // namespace tilebsp::plan::detail
