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
TILEBSP_INLINE bool conv_implementation_applies(ConvImplementation id, ConvProblem const& q) noexcept;

/// The implementation of pass `q` under algorithm `a`. The weight update runs pointwise as a matmul or direct
/// (it ignores `a`). Otherwise ConvAlgorithm::winograd asks for Winograd (option_error, naming `op`, where it does
/// not apply); else a pointwise pass is a matmul; else ConvAlgorithm::direct is direct, and automatic is Winograd
/// where it applies and pays (16 or more channels per group both ways, an output field of at least 8x8), direct
/// otherwise.
TILEBSP_INLINE ConvImplementation choose_conv_implementation(char const* op, ConvProblem const& q, ConvAlgorithm a);

}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/compile.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/plan/conv_implementations_impl.hpp>
#endif
