// The lowering's definitions: included by <tilebsp/program/lower.hpp> (header-only) or compiled once into
// tilebsp::compiled (src/lower.cpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/detail/parallel.hpp>
#include <tilebsp/program/compute_set_impl.hpp>
#include <tilebsp/program/detail/pieces.hpp>
#include <tilebsp/program/lower.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace tilebsp::program::detail {

TILEBSP_INLINE ElementSet ElementSet::of(Tensor const& t, std::optional<std::pair<std::uint32_t, std::int64_t>>* duplicate) {
  ElementSet s;
  t.for_each_run([&](std::uint32_t var, std::int64_t start, std::int64_t stride, std::int64_t count) {
    if (stride == 1) {
      s.r_.push_back({var, start, start + count});
    } else if (stride == 0) {
      s.r_.push_back({var, start, start + 1});
      if (count > 1 && duplicate && !*duplicate) *duplicate = std::pair{var, start};
    } else {
      for (std::int64_t i = 0; i < count; ++i) s.r_.push_back({var, start + i * stride, start + i * stride + 1});
    }
  });
  s.normalise(duplicate);
  return s;
}

TILEBSP_INLINE void ElementSet::merge(ElementSet const& o) {
  r_.insert(r_.end(), o.r_.begin(), o.r_.end());
  normalise(nullptr);
}

TILEBSP_INLINE void ElementSet::normalise(std::optional<std::pair<std::uint32_t, std::int64_t>>* duplicate) {
  std::sort(r_.begin(), r_.end(), [](Range const& a, Range const& b) {
    return std::tie(a.var, a.begin) < std::tie(b.var, b.begin);
  });
  std::vector<Range> merged;
  for (auto const& x : r_) {
    if (!merged.empty() && merged.back().var == x.var && x.begin <= merged.back().end) {
      if (x.begin < merged.back().end && duplicate && !*duplicate) *duplicate = std::pair{x.var, x.begin};
      merged.back().end = std::max(merged.back().end, x.end);
    } else {
      merged.push_back(x);
    }
  }
  r_ = std::move(merged);
}
// Besides the names lower.hpp imports:
using core::detail::FieldBinding;
using core::detail::Run;
using plan::detail::default_vertex_cycles;
using plan::detail::ExchangeLoad;

TILEBSP_INLINE void Lowering::execute(ComputeSet cs) {
  if (cs.graph != g_.id) throw error("execute: the compute set belongs to another graph");
  if (cs.id >= g_.compute_sets.size()) throw index_error("execute: unknown compute set " + std::to_string(cs.id));
  flush();
  if (cs_plan_[cs.id] < 0 && mode_ == LowerMode::record) {
    cs_plan_[cs.id] = static_cast<std::int32_t>(s_.compute_sets.size());
    s_.compute_sets.emplace_back().id = cs.id;  // planned by the cache's entry
  } else if (cs_plan_[cs.id] < 0) {
    if (cs.id < plan_errors_.size() && plan_errors_[cs.id]) std::rethrow_exception(plan_errors_[cs.id]);
    ComputeSetPlan plan = cs.id < planned_.size() && planned_[cs.id] ? std::move(*planned_[cs.id]) : plan_compute_set(cs.id);
    cs_plan_[cs.id] = static_cast<std::int32_t>(s_.compute_sets.size());
    s_.compute_sets.push_back(std::move(plan));
  }
  pending_ = Instr{Op::superstep, cs_plan_[cs.id], -1, 0};
}

