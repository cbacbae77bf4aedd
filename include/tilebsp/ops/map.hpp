// ops::map: fused elementwise expressions over tensors, one vectorised vertex per region (or series of regions) of
// each tile's work, run by all of the tile's workers.
#pragma once

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/mapping.hpp>
#include <tilebsp/expr/code.hpp>
#include <tilebsp/expr/eval.hpp>
#include <tilebsp/expr/expr.hpp>
#include <tilebsp/ops/detail/host_work.hpp>
#include <tilebsp/ops/detail/instances.hpp>
#include <tilebsp/ops/map/host_kernel.hpp>
#include <tilebsp/ops/map/pieces.hpp>
#include <tilebsp/ops/map/vertex.hpp>
#include <tilebsp/program/host_path.hpp>
#include <tilebsp/program/programs.hpp>
#include <tilebsp/simd/arch.hpp>
#include <tilebsp/vertex/add_vertex.hpp>

#include <boost/hana/pair.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/tuple.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tilebsp {
namespace ops {

namespace detail {

using expr::Types;
using expr::VT;

/// NumPy broadcast of shapes; throws shape_error naming the op when they do not broadcast.
TILEBSP_INLINE Shape broadcast_shapes(char const* op, std::vector<Shape> const& shapes);

template <VT... Fixed>
constexpr Types make_types() {
  Types t{};
  t.fill(VT::any);
  std::size_t i = 0;
  ((t[i++] = Fixed), ...);
  return t;
}

/// Calls leaf.template operator()<In>() with the value types of the operands, instantiating only the type
/// combinations under which E type-checks.
template <class E, std::size_t N, VT... Fixed, class F>
void dispatch(std::array<VT, N> const& rt, F& leaf) {
  constexpr std::size_t K = sizeof...(Fixed);
  if constexpr (K == N) {
    leaf.template operator()<make_types<Fixed...>()>();
  } else {
    auto const go = [&]<VT T>() {
      if constexpr (E::infer(make_types<Fixed..., T>()).type != VT::error) dispatch<E, N, Fixed..., T>(rt, leaf);
    };
    switch (rt[K]) {
      case VT::f32: go.template operator()<VT::f32>(); break;
      case VT::f16: go.template operator()<VT::f16>(); break;
      case VT::i32: go.template operator()<VT::i32>(); break;
      case VT::u32: go.template operator()<VT::u32>(); break;
      case VT::boolean: go.template operator()<VT::boolean>(); break;
      default: break;
    }
  }
}
template <class F>
void dispatch_out(VT t, F& leaf) {
  switch (t) {
    case VT::f32: leaf.template operator()<VT::f32>(); break;
    case VT::f16: leaf.template operator()<VT::f16>(); break;
    case VT::i32: leaf.template operator()<VT::i32>(); break;
    case VT::u32: leaf.template operator()<VT::u32>(); break;
    default: leaf.template operator()<VT::boolean>(); break;
  }
}

enum class Mode { new_output, in_place, given_output };

/// Map outputs of at least this many bytes use streaming stores on the host.
inline constexpr std::size_t streaming_bytes = std::size_t{8} << 20;

/// True when `t` shares elements of a variable with `out` without being the same view of it.
TILEBSP_INLINE bool overlaps_elsewhere(Tensor const& t, Tensor const& out);
/// True when `t` and `out` are the same strided view of one variable.
TILEBSP_INLINE bool same_view(Tensor const& t, Tensor const& out);

/// The value type of an operand type named by the caller (map<float, half>(...)).
template <class T>
inline constexpr VT named_type = expr::detail::vt_of(element_type_v<T>);

template <class E, std::size_t N, VT... Named>
Tensor map(Graph& g, Sequence& prog, E const& e, std::array<Tensor, N> const& ins, Tensor out, Mode mode,
           char const* op) {
  static_assert(N <= expr::max_operands, "map: at most 8 tensor operands");
  static_assert(sizeof...(Named) == 0 || sizeof...(Named) == N,
                "map<T...>: name the element type of every tensor operand, or of none");
  static_assert(((Named != VT::error) && ...), "map<T...>: operand types are float, half, int32_t, uint32_t or bool");
  if (E::max_index > N)
    throw index_error(std::string(op) + ": the expression uses _" + std::to_string(E::max_index) + " but only " +
                      std::to_string(N) + " tensor" + (N == 1 ? " was" : "s were") + " given");
  std::vector<Shape> shapes;
  std::array<VT, N> rt{};
  Types types{};
  types.fill(VT::any);
  for (std::size_t k = 0; k < N; ++k) {
    g.check_tensor(op, ins[k]);
    shapes.push_back(ins[k].shape());
    rt[k] = types[k] = expr::detail::vt_of(ins[k].element_type());
    if (rt[k] == VT::error)
      throw type_error(std::string(op) + ": operand _" + std::to_string(k + 1) + " is u8, which expressions do not "
                       "support (use an i32 or u32 tensor)");
    if constexpr (sizeof...(Named) > 0) {
      constexpr std::array<VT, N> named{Named...};
      if (named[k] != VT::any && rt[k] != named[k])
        throw type_error(std::string(op) + ": operand _" + std::to_string(k + 1) + " is " + expr::detail::name_of(rt[k]) +
                         " but the call names " + expr::detail::name_of(named[k]) + " for it (" + op + "<T...>)");
    }
  }
  if (mode != Mode::new_output) {
    g.check_tensor(op, out);
    shapes.push_back(out.shape());
  }
  Shape const shape = broadcast_shapes(op, shapes);
  if (mode != Mode::new_output && out.shape() != shape)
    throw shape_error(std::string(op) + ": the output " + to_string(out.shape()) + " would have to be broadcast to " +
                      to_string(shape) + (mode == Mode::in_place ? "; a broadcast tensor cannot be written in place" : ""));
  expr::detail::Inferred const inferred = expr::infer_of(e, types);
  if (inferred.type == VT::error) throw type_error(std::string(op) + ": " + expr::detail::describe(inferred));
  VT result = inferred.type == VT::weak || inferred.type == VT::any ? VT::f32 : inferred.type;
  if (mode != Mode::new_output) {
    VT const want = expr::detail::vt_of(out.element_type());
    if (inferred.type == VT::weak || inferred.type == VT::any) result = want;
    else if (want != result)
      throw type_error(std::string(op) + ": the expression gives " + expr::detail::name_of(result) +
                       " but the output holds " + std::string(name_of(out.element_type())) + " (use cast<T>)");
    if (want == VT::error) throw type_error(std::string(op) + ": u8 outputs are not supported");
  }
  if (mode == Mode::new_output) {
    out = g.add_variable(expr::detail::element_of(result), shape, op);
    std::size_t largest = N;
    for (std::size_t k = 0; k < N; ++k)
      if (ins[k].shape() == shape && (largest == N || ins[k].num_elements() > ins[largest].num_elements())) largest = k;
    if (largest < N) {
      g.set_tile_mapping_like(out, ins[largest]);
    } else {
      map_linearly(g, out);
    }
  }
  if (out.num_elements() == 0) return out;

  // Operands as flat views over the output's elements; scalars stay one element.
  std::array<Tensor, N> flat;
  std::uint32_t scalar_mask = 0;
  for (std::size_t k = 0; k < N; ++k) {
    if (ins[k].num_elements() == 1) {
      flat[k] = ins[k].flatten();
      scalar_mask |= 1u << k;
    } else {
      flat[k] = ins[k].broadcast(shape).flatten();
    }
  }
  Tensor const out_flat = out.flatten();
  // Outputs far larger than the caches are written past them (non-temporal stores): no read-for-ownership. Not where
  // the map reads the elements it writes (in place, or an operand that is the output's own view): their lines are
  // in the cache already (a bias after a convolution, which has just written them), and streaming them out would
  // only make the next step read them from memory.
  bool const reads_output = mode == Mode::in_place ||
                            (mode == Mode::given_output &&
                             std::any_of(ins.begin(), ins.end(), [&](Tensor const& t) { return same_view(t, out); }));
  bool const stream = !reads_output && out.num_elements() * size_of(out.element_type()) >= streaming_bytes;
  // Operands on other tiles are fetched (read where they live on the host, modelled as an exchange), except
  // views that overlap the output at other positions: those are copied first, so that no vertex reads what
  // another writes.
  Sequence exchange;
  OperatorScope const scope(g, "map", op, simd::isa_name());
  ComputeSet const cs = g.add_compute_set(op);
  std::array<bool, N> copied{};
  for (std::size_t k = 0; k < N; ++k) copied[k] = mode != Mode::new_output && overlaps_elsewhere(ins[k], out);
  std::vector<MapPiece> work = pieces(g, out_flat);
  auto const workers = static_cast<std::uint32_t>(std::max<std::size_t>(1, g.target().workers_per_tile));
  // A piece of several rows needs every operand's rows contiguous where they are read in place (not so an
  // operand read at a stride, such as every other element of a variable): otherwise its rows become single runs.
  // A flat view of consecutive elements of one variable has them in every piece (the common case: looked at once).
  auto const consecutive = [](Tensor const& t) {
    auto const a = t.affine();
    return a && a->strides.size() == 1 && a->strides[0] == 1;
  };
  std::array<bool, N + 1> in_place_rows{};
  for (std::size_t k = 0; k < N; ++k) in_place_rows[k] = consecutive(flat[k]);
  in_place_rows[N] = consecutive(out_flat);
  for (std::size_t w = 0, n = work.size(); w < n; ++w) {
    MapPiece const p = work[w];
    if (p.rows == 1) continue;
    auto const rows_contiguous = [&](Tensor const& t, bool consecutive_elements) {
      if (consecutive_elements) return true;
      auto const a = piece_of(t, p).affine();
      return !a || a->strides[1] == 1;  // not affine: gathered into a contiguous buffer
    };
    bool contiguous = rows_contiguous(out_flat, in_place_rows[N]);
    for (std::size_t k = 0; k < N && contiguous; ++k)
      if (!(scalar_mask >> k & 1u) && !copied[k]) contiguous = rows_contiguous(flat[k], in_place_rows[k]);
    if (contiguous) continue;
    work[w] = {p.tile, p.begin, p.length, 0, 1};
    for (std::size_t i = 1; i < p.rows; ++i) work.push_back({p.tile, p.begin + i * p.stride, p.length, 0, 1});
  }

  // Operands that overlap the output elsewhere are copied to each piece's tile first (the same for every type,
  // so outside the kernels' instantiations); every vertex is then made the same way, on the build threads.
  bool const any_copied = std::find(copied.begin(), copied.end(), true) != copied.end();
  auto const view_of = [&](std::size_t k, MapPiece const& p) {
    return !(scalar_mask >> k & 1u) ? piece_of(flat[k], p) : p.rows == 1 ? flat[k] : flat[k].reshape({1, 1});
  };
  std::vector<std::array<Tensor, N>> copies(any_copied ? work.size() : 0);
  for (std::size_t w = 0; w < copies.size(); ++w)
    for (std::size_t k = 0; k < N; ++k) {
      if (!copied[k]) continue;
      Tensor const view = view_of(k, work[w]);
      copies[w][k] = g.add_variable(view.element_type(), view.shape(), std::string(op) + "/operand", {.temporary = true});
      g.set_tile_mapping(copies[w][k], work[w].tile);
      exchange.add(tilebsp::copy(view, copies[w][k]));
    }
  HostKernel host;  // empty where an operand is copied to its tile first (the vertices run)
  auto leaf_out = [&]<Types In, VT Out>() {
    vertex::add_vertices(g, work.size(), [&](std::size_t w) {
      MapPiece const& p = work[w];
      return [&]<std::size_t... I>(std::index_sequence<I...>) {
        [[maybe_unused]] auto const in = [&](std::size_t k) {
          return fetch(any_copied && copied[k] ? copies[w][k] : view_of(k, p));
        };
        if (p.rows == 1)
          return vertex::record<MapVertex<E, In, Out, N, false>>(g, cs, p.tile, in(I)..., piece_of(out_flat, p),
                                                                 scalar_mask, stream, workers, e);
        return vertex::record<MapVertex<E, In, Out, N, true>>(g, cs, p.tile, in(I)..., piece_of(out_flat, p),
                                                              scalar_mask, stream, workers, e);
      }(std::make_index_sequence<N>{});
    });
    if (!any_copied) host = MapHostKernel<In, Out, E, N>(e, ins, out, shape, scalar_mask, stream).kernel();
  };
  auto leaf = [&]<Types In>() {
    constexpr VT R = E::infer(In).type;
    if constexpr (expr::is_interpreted<E>) {
      leaf_out.template operator()<In, VT::any>();  // the types are the program's: one instance for all
    } else if constexpr (R == VT::weak || R == VT::any) {
      auto with_inputs = [&]<VT Out>() { leaf_out.template operator()<In, Out>(); };
      dispatch_out(result, with_inputs);
    } else {
      leaf_out.template operator()<In, R>();
    }
  };
  if constexpr (sizeof...(Named) > 0) {
    // Only the named types' kernels: the checks above threw for other operands, or when E does not type-check.
    if constexpr (E::max_index <= N && E::infer(make_types<Named...>()).type != VT::error)
      leaf.template operator()<make_types<Named...>()>();
  } else if constexpr (E::max_index <= N) {
    dispatch<E>(rt, leaf);  // otherwise the index_error above was thrown
  }
  if (exchange.size() > 0) prog.add(std::move(exchange));
  prog.add(host_path(std::string(op), std::move(host), execute(cs)));
  return out;
}

template <class... T>
concept Tensors = (std::same_as<std::remove_cvref_t<T>, Tensor> && ...);

template <std::size_t, VT T>
inline constexpr VT same_type = T;

/// The interpreted map over N operands: one instance per N, whatever the operand and output types (VT::any).
template <std::size_t N>
Tensor map_program(Graph& g, Sequence& prog, expr::Program const& p, std::vector<Tensor> const& v, Tensor const& out,
                   Mode mode, char const* op) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return detail::map<expr::Interpreted, N, same_type<I, VT::any>...>(g, prog, expr::Interpreted{p},
                                                                       std::array<Tensor, N>{v[I]...}, out, mode, op);
  }(std::make_index_sequence<N>{});
}

