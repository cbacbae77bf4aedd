// Graph::add_vertex<V>: checks connections against V's reflected fields at compile time and records the vertex.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/vertex/reflect.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tilebsp {
namespace vertex::detail {
using core::detail::FieldConnection;
using core::detail::FieldKind;
using core::detail::VertexRecord;

enum class Connection { ok, not_a_vertex, bad_member, arity, tensor_field, list_field, param_field, fetch_write };

template <class F, class A>
constexpr Connection check_one() {
  if constexpr (!is_field_v<F>) return Connection::bad_member;
  else if constexpr (is_tensor_field_v<F>) {
    if constexpr (std::is_same_v<A, Fetch>) return F::kind == FieldKind::input ? Connection::ok : Connection::fetch_write;
    else return std::is_same_v<A, Tensor> ? Connection::ok : Connection::tensor_field;
  }
  else if constexpr (is_list_field_v<F>)
    return std::is_convertible_v<A, std::vector<Tensor>> ? Connection::ok : Connection::list_field;
  else
    return !std::is_same_v<A, Tensor> && std::is_convertible_v<A, typename F::value_type> ? Connection::ok
                                                                                           : Connection::param_field;
}

template <class V, class... A>
constexpr Connection check_connections() {
  if constexpr (!VertexLike<V>) {
    return Connection::not_a_vertex;
  } else if constexpr (num_fields<V>() != sizeof...(A)) {
    return Connection::arity;
  } else {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      Connection r = Connection::ok;
      ((r = r == Connection::ok ? check_one<field_t<V, I>, A>() : r), ...);
      return r;
    }(std::index_sequence_for<A...>{});
  }
}

/// How many tensors argument `a` connects to a field F.
template <class F, class A>
std::size_t tensors_in(A const& a) {
  if constexpr (is_tensor_field_v<F>) return 1;
  else if constexpr (is_list_field_v<F>) {
    if constexpr (requires { a.size(); }) return static_cast<std::size_t>(a.size());
    else return std::vector<Tensor>(a).size();
  } else {
    return 0;
  }
}

template <class F>
void connect_field(Graph const& g, std::string_view vertex, std::string_view name, F* proto, FieldConnection& c,
                   std::vector<Tensor>& tensors, auto&& arg) {
  c.kind = F::kind;
  c.name = name;
  c.first = static_cast<std::uint32_t>(tensors.size());
  auto const check = [&](Tensor const& t) {
    g.check_tensor("add_vertex", t);
    if (t.element_type() != c.type)
      throw type_error("add_vertex<" + std::string(vertex) + ">: field '" + std::string(name) + "' is " +
                       std::string(name_of(F::kind)) + "<" + std::string(name_of(c.type)) + "> but is connected to a " +
                       std::string(name_of(t.element_type())) + " tensor");
    ++c.count;
  };
  if constexpr (is_tensor_field_v<F>) {
    c.rank = static_cast<std::uint8_t>(view_rank_v<F>);
    auto&& t = [&]() -> auto&& {
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(arg)>, Fetch>) return (arg.tensor);
      else return (arg);
    }();
    if constexpr (is_any_field_v<F>) c.type = t.element_type();  // the tensor's, whatever it is
    else c.type = element_type_v<typename F::value_type>;
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(arg)>, Fetch>) c.fetched = true;
    check(t);
    if (c.rank != 0 && t.rank() != c.rank)
      throw shape_error("add_vertex<" + std::string(vertex) + ">: field '" + std::string(name) + "' is a rank-" +
                        std::to_string(c.rank) + " view but is connected to a tensor of shape " + to_string(t.shape()));
    // A temporary (a view made for this call) is moved in: no copy, and no count of references to its variable's
    // sequence taken on every vertex (shared with the other threads making records).
    if constexpr (!std::is_lvalue_reference_v<decltype(arg)> && !std::is_const_v<std::remove_reference_t<decltype(arg)>>)
      tensors.push_back(std::move(t));
    else
      tensors.push_back(t);
  } else if constexpr (is_list_field_v<F>) {
    c.type = element_type_v<typename F::value_type>;
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(arg)>, std::vector<Tensor>>) {
      for (Tensor const& t : arg) check(t), tensors.push_back(t);
    } else {
      for (Tensor& t : std::vector<Tensor>(arg)) check(t), tensors.push_back(std::move(t));
    }
  } else {
    *proto = F(static_cast<typename F::value_type>(arg));
    c.param_bytes = static_cast<std::uint32_t>(sizeof(typename F::value_type));
  }
}