TILEBSP_INLINE void Lowering::copy(Tensor const& src, Tensor const& dst) {
  check_graph("copy", src);
  check_graph("copy", dst);
  std::optional<std::pair<std::uint32_t, std::int64_t>> dup;
  ElementSet const d = ElementSet::of(dst, &dup);
  check_writable("copy", d, dup);
  ElementSet const sset = ElementSet::of(src);
  std::vector<Transfer> transfers;
  if (mode_ == LowerMode::record) {
    copies_.tensor(src);
    copies_.tensor(dst);
    bool any = false;
    copy_pieces(src, dst, [&](Run const&, Run const&, std::int64_t, std::int64_t, std::int64_t) { any = true; });
    if (!any) return;
  } else {
    transfers = plan_copy(src, dst);
    if (transfers.empty()) return;  // copy of a tensor onto itself
  }
  bool const self_overlap = sset.intersect(d).has_value();
  if (pending_ && pending_->b >= 0 && !self_overlap && !exchange_staged_ && !d.intersect(ex_src_) &&
      !d.intersect(ex_dst_) && !sset.intersect(ex_dst_)) {
    auto& ex = s_.exchanges[static_cast<std::size_t>(pending_->b)];
    ex.transfers.insert(ex.transfers.end(), transfers.begin(), transfers.end());
    ex_src_.merge(sset);
    ex_dst_.merge(d);
    return;
  }
  if (!pending_ || pending_->b >= 0) {
    flush();
    pending_ = Instr{Op::superstep, -1, -1, 0};
  }
  pending_->b = static_cast<std::int32_t>(s_.exchanges.size());
  s_.exchanges.push_back(ExchangePlan{std::move(transfers), self_overlap, 0, 0, {}, {}});
  ex_src_ = sset;
  ex_dst_ = d;
  exchange_staged_ = self_overlap;
}

TILEBSP_INLINE void Lowering::stream(Fifo const& f, Tensor const& t, bool to_device) {
  check_graph(to_device ? "stream_in" : "stream_out", t);
  if (f.graph != g_.id) throw error("stream: the FIFO belongs to another graph");
  if (to_device) {
    std::optional<std::pair<std::uint32_t, std::int64_t>> dup;
    check_writable("stream_in", ElementSet::of(t, &dup), dup);
  }
  flush();
  emit({to_device ? Op::stream_in : Op::stream_out, static_cast<std::int32_t>(f.id), slot(t), 0});
  if (std::find(prog_->fifos.begin(), prog_->fifos.end(), f.id) == prog_->fifos.end()) prog_->fifos.push_back(f.id);
}

TILEBSP_INLINE void Lowering::host(std::function<void(HostContext&)> fn) {
  flush();
  s_.callbacks.push_back(std::move(fn));
  emit({Op::host, static_cast<std::int32_t>(s_.callbacks.size() - 1)});
}

TILEBSP_INLINE void Lowering::all_reduce(Tensor const& t, std::uint8_t op, std::string name) {
  check_graph("all_reduce", t);
  if (branch_)
    throw error("all_reduce: '" + name + "' is inside pipeline stage " + std::to_string(s_.branches[*branch_].stage) +
                "; reduce across replicas after the pipeline (the stages' sums are complete there)");
  std::optional<std::pair<std::uint32_t, std::int64_t>> dup;
  check_writable("all_reduce", ElementSet::of(t, &dup), dup);
  flush();
  s_.collectives.push_back({op, slot(t), std::move(name)});
  emit({Op::collective, static_cast<std::int32_t>(s_.collectives.size() - 1)});
}

TILEBSP_INLINE std::size_t Lowering::begin_repeat(std::size_t n) {
  flush();
  auto const counter = static_cast<std::int32_t>(s_.counters++);
  return emit({Op::repeat_begin, counter, -1, static_cast<std::int64_t>(n)});
}

TILEBSP_INLINE void Lowering::end_repeat(std::size_t begin_pc) {
  flush();
  auto& b = prog_->code[begin_pc];
  std::size_t const end_pc = emit({Op::repeat_end, b.a, static_cast<std::int32_t>(begin_pc + 1), 0});
  prog_->code[begin_pc].b = static_cast<std::int32_t>(end_pc + 1);
  prog_->loops.push_back({begin_pc, end_pc});
}

TILEBSP_INLINE std::size_t Lowering::branch_if_false(Tensor const& flag) {
  check_graph("branch", flag);
  flush();
  return emit({Op::branch_if_false, slot(flag), -1, 0});
}

TILEBSP_INLINE std::size_t Lowering::begin_host_path(HostKernel kernel, std::string name) {
  flush();
  s_.host_paths.push_back({std::move(kernel), std::move(name)});
  return emit({Op::host_path, static_cast<std::int32_t>(s_.host_paths.size() - 1), -1, 0});
}

