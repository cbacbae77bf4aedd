// libFuzzer harness: TILEBSP_ENGINE_OPTIONS, the JSON options reader (core/detail/json.hpp) and its keys.
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
  return 0;
}
