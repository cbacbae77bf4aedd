// VariableMapping: the tile of each element range of one variable, as a flat sorted list of pieces.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace tilebsp::core::detail {

/// Tile of each element range of one variable. Pieces are kept in a vector sorted by their first element, so that
/// the common ways of mapping cost O(1) per assignment: in increasing order (map_linearly, an operator's blocks
/// row by row) a piece is appended, or merged into the last one. An assignment that overlaps or precedes a mapped
/// piece is queued instead, and the queue is resolved (the last assignment of an element wins, as if each had been
/// applied in turn) in one sweep, O(n log n), before the next read or once it is as long as the mapping. Reads
/// resolve the queue themselves; like the rest of a Graph, a mapping is not to be read and written from several
/// threads at once, and compile resolves every mapping before it reads them from more than one thread.
///
/// Resolving also indexes the repeats of the list: a run of pieces that is a few pieces (a pattern) shifted again
/// and again by one period, on the same tiles, as an operator's result split across tiles by channels has a piece
/// per position and block of channels. A Cursor finds a piece of a repeat by arithmetic on its pattern (a few
/// pieces, in cache) rather than by a search through millions of pieces (a cache miss per step).
class VariableMapping {
 public:
  /// A piece of the mapping: elements [begin, end) on `tile`, or an unmapped gap (tile -1).
  struct Piece {
    std::int64_t begin, end, tile;
  };

  void assign(std::int64_t b, std::int64_t e, std::uint32_t tile) {
    if (b >= e) return;
    dirty_ = true;
    if (queued_.empty() && (pieces_.empty() || b >= pieces_.back().end)) {
      if (!pieces_.empty() && pieces_.back().end == b && pieces_.back().tile == tile) pieces_.back().end = e;
      else pieces_.push_back({b, e, tile});
      return;
    }
    queued_.push_back({b, e, tile});
    if (queued_.size() >= std::max<std::size_t>(1024, pieces_.size()) && !merge()) sweep();  // indexed when read
  }

  /// Calls f(begin, end, tile) for mapped pieces of [b, e); returns the number of unmapped elements.
  template <class F>
  std::int64_t for_each(std::int64_t b, std::int64_t e, F&& f) const {
    resolve();
    std::int64_t covered = 0;
    for (auto it = first_at_or_after(b); it != pieces_.end() && it->begin < e; ++it) {
      std::int64_t const lo = std::max(b, it->begin), hi = std::min(e, it->end);
      if (lo < hi) {
        f(lo, hi, it->tile);
        covered += hi - lo;
      }
    }
    return (e - b) - covered;
  }

  /// Calls f(begin, end, tile, period, reps) for every mapped piece of the variable, in order of first element: a
  /// piece of a repeat's pattern once for all of its repeats (the piece, then the same shifted by period, 2 period,
  /// ... reps times in all), any other piece alone (period 0, reps 1). A conv output mapped by blocks of channels
  /// is a few calls per block of positions rather than a call per position and block. Returns the mapped elements.
  template <class F>
  std::int64_t for_each_series(F&& f) const {
    resolve();
    std::int64_t mapped = 0;
    std::size_t r = 0;
    for (std::size_t i = 0; i < pieces_.size();) {
      if (r < repeats_.size() && repeats_[r].first == i) {
        Repeat const& rep = repeats_[r++];
        for (std::size_t j = i; j < i + rep.k; ++j) {
          f(pieces_[j].begin, pieces_[j].end, pieces_[j].tile, rep.period, rep.reps);
          mapped += (pieces_[j].end - pieces_[j].begin) * static_cast<std::int64_t>(rep.reps);
        }
        i += rep.k * rep.reps;
      } else {
        f(pieces_[i].begin, pieces_[i].end, pieces_[i].tile, std::int64_t{0}, std::size_t{1});
        mapped += pieces_[i].end - pieces_[i].begin;
        ++i;
      }
    }
    return mapped;
  }

