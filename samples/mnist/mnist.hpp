// samples/mnist/mnist.hpp: the models of the MNIST sample (logistic regression, MLP, CNN), their parameters
// (Xavier/He initialisation with a fixed seed, or a weights file), and a Trainer: one tile graph holding the
// training step — forward, softmax cross-entropy, backward and the SGD update — inside an on-device loop
// between infeeds and outfeeds, plus an inference program sharing the same weights.
#pragma once

#include "../common/rng.hpp"
#include "../common/tensor_file.hpp"
#include "idx.hpp"

#include <chrono>
#include <tilebsp/tilebsp.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mnist {

namespace tb = tilebsp;

enum class Model { logreg, mlp, cnn };

inline std::optional<Model> model_named(std::string_view s) {
  if (s == "logreg") return Model::logreg;
  if (s == "mlp") return Model::mlp;
  if (s == "cnn") return Model::cnn;
  return std::nullopt;
}
inline char const* name_of(Model m) { return m == Model::logreg ? "logreg" : m == Model::mlp ? "mlp" : "cnn"; }

/// How the learning rate changes over training: constant, or cosine annealing from the given rate to 0 over all
/// epochs (SGDR without restarts: Loshchilov and Hutter, 2017), per batch.
enum class Schedule { constant, cosine };

/// What to train and how.
struct Config {
  Model model = Model::mlp;
  std::size_t batch = 32;             ///< training examples per SGD step
  std::size_t eval_batch = 250;       ///< examples per inference run (the last is padded)
  float learning_rate = 0.05f;
  std::size_t batches_per_step = 75;  ///< SGD steps per device run: the on-device repeat count
  std::size_t rows = 28, cols = 28, classes = 10;
  std::uint64_t seed = 1;             ///< of the initial weights and of the shuffles
  Schedule schedule = Schedule::cosine;  ///< of the learning rate
  std::size_t epochs = 5;             ///< the length of training, over which the cosine schedule anneals
  /// Micro-batches of `batch` examples whose gradients are summed before one weight update (effective batch:
  /// batch x gradient_accumulation; the loss is the mean over it). 1: every batch updates the weights directly.
  std::size_t gradient_accumulation = 1;
  /// IPUs: 2 trains as a pipeline of the layers' first half on IPU 0, the rest (and the loss) on IPU 1, and the first
  /// half's backward pass on IPU 0 again: 3 stages, so gradient_accumulation must be at least 3.
  std::size_t num_ipus = 1;
  /// Data-parallel replicas: each trains on its own batches (replica r takes the epoch's batches r, r + R, ...),
  /// their summed gradients are all-reduced before every update (effective batch: batch x accumulation x R). They
  /// run in this process, or spread over processes (the Engine's communicator: one MPI rank per replica or group).
  std::size_t replicas = 1;
};

/// One layer: a fully connected (dense) or convolutional layer with a bias and an optional ReLU, or a 2x2 max pool.
struct Layer {
  enum class Kind { dense, conv, max_pool };
  Kind kind = Kind::dense;
  std::string name;
  bool relu = false;
  tb::Shape in;                  ///< one example's input shape: [features], or [rows, cols, channels]
  tb::Shape out;                 ///< one example's output shape
  tb::ConvParams conv;           ///< conv: the convolution of one example (the batch is set per graph)
  std::vector<float> weights;    ///< dense [in, out]; conv [1, kh, kw, C_in, C_out] (tilebsp's layout)
  std::vector<float> bias;       ///< [out] or [C_out]

  bool has_weights() const { return kind != Kind::max_pool; }
  tb::Shape weights_shape() const {
    return kind == Kind::dense ? tb::Shape{in[0], out[0]} : conv.weights_shape();
  }
  std::size_t fan_in() const { return kind == Kind::dense ? in[0] : in[2] * conv.kernel_shape[0] * conv.kernel_shape[1]; }
  std::size_t fan_out() const { return kind == Kind::dense ? out[0] : out[2] * conv.kernel_shape[0] * conv.kernel_shape[1]; }
  tb::ConvParams conv_at(std::size_t batch) const {
    tb::ConvParams p = conv;
    p.batch = static_cast<std::int64_t>(batch);
    return p;
  }
};

/// A model's layers, input to logits.
struct Network {
  Model model = Model::mlp;
  std::vector<Layer> layers;
  tb::Shape input;  ///< one example's input shape
  /// (mean, std) of the training pixels in [0, 1]: the host standardises each pixel as it feeds the images.
  std::vector<float> standardise = {0.0f, 1.0f};

  std::size_t parameter_count() const {
    std::size_t n = 0;
    for (auto const& l : layers) n += l.weights.size() + l.bias.size();
    return n;
  }
};

