// The ResNeXt sample's model code against a straightforward double-precision reference (unfolded batch norm),
// in f32 and f16, and its weights file.
#include "../../samples/resnext/resnext.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace tb = tilebsp;

namespace {

using Acts = std::vector<double>;  // NHWC

struct Field {
  std::int64_t n, h, w, c;
};

Acts conv_ref(Acts const& x, Field& f, resnext::ConvLayer const& l) {
  auto const& p = l.params;
  std::int64_t const k = p.kernel_shape[0], s = p.stride_of(0), pad = p.padding_lower_of(0), G = p.groups;
  std::int64_t const ci = p.input_channels, co = p.output_channels;
  std::int64_t const oh = (f.h + 2 * pad - k) / s + 1, ow = (f.w + 2 * pad - k) / s + 1;
  Acts y(static_cast<std::size_t>(f.n * oh * ow * G * co));
  for (std::int64_t n = 0; n < f.n; ++n)
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j)
        for (std::int64_t g = 0; g < G; ++g)
          for (std::int64_t o = 0; o < co; ++o) {
            double acc = 0;
            for (std::int64_t a = 0; a < k; ++a)
              for (std::int64_t b = 0; b < k; ++b) {
                std::int64_t const yy = i * s - pad + a, xx = j * s - pad + b;
                if (yy < 0 || yy >= f.h || xx < 0 || xx >= f.w) continue;
                for (std::int64_t c = 0; c < ci; ++c)
                  acc += x[static_cast<std::size_t>(((n * f.h + yy) * f.w + xx) * f.c + g * ci + c)] *
                         l.weights[static_cast<std::size_t>((((g * k + a) * k + b) * ci + c) * co + o)];
              }
            std::size_t const ch = static_cast<std::size_t>(g * co + o);
            double const bn = (acc - l.bn.mean[ch]) / std::sqrt(double(l.bn.var[ch]) + l.bn.eps) * l.bn.gamma[ch] + l.bn.beta[ch];
            y[static_cast<std::size_t>(((n * oh + i) * ow + j) * G * co) + ch] = bn;
          }
  f = {f.n, oh, ow, G * co};
  return y;
}

void relu_ref(Acts& x) {
  for (auto& v : x) v = std::max(v, 0.0);
}

Acts max_pool_ref(Acts const& x, Field& f) {
  std::int64_t const oh = (f.h + 2 - 3) / 2 + 1, ow = (f.w + 2 - 3) / 2 + 1;
  Acts y(static_cast<std::size_t>(f.n * oh * ow * f.c), -1e300);
  for (std::int64_t n = 0; n < f.n; ++n)
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j)
        for (std::int64_t a = 0; a < 3; ++a)
          for (std::int64_t b = 0; b < 3; ++b) {
            std::int64_t const yy = i * 2 - 1 + a, xx = j * 2 - 1 + b;
            if (yy < 0 || yy >= f.h || xx < 0 || xx >= f.w) continue;
            for (std::int64_t c = 0; c < f.c; ++c) {
              auto& o = y[static_cast<std::size_t>(((n * oh + i) * ow + j) * f.c + c)];
              o = std::max(o, x[static_cast<std::size_t>(((n * f.h + yy) * f.w + xx) * f.c + c)]);
            }
          }
  f = {f.n, oh, ow, f.c};
  return y;
}

/// The network, layer by layer, as a textbook would write it.
std::vector<double> reference(resnext::Config const& c, resnext::Weights const& w, std::vector<float> const& images) {
  Field f{c.batch, c.image, c.image, c.channels};
  Acts x(images.begin(), images.end());
  x = conv_ref(x, f, w.stem);
  relu_ref(x);
  x = max_pool_ref(x, f);
  for (auto const& b : w.blocks) {
    Field fa = f;
    Acts a = conv_ref(x, fa, b.reduce);
    relu_ref(a);
    a = conv_ref(a, fa, b.grouped);
    relu_ref(a);
    a = conv_ref(a, fa, b.expand);
    Field fs = f;
    Acts const s = b.shortcut ? conv_ref(x, fs, *b.shortcut) : x;
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::max(0.0, a[i] + s[i]);
    x = std::move(a);
    f = fa;
  }
  std::vector<double> logits(static_cast<std::size_t>(c.batch * c.classes));
  for (std::int64_t n = 0; n < c.batch; ++n) {
    std::vector<double> mean(static_cast<std::size_t>(f.c));
    for (std::int64_t p = 0; p < f.h * f.w; ++p)
      for (std::int64_t ch = 0; ch < f.c; ++ch)
        mean[static_cast<std::size_t>(ch)] += x[static_cast<std::size_t>((n * f.h * f.w + p) * f.c + ch)] / double(f.h * f.w);
    for (std::int64_t k = 0; k < c.classes; ++k) {
      double acc = w.fc_bias[static_cast<std::size_t>(k)];
      for (std::int64_t ch = 0; ch < f.c; ++ch)
        acc += mean[static_cast<std::size_t>(ch)] * w.fc_weights[static_cast<std::size_t>(ch * c.classes + k)];
      logits[static_cast<std::size_t>(n * c.classes + k)] = acc;
    }
  }
  return logits;
}

