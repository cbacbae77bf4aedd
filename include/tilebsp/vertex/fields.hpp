// Vertex field kinds: input<T>, output<T>, inout<T>, input_list<T>, the strided views input_view<T, R>,
// output_view<T, R> and inout_view<T, R>, and param<T>; fetch(t) connects an input to data on other tiles.
#pragma once

#include <tilebsp/core/types.hpp>
#include <tilebsp/core/vertex_record.hpp>

#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

namespace tilebsp {

namespace vertex::detail {
using core::detail::FieldBinding;
using core::detail::FieldKind;
using core::detail::max_view_rank;
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

/// A rank-R strided view of tile data (a block of a matrix, a transposed operand): element (i0, ..., iR-1) at
/// data()[i0 * stride(0) + ... + iR-1 * stride(R-1)]. Views of one variable bind in place; any other view is
/// gathered into (and, when written, scattered from) a contiguous buffer around compute().
template <class T, class Ptr, FieldKind K, std::size_t R>
class view_field {
  static_assert(R >= 1 && R <= max_view_rank, "view fields have rank 1, 2 or 3");

 public:
  using value_type = T;
  static constexpr FieldKind kind = K;
  static constexpr std::size_t rank = R;

  std::size_t dim(std::size_t d) const noexcept { return shape_[d]; }
  std::ptrdiff_t stride(std::size_t d) const noexcept { return stride_[d]; }
  std::size_t size() const noexcept {
    std::size_t n = 1;
    for (std::size_t d = 0; d < R; ++d) n *= shape_[d];
    return n;
  }
  bool empty() const noexcept { return size() == 0; }
  Ptr data() const noexcept { return data_; }
  template <class... I>
    requires(sizeof...(I) == R && (std::is_integral_v<I> && ...))
  decltype(auto) operator()(I... i) const noexcept {
    std::ptrdiff_t off = 0;
    std::size_t d = 0;
    ((off += static_cast<std::ptrdiff_t>(i) * stride_[d++]), ...);
    return data_[off];
  }

  /// Internal: points the field at host memory.
  void bind(FieldBinding b) noexcept {
    data_ = static_cast<Ptr>(b.data);
    for (std::size_t d = 0; d < R; ++d) {
      shape_[d] = b.shape[d];
      stride_[d] = b.stride[d];
    }
  }

 private:
  Ptr data_ = nullptr;
  std::size_t shape_[R] = {};
  std::ptrdiff_t stride_[R] = {};
};
}  // namespace vertex::detail

/// Elements the vertex reads.
template <ElementLike T>
class input : public vertex::detail::span_field<T, T const*, core::detail::FieldKind::input> {};
/// Elements the vertex writes (their previous values are unspecified to it).
template <ElementLike T>
class output : public vertex::detail::span_field<T, T*, core::detail::FieldKind::output> {};
/// Elements the vertex reads and writes.
template <ElementLike T>
class inout : public vertex::detail::span_field<T, T*, core::detail::FieldKind::inout> {};

/// A rank-R strided view the vertex reads (R = 2: a matrix block, possibly transposed).
template <ElementLike T, std::size_t R = 2>
class input_view : public vertex::detail::view_field<T, T const*, core::detail::FieldKind::input, R> {};
/// A rank-R strided view the vertex writes.
template <ElementLike T, std::size_t R = 2>
class output_view : public vertex::detail::view_field<T, T*, core::detail::FieldKind::output, R> {};
/// A rank-R strided view the vertex reads and writes.
template <ElementLike T, std::size_t R = 2>
class inout_view : public vertex::detail::view_field<T, T*, core::detail::FieldKind::inout, R> {};

/// Elements of whatever type the connected tensor holds, seen as raw memory (data() points at element 0; sizes,
/// shapes and strides count elements): for vertices that take their operands' types as data rather than as template
/// arguments, as ops::map's interpreter does. The graph records each connection's element type, and exchanges,
/// gathers and the memory report use it as for typed fields; the vertex must read the memory as that type.
class input_any : public vertex::detail::span_field<std::byte, std::byte const*, core::detail::FieldKind::input> {};
class output_any : public vertex::detail::span_field<std::byte, std::byte*, core::detail::FieldKind::output> {};
template <std::size_t R = 2>
class input_view_any : public vertex::detail::view_field<std::byte, std::byte const*, core::detail::FieldKind::input, R> {};
template <std::size_t R = 2>
class output_view_any : public vertex::detail::view_field<std::byte, std::byte*, core::detail::FieldKind::output, R> {};

/// A connection for an input field to data that may live on other tiles: compile() models the exchange that
/// brings it to the vertex's tile before the compute set (cycles, and the received bytes as temporary memory of
/// that tile), while on the host the vertex reads the data where it is. Correct because no vertex of the same
/// compute set may write what another reads.
struct Fetch {
  Tensor tensor;
};
/// Connects an input field to `t` wherever it is mapped (see Fetch).
inline Fetch fetch(Tensor t) { return Fetch{std::move(t)}; }

/// A list of read-only element spans, each connected to its own tensor.
template <ElementLike T>
class input_list {
 public:
  using value_type = T;
  static constexpr core::detail::FieldKind kind = core::detail::FieldKind::input_list;

