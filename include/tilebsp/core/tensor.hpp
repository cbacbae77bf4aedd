// Tensor: a typed, shaped view of graph variables. Views (slice, transpose, broadcast, concat...) never copy data.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/detail/hash.hpp>
#include <tilebsp/core/detail/small_vector.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/core/shape.hpp>
#include <tilebsp/core/types.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace tilebsp {

namespace core::detail {

/// `count` elements of variable `var`: start, start + stride, ... (stride may be 0 or negative).
struct Run {
  std::uint32_t var = 0;
  std::int64_t start = 0;
  std::int64_t stride = 1;
  std::int64_t count = 0;
};

/// `rows` rows of `len` consecutive elements of variable `var`, the first at `start`, each `step` > len after the
/// one before: a block of an operator's result split across tiles by channels (a row per position).
struct RowSeries {
  std::uint32_t var = 0;
  std::int64_t start = 0, len = 0, step = 0, rows = 0;
};

/// Element (i0, i1, ...) of a view at var[start + i0 * strides[0] + i1 * strides[1] + ...].
struct Affine {
  std::uint32_t var = 0;
  std::int64_t start = 0;
  std::vector<std::int64_t> strides;
};

/// The runs of variable elements a tensor views, immutable and shared: tensors are strided views over one.
struct ElementRuns {
  std::vector<Run> runs;
  std::vector<std::int64_t> first;  ///< sequence position of each run's first element
  std::int64_t size = 0;
  /// Of a long sequence (more than 8 runs: Hasher::tensor hashes shorter ones in place), the hash of its runs,
  /// taken once here rather than by every tensor that views it.
  std::uint64_t hash[2] = {0, 0};

  explicit ElementRuns(std::vector<Run> r) : runs(std::move(r)) {
    first.reserve(runs.size());
    Hasher h;
    for (auto const& run : runs) {
      first.push_back(size);
      size += run.count;
      if (runs.size() > 8) h.run(run.var, run.start, run.stride, run.count);
    }
    if (runs.size() > 8) hash[0] = h.first(), hash[1] = h.second();
  }
  /// Index of the run holding position p (0 <= p < size); `hint`, then the run after it, is tried first (a walk
  /// in order, such as a flattened broadcast's rows, finds each run without a search).
  std::size_t locate(std::int64_t p, std::size_t hint) const noexcept {
    if (hint < runs.size() && p >= first[hint]) {
      if (p < first[hint] + runs[hint].count) return hint;
      if (hint + 1 < runs.size() && p < first[hint + 1] + runs[hint + 1].count) return hint + 1;
    }
    auto it = std::upper_bound(first.begin(), first.end(), p);
    return static_cast<std::size_t>(it - first.begin()) - 1;
  }
};

/// Coalesces emitted element runs into maximal strided runs before handing them to a callback.
template <class F>
class RunMerger {
 public:
  explicit RunMerger(F& f) : f_(f) {}
  void add(std::uint32_t var, std::int64_t start, std::int64_t stride, std::int64_t count) {
    if (count == 0) return;
    if (have_ && var == p_.var) {
      if (p_.count == 1 && (count == 1 || stride == start - p_.start)) {
        p_.stride = start - p_.start;
        p_.count += count;
        return;
      }
      if (p_.count > 1 && start == p_.start + p_.stride * p_.count && (count == 1 || stride == p_.stride)) {
        p_.count += count;
        return;
      }
    }
    flush();
    p_ = Run{var, start, count == 1 ? 1 : stride, count};
    have_ = true;
  }
  void flush() {
    if (have_) f_(p_.var, p_.start, p_.stride, p_.count);
    have_ = false;
  }

 private:
  F& f_;
  Run p_{};
  bool have_ = false;
};

}  // namespace core::detail

/// A view of elements of one graph's variables, with an element type and a row-major shape.
/// Copying a Tensor copies the view, not the data. All view operations are O(rank) except reshape of a
/// non-contiguous view and concat, which build a new element list (still no data copy).
class Tensor {
 public:
  Tensor() = default;

  /// Internal: a whole variable. Use Graph::add_variable.
  Tensor(std::uint32_t graph, std::uint32_t var, ElementType type, Shape shape);

