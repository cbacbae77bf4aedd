// samples/tilebsp: the `tilebsp` command-line tool. Runs an ONNX model on the modelled IPU (tilebsp::onnx), converts
// it once into a folder that later runs start from without compiling, and describes it; the options follow
// ipu_saved_model_cli's IPU options with dashes (their underscore spellings are accepted too).
#include "../common/cli.hpp"
#include "../common/compile_progress.hpp"
#include "../common/malloc.hpp"
#include "../common/rng.hpp"

#include <tilebsp/onnx/import.hpp>
#include <tilebsp/onnx/npy.hpp>
#include <tilebsp/onnx/options.hpp>
#include <tilebsp/onnx/pipeline.hpp>
#include <tilebsp/tilebsp.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace tb = tilebsp;
namespace onnx = tilebsp::onnx;
namespace fs = std::filesystem;

namespace {

bool huge_pages = false;  // whether glibc backs the heap with transparent huge pages (samples::use_huge_pages)

constexpr char const* usage = R"(usage: tilebsp run MODEL.onnx|DIR [options]
       tilebsp convert MODEL.onnx --outdir DIR [options]
       tilebsp info MODEL.onnx [--batch-size N]
Runs an ONNX model on a modelled IPU Mk2, converts it once (DIR then runs without compiling), or describes it.
  --inputs NAME=FILE.npy ...   input values (one per input; a model with one input also takes FILE.npy alone);
                               inputs not given get standard normal values (seed 1)
  --outdir DIR                 run: write each output as DIR/NAME.npy; convert: the folder to write
  --batch-size N               fixes the model's symbolic batch dimension (default: 1 where it is symbolic)
  --batch-per-step N           batches per device run, the on-device repeat count (default 1)
  --iterations N               device runs to time; the first is warm-up unless it is the only one (default 5)
  --precision-mode FP32|FP16   activations and weights in float or half (default FP32)
  --matmul-amp X               availableMemoryProportion of MatMul and Gemm, in [0, 1] (default 0.6)
  --conv-amp X                 availableMemoryProportion of Conv, in [0, 1] (default 0.6)
  --matmul-partial-type T      float or half partial sums of MatMul and Gemm (default float)
  --conv-partial-type T        float or half partial sums of Conv (default float)
  --precision-conversion-excluded-nodes REGEX,...
                               FP16: nodes whose names match stay in float
  --excluded-nodes REGEX,...   nodes whose names match run on the host CPU (elementwise, cast, shape and
                               data-movement operators), reading and writing the tiles' values
  --num-ipus N                 IPUs of the target (default 1; a pipeline takes one per stage)
  --manual-sharding REGEX,...  one regular expression per IPU: nodes whose names match the i-th go on IPU i
                               (the first that matches; others on IPU 0)
  --pipeline-cfg JSON|FILE     pipeline the model over IPUs, --batch-per-step micro-batches per run:
                               {"converter": "auto", "priority": "cycle"|"memory", "min_ipu_quantity": 2,
                                "max_ipu_quantity": 8, "solution_dir": DIR} balances the stages by estimate;
                               {"converter": "manual", "manual_pipeline_config": [REGEX, ...]} one per stage;
                               {"converter": "load", "solution_path": FILE} a solution auto wrote
  --replicas N                 replicas of the model, each with its own batch (default 1)
  --config-file FILE.json      options as a JSON object ({"batch_size": 4, "manual_sharding": ["a", "b"], ...})
  --host-threads N             host threads (0: all; results do not depend on it) (default 0)
  --reuse-host-memory B        true: intermediates share host memory where their live ranges allow (the same
                               results, less memory); false: each has its own (default true)
  --executable-cache DIR       keep compiled executables in DIR; the same model and options load from there
  --report DIR                 write the HTML report and profile to DIR
)";

struct Options {
  std::string command, model;
  onnx::RunOptions run;
  std::map<std::string, std::string> inputs;  // NAME=FILE
  std::string sole_input;                     // FILE alone, for a model of one input
};

std::string read_text(samples::Cli const& cli, fs::path const& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) cli.bad("cannot read " + path.string());
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

