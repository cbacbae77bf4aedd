// The examples shown in README.md and docs/00-quickstart.md, compiled and run.
#include <doctest/doctest.h>

#include <filesystem>
#include <iostream>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <unistd.h>

// [readme-example]
#include <tilebsp/tilebsp.hpp>
namespace tb = tilebsp;

struct Axpy {  // a codelet: fields are reflected at compile time and connected in declaration order
  BOOST_HANA_DEFINE_STRUCT(Axpy, (tb::input<float>, x), (tb::inout<float>, y), (tb::param<float>, a));
  void compute() {
    for (std::size_t i = 0; i < y.size(); ++i) y[i] += a * x[i];
  }
};

std::vector<float> readme_example() {
  tb::Graph g{tb::targets::ipu_mk2()};                       // 1472 tiles x 624 KiB
  tb::Tensor x = g.add_variable<float>({1 << 16}, "x");
  tb::Tensor y = g.add_variable<float>({1 << 16}, "y");
  tb::map_linearly(g, x);
  tb::map_linearly(g, y);
  tb::ComputeSet cs = g.add_compute_set("axpy");
  for (auto const& [tile, region] : g.tile_mapping(y))       // one vertex per tile, on its own data
    g.add_vertex<Axpy>(cs, tile, x.slice(region), y.slice(region), 2.0f);
  auto infeed = g.add_host_to_device_fifo<float>("x", x.num_elements());
  auto prog = tb::seq(tb::stream_in(infeed, x), tb::repeat(10, tb::execute(cs)));
  tb::Engine engine{tb::compile(g, prog), {.host_threads = 2}};
  std::vector<float> host_x(x.num_elements(), 1.0f);
  engine.connect(infeed, host_x);
  engine.run();                                              // y = 10 * 2 * x
  return engine.read<float>(y);
}
// [readme-example]

TEST_CASE("README example") {
  auto y = readme_example();
  CHECK(y.size() == (1u << 16));
  CHECK(y.front() == 20.0f);
  CHECK(y.back() == 20.0f);
}

// [expr-example]
#include <tilebsp/tilebsp.hpp>
using namespace tilebsp::expr;  // _1 .. _8, operators, relu, exp, select, cast<T>, ...

std::vector<float> expr_example() {
  tb::Graph g{tb::targets::ipu_mk2()};
  tb::Tensor w = g.add_variable<float>({256, 10}, "w");
  tb::Tensor grad = g.add_variable<float>({256, 10}, "grad");
  tb::Tensor bias = g.add_variable<float>({10}, "bias");
  for (auto const& t : {w, grad, bias}) tb::map_linearly(g, t);

  tb::Sequence prog;
  tb::ops::scaled_add(g, prog, w, grad, -0.05);                        // w -= 0.05 * grad, in place
  tb::Tensor act = tb::ops::map(g, prog, relu(_1 * 2 + _2), w, bias);  // one fused pass, bias broadcast
  tb::Tensor norm = tb::ops::reduce(g, prog, act, {0}, tb::ops::ReduceOp::square_add);  // [10]

  tb::Engine engine{tb::compile(g, prog), {.host_threads = 2}};
  engine.write(w, std::vector<float>(2560, 1.0f));
  engine.write(grad, std::vector<float>(2560, 2.0f));
  engine.write(bias, std::vector<float>(10, 0.5f));
  engine.run();                                                        // act = relu(0.9 * 2 + 0.5) = 2.3
  return engine.read<float>(norm);                                     // 256 * 2.3^2 per column
}
// [expr-example]

TEST_CASE("expressions and reductions example") {
  auto norm = expr_example();
  REQUIRE(norm.size() == 10);
  for (float v : norm) CHECK(v == doctest::Approx(256 * 2.3 * 2.3).epsilon(1e-5));
}

// [matmul-example]
std::vector<float> matmul_example() {
  tb::Graph g{tb::targets::ipu_mk2()};
  tb::Tensor x = g.add_variable<float>({32, 784}, "x");   // a batch of activations
  tb::Tensor w = g.add_variable<float>({10, 784}, "w");   // weights stored [out, in]
  for (auto const& t : {x, w}) tb::map_linearly(g, t);

  tb::MatmulOptions const options{.available_memory_proportion = 0.3};
  tb::MatmulPlan const plan = tb::ops::plan_matmul(g, x, w.transpose(), options);
  std::cout << plan.describe();                           // splits, temporary bytes per tile, cycles

  tb::Sequence prog;
  tb::Tensor y = tb::ops::matmul(g, prog, x, w.transpose(), options);  // [32, 10]; the transpose is a view
  tb::ops::matmul_acc(g, prog, w, -0.01f, y.transpose(), x, options);  // w -= 0.01 * y^T x

  tb::Engine engine{tb::compile(g, prog), {.host_threads = 2}};
  engine.write(x, std::vector<float>(32 * 784, 0.5f));
  engine.write(w, std::vector<float>(10 * 784, 0.25f));
  engine.run();                                           // y = 784 * 0.125 = 98
  return engine.read<float>(w);                           // 0.25 - 0.01 * 32 * 98 * 0.5
}
// [matmul-example]

