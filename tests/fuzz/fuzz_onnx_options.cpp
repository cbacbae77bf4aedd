// libFuzzer harness: the `tilebsp` tool's JSON options (onnx::apply_config: a --config-file, and the options.json
// that `tilebsp convert` writes and `tilebsp run DIR` reads back). Whatever it accepts, what model_config writes of
// it must read back to the same options (a converted folder runs as it was converted).
#include <tilebsp/core/error.hpp>
#include <tilebsp/onnx/options.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* bytes, std::size_t size) {
  namespace to = tilebsp::onnx;
  to::RunOptions o;
  try {
    to::apply_config(o, std::string_view(reinterpret_cast<char const*>(bytes), size), "fuzz.json");
  } catch (tilebsp::option_error const&) {
    return 0;
  }
  to::RunOptions back;
  try {
    to::apply_config(back, to::model_config(o), "options.json");
  } catch (tilebsp::option_error const&) {
    __builtin_trap();  // what we wrote, we must read
  }
  if (to::model_config(back) != to::model_config(o)) __builtin_trap();
  return 0;
}
