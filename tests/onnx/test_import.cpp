// tilebsp::onnx: models built here with ONNX's own protobuf classes, imported, run and checked against plain
// loops; every bad input the importer names gets its exception type and message checked.
#include <tilebsp/onnx/import.hpp>
#include <tilebsp/onnx/npy.hpp>
#include <tilebsp/onnx/options.hpp>
#include <tilebsp/onnx/pipeline.hpp>
#include <tilebsp/tilebsp.hpp>

#include <onnx/onnx_pb.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace to = tilebsp::onnx;  // ::onnx is ONNX's own namespace
namespace tb = tilebsp;
namespace fs = std::filesystem;

namespace {

/// A ModelProto under construction: opset 17, a graph named "g".
struct Builder {
  ::onnx::ModelProto m;
  Builder() {
    m.set_ir_version(8);
    m.set_producer_name("tilebsp tests");
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(17);
    m.mutable_graph()->set_name("g");
  }
  void value(::onnx::ValueInfoProto* v, std::string const& name, std::vector<std::int64_t> const& dims,
             int type = ::onnx::TensorProto::FLOAT, std::string const& symbolic = "") {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    auto* s = t->mutable_shape();
    for (std::size_t i = 0; i < dims.size(); ++i) {
      auto* d = s->add_dim();
      if (i == 0 && !symbolic.empty()) d->set_dim_param(symbolic);
      else d->set_dim_value(dims[i]);
    }
  }
  void input(std::string const& name, std::vector<std::int64_t> const& dims, int type = ::onnx::TensorProto::FLOAT,
             std::string const& symbolic = "") {
    value(m.mutable_graph()->add_input(), name, dims, type, symbolic);
  }
  void output(std::string const& name, std::vector<std::int64_t> const& dims, int type = ::onnx::TensorProto::FLOAT,
              std::string const& symbolic = "") {
    value(m.mutable_graph()->add_output(), name, dims, type, symbolic);
  }
  ::onnx::TensorProto* init(std::string const& name, std::vector<std::int64_t> const& dims, std::vector<float> const& v) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
    return t;
  }
  void init_ints(std::string const& name, std::vector<std::int64_t> const& v) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_dims(static_cast<std::int64_t>(v.size()));
    for (auto x : v) t->add_int64_data(x);
  }
  ::onnx::NodeProto* node(std::string const& op, std::vector<std::string> const& in, std::vector<std::string> const& out,
                          std::string const& name = "") {
    auto* n = m.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_node" : name);
    for (auto const& i : in) n->add_input(i);
    for (auto const& o : out) n->add_output(o);
    return n;
  }
  static void ints(::onnx::NodeProto* n, std::string const& name, std::vector<std::int64_t> const& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  static void integer(::onnx::NodeProto* n, std::string const& name, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  }
  std::string bytes() const { return m.SerializeAsString(); }
  to::Model model(std::string const& name = "test.onnx") const { return to::Model::parse(bytes(), name); }
};

template <class E>
std::string message_of(auto&& f) {
  try {
    f();
  } catch (E const& e) {
    return e.what();
  }
  return "(no exception)";
}

std::vector<float> ramp(std::size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * scale + offset);
  return v;
}

/// `m` imported at batch 2 into a small target and run once on `x`, on the host kernels or on the vertices.
struct TinyRun {
  tb::Graph g{tb::targets::tiny(4, 1 << 20)};
  std::unique_ptr<tb::Engine> e;
  to::Imported imp;
  to::HostTensor y;
  TinyRun(to::Model const& m, to::HostTensor const& x, bool host_kernels) {
    tb::Sequence prog;
    to::ImportOptions opts;
    opts.batch_size = 2;
    imp = to::import(g, prog, m, opts);
    tb::EngineOptions const eo{.host_threads = 2, .profiling = true, .host_kernels = host_kernels};
    e = std::make_unique<tb::Engine>(tb::compile(g, {.allow_out_of_memory = true}, prog), eo);
    to::write(*e, imp.inputs[0], x);
    e->run();
    y = to::read(*e, imp.outputs[0]);
  }
};

/// Imports, compiles and runs `m` with the given inputs on `threads` host threads; returns the first output.
to::HostTensor run(to::Model const& m, std::vector<to::HostTensor> const& inputs, std::size_t threads = 0,
                     to::ImportOptions const& options = {}, bool host_kernels = true) {
  tb::Graph g{tb::targets::tiny(8, 1 << 20)};
  tb::Sequence prog;
  to::Imported const imp = to::import(g, prog, m, options);
  tb::Engine engine{tb::compile(g, {.allow_out_of_memory = true}, prog), {.host_threads = threads, .host_kernels = host_kernels}};
  for (std::size_t i = 0; i < inputs.size(); ++i) to::write(engine, imp.inputs.at(i), inputs[i]);
  engine.run();
  return to::read(engine, imp.outputs.at(0));
}

}  // namespace

TEST_CASE("a small CNN (Conv + BatchNormalization + Relu + MaxPool + GlobalAveragePool + Gemm) matches plain loops") {
  // x [2, 3, 6, 6] -> conv 3x3 pad 1 (4 channels) -> batch norm -> relu -> max pool 2x2 -> mean -> gemm (5 classes)
  Builder b;
  b.input("x", {2, 3, 6, 6}, ::onnx::TensorProto::FLOAT, "N");
  b.output("y", {2, 5}, ::onnx::TensorProto::FLOAT, "N");
  auto const w = ramp(4 * 3 * 9, 0.37f, 0.1f), bias = ramp(4, 1.1f, 0.3f);
  auto const gamma = std::vector<float>{1.2f, 0.8f, 1.0f, 0.5f}, beta = std::vector<float>{0.1f, -0.2f, 0.3f, 0.0f};
  auto const mean = std::vector<float>{0.05f, -0.1f, 0.2f, 0.0f}, var = std::vector<float>{0.9f, 1.1f, 1.3f, 0.7f};
  auto const fc = ramp(5 * 4, 0.53f, 0.7f), fcb = ramp(5, 0.9f, 0.2f);
  b.init("w", {4, 3, 3, 3}, w);
  b.init("b", {4}, bias);
  b.init("gamma", {4}, gamma);
  b.init("beta", {4}, beta);
  b.init("mean", {4}, mean);
  b.init("var", {4}, var);
  b.init("fc", {5, 4}, fc);
  b.init("fcb", {5}, fcb);
  auto* conv = b.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  Builder::ints(conv, "pads", {1, 1, 1, 1});
  b.node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"n"}, "bn");
  b.node("Relu", {"n"}, {"r"}, "relu");
  auto* pool = b.node("MaxPool", {"r"}, {"p"}, "pool");
  Builder::ints(pool, "kernel_shape", {2, 2});
  Builder::ints(pool, "strides", {2, 2});
  b.node("GlobalAveragePool", {"p"}, {"gap"}, "gap");
  b.node("Flatten", {"gap"}, {"f"}, "flatten");
  auto* gemm = b.node("Gemm", {"f", "fc", "fcb"}, {"y"}, "fc");
  Builder::integer(gemm, "transB", 1);
  to::Model const m = b.model();

  to::HostTensor x{to::DataType::float32, {2, 3, 6, 6}, ramp(2 * 3 * 36, 0.21f, 0.0f), {}};
  // The reference, in double.
  std::vector<double> want(2 * 5);
  for (int n = 0; n < 2; ++n) {
    double feat[4] = {};
    for (int co = 0; co < 4; ++co) {
      double act[6][6];
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j) {
          double s = bias[static_cast<std::size_t>(co)];
          for (int ci = 0; ci < 3; ++ci)
            for (int ki = 0; ki < 3; ++ki)
              for (int kj = 0; kj < 3; ++kj) {
                int const y = i + ki - 1, z = j + kj - 1;
                if (y < 0 || y >= 6 || z < 0 || z >= 6) continue;
                s += static_cast<double>(x.floats[static_cast<std::size_t>(((n * 3 + ci) * 6 + y) * 6 + z)]) *
                     w[static_cast<std::size_t>(((co * 3 + ci) * 3 + ki) * 3 + kj)];
              }
          auto const c = static_cast<std::size_t>(co);
          s = (s - mean[c]) / std::sqrt(static_cast<double>(var[c]) + 1e-5) * gamma[c] + beta[c];
          act[i][j] = std::max(s, 0.0);
        }
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
          feat[co] += std::max({act[2 * i][2 * j], act[2 * i + 1][2 * j], act[2 * i][2 * j + 1], act[2 * i + 1][2 * j + 1]}) / 9;
    }
    for (int k = 0; k < 5; ++k) {
      double s = fcb[static_cast<std::size_t>(k)];
      for (int c = 0; c < 4; ++c) s += feat[c] * fc[static_cast<std::size_t>(k * 4 + c)];
      want[static_cast<std::size_t>(n * 5 + k)] = s;
    }
  }
  to::ImportOptions opts;
  opts.batch_size = 2;
  {
    tb::Graph g{tb::targets::tiny(8, 1 << 20)};
    tb::Sequence prog;
    // The convolution's 2 x 4 x 6 x 6 outputs of 3 x 9 products each, and the 2 x 5 x 4 of the Gemm.
    CHECK(to::import(g, prog, m, opts).multiply_adds == 2 * 4 * 36 * 27 + 2 * 5 * 4);
  }
  to::HostTensor const y = run(m, {x}, 0, opts);
  REQUIRE(y.shape == std::vector<std::int64_t>{2, 5});
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(y.floats[i] == doctest::Approx(want[i]).epsilon(1e-5));

  SUBCASE("the same bits on 1 and 2 host threads, and from the tile vertices as from the host kernels") {
    auto const one = run(m, {x}, 1, opts), two = run(m, {x}, 2, opts), tiles = run(m, {x}, 2, opts, false);
    CHECK(one.floats == y.floats);
    CHECK(two.floats == y.floats);
    CHECK(tiles.floats == y.floats);
  }
  SUBCASE("FP16 with float partials stays within 1e-2 of the reference") {
    to::ImportOptions h = opts;
    h.precision = to::Precision::fp16;
    to::HostTensor const yh = run(m, {x}, 0, h);
    double peak = 0;
    for (double v : want) peak = std::max(peak, std::abs(v));
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(std::abs(yh.floats[i] - want[i]) <= 2e-2 * peak);
  }
}

TEST_CASE("shape subgraphs fold at import: Shape, Gather, Unsqueeze, Concat and Reshape") {
  // y = reshape(x, concat(unsqueeze(shape(x)[0]), [-1])): PyTorch's flatten as exported.
  Builder b;
  b.input("x", {3, 2, 4});
  b.output("y", {3, 8});
  b.init_ints("zero", {0});
  b.init_ints("minus_one", {-1});
  b.node("Shape", {"x"}, {"s"});
  auto* gather = b.node("Gather", {"s", "zero"}, {"n"});
  Builder::integer(gather, "axis", 0);
  auto* cat = b.node("Concat", {"n", "minus_one"}, {"shape"});
  Builder::integer(cat, "axis", 0);
  b.node("Reshape", {"x", "shape"}, {"r"});
  b.node("Relu", {"r"}, {"y"});
  to::HostTensor x{to::DataType::float32, {3, 2, 4}, ramp(24, 0.5f, 0.0f), {}};
  to::HostTensor const y = run(b.model(), {x});
  CHECK(y.shape == std::vector<std::int64_t>{3, 8});
  for (std::size_t i = 0; i < 24; ++i) CHECK(y.floats[i] == std::max(0.0f, x.floats[i]));
}

