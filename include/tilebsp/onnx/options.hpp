// The options of running an ONNX model (the `tilebsp` tool's, after ipu_saved_model_cli's IPU options): set one by
// name, read a JSON config file of them, and write the ones that fix a compiled model (what `tilebsp convert`
// stores beside the executable and `tilebsp run DIR` reads back).
#pragma once

#include <tilebsp/onnx/import.hpp>
#include <tilebsp/onnx/pipeline.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tilebsp::onnx {

struct RunOptions {
  /// Batch size, precision, partials, AMP, nodes kept in float, manual sharding (ImportOptions).
  ImportOptions import;
  std::int64_t batch_per_step = 1;
  int iterations = 5;
  /// IPUs of the target (manual sharding places nodes on them; a pipeline uses at least one per stage).
  std::size_t num_ipus = 1;
  /// ipu_saved_model_cli's pipeline_cfg: the model pipelined over IPUs, batch_per_step micro-batches per run.
  std::optional<PipelineConfig> pipeline;
  /// Replicas of the model (data parallelism, docs/08), each on its own IPUs with its own batch.
  std::size_t replicas = 1;
  std::size_t host_threads = 0;
  /// Intermediates share host memory where their live ranges allow (EngineOptions::reuse_host_memory); the tool reads
  /// only the outputs.
  bool reuse_host_memory = true;
  std::string outdir, report, executable_cache;
  /// NAME=FILE.npy, or FILE.npy alone for a model of one input.
  std::vector<std::string> inputs;
};

/// Sets option `name` to `value`. Names are ipu_saved_model_cli's with dashes or underscores, with or without the
/// leading "--": batch-size, batch-per-step, iterations, precision-mode (FP32 | FP16), matmul-amp, conv-amp (in
/// [0, 1]), matmul-partial-type, conv-partial-type (float | half), num-ipus, manual-sharding (regular expressions,
/// one per IPU, comma-separated), precision-conversion-excluded-nodes (regular expressions, comma-separated),
/// host-threads, reuse-host-memory (true | false), executable-cache, report, outdir, inputs (appends), pipeline-cfg
/// (a JSON object or a file holding one, parse_pipeline_config), replicas, excluded-nodes (regular expressions,
/// comma-separated). Throws option_error naming the option and the value for anything else.
void set_option(RunOptions& o, std::string_view name, std::string const& value);

/// Applies a JSON object of options (a --config-file): keys are option names, values strings, numbers, booleans
/// or, for list options, arrays of strings. `source` names the file in errors. Throws option_error at the first
/// problem (its offset for malformed JSON, the key for a bad option).
void apply_config(RunOptions& o, std::string_view json, std::string const& source);

/// The options that fix the imported and compiled model, as a JSON object apply_config reads back: batch size,
/// batches per step, precision, partials, AMP, IPUs, sharding, the pipeline, replicas, the nodes kept in float and
/// those run on the host.
std::string model_config(RunOptions const& o);

}  // namespace tilebsp::onnx
