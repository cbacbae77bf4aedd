// onnx::import: an ONNX model (onnx::Model) built into a tile graph with tilebsp's operators. Activations keep
// ONNX's logical layout (NCHW) as views over the channels-last tensors the convolutions produce, so layout changes
// cost nothing; constant and shape subgraphs are folded on the host at import.
#pragma once

#include <tilebsp/core/graph.hpp>
#include <tilebsp/onnx/model.hpp>
#include <tilebsp/program/host_context.hpp>
#include <tilebsp/program/pipeline.hpp>
#include <tilebsp/program/programs.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tilebsp::onnx {

enum class Precision { fp32, fp16 };

struct ImportOptions {
  /// Fixes every symbolic first dimension of the graph inputs (0: the model must have none).
  std::int64_t batch_size = 0;
  /// FP16 keeps activations and weights in half precision (inputs and outputs stay as the model declares them).
  Precision precision = Precision::fp32;
  /// The partial sums of the matmuls (MatMul, Gemm) and of the convolutions: f32 or f16.
  ElementType matmul_partials = ElementType::f32;
  ElementType conv_partials = ElementType::f32;
  /// availableMemoryProportion of the matmuls (MatMul, Gemm) and of the convolutions.
  double matmul_amp = 0.6;
  double conv_amp = 0.6;
  /// Inputs whose values are known when the model is imported (shapes, indices): folded like initializers and
  /// no longer inputs of the imported graph.
  std::map<std::string, HostTensor> constant_inputs;
  /// FP16 only: nodes kept in float (ipu_saved_model_cli's precision_conversion_excluded_nodes): ECMAScript regular
  /// expressions searched in node names. Their inputs are converted to float and their outputs stay float; the
  /// nodes after them convert back.
  std::vector<std::string> precision_conversion_excluded_nodes;
  /// Manual sharding over the IPUs of the graph's target: expression i places the nodes whose names it matches
  /// (searched, the first that matches) on IPU i; other nodes, and the model's inputs, go on IPU 0. At most one
  /// expression per IPU. Tensors that cross IPUs are exchanged over the IPU-Links (docs/07).
  std::vector<std::string> manual_sharding;
  /// Nodes run on the host CPU (ipu_saved_model_cli's excluded_nodes): regular expressions searched in node names.
  /// A matching node that reads values computed on the tiles becomes a host callback (tb::host) that reads them when
  /// the model runs, computes the node as the importer folds constants, and writes its results back to the tiles.
  /// The operators the host runs are those the importer folds: elementwise ones, casts, shape and data-movement
  /// operators (unsupported_error for others, such as Conv); inputs that fix shapes must still be known at import.
  std::vector<std::string> excluded_nodes;
  /// A pipeline (docs/07) over the IPUs of the graph's target, stage i on IPU i, given by one of:
  /// - `pipeline_stages`: one regular expression per stage, searched in node names; a node goes to the stage of
  ///   the first that matches, an unmatched node to the latest stage among its inputs' (stage 0 when none);
  /// - `pipeline_split`: the first node (index in the model's order) of stages 1, 2, ..., strictly increasing
  ///   (onnx/pipeline.hpp plans one).
  /// The model's inputs are on stage 0; a value a later stage reads is received there (tb::receive); a node
  /// fused into an earlier one (a batch norm or ReLU after a convolution) runs in that node's stage. A node whose
  /// stage precedes one of its inputs' is an option_error, as are more stages than IPUs and manual sharding beside.
  std::vector<std::string> pipeline_stages;
  std::vector<std::size_t> pipeline_split;
};

/// A graph input or output of the imported model, in ONNX's layout and with its ONNX element type; `tensor` is a
/// view of the graph (its element type: f32 or f16 for floating types, i32 for integer ones, bool).
struct ImportedValue {
  std::string name;
  DataType type = DataType::float32;
  Tensor tensor;
  std::vector<std::int64_t> shape() const;
};

struct Imported {
  std::vector<ImportedValue> inputs;
  std::vector<ImportedValue> outputs;
  /// Multiply-adds of one run of the imported step: its convolutions (padding's products included, as a dense
  /// convolution counts them) and matrix products.
  double multiply_adds = 0;
  /// A pipelined import (ImportOptions::pipeline_stages or pipeline_split): the stages, each with its shard, its
  /// nodes' program and what it receives; import() then adds nothing to `prog`, and the caller runs
  /// tb::pipeline({.micro_batches = M}, stages) for M >= stages.size() micro-batches.
  std::vector<Stage> stages;
};

/// Builds `model` into `g`, appending its step to `prog`. Throws shape_error for a symbolic dimension that
/// batch_size does not fix, unsupported_error for an operator, attribute or type tilebsp lacks, model_error for a
/// node that contradicts its operator's definition; every message names the model, and a node's its name,
/// operator and opset. Nothing is added to `prog` when it throws.
Imported import(Graph& g, Sequence& prog, Model const& model, ImportOptions const& options = {});

/// The operators of the default ONNX domain import() takes, sorted.
std::vector<std::string> supported_operators();

/// Writes `values` to input `v`: its shape must be v's and its type v's (float32 also fills float16 inputs).
/// Throws shape_error or type_error naming the input.
void write(HostContext& host, ImportedValue const& v, HostTensor const& values);
/// Reads output (or input) `v` as a HostTensor of its ONNX type and shape.
HostTensor read(HostContext const& host, ImportedValue const& v);

}  // namespace tilebsp::onnx
