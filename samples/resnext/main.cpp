// samples/resnext: ResNeXt inference as the seed program runs it on an IPU — an infeed of synthetic NHWC image
// batches, repeat(batches_per_step) of the network on the device, an outfeed of logits — with throughput and
// latency per iteration, their statistics, the estimated IPU figures and the memory per tile.
#include "../common/cli.hpp"
#include "../common/compile_progress.hpp"
#include "resnext.hpp"

#include <tilebsp/tilebsp.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tb = tilebsp;

namespace {

struct Options {
  resnext::Config model;
  std::int64_t batches_per_step = 4;
  int iterations = 5;
  std::size_t num_ipus = 1;
  std::size_t replicas = 1;
  bool auto_split = true;
  std::vector<int> split;
  std::size_t host_threads = 0;
  std::uint64_t seed = 42;
  std::string report, weights, save_weights, executable_cache;
  bool check_memory = false, compile_only = false;
};

constexpr char const* usage = R"(usage: resnext [options]
ResNeXt inference on a modelled IPU: infeed -> repeat(batches-per-step, network) -> outfeed.
  --batch-size N          images per batch (default 4)
  --batches-per-step N    batches per device run, the on-device repeat count (default 4)
  --iterations N          device runs to time; the first (warm-up) is left out of the statistics unless it is
                          the only one (default 5)
  --depth 50|101|152      network depth (default 101)
  --cardinality N         groups of the 3x3 convolutions (default 32)
  --width N               channels per group in the first stage (default 4)
  --image N               input height and width (default 224)
  --dtype f16|f32         data type of activations and weights (default f16)
  --partials f32|f16      type of partial sums (default f32)
  --conv-amp X            availableMemoryProportion of convolutions, in [0, 1] (default 0.3)
  --matmul-amp X          availableMemoryProportion of the fully connected layer, in [0, 1] (default 0.6)
  --replicas N            data-parallel replicas of the whole program (on N x num-ipus IPUs), each with its own
                          infeed of images; throughput counts every replica's (default 1)
  --num-ipus N            IPU Mk2 devices: N > 1 pipelines the network over N IPUs, one stage each, with
                          batches-per-step micro-batches per run (default 1)
  --pipeline-split S      where the stages begin: 'auto' (balanced by estimated cycles, the default) or
                          the block indices B1,B2,... (N - 1 of them) at which stages 1, 2, ... begin
  --host-threads N        host threads building, compiling and running the program (default: all)
  --seed N                seed of the random weights and images (default 42)
  --weights FILE          read the weights from FILE (format: samples/resnext/resnext.hpp, docs/05)
  --save-weights FILE     write the weights used to FILE
  --check-memory          fail (out_of_memory) when a tile's memory is over-subscribed, instead of
                          running and reporting it
  --report DIR            write report.html, profile.json and summary.txt to DIR
  --compile-only          build and compile the graph, print the startup figures, and exit
  --executable-cache DIR  keep compiled executables in DIR and load them from there when the same graph is
                          compiled again (default: $TILEBSP_EXECUTABLE_CACHE, if set)
  --help                  this text
)";

samples::Cli const cli{"resnext"};
[[noreturn]] void bad(std::string const& why) { cli.bad(why); }
std::int64_t integer(std::string const& flag, std::string const& v, std::int64_t least) { return cli.integer(flag, v, least); }
double proportion(std::string const& flag, std::string const& v) { return cli.number(flag, v, 0, 1, "a number in [0, 1]"); }

tb::ElementType float_type(std::string const& flag, std::string const& v) {
  if (v == "f32" || v == "float32") return tb::ElementType::f32;
  if (v == "f16" || v == "float16") return tb::ElementType::f16;
  bad(flag + " must be f16 or f32, got '" + v + "'");
}

