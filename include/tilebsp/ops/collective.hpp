// ops::cross_replica_*: data-parallel collectives (Poplar's GCL all-reduce across replicas) on top of the
// all_reduce program value. Each replica's copy of a tensor becomes the sum, mean or max over all replicas, added
// in replica order: bitwise the same for any host threads and any split of the replicas over processes.
#pragma once

#include <tilebsp/core/graph.hpp>
#include <tilebsp/program/all_reduce.hpp>
#include <tilebsp/program/programs.hpp>

#include <string>

namespace tilebsp::ops {

/// Appends to `prog` the reduction of `t` over the replicas, in place (allReduceInPlaceCrossReplica). Cost in the
/// model: a ring all-reduce over IPU-Links (GW-Links beyond a pod), docs/08-replication.md. Throws type_error for
/// bool tensors and for the mean of integers; write_conflict_error for a broadcast view; error for a constant.
inline void cross_replica_reduce_in_place(Sequence& prog, Tensor const& t, CollectiveOp op,
                                          std::string const& name = "cross_replica") {
  prog.add(all_reduce(t, op, name));
}
/// The same into a new tensor laid out like `t` (t is left as it was).
inline Tensor cross_replica_reduce(Graph& g, Sequence& prog, Tensor const& t, CollectiveOp op,
                                   std::string const& name = "cross_replica") {
  if (!t.valid()) throw error("cross_replica_reduce: the tensor is empty (default-constructed)");
  Tensor out = g.add_variable(t.element_type(), t.shape(), name);
  g.set_tile_mapping_like(out, t);
  AllReduce const r = all_reduce(out, op, name);  // checks the type before anything is added to prog
  prog.add(copy(t, out));
  prog.add(r);
  return out;
}

inline void cross_replica_sum_in_place(Sequence& prog, Tensor const& t, std::string const& name = "cross_replica_sum") {
  cross_replica_reduce_in_place(prog, t, CollectiveOp::sum, name);
}
inline Tensor cross_replica_sum(Graph& g, Sequence& prog, Tensor const& t, std::string const& name = "cross_replica_sum") {
  return cross_replica_reduce(g, prog, t, CollectiveOp::sum, name);
}
inline void cross_replica_mean_in_place(Sequence& prog, Tensor const& t, std::string const& name = "cross_replica_mean") {
  cross_replica_reduce_in_place(prog, t, CollectiveOp::mean, name);
}
inline Tensor cross_replica_mean(Graph& g, Sequence& prog, Tensor const& t, std::string const& name = "cross_replica_mean") {
  return cross_replica_reduce(g, prog, t, CollectiveOp::mean, name);
}
inline void cross_replica_max_in_place(Sequence& prog, Tensor const& t, std::string const& name = "cross_replica_max") {
  cross_replica_reduce_in_place(prog, t, CollectiveOp::max, name);
}

}  // namespace tilebsp::ops