  /// Finds pieces for elements looked up near the one before: from the piece it found last, it gallops forward or
  /// back (steps of 1, 2, 4, ... pieces) and then searches only the range it stepped over, so a lookup costs
  /// O(log distance) in pieces, not O(log pieces) (a conv output mapped by blocks of groups has a piece per
  /// position and block, and a vertex reads its block at nearby positions).
  class Cursor {
   public:
    explicit Cursor(VariableMapping const& m) : m_(&m) { m.resolve(); }
    Piece at(std::int64_t i) {
      auto const& p = m_->pieces_;
      if (auto const& rs = m_->repeats_; !rs.empty()) {
        if (rep_ >= rs.size() || i < rs[rep_].begin || i >= rs[rep_].end) {
          auto const it = std::upper_bound(rs.begin(), rs.end(), i, [](std::int64_t x, Repeat const& r) { return x < r.begin; });
          rep_ = it == rs.begin() || i >= std::prev(it)->end ? rs.size() : static_cast<std::size_t>(it - rs.begin()) - 1;
        }
        if (rep_ < rs.size()) {
          Repeat const& r = rs[rep_];
          std::int64_t const rep = std::min<std::int64_t>((i - r.begin) / r.period, static_cast<std::int64_t>(r.reps) - 1);
          std::int64_t const shift = rep * r.period, off = i - shift;
          std::size_t j = r.first, hi = r.first + r.k;  // j: the last piece of the pattern beginning at or before off
          while (hi - j > 1) {
            std::size_t const mid = j + (hi - j) / 2;
            (p[mid].begin <= off ? j : hi) = mid;
          }
          at_ = j + static_cast<std::size_t>(rep) * r.k;
          if (off < p[j].end) return {p[j].begin + shift, p[j].end + shift, static_cast<std::int64_t>(p[j].tile)};
          return {p[j].end + shift, at_ + 1 < p.size() ? p[at_ + 1].begin : std::numeric_limits<std::int64_t>::max(), -1};
        }
      }
      std::size_t const n = p.size();
      if (n == 0 || p[0].begin > i) {
        at_ = n;
        return {std::numeric_limits<std::int64_t>::min(), n == 0 ? std::numeric_limits<std::int64_t>::max() : p[0].begin,
                -1};
      }
      // Bracket i: p[lo].begin <= i, and hi == n or p[hi].begin > i.
      std::size_t lo = 0, hi = n;
      if (at_ < n && p[at_].begin <= i) {
        lo = at_;
        hi = lo + 1;
        for (std::size_t step = 2; hi < n && p[hi].begin <= i; step *= 2) lo = hi, hi = lo + step;
        hi = std::min(hi, n);
      } else if (at_ < n) {
        hi = at_;
        lo = at_ - 1;  // at_ > 0: p[0].begin <= i < p[at_].begin
        for (std::size_t step = 1; p[lo].begin > i; step *= 2) hi = lo, lo = lo >= step ? lo - step : 0;
      }
      auto const it = std::upper_bound(p.begin() + static_cast<std::ptrdiff_t>(lo) + 1,
                                       p.begin() + static_cast<std::ptrdiff_t>(hi), i,
                                       [](std::int64_t x, Seg const& s) { return x < s.begin; });
      at_ = static_cast<std::size_t>(it - p.begin()) - 1;
      return piece(i);
    }

    /// Calls f(tile, elements) for the mapped elements of [b, e), a piece at a time; where [b, e) spans whole
    /// periods of a repeat, once per piece of its pattern for all of them (a fetched row of a conv output crosses a
    /// piece per position and block of channels: a few calls rather than one per piece).
    /// A range that is the last one shifted by whole periods inside one repeat has its counts: they are given
    /// again without a lookup (a vertex's rows, one per position).
    template <class F>
    void count(std::int64_t b, std::int64_t e, F&& f) {
      auto const& p = m_->pieces_;
      auto const& rs = m_->repeats_;
      if (memo_rep_ < rs.size() && e - b == memo_e_ - memo_b_) {
        Repeat const& r = rs[memo_rep_];
        std::int64_t const d = b - memo_b_;
        if (b >= r.begin && e <= r.end && (d == r.period || d % r.period == 0)) {
          for (auto const& [tile, n] : memo_) f(tile, n);
          memo_b_ = b, memo_e_ = e;
          return;
        }
      }
      memo_.clear();
      at(b);
      std::size_t const in = rep_ < rs.size() && e <= rs[rep_].end ? rep_ : rs.size();
      memo_rep_ = rs.size();
      memo_b_ = b, memo_e_ = e;
      auto const g = [&](std::uint32_t tile, std::int64_t n) {
        f(tile, n);
        if (in < rs.size()) memo_.emplace_back(tile, n);
      };
      while (b < e) {
        Piece const q = at(b);
        if (rep_ < rs.size()) {
          Repeat const& r = rs[rep_];
          std::int64_t const rep = (b - r.begin) / r.period, next = r.begin + (rep + 1) * r.period;
          std::int64_t const full = e > next ? std::min((e - next) / r.period, static_cast<std::int64_t>(r.reps) - 1 - rep) : 0;
          if (full >= 2) {
            while (b < next) {  // the rest of this period (its pieces end by the next period's first)
              Piece const h = at(b);
              if (h.tile >= 0) g(static_cast<std::uint32_t>(h.tile), h.end - b);
              b = h.end;
            }
            for (std::size_t j = r.first; j < r.first + r.k; ++j) g(p[j].tile, (p[j].end - p[j].begin) * full);
            b = next + full * r.period;
            continue;
          }
        }
        if (q.tile >= 0) g(static_cast<std::uint32_t>(q.tile), std::min(q.end, e) - b);
        b = q.end;
      }
      if (memo_.size() <= 64) memo_rep_ = in;
    }