resnext::Config small(tb::ElementType dtype) {
  resnext::Config c;
  c.stage_blocks = {2, 1, 1, 1};
  c.cardinality = 4;
  c.width = 4;
  c.batch = 2;
  c.image = 32;
  c.classes = 10;
  c.dtype = dtype;
  return c;
}

/// The sample's program on `c`: infeed, repeat(2, network), outfeed; returns the logits of the second batch.
template <class T>
std::vector<float> run_model(resnext::Config const& c, resnext::Weights const& w, std::vector<float> const& images,
                             std::size_t threads) {
  tb::Graph g{tb::targets::ipu_mk2(1)};
  tb::Sequence step;
  resnext::Model const m = resnext::build(g, step, c, w);
  auto in = g.add_host_to_device_fifo<T>("images", m.input.num_elements());
  auto out = g.add_device_to_host_fifo<T>("logits", m.logits.num_elements());
  auto prog = tb::repeat(2, tb::seq(tb::stream_in(in, m.input), std::move(step), tb::stream_out(m.logits, out)));
  tb::Engine e{tb::compile(g, prog), {.host_threads = threads}};
  m.write_parameters(e);
  std::vector<T> host_in(images.begin(), images.end()), host_out(2 * m.logits.num_elements());
  host_in.insert(host_in.end(), host_in.begin(), host_in.end());  // the same batch twice
  e.connect<T>(in, [&, i = std::size_t{0}](std::span<T> batch) mutable {
    std::copy_n(host_in.begin() + static_cast<std::ptrdiff_t>(i++ % 2 * batch.size()), batch.size(), batch.begin());
  }, {.prefetch = true});
  e.connect(out, host_out);
  e.run();
  std::vector<float> r;
  for (std::size_t i = m.logits.num_elements(); i < host_out.size(); ++i) r.push_back(static_cast<float>(host_out[i]));
  for (std::size_t i = 0; i < m.logits.num_elements(); ++i) CHECK(host_out[i] == host_out[i + m.logits.num_elements()]);
  return r;
}

/// The same program pipelined over split.size() + 1 IPUs (2 micro-batches, the same batch twice): the logits of
/// the second.
template <class T>
std::vector<float> run_pipelined(resnext::Config const& c, resnext::Weights const& w, std::vector<float> const& images,
                                 std::size_t threads, std::vector<int> const& split) {
  tb::Graph g{tb::targets::ipu_mk2(split.size() + 1)};
  std::vector<tb::Sequence> parts;
  resnext::Model m = resnext::build(g, parts, c, split);
  m.set_values(resnext::fold_parameters(w));
  auto in = g.add_host_to_device_fifo<T>("images", m.input.num_elements());
  auto out = g.add_device_to_host_fifo<T>("logits", m.logits.num_elements());
  std::size_t const micro_batches = std::max<std::size_t>(2, parts.size());
  tb::Engine e{tb::compile(g, tb::pipeline({.micro_batches = micro_batches}, resnext::pipeline_stages(g, m, std::move(parts), in, out))),
               {.host_threads = threads}};
  m.write_parameters(e);
  std::vector<T> host_in(images.begin(), images.end());
  std::vector<T> host_out(std::max<std::size_t>(2, parts.size()) * m.logits.num_elements());
  e.connect<T>(in, [&](std::span<T> batch) { std::copy_n(host_in.begin(), batch.size(), batch.begin()); });
  e.connect(out, host_out);
  e.run();
  return std::vector<float>(host_out.begin() + static_cast<std::ptrdiff_t>(m.logits.num_elements()),
                            host_out.begin() + static_cast<std::ptrdiff_t>(2 * m.logits.num_elements()));
}

std::vector<float> images_for(resnext::Config const& c) {
  resnext::Rng rng(7);
  std::vector<float> v(static_cast<std::size_t>(c.batch * c.image * c.image * c.channels));
  for (auto& x : v) x = static_cast<float>(rng.uniform());
  return v;
}

}  // namespace

