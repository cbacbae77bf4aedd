// The cache sizes' definitions (their text form, TILEBSP_CACHE_SIZES's parser, detection): included by
// <tilebsp/core/caches.hpp> (header-only) or compiled once into tilebsp::compiled (src/core.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/caches.hpp>
#include <tilebsp/core/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

namespace tilebsp {

TILEBSP_INLINE std::string to_string(CacheSizes const& c) {
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

TILEBSP_INLINE CacheSizes parse_cache_sizes(std::string_view text) {
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

TILEBSP_INLINE CacheSizes detect_cache_sizes() noexcept {
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

}  // namespace tilebsp
