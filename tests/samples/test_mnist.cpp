// The MNIST sample: its IDX reader on files the tests write (raw and gzip, and each kind of malformed file), its
// models' layout and initialisation, one SGD step of the dense models against a double-precision reference,
// training to high accuracy on a small synthetic task, determinism across host threads, and weights files.
#include "../../samples/mnist/mnist.hpp"

#include <doctest/doctest.h>

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace tb = tilebsp;

namespace {

std::vector<std::uint8_t> idx_bytes(std::vector<std::uint32_t> const& dims, std::vector<std::uint8_t> const& data,
                                    std::uint8_t type = 0x08) {
  std::vector<std::uint8_t> b{0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (auto d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(d >> s));
  b.insert(b.end(), data.begin(), data.end());
  return b;
}
void write_raw(std::string const& path, std::vector<std::uint8_t> const& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<char const*>(b.data()), static_cast<std::streamsize>(b.size()));
}
void write_gz(std::string const& path, std::vector<std::uint8_t> const& b) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, b.data(), static_cast<unsigned>(b.size())) == static_cast<int>(b.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

/// A fresh directory for one test's files.
std::string scratch(std::string const& name) {
  auto const dir = std::filesystem::temp_directory_path() / ("tilebsp_test_mnist_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

/// A small task with the sample's shapes: 28x28 images of four classes, each a bright 10x10 square in its own
/// quadrant, over noise.
mnist::Dataset synthetic(std::size_t count, std::uint64_t seed) {
  mnist::Dataset d;
  d.count = count, d.rows = 28, d.cols = 28;
  samples::Rng rng(seed);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint8_t const label = static_cast<std::uint8_t>(rng.below(4));
    d.labels.push_back(label);
    std::size_t const r0 = (label / 2) * 14 + 2, c0 = (label % 2) * 14 + 2;
    for (std::size_t r = 0; r < 28; ++r)
      for (std::size_t c = 0; c < 28; ++c) {
        bool const in = r >= r0 && r < r0 + 10 && c >= c0 && c < c0 + 10;
        d.images.push_back(static_cast<std::uint8_t>((in ? 150 : 0) + rng.below(100)));
      }
  }
  return d;
}

void write_dataset(std::string const& dir, std::string const& prefix, mnist::Dataset const& d, bool gz) {
  auto const images = idx_bytes({static_cast<std::uint32_t>(d.count), 28, 28}, d.images);
  auto const labels = idx_bytes({static_cast<std::uint32_t>(d.count)}, d.labels);
  if (gz) {
    write_gz(dir + "/" + prefix + "-images-idx3-ubyte.gz", images);
    write_gz(dir + "/" + prefix + "-labels-idx1-ubyte.gz", labels);
  } else {
    write_raw(dir + "/" + prefix + "-images-idx3-ubyte", images);
    write_raw(dir + "/" + prefix + "-labels-idx1-ubyte", labels);
  }
}

mnist::Config small_config(mnist::Model m) {
  mnist::Config c;
  c.model = m;
  c.batch = 16;
  c.eval_batch = 24;
  c.batches_per_step = 5;
  c.learning_rate = 0.05f;
  return c;
}

std::vector<float> all_parameters(mnist::Network const& n) {
  std::vector<float> v;
  for (auto const& l : n.layers) {
    v.insert(v.end(), l.weights.begin(), l.weights.end());
    v.insert(v.end(), l.bias.begin(), l.bias.end());
  }
  return v;
}

/// One SGD step of a dense network (logreg or MLP) in double from standardised pixels: forward, mean softmax
/// cross-entropy, backward, update; returns the updated network and the batch's summed loss.
std::pair<mnist::Network, double> reference_step(mnist::Network n, mnist::Dataset const& d,
                                                 std::vector<std::uint32_t> const& examples, double lr) {
  std::size_t const B = examples.size();
  std::vector<std::vector<double>> acts(n.layers.size() + 1);
  for (auto e : examples)
    for (std::size_t p = 0; p < 784; ++p)
      acts[0].push_back((static_cast<float>(d.images[e * 784 + p]) / 255.0f - n.standardise[0]) / n.standardise[1]);
  for (std::size_t i = 0; i < n.layers.size(); ++i) {
    auto const& l = n.layers[i];
    std::size_t const in = l.in[0], out = l.out[0];
    acts[i + 1].assign(B * out, 0.0);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t o = 0; o < out; ++o) {
        double s = l.bias[o];
        for (std::size_t k = 0; k < in; ++k) s += acts[i][b * in + k] * l.weights[k * out + o];
        acts[i + 1][b * out + o] = l.relu ? std::max(s, 0.0) : s;
      }
  }
  std::size_t const K = n.layers.back().out[0];
  std::vector<double> grad(B * K);
  double loss = 0;
  for (std::size_t b = 0; b < B; ++b) {
    double const* x = acts.back().data() + b * K;
    double const m = *std::max_element(x, x + K);
    double s = 0;
    for (std::size_t k = 0; k < K; ++k) s += std::exp(x[k] - m);
    std::size_t const label = d.labels[examples[b]];
    loss += m + std::log(s) - x[label];
    for (std::size_t k = 0; k < K; ++k) grad[b * K + k] = (std::exp(x[k] - m) / s - (k == label)) / static_cast<double>(B);
  }
  for (std::size_t i = n.layers.size(); i-- > 0;) {
    auto& l = n.layers[i];
    std::size_t const in = l.in[0], out = l.out[0];
    if (l.relu)
      for (std::size_t j = 0; j < grad.size(); ++j)
        if (acts[i + 1][j] <= 0) grad[j] = 0;
    std::vector<double> next(B * in, 0.0);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t k = 0; k < in; ++k)
        for (std::size_t o = 0; o < out; ++o) next[b * in + k] += grad[b * out + o] * l.weights[k * out + o];
    for (std::size_t k = 0; k < in; ++k)
      for (std::size_t o = 0; o < out; ++o) {
        double s = 0;
        for (std::size_t b = 0; b < B; ++b) s += acts[i][b * in + k] * grad[b * out + o];
        l.weights[k * out + o] = static_cast<float>(l.weights[k * out + o] - lr * s);
      }
    for (std::size_t o = 0; o < out; ++o) {
      double s = 0;
      for (std::size_t b = 0; b < B; ++b) s += grad[b * out + o];
      l.bias[o] = static_cast<float>(l.bias[o] - lr * s);
    }
    grad = std::move(next);
  }
  return {std::move(n), loss};
}

}  // namespace

