// Which convolution implementation applies to a pass, and which one runs it: included by
// <tilebsp/plan/conv_implementations.hpp> (header-only) or compiled once into tilebsp::compiled (src/compile.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/plan/conv_implementations.hpp>
#include <tilebsp/simd/conv_loop.hpp>

#include <cstddef>
#include <string>

namespace tilebsp {

TILEBSP_INLINE bool conv_implementation_applies(ConvImplementation id, ConvProblem const& q) noexcept {
  auto const& p = q.params;
  switch (id) {
    case ConvImplementation::pointwise_matmul:
      for (std::size_t d = 0; d < p.rank(); ++d) {
        bool const stride_ok = q.kind == ConvPass::backward_input ? p.stride_of(d) == 1
                                                                  : p.input_field[d] % p.stride_of(d) == 0;
        if (p.kernel_shape[d] != 1 || !stride_ok || p.padding_lower_of(d) != 0 || p.padding_upper_of(d) != 0 ||
            p.input_dilation_of(d) != 1 || p.kernel_dilation_of(d) != 1)
          return false;
      }
      return true;
    case ConvImplementation::winograd:
      return q.kind != ConvPass::weight_update && q.row_dim == 1 && simd::winograd_applies(q.loop);
    case ConvImplementation::direct: return true;
  }
  return false;
}

TILEBSP_INLINE ConvImplementation choose_conv_implementation(char const* op, ConvProblem const& q, ConvAlgorithm a) {
  using enum ConvImplementation;
  auto const applies = [&](ConvImplementation id) { return conv_implementation_applies(id, q); };
  if (q.kind == ConvPass::weight_update) return applies(pointwise_matmul) ? pointwise_matmul : direct;
  if (a == ConvAlgorithm::winograd) {
    if (!applies(winograd))
      throw option_error(std::string(op) + ": the winograd algorithm needs a 2-D forward or backward-input pass of a "
                         "3x3 kernel with stride 1 and no dilation; this is " + std::string(name_of(q.kind)) + " " +
                         q.params.describe());
    return winograd;
  }
  if (applies(pointwise_matmul)) return pointwise_matmul;
  if (a == ConvAlgorithm::direct) return direct;
  bool const pays = q.c >= 16 && q.j >= 16 && q.loop.dim[1].out >= 8 && q.loop.dim[2].out >= 8;
  return applies(winograd) && pays ? winograd : direct;
}

}  // namespace tilebsp