    /// count() of `rows` ranges of `len` elements, `step` apart from b, with each tile's elements of a run of rows
    /// summed: rows a whole number of periods apart inside one repeat have the counts of the first of them, given
    /// once multiplied (the rows of a block of channels, a row per position, cost a few calls in all).
    template <class F>
    void count_rows(std::int64_t b, std::int64_t len, std::int64_t step, std::int64_t rows, F&& f) {
      auto const& rs = m_->repeats_;
      for (std::int64_t i = 0; i < rows;) {
        std::int64_t const s = b + i * step;
        count(s, s + len, f);
        ++i;
        if (memo_rep_ >= rs.size() || i == rows) continue;  // not inside a repeat: row by row
        Repeat const& r = rs[memo_rep_];
        if (step % r.period != 0) continue;
        std::int64_t const more = std::min(rows - i, (r.end - (s + len)) / step);
        if (more <= 0) continue;
        for (auto const& [tile, n] : memo_) f(tile, n * more);
        i += more;
        memo_b_ = s + more * step, memo_e_ = memo_b_ + len;
      }
    }

   private:
    /// The piece at i given at_, the last piece beginning at or before i.
    Piece piece(std::int64_t i) const {
      auto const& p = m_->pieces_;
      if (i < p[at_].end) return {p[at_].begin, p[at_].end, static_cast<std::int64_t>(p[at_].tile)};
      return {p[at_].end, at_ + 1 == p.size() ? std::numeric_limits<std::int64_t>::max() : p[at_ + 1].begin, -1};
    }
    VariableMapping const* m_;
    std::size_t at_ = std::numeric_limits<std::size_t>::max();
    std::size_t rep_ = std::numeric_limits<std::size_t>::max();  // the repeat of the last lookup
    // The last count()'s range and result, when the range lies in repeat memo_rep_.
    std::size_t memo_rep_ = std::numeric_limits<std::size_t>::max();
    std::int64_t memo_b_ = 0, memo_e_ = 0;
    std::vector<std::pair<std::uint32_t, std::int64_t>> memo_;
  };

  /// Tile of element i, or -1 when unmapped.
  std::int64_t tile_of(std::int64_t i) const {
    resolve();
    auto const it = first_at_or_after(i);
    return it != pieces_.end() && it->begin <= i && i < it->end ? static_cast<std::int64_t>(it->tile) : -1;
  }

  /// Adds the mapping (its pieces, after resolving the queue) to `h`, a Hasher.
  template <class H>
  void hash(H& h) const {
    resolve();
    h.add(pieces_.size());
    for (auto const& p : pieces_) {
      auto const b = static_cast<std::uint64_t>(p.begin), e = static_cast<std::uint64_t>(p.end);
      if (e >> 40 == 0 && p.tile >> 23 == 0) {
        h.add2(b, e | std::uint64_t{p.tile} << 40);
      } else {
        h.add2(b, e);
        h.add(p.tile);
      }
    }
  }

  /// Resolves queued assignments now (compile calls it on every variable before reading mappings in parallel).
  void resolve() const {
    if (!queued_.empty() && !merge()) sweep();
    if (dirty_) index();
  }
  /// Pieces of the mapping (after resolve()).
  std::size_t pieces() const noexcept { return pieces_.size(); }

 private:
  struct Seg {
    std::int64_t begin, end;
    std::uint32_t tile;
  };

