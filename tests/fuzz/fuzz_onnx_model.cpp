// libFuzzer harness: ONNX model files (tilebsp::onnx::Model::parse: ONNX's protobuf parser and checker, the version
// converter and shape inference, then our reading of every tensor and attribute), and what import() reads first of
// a model: its inputs, outputs, nodes and initializers.
#include <tilebsp/onnx/model.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

volatile std::size_t sink;

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* bytes, std::size_t size) {
  try {
    auto const m = tilebsp::onnx::Model::parse(std::string_view(reinterpret_cast<char const*>(bytes), size), "fuzz.onnx");
    std::size_t n = m.parameter_count() + m.nodes().size();
    for (auto const& v : m.inputs()) n += v.dims.size();
    for (auto const& v : m.outputs()) n += v.dims.size();
    sink = n;
  } catch (tilebsp::error const&) {
  }
  return 0;
}