/// Whether every param of V is trivially copyable: then two prototypes whose params have the same bytes are the
/// same vertex state, and one is shared.
template <class V>
constexpr bool params_comparable() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return ((!is_param_field_v<field_t<V, I>> || std::is_trivially_copyable_v<field_t<V, I>>) && ... && true);
  }(std::make_index_sequence<num_fields<V>()>{});
}
template <class V>
bool same_params(V const& a, V const& b) {
  return []<std::size_t... I>(V& x, V& y, std::index_sequence<I...>) {  // field() takes V&; nothing is written
    return ((!is_param_field_v<field_t<V, I>> ||
             std::memcmp(&field<V, I>(x), &field<V, I>(y), sizeof(field_t<V, I>)) == 0) && ... && true);
  }(const_cast<V&>(a), const_cast<V&>(b), std::make_index_sequence<num_fields<V>()>{});
}

template <class V, class... A>
VertexRecord make_record(Graph const& g, ComputeSet cs, std::size_t tile, A&&... args) {
  auto const& impl = g.impl();
  VertexRecord rec;
  rec.ops = vertex_ops<V>();
  std::string_view const vname = rec.ops->name;  // type_name<V>() searched the (long) signature on every call
  if (cs.graph != impl.id)
    throw error("add_vertex<" + std::string(vname) + ">: the compute set belongs to another graph");
  rec.compute_set = cs.id;
  rec.tile = g.global_tile("add_vertex", tile);
  V proto{};
  constexpr std::size_t n = sizeof...(A);
  std::array<FieldConnection, n> fields{};
  constexpr bool lists = []<std::size_t... I>(std::index_sequence<I...>) {
    return (is_list_field_v<field_t<V, I>> || ... || false);
  }(std::index_sequence_for<A...>{});
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    rec.tensors.reserve((tensors_in<field_t<V, I>>(args) + ... + std::size_t{0}));
    (connect_field(g, vname, field_name<V, I>(), &field<V, I>(proto), fields[I], rec.tensors, std::forward<A>(args)),
     ...);
  }(std::index_sequence_for<A...>{});
  if constexpr (lists) {
    auto own = std::make_shared<FieldConnection[]>(n);
    std::copy(fields.begin(), fields.end(), own.get());
    rec.fields = {own.get(), n};
    rec.own_fields = std::move(own);
  } else {
    // Without lists, the list depends on V and the connection types only: the first call's, kept (never freed:
    // records refer to it) and shared by every vertex made with the same types.
    static auto const* const shared = new std::array<FieldConnection, n>(fields);
    rec.fields = {shared->data(), n};
  }
  // The last prototype this thread made for V, shared while the params stay the same (an operator's vertices
  // mostly have the same ones): no allocation per vertex.
  if constexpr (params_comparable<V>()) {
    thread_local std::shared_ptr<V const> last;
    if (!last || !same_params(*last, proto)) last = std::make_shared<V const>(proto);
    rec.prototype = last;
  } else {
    rec.prototype = std::make_shared<V const>(proto);
  }
  if (rec.ops->cycles) rec.cycles = core::detail::vertex_estimate(rec);
  return rec;
}

/// A vertex's own hash (hash_vertex), which the graph's running hash of its vertices folds in order: taken on the
/// thread that made the record.
using Digest = std::pair<std::uint64_t, std::uint64_t>;
inline Digest digest_of(VertexRecord const& rec) {
  core::detail::Hasher h;
  core::detail::hash_vertex(h, rec);
  return {h.first(), h.second()};
}

