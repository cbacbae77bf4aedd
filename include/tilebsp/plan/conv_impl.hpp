// plan_conv's definitions: included by <tilebsp/plan/conv.hpp> (header-only) or compiled once into
// tilebsp::compiled (src/compile.cpp), which keeps the planner's memo once.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/plan/conv.hpp>
#include <tilebsp/plan/detail/conv.hpp>
#include <tilebsp/plan/matmul_impl.hpp>

#include <sstream>
#include <string>

namespace tilebsp {

TILEBSP_INLINE ConvPlan plan_conv(Target const& t, ConvProblem const& q, ConvOptions const& o) {
  static plan::detail::PlanMemo<ConvPlan, ConvProblem, ConvOptions> memo;
  return memo.get(t, q, o, [&](std::string& warning) { return plan::detail::search_conv(t, q, o, warning); });
}

TILEBSP_INLINE ConvPlan accumulating(ConvPlan p, Target const& t) {
  p.problem.accumulate = true;
  p.reduce = true;
  plan::detail::evaluate(p, t);
  return p;
}

TILEBSP_INLINE std::string ConvPlan::describe() const {
  auto const& q = problem;
  bool const wu = q.kind == ConvPass::weight_update;
  std::ostringstream s;
  s << "conv " << name_of(q.kind) << " " << q.params.describe() << " (" << name_of(q.input) << " operands, "
    << name_of(q.partials) << " partials, " << name_of(q.output) << " result" << (q.accumulate ? ", accumulated" : "")
    << (wu ? "" : q.loop.winograd ? ", winograd F(2x2, 3x3)" : ", direct") << "), pass " << name_of(pass) << ", available_memory_proportion " << amp << " on " << target << "\n";
  s << "  parallel splits: batch " << n_split << " (" << n_tile << " each) x rows " << r_split << " (" << r_tile
    << ") x groups " << g_split << " (" << g_tile << ") x " << (wu ? "output" : "lane") << " channels " << c_split
    << " (" << c_tile << ") x " << (wu ? "input" : "reduction") << " channels " << j_split << " (" << j_tile
    << ") = " << tiles << " tiles\n";
  s << "  serial steps over " << (wu ? "rows" : "reduction channels") << ": " << steps << " (" << step << " each)";
  if (reduce)
    s << "; final stage reduces " << parts() << " partial" << (parts() > 1 ? "s" : "") << " per result"
      << (q.accumulate ? " and adds them to the weights" : "");
  s << "\n" << describe_costs();
  return s.str();
}

}  // namespace tilebsp
