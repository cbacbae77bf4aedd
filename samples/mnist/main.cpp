// samples/mnist: training on tiles as the seed workshop does it on an IPU — infeeds of shuffled image and label
// batches, repeat(batches_per_step) of forward + loss + backward + SGD on the device, outfeeds of loss and number
// correct — for logistic regression, an MLP and a CNN on Fashion-MNIST (or any MNIST-format directory), with a
// test-set evaluation by an inference program sharing the weights after every epoch.
#include "../common/cli.hpp"
#include "../common/compile_progress.hpp"
#include "mnist.hpp"

#ifdef MNIST_WITH_MPI
#include <tilebsp/mpi.hpp>
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>

namespace tb = tilebsp;

namespace {

struct Options {
  mnist::Config model;
  std::size_t host_threads = 0;
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string save, load, report, executable_cache;
  bool evaluate_only = false, compile_only = false;
  std::size_t replicas = 0;  ///< 0: one, or one per MPI rank under mpirun
  std::size_t train_examples = 0;  ///< 0: the whole training set
};

constexpr char const* usage = R"(usage: mnist [options]
Trains a classifier on MNIST-format data on a modelled IPU: infeed -> repeat(batches-per-step, forward, loss,
backward, SGD) -> outfeed, then evaluates the test set with an inference program sharing the weights.
  --model logreg|mlp|cnn  logistic regression (784->10), MLP (784->256->10, ReLU) or CNN (conv 3x3 32, pool,
                          conv 3x3 64, pool, FC 128, FC 10) (default mlp)
  --epochs N              passes over the training set (default 5)
  --train-examples N      train on the first N images of the training set (default: all of them)
  --batch-size N          examples per SGD step (default 32)
  --lr X                  learning rate of plain SGD on the mean loss (default 0.05)
  --lr-schedule S         cosine (anneal to 0 over the epochs, per batch) or constant (default cosine)
  --batches-per-step N    SGD steps per device run, the on-device repeat count (default 75)
  --gradient-accumulation N  batches whose gradients are summed before each SGD step (effective batch
                          N x batch size; default 1)
  --num-ipus N            1, or 2: a pipeline of the first layers on IPU 0 and the rest (with the loss) on
                          IPU 1 over the N micro-batches of each step (needs --gradient-accumulation >= 3)
  --replicas N            data-parallel replicas, each on its own batches, gradients all-reduced before each
                          update (effective batch: batch x accumulation x N); in this process, or under
                          mpirun -np P spread over the P ranks (default: 1, under mpirun: P)
  --host-threads N        host threads running the program (default: all)
  --seed N                seed of the initial weights and of the shuffles (default 1)
  --data DIR              directory of train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte
                          and t10k-labels-idx1-ubyte, each raw or .gz (default /usr/share/datasets/fashion-mnist)
  --save FILE             write the trained weights to FILE
  --load FILE             start from the weights in FILE (written by --save for the same --model)
  --report DIR            write the profile of the run (report.html, profile.json, summary.txt) to DIR
  --executable-cache DIR  keep compiled executables in DIR and load them from there when the same graph is
                          compiled again (default: $TILEBSP_EXECUTABLE_CACHE, if set)
  --evaluate              only evaluate the test set (with --load: the loaded weights) and exit
  --compile-only          build and compile the graph, print the startup figures, and exit
  --help                  this text
The last line printed is "test_accuracy: <value>".
)";

