// The host paths' contract across operators: one program of matmul (K split over tiles, serial steps), the three
// convolution passes (partials, serial steps), a fused map and max pooling with its gradient, run with host paths
// on and off on 1, 2, 3 and 7 host threads: every result bitwise the same.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <array>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace tb = tilebsp;

namespace {
/// Host paths the Engine runs inside the one before them (the profile's "(fused into the host path before)").
std::size_t fused_paths(tb::Engine const& e) {
  std::size_t fused = 0;
  auto const profile = e.profile();
  for (auto const& step : profile.programs[0])
    if (step.kind == "host_path" && step.label.find("(fused into the host path before)") != std::string::npos) ++fused;
  return fused;
}

/// NaN and infinite values among the results.
std::size_t non_finite(std::vector<std::vector<float>> const& results) {
  std::size_t n = 0;
  for (auto const& r : results)
    for (float v : r) n += std::isfinite(v) ? 0 : 1;
  return n;
}

/// run(threads, host, fuse) on 1, 2 and 3 threads with host paths, fused and not: every result bitwise `want`.
template <class Run>
void same_bits_fused_or_not(Run const& run, std::vector<std::vector<float>> const& want) {
  for (std::size_t threads : {1, 2, 3})
    for (bool fuse : {true, false}) {
      CAPTURE(threads);
      CAPTURE(fuse);
      auto const got = run(threads, true, fuse);
      for (std::size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        REQUIRE(got[i].size() == want[i].size());
        CHECK(std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)) == 0);
      }
    }
}
}  // namespace

TEST_CASE("host paths write their bodies' bits, for any number of threads") {
  tb::Graph g{tb::targets::tiny(7, 32 * 1024)};
  tb::Sequence prog;
  double const amp = 0.05;  // small temporary memory: K and reduction channels split over tiles and serial steps

  auto a = g.add_variable<float>({24, 96}, "a"), b = g.add_variable<float>({96, 20}, "b");
  tb::map_linearly(g, a);
  tb::map_linearly(g, b);
  auto const mp = tb::ops::plan_matmul(g, a, b, {.available_memory_proportion = amp});
  CHECK((mp.reduce || mp.k_steps > 1));
  auto c = tb::ops::matmul(g, prog, a, b, {.available_memory_proportion = amp});

  tb::ConvParams p;
  p.batch = 2;
  p.input_field = {9, 9};
  p.kernel_shape = {3, 3};
  p.padding_lower = p.padding_upper = {1, 1};
  p.channels(32, 32, 2);
  tb::ConvOptions const o{.available_memory_proportion = amp};
  auto const cp = tb::ops::plan_conv(g, p, tb::ConvPass::forward, tb::ElementType::f32, o);
  CHECK((cp.reduce || cp.steps > 1));
  auto x = tb::ops::create_conv_input(g, p), w = tb::ops::create_conv_weights(g, p);
  auto y = tb::ops::conv(g, prog, x, w, p, o);
  auto dx = tb::ops::conv_backward_input(g, prog, y, w, p, o);
  auto dw = tb::ops::conv_weight_gradients(g, prog, y, x, p, o);

  using namespace tb::expr;
  auto m = tb::ops::map<float, float>(g, prog, relu(_1 * 2.0f + _2), y, dx);
  tb::PoolParams const pp{.kernel_shape = {3, 3}, .stride = {2, 2}, .padding_lower = {1, 1}, .padding_upper = {1, 1}};
  auto pooled = tb::ops::max_pool(g, prog, m, pp);
  auto dm = tb::ops::max_pool_backward(g, prog, m, pooled, pooled, pp);

  auto const exe = tb::compile(g, {.allow_out_of_memory = true}, prog);
  auto const av = tbt::values<float>(a.num_elements(), false, 1), bv = tbt::values<float>(b.num_elements(), false, 2);
  auto const xv = tbt::values<float>(x.num_elements(), false, 3), wv = tbt::values<float>(w.num_elements(), false, 4);
  auto const run = [&](std::size_t threads, bool host) {
    tb::Engine e{exe, {.host_threads = threads, .host_kernels = host}};
    e.write(a, av);
    e.write(b, bv);
    e.write(x, xv);
    e.write(w, wv);
    e.run();
    std::size_t spans = 0, tasks = 0;  // host path steps run, and those that ran their task
    auto const profile = e.profile();
    for (auto const& step : profile.programs[0])
      if (step.kind == "host_path") {
        spans += step.executions;
        if (step.label.find("(body runs)") == std::string::npos) tasks += step.executions;
      }
    CHECK(spans >= 5);  // at least the matmul, the three convolution passes and max_pool
    CHECK(tasks == (host ? spans : 0));
    std::vector<std::vector<float>> out;
    for (auto const& t : {c, y, dx, dw, m, pooled, dm}) out.push_back(e.read<float>(t));
    return out;
  };
  auto const want = run(1, false);
  for (std::size_t threads : {1, 2, 3, 7})
    for (bool host : {true, false}) {
      CAPTURE(threads);
      CAPTURE(host);
      auto const got = run(threads, host);
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        REQUIRE(got[i].size() == want[i].size());
        CHECK(std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)) == 0);
      }
    }
}

