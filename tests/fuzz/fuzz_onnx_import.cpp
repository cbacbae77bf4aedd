// libFuzzer harness: onnx::import of any model Model::parse accepts, into a small modelled IPU at batch 1: every
// operator's reading of its attributes, shapes and known inputs, the folding of constant and shape subgraphs on
// the host, and the operators the importer builds. Every refusal is a tilebsp::error; nothing may crash, read out
// of bounds or allocate without bound (element counts are checked before anything is folded or built). A model that
// imports is imported again with its nodes run on the host (excluded_nodes) and pipelined over two IPUs.
#include <tilebsp/onnx/import.hpp>
#include <tilebsp/onnx/model.hpp>
#include <tilebsp/tilebsp.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

volatile std::size_t sink;

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* bytes, std::size_t size) {
  namespace tb = tilebsp;
  try {
    auto const m = tb::onnx::Model::parse(std::string_view(reinterpret_cast<char const*>(bytes), size), "fuzz.onnx");
    tb::Graph g{tb::targets::tiny(4, 256 * 1024)};
    tb::Sequence prog;
    tb::onnx::ImportOptions options;
    options.batch_size = 1;
    auto const r = tb::onnx::import(g, prog, m, options);
    sink = r.inputs.size() + r.outputs.size() + prog.size();
  } catch (tb::error const&) {
    return 0;
  }
  // What imports also imports with every node it can run on the host made a host callback (each node folded on
  // zeros of its inputs' shapes), and pipelined over two IPUs at its middle node.
  try {
    auto const m = tb::onnx::Model::parse(std::string_view(reinterpret_cast<char const*>(bytes), size), "fuzz.onnx");
    tb::onnx::ImportOptions options;
    options.batch_size = 1;
    options.excluded_nodes = {"."};
    tb::Graph g{tb::targets::tiny(4, 256 * 1024)};
    tb::Sequence prog;
    sink = tb::onnx::import(g, prog, m, options).outputs.size();
  } catch (tb::error const&) {
  }
  try {
    auto const m = tb::onnx::Model::parse(std::string_view(reinterpret_cast<char const*>(bytes), size), "fuzz.onnx");
    if (m.nodes().size() < 2) return 0;
    tb::onnx::ImportOptions options;
    options.batch_size = 1;
    options.pipeline_split = {m.nodes().size() / 2};
    tb::Graph g{tb::targets::tiny(4, 256 * 1024, 2)};
    tb::Sequence prog;
    sink = tb::onnx::import(g, prog, m, options).stages.size();
  } catch (tb::error const&) {
  }
  return 0;
}