inline void add_record(Graph& g, VertexRecord&& rec, Digest d) {
  auto& impl = g.impl();
  impl.vertex_hash.add2(d.first, d.second);
  impl.vertices.push_back(std::move(rec));
}

template <class V, class... A>
void add_vertex_impl(Graph& g, ComputeSet cs, std::size_t tile, A&&... args) {
  VertexRecord rec = make_record<V>(g, cs, tile, std::forward<A>(args)...);
  Digest const d = digest_of(rec);
  add_record(g, std::move(rec), d);
}

template <class V, class... Args>
constexpr void check_vertex() {
  constexpr Connection r = check_connections<V, std::remove_cvref_t<Args>...>();
  static_assert(r != Connection::not_a_vertex,
                "add_vertex: V must be a copyable struct declared with BOOST_HANA_DEFINE_STRUCT and a member compute()");
  static_assert(r != Connection::bad_member,
                "add_vertex: every reflected vertex member must be input<T>, output<T>, inout<T>, input_list<T>, "
                "input_view<T, R>, output_view<T, R>, inout_view<T, R> or param<T>");
  static_assert(r != Connection::arity,
                "add_vertex: the number of connections must equal the number of vertex fields (declaration order)");
  static_assert(r != Connection::tensor_field,
                "add_vertex: an input/output/inout field must be connected to a tilebsp::Tensor");
  static_assert(r != Connection::list_field,
                "add_vertex: an input_list field must be connected to a std::vector<tilebsp::Tensor>");
  static_assert(r != Connection::param_field,
                "add_vertex: a param<T> field must be connected to a value convertible to T (not a Tensor)");
  static_assert(r != Connection::fetch_write,
                "add_vertex: fetch() connects only input fields (input<T>, input_view<T, R>): fetched data is read-only");
}

/// add_vertices without its template: the records made by make(context, i). One copy of the build team and of
/// the error handling serves every vertex type and every caller's lambda (a map instantiates add_vertices once
/// per combination of operand types).
TILEBSP_INLINE void add_records(Graph& g, std::size_t count, VertexRecord (*make)(void*, std::size_t), void* context);

}  // namespace vertex::detail

template <class V, class... Args>
void Graph::add_vertex(ComputeSet cs, std::size_t tile, Args&&... connections) {
  vertex::detail::check_vertex<V, Args...>();
  if constexpr (vertex::detail::check_connections<V, std::remove_cvref_t<Args>...>() == vertex::detail::Connection::ok)
    vertex::detail::add_vertex_impl<V>(*this, cs, tile, std::forward<Args>(connections)...);
}

namespace vertex {

/// A vertex of type V on `tile`, checked and estimated as add_vertex does, not yet added to the graph: what
/// make(i) of add_vertices returns. It only reads the graph, so it may be called on several threads at once.
template <class V, class... Args>
core::detail::VertexRecord record(Graph const& g, ComputeSet cs, std::size_t tile, Args&&... connections) {
  detail::check_vertex<V, Args...>();
  if constexpr (detail::check_connections<V, std::remove_cvref_t<Args>...>() == detail::Connection::ok)
    return detail::make_record<V>(g, cs, tile, std::forward<Args>(connections)...);
  else
    return {};
}

/// Adds `count` vertices, vertex i the record make(i) returns (vertex::record), making the records on the graph's
/// build threads (Graph::set_build_threads) in blocks of consecutive i while this thread waits. make must only
/// read the graph (views of tensors, fetch(), record()). The vertices are added in order of i, and an error is
/// the one of the lowest i that throws, so the graph and its errors are the same for any number of threads.
template <class F>
void add_vertices(Graph& g, std::size_t count, F&& make) {
  using Make = std::remove_reference_t<F>;
  detail::add_records(
      g, count, [](void* f, std::size_t i) -> core::detail::VertexRecord { return (*static_cast<Make*>(f))(i); },
      const_cast<void*>(static_cast<void const*>(std::addressof(make))));
}

}  // namespace vertex

}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/core.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/vertex/add_vertex_impl.hpp>
#endif