/// The layers of c.model with their shapes (parameters left empty).
inline Network layout(Config const& c) {
  std::size_t const pixels = c.rows * c.cols;
  Network n;
  n.model = c.model;
  auto dense = [&](std::string name, std::size_t in, std::size_t out, bool relu) {
    Layer l;
    l.kind = Layer::Kind::dense, l.name = std::move(name), l.relu = relu, l.in = {in}, l.out = {out};
    n.layers.push_back(std::move(l));
  };
  auto conv_pool = [&](std::string const& name, tb::Shape const& in, std::size_t out) {
    Layer l;
    l.kind = Layer::Kind::conv, l.name = name, l.relu = true, l.in = in, l.out = {in[0], in[1], out};
    l.conv.batch = 1;
    l.conv.input_field = {static_cast<std::int64_t>(in[0]), static_cast<std::int64_t>(in[1])};
    l.conv.kernel_shape = {3, 3};
    l.conv.channels(static_cast<std::int64_t>(in[2]), static_cast<std::int64_t>(out), 1);
    l.conv.padding_lower = l.conv.padding_upper = {1, 1};
    Layer p;
    p.kind = Layer::Kind::max_pool, p.name = name + ".pool", p.in = l.out, p.out = {in[0] / 2, in[1] / 2, out};
    n.layers.push_back(std::move(l));
    n.layers.push_back(std::move(p));
    return n.layers.back().out;
  };
  switch (c.model) {
    case Model::logreg:
      n.input = {pixels};
      dense("fc", pixels, c.classes, false);
      break;
    case Model::mlp:
      n.input = {pixels};
      dense("fc1", pixels, 256, true);
      dense("fc2", 256, c.classes, false);
      break;
    case Model::cnn: {
      n.input = {c.rows, c.cols, 1};
      tb::Shape s = conv_pool("conv1", n.input, 32);
      s = conv_pool("conv2", s, 64);
      dense("fc1", tb::product(s), 128, true);
      dense("fc2", 128, c.classes, false);
      break;
    }
  }
  return n;
}

/// The (mean, std) of all pixels of `d`, scaled to [0, 1] (Fashion-MNIST's training set: 0.2860, 0.3530).
inline std::vector<float> pixel_statistics(Dataset const& d) {
  std::uint64_t sum = 0, squares = 0;
  for (std::uint8_t v : d.images) sum += v, squares += std::uint64_t{v} * v;
  double const n = static_cast<double>(std::max<std::size_t>(d.images.size(), 1));
  double const mean = static_cast<double>(sum) / n, var = static_cast<double>(squares) / n - mean * mean;
  return {static_cast<float>(mean / 255.0), static_cast<float>(std::sqrt(std::max(var, 1e-12)) / 255.0)};
}

/// Initial parameters with a fixed seed: He-normal weights for layers followed by a ReLU (std sqrt(2 / fan_in)),
/// Xavier-uniform for the others (limit sqrt(6 / (fan_in + fan_out))), zero biases.
inline Network initial_network(Config const& c) {
  Network n = layout(c);
  samples::Rng rng(c.seed);
  for (auto& l : n.layers) {
    if (!l.has_weights()) continue;
    l.weights.resize(tb::product(l.weights_shape()));
    double const fan_in = static_cast<double>(l.fan_in()), fan_out = static_cast<double>(l.fan_out());
    double const he = std::sqrt(2.0 / fan_in), xavier = std::sqrt(6.0 / (fan_in + fan_out));
    for (auto& w : l.weights) w = static_cast<float>(l.relu ? he * rng.normal() : rng.uniform(-xavier, xavier));
    l.bias.assign(l.out.back(), 0.0f);
  }
  return n;
}

// Weights files (samples/common/tensor_file.hpp) with the magic "TBMNIST1": "input.standardise" (mean, std),
// then per layer with parameters "<layer>.weights" and "<layer>.bias".
inline constexpr samples::TensorFileFormat weights_format{{'T', 'B', 'M', 'N', 'I', 'S', 'T', '1'},
                                                          "tilebsp MNIST weights file", "check --model"};

template <class N>
auto named_tensors(N& n) {
  using V = std::conditional_t<std::is_const_v<N>, std::vector<float> const, std::vector<float>>;
  std::vector<samples::NamedTensor<V>> r{{"input.standardise", tb::Shape{2}, &n.standardise}};
  for (auto& l : n.layers) {
    if (!l.has_weights()) continue;
    r.push_back({l.name + ".weights", l.weights_shape(), &l.weights});
    r.push_back({l.name + ".bias", tb::Shape{l.out.back()}, &l.bias});
  }
  return r;
}
/// Writes the parameters of `n`; throws tilebsp::error when the file cannot be written.
inline void save_weights(Network const& n, std::string const& path) { samples::save_tensors(weights_format, path, named_tensors(n)); }
/// The network c.model with parameters read from `path`; throws tilebsp::error naming the file and the problem
/// (another kind of file, another model, a truncated file, ...).
inline Network load_weights(Config const& c, std::string const& path) {
  Network n = layout(c);
  samples::load_tensors(weights_format, path, named_tensors(n));
  return n;
}