TEST_CASE("matmul example") {
  auto w = matmul_example();
  REQUIRE(w.size() == 7840);
  for (float v : w) CHECK(v == doctest::Approx(0.25 - 0.01 * 32 * 98 * 0.5).epsilon(1e-5));
}

// [conv-params-example]
tb::ConvParams resnext_grouped_layer() {
  tb::ConvParams p;
  p.batch = 4;
  p.input_field = {56, 56};
  p.kernel_shape = {3, 3};
  p.channels(128, 128, 32);  // 32 groups of 4 input and 4 output channels
  p.padding_lower = p.padding_upper = {1, 1};
  // p.input_shape()   == {4, 56, 56, 128}   activations, channels-last
  // p.weights_shape() == {32, 3, 3, 4, 4}   [G, kernel..., C_in, C_out]
  // p.output_shape()  == {4, 56, 56, 128}
  return p;
}
// [conv-params-example]

TEST_CASE("conv params example") {
  auto const p = resnext_grouped_layer();
  CHECK(p.input_shape() == tb::Shape{4, 56, 56, 128});
  CHECK(p.weights_shape() == tb::Shape{32, 3, 3, 4, 4});
  CHECK(p.output_shape() == tb::Shape{4, 56, 56, 128});
}

// [conv-implementation-example]
/// Which implementation each pass of a layer runs: the pick its plan records.
std::vector<std::string_view> implementations_of(tb::Graph const& g, tb::ConvParams const& p) {
  std::vector<std::string_view> names;
  for (auto pass : {tb::ConvPass::forward, tb::ConvPass::backward_input, tb::ConvPass::weight_update}) {
    tb::ConvPlan const plan = tb::ops::plan_conv(g, p, pass, tb::f32);
    names.push_back(tb::conv_implementation_info(plan.problem.implementation).name);
  }
  return names;  // ResNeXt's grouped 3x3 layer (4 channels per group): "direct" for all three
}
// [conv-implementation-example]

TEST_CASE("conv implementation example") {
  tb::Graph g{tb::targets::ipu_mk2()};
  using V = std::vector<std::string_view>;
  CHECK(implementations_of(g, resnext_grouped_layer()) == V{"direct", "direct", "direct"});
  tb::ConvParams dense = resnext_grouped_layer();
  dense.input_field = {14, 14};
  dense.channels(64, 64, 1);
  CHECK(implementations_of(g, dense) == V{"Winograd F(2x2, 3x3)", "Winograd F(2x2, 3x3)", "direct"});
  tb::ConvParams pointwise = dense;
  pointwise.kernel_shape = {1, 1};
  pointwise.padding_lower = pointwise.padding_upper = {0, 0};
  CHECK(implementations_of(g, pointwise) == V{"pointwise as matmul", "pointwise as matmul", "pointwise as matmul"});
  pointwise.stride = {2, 2};  // backward-input of a strided 1x1: direct
  CHECK(implementations_of(g, pointwise) == V{"pointwise as matmul", "direct", "pointwise as matmul"});
  // The list and its order.
  REQUIRE(tb::conv_implementations.size() == 3);
  CHECK(tb::conv_implementations[0].id == tb::ConvImplementation::pointwise_matmul);
  CHECK(tb::conv_implementations[1].id == tb::ConvImplementation::winograd);
  CHECK(tb::conv_implementations[2].id == tb::ConvImplementation::direct);
  // Asked for where it does not apply, Winograd is an option_error; the weight update ignores the algorithm.
  tb::ConvOptions const wino{.algorithm = tb::ConvAlgorithm::winograd};
  CHECK_THROWS_WITH_AS(tb::ops::plan_conv(g, pointwise, tb::ConvPass::forward, tb::f32, wino),
                       doctest::Contains("plan_conv: the winograd algorithm needs a 2-D forward or backward-input pass"),
                       tb::option_error);
  CHECK(tb::ops::plan_conv(g, dense, tb::ConvPass::weight_update, tb::f32, wino).problem.implementation ==
        tb::ConvImplementation::direct);
  tb::ConvOptions const direct{.algorithm = tb::ConvAlgorithm::direct};
  CHECK(tb::ops::plan_conv(g, dense, tb::ConvPass::forward, tb::f32, direct).problem.implementation ==
        tb::ConvImplementation::direct);
}

// [conv-example]
/// One training step of a grouped 3x3 convolution layer: forward, input gradients, SGD on the weights.
struct ConvLayerStep {
  tb::Tensor x, w, y, dy, dx;
};
ConvLayerStep conv_layer_step(tb::Graph& g, tb::Sequence& prog, tb::ConvParams const& p, float learning_rate) {
  tb::ConvOptions const o{.available_memory_proportion = 0.3};
  ConvLayerStep s;
  s.x = tb::ops::create_conv_input(g, p, tb::f32, o, "x");    // laid out for the forward plan
  s.w = tb::ops::create_conv_weights(g, p, tb::f32, o, "w");
  s.y = tb::ops::conv(g, prog, s.x, s.w, p, o);              // [N, H', W', G * C_out]
  s.dy = g.add_variable<float>(p.output_shape(), "dy");       // the gradient arriving from the next layer
  tb::map_linearly(g, s.dy);
  s.dx = tb::ops::conv_backward_input(g, prog, s.dy, s.w, p, o);
  tb::ops::conv_weight_update(g, prog, s.dy, s.x, s.w, -learning_rate, p, o);  // w -= lr * dL/dw
  return s;
}
// [conv-example]

