// ops::reduce: reductions over any set of dimensions, in f32 partials, with a fixed-order cross-tile stage. The
// entry point; its definition (vertices, builder) is in <tilebsp/ops/reduce_impl.hpp>.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/ops/detail/instances.hpp>
#include <tilebsp/program/programs.hpp>
#include <tilebsp/simd/reduction.hpp>

#include <concepts>
#include <cstddef>
#include <string>
#include <vector>

namespace tilebsp::ops {

/// add, mul, max, min, square_add (sum of squares) and log_add (log of the sum of exponentials).
using ReduceOp = simd::Reduction;

/// Reduces t over `dims` with `op`, accumulating in f32; the result has t's element type and the remaining
/// dimensions (rank 0 when all are reduced). The cross-tile order is fixed, so results do not depend on the
/// number of host threads. Throws index_error for a dimension out of range.
template <class T, class = detail::only<T, Tensor>>
T reduce(Graph& g, Sequence& prog, T const& t, std::vector<std::size_t> const& dims, ReduceOp op,
         std::string const& name = "reduce");

/// reduce, with the result multiplied by `scale` in f32 before it is rounded to t's type (PopLibs' ReduceParams
/// scale): a mean of f16 values is add with scale 1/n, and stays within f16's range where the sum would not.
template <class T, class = detail::only<T, Tensor>>
T scaled_reduce(Graph& g, Sequence& prog, T const& t, std::vector<std::size_t> const& dims, ReduceOp op, float scale,
                std::string const& name = "reduce");

#define TILEBSP_OPS_REDUCE_INSTANCES(X)                                                                       \
  X(Tensor, reduce, (Graph&, Sequence&, Tensor const&, std::vector<std::size_t> const&, ReduceOp,             \
                     std::string const&))                                                                     \
  X(Tensor, scaled_reduce, (Graph&, Sequence&, Tensor const&, std::vector<std::size_t> const&, ReduceOp, float, \
                            std::string const&))
TILEBSP_DECLARE_INSTANCES(TILEBSP_OPS_REDUCE_INSTANCES)
}  // namespace tilebsp::ops

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/reduce.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/ops/reduce_impl.hpp>
#endif
