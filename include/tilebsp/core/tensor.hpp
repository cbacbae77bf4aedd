// Tensor: a typed, shaped view of graph variables. Views (slice, transpose, broadcast, concat...) never copy data.
#pragma once

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

namespace detail {

/// `count` elements of variable `var`: start, start + stride, ... (stride may be 0 or negative).
struct Run {
  std::uint32_t var = 0;
  std::int64_t start = 0;
  std::int64_t stride = 1;
  std::int64_t count = 0;
};

/// Element (i0, i1, ...) of a view at var[start + i0 * strides[0] + i1 * strides[1] + ...].
struct Affine {
  std::uint32_t var = 0;
  std::int64_t start = 0;
  std::vector<std::int64_t> strides;
};

/// An immutable sequence of variable elements; tensors are strided views over one.
struct Sequence {
  std::vector<Run> runs;
  std::vector<std::int64_t> first;  ///< sequence position of each run's first element
  std::int64_t size = 0;

  explicit Sequence(std::vector<Run> r) : runs(std::move(r)) {
    first.reserve(runs.size());
    for (auto const& run : runs) {
      first.push_back(size);
      size += run.count;
    }
  }
  /// Index of the run holding position p (0 <= p < size); `hint` is tried first.
  std::size_t locate(std::int64_t p, std::size_t hint) const noexcept {
    if (hint < runs.size() && p >= first[hint] && p < first[hint] + runs[hint].count) return hint;
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

}  // namespace detail

/// A view of elements of one graph's variables, with an element type and a row-major shape.
/// Copying a Tensor copies the view, not the data. All view operations are O(rank) except reshape of a
/// non-contiguous view and concat, which build a new element list (still no data copy).
class Tensor {
 public:
  Tensor() = default;

  /// Internal: a whole variable. Use Graph::add_variable.
  Tensor(std::uint32_t graph, std::uint32_t var, ElementType type, Shape shape)
      : graph_(graph), type_(type), shape_(std::move(shape)) {
    auto const n = static_cast<std::int64_t>(product(shape_));
    seq_ = std::make_shared<detail::Sequence const>(std::vector<detail::Run>{{var, 0, 1, n}});
    strides_ = contiguous_strides(shape_);
  }

  bool valid() const noexcept { return seq_ != nullptr; }
  ElementType element_type() const noexcept { return type_; }
  Shape const& shape() const noexcept { return shape_; }
  std::size_t rank() const noexcept { return shape_.size(); }
  std::size_t dim(std::size_t d) const {
    check_dim("dim", d);
    return shape_[d];
  }
  std::size_t num_elements() const noexcept { return product(shape_); }
  std::uint32_t graph_id() const noexcept { return graph_; }

  /// Elements [begin, end) of dimension `dim`.
  Tensor slice(std::size_t begin, std::size_t end, std::size_t dim = 0) const {
    check_dim("slice", dim);
    if (begin > end || end > shape_[dim])
      throw index_error("slice: range [" + std::to_string(begin) + ", " + std::to_string(end) +
                        ") is out of bounds for dimension " + std::to_string(dim) + " of size " +
                        std::to_string(shape_[dim]));
    Tensor r = *this;
    r.offset_ += static_cast<std::int64_t>(begin) * strides_[dim];
    r.shape_[dim] = end - begin;
    return r;
  }
  Tensor slice(Interval r, std::size_t dim = 0) const { return slice(r.begin, r.end, dim); }
  /// Per-dimension ranges [begins[d], ends[d]).
  Tensor slice(Shape const& begins, Shape const& ends) const {
    if (begins.size() != rank() || ends.size() != rank())
      throw shape_error("slice: expected " + std::to_string(rank()) + " begins and ends, got " +
                        std::to_string(begins.size()) + " and " + std::to_string(ends.size()));
    Tensor r = *this;
    for (std::size_t d = 0; d < rank(); ++d) r = r.slice(begins[d], ends[d], d);
    return r;
  }
  /// Element i of dimension 0, with that dimension removed.
  Tensor index(std::size_t i) const {
    if (rank() == 0) throw index_error("index: a rank-0 tensor cannot be indexed");
    Tensor r = slice(i, i + 1, 0);
    r.shape_.erase(r.shape_.begin());
    r.strides_.erase(r.strides_.begin());
    return r;
  }
  Tensor operator[](std::size_t i) const { return index(i); }

