// SmallVector: a vector of trivially copyable values kept inside the object up to N of them (a tensor's shape and
// strides: a graph holds millions of tensors, and a heap block per dimension list cost an allocation per copy and a
// cache miss per read).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <type_traits>

namespace tilebsp::core::detail {

template <class T, std::size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T> && N > 0);

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = T const*;

  SmallVector() noexcept {}
  SmallVector(std::initializer_list<T> l) { assign(l.begin(), l.end()); }
  template <std::input_iterator It>
  SmallVector(It b, It e) {
    assign(b, e);
  }
  SmallVector(SmallVector const& o) {
    if (o.size_ <= N) {  // the common case: a copy of the whole in-place array (a tensor is copied per slice)
      std::memcpy(in_, o.data(), sizeof(in_));  // bytes past size_ too: a fixed-size copy, no loop
      size_ = o.size_;
    } else {
      assign(o.begin(), o.end());
    }
  }
  SmallVector(SmallVector&& o) noexcept { take(o); }
  SmallVector& operator=(SmallVector const& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  ~SmallVector() { release(); }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::size_t capacity() const noexcept { return cap_; }
  T* data() noexcept {
    if (cap_ <= N && size_ > N) __builtin_unreachable();  // in place, at most N: tells the optimiser so
    return cap_ > N ? heap_ : in_;
  }
  T const* data() const noexcept {
    if (cap_ <= N && size_ > N) __builtin_unreachable();
    return cap_ > N ? heap_ : in_;
  }
  T* begin() noexcept { return data(); }
  T* end() noexcept { return data() + size_; }
  T const* begin() const noexcept { return data(); }
  T const* end() const noexcept { return data() + size_; }
  T& operator[](std::size_t i) noexcept { return data()[i]; }
  T const& operator[](std::size_t i) const noexcept { return data()[i]; }
  T& back() noexcept { return data()[size_ - 1]; }

  void reserve(std::size_t n) {
    if (n <= cap_) return;
    T* p = new T[n];
    std::copy(begin(), end(), p);
    release();
    heap_ = p;
    cap_ = static_cast<std::uint32_t>(n);
  }
  template <std::input_iterator It>
  void assign(It b, It e) {
    size_ = 0;
    if constexpr (std::forward_iterator<It>) reserve(static_cast<std::size_t>(std::distance(b, e)));
    for (; b != e; ++b) push_back(static_cast<T>(*b));
  }
  void assign(std::size_t n, T v) {
    size_ = 0;
    reserve(n);
    std::fill_n(data(), n, v);
    size_ = static_cast<std::uint32_t>(n);
  }
  void push_back(T v) {
    if (size_ == cap_) reserve(2 * std::size_t{cap_});
    data()[size_++] = v;
  }
  /// Inserts v before position `at` (an index: iterators move when the storage grows).
  void insert_at(std::size_t at, T v) {
    push_back(v);
    T* d = data();
    for (std::size_t i = size_ - 1; i > at; --i) d[i] = d[i - 1];
    d[at] = v;
  }
  void erase_at(std::size_t at) noexcept {
    T* d = data();
    for (std::size_t i = at; i + 1 < size_; ++i) d[i] = d[i + 1];
    --size_;
  }
  void clear() noexcept { size_ = 0; }

  friend bool operator==(SmallVector const& a, SmallVector const& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  void release() noexcept {
    if (cap_ > N) delete[] heap_;
    cap_ = N;
  }
  void take(SmallVector& o) noexcept {
    size_ = o.size_;
    cap_ = o.cap_;
    if (o.cap_ > N) heap_ = o.heap_;
    else std::copy(o.in_, o.in_ + o.size_, in_);
    o.cap_ = N;
    o.size_ = 0;
  }

  union {
    T in_[N];
    T* heap_;
  };
  std::uint32_t size_ = 0, cap_ = N;
};

}  // namespace tilebsp::core::detail