TEST_CASE("bad models are refused before anything is built, naming the file, node, operator and opset") {
  SUBCASE("not an ONNX file") {
    CHECK(message_of<to::model_error>([] { to::Model::parse("hello, world", "hello.onnx"); }) ==
          "hello.onnx: not an ONNX model (the bytes do not parse as a ModelProto: not ONNX, or truncated)");
  }
  SUBCASE("a truncated file") {
    Builder b;
    b.input("x", {64});
    b.output("y", {64});
    b.init("w", {64}, ramp(64, 0.1f, 0.0f))->clear_float_data();
    b.m.mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(256, '\0'));
    b.node("Add", {"x", "w"}, {"y"});
    std::string const bytes = b.bytes();
    std::string const cut = bytes.substr(0, bytes.size() / 2);
    CHECK_THROWS_AS(to::Model::parse(cut, "cut.onnx"), to::model_error);
    CHECK(message_of<to::model_error>([&] { to::Model::parse(cut, "cut.onnx"); }).starts_with("cut.onnx: "));
  }
  SUBCASE("raw data shorter than the tensor") {
    Builder b;
    b.input("x", {64});
    b.output("y", {64});
    b.init("w", {64}, {})->set_raw_data(std::string(100, '\0'));
    b.node("Add", {"x", "w"}, {"y"});
    CHECK(message_of<to::model_error>([&] { b.model("short.onnx"); }) ==
          "short.onnx: initializer 'w' holds 100 bytes of raw data for 64 elements of 4 bytes (a truncated or corrupt file)");
  }
  SUBCASE("missing external data, and external data outside the model's folder") {
    fs::path const dir = fs::temp_directory_path() / "tilebsp_onnx_external";
    fs::create_directories(dir);
    for (auto [location, problem] : {std::pair{"weights.bin", "cannot be opened"}, std::pair{"../weights.bin", "not a path inside"}}) {
      Builder b;
      b.input("x", {4});
      b.output("y", {4});
      auto* t = b.init("w", {4}, {});
      t->set_data_location(::onnx::TensorProto::EXTERNAL);
      auto* kv = t->add_external_data();
      kv->set_key("location");
      kv->set_value(location);
      b.node("Add", {"x", "w"}, {"y"});
      std::ofstream((dir / "model.onnx").string(), std::ios::binary) << b.bytes();
      std::string const what = message_of<to::model_error>([&] { to::Model::load((dir / "model.onnx").string()); });
      CHECK(what.find("initializer 'w'") != std::string::npos);
      CHECK(what.find(problem) != std::string::npos);
    }
    fs::remove_all(dir);
  }
  SUBCASE("a file over the 2 GiB protobuf parses, refused before its bytes are read") {
    fs::path const dir = fs::temp_directory_path() / "tilebsp_onnx_large";
    fs::create_directories(dir);
    fs::path const big = dir / "big.onnx";
    std::ofstream(big.string(), std::ios::binary) << "x";
    fs::resize_file(big, std::uintmax_t{1} << 31);  // sparse: no disk space, and never read
    CHECK(message_of<to::model_error>([&] { to::Model::load(big.string()); }) ==
          big.string() + ": more than 2 GiB in one file; keep the weights in external data");
    CHECK(message_of<to::model_error>([&] { to::load_tensor(big.string()); }) ==
          big.string() + ": not an ONNX tensor (more than 2 GiB in one file)");
    fs::remove_all(dir);
  }
  SUBCASE("a symbolic dimension the batch size does not fix") {
    Builder b;
    b.input("x", {0, 3}, ::onnx::TensorProto::FLOAT, "N");
    b.output("y", {0, 3}, ::onnx::TensorProto::FLOAT, "N");
    b.node("Relu", {"x"}, {"y"});
    tb::Graph g{tb::targets::tiny(4)};
    tb::Sequence prog;
    CHECK(message_of<tb::shape_error>([&] { to::import(g, prog, b.model(), {}); }) ==
          "test.onnx: input 'x' has the symbolic dimension 0 ('N'); fix it with the batch size");
    to::ImportOptions o;
    o.batch_size = 5;
    CHECK(to::import(g, prog, b.model(), o).inputs.at(0).shape() == std::vector<std::int64_t>{5, 3});
  }
  SUBCASE("shapes a crafted file may hold: a rank-0 MatMul operand, values beyond the bounds (fuzz_onnx_import)") {
    Builder b;
    b.input("a", {2, 3});
    b.input("s", {});
    b.output("y", {2, 3});
    b.node("MatMul", {"a", "s"}, {"y"}, "mm");
    tb::Graph g{tb::targets::tiny(4)};
    tb::Sequence prog;
    CHECK(message_of<to::model_error>([&] { to::import(g, prog, b.model(), {}); }) ==
          "test.onnx: node 'mm' (MatMul, opset 17): an operand of rank 0 (MatMul takes tensors of rank 1 or more)");
    Builder c;
    c.input("x", {1});
    c.output("y", {1});
    c.init_ints("huge", {1 << 20, 1 << 20});
    c.init_ints("large", {1 << 14, 1 << 14});
    c.node("ConstantOfShape", {"huge"}, {"h"}, "fill");
    c.node("Add", {"x", "x"}, {"y"});
    CHECK(message_of<tb::shape_error>([&] { to::import(g, prog, c.model(), {}); }) ==
          "test.onnx: node 'fill' (ConstantOfShape, opset 17): a value of more than 2^31 elements (the tiles index 32 "
          "bits); shape 1048576 x 1048576");
    c.m.mutable_graph()->mutable_node(0)->set_input(0, "large");
    CHECK(message_of<tb::shape_error>([&] { to::import(g, prog, c.model(), {}); }) ==
          "test.onnx: node 'fill' (ConstantOfShape, opset 17): a value folded at import would hold 268435456 "
          "elements, more than the 2^27 the importer computes on the host");
    Builder d;
    d.input("x", {1 << 16, 1 << 16});
    d.output("y", {1 << 16, 1 << 16});
    d.node("Relu", {"x"}, {"y"});
    CHECK(message_of<tb::shape_error>([&] { to::import(g, prog, d.model(), {}); }) ==
          "test.onnx: input 'x': a value of more than 2^31 elements (the tiles index 32 bits); shape 65536 x 65536");
    CHECK(prog.size() == 0);
  }
  SUBCASE("an unsupported operator, attribute and type") {
    Builder b;
    b.input("x", {4});
    b.input("y", {4});
    b.output("z", {4});
    b.node("Mod", {"x", "y"}, {"z"}, "remainder");
    tb::Graph g{tb::targets::tiny(4)};
    tb::Sequence prog;
    CHECK(message_of<to::unsupported_error>([&] { to::import(g, prog, b.model(), {}); }) ==
          "test.onnx: node 'remainder' uses operator Mod (opset 17), which tilebsp does not support");

    Builder p;
    p.input("x", {1, 1, 4, 4});
    p.output("y", {1, 1, 2, 2});
    auto* pool = p.node("MaxPool", {"x"}, {"y"}, "pool");
    Builder::ints(pool, "kernel_shape", {2, 2});
    Builder::ints(pool, "strides", {2, 2});
    Builder::integer(pool, "storage_order", 1);
    CHECK(message_of<to::unsupported_error>([&] { to::import(g, prog, p.model(), {}); }) ==
          "test.onnx: node 'pool' (MaxPool, opset 17): storage_order 1");

    Builder d;
    d.input("x", {4}, ::onnx::TensorProto::DOUBLE);
    d.output("y", {4}, ::onnx::TensorProto::DOUBLE);
    d.node("Relu", {"x"}, {"y"});
    CHECK(message_of<to::unsupported_error>([&] { to::import(g, prog, d.model(), {}); }) ==
          "test.onnx: input 'x' is of type double, which tilebsp does not support");
  }
  SUBCASE("a value that must be known at import") {
    Builder b;
    b.input("x", {2, 3});
    b.input("shape", {2}, ::onnx::TensorProto::INT64);
    b.output("y", {3, 2});
    b.node("Reshape", {"x", "shape"}, {"y"}, "reshape");
    tb::Graph g{tb::targets::tiny(4)};
    tb::Sequence prog;
    std::string const what = message_of<to::unsupported_error>([&] { to::import(g, prog, b.model(), {}); });
    CHECK(what.starts_with("test.onnx: node 'reshape' (Reshape, opset 17): the shape (input 1, 'shape') must be known"));
    to::ImportOptions o;
    o.constant_inputs["shape"] = to::HostTensor{to::DataType::int64, {2}, {}, {3, 2}};
    CHECK(to::import(g, prog, b.model(), o).outputs.at(0).shape() == std::vector<std::int64_t>{3, 2});
    o.constant_inputs["nothing"] = o.constant_inputs["shape"];
    CHECK(message_of<tb::option_error>([&] { to::import(g, prog, b.model(), o); }) ==
          "test.onnx: constant_inputs names 'nothing', which is not an input of the model");
  }
}

TEST_CASE("inputs of the wrong shape or type are refused by name") {
  Builder b;
  b.input("x", {2, 3});
  b.output("y", {2, 3});
  b.node("Relu", {"x"}, {"y"});
  tb::Graph g{tb::targets::tiny(4)};
  tb::Sequence prog;
  auto const imp = to::import(g, prog, b.model(), {});
  tb::Engine engine{tb::compile(g, prog)};
  CHECK(message_of<tb::shape_error>([&] {
          to::write(engine, imp.inputs[0], {to::DataType::float32, {3}, {1, 2, 3}, {}});
        }) == "input 'x' has shape [2, 3], got values of shape [3]");
  CHECK(message_of<tb::type_error>([&] {
          to::write(engine, imp.inputs[0], {to::DataType::int64, {2, 3}, {}, {1, 2, 3, 4, 5, 6}});
        }) == "input 'x' is of type float, got values of type int64");
}

