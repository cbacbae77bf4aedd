// Pipelines: a program's stages on different IPUs, run over micro-batches as one sharded loop on the device.
#pragma once

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/tensor.hpp>
#include <tilebsp/program/programs.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tilebsp {

/// How the stages of a pipeline share the steps. `grouped` (Poplar's PipelineSchedule::Grouped): in every step
/// each stage that has a micro-batch runs it, all IPUs at once, then the transfers between stages move the results
/// on. The pipeline holds K - 1 micro-batches in flight at most and needs one buffer per transfer (no interleaving
/// of forward and backward passes on one IPU within a step, whose stashes grow with the depth).
enum class PipelineSchedule : std::uint8_t { grouped };

/// Options of pipeline().
struct PipelineOptions {
  /// Micro-batches that one run of the pipeline takes through every stage: the gradient accumulation count of a
  /// training step (Poplar's gradientAccumulationCount). At least 1, and at least the number of stages.
  std::size_t micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::grouped;
};

/// A pipeline transfer into a stage: before the stage runs micro-batch m, `dst` (on the stage's IPU) holds the
/// value `src` had after stage `from` ran micro-batch m. Activations forward, gradients backward, and stashes (a
/// stage's own value kept for a later stage on the same IPU) are all transfers. `from` defaults to the previous
/// stage. Over a distance of d stages the pipeline adds d - 1 buffers mapped like `dst`.
struct Receive {
  Tensor src, dst;
  std::optional<std::size_t> from;
};
inline Receive receive(Tensor const& src, Tensor const& dst) { return {src, dst, std::nullopt}; }
inline Receive receive(Tensor const& src, Tensor const& dst, std::size_t from_stage) { return {src, dst, from_stage}; }

/// One stage: a program that touches only the tiles of `shard` (a shard view, g.shard(i), or the whole graph of a
/// one-IPU target), and the transfers it receives.
struct Stage {
  Graph shard;
  Program body;
  std::vector<Receive> receives;
  /// The IPU of the shard.
  std::size_t ipu() const noexcept { return shard.first_tile() / shard.target().tiles_per_ipu; }
};
template <ProgramLike P, class... R>
  requires(std::same_as<std::decay_t<R>, Receive> && ...)
Stage stage(Graph const& shard, P&& body, R&&... receives) {
  if (shard.num_tiles() != shard.target().tiles_per_ipu)
    throw option_error("stage: the graph must be one IPU's shard view (g.shard(i)), not a view of " +
                       std::to_string(shard.num_tiles()) + " tiles");
  return {shard, Program(std::forward<P>(body)), {std::forward<R>(receives)...}};
}

/// The program value of a pipeline: runs `micro_batches` micro-batches through the stages, stage k taking
/// micro-batch t - k in step t (ramp-up, full steps in an on-device repeat, ramp-down), the IPUs of different
/// stages at once; between steps the transfers copy each stage's results to the stages that receive them.
/// Stages on one IPU run one after another in a step, in stage order. Built by pipeline().
class Pipeline {
 public:
  Pipeline(PipelineOptions options, std::vector<Stage> stages);
  void lower(Lowering& l) const;
  PipelineOptions const& options() const noexcept { return options_; }
  std::vector<Stage> const& stages() const noexcept { return stages_; }
  /// Steps of one run: micro_batches + stages - 1 (the ramp-up and ramp-down steps run some stages only).
  std::size_t steps() const noexcept { return options_.micro_batches + stages_.size() - 1; }

 private:
  /// One copy of a transfer chain: `dst` = `src` in steps [first, last].
  struct Link {
    Tensor src, dst;
    std::size_t first, last;
  };
  void transfers(Lowering& l, std::size_t step) const;

  PipelineOptions options_;
  std::vector<Stage> stages_;
  std::vector<Link> links_;  ///< in the order they are copied within a step
  std::vector<std::uint32_t> slot_;  ///< per stage: the index of its IPU among the pipeline's IPUs
  std::uint32_t slots_ = 0;
};

/// A pipeline of `stages` (see Pipeline). Throws option_error for a micro-batch count of 0 or below the number of
/// stages, or a transfer from a stage that is not earlier; shape_error / type_error when a transfer's tensors
/// differ; error when stages belong to different graphs.
inline Pipeline pipeline(PipelineOptions options, std::vector<Stage> stages) { return {options, std::move(stages)}; }
template <class... S>
  requires(std::same_as<std::decay_t<S>, Stage> && ...)
Pipeline pipeline(PipelineOptions options, S&&... stages) {
  return {options, std::vector<Stage>{std::forward<S>(stages)...}};
}

/// A tensor on `shard` shaped, typed and laid out like `t` on its own IPU (each element on the tile with the same
/// index within the shard): where a stage receives `t`, so that a transfer is a copy from tile i of one IPU to
/// tile i of the next.
TILEBSP_INLINE Tensor receive_buffer(Graph const& shard, Tensor const& t, std::string name);

}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/lower.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/program/pipeline_impl.hpp>
#endif
