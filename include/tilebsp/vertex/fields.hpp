// Vertex field kinds: input<T>, output<T>, inout<T>, input_list<T> and param<T>.
#pragma once

#include <tilebsp/core/types.hpp>
#include <tilebsp/core/vertex_record.hpp>

#include <cstddef>
#include <span>

namespace tilebsp {

namespace detail {
/// Contiguous tile-local elements seen by a vertex; Ptr is T const* for inputs, T* for outputs.
template <class T, class Ptr, FieldKind K>
class span_field {
 public:
  using value_type = T;
  static constexpr FieldKind kind = K;

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  Ptr data() const noexcept { return data_; }
  Ptr begin() const noexcept { return data_; }
  Ptr end() const noexcept { return data_ + size_; }
  decltype(auto) operator[](std::size_t i) const noexcept { return data_[i]; }

  /// Internal: points the field at host memory.
  void bind(FieldBinding b) noexcept {
    data_ = static_cast<Ptr>(b.data);
    size_ = b.size;
  }

 private:
  Ptr data_ = nullptr;
  std::size_t size_ = 0;
};
}  // namespace detail

/// Elements the vertex reads.
template <ElementLike T>
class input : public detail::span_field<T, T const*, detail::FieldKind::input> {};
/// Elements the vertex writes (their previous values are unspecified to it).
template <ElementLike T>
class output : public detail::span_field<T, T*, detail::FieldKind::output> {};
/// Elements the vertex reads and writes.
template <ElementLike T>
class inout : public detail::span_field<T, T*, detail::FieldKind::inout> {};

/// A list of read-only element spans, each connected to its own tensor.
template <ElementLike T>
class input_list {
 public:
  using value_type = T;
  static constexpr detail::FieldKind kind = detail::FieldKind::input_list;

  class iterator {
   public:
    using value_type = std::span<T const>;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    explicit iterator(detail::FieldBinding const* p) : p_(p) {}
    value_type operator*() const noexcept { return {static_cast<T const*>(p_->data), p_->size}; }
    iterator& operator++() noexcept { return ++p_, *this; }
    iterator operator++(int) noexcept { return iterator(p_++); }
    friend bool operator==(iterator, iterator) = default;

   private:
    detail::FieldBinding const* p_ = nullptr;
  };

  std::size_t size() const noexcept { return size_; }
  std::span<T const> operator[](std::size_t i) const noexcept {
    return {static_cast<T const*>(items_[i].data), items_[i].size};
  }
  iterator begin() const noexcept { return iterator(items_); }
  iterator end() const noexcept { return iterator(items_ + size_); }

  void bind(detail::FieldBinding b) noexcept {
    items_ = static_cast<detail::FieldBinding const*>(b.data);
    size_ = b.size;
  }

 private:
  detail::FieldBinding const* items_ = nullptr;
  std::size_t size_ = 0;
};

/// A value fixed when the vertex is added (a scalar, a small struct): vertex state, not tensor data.
template <class T>
class param {
 public:
  using value_type = T;
  static constexpr detail::FieldKind kind = detail::FieldKind::param;

  param() = default;
  param(T v) : value_(std::move(v)) {}  // NOLINT: implicit by design
  operator T const&() const noexcept { return value_; }
  T const& get() const noexcept { return value_; }
  T const* operator->() const noexcept { return &value_; }
  void bind(detail::FieldBinding) noexcept {}

 private:
  T value_{};
};

namespace detail {
template <class F> inline constexpr bool is_field_v = false;
template <class T> inline constexpr bool is_field_v<input<T>> = true;
template <class T> inline constexpr bool is_field_v<output<T>> = true;
template <class T> inline constexpr bool is_field_v<inout<T>> = true;
template <class T> inline constexpr bool is_field_v<input_list<T>> = true;
template <class T> inline constexpr bool is_field_v<param<T>> = true;
template <class F> inline constexpr bool is_tensor_field_v = false;
template <class T> inline constexpr bool is_tensor_field_v<input<T>> = true;
template <class T> inline constexpr bool is_tensor_field_v<output<T>> = true;
template <class T> inline constexpr bool is_tensor_field_v<inout<T>> = true;
template <class F> inline constexpr bool is_list_field_v = false;
template <class T> inline constexpr bool is_list_field_v<input_list<T>> = true;
template <class F> inline constexpr bool is_param_field_v = false;
template <class T> inline constexpr bool is_param_field_v<param<T>> = true;
}  // namespace detail

}  // namespace tilebsp