Options parse(int argc, char** argv) {
  samples::Cli const cli("tilebsp");
  if (argc >= 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::cout << usage;
    std::exit(0);
  }
  if (argc < 3) cli.bad("name a command (run, convert or info) and a model");
  Options o;
  o.command = argv[1];
  o.model = argv[2];
  if (o.command != "run" && o.command != "convert" && o.command != "info")
    cli.bad("unknown command '" + o.command + "' (run, convert or info)");
  try {
    // A converted folder: its model and options first, then the command line's.
    if (o.command == "run" && fs::is_directory(o.model)) {
      fs::path const dir = o.model;
      if (!fs::exists(dir / "model.onnx") || !fs::exists(dir / "options.json"))
        cli.bad(dir.string() + " is not a folder written by tilebsp convert (model.onnx and options.json)");
      onnx::apply_config(o.run, read_text(cli, dir / "options.json"), (dir / "options.json").string());
      if (o.run.pipeline && !o.run.pipeline->solution_path.empty() && fs::path(o.run.pipeline->solution_path).is_relative())
        o.run.pipeline->solution_path = (dir / o.run.pipeline->solution_path).string();
      o.model = (dir / "model.onnx").string();
      o.run.executable_cache = (dir / "executable").string();
    }
    for (int i = 3; i < argc; ++i) {
      std::string const a = argv[i];
      if (a == "--help" || a == "-h") {
        std::cout << usage;
        std::exit(0);
      }
      if (a.rfind("--", 0) != 0) cli.bad("unexpected argument '" + a + "'");
      if (i + 1 >= argc) cli.bad(a + " needs a value");
      std::string flag = a;
      std::replace(flag.begin(), flag.end(), '_', '-');
      if (flag == "--config-file") {
        std::string const file = argv[++i];
        onnx::apply_config(o.run, read_text(cli, file), file);
        continue;
      }
      onnx::set_option(o.run, flag, argv[++i]);
      // --inputs takes several values: NAME=FILE ... up to the next flag.
      while (flag == "--inputs" && i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0)
        onnx::set_option(o.run, flag, argv[++i]);
    }
  } catch (tb::option_error const& e) {
    cli.bad(e.what());
  }
  for (auto const& v : o.run.inputs) {
    auto const eq = v.find('=');
    if (eq == std::string::npos) o.sole_input = v;
    else o.inputs[v.substr(0, eq)] = v.substr(eq + 1);
  }
  if (o.command == "convert" && o.run.outdir.empty()) cli.bad("convert needs --outdir DIR");
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string file_name(std::string name) {
  for (auto& c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) c = '_';
  return name;
}

int info(Options const& o) {
  onnx::Model const m = onnx::Model::load(o.model);
  std::printf("model: %s\nproducer: %s\nopset: %lld%s\nparameters: %zu\n", o.model.c_str(), m.producer().c_str(),
              static_cast<long long>(m.opset()),
              m.file_opset() != m.opset() ? (" (upgraded from " + std::to_string(m.file_opset()) + ")").c_str() : "",
              m.parameter_count());
  auto dims = [](onnx::ValueInfo const& v) {
    std::string r = "[";
    for (std::size_t i = 0; i < v.dims.size(); ++i)
      r += (i ? ", " : "") + (v.dims[i].value >= 0 ? std::to_string(v.dims[i].value) : v.dims[i].param.empty() ? "?" : v.dims[i].param);
    return r + "]";
  };
  for (auto const& v : m.inputs()) std::printf("input: %s %s %s\n", v.name.c_str(), onnx::to_string(v.type).c_str(), dims(v).c_str());
  for (auto const& v : m.outputs()) std::printf("output: %s %s %s\n", v.name.c_str(), onnx::to_string(v.type).c_str(), dims(v).c_str());
  auto const supported = onnx::supported_operators();
  std::map<std::string, std::size_t> uses;
  for (auto const& n : m.nodes()) ++uses[n.domain.empty() ? n.op_type : n.domain + "::" + n.op_type];
  std::size_t missing = 0;
  std::printf("operators (%zu nodes):\n", m.nodes().size());
  for (auto const& [op, k] : uses) {
    bool const ok = std::binary_search(supported.begin(), supported.end(), op);
    missing += !ok;
    std::printf("  %-24s %5zu  %s\n", op.c_str(), k, ok ? "supported" : "NOT SUPPORTED");
  }
  // Multiply-adds: build the graph on a modelled IPU and count the convolutions' and matmuls' work.
  if (missing == 0) {
    tb::Graph g{tb::targets::ipu_mk2(1)};
    tb::Sequence prog;
    onnx::ImportOptions io = o.run.import;
    if (io.batch_size == 0) io.batch_size = 1;
    onnx::Imported const imp = onnx::import(g, prog, m, io);
    tb::Executable const exe = tb::compile(g, {.allow_out_of_memory = true}, prog);
    std::printf("multiply-adds per item: %.4g (convolutions and matrix products)\n",
                imp.multiply_adds / static_cast<double>(io.batch_size));
    std::printf("estimated IPU cycles per batch of %lld: %llu\n", static_cast<long long>(io.batch_size),
                static_cast<unsigned long long>(exe.estimated_cycles(0)));
  }
  std::printf("supported: %s\n", missing == 0 ? "yes" : "no");
  return missing == 0 ? 0 : 1;
}

/// The pipeline's stages for the importer (manual: the expressions; auto and load: a split), printed; the solution
/// of auto or load when there is one.
std::optional<onnx::PipelineSolution> resolve_pipeline(Options const& o, onnx::Model const& m, onnx::ImportOptions& io) {
  if (!o.run.pipeline) return std::nullopt;
  onnx::PipelineConfig const& cfg = *o.run.pipeline;
  auto const micro_batches = static_cast<std::size_t>(o.run.batch_per_step);
  if (cfg.converter == onnx::PipelineConfig::Converter::manual) {
    io.pipeline_stages = cfg.manual_pipeline_config;
    return std::nullopt;
  }
  onnx::PipelineSolution s;
  if (cfg.converter == onnx::PipelineConfig::Converter::load) {
    std::ifstream f(cfg.solution_path, std::ios::binary);
    if (!f) throw tb::option_error("pipeline_cfg: cannot read the solution " + cfg.solution_path);
    std::ostringstream text;
    text << f.rdbuf();
    s = onnx::read_solution(text.str(), cfg.solution_path, m);
  } else {
    auto const t0 = std::chrono::steady_clock::now();
    s = onnx::plan_pipeline(m, io, cfg, micro_batches, tb::targets::ipu_mk2(1), o.run.host_threads);
    std::printf("pipeline: auto (%s) chose %zu stages in %.2f s; estimated %llu cycles per run of %zu micro-batches\n",
                cfg.priority == onnx::PipelineConfig::Priority::memory ? "memory" : "cycle", s.stages(), seconds_since(t0),
                static_cast<unsigned long long>(s.estimated_run_cycles), micro_batches);
    if (!cfg.solution_dir.empty()) {
      fs::create_directories(cfg.solution_dir);
      std::string const path = (fs::path(cfg.solution_dir) / (fs::path(o.model).stem().string() + ".pipeconfig")).string();
      std::ofstream(path) << onnx::to_json(s);
      std::printf("pipeline: solution written to %s\n", path.c_str());
    }
  }
  for (std::size_t k = 0; k < s.stages(); ++k) {
    std::size_t const end = k + 1 < s.stages() ? s.first_nodes[k + 1] : m.nodes().size();
    std::printf("  stage %zu: nodes %zu-%zu from '%s'", k, s.first_nodes[k], end - 1, s.first_node_names[k].c_str());
    if (k < s.stage_cycles.size())
      std::printf(", %llu cycles, parameters %.2f MB", static_cast<unsigned long long>(s.stage_cycles[k]),
                  static_cast<double>(s.stage_parameter_bytes[k]) / 1e6);
    if (k > 0 && k - 1 < s.transfer_bytes.size()) std::printf(", receives %.2f MB", static_cast<double>(s.transfer_bytes[k - 1]) / 1e6);
    std::printf("\n");
  }
  io.pipeline_split = s.split();
  return s;
}

/// Replica r's part of an input file: the whole file when it holds one batch, else its r-th batch of `want`.
onnx::HostTensor replica_part(onnx::HostTensor const& t, std::vector<std::int64_t> const& want, std::size_t r) {
  if (t.shape == want) return t;
  onnx::HostTensor p;
  p.type = t.type;
  p.shape = want;
  std::size_t const n = p.size();
  if (!t.floats.empty()) p.floats.assign(t.floats.begin() + static_cast<std::ptrdiff_t>(r * n), t.floats.begin() + static_cast<std::ptrdiff_t>((r + 1) * n));
  else p.ints.assign(t.ints.begin() + static_cast<std::ptrdiff_t>(r * n), t.ints.begin() + static_cast<std::ptrdiff_t>((r + 1) * n));
  return p;
}

int run(Options const& o) {
  auto t0 = std::chrono::steady_clock::now();
  onnx::Model const m = onnx::Model::load(o.model);
  onnx::ImportOptions io = o.run.import;
  bool const symbolic = std::any_of(m.inputs().begin(), m.inputs().end(), [](onnx::ValueInfo const& v) {
    return !v.dims.empty() && v.dims[0].value < 0;
  });
  if (io.batch_size == 0 && symbolic) io.batch_size = 1;
  // Inputs: from .npy files, checked against the model before anything is built.
  std::map<std::string, onnx::HostTensor> given;
  if (!o.sole_input.empty()) {
    if (m.inputs().size() != 1)
      throw tb::option_error("--inputs " + o.sole_input + ": the model has " + std::to_string(m.inputs().size()) +
                             " inputs; name each as NAME=FILE.npy");
    given[m.inputs()[0].name] = onnx::load_npy(o.sole_input);
  }
  for (auto const& [name, file] : o.inputs) {
    if (std::none_of(m.inputs().begin(), m.inputs().end(), [&](onnx::ValueInfo const& v) { return v.name == name; }))
      throw tb::option_error("--inputs " + name + "=" + file + ": the model has no input '" + name + "'");
    given[name] = onnx::load_npy(file);
  }
  for (auto const& v : m.inputs()) {  // every given input's shape and type, before anything is built
    auto const it = given.find(v.name);
    if (it == given.end()) continue;
    std::string const file = o.inputs.count(v.name) ? o.inputs.at(v.name) : o.sole_input;
    std::vector<std::int64_t> want;
    for (std::size_t d = 0; d < v.dims.size(); ++d) want.push_back(v.dims[d].value < 0 && d == 0 ? io.batch_size : v.dims[d].value);
    std::vector<std::int64_t> all = want;  // every replica's batch in one file
    if (!all.empty()) all[0] *= static_cast<std::int64_t>(o.run.replicas);
    if (it->second.shape != want && (o.run.replicas == 1 || it->second.shape != all))
      throw tb::shape_error("input '" + v.name + "' is " + onnx::shape_text(want) + (o.run.replicas > 1 ? " (or " + onnx::shape_text(all) + " for all " + std::to_string(o.run.replicas) + " replicas)" : std::string()) +
                            " but " + file + " holds " + onnx::shape_text(it->second.shape));
    bool const type_ok = it->second.type == v.type || (onnx::is_floating(v.type) && it->second.type == onnx::DataType::float32);
    if (!type_ok)
      throw tb::type_error("input '" + v.name + "' is " + onnx::to_string(v.type) + " but " + file + " holds " +
                           onnx::to_string(it->second.type));
  }
  auto const solution = resolve_pipeline(o, m, io);
  std::size_t const stages = !io.pipeline_stages.empty() ? io.pipeline_stages.size() : io.pipeline_split.empty() ? 0 : io.pipeline_split.size() + 1;
  if (stages > static_cast<std::size_t>(o.run.batch_per_step))
    throw tb::option_error("--pipeline-cfg: " + std::to_string(stages) + " stages need at least as many micro-batches per run; "
                           "give --batch-per-step " + std::to_string(stages) + " or more");
  std::size_t const ipus = std::max(o.run.num_ipus, stages);
  std::size_t const replicas = o.run.replicas;
  tb::Graph g{tb::targets::ipu_mk2(ipus)};
  g.set_build_threads(o.run.host_threads);
  tb::Sequence step;
  onnx::Imported imp = onnx::import(g, step, m, io);
  // Per replica, per input: its values (a file's batch, or standard normal draws, replica after replica).
  std::vector<std::vector<onnx::HostTensor>> values(replicas);
  samples::Rng rng(1);
  for (std::size_t r = 0; r < replicas; ++r)
    for (auto const& in : imp.inputs) {
      if (auto it = given.find(in.name); it != given.end()) {
        values[r].push_back(replica_part(it->second, in.shape(), r));
        continue;
      }
      onnx::HostTensor t;
      t.type = in.type;
      t.shape = in.shape();
      for (std::size_t i = 0; i < t.size(); ++i) {
        if (onnx::is_floating(in.type)) t.floats.push_back(static_cast<float>(rng.normal_pair().first));
        else t.ints.push_back(0);
      }
      values[r].push_back(std::move(t));
    }
  tb::Program const program = imp.stages.empty()
                                  ? tb::Program(tb::repeat(static_cast<std::size_t>(o.run.batch_per_step), std::move(step)))
                                  : tb::Program(tb::pipeline({.micro_batches = static_cast<std::size_t>(o.run.batch_per_step)}, std::move(imp.stages)));
  double const build_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  std::string const cache = o.command == "convert" ? (fs::path(o.run.outdir) / "executable").string() : o.run.executable_cache;
  if (o.command == "convert") fs::create_directories(o.run.outdir);
  tb::Executable exe = tb::compile(g,
                                   {.allow_out_of_memory = true,
                                    .threads = o.run.host_threads,
                                    .cache_dir = cache,
                                    .progress = samples::compile_progress("tilebsp"),
                                    .replicas = replicas},
                                   program);
  samples::end_compile_progress();
  double const compile_s = seconds_since(t0);
  bool const from_cache = exe.loaded_from_cache();
  double const peak_gb = samples::peak_resident_bytes() / 1e9;
  std::printf("model: %s, opset %lld, %zu parameters, %zu nodes, %.3g GMAC per item\n", o.model.c_str(),
              static_cast<long long>(m.opset()), m.parameter_count(), m.nodes().size(),
              imp.multiply_adds / 1e9 / static_cast<double>(io.batch_size > 0 ? io.batch_size : 1));
  std::printf("target %zu x IPU Mk2 (%zu tiles)%s, batch %lld, %s, conv AMP %.2f, matmul AMP %.2f, %s kernels\n",
              ipus, g.num_tiles(),
              (stages > 0 ? ", pipelined in " + std::to_string(stages) + " stages" : std::string()).append(
                  replicas > 1 ? ", " + std::to_string(replicas) + " replicas" : std::string()).c_str(),
              static_cast<long long>(io.batch_size),
              io.precision == onnx::Precision::fp16 ? "FP16" : "FP32", io.conv_amp, io.matmul_amp,
              std::string(tb::ops::kernels_isa()).c_str());
  std::printf("graph built in %.2f s, %s in %.2f s; peak resident memory %.2f GB\n", build_s,
              from_cache ? "executable loaded from cache" : "compiled", compile_s, peak_gb);
  if (o.command == "convert") {  // the executable is in DIR/executable already; the model and options beside it
    fs::copy_file(o.model, fs::path(o.run.outdir) / "model.onnx", fs::copy_options::overwrite_existing);
    onnx::RunOptions stored = o.run;
    if (solution) {  // the split, so that a run of the folder builds the same stages without planning them again
      std::ofstream(fs::path(o.run.outdir) / "pipeline.pipeconfig") << onnx::to_json(*solution);
      onnx::PipelineConfig load;
      load.converter = onnx::PipelineConfig::Converter::load;
      load.solution_path = "pipeline.pipeconfig";
      stored.pipeline = load;
    }
    std::ofstream(fs::path(o.run.outdir) / "options.json") << onnx::model_config(stored);
    std::printf("converted: %s (run it with: tilebsp run %s)\n", o.run.outdir.c_str(), o.run.outdir.c_str());
    std::printf("startup: build_s %.3f compile_s %.3f huge_pages %s\n", build_s, compile_s, huge_pages ? "on" : "off");
    return 0;
  }
  t0 = std::chrono::steady_clock::now();
  // The tool reads only the outputs after a run: by default the activations share host memory where their live
  // ranges allow.
  tb::Engine engine{std::move(exe), {.host_threads = o.run.host_threads,
                                     .profiling = !o.run.report.empty(),
                                     .reuse_host_memory = o.run.reuse_host_memory}};
  double const engine_s = seconds_since(t0);
  for (std::size_t r = 0; r < replicas; ++r)
    for (std::size_t i = 0; i < imp.inputs.size(); ++i) onnx::write(engine.replica(r), imp.inputs[i], values[r][i]);
  double const items = static_cast<double>(io.batch_size > 0 ? io.batch_size : 1) * static_cast<double>(o.run.batch_per_step) *
                       static_cast<double>(replicas);
  std::vector<double> rate, latency;
  for (int it = 0; it < o.run.iterations; ++it) {
    t0 = std::chrono::steady_clock::now();
    engine.run();
    double const s = seconds_since(t0);
    bool const counted = it > 0 || o.run.iterations == 1;
    std::printf("iteration %d: %9.2f items/s  %9.2f ms/batch%s\n", it, items / s, s * 1e3 / static_cast<double>(o.run.batch_per_step),
                counted ? "" : "  (warm-up, not counted)");
    if (counted) rate.push_back(items / s), latency.push_back(s * 1e3 / static_cast<double>(o.run.batch_per_step));
  }
  auto mean = [](std::vector<double> const& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / static_cast<double>(v.size());
  };
  tb::Profile const profile = engine.profile();
  double const ipu_s = static_cast<double>(profile.estimated_cycles()) / g.target().clock_hz / o.run.iterations;
  std::uint64_t const peak = profile.max_tile_bytes();
  std::printf("peak memory per tile: %llu of %zu bytes (%.1f%%): %s\n", static_cast<unsigned long long>(peak),
              g.target().bytes_per_tile, 100.0 * static_cast<double>(peak) / static_cast<double>(g.target().bytes_per_tile),
              peak <= g.target().bytes_per_tile ? "fits" : "does NOT fit");
  if (!o.run.outdir.empty()) fs::create_directories(o.run.outdir);
  for (auto const& out : imp.outputs) {
    onnx::HostTensor t = onnx::read(engine.replica(0), out);
    for (std::size_t r = 1; r < replicas; ++r) {  // the replicas' batches one after another
      onnx::HostTensor const x = onnx::read(engine.replica(r), out);
      t.floats.insert(t.floats.end(), x.floats.begin(), x.floats.end());
      t.ints.insert(t.ints.end(), x.ints.begin(), x.ints.end());
    }
    if (replicas > 1) {
      if (t.shape.empty()) t.shape.push_back(static_cast<std::int64_t>(replicas));
      else t.shape[0] *= static_cast<std::int64_t>(replicas);
    }
    double mean_abs = 0;
    for (std::size_t i = 0; i < t.size(); ++i) mean_abs += std::abs(t.value(i)) / static_cast<double>(t.size());
    std::printf("output %s %s: mean |x| %.6g", out.name.c_str(), onnx::shape_text(t.shape).c_str(), mean_abs);
    if (!o.run.outdir.empty()) {
      std::string const path = (fs::path(o.run.outdir) / (file_name(out.name) + ".npy")).string();
      onnx::save_npy(path, t);
      std::printf(", written to %s", path.c_str());
    }
    std::printf("\n");
  }
  if (!o.run.report.empty()) {
    tb::report::write_report(profile, o.run.report);
    std::printf("report written to %s\n", o.run.report.c_str());
  }
  std::printf("throughput_items_per_s: %.3f\nlatency_ms: %.3f\nestimated_items_per_s: %.1f\n", mean(rate), mean(latency),
              items / ipu_s);
  std::printf("peak_resident_gb: %.3f\n", samples::peak_resident_bytes() / 1e9);  // the engine's memory included
  std::printf("startup: build_s %.3f compile_s %.3f engine_s %.3f executable %s huge_pages %s\n", build_s, compile_s, engine_s,
              from_cache ? "loaded" : "compiled", huge_pages ? "on" : "off");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  huge_pages = samples::use_huge_pages(argv);
  samples::keep_freed_memory();  // a third of a model's startup was the kernel zeroing pages freed and taken again
  Options const o = parse(argc, argv);
  try {
    if (o.command == "info") return info(o);
    return run(o);
  } catch (tb::option_error const& e) {
    std::cerr << "tilebsp: " << e.what() << "\n(see tilebsp --help)\n";
    return 2;
  } catch (tb::error const& e) {
    std::cerr << "tilebsp: " << e.what() << "\n";
    return 1;
  }
}
