// Tensor's definitions: included by <tilebsp/core/tensor.hpp> (header-only) or compiled once into tilebsp::compiled
// (src/core.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/tensor.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tilebsp {

TILEBSP_INLINE Tensor::Tensor(std::uint32_t graph, std::uint32_t var, ElementType type, Shape shape)
    : graph_(graph), type_(type), shape_(shape.begin(), shape.end()) {
  auto const n = static_cast<std::int64_t>(num_elements());
  seq_ = std::make_shared<core::detail::ElementRuns const>(std::vector<core::detail::Run>{{var, 0, 1, n}});
  strides_ = contiguous_strides(shape_);
}

TILEBSP_INLINE Tensor& Tensor::slice_self(std::size_t begin, std::size_t end, std::size_t dim) {
  check_dim("slice", dim);
  if (begin > end || end > shape_[dim])
    throw index_error("slice: range [" + std::to_string(begin) + ", " + std::to_string(end) +
                      ") is out of bounds for dimension " + std::to_string(dim) + " of size " +
                      std::to_string(shape_[dim]));
  offset_ += static_cast<std::int64_t>(begin) * strides_[dim];
  shape_[dim] = end - begin;
  return *this;
}

TILEBSP_INLINE Tensor& Tensor::slice_self(Shape const& begins, Shape const& ends) {
  if (begins.size() != rank() || ends.size() != rank())
    throw shape_error("slice: expected " + std::to_string(rank()) + " begins and ends, got " +
                      std::to_string(begins.size()) + " and " + std::to_string(ends.size()));
  for (std::size_t d = 0; d < rank(); ++d) slice_self(begins[d], ends[d], d);
  return *this;
}

TILEBSP_INLINE Tensor& Tensor::index_self(std::size_t i) {
  if (rank() == 0) throw index_error("index: a rank-0 tensor cannot be indexed");
  slice_self(i, i + 1, 0);
  shape_.erase_at(0);
  strides_.erase_at(0);
  return *this;
}

TILEBSP_INLINE Tensor& Tensor::reshape_self(Shape shape) {
  if (product(shape) != num_elements())
    throw shape_error("reshape: cannot reshape " + to_string(shape_) + " (" + std::to_string(num_elements()) +
                      " elements) to " + to_string(shape));
  if (!is_contiguous()) {
    if (reshape_strides(shape)) return *this;
    *this = materialised();
  }
  shape_.assign(shape.begin(), shape.end());
  strides_ = contiguous_strides(shape_);
  return *this;
}

TILEBSP_INLINE bool Tensor::reshape_strides(Shape const& shape) {
  if (num_elements() == 0) return false;
  // The dimensions of more than one element, old and new; each group of old ones that multiplies to a group of new
  // ones must step over one another whole, and the new ones then step through the group as its row-major order.
  std::vector<std::int64_t> od, os, nd;
  for (std::size_t d = 0; d < rank(); ++d)
    if (shape_[d] != 1) od.push_back(static_cast<std::int64_t>(shape_[d])), os.push_back(strides_[d]);
  for (auto n : shape)
    if (n != 1) nd.push_back(static_cast<std::int64_t>(n));
  std::vector<std::int64_t> ns(nd.size(), 0);
  for (std::size_t oi = 0, oj = 1, ni = 0, nj = 1; ni < nd.size() && oi < od.size(); ni = nj++, oi = oj++) {
    std::int64_t np = nd[ni], op = od[oi];
    while (np != op) {
      if (np < op) np *= nd[nj++];
      else op *= od[oj++];
    }
    for (std::size_t k = oi; k + 1 < oj; ++k)
      if (os[k] != od[k + 1] * os[k + 1]) return false;
    ns[nj - 1] = os[oj - 1];
    for (std::size_t k = nj - 1; k > ni; --k) ns[k - 1] = ns[k] * nd[k];
  }
  std::vector<std::int64_t> strides(shape.size(), 0);
  for (std::size_t d = 0, k = 0; d < shape.size(); ++d)
    if (shape[d] != 1) strides[d] = ns[k++];
  shape_.assign(shape.begin(), shape.end());
  strides_.assign(strides.begin(), strides.end());
  return true;
}

TILEBSP_INLINE Tensor Tensor::transpose() const {
  if (rank() != 2) throw shape_error("transpose: expected a rank-2 tensor, got " + to_string(shape_));
  return dimshuffle({1, 0});
}