Options parse(int argc, char** argv) {
  Options o;
  cli.parse(argc, argv, usage, {"--check-memory", "--compile-only"}, [&](std::string const& a, std::string const& v) {
    if (a == "--check-memory") o.check_memory = true;
    else if (a == "--compile-only") o.compile_only = true;
    else if (a == "--batch-size") o.model.batch = integer(a, v, 1);
    else if (a == "--batches-per-step") o.batches_per_step = integer(a, v, 1);
    else if (a == "--iterations") o.iterations = static_cast<int>(integer(a, v, 1));
    else if (a == "--depth") {
      o.model.depth = static_cast<int>(integer(a, v, 1));
      if (o.model.depth != 50 && o.model.depth != 101 && o.model.depth != 152) bad("--depth must be 50, 101 or 152, got " + v);
    } else if (a == "--cardinality") o.model.cardinality = integer(a, v, 1);
    else if (a == "--width") o.model.width = integer(a, v, 1);
    else if (a == "--image") o.model.image = integer(a, v, 32);
    else if (a == "--dtype") o.model.dtype = float_type(a, v);
    else if (a == "--partials") o.model.partials = float_type(a, v);
    else if (a == "--conv-amp") o.model.conv_amp = proportion(a, v);
    else if (a == "--matmul-amp") o.model.matmul_amp = proportion(a, v);
    else if (a == "--num-ipus") o.num_ipus = static_cast<std::size_t>(integer(a, v, 1));
    else if (a == "--replicas") o.replicas = static_cast<std::size_t>(integer(a, v, 1));
    else if (a == "--pipeline-split") {
      o.auto_split = v == "auto";
      o.split.clear();
      if (!o.auto_split)
        for (std::size_t at = 0; at <= v.size();) {
          std::size_t const comma = std::min(v.find(',', at), v.size());
          o.split.push_back(static_cast<int>(integer(a, v.substr(at, comma - at), 1)));
          at = comma + 1;
        }
    }
    else if (a == "--host-threads") o.host_threads = static_cast<std::size_t>(integer(a, v, 1));
    else if (a == "--seed") o.seed = static_cast<std::uint64_t>(integer(a, v, 0));
    else if (a == "--report") o.report = v;
    else if (a == "--executable-cache") o.executable_cache = v;
    else if (a == "--weights") o.weights = v;
    else if (a == "--save-weights") o.save_weights = v;
    else bad("unknown option '" + a + "'");
  });
  return o;
}

struct Stats {
  double min = 0, max = 0, mean = 0, std = 0;
};
Stats stats(std::vector<double> const& v) {
  Stats s{*std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()), 0, 0};
  for (double x : v) s.mean += x / static_cast<double>(v.size());
  for (double x : v) s.std += (x - s.mean) * (x - s.mean) / static_cast<double>(v.size());
  s.std = std::sqrt(s.std);
  return s;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class T>
