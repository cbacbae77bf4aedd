// Lowering: turns program values into a flat schedule; plans copies into per-tile-pair transfers and checks
// compute sets (tile locality, write conflicts) as they are first executed.
#pragma once

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/plan/cost.hpp>
#include <tilebsp/program/schedule.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <unordered_map>
#include <vector>

namespace tilebsp::detail {

/// Sorted, merged element ranges of variables: the footprint of a tensor, used for overlap checks.
class ElementSet {
 public:
  struct Range {
    std::uint32_t var;
    std::int64_t begin, end;
  };
  /// The footprint of `t`; when `duplicate` is given, the first element seen twice is stored there.
  static ElementSet of(Tensor const& t, std::optional<std::pair<std::uint32_t, std::int64_t>>* duplicate = nullptr) {
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
  void merge(ElementSet const& o) {
    r_.insert(r_.end(), o.r_.begin(), o.r_.end());
    normalise(nullptr);
  }
  std::vector<Range> const& ranges() const noexcept { return r_; }

 private:
  /// Sorts and merges the ranges; reports the first element covered twice through `duplicate`.
  void normalise(std::optional<std::pair<std::uint32_t, std::int64_t>>* duplicate) {
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

  std::vector<Range> r_;
};

/// The variables that element ranges sorted by (var, begin) cover entirely, leaving out those in the sorted
/// `except`: ranges may overlap.
template <class R>
std::vector<std::uint32_t> covered_variables(GraphImpl const& g, std::vector<R> const& sorted,
                                             std::vector<std::uint32_t> const& except) {
  std::vector<std::uint32_t> out;
  for (std::size_t i = 0; i < sorted.size();) {
    std::uint32_t const var = sorted[i].var;
    std::int64_t covered = 0, end = 0;
    for (; i < sorted.size() && sorted[i].var == var; ++i) {
      std::int64_t const b = std::max(sorted[i].begin, end);
      if (sorted[i].end > b) covered += sorted[i].end - b;
      end = std::max(end, sorted[i].end);
    }
    if (covered == g.variables[var].size && !std::binary_search(except.begin(), except.end(), var)) out.push_back(var);
  }
  return out;
}

/// The mapping piece last looked up: a compute set's runs mostly fall in the piece of the run before them (a
/// tile's share of a variable), so most lookups need no search of the mapping.
struct PieceCursor {
  std::uint32_t var = ~std::uint32_t{0};
  std::optional<VariableMapping::Cursor> cursor;
  VariableMapping::Piece piece{0, 0, -1};
  VariableMapping::Piece const& at(GraphImpl const& g, std::uint32_t v, std::int64_t i) {
    if (v != var) var = v, cursor.emplace(g.variables[v].mapping), piece = cursor->at(i);
    else if (i < piece.begin || i >= piece.end) piece = cursor->at(i);
    return piece;
  }
};

/// Calls f(offset, tile) at each point along a strided run where the owning tile changes (unmapped elements are
/// skipped): one lookup per piece of the mapping the run crosses, not per element.
template <class F>
void tile_changes(GraphImpl const& g, std::uint32_t var, std::int64_t start, std::int64_t stride, std::int64_t count,
                  F&& f, PieceCursor& cursor) {
  std::int64_t last = -1;
  std::int64_t const last_x = start + (count - 1) * stride;
  for (std::int64_t i = 0; i < count;) {
    auto const& p = cursor.at(g, var, start + i * stride);
    if (p.tile >= 0 && p.tile != last) f(i, static_cast<std::uint32_t>(p.tile));
    if (p.tile >= 0) last = p.tile;
    // The first element past the piece.
    if (stride == 0 || (stride > 0 && p.end > last_x) || (stride < 0 && p.begin <= last_x)) break;
    i = std::max(i + 1, stride > 0 ? (p.end - start + stride - 1) / stride : (start - p.begin) / -stride + 1);
  }
}

/// Builds a Schedule from program values. Programs call its methods from their lower() members.
class Lowering {
 public:
  Lowering(GraphImpl const& g, Schedule& s) : g_(g), s_(s), cs_plan_(g.compute_sets.size(), -1) {
    by_cs_.resize(g.compute_sets.size());
    for (std::uint32_t i = 0; i < g.vertices.size(); ++i) by_cs_[g.vertices[i].compute_set].push_back(i);
  }

  GraphImpl const& graph() const noexcept { return g_; }

  void begin_program() {
    s_.programs.emplace_back();
    prog_ = &s_.programs.back();
  }
  void end_program() { flush(); }

  void execute(ComputeSet cs) {
    if (cs.graph != g_.id) throw error("execute: the compute set belongs to another graph");
    if (cs.id >= g_.compute_sets.size()) throw index_error("execute: unknown compute set " + std::to_string(cs.id));
    flush();
    if (cs_plan_[cs.id] < 0) {
      cs_plan_[cs.id] = static_cast<std::int32_t>(s_.compute_sets.size());
      s_.compute_sets.push_back(plan_compute_set(cs.id));
    }
    pending_ = Instr{Op::superstep, cs_plan_[cs.id], -1, 0};
  }

  void copy(Tensor const& src, Tensor const& dst) {
    check_graph("copy", src);
    check_graph("copy", dst);
    std::optional<std::pair<std::uint32_t, std::int64_t>> dup;
    ElementSet const d = ElementSet::of(dst, &dup);
    check_writable("copy", d, dup);
    ElementSet const sset = ElementSet::of(src);
    auto transfers = plan_copy(src, dst);
    if (transfers.empty()) return;  // copy of a tensor onto itself
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
    s_.exchanges.push_back(ExchangePlan{std::move(transfers), self_overlap, 0, 0, {}});
    ex_src_ = sset;
    ex_dst_ = d;
    exchange_staged_ = self_overlap;
  }

  void sync() {
    flush();
    emit({Op::sync});
  }
  void stream(Fifo const& f, Tensor const& t, bool to_device) {
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
  void host(std::function<void(HostContext&)> fn) {
    flush();
    s_.callbacks.push_back(std::move(fn));
    emit({Op::host, static_cast<std::int32_t>(s_.callbacks.size() - 1)});
  }

  /// repeat(n, body): begin, lower the body, end.
  std::size_t begin_repeat(std::size_t n) {
    flush();
    auto const counter = static_cast<std::int32_t>(s_.counters++);
    return emit({Op::repeat_begin, counter, -1, static_cast<std::int64_t>(n)});
  }
  void end_repeat(std::size_t begin_pc) {
    flush();
    auto& b = prog_->code[begin_pc];
    std::size_t const end_pc = emit({Op::repeat_end, b.a, static_cast<std::int32_t>(begin_pc + 1), 0});
    prog_->code[begin_pc].b = static_cast<std::int32_t>(end_pc + 1);
    prog_->loops.push_back({begin_pc, end_pc});
  }
  /// Emits a conditional branch on `flag` whose target is patched later with patch().
  std::size_t branch_if_false(Tensor const& flag) {
    check_graph("branch", flag);
    flush();
    return emit({Op::branch_if_false, slot(flag), -1, 0});
  }
  std::size_t jump(std::size_t target = 0) {
    flush();
    return emit({Op::jump, -1, static_cast<std::int32_t>(target), 0});
  }
  std::size_t here() {
    flush();
    return prog_->code.size();
  }
  /// host_path(name, kernel, body): begin, lower the body, end. Nothing merges across the span's edges (a copy
  /// after it never joins the body's last superstep), so the body is exactly what the host task replaces.
  std::size_t begin_host_path(HostKernel kernel, std::string name) {
    flush();
    s_.host_paths.push_back({std::move(kernel), std::move(name)});
    return emit({Op::host_path, static_cast<std::int32_t>(s_.host_paths.size() - 1), -1, 0});
  }
  void end_host_path(std::size_t begin_pc) {
    flush();
    patch(begin_pc, prog_->code.size());
  }
  void patch(std::size_t pc, std::size_t target) { prog_->code[pc].b = static_cast<std::int32_t>(target); }
  void add_loop(std::size_t begin_pc, std::size_t end_pc) { prog_->loops.push_back({begin_pc, end_pc}); }

 private:
  void flush() {
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
                      std::optional<std::pair<std::uint32_t, std::int64_t>> const& dup) const {
    if (dup)
      throw write_conflict_error(std::string(op) + ": the destination holds element " + std::to_string(dup->second) +
                                 " of '" + g_.variables[dup->first].name +
                                 "' more than once (a broadcast view cannot be written)");
    for (auto const& r : d.ranges())
      if (g_.variables[r.var].constant)
        throw error(std::string(op) + ": the destination '" + g_.variables[r.var].name + "' is a constant");
  }

  /// Element-wise copy pieces split at every change of source or destination tile.
  std::vector<Transfer> plan_copy(Tensor const& src, Tensor const& dst) const {
    auto const sr = src.runs(), dr = dst.runs();
    auto const eb = static_cast<std::uint32_t>(size_of(src.element_type()));
    std::vector<Transfer> out;
    std::size_t i = 0, j = 0;
    std::int64_t si = 0, dj = 0;  // elements consumed in sr[i], dr[j]
    PieceCursor src_cursor, dst_cursor;
    while (i < sr.size() && j < dr.size()) {
      auto const& a = sr[i];
      auto const& b = dr[j];
      std::int64_t const m = std::min(a.count - si, b.count - dj);
      std::int64_t const s0 = a.start + si * a.stride, d0 = b.start + dj * b.stride;
      if (!(a.var == b.var && s0 == d0 && (a.stride == b.stride || m == 1))) {  // skip copies onto themselves
        std::vector<std::pair<std::int64_t, std::uint32_t>> sc, dc;
        tile_changes(g_, a.var, s0, a.stride, m, [&](std::int64_t o, std::uint32_t t) { sc.emplace_back(o, t); },
                     src_cursor);
        tile_changes(g_, b.var, d0, b.stride, m, [&](std::int64_t o, std::uint32_t t) { dc.emplace_back(o, t); },
                     dst_cursor);
        std::size_t p = 0, q = 0;
        std::int64_t o = 0;
        while (o < m) {
          while (p + 1 < sc.size() && sc[p + 1].first <= o) ++p;
          while (q + 1 < dc.size() && dc[q + 1].first <= o) ++q;
          std::int64_t next = m;
          if (p + 1 < sc.size()) next = std::min(next, sc[p + 1].first);
          if (q + 1 < dc.size()) next = std::min(next, dc[q + 1].first);
          out.push_back({a.var, b.var, s0 + o * a.stride, a.stride, d0 + o * b.stride, b.stride, next - o,
                         sc[p].second, dc[q].second, eb});
          o = next;
        }
      }
      si += m;
      dj += m;
      if (si == a.count) ++i, si = 0;
      if (dj == b.count) ++j, dj = 0;
    }
    return out;
  }

  /// Checks a compute set's vertices (locality, conflicts), estimates cycles, and orders them by tile.
  ComputeSetPlan plan_compute_set(std::uint32_t cs) const {
    ComputeSetPlan plan;
    plan.id = cs;
    std::string const& csname = g_.compute_sets[cs];
    std::vector<Access> reads, writes;
    std::vector<std::uint32_t> vars;
    std::vector<std::pair<std::int64_t, std::uint32_t>> ch;  // tile changes along one run
    // Fetched bytes per (source, destination) tile pair, keyed source << 32 | destination: a hash map, as this
    // is a lookup per run of every fetched field (an ordered map was a large share of compile's time), ordered
    // below.
    std::unordered_map<std::uint64_t, std::int64_t> fetched;
    PieceCursor cursor;
    for (std::uint32_t vi : by_cs_[cs]) {
      auto const& rec = g_.vertices[vi];
      std::string_view const vname = rec.ops->name;  // a string only for a message: the names are long
      PlacedVertex pv;
      pv.record = vi;
      std::int64_t elements = 0;
      for (std::uint32_t fi = 0; fi < rec.fields.size(); ++fi) {
        auto const& f = rec.fields[fi];
        for (std::uint32_t k = 0; k < f.tensors.size(); ++k) {
          auto const& t = f.tensors[k];
          auto runs = t.runs();
          elements += static_cast<std::int64_t>(t.num_elements());
          auto const eb = static_cast<std::uint32_t>(size_of(t.element_type()));
          for (auto const& r : runs) {
            vars.push_back(r.var);
            if (f.fetched) {
              // Pieces on other tiles travel to this one before the compute phase.
              ch.clear();
              tile_changes(g_, r.var, r.start, r.stride, r.count,
                           [&](std::int64_t o, std::uint32_t tile) { ch.emplace_back(o, tile); }, cursor);
              for (std::size_t c = 0; c < ch.size(); ++c) {
                std::int64_t const o = ch[c].first, end = c + 1 < ch.size() ? ch[c + 1].first : r.count;
                auto const dst = static_cast<std::uint32_t>(rec.tile);
                if (ch[c].second != dst) fetched[std::uint64_t{ch[c].second} << 32 | dst] += (end - o) * eb;
              }
            } else {
              tile_changes(g_, r.var, r.start, r.stride, r.count, [&](std::int64_t o, std::uint32_t tile) {
                if (tile != rec.tile)
                  throw mapping_error("compute set '" + csname + "': vertex " + std::string(vname) + " on tile " +
                                      std::to_string(rec.tile) + ": field '" + std::string(f.name) +
                                      "' is connected to element " + std::to_string(r.start + o * r.stride) + " of '" +
                                      g_.variables[r.var].name + "', which is on tile " + std::to_string(tile) +
                                      " (connect it with fetch() to read data from other tiles)");
              }, cursor);
            }
            if (writes_(f.kind) && g_.variables[r.var].constant)
              throw error("compute set '" + csname + "': vertex " + std::string(vname) + " field '" +
                          std::string(f.name) + "' writes the constant '" + g_.variables[r.var].name + "'");
            auto const add = [&](std::vector<Access>& to, std::int64_t b, std::int64_t e) {
              to.push_back({r.var, b, e, vi, fi});
            };
            for (auto* to : {reads_(f.kind) ? &reads : nullptr, writes_(f.kind) ? &writes : nullptr}) {
              if (!to) continue;
              if (r.stride == 1) add(*to, r.start, r.start + r.count);
              else if (r.stride == 0) {
                if (to == &writes && r.count > 1)
                  throw write_conflict_error("compute set '" + csname + "': vertex " + std::string(vname) + " field '" +
                                             std::string(f.name) + "' writes element " + std::to_string(r.start) +
                                             " of '" + g_.variables[r.var].name +
                                             "' more than once (a broadcast view cannot be written)");
                add(*to, r.start, r.start + 1);
              } else {
                for (std::int64_t i = 0; i < r.count; ++i) add(*to, r.start + i * r.stride, r.start + i * r.stride + 1);
              }
            }
          }
          bool const direct = f.rank > 0 ? t.affine().has_value()
                                         : runs.empty() || (runs.size() == 1 && (runs[0].stride == 1 || runs[0].count == 1));
          if (!direct) {
            Staging st;
            st.field = fi;
            st.item = k;
            st.gather = reads_(f.kind);
            st.scatter = writes_(f.kind);
            st.elements = static_cast<std::int64_t>(t.num_elements());
            st.elem_bytes = eb;
            pv.staging.push_back(std::move(st));
          }
        }
      }
      pv.cycles = rec.ops->cycles ? vertex_estimate(rec) : default_vertex_cycles(elements);
      pv.supervisor = rec.ops->supervisor;
      for (auto const& st : pv.staging)  // gathers and scatters cost one worker cycle per element each way
        pv.cycles += static_cast<std::uint64_t>(st.elements) * ((st.gather ? 1 : 0) + (st.scatter ? 1 : 0));
      plan.vertices.push_back(std::move(pv));
    }
    check_conflicts(csname, reads, writes);
    std::vector<std::pair<std::uint64_t, std::int64_t>> pairs(fetched.begin(), fetched.end());
    std::sort(pairs.begin(), pairs.end());
    for (auto const& [tiles, bytes] : pairs)
      plan.fetches.push_back(
          {0, 0, 0, 1, 0, 1, bytes, static_cast<std::uint32_t>(tiles >> 32), static_cast<std::uint32_t>(tiles), 1});
    std::stable_sort(plan.vertices.begin(), plan.vertices.end(), [&](PlacedVertex const& a, PlacedVertex const& b) {
      return g_.vertices[a.record].tile < g_.vertices[b.record].tile;
    });
    // Estimated cycles: the slowest tile.
    std::vector<std::uint64_t> per;
    for (std::size_t i = 0; i < plan.vertices.size();) {
      per.clear();
      std::uint64_t supervisor = 0;
      auto const tile = g_.vertices[plan.vertices[i].record].tile;
      for (; i < plan.vertices.size() && g_.vertices[plan.vertices[i].record].tile == tile; ++i) {
        auto const& pv = plan.vertices[i];
        if (pv.supervisor) supervisor += pv.cycles;
        else per.push_back(pv.cycles);
      }
      plan.cycles = std::max(plan.cycles, tile_compute_cycles(per, g_.target.workers_per_tile, supervisor));
    }
    auto const sorted_vars = [](auto const& accesses) {
      std::vector<std::uint32_t> r;
      for (auto const& a : accesses) r.push_back(a.var);
      std::sort(r.begin(), r.end());
      r.erase(std::unique(r.begin(), r.end()), r.end());
      return r;
    };
    plan.reads = sorted_vars(reads);
    plan.writes = sorted_vars(writes);  // check_conflicts sorted the writes by (var, begin)
    plan.full_writes = covered_variables(g_, writes, plan.reads);
    std::sort(vars.begin(), vars.end());
    vars.erase(std::unique(vars.begin(), vars.end()), vars.end());
    plan.vars = std::move(vars);
    return plan;
  }
  static bool reads_(FieldKind k) { return detail::reads(k); }
  static bool writes_(FieldKind k) { return detail::writes(k); }

  /// The vertex's own estimate, evaluated on a copy whose fields have their sizes but no data.
  std::uint64_t vertex_estimate(VertexRecord const& rec) const {
    auto const* ops = rec.ops;
    std::vector<std::vector<FieldBinding>> lists(rec.fields.size());
    std::vector<FieldBinding> b(rec.fields.size());
    for (std::size_t i = 0; i < rec.fields.size(); ++i) {
      auto const& f = rec.fields[i];
      if (f.kind == FieldKind::input_list) {
        for (auto const& t : f.tensors) lists[i].push_back({nullptr, t.num_elements()});
        b[i] = {lists[i].data(), lists[i].size()};
      } else if (!f.tensors.empty()) {
        b[i] = {nullptr, f.tensors[0].num_elements()};
        for (std::size_t d = 0; d < f.rank; ++d) b[i].shape[d] = f.tensors[0].dim(d);
      }
    }
    std::vector<std::max_align_t> storage((ops->size + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t) + 1);
    void* v = storage.data();
    ops->copy_construct(v, rec.prototype.get());
    ops->bind(v, b.data());
    std::uint64_t const c = ops->cycles(v);
    ops->destroy(v);
    return c;
  }

  struct Access {
    std::uint32_t var;
    std::int64_t begin, end;
    std::uint32_t vertex, field;
  };

  void check_conflicts(std::string const& cs, std::vector<Access> const& reads, std::vector<Access>& writes) const {
    auto const by_pos = [](auto const& a, auto const& b) { return std::tie(a.var, a.begin) < std::tie(b.var, b.begin); };
    std::sort(writes.begin(), writes.end(), by_pos);
    auto const who = [&](auto const& a) {
      auto const& rec = g_.vertices[a.vertex];
      return "vertex " + std::string(rec.ops->name) + " (tile " + std::to_string(rec.tile) + ") field '" +
             std::string(rec.fields[a.field].name) + "'";
    };
    std::vector<std::int64_t> max_end(writes.size());
    for (std::size_t i = 0; i < writes.size(); ++i) {
      auto const& w = writes[i];
      if (i > 0 && writes[i - 1].var == w.var) {
        std::size_t const m = static_cast<std::size_t>(max_end[i - 1]);  // index of the furthest-reaching write
        if (w.begin < writes[m].end && writes[m].vertex != w.vertex)
          throw write_conflict_error("compute set '" + cs + "': " + who(writes[m]) + " and " + who(w) +
                                     " both write element " + std::to_string(w.begin) + " of '" +
                                     g_.variables[w.var].name + "'");
        max_end[i] = w.end > writes[m].end ? static_cast<std::int64_t>(i) : max_end[i - 1];
      } else {
        max_end[i] = static_cast<std::int64_t>(i);
      }
    }
    for (auto const& r : reads) {
      auto it = std::upper_bound(writes.begin(), writes.end(), r, [](auto const& a, auto const& b) {
        return std::tie(a.var, a.end) < std::tie(b.var, b.begin);
      });
      for (auto i = static_cast<std::size_t>(it - writes.begin()); i-- > 0;) {
        auto const& w = writes[i];
        auto const& far = writes[static_cast<std::size_t>(max_end[i])];
        if (w.var != r.var || far.end <= r.begin) break;
        if (w.end > r.begin && w.begin < r.end && w.vertex != r.vertex)
          throw write_conflict_error("compute set '" + cs + "': " + who(r) + " reads element " +
                                     std::to_string(std::max(w.begin, r.begin)) + " of '" + g_.variables[r.var].name +
                                     "', which " + who(w) + " writes in the same compute set");
      }
    }
  }

  GraphImpl const& g_;
  Schedule& s_;
  ProgramCode* prog_ = nullptr;
  std::vector<std::vector<std::uint32_t>> by_cs_;
  std::vector<std::int32_t> cs_plan_;
  std::optional<Instr> pending_;
  ElementSet ex_src_, ex_dst_;
  bool exchange_staged_ = false;
};

}  // namespace tilebsp::detail

namespace tilebsp {
/// What a program's lower() receives (ProgramLike): the schedule being built. A program node lowers itself by
/// calling execute(cs), copy(src, dst), sync(), stream(fifo, tensor, to_device), host(fn), begin_repeat(n) /
/// end_repeat(begin), branch_if_false(flag) / jump() / here() / patch(), begin_host_path() / end_host_path(), or the
/// lower() of the programs it holds. Users write program nodes against this name; its class is an internal.
using Lowering = detail::Lowering;
}  // namespace tilebsp
