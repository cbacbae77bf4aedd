// Planning a compute set, part of the lowering's definitions (program/lower_impl.hpp): each vertex's field
// accesses gathered per variable, write conflicts checked, fields that are not one ascending range staged, and the
// cycles and fetches estimated.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/program/detail/pieces.hpp>
#include <tilebsp/program/lower.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tilebsp::program::detail {
// The same using-declarations as lower_impl.hpp's: header-only, either file can be the first one read (this one
// includes lower.hpp, which includes lower_impl.hpp at its end), so each declares what it names.
using core::detail::FieldBinding;
using core::detail::Run;
using plan::detail::default_vertex_cycles;
using plan::detail::ExchangeLoad;

namespace lowering {
/// Variables as a compute set's runs name them: a run mostly names one of the last few, which are not listed again.
class VarList {
 public:
  void add(std::uint32_t v) {
    for (std::uint32_t r : recent_)
      if (r == v) return;
    recent_[next_++ % 4] = v;
    list_.push_back(v);
  }
  /// Sorted, each once.
  std::vector<std::uint32_t> take() {
    std::sort(list_.begin(), list_.end());
    list_.erase(std::unique(list_.begin(), list_.end()), list_.end());
    return std::move(list_);
  }

 private:
  std::vector<std::uint32_t> list_;
  std::uint32_t recent_[4] = {~0u, ~0u, ~0u, ~0u};
  unsigned next_ = 0;
};
}  // namespace lowering

TILEBSP_INLINE void Lowering::add_access(std::vector<Access>& list, Run const& r, std::uint32_t vertex,
                                        std::uint32_t field) {
  Access a{r.var, 1, r.start, r.start + 1, 1, vertex, field};
  if (r.count > 1 && r.stride != 0) {
    std::int64_t const last = r.start + (r.count - 1) * r.stride;
    if (r.stride > 0) a.end = last + 1, a.step = r.stride;
    else a.begin = last, a.step = -r.stride;
  }
  if (!list.empty()) {
    Access& b = list.back();
    if (b.vertex == vertex && b.field == field && b.var == a.var && a.step == 1 && a.begin >= b.end) {
      std::int64_t const n = a.end - a.begin;
      if (b.step == 1) {  // b dense: a adjacent extends it; a block of b's length further on makes two blocks
        if (a.begin == b.end) {
          b.end = a.end;
          return;
        }
        if (b.end - b.begin == n && n < (std::int64_t{1} << 31)) {
          b.len = static_cast<std::uint32_t>(n);
          b.step = a.begin - b.begin;
          b.end = a.end;
          return;
        }
      } else if (b.len == n && a.begin == b.end - n + b.step) {  // one more block (or element) at b's distance
        b.end = a.end;
        return;
      }
    }
  }
  list.push_back(a);
}

namespace lowering {
/// An Access as blocks: n blocks of len elements, step apart, from begin (a dense range is one block).
struct Blocks {
  std::int64_t begin, step, len, n;
  std::int64_t end() const noexcept { return begin + (n - 1) * step + len; }
};
template <class A>
Blocks blocks_of(A const& a) {
  if (a.step == 1) return {a.begin, a.end - a.begin, a.end - a.begin, 1};
  return {a.begin, a.step, a.len, (a.end - a.len - a.begin) / a.step + 1};
}

/// The first element of y in [lo, hi), or -1.
inline std::int64_t first_in(Blocks const& y, std::int64_t lo, std::int64_t hi) {
  if (hi <= y.begin || lo >= y.end()) return -1;
  std::int64_t const k = lo <= y.begin ? 0 : (lo - y.begin - y.len + y.step) / y.step;  // first block ending past lo
  if (k >= y.n) return -1;
  std::int64_t const x = std::max(y.begin + k * y.step, lo);
  return x < hi ? x : -1;
}

inline std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }
}  // namespace lowering