TEST_CASE("resnext: the model's logits match a double reference with unfolded batch norm, f32 and f16") {
  for (auto dtype : {tb::ElementType::f32, tb::ElementType::f16}) {
    resnext::Config const c = small(dtype);
    resnext::Weights const w = resnext::random_weights(c, 3);
    auto const images = images_for(c);
    auto const want = reference(c, w, images);
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::abs(v));
    REQUIRE(scale > 0.01);
    std::vector<float> got = dtype == tb::ElementType::f32 ? run_model<float>(c, w, images, 2) : run_model<tb::half>(c, w, images, 2);
    REQUIRE(got.size() == want.size());
    double const tol = (dtype == tb::ElementType::f32 ? 1e-4 : 3e-2) * scale;
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= tol);
    if (dtype == tb::ElementType::f32) CHECK(run_model<float>(c, w, images, 3) == got);  // any thread count
  }
}

TEST_CASE("resnext: random weights are the same for any number of threads, He-scaled normal draws") {
  resnext::Config c = small(tb::ElementType::f32);
  c.stage_blocks = {3, 4, 6, 3};  // arrays of several blocks of draws each
  c.width = 16;
  resnext::Weights const one = resnext::random_weights(c, 11, 1);
  resnext::Weights const three = resnext::random_weights(c, 11, 3);
  CHECK(one.stem.weights == three.stem.weights);
  for (std::size_t b = 0; b < one.blocks.size(); ++b) {
    CHECK(one.blocks[b].grouped.weights == three.blocks[b].grouped.weights);
    CHECK(one.blocks[b].expand.bn.gamma == three.blocks[b].expand.bn.gamma);
  }
  CHECK(one.fc_weights == three.fc_weights);
  CHECK(resnext::random_weights(c, 12, 1).fc_weights != one.fc_weights);  // the seed matters
  // The largest array: mean near 0, standard deviation sqrt(2 / fan_in), about 68% within one deviation.
  auto const& layer = one.blocks.back().grouped;
  auto const& p = layer.params;
  double const sd = std::sqrt(2.0 / static_cast<double>(p.input_channels * p.kernel_shape[0] * p.kernel_shape[1]));
  double mean = 0, var = 0, within = 0;
  for (float x : layer.weights) mean += x;
  mean /= static_cast<double>(layer.weights.size());
  for (float x : layer.weights) var += (x - mean) * (x - mean), within += std::abs(x) < sd;
  var /= static_cast<double>(layer.weights.size());
  within /= static_cast<double>(layer.weights.size());
  REQUIRE(layer.weights.size() > 50000);
  CHECK(std::abs(mean) < 0.02 * sd);
  CHECK(std::sqrt(var) == doctest::Approx(sd).epsilon(0.02));
  CHECK(within == doctest::Approx(0.6827).epsilon(0.02));
}

TEST_CASE("resnext: layer shapes, depths and options") {
  resnext::Config c;
  auto const w = resnext::layout(c);
  CHECK(w.blocks.size() == 33);
  CHECK(w.blocks[3].reduce.params.stride_of(0) == 2);  // the 1x1 reduce carries the stride
  CHECK(w.blocks[3].grouped.params.groups == 32);
  CHECK(w.blocks.back().expand.params.output_shape() == tb::Shape{4, 7, 7, 2048});
  CHECK(c.macs_per_image() > 7.5e9);
  c.depth = 50;
  CHECK(resnext::layout(c).blocks.size() == 16);
  c.depth = 77;
  CHECK_THROWS_WITH_AS(resnext::layout(c), "resnext: depth must be 50, 101 or 152, got 77", tb::option_error);
  c.depth = 50;
  c.batch = 0;
  CHECK_THROWS_WITH_AS(resnext::layout(c), "resnext: batch size must be positive, got 0", tb::option_error);
}

TEST_CASE("resnext: weights files round-trip, and bad files are named errors") {
  resnext::Config const c = small(tb::ElementType::f32);
  resnext::Weights const w = resnext::random_weights(c, 5);
  std::string const path = "test_resnext_weights.bin";
  resnext::save_weights(w, c, path);
  resnext::Weights const r = resnext::load_weights(c, path);
  CHECK(r.stem.weights == w.stem.weights);
  CHECK(r.blocks.back().expand.bn.var == w.blocks.back().expand.bn.var);
  CHECK(r.fc_weights == w.fc_weights);
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  auto write = [&](std::string const& b) { std::ofstream(path, std::ios::binary) << b; };
  write("NOTAFILE" + bytes.substr(8));
  CHECK_THROWS_WITH_AS(resnext::load_weights(c, path), "load_weights: 'test_resnext_weights.bin': not a tilebsp ResNeXt weights file (bad magic)", tb::error);
  write(bytes.substr(0, bytes.size() - 3));
  CHECK_THROWS_WITH_AS(resnext::load_weights(c, path), "load_weights: 'test_resnext_weights.bin': truncated in the values of 'fc.bias'", tb::error);
  write(bytes + "x");
  CHECK_THROWS_WITH_AS(resnext::load_weights(c, path), "load_weights: 'test_resnext_weights.bin': trailing bytes after the last tensor", tb::error);
  write(bytes);
  resnext::Config other = c;
  other.cardinality = 8;
  CHECK_THROWS_WITH_AS(resnext::load_weights(other, path),
                       "load_weights: 'test_resnext_weights.bin': 'stage1.block1.reduce.weights' has shape [1, 1, 1, 64, 16], "
                       "expected [1, 1, 1, 64, 32]",
                       tb::error);
  std::remove(path.c_str());
  CHECK_THROWS_WITH_AS(resnext::load_weights(c, "no/such/file"), "load_weights: cannot open 'no/such/file'", tb::error);
}

