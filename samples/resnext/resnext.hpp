// samples/resnext/resnext.hpp: the ResNeXt model of the sample — its configuration, its parameters (random with a
// fixed seed, or read from a weights file), batch-norm folding, and the tile graph of one inference step.
#pragma once

#include "../common/rng.hpp"
#include "../common/tensor_file.hpp"

#include <tilebsp/tilebsp.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace resnext {

namespace tb = tilebsp;

/// What network to build and how to plan it.
struct Config {
  int depth = 101;                 ///< 50, 101 or 152 (the usual block counts), unless `stage_blocks` is set
  std::vector<int> stage_blocks;   ///< blocks per stage (4 stages); overrides depth when not empty
  std::int64_t cardinality = 32;   ///< groups of the 3x3 convolutions
  std::int64_t width = 4;          ///< channels per group in the first stage (doubling per stage)
  std::int64_t batch = 4;
  std::int64_t image = 224;        ///< square input images
  std::int64_t channels = 4;       ///< input channels (the seed program feeds 4: RGB + padding)
  std::int64_t classes = 1000;
  tb::ElementType dtype = tb::ElementType::f16;
  tb::ElementType partials = tb::ElementType::f32;
  double conv_amp = 0.3;           ///< availableMemoryProportion of the convolutions
  double matmul_amp = 0.6;         ///< availableMemoryProportion of the fully connected layer

  /// Blocks per stage; throws tilebsp::option_error for a depth without a standard layout.
  std::vector<int> blocks() const {
    if (!stage_blocks.empty()) {
      if (stage_blocks.size() != 4) throw tb::option_error("resnext: stage_blocks must name 4 stages");
      return stage_blocks;
    }
    switch (depth) {
      case 50: return {3, 4, 6, 3};
      case 101: return {3, 4, 23, 3};
      case 152: return {3, 8, 36, 3};
      default: throw tb::option_error("resnext: depth must be 50, 101 or 152, got " + std::to_string(depth));
    }
  }
  /// Multiply-accumulates of one image's forward pass.
  double macs_per_image() const;
};

/// Inference batch norm of one convolution's outputs: y = gamma * (x - mean) / sqrt(var + eps) + beta.
struct BatchNorm {
  std::vector<float> gamma, beta, mean, var;
  float eps = 1e-5f;
};

/// One convolution and the batch norm after it; weights [G, kh, kw, C_in / G, C_out / G] (tilebsp's layout).
struct ConvLayer {
  std::string name;
  tb::ConvParams params;
  std::vector<float> weights;
  BatchNorm bn;
};

/// A bottleneck block: 1x1 reduce (carrying the stride), grouped 3x3, 1x1 expand, and on a stage's first block
/// a 1x1 projection shortcut.
struct Block {
  ConvLayer reduce, grouped, expand;
  std::optional<ConvLayer> shortcut;
};

/// Every parameter of the network, unfolded.
struct Weights {
  ConvLayer stem;
  std::vector<Block> blocks;
  std::vector<float> fc_weights;  ///< [features, classes]
  std::vector<float> fc_bias;     ///< [classes]
};

