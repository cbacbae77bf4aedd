// ops::matmul's definitions: the checks of its operands and the entry points declared in <tilebsp/ops/matmul.hpp>;
// the vertices, the host kernel and the builder are the operator common ops/detail/matmul_build.hpp. Included by that header (header-only) or compiled once into tilebsp::compiled
// (src/matmul.cpp); include it directly to use the vertices.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/ops/matmul.hpp>

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/ops/detail/common.hpp>
#include <tilebsp/ops/detail/host_work.hpp>
#include <tilebsp/ops/detail/matmul_build.hpp>
#include <tilebsp/ops/detail/instances.hpp>
#include <tilebsp/ops/map.hpp>
#include <tilebsp/plan/detail/search.hpp>
#include <tilebsp/plan/matmul.hpp>
#include <tilebsp/program/host_path.hpp>
#include <tilebsp/program/programs.hpp>
#include <tilebsp/simd/gemm.hpp>
#include <tilebsp/simd/partials.hpp>
#include <tilebsp/vertex/add_vertex.hpp>

#include <boost/hana/define_struct.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <concepts>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

namespace tilebsp {
namespace ops {
namespace detail {

/// Validates operands ([M, K] x [K, N] or [G, M, K] x [G, K, N]) and options; returns the problem.
inline MatmulProblem problem_of(char const* op, Graph const& g, Tensor const& a, Tensor const& b,
                                MatmulOptions const& o, std::optional<ElementType> acc_type) {
  g.check_tensor(op, a);
  g.check_tensor(op, b);
  tilebsp::plan::detail::check_amp(op, o.available_memory_proportion);
  if (a.rank() != b.rank() || (a.rank() != 2 && a.rank() != 3))
    throw shape_error(std::string(op) + ": operands must both be matrices [M, K] x [K, N] or grouped [G, M, K] x "
                      "[G, K, N]; got " + to_string(a.shape()) + " and " + to_string(b.shape()));
  std::size_t const r = a.rank();
  if (r == 3 && a.dim(0) != b.dim(0))
    throw shape_error(std::string(op) + ": group counts differ: " + to_string(a.shape()) + " has " +
                      std::to_string(a.dim(0)) + " groups, " + to_string(b.shape()) + " has " + std::to_string(b.dim(0)));
  if (a.dim(r - 1) != b.dim(r - 2))
    throw shape_error(std::string(op) + ": inner dimensions differ: " + to_string(a.shape()) + " x " +
                      to_string(b.shape()) + " (" + std::to_string(a.dim(r - 1)) + " vs " +
                      std::to_string(b.dim(r - 2)) + ")");
  if (a.element_type() != b.element_type() || (a.element_type() != ElementType::f32 && a.element_type() != ElementType::f16))
    throw type_error(std::string(op) + ": unsupported operand types " + std::string(name_of(a.element_type())) + " x " +
                     std::string(name_of(b.element_type())) + " (both f32 or both f16)");
  check_float(op, "partials", o.partials);
  MatmulProblem q;
  q.groups = r == 3 ? a.dim(0) : 1;
  q.m = a.dim(r - 2);
  q.k = a.dim(r - 1);
  q.n = b.dim(r - 1);
  q.input = a.element_type();
  q.partials = o.partials;
  q.output = o.output_type.value_or(acc_type.value_or(q.input));
  check_float(op, "the output type", q.output);
  q.accumulate = acc_type.has_value();
  return q;
}

}  // namespace detail

template <class T, class>
MatmulPlan plan_matmul(Graph const& g, T const& a, T const& b, MatmulOptions const& options) {
  return plan_matmul(detail::view_target(g), detail::problem_of("plan_matmul", g, a, b, options, std::nullopt), options);
}

template <class T, class>
T matmul(Graph& g, Sequence& prog, T const& a, T const& b, MatmulOptions const& options,
         std::string const& name) {
  MatmulProblem const q = detail::problem_of("matmul", g, a, b, options, std::nullopt);
  bool const grouped = a.rank() == 3;
  Shape const shape = grouped ? Shape{q.groups, q.m, q.n} : Shape{q.m, q.n};
  Tensor c = g.add_variable(q.output, shape, name);
  if (c.num_elements() == 0) return c;
  Tensor const c3 = grouped ? c : c.expand(0);
  if (q.k == 0) {
    map_linearly(g, c);
    fill(g, prog, c, 0.0);
    return c;
  }
  MatmulPlan const p = plan_matmul(detail::view_target(g), q, options);
  detail::map_result(g, p, c3);
  detail::dispatch_types(q, [&]<class TA, class TP, class TO>() {
    detail::build<TA, TP, TO>(g, prog, p, grouped ? a : a.expand(0), grouped ? b : b.expand(0), c3, 1.0f, name);
  });
  return c;
}

template <class T, class>
void matmul_acc(Graph& g, Sequence& prog, T const& c, float k, T const& a, T const& b,
                MatmulOptions const& options, std::string const& name) {
  g.check_tensor("matmul_acc", c);
  MatmulProblem const q = detail::problem_of("matmul_acc", g, a, b, options, c.element_type());
  bool const grouped = a.rank() == 3;
  Shape const shape = grouped ? Shape{q.groups, q.m, q.n} : Shape{q.m, q.n};
  if (c.shape() != shape)
    throw shape_error("matmul_acc: the accumulator is " + to_string(c.shape()) + " but the product is " + to_string(shape));
  if (c.element_type() != q.output)
    throw type_error("matmul_acc: the accumulator is " + std::string(name_of(c.element_type())) +
                     " but output_type is " + std::string(name_of(q.output)));
  if (c.num_elements() == 0 || q.k == 0) return;
  MatmulPlan const p = plan_matmul(detail::view_target(g), q, options);
  detail::dispatch_types(q, [&]<class TA, class TP, class TO>() {
    detail::build<TA, TP, TO>(g, prog, p, grouped ? a : a.expand(0), grouped ? b : b.expand(0), grouped ? c : c.expand(0),
                              k, name);
  });
}

}  // namespace ops
}  // namespace tilebsp
