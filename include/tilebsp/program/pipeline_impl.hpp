// Pipeline's definitions (checking the stages, lowering the ramp-up, the sharded loop and the ramp-down):
// included by <tilebsp/program/pipeline.hpp> (header-only) or compiled once into tilebsp::compiled (src/lower.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/program/pipeline.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace tilebsp {

TILEBSP_INLINE Tensor receive_buffer(Graph const& shard, Tensor const& t, std::string name) {
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

TILEBSP_INLINE Pipeline::Pipeline(PipelineOptions options, std::vector<Stage> stages)
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

TILEBSP_INLINE void Pipeline::transfers(Lowering& l, std::size_t step) const {
  for (auto const& x : links_)
    if (x.first <= step && step <= x.last) l.copy(x.src, x.dst);
}

TILEBSP_INLINE void Pipeline::lower(Lowering& l) const {
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