/// The layer shapes of `c` (parameters left empty).
inline Weights layout(Config const& c) {
  auto conv = [&](std::string name, std::int64_t field, std::int64_t k, std::int64_t in, std::int64_t out,
                  std::int64_t groups, std::int64_t stride) {
    ConvLayer l;
    l.name = std::move(name);
    l.params.batch = c.batch;
    l.params.input_field = {field, field};
    l.params.kernel_shape = {k, k};
    l.params.channels(in, out, groups);
    l.params.stride = {stride, stride};
    l.params.padding_lower = l.params.padding_upper = {k / 2, k / 2};
    return l;
  };
  if (c.batch <= 0) throw tb::option_error("resnext: batch size must be positive, got " + std::to_string(c.batch));
  if (c.image < 32) throw tb::option_error("resnext: images must be at least 32 x 32, got " + std::to_string(c.image));
  if (c.cardinality <= 0 || c.width <= 0)
    throw tb::option_error("resnext: cardinality and width must be positive");
  Weights w;
  w.stem = conv("stem", c.image, 7, c.channels, 64, 1, 2);
  std::int64_t field = (c.image - 1) / 2 + 1;  // after the stem
  field = (field - 1) / 2 + 1;                  // after the 3x3/2 max pool
  std::int64_t in = 64;
  auto const blocks = c.blocks();
  for (std::size_t s = 0; s < 4; ++s) {
    std::int64_t const width = c.cardinality * c.width << s, out = 256 << s;
    for (int b = 0; b < blocks[s]; ++b) {
      std::int64_t const stride = (b == 0 && s > 0) ? 2 : 1;
      std::string const tag = "stage" + std::to_string(s + 1) + ".block" + std::to_string(b + 1) + ".";
      Block k;
      k.reduce = conv(tag + "reduce", field, 1, in, width, 1, stride);
      std::int64_t const next = (field - 1) / stride + 1;
      k.grouped = conv(tag + "grouped", next, 3, width, width, c.cardinality, 1);
      k.expand = conv(tag + "expand", next, 1, width, out, 1, 1);
      if (b == 0) k.shortcut = conv(tag + "shortcut", field, 1, in, out, 1, stride);
      w.blocks.push_back(std::move(k));
      field = next;
      in = out;
    }
  }
  return w;
}

inline double Config::macs_per_image() const {
  Weights const w = layout(*this);
  auto macs = [](ConvLayer const& l) {
    auto const& p = l.params;
    auto const o = p.output_shape();
    return static_cast<double>(o[1] * o[2]) * static_cast<double>(p.output_channels * p.groups) *
           static_cast<double>(p.input_channels * p.kernel_shape[0] * p.kernel_shape[1]);
  };
  double m = macs(w.stem);
  for (auto const& b : w.blocks) m += macs(b.reduce) + macs(b.grouped) + macs(b.expand) + (b.shortcut ? macs(*b.shortcut) : 0);
  return m + 2048.0 * static_cast<double>(classes);
}

/// Calls f(name, shape, values) for every parameter tensor of `w`, in file order.
template <class W, class F>
void for_each_parameter(W& w, Config const& c, F&& f) {
  auto conv = [&](auto& l) {
    auto const& p = l.params;
    std::size_t const out = static_cast<std::size_t>(p.output_channels * p.groups);
    f(l.name + ".weights", p.weights_shape(), l.weights);
    f(l.name + ".bn.gamma", tb::Shape{out}, l.bn.gamma);
    f(l.name + ".bn.beta", tb::Shape{out}, l.bn.beta);
    f(l.name + ".bn.mean", tb::Shape{out}, l.bn.mean);
    f(l.name + ".bn.var", tb::Shape{out}, l.bn.var);
  };
  conv(w.stem);
  for (auto& b : w.blocks) {
    conv(b.reduce);
    conv(b.grouped);
    conv(b.expand);
    if (b.shortcut) conv(*b.shortcut);
  }
  f(std::string("fc.weights"), tb::Shape{2048, static_cast<std::size_t>(c.classes)}, w.fc_weights);
  f(std::string("fc.bias"), tb::Shape{static_cast<std::size_t>(c.classes)}, w.fc_bias);
}

using Rng = samples::Rng;