TILEBSP_INLINE void Lowering::end_host_path(std::size_t begin_pc) {
  flush();
  for (std::size_t pc = begin_pc + 1; pc < prog_->code.size(); ++pc)
    if (Op const op = prog_->code[pc].op; op != Op::superstep && op != Op::sync)
      throw error("host_path: the body of '" + s_.host_paths[static_cast<std::size_t>(prog_->code[begin_pc].a)].name +
                  "' is not straight-line supersteps (it has a repeat, branch, stream, host callback, collective or host path)");
  patch(begin_pc, prog_->code.size());
}

TILEBSP_INLINE void Lowering::flush() {
  if (pending_ && pending_->b >= 0) {
    std::vector<std::uint32_t> src;
    for (auto const& r : ex_src_.ranges())
      if (src.empty() || src.back() != r.var) src.push_back(r.var);
    s_.exchanges[static_cast<std::size_t>(pending_->b)].full_writes = covered_variables(g_, ex_dst_.ranges(), src);
  }
  if (pending_) {
    emit(*pending_);
    pending_.reset();
  }
}

TILEBSP_INLINE void Lowering::check_writable(char const* op, ElementSet const& d,
                                             std::optional<std::pair<std::uint32_t, std::int64_t>> const& dup) const {
  if (dup)
    throw write_conflict_error(std::string(op) + ": the destination holds element " + std::to_string(dup->second) +
                               " of '" + g_.variables[dup->first].name +
                               "' more than once (a broadcast view cannot be written)");
  for (auto const& r : d.ranges())
    if (g_.variables[r.var].constant)
      throw error(std::string(op) + ": the destination '" + g_.variables[r.var].name + "' is a constant");
}

TILEBSP_INLINE std::vector<Transfer> Lowering::plan_copy(Tensor const& src, Tensor const& dst) const {
  auto const eb = static_cast<std::uint32_t>(size_of(src.element_type()));
  std::vector<Transfer> out;
  PieceCursor src_cursor, dst_cursor;
  std::vector<std::pair<std::int64_t, std::uint32_t>> sc, dc;
  copy_pieces(src, dst, [&](Run const& a, Run const& b, std::int64_t s0, std::int64_t d0, std::int64_t m) {
    sc.clear();
    dc.clear();
    tile_changes(g_, a.var, s0, a.stride, m, [&](std::int64_t o, std::uint32_t t) { sc.emplace_back(o, t); }, src_cursor);
    tile_changes(g_, b.var, d0, b.stride, m, [&](std::int64_t o, std::uint32_t t) { dc.emplace_back(o, t); }, dst_cursor);
    std::size_t p = 0, q = 0;
    std::int64_t o = 0;
    while (o < m) {
      while (p + 1 < sc.size() && sc[p + 1].first <= o) ++p;
      while (q + 1 < dc.size() && dc[q + 1].first <= o) ++q;
      std::int64_t next = m;
      if (p + 1 < sc.size()) next = std::min(next, sc[p + 1].first);
      if (q + 1 < dc.size()) next = std::min(next, dc[q + 1].first);
      out.push_back({a.var, b.var, s0 + o * a.stride, a.stride, d0 + o * b.stride, b.stride, next - o, sc[p].second,
                     dc[q].second, eb});
      o = next;
    }
  });
  return out;
}

TILEBSP_INLINE Lowering::Lowering(GraphImpl const& g, Schedule& s, LowerMode mode)
    : g_(g), s_(s), cs_plan_(g.compute_sets.size(), -1), mode_(mode) {
  by_cs_.resize(g.compute_sets.size());
  for (std::uint32_t i = 0; i < g.vertices.size(); ++i) by_cs_[g.vertices[i].compute_set].push_back(i);
}

TILEBSP_INLINE void Lowering::plan_compute_sets(std::size_t threads) { plan_compute_sets(threads, {}); }

