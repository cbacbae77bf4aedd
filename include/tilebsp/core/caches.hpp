// The host's data caches, which the kernels size their cache blocks from (simd/blocks.hpp): detected when the
// program starts, or given by the environment variable TILEBSP_CACHE_SIZES=L1D,L2,L3 (sizes in bytes with an
// optional K, M or G: 32K,512K,32M), which wins (to measure one host's blocking on another). The blocks change
// how fast the kernels run, never their results.
#pragma once

#include <tilebsp/core/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

namespace tilebsp {

/// Sizes in bytes of one core's L1 data cache and L2, and of the L3 (all of it, as the OS reports it; the L2
/// where there is none).
struct CacheSizes {
  std::size_t l1d, l2, l3;
  friend bool operator==(CacheSizes const&, CacheSizes const&) = default;
};

/// "32K,512K,32M": the form TILEBSP_CACHE_SIZES takes, each size in K, M or G where it is a whole multiple.
inline std::string to_string(CacheSizes const& c) {
  auto const one = [](std::size_t b) {
    char const* unit = "";
    for (char const* u : {"K", "M", "G"}) {
      if (b == 0 || b % 1024 != 0) break;
      b /= 1024;
      unit = u;
    }
    return std::to_string(b) + unit;
  };
  return one(c.l1d) + "," + one(c.l2) + "," + one(c.l3);
}

/// Parses TILEBSP_CACHE_SIZES's form: three sizes "L1D,L2,L3", each digits and an optional K, M or G (binary
/// multiples, either case), from 1K to 64G, not decreasing. Throws option_error naming the variable, the text and
/// the problem.
inline CacheSizes parse_cache_sizes(std::string_view text) {
  std::string const what = "TILEBSP_CACHE_SIZES=" + std::string(text);
  constexpr std::size_t least = std::size_t{1} << 10, most = std::size_t{64} << 30;
  std::size_t v[3] = {};
  std::size_t n = 0;
  for (std::size_t pos = 0; pos <= text.size();) {
    std::size_t const end = std::min(text.find(',', pos), text.size());
    std::string_view const item = text.substr(pos, end - pos);
    if (n == 3) throw option_error(what + ": more than three sizes; expected L1D,L2,L3 such as 32K,512K,32M");
    std::size_t digits = 0, value = 0;
    for (; digits < item.size() && item[digits] >= '0' && item[digits] <= '9'; ++digits)
      if (value <= most) value = value * 10 + static_cast<std::size_t>(item[digits] - '0');  // beyond: out of range
    std::string_view const unit = item.substr(digits);
    int shift = -1;
    if (unit.empty()) shift = 0;
    else if (unit == "K" || unit == "k") shift = 10;
    else if (unit == "M" || unit == "m") shift = 20;
    else if (unit == "G" || unit == "g") shift = 30;
    if (digits == 0 || shift < 0)
      throw option_error(what + ": '" + std::string(item) + "' is not a size (digits, then K, M or G)");
    if (value > (most >> shift) || (value << shift) < least)
      throw option_error(what + ": '" + std::string(item) + "' is outside 1K to 64G");
    v[n++] = value << shift;
    pos = end + 1;
  }
  if (n != 3) throw option_error(what + ": " + std::to_string(n) + " size(s); expected L1D,L2,L3 such as 32K,512K,32M");
  if (v[0] > v[1] || v[1] > v[2]) throw option_error(what + ": the sizes decrease; expected L1D <= L2 <= L3");
  return {v[0], v[1], v[2]};
}

/// The caches this machine reports: Linux's sysfs for CPU 0 (index*/level, type, size), else sysconf; where a
/// level is not reported, the sizes the kernels' blocks were tuned on (32K L1d, 1M L2, 32M L3, a Zen 4 core's).
/// glibc's sysconf is second because it can be wrong under virtual machines (256M of L3 on a Zen 3 guest whose
/// sysfs says 32M).
inline CacheSizes detect_cache_sizes() noexcept {
  std::size_t found[4] = {};
#if defined(__linux__)
  for (int i = 0; i < 16; ++i) {
    auto const read = [&](char const* leaf, char* out, int n) {
      char path[96];
      std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", i, leaf);
      std::FILE* f = std::fopen(path, "r");
      if (!f) return false;
      bool const ok = std::fgets(out, n, f) != nullptr;
      std::fclose(f);
      return ok;
    };
    char level[16], type[32], size[32];
    if (!read("level", level, sizeof level)) break;
    if (!read("type", type, sizeof type) || !read("size", size, sizeof size)) continue;
    int const lv = std::atoi(level);
    if (lv < 1 || lv > 3 || std::string_view(type).substr(0, 11) == "Instruction") continue;
    char* unit = nullptr;
    unsigned long long const bytes = std::strtoull(size, &unit, 10);
    std::size_t const scale = unit && (*unit == 'K' || *unit == 'k') ? 1024 : unit && (*unit == 'M' || *unit == 'm') ? 1024 * 1024 : 1;
    if (bytes > (std::size_t{64} << 30) / scale) continue;  // beyond any cache (and its product's range): not used
    found[lv] = static_cast<std::size_t>(bytes) * scale;
  }
#endif
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
  int const names[4] = {0, _SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE};
  for (int lv = 1; lv <= 3; ++lv)
    if (found[lv] == 0)
      if (long const s = sysconf(names[lv]); s > 0) found[lv] = static_cast<std::size_t>(s);
#endif
  CacheSizes c{found[1] ? found[1] : std::size_t{32} << 10, found[2] ? found[2] : std::size_t{1} << 20, found[3]};
  if (c.l3 == 0) c.l3 = found[2] ? c.l2 : std::size_t{32} << 20;
  return c;
}

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