TEST_CASE("an elementwise host path after a convolution or a matmul runs inside it, with the same bits") {
  // EngineOptions::fuse_host_paths: a bias + activation map that directly follows the operator writing its operand
  // runs on each finished block of the operator's host task. The pointwise convolution (a matmul on the host), a
  // convolution whose units hold all its channels and a matmul fuse; the depthwise convolution (units of a vector
  // of channels) and a map that writes a new tensor do not. Every result bitwise the same as with the bodies run.
  tb::Graph g{tb::targets::tiny(7, 64 * 1024)};
  tb::Sequence prog;
  using namespace tb::expr;
  auto const conv = [&](std::int64_t field, std::size_t in, std::size_t out, std::size_t groups, std::int64_t k, tb::Tensor const* x) {
    tb::ConvParams p;
    p.batch = 2;
    p.input_field = {field, field};
    p.kernel_shape = {k, k};
    p.padding_lower = p.padding_upper = {k / 2, k / 2};
    p.channels(in, out, groups);
    tb::Tensor const src = x ? *x : tb::ops::create_conv_input(g, p);
    auto const w = tb::ops::create_conv_weights(g, p);
    return std::array<tb::Tensor, 3>{src, w, tb::ops::conv(g, prog, src, w, p)};
  };
  auto const bias = [&](std::size_t n, std::string const& name) {
    auto b = g.add_variable<float>({n}, name);
    tb::map_linearly(g, b);
    return b;
  };
  auto const [x1, w1, y1] = conv(14, 16, 32, 1, 1, nullptr);  // pointwise
  auto const b1 = bias(32, "b1");
  tb::ops::map_in_place<float, float>(g, prog, min(max(_1 + _2, 0.0f), 6.0f), y1, b1);
  auto const [x2, w2, y2] = conv(12, 3, 16, 1, 3, nullptr);  // a stem: units of all its channels
  auto const b2 = bias(16, "b2");
  tb::ops::map_in_place<float, float>(g, prog, relu(_1 + _2), y2, b2);
  auto const [x3, w3, y3] = conv(14, 32, 32, 32, 3, &y1);  // depthwise
  auto const b3 = bias(32, "b3");
  tb::ops::map_in_place<float, float>(g, prog, _1 * sigmoid(_1 + _2), y3, b3);
  auto a = g.add_variable<float>({200, 24}, "a"), b = g.add_variable<float>({24, 40}, "b");
  tb::map_linearly(g, a);
  tb::map_linearly(g, b);
  auto c = tb::ops::matmul(g, prog, a, b);
  auto const b4 = bias(40, "b4");
  tb::ops::map_in_place<float, float>(g, prog, relu(_1 + _2), c, b4);
  auto const d = tb::ops::map<float, float>(g, prog, _1 - _2, c, b4);  // a new tensor: not fused

  auto const exe = tb::compile(g, {.allow_out_of_memory = true}, prog);
  std::vector<std::pair<tb::Tensor, std::vector<float>>> inputs;
  unsigned seed = 10;
  for (auto const& t : {x1, w1, b1, x2, w2, b2, w3, b3, a, b, b4})
    inputs.emplace_back(t, tbt::values<float>(t.num_elements(), false, seed++));
  auto const run = [&](std::size_t threads, bool host, bool fuse) {
    tb::Engine e{exe, {.host_threads = threads, .host_kernels = host, .fuse_host_paths = fuse}};
    for (auto const& [t, v] : inputs) e.write(t, v);
    e.run();
    CHECK(fused_paths(e) == (host && fuse ? 3u : 0u));  // the pointwise convolution, the stem, the matmul
    std::vector<std::vector<float>> out;
    for (auto const& t : {y1, y2, y3, c, d}) out.push_back(e.read<float>(t));
    return out;
  };
  auto const want = run(1, false, false);
  same_bits_fused_or_not(run, want);
}

