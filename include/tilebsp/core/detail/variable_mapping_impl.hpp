// VariableMapping's resolution of queued assignments (merging series, sweeping pieces, folding repeats into
// blocks): compiled once in tilebsp::compiled (src/core.cpp), inline when header-only (core/graph_impl.hpp).
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/detail/variable_mapping.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tilebsp::core::detail {

TILEBSP_INLINE void VariableMapping::apply_queue() const {
  if (!merge_series()) expand_and_sweep();
}

TILEBSP_INLINE bool VariableMapping::merge_series() const {
  std::vector<Series> q = queued_;
  std::stable_sort(q.begin(), q.end(), [](Series const& a, Series const& b) { return a.b < b.b; });
  std::vector<Series> all;
  all.reserve(segs_.size() + q.size());
  {
    std::size_t j = 0;
    for (Block const& r : blocks_)
      for (std::size_t x = r.first; x < r.first + r.k; ++x) {
        Seg const& s = segs_[x];
        for (; j < q.size() && q[j].b < s.begin; ++j) all.push_back(q[j]);
        all.push_back({s.begin, s.end - s.begin, r.period, r.reps, s.tile});
      }
    all.insert(all.end(), q.begin() + static_cast<std::ptrdiff_t>(j), q.end());
  }
  std::vector<Block> blocks;
  std::vector<Seg> segs;
  blocks.reserve(blocks_.size() + q.size());
  segs.reserve(all.size());
  // A piece on its own, joined to the one before when that ends where it begins on the same tile.
  auto const piece = [&](std::int64_t b, std::int64_t e, std::uint32_t tile) {
    if (!blocks.empty()) {
      Block& r = blocks.back();
      if (r.reps == 1 && r.end == b && segs.back().tile == tile) {
        r.end = segs.back().end = e;
        r.period = e - r.begin;
        return;
      }
    }
    blocks.push_back({b, e, e - b, 1, segs.size(), 1});
    segs.push_back({b, e, tile});
  };
  // A pattern of k pieces (sorted, apart, within one period), `reps` times. Once, it is its pieces; a pattern of one
  // piece as long as its period is one range.
  auto const block = [&](Seg const* pattern, std::size_t k, std::int64_t period, std::int64_t reps) {
    if (reps == 1 || (k == 1 && pattern[0].end - pattern[0].begin == period)) {
      for (std::size_t j = 0; j < k; ++j) piece(pattern[j].begin, pattern[j].end + (reps - 1) * period, pattern[j].tile);
      return;
    }
    blocks.push_back({pattern[0].begin, pattern[k - 1].end + (reps - 1) * period, period, reps, segs.size(), k});
    segs.insert(segs.end(), pattern, pattern + k);
  };
  auto const span_end = [](Series const& s) { return s.b + (s.rows - 1) * s.step + s.len; };
  // The series whose spans meet, as groups: a group of one is a block (or a piece) as it is; a larger group (a
  // result's blocks of channels, the channel slices that several operators write of one tensor) is dealt into
  // blocks by rows (merge_rows).
  std::vector<Seg> pattern;
  for (std::size_t i = 0; i < all.size();) {
    std::size_t j = i + 1;
    for (std::int64_t end = span_end(all[i]); j < all.size() && all[j].b < end; ++j) end = std::max(end, span_end(all[j]));
    if (j == i + 1) {
      Series const& s = all[i];
      Seg const one{s.b, s.b + s.len, s.tile};
      block(&one, 1, s.step, s.rows);
    } else if (!merge_rows(all.data() + i, j - i, pattern, block)) {
      return false;
    }
    i = j;
  }
  blocks_ = std::move(blocks);
  segs_ = std::move(segs);
  queued_.clear();
  return true;
}

template <class Emit>
bool VariableMapping::merge_rows(Series const* group, std::size_t n, std::vector<Seg>& pattern, Emit&& emit) {
  // One period for all: the step of the series that repeat (a series once takes any).
  std::int64_t period = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (group[i].rows > 1) {
      if (period == 0) period = group[i].step;
      else if (group[i].step != period) return false;
    }
  if (period == 0) return false;  // ranges once each, overlapping: the sweep's
  // Rows counted from the least phase: series i covers rows [row, row + rows) at offset `at` in each, which must not
  // wrap into the next row.
  std::int64_t origin = period;
  for (std::size_t i = 0; i < n; ++i) origin = std::min(origin, group[i].b % period);
  struct Rows {
    std::int64_t row, end, at, len;
    std::uint32_t tile;
  };
  std::vector<Rows> rows(n);
  std::vector<std::int64_t> cuts;
  cuts.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    Series const& s = group[i];
    std::int64_t const rel = s.b - origin, at = rel % period;
    if (at + s.len > period) return false;
    rows[i] = {rel / period, rel / period + s.rows, at, s.len, s.tile};
    cuts.push_back(rows[i].row);
    cuts.push_back(rows[i].end);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::stable_sort(rows.begin(), rows.end(), [](Rows const& a, Rows const& b) { return a.row < b.row; });
  // Between two cuts the same series are live: one block of their pieces, sorted by offset. The live ones are
  // visited once per stretch of rows; past a budget (many series live over many cuts) the sweep is cheaper.
  std::vector<std::size_t> live;
  std::size_t next = 0, budget = 16 * n + 4096;
  for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
    std::int64_t const lo = cuts[c], hi = cuts[c + 1];
    std::erase_if(live, [&](std::size_t i) { return rows[i].end <= lo; });
    for (; next < n && rows[next].row == lo; ++next) live.push_back(next);
    if (live.empty()) continue;
    if (live.size() > budget) return false;
    budget -= live.size();
    std::sort(live.begin(), live.end(), [&](std::size_t a, std::size_t b) { return rows[a].at < rows[b].at; });
    pattern.clear();
    std::int64_t const base = origin + lo * period;
    for (std::size_t i : live) {
      Rows const& r = rows[i];
      if (!pattern.empty() && pattern.back().end > base + r.at) return false;  // overlapping: the sweep's
      if (!pattern.empty() && pattern.back().end == base + r.at && pattern.back().tile == r.tile) pattern.back().end += r.len;
      else pattern.push_back({base + r.at, base + r.at + r.len, r.tile});
    }
    emit(pattern.data(), pattern.size(), period, hi - lo);
  }
  return true;
}