/// Random parameters with a fixed seed: He-normal convolutions, batch-norm statistics near identity, and the
/// last batch norm of each block scaled down (as zero-init-residual training leaves it) so that activations stay
/// in f16's range through 100 layers. Drawn on `threads` threads (0: all the host's), the same for any count.
inline Weights random_weights(Config const& c, std::uint64_t seed = 42, unsigned threads = 0) {
  Weights w = layout(c);
  // One sequence of draws, in a fixed order; the normal samples (nearly all of them) are drawn afterwards on all
  // host threads, each block from its place in the sequence: the same weights for any number of threads.
  struct Normals {
    float* out;
    std::size_t n;
    double sd;
    std::uint64_t first_draw;
  };
  std::vector<Normals> normals;
  std::uint64_t draws = 0;
  auto normal = [&](std::vector<float>& v, std::size_t n, double sd) {
    v.resize(n);
    normals.push_back({v.data(), n, sd, draws});
    draws += static_cast<std::uint64_t>(n + n % 2);  // a pair of draws per pair of samples
  };
  auto uniforms = [&](std::vector<float>& v, std::size_t n, double lo, double hi) {
    v.resize(n);
    Rng rng(seed);
    rng.discard(draws);
    for (auto& x : v) x = static_cast<float>(rng.uniform(lo, hi));
    draws += n;
  };
  auto conv = [&](ConvLayer& l, double gamma_lo, double gamma_hi) {
    auto const& p = l.params;
    double const fan_in = static_cast<double>(p.input_channels * p.kernel_shape[0] * p.kernel_shape[1]);
    normal(l.weights, tb::product(p.weights_shape()), std::sqrt(2.0 / fan_in));
    std::size_t const out = static_cast<std::size_t>(p.output_channels * p.groups);
    for (auto* v : {&l.bn.gamma, &l.bn.beta, &l.bn.mean, &l.bn.var}) v->resize(out);
    Rng rng(seed);
    rng.discard(draws);
    for (std::size_t i = 0; i < out; ++i) {
      l.bn.gamma[i] = static_cast<float>(rng.uniform(gamma_lo, gamma_hi));
      l.bn.beta[i] = static_cast<float>(rng.uniform(-0.1, 0.1));
      l.bn.mean[i] = static_cast<float>(rng.uniform(-0.1, 0.1));
      l.bn.var[i] = static_cast<float>(rng.uniform(0.8, 1.2));
    }
    draws += 4 * static_cast<std::uint64_t>(out);
  };
  conv(w.stem, 0.8, 1.2);
  for (auto& b : w.blocks) {
    conv(b.reduce, 0.8, 1.2);
    conv(b.grouped, 0.8, 1.2);
    conv(b.expand, 0.1, 0.3);
    if (b.shortcut) conv(*b.shortcut, 0.4, 0.6);
  }
  normal(w.fc_weights, 2048 * static_cast<std::size_t>(c.classes), std::sqrt(1.0 / 2048.0));
  uniforms(w.fc_bias, static_cast<std::size_t>(c.classes), -0.1, 0.1);

  constexpr std::size_t block = std::size_t{1} << 16;
  std::vector<std::pair<std::size_t, std::size_t>> blocks;  // (array, first element)
  for (std::size_t a = 0; a < normals.size(); ++a)
    for (std::size_t i = 0; i < normals[a].n; i += block) blocks.emplace_back(a, i);
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t k; (k = next.fetch_add(1)) < blocks.size();) {
      auto const [a, first] = blocks[k];
      Normals const& f = normals[a];
      Rng rng(seed);
      rng.discard(f.first_draw + first);  // blocks start at even elements
      float const sd = static_cast<float>(f.sd);
      std::size_t const end = std::min(f.n, first + block);
      for (std::size_t i = first; i < end; i += 2) {
        auto const [x, y] = rng.normal_pair();
        f.out[i] = sd * x;
        if (i + 1 < end) f.out[i + 1] = sd * y;
      }
    }
  };
  std::vector<std::thread> team;
  for (unsigned t = 1; t < (threads != 0 ? threads : std::max(1u, std::thread::hardware_concurrency())); ++t)
    team.emplace_back(work);
  work();
  for (auto& t : team) t.join();
  return w;
}

// The weights file (samples/common/tensor_file.hpp) with the magic "TBRXWT01", tensors in for_each_parameter
// order.
inline constexpr samples::TensorFileFormat weights_format{{'T', 'B', 'R', 'X', 'W', 'T', '0', '1'},
                                                          "tilebsp ResNeXt weights file",
                                                          "check --depth, --cardinality and --width"};