  bool valid() const noexcept { return seq_ != nullptr; }
  ElementType element_type() const noexcept { return type_; }
  /// The extents (a copy: a tensor keeps up to 4 of them in place).
  Shape shape() const { return Shape(shape_.begin(), shape_.end()); }
  std::size_t rank() const noexcept { return shape_.size(); }
  std::size_t dim(std::size_t d) const {
    if (d >= shape_.size()) [[unlikely]] check_dim("dim", d);
    return shape_[d];
  }
  std::size_t num_elements() const noexcept {
    std::size_t n = 1;
    for (auto d : shape_) n *= d;
    return n;
  }
  std::uint32_t graph_id() const noexcept { return graph_; }
  /// Internal: the view's description — the sequence of variable elements it reads, its offset there and its
  /// element strides per dimension — which determines its runs. Cheaper to hash than the runs (executable cache).
  core::detail::ElementRuns const* element_runs() const noexcept { return seq_.get(); }
  std::int64_t offset() const noexcept { return offset_; }
  std::span<std::int64_t const> strides() const noexcept { return {strides_.data(), strides_.size()}; }

  // The views below copy this tensor, or reuse it when it is a temporary (a chain of views: one copy in all).

  /// Elements [begin, end) of dimension `dim`.
  Tensor slice(std::size_t begin, std::size_t end, std::size_t dim = 0) const& { return Tensor(*this).slice_self(begin, end, dim); }
  Tensor slice(std::size_t begin, std::size_t end, std::size_t dim = 0) && { return std::move(slice_self(begin, end, dim)); }
  Tensor slice(Interval r, std::size_t dim = 0) const& { return slice(r.begin, r.end, dim); }
  Tensor slice(Interval r, std::size_t dim = 0) && { return std::move(*this).slice(r.begin, r.end, dim); }
  /// Per-dimension ranges [begins[d], ends[d]).
  Tensor slice(Shape const& begins, Shape const& ends) const& { return Tensor(*this).slice_self(begins, ends); }
  Tensor slice(Shape const& begins, Shape const& ends) && { return std::move(slice_self(begins, ends)); }
  /// Element i of dimension 0, with that dimension removed.
  Tensor index(std::size_t i) const& { return Tensor(*this).index_self(i); }
  Tensor index(std::size_t i) && { return std::move(index_self(i)); }
  Tensor operator[](std::size_t i) const& { return index(i); }
  Tensor operator[](std::size_t i) && { return std::move(*this).index(i); }

  /// Same elements in row-major order, new shape with the same number of elements.
  Tensor reshape(Shape shape) const& { return Tensor(*this).reshape_self(std::move(shape)); }
  Tensor reshape(Shape shape) && { return std::move(reshape_self(std::move(shape))); }
  Tensor flatten() const& { return reshape({num_elements()}); }
  Tensor flatten() && { return std::move(*this).reshape({num_elements()}); }
  /// Swaps the two dimensions of a matrix.
  Tensor transpose() const;
  /// Dimension d of the result is dimension perm[d] of this tensor.
  Tensor dimshuffle(std::vector<std::size_t> const& perm) const;
  /// NumPy-style broadcast to `shape`: dimensions are matched from the right; size-1 dimensions repeat.
  Tensor broadcast(Shape const& shape) const;
  /// Inserts a dimension of size 1 before dimension `dim` (dim == rank appends).
  Tensor expand(std::size_t dim) const;
  /// Removes every dimension of size 1.
  Tensor squeeze() const;
  /// Reverses the order of elements along `dim`.
  Tensor reverse(std::size_t dim) const;

  /// Calls f(var, start, stride, count) for maximal strided runs of variable elements, in row-major order.
  template <class F>
  void for_each_run(F&& f) const {
    if (!valid() || num_elements() == 0) return;
    // (size, stride) of the dimensions, coalesced, and the index over the outer ones: in place up to rank 8, so
    // that walking a tensor allocates nothing (compile walks every field of every vertex).
    constexpr std::size_t in_place = 8;
    std::pair<std::int64_t, std::int64_t> dims_in_place[in_place];
    std::int64_t idx_in_place[in_place];
    std::vector<std::pair<std::int64_t, std::int64_t>> dims_heap;
    std::vector<std::int64_t> idx_heap;
    auto* dims = dims_in_place;
    auto* idx = idx_in_place;
    if (rank() > in_place) {
      dims_heap.resize(rank());
      idx_heap.resize(rank());
      dims = dims_heap.data();
      idx = idx_heap.data();
    }
    std::size_t const nd = coalesced(dims);
    core::detail::RunMerger<F> merger(f);
    std::size_t hint = 0;
    std::size_t const outer = nd - 1;
    std::fill(idx, idx + outer, std::int64_t{0});
    auto const [inner_n, inner_s] = dims[outer];
    // A view of one run (of one variable, as most are): positions map to elements without a search.
    core::detail::Run const* const single = seq_->runs.size() == 1 ? seq_->runs.data() : nullptr;
    for (;;) {
      std::int64_t p = offset_;
      for (std::size_t d = 0; d < outer; ++d) p += idx[d] * dims[d].second;
      if (single) merger.add(single->var, single->start + p * single->stride, inner_s * single->stride, inner_n);
      else emit(merger, p, inner_s, inner_n, hint);
      std::size_t d = outer;
      while (d > 0 && ++idx[d - 1] == dims[d - 1].first) idx[--d] = 0;
      if (d == 0) break;
    }
    merger.flush();
  }

