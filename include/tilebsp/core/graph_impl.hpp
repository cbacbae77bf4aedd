// Graph's definitions: included by <tilebsp/core/graph.hpp> (header-only) or compiled once into tilebsp::compiled
// (src/core.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/detail/variable_mapping_impl.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/log.hpp>

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tilebsp {

TILEBSP_INLINE Graph::Graph(Target target)
    : shared_(std::make_shared<Shared>(std::make_shared<core::detail::GraphImpl>())) {
  impl().target = std::move(target);
  impl().id = core::detail::GraphImpl::next_id();
  tile_count_ = impl().target.num_tiles();
}

TILEBSP_INLINE std::size_t Graph::build_threads() const noexcept {
  return shared_->build_threads != 0 ? shared_->build_threads : std::max(1u, std::thread::hardware_concurrency());
}

TILEBSP_INLINE Graph Graph::shard(std::size_t ipu) const {
  if (ipu >= impl().target.ipus)
    throw index_error("shard: IPU " + std::to_string(ipu) + " out of range (target '" + impl().target.name +
                      "' has " + std::to_string(impl().target.ipus) + " IPUs)");
  Graph g = *this;
  g.tile_begin_ = ipu * impl().target.tiles_per_ipu;
  g.tile_count_ = impl().target.tiles_per_ipu;
  return g;
}

TILEBSP_INLINE Tensor Graph::add_variable(ElementType type, Shape shape, std::string name, VariableOptions opt) {
  // A variable larger than the whole target's memory can never be mapped: refuse it now, in microseconds, rather
  // than after the graph is built and lowered (or never, when the host runs out of memory first).
  Target const& t = target();
  std::uint64_t elements = 1, bytes = 0;
  bool overflow = false;
  for (std::size_t d : shape) overflow |= __builtin_mul_overflow(elements, std::uint64_t{d}, &elements);
  overflow |= __builtin_mul_overflow(elements, std::uint64_t{size_of(type)}, &bytes);
  if (overflow || bytes > t.total_bytes() || elements > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    throw out_of_memory("add_variable '" + name + "': " + to_string(shape) + " " + std::string(name_of(type)) +
                        " is " + (overflow ? std::string("more than 2^64") : std::to_string(bytes)) +
                        " bytes, more than the whole target's memory (" + std::to_string(t.total_bytes()) +
                        " bytes: " + std::to_string(t.num_tiles()) + " tiles x " + std::to_string(t.bytes_per_tile) +
                        " bytes, " + t.name + ")");
  core::detail::Variable v;
  v.name = std::move(name);
  v.type = type;
  v.shape = shape;
  v.size = static_cast<std::int64_t>(elements);
  v.temporary = opt.temporary;
  return add(std::move(v));
}

TILEBSP_INLINE void Graph::set_tile_mapping(Tensor const& t, std::size_t tile) {
  check_tensor("set_tile_mapping", t);
  auto const g = global_tile("set_tile_mapping", tile);
  auto& variables = impl().variables;
  // A series of runs at a time (a block of channels over its positions is one), element by element where the runs
  // are strided (a strided run is a series of one-element rows).
  t.for_each_run_series([&](std::uint32_t var, std::int64_t start, std::int64_t count, std::int64_t stride,
                            std::int64_t rows, std::int64_t step) {
    auto& m = variables[var].mapping;
    if (stride == 1 || count == 1) m.assign_rows(start, count, step, rows, g);
    else
      for (std::int64_t r = 0; r < rows; ++r) m.assign_rows(start + r * step, 1, stride, count, g);
  });
}

TILEBSP_INLINE void Graph::set_tile_mapping_like(Tensor const& t, Tensor const& like) {
  check_tensor("set_tile_mapping_like", t);
  check_tensor("set_tile_mapping_like", like);
  if (t.num_elements() != like.num_elements())
    throw shape_error("set_tile_mapping_like: the tensor of shape " + to_string(t.shape()) + " has " +
                      std::to_string(t.num_elements()) + " elements but the one to copy from (" + to_string(like.shape()) +
                      ") has " + std::to_string(like.num_elements()));
  auto& variables = impl().variables;
  auto const lo = tile_begin_, hi = lo + tile_count_;
  // A whole variable copied onto consecutive elements of another: its blocks as they are (a series of rows per
  // block of channels), not piece by piece.
  auto const consecutive = [](Tensor const& x) -> std::optional<std::pair<std::uint32_t, std::int64_t>> {
    auto const a = x.flatten().affine();
    if (!a || a->strides.size() != 1 || a->strides[0] != 1) return std::nullopt;
    return std::pair{a->var, a->start};
  };
  if (auto const from = consecutive(like), to = consecutive(t);
      from && to && from->second == 0 && variables[from->first].size == static_cast<std::int64_t>(like.num_elements()) &&
      from->first != to->first) {
    auto const& src = variables[from->first].mapping;
    auto& dst = variables[to->first].mapping;
    if (std::int64_t const unmapped = variables[from->first].size - src.mapped(); unmapped > 0)
      throw mapping_error("set_tile_mapping_like: " + std::to_string(unmapped) + " of " +
                          std::to_string(like.num_elements()) + " elements to copy from are not mapped to any tile");
    std::int64_t const shift = to->second;
    src.for_each_series([&](std::int64_t b, std::int64_t e, std::uint32_t tile, std::int64_t period, std::size_t reps) {
      if (tile < lo || tile >= hi) return;
      dst.assign_rows(b + shift, e - b, reps > 1 ? period : e - b, static_cast<std::int64_t>(reps), tile);
    });
    return;
  }
  // like's pieces first (t may view the same variables), by flat index, then t's runs assigned along them.
  struct Piece {
    std::int64_t b, e;
    std::uint32_t tile;
  };
  std::vector<Piece> pieces;
  auto const unmapped = core::detail::for_each_mapped(impl(), like, [&](std::int64_t b, std::int64_t e, std::uint32_t tile) {
    if (tile < lo || tile >= hi) return;
    if (!pieces.empty() && pieces.back().e == b && pieces.back().tile == tile) pieces.back().e = e;
    else pieces.push_back({b, e, tile});
  });
  if (unmapped > 0)
    throw mapping_error("set_tile_mapping_like: " + std::to_string(unmapped) + " of " +
                        std::to_string(like.num_elements()) + " elements to copy from are not mapped to any tile");
  std::size_t k = 0;  // the first piece that ends after the run's first position
  std::int64_t at = 0;  // t's flat index of the run's first element
  t.for_each_run([&](std::uint32_t var, std::int64_t start, std::int64_t stride, std::int64_t count) {
    auto& m = variables[var].mapping;
    while (k < pieces.size() && pieces[k].e <= at) ++k;
    for (std::size_t j = k; j < pieces.size() && pieces[j].b < at + count; ++j) {
      std::int64_t const b = std::max(pieces[j].b, at) - at, e = std::min(pieces[j].e, at + count) - at;
      if (stride == 1) m.assign(start + b, start + e, pieces[j].tile);
      else
        for (std::int64_t i = b; i < e; ++i) m.assign(start + i * stride, start + i * stride + 1, pieces[j].tile);
    }
    at += count;
  });
}

TILEBSP_INLINE TileMapping Graph::tile_mapping(Tensor const& t) const {
  check_tensor("tile_mapping", t);
  std::vector<TileMapping::value_type> r;
  auto const lo = tile_begin_, hi = lo + tile_count_;
  auto const unmapped = core::detail::for_each_mapped(impl(), t, [&](std::int64_t b, std::int64_t e, std::uint32_t tile) {
    if (tile < lo || tile >= hi) return;
    Interval iv{static_cast<std::size_t>(b), static_cast<std::size_t>(e)};
    std::size_t const local = tile - lo;
    if (!r.empty() && r.back().first == local && r.back().second.end == iv.begin) r.back().second.end = iv.end;
    else r.emplace_back(local, iv);
  });
  if (unmapped > 0)
    throw mapping_error("tile_mapping: " + std::to_string(unmapped) + " of " + std::to_string(t.num_elements()) +
                        " elements are not mapped to any tile");
  // Grouped by tile, positions ascending within each: a counting sort where there are many regions (an operator's
  // result has a region per position and block of channels), O(regions + tiles).
  auto const by_tile = [](auto const& a, auto const& b) { return a.first < b.first; };
  if (r.size() <= 256 || tile_count_ > r.size() * 4) {
    std::stable_sort(r.begin(), r.end(), by_tile);
  } else if (!std::is_sorted(r.begin(), r.end(), by_tile)) {
    core::detail::group_by_tile(r, tile_count_, [](TileMapping::value_type const& e) { return e.first; });
  }
  return TileMapping(std::move(r));
}

TILEBSP_INLINE ComputeSet Graph::add_compute_set(std::string name) {
  impl().compute_sets.push_back(std::move(name));
  impl().compute_set_ops.resize(impl().compute_sets.size(), -1);
  impl().compute_set_ops.back() = shared_->op;
  return {static_cast<std::uint32_t>(impl().compute_sets.size() - 1), impl().id};
}

TILEBSP_INLINE OperatorScope::OperatorScope(Graph& g, std::string kind, std::string name, std::string_view kernels)
    : g_(g) {
  if (g_.shared_->op >= 0) return;
  auto& ops = g_.impl().operators;
  ops.push_back({std::move(kind), std::move(name), {}, std::string(kernels)});
  g_.shared_->op = static_cast<std::int32_t>(ops.size() - 1);
  outer_ = true;
}
TILEBSP_INLINE OperatorScope::~OperatorScope() {
  if (outer_) g_.shared_->op = -1;
}
TILEBSP_INLINE void OperatorScope::add_plan(std::string text) { note_plan(g_, std::move(text)); }
TILEBSP_INLINE void OperatorScope::note_plan(Graph& g, std::string text) {
  std::int32_t const op = g.shared_->op;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (logging::enabled(LogLevel::debug)) {
    std::string head = "plan";
    if (op >= 0) head += " of " + g.impl().operators[static_cast<std::size_t>(op)].kind + " '" + g.impl().operators[static_cast<std::size_t>(op)].name + "'";
    logging::debug(head + ": " + text);
  }
  if (op >= 0) g.impl().operators[static_cast<std::size_t>(op)].plans.push_back(std::move(text));
}

TILEBSP_INLINE core::detail::GraphImpl& Graph::impl() {
  auto& p = shared_->impl;
  if (p.use_count() > 1) p = std::make_shared<core::detail::GraphImpl>(*p);
  return *p;
}

TILEBSP_INLINE std::uint32_t Graph::global_tile(char const* op, std::size_t tile) const {
  if (tile >= tile_count_)
    throw index_error(std::string(op) + ": tile " + std::to_string(tile) + " out of range (this graph has " +
                      std::to_string(tile_count_) + " tiles)");
  return static_cast<std::uint32_t>(tile_begin_ + tile);
}

TILEBSP_INLINE void Graph::check_tensor(char const* op, Tensor const& t) const {
  if (!t.valid()) throw error(std::string(op) + ": the tensor is empty (default-constructed)");
  if (t.graph_id() != impl().id) throw error(std::string(op) + ": the tensor belongs to another graph");
}

TILEBSP_INLINE Tensor Graph::add(core::detail::Variable v) {
  auto const id = static_cast<std::uint32_t>(impl().variables.size());
  Tensor t(impl().id, id, v.type, v.shape);
  impl().variables.push_back(std::move(v));
  return t;
}

TILEBSP_INLINE Tensor Graph::add_constant_bytes(Shape shape, ElementType type, void const* values, std::size_t count,
                                               std::string name) {
  if (count != product(shape))
    throw shape_error("add_constant: '" + name + "' has shape " + to_string(shape) + " (" +
                      std::to_string(product(shape)) + " elements) but " + std::to_string(count) + " values were given");
  core::detail::Variable v;
  v.name = std::move(name);
  v.type = type;
  v.shape = shape;
  v.size = static_cast<std::int64_t>(count);
  v.constant = true;
  v.initial.resize(count * size_of(type));
  if (count > 0) std::memcpy(v.initial.data(), values, v.initial.size());
  return add(std::move(v));
}

TILEBSP_INLINE Fifo Graph::add_fifo(std::string name, ElementType type, std::size_t elements, bool to_device) {
  impl().fifos.push_back({std::move(name), type, elements, to_device});
  return {static_cast<std::uint32_t>(impl().fifos.size() - 1), impl().id, type, elements, to_device};
}

}  // namespace tilebsp