/// The tensors of `w` (Weights or Weights const) as the weights file lists them.
template <class W>
auto named_tensors(W& w, Config const& c) {
  using V = std::conditional_t<std::is_const_v<W>, std::vector<float> const, std::vector<float>>;
  std::vector<samples::NamedTensor<V>> r;
  for_each_parameter(w, c, [&](std::string const& name, tb::Shape const& shape, V& v) { r.push_back({name, shape, &v}); });
  return r;
}

/// Writes `w` to `path`; throws tilebsp::error when the file cannot be written.
inline void save_weights(Weights const& w, Config const& c, std::string const& path) {
  samples::save_tensors(weights_format, path, named_tensors(w, c));
}

/// Reads the parameters of the network `c` from `path`. Throws tilebsp::error naming the file and the first
/// problem: not a weights file, a missing or differently named tensor, a shape that does not match `c`, a
/// truncated file, or trailing bytes.
inline Weights load_weights(Config const& c, std::string const& path) {
  Weights w = layout(c);
  samples::load_tensors(weights_format, path, named_tensors(w, c));
  return w;
}

/// A convolution with its batch norm folded in: weights scaled per output channel, and a bias.
struct Folded {
  std::vector<float> weights, bias;
};
inline Folded fold(ConvLayer const& l) {
  auto const& p = l.params;
  std::size_t const co = static_cast<std::size_t>(p.output_channels), G = static_cast<std::size_t>(p.groups);
  Folded r{l.weights, std::vector<float>(co * G)};
  std::vector<double> scale(co * G);
  for (std::size_t i = 0; i < co * G; ++i) {
    scale[i] = l.bn.gamma[i] / std::sqrt(static_cast<double>(l.bn.var[i]) + l.bn.eps);
    r.bias[i] = static_cast<float>(l.bn.beta[i] - l.bn.mean[i] * scale[i]);
  }
  // Weights [G, kh, kw, ci, co]: output channel g * co + o.
  std::size_t const per_group = r.weights.size() / G;
  for (std::size_t i = 0; i < r.weights.size(); ++i)
    r.weights[i] = static_cast<float>(r.weights[i] * scale[(i / per_group) * co + i % co]);
  return r;
}

/// The tile graph of one inference step and the parameters to write into it.
struct Model {
  tb::Tensor input;   ///< [batch, image, image, channels], laid out for the stem
  tb::Tensor logits;  ///< [batch, classes]
  /// Each parameter tensor with its values (empty until set_values: the graph does not depend on them).
  std::vector<std::pair<tb::Tensor, std::vector<float>>> parameters;
  /// Per pipeline stage: the transfers it receives, and the names of its layers.
  std::vector<std::vector<tb::Receive>> receives;
  std::vector<std::vector<std::string>> stage_layers;

  /// Takes the values of fold_parameters (the same order as the tensors).
  void set_values(std::vector<std::vector<float>> values) {
    if (values.size() != parameters.size())
      throw tb::error("resnext: " + std::to_string(values.size()) + " parameter arrays for " +
                      std::to_string(parameters.size()) + " parameter tensors");
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (values[i].size() != parameters[i].first.num_elements())
        throw tb::error("resnext: " + std::to_string(values[i].size()) + " values for parameter tensor " +
                        std::to_string(i) + " of " + std::to_string(parameters[i].first.num_elements()) + " elements");
      parameters[i].second = std::move(values[i]);
    }
  }

  /// Writes every parameter (converted to its tensor's type) through an engine or other host context.
  void write_parameters(tb::HostContext& host) const {
    for (auto const& [t, v] : parameters) {
      if (t.element_type() == tb::ElementType::f16) host.write(t, std::vector<tb::half>(v.begin(), v.end()));
      else host.write(t, v);
    }
  }
};