/// map_interpreted into a new output, or (given_output) into `out`.
template <class T>
T map_code(Graph& g, Sequence& prog, expr::Code const& code, std::vector<T> const& operands, T const& out, Mode mode,
           char const* op) {
  using expr::VT;
  std::size_t const n = operands.size();
  if (code.empty()) throw option_error(std::string(op) + ": the expression (an expr::Code) is empty");
  if (n == 0 || n > expr::max_operands)
    throw option_error(std::string(op) + ": an interpreted map takes 1 to 8 tensors, got " + std::to_string(n));
  if (code.max_index() > n)
    throw index_error(std::string(op) + ": the expression uses _" + std::to_string(code.max_index()) + " but only " +
                      std::to_string(n) + " tensor" + (n == 1 ? " was" : "s were") + " given");
  expr::Types types{};
  types.fill(VT::any);
  for (std::size_t k = 0; k < n; ++k) {
    g.check_tensor(op, operands[k]);
    types[k] = expr::detail::vt_of(operands[k].element_type());
    if (types[k] == VT::error)
      throw type_error(std::string(op) + ": operand _" + std::to_string(k + 1) + " is u8, which expressions do not "
                       "support (use an i32 or u32 tensor)");
  }
  expr::Lowering lowering(code, types);
  expr::detail::Inferred const r = lowering.result();
  if (r.type == VT::error) throw type_error(std::string(op) + ": " + expr::detail::describe(r));
  // A weak result (constants only) takes the output's type where there is one.
  VT type = r.type;
  if (type == VT::weak || type == VT::any) {
    type = VT::f32;
    if (mode != Mode::new_output) {
      g.check_tensor(op, out);
      if (VT const want = expr::detail::vt_of(out.element_type()); want != VT::error) type = want;
    }
  }
  expr::Program const p = lowering.lower(type);
  switch (n) {
    case 1: return map_program<1>(g, prog, p, operands, out, mode, op);
    case 2: return map_program<2>(g, prog, p, operands, out, mode, op);
    case 3: return map_program<3>(g, prog, p, operands, out, mode, op);
    case 4: return map_program<4>(g, prog, p, operands, out, mode, op);
    case 5: return map_program<5>(g, prog, p, operands, out, mode, op);
    case 6: return map_program<6>(g, prog, p, operands, out, mode, op);
    case 7: return map_program<7>(g, prog, p, operands, out, mode, op);
    default: return map_program<8>(g, prog, p, operands, out, mode, op);
  }
}

}  // namespace detail