TILEBSP_INLINE void Lowering::plan_compute_sets(std::size_t threads,
                                                std::function<void(std::size_t, std::size_t)> const& progress) {
  std::size_t const n = g_.compute_sets.size();
  planned_.assign(n, std::nullopt);
  plan_errors_.assign(n, nullptr);
  // The largest compute sets first (by vertices): the last ones taken are small, so the threads finish together
  // rather than one planning a large compute set alone at the end. Each plan is its own, so the order changes
  // nothing else.
  std::vector<std::uint32_t> order(n);
  for (std::size_t cs = 0; cs < n; ++cs) order[cs] = static_cast<std::uint32_t>(cs);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return by_cs_[a].size() > by_cs_[b].size(); });
  // The calling thread (thread 0) plans too, and reports how many compute sets were taken. A compute set's error
  // is kept for when it is executed.
  core::detail::parallel_for(threads, n, 1, [&](std::size_t k, std::size_t thread) {
    if (thread == 0 && progress) progress(k, n);
    std::uint32_t const cs = order[k];
    if (by_cs_[cs].empty()) return;  // nothing to plan ahead: planned when executed
    try {
      planned_[cs] = plan_compute_set(cs);
    } catch (...) {
      plan_errors_[cs] = std::current_exception();
    }
  });
  if (progress) progress(n, n);
}

TILEBSP_INLINE void Lowering::begin_program() {
  s_.programs.emplace_back();
  prog_ = &s_.programs.back();
}

TILEBSP_INLINE void Lowering::end_program() {
  flush();
  if (branch_) throw error("pipeline: a stage's code was left open (begin_branch without end_branch)");
}

TILEBSP_INLINE std::uint32_t Lowering::begin_branch(std::uint32_t ipu, std::uint32_t stage, std::uint32_t slot) {
  if (branch_) throw error("pipeline: pipelines do not nest (a stage's program holds a pipeline)");
  if (ipu >= g_.target.ipus)
    throw index_error("pipeline: stage " + std::to_string(stage) + " is on IPU " + std::to_string(ipu) +
                      ", out of range (target '" + g_.target.name + "' has " + std::to_string(g_.target.ipus) + " IPUs)");
  flush();
  Branch b;
  b.begin = static_cast<std::uint32_t>(prog_->code.size());
  b.program = static_cast<std::uint32_t>(s_.programs.size() - 1);
  b.ipu = ipu, b.stage = stage, b.slot = slot;
  s_.branches.push_back(b);
  branch_ = static_cast<std::uint32_t>(s_.branches.size() - 1);
  return *branch_;
}

TILEBSP_INLINE void Lowering::end_branch(std::uint32_t branch) {
  flush();
  auto& b = s_.branches[branch];
  b.end = static_cast<std::uint32_t>(prog_->code.size());
  branch_.reset();
  if (mode_ == LowerMode::plan) check_branch(b);
}

TILEBSP_INLINE void Lowering::parallel(std::vector<std::uint32_t> branches, std::uint32_t slots) {
  if (branch_) throw error("pipeline: pipelines do not nest (a stage's program holds a pipeline)");
  flush();
  s_.parallels.push_back({std::move(branches), slots});
  emit({Op::parallel, static_cast<std::int32_t>(s_.parallels.size() - 1), -1, 0});
}

