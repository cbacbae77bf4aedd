// libFuzzer harness: .npy files (tilebsp::onnx::parse_npy, the `tilebsp` tool's input reader), read as the tool
// reads them: every value of the tensor.
#include <tilebsp/onnx/npy.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

volatile double sink;

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* bytes, std::size_t size) {
  try {
    auto const t = tilebsp::onnx::parse_npy(std::string_view(reinterpret_cast<char const*>(bytes), size), "fuzz.npy");
    double s = 0;
    for (std::size_t i = 0; i < t.size(); ++i) s += t.value(i);
    sink = s;
  } catch (tilebsp::error const&) {
  }
  return 0;
}