TILEBSP_INLINE ComputeSetPlan Lowering::plan_compute_set(std::uint32_t cs) const {
  ComputeSetPlan plan;
  plan.id = cs;
  std::string const& csname = g_.compute_sets[cs];
  // The accesses, in buffers each planning thread keeps from one compute set to the next: grown once, not
  // reallocated (and their pages faulted in) again for every compute set.
  thread_local std::vector<Access> reads, writes;
  reads.clear();
  writes.clear();
  lowering::VarList vars, read_vars;
  std::vector<std::pair<std::int64_t, std::uint32_t>> ch;  // tile changes along one run
  // Fetched bytes, added to the exchange load of the fetch phase per source and destination tile (dense arrays:
  // no list of pairs to sort; a hash map per piece once cost a cache miss per lookup, benchmarks/RESULTS.md).
  std::optional<ExchangeLoad> fetch_load;
  // A vertex's fetched bytes per source tile, and the source tiles it fetches from (a vertex reads its pieces
  // from a few tiles, interleaved: summed here first, a list entry per source tile rather than per piece).
  std::vector<std::int64_t> from_tile(g_.target.num_tiles(), 0);
  std::vector<std::uint32_t> sources;
  PieceCursor cursor;
  std::uint32_t fetching_tile = 0;  // the destination of the bytes in from_tile
  std::vector<char> ipu_seen(g_.target.ipus, 0);  // the IPUs taking part
  // The fetched bytes of a run of vertices on one tile, one entry per source tile.
  auto const flush_fetched = [&] {
    if (!sources.empty() && !fetch_load) fetch_load.emplace(g_.target);
    for (std::uint32_t src : sources) {
      ipu_seen[g_.target.ipu_of(src)] = 1;
      fetch_load->add(src, fetching_tile, static_cast<std::uint64_t>(from_tile[src]));
      plan.fetch_bytes += static_cast<std::uint64_t>(from_tile[src]);
      from_tile[src] = 0;
    }
    sources.clear();
  };
  for (std::uint32_t vi : by_cs_[cs]) {
    auto const& rec = g_.vertices[vi];
    if (static_cast<std::uint32_t>(rec.tile) != fetching_tile) {
      flush_fetched();
      fetching_tile = static_cast<std::uint32_t>(rec.tile);
    }
    std::string_view const vname = rec.ops->name;  // a string only for a message: the names are long
    PlacedVertex pv;
    pv.record = vi;
    std::int64_t elements = 0;
    for (std::uint32_t fi = 0; fi < rec.fields.size(); ++fi) {
      auto const& f = rec.fields[fi];
      auto const tensors = rec.tensors_of(f);
      for (std::uint32_t k = 0; k < tensors.size(); ++k) {
        auto const& t = tensors[k];
        elements += static_cast<std::int64_t>(t.num_elements());
        auto const eb = static_cast<std::uint32_t>(size_of(t.element_type()));
        bool const reading = reads_(f.kind), writing = writes_(f.kind);
        // One run of the field, `times` times over (a broadcast view repeats its runs: each repetition is fetched,
        // but looked up, checked and recorded once).
        auto const visit = [&](Run const& r, std::int64_t times) {
          vars.add(r.var);
          bool const unit = r.stride == 1 || r.stride == -1 || r.count == 1;  // elements [lo, lo + count)
          std::int64_t const lo = r.stride < 0 ? r.start - (r.count - 1) : r.start;
          if (f.fetched && unit) {
            // Pieces on other tiles travel to this one before the compute phase (summed per source tile).
            cursor.count(g_, r.var, lo, lo + r.count, [&](std::uint32_t tile, std::int64_t n) {
              if (tile == static_cast<std::uint32_t>(rec.tile)) return;
              auto& b = from_tile[tile];
              if (b == 0) sources.push_back(tile);
              b += n * eb * times;
            });
          } else if (f.fetched) {  // a strided run
            ch.clear();
            tile_changes(g_, r.var, r.start, r.stride, r.count,
                         [&](std::int64_t o, std::uint32_t tile) { ch.emplace_back(o, tile); }, cursor);
            for (std::size_t c = 0; c < ch.size(); ++c) {
              std::int64_t const o = ch[c].first, end = c + 1 < ch.size() ? ch[c + 1].first : r.count;
              auto const dst = static_cast<std::uint32_t>(rec.tile);
              if (ch[c].second == dst) continue;
              auto& b = from_tile[ch[c].second];
              if (b == 0) sources.push_back(ch[c].second);
              b += (end - o) * eb * times;
            }
          } else {
            // Every element on this tile (counted per tile; the element by element walk finds the first one
            // elsewhere for the message).
            bool elsewhere = !unit;
            if (unit)
              cursor.count(g_, r.var, lo, lo + r.count, [&](std::uint32_t tile, std::int64_t) {
                elsewhere |= tile != static_cast<std::uint32_t>(rec.tile);
              });
            if (elsewhere)
              tile_changes(g_, r.var, r.start, r.stride, r.count, [&](std::int64_t o, std::uint32_t tile) {
                if (tile != rec.tile)
                  throw mapping_error("compute set '" + csname + "': vertex " + std::string(vname) + " on tile " +
                                      std::to_string(rec.tile) + ": field '" + std::string(f.name) +
                                      "' is connected to element " + std::to_string(r.start + o * r.stride) +
                                      " of '" + g_.variables[r.var].name + "', which is on tile " +
                                      std::to_string(tile) + " (connect it with fetch() to read data from other tiles)");
              }, cursor);
          }
          if (writing && g_.variables[r.var].constant)
            throw error("compute set '" + csname + "': vertex " + std::string(vname) + " field '" +
                        std::string(f.name) + "' writes the constant '" + g_.variables[r.var].name + "'");
          if (reading) {  // a strided run is a progression, a series of runs blocks (check_conflicts)
            read_vars.add(r.var);
            add_access(reads, r, vi, fi);
          }
          if (writing) {  // a progression too
            if (r.stride == 0 && r.count > 1)
              throw write_conflict_error("compute set '" + csname + "': vertex " + std::string(vname) + " field '" +
                                         std::string(f.name) + "' writes element " + std::to_string(r.start) +
                                         " of '" + g_.variables[r.var].name +
                                         "' more than once (a broadcast view cannot be written)");
            add_access(writes, r, vi, fi);
          }
        };
        // Series of rows at once (a block of a result split by channels, a row per position; a block of weights, a
        // series per tap; a block of partial sums, one per part): their bytes per tile counted per run of rows a
        // whole number of mapping periods apart (count_rows), an access entry each. A field that is not fetched with
        // rows on other tiles is walked run by run below, for the message.
        thread_local std::vector<core::detail::RowSeries> series;
        series.clear();
        if (t.for_each_row_series([&](core::detail::RowSeries const& rs) { series.push_back(rs); }) &&
            std::all_of(series.begin(), series.end(), [](auto const& rs) { return rs.len < (std::int64_t{1} << 31); })) {
          auto const dst = static_cast<std::uint32_t>(rec.tile);
          bool elsewhere = false;
          for (auto const& rs : series)
            cursor.count_rows(g_, rs.var, rs.start, rs.len, rs.step, rs.rows, [&](std::uint32_t tile, std::int64_t n) {
              if (tile == dst) return;
              if (!f.fetched) {
                elsewhere = true;
                return;
              }
              auto& bytes = from_tile[tile];
              if (bytes == 0) sources.push_back(tile);
              bytes += n * eb;
            });
          if (!elsewhere) {
            std::uint32_t const var = series.front().var;
            vars.add(var);
            if (writing && g_.variables[var].constant) visit({var, series.front().start, 1, series.front().len}, 1);  // throws
            if (reading) read_vars.add(var);
            for (auto const& rs : series) {
              Access const a{rs.var, static_cast<std::uint32_t>(rs.len), rs.start,
                             rs.start + (rs.rows - 1) * rs.step + rs.len, rs.step, vi, fi};
              if (reading) reads.push_back(a);
              if (writing) writes.push_back(a);
            }
            if (f.rank == 0) {  // several runs: gathered into (scattered from) a contiguous buffer
              Staging st;
              st.field = fi;
              st.item = k;
              st.gather = reading;
              st.scatter = writing;
              st.elements = static_cast<std::int64_t>(t.num_elements());
              st.elem_bytes = eb;
              pv.staging.push_back(std::move(st));
            }
            continue;
          }
        }
        // Runs are visited as they come (no buffer); identical runs in a row are visited once, except where written.
        std::size_t num_runs = 0;
        Run first{}, pending{};
        std::int64_t times = 0;
        t.for_each_run([&](std::uint32_t v, std::int64_t b, std::int64_t st, std::int64_t n) {
          Run const r{v, b, st, n};
          if (num_runs++ == 0) first = r;
          if (times > 0 && !writing && r.var == pending.var && r.start == pending.start && r.stride == pending.stride &&
              r.count == pending.count) {
            ++times;
            return;
          }
          if (times > 0) visit(pending, times);
          pending = r, times = 1;
        });
        if (times > 0) visit(pending, times);
        bool const direct = f.rank > 0 ? t.affine().has_value()
                                       : num_runs == 0 || (num_runs == 1 && (first.stride == 1 || first.count == 1));
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
    pv.cycles = rec.ops->cycles ? rec.cycles : default_vertex_cycles(elements);
    pv.supervisor = rec.ops->supervisor;
    for (auto const& st : pv.staging)  // gathers and scatters cost one worker cycle per element each way
      pv.cycles += static_cast<std::uint64_t>(st.elements) * ((st.gather ? 1 : 0) + (st.scatter ? 1 : 0));
    plan.vertices.push_back(std::move(pv));
  }
  flush_fetched();
  auto summary = check_conflicts(csname, reads, writes);
  plan.writes = std::move(summary.written);
  if (fetch_load) {
    plan.fetch_cycles = fetch_load->cycles();
    auto const& in = fetch_load->received();
    for (std::size_t tile = 0; tile < in.size(); ++tile)
      if (in[tile] > 0) plan.fetched_in.emplace_back(static_cast<std::uint32_t>(tile), in[tile]);
  }
  auto const by_tile = [&](PlacedVertex const& a, PlacedVertex const& b) {
    return g_.vertices[a.record].tile < g_.vertices[b.record].tile;
  };
  if (!std::is_sorted(plan.vertices.begin(), plan.vertices.end(), by_tile))
    std::stable_sort(plan.vertices.begin(), plan.vertices.end(), by_tile);
  // Estimated cycles: the slowest tile.
  for_each_tile_cycles(g_, plan, [&](std::uint32_t tile, std::uint64_t cycles) {
    ipu_seen[g_.target.ipu_of(tile)] = 1;
    plan.cycles = std::max(plan.cycles, cycles);
  });
  plan.reads = read_vars.take();
  for (std::uint32_t v : summary.covered)  // not what the compute set reads too
    if (!std::binary_search(plan.reads.begin(), plan.reads.end(), v)) plan.full_writes.push_back(v);
  plan.vars = vars.take();
  for (std::uint32_t i = 0; i < ipu_seen.size(); ++i)
    if (ipu_seen[i]) plan.ipus.push_back(i);
  return plan;
}

namespace lowering {
/// The first element that the progressions a0, a0 + sa, ... <= a1 and b0, b0 + sb, ... <= b1 share (steps >= 1,
/// a1 and b1 their last elements), or -1: x = a0 (mod sa) and x = b0 (mod sb), solved by the Chinese remainder
/// theorem.
inline std::int64_t first_common(std::int64_t a0, std::int64_t sa, std::int64_t a1, std::int64_t b0, std::int64_t sb,
                                 std::int64_t b1) {
  std::int64_t const lo = std::max(a0, b0), hi = std::min(a1, b1);
  if (lo > hi) return -1;
  if (sa == sb) return (b0 - a0) % sa == 0 ? lo : -1;  // one step: they share every element past both starts, or none
  __extension__ using i128 = __int128;
  // Extended Euclid: sa * u = g (mod sb).
  std::int64_t r0 = sa, r1 = sb, u0 = 1, u1 = 0;
  while (r1 != 0) {
    std::int64_t const q = r0 / r1;
    std::tie(r0, r1) = std::pair{r1, r0 - q * r1};
    std::tie(u0, u1) = std::pair{u1, u0 - q * u1};
  }
  std::int64_t const g = r0, d = b0 - a0;
  if (d % g != 0) return -1;
  std::int64_t const m = sb / g;  // a0 + sa * t for t = (d / g) * u0 (mod m)
  i128 t = static_cast<i128>(d / g) * u0 % m;
  if (t < 0) t += m;
  i128 const period = static_cast<i128>(sa) * m;  // lcm(sa, sb)
  i128 x = static_cast<i128>(a0) + static_cast<i128>(sa) * t;
  i128 const behind = static_cast<i128>(lo) - x;  // step x to the first solution >= lo
  if (behind > 0) x += (behind + period - 1) / period * period;
  else x -= (-behind) / period * period;
  return x <= hi ? static_cast<std::int64_t>(x) : -1;
}
}  // namespace lowering

TILEBSP_INLINE Lowering::WriteSummary Lowering::check_conflicts(std::string const& cs, std::vector<Access> const& reads,
                                                                std::vector<Access>& writes) const {
  auto const by_pos = [](auto const& a, auto const& b) { return std::tie(a.var, a.begin) < std::tie(b.var, b.begin); };
  if (!std::is_sorted(writes.begin(), writes.end(), by_pos)) std::sort(writes.begin(), writes.end(), by_pos);
  auto const who = [&](auto const& a) {
    auto const& rec = g_.vertices[a.vertex];
    return "vertex " + std::string(rec.ops->name) + " (tile " + std::to_string(rec.tile) + ") field '" +
           std::string(rec.fields[a.field].name) + "'";
  };
  // The first element that a and b share, or -1.
  auto const common = [&](Access const& a, Access const& b) -> std::int64_t {
    lowering::Blocks const x = lowering::blocks_of(a), y = lowering::blocks_of(b);
    if (x.len == 1 && y.len == 1)  // progressions of single elements
      return lowering::first_common(x.begin, x.step, x.end() - 1, y.begin, y.step, y.end() - 1);
    if (x.n == 1) return lowering::first_in(y, x.begin, x.end());
    if (y.n == 1) return lowering::first_in(x, y.begin, y.end());
    if (x.step == y.step) {
      // Blocks of one period S (lengths <= S): with y.begin - x.begin = q S + m (0 <= m < S), block r of x meets
      // block r - q of y where y's block starts inside x's (m < x.len), or block r - q - 1 where x's starts inside
      // y's (S - m < y.len); the first element is the start of the later block of the first such pair.
      std::int64_t const S = x.step, q = lowering::floor_div(y.begin - x.begin, S), m = y.begin - x.begin - q * S;
      std::int64_t best = -1;
      auto const take = [&](std::int64_t shift, std::int64_t offset) {  // y's blocks r' with x's block r' + shift
        std::int64_t const lo = std::max<std::int64_t>(0, -shift), hi = std::min(y.n, x.n - shift);
        if (lo < hi && (best < 0 || y.begin + lo * S + offset < best)) best = y.begin + lo * S + offset;
      };
      if (m < x.len) take(q, 0);
      if (S - m < y.len) take(q + 1, S - m);
      return best;
    }
    // Different periods: each block of the one with fewer blocks against the other, where their spans meet.
    lowering::Blocks const& u = x.n <= y.n ? x : y;
    lowering::Blocks const& v = x.n <= y.n ? y : x;
    std::int64_t k = v.begin <= u.begin ? 0 : (v.begin - u.begin - u.len + u.step) / u.step;
    for (; k < u.n && u.begin + k * u.step < v.end(); ++k)
      if (std::int64_t const e = lowering::first_in(v, u.begin + k * u.step, u.begin + k * u.step + u.len); e >= 0) return e;
    return -1;
  };
  auto const conflict = [&](Access const& a, Access const& b, std::int64_t x) {
    throw write_conflict_error("compute set '" + cs + "': " + who(a) + " and " + who(b) + " both write element " +
                               std::to_string(x) + " of '" + g_.variables[b.var].name + "'");
  };
  WriteSummary out;
  // Per variable: writes whose spans overlap are tested exactly (a dense pair overlaps where the spans do; strided
  // writes, such as each vertex writing one channel of a position-major tensor, interleave without touching). A
  // variable whose overlapping spans pile up past `crowd` is checked element by element instead.
  constexpr std::size_t crowd = 48;
  std::vector<Access> expanded;
  auto const expand = [&](std::size_t from, std::size_t to) {  // writes [from, to) as dense ranges, sorted
    expanded.clear();
    for (std::size_t k = from; k < to; ++k) {
      auto const& w = writes[k];
      if (w.step == 1) expanded.push_back(w);
      else
        for (std::int64_t x = w.begin; x < w.end; x += w.step) expanded.push_back({w.var, 1, x, x + w.len, 1, w.vertex, w.field});
    }
    std::sort(expanded.begin(), expanded.end(), by_pos);
  };
  std::vector<std::uint32_t> owner;  // per element of a chunk of a crowded variable: its first write, or none
  // The tables of crowded variables small enough to be one chunk, kept for the reads below: (variable, first write,
  // its table).
  std::vector<std::tuple<std::uint32_t, std::size_t, std::vector<std::uint32_t>>> tables;
  constexpr std::int64_t whole = std::int64_t{1} << 22;  // elements: a table of 16 MiB at most
  auto const owned = [&](std::size_t from, std::size_t to) {  // true: checked (no clash) and `covered` updated
    std::uint32_t const var = writes[from].var;
    std::int64_t const size = g_.variables[var].size;
    std::int64_t blocks = 0;
    for (std::size_t k = from; k < to; ++k) {
      lowering::Blocks const b = lowering::blocks_of(writes[k]);
      if (b.begin < 0 || b.end() > size) return false;  // the sweep reports it
      blocks += b.n;
    }
    if (blocks < 4096 || size > 4 * blocks || to - from >= 0xFFFFFFFFu) return false;
    // The variable a chunk at a time, so that the table stays in cache while every write's blocks in the chunk
    // are entered (a write of one channel per position crosses the whole variable).
    std::int64_t const chunk = size <= whole ? size : std::int64_t{1} << 16;
    constexpr std::uint32_t none = 0xFFFFFFFFu;
    owner.resize(static_cast<std::size_t>(std::min(size, chunk)));
    std::int64_t covered = 0;
    for (std::int64_t c0 = 0; c0 < size; c0 += chunk) {
      std::int64_t const c1 = std::min(size, c0 + chunk);
      std::fill(owner.begin(), owner.begin() + (c1 - c0), none);
      for (std::size_t k = from; k < to; ++k) {
        auto const& w = writes[k];
        lowering::Blocks const b = lowering::blocks_of(w);
        if (b.end() <= c0 || b.begin >= c1) continue;
        std::int64_t const r0 = b.begin >= c0 ? 0 : (c0 - b.begin - b.len + b.step) / b.step;  // first block past c0
        for (std::int64_t r = r0; r < b.n; ++r) {
          std::int64_t const x0 = b.begin + r * b.step;
          if (x0 >= c1) break;
          for (std::int64_t x = std::max(x0, c0), e = std::min(x0 + b.len, c1); x < e; ++x) {
            std::uint32_t& o = owner[static_cast<std::size_t>(x - c0)];
            if (o == none) {
              o = static_cast<std::uint32_t>(k - from);
              ++covered;
            } else if (writes[from + o].vertex != w.vertex) {
              return false;
            }
          }
        }
      }
    }
    if (covered == size) out.covered.push_back(var);
    if (chunk == size) tables.emplace_back(var, from, owner);
    return true;
  };
  std::vector<std::size_t> open;  // writes whose spans reach past the one being checked
  for (std::size_t i = 0; i < writes.size();) {
    std::size_t const first = i;
    std::uint32_t const var = writes[i].var;
    std::int64_t count = 0;
    bool overlap = false, crowded = false;
    open.clear();
    for (; i < writes.size() && writes[i].var == var; ++i) {
      auto const& w = writes[i];
      auto const b = lowering::blocks_of(w);
      count += b.n * b.len;
      std::erase_if(open, [&](std::size_t j) { return writes[j].end <= w.begin; });
      for (std::size_t j : open) {
        std::int64_t const x = common(writes[j], w);
        if (x < 0) continue;
        if (writes[j].vertex != w.vertex) conflict(writes[j], w, x);
        overlap = true;  // within one vertex: allowed, but the count above counts it twice
      }
      open.push_back(i);
      if (open.size() > crowd) {
        crowded = true;
        break;
      }
    }
    if (crowded)
      while (i < writes.size() && writes[i].var == var) ++i;
    out.written.push_back(var);
    // Crowded with many short blocks (a vertex per channel of a position-major tensor): each element's first writer
    // in a table, no sort; a clash leaves it to the sweep below, which names the first element written twice.
    if (crowded && owned(first, i)) continue;
    if (crowded) {
      // Block by block (each block, or strided element, a dense range), then a sweep of the sorted ranges.
      expand(first, i);
      std::size_t reach = 0;  // the furthest-reaching range so far
      std::int64_t covered = 0, end = 0;
      for (std::size_t k = 0; k < expanded.size(); ++k) {
        auto const& w = expanded[k];
        if (k > 0 && w.begin < expanded[reach].end && expanded[reach].vertex != w.vertex) conflict(expanded[reach], w, w.begin);
        if (w.end > std::max(w.begin, end)) covered += w.end - std::max(w.begin, end);
        end = std::max(end, w.end);
        if (k == 0 || w.end > expanded[reach].end) reach = k;
      }
      if (covered == g_.variables[var].size) out.covered.push_back(var);
    } else if (!overlap && count == g_.variables[var].size) {
      out.covered.push_back(var);
    } else if (overlap) {
      // Overlaps within vertices: count the union of the dense ranges of their blocks.
      expand(first, i);
      std::int64_t covered = 0, end = 0;
      for (auto const& w : expanded) {
        if (w.end > std::max(w.begin, end)) covered += w.end - std::max(w.begin, end);
        end = std::max(end, w.end);
      }
      if (covered == g_.variables[var].size) out.covered.push_back(var);
    }
  }
  if (reads.empty()) return out;
  // Reads against writes: the writes overlapping a read's span, found from the furthest-reaching write so far.
  std::vector<std::size_t> max_end(writes.size());
  for (std::size_t i = 0; i < writes.size(); ++i)
    max_end[i] = i > 0 && writes[i - 1].var == writes[i].var && writes[max_end[i - 1]].end >= writes[i].end ? max_end[i - 1] : i;
  for (auto const& r : reads) {
    if (!std::binary_search(out.written.begin(), out.written.end(), r.var)) continue;
    // A crowded variable with a table: the read's elements looked up in it (many vertices writing one channel each
    // of a channels-last tensor, each reading what it writes, overlap one another's spans hundreds of times).
    auto const table = std::find_if(tables.begin(), tables.end(), [&](auto const& t) { return std::get<0>(t) == r.var; });
    if (lowering::Blocks const b = lowering::blocks_of(r);
        table != tables.end() && b.begin >= 0 && b.end() <= static_cast<std::int64_t>(std::get<2>(*table).size())) {
      auto const& [var, from, own] = *table;
      for (std::int64_t k = 0; k < b.n; ++k)
        for (std::int64_t x = b.begin + k * b.step, e = x + b.len; x < e; ++x)
          if (std::uint32_t const o = own[static_cast<std::size_t>(x)]; o != 0xFFFFFFFFu && writes[from + o].vertex != r.vertex)
            throw write_conflict_error("compute set '" + cs + "': " + who(r) + " reads element " + std::to_string(x) +
                                       " of '" + g_.variables[r.var].name + "', which " + who(writes[from + o]) +
                                       " writes in the same compute set");
      continue;
    }
    auto it = std::upper_bound(writes.begin(), writes.end(), r, [](auto const& a, auto const& b) {
      return std::tie(a.var, a.end) < std::tie(b.var, b.begin);
    });
    for (auto i = static_cast<std::size_t>(it - writes.begin()); i-- > 0;) {
      auto const& w = writes[i];
      if (w.var != r.var || writes[max_end[i]].end <= r.begin) break;
      if (w.end <= r.begin || w.vertex == r.vertex) continue;
      if (std::int64_t const x = common(r, w); x >= 0)
        throw write_conflict_error("compute set '" + cs + "': " + who(r) + " reads element " + std::to_string(x) +
                                   " of '" + g_.variables[r.var].name + "', which " + who(w) +
                                   " writes in the same compute set");
    }
  }
  return out;
}

}  // namespace tilebsp::program::detail
