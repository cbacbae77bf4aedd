// ops::softmax_cross_entropy's definitions: the vertex and the entry point declared in <tilebsp/ops/loss.hpp>.
// Included by that header (header-only) or compiled once into tilebsp::compiled (src/loss.cpp); include it
// directly to use the vertex.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/ops/loss.hpp>

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/half.hpp>
#include <tilebsp/ops/detail/common.hpp>
#include <tilebsp/ops/detail/instances.hpp>
#include <tilebsp/ops/reduce.hpp>
#include <tilebsp/program/programs.hpp>
#include <tilebsp/simd/arch.hpp>
#include <tilebsp/vertex/add_vertex.hpp>

#include <boost/hana/define_struct.hpp>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

namespace tilebsp::ops {

namespace detail {

/// One or more examples (rows) of the loss, with max-subtracted exponentials in f32.
template <class T>
struct SoftmaxCrossEntropyVertex {
  BOOST_HANA_DEFINE_STRUCT(SoftmaxCrossEntropyVertex, (input<T>, logits), (input<std::int32_t>, labels),
                           (output<T>, grad), (output<float>, loss), (output<float>, correct), (param<float>, scale));
  void compute() {
    std::size_t const rows = labels.size(), k = rows ? logits.size() / rows : 0;
    for (std::size_t r = 0; r < rows; ++r) {
      T const* x = logits.data() + r * k;
      T* dx = grad.data() + r * k;
      std::size_t best = 0;
      float m = static_cast<float>(x[0]);
      for (std::size_t i = 1; i < k; ++i)
        if (static_cast<float>(x[i]) > m) m = static_cast<float>(x[i]), best = i;
      float s = 0.0f;
      for (std::size_t i = 0; i < k; ++i) s += std::exp(static_cast<float>(x[i]) - m);
      std::int32_t const label = labels.data()[r];
      bool const valid = label >= 0 && static_cast<std::size_t>(label) < k;
      // A label outside [0, classes) gives a NaN loss and gradient rather than reading out of bounds.
      float const nan = std::numeric_limits<float>::quiet_NaN();
      loss.data()[r] = valid ? m + std::log(s) - static_cast<float>(x[label]) : nan;
      correct.data()[r] = valid && best == static_cast<std::size_t>(label) ? 1.0f : 0.0f;
      for (std::size_t i = 0; i < k; ++i) {
        float const p = std::exp(static_cast<float>(x[i]) - m) / s;
        dx[i] = static_cast<T>(valid ? scale * (p - (static_cast<std::int32_t>(i) == label ? 1.0f : 0.0f)) : nan);
      }
    }
  }
  std::uint64_t cycle_estimate() const { return 40 + 12 * logits.size(); }
};

}  // namespace detail

template <class Tn, class>
SoftmaxCrossEntropy softmax_cross_entropy(Graph& g, Sequence& prog, Tn const& logits, Tn const& labels, float grad_scale,
                                          std::string const& name) {
  char const* op = "softmax_cross_entropy";
  OperatorScope const scope(g, op, name, simd::isa_name());
  g.check_tensor(op, logits);
  g.check_tensor(op, labels);
  if (logits.rank() != 2 || logits.dim(1) == 0)
    throw shape_error(std::string(op) + ": logits must be [batch, classes] with at least one class, not " +
                      to_string(logits.shape()));
  if (labels.rank() != 1 || labels.dim(0) != logits.dim(0))
    throw shape_error(std::string(op) + ": labels must be [" + std::to_string(logits.dim(0)) + "] for logits " +
                      to_string(logits.shape()) + ", not " + to_string(labels.shape()));
  if (labels.element_type() != ElementType::i32)
    throw type_error(std::string(op) + ": labels must be i32, not " + std::string(name_of(labels.element_type())));
  std::size_t const B = logits.dim(0);
  SoftmaxCrossEntropy r;
  r.grad = g.add_variable(logits.element_type(), logits.shape(), name + "/grad");
  r.loss = g.add_variable(ElementType::f32, {B}, name + "/loss");
  r.correct = g.add_variable(ElementType::f32, {B}, name + "/correct");
  ComputeSet const cs = g.add_compute_set(name);
  // Rows dealt out over the tiles, whole rows each.
  std::size_t const tiles = std::max<std::size_t>(1, std::min(B, g.num_tiles()));
  detail::with_float_type(logits.element_type(), [&]<class T>() {
    for (std::size_t t = 0; t < tiles; ++t) {
      std::size_t const b0 = B * t / tiles, b1 = B * (t + 1) / tiles;
      if (b0 == b1) continue;
      std::size_t const tile = t * g.num_tiles() / tiles;
      for (auto const& x : {r.grad.slice(b0, b1), r.loss.slice(b0, b1), r.correct.slice(b0, b1)})
        g.set_tile_mapping(x, tile);
      g.add_vertex<detail::SoftmaxCrossEntropyVertex<T>>(cs, tile, fetch(logits.slice(b0, b1).flatten()),
                                                         fetch(labels.slice(b0, b1)), r.grad.slice(b0, b1).flatten(),
                                                         r.loss.slice(b0, b1), r.correct.slice(b0, b1), grad_scale);
    }
  });
  prog.add(execute(cs));
  r.total_loss = reduce(g, prog, r.loss, {0}, ReduceOp::add, name + "/total_loss");
  r.total_correct = reduce(g, prog, r.correct, {0}, ReduceOp::add, name + "/total_correct");
  return r;
}

}  // namespace tilebsp::ops