  /// Calls f(var, start, count, stride, rows, step) for the view's elements as series of strided runs: `rows` runs
  /// of `count` elements `stride` apart, each run `step` after the one before (rows 1, step 0: a run alone), in
  /// row-major order. A block of an operator's result, a run of channels per position, is one call rather than one
  /// per position (Graph::set_tile_mapping maps it as one series).
  template <class F>
  void for_each_run_series(F&& f) const {
    if (!valid() || num_elements() == 0) return;
    constexpr std::size_t in_place = 8;
    core::detail::Run const* const single = seq_->runs.size() == 1 ? seq_->runs.data() : nullptr;
    if (single == nullptr || rank() > in_place) {  // runs one by one
      for_each_run([&](std::uint32_t var, std::int64_t start, std::int64_t stride, std::int64_t count) {
        f(var, start, count, stride, std::int64_t{1}, std::int64_t{0});
      });
      return;
    }
    std::pair<std::int64_t, std::int64_t> dims[in_place];
    std::int64_t idx[in_place] = {};
    std::size_t const nd = coalesced(dims);
    std::int64_t const s = single->stride;
    auto const [count, stride] = dims[nd - 1];
    auto const [rows, step] = nd >= 2 ? dims[nd - 2] : std::pair<std::int64_t, std::int64_t>{1, 0};
    std::size_t const outer = nd >= 2 ? nd - 2 : 0;
    for (;;) {
      std::int64_t p = offset_;
      for (std::size_t d = 0; d < outer; ++d) p += idx[d] * dims[d].second;
      f(single->var, single->start + p * s, count, stride * s, rows, step * s);
      std::size_t d = outer;
      while (d > 0 && ++idx[d - 1] == dims[d - 1].first) idx[--d] = 0;
      if (d == 0) break;
    }
  }

  /// Internal: whether the view's elements are a RowSeries of one variable (and which), without walking them:
  /// planning takes such a field as one series rather than a run per row.
  bool row_series(core::detail::RowSeries& out) const noexcept {
    if (!valid() || seq_->runs.size() != 1 || seq_->runs[0].stride != 1) return false;
    std::int64_t n[2] = {0, 0}, st[2] = {0, 0};  // the coalesced (size, stride) of the dimensions, as for_each_run
    std::size_t nd = 0;
    for (std::size_t d = 0; d < rank(); ++d) {
      if (shape_[d] == 1) continue;
      auto const size = static_cast<std::int64_t>(shape_[d]);
      if (nd > 0 && st[nd - 1] == strides_[d] * size) {
        n[nd - 1] *= size;
        st[nd - 1] = strides_[d];
      } else {
        if (nd == 2) return false;
        n[nd] = size, st[nd] = strides_[d];
        ++nd;
      }
    }
    if (nd != 2 || st[1] != 1 || st[0] <= n[1]) return false;
    out = {seq_->runs[0].var, seq_->runs[0].start + offset_, n[1], st[0], n[0]};
    return true;
  }

  /// Internal: the view's elements as RowSeries of one variable, one for each index of the (coalesced) dimensions
  /// outside the last two, f(series) called for each in row-major order without walking the elements: a block of
  /// weights (taps x input channels x output channels) is a series per tap, a block of partial sums one per part.
  /// False, calling nothing, where the view is not such (several runs, a stride that is not positive, rows that
  /// touch or overlap). A view that row_series takes is one series.
  template <class F>
  bool for_each_row_series(F&& f) const {
    constexpr std::size_t in_place = 8;
    if (!valid() || seq_->runs.size() != 1 || seq_->runs[0].stride != 1 || rank() > in_place) return false;
    std::pair<std::int64_t, std::int64_t> dims[in_place];
    std::size_t const nd = coalesced(dims);
    if (nd < 2 || dims[nd - 1].second != 1 || dims[nd - 2].second <= dims[nd - 1].first) return false;
    std::size_t const outer = nd - 2;
    for (std::size_t d = 0; d < outer; ++d)
      if (dims[d].second <= 0) return false;
    std::int64_t idx[in_place] = {};
    std::int64_t const base = seq_->runs[0].start + offset_;
    for (;;) {
      std::int64_t p = base;
      for (std::size_t d = 0; d < outer; ++d) p += idx[d] * dims[d].second;
      f(core::detail::RowSeries{seq_->runs[0].var, p, dims[nd - 1].first, dims[nd - 2].second, dims[nd - 2].first});
      std::size_t d = outer;
      while (d > 0 && ++idx[d - 1] == dims[d - 1].first) idx[--d] = 0;
      if (d == 0) break;
    }
    return true;
  }