  class iterator {
   public:
    using value_type = std::span<T const>;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    explicit iterator(core::detail::FieldBinding const* p) : p_(p) {}
    value_type operator*() const noexcept { return {static_cast<T const*>(p_->data), p_->size}; }
    iterator& operator++() noexcept { return ++p_, *this; }
    iterator operator++(int) noexcept { return iterator(p_++); }
    friend bool operator==(iterator, iterator) = default;

   private:
    core::detail::FieldBinding const* p_ = nullptr;
  };

  std::size_t size() const noexcept { return size_; }
  std::span<T const> operator[](std::size_t i) const noexcept {
    return {static_cast<T const*>(items_[i].data), items_[i].size};
  }
  iterator begin() const noexcept { return iterator(items_); }
  iterator end() const noexcept { return iterator(items_ + size_); }

  void bind(core::detail::FieldBinding b) noexcept {
    items_ = static_cast<core::detail::FieldBinding const*>(b.data);
    size_ = b.size;
  }

 private:
  core::detail::FieldBinding const* items_ = nullptr;
  std::size_t size_ = 0;
};

/// A value fixed when the vertex is added (a scalar, a small struct): vertex state, not tensor data.
template <class T>
class param {
 public:
  using value_type = T;
  static constexpr core::detail::FieldKind kind = core::detail::FieldKind::param;

  param() = default;
  param(T v) : value_(std::move(v)) {}  // NOLINT: implicit by design
  operator T const&() const noexcept { return value_; }
  T const& get() const noexcept { return value_; }
  T const* operator->() const noexcept { return &value_; }
  void bind(core::detail::FieldBinding) noexcept {}

 private:
  T value_{};
};

namespace vertex::detail {
template <class F> inline constexpr bool is_field_v = false;
template <class T> inline constexpr bool is_field_v<input<T>> = true;
template <class T> inline constexpr bool is_field_v<output<T>> = true;
template <class T> inline constexpr bool is_field_v<inout<T>> = true;
template <class T> inline constexpr bool is_field_v<input_list<T>> = true;
template <class T> inline constexpr bool is_field_v<param<T>> = true;
template <class T, std::size_t R> inline constexpr bool is_field_v<input_view<T, R>> = true;
template <class T, std::size_t R> inline constexpr bool is_field_v<output_view<T, R>> = true;
template <class T, std::size_t R> inline constexpr bool is_field_v<inout_view<T, R>> = true;
template <> inline constexpr bool is_field_v<input_any> = true;
template <> inline constexpr bool is_field_v<output_any> = true;
template <std::size_t R> inline constexpr bool is_field_v<input_view_any<R>> = true;
template <std::size_t R> inline constexpr bool is_field_v<output_view_any<R>> = true;
template <class F> inline constexpr bool is_tensor_field_v = false;
template <> inline constexpr bool is_tensor_field_v<input_any> = true;
template <> inline constexpr bool is_tensor_field_v<output_any> = true;
template <std::size_t R> inline constexpr bool is_tensor_field_v<input_view_any<R>> = true;
template <std::size_t R> inline constexpr bool is_tensor_field_v<output_view_any<R>> = true;
/// Fields whose element type is the connected tensor's (input_any and friends).
template <class F> inline constexpr bool is_any_field_v = false;
template <> inline constexpr bool is_any_field_v<input_any> = true;
template <> inline constexpr bool is_any_field_v<output_any> = true;
template <std::size_t R> inline constexpr bool is_any_field_v<input_view_any<R>> = true;
template <std::size_t R> inline constexpr bool is_any_field_v<output_view_any<R>> = true;
template <class T> inline constexpr bool is_tensor_field_v<input<T>> = true;
template <class T> inline constexpr bool is_tensor_field_v<output<T>> = true;
template <class T> inline constexpr bool is_tensor_field_v<inout<T>> = true;
template <class T, std::size_t R> inline constexpr bool is_tensor_field_v<input_view<T, R>> = true;
template <class T, std::size_t R> inline constexpr bool is_tensor_field_v<output_view<T, R>> = true;
template <class T, std::size_t R> inline constexpr bool is_tensor_field_v<inout_view<T, R>> = true;
/// Rank of a view field type, 0 for every other field.
template <class F> inline constexpr std::size_t view_rank_v = 0;
template <class T, std::size_t R> inline constexpr std::size_t view_rank_v<input_view<T, R>> = R;
template <class T, std::size_t R> inline constexpr std::size_t view_rank_v<output_view<T, R>> = R;
template <class T, std::size_t R> inline constexpr std::size_t view_rank_v<inout_view<T, R>> = R;
template <std::size_t R> inline constexpr std::size_t view_rank_v<input_view_any<R>> = R;
template <std::size_t R> inline constexpr std::size_t view_rank_v<output_view_any<R>> = R;
template <class F> inline constexpr bool is_list_field_v = false;
template <class T> inline constexpr bool is_list_field_v<input_list<T>> = true;
template <class F> inline constexpr bool is_param_field_v = false;
template <class T> inline constexpr bool is_param_field_v<param<T>> = true;
}  // namespace vertex::detail

}  // namespace tilebsp