TEST_CASE("conv example") {
  tb::Graph g{tb::targets::tiny(8, 256 * 1024)};
  tb::Sequence prog;
  tb::ConvParams p;
  p.batch = 2;
  p.input_field = {6, 6};
  p.kernel_shape = {3, 3};
  p.channels(8, 8, 2);
  p.padding_lower = p.padding_upper = {1, 1};
  auto const s = conv_layer_step(g, prog, p, 0.5f);
  tb::Engine e{tb::compile(g, prog), {.host_threads = 2}};
  e.write(s.x, std::vector<float>(s.x.num_elements(), 1.0f));
  e.write(s.w, std::vector<float>(s.w.num_elements(), 1.0f));
  e.write(s.dy, std::vector<float>(s.dy.num_elements(), 1.0f));
  e.run();
  auto const y = e.read<float>(s.y);
  CHECK(y[0] == 16.0f);                         // corner: 2 x 2 taps x 4 channels
  CHECK(y[(1 * 6 + 1) * 8] == 36.0f);           // interior: 9 taps x 4 channels
  auto const dx = e.read<float>(s.dx);
  CHECK(dx[(1 * 6 + 1) * 8] == 36.0f);          // 9 taps x 4 output channels
  auto const w = e.read<float>(s.w);
  CHECK(w[4 * 4 * 4 + 0] == 1.0f - 0.5f * 72);  // centre tap: 2 images x 36 positions
}

// [conv-with-output-example]
/// Two convolutions of one input joined along the channels without a copy: each writes its channels of `joined`,
/// and the first one's bias and ReLU run inside its host task.
tb::Tensor joined_convs(tb::Graph& g, tb::Sequence& prog, tb::Tensor const& x, tb::Tensor const& w1,
                        tb::Tensor const& w2, tb::Tensor const& b1, tb::ConvParams const& p1, tb::ConvParams const& p2) {
  using namespace tb::expr;
  auto const c1 = static_cast<std::size_t>(p1.output_channels), c2 = static_cast<std::size_t>(p2.output_channels);
  tb::Shape shape = p1.output_shape();
  shape.back() = c1 + c2;
  auto const joined = g.add_variable<float>(shape, "joined");
  tb::ops::conv_with_output(g, prog, x, w1, joined.slice(0, c1, 3), p1);       // channels [0, c1)
  tb::ops::conv_with_output(g, prog, x, w2, joined.slice(c1, c1 + c2, 3), p2);  // channels [c1, c1 + c2)
  tb::ops::map_in_place<float, float>(g, prog, relu(_1 + _2), joined.slice(0, c1, 3), b1);
  return joined;
}
// [conv-with-output-example]

TEST_CASE("conv_with_output example") {
  tb::Graph g{tb::targets::tiny(8, 256 * 1024)};
  tb::Sequence prog;
  tb::ConvParams p1;  // 1x1, 4 -> 3 channels
  p1.batch = 2;
  p1.input_field = {5, 5};
  p1.kernel_shape = {1, 1};
  p1.padding_lower = p1.padding_upper = {0, 0};
  p1.channels(4, 3, 1);
  tb::ConvParams p2 = p1;  // 3x3, 4 -> 2 channels
  p2.kernel_shape = {3, 3};
  p2.padding_lower = p2.padding_upper = {1, 1};
  p2.channels(4, 2, 1);
  auto const x = tb::ops::create_conv_input(g, p1), w1 = tb::ops::create_conv_weights(g, p1),
             w2 = tb::ops::create_conv_weights(g, p2);
  auto b1 = g.add_variable<float>({3}, "b1");
  tb::map_linearly(g, b1);
  auto const joined = joined_convs(g, prog, x, w1, w2, b1, p1, p2);
  tb::Engine e{tb::compile(g, prog), {.host_threads = 2}};
  e.write(x, std::vector<float>(x.num_elements(), 1.0f));
  e.write(w1, std::vector<float>(w1.num_elements(), 1.0f));
  e.write(w2, std::vector<float>(w2.num_elements(), 1.0f));
  e.write(b1, std::vector<float>{-5.0f, 0.5f, 1.0f});
  e.run();
  auto const y = e.read<float>(joined);
  REQUIRE(y.size() == 2 * 25 * 5);
  // Position 0 (a corner): relu(4 + bias) for the 1x1 channels, then 2 x 2 taps x 4 channels for the 3x3 ones.
  CHECK(std::vector<float>(y.begin(), y.begin() + 5) == std::vector<float>{0.0f, 4.5f, 5.0f, 16.0f, 16.0f});
  // Position (1, 1) of image 1: the 3x3 channels see 9 taps x 4 channels.
  std::size_t const at = (25 + 6) * 5;
  CHECK(std::vector<float>(y.begin() + at, y.begin() + at + 5) == std::vector<float>{0.0f, 4.5f, 5.0f, 36.0f, 36.0f});
}