TEST_CASE("a bias and activation after a matmul runs as its gemm's post-op: the same bits, NaN, infinities and -0 included") {
  // A map of the forms ColumnOp describes (relu(_1 + _2), min(max(_1 + _2, lo), hi), (_1 + _2) * sigmoid(_1 + _2))
  // over a matmul's result is applied by the gemm as it stores each value (simd::PostOp) — also where the matmul's
  // blocks are narrower than its rows and an epilogue would not fuse (the first, 600 columns on 24 rows), over two K
  // blocks of the gemm (K = 700), and on a last vector of 9 columns (the third). Operands and biases hold NaN,
  // infinities and -0.
  tb::Graph g{tb::targets::tiny(7, 256 * 1024)};
  tb::Sequence prog;
  using namespace tb::expr;
  auto const variable = [&](tb::Shape const& shape, std::string const& name) {
    auto t = g.add_variable<float>(shape, name);
    tb::map_linearly(g, t);
    return t;
  };
  auto const a1 = variable({24, 700}, "a1"), w1 = variable({700, 600}, "w1"), b1 = variable({600}, "b1");
  auto const a2 = variable({200, 24}, "a2"), w2 = variable({24, 40}, "w2"), b2 = variable({40}, "b2");
  auto const a3 = variable({50, 16}, "a3"), w3 = variable({16, 41}, "w3"), b3 = variable({41}, "b3");
  auto const c1 = tb::ops::matmul(g, prog, a1, w1);
  tb::ops::map_in_place<float, float>(g, prog, relu(_1 + _2), c1, b1);
  auto const c2 = tb::ops::matmul(g, prog, a2, w2);
  tb::ops::map_in_place<float, float>(g, prog, min(max(_1 + _2, -0.5f), 0.75f), c2, b2);
  auto const c3 = tb::ops::matmul(g, prog, a3, w3);
  tb::ops::map_in_place<float, float>(g, prog, (_1 + _2) * sigmoid(_1 + _2), c3, b3);  // SiLU

  auto const exe = tb::compile(g, {.allow_out_of_memory = true}, prog);
  float const inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::pair<tb::Tensor, std::vector<float>>> inputs;
  unsigned seed = 40;
  for (auto const& t : {a1, w1, b1, a2, w2, b2, a3, w3, b3}) {
    auto v = tbt::values<float>(t.num_elements(), false, seed++);
    for (std::size_t i = seed % 7; i < v.size(); i += 97) v[i] = std::array<float, 4>{nan, inf, -inf, -0.0f}[i % 4];
    inputs.emplace_back(t, std::move(v));
  }
  auto const run = [&](std::size_t threads, bool host, bool fuse) {
    tb::Engine e{exe, {.host_threads = threads, .host_kernels = host, .fuse_host_paths = fuse}};
    for (auto const& [t, v] : inputs) e.write(t, v);
    e.run();
    CHECK(fused_paths(e) == (host && fuse ? 3u : 0u));
    std::vector<std::vector<float>> out;
    for (auto const& t : {c1, c2, c3}) out.push_back(e.read<float>(t));
    return out;
  };
  auto const want = run(1, false, false);
  CHECK(non_finite(want) > 0);
  same_bits_fused_or_not(run, want);
}