/// The values of the parameter tensors that build() creates, in its order: each convolution's weights with its
/// batch norm folded in, the biases that the maps after the convolutions add (a projection block's expand and
/// shortcut biases summed into one), the fully connected weights with the global mean folded in, and its bias.
/// Independent of the graph, so a program can compute them while the graph is built.
inline std::vector<std::vector<float>> fold_parameters(Weights const& w) {
  std::vector<std::vector<float>> v;
  auto conv = [&](ConvLayer const& l) {
    Folded f = fold(l);
    v.push_back(std::move(f.weights));
    return std::move(f.bias);
  };
  v.push_back(conv(w.stem));
  for (auto const& b : w.blocks) {
    v.push_back(conv(b.reduce));
    v.push_back(conv(b.grouped));
    std::vector<float> bias = conv(b.expand);
    if (b.shortcut) {
      std::vector<float> const s_bias = conv(*b.shortcut);
      for (std::size_t i = 0; i < bias.size(); ++i) bias[i] += s_bias[i];
    }
    v.push_back(std::move(bias));
  }
  // The positions the global mean averages: the last block's output (or the stem's, pooled 3x3 stride 2 pad 1).
  auto const o = w.blocks.empty() ? w.stem.params.output_shape() : w.blocks.back().expand.params.output_shape();
  std::int64_t h = o[1], wd = o[2];
  if (w.blocks.empty()) h = (h - 1) / 2 + 1, wd = (wd - 1) / 2 + 1;
  std::size_t const positions = static_cast<std::size_t>(h * wd);
  std::vector<float> fw = w.fc_weights;
  for (auto& x : fw) x /= static_cast<float>(positions);
  v.push_back(std::move(fw));
  v.push_back(w.fc_bias);
  return v;
}

/// The blocks at which stages 1, 2, ... of a pipeline begin (`split`, ascending, each in 1 .. blocks - 1) checked
/// against the network and the number of IPUs: throws tilebsp::option_error naming the problem.
inline void check_split(Config const& c, std::vector<int> const& split, std::size_t ipus) {
  int const blocks = [&] {
    int n = 0;
    for (int b : c.blocks()) n += b;
    return n;
  }();
  if (split.size() + 1 != ipus)
    throw tb::option_error("resnext: the pipeline split names " + std::to_string(split.size()) + " split point(s) for " +
                           std::to_string(ipus) + " IPUs (it needs " + std::to_string(ipus - 1) + ")");
  for (std::size_t i = 0; i < split.size(); ++i)
    if (split[i] < 1 || split[i] >= blocks || (i > 0 && split[i] <= split[i - 1]))
      throw tb::option_error("resnext: pipeline split points must be ascending block indices in 1 .. " +
                             std::to_string(blocks - 1) + ", got " + std::to_string(split[i]));
}

/// T, once per element of a pack (naming one element type per operand).
template <class T, class>
using as = T;

