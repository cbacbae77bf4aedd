// The host's data caches, which the kernels size their cache blocks from (simd/blocks.hpp): detected when the
// program starts, or given by the environment variable TILEBSP_CACHE_SIZES=L1D,L2,L3 (sizes in bytes with an
// optional K, M or G: 32K,512K,32M), which wins (to measure one host's blocking on another). The blocks change
// how fast the kernels run, never their results.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>

#include <cstddef>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace tilebsp {

/// Sizes in bytes of one core's L1 data cache and L2, and of the L3 (all of it, as the OS reports it; the L2
/// where there is none).
struct CacheSizes {
  std::size_t l1d, l2, l3;
  friend bool operator==(CacheSizes const&, CacheSizes const&) = default;
};

/// "32K,512K,32M": the form TILEBSP_CACHE_SIZES takes, each size in K, M or G where it is a whole multiple.
TILEBSP_INLINE std::string to_string(CacheSizes const& c);

/// Parses TILEBSP_CACHE_SIZES's form: three sizes "L1D,L2,L3", each digits and an optional K, M or G (binary
/// multiples, either case), from 1K to 64G, not decreasing. Throws option_error naming the variable, the text and
/// the problem.
TILEBSP_INLINE CacheSizes parse_cache_sizes(std::string_view text);

/// The caches this machine reports: Linux's sysfs for CPU 0 (index*/level, type, size), else sysconf; where a
/// level is not reported, the sizes the kernels' blocks were tuned on (32K L1d, 1M L2, 32M L3, a Zen 4 core's).
/// glibc's sysconf is second because it can be wrong under virtual machines (256M of L3 on a Zen 3 guest whose
/// sysfs says 32M).
TILEBSP_INLINE CacheSizes detect_cache_sizes() noexcept;

namespace core::detail {

/// The sizes in force for this copy of the kernels: a test's override, else TILEBSP_CACHE_SIZES, else detected;
/// `error` the option_error message where TILEBSP_CACHE_SIZES is malformed (the detected sizes are used then).
struct CacheState {
  CacheSizes sizes;
  std::string error;
  std::optional<CacheSizes> override_;
};
inline CacheState& cache_state() {
  static CacheState state = [] {
    CacheState s{detect_cache_sizes(), {}, {}};
    if (char const* e = std::getenv("TILEBSP_CACHE_SIZES"); e && *e) {
      try {
        s.sizes = parse_cache_sizes(e);
      } catch (option_error const& x) {
        s.error = x.what();
      }
    }
    return s;
  }();
  return state;
}

/// The sizes the kernels block for; never throws (a malformed TILEBSP_CACHE_SIZES is reported by cache_sizes(),
/// which every Engine calls when it is made, and meanwhile leaves the detected sizes).
inline CacheSizes blocking_cache_sizes() noexcept {
  CacheState const& s = cache_state();
  return s.override_ ? *s.override_ : s.sizes;
}

/// For tests of the kernels: block for `sizes` from now on in this copy of the kernels (std::nullopt: back to the
/// environment's or the detected). Not while kernels run on other threads.
inline void override_cache_sizes(std::optional<CacheSizes> sizes) { cache_state().override_ = sizes; }

}  // namespace core::detail

/// The cache sizes the kernels block for: TILEBSP_CACHE_SIZES where set, else detect_cache_sizes(). Throws
/// option_error where TILEBSP_CACHE_SIZES is malformed (an Engine checks it when it is made).
inline CacheSizes cache_sizes() {
  core::detail::CacheState const& s = core::detail::cache_state();
  if (!s.error.empty()) throw option_error(s.error);
  return core::detail::blocking_cache_sizes();
}

}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/core.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/core/caches_impl.hpp>
#endif