TEST_CASE(".npy files: written and read back; bad files are model_errors naming the file") {
  fs::path const p = fs::temp_directory_path() / "tilebsp_test.npy";
  to::HostTensor const t{to::DataType::float32, {2, 3}, {1, -2, 3.5f, 4, 5, 6}, {}};
  to::save_npy(p.string(), t);
  to::HostTensor const r = to::load_npy(p.string());
  CHECK(r.shape == t.shape);
  CHECK(r.floats == t.floats);
  to::HostTensor const i{to::DataType::int64, {4}, {}, {1, -2, 1 << 30, 7}};
  to::save_npy(p.string(), i);
  CHECK(to::load_npy(p.string()).ints == i.ints);
  std::ifstream f(p, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(message_of<to::model_error>([&] { to::parse_npy(bytes.substr(0, bytes.size() - 3), "cut.npy"); }) ==
        "cut.npy: not a valid .npy file: it holds 29 bytes of data for 4 elements of 8 bytes (a truncated or padded file)");
  CHECK(message_of<to::model_error>([&] { to::parse_npy("PK\x03\x04 not numpy", "zip.npy"); }) ==
        "zip.npy: not a valid .npy file: it does not begin with \\x93NUMPY");
  fs::remove(p);
}

namespace {
/// docs/13-onnx.md's example: a model file run on a modelled IPU.
// [onnx-example]
tilebsp::onnx::HostTensor run_model(std::string const& path, tilebsp::onnx::HostTensor const& images) {
  tilebsp::onnx::Model const model = tilebsp::onnx::Model::load(path);  // read, checked, upgraded to opset 13+
  tilebsp::Graph g{tilebsp::targets::ipu_mk2()};
  tilebsp::Sequence prog;
  tilebsp::onnx::ImportOptions options;
  options.batch_size = images.shape[0];  // fixes the symbolic batch dimension
  tilebsp::onnx::Imported const net = tilebsp::onnx::import(g, prog, model, options);
  tilebsp::Engine engine{tilebsp::compile(g, prog)};
  tilebsp::onnx::write(engine, net.inputs[0], images);  // a HostTensor: e.g. tilebsp::onnx::load_npy("x.npy")
  engine.run();
  return tilebsp::onnx::read(engine, net.outputs[0]);
}
// [onnx-example]
}  // namespace

TEST_CASE("docs/13's example runs a model file") {
  Builder b;
  b.input("x", {0, 2, 3, 3}, ::onnx::TensorProto::FLOAT, "batch");
  b.output("y", {0, 1, 3, 3}, ::onnx::TensorProto::FLOAT, "batch");
  b.init("w", {1, 2, 1, 1}, {0.5f, -2.0f});
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("Sigmoid", {"c"}, {"y"});
  fs::path const path = fs::temp_directory_path() / "tilebsp_docs_example.onnx";
  std::ofstream(path.string(), std::ios::binary) << b.bytes();
  to::HostTensor const x{to::DataType::float32, {3, 2, 3, 3}, ramp(54, 0.3f, 0.1f), {}};
  to::HostTensor const y = run_model(path.string(), x);
  REQUIRE(y.shape == std::vector<std::int64_t>{3, 1, 3, 3});
  for (std::size_t n = 0; n < 3; ++n)
    for (std::size_t p = 0; p < 9; ++p) {
      double const c = 0.5 * x.floats[n * 18 + p] - 2.0 * x.floats[n * 18 + 9 + p];
      CHECK(y.floats[n * 9 + p] == doctest::Approx(1 / (1 + std::exp(-c))).epsilon(1e-6));
    }
  fs::remove(path);
}

namespace {

/// x [1, 2, 5, 5] -> conv "first" (3x3, pad 1, 4 channels) -> Relu -> conv "second" (1x1, 3 channels) -> y.
to::Model two_convs() {
  Builder b;
  b.input("x", {1, 2, 5, 5});
  b.output("y", {1, 3, 5, 5});
  b.init("w1", {4, 2, 3, 3}, ramp(4 * 2 * 9, 0.31f, 0.2f));
  b.init("w2", {3, 4, 1, 1}, ramp(3 * 4, 0.77f, 0.4f));
  Builder::ints(b.node("Conv", {"x", "w1"}, {"c1"}, "block1/first"), "pads", {1, 1, 1, 1});
  b.node("Relu", {"c1"}, {"r1"}, "block1/relu");
  b.node("Conv", {"r1", "w2"}, {"y"}, "block2/second");
  return b.model();
}

/// The IPUs whose tiles hold `t`'s elements.
std::set<std::size_t> ipus_of(tb::Graph const& g, tb::Tensor const& t) {
  std::set<std::size_t> r;
  for (auto const& [tile, _] : g.tile_mapping(t)) r.insert(g.target().ipu_of(tile));
  return r;
}

}  // namespace

TEST_CASE("manual sharding places nodes on IPUs by name; the results are those of one IPU") {
  to::Model const m = two_convs();
  to::HostTensor const x{to::DataType::float32, {1, 2, 5, 5}, ramp(50, 0.17f, 0.3f), {}};
  auto const on = [&](std::size_t ipus, to::ImportOptions const& o, std::set<std::size_t>* where = nullptr) {
    tb::Graph g{tb::targets::tiny(4, 1 << 20, ipus)};
    tb::Sequence prog;
    to::Imported const imp = to::import(g, prog, m, o);
    if (where) {
      *where = ipus_of(g, imp.outputs[0].tensor);
      CHECK(ipus_of(g, imp.inputs[0].tensor) == std::set<std::size_t>{0});  // inputs on IPU 0
    }
    tb::Engine e{tb::compile(g, {.allow_out_of_memory = true}, prog)};
    to::write(e, imp.inputs[0], x);
    e.run();
    return to::read(e, imp.outputs[0]);
  };
  to::HostTensor const one = on(1, {});
  to::ImportOptions o;
  o.manual_sharding = {"^block1/", "^block2/"};
  std::set<std::size_t> where;
  to::HostTensor const two = on(2, o, &where);
  CHECK(where == std::set<std::size_t>{1});  // the second convolution's output lives on IPU 1
  CHECK(two.floats == one.floats);
  o.manual_sharding = {"a", "b", "c"};
  CHECK(message_of<tb::option_error>([&] { on(2, o); }) == "test.onnx: manual_sharding names 3 shards but the target has 2 IPUs");
  o.manual_sharding = {"("};
  CHECK(message_of<tb::option_error>([&] { on(2, o); }).rfind("test.onnx: manual_sharding: '(' is not a valid regular expression", 0) == 0);
}

TEST_CASE("FP16 keeps the nodes named by precision_conversion_excluded_nodes in float") {
  to::Model const m = two_convs();
  to::ImportOptions o;
  o.precision = to::Precision::fp16;
  auto const output_type = [&](to::ImportOptions const& opts) {
    tb::Graph g{tb::targets::tiny(4, 1 << 20)};
    tb::Sequence prog;
    return to::import(g, prog, m, opts).outputs[0].tensor.element_type();
  };
  CHECK(output_type(o) == tb::ElementType::f16);
  o.precision_conversion_excluded_nodes = {"second"};
  CHECK(output_type(o) == tb::ElementType::f32);
  to::HostTensor const x{to::DataType::float32, {1, 2, 5, 5}, ramp(50, 0.17f, 0.3f), {}};
  to::HostTensor const exact = run(m, {x}), mixed = run(m, {x}, 0, o);
  o.precision_conversion_excluded_nodes.clear();
  to::HostTensor const half = run(m, {x}, 0, o);
  double peak = 0, err_mixed = 0, err_half = 0;
  for (std::size_t i = 0; i < exact.floats.size(); ++i) {
    peak = std::max(peak, std::abs(double(exact.floats[i])));
    err_mixed = std::max(err_mixed, std::abs(double(mixed.floats[i]) - exact.floats[i]));
    err_half = std::max(err_half, std::abs(double(half.floats[i]) - exact.floats[i]));
  }
  CHECK(err_mixed <= 2e-2 * peak);
  CHECK(err_half <= 2e-2 * peak);
}

TEST_CASE("run options: by name, from JSON config files, and the model's written back") {
  to::RunOptions o;
  to::set_option(o, "--batch_size", "4");
  to::set_option(o, "precision-mode", "FP16");
  to::set_option(o, "--manual-sharding", "^a,^b");
  CHECK(o.import.batch_size == 4);
  CHECK(o.import.precision == to::Precision::fp16);
  CHECK(o.import.manual_sharding == std::vector<std::string>{"^a", "^b"});
  to::apply_config(o, R"({"conv_amp": 0.25, "num-ipus": 2, "precision_conversion_excluded_nodes": ["x,y", "z"],
                          "matmul_partial_type": "half", "inputs": ["a=1.npy", "b=2.npy"]})",
                   "c.json");
  CHECK(o.import.conv_amp == 0.25);
  CHECK(o.num_ipus == 2);
  CHECK(o.import.precision_conversion_excluded_nodes == std::vector<std::string>{"x,y", "z"});
  CHECK(o.import.matmul_partials == tb::ElementType::f16);
  CHECK(o.inputs == std::vector<std::string>{"a=1.npy", "b=2.npy"});
  to::RunOptions back;
  to::apply_config(back, to::model_config(o), "options.json");
  CHECK(to::model_config(back) == to::model_config(o));
  CHECK(back.import.manual_sharding == o.import.manual_sharding);
  to::apply_config(back, R"({"pipeline_cfg": {"converter": "manual", "manual_pipeline_config": ["^a", "^b"]}, "replicas": 2,
                             "excluded_nodes": ["a"]})", "p.json");
  REQUIRE(back.pipeline.has_value());
  CHECK(back.pipeline->converter == to::PipelineConfig::Converter::manual);
  CHECK(back.pipeline->manual_pipeline_config == std::vector<std::string>{"^a", "^b"});
  CHECK(back.replicas == 2);
  CHECK(back.import.excluded_nodes == std::vector<std::string>{"a"});
  to::RunOptions again;
  to::apply_config(again, to::model_config(back), "options.json");
  CHECK(to::model_config(again) == to::model_config(back));

  CHECK(message_of<tb::option_error>([&] { to::set_option(o, "--batch-size", "0"); }) ==
        "--batch-size must be an integer in [1, 2^31], got '0'");
  CHECK(message_of<tb::option_error>([&] { to::set_option(o, "--conv-amp", "1.5"); }) ==
        "--conv-amp must be a number in [0, 1], got '1.5'");
  CHECK(message_of<tb::option_error>([&] { to::set_option(o, "--frobnicate", "1"); }) == "unknown option --frobnicate");
  CHECK(o.reuse_host_memory);
  to::apply_config(o, R"({"reuse_host_memory": false})", "c.json");
  CHECK(!o.reuse_host_memory);
  to::set_option(o, "--reuse-host-memory", "true");
  CHECK(o.reuse_host_memory);
  CHECK(message_of<tb::option_error>([&] { to::set_option(o, "--reuse-host-memory", "1"); }) ==
        "--reuse-host-memory must be true or false, got '1'");
  CHECK(message_of<tb::option_error>([&] { to::apply_config(o, R"({"batch_size": 2,})", "c.json"); }) ==
        "c.json: not valid JSON at offset 17: expected a string in double quotes");
  CHECK(message_of<tb::option_error>([&] { to::apply_config(o, R"({"batch_size": [1, 2]})", "c.json"); }) ==
        "c.json: \"batch_size\": takes one value, not a list");
  CHECK(message_of<tb::option_error>([&] { to::apply_config(o, R"({"precision_mode": "FP8"})", "c.json"); }) ==
        "c.json: \"precision_mode\": --precision-mode must be FP32 or FP16, got 'FP8'");
  CHECK(message_of<tb::option_error>([&] { to::apply_config(o, R"({"batch_size": 2, "batch_size": 3})", "c.json"); }) ==
        "c.json: not valid JSON at offset 18: the key \"batch_size\" appears twice in one object");
  CHECK(message_of<tb::option_error>([&] { to::apply_config(o, R"({"batch_size": 2, "batch-size": 3})", "c.json"); }) ==
        "c.json: \"batch-size\" and \"batch_size\" name one option, --batch-size; give it once");
  CHECK(message_of<tb::option_error>([&] { to::apply_config(o, "[1]", "c.json"); }) ==
        "c.json: a config file holds one JSON object of options");
  CHECK(message_of<tb::option_error>([&] { to::apply_config(o, std::string(40, '[') + std::string(40, ']'), "c.json"); }) ==
        "c.json: not valid JSON at offset 33: nested more than 32 deep");
}

namespace {

/// x [1, 2, 5, 5] -> "s0/conv" (3x3, 4 channels) -> "s0/relu" (fused into it) -> "s1/conv" (1x1) -> "s2/conv" (1x1)
/// -> "s2/add" (+ the ReLU's result, which crosses two stages) -> y.
to::Model chain() {
  Builder b;
  b.input("x", {1, 2, 5, 5});
  b.output("y", {1, 4, 5, 5});
  b.init("w1", {4, 2, 3, 3}, ramp(4 * 2 * 9, 0.31f, 0.2f));
  b.init("w2", {4, 4, 1, 1}, ramp(16, 0.77f, 0.4f));
  b.init("w3", {4, 4, 1, 1}, ramp(16, 0.53f, 0.9f));
  Builder::ints(b.node("Conv", {"x", "w1"}, {"c1"}, "s0/conv"), "pads", {1, 1, 1, 1});
  b.node("Relu", {"c1"}, {"r1"}, "s0/relu");
  b.node("Conv", {"r1", "w2"}, {"c2"}, "s1/conv");
  b.node("Conv", {"c2", "w3"}, {"c3"}, "s2/conv");
  b.node("Add", {"c3", "r1"}, {"y"}, "s2/add");
  return b.model();
}

/// Imports `m` with `o` on `ipus` IPUs of 4 tiles, pipelined over `micro_batches` when it has stages, and runs it.
to::HostTensor run_pipelined(to::Model const& m, to::ImportOptions const& o, std::size_t ipus, std::size_t micro_batches,
                             std::size_t threads = 0, std::vector<std::size_t>* receives = nullptr) {
  to::HostTensor const x{to::DataType::float32, {1, 2, 5, 5}, ramp(50, 0.17f, 0.3f), {}};
  tb::Graph g{tb::targets::tiny(4, 1 << 20, ipus)};
  tb::Sequence prog;
  to::Imported imp = to::import(g, prog, m, o);
  if (receives)
    for (auto const& st : imp.stages) receives->push_back(st.receives.size());
  tb::Program const p = imp.stages.empty() ? tb::Program(std::move(prog))
                                           : tb::Program(tb::pipeline({.micro_batches = micro_batches}, std::move(imp.stages)));
  tb::Engine e{tb::compile(g, {.allow_out_of_memory = true}, p), {.host_threads = threads}};
  to::write(e, imp.inputs[0], x);
  e.run();
  return to::read(e, imp.outputs[0]);
}

}  // namespace