TEST_CASE("mnist: IDX files, raw and gzip, read back what was written") {
  std::string const dir = scratch("idx");
  std::vector<std::uint8_t> data(2 * 3 * 4);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 7);
  auto const bytes = idx_bytes({2, 3, 4}, data);
  for (bool gz : {false, true}) {
    std::string const path = dir + (gz ? "/a.gz" : "/a");
    gz ? write_gz(path, bytes) : write_raw(path, bytes);
    mnist::IdxArray const a = mnist::read_idx(path);
    CHECK(a.dims == std::vector<std::size_t>{2, 3, 4});
    CHECK(a.data == data);
  }
  // A directory: .gz preferred, raw accepted.
  mnist::Dataset const train = synthetic(20, 1), test = synthetic(7, 2);
  write_dataset(dir, "train", train, true);
  write_dataset(dir, "t10k", test, false);
  mnist::Data const d = mnist::load_data(dir);
  CHECK(d.train.count == 20);
  CHECK(d.train.images == train.images);
  CHECK(d.train.labels == train.labels);
  CHECK(d.test.count == 7);
  CHECK(d.test.images == test.images);
  CHECK(mnist::find_file(dir, "train-labels-idx1-ubyte") == dir + "/train-labels-idx1-ubyte.gz");
  CHECK(mnist::find_file(dir, "t10k-labels-idx1-ubyte") == dir + "/t10k-labels-idx1-ubyte");
}