// [conv-accumulate-example]
/// A residual block's end: y = relu(x + conv1x1(h) + b), the convolution's sum added to x's values in place (x is
/// the block's input, which nothing reads after it), the bias and ReLU inside the convolution's host task.
tb::Tensor residual_end(tb::Graph& g, tb::Sequence& prog, tb::Tensor const& h, tb::Tensor const& w, tb::Tensor const& b,
                        tb::Tensor const& x, tb::ConvParams const& p) {
  using namespace tb::expr;
  tb::ops::conv_accumulate(g, prog, h, w, x, p);                        // x += conv(h, w)
  tb::ops::map_in_place<float, float>(g, prog, relu(_1 + _2), x, b);  // x = relu(x + b)
  return x;
}
// [conv-accumulate-example]

TEST_CASE("conv_accumulate example") {
  tb::Graph g{tb::targets::tiny(8, 256 * 1024)};
  tb::Sequence prog;
  tb::ConvParams p;  // 1x1, 4 -> 3 channels
  p.batch = 2;
  p.input_field = {5, 5};
  p.kernel_shape = {1, 1};
  p.channels(4, 3, 1);
  auto const h = tb::ops::create_conv_input(g, p), w = tb::ops::create_conv_weights(g, p);
  auto x = g.add_variable<float>(p.output_shape(), "x");
  tb::map_linearly(g, x);
  auto b = g.add_variable<float>({3}, "b");
  tb::map_linearly(g, b);
  auto const y = residual_end(g, prog, h, w, b, x, p);
  tb::Engine e{tb::compile(g, prog), {.host_threads = 2}};
  e.write(h, std::vector<float>(h.num_elements(), 1.0f));
  e.write(w, std::vector<float>(w.num_elements(), 0.5f));
  std::vector<float> xv(x.num_elements());
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i % 3) - 4.0f;  // -4, -3, -2 per position
  e.write(x, xv);
  e.write(b, std::vector<float>{1.0f, 0.5f, -1.0f});
  e.run();
  // Per position, relu(x + 4 * 0.5 + b): relu(-4 + 2 + 1), relu(-3 + 2 + 0.5), relu(-2 + 2 - 1), all 0; then with
  // x = 0, 1, 2: 3, 3.5 and 3.
  auto const got = e.read<float>(y);
  REQUIRE(got.size() == 2 * 25 * 3);
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == 0.0f);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i % 3);  // 0, 1, 2
  e.write(x, xv);
  e.run();
  auto const again = e.read<float>(y);
  for (std::size_t i = 0; i < again.size(); ++i) CHECK(again[i] == std::vector<float>{3.0f, 3.5f, 3.0f}[i % 3]);
}

// [code-example]
/// An activation chosen when the program runs: one interpreted map (an expr::Code), no kernel compiled for it.
tb::Tensor activation(tb::Graph& g, tb::Sequence& prog, tb::Tensor const& x, std::string const& name) {
  using namespace tb::expr;
  Code const code = name == "relu"       ? Code{relu(_1)}
                    : name == "hardswish" ? Code{_1 * max(min(_1 * constant(1.0 / 6) + 0.5, 1.0), 0.0)}
                                          : Code{_1 * sigmoid(_1)};  // silu
  return tb::ops::map(g, prog, code, x);
}
// [code-example]

TEST_CASE("code example") {
  tb::Graph g{tb::targets::tiny(2)};
  tb::Sequence prog;
  auto x = g.add_variable<float>({4}, "x");
  tb::map_linearly(g, x);
  auto const r = activation(g, prog, x, "relu"), h = activation(g, prog, x, "hardswish");
  tb::Engine e{tb::compile(g, prog)};
  e.write(x, std::vector<float>{-4, -1, 0, 2});
  e.run();
  CHECK(e.read<float>(r) == std::vector<float>{0, 0, 0, 2});
  auto const hv = e.read<float>(h);
  CHECK(hv[0] == 0.0f);
  CHECK(hv[3] == doctest::Approx(2.0 * (2.0 / 6 + 0.5)));
}

// [loss-example]
/// The loss of a batch of logits against integer labels, with the gradient of the mean loss.
tb::ops::SoftmaxCrossEntropy classify(tb::Graph& g, tb::Sequence& prog, tb::Tensor const& logits,
                                      tb::Tensor const& labels) {
  float const batch = static_cast<float>(logits.dim(0));
  return tb::ops::softmax_cross_entropy(g, prog, logits, labels, 1.0f / batch);
}
// [loss-example]

TEST_CASE("loss example") {
  tb::Graph g{tb::targets::tiny(2, 64 * 1024)};
  tb::Sequence prog;
  auto logits = g.add_variable<float>({2, 3}, "logits");
  auto labels = g.add_variable<std::int32_t>({2}, "labels");
  tb::map_linearly(g, logits);
  tb::map_linearly(g, labels);
  auto const r = classify(g, prog, logits, labels);
  tb::Engine e{tb::compile(g, prog)};
  e.write(logits, std::vector<float>{0, 0, 0, 1, 2, 3});
  e.write(labels, std::vector<std::int32_t>{1, 2});
  e.run();
  auto const loss = e.read<float>(r.loss);
  CHECK(loss[0] == doctest::Approx(std::log(3.0)));
  CHECK(loss[1] == doctest::Approx(std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0));
  CHECK(e.read<float>(r.total_correct)[0] == 1.0f);  // row 0's first maximum is class 0, row 1's is its label
  CHECK(e.read<float>(r.grad)[1] == doctest::Approx((1.0 / 3.0 - 1.0) / 2.0));
}