TILEBSP_INLINE Tensor Tensor::dimshuffle(std::vector<std::size_t> const& perm) const {
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

TILEBSP_INLINE Tensor Tensor::broadcast(Shape const& shape) const {
  if (shape.size() < rank())
    throw shape_error("broadcast: cannot broadcast " + to_string(shape_) + " to lower rank " + to_string(shape));
  Tensor r = *this;
  std::size_t const lead = shape.size() - rank();
  r.shape_.assign(shape.begin(), shape.end());
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

TILEBSP_INLINE Tensor Tensor::expand(std::size_t dim) const {
  if (dim > rank()) throw index_error("expand: dimension " + std::to_string(dim) + " out of range for rank " +
                                     std::to_string(rank()));
  Tensor r = *this;
  r.shape_.insert_at(dim, 1);
  r.strides_.insert_at(dim, 0);
  return r;
}

TILEBSP_INLINE Tensor Tensor::squeeze() const {
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

TILEBSP_INLINE Tensor Tensor::reverse(std::size_t dim) const {
  check_dim("reverse", dim);
  Tensor r = *this;
  if (shape_[dim] > 1) r.offset_ += static_cast<std::int64_t>(shape_[dim] - 1) * strides_[dim];
  r.strides_[dim] = -strides_[dim];
  return r;
}

TILEBSP_INLINE std::vector<core::detail::Run> Tensor::runs() const {
  std::vector<core::detail::Run> out;
  for_each_run([&](std::uint32_t v, std::int64_t s, std::int64_t st, std::int64_t n) { out.push_back({v, s, st, n}); });
  return out;
}

TILEBSP_INLINE std::optional<core::detail::Affine> Tensor::affine() const {
  if (!valid() || seq_->runs.size() != 1) return std::nullopt;
  auto const& r = seq_->runs[0];
  core::detail::Affine a{r.var, r.start + offset_ * r.stride, {}};
  for (auto s : strides_) a.strides.push_back(s * r.stride);
  return a;
}

TILEBSP_INLINE Tensor::Strides Tensor::contiguous_strides(Dims const& s) {
  Strides st;
  st.assign(s.size(), 0);
  std::int64_t acc = 1;
  for (std::size_t d = s.size(); d-- > 0;) {
    st[d] = acc;
    acc *= static_cast<std::int64_t>(s[d]);
  }
  return st;
}

TILEBSP_INLINE void Tensor::check_dim(char const* op, std::size_t d) const {
  if (d >= rank())
    throw index_error(std::string(op) + ": dimension " + std::to_string(d) + " out of range for rank " +
                      std::to_string(rank()));
}

TILEBSP_INLINE bool Tensor::is_contiguous() const {
  std::int64_t expect = 1;
  for (std::size_t d = rank(); d-- > 0;) {
    if (shape_[d] == 1) continue;
    if (strides_[d] != expect) return false;
    expect *= static_cast<std::int64_t>(shape_[d]);
  }
  return true;
}

TILEBSP_INLINE Tensor Tensor::materialised() const {
  Tensor r = *this;
  r.seq_ = std::make_shared<core::detail::ElementRuns const>(runs());
  r.offset_ = 0;
  r.strides_ = contiguous_strides(shape_);
  return r;
}

TILEBSP_INLINE Tensor concat(std::vector<Tensor> const& ts, std::size_t dim) {
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
    for (std::size_t d = 0; ok && d < a.rank(); ++d) ok = d == dim || t.dim(d) == a.dim(d);
    if (!ok)
      throw shape_error("concat: shapes " + to_string(a.shape()) + " and " + to_string(t.shape()) +
                        " differ outside dimension " + std::to_string(dim));
    total += t.dim(dim);
  }
  // Concatenate along dimension 0 of each tensor with `dim` moved to the front, then move it back.
  std::vector<std::size_t> perm{dim}, inverse(a.rank());
  for (std::size_t d = 0; d < a.rank(); ++d)
    if (d != dim) perm.push_back(d);
  for (std::size_t d = 0; d < a.rank(); ++d) inverse[perm[d]] = d;
  std::vector<core::detail::Run> all;
  for (auto const& t : ts) {
    auto r = t.dimshuffle(perm).runs();
    all.insert(all.end(), r.begin(), r.end());
  }
  Tensor out = a.dimshuffle(perm);
  out.seq_ = std::make_shared<core::detail::ElementRuns const>(std::move(all));
  out.offset_ = 0;
  out.shape_[0] = total;
  out.strides_ = Tensor::contiguous_strides(out.shape_);
  return out.dimshuffle(inverse);
}

}  // namespace tilebsp