/// Builds one inference step of the network: stem conv + BN + ReLU, max pool, the bottleneck blocks, global mean,
/// fully connected. Batch norms are folded into the convolutions; a block's last convolution adds its sum to the
/// shortcut (ops::conv_accumulate); each bias and ReLU is one fused elementwise map. The parameter tensors come
/// without values (Model::set_values with fold_parameters): the graph depends on the configuration only. With
/// split points (check_split), stage s (its ops appended to progs[s]) holds the blocks from split[s - 1] on, on IPU
/// s (g.shard(s)), the stem with stage 0 and the classifier with the last; each stage receives its input
/// activations from the stage before (Model::receives). Without, everything goes to progs[0] on IPU 0. With
/// `one_ipu`, the stages are kept apart (in progs) but all on IPU 0 with no transfers: to estimate each part's
/// cycles.
inline Model build(tb::Graph& g, std::vector<tb::Sequence>& progs, Config const& c, std::vector<int> const& split,
                   bool one_ipu = false) {
  using namespace tb::expr;
  tb::ConvOptions const co{.available_memory_proportion = c.conv_amp, .partials = c.partials};
  Weights const w = layout(c);  // the layers' shapes (no values)
  Model m;
  progs.resize(split.size() + 1);
  m.receives.resize(progs.size());
  m.stage_layers.resize(progs.size());
  std::size_t stage = 0;
  tb::Graph sg = g.shard(0);
  auto parameter = [&](tb::Tensor t) {
    m.parameters.emplace_back(t, std::vector<float>{});
    return t;
  };
  auto bias_of = [&](std::string const& name, std::size_t channels) {
    tb::Tensor b = sg.add_variable(c.dtype, {channels}, name + ".bias");
    tb::map_linearly(sg, b);
    return parameter(b);
  };
  auto channels = [](ConvLayer const& l) {
    return static_cast<std::size_t>(l.params.output_channels * l.params.groups);
  };
  // The biases, residual adds and ReLUs, in the model's element type: naming it (map_in_place<T...>) compiles
  // the f16 and f32 kernels only, not those of every type the expression takes.
  auto add_in_place = [&](auto const& e, tb::Tensor const& y, auto const&... operands) {
    if (c.dtype == tb::ElementType::f16)
      tb::ops::map_in_place<tb::half, as<tb::half, decltype(operands)>...>(sg, progs[stage], e, y, operands...);
    else
      tb::ops::map_in_place<float, as<float, decltype(operands)>...>(sg, progs[stage], e, y, operands...);
  };
  auto weights_of = [&](ConvLayer const& l) {
    return parameter(tb::ops::create_conv_weights(sg, l.params, c.dtype, co, l.name + ".weights"));
  };
  auto conv = [&](tb::Tensor const& x, ConvLayer const& l) {
    return tb::ops::conv(sg, progs[stage], x, weights_of(l), l.params, co, l.name);
  };
  auto conv_relu = [&](tb::Tensor const& x, ConvLayer const& l) {
    tb::Tensor y = conv(x, l);
    add_in_place(relu(_1 + _2), y, bias_of(l.name, channels(l)));
    return y;
  };

  m.input = tb::ops::create_conv_input(sg, w.stem.params, c.dtype, co, "input");
  tb::Tensor x = conv_relu(m.input, w.stem);
  x = tb::ops::max_pool(sg, progs[stage], x, {.kernel_shape = {3, 3}, .stride = {2, 2}, .padding_lower = {1, 1},
                                              .padding_upper = {1, 1}}, "stem.max_pool");
  m.stage_layers[0].push_back("stem");
  for (std::size_t i = 0; i < w.blocks.size(); ++i) {
    auto const& b = w.blocks[i];
    if (stage < split.size() && static_cast<std::size_t>(split[stage]) == i) {  // the next stage begins here
      ++stage;
      if (!one_ipu) {
        sg = g.shard(stage);
        tb::Tensor r = tb::receive_buffer(sg, x, "stage" + std::to_string(stage) + ".input");
        m.receives[stage].push_back(tb::receive(x, r));
        x = r;
      }
    }
    tb::Tensor const a = conv_relu(x, b.reduce);
    tb::Tensor const h = conv_relu(a, b.grouped);
    // The expand convolution adds its sum to the shortcut (ops::conv_accumulate): the identity in place (the
    // block's input, which nothing reads after it) or the projection; then the bias and ReLU. A projection
    // block's two biases are added after both sums: one bias tensor serves the pair.
    tb::Tensor const we = weights_of(b.expand);
    tb::Tensor const y = b.shortcut ? conv(x, *b.shortcut) : x;
    tb::ops::conv_accumulate(sg, progs[stage], h, we, y, b.expand.params, co, b.expand.name);
    add_in_place(relu(_1 + _2), y, bias_of(b.expand.name, channels(b.expand)));
    x = y;
    m.stage_layers[stage].push_back(b.reduce.name.substr(0, b.reduce.name.size() - std::string("reduce").size() - 1));
  }
  // Global mean folded into the fully connected weights: logits = (sum over positions) x (W / positions) + b.
  tb::Tensor const pooled = tb::ops::reduce(sg, progs[stage], x, {1, 2}, tb::ops::ReduceOp::add, "global_sum");
  tb::Tensor fc = sg.add_variable(c.dtype, {2048, static_cast<std::size_t>(c.classes)}, "fc.weights");
  tb::map_linearly(sg, fc);
  parameter(fc);
  m.logits = tb::ops::matmul(sg, progs[stage], pooled, fc,
                             {.available_memory_proportion = c.matmul_amp, .partials = c.partials}, "fc");
  tb::ops::add_bias(sg, progs[stage], m.logits, bias_of("fc", static_cast<std::size_t>(c.classes)));
  m.stage_layers[stage].push_back("head (global mean, fc)");
  return m;
}