TILEBSP_INLINE void VariableMapping::expand_and_sweep() const {
  std::vector<Seg> pieces, q;
  pieces.reserve(pieces_of(blocks_));
  for (Block const& r : blocks_)
    for (std::int64_t t = 0; t < r.reps; ++t)
      for (std::size_t j = r.first; j < r.first + r.k; ++j)
        pieces.push_back({segs_[j].begin + t * r.period, segs_[j].end + t * r.period, segs_[j].tile});
  for (Series const& s : queued_)
    for (std::int64_t t = 0; t < s.rows; ++t) q.push_back({s.b + t * s.step, s.b + t * s.step + s.len, s.tile});
  if (!merge_pieces(pieces, q)) sweep(pieces, q);
  blocks_.clear();
  blocks_.reserve(pieces.size());
  for (std::size_t i = 0; i < pieces.size(); ++i)
    blocks_.push_back({pieces[i].begin, pieces[i].end, pieces[i].end - pieces[i].begin, 1, i, 1});
  segs_ = std::move(pieces);
  queued_.clear();
}

TILEBSP_INLINE void VariableMapping::sort_by_begin(std::vector<Seg>& q) {
  auto const less = [](Seg const& a, Seg const& b) { return a.begin < b.begin; };
  std::vector<std::size_t> cuts{0};  // where each ascending series starts
  for (std::size_t i = 1; i < q.size(); ++i)
    if (less(q[i], q[i - 1])) cuts.push_back(i);
  if (cuts.size() == 1) return;
  if (cuts.size() > q.size() / 8) {  // no long series: an ordinary sort
    std::sort(q.begin(), q.end(), less);
    return;
  }
  cuts.push_back(q.size());
  std::vector<Seg> buffer(q.size());
  while (cuts.size() > 2) {  // merge neighbouring series pairwise, halving their number
    std::vector<std::size_t> next{0};
    for (std::size_t k = 0; k + 1 < cuts.size(); k += 2) {
      std::size_t const b = cuts[k], m = cuts[k + 1], e = k + 2 < cuts.size() ? cuts[k + 2] : m;
      std::merge(q.begin() + static_cast<std::ptrdiff_t>(b), q.begin() + static_cast<std::ptrdiff_t>(m),
                 q.begin() + static_cast<std::ptrdiff_t>(m), q.begin() + static_cast<std::ptrdiff_t>(e),
                 buffer.begin() + static_cast<std::ptrdiff_t>(b), less);
      next.push_back(e);
    }
    q.swap(buffer);
    cuts = std::move(next);
  }
}

TILEBSP_INLINE bool VariableMapping::merge_pieces(std::vector<Seg>& pieces, std::vector<Seg> q) {
  sort_by_begin(q);
  for (std::size_t i = 1; i < q.size(); ++i)
    if (q[i].begin < q[i - 1].end) return false;
  std::vector<Seg> out;
  out.reserve(pieces.size() + q.size());
  auto const add = [&](Seg const& s) {
    if (!out.empty() && out.back().end > s.begin) return false;
    if (!out.empty() && out.back().end == s.begin && out.back().tile == s.tile) out.back().end = s.end;
    else out.push_back(s);
    return true;
  };
  std::size_t a = 0, b = 0;
  while (a < pieces.size() || b < q.size()) {
    bool const take_piece = b == q.size() || (a < pieces.size() && pieces[a].begin < q[b].begin);
    if (!add(take_piece ? pieces[a++] : q[b++])) return false;
  }
  pieces = std::move(out);
  return true;
}