TEST_CASE("resnext: pipelined over 2 and 3 IPUs, the logits are bitwise those of one IPU, for any thread count") {
  resnext::Config const c = small(tb::ElementType::f16);
  resnext::Weights const w = resnext::random_weights(c, 3);
  std::vector<float> const images = images_for(c);
  std::vector<float> const one = run_model<tb::half>(c, w, images, 2);
  for (std::size_t threads : {1, 3}) {
    CHECK(run_pipelined<tb::half>(c, w, images, threads, {2}) == one);
    CHECK(run_pipelined<tb::half>(c, w, images, threads, {1, 4}) == one);
  }
}

TEST_CASE("resnext: pipeline splits, manual and balanced") {
  resnext::Config const c = small(tb::ElementType::f32);  // 5 blocks
  CHECK_NOTHROW(resnext::check_split(c, {2, 4}, 3));
  CHECK_THROWS_WITH_AS(resnext::check_split(c, {2}, 3),
                       "resnext: the pipeline split names 1 split point(s) for 3 IPUs (it needs 2)", tb::option_error);
  CHECK_THROWS_WITH_AS(resnext::check_split(c, {3, 2}, 3),
                       "resnext: pipeline split points must be ascending block indices in 1 .. 4, got 2", tb::option_error);
  CHECK_THROWS_WITH_AS(resnext::check_split(c, {5}, 2),
                       "resnext: pipeline split points must be ascending block indices in 1 .. 4, got 5", tb::option_error);
  // Balanced: the slowest stage plus the dearest transfer is least. Equal blocks split evenly.
  tb::Target const t = tb::targets::ipu_mk2(2);
  CHECK(resnext::balanced_split(c, {100000, 100000, 100000, 100000, 100000}, 1, t).empty());
  auto const two = resnext::balanced_split(c, {400000, 100000, 100000, 100000, 100000}, 2, t);
  CHECK(two == std::vector<int>{1});
  auto const three = resnext::balanced_split(c, {100000, 100000, 100000, 100000, 100000}, 3, t);
  REQUIRE(three.size() == 2);
  CHECK(three[0] < three[1]);
  // Within memory: a stage's parameters take at most half an IPU. The small network's f32 blocks hold 141 KB,
  // 36 KB, 636 KB, 2.5 MB and 10.2 MB: on IPUs of 160 tiles x 128 KiB (10.5 MB for parameters) the last block needs a
  // stage of its own, though by cycles it would join the cheap blocks before it.
  auto const bytes = resnext::block_parameter_bytes(c);
  REQUIRE(bytes.size() == 5);
  CHECK(bytes[0] > bytes[1]);  // the stem's weights come with the first block
  tb::Target const small_ipus = tb::targets::tiny(160, 128 * 1024, 3);
  auto const fitted = resnext::balanced_split(c, {100000, 100000, 100000, 100, 100}, 3, small_ipus);
  CHECK(fitted == std::vector<int>{1, 4});  // [0] (with the image stream), [1, 3], [4]
  CHECK(resnext::balanced_split(c, {100000, 100000, 100000, 100, 100}, 3, tb::targets::ipu_mk2(3)) == std::vector<int>{1, 2});
  CHECK_THROWS_WITH_AS(resnext::balanced_split(c, {1, 1, 1, 1, 1}, 2, tb::targets::tiny(1, 1024, 2)),
                       "resnext: no split of 5 blocks over 2 IPUs keeps each stage's parameters within half an IPU's memory",
                       tb::option_error);
  // Per-block estimates from the compiled blocks: positive, one per block.
  auto const cycles = resnext::block_cycles(c, 2);
  CHECK(cycles.size() == 5);
  for (auto x : cycles) CHECK(x > 0);
}
