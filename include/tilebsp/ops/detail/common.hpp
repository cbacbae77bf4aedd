// Plumbing the operators share: element-type dispatch and checks, the machine a graph view plans for, and when an
// operator's host path can run in place.
#pragma once

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/half.hpp>
#include <tilebsp/core/target.hpp>
#include <tilebsp/core/tensor.hpp>

#include <algorithm>
#include <optional>
#include <string>

namespace tilebsp::ops::detail {

/// The machine a graph view plans for: its own tiles (a shard is one IPU of a multi-IPU target).
inline Target view_target(Graph const& g) {
  Target t = g.target();
  if (g.num_tiles() != t.num_tiles()) {
    t.ipus = std::max<std::size_t>(1, g.num_tiles() / t.tiles_per_ipu);
    t.tiles_per_ipu = g.num_tiles() / t.ipus;
  }
  return t;
}

/// Calls f<T>() with T = half for f16 and float otherwise (the operators check the type first).
template <class F>
void with_float_type(ElementType t, F&& f) {
  if (t == ElementType::f16) f.template operator()<half>();
  else f.template operator()<float>();
}

inline void check_float(char const* op, char const* what, ElementType t) {
  if (t != ElementType::f32 && t != ElementType::f16)
    throw type_error(std::string(op) + ": " + what + " must be f32 or f16, not " + std::string(name_of(t)));
}

/// True when each operand is one strided variable and the result shares a variable with neither input: what the
/// whole-operator host kernels need (else the vertices run).
inline bool one_variable_each(std::optional<tilebsp::core::detail::Affine> const& in0,
                              std::optional<tilebsp::core::detail::Affine> const& in1,
                              std::optional<tilebsp::core::detail::Affine> const& out) {
  return in0 && in1 && out && out->var != in0->var && out->var != in1->var;
}

/// Maps elements [b, e) of `t` in row-major order to `tile`, as a few boxes of `t` (a partial row at each end of
/// the range, whole rows between, at each level): views of t's variables as they are, so that each is mapped a
/// series of runs at a time, where mapping t.flatten().slice(b, e) would list every run of a strided t.
inline void map_flat_range(Graph& g, Tensor const& t, std::size_t b, std::size_t e, std::size_t tile) {
  if (b >= e) return;
  if (t.rank() <= 1) {
    g.set_tile_mapping(t.rank() == 0 ? t : t.slice(b, e, 0), tile);
    return;
  }
  std::size_t const inner = t.num_elements() / t.dim(0);
  std::size_t const full_b = (b + inner - 1) / inner, full_e = e / inner;
  if (full_b > full_e) {  // within one row
    map_flat_range(g, t.index(b / inner), b % inner, e - b / inner * inner, tile);
    return;
  }
  if (b % inner != 0) map_flat_range(g, t.index(b / inner), b % inner, inner, tile);
  if (full_b < full_e) g.set_tile_mapping(t.slice(full_b, full_e, 0), tile);
  if (e % inner != 0) map_flat_range(g, t.index(full_e), 0, e % inner, tile);
}

}  // namespace tilebsp::ops::detail