  /// The first piece that ends after i (the one holding i, or the next one).
  std::vector<Seg>::const_iterator first_at_or_after(std::int64_t i) const {
    return std::upper_bound(pieces_.begin(), pieces_.end(), i, [](std::int64_t x, Seg const& s) { return x < s.end; });
  }

  /// Sorts by first element. The queue is mostly a few ascending series (an operator maps its result block by
  /// block, each block position by position): a natural merge sort, O(n log series), takes them as they are.
  static void sort_by_begin(std::vector<Seg>& q) {
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

  /// Applies the queue when its assignments overlap neither each other nor the mapped pieces (an operator mapping
  /// its result block by block, each block a run per position): sorted and merged into the pieces in one pass.
  /// Returns false, changing nothing, when they overlap.
  bool merge() const {
    std::vector<Seg> q = queued_;
    sort_by_begin(q);
    for (std::size_t i = 1; i < q.size(); ++i)
      if (q[i].begin < q[i - 1].end) return false;
    std::vector<Seg> out;
    out.reserve(pieces_.size() + q.size());
    auto const add = [&](Seg const& s) {
      if (!out.empty() && out.back().end > s.begin) return false;
      if (!out.empty() && out.back().end == s.begin && out.back().tile == s.tile) out.back().end = s.end;
      else out.push_back(s);
      return true;
    };
    std::size_t a = 0, b = 0;
    while (a < pieces_.size() || b < q.size()) {
      bool const take_piece = b == q.size() || (a < pieces_.size() && pieces_[a].begin < q[b].begin);
      if (!add(take_piece ? pieces_[a++] : q[b++])) return false;
    }
    pieces_ = std::move(out);
    queued_.clear();
    return true;
  }

  /// Applies the queue: every element takes the tile of the last assignment covering it. A sweep over the
  /// boundaries of all pieces (priority 0: they do not overlap) and queued assignments (priority 1, 2, ... in
  /// order), keeping the live assignments in a max-heap by priority.
  void sweep() const {
    std::vector<Seg> all;
    all.reserve(pieces_.size() + queued_.size());
    all.insert(all.end(), pieces_.begin(), pieces_.end());
    all.insert(all.end(), queued_.begin(), queued_.end());
    std::size_t const base = pieces_.size();
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
    pieces_ = std::move(out);
    queued_.clear();
  }

  /// Pieces first .. first + k * reps - 1: pieces first .. first + k - 1 (the pattern), then the same shifted by
  /// period, 2 period, ... (reps times in all, on the same tiles). begin and end: the first and last element + 1.
  struct Repeat {
    std::int64_t begin, end, period;
    std::size_t first, k, reps;
  };

  /// Finds the repeats of pieces_ (patterns of up to 256 pieces repeated to 16 pieces or more): O(pieces).
  void index() const {
    repeats_.clear();
    dirty_ = false;
    auto const& p = pieces_;
    std::size_t const n = p.size();
    constexpr std::size_t max_k = 256, min_pieces = 16;
    auto const same = [&](std::size_t a, std::size_t b, std::int64_t d) {
      return p[b].tile == p[a].tile && p[b].begin == p[a].begin + d && p[b].end == p[a].end + d;
    };
    for (std::size_t i = 0; i + 1 < n;) {
      std::size_t k = 1, reps = 0;
      for (; k <= max_k && i + 2 * k <= n; ++k) {
        std::int64_t const d = p[i + k].begin - p[i].begin;
        if (!same(i, i + k, d)) continue;
        std::size_t j = 1;
        while (j < k && same(i + j, i + k + j, d)) ++j;
        if (j < k) continue;
        for (reps = 2; i + (reps + 1) * k <= n; ++reps) {
          for (j = 0; j < k && same(i + (reps - 1) * k + j, i + reps * k + j, d);) ++j;
          if (j < k) break;
        }
        break;
      }
      if (reps > 0 && k * reps >= min_pieces) {
        repeats_.push_back({p[i].begin, p[i + k * reps - 1].end, p[i + k].begin - p[i].begin, i, k, reps});
        i += k * reps;
      } else {
        ++i;
      }
    }
  }

  // Mutable: a read resolves the queue first (see the class comment).
  mutable std::vector<Seg> pieces_;
  mutable std::vector<Seg> queued_;
  mutable std::vector<Repeat> repeats_;
  mutable bool dirty_ = false;
};

}  // namespace tilebsp::core::detail