Options parse(int argc, char** argv) {
  samples::Cli const cli{"mnist"};
  Options o;
  cli.parse(argc, argv, usage, {"--evaluate", "--compile-only"}, [&](std::string const& a, std::string const& v) {
    if (a == "--evaluate") o.evaluate_only = true;
    else if (a == "--compile-only") o.compile_only = true;
    else if (a == "--model") {
      auto const m = mnist::model_named(v);
      if (!m) cli.bad("--model must be logreg, mlp or cnn, got '" + v + "'");
      o.model.model = *m;
    } else if (a == "--lr-schedule") {
      if (v != "cosine" && v != "constant") cli.bad("--lr-schedule must be cosine or constant, got '" + v + "'");
      o.model.schedule = v == "cosine" ? mnist::Schedule::cosine : mnist::Schedule::constant;
    } else if (a == "--epochs") o.model.epochs = static_cast<std::size_t>(cli.integer(a, v, 1));
    else if (a == "--train-examples") o.train_examples = static_cast<std::size_t>(cli.integer(a, v, 1));
    else if (a == "--batch-size") o.model.batch = static_cast<std::size_t>(cli.integer(a, v, 1));
    else if (a == "--lr")
      o.model.learning_rate = static_cast<float>(
          cli.number(a, v, std::numeric_limits<float>::min(), std::numeric_limits<float>::max(), "a positive number"));
    else if (a == "--batches-per-step") o.model.batches_per_step = static_cast<std::size_t>(cli.integer(a, v, 1));
    else if (a == "--gradient-accumulation") o.model.gradient_accumulation = static_cast<std::size_t>(cli.integer(a, v, 1));
    else if (a == "--num-ipus") o.model.num_ipus = static_cast<std::size_t>(cli.integer(a, v, 1));
    else if (a == "--replicas") o.replicas = static_cast<std::size_t>(cli.integer(a, v, 1));
    else if (a == "--host-threads") o.host_threads = static_cast<std::size_t>(cli.integer(a, v, 1));
    else if (a == "--seed") o.model.seed = static_cast<std::uint64_t>(cli.integer(a, v, 0));
    else if (a == "--data") o.data = v;
    else if (a == "--save") o.save = v;
    else if (a == "--load") o.load = v;
    else if (a == "--report") o.report = v;
    else if (a == "--executable-cache") o.executable_cache = v;
    else cli.bad("unknown option '" + a + "'");
  });
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Progress within an epoch: a bar redrawn in place on a terminal, a line per quarter otherwise.
class Progress {
 public:
  Progress(std::size_t epoch, std::size_t epochs) : epoch_(epoch), epochs_(epochs), tty_(isatty(fileno(stdout)) != 0) {}
  void operator()(std::size_t done, std::size_t total, double loss, double correct, std::size_t batch) {
    double const examples = static_cast<double>(done * batch);
    if (tty_) {
      constexpr std::size_t width = 30;
      std::size_t const filled = done * width / total;
      std::printf("\repoch %zu/%zu [%s%s] %zu/%zu  loss %.4f  acc %.4f", epoch_, epochs_, std::string(filled, '#').c_str(),
                  std::string(width - filled, '.').c_str(), done, total, loss / examples, correct / examples);
      if (done == total) std::printf("\r%*s\r", 100, "");
      std::fflush(stdout);
      return;
    }
    std::size_t const quarter = done * 4 / total;
    if (quarter > shown_ && done < total) {
      shown_ = quarter;
      std::printf("epoch %zu/%zu: %3zu%% (%zu/%zu batches)  loss %.4f  acc %.4f\n", epoch_, epochs_, done * 100 / total, done,
                  total, loss / examples, correct / examples);
      std::fflush(stdout);
    }
  }

 private:
  std::size_t epoch_, epochs_, shown_ = 0;
  bool tty_;
};

int run(Options const& o, std::shared_ptr<tb::Communicator> const& comm) {
  auto t0 = std::chrono::steady_clock::now();
  mnist::Data data = mnist::load_data(o.data);
  if (o.train_examples > data.train.count)
    throw tb::option_error("--train-examples " + std::to_string(o.train_examples) + " is more than the " +
                           std::to_string(data.train.count) + " training images in " + o.data);
  if (o.train_examples > 0) {  // the first N: images and labels are in the same order
    data.train.count = o.train_examples;
    data.train.images.resize(o.train_examples * data.train.rows * data.train.cols);
    data.train.labels.resize(o.train_examples);
  }
  mnist::Config c = o.model;
  c.replicas = o.replicas ? o.replicas : comm ? comm->size() : 1;
  bool const lead = !comm || comm->rank() == 0;  // writes the files (the replicas' weights agree)
  c.rows = data.train.rows, c.cols = data.train.cols;
  // Refused before anything is built: a training batch is drawn from the training set.
  if (!o.evaluate_only && c.batch > data.train.count)
    throw tb::option_error("--batch-size " + std::to_string(c.batch) + " is more than the " +
                           std::to_string(data.train.count) + " training images in " + o.data);
  std::printf("data: %s: %zu training and %zu test images of %zux%zu, read in %.2f s\n", o.data.c_str(), data.train.count,
              data.test.count, c.rows, c.cols, seconds_since(t0));

  mnist::Network initial;
  if (o.load.empty()) {
    initial = mnist::initial_network(c);
    initial.standardise = mnist::pixel_statistics(data.train);
  } else {
    initial = mnist::load_weights(c, o.load);  // with the standardisation it was trained with
  }
  mnist::Trainer trainer(c, initial, {.host_threads = o.host_threads, .profiling = !o.report.empty(), .communicator = comm},
                         tb::targets::ipu_mk2(c.num_ipus),
                         {.cache_dir = o.executable_cache, .progress = samples::compile_progress("mnist")});
  samples::end_compile_progress();
  double const peak_gb = samples::peak_resident_bytes() / 1e9;  // of reading the data, building and compiling
  std::printf("model %s: %zu parameters, batch %zu x %zu accumulated x %zu replica(s)%s, lr %g (%s), %zu SGD steps per "
              "run, %zu IPU(s) per replica, %zu host threads, %s kernels, caches %s%s\n",
              mnist::name_of(c.model), initial.parameter_count(), c.batch, c.gradient_accumulation, c.replicas,
              comm ? (" over " + std::to_string(comm->size()) + " MPI ranks").c_str() : "",
              static_cast<double>(c.learning_rate), c.schedule == mnist::Schedule::cosine ? "cosine" : "constant",
              c.batches_per_step, c.num_ipus, trainer.engine().host_threads(),
              std::string(tilebsp::ops::kernels_isa()).c_str(), tilebsp::to_string(tilebsp::cache_sizes()).c_str(),
              o.load.empty() ? "" : (", weights from " + o.load).c_str());
  std::printf("graph built in %.2f s, %s in %.2f s; peak resident memory %.2f GB\n", trainer.build_seconds(),
              trainer.loaded_from_cache() ? "executable loaded from cache" : "compiled", trainer.compile_seconds(),
              peak_gb);
  if (o.compile_only) {
    std::printf("startup: build_s %.3f compile_s %.3f peak_gb %.3f executable %s\n", trainer.build_seconds(),
                trainer.compile_seconds(), peak_gb, trainer.loaded_from_cache() ? "loaded" : "compiled");
    return 0;
  }

  mnist::Result test;
  if (o.evaluate_only) {
    test = trainer.evaluate(data.test);
    std::printf("test: loss %.4f  accuracy %.4f\n", test.loss, test.accuracy);
  } else {
    for (std::size_t e = 0; e < c.epochs; ++e) {
      Progress progress(e + 1, c.epochs);
      t0 = std::chrono::steady_clock::now();
      mnist::Result const train = trainer.train_epoch(data.train, e, [&](std::size_t done, std::size_t total, double loss, double correct) {
        progress(done, total, loss, correct, c.batch * c.gradient_accumulation * trainer.engine().local_replicas());
      });
      double const s = seconds_since(t0);
      test = trainer.evaluate(data.test);
      std::printf("epoch %zu/%zu: loss %.4f  train acc %.4f  test loss %.4f  test acc %.4f  %.2f s  %.0f samples/s\n", e + 1,
                  c.epochs, train.loss, train.accuracy, test.loss, test.accuracy, s, static_cast<double>(train.examples) / s);
      std::fflush(stdout);
    }
  }
  if (!o.save.empty() && lead) {
    mnist::save_weights(trainer.network(), o.save);
    std::printf("weights written to %s\n", o.save.c_str());
  }
  if (!o.report.empty() && lead) {
    tb::Profile const profile = trainer.engine().profile();
    auto const began = std::chrono::steady_clock::now();
    tb::report::write_report(profile, o.report);
    std::printf("report written to %s (report.html, profile.json, summary.txt) in %.2f s\n", o.report.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  }
  std::printf("test_accuracy: %.4f\n", test.accuracy);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options const o = parse(argc, argv);
#ifdef MNIST_WITH_MPI
  // Under mpirun: one process per rank, the replicas spread over them (one each by default); rank 0 prints.
  std::optional<tb::mpi::Session> mpi;  // outlives the communicator
  std::shared_ptr<tb::Communicator> comm;
  if (tb::mpi::launched()) {
    mpi.emplace(&argc, &argv);
    comm = std::make_shared<tb::mpi::Communicator>();
    if (comm->rank() != 0 && !std::freopen("/dev/null", "w", stdout)) return 1;
  }
#else
  std::shared_ptr<tb::Communicator> comm;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE"))
    std::cerr << "mnist: started by an MPI launcher, but built without MPI: each process trains alone\n";
#endif
  try {
    return run(o, comm);
  } catch (tb::option_error const& e) {  // a setting the data or the model cannot take: a bad command line
    std::cerr << "mnist: " << e.what() << "\n(see mnist --help)\n";
    return 2;
  } catch (mnist::idx_error const& e) {
    std::cerr << "mnist: " << e.what() << "\n";
    return 1;
  } catch (tb::error const& e) {
    std::cerr << "mnist: " << e.what() << "\n";
    return 1;
  }
}