/// expr (an expr::Code) applied elementwise to 1 to 8 operands, as map with an expression template, by the
/// interpreter compiled once (expr/program.hpp; in tilebsp::compiled, once per instruction set) instead of a kernel
/// compiled for the expression and its operand types. Throws as map does (index_error, shape_error, type_error),
/// and option_error for an empty expression or one beyond 64 operations, 32 constants or 24 values at once.
template <class T, class = detail::only<T, Tensor>>
T map_interpreted(Graph& g, Sequence& prog, expr::Code const& code, std::vector<T> const& operands) {
  return detail::map_code(g, prog, code, operands, T{}, detail::Mode::new_output, "map");
}
/// map_interpreted written into `out` (as map_with_output): `out` has the operands' broadcast shape and the
/// expression's type, and may be one of the operands (the same view), which is then updated in place. Throws as
/// map_with_output does.
template <class T, class = detail::only<T, Tensor>>
void map_interpreted_with_output(Graph& g, Sequence& prog, expr::Code const& code, T const& out, std::vector<T> const& operands) {
  detail::map_code(g, prog, code, operands, out, detail::Mode::given_output, "map_with_output");
}

/// A new tensor holding expr applied elementwise to the operands (NumPy broadcasting), mapped like the largest
/// operand of the output's shape. Appends any exchanges and one compute set to `prog`.
/// Throws index_error (placeholder beyond the operands), shape_error (shapes that do not broadcast) and
/// type_error (element types mixed without a cast, or an operator that does not take a type).
/// A tensor's element type is known when the program runs, so a map compiles its kernels for every combination
/// of operand types under which the expression type-checks. Naming the types, `map<float, float>(g, prog, e, a, b)`,
/// compiles only theirs (a fraction of the compile time); an operand of another type is then a type_error.
template <class... Named, expr::ExprLike E, class... T>
  requires detail::Tensors<T...>
