// Lowering: turns program values into a flat schedule; plans copies into per-tile-pair transfers and checks
// compute sets (tile locality, write conflicts) as they are first executed.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/plan/cost.hpp>
#include <tilebsp/program/schedule.hpp>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace tilebsp::program::detail {
using core::detail::FieldKind;
using core::detail::Hasher;
using core::detail::GraphImpl;
using core::detail::VariableMapping;
using core::detail::VertexRecord;
using plan::detail::Transfer;

/// Sorted, merged element ranges of variables: the footprint of a tensor, used for overlap checks.
class ElementSet {
 public:
  struct Range {
    std::uint32_t var;
    std::int64_t begin, end;
  };
  /// The footprint of `t`; when `duplicate` is given, the first element seen twice is stored there.
  static ElementSet of(Tensor const& t, std::optional<std::pair<std::uint32_t, std::int64_t>>* duplicate = nullptr);
  /// First shared element, if any.
  std::optional<std::pair<std::uint32_t, std::int64_t>> intersect(ElementSet const& o) const {
    std::size_t i = 0, j = 0;
    while (i < r_.size() && j < o.r_.size()) {
      auto const& a = r_[i];
      auto const& b = o.r_[j];
      if (a.var != b.var) {
        (a.var < b.var ? i : j)++;
        continue;
      }
      std::int64_t const lo = std::max(a.begin, b.begin);
      if (lo < std::min(a.end, b.end)) return std::pair{a.var, lo};
      (a.end < b.end ? i : j)++;
    }
    return std::nullopt;
  }
  void merge(ElementSet const& o);
  std::vector<Range> const& ranges() const noexcept { return r_; }

 private:
  /// Sorts and merges the ranges; reports the first element covered twice through `duplicate`.
  void normalise(std::optional<std::pair<std::uint32_t, std::int64_t>>* duplicate);

  std::vector<Range> r_;
};

enum class LowerMode : std::uint8_t { plan, record };

/// Builds a Schedule from program values. Programs call its methods from their lower() members.
class Lowering {
 public:
  Lowering(GraphImpl const& g, Schedule& s, LowerMode mode = LowerMode::plan);

  GraphImpl const& graph() const noexcept { return g_; }

  void begin_program();
  void end_program();

  void execute(ComputeSet cs);

  void copy(Tensor const& src, Tensor const& dst);

  void sync();
  void stream(Fifo const& f, Tensor const& t, bool to_device);
  void host(std::function<void(HostContext&)> fn);
  /// A cross-replica reduction of `t` in place (Op::collective; `op` is a CollectiveOp). Not inside a pipeline
  /// stage: throws error there; throws for an empty tensor, another graph's, a constant or repeated elements.
  void all_reduce(Tensor const& t, std::uint8_t op, std::string name);

  /// repeat(n, body): begin, lower the body, end.
  std::size_t begin_repeat(std::size_t n);
  void end_repeat(std::size_t begin_pc);
  /// Emits a conditional branch on `flag` whose target is patched later with patch().
  std::size_t branch_if_false(Tensor const& flag);
  std::size_t jump(std::size_t target = 0);
  std::size_t here();
  /// host_path(name, kernel, body): begin, lower the body, end. Nothing merges across the span's edges (a copy
  /// after it never joins the body's last superstep), so the body is exactly what the host task replaces. The
  /// body is straight-line supersteps (compute sets, copies, syncs: no repeat, branch, stream, host callback or
  /// nested host path): where the task runs, the model still counts each of its steps once. Throws error otherwise.
  std::size_t begin_host_path(HostKernel kernel, std::string name);
  void end_host_path(std::size_t begin_pc);
  /// A pipeline stage's code (see Branch): begin_branch, lower the stage, end_branch. The stage must touch only
  /// IPU `ipu`: end_branch throws mapping_error naming what it touches or reads elsewhere (in plan mode). Branches
  /// do not nest. Returns the branch's index.
  std::uint32_t begin_branch(std::uint32_t ipu, std::uint32_t stage, std::uint32_t slot);
  void end_branch(std::uint32_t branch);
  /// Emits a step that runs `branches` (indices begin_branch returned) concurrently, then syncs their IPUs.
  void parallel(std::vector<std::uint32_t> branches, std::uint32_t slots);
  void patch(std::size_t pc, std::size_t target) { prog_->code[pc].b = static_cast<std::int32_t>(target); }
  void add_loop(std::size_t begin_pc, std::size_t end_pc) { prog_->loops.push_back({begin_pc, end_pc}); }
  /// Plans every compute set that has vertices now, on up to `threads` host threads (compile calls it before it
  /// lowers the programs; each plan depends on the graph alone, so the schedule is the same for any number of
  /// threads). A compute set's error is thrown when a program executes it, as without planning ahead. A vertex's
  /// cycle estimate may so run on several threads at once: it must not write shared state.
  void plan_compute_sets(std::size_t threads);
  /// The same, calling progress(planned, total) on this thread as it goes.
  void plan_compute_sets(std::size_t threads, std::function<void(std::size_t, std::size_t)> const& progress);
  /// In record mode: the hash of the copies' source and destination tensors, in program order.
  Hasher const& copies_hash() const noexcept { return copies_; }

