// Pipelined ONNX models (ipu_saved_model_cli's --pipeline-cfg): the stages a model is split into, given by
// regular expressions over node names (`manual`), found by balancing the nodes' estimated cycles or parameter memory
// over a range of IPU counts (`auto`), or read back from a solution an earlier `auto` wrote (`load`).
#pragma once

#include <tilebsp/core/target.hpp>
#include <tilebsp/onnx/import.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tilebsp::onnx {

/// ipu_saved_model_cli's pipeline_cfg.
struct PipelineConfig {
  enum class Converter { automatic, manual, load };
  enum class Priority { cycle, memory };
  Converter converter = Converter::automatic;
  /// auto: what to balance: the stages' estimated cycles (the slowest stage plus the dearest transfer, each stage's
  /// parameters within half its IPU's memory where a split allows it) or their parameter memory.
  Priority priority = Priority::cycle;
  /// auto: the IPU counts (one stage per IPU) to choose from.
  std::size_t min_ipu_quantity = 2, max_ipu_quantity = 8;
  /// auto: the folder the solution is written to (`<model stem>.pipeconfig`; empty: not written).
  std::string solution_dir;
  /// load: a solution written by `auto`.
  std::string solution_path;
  /// manual: one ECMAScript regular expression per stage over node names (ImportOptions::pipeline_stages).
  std::vector<std::string> manual_pipeline_config;
};

/// Reads a pipeline_cfg JSON object (the keys above, plus ipu_saved_model_cli's that do not apply here, which are
/// refused by name). `source` names it in errors; option_error for anything wrong.
PipelineConfig parse_pipeline_config(std::string_view json, std::string const& source);
/// The JSON object parse_pipeline_config reads back.
std::string to_json(PipelineConfig const& c);

/// A pipeline split of a model into contiguous runs of nodes (in the model's order), one stage per IPU.
struct PipelineSolution {
  std::string model;                  ///< the model's name (its file)
  std::size_t nodes = 0;              ///< the model's node count
  std::size_t micro_batches = 0;      ///< the micro-batches per run it was balanced for
  PipelineConfig::Priority priority = PipelineConfig::Priority::cycle;
  /// Per stage: its first node (index in the model's order; stage 0 begins at 0) and that node's name.
  std::vector<std::size_t> first_nodes;
  std::vector<std::string> first_node_names;
  /// Per stage: estimated cycles of one micro-batch and the bytes of the initializers its nodes read.
  std::vector<std::uint64_t> stage_cycles, stage_parameter_bytes;
  /// Per boundary between stages k and k + 1: the bytes of the values that cross it per micro-batch.
  std::vector<std::uint64_t> transfer_bytes;
  /// Estimated cycles of one run of micro_batches micro-batches (the bubble included).
  std::uint64_t estimated_run_cycles = 0;
  std::size_t stages() const noexcept { return first_nodes.size(); }
  /// ImportOptions::pipeline_split: the first nodes of stages 1, 2, ...
  std::vector<std::size_t> split() const { return {first_nodes.begin() + (first_nodes.empty() ? 0 : 1), first_nodes.end()}; }
};

/// What one node of a model costs, from building it on one IPU of `target` (a pipelined stage plans on its IPU as
/// one IPU would): estimated cycles of one run, the bytes of the initializers it reads, and per value it computes
/// that a later node reads, the index of the last such node and its bytes.
struct NodeCost {
  std::uint64_t cycles = 0, parameter_bytes = 0;
  struct Output {
    std::size_t last_reader = 0;
    std::uint64_t bytes = 0;
  };
  std::vector<Output> outputs;
};
std::vector<NodeCost> node_costs(Model const& model, ImportOptions const& options, Target const& ipu, std::size_t threads = 0);

/// `auto`: the split of `model` that balances config.priority over min_ipu_quantity .. max_ipu_quantity IPUs of
/// `ipu` (a one-IPU target), for `micro_batches` micro-batches per run. cycle: the fewest estimated cycles per run,
/// (micro_batches + K - 1) x (slowest stage + dearest transfer + sync); memory: the fewest IPUs whose stages' parameters
/// fit half an IPU each, balanced for the least parameter memory on one IPU. option_error for a range that is empty,
/// exceeds the micro-batches or the model's nodes.
PipelineSolution plan_pipeline(Model const& model, ImportOptions const& options, PipelineConfig const& config,
                               std::size_t micro_batches, Target const& ipu, std::size_t threads = 0);

/// A solution as JSON (what `auto` writes to solution_dir) and read back for `model` (`load`): option_error when it
/// is malformed or was made for another model (its node count or a stage's first node differs).
std::string to_json(PipelineSolution const& s);
PipelineSolution read_solution(std::string_view json, std::string const& source, Model const& model);

}  // namespace tilebsp::onnx
