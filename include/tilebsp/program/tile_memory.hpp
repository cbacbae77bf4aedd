// TileMemory: the bytes one tile uses, as compile() accounts them.
#pragma once

#include <cstdint>

namespace tilebsp {

/// Bytes used on one tile: data live all the time plus the peak of data live part of the time (Poplar's
/// "always live" and "not always live"; see program::detail::account_memory for the rules).
struct TileMemory {
  std::uint64_t always_live = 0;
  std::uint64_t peak_live = 0;       ///< peak of variables, temporaries and buffers live part of the time
  std::uint64_t peak_temporary = 0;  ///< peak of the operator-internal part alone (what AMP bounds)
  std::uint64_t total() const noexcept { return always_live + peak_live; }
};

}  // namespace tilebsp