TEST_CASE("a bias and activation after a convolution, or a matmul of partial sums, runs as its post-op: the same bits") {
  // The ColumnOp forms after a convolution whatever its units hold: applied as the depthwise kernels (strided,
  // 40 channels: a part vector) and the row blocks (stride 1, 48 channels, SiLU) store each result, over each unit's block
  // after the other forms (groups of 4 channels, whose lanes are permuted), and over each block once its partial
  // sums are summed (a convolution and a matmul whose reduction is split over tiles). NaN, infinities and -0 in
  // the operands and biases.
  tb::Graph g{tb::targets::tiny(7, 64 * 1024)};
  tb::Sequence prog;
  using namespace tb::expr;
  auto const conv = [&](std::int64_t field, std::size_t in, std::size_t out, std::size_t groups, std::int64_t stride) {
    tb::ConvParams p;
    p.batch = 2;
    p.input_field = {field, field};
    p.kernel_shape = {3, 3};
    p.stride = {stride, stride};
    p.padding_lower = p.padding_upper = {1, 1};
    p.channels(in, out, groups);
    auto const src = tb::ops::create_conv_input(g, p);
    auto const w = tb::ops::create_conv_weights(g, p);
    return std::array<tb::Tensor, 3>{src, w, tb::ops::conv(g, prog, src, w, p)};
  };
  auto const variable = [&](tb::Shape const& shape, std::string const& name) {
    auto t = g.add_variable<float>(shape, name);
    tb::map_linearly(g, t);
    return t;
  };
  auto const [x1, w1, y1] = conv(15, 40, 40, 40, 2);  // depthwise, strided
  auto const b1 = variable({40}, "b1");
  tb::ops::map_in_place<float, float>(g, prog, relu(_1 + _2), y1, b1);
  auto const [x2, w2, y2] = conv(14, 48, 48, 48, 1);  // depthwise, row blocks
  auto const b2 = variable({48}, "b2");
  tb::ops::map_in_place<float, float>(g, prog, (_1 + _2) * sigmoid(_1 + _2), y2, b2);  // SiLU
  auto const [x3, w3, y3] = conv(10, 32, 32, 8, 1);  // groups of 4 channels
  auto const b3 = variable({32}, "b3");
  tb::ops::map_in_place<float, float>(g, prog, _1 + _2, y3, b3);
  auto const [x4, w4, y4] = conv(6, 256, 16, 1, 1);  // weights beyond a tile: reduction split
  auto const b4 = variable({16}, "b4");
  tb::ops::map_in_place<float, float>(g, prog, min(max(_1 + _2, -0.5f), 0.75f), y4, b4);
  auto const a5 = variable({6, 2048}, "a5"), w5 = variable({2048, 24}, "w5"), b5 = variable({24}, "b5");
  auto const c5 = tb::ops::matmul(g, prog, a5, w5);  // K split over tiles
  tb::ops::map_in_place<float, float>(g, prog, relu(_1 + _2), c5, b5);

  auto const exe = tb::compile(g, {.allow_out_of_memory = true}, prog);
  float const inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::pair<tb::Tensor, std::vector<float>>> inputs;
  unsigned seed = 70;
  // Specials everywhere but in the convolutions' weights: the host kernels skip padding taps, where the vertices
  // multiply a zero by the weight (docs/04).
  for (auto const& [t, specials] : std::initializer_list<std::pair<tb::Tensor, bool>>{
           {x1, true}, {w1, false}, {b1, true}, {x2, true}, {w2, false}, {b2, true}, {x3, true}, {w3, false}, {b3, true},
           {x4, true}, {w4, false}, {b4, true}, {a5, true}, {w5, true}, {b5, true}}) {
    auto v = tbt::values<float>(t.num_elements(), false, seed++);
    for (std::size_t i = seed % 7; specials && i < v.size(); i += 89) v[i] = std::array<float, 4>{nan, inf, -inf, -0.0f}[i % 4];
    inputs.emplace_back(t, std::move(v));
  }
  auto const run = [&](std::size_t threads, bool host, bool fuse) {
    tb::Engine e{exe, {.host_threads = threads, .host_kernels = host, .fuse_host_paths = fuse}};
    for (auto const& [t, v] : inputs) e.write(t, v);
    e.run();
    CHECK(fused_paths(e) == (host && fuse ? 5u : 0u));
    auto const profile = e.profile();
    std::size_t partials = 0;
    for (auto const& op : profile.operators)
      for (auto const& plan : op.plans) partials += plan.find("final stage reduces") != std::string::npos ? 1 : 0;
    CHECK(partials == 2);  // the fourth convolution's and the matmul's
    std::vector<std::vector<float>> out;
    for (auto const& t : {y1, y2, y3, y4, c5}) out.push_back(e.read<float>(t));
    return out;
  };
  auto const want = run(1, false, false);
  CHECK(non_finite(want) > 0);
  same_bits_fused_or_not(run, want);
}