/// One inference step on one IPU, appended to `prog`.
inline Model build(tb::Graph& g, tb::Sequence& prog, Config const& c) {
  std::vector<tb::Sequence> progs;
  Model m = build(g, progs, c, {});
  prog.add(std::move(progs[0]));
  return m;
}

/// The stages of a pipeline of the network built by build(g, parts, c, split): stage s runs parts[s] on IPU s,
/// the first streaming `input` in from `images`, the last streaming the logits out to `logits`.
inline std::vector<tb::Stage> pipeline_stages(tb::Graph const& g, Model const& m, std::vector<tb::Sequence> parts,
                                              tb::Fifo const& images, tb::Fifo const& logits) {
  std::vector<tb::Stage> stages;
  for (std::size_t s = 0; s < parts.size(); ++s) {
    tb::Sequence body;
    if (s == 0) body.add(tb::stream_in(images, m.input));
    body.add(std::move(parts[s]));
    if (s + 1 == parts.size()) body.add(tb::stream_out(m.logits, logits));
    stages.push_back({g.shard(s), std::move(body), m.receives[s]});
  }
  return stages;
}

/// Each block's estimated cycles on one IPU (the stem counted with the first block, the classifier with the last):
/// every block compiled as its own program on an IPU Mk2 (planning is per IPU, so a block costs the same on any
/// stage), on `threads` host threads.
inline std::vector<std::uint64_t> block_cycles(Config const& c, std::size_t threads = 0) {
  tb::Graph g{tb::targets::ipu_mk2(1)};
  g.set_build_threads(threads);
  std::vector<int> every;
  for (std::size_t i = 1; i < layout(c).blocks.size(); ++i) every.push_back(static_cast<int>(i));
  std::vector<tb::Sequence> progs;
  build(g, progs, c, every, true);
  std::vector<tb::Program> programs(progs.begin(), progs.end());
  tb::Executable const exe = tb::compile(g, {.allow_out_of_memory = true, .threads = threads}, programs);
  std::vector<std::uint64_t> r;
  for (std::size_t i = 0; i < programs.size(); ++i) r.push_back(exe.estimated_cycles(i));
  return r;
}

/// Bytes of each block's parameters (the stem's with the first block, the classifier's with the last), in `c.dtype`.
inline std::vector<std::uint64_t> block_parameter_bytes(Config const& c) {
  Weights const w = layout(c);
  auto const conv = [&](ConvLayer const& l) {
    auto const& p = l.params;
    return tb::product(p.weights_shape()) + static_cast<std::size_t>(p.output_channels * p.groups);  // with a bias
  };
  std::vector<std::uint64_t> r;
  for (auto const& b : w.blocks)
    r.push_back(conv(b.reduce) + conv(b.grouped) + conv(b.expand) + (b.shortcut ? conv(*b.shortcut) : 0));
  if (!r.empty()) {
    r.front() += conv(w.stem);
    r.back() += 2048 * static_cast<std::uint64_t>(c.classes) + static_cast<std::uint64_t>(c.classes);
  }
  for (auto& x : r) x *= tb::size_of(c.dtype);
  return r;
}

