// Compile-time reflection of vertex types with Boost.Hana: field types, names, and the VertexOps table.
#pragma once

#include <tilebsp/core/vertex_record.hpp>
#include <tilebsp/vertex/fields.hpp>

#include <boost/hana/accessors.hpp>
#include <boost/hana/at.hpp>
#include <boost/hana/first.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/second.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/concept/struct.hpp>
#include <boost/hana/define_struct.hpp>

#include <concepts>
#include <cstdint>
#include <new>
#include <string_view>
#include <type_traits>
#include <utility>

namespace tilebsp {

namespace vertex::detail {
using core::detail::FieldBinding;
using core::detail::VertexOps;

/// The spelled name of T, from the compiler (for error messages and profiles).
template <class T>
constexpr std::string_view type_name() noexcept {
  std::string_view s = __PRETTY_FUNCTION__;
  auto const b = s.find("T = ") + 4;
  auto const e = s.find_first_of(";]", b);
  return s.substr(b, e - b);
}

template <class V>
constexpr std::size_t num_fields() {
  return decltype(boost::hana::length(boost::hana::accessors<V>()))::value;
}
template <class V, std::size_t I>
decltype(auto) field(V& v) {
  return boost::hana::second(boost::hana::at_c<I>(boost::hana::accessors<V>()))(v);
}
template <class V, std::size_t I>
using field_t = std::remove_cvref_t<decltype(field<V, I>(std::declval<V&>()))>;
template <class V, std::size_t I>
constexpr std::string_view field_name() {
  constexpr auto key = boost::hana::first(boost::hana::at_c<I>(boost::hana::accessors<V>()));
  return boost::hana::to<char const*>(key);
}

template <class V>
concept has_cycle_estimate = requires(V const& v) {
  { v.cycle_estimate() } -> std::convertible_to<std::uint64_t>;
};

template <class V>
concept has_supervisor_flag = requires { { V::supervisor } -> std::convertible_to<bool>; };

template <class V, std::size_t... I>
void bind_fields(V& v, FieldBinding const* b, std::index_sequence<I...>) {
  (field<V, I>(v).bind(b[I]), ...);
}

template <class V>
VertexOps const* vertex_ops() {
  static VertexOps const ops = [] {
    VertexOps o;
    o.name = type_name<V>();
    core::detail::Hasher n;
    n.text(o.name);
    o.name_hash = n.first();
    o.size = sizeof(V);
    o.align = alignof(V);
    o.num_fields = num_fields<V>();
    o.copy_construct = [](void* dst, void const* src) { ::new (dst) V(*static_cast<V const*>(src)); };
    o.destroy = [](void* v) { static_cast<V*>(v)->~V(); };
    o.bind = [](void* v, FieldBinding const* b) {
      bind_fields(*static_cast<V*>(v), b, std::make_index_sequence<num_fields<V>()>{});
    };
    o.compute = [](void* first, std::size_t count) {
      V* v = static_cast<V*>(first);
      for (std::size_t i = 0; i < count; ++i) v[i].compute();
    };
    if constexpr (has_supervisor_flag<V>) o.supervisor = V::supervisor;
    if constexpr (has_cycle_estimate<V>)
      o.cycles = [](void const* v) { return static_cast<std::uint64_t>(static_cast<V const*>(v)->cycle_estimate()); };
    return o;
  }();
  return &ops;
}

}  // namespace vertex::detail

/// A vertex (codelet): a copyable struct declared with BOOST_HANA_DEFINE_STRUCT whose reflected members are
/// tilebsp fields, with a member `compute()`. An optional `cycle_estimate() const` feeds the cost model; a
/// `static constexpr bool supervisor = true` marks a vertex that drives all of its tile's workers (as Poplar's
/// supervisor vertices do), whose estimate is then in tile cycles.
template <class V>
concept VertexLike = boost::hana::Struct<V>::value && std::is_default_constructible_v<V> &&
                     std::is_copy_constructible_v<V> && requires(V& v) { v.compute(); };

}  // namespace tilebsp