TEST_CASE("convolutions write the channels of one tensor (conv_with_output); their epilogues still run inside them") {
  // A concatenation's buffer [2, 10, 10, 56] written by three convolutions, each into its channels: a pointwise one
  // (a matmul on the host), a stem (units of all its channels) and a Winograd 3x3; each slice's bias map directly
  // after its convolution. Bitwise what the same convolutions and maps give into tensors of their own, on 1 to 3
  // threads, fused or not; the three maps fuse (writes and elementwise ranges of rows at the buffer's pitch).
  tb::Graph g{tb::targets::tiny(7, 64 * 1024)};
  tb::Sequence prog;
  using namespace tb::expr;
  auto const params = [](std::size_t in, std::size_t out, std::int64_t k) {
    tb::ConvParams p;
    p.batch = 2;
    p.input_field = {10, 10};
    p.kernel_shape = {k, k};
    p.padding_lower = p.padding_upper = {k / 2, k / 2};
    p.channels(in, out, 1);
    return p;
  };
  struct Layer {
    tb::ConvParams p;
    std::size_t from, to;
    tb::ConvAlgorithm algorithm;
  };
  std::vector<Layer> const layers{{params(12, 16, 1), 0, 16, tb::ConvAlgorithm::automatic},
                                  {params(3, 16, 3), 16, 32, tb::ConvAlgorithm::direct},
                                  {params(16, 24, 3), 32, 56, tb::ConvAlgorithm::winograd}};
  auto joined = g.add_variable<float>({2, 10, 10, 56}, "joined");
  std::vector<tb::Tensor> inputs, slices, own;
  for (auto const& l : layers) {
    auto const x = tb::ops::create_conv_input(g, l.p), w = tb::ops::create_conv_weights(g, l.p);
    auto b = g.add_variable<float>({static_cast<std::size_t>(l.p.output_channels)}, "b");
    tb::map_linearly(g, b);
    tb::ConvOptions const o{.algorithm = l.algorithm};
    auto const slice = joined.slice(l.from, l.to, 3);
    tb::ops::conv_with_output(g, prog, x, w, slice, l.p, o);
    tb::ops::map_in_place<float, float>(g, prog, relu(_1 + _2), slice, b);
    auto const y = tb::ops::conv(g, prog, x, w, l.p, o);
    tb::ops::map_in_place<float, float>(g, prog, relu(_1 + _2), y, b);
    for (auto const& t : {x, w, b}) inputs.push_back(t);
    slices.push_back(slice);
    own.push_back(y);
  }
  auto const exe = tb::compile(g, {.allow_out_of_memory = true}, prog);
  auto const run = [&](std::size_t threads, bool host, bool fuse) {
    tb::Engine e{exe, {.host_threads = threads, .host_kernels = host, .fuse_host_paths = fuse}};
    unsigned seed = 40;
    for (auto const& t : inputs) e.write(t, tbt::values<float>(t.num_elements(), false, seed++));
    e.run();
    CHECK(fused_paths(e) == (host && fuse ? 6u : 0u));  // each slice's map and each own tensor's
    for (std::size_t i = 0; i < layers.size(); ++i) {
      CAPTURE(i);
      auto const a = e.read<float>(slices[i]), b = e.read<float>(own[i]);
      REQUIRE(a.size() == b.size());
      CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    }
    return e.read<float>(joined);
  };
  auto const want = run(1, false, false);
  for (std::size_t threads : {1, 2, 3})
    for (bool fuse : {true, false}) {
      CAPTURE(threads);
      CAPTURE(fuse);
      auto const got = run(threads, true, fuse);
      REQUIRE(got.size() == want.size());
      CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    }
}

