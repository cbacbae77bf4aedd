// Binding: the schedule's compute-set and exchange plans turned into copy lists and work items for a team of
// host threads, once per team size, when the Engine is made. Part of the Engine's definitions (exec/engine_impl.hpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/exec/detail/engine_core.hpp>

#include <vector>

namespace tilebsp {

TILEBSP_INLINE void exec::detail::EngineCore::bind_host_paths() {
  // Pairs to fuse: host path i whose body is followed directly by host path j, where i writes exactly the range
  // that j computes element by element, and no jump or branch lands on j (it runs only after i).
  std::vector<std::int32_t> follower(s_.host_paths.size(), -1);
  fused_end_.assign(s_.host_paths.size(), 0);
  if (host_kernels_ && fuse_host_paths_) {
    for (std::size_t pi = 0; pi < s_.programs.size(); ++pi) {
      auto const& code = s_.programs[pi].code;
      std::vector<bool> target(code.size() + 1, false);
      for (auto const& in : code)
        if (in.op == schedule::Op::repeat_begin || in.op == schedule::Op::repeat_end || in.op == schedule::Op::branch_if_false ||
            in.op == schedule::Op::jump)
          target[static_cast<std::size_t>(in.b)] = true;
      for (auto const& b : s_.branches)
        if (b.program == pi) target[b.begin] = target[b.end] = true;
      for (auto const& in : code) {
        if (in.op != schedule::Op::host_path) continue;
        auto const next = static_cast<std::size_t>(in.b);
        if (next >= code.size() || code[next].op != schedule::Op::host_path || target[next]) continue;
        auto const& first = s_.host_paths[static_cast<std::size_t>(in.a)].kernel;
        auto const& second = s_.host_paths[static_cast<std::size_t>(code[next].a)].kernel;
        if (first.writes && first.bind_with && second.elementwise && second.bind_elements && *first.writes == *second.elementwise) {
          follower[static_cast<std::size_t>(in.a)] = code[next].a;
          fused_end_[static_cast<std::size_t>(in.a)] = static_cast<std::uint32_t>(code[next].b);
        }
      }
    }
  }
  for (auto& r : reps_) {
    HostBinding const at{[&r](std::uint32_t var) { return r.data.at(var).get(); },
                         [&r](std::uint32_t var) { return r.host_writes.at(var) ? &*r.host_writes[var] : nullptr; }, threads_};
    for (auto const& hp : s_.host_paths) r.paths.push_back(host_kernels_ && hp.kernel ? hp.kernel.bind(at) : HostTask{});
    for (std::size_t i = 0; i < follower.size(); ++i) {
      if (follower[i] < 0 || !r.paths[i] || !r.paths[static_cast<std::size_t>(follower[i])]) {
        fused_end_[i] = 0;
        continue;
      }
      auto const& second = s_.host_paths[static_cast<std::size_t>(follower[i])].kernel;
      Epilogue epilogue = second.bind_elements(at);
      HostTask fused = epilogue ? s_.host_paths[i].kernel.bind_with(at, std::move(epilogue), second.column_op) : HostTask{};
      if (fused) r.paths[i] = std::move(fused);
      else fused_end_[i] = 0;
    }
  }
  // A pair fuses in every replica or in none (replicas run in lockstep); unfused, i's task is its own.
  fused_away_.assign(s_.host_paths.size(), false);
  for (std::size_t i = 0; i < follower.size(); ++i)
    if (follower[i] >= 0 && fused_end_[i]) fused_away_[static_cast<std::size_t>(follower[i])] = true;
    else if (follower[i] >= 0)
      for (auto& r : reps_) {
        HostBinding const at{[&r](std::uint32_t var) { return r.data.at(var).get(); },
                             [&r](std::uint32_t var) { return r.host_writes.at(var) ? &*r.host_writes[var] : nullptr; }, threads_};
        r.paths[i] = s_.host_paths[i].kernel.bind(at);
      }
}

TILEBSP_INLINE void exec::detail::EngineCore::mark_program_writes() {
  std::vector<bool> written(g_.variables.size(), false);
  for (auto const& cs : s_.compute_sets)
    for (auto v : cs.writes) written[v] = true;
  for (auto const& ex : s_.exchanges)
    for (auto const& tr : ex.transfers) written[tr.dst_var] = true;
  for (auto const& p : s_.programs)
    for (auto const& in : p.code)
      if (in.op == schedule::Op::stream_in)
        for (auto const& r : s_.slots[static_cast<std::size_t>(in.b)].runs()) written[r.var] = true;
  for (std::size_t v = 0; v < written.size(); ++v)
    for (auto const& c : s_.collectives)
      s_.slots[static_cast<std::size_t>(c.slot)].for_each_run(
          [&](std::uint32_t var, std::int64_t, std::int64_t, std::int64_t) { written[var] = true; });
  for (auto& r : reps_) {
    r.host_writes.resize(g_.variables.size());
    for (std::size_t v = 0; v < written.size(); ++v)
      if (!written[v]) r.host_writes[v] = 1;
  }
}

TILEBSP_INLINE std::vector<exec::detail::CopyOp> exec::detail::EngineCore::tensor_ops(std::size_t local, std::vector<core::detail::Run> const& runs, std::byte* buffer,
                                                             std::uint32_t eb, bool to_buffer) const {
  std::vector<exec::detail::CopyOp> ops;
  std::int64_t off = 0;
  for (auto const& r : runs) {
    std::byte* p = at(local, r.var, r.start, eb);
    std::byte* b = buffer + off * eb;
    ops.push_back(to_buffer ? exec::detail::CopyOp{p, b, r.stride * eb, eb, r.count, eb}
                            : exec::detail::CopyOp{b, p, eb, r.stride * eb, r.count, eb});
    off += r.count;
  }
  return ops;
}

TILEBSP_INLINE exec::detail::ComputeSetExec const& exec::detail::EngineCore::compute_exec(std::size_t plan, unsigned team) const {
  for (auto const& [n, e] : cs_[plan])
    if (n == team) return e;
  throw error("engine: compute set plan " + std::to_string(plan) + " is not bound for " + std::to_string(team) + " threads");
}

TILEBSP_INLINE exec::detail::ExchangeExec const& exec::detail::EngineCore::exchange_exec(std::size_t plan, unsigned team) const {
  for (auto const& [n, e] : ex_[plan])
    if (n == team) return e;
  throw error("engine: exchange " + std::to_string(plan) + " is not bound for " + std::to_string(team) + " threads");
}

TILEBSP_INLINE exec::detail::ComputeSetExec exec::detail::EngineCore::bind_compute_set(schedule::ComputeSetPlan const& plan, unsigned team) {
  exec::detail::ComputeSetExec e;
  // Every local replica's vertices, replica after replica, each bound to its replica's memory.
  for (std::size_t l = 0; l < local_; ++l) {
    std::size_t arena = 0;
    for (auto const& pv : plan.vertices) {
      auto const* ops = g_.vertices[pv.record].ops;
      arena = (arena + ops->align - 1) / ops->align * ops->align + ops->size;
    }
    arenas_.push_back(exec::detail::allocate(arena));
    std::byte* base = arenas_.back().get();
    std::size_t off = 0;
    for (auto const& pv : plan.vertices) {
      auto const& rec = g_.vertices[pv.record];
      auto const* ops = rec.ops;
      off = (off + ops->align - 1) / ops->align * ops->align;
      void* obj = base + off;
      off += ops->size;
      ops->copy_construct(obj, rec.prototype.get());
      objects_.emplace_back(ops, obj);
      exec::detail::WorkItem item{rec.tile, l, ops->size, ops->compute, obj, 1, static_cast<std::uint32_t>(e.gathers.size()), 0,
                            static_cast<std::uint32_t>(e.scatters.size()), 0, pv.cycles};
      std::vector<core::detail::FieldBinding> b(rec.fields.size());
      for (std::uint32_t fi = 0; fi < rec.fields.size(); ++fi) {
        auto const& f = rec.fields[fi];
        if (f.kind == core::detail::FieldKind::param) continue;
        std::vector<core::detail::FieldBinding> items(rec.tensors_of(f).size());
        for (std::uint32_t k = 0; k < rec.tensors_of(f).size(); ++k) {
          auto const& t = rec.tensors_of(f)[k];
          auto const eb = static_cast<std::uint32_t>(size_of(t.element_type()));
          auto const* st = find_staging(pv, fi, k);
          if (st) {
            staging_.push_back(exec::detail::allocate(static_cast<std::size_t>(st->elements) * eb));
            std::byte* buf = staging_.back().get();
            auto const runs = t.runs();
            if (st->gather)
              for (auto const& op : tensor_ops(l, runs, buf, eb, true)) e.gathers.push_back(op);
            if (st->scatter)
              for (auto const& op : tensor_ops(l, runs, buf, eb, false)) e.scatters.push_back(op);
            items[k] = {buf, static_cast<std::size_t>(st->elements)};
            std::ptrdiff_t step = 1;
            for (std::size_t d = f.rank; d-- > 0;) {
              items[k].shape[d] = t.dim(d);
              items[k].stride[d] = step;
              step *= static_cast<std::ptrdiff_t>(t.dim(d));
            }
          } else if (f.rank > 0) {
            auto const a = *t.affine();  // planned as direct only when affine
            items[k] = {at(l, a.var, a.start, eb), t.num_elements()};
            for (std::size_t d = 0; d < f.rank; ++d) {
              items[k].shape[d] = t.dim(d);
              items[k].stride[d] = a.strides[d];
            }
          } else {
            auto const runs = t.runs();
            items[k] = {runs.empty() ? nullptr : at(l, runs[0].var, runs[0].start, eb), t.num_elements()};
          }
        }
        if (f.kind == core::detail::FieldKind::input_list) {
          lists_.emplace_back(new core::detail::FieldBinding[std::max<std::size_t>(items.size(), 1)]);
          std::copy(items.begin(), items.end(), lists_.back().get());
          b[fi] = {lists_.back().get(), items.size()};
        } else {
          b[fi] = items[0];
        }
      }
      ops->bind(obj, b.data());
      item.gather_end = static_cast<std::uint32_t>(e.gathers.size());
      item.scatter_end = static_cast<std::uint32_t>(e.scatters.size());
      e.items.push_back(item);
    }
  }
  // Deal tiles (their items) to threads by estimated work, in order.
  std::uint64_t total = 0;
  for (auto const& it : e.items) total += it.weight;
  std::vector<std::size_t> split(team + 1, e.items.size());
  split[0] = 0;
  std::uint64_t acc = 0;
  std::size_t i = 0;
  for (unsigned t = 1; t < team; ++t) {
    std::uint64_t const goal = total * t / team;
    while (i < e.items.size() && acc + e.items[i].weight / 2 < goal) acc += e.items[i++].weight;
    while (i > 0 && i < e.items.size() && e.items[i].tile == e.items[i - 1].tile &&
           e.items[i].replica == e.items[i - 1].replica)
      acc += e.items[i++].weight;
    split[t] = i;
  }
  // Within each thread's share, runs of same-type vertices stored contiguously become one call.
  std::vector<exec::detail::WorkItem> merged;
  e.split.assign(team + 1, 0);
  for (unsigned t = 0; t < team; ++t) {
    e.split[t] = merged.size();
    for (std::size_t k = split[t]; k < split[t + 1]; ++k) {
      auto const& it = e.items[k];
      auto const staged = [](exec::detail::WorkItem const& w) {
        return w.gather_begin != w.gather_end || w.scatter_begin != w.scatter_end;
      };
      if (merged.size() > e.split[t] && !staged(it) && !staged(merged.back()) && merged.back().compute == it.compute &&
          static_cast<std::byte*>(merged.back().first) + merged.back().count * it.size == static_cast<std::byte*>(it.first)) {
        merged.back().count += it.count;
        merged.back().weight += it.weight;
      } else {
        merged.push_back(it);
      }
    }
  }
  e.split[team] = merged.size();
  e.items = std::move(merged);
  return e;
}

TILEBSP_INLINE schedule::Staging const* exec::detail::EngineCore::find_staging(schedule::PlacedVertex const& pv, std::uint32_t field,
                                                           std::uint32_t item) {
  for (auto const& st : pv.staging)
    if (st.field == field && st.item == item) return &st;
  return nullptr;
}

TILEBSP_INLINE exec::detail::ExchangeExec exec::detail::EngineCore::bind_exchange(schedule::ExchangePlan const& plan, unsigned team) {
  exec::detail::ExchangeExec e;
  e.staged = plan.staged;
  std::vector<exec::detail::CopyOp> direct, in, out;
  if (plan.staged) {
    e.stage = std::make_unique<std::byte[]>(std::max<std::uint64_t>(plan.bytes * local_, 1));
  }
  std::int64_t off = 0;
  for (std::size_t l = 0; l < local_; ++l)
    for (auto const& x : plan.transfers) {
      std::int64_t const eb = x.elem_bytes;
      auto const* src = at(l, x.src_var, x.src_start, x.elem_bytes);
      auto* dst = at(l, x.dst_var, x.dst_start, x.elem_bytes);
      if (plan.staged) {
        in.push_back({src, e.stage.get() + off, x.src_stride * eb, eb, x.count, x.elem_bytes});
        out.push_back({e.stage.get() + off, dst, eb, x.dst_stride * eb, x.count, x.elem_bytes});
        off += x.count * eb;
      } else {
        direct.push_back({src, dst, x.src_stride * eb, x.dst_stride * eb, x.count, x.elem_bytes});
      }
    }
  e.phase1 = exec::detail::split_copies(plan.staged ? in : direct, team);
  if (plan.staged) e.phase2 = exec::detail::split_copies(out, team);
  return e;
}

}  // namespace tilebsp
