// ops::max_pool: max pooling over the 1 to 3 spatial dimensions of channels-last activations, one vertex per
// tile piece (batch x output rows x channel chunk) reading its input window, padding never selected. The entry
// points; their definitions (vertices, host kernels, builders) are in <tilebsp/ops/pool_impl.hpp>.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/ops/detail/instances.hpp>
#include <tilebsp/program/programs.hpp>

#include <concepts>
#include <cstdint>
#include <string>
#include <vector>

namespace tilebsp {

/// The window of a pooling over an input field of rank 1 to 3: kernel, stride (default 1) and padding (default
/// 0). Padding elements are never selected, as in PyTorch's MaxPool and PopLibs' pooling.
struct PoolParams {
  std::vector<std::int64_t> kernel_shape;
  std::vector<std::int64_t> stride = {};
  std::vector<std::int64_t> padding_lower = {};
  std::vector<std::int64_t> padding_upper = {};
};

namespace ops {

/// Max pooling of `in` ([N, field..., C], f32 or f16, a field of 1 to 3 dimensions) over windows of
/// `params`; returns [N, out_field..., C] of the same type, out = (in + padding_lower + padding_upper - kernel) /
/// stride + 1 per dimension, mapped in (batch, output rows, channel chunk) pieces over the graph's tiles. NaN
/// propagates. Throws shape_error (bad rank, sizes, padding outside [0, kernel)) and type_error (not f32/f16).
template <class Tn, class = detail::only<Tn, Tensor>>
Tn max_pool(Graph& g, Sequence& prog, Tn const& in, PoolParams const& params, std::string const& name = "max_pool");

/// The gradient of max_pool with respect to its input: each element of `grad_out` ([N, out_field..., C], the
/// shape max_pool returned) is added to the input position that was its window's first maximum (ties go to the
/// first in window order, as in PyTorch; elements chosen by no window get 0). `in` and `out` are max_pool's input
/// and result. Returns [N, field..., C] of the same type, one vertex per image and channel chunk. Throws the
/// errors of max_pool, shape_error when `out` or `grad_out` do not have the pooled shape, and type_error when the
/// types differ.
template <class Tn, class = detail::only<Tn, Tensor>>
Tn max_pool_backward(Graph& g, Sequence& prog, Tn const& in, Tn const& out, Tn const& grad_out, PoolParams const& params,
                    std::string const& name = "max_pool_backward");

#define TILEBSP_OPS_POOL_INSTANCES(X)                                                                              \
  X(Tensor, max_pool, (Graph&, Sequence&, Tensor const&, PoolParams const&, std::string const&))                   \
  X(Tensor, max_pool_backward, (Graph&, Sequence&, Tensor const&, Tensor const&, Tensor const&, PoolParams const&, \
                                std::string const&))
TILEBSP_DECLARE_INSTANCES(TILEBSP_OPS_POOL_INSTANCES)
}  // namespace ops
}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/pool.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/ops/pool_impl.hpp>
#endif
