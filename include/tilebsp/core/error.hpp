// tilebsp's exception hierarchy: every bad input raises a tilebsp::error subclass with an actionable message.
#pragma once

#include <tilebsp/config.hpp>

#include <stdexcept>
#include <string>

namespace tilebsp {

/// Base of every exception tilebsp throws.
struct TILEBSP_API error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// Shapes that do not fit the operation (copy, reshape, concat, slice bounds).
struct TILEBSP_API shape_error : error {
  using error::error;
};
/// Element types that do not match (copy, vertex field, stream).
struct TILEBSP_API type_error : error {
  using error::error;
};
/// Tile mapping problems: unmapped data at compile, a vertex field reaching data on another tile.
struct TILEBSP_API mapping_error : error {
  using error::error;
};
/// Two writers of one element in one compute set or exchange, or a reader of an element another vertex writes.
struct TILEBSP_API write_conflict_error : error {
  using error::error;
};
/// A tile, shard, dimension or program index outside its range.
struct TILEBSP_API index_error : error {
  using error::error;
};
/// Host streams: element count mismatch, unconnected or exhausted FIFOs.
struct TILEBSP_API stream_error : error {
  using error::error;
};
/// A tile's always-live plus peak temporary data exceeds its memory.
struct TILEBSP_API out_of_memory : error {
  using error::error;
};
/// Options outside their documented range.
struct TILEBSP_API option_error : error {
  using error::error;
};
/// Replicas that cannot go on together: another process failed, left or did not answer in time; processes whose
/// executables differ; replicas whose control flow diverged.
struct TILEBSP_API replica_error : error {
  using error::error;
};

}  // namespace tilebsp
