// plan_matmul's definitions (and what every plan's description shares): included by <tilebsp/plan/matmul.hpp>
// (header-only) or compiled once into tilebsp::compiled (src/compile.cpp), which keeps the planner's memo once.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/plan/detail/matmul.hpp>
#include <tilebsp/plan/detail/search.hpp>
#include <tilebsp/plan/matmul.hpp>

#include <sstream>
#include <string>

namespace tilebsp {

TILEBSP_INLINE std::string PlanCosts::describe_costs() const {
  std::ostringstream s;
  s << "  temporary memory per tile: " << temp_bytes << " B (steps " << step_bytes << " B, reduction " << reduce_bytes
    << " B); bound " << bound << " B";
  switch (fit) {
    case PlanFit::within_bound: s << " (within)"; break;
    case PlanFit::least_memory: s << " (AMP 0: least temporary memory)"; break;
    case PlanFit::relaxed: s << " (RELAXED to " << relaxed_bound << " B: nothing fitted)"; break;
    case PlanFit::over_memory: s << " (OVER: nothing fits twice the tile memory; planned for speed)"; break;
  }
  s << "\n  estimated cycles: " << cycles << " (compute " << compute_cycles << ", exchange " << exchange_cycles
    << ", final stage " << reduce_cycles << ")\n";
  return s.str();
}

TILEBSP_INLINE MatmulPlan plan_matmul(Target const& t, MatmulProblem const& q, MatmulOptions const& o) {
  static plan::detail::PlanMemo<MatmulPlan, MatmulProblem, MatmulOptions> memo;
  return memo.get(t, q, o, [&](std::string& warning) { return plan::detail::search_matmul(t, q, o, warning); });
}

TILEBSP_INLINE MatmulPlan accumulating(MatmulPlan p, Target const& t) {
  p.problem.accumulate = true;
  p.reduce = true;
  plan::detail::evaluate(p, t);
  return p;
}

TILEBSP_INLINE std::string MatmulPlan::describe() const {
  auto const& q = problem;
  std::ostringstream s;
  s << "matmul " << (q.groups > 1 ? std::to_string(q.groups) + " groups of " : "") << q.m << "x" << q.k << " * " << q.k
    << "x" << q.n << " (" << name_of(q.input) << " operands, " << name_of(q.partials) << " partials, "
    << name_of(q.output) << " result" << (q.accumulate ? ", accumulated" : "") << "), pass " << name_of(pass)
    << ", available_memory_proportion " << amp << " on " << target << "\n";
  s << "  parallel splits: groups " << g_split << " (" << g_tile << " each) x M " << m_split << " (" << m_tile
    << ") x N " << n_split << " (" << n_tile << ") x K " << k_split << " (" << k_tile << ") = " << tiles << " tiles\n";
  s << "  serial steps over K: " << k_steps << " (" << k_step << " each)";
  if (reduce)
    s << "; final stage reduces " << k_split << " partial" << (k_split > 1 ? "s" : "") << " per result"
      << (q.accumulate ? " and adds them to the accumulator" : "");
  s << "\n" << describe_costs();
  return s.str();
}

}  // namespace tilebsp
