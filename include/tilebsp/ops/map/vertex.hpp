// The vertex of ops::map: one vectorised vertex per region (or series of equal regions) of a tile's output,
// shared by the tile's workers.
#pragma once

#include <tilebsp/expr/eval.hpp>
#include <tilebsp/expr/expr.hpp>
#include <tilebsp/expr/program.hpp>
#include <tilebsp/vertex/add_vertex.hpp>

#include <boost/hana/pair.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/tuple.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tilebsp::ops::detail {

using expr::Types;
using expr::VT;

/// The reflected fields of the map vertices, in order: in0 .. in<N-1>, out, scalars, stream, workers, expr (a
/// hand-written Hana accessor list, since their number depends on N).
template <std::size_t N>
struct MapFields {
  template <std::size_t... I>
  static constexpr auto apply(std::index_sequence<I...>) {
    namespace hana = boost::hana;
    return hana::make_tuple(
        hana::make_pair(hana::string_c<'i', 'n', static_cast<char>('0' + I)>,
                        [](auto&& v) -> decltype(auto) { return std::get<I>(v.ins); })...,
        hana::make_pair(BOOST_HANA_STRING("out"), [](auto&& v) -> decltype(auto) { return (v.out); }),
        hana::make_pair(BOOST_HANA_STRING("scalars"), [](auto&& v) -> decltype(auto) { return (v.scalars); }),
        hana::make_pair(BOOST_HANA_STRING("stream"), [](auto&& v) -> decltype(auto) { return (v.stream); }),
        hana::make_pair(BOOST_HANA_STRING("workers"), [](auto&& v) -> decltype(auto) { return (v.workers); }),
        hana::make_pair(BOOST_HANA_STRING("expr"), [](auto&& v) -> decltype(auto) { return (v.e); }));
  }
  static constexpr auto apply() { return apply(std::make_index_sequence<N>{}); }
};

/// A map vertex's estimate in tile cycles: each worker issues every `workers`-th cycle and takes an equal share of
/// the 64-bit vectors (2 f32 or 4 f16 lanes, `lanes`), or of the rows, one cycle per node and vector, plus 20 of
/// setup; a row costs 6 more cycles (loading its pointers and count: our assumption, as for the setup). Without
/// rows, `rows` is 1 and `length` the element count.
inline std::uint64_t map_vertex_cycles(bool with_rows, std::uint64_t rows, std::uint64_t length, std::uint64_t workers,
                                       std::uint64_t nodes, std::uint64_t lanes) {
  std::uint64_t const k = std::max<std::uint64_t>(1, workers);
  nodes = std::max<std::uint64_t>(1, nodes);
  if (with_rows) return k * (20 + (rows + k - 1) / k * (6 + (length + lanes - 1) / lanes * nodes));
  return k * (20 + ((length + lanes - 1) / lanes + k - 1) / k * nodes);
}

/// The vertex of a map: N operands of the value types In, an output of type Out, the expression (which carries
/// its constants) and which operands are scalars broadcast to every element (fields: MapFields). With Rows, the operands and the output are
/// [rows, length] views whose rows are contiguous (a scalar operand: one element): one vertex for many equal runs
/// of a tile's output, as a conv output mapped in blocks of channels has one run per position.
/// A multi-worker vertex (Poplar's MultiVertex): `workers` workers share its elements (its rows, with Rows), so
/// a tile's region is one vertex rather than one per worker; its estimate is in tile cycles.
template <class E, Types In, VT Out, std::size_t N, bool Rows = false>
struct MapVertex {
  static constexpr bool supervisor = true;
  template <class T>
  using In_t = std::conditional_t<Rows, input_view<T, 2>, input<T>>;
  template <std::size_t... I>
  static auto make_inputs(std::index_sequence<I...>) -> std::tuple<In_t<expr::storage_t<In[I]>>...>;
  using Inputs = decltype(make_inputs(std::make_index_sequence<N>{}));

  Inputs ins;
  std::conditional_t<Rows, output_view<expr::storage_t<Out>, 2>, output<expr::storage_t<Out>>> out;
  param<std::uint32_t> scalars;
  param<bool> stream;
  param<std::uint32_t> workers;
  param<E> e;

