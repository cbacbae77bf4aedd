// ops::matmul and ops::matmul_acc: (grouped) matrix products built from a plan_matmul plan: one supervisor
// vertex per tile and serial step running the SIMD GEMM kernel on fetched operand blocks, then a fixed-order
// cross-tile reduction of partials when K is split. The entry points; their definitions (vertices, host kernel,
// builder) are in <tilebsp/ops/matmul_impl.hpp>.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/ops/detail/instances.hpp>
#include <tilebsp/plan/matmul.hpp>
#include <tilebsp/program/programs.hpp>

#include <concepts>
#include <string>

namespace tilebsp::ops {

/// The plan ops::matmul would use for a x b (shapes and options checked as by ops::matmul), without building it.
template <class T, class = detail::only<T, Tensor>>
MatmulPlan plan_matmul(Graph const& g, T const& a, T const& b, MatmulOptions const& options = {});

/// a x b for [M, K] x [K, N] (or grouped [G, M, K] x [G, K, N]) f32 or f16 operands (any views: transposes
/// cost nothing), planned within options.available_memory_proportion. The result is mapped per plan. Zero-size
/// M, N or G give an empty result; K = 0 gives zeros. Throws shape_error (inner dimensions or group counts that
/// differ), type_error (unsupported types) and option_error (AMP outside [0, 1]).
template <class T, class = detail::only<T, Tensor>>
T matmul(Graph& g, Sequence& prog, T const& a, T const& b, MatmulOptions const& options = {},
         std::string const& name = "matmul");

/// c += k * (a x b), with c of the product's shape (and, unless options.output_type says otherwise, any f32 or
/// f16 type); c keeps its own tile mapping. Same operands and errors as matmul, plus shape_error and type_error
/// for c.
template <class T, class = detail::only<T, Tensor>>
void matmul_acc(Graph& g, Sequence& prog, T const& c, float k, T const& a, T const& b,
                MatmulOptions const& options = {}, std::string const& name = "matmul_acc");

#define TILEBSP_OPS_MATMUL_INSTANCES(X)                                                                          \
  X(MatmulPlan, plan_matmul, (Graph const&, Tensor const&, Tensor const&, MatmulOptions const&))                 \
  X(Tensor, matmul, (Graph&, Sequence&, Tensor const&, Tensor const&, MatmulOptions const&, std::string const&)) \
  X(void, matmul_acc, (Graph&, Sequence&, Tensor const&, float, Tensor const&, Tensor const&,                    \
                       MatmulOptions const&, std::string const&))
TILEBSP_DECLARE_INSTANCES(TILEBSP_OPS_MATMUL_INSTANCES)

}  // namespace tilebsp::ops

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/matmul.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/ops/matmul_impl.hpp>
#endif
