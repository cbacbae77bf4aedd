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
inline Tensor receive_buffer(Graph const& shard, Tensor const& t, std::string name) {
  Graph g = shard;
  Tensor r = g.add_variable(t.element_type(), t.shape(), std::move(name));
  Tensor const flat = r.flatten();
  std::size_t const per = shard.target().tiles_per_ipu;
  auto const unmapped = core::detail::for_each_mapped(shard.impl(), t, [&](std::int64_t b, std::int64_t e, std::uint32_t tile) {
    g.set_tile_mapping(flat.slice(static_cast<std::size_t>(b), static_cast<std::size_t>(e)), tile % per);
  });
  if (unmapped > 0)
    throw mapping_error("receive_buffer: " + std::to_string(unmapped) + " of " + std::to_string(t.num_elements()) +
                        " elements of the source are not mapped to any tile");
  return r;
}

// ---------------------------------------------------------------------------------------------------------------

inline Pipeline::Pipeline(PipelineOptions options, std::vector<Stage> stages)
    : options_(options), stages_(std::move(stages)) {
  std::size_t const K = stages_.size(), M = options_.micro_batches;
  if (K == 0) throw option_error("pipeline: a pipeline needs at least one stage");
  if (M == 0) throw option_error("pipeline: the micro-batch count (gradient accumulation count) must be at least 1");
  if (M < K)
    throw option_error("pipeline: " + std::to_string(M) + " micro-batches for " + std::to_string(K) +
                       " stages; a pipeline needs at least as many micro-batches as stages");
  std::vector<std::size_t> ipus;
  for (std::size_t k = 0; k < K; ++k) {
    auto const& s = stages_[k];
    if (s.shard.id() != stages_[0].shard.id()) throw error("pipeline: the stages belong to different graphs");
    if (s.shard.num_tiles() != s.shard.target().tiles_per_ipu)
      throw option_error("pipeline: stage " + std::to_string(k) + "'s graph must be one IPU's shard view (g.shard(i)), "
                         "not a view of " + std::to_string(s.shard.num_tiles()) + " tiles");
    auto const at = std::find(ipus.begin(), ipus.end(), s.ipu());
    slot_.push_back(static_cast<std::uint32_t>(at - ipus.begin()));
    if (at == ipus.end()) ipus.push_back(s.ipu());
  }
  slots_ = static_cast<std::uint32_t>(ipus.size());
  for (std::size_t k = 0; k < K; ++k) {
    auto& s = stages_[k];
    for (auto const& r : s.receives) {
      std::string const who = "pipeline: stage " + std::to_string(k) + " receives";
      if (!r.src.valid() || !r.dst.valid()) throw error(who + " an empty (default-constructed) tensor");
      if (r.src.graph_id() != s.shard.id() || r.dst.graph_id() != s.shard.id())
        throw error(who + " a tensor of another graph");
      if (r.src.element_type() != r.dst.element_type())
        throw type_error(who + " " + std::string(name_of(r.src.element_type())) + " data into " +
                         std::string(name_of(r.dst.element_type())) + " data");
      if (r.src.shape() != r.dst.shape())
        throw shape_error(who + " a tensor of shape " + to_string(r.src.shape()) + " into one of shape " +
                          to_string(r.dst.shape()));
      std::size_t const from = r.from.value_or(k == 0 ? k : k - 1);
      if (from >= k)
        throw option_error(who + " from stage " + std::to_string(from) + ", which is not an earlier stage");
      // A chain over the distance: src -> buffer 1 -> ... -> dst, link j carrying micro-batch t - from - (j - 1).
      std::size_t const d = k - from;
      std::vector<Tensor> chain{r.src};
      for (std::size_t j = 1; j < d; ++j) {
        Graph shard = s.shard;
        Tensor b = shard.add_variable(r.dst.element_type(), r.dst.shape(), "pipeline.stash" + std::to_string(j));
        shard.set_tile_mapping_like(b, r.dst);
        chain.push_back(b);
      }
      chain.push_back(r.dst);
      for (std::size_t j = d; j >= 1; --j)  // the far end first: each link moves the value before it is replaced
        links_.push_back({chain[j - 1], chain[j], from + j - 1, M - 2 + from + j});
    }
  }
}

inline void Pipeline::transfers(Lowering& l, std::size_t step) const {
  for (auto const& x : links_)
    if (x.first <= step && step <= x.last) l.copy(x.src, x.dst);
}

inline void Pipeline::lower(Lowering& l) const {
  std::size_t const K = stages_.size(), M = options_.micro_batches;
  // The stages' code, once each, out of line: the steps call it.
  std::size_t const skip = l.jump();
  std::vector<std::uint32_t> branch(K);
  for (std::size_t k = 0; k < K; ++k) {
    branch[k] = l.begin_branch(static_cast<std::uint32_t>(stages_[k].ipu()), static_cast<std::uint32_t>(k), slot_[k]);
    stages_[k].body.lower(l);
    l.end_branch(branch[k]);
  }
  l.patch(skip, l.here());
  auto const step = [&](std::size_t t) {
    std::vector<std::uint32_t> active;
    for (std::size_t k = 0; k < K; ++k)
      if (k <= t && t < M + k) active.push_back(branch[k]);
    l.parallel(std::move(active), slots_);
    transfers(l, t);
  };
  for (std::size_t t = 0; t + 1 < K; ++t) step(t);  // ramp-up
  if (M - K + 1 > 1) {  // every stage busy: the sharded loop
    std::size_t const r = l.begin_repeat(M - K + 1);
    step(K - 1);
    l.end_repeat(r);
  } else {
    step(K - 1);
  }
  for (std::size_t t = M; t + 1 < M + K; ++t) step(t);  // ramp-down
}

}  // namespace tilebsp
