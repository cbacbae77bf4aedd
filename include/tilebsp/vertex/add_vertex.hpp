// Graph::add_vertex<V>: checks connections against V's reflected fields at compile time and records the vertex.
#pragma once

#include <tilebsp/core/graph.hpp>
#include <tilebsp/vertex/reflect.hpp>

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
    tensors.push_back(t);
    ++c.count;
  };
  if constexpr (is_tensor_field_v<F>) {
    c.type = element_type_v<typename F::value_type>;
    c.rank = static_cast<std::uint8_t>(view_rank_v<F>);
    Tensor const* t = nullptr;
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(arg)>, Fetch>) {
      c.fetched = true;
      t = &arg.tensor;
    } else {
      t = &arg;
    }
    check(*t);
    if (c.rank != 0 && t->rank() != c.rank)
      throw shape_error("add_vertex<" + std::string(vertex) + ">: field '" + std::string(name) + "' is a rank-" +
                        std::to_string(c.rank) + " view but is connected to a tensor of shape " + to_string(t->shape()));
  } else if constexpr (is_list_field_v<F>) {
    c.type = element_type_v<typename F::value_type>;
    for (Tensor const& t : std::vector<Tensor>(arg)) check(t);
  } else {
    *proto = F(static_cast<typename F::value_type>(arg));
    c.param_bytes = static_cast<std::uint32_t>(sizeof(typename F::value_type));
  }
}

template <class V, class... A>
void add_vertex_impl(Graph& g, ComputeSet cs, std::size_t tile, A&&... args) {
  auto& impl = g.impl();
  VertexRecord rec;
  rec.ops = vertex_ops<V>();
  std::string_view const vname = rec.ops->name;  // type_name<V>() searched the (long) signature on every call
  if (cs.graph != impl.id)
    throw error("add_vertex<" + std::string(vname) + ">: the compute set belongs to another graph");
  rec.compute_set = cs.id;
  rec.tile = g.global_tile("add_vertex", tile);
  auto proto = std::make_shared<V>();
  rec.fields.resize(sizeof...(A));
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    rec.tensors.reserve((tensors_in<field_t<V, I>>(args) + ... + std::size_t{0}));
    (connect_field(g, vname, field_name<V, I>(), &field<V, I>(*proto), rec.fields[I], rec.tensors,
                   std::forward<A>(args)),
     ...);
  }(std::index_sequence_for<A...>{});
  rec.prototype = std::move(proto);
  if (rec.ops->cycles) rec.cycles = core::detail::vertex_estimate(rec);
  core::detail::hash_vertex(impl.vertex_hash, rec);
  impl.vertices.push_back(std::move(rec));
}

}  // namespace vertex::detail

template <class V, class... Args>
void Graph::add_vertex(ComputeSet cs, std::size_t tile, Args&&... connections) {
  using vertex::detail::Connection;
  constexpr Connection r = vertex::detail::check_connections<V, std::remove_cvref_t<Args>...>();
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
  if constexpr (r == Connection::ok) vertex::detail::add_vertex_impl<V>(*this, cs, tile, std::forward<Args>(connections)...);
}

}  // namespace tilebsp