// [sgd-example]
/// The backward pass and SGD step of a dense layer y = relu(x w + b), given dy = dL/dy: returns dL/dx and updates
/// w and b in place (w's update is one matmul_acc: w += -lr * x^T dz).
tb::Tensor dense_relu_backward(tb::Graph& g, tb::Sequence& prog, tb::Tensor const& x, tb::Tensor const& y,
                               tb::Tensor const& w, tb::Tensor const& b, tb::Tensor const& dy, float lr) {
  using namespace tb::expr;
  tb::ops::map_in_place<float, float>(g, prog, select(_2 > 0.0f, _1, 0.0f), dy, y);  // dz: through the ReLU
  tb::Tensor const db = tb::ops::reduce(g, prog, dy, {0}, tb::ops::ReduceOp::add);
  tb::Tensor const dx = tb::ops::matmul(g, prog, dy, w.transpose());  // before w changes
  tb::ops::matmul_acc(g, prog, w, -lr, x.transpose(), dy);
  tb::ops::scaled_add(g, prog, b, db, -lr);
  return dx;
}
// [sgd-example]

TEST_CASE("sgd example") {
  using namespace tb::expr;
  tb::Graph g{tb::targets::tiny(4, 1 << 20)};
  tb::Sequence prog;
  auto var = [&](tb::Shape s, char const* name) {
    auto t = g.add_variable<float>(s, name);
    tb::map_linearly(g, t);
    return t;
  };
  auto x = var({2, 3}, "x"), w = var({3, 2}, "w"), b = var({2}, "b"), dy = var({2, 2}, "dy");
  auto y = tb::ops::matmul(g, prog, x, w);
  tb::ops::map_in_place<float, float>(g, prog, relu(_1 + _2), y, b);
  auto dx = dense_relu_backward(g, prog, x, y, w, b, dy, 0.5f);
  tb::Engine e{tb::compile(g, prog), {.host_threads = 2}};
  e.write(x, std::vector<float>{1, 2, 3, -1, 0, 1});
  e.write(w, std::vector<float>{1, -1, 0, 1, 1, 0});  // x w = [[4, 1], [0, 1]]
  e.write(b, std::vector<float>{-1, 0});              // y = [[3, 1], [0, 1]]: the ReLU stops (1, 0)
  e.write(dy, std::vector<float>{1, 2, 3, 4});        // dz = [[1, 2], [0, 4]]
  e.run();
  CHECK(e.read<float>(dx) == std::vector<float>{-1, 2, 1, -4, 4, 0});                // dz w^T
  CHECK(e.read<float>(b) == std::vector<float>{-1.5f, -3});                          // b - 0.5 (1, 6)
  CHECK(e.read<float>(w) == std::vector<float>{0.5f, 0, -1, -1, -0.5f, -5});  // w - 0.5 x^T dz
}

// [program-node-example]
template <tb::ProgramLike P>
struct Twice {  // a user's program node: its body lowered twice in a row, no loop counter
  P body;
  void lower(tb::Lowering& l) const {
    body.lower(l);
    body.lower(l);
  }
};

std::vector<float> program_node_example() {
  tb::Graph g{tb::targets::tiny(2)};
  tb::Tensor x = g.add_variable<float>({8}, "x");
  tb::Tensor one = g.add_constant<float>({8}, 1.0f, "one");
  tb::map_linearly(g, x);
  tb::map_linearly(g, one);
  tb::ComputeSet cs = g.add_compute_set("inc");
  for (auto const& [tile, region] : g.tile_mapping(x))
    g.add_vertex<Axpy>(cs, tile, one.slice(region), x.slice(region), 1.0f);
  tb::Engine engine{tb::compile(g, Twice<tb::Execute>{tb::execute(cs)})};
  engine.run();
  return engine.read<float>(x);  // 2 everywhere
}
// [program-node-example]

TEST_CASE("program node example") {
  CHECK(program_node_example() == std::vector<float>(8, 2.0f));
}

// [pipeline-example]
// Two stages on two IPUs: stage 0 scales each micro-batch, stage 1 adds one and streams it out.
std::vector<float> pipeline_example() {
  using namespace tb::expr;
  tb::Graph g{tb::targets::tiny(4, 64 * 1024, 2)};  // 2 IPUs of 4 tiles
  tb::Graph ipu0 = g.shard(0), ipu1 = g.shard(1);

  tb::Tensor x = ipu0.add_variable<float>({8}, "x");
  tb::map_linearly(ipu0, x);
  auto in = g.add_host_to_device_fifo<float>("in", 8);
  tb::Sequence first;
  first.add(tb::stream_in(in, x));
  tb::Tensor h = tb::ops::map(ipu0, first, _1 * 2.0f, x);  // on IPU 0's tiles

  tb::Tensor h1 = tb::receive_buffer(ipu1, h, "h1");  // h's layout, on IPU 1
  tb::Sequence second;
  tb::Tensor y = tb::ops::map(ipu1, second, _1 + 1.0f, h1);
  auto out = g.add_device_to_host_fifo<float>("out", 8);
  second.add(tb::stream_out(y, out));

  auto pipe = tb::pipeline({.micro_batches = 4},  // 4 micro-batches in 5 steps: the IPUs work at once in 3
                           tb::stage(ipu0, std::move(first)),
                           tb::stage(ipu1, std::move(second), tb::receive(h, h1)));
  tb::Engine engine{tb::compile(g, pipe)};
  std::vector<float> data(32), result(32);
  std::iota(data.begin(), data.end(), 0.0f);
  engine.connect(in, data);
  engine.connect(out, result);
  engine.run();
  return result;  // 2 x + 1, micro-batch after micro-batch
}
// [pipeline-example]