Tensor map(Graph& g, Sequence& prog, E const& e, T const&... operands) {
  return detail::map<E, sizeof...(T), detail::named_type<Named>...>(g, prog, e, {operands...}, Tensor{},
                                                                           detail::Mode::new_output, "map");
}
/// The interpreted map of an expr::Code over the operands (map_interpreted).
template <class... T>
  requires(detail::Tensors<T...> && sizeof...(T) > 0)
Tensor map(Graph& g, Sequence& prog, expr::Code const& code, T const&... operands) {
  return map_interpreted(g, prog, code, std::vector<Tensor>{operands...});
}
/// Writes expr into the first operand, which must already have the broadcast shape.
template <class... Named, expr::ExprLike E, class... T>
  requires detail::Tensors<T...>
void map_in_place(Graph& g, Sequence& prog, E const& e, Tensor const& first, T const&... operands) {
  detail::map<E, sizeof...(T) + 1, detail::named_type<Named>...>(g, prog, e, {first, operands...}, first,
                                                                        detail::Mode::in_place, "map_in_place");
}
/// Writes expr into `out`, whose shape must be the operands' broadcast shape and whose type the expression's.
template <class... Named, expr::ExprLike E, class... T>
  requires detail::Tensors<T...>
void map_with_output(Graph& g, Sequence& prog, E const& e, Tensor const& out, T const&... operands) {
  detail::map<E, sizeof...(T), detail::named_type<Named>...>(g, prog, e, {operands...}, out,
                                                                    detail::Mode::given_output, "map_with_output");
}
/// The interpreted form of map_with_output (map_interpreted_with_output).
template <class... T>
  requires(detail::Tensors<T...> && sizeof...(T) > 0)