/// The split of `blocks.size()` blocks into `ipus` stages (check_split's form) that minimises the slowest stage's
/// cycles plus the costliest transfer between stages (a pipeline step's estimate): block i's input crosses an
/// IPU-Link when a stage begins at i; the first stage streams the images in and the last the logits out. Within
/// memory: a stage's parameters (always live) may take at most half its IPU's memory, the rest left to activations
/// and temporaries (compile's memory report then checks every tile). Exact (a dynamic programme per bound on the
/// transfer). Throws option_error when no split fits.
inline std::vector<int> balanced_split(Config const& c, std::vector<std::uint64_t> const& blocks, std::size_t ipus,
                                       tb::Target const& t) {
  std::size_t const n = blocks.size();
  if (ipus < 2) return {};
  if (ipus > n) throw tb::option_error("resnext: " + std::to_string(ipus) + " IPUs for " + std::to_string(n) + " blocks");
  Weights const w = layout(c);
  std::vector<std::uint64_t> transfer(n, 0);  // the cost of beginning a stage at block i
  for (std::size_t i = 1; i < n; ++i) {
    auto const& p = w.blocks[i].reduce.params;
    double const bytes = static_cast<double>(p.batch * p.input_field[0] * p.input_field[1] * p.input_channels * p.groups) *
                         static_cast<double>(tb::size_of(c.dtype));
    transfer[i] = static_cast<std::uint64_t>(bytes / t.inter_ipu_bytes_per_cycle) + t.inter_ipu_latency_cycles;
  }
  std::vector<std::uint64_t> prefix(n + 1, 0), bytes(n + 1, 0);
  auto const params = block_parameter_bytes(c);
  for (std::size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + blocks[i], bytes[i + 1] = bytes[i] + params.at(i);
  std::uint64_t const budget = t.bytes_per_tile * t.tiles_per_ipu / 2;
  // The first stage also streams the images in, the last the logits out (over the host link).
  auto const stream = [&](double elements) {
    return static_cast<std::uint64_t>(elements * static_cast<double>(tb::size_of(c.dtype)) / t.host_bytes_per_cycle) +
           t.sync_cycles;
  };
  for (std::size_t i = 1; i <= n; ++i) prefix[i] += stream(static_cast<double>(c.batch * c.image * c.image * c.channels));
  prefix[n] += stream(static_cast<double>(c.batch * c.classes));
  constexpr std::uint64_t inf = ~std::uint64_t{0};
  std::vector<int> best;
  std::uint64_t best_cost = inf;
  for (std::size_t bi = 1; bi < n; ++bi) {
    std::uint64_t const bound = transfer[bi];
    // dp[k][j]: the least slowest stage of blocks [0, j) in k stages, stages beginning only where transfer <= bound.
    std::vector<std::vector<std::uint64_t>> dp(ipus + 1, std::vector<std::uint64_t>(n + 1, inf));
    std::vector<std::vector<std::size_t>> from(ipus + 1, std::vector<std::size_t>(n + 1, 0));
    dp[0][0] = 0;
    for (std::size_t k = 1; k <= ipus; ++k)
      for (std::size_t j = 1; j <= n; ++j)
        for (std::size_t i = k - 1; i < j; ++i) {
          if (dp[k - 1][i] == inf || (i > 0 && transfer[i] > bound) || bytes[j] - bytes[i] > budget) continue;
          std::uint64_t const v = std::max(dp[k - 1][i], prefix[j] - prefix[i]);
          if (v < dp[k][j]) dp[k][j] = v, from[k][j] = i;
        }
    if (dp[ipus][n] == inf || dp[ipus][n] + bound >= best_cost) continue;
    best_cost = dp[ipus][n] + bound;
    best.assign(ipus - 1, 0);
    for (std::size_t k = ipus, j = n; k > 1; --k) j = from[k][j], best[k - 2] = static_cast<int>(j);
  }
  if (best.empty())
    throw tb::option_error("resnext: no split of " + std::to_string(n) + " blocks over " + std::to_string(ipus) +
                           " IPUs keeps each stage's parameters within half an IPU's memory");
  return best;
}

/// build() with the values of `w` set.
inline Model build(tb::Graph& g, tb::Sequence& prog, Config const& c, Weights const& w) {
  Model m = build(g, prog, c);
  m.set_values(fold_parameters(w));
  return m;
}

}  // namespace resnext