 private:
  void flush();
  std::size_t emit(Instr i) {
    prog_->code.push_back(i);
    return prog_->code.size() - 1;
  }
  std::int32_t slot(Tensor const& t) {
    s_.slots.push_back(t);
    return static_cast<std::int32_t>(s_.slots.size() - 1);
  }
  void check_graph(char const* op, Tensor const& t) const {
    if (!t.valid()) throw error(std::string(op) + ": the tensor is empty (default-constructed)");
    if (t.graph_id() != g_.id) throw error(std::string(op) + ": the tensor belongs to another graph");
  }
  void check_writable(char const* op, ElementSet const& d,
                      std::optional<std::pair<std::uint32_t, std::int64_t>> const& dup) const;

  /// Throws mapping_error when the code of branch `b` touches a tile outside its IPU or reads data there.
  void check_branch(Branch const& b) const;

  /// Element-wise copy pieces split at every change of source or destination tile.
  std::vector<Transfer> plan_copy(Tensor const& src, Tensor const& dst) const;

  /// Checks a compute set's vertices (locality, conflicts), estimates cycles, and orders them by tile.
  ComputeSetPlan plan_compute_set(std::uint32_t cs) const;
  static bool reads_(FieldKind k) { return core::detail::reads(k); }
  static bool writes_(FieldKind k) { return core::detail::writes(k); }


  /// Elements of a variable that a vertex's field reads or writes: blocks of `len` elements starting at begin,
  /// begin + step, ... (the last block ends at `end`). Dense: step 1 and len 1 ([begin, end)); a progression of
  /// single elements: len 1 (a strided run, listed ascending); blocks: 1 < len < step (a field's runs of one length
  /// at one distance, as the rows of a block of channels at successive positions: one entry, not one per row).
  struct Access {
    std::uint32_t var, len;
    std::int64_t begin, end, step;
    std::uint32_t vertex, field;
  };
  /// Adds run r of field `field` of vertex `vertex` to `list`, joining it to the entry before when that is the
  /// same field's and r continues it (adjacent, or one more block at the same distance).
  static void add_access(std::vector<Access>& list, core::detail::Run const& r, std::uint32_t vertex,
                         std::uint32_t field);
  /// What check_conflicts found out about the writes of a compute set.
  struct WriteSummary {
    std::vector<std::uint32_t> written;  ///< the variables written, sorted
    std::vector<std::uint32_t> covered;  ///< those whose every element is written (sorted)
  };

  /// Throws write_conflict_error where two vertices write one element or one reads what another writes. Sorts
  /// `writes` by (variable, first element).
  WriteSummary check_conflicts(std::string const& cs, std::vector<Access> const& reads,
                               std::vector<Access>& writes) const;

  GraphImpl const& g_;
  Schedule& s_;
  ProgramCode* prog_ = nullptr;
  std::vector<std::vector<std::uint32_t>> by_cs_;
  std::vector<std::int32_t> cs_plan_;
  /// Plans made ahead by plan_compute_sets (or the error planning threw, thrown when the compute set is executed).
  std::vector<std::optional<ComputeSetPlan>> planned_;
  std::vector<std::exception_ptr> plan_errors_;
  std::optional<Instr> pending_;
  LowerMode mode_;
  Hasher copies_;
  ElementSet ex_src_, ex_dst_;
  bool exchange_staged_ = false;
  std::optional<std::uint32_t> branch_;  ///< the branch being lowered
};

}  // namespace tilebsp::program::detail

namespace tilebsp {
/// What a program's lower() receives (ProgramLike): the schedule being built. A program node lowers itself by
/// calling execute(cs), copy(src, dst), sync(), stream(fifo, tensor, to_device), host(fn), begin_repeat(n) /
/// end_repeat(begin), branch_if_false(flag) / jump() / here() / patch(), begin_host_path() / end_host_path(), or the
/// lower() of the programs it holds. Users write program nodes against this name; its class is an internal.
using Lowering = program::detail::Lowering;
}  // namespace tilebsp

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/lower.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/program/lower_impl.hpp>
#endif