TEST_CASE("mnist: malformed IDX files each give their own error") {
  std::string const dir = scratch("bad");
  std::string const p = dir + "/f";
  auto const good = idx_bytes({3, 2, 2}, std::vector<std::uint8_t>(12, 1));
  SUBCASE("a missing file") {
    CHECK_THROWS_WITH_AS(mnist::read_idx(dir + "/none"), ("idx: cannot open '" + dir + "/none'").c_str(), mnist::idx_error);
  }
  SUBCASE("bad magic") {
    write_raw(p, {0x12, 0x34, 0x08, 0x03, 0, 0, 0, 0});
    CHECK_THROWS_WITH_AS(mnist::read_idx(p),
                         ("idx: '" + p + "' is not an IDX file: magic number 0x12340803 (expected 0x0000 then the element "
                          "type and a dimension count of at least 1)").c_str(),
                         mnist::idx_error);
  }
  SUBCASE("another element type") {
    write_raw(p, idx_bytes({1}, {0, 0, 0, 0}, 0x0d));
    CHECK_THROWS_WITH_AS(mnist::read_idx(p),
                         ("idx: '" + p + "' holds elements of type 0x0d; only unsigned bytes (0x08) are supported").c_str(),
                         mnist::idx_error);
  }
  SUBCASE("truncated before the magic number ends") {
    write_raw(p, {0, 0});
    CHECK_THROWS_WITH_AS(mnist::read_idx(p),
                         ("idx: '" + p + "' is truncated: 2 bytes, not even the 4-byte magic number").c_str(), mnist::idx_error);
  }
  SUBCASE("truncated header") {
    write_raw(p, std::vector<std::uint8_t>(good.begin(), good.begin() + 10));
    CHECK_THROWS_WITH_AS(mnist::read_idx(p),
                         ("idx: '" + p + "' is truncated: its header names 3 dimensions (16 bytes) but the file has 10 bytes").c_str(),
                         mnist::idx_error);
  }
  SUBCASE("truncated data, raw and gzip") {
    std::vector<std::uint8_t> const cut(good.begin(), good.end() - 5);
    for (bool gz : {false, true}) {
      gz ? write_gz(p, cut) : write_raw(p, cut);
      CHECK_THROWS_WITH_AS(mnist::read_idx(p),
                           ("idx: '" + p + "' is truncated: dimensions 3x2x2 need 12 bytes of data but the file has 7").c_str(),
                           mnist::idx_error);
    }
  }
  SUBCASE("a gzip stream cut short") {
    write_gz(p, idx_bytes({3000}, std::vector<std::uint8_t>(3000, 9)));
    std::ifstream in(p, std::ios::binary);
    std::vector<char> z((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    z.resize(z.size() / 2);
    std::ofstream(p, std::ios::binary | std::ios::trunc).write(z.data(), static_cast<std::streamsize>(z.size()));
    CHECK_THROWS_AS(mnist::read_idx(p), mnist::idx_error);
    try {
      mnist::read_idx(p);
    } catch (mnist::idx_error const& e) {
      CHECK(std::string(e.what()).rfind("idx: '" + p + "' is not valid gzip data (", 0) == 0);
    }
  }
  SUBCASE("dimensions whose product wraps to the data's length") {
    // 4 x 2^31 x 2^31 = 2^64 elements, 0 once wrapped: an empty data section would have matched (a fuzzing find)
    write_raw(p, idx_bytes({4, 1u << 31, 1u << 31}, {}));
    CHECK_THROWS_WITH_AS(mnist::read_idx(p),
                         ("idx: '" + p + "' is corrupt: dimensions 4x2147483648x2147483648 hold more elements than a "
                          "size can count").c_str(),
                         mnist::idx_error);
  }
  SUBCASE("trailing bytes") {
    auto more = good;
    more.push_back(0);
    write_raw(p, more);
    CHECK_THROWS_WITH_AS(mnist::read_idx(p), ("idx: '" + p + "' has 1 bytes past the 12 that dimensions 3x2x2 hold").c_str(),
                         mnist::idx_error);
  }
  SUBCASE("label and image counts differ") {
    write_raw(dir + "/i", good);
    write_raw(dir + "/l", idx_bytes({4}, {0, 1, 2, 3}));
    CHECK_THROWS_WITH_AS(mnist::load_dataset(dir + "/i", dir + "/l"),
                         ("idx: '" + dir + "/i' holds 3 images but '" + dir + "/l' holds 4 labels").c_str(), mnist::idx_error);
  }
  SUBCASE("labels that are not labels") {
    write_raw(dir + "/i", good);
    write_raw(dir + "/l", idx_bytes({3}, {0, 10, 2}));
    CHECK_THROWS_WITH_AS(mnist::load_dataset(dir + "/i", dir + "/l"),
                         ("idx: '" + dir + "/l': label 10 of item 1 is not a class in [0, 10)").c_str(), mnist::idx_error);
    write_raw(dir + "/l", idx_bytes({3, 1}, {0, 1, 2}));
    CHECK_THROWS_WITH_AS(mnist::load_dataset(dir + "/i", dir + "/l"),
                         ("idx: '" + dir + "/l' should hold labels (1 dimension) but has 2 (3x1)").c_str(), mnist::idx_error);
    CHECK_THROWS_WITH_AS(mnist::load_dataset(dir + "/l", dir + "/l"),
                         ("idx: '" + dir + "/l' should hold images (3 dimensions: count x rows x cols) but has 2 (3x1)").c_str(),
                         mnist::idx_error);
  }
}

TEST_CASE("mnist: model layouts and initialisation") {
  mnist::Config c;
  c.model = mnist::Model::cnn;
  mnist::Network const cnn = mnist::initial_network(c);
  REQUIRE(cnn.layers.size() == 6);
  CHECK(cnn.layers[0].weights_shape() == tb::Shape{1, 3, 3, 1, 32});
  CHECK(cnn.layers[2].weights_shape() == tb::Shape{1, 3, 3, 32, 64});
  CHECK(cnn.layers[4].weights_shape() == tb::Shape{3136, 128});
  CHECK(cnn.layers[5].weights_shape() == tb::Shape{128, 10});
  CHECK(cnn.parameter_count() == 320 + 18496 + 401536 + 1290);
  c.model = mnist::Model::mlp;
  mnist::Network const mlp = mnist::initial_network(c);
  CHECK(mlp.parameter_count() == 784 * 256 + 256 + 2570);
  // He-normal for the ReLU layer, Xavier-uniform for the output layer, zero biases; the same for the same seed.
  double sq = 0;
  for (float w : mlp.layers[0].weights) sq += static_cast<double>(w) * w;
  CHECK(std::sqrt(sq / static_cast<double>(mlp.layers[0].weights.size())) == doctest::Approx(std::sqrt(2.0 / 784)).epsilon(0.02));
  float const limit = static_cast<float>(std::sqrt(6.0 / (256 + 10)));
  CHECK(std::all_of(mlp.layers[1].weights.begin(), mlp.layers[1].weights.end(), [&](float w) { return std::abs(w) <= limit; }));
  CHECK(std::all_of(mlp.layers[0].bias.begin(), mlp.layers[0].bias.end(), [](float b) { return b == 0.0f; }));
  CHECK(all_parameters(mnist::initial_network(c)) == all_parameters(mlp));
  c.seed = 2;
  CHECK(all_parameters(mnist::initial_network(c)) != all_parameters(mlp));
  // Shuffles: a permutation, different per epoch, the same for the same (seed, epoch).
  auto const o0 = mnist::epoch_order(1000, 1, 0), o1 = mnist::epoch_order(1000, 1, 1);
  CHECK(std::set<std::uint32_t>(o0.begin(), o0.end()).size() == 1000);
  CHECK(o0 != o1);
  CHECK(o0 == mnist::epoch_order(1000, 1, 0));
}

TEST_CASE("mnist: one SGD step of the dense models matches a double-precision reference") {
  mnist::Dataset const d = synthetic(64, 3);
  for (auto m : {mnist::Model::logreg, mnist::Model::mlp}) {
    CAPTURE(mnist::name_of(m));
    mnist::Config c = small_config(m);
    c.batches_per_step = 1;
    mnist::Network n0 = mnist::initial_network(c);
    n0.standardise = mnist::pixel_statistics(d);
    CHECK(n0.standardise[0] == doctest::Approx(0.3).epsilon(0.1));  // a quarter of each image is bright
    mnist::Trainer t(c, n0, {.host_threads = 2});
    // One batch: an epoch over the first 16 examples of the shuffled order is one step.
    mnist::Dataset one = d;
    one.count = 16;
    auto const order = mnist::epoch_order(16, c.seed, 0);
    mnist::Result const r = t.train_epoch(one, 0);
    auto const [want, loss] = reference_step(n0, d, order, c.learning_rate);
    CHECK(r.loss == doctest::Approx(loss / 16).epsilon(1e-4));
    auto const got = all_parameters(t.network()), ref = all_parameters(want);
    REQUIRE(got.size() == ref.size());
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(got[i]) - ref[i]));
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("mnist: each model learns a small task; results do not depend on host threads; weights round-trip") {
#if defined(__SANITIZE_THREAD__)
  // Under ThreadSanitizer (about 20x slower) one epoch: the runs still cross thread counts and batches per device
  // run and must still agree bitwise, and the loss must fall; the accuracy threshold is the Release run's to check.
  constexpr std::size_t epochs = 1;
  constexpr bool learns = false;
#else
  constexpr std::size_t epochs = 3;
  constexpr bool learns = true;
#endif
  mnist::Dataset const train = synthetic(256, 4), test = synthetic(100, 5);  // 100: the last eval batch is padded
  // 64 tiles: the same programs as on a whole IPU (the sample tests run those), with graphs quick to build.
  tb::Target const target = tb::targets::tiny(64, 1 << 21);
  std::string const dir = scratch("weights");
  for (auto m : {mnist::Model::logreg, mnist::Model::mlp, mnist::Model::cnn}) {
    CAPTURE(mnist::name_of(m));
    // 16 batches an epoch: 3 device runs of 5 and a remainder of 1, or 16 runs of 1.
    mnist::Config c = small_config(m);
    c.epochs = epochs;
    std::vector<float> first;
    double accuracy = 0;
    for (auto [threads, per_step] : {std::pair<std::size_t, std::size_t>{1, 5}, {3, 1}}) {
      CAPTURE(threads);
      CAPTURE(per_step);
      c.batches_per_step = per_step;
      mnist::Network n = mnist::initial_network(c);
      n.standardise = mnist::pixel_statistics(train);
      mnist::Trainer t(c, n, {.host_threads = threads}, target);
      double const before = t.evaluate(test).loss;
      std::size_t calls = 0;
      mnist::Result r;
      for (std::size_t e = 0; e < epochs; ++e)
        r = t.train_epoch(train, e, [&](std::size_t done, std::size_t total, double, double) {
          ++calls;
          CHECK(total == 16);
          CHECK(done <= total);
        });
      CHECK(calls == epochs * (per_step == 5 ? 4 : 16));
      CHECK(r.examples == 256);
      mnist::Result const after = t.evaluate(test);
      CHECK(after.examples == 100);
      CHECK(after.loss < before);
      if (learns) CHECK(after.accuracy >= 0.95);
      auto const params = all_parameters(t.network());
      if (first.empty()) {
        first = params, accuracy = after.accuracy;
        mnist::save_weights(t.network(), dir + "/" + mnist::name_of(m));
      } else {
        CHECK(params == first);  // bitwise, whatever the number of threads or batches per device run
        CHECK(after.accuracy == accuracy);
      }
    }
    // Save -> load -> evaluate: the same weights and the same test accuracy.
    mnist::Network const loaded = mnist::load_weights(c, dir + "/" + mnist::name_of(m));
    CHECK(all_parameters(loaded) == first);
    mnist::Trainer t(c, loaded, {.host_threads = 2}, target);
    CHECK(t.evaluate(test).accuracy == accuracy);
  }
  // A weights file of another model.
  mnist::Config c = small_config(mnist::Model::mlp);
  CHECK_THROWS_WITH_AS(mnist::load_weights(c, dir + "/logreg"),
                       ("load_weights: '" + dir + "/logreg': holds 3 tensors but this network has 5 (check --model)").c_str(),
                       tb::error);
}

TEST_CASE("mnist: the cosine schedule anneals the learning rate per batch") {
  // With a constant rate the same epoch trains the same whatever came before; with cosine annealing over one
  // epoch, the last batches barely move the weights, so a second epoch changes them less than the first.
  mnist::Dataset const train = synthetic(64, 8);
  auto change = [&](mnist::Schedule s) {
    mnist::Config c = small_config(mnist::Model::logreg);
    c.schedule = s;
    c.epochs = 1;
    mnist::Trainer t(c, mnist::initial_network(c), {.host_threads = 2});
    auto const p0 = all_parameters(t.network());
    t.train_epoch(train, 0);
    auto const p1 = all_parameters(t.network());
    t.train_epoch(train, 1);  // past the schedule's end: factor 0
    auto const p2 = all_parameters(t.network());
    double first = 0, second = 0;
    for (std::size_t i = 0; i < p0.size(); ++i) first += std::abs(p1[i] - p0[i]), second += std::abs(p2[i] - p1[i]);
    return std::pair{first, second};
  };
  auto const [constant1, constant2] = change(mnist::Schedule::constant);
  auto const [cosine1, cosine2] = change(mnist::Schedule::cosine);
  CHECK(cosine1 < constant1);
  CHECK(cosine1 > 0.3 * constant1);  // the mean factor over an epoch is 1/2
  CHECK(constant2 > 0);
  CHECK(cosine2 == 0);
}

TEST_CASE("mnist: bad configurations and data") {
  mnist::Config c = small_config(mnist::Model::logreg);
  c.learning_rate = 0;
  CHECK_THROWS_WITH_AS(mnist::Trainer(c, mnist::initial_network(c)), "mnist: the learning rate must be a positive number",
                       tb::option_error);
  c = small_config(mnist::Model::logreg);
  mnist::Network n = mnist::initial_network(c);
  n.standardise = {0.5f, 0.0f};
  CHECK_THROWS_WITH_AS(mnist::Trainer(c, n), "mnist: the pixel standard deviation must be positive", tb::option_error);
  c = small_config(mnist::Model::logreg);
  mnist::Trainer t(c, mnist::initial_network(c), {.host_threads = 1});
  mnist::Dataset small = synthetic(10, 6);
  CHECK_THROWS_WITH_AS(t.train_epoch(small, 0), "mnist: 10 training examples do not fill one batch of 16", tb::option_error);
  small.rows = 27;
  CHECK_THROWS_WITH_AS(t.evaluate(small), "mnist: the images are 27x28 but the model takes 28x28", tb::shape_error);
}

TEST_CASE("mnist: gradient accumulation and 2-IPU pipelines train as one IPU with the same effective batch") {
  // Effective batch 16: 1 IPU with batches of 16; 1 IPU accumulating 4 batches of 4; 2 IPUs pipelining 4 of 4.
  mnist::Dataset const train = synthetic(256, 4), test = synthetic(100, 5);
  for (auto m : {mnist::Model::mlp, mnist::Model::cnn}) {
    CAPTURE(mnist::name_of(m));
    mnist::Config c = small_config(m);
    c.epochs = 2;
    mnist::Network n = mnist::initial_network(c);
    n.standardise = mnist::pixel_statistics(train);
    auto const train_on = [&](std::size_t batch, std::size_t accumulate, std::size_t ipus, std::size_t threads,
                              mnist::Dataset const& data, std::size_t epochs) {
      mnist::Config k = c;
      k.batch = batch, k.gradient_accumulation = accumulate, k.num_ipus = ipus;
      k.batches_per_step = 2;  // 16 updates an epoch: 8 device runs
      mnist::Trainer t(k, n, {.host_threads = threads}, tb::targets::tiny(64, 1 << 21, ipus));
      mnist::Result r;
      for (std::size_t e = 0; e < epochs; ++e) r = t.train_epoch(data, e);
      CHECK(r.examples == data.count);
      return std::pair{all_parameters(t.network()), t.evaluate(test)};
    };
    auto const trained = [&](std::size_t batch, std::size_t accumulate, std::size_t ipus, std::size_t threads) {
      return train_on(batch, accumulate, ipus, threads, train, 2);
    };
    // One update: the same sums of the same gradients, added in another order.
    mnist::Dataset one_batch = train;
    one_batch.count = 16;
    auto const step1 = train_on(16, 1, 1, 2, one_batch, 1).first, step4 = train_on(4, 4, 2, 2, one_batch, 1).first;
    double worst1 = 0;
    for (std::size_t i = 0; i < step1.size(); ++i)
      worst1 = std::max(worst1, std::abs(static_cast<double>(step1[i]) - step4[i]));
    CHECK(worst1 < 1e-6);
    auto const [one, one_test] = trained(16, 1, 1, 2);
    auto const [acc, acc_test] = trained(4, 4, 1, 2);
    auto const [piped, piped_test] = trained(4, 4, 2, 2);
    CHECK(piped == acc);  // the pipeline computes what the single-IPU accumulation computes, bitwise
    REQUIRE(one.size() == acc.size());
    CHECK(one != acc);  // rounding differs, and training carries it on
    CHECK(std::abs(acc_test.accuracy - one_test.accuracy) <= 0.005);
    CHECK(piped_test.accuracy == acc_test.accuracy);
    // Bitwise the same for any number of host threads.
    CHECK(trained(4, 4, 2, 1).first == piped);
    CHECK(trained(4, 4, 2, 3).first == piped);
  }
}

TEST_CASE("mnist: data-parallel replicas train as one replica with the same effective batch") {
  // Effective batch 16: 1 replica accumulating 4 batches of 4; 2 replicas accumulating 2 each, sums all-reduced.
  mnist::Dataset const train = synthetic(256, 4), test = synthetic(100, 5);
  mnist::Config c = small_config(mnist::Model::mlp);
  c.epochs = 2;
  mnist::Network n = mnist::initial_network(c);
  n.standardise = mnist::pixel_statistics(train);
  auto const train_on = [&](std::size_t accumulate, std::size_t replicas, std::size_t threads,
                            mnist::Dataset const& data, std::size_t epochs) {
    mnist::Config k = c;
    k.batch = 4, k.gradient_accumulation = accumulate, k.replicas = replicas;
    k.batches_per_step = 2;
    mnist::Trainer t(k, n, {.host_threads = threads}, tb::targets::tiny(64, 1 << 21));
    CHECK(t.engine().replicas() == replicas);
    mnist::Result r;
    for (std::size_t e = 0; e < epochs; ++e) r = t.train_epoch(data, e);
    CHECK(r.examples == data.count);
    return std::pair{all_parameters(t.network()), t.evaluate(test)};
  };
  // One update: replica 0 takes batches 0 and 2, replica 1 batches 1 and 3: the same gradients, summed in another order.
  mnist::Dataset one_batch = train;
  one_batch.count = 16;
  auto const single = train_on(4, 1, 2, one_batch, 1).first, pair = train_on(2, 2, 2, one_batch, 1).first;
  double worst = 0;
  for (std::size_t i = 0; i < single.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(single[i]) - pair[i]));
  CHECK(worst < 1e-6);
  auto const [one, one_test] = train_on(4, 1, 2, train, 2);
  auto const [two, two_test] = train_on(2, 2, 2, train, 2);
  CHECK(std::abs(two_test.accuracy - one_test.accuracy) <= 0.005);
  // Bitwise the same for any number of host threads (the replicas dealt to them differently).
  CHECK(train_on(2, 2, 1, train, 2).first == two);
  CHECK(train_on(2, 2, 3, train, 2).first == two);
  mnist::Config bad = c;
  bad.replicas = 0;
  CHECK_THROWS_WITH_AS(mnist::Trainer(bad, n), "mnist: the number of replicas must be at least 1", tb::option_error);
}

TEST_CASE("mnist: accumulation and IPU count errors") {
  mnist::Config c = small_config(mnist::Model::mlp);
  c.gradient_accumulation = 0;
  CHECK_THROWS_WITH_AS(mnist::Trainer(c, mnist::initial_network(c)), "mnist: the gradient accumulation count must be at least 1",
                       tb::option_error);
  c.gradient_accumulation = 2;
  c.num_ipus = 2;
  CHECK_THROWS_WITH_AS(mnist::Trainer(c, mnist::initial_network(c), {}, tb::targets::tiny(8, 1 << 21, 2)),
                       "mnist: training on 2 IPUs is a pipeline of 3 stages; the gradient accumulation count must be at "
                       "least 3, got 2",
                       tb::option_error);
  c = small_config(mnist::Model::logreg);
  c.num_ipus = 2;
  c.gradient_accumulation = 3;
  CHECK_THROWS_WITH_AS(mnist::Trainer(c, mnist::initial_network(c), {}, tb::targets::tiny(8, 1 << 21, 2)),
                       "mnist: logreg has one layer; 2 IPUs need two at least", tb::option_error);
  c = small_config(mnist::Model::mlp);
  c.num_ipus = 2;
  c.gradient_accumulation = 3;
  CHECK_THROWS_WITH_AS(mnist::Trainer(c, mnist::initial_network(c)),
                       "mnist: the target has 1 IPU(s), fewer than --num-ipus", tb::option_error);
}
