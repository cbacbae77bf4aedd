// libFuzzer harness: TILEBSP_ENGINE_OPTIONS, the JSON options reader (core/detail/json.hpp) and its keys; the same
// bytes as TILEBSP_CACHE_SIZES (core/caches.hpp), whose accepted sizes must keep their documented bounds.
#include <tilebsp/core/caches.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/exec/detail/auto_report.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

volatile bool sink;  // what a harness reads, kept

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* bytes, std::size_t size) {
  try {
    auto const r = tilebsp::exec::detail::parse_engine_options(std::string_view(reinterpret_cast<char const*>(bytes), size));
    sink = r.any() && !r.directory.empty();
  } catch (tilebsp::option_error const&) {
  }
  try {
    auto const c = tilebsp::parse_cache_sizes(std::string_view(reinterpret_cast<char const*>(bytes), size));
    constexpr std::size_t least = std::size_t{1} << 10, most = std::size_t{64} << 30;
    if (c.l1d < least || c.l3 > most || c.l1d > c.l2 || c.l2 > c.l3) __builtin_trap();
  } catch (tilebsp::option_error const&) {
  }
  return 0;
}