void map_with_output(Graph& g, Sequence& prog, expr::Code const& code, Tensor const& out, T const&... operands) {
  map_interpreted_with_output(g, prog, code, out, std::vector<Tensor>{operands...});
}

/// a + b. (The helpers are templates so that only the ones a program uses are instantiated.)
template <class T, class = detail::only<T, Tensor>>
T add(Graph& g, Sequence& prog, T const& a, T const& b) { return map(g, prog, expr::_1 + expr::_2, a, b); }
/// a - b
template <class T, class = detail::only<T, Tensor>>
T sub(Graph& g, Sequence& prog, T const& a, T const& b) { return map(g, prog, expr::_1 - expr::_2, a, b); }
/// a * b
template <class T, class = detail::only<T, Tensor>>
T mul(Graph& g, Sequence& prog, T const& a, T const& b) { return map(g, prog, expr::_1 * expr::_2, a, b); }
/// max(a, 0)
template <class T, class = detail::only<T, Tensor>>
T relu(Graph& g, Sequence& prog, T const& a) { return map(g, prog, expr::relu(expr::_1), a); }
/// a += k * b (the SGD update when b is a gradient and k = -learning rate).
template <class T, class = detail::only<T, Tensor>>
void scaled_add(Graph& g, Sequence& prog, T const& a, T const& b, double k) {
  map_in_place(g, prog, expr::_1 + expr::_2 * k, a, b);
}
/// Sets every element of t to value.
template <class T, class = detail::only<T, Tensor>>
void fill(Graph& g, Sequence& prog, T const& t, double value) {
  map_with_output(g, prog, expr::constant(value), t);
}
/// A new tensor holding t converted to `type` (f32, f16, i32, u32 or bool).
template <class T, class = detail::only<T, Tensor>>
T cast(Graph& g, Sequence& prog, T const& t, ElementType type) {
  using namespace expr;
  switch (type) {
    case ElementType::f32: return map(g, prog, expr::cast<float>(_1), t);
    case ElementType::f16: return map(g, prog, expr::cast<half>(_1), t);
    case ElementType::i32: return map(g, prog, expr::cast<std::int32_t>(_1), t);
    case ElementType::u32: return map(g, prog, expr::cast<std::uint32_t>(_1), t);
    case ElementType::boolean: return map(g, prog, expr::cast<bool>(_1), t);
    case ElementType::u8: break;
  }
  throw type_error("cast: u8 is not a supported target type");
}

#define TILEBSP_OPS_MAP_INSTANCES(X)                                             \
  X(Tensor, add, (Graph&, Sequence&, Tensor const&, Tensor const&))              \
  X(Tensor, sub, (Graph&, Sequence&, Tensor const&, Tensor const&))              \
  X(Tensor, mul, (Graph&, Sequence&, Tensor const&, Tensor const&))              \
  X(Tensor, relu, (Graph&, Sequence&, Tensor const&))                            \
  X(void, scaled_add, (Graph&, Sequence&, Tensor const&, Tensor const&, double)) \
  X(void, fill, (Graph&, Sequence&, Tensor const&, double))                      \
  X(Tensor, cast, (Graph&, Sequence&, Tensor const&, ElementType))                \
  X(Tensor, map_interpreted, (Graph&, Sequence&, expr::Code const&, std::vector<Tensor> const&))   \
  X(void, map_interpreted_with_output, (Graph&, Sequence&, expr::Code const&, Tensor const&, std::vector<Tensor> const&))
TILEBSP_DECLARE_INSTANCES(TILEBSP_OPS_MAP_INSTANCES)
}  // namespace ops
}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/map.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/ops/map_impl.hpp>
#endif
