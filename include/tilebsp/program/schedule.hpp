// The schedule: the IR between compile() and the Engine. A program lowers to flat instructions over planned
// compute sets and exchanges; the Engine binds and interprets them. Its own namespace, tilebsp::schedule, because it
// is the contract between the program and exec layers (docs/10-architecture.md, "The schedule").
#pragma once

#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/tensor.hpp>
#include <tilebsp/plan/cost.hpp>
#include <tilebsp/program/host_context.hpp>
#include <tilebsp/program/host_task.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tilebsp::schedule {
using core::detail::GraphImpl;
using plan::detail::Transfer;

enum class Op : std::uint8_t {
  superstep,        ///< a: compute set plan (-1: none), b: exchange plan (-1: none)
  stream_in,        ///< a: fifo, b: tensor slot
  stream_out,       ///< a: fifo, b: tensor slot
  host,             ///< a: callback
  sync,             ///< a global barrier
  repeat_begin,     ///< a: counter, n: iterations, b: pc after the matching repeat_end
  repeat_end,       ///< a: counter, b: pc of the body's first instruction
  branch_if_false,  ///< a: flag slot, b: target pc; reading the flag costs a sync
  jump,             ///< b: target pc
  host_path,        ///< a: host path; b: pc after its body. Runs the bound task and jumps to b, or runs the body
  parallel,         ///< a: parallel plan. Runs its branches (code ranges elsewhere) concurrently, then a join sync
  collective,       ///< a: collective plan. A cross-replica reduction of a tensor, in place, in every replica
};

struct Instr {
  Op op = Op::sync;
  std::int32_t a = -1;
  std::int32_t b = -1;
  std::int64_t n = 0;
};

/// The copies of one exchange phase; `staged` when a source overlaps a destination (read all, then write).
struct ExchangePlan {
  std::vector<Transfer> transfers;
  bool staged = false;
  std::uint64_t cycles = 0;
  std::uint64_t bytes = 0;
  std::vector<std::uint32_t> full_writes;  ///< variables every element of which the phase writes and none reads
  std::vector<std::uint32_t> ipus;         ///< IPUs whose tiles send or receive (estimate_cycles)
};

/// A vertex field whose data is not one contiguous ascending range: gathered into / scattered from a buffer.
struct Staging {
  std::uint32_t field = 0;
  std::uint32_t item = 0;  ///< list entry for input_list fields
  bool gather = false, scatter = false;
  std::int64_t elements = 0;  ///< the engine derives the element runs from the field's tensor when it binds
  std::uint32_t elem_bytes = 4;
};

struct PlacedVertex {
  std::uint32_t record = 0;
  std::uint64_t cycles = 0;
  bool supervisor = false;
  std::vector<Staging> staging;
};

struct ComputeSetPlan {
  std::uint32_t id = 0;
  std::vector<PlacedVertex> vertices;  ///< ordered by tile
  std::vector<std::uint32_t> vars;     ///< variables the compute set touches (sorted)
  std::vector<std::uint32_t> reads;    ///< variables it reads (sorted)
  std::vector<std::uint32_t> writes;   ///< variables it writes (sorted)
  /// Variables it writes in full without reading any of them: their earlier contents are dead (liveness).
  std::vector<std::uint32_t> full_writes;
  std::uint64_t cycles = 0;
  /// Fetched inputs that live on other tiles: modelled as an exchange before the compute phase, costed when the
  /// compute set is planned (fetch_cycles: the exchange of the bytes summed per pair of source and destination
  /// tiles; fetch_bytes: their total), and temporary memory of the receiving tiles: `fetched_in`, the bytes each
  /// destination tile receives, sorted by tile, emptied by compile() once it has accounted memory. The host reads
  /// fetched data in place. (ResNeXt-101 has 15 million pairs of tiles: kept, they took 1 GB.)
  std::vector<std::pair<std::uint32_t, std::uint64_t>> fetched_in;
  std::uint64_t fetch_cycles = 0, fetch_bytes = 0;
  /// IPUs taking part: those of its vertices and of the tiles they fetch from (sorted).
  std::vector<std::uint32_t> ipus;
};

