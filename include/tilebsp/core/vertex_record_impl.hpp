// A vertex record's estimate and hash: included by <tilebsp/core/vertex_record.hpp> (header-only) or compiled
// once into tilebsp::compiled (src/core.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/vertex_record.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tilebsp::core::detail {

TILEBSP_INLINE std::uint64_t vertex_estimate(VertexRecord const& rec) {
  auto const* ops = rec.ops;
  std::size_t const n = rec.fields.size();
  std::size_t items = 0;
  for (auto const& f : rec.fields)
    if (f.kind == FieldKind::input_list) items += rec.tensors_of(f).size();
  // In place for the common vertex (up to 16 fields and list entries, a state of up to 1 KiB): add_vertex
  // evaluates it for every vertex, so nothing is allocated per vertex.
  constexpr std::size_t bindings_in_place = 16, bytes_in_place = 1024;
  FieldBinding b_in_place[bindings_in_place], items_in_place[bindings_in_place];
  std::vector<FieldBinding> b_heap, items_heap;
  FieldBinding* b = b_in_place;
  FieldBinding* item = items_in_place;
  if (n > bindings_in_place) b_heap.resize(n), b = b_heap.data();
  if (items > bindings_in_place) items_heap.resize(items), item = items_heap.data();
  for (std::size_t i = 0; i < n; ++i) {
    auto const& f = rec.fields[i];
    auto const tensors = rec.tensors_of(f);
    if (f.kind == FieldKind::input_list) {
      b[i] = {item, tensors.size()};
      for (auto const& t : tensors) *item++ = {nullptr, t.num_elements()};
    } else if (!tensors.empty()) {
      b[i] = {nullptr, tensors[0].num_elements()};
      for (std::size_t d = 0; d < f.rank; ++d) b[i].shape[d] = tensors[0].dim(d);
    }
  }
  alignas(std::max_align_t) unsigned char state_in_place[bytes_in_place];
  std::vector<std::max_align_t> state_heap;
  void* v = state_in_place;
  if (ops->size > bytes_in_place || ops->align > alignof(std::max_align_t)) {
    state_heap.resize((ops->size + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t) + 1);
    v = state_heap.data();
  }
  ops->copy_construct(v, rec.prototype.get());
  ops->bind(v, b);
  std::uint64_t const c = ops->cycles(v);
  ops->destroy(v);
  return c;
}

TILEBSP_INLINE void hash_vertex(Hasher& h, VertexRecord const& rec) {
  h.add(rec.ops->name_hash);
  h.add(rec.compute_set);
  h.add(rec.tile);
  for (auto const& f : rec.fields) {
    h.add(static_cast<std::uint64_t>(f.kind) | std::uint64_t{f.rank} << 8 | std::uint64_t{f.fetched} << 16 |
          static_cast<std::uint64_t>(f.type) << 24);
    h.add(f.count);
    for (auto const& t : rec.tensors_of(f)) h.tensor(t);
  }
  if (rec.ops->cycles) h.add(rec.cycles);
}

}  // namespace tilebsp::core::detail