TEST_CASE("pipeline example") {
  std::vector<float> expect(32);
  for (std::size_t i = 0; i < 32; ++i) expect[i] = 2.0f * static_cast<float>(i) + 1.0f;
  CHECK(pipeline_example() == expect);
}

// [replication-example]
// Data parallelism over 2 replicas: each streams its own x, computes g = w - x, and the replicas average g before
// the update, so their copies of w stay equal.
std::vector<float> replication_example() {
  using namespace tb::expr;
  tb::Graph g{tb::targets::tiny(4)};
  tb::Tensor w = g.add_variable<float>({8}, "w"), x = g.add_variable<float>({8}, "x");
  tb::map_linearly(g, w);
  tb::map_linearly(g, x);
  auto in = g.add_host_to_device_fifo<float>("x_in", 8);
  tb::Sequence step;
  step.add(tb::stream_in(in, x));
  tb::Tensor grad = tb::ops::map(g, step, _1 - _2, w, x);
  tb::ops::cross_replica_mean_in_place(step, grad, "grad");  // the same in every replica
  tb::ops::map_in_place(g, step, _1 - _2 * 0.5f, w, grad);

  tb::Engine engine{tb::compile(g, {.replicas = 2}, step)};
  engine.write(w, std::vector<float>(8, 1.0f));               // every replica's copy
  std::vector<float> x0(8, 3.0f), x1(8, 5.0f);
  engine.connect(in, 0, x0);                                   // each replica its own data
  engine.connect(in, 1, x1);
  engine.run();
  return engine.read<float>(w, 1);                             // 1 - 0.5 * mean(1 - 3, 1 - 5) = 2.5
}
// [replication-example]

TEST_CASE("replication example") {
  CHECK(replication_example() == std::vector<float>(8, 2.5f));
}

// [vertices-example]
// One Axpy vertex per block of 16 elements of y (an operator's many small vertices): the records are made on the
// graph's build threads (Graph::set_build_threads) and added in block order: the same graph for any number.
void add_axpy_blocks(tb::Graph& g, tb::ComputeSet cs, tb::Tensor const& x, tb::Tensor const& y) {
  std::vector<std::pair<std::size_t, tb::Interval>> blocks;  // (tile, 16 elements of y)
  for (auto const& [tile, region] : g.tile_mapping(y))
    for (std::size_t b = region.begin; b < region.end; b += 16)
      blocks.push_back({tile, tb::Interval{b, std::min(region.end, b + 16)}});
  tb::vertex::add_vertices(g, blocks.size(), [&](std::size_t i) {  // on several threads: reads the graph only
    auto const& [tile, r] = blocks[i];
    return tb::vertex::record<Axpy>(g, cs, tile, x.slice(r), y.slice(r), 2.0f);
  });
}
// [vertices-example]

TEST_CASE("vertices in bulk example") {
  std::uint64_t hash = 0;
  for (std::size_t threads : {1u, 3u}) {
    tb::Graph g{tb::targets::ipu_mk2()};
    g.set_build_threads(threads);
    tb::Tensor x = g.add_variable<float>({1 << 16}, "x"), y = g.add_variable<float>({1 << 16}, "y");
    tb::map_linearly(g, x);
    tb::map_linearly(g, y);
    tb::ComputeSet cs = g.add_compute_set("axpy");
    add_axpy_blocks(g, cs, x, y);
    std::size_t blocks = 0;
    for (auto const& [tile, region] : g.tile_mapping(y)) blocks += (region.size() + 15) / 16;
    CHECK(g.impl().vertices.size() == blocks);
    if (hash != 0) CHECK(g.impl().vertex_hash.first() == hash);
    hash = g.impl().vertex_hash.first();
    tb::Engine engine{tb::compile(g, tb::execute(cs))};
    engine.write(x, std::vector<float>(x.num_elements(), 1.0f));
    engine.run();
    CHECK(engine.read<float>(y) == std::vector<float>(y.num_elements(), 2.0f));
  }
}

// [cache-example]
// Compiles a network's graph with an executable cache: the first call lowers the programs and stores the
// executable under DIR, a later call for the same graph and programs (this process or another) loads it.
tb::Executable compile_cached(tb::Graph const& g, tb::Sequence const& prog, std::string const& dir) {
  tb::Executable exe = tb::compile(g, {.cache_dir = dir}, prog);  // or TILEBSP_EXECUTABLE_CACHE=DIR
  std::cout << (exe.loaded_from_cache() ? "loaded " : "compiled and stored ") << exe.cache_entry() << "\n";
  return exe;
}
// [cache-example]