TEST_CASE("conv_accumulate adds a convolution to its accumulator in place: the vertices' bits, for any number of threads") {
  // acc += conv(x, w), then acc = relu(acc + b) in place (a residual block's end): a pointwise layer of 256 columns
  // and 4,608 rows (the gemm adds its sums to acc as it stores them), a strided pointwise one, a pointwise one of
  // 640 input channels (more than a K block of the gemm: its sums go through scratch, in parts of rows), a 3x3 one
  // with partials over tiles (small temporary memory) and a grouped 3x3 one. Bitwise the same with host paths on or
  // off, fused or not, on 1 to 3 threads, and bitwise relu((acc + conv(x, w)) + b) with ops::conv's result.
  tb::Graph g{tb::targets::tiny(7, 4 << 20)};
  tb::Sequence prog;
  using namespace tb::expr;
  struct Layer {
    std::size_t in, out, groups;
    std::int64_t field, k, stride;
    double amp;
  };
  std::vector<Layer> const layers{{8, 256, 1, 48, 1, 1, 0.6},   {12, 16, 1, 10, 1, 2, 0.6}, {640, 256, 1, 24, 1, 1, 0.6},
                                  {96, 16, 1, 8, 3, 1, 0.002}, {32, 32, 4, 9, 3, 1, 0.6}};
  std::vector<tb::Tensor> inputs, accs, plain;
  for (auto const& l : layers) {
    tb::ConvParams p;
    p.batch = 2;
    p.input_field = {l.field, l.field};
    p.kernel_shape = {l.k, l.k};
    p.stride = {l.stride, l.stride};
    p.padding_lower = p.padding_upper = {l.k / 2, l.k / 2};
    p.channels(l.in, l.out, l.groups);
    tb::ConvOptions const o{.available_memory_proportion = l.amp};
    if (l.amp < 0.01) {
      auto const cp = tb::ops::plan_conv(g, p, tb::ConvPass::forward, tb::ElementType::f32, o);
      CHECK(cp.parts() > 1);
    }
    auto const x = tb::ops::create_conv_input(g, p, tb::ElementType::f32, o), w = tb::ops::create_conv_weights(g, p);
    auto acc = g.add_variable<float>(p.output_shape(), "acc");
    tb::map_linearly(g, acc);
    auto b = g.add_variable<float>({l.out}, "b");
    tb::map_linearly(g, b);
    plain.push_back(tb::ops::conv(g, prog, x, w, p, o));
    tb::ops::conv_accumulate(g, prog, x, w, acc, p, o);
    tb::ops::map_in_place<float, float>(g, prog, relu(_1 + _2), acc, b);
    for (auto const& t : {x, w, b, acc}) inputs.push_back(t);
    accs.push_back(acc);
  }
  auto const exe = tb::compile(g, {.allow_out_of_memory = true}, prog);
  std::vector<std::vector<float>> given;
  unsigned seed = 60;
  for (auto const& t : inputs) given.push_back(tbt::values<float>(t.num_elements(), false, seed++));
  auto const run = [&](std::size_t threads, bool host, bool fuse) {
    tb::Engine e{exe, {.host_threads = threads, .host_kernels = host, .fuse_host_paths = fuse}};
    for (std::size_t i = 0; i < inputs.size(); ++i) e.write(inputs[i], given[i]);
    e.run();
    CHECK(fused_paths(e) == (host && fuse ? layers.size() : 0u));  // each bias map, in its convolution
    std::vector<std::vector<float>> out;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      CAPTURE(i);
      out.push_back(e.read<float>(accs[i]));
      // relu((acc + conv) + b) with the conv by ops::conv, whose plan conv_accumulate shares: bitwise.
      auto const y = e.read<float>(plain[i]);
      auto const& a0 = given[4 * i + 3];
      auto const& bias = given[4 * i + 2];
      REQUIRE(y.size() == out.back().size());
      std::size_t off = 0;
      for (std::size_t k = 0; k < y.size(); ++k) {
        float const want = std::max(a0[k] + y[k] + bias[k % bias.size()], 0.0f);
        off += std::memcmp(&out.back()[k], &want, sizeof(float)) != 0;
      }
      CHECK(off == 0);
    }
    return out;
  };
  auto const want = run(1, false, false);
  same_bits_fused_or_not(run, want);
}