  /// Same elements in row-major order, new shape with the same number of elements.
  Tensor reshape(Shape shape) const {
    if (product(shape) != num_elements())
      throw shape_error("reshape: cannot reshape " + to_string(shape_) + " (" + std::to_string(num_elements()) +
                        " elements) to " + to_string(shape));
    Tensor r = is_contiguous() ? *this : materialised();
    r.shape_ = std::move(shape);
    r.strides_ = contiguous_strides(r.shape_);
    return r;
  }
  Tensor flatten() const { return reshape({num_elements()}); }
  /// Swaps the two dimensions of a matrix.
  Tensor transpose() const {
    if (rank() != 2) throw shape_error("transpose: expected a rank-2 tensor, got " + to_string(shape_));
    return dimshuffle({1, 0});
  }
  /// Dimension d of the result is dimension perm[d] of this tensor.
  Tensor dimshuffle(std::vector<std::size_t> const& perm) const {
    std::vector<bool> seen(rank(), false);
    bool ok = perm.size() == rank();
    for (auto p : perm) {
      ok = ok && p < rank() && !seen[p];
      if (p < rank()) seen[p] = true;
    }
    if (!ok) throw shape_error("dimshuffle: " + to_string(perm) + " is not a permutation of the " +
                               std::to_string(rank()) + " dimensions of " + to_string(shape_));
    Tensor r = *this;
    for (std::size_t d = 0; d < rank(); ++d) {
      r.shape_[d] = shape_[perm[d]];
      r.strides_[d] = strides_[perm[d]];
    }
    return r;
  }
  /// NumPy-style broadcast to `shape`: dimensions are matched from the right; size-1 dimensions repeat.
  Tensor broadcast(Shape const& shape) const {
    if (shape.size() < rank())
      throw shape_error("broadcast: cannot broadcast " + to_string(shape_) + " to lower rank " + to_string(shape));
    Tensor r = *this;
    std::size_t const lead = shape.size() - rank();
    r.shape_ = shape;
    r.strides_.assign(shape.size(), 0);
    for (std::size_t d = 0; d < rank(); ++d) {
      if (shape_[d] == shape[lead + d]) {
        r.strides_[lead + d] = strides_[d];
      } else if (shape_[d] != 1) {
        throw shape_error("broadcast: cannot broadcast " + to_string(shape_) + " to " + to_string(shape));
      }
    }
    return r;
  }
  /// Inserts a dimension of size 1 before dimension `dim` (dim == rank appends).
  Tensor expand(std::size_t dim) const {
    if (dim > rank()) throw index_error("expand: dimension " + std::to_string(dim) + " out of range for rank " +
                                       std::to_string(rank()));
    Tensor r = *this;
    r.shape_.insert(r.shape_.begin() + static_cast<std::ptrdiff_t>(dim), 1);
    r.strides_.insert(r.strides_.begin() + static_cast<std::ptrdiff_t>(dim), 0);
    return r;
  }
  /// Removes every dimension of size 1.
  Tensor squeeze() const {
    Tensor r = *this;
    r.shape_.clear();
    r.strides_.clear();
    for (std::size_t d = 0; d < rank(); ++d)
      if (shape_[d] != 1) {
        r.shape_.push_back(shape_[d]);
        r.strides_.push_back(strides_[d]);
      }
    return r;
  }
  /// Reverses the order of elements along `dim`.
  Tensor reverse(std::size_t dim) const {
    check_dim("reverse", dim);
    Tensor r = *this;
    if (shape_[dim] > 1) r.offset_ += static_cast<std::int64_t>(shape_[dim] - 1) * strides_[dim];
    r.strides_[dim] = -strides_[dim];
    return r;
  }

  /// Calls f(var, start, stride, count) for maximal strided runs of variable elements, in row-major order.
  template <class F>
  void for_each_run(F&& f) const {
    if (!valid() || num_elements() == 0) return;
    std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (size, stride), coalesced
    for (std::size_t d = 0; d < rank(); ++d) {
      if (shape_[d] == 1) continue;
      auto const size = static_cast<std::int64_t>(shape_[d]);
      if (!dims.empty() && dims.back().second == strides_[d] * size) {
        dims.back() = {dims.back().first * size, strides_[d]};
      } else {
        dims.emplace_back(size, strides_[d]);
      }
    }
    if (dims.empty()) dims.emplace_back(1, 1);
    detail::RunMerger<F> merger(f);
    std::size_t hint = 0;
    std::vector<std::int64_t> idx(dims.size() - 1, 0);
    auto const [inner_n, inner_s] = dims.back();
    for (;;) {
      std::int64_t p = offset_;
      for (std::size_t d = 0; d + 1 < dims.size(); ++d) p += idx[d] * dims[d].second;
      emit(merger, p, inner_s, inner_n, hint);
      std::size_t d = idx.size();
      while (d > 0 && ++idx[d - 1] == dims[d - 1].first) idx[--d] = 0;
      if (d == 0) break;
    }
    merger.flush();
  }

  /// All element runs, in row-major order.
  std::vector<detail::Run> runs() const {
    std::vector<detail::Run> out;
    for_each_run([&](std::uint32_t v, std::int64_t s, std::int64_t st, std::int64_t n) { out.push_back({v, s, st, n}); });
    return out;
  }