TEST_CASE("executable cache example") {
  auto const dir = std::filesystem::temp_directory_path() / ("tilebsp_docs_cache_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto const build = [](tb::Graph& g) {
    auto a = g.add_variable<float>({64, 32}, "a"), b = g.add_variable<float>({32, 16}, "b");
    tb::map_linearly(g, a);
    tb::map_linearly(g, b);
    tb::Sequence prog;
    static_cast<void>(tb::ops::matmul(g, prog, a, b));
    return prog;
  };
  tb::Graph g1{tb::targets::tiny(8)}, g2{tb::targets::tiny(8)};
  auto const p1 = build(g1), p2 = build(g2);
  CHECK_FALSE(compile_cached(g1, p1, dir.string()).loaded_from_cache());
  CHECK(compile_cached(g2, p2, dir.string()).loaded_from_cache());
  std::filesystem::remove_all(dir);
}

// [shared-cache-example]
// A cache shared on purpose (a team's build directory, writable by its group): trusted by name, since tilebsp
// otherwise refuses a directory that anyone but its owner may write (docs/01).
tb::Executable compile_with_shared_cache(tb::Graph const& g, tb::Sequence const& prog, std::string const& dir) {
  return tb::compile(g, {.cache_dir = dir, .trust_cache_dir = true}, prog);  // or TILEBSP_EXECUTABLE_CACHE_TRUST=1
}
// [shared-cache-example]