TEST_CASE("pipelines: stages by expressions or by a split; the results are bitwise those of one IPU") {
  to::Model const m = chain();
  to::HostTensor const one = run_pipelined(m, {}, 1, 1);
  to::ImportOptions o;
  o.pipeline_stages = {"^s0/", "^s1/", "^s2/"};
  std::vector<std::size_t> receives;
  CHECK(run_pipelined(m, o, 3, 3, 1, &receives).floats == one.floats);
  CHECK(receives == std::vector<std::size_t>{0, 1, 2});  // stage 2 receives c2 from stage 1 and r1 from stage 0
  CHECK(run_pipelined(m, o, 3, 5, 3).floats == one.floats);  // more micro-batches, other thread counts: the same
  o.pipeline_stages = {"^s0/", "^s1/"};  // s2's nodes match nothing: they follow their inputs into stage 1
  receives.clear();
  CHECK(run_pipelined(m, o, 2, 2, 0, &receives).floats == one.floats);
  CHECK(receives == std::vector<std::size_t>{0, 1});
  o.pipeline_stages.clear();
  o.pipeline_split = {2, 3};  // the same three stages as a split of the node order
  CHECK(run_pipelined(m, o, 3, 3).floats == one.floats);

  // Errors, before anything runs.
  CHECK(message_of<tb::option_error>([&] { run_pipelined(m, o, 2, 3); }) ==
        "test.onnx: the pipeline has 3 stages but the target has 2 IPUs (one stage per IPU)");
  o.pipeline_split = {3, 2};
  CHECK(message_of<tb::option_error>([&] { run_pipelined(m, o, 3, 3); }) ==
        "test.onnx: pipeline_split: stage 2 begins at node 2; the first nodes of stages 1, 2, ... must increase strictly "
        "within the model's 5 nodes, after node 0");
  o.pipeline_split = {1};
  o.pipeline_stages = {"a", "b"};
  CHECK(message_of<tb::option_error>([&] { run_pipelined(m, o, 2, 2); }) ==
        "test.onnx: give the pipeline stages either as regular expressions (pipeline_stages) or as a split (pipeline_split), not both");
  o.pipeline_split.clear();
  o.manual_sharding = {"a"};
  CHECK(message_of<tb::option_error>([&] { run_pipelined(m, o, 2, 2); }) ==
        "test.onnx: a pipeline places its stages on the IPUs itself; manual_sharding cannot be given beside it");
  o.manual_sharding.clear();
  o.pipeline_stages = {"^s1/", "^s0/"};  // the first convolution after the second
  CHECK(message_of<tb::option_error>([&] { run_pipelined(m, o, 2, 2); }) ==
        "test.onnx: node 's1/conv' (Conv, opset 17): the node is in pipeline stage 0 but its input 'r1' is computed in "
        "the later stage 1; a stage can only read what earlier stages computed");
  o.pipeline_stages = {"("};
  CHECK(message_of<tb::option_error>([&] { run_pipelined(m, o, 2, 2); }).rfind("test.onnx: pipeline_stages: '(' is not a valid regular expression", 0) == 0);
}

TEST_CASE("excluded nodes run on the host, between the tiles' steps; operators the host cannot run are refused") {
  to::Model const m = chain();
  to::HostTensor const one = run_pipelined(m, {}, 1, 1);
  to::ImportOptions o;
  o.excluded_nodes = {"relu$", "/add"};  // the ReLU is no longer fused into the convolution before it
  {
    tb::Graph g{tb::targets::tiny(4, 1 << 20)};
    tb::Sequence prog;
    to::Imported const imp = to::import(g, prog, m, o);
    std::size_t host_steps = 0;
    tb::Engine e{tb::compile(g, {.allow_out_of_memory = true}, prog), {.profiling = true}};
    to::write(e, imp.inputs[0], {to::DataType::float32, {1, 2, 5, 5}, ramp(50, 0.17f, 0.3f), {}});
    e.run();
    tb::Profile const profile = e.profile();
    for (auto const& step : profile.programs.at(0)) host_steps += step.kind == "host";
    CHECK(host_steps == 2);
    CHECK(to::read(e, imp.outputs[0]).floats == one.floats);  // max(x, 0) and a float sum: exact on the host too
  }
  CHECK(run_pipelined(m, o, 1, 1, 3).floats == one.floats);
  o.pipeline_stages = {"^s0/", "^s1/", "^s2/"};  // host nodes inside pipeline stages
  CHECK(run_pipelined(m, o, 3, 3).floats == one.floats);
  o.pipeline_stages.clear();
  o.excluded_nodes = {"s1/conv"};
  CHECK(message_of<to::unsupported_error>([&] { run_pipelined(m, o, 1, 1); }) ==
        "test.onnx: node 's1/conv' (Conv, opset 17): the node is excluded to run on the host (excluded_nodes), but the host "
        "runs only the operators the importer folds (elementwise, casts, shape and data-movement operators), not Conv");
  o.excluded_nodes = {"["};
  CHECK(message_of<tb::option_error>([&] { run_pipelined(m, o, 1, 1); }).rfind("test.onnx: excluded_nodes: '[' is not a valid regular expression", 0) == 0);
}

namespace {
/// docs/13-onnx.md's pipeline example: a model split over IPUs by its nodes' estimated cycles and run pipelined.
// [onnx-pipeline-example]
tilebsp::onnx::HostTensor run_pipelined_model(tilebsp::onnx::Model const& model, tilebsp::onnx::HostTensor const& images) {
  tilebsp::onnx::ImportOptions options;
  tilebsp::onnx::PipelineConfig config;  // converter auto, priority cycle
  config.min_ipu_quantity = 2;
  config.max_ipu_quantity = 4;
  std::size_t const micro_batches = 8;
  tilebsp::onnx::PipelineSolution const split =
      tilebsp::onnx::plan_pipeline(model, options, config, micro_batches, tilebsp::targets::ipu_mk2(1));
  options.pipeline_split = split.split();  // the first node of each stage after the first
  tilebsp::Graph g{tilebsp::targets::ipu_mk2(split.stages())};
  tilebsp::Sequence unused;  // a pipelined import returns its stages instead
  tilebsp::onnx::Imported net = tilebsp::onnx::import(g, unused, model, options);
  tilebsp::Engine engine{tilebsp::compile(g, tilebsp::pipeline({.micro_batches = micro_batches}, std::move(net.stages)))};
  tilebsp::onnx::write(engine, net.inputs[0], images);  // every micro-batch reads it
  engine.run();
  return tilebsp::onnx::read(engine, net.outputs[0]);
}
// [onnx-pipeline-example]
}  // namespace

TEST_CASE("docs/13's pipeline example: the outputs of one IPU") {
  to::Model const m = chain();
  to::HostTensor const x{to::DataType::float32, {1, 2, 5, 5}, ramp(50, 0.17f, 0.3f), {}};
  tb::Graph g{tb::targets::ipu_mk2()};
  tb::Sequence prog;
  to::Imported const imp = to::import(g, prog, m, {});
  tb::Engine e{tb::compile(g, prog)};
  to::write(e, imp.inputs[0], x);
  e.run();
  CHECK(run_pipelined_model(m, x).floats == to::read(e, imp.outputs[0]).floats);
}

TEST_CASE("pipelines: auto balances the nodes' estimated cycles; its solution reads back; pipeline_cfg's errors") {
  to::Model const m = chain();
  tb::Target const ipu = tb::targets::tiny(4, 1 << 20);
  auto const costs = to::node_costs(m, {}, ipu);
  REQUIRE(costs.size() == 5);
  CHECK(costs[0].cycles > 0);
  CHECK(costs[1].cycles == 0);  // the ReLU runs inside the convolution
  CHECK(costs[0].parameter_bytes == 4 * 2 * 9 * 4);
  REQUIRE(costs[0].outputs.size() == 1);  // r1 (the fused ReLU's result), last read by the add
  CHECK(costs[0].outputs[0].last_reader == 4);
  CHECK(costs[0].outputs[0].bytes == 100 * 4);

  to::PipelineConfig c;
  c.min_ipu_quantity = 2;
  c.max_ipu_quantity = 3;
  to::PipelineSolution const s = to::plan_pipeline(m, {}, c, 4, ipu);
  REQUIRE(s.stages() >= 2);
  REQUIRE(s.stages() <= 3);
  CHECK(s.first_nodes[0] == 0);
  CHECK(s.nodes == 5);
  CHECK(s.stage_cycles.size() == s.stages());
  std::uint64_t total = 0;
  for (auto x : s.stage_cycles) total += x;
  std::uint64_t all = 0;
  for (auto const& x : costs) all += x.cycles;
  CHECK(total == all);
  // The solution as written and read back, and the model it describes run pipelined: as one IPU.
  to::PipelineSolution const back = to::read_solution(to::to_json(s), "s.pipeconfig", m);
  CHECK(back.first_nodes == s.first_nodes);
  to::ImportOptions o;
  o.pipeline_split = back.split();
  CHECK(run_pipelined(m, o, s.stages(), 4).floats == run_pipelined(m, {}, 1, 1).floats);
  // memory: the fewest IPUs whose parameters fit (all of them fit one IPU's half here).
  c.priority = to::PipelineConfig::Priority::memory;
  CHECK(to::plan_pipeline(m, {}, c, 4, ipu).stages() == 2);

  CHECK(message_of<tb::option_error>([&] { to::plan_pipeline(m, {}, c, 1, ipu); }) ==
        "test.onnx: pipeline_cfg: no IPU count in [2, 3] suits 1 micro-batches per run (batch_per_step) and 5 nodes: a "
        "pipeline needs at least one micro-batch and one node per stage");
  CHECK(message_of<tb::option_error>([&] { to::read_solution(R"({"nodes": 4, "stages": [{"first_node": 0}]})", "s.json", m); }) ==
        "s.json: the solution is for a model of 4 nodes, but test.onnx has 5");
  CHECK(message_of<tb::option_error>([&] {
          to::read_solution(R"({"nodes": 5, "stages": [{"first_node": 0}, {"first_node": 2, "first_node_name": "other"}]})", "s.json", m);
        }) == "s.json: stage 1 begins at node 2 'other', but that node of test.onnx is 's1/conv': the solution was made for another model");
  CHECK(message_of<tb::option_error>([&] { to::read_solution(R"({"nodes": 5, "stages": [{"first_node": 0, "first_node": 2}]})", "s.json", m); }) ==
        "s.json: not valid JSON at offset 42: the key \"first_node\" appears twice in one object");
  CHECK(message_of<tb::option_error>([&] { to::read_solution(R"({"nodes": 5, "stages": [{"first_node": 0}, {"first_node": 0}]})", "s.json", m); }) ==
        "s.json: stage 1 begins at node 0; stage 0 begins at node 0 and each later stage after the one before, within the model's nodes");

  to::PipelineConfig const p = to::parse_pipeline_config(
      R"({"converter": "auto", "priority": "memory", "min_ipu_quantity": 3, "max_ipu_quantity": 4, "solution_dir": "d"})", "cfg");
  CHECK(p.priority == to::PipelineConfig::Priority::memory);
  CHECK(p.min_ipu_quantity == 3);
  CHECK(p.max_ipu_quantity == 4);
  CHECK(to::to_json(to::parse_pipeline_config(to::to_json(p), "back")) == to::to_json(p));
  auto const refused = [](char const* json) { return message_of<tb::option_error>([&] { to::parse_pipeline_config(json, "cfg"); }); };
  CHECK(refused(R"({"converter": "fast"})") == "cfg: \"converter\" must be auto, manual or load, got 'fast'");
  CHECK(refused(R"({"priority": "cycle"})") == "cfg: pipeline_cfg needs a \"converter\": auto, manual or load");
  CHECK(refused(R"({"converter": "manual"})") == "cfg: the manual converter needs \"manual_pipeline_config\": one regular expression per stage");
  CHECK(refused(R"({"converter": "load"})") == "cfg: the load converter needs \"solution_path\": a solution written by the auto converter");
  CHECK(refused(R"({"converter": "auto", "min_ipu_quantity": 4, "max_ipu_quantity": 2})") == "cfg: min_ipu_quantity 4 exceeds max_ipu_quantity 2");
  CHECK(refused(R"({"converter": "auto", "min_ipu_quantity": 0})") == "cfg: \"min_ipu_quantity\" must be an integer of at least 1, got '0'");
  CHECK(refused(R"({"converter": "auto", "fine_tune_iterations": 5})") ==
        "cfg: \"fine_tune_iterations\" (ipu_saved_model_cli's profiling of candidate splits on hardware) does not apply: "
        "tilebsp balances the stages by its cost model, without running them");
  CHECK(refused(R"({"converter": "auto", "depth": 5})").rfind("cfg: unknown pipeline_cfg key \"depth\"", 0) == 0);
  CHECK(refused("[]") == "cfg: pipeline_cfg must be a JSON object");
}