  /// The view as one variable's elements at affine positions, when it is one (every view of a single
  /// variable made with slice, index, transpose, dimshuffle, broadcast, expand, squeeze or reverse is).
  std::optional<detail::Affine> affine() const {
    if (!valid() || seq_->runs.size() != 1) return std::nullopt;
    auto const& r = seq_->runs[0];
    detail::Affine a{r.var, r.start + offset_ * r.stride, {}};
    for (auto s : strides_) a.strides.push_back(s * r.stride);
    return a;
  }

  friend Tensor concat(std::vector<Tensor> const& ts, std::size_t dim);

 private:
  static std::vector<std::int64_t> contiguous_strides(Shape const& s) {
    std::vector<std::int64_t> st(s.size());
    std::int64_t acc = 1;
    for (std::size_t d = s.size(); d-- > 0;) {
      st[d] = acc;
      acc *= static_cast<std::int64_t>(s[d]);
    }
    return st;
  }
  void check_dim(char const* op, std::size_t d) const {
    if (d >= rank())
      throw index_error(std::string(op) + ": dimension " + std::to_string(d) + " out of range for rank " +
                        std::to_string(rank()));
  }
  /// True when the view's positions form one ascending unit-stride range of the sequence.
  bool is_contiguous() const {
    std::int64_t expect = 1;
    for (std::size_t d = rank(); d-- > 0;) {
      if (shape_[d] == 1) continue;
      if (strides_[d] != expect) return false;
      expect *= static_cast<std::int64_t>(shape_[d]);
    }
    return true;
  }
  /// The same elements as a fresh contiguous sequence (a new element list, not new data).
  Tensor materialised() const {
    Tensor r = *this;
    r.seq_ = std::make_shared<detail::Sequence const>(runs());
    r.offset_ = 0;
    r.strides_ = contiguous_strides(shape_);
    return r;
  }
  template <class M>
  void emit(M& merger, std::int64_t p, std::int64_t s, std::int64_t n, std::size_t& hint) const {
    auto const& seq = *seq_;
    while (n > 0) {
      std::size_t const r = hint = seq.locate(p, hint);
      auto const& run = seq.runs[r];
      std::int64_t const lo = seq.first[r], hi = lo + run.count;  // positions [lo, hi)
      std::int64_t m = n;
      if (s > 0) m = std::min(n, (hi - 1 - p) / s + 1);
      if (s < 0) m = std::min(n, (p - lo) / (-s) + 1);
      merger.add(run.var, run.start + (p - lo) * run.stride, s * run.stride, m);
      p += m * s;
      n -= m;
    }
  }
  static std::string to_string(std::vector<std::size_t> const& v) { return tilebsp::to_string(v); }

  std::shared_ptr<detail::Sequence const> seq_;
  std::uint32_t graph_ = 0;
  ElementType type_ = ElementType::f32;
  Shape shape_;
  std::vector<std::int64_t> strides_;
  std::int64_t offset_ = 0;
};

/// Joins tensors along `dim`; all other dimensions, the element type and the graph must agree.
inline Tensor concat(std::vector<Tensor> const& ts, std::size_t dim = 0) {
  if (ts.empty()) throw shape_error("concat: no tensors given");
  Tensor const& a = ts.front();
  if (dim >= a.rank())
    throw index_error("concat: dimension " + std::to_string(dim) + " out of range for rank " +
                      std::to_string(a.rank()));
  std::size_t total = 0;
  for (auto const& t : ts) {
    if (t.element_type() != a.element_type())
      throw type_error("concat: element types differ (" + std::string(name_of(a.element_type())) + " and " +
                       std::string(name_of(t.element_type())) + ")");
    if (t.graph_id() != a.graph_id()) throw error("concat: tensors belong to different graphs");
    bool ok = t.rank() == a.rank();
    for (std::size_t d = 0; ok && d < a.rank(); ++d) ok = d == dim || t.shape()[d] == a.shape()[d];
    if (!ok)
      throw shape_error("concat: shapes " + to_string(a.shape()) + " and " + to_string(t.shape()) +
                        " differ outside dimension " + std::to_string(dim));
    total += t.shape()[dim];
  }
  // Concatenate along dimension 0 of each tensor with `dim` moved to the front, then move it back.
  std::vector<std::size_t> perm{dim}, inverse(a.rank());
  for (std::size_t d = 0; d < a.rank(); ++d)
    if (d != dim) perm.push_back(d);
  for (std::size_t d = 0; d < a.rank(); ++d) inverse[perm[d]] = d;
  std::vector<detail::Run> all;
  for (auto const& t : ts) {
    auto r = t.dimshuffle(perm).runs();
    all.insert(all.end(), r.begin(), r.end());
  }
  Tensor out = a.dimshuffle(perm);
  out.seq_ = std::make_shared<detail::Sequence const>(std::move(all));
  out.offset_ = 0;
  out.shape_[0] = total;
  out.strides_ = Tensor::contiguous_strides(out.shape_);
  return out.dimshuffle(inverse);
}

}  // namespace tilebsp