TEST_CASE("shared cache example") {
  auto const dir = std::filesystem::temp_directory_path() / ("tilebsp_docs_shared_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::all);  // 0777
  auto const build = [](tb::Graph& g) {
    auto a = g.add_variable<float>({64}, "a");
    tb::map_linearly(g, a);
    tb::Sequence prog;
    using namespace tb::expr;
    static_cast<void>(tb::ops::map<float>(g, prog, _1 * 2.0f, a));
    return prog;
  };
  tb::Graph g1{tb::targets::tiny(8)}, g2{tb::targets::tiny(8)};
  auto const p1 = build(g1), p2 = build(g2);
  std::vector<std::string> warnings;
  auto const previous = tb::set_warning_handler([&](std::string_view w) { warnings.emplace_back(w); });
  CHECK(tb::compile(g1, {.cache_dir = dir.string()}, p1).cache_entry().empty());  // refused, with a warning
  CHECK(warnings.size() == 1);
  CHECK_FALSE(compile_with_shared_cache(g1, p1, dir.string()).loaded_from_cache());
  CHECK(compile_with_shared_cache(g2, p2, dir.string()).loaded_from_cache());
  tb::set_warning_handler(previous);
  std::filesystem::remove_all(dir);
}

// [checked-example]
// A reader of an untrusted file checks a strided run it was given, and a product of dimensions, before using
// them: tilebsp::checked never lets a wrapped result pass (5 + 4 * 2^62 wraps to 5 in int64).
bool copy_from_file_fits(std::int64_t start, std::int64_t stride, std::int64_t count, std::vector<float> const& buffer) {
  return tb::checked::run_fits(start, stride, count, static_cast<std::int64_t>(buffer.size()));
}
std::optional<std::size_t> elements_of(std::vector<std::uint32_t> const& dims_from_file) {
  return tb::checked::product(dims_from_file);  // nothing when the product does not fit a size_t
}
// [checked-example]

TEST_CASE("checked example") {
  std::vector<float> const buffer(100);
  CHECK(copy_from_file_fits(5, 3, 10, buffer));
  CHECK_FALSE(copy_from_file_fits(5, std::int64_t{1} << 62, 5, buffer));
  CHECK(elements_of({60000, 28, 28}) == std::size_t{47040000});
  CHECK_FALSE(elements_of({4, 1u << 31, 1u << 31}).has_value());
}

// [profiling-example]
// A report of a small layer: the engine measures host time per step (profiling), the profile names the operators
// and their plans, and write_report writes report.html, profile.json and summary.txt.
tb::ProfileDetail profiling_example(std::string const& dir) {
  tb::Graph g{tb::targets::ipu_mk2()};
  tb::Sequence prog;
  tb::Tensor x = g.add_variable<float>({64, 256}, "x"), w = g.add_variable<float>({256, 128}, "w");
  tb::map_linearly(g, x);
  tb::map_linearly(g, w);
  tb::Tensor h = tb::ops::matmul(g, prog, x, w, {.available_memory_proportion = 0.3}, "fc1");
  tb::ops::map_in_place(g, prog, tb::expr::relu(tb::expr::_1), h);
  tb::Engine engine{tb::compile(g, prog), {.profiling = true}};
  engine.run();
  tb::Profile const profile = engine.profile();
  for (auto const& op : profile.operators)  // "matmul fc1: 1 plan(s)", "map map_in_place: 0 plan(s)"
    std::cout << op.kind << " " << op.name << ": " << op.plans.size() << " plan(s)\n";
  tb::report::write_report(profile, dir);  // open dir/report.html in a browser
  return profile.detail();
}
// [profiling-example]

TEST_CASE("profiling example") {
  auto const dir = std::filesystem::temp_directory_path() / "tilebsp_profiling_example";
  auto const d = profiling_example(dir.string());
  CHECK(std::filesystem::exists(dir / "report.html"));
  REQUIRE(d.liveness.size() == 1);
  CHECK(d.liveness[0].bytes[d.liveness[0].peak_step] > 0);
  std::filesystem::remove_all(dir);
}

// [isa-example]
#include <tilebsp/simd/tuning.hpp>
// The instruction set this translation unit's kernels were compiled for, and their register blocks there: the
// same source gives SSE2 kernels by default, AVX2 ones with -march=x86-64-v3, AVX-512 ones with -march=x86-64-v4.
std::string isa_example() {
  namespace sd = tilebsp::simd;
  return std::string(sd::isa_name()) + ": " + std::to_string(sd::lanes) + " lanes, " + std::to_string(sd::tuning.registers) +
         " registers, gemm block " + std::to_string(sd::tuning.gemm_mr) + " x " + std::to_string(2 * sd::lanes);
}
// [isa-example]

TEST_CASE("isa example") {
  std::string const s = isa_example();
  INFO(s);
#if defined(__AVX512F__)
  CHECK(s.find(": 16 lanes, 32 registers, gemm block 12 x 32") != std::string::npos);
#elif defined(__AVX2__) && defined(__FMA__)
  CHECK(s == "fma3+avx2: 8 lanes, 16 registers, gemm block 6 x 16");
#elif defined(__x86_64__) && !defined(__AVX__)
  CHECK(s == "sse2: 4 lanes, 16 registers, gemm block 6 x 8");
#else
  CHECK(s.find(" lanes, ") != std::string::npos);
#endif
}

// [kernels-example]
#include <tilebsp/ops/kernels.hpp>
// Which set of kernels the operators run: under tilebsp::compiled, the best set the library holds that this CPU runs
// ("avx2 (fma3+avx2)" on a Zen 3), or the one TILEBSP_ISA caps it to; header-only, this file's own -march.
std::string kernels_example() {
  return std::string(tilebsp::ops::kernels_level()) + " (" + std::string(tilebsp::ops::kernels_isa()) + ")";
}
// [kernels-example]

TEST_CASE("kernels example") {
  std::string const s = kernels_example();
  INFO(s);
#ifdef TILEBSP_COMPILED
  auto const& chosen = tilebsp::ops::detail::choose_kernels(std::getenv("TILEBSP_ISA"));
  CHECK(s == std::string(chosen.level) + " (" + chosen.isa + ")");
#else
  CHECK(s == std::string(tilebsp::ops::detail::compiled_level()) + " (" + tilebsp::simd::isa_name() + ")");
#endif
}

// [blocks-example]
#include <tilebsp/core/caches.hpp>
#include <tilebsp/simd/blocks.hpp>
// The caches the kernels block for (TILEBSP_CACHE_SIZES where set, else what this machine reports) and the gemm's
// blocks they give: "32K,512K,32M: gemm blocks of 48 x 512 x 4096" on a Zen 3 core, 96 rows on a Zen 4.
std::string blocks_example() {
  tilebsp::CacheSizes const caches = tilebsp::cache_sizes();  // option_error for a malformed TILEBSP_CACHE_SIZES
  tilebsp::simd::Blocks const b = tilebsp::simd::blocks_for(caches);
  return tilebsp::to_string(caches) + ": gemm blocks of " + std::to_string(b.gemm_mc) + " x " + std::to_string(tilebsp::simd::gemm_kc) +
         " x " + std::to_string(b.gemm_nc);
}
// [blocks-example]

TEST_CASE("blocks example") {
  std::string const s = blocks_example();
  INFO(s);
  tilebsp::CacheSizes const c = tilebsp::cache_sizes();
  CHECK(s.starts_with(tilebsp::to_string(c) + ": gemm blocks of " + std::to_string(tilebsp::simd::blocks_for(c).gemm_mc) + " x 512 x "));
  tilebsp::core::detail::override_cache_sizes(tilebsp::CacheSizes{32 << 10, 1 << 20, 32 << 20});
  CHECK(tilebsp::simd::blocks().gemm_mc == 96);
  tilebsp::core::detail::override_cache_sizes(std::nullopt);
}

// [reuse-host-memory-example]
/// Runs `exe` with its intermediates sharing host memory and returns output `y` (live at the program's end).
std::vector<float> run_sharing_memory(tb::Executable const& exe, tb::Tensor const& x, std::vector<float> const& xv, tb::Tensor const& y) {
  tb::Engine e{exe, {.reuse_host_memory = true}};
  e.write(x, xv);  // read by the program before it is written: memory of its own
  e.run();
  return e.read<float>(y);
}
// [reuse-host-memory-example]

TEST_CASE("reuse host memory example") {
  tb::Graph g{tb::targets::tiny(4, 64 * 1024)};
  tb::Sequence prog;
  using namespace tb::expr;
  auto x = g.add_variable<float>({64}, "x");
  tb::map_linearly(g, x);
  auto const h = tb::ops::map<float>(g, prog, _1 * 2.0f, x);  // an intermediate: shares memory
  auto const y = tb::ops::map<float>(g, prog, _1 + 1.0f, h);
  auto const exe = tb::compile(g, {}, prog);
  std::vector<float> xv(64);
  std::iota(xv.begin(), xv.end(), 0.0f);
  auto const yv = run_sharing_memory(exe, x, xv, y);
  for (std::size_t i = 0; i < xv.size(); ++i) CHECK(yv[i] == xv[i] * 2.0f + 1.0f);
}