TEST_CASE("a global average pool of a convolution's channels-last result runs as a product, with the mean's values") {
  Builder b;
  b.input("x", {2, 2, 5, 5});
  b.output("y", {2, 4, 1, 1});
  b.output("c", {2, 4, 5, 5});
  b.init("w1", {4, 2, 3, 3}, ramp(4 * 2 * 9, 0.31f, 0.2f));
  Builder::ints(b.node("Conv", {"x", "w1"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  b.node("GlobalAveragePool", {"c"}, {"y"}, "pool");
  to::Model const m = b.model();
  tb::Graph g{tb::targets::tiny(4, 1 << 20)};
  tb::Sequence prog;
  to::Imported const imp = to::import(g, prog, m, {});
  tb::Engine e{tb::compile(g, {.allow_out_of_memory = true}, prog), {.profiling = true}};
  to::write(e, imp.inputs[0], {to::DataType::float32, {2, 2, 5, 5}, ramp(100, 0.17f, 0.3f), {}});
  e.run();
  to::HostTensor const y = to::read(e, imp.outputs[0]), c = to::read(e, imp.outputs[1]);
  REQUIRE(y.shape == std::vector<std::int64_t>{2, 4, 1, 1});
  for (std::size_t i = 0; i < 8; ++i) {
    double sum = 0;
    for (std::size_t p = 0; p < 25; ++p) sum += c.floats[i * 25 + p];
    CHECK(y.floats[i] == doctest::Approx(sum / 25).epsilon(1e-6));
  }
  tb::Profile const profile = e.profile();
  bool product = false;
  for (auto const& op : profile.operators)
    if (op.name == "pool") product = !op.plans.empty() && op.plans[0].rfind("matmul 2 groups of 1x25 * 25x4", 0) == 0;
  CHECK(product);
}

TEST_CASE("a batch norm after a concatenation is one compiled map with the ReLU that reads it, on the host path") {
  // x [2, 3, 5, 5] -> 1x1 conv (16 channels, channels-last) -> Concat of that one tensor -> batch norm -> relu: the
  // single part keeps its layout, so the map runs over channels-last data on its host kernel, ReLU included.
  Builder b;
  b.input("x", {2, 3, 5, 5}, ::onnx::TensorProto::FLOAT, "N");
  b.output("y", {2, 16, 5, 5}, ::onnx::TensorProto::FLOAT, "N");
  auto const w = ramp(16 * 3, 0.41f, 0.2f), gamma = ramp(16, 0.7f, 0.4f), beta = ramp(16, 0.3f, 1.0f);
  auto const mean = ramp(16, 0.9f, 0.0f);
  std::vector<float> var = ramp(16, 0.5f, 0.6f);
  for (float& v : var) v = 1.0f + 0.5f * v;  // positive
  b.init("w", {16, 3, 1, 1}, w);
  b.init("gamma", {16}, gamma);
  b.init("beta", {16}, beta);
  b.init("mean", {16}, mean);
  b.init("var", {16}, var);
  b.node("Conv", {"x", "w"}, {"c"}, "conv");
  Builder::integer(b.node("Concat", {"c"}, {"cat"}, "cat"), "axis", 1);
  b.node("BatchNormalization", {"cat", "gamma", "beta", "mean", "var"}, {"n"}, "bn");
  b.node("Relu", {"n"}, {"y"}, "relu");
  to::Model const m = b.model();
  to::HostTensor const x{to::DataType::float32, {2, 3, 5, 5}, ramp(150, 0.23f, 0.1f), {}};
  std::vector<float> first;
  for (bool host : {true, false}) {
    TinyRun const run(m, x, host);
    to::HostTensor const& y = run.y;
    REQUIRE(y.shape == std::vector<std::int64_t>{2, 16, 5, 5});
    for (std::size_t n = 0; n < 2; ++n)
      for (std::size_t co = 0; co < 16; ++co)
        for (std::size_t p = 0; p < 25; ++p) {
          double s = 0;
          for (std::size_t ci = 0; ci < 3; ++ci) s += static_cast<double>(x.floats[(n * 3 + ci) * 25 + p]) * w[co * 3 + ci];
          s = (s - mean[co]) / std::sqrt(static_cast<double>(var[co]) + 1e-5) * gamma[co] + beta[co];
          CHECK(y.floats[(n * 16 + co) * 25 + p] == doctest::Approx(std::max(s, 0.0)).epsilon(1e-5));
        }
    if (first.empty()) first = y.floats;
    CHECK(y.floats == first);  // bitwise, host kernels or vertices
    tb::Profile const profile = run.e->profile();
    for (auto const& op : profile.operators) {
      if (op.name == "bn") CHECK(op.compute_sets == 1);
      CHECK(op.name != "relu");  // built into the batch norm's map
    }
    if (host) {
      std::size_t host_paths = 0;
      for (auto const& step : profile.programs.at(0))
        if (step.kind == "host_path") {
          ++host_paths;
          CHECK(step.label.find("(body runs)") == std::string::npos);
        }
      CHECK(host_paths == 2);  // the convolution and the map, each on its host kernel
    }
  }
}

TEST_CASE("zeros a Pad puts around what only a convolution or an average pool reads become that node's padding") {
  // x [2, 3, 6, 5] -> Pad (H 1 | 2, W 2 | 0) -> AveragePool 3x3 (its own pads 1, count_include_pad 0 or 1) and,
  // on another Pad, a 3x3 convolution. Folded, nothing copies the padded activations; the values are those of the
  // same model with the padded values also graph outputs (then materialised), and of plain loops for the pool.
  auto const model = [](bool expose, std::int64_t include) {
    Builder b;
    b.input("x", {2, 3, 6, 5});
    b.output("pool", {2, 3, 9, 7});
    b.output("conv", {2, 4, 7, 5});
    if (expose) {
      b.output("p1", {2, 3, 9, 7});
      b.output("p2", {2, 3, 9, 7});
    }
    b.init_ints("pads", {0, 0, 1, 2, 0, 0, 2, 0});
    b.init("w", {4, 3, 3, 3}, ramp(4 * 27, 0.31f, 0.5f));
    b.node("Pad", {"x", "pads"}, {"p1"}, "pad1");
    b.node("Pad", {"x", "pads"}, {"p2"}, "pad2");
    auto* pool = b.node("AveragePool", {"p1"}, {"pool"}, "pool");
    Builder::ints(pool, "kernel_shape", {3, 3});
    Builder::ints(pool, "pads", {1, 1, 1, 1});
    Builder::integer(pool, "count_include_pad", include);
    Builder::ints(b.node("Conv", {"p2", "w"}, {"conv"}, "conv"), "kernel_shape", {3, 3});
    return b.model();
  };
  to::HostTensor const x{to::DataType::float32, {2, 3, 6, 5}, ramp(180, 0.19f, 0.2f), {}};
  auto const outputs = [&](to::Model const& m) {
    tb::Graph g{tb::targets::tiny(4, 1 << 20)};
    tb::Sequence prog;
    to::Imported const imp = to::import(g, prog, m, {});
    tb::Engine e{tb::compile(g, {.allow_out_of_memory = true}, prog), {.host_threads = 2, .profiling = true}};
    to::write(e, imp.inputs[0], x);
    e.run();
    std::size_t copies = 0;  // exchanges that are not a compute set's fetch: the padded values' copies
    tb::Profile const profile = e.profile();
    for (auto const& step : profile.programs.at(0)) copies += step.label.rfind("exchange", 0) == 0;
    return std::make_tuple(to::read(e, imp.outputs[0]), to::read(e, imp.outputs[1]), copies);
  };
  for (std::int64_t include : {0, 1}) {
    CAPTURE(include);
    auto const [pool, conv, copies] = outputs(model(false, include));
    auto const [pool_ref, conv_ref, copies_ref] = outputs(model(true, include));
    CHECK(copies == 0);
    CHECK(copies_ref > 0);
    REQUIRE(pool.shape == std::vector<std::int64_t>{2, 3, 9, 7});
    REQUIRE(conv.shape == std::vector<std::int64_t>{2, 4, 7, 5});
    for (std::size_t i = 0; i < pool.floats.size(); ++i) CHECK(pool.floats[i] == doctest::Approx(pool_ref.floats[i]).epsilon(1e-6));
    for (std::size_t i = 0; i < conv.floats.size(); ++i) CHECK(conv.floats[i] == doctest::Approx(conv_ref.floats[i]).epsilon(1e-6));
    // The pool by its definition: the padded input (9 x 7, the Pad's zeros are data) padded again by 1, its own
    // pads counted only with count_include_pad.
    for (std::size_t nc = 0; nc < 6; ++nc)
      for (std::int64_t i = 0; i < 9; ++i)
        for (std::int64_t j = 0; j < 7; ++j) {
          double sum = 0;
          int n = 0;
          for (std::int64_t di = -1; di <= 1; ++di)
            for (std::int64_t dj = -1; dj <= 1; ++dj) {
              std::int64_t const pi = i + di, pj = j + dj;  // in the Pad's output
              if (pi < 0 || pi >= 9 || pj < 0 || pj >= 7) {
                n += include != 0;
                continue;
              }
              ++n;
              std::int64_t const xi = pi - 1, xj = pj - 2;  // in x
              if (xi >= 0 && xi < 6 && xj >= 0 && xj < 5) sum += x.floats[nc * 30 + static_cast<std::size_t>(xi * 5 + xj)];
            }
          CHECK(pool.floats[nc * 63 + static_cast<std::size_t>(i * 7 + j)] == doctest::Approx(sum / n).epsilon(1e-5));
        }
  }
}

TEST_CASE("Gemm of integers with transposed constants is refused by its element type, not read as floats") {
  // int64 A [2, 3] and a constant B [4, 3] (transB): B is transposed on the host as integers (the transpose once
  // indexed the floats of an int tensor: out of bounds), then the product refuses the type.
  Builder b;
  b.input("a", {2, 3}, ::onnx::TensorProto::INT64);
  b.output("y", {2, 4}, ::onnx::TensorProto::INT64);
  b.init_ints("flat", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  b.init_ints("shape", {4, 3});
  b.node("Reshape", {"flat", "shape"}, {"w"}, "reshape");
  auto* gemm = b.node("Gemm", {"a", "w"}, {"y"}, "gemm");
  auto* t = gemm->add_attribute();
  t->set_name("transB");
  t->set_type(::onnx::AttributeProto::INT);
  t->set_i(1);
  tb::Graph g{tb::targets::tiny(2)};
  tb::Sequence prog;
  CHECK(message_of<to::unsupported_error>([&] { to::import(g, prog, b.model(), {}); }) ==
        "test.onnx: node 'gemm' (Gemm, opset 17): element type int64 (this operator takes floating types)");
}

TEST_CASE("a linear layer's bias (MatMul + Add, Gemm's C) and its ReLU run in place on the product") {
  // x [2, 3, 8] x W [8, 16] + b [16] -> relu, and Gemm(x2 [6, 8], W, C [1, 16]) -> relu: no Add or Relu of their own.
  Builder b;
  b.input("x", {2, 3, 8});
  b.input("x2", {6, 8});
  b.output("y", {2, 3, 16});
  b.output("z", {6, 16});
  auto const w = ramp(8 * 16, 0.29f, 0.4f), bias = ramp(16, 0.7f, 0.1f);
  b.init("w", {8, 16}, w);
  b.init("b", {16}, bias);
  b.init("c", {1, 16}, bias);
  b.node("MatMul", {"x", "w"}, {"p"}, "mm");
  b.node("Add", {"b", "p"}, {"s"}, "add");
  b.node("Relu", {"s"}, {"y"}, "relu");
  b.node("Gemm", {"x2", "w", "c"}, {"g"}, "gemm");
  b.node("Relu", {"g"}, {"z"}, "relu2");
  to::Model const m = b.model();
  to::HostTensor const x{to::DataType::float32, {2, 3, 8}, ramp(48, 0.13f, 0.9f), {}};
  to::HostTensor const x2{to::DataType::float32, {6, 8}, ramp(48, 0.17f, 0.2f), {}};
  tb::Graph g{tb::targets::tiny(4, 1 << 20)};
  tb::Sequence prog;
  to::Imported const imp = to::import(g, prog, m, {});
  tb::Engine e{tb::compile(g, {.allow_out_of_memory = true}, prog), {.host_threads = 2, .profiling = true}};
  to::write(e, imp.inputs[0], x);
  to::write(e, imp.inputs[1], x2);
  e.run();
  to::HostTensor const y = to::read(e, imp.outputs[0]), z = to::read(e, imp.outputs[1]);
  for (std::size_t r = 0; r < 6; ++r)
    for (std::size_t c = 0; c < 16; ++c) {
      double s = bias[c], t = bias[c];
      for (std::size_t k = 0; k < 8; ++k) {
        s += static_cast<double>(x.floats[r * 8 + k]) * w[k * 16 + c];
        t += static_cast<double>(x2.floats[r * 8 + k]) * w[k * 16 + c];
      }
      CHECK(y.floats[r * 16 + c] == doctest::Approx(std::max(s, 0.0)).epsilon(1e-5));
      CHECK(z.floats[r * 16 + c] == doctest::Approx(std::max(t, 0.0)).epsilon(1e-5));
    }
  tb::Profile const profile = e.profile();
  for (auto const& op : profile.operators) CHECK((op.kind != "Add" && op.kind != "Relu"));
}

TEST_CASE("an exact GELU after a linear layer (Div, Erf, Add, Mul, Mul as PyTorch exports it) joins its bias map") {
  // x [2, 3, 8] x W [8, 16] + b -> gelu -> y: one map in place on the product, the GELU's nodes fused into it. The
  // same chain on z = x2 x W, whose Erf a second output also reads, stays as it is, with the same values.
  Builder b;
  b.input("x", {2, 3, 8});
  b.output("y", {2, 3, 16});
  b.output("z", {2, 3, 16});
  b.output("e2", {2, 3, 16});
  auto const w = ramp(8 * 16, 0.29f, 0.4f), bias = ramp(16, 0.7f, 0.1f);
  b.init("w", {8, 16}, w);
  b.init("b", {16}, bias);
  b.init("sqrt2", {}, {1.4142135f});
  b.init("one", {1}, {1.0f});
  b.init("half", {}, {0.5f});
  auto const gelu = [&](std::string const& in, std::string const& out, std::string const& p) {
    b.node("Div", {in, "sqrt2"}, {p + "d"}, p + "div");
    b.node("Erf", {p + "d"}, {p + "e"}, p + "erf");
    b.node("Add", {p + "e", "one"}, {p + "a"}, p + "add1");
    b.node("Mul", {in, p + "a"}, {p + "m"}, p + "mul");
    b.node("Mul", {p + "m", "half"}, {out}, p + "mul_half");
  };
  b.node("MatMul", {"x", "w"}, {"p"}, "mm");
  b.node("Add", {"b", "p"}, {"s"}, "bias");
  gelu("s", "y", "g1/");
  b.node("MatMul", {"x", "w"}, {"p2"}, "mm2");
  b.node("Add", {"p2", "b"}, {"s2"}, "bias2");
  gelu("s2", "z", "g2/");
  b.node("Identity", {"g2/e"}, {"e2"}, "erf_out");
  to::Model const m = b.model();
  to::HostTensor const x{to::DataType::float32, {2, 3, 8}, ramp(48, 0.13f, 0.9f), {}};
  TinyRun const run(m, x, true);
  to::HostTensor const& y = run.y;
  to::HostTensor const z = to::read(*run.e, run.imp.outputs[1]);
  for (std::size_t r = 0; r < 6; ++r)
    for (std::size_t c = 0; c < 16; ++c) {
      double s = bias[c];
      for (std::size_t k = 0; k < 8; ++k) s += static_cast<double>(x.floats[r * 8 + k]) * w[k * 16 + c];
      double const want = s * (std::erf(s / 1.4142135) + 1) * 0.5;
      CHECK(y.floats[r * 16 + c] == doctest::Approx(want).epsilon(1e-5));
      CHECK(z.floats[r * 16 + c] == y.floats[r * 16 + c]);  // the same operations in the same order
    }
  tb::Profile const profile = run.e->profile();
  std::size_t erfs = 0, divs = 0;
  for (auto const& op : profile.operators) {
    if (op.kind == "Erf") {
      ++erfs;
      CHECK(op.name == "g2/erf");
    }
    if (op.kind == "Div") {
      ++divs;
      CHECK(op.name == "g2/div");
    }
  }
  CHECK(erfs == 1);
  CHECK(divs == 1);
}

TEST_CASE("an elementwise node writes into an operand only it reads; never into an input or a variable another value holds") {
  // s = sigmoid(x) is read by the Add alone: the Add + Relu writes into it. a = abs(x) is also held by its Reshape r,
  // whose only reader is the second Add: that Add must not write into r (the Mul reads a after it). x, read by
  // Sigmoid alone, is a model input: never written.
  Builder b;
  b.input("x", {2, 8});
  b.input("y", {2, 8});
  b.output("z", {2, 8});
  b.output("q", {16});
  b.output("t", {2, 8});
  b.init("one", {1}, {1.0f});
  b.init("two", {1}, {2.0f});
  b.init_ints("flat", {16});
  b.node("Sigmoid", {"x"}, {"s"}, "sigmoid");
  b.node("Add", {"s", "y"}, {"u"}, "add");
  b.node("Relu", {"u"}, {"z"}, "relu");
  b.node("Abs", {"y"}, {"a"}, "abs");
  b.node("Reshape", {"a", "flat"}, {"r"}, "reshape");
  b.node("Add", {"r", "one"}, {"q"}, "add_one");
  b.node("Mul", {"a", "two"}, {"t"}, "mul");
  // n = -y is read by Add then by Mul: the Mul, its last reader, writes into it; the Add before it may not.
  b.output("n1", {2, 8});
  b.output("n2", {2, 8});
  b.node("Neg", {"y"}, {"n"}, "neg");
  b.node("Add", {"n", "one"}, {"n1"}, "neg_add");
  b.node("Mul", {"n", "two"}, {"n2"}, "neg_mul");
  to::Model const m = b.model();
  to::HostTensor const x{to::DataType::float32, {2, 8}, ramp(16, 0.37f, 0.2f), {}};
  to::HostTensor const y{to::DataType::float32, {2, 8}, ramp(16, 0.61f, 1.3f), {}};
  tb::Graph g{tb::targets::tiny(4, 1 << 20)};
  tb::Sequence prog;
  to::Imported const imp = to::import(g, prog, m, {});
  std::size_t new_results = 0;  // variables of maps' results ("map"): sigmoid, abs, add_one, mul, neg and neg_add;
  for (auto const& v : g.impl().variables) new_results += v.name == "map";  // the Add + Relu and neg_mul made none
  CHECK(new_results == 6);
  for (std::size_t threads : {1, 3}) {
    tb::Engine e{tb::compile(g, {.allow_out_of_memory = true}, prog), {.host_threads = threads}};
    to::write(e, imp.inputs[0], x);
    to::write(e, imp.inputs[1], y);
    e.run();
    to::HostTensor const z = to::read(e, imp.outputs[0]), q = to::read(e, imp.outputs[1]), t = to::read(e, imp.outputs[2]);
    to::HostTensor const n1 = to::read(e, imp.outputs[3]), n2 = to::read(e, imp.outputs[4]);
    for (std::size_t i = 0; i < 16; ++i) {
      CHECK(n1.floats[i] == -y.floats[i] + 1.0f);
      CHECK(n2.floats[i] == -y.floats[i] * 2.0f);
      float const s = 1.0f / (1.0f + std::exp(-x.floats[i]));
      CHECK(z.floats[i] == doctest::Approx(std::max(s + y.floats[i], 0.0f)).epsilon(1e-6));
      CHECK(q.floats[i] == std::abs(y.floats[i]) + 1.0f);
      CHECK(t.floats[i] == std::abs(y.floats[i]) * 2.0f);
    }
    CHECK(to::read(e, imp.inputs[0]).floats == x.floats);  // the inputs are not written
    CHECK(to::read(e, imp.inputs[1]).floats == y.floats);
  }
}

TEST_CASE("a residual Add that alone reads a convolution's result joins its bias map, with the ReLU after it") {
  // r = relu(conv3x3(x) + b1); y = relu(conv1x1(r) + b2 + r): the Add and the last Relu are conv2's epilogue.
  Builder b;
  b.input("x", {2, 3, 5, 5});
  b.output("y", {2, 4, 5, 5});
  auto const w1 = ramp(4 * 3 * 9, 0.31f, 0.2f), b1 = ramp(4, 0.9f, 0.4f);
  auto const w2 = ramp(4 * 4, 0.47f, 0.6f), b2 = ramp(4, 1.3f, 0.1f);
  b.init("w1", {4, 3, 3, 3}, w1);
  b.init("b1", {4}, b1);
  b.init("w2", {4, 4, 1, 1}, w2);
  b.init("b2", {4}, b2);
  Builder::ints(b.node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1"), "pads", {1, 1, 1, 1});
  b.node("Relu", {"c1"}, {"r"}, "relu1");
  b.node("Conv", {"r", "w2", "b2"}, {"c2"}, "conv2");
  b.node("Add", {"r", "c2"}, {"s"}, "add");
  b.node("Relu", {"s"}, {"y"}, "relu2");
  to::Model const m = b.model();
  to::HostTensor const x{to::DataType::float32, {2, 3, 5, 5}, ramp(2 * 3 * 25, 0.19f, 0.3f), {}};
  std::vector<double> r(2 * 4 * 25), want(r.size());
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t co = 0; co < 4; ++co)
      for (std::size_t i = 0; i < 5; ++i)
        for (std::size_t j = 0; j < 5; ++j) {
          double s = b1[co];
          for (std::size_t ci = 0; ci < 3; ++ci)
            for (std::size_t ki = 0; ki < 3; ++ki)
              for (std::size_t kj = 0; kj < 3; ++kj) {
                std::size_t const yy = i + ki, zz = j + kj;  // one above the input's row and column (pad 1)
                if (yy < 1 || yy > 5 || zz < 1 || zz > 5) continue;
                s += static_cast<double>(x.floats[((n * 3 + ci) * 5 + yy - 1) * 5 + zz - 1]) * w1[((co * 3 + ci) * 3 + ki) * 3 + kj];
              }
          r[((n * 4 + co) * 5 + i) * 5 + j] = std::max(s, 0.0);
        }
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t co = 0; co < 4; ++co)
      for (std::size_t p = 0; p < 25; ++p) {
        double s = b2[co] + r[(n * 4 + co) * 25 + p];
        for (std::size_t ci = 0; ci < 4; ++ci) s += r[(n * 4 + ci) * 25 + p] * w2[co * 4 + ci];
        want[(n * 4 + co) * 25 + p] = std::max(s, 0.0);
      }
  std::vector<float> first;
  for (std::size_t threads : {1, 3}) {
    tb::Graph g{tb::targets::tiny(4, 1 << 20)};
    tb::Sequence prog;
    to::Imported const imp = to::import(g, prog, m, {});
    tb::Engine e{tb::compile(g, {.allow_out_of_memory = true}, prog), {.host_threads = threads, .profiling = true}};
    to::write(e, imp.inputs[0], x);
    e.run();
    to::HostTensor const y = to::read(e, imp.outputs[0]);
    REQUIRE(y.floats.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(y.floats[i] == doctest::Approx(want[i]).epsilon(1e-5));
    if (first.empty()) first = y.floats;
    else CHECK(y.floats == first);  // bitwise, for any thread count
    for (auto const& op : e.profile().operators) CHECK((op.kind != "Add" && op.kind != "Relu"));
  }
}

TEST_CASE("a residual Add that a convolution's result alone reads, last to read its other operand, sums in place") {
  // Two bottleneck-like blocks on x [2, 3, 6, 6]: r = relu(conv3x3(x)); y1 = relu(conv1x1(relu(conv1x1(r))) + r);
  // y2 = relu(conv3x3(relu(conv1x1(y1))) + y1). Each block's last convolution adds its sum to the block's input
  // in place (ops::conv_accumulate: no variable of its own) where the Add is the input's last reader; with `late`
  // a Mul reads r after the first Add, so that block's sum takes a result of its own and r keeps its values.
  std::size_t const C = 8;
  auto const w0 = ramp(C * 3 * 9, 0.31f, 0.2f), b0 = ramp(C, 0.9f, 0.4f);
  auto const wa = ramp(C * C, 0.47f, 0.6f), wb = ramp(C * C, 0.23f, 1.1f), bb = ramp(C, 1.3f, 0.1f);
  auto const wc = ramp(C * C, 0.37f, 0.5f), wd = ramp(C * C * 9, 0.11f, 0.7f), bd = ramp(C, 0.7f, 0.3f);
  // The reference in double, NCHW: relu(conv(in, w, k) + bias + add) per channel and position.
  using D = std::vector<double>;
  auto const conv = [&](D const& in, std::size_t ci, std::vector<float> const& w, std::size_t k, std::vector<float> const* b,
                        D const* add) {
    D out(2 * C * 36);
    std::ptrdiff_t const h = static_cast<std::ptrdiff_t>(k / 2);
    for (std::size_t n = 0; n < 2; ++n)
      for (std::size_t co = 0; co < C; ++co)
        for (std::ptrdiff_t i = 0; i < 6; ++i)
          for (std::ptrdiff_t j = 0; j < 6; ++j) {
            std::size_t const at = ((n * C + co) * 6 + static_cast<std::size_t>(i)) * 6 + static_cast<std::size_t>(j);
            double s = (b ? (*b)[co] : 0.0) + (add ? (*add)[at] : 0.0);
            for (std::size_t c = 0; c < ci; ++c)
              for (std::size_t ki = 0; ki < k; ++ki)
                for (std::size_t kj = 0; kj < k; ++kj) {
                  std::ptrdiff_t const y = i + static_cast<std::ptrdiff_t>(ki) - h, z = j + static_cast<std::ptrdiff_t>(kj) - h;
                  if (y < 0 || y >= 6 || z < 0 || z >= 6) continue;
                  s += in[((n * ci + c) * 6 + static_cast<std::size_t>(y)) * 6 + static_cast<std::size_t>(z)] *
                       w[((co * ci + c) * k + ki) * k + kj];
                }
            out[at] = std::max(s, 0.0);
          }
    return out;
  };
  to::HostTensor const x{to::DataType::float32, {2, 3, 6, 6}, ramp(2 * 3 * 36, 0.19f, 0.3f), {}};
  D const xd(x.floats.begin(), x.floats.end());
  D const r = conv(xd, 3, w0, 3, &b0, nullptr);
  D const y1 = conv(conv(r, C, wa, 1, nullptr, nullptr), C, wb, 1, &bb, &r);
  D const y2 = conv(conv(y1, C, wc, 1, nullptr, nullptr), C, wd, 3, &bd, &y1);
  for (bool late : {false, true}) {
    CAPTURE(late);
    Builder b;
    b.input("x", {2, 3, 6, 6});
    b.output("y", {2, static_cast<std::int64_t>(C), 6, 6});
    auto const c = static_cast<std::int64_t>(C);
    b.init("w0", {c, 3, 3, 3}, w0);
    b.init("b0", {c}, b0);
    b.init("wa", {c, c, 1, 1}, wa);
    b.init("wb", {c, c, 1, 1}, wb);
    b.init("bb", {c}, bb);
    b.init("wc", {c, c, 1, 1}, wc);
    b.init("wd", {c, c, 3, 3}, wd);
    b.init("bd", {c}, bd);
    Builder::ints(b.node("Conv", {"x", "w0", "b0"}, {"c0"}, "conv0"), "pads", {1, 1, 1, 1});
    b.node("Relu", {"c0"}, {"r"}, "relu0");
    b.node("Conv", {"r", "wa"}, {"ca"}, "conva");
    b.node("Relu", {"ca"}, {"a"}, "relua");
    b.node("Conv", {"a", "wb", "bb"}, {"cb"}, "convb");
    b.node("Add", {"cb", "r"}, {"s1"}, "add1");
    b.node("Relu", {"s1"}, {"y1"}, "relu1");
    if (late) {
      b.output("t", {2, c, 6, 6});
      b.init("two", {1}, {2.0f});
      b.node("Mul", {"r", "two"}, {"t"}, "late");
    }
    b.node("Conv", {"y1", "wc"}, {"cc"}, "convc");
    b.node("Relu", {"cc"}, {"cr"}, "reluc");
    Builder::ints(b.node("Conv", {"cr", "wd", "bd"}, {"cd"}, "convd"), "pads", {1, 1, 1, 1});
    b.node("Add", {"y1", "cd"}, {"s2"}, "add2");
    b.node("Relu", {"s2"}, {"y"}, "relu2");
    to::Model const m = b.model();
    std::vector<float> first;
    for (std::size_t threads : {1, 3}) {
      tb::Graph g{tb::targets::tiny(4, 1 << 20)};
      tb::Sequence prog;
      to::Imported const imp = to::import(g, prog, m, {});
      std::set<std::string> names;
      for (auto const& v : g.impl().variables) names.insert(v.name);
      CHECK(names.contains("convb") == late);  // its sum in r's variable unless r is read after the Add
      CHECK(!names.contains("convd"));
      CHECK(names.contains("conva"));
      tb::Engine e{tb::compile(g, {.allow_out_of_memory = true}, prog), {.host_threads = threads}};
      to::write(e, imp.inputs[0], x);
      e.run();
      to::HostTensor const y = to::read(e, imp.outputs[0]);
      REQUIRE(y.floats.size() == y2.size());
      std::size_t off = 0;
      for (std::size_t i = 0; i < y2.size(); ++i) off += std::abs(y.floats[i] - y2[i]) > 1e-5 * (1.0 + std::abs(y2[i]));
      CHECK(off == 0);
      if (late) {
        to::HostTensor const t = to::read(e, imp.outputs[1]);
        REQUIRE(t.floats.size() == r.size());
        off = 0;
        for (std::size_t i = 0; i < r.size(); ++i) off += std::abs(t.floats[i] - 2 * r[i]) > 1e-5 * (1.0 + std::abs(r[i]));
        CHECK(off == 0);
      }
      if (first.empty()) first = y.floats;
      else CHECK(y.floats == first);  // bitwise, for any thread count
    }
  }
}

TEST_CASE("pads beyond 2^31 are refused by value, before any sum of them") {
  // Found by fuzz_onnx_import: an axis' length plus pads near 2^62 overflowed a 64-bit sum.
  Builder b;
  b.input("x", {1, 1, 4, 4});
  b.output("y", {1, 1, 4, 4});
  b.init_ints("pads", {0, 0, 0, 0, 0, 0, std::int64_t{1} << 62, std::int64_t{1} << 62});
  b.node("Pad", {"x", "pads"}, {"y"}, "pad");
  to::Model const m = b.model();
  tb::Graph g{tb::targets::tiny(4, 1 << 20)};
  tb::Sequence prog;
  CHECK_THROWS_WITH_AS(to::import(g, prog, m, {}),
                       "test.onnx: node 'pad' (Pad, opset 17): pad 4611686018427387904 is outside [-2^31, 2^31]: a graph "
                       "value holds at most 2^31 elements",
                       tb::shape_error);
  CHECK(prog.size() == 0);
}

TEST_CASE("concatenations that extend one another share one buffer, each input copied into it once") {
  // DenseNet's pattern: x0 = conv(x); cat_k = Concat(x0, y_1..y_k); y_{k+1} = conv(cat_k). The chain's buffer is
  // sized for cat3 from cat1's inputs after the first (3 channels per input to come); growth {3, 3, 5} does not fit
  // it and moves the chain into a buffer twice as large at cat3.
  using Growth = std::vector<std::int64_t>;
  for (Growth const& growth : {Growth{3, 3, 3}, Growth{3, 3, 5}}) {
    CAPTURE(growth[2]);
    Builder b;
    b.input("x", {2, 4, 5, 5}, ::onnx::TensorProto::FLOAT, "N");
    std::int64_t channels = 4;
    std::vector<std::vector<float>> w;
    w.push_back(ramp(4 * 4, 0.31f, 0.5f));
    b.init("w0", {4, 4, 1, 1}, w[0]);
    b.node("Conv", {"x", "w0"}, {"x0"}, "conv0");
    std::vector<std::string> parts{"x0"};
    for (std::size_t k = 0; k < 3; ++k) {
      std::string const in = k == 0 ? "x0" : "cat" + std::to_string(k);
      w.push_back(ramp(static_cast<std::size_t>(growth[k] * channels), 0.17f + 0.1f * static_cast<float>(k), 0.2f));
      b.init("w" + std::to_string(k + 1), {growth[k], channels, 1, 1}, w.back());
      b.node("Conv", {in, "w" + std::to_string(k + 1)}, {"y" + std::to_string(k + 1)}, "conv" + std::to_string(k + 1));
      parts.push_back("y" + std::to_string(k + 1));
      channels += growth[k];
      std::string const cat = k == 2 ? "y" : "cat" + std::to_string(k + 1);
      Builder::integer(b.node("Concat", parts, {cat}, "cat" + std::to_string(k + 1)), "axis", 1);
    }
    b.output("y", {2, channels, 5, 5}, ::onnx::TensorProto::FLOAT, "N");
    to::Model const m = b.model();
    to::HostTensor const x{to::DataType::float32, {2, 4, 5, 5}, ramp(200, 0.23f, 0.1f), {}};
    // The reference: channels of the growing concatenation per image and position, in doubles.
    std::vector<double> ref(static_cast<std::size_t>(2 * channels * 25));
    auto const at = [&](std::size_t n, std::size_t c, std::size_t p) -> double& {
      return ref[(n * static_cast<std::size_t>(channels) + c) * 25 + p];
    };
    for (std::size_t n = 0; n < 2; ++n)
      for (std::size_t p = 0; p < 25; ++p) {
        for (std::size_t co = 0; co < 4; ++co) {
          double s = 0;
          for (std::size_t ci = 0; ci < 4; ++ci)
            s += static_cast<double>(x.floats[(n * 4 + ci) * 25 + p]) * w[0][co * 4 + ci];
          at(n, co, p) = s;
        }
        std::size_t have = 4;
        for (std::size_t k = 0; k < 3; ++k) {
          for (std::size_t co = 0; co < static_cast<std::size_t>(growth[k]); ++co) {
            double s = 0;
            for (std::size_t ci = 0; ci < have; ++ci) s += at(n, ci, p) * w[k + 1][co * have + ci];
            at(n, have + co, p) = s;
          }
          have += static_cast<std::size_t>(growth[k]);
        }
      }
    std::vector<float> first;
    for (bool host : {true, false}) {
      TinyRun const run(m, x, host);
      to::HostTensor const& y = run.y;
      REQUIRE(y.shape == std::vector<std::int64_t>{2, channels, 5, 5});
      for (std::size_t i = 0; i < ref.size(); ++i) CHECK(y.floats[i] == doctest::Approx(ref[i]).epsilon(1e-5));
      if (first.empty()) first = y.floats;
      CHECK(y.floats == first);  // bitwise, host kernels or vertices
      // The buffers: cat1's, and cat3's where the chain moved (no buffer of cat2's own).
      std::set<std::string> joined;
      for (auto const& v : run.g.impl().variables)
        if (v.name.find("/joined") != std::string::npos) joined.insert(v.name);
      std::set<std::string> const want =
          growth[2] == 3 ? std::set<std::string>{"cat1/joined"} : std::set<std::string>{"cat1/joined", "cat3/joined"};
      CHECK(joined == want);
    }
  }
}

TEST_CASE("convolutions write their channels into the concatenation that alone reads them: no copy joins them") {
  // SqueezeNet's fire module and Inception's nested joins: y = Concat(e1, e3, p, Concat(a, b)) along the channels,
  // e1 = Relu(Conv1x1(s) + bias), e3 = Relu(Conv3x3(s) + bias), a and b 1x1 convolutions, p = MaxPool(x) (copied
  // into its channels: not a convolution), s = Relu(Conv1x1(x)). One buffer holds y, the inner Concat is a slice of
  // it, and no convolution writes a tensor of its own; the values are the plain loops', bitwise the same on the host
  // kernels and the vertices.
  Builder b;
  b.input("x", {2, 4, 5, 5}, ::onnx::TensorProto::FLOAT, "N");
  b.output("y", {2, 17, 5, 5}, ::onnx::TensorProto::FLOAT, "N");
  struct Conv {
    std::string name, in;
    std::int64_t cin, cout, k;
    bool bias, relu;
  };
  std::vector<Conv> const convs{{"s", "x", 4, 3, 1, false, true},  {"e1", "s", 3, 5, 1, true, true},
                                {"e3", "s", 3, 4, 3, true, true},  {"a", "s", 3, 2, 1, false, false},
                                {"bb", "s", 3, 2, 1, false, false}};
  std::map<std::string, std::vector<float>> w, bias;
  float phase = 0.1f;
  for (auto const& c : convs) {
    w[c.name] = ramp(static_cast<std::size_t>(c.cout * c.cin * c.k * c.k), 0.29f, phase += 0.4f);
    b.init(c.name + "_w", {c.cout, c.cin, c.k, c.k}, w[c.name]);
    std::vector<std::string> in{c.in, c.name + "_w"};
    if (c.bias) {
      bias[c.name] = ramp(static_cast<std::size_t>(c.cout), 0.7f, phase);
      b.init(c.name + "_b", {c.cout}, bias[c.name]);
      in.push_back(c.name + "_b");
    }
    auto* n = b.node("Conv", in, {c.relu ? c.name + "_c" : c.name}, c.name + "_conv");
    if (c.k == 3) Builder::ints(n, "pads", {1, 1, 1, 1});
    if (c.relu) b.node("Relu", {c.name + "_c"}, {c.name}, c.name + "_relu");
  }
  auto* pool = b.node("MaxPool", {"x"}, {"p"}, "pool");
  Builder::ints(pool, "kernel_shape", {3, 3});
  Builder::ints(pool, "pads", {1, 1, 1, 1});
  Builder::integer(b.node("Concat", {"a", "bb"}, {"inner"}, "inner"), "axis", 1);
  Builder::integer(b.node("Concat", {"e1", "e3", "p", "inner"}, {"y"}, "join"), "axis", -3);
  to::Model const m = b.model();
  to::HostTensor const x{to::DataType::float32, {2, 4, 5, 5}, ramp(200, 0.23f, 0.1f), {}};

  // The reference in doubles: activations [image][channel][25].
  using Act = std::vector<std::vector<std::vector<double>>>;
  Act input(2, std::vector<std::vector<double>>(4, std::vector<double>(25)));
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t c = 0; c < 4; ++c)
      for (std::size_t p = 0; p < 25; ++p) input[n][c][p] = x.floats[(n * 4 + c) * 25 + p];
  std::map<std::string, Act> act{{"x", input}};
  for (auto const& c : convs) {
    Act out(2, std::vector<std::vector<double>>(static_cast<std::size_t>(c.cout), std::vector<double>(25)));
    for (std::size_t n = 0; n < 2; ++n)
      for (std::int64_t co = 0; co < c.cout; ++co)
        for (std::int64_t i = 0; i < 5; ++i)
          for (std::int64_t j = 0; j < 5; ++j) {
            double s = c.bias ? bias[c.name][static_cast<std::size_t>(co)] : 0.0;
            for (std::int64_t ci = 0; ci < c.cin; ++ci)
              for (std::int64_t ki = 0; ki < c.k; ++ki)
                for (std::int64_t kj = 0; kj < c.k; ++kj) {
                  std::int64_t const r = i + ki - c.k / 2, q = j + kj - c.k / 2;
                  if (r < 0 || r >= 5 || q < 0 || q >= 5) continue;
                  s += act[c.in][n][static_cast<std::size_t>(ci)][static_cast<std::size_t>(r * 5 + q)] *
                       w[c.name][static_cast<std::size_t>(((co * c.cin + ci) * c.k + ki) * c.k + kj)];
                }
            out[n][static_cast<std::size_t>(co)][static_cast<std::size_t>(i * 5 + j)] = c.relu ? std::max(s, 0.0) : s;
          }
    act[c.name] = out;
  }
  Act pooled = input;
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t c = 0; c < 4; ++c)
      for (std::int64_t i = 0; i < 5; ++i)
        for (std::int64_t j = 0; j < 5; ++j) {
          double v = -1e300;
          for (std::int64_t r = std::max<std::int64_t>(0, i - 1); r <= std::min<std::int64_t>(4, i + 1); ++r)
            for (std::int64_t q = std::max<std::int64_t>(0, j - 1); q <= std::min<std::int64_t>(4, j + 1); ++q)
              v = std::max(v, input[n][c][static_cast<std::size_t>(r * 5 + q)]);
          pooled[n][c][static_cast<std::size_t>(i * 5 + j)] = v;
        }
  act["p"] = pooled;
  std::vector<double> want;
  for (std::size_t n = 0; n < 2; ++n)
    for (std::string const part : {"e1", "e3", "p", "a", "bb"})
      for (auto const& channel : act[part][n]) want.insert(want.end(), channel.begin(), channel.end());

  std::vector<float> first;
  for (bool host : {true, false}) {
    CAPTURE(host);
    TinyRun const run(m, x, host);
    REQUIRE(run.y.shape == std::vector<std::int64_t>{2, 17, 5, 5});
    REQUIRE(run.y.floats.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(run.y.floats[i] == doctest::Approx(want[i]).epsilon(1e-5));
    if (first.empty()) first = run.y.floats;
    CHECK(run.y.floats == first);
    std::set<std::string> names;
    for (auto const& v : run.g.impl().variables) names.insert(v.name);
    CHECK(names.contains("join/joined"));
    for (char const* own : {"inner/joined", "e1_conv", "e3_conv", "a_conv", "bb_conv"}) {
      CAPTURE(own);
      CHECK(!names.contains(own));
    }
    CHECK(names.contains("s_conv"));  // read by four convolutions, not by a Concat
  }
}

TEST_CASE("a concatenation whose inputs claim more channels than any value holds is refused by its node, not summed") {
  // join_slot reads the channels of a Concat's inputs from their Conv weights before those nodes are built: three
  // of 2^62 channels (weights of no elements) overflow a sum; they give no buffer, and node 'b' refuses its weights.
  Builder b;
  b.input("x", {1, 4, 3, 3});
  b.output("y", {1, 3, 3, 3});
  b.init("wa", {3, 4, 1, 1}, ramp(12, 0.3f, 0.1f));
  b.node("Conv", {"x", "wa"}, {"a"}, "a");
  std::vector<std::string> parts{"a"};
  for (char const* name : {"b", "c", "d"}) {
    auto* w = b.m.mutable_graph()->add_initializer();
    w->set_name(std::string("w") + name);
    w->set_data_type(::onnx::TensorProto::FLOAT);
    for (std::int64_t d : {std::int64_t{1} << 62, std::int64_t{0}, std::int64_t{1}, std::int64_t{1}}) w->add_dims(d);
    b.node("Conv", {"x", std::string("w") + name}, {name}, name);
    parts.emplace_back(name);
  }
  Builder::integer(b.node("Concat", parts, {"y"}, "join"), "axis", 1);
  tb::Graph g{tb::targets::tiny(4, 1 << 20)};
  tb::Sequence prog;
  std::string const what = message_of<tb::error>([&] { to::import(g, prog, b.model(), {}); });
  CHECK(what == "test.onnx: node 'b' (Conv, opset 17): weights of shape [4611686018427387904, 0, ...] do not fit 4 input "
                "channels in 1 groups");
}

TEST_CASE("the channels of a concatenation's inputs are read with a bounded walk: nested joins of one value twice") {
  // y_k = Concat(y_{k-1}, y_{k-1}) over 60 levels reads y_0 2^60 times through the nodes: join_slot's walk for the
  // convolution v (built first) stops at its bound and v writes a tensor of its own; the joins of y then outgrow
  // the small target, promptly.
  Builder b;
  b.input("x", {1, 4, 3, 3});
  b.output("out", {1, 3, 3, 3});
  b.init("wv", {3, 4, 1, 1}, ramp(12, 0.3f, 0.1f));
  b.init("wy", {2, 4, 1, 1}, ramp(8, 0.4f, 0.2f));
  b.node("Conv", {"x", "wv"}, {"v"}, "v");
  b.node("Conv", {"x", "wy"}, {"y0"}, "y0");
  for (int k = 1; k <= 60; ++k) {
    std::string const prev = "y" + std::to_string(k - 1);
    Builder::integer(b.node("Concat", {prev, prev}, {"y" + std::to_string(k)}, "y" + std::to_string(k)), "axis", 1);
  }
  Builder::integer(b.node("Concat", {"v", "y60"}, {"out"}, "join"), "axis", 1);
  tb::Graph g{tb::targets::tiny(4, 1 << 20)};
  tb::Sequence prog;
  CHECK_THROWS_WITH_AS(to::import(g, prog, b.model(), {}),
                       "add_variable 'y16/joined': [1, 3, 3, 131072] f32 is 4718592 bytes, more than the whole target's "
                       "memory (4194304 bytes: 4 tiles x 1048576 bytes, tiny4)",
                       tb::error);
}