TEST_CASE("weight gradients of many partials sum them in the kernel: the vertices' bits, for any number of threads") {
  // The host path of a weight update whose plan reduces partials over images and rows sums each partial into the
  // result as the kernel finishes it (simd::conv_weight_gradient_parts); the vertices write each partial and a
  // reduction sums them. Grouped layers of 4, 16 and 32 channels per group (a vector holding several groups, one,
  // and half of one with AVX-512), on the ResNeXt planner's IPU, and with the serial steps of a smaller tile memory.
  struct Layer {
    std::int64_t field, channels;
    std::size_t groups;
    tb::Target target;
    bool steps;  // the plan has serial steps over rows too
  };
  for (Layer const& l : {Layer{28, 128, 32, tb::targets::ipu_mk2(1), false}, Layer{14, 256, 16, tb::targets::ipu_mk2(1), false},
                         Layer{12, 128, 4, tb::targets::ipu_mk2(1), false}, Layer{16, 32, 2, tb::targets::tiny(16, 48 * 1024), true},
                         Layer{10, 64, 8, tb::targets::tiny(16, 24 * 1024), true}}) {
    CAPTURE(l.field);
    CAPTURE(l.channels);
    tb::ConvParams p;
    p.batch = 3;
    p.input_field = {l.field, l.field};
    p.kernel_shape = {3, 3};
    p.padding_lower = p.padding_upper = {1, 1};
    p.channels(l.channels, l.channels, l.groups);
    tb::Graph g{l.target};
    tb::Sequence prog;
    tb::ConvOptions const o{.available_memory_proportion = 0.3};
    auto const plan = tb::ops::plan_conv(g, p, tb::ConvPass::weight_update, tb::ElementType::f32, o);
    CHECK(plan.parts() > 1);
    CHECK((plan.steps > 1) == l.steps);
    auto const x = tb::ops::create_conv_input(g, p);
    auto const dy = g.add_variable<float>(p.output_shape(), "dy");
    tb::map_linearly(g, dy);
    auto const dw = tb::ops::conv_weight_gradients(g, prog, dy, x, p, o);
    auto const exe = tb::compile(g, {.allow_out_of_memory = true}, prog);
    auto const xv = tbt::values<float>(x.num_elements(), false, 5), yv = tbt::values<float>(dy.num_elements(), false, 6);
    auto const run = [&](std::size_t threads, bool host) {
      tb::Engine e{exe, {.host_threads = threads, .host_kernels = host}};
      e.write(x, xv);
      e.write(dy, yv);
      e.run();
      return e.read<float>(dw);
    };
    auto const want = run(1, false);
    for (std::size_t threads : {1, 2, 3}) {
      CAPTURE(threads);
      auto const got = run(threads, true);
      REQUIRE(got.size() == want.size());
      CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    }
  }
}
