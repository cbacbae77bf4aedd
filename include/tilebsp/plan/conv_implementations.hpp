// The implementations of a convolution pass, in one list (as oneDNN keeps one per primitive): each with the
// condition under which it applies, what builds it and the kernels it runs. ops::conv builds the one that
// choose_conv_implementation picks, plan_conv costs it, and the host kernel follows the plan; nothing else decides.
#pragma once

#include <tilebsp/core/error.hpp>
#include <tilebsp/plan/conv.hpp>
#include <tilebsp/simd/conv_loop.hpp>

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace tilebsp {

/// What one implementation is and when it applies. Every implementation takes f32 and f16 operands (f16 converted
/// to f32 in registers, f32 or f16 partials) on every instruction set (the kernels compile for the build's; see
/// docs/11).
struct ConvImplementationInfo {
  ConvImplementation id;
  std::string_view name;
  std::string_view applies;  ///< the condition, as conv_implementation_applies checks it
  std::string_view builds;   ///< where its compute sets are built, and its vertices' kernels
};

/// The implementations in the order choose_conv_implementation considers them.
inline constexpr std::array<ConvImplementationInfo, 3> conv_implementations{{
    {ConvImplementation::pointwise_matmul, "pointwise as matmul",
     "a 1x1 kernel with no padding or dilation, and stride 1 or (forward and weight update) a stride that divides the "
     "input field, which is subsampled first",
     "ops/detail/matmul_build.hpp: a grouped matmul (plan_matmul's plan), simd::gemm"},
    {ConvImplementation::winograd, "Winograd F(2x2, 3x3)",
     "a 2-D forward or backward-input pass of a 3x3 kernel with stride 1 and no dilation (any padding); chosen "
     "automatically when both channel counts per group are at least 16 and the output field at least 8x8",
     "ops/conv_impl.hpp (plan_conv's plan), ops/conv/vertex.hpp; simd/winograd.hpp"},
    {ConvImplementation::direct, "direct", "any pass",
     "ops/conv_impl.hpp (plan_conv's plan), ops/conv/vertex.hpp; simd/conv.hpp, in one of simd::direct_forms "
     "(simd/conv/forms.hpp: row blocks or register blocks, decided per call from the shape, element types, layout "
     "and instruction set)"},
}};

/// The entry of `id` in conv_implementations.
constexpr ConvImplementationInfo const& conv_implementation_info(ConvImplementation id) noexcept {
  return conv_implementations[static_cast<std::size_t>(id)];
}

/// Whether implementation `id` applies to pass `q` (its condition in conv_implementations).
inline bool conv_implementation_applies(ConvImplementation id, ConvProblem const& q) noexcept {
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

/// The implementation of pass `q` under algorithm `a`. The weight update runs pointwise as a matmul or direct
/// (it ignores `a`). Otherwise ConvAlgorithm::winograd asks for Winograd (option_error, naming `op`, where it does
/// not apply); else a pointwise pass is a matmul; else ConvAlgorithm::direct is direct, and automatic is Winograd
/// where it applies and pays (16 or more channels per group both ways, an output field of at least 8x8), direct
/// otherwise.
inline ConvImplementation choose_conv_implementation(char const* op, ConvProblem const& q, ConvAlgorithm a) {
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