/// Calls f(tile, cycles) for each tile of `cs` in tile order, with the estimated cycles of its vertices there: the
/// workers' vertices spread over the tile's workers, the supervisor's added (plan::detail::tile_compute_cycles).
/// The compute set's estimate is the largest (the lowering); the profile sums them per tile.
template <class F>
void for_each_tile_cycles(GraphImpl const& g, ComputeSetPlan const& cs, F&& f) {
  std::vector<std::uint64_t> per;
  for (std::size_t i = 0; i < cs.vertices.size();) {
    per.clear();
    std::uint64_t supervisor = 0;
    auto const tile = g.vertices[cs.vertices[i].record].tile;
    for (; i < cs.vertices.size() && g.vertices[cs.vertices[i].record].tile == tile; ++i)
      (cs.vertices[i].supervisor ? supervisor : per.emplace_back()) += cs.vertices[i].cycles;
    f(static_cast<std::uint32_t>(tile), plan::detail::tile_compute_cycles(per, g.target.workers_per_tile, supervisor));
  }
}

struct LoopRange {
  std::size_t begin = 0, end = 0;  ///< instruction indices, inclusive
};

struct ProgramCode {
  std::vector<Instr> code;
  std::vector<std::uint64_t> cycles;  ///< estimated IPU cycles of one execution of each instruction
  std::vector<LoopRange> loops;
  std::vector<std::uint32_t> fifos;   ///< FIFOs the program uses
};

/// A span of program with a host implementation (host_path()): its body follows the host_path instruction.
struct HostPathPlan {
  HostKernel kernel;
  std::string name;
};

/// A pipeline stage's code: instructions [begin, end) of its program, reached only through Op::parallel (a
/// subroutine), touching IPU `ipu` only. `slot` numbers the distinct IPUs of its pipeline (0 .. slots - 1): the
/// Engine runs the branches of one slot on one group of host threads, in stage order.
struct Branch {
  std::uint32_t begin = 0, end = 0;
  std::uint32_t program = 0, ipu = 0, stage = 0, slot = 0;
  std::uint64_t cycles = 0;  ///< estimated cycles of one run (estimate_cycles)
};

/// One step of a pipeline: the branches (indices into Schedule::branches) that run concurrently in it.
struct ParallelPlan {
  std::vector<std::uint32_t> branches;
  std::uint32_t slots = 1;  ///< distinct IPUs of the pipeline (the host groups its threads by them)
};

/// A cross-replica reduction (Op::collective): every replica's `slot` tensor becomes the reduction over replicas
/// 0, 1, ..., R - 1 in that order (program/all_reduce.hpp).
struct CollectivePlan {
  std::uint8_t op = 0;  ///< CollectiveOp
  std::int32_t slot = -1;
  std::string name;
};

/// Everything compile() produced, shared by all programs of one Executable.
struct Schedule {
  std::shared_ptr<GraphImpl const> graph;
  std::vector<ProgramCode> programs;
  std::vector<ComputeSetPlan> compute_sets;
  std::vector<ExchangePlan> exchanges;
  std::vector<Tensor> slots;
  std::vector<std::function<void(HostContext&)>> callbacks;
  std::vector<HostPathPlan> host_paths;
  std::vector<Branch> branches;
  std::vector<ParallelPlan> parallels;
  std::vector<CollectivePlan> collectives;
  std::size_t counters = 0;
  std::size_t replicas = 1;  ///< CompileOptions::replicas
};

}  // namespace tilebsp::schedule

namespace tilebsp::program::detail {
// The program layer writes the schedule; its code names the IR's types as its own.
using schedule::Branch;
using schedule::CollectivePlan;
using schedule::ComputeSetPlan;
using schedule::ExchangePlan;
using schedule::for_each_tile_cycles;
using schedule::HostPathPlan;
using schedule::Instr;
using schedule::LoopRange;
using schedule::Op;
using schedule::ParallelPlan;
using schedule::PlacedVertex;
using schedule::ProgramCode;
using schedule::Schedule;
using schedule::Staging;
}  // namespace tilebsp::program::detail
