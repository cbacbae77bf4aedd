// ops::conv, ops::conv_backward_input, ops::conv_weight_gradients / conv_weight_update and ops::add_bias:
// (grouped) convolutions built from a plan_conv plan — one vertex per tile and serial step running the direct
// convolution kernel on its fetched input window and weights, then a fixed-order reduction of partials — with a
// host kernel that computes the same values bitwise without the per-tile copies. 1x1 convolutions with unit
// stride, no padding and no dilation are matmuls and take the matmul path. The entry points; their definitions
// are in <tilebsp/ops/conv_impl.hpp> (with <tilebsp/ops/conv/vertex.hpp> and <tilebsp/ops/conv/host_kernel.hpp>).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/ops/detail/instances.hpp>
#include <tilebsp/plan/conv.hpp>
#include <tilebsp/plan/conv_implementations.hpp>
#include <tilebsp/program/programs.hpp>

#include <concepts>
#include <string>

namespace tilebsp::ops {

/// The plan ops::conv (or the pass `kind`) would use on graph g's target, without building it.
template <class G, class = detail::only<G, Graph>>
ConvPlan plan_conv(G const& g, ConvParams const& params, ConvPass kind = ConvPass::forward,
                   ElementType type = ElementType::f32, ConvOptions const& options = {});

/// A new activations tensor of params.input_shape(), mapped so that each tile of the forward plan holds the
/// inputs its piece reads most (its window's own rows), spreading the rest linearly.
template <class G, class = detail::only<G, Graph>>
Tensor create_conv_input(G& g, ConvParams const& params, ElementType type = ElementType::f32,
                         ConvOptions const& options = {}, std::string const& name = "conv/input");

/// New weights of params.weights_shape(): each (group, input-channel, output-channel) block of the forward plan
/// dealt out evenly over the tiles whose pieces read it, so that no tile holds more than its share (a layer
/// whose plan splits rows over many tiles and channels over few would otherwise pile its weights on a few).
template <class G, class = detail::only<G, Graph>>
Tensor create_conv_weights(G& g, ConvParams const& params, ElementType type = ElementType::f32,
                           ConvOptions const& options = {}, std::string const& name = "conv/weights");

/// The convolution of `in` ([N, field..., G * C_in], f32 or f16) with `weights` ([G, kernel..., C_in, C_out], the
/// same type), per `params`; returns [N, out_field..., G * C_out] mapped per plan. Throws shape_error (bad
/// parameters, operands of the wrong shape), type_error and option_error (AMP outside [0, 1]).
template <class T, class = detail::only<T, Tensor>>
T conv(Graph& g, Sequence& prog, T const& in, T const& weights, ConvParams const& params, ConvOptions const& options = {},
       std::string const& name = "conv");

/// The convolution of `in` with `weights` as conv computes it, written into `out` (params.output_shape(), the
/// result's type: options.output_type, else the operands') instead of a new tensor: a slice of a larger tensor
/// (the channels of a concatenation, so that no copy joins the pieces) or any view of one variable. An `out` with
/// no element mapped is mapped per plan, as conv maps its result; otherwise its mapping is kept. Throws what conv
/// throws, shape_error and type_error for `out`, and write_conflict_error where `out` shares a variable with `in`
/// or `weights`.
template <class T, class = detail::only<T, Tensor>>
void conv_with_output(Graph& g, Sequence& prog, T const& in, T const& weights, T const& out, ConvParams const& params,
                      ConvOptions const& options = {}, std::string const& name = "conv");

/// acc += the convolution of `in` with `weights`: a residual block's sum in the convolution itself, where the
/// accumulator's values are read and written once (oneDNN's sum post-op; PopLibs' matMulAcc for a convolution).
/// The plan is conv's (tilebsp::accumulating): its sums are conv's, added to acc (params.output_shape(), of the
/// result's type) once, so that an f32 acc gets bitwise acc + conv(in, weights). An acc with no element mapped is
/// mapped per plan, as conv_with_output maps its output. Throws what conv_with_output throws, acc in place of
/// `out`.
template <class T, class = detail::only<T, Tensor>>
void conv_accumulate(Graph& g, Sequence& prog, T const& in, T const& weights, T const& acc, ConvParams const& params,
                     ConvOptions const& options = {}, std::string const& name = "conv");

/// Input gradients of the convolution: from `grad_out` ([N, out_field..., G * C_out]) and the forward weights,
/// returns [N, field..., G * C_in] — a forward-like pass over the flipped, transposed weights with the input
/// dilated by the stride. Same errors as conv.
template <class T, class = detail::only<T, Tensor>>
T conv_backward_input(Graph& g, Sequence& prog, T const& grad_out, T const& weights, ConvParams const& params,
                      ConvOptions const& options = {}, std::string const& name = "conv/backward_input");

/// Weight gradients: sum over the batch and output positions of activations x output gradients, as a new tensor
/// of params.weights_shape() (type options.output_type, else the operands'). Same errors as conv.
template <class T, class = detail::only<T, Tensor>>
T conv_weight_gradients(Graph& g, Sequence& prog, T const& grad_out, T const& acts, ConvParams const& params,
                        ConvOptions const& options = {}, std::string const& name = "conv/weight_gradients");

/// weights += scale * (weight gradients): the SGD step of PopLibs' convolutionWeightUpdate (scale = -learning
/// rate). The weights keep their mapping. Same errors as conv.
template <class T, class = detail::only<T, Tensor>>
void conv_weight_update(Graph& g, Sequence& prog, T const& grad_out, T const& acts, T const& weights, float scale,
                        ConvParams const& params, ConvOptions const& options = {},
                        std::string const& name = "conv/weight_update");

/// acts += bias along the last (channel) dimension: acts [..., C], bias [C] of the same type.
template <class T, class = detail::only<T, Tensor>>
void add_bias(Graph& g, Sequence& prog, T const& acts, T const& bias);

#define TILEBSP_OPS_CONV_INSTANCES(X)                                                                              \
  X(ConvPlan, plan_conv, (Graph const&, ConvParams const&, ConvPass, ElementType, ConvOptions const&))             \
  X(Tensor, create_conv_input, (Graph&, ConvParams const&, ElementType, ConvOptions const&, std::string const&))   \
  X(Tensor, create_conv_weights, (Graph&, ConvParams const&, ElementType, ConvOptions const&, std::string const&)) \
  X(Tensor, conv, (Graph&, Sequence&, Tensor const&, Tensor const&, ConvParams const&, ConvOptions const&,         \
                   std::string const&))                                                                            \
  X(void, conv_with_output, (Graph&, Sequence&, Tensor const&, Tensor const&, Tensor const&, ConvParams const&,    \
                             ConvOptions const&, std::string const&))                                              \
  X(void, conv_accumulate, (Graph&, Sequence&, Tensor const&, Tensor const&, Tensor const&, ConvParams const&,     \
                            ConvOptions const&, std::string const&))                                               \
  X(Tensor, conv_backward_input, (Graph&, Sequence&, Tensor const&, Tensor const&, ConvParams const&,              \
                                  ConvOptions const&, std::string const&))                                         \
  X(Tensor, conv_weight_gradients, (Graph&, Sequence&, Tensor const&, Tensor const&, ConvParams const&,            \
                                    ConvOptions const&, std::string const&))                                       \
  X(void, conv_weight_update, (Graph&, Sequence&, Tensor const&, Tensor const&, Tensor const&, float,              \
                               ConvParams const&, ConvOptions const&, std::string const&))                         \
  X(void, add_bias, (Graph&, Sequence&, Tensor const&, Tensor const&))
TILEBSP_DECLARE_INSTANCES(TILEBSP_OPS_CONV_INSTANCES)
}  // namespace tilebsp::ops

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/conv.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/ops/conv_impl.hpp>
#endif