TILEBSP_INLINE void VariableMapping::sweep(std::vector<Seg>& pieces, std::vector<Seg> const& q) {
  std::vector<Seg> all;
  all.reserve(pieces.size() + q.size());
  all.insert(all.end(), pieces.begin(), pieces.end());
  all.insert(all.end(), q.begin(), q.end());
  std::size_t const base = pieces.size();
  auto const priority = [&](std::size_t id) { return id < base ? std::size_t{0} : id - base + 1; };
  struct Event {
    std::int64_t at;
    std::uint32_t id;
    bool open;
  };
  std::vector<Event> events;
  events.reserve(2 * all.size());
  for (std::size_t id = 0; id < all.size(); ++id) {
    events.push_back({all[id].begin, static_cast<std::uint32_t>(id), true});
    events.push_back({all[id].end, static_cast<std::uint32_t>(id), false});
  }
  std::sort(events.begin(), events.end(), [](Event const& a, Event const& b) { return a.at < b.at; });
  std::vector<char> closed(all.size(), 0);
  std::vector<std::pair<std::size_t, std::uint32_t>> live;  // a max-heap of (priority, id)
  std::vector<Seg> out;
  for (std::size_t k = 0; k < events.size();) {
    std::int64_t const x = events[k].at;
    for (; k < events.size() && events[k].at == x; ++k) {
      if (events[k].open) {
        live.emplace_back(priority(events[k].id), events[k].id);
        std::push_heap(live.begin(), live.end());
      } else {
        closed[events[k].id] = 1;
      }
    }
    while (!live.empty() && closed[live.front().second]) {
      std::pop_heap(live.begin(), live.end());
      live.pop_back();
    }
    if (live.empty() || k == events.size()) continue;
    std::int64_t const next = events[k].at;
    std::uint32_t const tile = all[live.front().second].tile;
    if (!out.empty() && out.back().end == x && out.back().tile == tile) out.back().end = next;
    else out.push_back({x, next, tile});
  }
  pieces = std::move(out);
}

TILEBSP_INLINE void VariableMapping::index() const {
  dirty_ = false;
  std::size_t const n = blocks_.size();
  constexpr std::size_t max_k = 256, min_pieces = 16;
  bool worth = false;  // a run of min_pieces single pieces or more
  for (std::size_t i = 0, run = 0; i < n && !worth; ++i) worth = (run = blocks_[i].reps == 1 ? run + 1 : 0) >= min_pieces;
  if (!worth) return;
  std::vector<Block> blocks;
  std::vector<Seg> segs, p;
  blocks.reserve(n);
  segs.reserve(segs_.size());
  auto const keep = [&](Block r, Seg const* pattern) {
    blocks.push_back(r);
    blocks.back().first = segs.size();
    segs.insert(segs.end(), pattern, pattern + r.k);
  };
  for (std::size_t i = 0; i < n;) {
    if (blocks_[i].reps > 1) {
      keep(blocks_[i], &segs_[blocks_[i].first]);
      ++i;
      continue;
    }
    p.clear();
    for (; i < n && blocks_[i].reps == 1; ++i) p.push_back(segs_[blocks_[i].first]);
    auto const same = [&](std::size_t a, std::size_t b, std::int64_t d) {
      return p[b].tile == p[a].tile && p[b].begin == p[a].begin + d && p[b].end == p[a].end + d;
    };
    std::size_t const m = p.size();
    // next[x]: the next piece of p[x]'s tile and length (m: none), the only places a pattern from x can repeat;
    // pieces all on different tiles (a tensor spread one piece per tile) cost one lookup each.
    std::vector<std::size_t> next(m, m);
    if (m >= min_pieces) {
      std::unordered_map<std::uint64_t, std::size_t> seen;
      for (std::size_t x = m; x-- > 0;) {
        auto const len = static_cast<std::uint64_t>(p[x].end - p[x].begin);
        if (len >> 32 != 0) continue;  // none so long repeats in practice: left unfolded
        auto [it, fresh] = seen.try_emplace(len << 32 | p[x].tile, x);
        if (!fresh) next[x] = std::exchange(it->second, x);
      }
    }
    for (std::size_t a = 0; a < m;) {
      std::size_t k = 1, reps = 0;
      for (std::size_t c = next[a]; c < m && (k = c - a) <= max_k && a + 2 * k <= m; c = next[c]) {
        std::int64_t const d = p[a + k].begin - p[a].begin;
        std::size_t j = 1;
        while (j < k && same(a + j, a + k + j, d)) ++j;
        if (j < k) continue;
        for (reps = 2; a + (reps + 1) * k <= m; ++reps) {
          for (j = 0; j < k && same(a + (reps - 1) * k + j, a + reps * k + j, d);) ++j;
          if (j < k) break;
        }
        break;
      }
      if (reps == 0) k = 1;
      if (reps > 0 && k * reps >= min_pieces) {
        std::int64_t const d = p[a + k].begin - p[a].begin;
        keep({p[a].begin, p[a + k * reps - 1].end, d, static_cast<std::int64_t>(reps), 0, k}, &p[a]);
        a += k * reps;
      } else {
        keep({p[a].begin, p[a].end, p[a].end - p[a].begin, 1, 0, 1}, &p[a]);
        ++a;
      }
    }
  }
  blocks_ = std::move(blocks);
  segs_ = std::move(segs);
}

}  // namespace tilebsp::core::detail
