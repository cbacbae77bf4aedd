// add_vertices' records added to the graph (add_records, one copy for every vertex type): included by
// <tilebsp/vertex/add_vertex.hpp> (header-only) or compiled once into tilebsp::compiled (src/core.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/detail/parallel.hpp>
#include <tilebsp/vertex/add_vertex.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace tilebsp::vertex::detail {

TILEBSP_INLINE void add_records(Graph& g, std::size_t count, VertexRecord (*make)(void*, std::size_t), void* context) {
  // Made in place at the end of the graph's vertices (no record moved), taken back if one throws.
  auto& impl = g.impl();
  auto& vertices = impl.vertices;
  std::size_t const base = vertices.size();
  if (vertices.capacity() < base + count)  // grown geometrically, as push_back would
    vertices.reserve(std::max(base + count, 2 * vertices.capacity()));
  vertices.resize(base + count);
  std::vector<Digest> digests(count);
  try {
    core::detail::parallel_for(g.build_threads(), count, 256, [&](std::size_t i, std::size_t) {
      vertices[base + i] = make(context, i);
      digests[i] = digest_of(vertices[base + i]);
    });
  } catch (...) {
    vertices.resize(base);
    throw;
  }
  for (auto const& [a, b] : digests) impl.vertex_hash.add2(a, b);
}

}  // namespace tilebsp::vertex::detail