/// The order in which epoch `epoch` visits `count` examples: a Fisher-Yates shuffle seeded by (seed, epoch).
inline std::vector<std::uint32_t> epoch_order(std::size_t count, std::uint64_t seed, std::size_t epoch) {
  std::vector<std::uint32_t> order(count);
  std::iota(order.begin(), order.end(), 0u);
  samples::Rng rng(seed * 0x9e3779b97f4a7c15ull + epoch + 1);
  for (std::size_t i = count; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  return order;
}

/// What one pass over data gave: mean loss, accuracy, examples.
struct Result {
  double loss = 0, accuracy = 0;
  std::size_t examples = 0;
};

/// The tile graph of training and inference for one network, on a modelled IPU Mk2 (or another target), and an
/// Engine running it.
///
/// Program 0: repeat(batches_per_step, train step); program 1: one train step (an epoch's remainder);
/// program 2: one inference batch. A train step streams in images (f32, standardised), labels (i32) and the
/// schedule's learning-rate factor, runs forward, softmax cross-entropy (gradient scaled by 1 / batch: the mean
/// loss, as PyTorch's), backward and SGD, and streams out the batch's summed loss and number correct. Results
/// depend neither on the number of host threads nor on batches_per_step.
class Trainer {
 public:
  Trainer(Config const& c, Network const& initial, tb::EngineOptions const& engine_options = {},
          tb::Target const& target = tb::targets::ipu_mk2(), tb::CompileOptions const& compile_options = {})
      : c_(c), net_(initial), g_(target) {
    auto const t0 = std::chrono::steady_clock::now();
    if (c.batch == 0 || c.eval_batch == 0 || c.batches_per_step == 0 || c.epochs == 0)
      throw tb::option_error("mnist: batch sizes, batches per step and epochs must be positive");
    if (net_.standardise.size() != 2 || !(net_.standardise[1] > 0.0f))
      throw tb::option_error("mnist: the pixel standard deviation must be positive");
    for (int v = 0; v < 256; ++v)
      pixel_[static_cast<std::size_t>(v)] = (static_cast<float>(v) / 255.0f - net_.standardise[0]) / net_.standardise[1];
    if (!(c.learning_rate > 0.0f) || !std::isfinite(c.learning_rate))
      throw tb::option_error("mnist: the learning rate must be a positive number");
    if (c.gradient_accumulation == 0)
      throw tb::option_error("mnist: the gradient accumulation count must be at least 1");
    if (c.replicas == 0) throw tb::option_error("mnist: the number of replicas must be at least 1");
    if (c.num_ipus != 1 && c.num_ipus != 2) throw tb::option_error("mnist: --num-ipus must be 1 or 2");
    if (c.num_ipus == 2 && net_.layers.size() < 2)
      throw tb::option_error(std::string("mnist: ") + name_of(net_.model) + " has one layer; 2 IPUs need two at least");
    if (c.num_ipus == 2 && c.gradient_accumulation < 3)
      throw tb::option_error("mnist: training on 2 IPUs is a pipeline of 3 stages; the gradient accumulation count must "
                             "be at least 3, got " + std::to_string(c.gradient_accumulation));
    if (target.ipus < c.num_ipus)
      throw tb::option_error("mnist: the target has " + std::to_string(target.ipus) + " IPU(s), fewer than --num-ipus");
    accumulate_ = c.gradient_accumulation > 1 || c.num_ipus > 1 || c.replicas > 1;
    split_ = c.num_ipus > 1 ? net_.layers.size() / 2 : net_.layers.size();
    for (std::size_t i = 0; i < c.num_ipus; ++i) shards_.push_back(c.num_ipus > 1 ? g_.shard(i) : g_);
    build_parameters();
    auto const [train_step, lr_factor_in, loss_out, correct_out, train] = accumulate_ ? accumulated_step() : direct_step();
    // Inference with the same weights, per-example loss and correctness out (padding is left out on the host); on 2
    // IPUs a sharded program (the activations copied over once), not a pipeline.
    tb::Sequence infer;
    Io const eval = io(c.eval_batch, "eval");
    std::vector<tb::Tensor> const eval_acts = forward(infer, eval.images, c.eval_batch, "eval/", 0, net_.layers.size(), true);
    auto const eval_ce = tb::ops::softmax_cross_entropy(last_graph(), infer, eval_acts.back(), eval.labels, 1.0f, "eval/loss");
    auto eval_loss_out = g_.add_device_to_host_fifo<float>("eval/loss_out", c.eval_batch);
    auto eval_correct_out = g_.add_device_to_host_fifo<float>("eval/correct_out", c.eval_batch);
    auto const eval_step = tb::seq(tb::stream_in(eval.images_in, eval.images), tb::stream_in(eval.labels_in, eval.labels),
                                   std::move(infer), tb::stream_out(eval_ce.loss, eval_loss_out),
                                   tb::stream_out(eval_ce.correct, eval_correct_out));

    auto const t1 = std::chrono::steady_clock::now();
    tb::CompileOptions co = compile_options;
    co.replicas = c.replicas;
    tb::Executable exe = tb::compile(g_, co, tb::repeat(c.batches_per_step, train_step), train_step, eval_step);
    auto const t2 = std::chrono::steady_clock::now();
    build_seconds_ = std::chrono::duration<double>(t1 - t0).count();
    compile_seconds_ = std::chrono::duration<double>(t2 - t1).count();
    from_cache_ = exe.loaded_from_cache();
    engine_ = std::make_unique<tb::Engine>(std::move(exe), engine_options);
    write_parameters();
    // Each replica its own training feed; the evaluation feeds every replica the same batches (the weights agree).
    connect_feeds(train, train_feeds_);
    for (std::size_t l = 0; l < train_feeds_.size(); ++l) {
      Feed* f = &train_feeds_[l];
      engine_->connect<float>(lr_factor_in, engine_->first_replica() + l, [this, f](std::span<float> v) {
        v[0] = static_cast<float>(schedule_factor(f->lr++ / c_.gradient_accumulation));  // per update
      });
    }
    engine_->connect<float>(loss_out, [this](std::span<float const> v) { step_loss_ += v[0]; });
    engine_->connect<float>(correct_out, [this](std::span<float const> v) { step_correct_ += v[0]; });
    connect_feeds(eval, eval_feeds_);
    engine_->connect<float>(eval_loss_out, [this](std::span<float const> v) { eval_loss_.assign(v.begin(), v.end()); });
    engine_->connect<float>(eval_correct_out,
                            [this](std::span<float const> v) { eval_correct_.assign(v.begin(), v.end()); });
  }

  Config const& config() const { return c_; }
  tb::Engine& engine() { return *engine_; }
  /// Seconds the constructor spent building the graph and compiling it (or loading it from the executable cache).
  double build_seconds() const { return build_seconds_; }
  double compile_seconds() const { return compile_seconds_; }
  bool loaded_from_cache() const { return from_cache_; }
  tb::Graph const& graph() const { return g_; }

  /// Weight updates of one epoch over `d` (each of gradient_accumulation batches; the last, partial update is
  /// dropped, as PyTorch's drop_last).
  std::size_t batches_per_epoch(Dataset const& d) const {
    return d.count / (c_.batch * c_.gradient_accumulation * c_.replicas);
  }

  /// Trains one epoch over `d` in the order epoch_order(d.count, seed, epoch). `progress(done, total, loss, correct)`
  /// is called after each device run with the batches done so far and their summed loss and number correct.
  Result train_epoch(Dataset const& d, std::size_t epoch,
                     std::function<void(std::size_t, std::size_t, double, double)> const& progress = {}) {
    check_image_size(d);
    std::size_t const total = batches_per_epoch(d);
    if (total == 0)
      throw tb::option_error("mnist: " + std::to_string(d.count) + " training examples do not fill one batch of " +
                             std::to_string(c_.batch * c_.gradient_accumulation * c_.replicas));
    order_ = epoch_order(d.count, c_.seed, epoch);
    for (std::size_t l = 0; l < train_feeds_.size(); ++l)
      train_feeds_[l] = {&d, &order_, 0, 0, epoch * total * c_.gradient_accumulation, c_.batch, c_.replicas,
                         engine_->first_replica() + l};
    batches_per_epoch_ = total;
    double loss = 0, correct = 0;
    for (std::size_t done = 0; done < total;) {
      std::size_t const n = total - done >= c_.batches_per_step ? c_.batches_per_step : 1;
      step_loss_ = step_correct_ = 0;
      engine_->run(n == 1 && c_.batches_per_step != 1 ? 1 : 0);
      done += n;
      loss += step_loss_;
      correct += step_correct_;
      if (progress) progress(done, total, loss, correct);
    }
    // The loss and correct counts are of this engine's replicas; `examples` counts every replica's.
    std::size_t const seen = total * c_.batch * c_.gradient_accumulation;
    double const here = static_cast<double>(seen * engine_->local_replicas());
    return {loss / here, correct / here, seen * c_.replicas};
  }

  /// The schedule's factor of the learning rate for training batch `k` (counted from the first epoch's first):
  /// 1 for a constant rate; for cosine annealing, (1 + cos(pi t)) / 2 where t = k / (c.epochs x batches per epoch)
  /// is the fraction of training done (1 past the end).
  double schedule_factor(std::size_t k) const {
    if (c_.schedule == Schedule::constant) return 1.0;
    double const t = static_cast<double>(k) / static_cast<double>(c_.epochs * batches_per_epoch_);
    return 0.5 * (1.0 + std::cos(3.141592653589793 * std::min(t, 1.0)));
  }

  /// Mean loss and accuracy of the current weights on `d`.
  Result evaluate(Dataset const& d) {
    check_image_size(d);
    for (auto& f : eval_feeds_) f = {&d, nullptr, 0, 0, 0, 1, 1, 0};  // every replica the same batches
    double loss = 0, correct = 0;
    for (std::size_t b0 = 0; b0 < d.count; b0 += c_.eval_batch) {
      engine_->run(2);
      std::size_t const n = std::min(c_.eval_batch, d.count - b0);
      for (std::size_t i = 0; i < n; ++i) loss += eval_loss_[i], correct += eval_correct_[i];
    }
    double const examples = static_cast<double>(std::max<std::size_t>(d.count, 1));
    return {loss / examples, correct / examples, d.count};
  }

  /// The network with its current (trained) parameters.
  Network network() const {
    Network n = net_;
    for (std::size_t i = 0; i < n.layers.size(); ++i) {
      if (!n.layers[i].has_weights()) continue;
      n.layers[i].weights = engine_->read<float>(weights_[i], engine_->first_replica());  // the replicas agree
      n.layers[i].bias = engine_->read<float>(biases_[i], engine_->first_replica());
    }
    return n;
  }

 private:
  struct Io {
    tb::Tensor images, labels;
    tb::Fifo images_in, labels_in;
  };
  /// Where each infeed is in the data: the data set, the order of the pass (training's shuffle; none: in order),
  /// the next position for images and for labels, and (training) the next batch counted over all epochs, for the
  /// learning-rate schedule.
  struct Feed {
    Dataset const* data = nullptr;
    std::vector<std::uint32_t> const* order = nullptr;
    std::size_t images = 0, labels = 0, lr = 0;
    /// Replica `replica` of `replicas` takes batches replica, replica + replicas, ... of `batch` examples.
    std::size_t batch = 1, replicas = 1, replica = 0;

    /// The example at this replica's position `k`; past the end (evaluation's padding) there is none.
    std::optional<std::size_t> example(std::size_t k) const {
      k = ((k / batch) * replicas + replica) * batch + k % batch;
      if (k >= data->count) return std::nullopt;
      return order ? (*order)[k] : k;
    }
  };

  /// The graph of layer i's stage (the whole graph on one IPU), and of the last layer.
  tb::Graph& graph_of(std::size_t layer) { return shards_[layer < split_ ? 0 : shards_.size() - 1]; }
  tb::Graph& last_graph() { return shards_.back(); }

  /// The images on the first layer's IPU, the labels on the last's.
  Io io(std::size_t batch, std::string const& tag) {
    Io r;
    Layer const& first = net_.layers.front();
    tb::Graph& g0 = shards_.front();
    if (first.kind == Layer::Kind::conv) {
      r.images = tb::ops::create_conv_input(g0, first.conv_at(batch), tb::ElementType::f32, {}, tag + "/images");
    } else {
      r.images = g0.add_variable<float>({batch, net_.input[0]}, tag + "/images");
      tb::map_linearly(g0, r.images);
    }
    r.labels = last_graph().add_variable<std::int32_t>({batch}, tag + "/labels");
    tb::map_linearly(last_graph(), r.labels);
    r.images_in = g_.add_host_to_device_fifo<float>(tag + "/images_in", r.images.num_elements());
    r.labels_in = g_.add_host_to_device_fifo<std::int32_t>(tag + "/labels_in", batch);
    return r;
  }

  /// One feed per local replica, connected to that replica's image and label infeeds.
  void connect_feeds(Io const& io, std::vector<Feed>& feeds) {
    feeds.resize(engine_->local_replicas());
    for (std::size_t l = 0; l < feeds.size(); ++l) {
      std::size_t const r = engine_->first_replica() + l;
      Feed* f = &feeds[l];
      engine_->connect<float>(io.images_in, r, [this, f](std::span<float> b) { fill_images(b, *f); });
      engine_->connect<std::int32_t>(io.labels_in, r, [f](std::span<std::int32_t> b) { fill_labels(b, *f); });
    }
  }

  void build_parameters() {
    weights_.resize(net_.layers.size());
    biases_.resize(net_.layers.size());
    acc_w_.resize(net_.layers.size());
    acc_b_.resize(net_.layers.size());
    for (std::size_t i = 0; i < net_.layers.size(); ++i) {
      Layer const& l = net_.layers[i];
      if (!l.has_weights()) continue;
      tb::Graph& g = graph_of(i);
      if (l.kind == Layer::Kind::conv) {
        weights_[i] = tb::ops::create_conv_weights(g, l.conv_at(c_.batch), tb::ElementType::f32, {}, l.name + ".weights");
      } else {
        weights_[i] = g.add_variable<float>(l.weights_shape(), l.name + ".weights");
        tb::map_linearly(g, weights_[i]);
      }
      biases_[i] = g.add_variable<float>({l.out.back()}, l.name + ".bias");
      tb::map_linearly(g, biases_[i]);
      if (accumulate_) {  // the summed gradients, laid out as the parameters
        acc_w_[i] = g_.add_variable<float>(l.weights_shape(), l.name + ".weights.grad_sum");
        g_.set_tile_mapping_like(acc_w_[i], weights_[i]);
        acc_b_[i] = g_.add_variable<float>({l.out.back()}, l.name + ".bias.grad_sum");
        g_.set_tile_mapping_like(acc_b_[i], biases_[i]);
      }
    }
  }

  /// What a training program needs connected: its step, and the FIFOs of the learning-rate factor, the loss and the
  /// number correct, and of the training images and labels.
  struct Training {
    tb::Program step;
    tb::Fifo lr_factor_in, loss_out, correct_out;
    Io train;
  };

  /// The learning-rate factor of the schedule, on the last layer's IPU (streamed in per batch).
  tb::Tensor lr_factor_tensor() {
    tb::Tensor const f = last_graph().add_variable<float>({1}, "train/lr_factor");
    last_graph().set_tile_mapping(f, 0);
    return f;
  }

  /// The loss (the mean over the effective batch), through the learning-rate schedule: backpropagation is linear in
  /// the loss gradient, so scaling the gradient by the schedule's factor for this batch scales every update.
  tb::ops::SoftmaxCrossEntropy loss(tb::Sequence& step, tb::Tensor const& logits, Io const& train, tb::Tensor const& lr_factor) {
    float const scale = 1.0f / static_cast<float>(c_.batch * c_.gradient_accumulation * c_.replicas);
    auto ce = tb::ops::softmax_cross_entropy(last_graph(), step, logits, train.labels, scale, "train/loss");
    tb::ops::map_in_place<float, float>(last_graph(), step, tb::expr::_1 * tb::expr::_2, ce.grad, lr_factor);
    return ce;
  }

  /// A train step that updates the weights from each batch: stream in, forward, loss, backward with SGD, stream out.
  Training direct_step() {
    tb::Sequence step;
    Io const train = io(c_.batch, "train");
    std::vector<tb::Tensor> acts = forward(step, train.images, c_.batch, "train/", 0, net_.layers.size(), false);
    tb::Tensor const lr_factor = lr_factor_tensor();
    auto const ce = loss(step, acts.back(), train, lr_factor);
    backward(step, acts, ce.grad, c_.batch, 0, net_.layers.size());
    Training t{{}, g_.add_host_to_device_fifo<float>("train/lr_factor_in", 1), g_.add_device_to_host_fifo<float>("train/loss_out", 1),
               g_.add_device_to_host_fifo<float>("train/correct_out", 1), train};
    t.step = tb::seq(tb::stream_in(train.images_in, train.images), tb::stream_in(train.labels_in, train.labels),
                     tb::stream_in(t.lr_factor_in, lr_factor), std::move(step), tb::stream_out(ce.total_loss, t.loss_out),
                     tb::stream_out(ce.total_correct, t.correct_out));
    return t;
  }

  /// A weight update from gradient_accumulation batches: the sums zeroed, a pipeline over the micro-batches (one
  /// stage on one IPU; on 2 IPUs forward of the first layers, forward + loss + backward of the rest, backward of the
  /// first layers from their activations kept on IPU 0), then one SGD step from the sums.
  Training accumulated_step() {
    Io const train = io(c_.batch, "train");
    Training t{{}, g_.add_host_to_device_fifo<float>("train/lr_factor_in", 1), g_.add_device_to_host_fifo<float>("train/loss_out", 1),
               g_.add_device_to_host_fifo<float>("train/correct_out", 1), train};
    std::size_t const L = net_.layers.size();
    bool const piped = split_ < L;
    std::vector<tb::Stage> stages;
    tb::Sequence first;
    first.add(tb::stream_in(train.images_in, train.images));
    std::vector<tb::Tensor> const head = forward(first, train.images, c_.batch, "train/", 0, split_, false);
    std::vector<tb::Tensor> all = head;  // each layer's input and output, as the stage that runs it sees them
    tb::Sequence last;
    std::vector<tb::Receive> into_last;
    if (piped) {  // the first layers' output crosses to IPU 1
      stages.push_back(tb::stage(shards_[0], std::move(first)));
      tb::Tensor const r = tb::receive_buffer(last_graph(), head.back(), "train/stage1.input");
      into_last.push_back(tb::receive(head.back(), r));
      std::vector<tb::Tensor> const rest = forward(last, r, c_.batch, "train/", split_, L, false);
      all.back() = r;
      all.insert(all.end(), rest.begin() + 1, rest.end());
    } else {
      last = std::move(first);
    }
    tb::Tensor const lr_factor = lr_factor_tensor();
    last.add(tb::stream_in(train.labels_in, train.labels));
    last.add(tb::stream_in(t.lr_factor_in, lr_factor));
    auto const ce = loss(last, all.back(), train, lr_factor);
    tb::Tensor const g_split = backward(last, all, ce.grad, c_.batch, piped ? split_ : 0, L);
    last.add(tb::stream_out(ce.total_loss, t.loss_out));
    last.add(tb::stream_out(ce.total_correct, t.correct_out));
    stages.push_back({last_graph(), std::move(last), std::move(into_last)});
    if (piped) {  // the first layers' backward pass on IPU 0: the gradient from stage 1, the activations kept
      tb::Graph& g0 = shards_[0];
      std::vector<tb::Receive> into_back;
      std::vector<tb::Tensor> kept;
      for (std::size_t j = 0; j < head.size(); ++j) {
        kept.push_back(tb::receive_buffer(g0, head[j], "train/kept" + std::to_string(j)));
        into_back.push_back(tb::receive(head[j], kept.back(), 0));  // two stages on: a stash
      }
      tb::Tensor const grad = tb::receive_buffer(g0, g_split, "train/stage2.grad");
      into_back.push_back(tb::receive(g_split, grad));
      tb::Sequence back;
      backward(back, kept, grad, c_.batch, 0, split_);
      stages.push_back({g0, std::move(back), std::move(into_back)});
    }
    tb::Sequence zero, update, reduce;
    std::vector<tb::Tensor> sums;  // every layer's gradient sums, flat
    float const step = -c_.learning_rate;
    for (std::size_t i = 0; i < L; ++i) {
      if (!net_.layers[i].has_weights()) continue;
      tb::Graph& g = graph_of(i);
      tb::ops::fill(g, zero, acc_w_[i], 0.0);
      tb::ops::fill(g, zero, acc_b_[i], 0.0);
      sums.push_back(acc_w_[i].flatten());
      sums.push_back(acc_b_[i]);
      tb::ops::scaled_add(g, update, weights_[i], acc_w_[i], step);
      tb::ops::scaled_add(g, update, biases_[i], acc_b_[i], step);
    }
    // Data parallelism: every replica's sums (each already divided by the replica count) added up, all layers' in
    // one all-reduce (one ring's latency and sync instead of one per tensor).
    if (c_.replicas > 1) tb::ops::cross_replica_sum_in_place(reduce, tb::concat(sums), "train/grad_sums");
    t.step = tb::seq(std::move(zero), tb::pipeline({.micro_batches = c_.gradient_accumulation}, std::move(stages)),
                     std::move(reduce), std::move(update));
    return t;
  }

  void write_parameters() {
    for (std::size_t i = 0; i < net_.layers.size(); ++i) {
      if (!net_.layers[i].has_weights()) continue;
      engine_->write(weights_[i], net_.layers[i].weights);
      engine_->write(biases_[i], net_.layers[i].bias);
    }
  }

  /// Adds the forward pass of layers [lo, hi) to `prog`; returns the input and every layer's output (the last:
  /// logits). With `cross`, a layer on another IPU than its input (the sharded inference) copies the input over.
  std::vector<tb::Tensor> forward(tb::Sequence& prog, tb::Tensor const& input, std::size_t batch, std::string const& tag,
                                  std::size_t lo, std::size_t hi, bool cross) {
    using namespace tb::expr;
    std::vector<tb::Tensor> acts{input};
    for (std::size_t i = lo; i < hi; ++i) {
      Layer const& l = net_.layers[i];
      tb::Graph& g = graph_of(i);
      tb::Tensor x = acts.back();
      if (cross && i == split_ && i > 0) {
        tb::Tensor const r = tb::receive_buffer(g, x, tag + "stage1.input");
        prog.add(tb::copy(x, r));
        x = r;
      }
      std::string const name = tag + l.name;
      tb::Tensor y;
      switch (l.kind) {
        case Layer::Kind::dense:
          y = tb::ops::matmul(g, prog, x.reshape({batch, l.in[0]}), weights_[i], {}, name);
          break;
        case Layer::Kind::conv:
          y = tb::ops::conv(g, prog, x, weights_[i], l.conv_at(batch), {}, name);
          break;
        case Layer::Kind::max_pool:
          y = tb::ops::max_pool(g, prog, x, pool(), name);
          break;
      }
      if (l.has_weights()) {
        if (l.relu) tb::ops::map_in_place<float, float>(g, prog, relu(_1 + _2), y, biases_[i]);
        else tb::ops::map_in_place<float, float>(g, prog, _1 + _2, y, biases_[i]);
      }
      acts.push_back(y);
    }
    return acts;
  }

  /// Adds the backward pass of layers [lo, hi) to `prog`, from the loss gradient with respect to layer hi - 1's
  /// output, given each layer's input and output (acts[i], acts[i + 1]). Updates the weights by SGD, or with
  /// accumulation adds the gradients to the sums. Returns the gradient with respect to layer lo's input (none
  /// for lo = 0).
  tb::Tensor backward(tb::Sequence& prog, std::vector<tb::Tensor> const& acts, tb::Tensor grad, std::size_t batch,
                      std::size_t lo, std::size_t hi) {
    using namespace tb::expr;
    float const step = -c_.learning_rate;
    for (std::size_t i = hi; i-- > lo;) {
      Layer const& l = net_.layers[i];
      tb::Graph& g = graph_of(i);
      tb::Tensor const& x = acts[i];
      tb::Tensor const& y = acts[i + 1];
      std::string const name = "train/" + l.name + "/grad";
      bool const need_input_grad = i > 0;
      if (l.kind == Layer::Kind::max_pool) {
        grad = tb::ops::max_pool_backward(g, prog, x, y, grad, pool(), name);
        continue;
      }
      // Through the ReLU (y > 0 where it passed its input), then the bias gradient: the sum over all but channels.
      if (l.relu) tb::ops::map_in_place<float, float>(g, prog, select(_2 > 0.0f, _1, 0.0f), grad, y);
      std::vector<std::size_t> batch_dims(grad.rank() - 1);
      std::iota(batch_dims.begin(), batch_dims.end(), std::size_t{0});
      tb::Tensor const db = tb::ops::reduce(g, prog, grad, batch_dims, tb::ops::ReduceOp::add, name + "/bias");
      tb::Tensor const& w_into = accumulate_ ? acc_w_[i] : weights_[i];
      float const k = accumulate_ ? 1.0f : step;
      tb::Tensor next;
      if (l.kind == Layer::Kind::dense) {
        tb::Tensor const x2 = x.reshape({batch, l.in[0]});
        if (need_input_grad) next = tb::ops::matmul(g, prog, grad, weights_[i].transpose(), {}, name + "/input").reshape(x.shape());
        tb::ops::matmul_acc(g, prog, w_into, k, x2.transpose(), grad, {}, name + "/weights");
      } else {
        tb::ConvParams const p = l.conv_at(batch);
        if (need_input_grad) next = tb::ops::conv_backward_input(g, prog, grad, weights_[i], p, {}, name + "/input");
        tb::ops::conv_weight_update(g, prog, grad, x, w_into, k, p, {}, name + "/weights");
      }
      tb::ops::scaled_add(g, prog, accumulate_ ? acc_b_[i] : biases_[i], db, k);
      grad = next;
    }
    return grad;
  }

  static tb::PoolParams pool() { return {.kernel_shape = {2, 2}, .stride = {2, 2}}; }

  void check_image_size(Dataset const& d) const {
    if (d.rows != c_.rows || d.cols != c_.cols)
      throw tb::shape_error("mnist: the images are " + std::to_string(d.rows) + "x" + std::to_string(d.cols) +
                            " but the model takes " + std::to_string(c_.rows) + "x" + std::to_string(c_.cols));
  }

  void fill_images(std::span<float> batch, Feed& f) const {
    std::size_t const pixels = c_.rows * c_.cols;
    for (float* out = batch.data(); out != batch.data() + batch.size(); out += pixels) {
      auto const e = f.example(f.images++);
      if (!e) {
        std::fill(out, out + pixels, 0.0f);
        continue;
      }
      std::uint8_t const* in = f.data->images.data() + *e * pixels;
      for (std::size_t p = 0; p < pixels; ++p) out[p] = pixel_[in[p]];
    }
  }
  static void fill_labels(std::span<std::int32_t> batch, Feed& f) {
    for (auto& label : batch) {
      auto const e = f.example(f.labels++);
      label = e ? static_cast<std::int32_t>(f.data->labels[*e]) : -1;  // -1: padding, counted as wrong, left out
    }
  }

  Config c_;
  Network net_;
  tb::Graph g_;
  std::vector<tb::Tensor> weights_, biases_;  // per layer (empty for pooling)
  std::vector<tb::Tensor> acc_w_, acc_b_;     // their gradients' sums, with accumulation
  std::vector<tb::Graph> shards_;             // per stage IPU: the whole graph on one IPU
  std::size_t split_ = 0;                     // the first layer on IPU 1 (all layers on one IPU: their count)
  bool accumulate_ = false;
  std::unique_ptr<tb::Engine> engine_;
  double build_seconds_ = 0, compile_seconds_ = 0;
  bool from_cache_ = false;
  std::vector<std::uint32_t> order_;
  std::vector<Feed> train_feeds_, eval_feeds_;  // per local replica
  std::size_t batches_per_epoch_ = 1;
  std::array<float, 256> pixel_{};  // a byte's standardised value
  double step_loss_ = 0, step_correct_ = 0;
  std::vector<float> eval_loss_, eval_correct_;
};

}  // namespace mnist
