// libFuzzer harness: the `tilebsp` tool's JSON options (onnx::apply_config: a --config-file, and the options.json
// that `tilebsp convert` writes and `tilebsp run DIR` reads back), a pipeline_cfg, and a pipeline solution (the
// pipeline.pipeconfig of a converted folder) read for a model of three nodes. Whatever each accepts, what is written
// of it must read back to the same (a converted folder runs as it was converted).
#include <tilebsp/core/error.hpp>
#include <tilebsp/onnx/model.hpp>
#include <tilebsp/onnx/options.hpp>
#include <tilebsp/onnx/pipeline.hpp>

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace {

namespace to = tilebsp::onnx;

/// x -> Relu "a" -> Relu "b" -> Relu "c" -> y.
to::Model const& three_nodes() {
  static to::Model const m = [] {
    ::onnx::ModelProto p;
    p.set_ir_version(8);
    p.add_opset_import()->set_version(17);
    auto* g = p.mutable_graph();
    g->set_name("g");
    for (auto* v : {g->add_input(), g->add_output()}) {
      v->set_name(v == &g->input(0) ? "x" : "y");
      auto* t = v->mutable_type()->mutable_tensor_type();
      t->set_elem_type(::onnx::TensorProto::FLOAT);
      t->mutable_shape()->add_dim()->set_dim_value(4);
    }
    char const* names[] = {"a", "b", "c"};
    char const* values[] = {"x", "t1", "t2", "y"};
    for (int i = 0; i < 3; ++i) {
      auto* n = g->add_node();
      n->set_op_type("Relu");
      n->set_name(names[i]);
      n->add_input(values[i]);
      n->add_output(values[i + 1]);
    }
    return to::Model::parse(p.SerializeAsString(), "fuzz.onnx");
  }();
  return m;
}

void pipeline_files(std::string_view text) {
  try {
    to::PipelineConfig const c = to::parse_pipeline_config(text, "fuzz.cfg");
    to::PipelineConfig back;
    try {
      back = to::parse_pipeline_config(to::to_json(c), "back.cfg");
    } catch (tilebsp::option_error const&) {
      __builtin_trap();
    }
    if (to::to_json(back) != to::to_json(c)) __builtin_trap();
  } catch (tilebsp::option_error const&) {
  }
  try {
    to::PipelineSolution const s = to::read_solution(text, "fuzz.pipeconfig", three_nodes());
    if (s.stages() == 0 || s.first_nodes[0] != 0 || s.first_nodes.back() >= 3) __builtin_trap();
    to::PipelineSolution back;
    try {
      back = to::read_solution(to::to_json(s), "back.pipeconfig", three_nodes());
    } catch (tilebsp::option_error const&) {
      __builtin_trap();
    }
    if (back.first_nodes != s.first_nodes) __builtin_trap();
  } catch (tilebsp::option_error const&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* bytes, std::size_t size) {
  pipeline_files(std::string_view(reinterpret_cast<char const*>(bytes), size));
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
