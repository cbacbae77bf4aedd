// ops::softmax_cross_entropy: the loss of a classifier's logits against integer labels, its gradient with respect
// to the logits, and whether each example's largest logit is its label (for accuracy), in one compute set. The
// entry point; its definition (the vertex) is in <tilebsp/ops/loss_impl.hpp>.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/ops/detail/instances.hpp>
#include <tilebsp/program/programs.hpp>

#include <concepts>
#include <string>

namespace tilebsp::ops {

/// What softmax_cross_entropy computes.
struct SoftmaxCrossEntropy {
  Tensor loss;     ///< f32 [batch]: log(sum_k exp(x_k)) - x_label for each example
  Tensor grad;     ///< [batch, classes], the logits' type: scale * (softmax(x) - one_hot(label))
  Tensor correct;  ///< f32 [batch]: 1 where the first largest logit is the label, else 0
  Tensor total_loss;     ///< f32 scalar: the sum of loss
  Tensor total_correct;  ///< f32 scalar: the sum of correct (exact up to 2^24 examples)
};

/// Softmax cross-entropy of `logits` ([batch, classes], f32 or f16) against `labels` ([batch], i32, each in
/// [0, classes)); the gradient is scaled by `grad_scale` (1 / batch gives the gradient of the mean loss). Each
/// tile holding rows of the logits computes them; the totals are reduced in a fixed order. A label outside
/// [0, classes) yields a NaN loss and gradient for its example. Throws shape_error and type_error.
template <class Tn, class = detail::only<Tn, Tensor>>
SoftmaxCrossEntropy softmax_cross_entropy(Graph& g, Sequence& prog, Tn const& logits, Tn const& labels, float grad_scale,
                                          std::string const& name = "softmax_cross_entropy");

#define TILEBSP_OPS_LOSS_INSTANCES(X)                                                                    \
  X(SoftmaxCrossEntropy, softmax_cross_entropy, (Graph&, Sequence&, Tensor const&, Tensor const&, float, \
                                                 std::string const&))
TILEBSP_DECLARE_INSTANCES(TILEBSP_OPS_LOSS_INSTANCES)
}  // namespace tilebsp::ops

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/loss.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/ops/loss_impl.hpp>
#endif