TILEBSP_INLINE void Lowering::check_branch(Branch const& b) const {
  auto const& t = g_.target;
  std::string const who = "pipeline: stage " + std::to_string(b.stage) + " (IPU " + std::to_string(b.ipu) + ")";
  auto const touches = [&](std::string const& what, std::size_t tile) {
    throw mapping_error(who + " " + what + " on tile " + std::to_string(tile) + " of IPU " +
                        std::to_string(t.ipu_of(tile)) + ", a shard the stage was not given");
  };
  auto const reads = [&](std::uint32_t var, std::size_t tile) {
    throw mapping_error(who + " reads '" + g_.variables[var].name + "', which lives on IPU " +
                        std::to_string(t.ipu_of(tile)) + " (tile " + std::to_string(tile) +
                        "), without a pipeline transfer: receive it into a tensor on IPU " + std::to_string(b.ipu) +
                        " (tb::receive)");
  };
  // The first element of `x` outside the stage's IPU: (its variable, its tile), or tile -1.
  auto const foreign = [&](Tensor const& x) {
    std::pair<std::uint32_t, std::int64_t> found{0, -1};
    for_each_tile_of(g_, x, [&](std::uint32_t var, std::uint32_t tile, std::int64_t) {
      if (t.ipu_of(tile) == b.ipu) return true;
      found = {var, tile};
      return false;
    });
    return found;
  };
  for (std::size_t pc = b.begin; pc < b.end; ++pc) {
    auto const& in = prog_->code[pc];
    if (in.op == Op::parallel) throw error("pipeline: pipelines do not nest (a stage's program holds a pipeline)");
    if (in.op == Op::superstep && in.a >= 0) {
      auto const& cs = s_.compute_sets[static_cast<std::size_t>(in.a)];
      if (cs.ipus.size() == 1 && cs.ipus[0] == b.ipu) continue;
      std::string const name = "compute set '" + g_.compute_sets[cs.id] + "'";
      for (std::uint32_t vi : by_cs_[cs.id])
        if (auto const tile = static_cast<std::size_t>(g_.vertices[vi].tile); t.ipu_of(tile) != b.ipu)
          touches("runs " + name + ", which has a vertex", tile);
      for (std::uint32_t vi : by_cs_[cs.id]) {  // then a fetched field reads another IPU's data
        auto const& rec = g_.vertices[vi];
        for (auto const& f : rec.fields)
          for (auto const& x : rec.tensors_of(f))
            if (auto const [var, tile] = foreign(x); tile >= 0) reads(var, static_cast<std::size_t>(tile));
      }
    }
    if (in.op == Op::superstep && in.b >= 0)
      for (auto const& x : s_.exchanges[static_cast<std::size_t>(in.b)].transfers) {
        if (t.ipu_of(x.dst_tile) != b.ipu) touches("copies into '" + g_.variables[x.dst_var].name + "'", x.dst_tile);
        if (t.ipu_of(x.src_tile) != b.ipu) reads(x.src_var, x.src_tile);
      }
    if (in.op == Op::stream_in || in.op == Op::stream_out || in.op == Op::branch_if_false) {
      Tensor const& x = s_.slots[static_cast<std::size_t>(in.op == Op::branch_if_false ? in.a : in.b)];
      if (auto const [var, tile] = foreign(x); tile >= 0) {
        if (in.op == Op::stream_in) touches("streams into '" + g_.variables[var].name + "'", static_cast<std::size_t>(tile));
        reads(var, static_cast<std::size_t>(tile));
      }
    }
  }
}

TILEBSP_INLINE void Lowering::sync() {
  flush();
  emit({Op::sync});
}

TILEBSP_INLINE std::size_t Lowering::jump(std::size_t target) {
  flush();
  return emit({Op::jump, -1, static_cast<std::int32_t>(target), 0});
}

TILEBSP_INLINE std::size_t Lowering::here() {
  flush();
  return prog_->code.size();
}

TILEBSP_INLINE void check_flag(char const* op, Tensor const& flag) {
  if (!flag.valid()) throw error(std::string(op) + ": the flag tensor is empty (default-constructed)");
  if (flag.element_type() != ElementType::boolean && flag.element_type() != ElementType::i32 &&
      flag.element_type() != ElementType::u32 && flag.element_type() != ElementType::u8)
    throw type_error(std::string(op) + ": the flag must be bool or an integer type, not " +
                     std::string(name_of(flag.element_type())));
  if (flag.num_elements() != 1)
    throw shape_error(std::string(op) + ": the flag must have exactly one element, it has shape " +
                      to_string(flag.shape()));
}

TILEBSP_INLINE void check_stream(char const* op, Fifo const& f, Tensor const& t, bool to_device) {
  if (!t.valid()) throw error(std::string(op) + ": the tensor is empty (default-constructed)");
  if (f.to_device != to_device)
    throw stream_error(std::string(op) + ": the FIFO is " + (f.to_device ? "host-to-device" : "device-to-host"));
  if (f.graph != t.graph_id()) throw error(std::string(op) + ": the FIFO and the tensor belong to different graphs");
  if (f.type != t.element_type())
    throw type_error(std::string(op) + ": the FIFO carries " + std::string(name_of(f.type)) + " but the tensor holds " +
                     std::string(name_of(t.element_type())));
  if (f.elements != t.num_elements())
    throw stream_error(std::string(op) + ": element count mismatch: the FIFO moves " + std::to_string(f.elements) +
                       " elements but the tensor has " + std::to_string(t.num_elements()));
}

}  // namespace tilebsp::program::detail