int run(Options const& o) {
  auto const& c = o.model;
  auto t0 = std::chrono::steady_clock::now();
  // The parameters are drawn (or read) and folded on other host threads while this one builds the graph, which
  // does not depend on their values.
  unsigned const helpers = std::max(1u, std::thread::hardware_concurrency()) - 1;
  auto values = std::async(std::launch::async, [&o, &c, helpers] {
    resnext::Weights const weights =
        o.weights.empty() ? resnext::random_weights(c, o.seed, std::max(1u, helpers)) : resnext::load_weights(c, o.weights);
    if (!o.save_weights.empty()) resnext::save_weights(weights, c, o.save_weights);
    return resnext::fold_parameters(weights);
  });

  // The graph: one inference step, repeated on the device between an infeed and an outfeed; on several IPUs, a
  // pipeline of its stages over batches_per_step micro-batches.
  tb::Graph g{tb::targets::ipu_mk2(o.num_ipus)};
  g.set_build_threads(o.host_threads);
  std::vector<int> split = o.split;
  if (o.num_ipus > 1 && o.auto_split)
    split = resnext::balanced_split(c, resnext::block_cycles(c, o.host_threads), o.num_ipus, g.target());
  resnext::check_split(c, split, o.num_ipus);
  std::vector<tb::Sequence> parts;
  resnext::Model model = resnext::build(g, parts, c, split);
  model.set_values(values.get());
  auto images = g.add_host_to_device_fifo<T>("images", model.input.num_elements());
  auto logits = g.add_device_to_host_fifo<T>("logits", model.logits.num_elements());
  auto const bps = static_cast<std::size_t>(o.batches_per_step);
  tb::Program program;
  if (o.num_ipus == 1) {
    program = tb::repeat(bps, tb::seq(tb::stream_in(images, model.input), std::move(parts[0]),
                                      tb::stream_out(model.logits, logits)));
  } else {
    program = tb::pipeline({.micro_batches = bps}, resnext::pipeline_stages(g, model, std::move(parts), images, logits));
  }
  double const build_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  tb::Executable exe = tb::compile(g,
                                   {.allow_out_of_memory = !o.check_memory,
                                    .threads = o.host_threads,
                                    .cache_dir = o.executable_cache,
                                    .progress = samples::compile_progress("resnext"),
                                    .replicas = o.replicas},
                                   program);
  samples::end_compile_progress();
  double const compile_s = seconds_since(t0);
  double const peak_gb = samples::peak_resident_bytes() / 1e9;  // of building and compiling
  if (o.compile_only) {
    std::printf("ResNeXt-%d, batch %lld, %s, %zu x IPU Mk2\n", c.depth, static_cast<long long>(c.batch),
                tb::name_of(c.dtype).data(), o.num_ipus);
    std::printf("graph built in %.2f s, %s in %.2f s\npeak resident memory %.2f GB\n", build_s,
                exe.loaded_from_cache() ? "executable loaded from cache" : "compiled", compile_s, peak_gb);
    std::printf("startup: build_s %.3f compile_s %.3f peak_gb %.3f executable %s\n", build_s, compile_s, peak_gb,
                exe.loaded_from_cache() ? "loaded" : "compiled");
    return 0;
  }

  bool const exe_from_cache = exe.loaded_from_cache();
  tb::Engine engine{std::move(exe), {.host_threads = o.host_threads, .profiling = !o.report.empty()}};
  model.write_parameters(engine);
  // Synthetic images in [0, 1), a new batch per transfer, prepared on a helper thread while the device runs; each
  // replica its own stream (replica 0's is the one a single replica gets). The logits shown are replica 0's.
  std::vector<resnext::Rng> rngs;
  for (std::size_t r = 0; r < o.replicas; ++r) rngs.emplace_back(o.seed + 1 + 7919 * r);
  std::vector<float> last(model.logits.num_elements());
  std::size_t batches_out = 0;
  for (std::size_t r = 0; r < o.replicas; ++r) {
    engine.connect<T>(images, r, [&rng = rngs[r]](std::span<T> batch) {
      for (auto& x : batch) x = static_cast<T>(static_cast<float>(rng.uniform()));
    }, {.prefetch = true});
    engine.connect<T>(logits, r, [&, r](std::span<T const> l) {
      if (r == 0) std::transform(l.begin(), l.end(), last.begin(), [](T x) { return static_cast<float>(x); });
      ++batches_out;
    });
  }

  std::size_t const params = [&] {
    std::size_t n = 0;
    for (auto const& [t, v] : model.parameters) n += v.size();
    return n;
  }();
  std::printf("ResNeXt-%d %lldx%lld: %zu parameters, %.2f GMAC per image, batch %lld, %s, partials %s\n", c.depth,
              static_cast<long long>(c.cardinality), static_cast<long long>(c.width), params, c.macs_per_image() / 1e9,
              static_cast<long long>(c.batch), tb::name_of(c.dtype).data(), tb::name_of(c.partials).data());
  std::printf("target %zu x IPU Mk2 (%zu tiles) x %zu replica(s), conv AMP %.2f, matmul AMP %.2f; %zu host threads, "
              "%s kernels, caches %s\n",
              o.num_ipus, g.num_tiles(), o.replicas, c.conv_amp, c.matmul_amp, engine.host_threads(),
              std::string(tb::ops::kernels_isa()).c_str(), tb::to_string(tb::cache_sizes()).c_str());
  std::printf("graph built in %.2f s, %s in %.2f s; peak resident memory %.2f GB\n", build_s,
              exe_from_cache ? "executable loaded from cache" : "compiled", compile_s, peak_gb);

  // Every replica's images: they run concurrently on their own IPUs (the model), one after another here.
  double const per_run = static_cast<double>(c.batch * o.batches_per_step) * static_cast<double>(o.replicas);
  std::vector<double> throughput, latency;
  for (int it = 0; it < o.iterations; ++it) {
    t0 = std::chrono::steady_clock::now();
    engine.run();
    double const s = seconds_since(t0);
    double const img_s = per_run / s, ms = s * 1e3 / static_cast<double>(o.batches_per_step);
    // The first iteration includes warm-up; it is counted only when it is the only one.
    bool const counted = it > 0 || o.iterations == 1;
    std::printf("iteration %d: %8.2f img/s  %9.2f ms/batch%s\n", it, img_s, ms, counted ? "" : "  (warm-up, not counted)");
    if (counted) throughput.push_back(img_s), latency.push_back(ms);
  }
  tb::Profile const profile = engine.profile();
  Stats const tp = stats(throughput), lt = stats(latency);
  std::printf("throughput img/s: min %.2f max %.2f mean %.2f std %.2f (over %zu iterations)\n", tp.min, tp.max, tp.mean,
              tp.std, throughput.size());
  std::printf("latency ms/batch: min %.2f max %.2f mean %.2f std %.2f\n", lt.min, lt.max, lt.mean, lt.std);
  // Nominal rate: 2 x the network's multiply-adds (padding's products included) per image x images per second.
  double const host_gflops = 2.0 * c.macs_per_image() * tp.mean / 1e9;
  std::printf("host rate: %.1f GFLOP/s (2 x %.2f GMAC per image x mean img/s)\n", host_gflops, c.macs_per_image() / 1e9);
  double const ipu_s = static_cast<double>(profile.estimated_cycles()) / g.target().clock_hz / o.iterations;
  std::printf("estimated IPU: %.3f ms per batch, %.0f img/s (cost model, %.3g cycles per run)\n",
              ipu_s * 1e3 / static_cast<double>(o.batches_per_step), per_run / ipu_s, ipu_s * g.target().clock_hz);
  if (!profile.stages.empty()) {
    std::uint64_t slowest = 0, sum = 0;
    for (auto const& st : profile.stages) slowest = std::max(slowest, st.est_cycles), sum += st.est_cycles;
    std::printf("pipeline: %zu stages, %zu micro-batches per run (split at blocks", profile.stages.size(), bps);
    for (int b : split) std::printf(" %d", b);
    std::printf(")\n");
    for (auto const& st : profile.stages) {
      auto const& layers = model.stage_layers[st.stage];
      std::printf("  stage %zu on IPU %zu: %s .. %s (%zu layers), %.0f cycles per micro-batch, peak tile %llu B\n",
                  st.stage, st.ipu, layers.front().c_str(), layers.back().c_str(), layers.size(),
                  static_cast<double>(st.est_cycles), static_cast<unsigned long long>(profile.max_tile_bytes(st.ipu)));
    }
    double const steps = static_cast<double>(bps + profile.stages.size() - 1);
    std::printf("  bubble fraction %.3f (ramp-up and ramp-down steps), stage balance mean/slowest %.3f\n",
                static_cast<double>(profile.stages.size() - 1) / steps,
                static_cast<double>(sum) / static_cast<double>(profile.stages.size()) / static_cast<double>(slowest));
    std::printf("  inter-IPU traffic %.1f MB per run\n", static_cast<double>(profile.inter_ipu_bytes()) / 1e6 / o.iterations);
  }
  std::uint64_t const peak = profile.max_tile_bytes();
  std::printf("peak memory per tile: %llu of %zu bytes (%.1f%%): %s\n", static_cast<unsigned long long>(peak),
              g.target().bytes_per_tile, 100.0 * static_cast<double>(peak) / static_cast<double>(g.target().bytes_per_tile),
              peak <= g.target().bytes_per_tile ? "fits" : "does NOT fit");
  double mean_abs = 0;
  for (float x : last) mean_abs += std::abs(x) / static_cast<double>(last.size());
  std::printf("logits: %zu batches out, last batch mean |logit| %.4f, image 0 argmax %lld\n", batches_out, mean_abs,
              static_cast<long long>(std::max_element(last.begin(), last.begin() + c.classes) - last.begin()));
  // Exact fingerprints, for checking that a change leaves results bitwise unchanged: FNV-1a over the last batch's
  // logits as bytes, and the cost model's cycles.
  std::uint64_t digest = 0xcbf29ce484222325ull;
  for (float x : last) {
    unsigned char bytes[sizeof x];
    std::memcpy(bytes, &x, sizeof x);
    for (unsigned char b : bytes) digest = (digest ^ b) * 0x100000001b3ull;
  }
  std::printf("fingerprint: logits fnv1a %016llx, estimated cycles %llu\n", static_cast<unsigned long long>(digest),
              static_cast<unsigned long long>(profile.estimated_cycles()));
  if (!o.report.empty()) {
    auto const began = std::chrono::steady_clock::now();
    tb::report::write_report(profile, o.report);
    std::printf("report written to %s (report.html, profile.json, summary.txt) in %.2f s\n", o.report.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  }
  std::printf("throughput_img_per_s: %.3f\nlatency_ms: %.3f\nestimated_img_per_s: %.1f\nhost_gflop_per_s: %.1f\n", tp.mean, lt.mean,
              per_run / ipu_s, host_gflops);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options const o = parse(argc, argv);
  try {
    return o.model.dtype == tb::ElementType::f16 ? run<tb::half>(o) : run<float>(o);
  } catch (tb::option_error const& e) {  // a setting the model cannot take: a bad command line
    std::string_view const what = e.what();
    std::cerr << (what.starts_with("resnext: ") ? "" : "resnext: ") << what << "\n(see resnext --help)\n";
    return 2;
  } catch (tb::error const& e) {
    std::string_view const what = e.what();
    std::cerr << (what.starts_with("resnext: ") ? "" : "resnext: ") << what << "\n";
    return 1;
  }
}