  /// All element runs, in row-major order.
  std::vector<core::detail::Run> runs() const;

  /// The view as one variable's elements at affine positions, when it is one (every view of a single
  /// variable made with slice, index, transpose, dimshuffle, broadcast, expand, squeeze or reverse is).
  std::optional<core::detail::Affine> affine() const;

  friend Tensor concat(std::vector<Tensor> const& ts, std::size_t dim);

 private:
  using Dims = core::detail::SmallVector<std::size_t, 4>;
  using Strides = core::detail::SmallVector<std::int64_t, 4>;
  static Strides contiguous_strides(Dims const& s);
  /// The (size, stride) of the dimensions into dims (room for rank() of them), neighbours merged where one steps
  /// over the other whole and dimensions of size 1 left out (one {1, 1} when none is left); returns how many.
  std::size_t coalesced(std::pair<std::int64_t, std::int64_t>* dims) const noexcept {
    std::size_t nd = 0;
    for (std::size_t d = 0; d < rank(); ++d) {
      if (shape_[d] == 1) continue;
      auto const size = static_cast<std::int64_t>(shape_[d]);
      if (nd > 0 && dims[nd - 1].second == strides_[d] * size) {
        dims[nd - 1] = {dims[nd - 1].first * size, strides_[d]};
      } else {
        dims[nd++] = {size, strides_[d]};
      }
    }
    if (nd == 0) dims[nd++] = {1, 1};
    return nd;
  }
  void check_dim(char const* op, std::size_t d) const;
  // The views above, made of this tensor in place.
  Tensor& slice_self(std::size_t begin, std::size_t end, std::size_t dim);
  Tensor& slice_self(Shape const& begins, Shape const& ends);
  Tensor& index_self(std::size_t i);
  Tensor& reshape_self(Shape shape);
  /// Reshapes a strided view in place without a new element list where its strides allow (the dimensions merged
  /// step over one another whole, as NumPy reshapes without a copy); false (unchanged) otherwise.
  bool reshape_strides(Shape const& shape);
  /// True when the view's positions form one ascending unit-stride range of the sequence.
  bool is_contiguous() const;
  /// The same elements as a fresh contiguous sequence (a new element list, not new data).
  Tensor materialised() const;
  template <class M>
  void emit(M& merger, std::int64_t p, std::int64_t s, std::int64_t n, std::size_t& hint) const {
    auto const& seq = *seq_;
    while (n > 0) {
      std::size_t const r = hint = seq.locate(p, hint);
      auto const& run = seq.runs[r];
      std::int64_t const lo = seq.first[r], hi = lo + run.count;  // positions [lo, hi)
      std::int64_t m = n;
      if (s == 1) m = std::min(n, hi - p);  // no division for the common unit stride
      else if (s > 0) m = std::min(n, (hi - 1 - p) / s + 1);
      else if (s < 0) m = std::min(n, (p - lo) / (-s) + 1);
      merger.add(run.var, run.start + (p - lo) * run.stride, s * run.stride, m);
      p += m * s;
      n -= m;
    }
  }
  static std::string to_string(std::vector<std::size_t> const& v) { return tilebsp::to_string(v); }
  static std::string to_string(Dims const& v) { return tilebsp::to_string(Shape(v.begin(), v.end())); }

  std::shared_ptr<core::detail::ElementRuns const> seq_;
  std::uint32_t graph_ = 0;
  ElementType type_ = ElementType::f32;
  Dims shape_;
  Strides strides_;
  std::int64_t offset_ = 0;
};



/// Joins tensors along `dim`; all other dimensions, the element type and the graph must agree.
TILEBSP_INLINE Tensor concat(std::vector<Tensor> const& ts, std::size_t dim = 0);

}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/core.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/core/tensor_impl.hpp>
#endif