  using hana_accessors_impl = MapFields<N>;

  void compute() {
    expr::Operands o;
    o.scalar = scalars;
    if constexpr (Rows) {
      std::ptrdiff_t step[N > 0 ? N : 1] = {};
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((o.ptr[I] = std::get<I>(ins).data(),
          step[I] = scalars >> I & 1u ? 0
                                      : std::get<I>(ins).stride(0) *
                                            static_cast<std::ptrdiff_t>(sizeof(expr::storage_t<In[I]>))),
         ...);
      }(std::make_index_sequence<N>{});
      expr::evaluate_rows<In, Out>(e.get(), o, N, out.data(), out.dim(1), out.dim(0), step,
                                   out.stride(0) * static_cast<std::ptrdiff_t>(sizeof(expr::storage_t<Out>)), stream);
    } else {
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((o.ptr[I] = std::get<I>(ins).data()), ...);
      }(std::make_index_sequence<N>{});
      expr::evaluate<In, Out>(e.get(), o, N, out.data(), out.size(), stream);
    }
  }
  /// IPU estimate in tile cycles (map_vertex_cycles), one node per expression node.
  std::uint64_t cycle_estimate() const {
    if constexpr (Rows) return map_vertex_cycles(true, out.dim(0), out.dim(1), workers, E::nodes, Out == VT::f16 ? 4 : 2);
    else return map_vertex_cycles(false, 1, out.size(), workers, E::nodes, Out == VT::f16 ? 4 : 2);
  }
};

/// The vertex of an interpreted map (an expr::Code): its operands and output are fields of any element type, and
/// the program carries their types, so one vertex type serves every combination of types (per operand count).
template <Types In, VT Out, std::size_t N, bool Rows>
struct MapVertex<expr::Interpreted, In, Out, N, Rows> {
  static constexpr bool supervisor = true;
  using In_t = std::conditional_t<Rows, input_view_any<2>, input_any>;
  template <std::size_t>
  using In_i = In_t;
  template <std::size_t... I>
  static auto make_inputs(std::index_sequence<I...>) -> std::tuple<In_i<I>...>;
  using Inputs = decltype(make_inputs(std::make_index_sequence<N>{}));

  Inputs ins;
  std::conditional_t<Rows, output_view_any<2>, output_any> out;
  param<std::uint32_t> scalars;
  param<bool> stream;
  param<std::uint32_t> workers;
  param<expr::Interpreted> e;

  using hana_accessors_impl = MapFields<N>;

  void compute() {
    expr::Program const& p = e.get().program;
    expr::Operands o;
    o.scalar = scalars;
    std::size_t const out_width = expr::detail::width(p.out);
    if constexpr (Rows) {
      for (std::size_t r = 0; r < out.dim(0); ++r) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          ((o.ptr[I] = std::get<I>(ins).data() +
                       (scalars >> I & 1u ? 0
                                          : std::ptrdiff_t(r) * std::get<I>(ins).stride(0) *
                                                std::ptrdiff_t(expr::detail::width(p.operands[I])))), ...);
        }(std::make_index_sequence<N>{});
        expr::interpret(p, o, out.data() + std::ptrdiff_t(r) * out.stride(0) * std::ptrdiff_t(out_width), out.dim(1));
      }
    } else {
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((o.ptr[I] = std::get<I>(ins).data()), ...);
      }(std::make_index_sequence<N>{});
      expr::interpret(p, o, out.data(), out.size());
    }
  }
  /// As MapVertex's estimate, one node per operation of the program.
  std::uint64_t cycle_estimate() const {
    expr::Program const& p = e.get().program;
    std::uint64_t const lanes = p.out == VT::f16 ? 4 : 2;
    if constexpr (Rows) return map_vertex_cycles(true, out.dim(0), out.dim(1), workers, p.operations(), lanes);
    else return map_vertex_cycles(false, 1, out.size(), workers, p.operations(), lanes);
  }
};

}  // namespace tilebsp::ops::detail
