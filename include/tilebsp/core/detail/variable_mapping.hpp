// VariableMapping: the tile of each element range of one variable, as blocks of repeated patterns of pieces.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace tilebsp::core::detail {

/// Tile of each element range of one variable, kept as a sorted list of blocks. A block is a pattern of a few
/// pieces (element ranges, each on a tile) repeated `reps` times, `period` elements apart; a piece on its own is a
/// block of one piece, once. An operator's result split across tiles by blocks of channels has a piece per position
/// and block, millions for a large convolution, but a block per block of positions: what the mapping stores, what
/// writing it costs and what a lookup searches grow with the blocks, not with the pieces.
///
/// Writes: `assign` maps one range, `assign_rows` a series of ranges one step apart (a block of channels over its
/// positions, in one call). A write at or after the end of the mapping is appended, O(1). Any other is queued, and
/// the queue is resolved in one go before the next read, or once it is as long as the mapping:
/// - when the queued series overlap neither each other nor the mapping, series of one step and count that begin
///   within a period of each other become one block (an operator mapping its result block by block, each block a
///   series of rows): O(series log series), never per piece;
/// - otherwise every block and series is expanded into pieces, and each element takes the tile of the last
///   assignment that covers it (a sweep, O(n log n) in pieces).
/// Resolving also folds runs of single pieces that repeat (ranges assigned one by one) into blocks, so that a
/// lookup finds a piece by arithmetic on a pattern of a few pieces, in cache. Like the rest of a Graph, a mapping
/// is not to be read and written from several threads at once; compile resolves every mapping before it reads them
/// from more than one thread.
class VariableMapping {
 public:
  /// A piece of the mapping: elements [begin, end) on `tile`, or an unmapped gap (tile -1).
  struct Piece {
    std::int64_t begin, end, tile;
  };

  /// Maps elements [b, e) to `tile`.
  void assign(std::int64_t b, std::int64_t e, std::uint32_t tile) { assign_rows(b, e - b, e - b, 1, tile); }

  /// Maps `rows` ranges of `len` elements to `tile`, the first at b, each `step` after the one before.
  void assign_rows(std::int64_t b, std::int64_t len, std::int64_t step, std::int64_t rows, std::uint32_t tile) {
    if (len <= 0 || rows <= 0) return;
    if (step < 0) b += (rows - 1) * step, step = -step;
    if (rows > 1 && step <= len) len += (rows - 1) * step, rows = 1;  // the rows touch or overlap: one range
    if (rows == 1) step = len;
    dirty_ = true;
    Series const s{b, len, step, rows, tile};
    if (queued_.empty() && (blocks_.empty() || b >= blocks_.back().end)) {
      append(s);
      return;
    }
    queued_.push_back(s);
    // Applying costs the stored pieces and the queue: once the queue is as long, that is O(1) per assignment.
    if (queued_.size() >= std::max<std::size_t>(1024, segs_.size())) apply_queue();  // indexed when read
  }

  /// Calls f(begin, end, tile) for mapped pieces of [b, e), in order; returns the number of unmapped elements.
  template <class F>
  std::int64_t for_each(std::int64_t b, std::int64_t e, F&& f) const {
    Cursor c(*this);
    std::int64_t covered = 0;
    for (std::int64_t x = b; x < e;) {
      Piece const q = c.at(x);
      std::int64_t const hi = std::min(e, q.end);
      if (q.tile >= 0) {
        f(x, hi, static_cast<std::uint32_t>(q.tile));
        covered += hi - x;
      }
      x = hi;
    }
    return (e - b) - covered;
  }

  /// Calls f(begin, end, tile, period, reps) for every mapped piece of the variable, in order of first element: a
  /// piece of a block's pattern once for all of its repeats (the piece, then the same shifted by period, 2 period,
  /// ... reps times in all), a piece on its own alone (period 0, reps 1). A conv output mapped by blocks of
  /// channels is a few calls per block of positions rather than a call per position and block. Returns the mapped
  /// elements.
  template <class F>
  std::int64_t for_each_series(F&& f) const {
    resolve();
    std::int64_t mapped = 0;
    for (Block const& r : blocks_)
      for (std::size_t j = r.first; j < r.first + r.k; ++j) {
        Seg const& s = segs_[j];
        f(s.begin, s.end, s.tile, r.reps > 1 ? r.period : std::int64_t{0}, static_cast<std::size_t>(r.reps));
        mapped += (s.end - s.begin) * r.reps;
      }
    return mapped;
  }

  /// Mapped elements of the variable.
  std::int64_t mapped() const {
    return for_each_series([](std::int64_t, std::int64_t, std::uint32_t, std::int64_t, std::size_t) {});
  }

  /// Finds pieces for elements looked up near the one before: from the block it found last, it gallops forward or
  /// back (steps of 1, 2, 4, ... blocks) and then searches only the range it stepped over; inside a block, the
  /// repeat is arithmetic and the piece a search of its pattern (a few pieces).
  class Cursor {
   public:
    explicit Cursor(VariableMapping const& m) : m_(&m) { m.resolve(); }

    /// The piece holding element i, or the gap around it (tile -1).
    Piece at(std::int64_t i) {
      auto const& bs = m_->blocks_;
      std::size_t const n = bs.size();
      if (blk_ >= n || bs[blk_].begin > i || (blk_ + 1 < n && bs[blk_ + 1].begin <= i)) seek(i);
      if (blk_ == n) return {std::numeric_limits<std::int64_t>::min(), n == 0 ? max_ : bs[0].begin, -1};
      Block const& r = bs[blk_];
      if (i >= r.end) return {r.end, blk_ + 1 < n ? bs[blk_ + 1].begin : max_, -1};
      auto const& p = m_->segs_;
      std::int64_t const rep = r.reps == 1 ? 0 : (i - r.begin) / r.period;  // < reps: i < end
      std::int64_t const shift = rep * r.period, off = i - shift;
      std::size_t j = r.first, hi = r.first + r.k;  // j: the last piece of the pattern beginning at or before off
      if (piece_ >= j && piece_ < hi && p[piece_].begin <= off) {  // from the piece found last: it, the next, or on
        j = piece_;
        if (j + 1 < hi && p[j + 1].begin <= off) ++j;
        if (j + 1 == hi || p[j + 1].begin > off) hi = j + 1;
      }
      while (hi - j > 1) {
        std::size_t const mid = j + (hi - j) / 2;
        (p[mid].begin <= off ? j : hi) = mid;
      }
      piece_ = j;
      if (off < p[j].end) return {p[j].begin + shift, p[j].end + shift, static_cast<std::int64_t>(p[j].tile)};
      // A gap inside the block: up to the pattern's next piece, or the next repeat's first.
      return {p[j].end + shift, j + 1 < r.first + r.k ? p[j + 1].begin + shift : r.begin + (rep + 1) * r.period, -1};
    }

    /// Widens q, the piece of element i that at(i) gave last, to the elements that a progression through i with
    /// this step finds on q's tile: where i lies in a block that repeats and the step is a whole number of its
    /// periods, every element of the progression inside the block falls on the same piece of the pattern, so q
    /// becomes the block's span (a run of a channels-last tensor's channel over its positions: one lookup per
    /// block, not one per position). Otherwise q is left as it is.
    void widen(std::int64_t i, std::int64_t step, Piece& q) const {
      auto const& bs = m_->blocks_;
      if (blk_ >= bs.size() || step == 0) return;
      Block const& r = bs[blk_];
      if (r.reps > 1 && r.begin <= i && i < r.end && step % r.period == 0) q.begin = r.begin, q.end = r.end;
    }

    /// Calls f(tile, elements) for the mapped elements of [b, e), a piece at a time; where [b, e) spans whole
    /// periods of a block, once per piece of its pattern for all of them (a fetched row of a conv output crosses
    /// a piece per position and block of channels: a few calls rather than one per piece).
    /// A range that is the last one shifted by whole periods inside one block has its counts: they are given
    /// again without a lookup (a vertex's rows, one per position).
    template <class F>
    void count(std::int64_t b, std::int64_t e, F&& f) {
      auto const& bs = m_->blocks_;
      auto const& p = m_->segs_;
      std::size_t const n = bs.size();
      if (memo_blk_ < n && e - b == memo_e_ - memo_b_) {
        Block const& r = bs[memo_blk_];
        std::int64_t const d = b - memo_b_;
        if (b >= r.begin && e <= r.end && (d == r.period || d % r.period == 0)) {
          for (auto const& [tile, k] : memo_) f(tile, k);
          memo_b_ = b, memo_e_ = e;
          return;
        }
      }
      memo_.clear();
      at(b);
      std::size_t const in = blk_ < n && bs[blk_].reps > 1 && b >= bs[blk_].begin && e <= bs[blk_].end ? blk_ : n;
      memo_blk_ = n;
      memo_b_ = b, memo_e_ = e;
      auto const g = [&](std::uint32_t tile, std::int64_t k) {
        f(tile, k);
        if (in < n) memo_.emplace_back(tile, k);
      };
      while (b < e) {
        Piece const q = at(b);
        if (blk_ < n && bs[blk_].reps > 1 && bs[blk_].begin <= b && b < bs[blk_].end) {
          Block const& r = bs[blk_];
          std::int64_t const rep = (b - r.begin) / r.period, next = r.begin + (rep + 1) * r.period;
          std::int64_t const full = e > next ? std::min((e - next) / r.period, r.reps - 1 - rep) : 0;
          if (full >= 2) {
            while (b < next) {  // the rest of this period (its pieces and gaps end by the next period's first)
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
      if (memo_.size() <= 64) memo_blk_ = in;
    }

    /// count() of `rows` ranges of `len` elements, `step` apart from b, with each tile's elements of a run of rows
    /// summed: rows a whole number of periods apart inside one block have the counts of the first of them, given
    /// once multiplied (the rows of a block of channels, a row per position, cost a few calls in all).
    template <class F>
    void count_rows(std::int64_t b, std::int64_t len, std::int64_t step, std::int64_t rows, F&& f) {
      auto const& bs = m_->blocks_;
      for (std::int64_t i = 0; i < rows;) {
        std::int64_t const s = b + i * step;
        count(s, s + len, f);
        ++i;
        if (memo_blk_ >= bs.size() || i == rows) continue;  // not inside a block that repeats: row by row
        Block const& r = bs[memo_blk_];
        if (step % r.period != 0) continue;
        std::int64_t const more = std::min(rows - i, (r.end - (s + len)) / step);
        if (more <= 0) continue;
        for (auto const& [tile, k] : memo_) f(tile, k * more);
        i += more;
        memo_b_ = s + more * step, memo_e_ = memo_b_ + len;
      }
    }

   private:
    static constexpr std::int64_t max_ = std::numeric_limits<std::int64_t>::max();
    /// Sets blk_ to the last block beginning at or before i (the number of blocks when none does).
    void seek(std::int64_t i) {
      auto const& bs = m_->blocks_;
      std::size_t const n = bs.size();
      if (n == 0 || bs[0].begin > i) {
        blk_ = n;
        return;
      }
      // Bracket i: bs[lo].begin <= i, and hi == n or bs[hi].begin > i.
      std::size_t lo = 0, hi = n;
      if (blk_ < n && bs[blk_].begin <= i) {
        lo = blk_;
        hi = lo + 1;
        for (std::size_t step = 2; hi < n && bs[hi].begin <= i; step *= 2) lo = hi, hi = lo + step;
        hi = std::min(hi, n);
      } else if (blk_ < n) {
        hi = blk_;
        lo = blk_ - 1;  // blk_ > 0: bs[0].begin <= i < bs[blk_].begin
        for (std::size_t step = 1; bs[lo].begin > i; step *= 2) hi = lo, lo = lo >= step ? lo - step : 0;
      }
      auto const it = std::upper_bound(bs.begin() + static_cast<std::ptrdiff_t>(lo) + 1,
                                       bs.begin() + static_cast<std::ptrdiff_t>(hi), i,
                                       [](std::int64_t x, Block const& r) { return x < r.begin; });
      blk_ = static_cast<std::size_t>(it - bs.begin()) - 1;
    }
    VariableMapping const* m_;
    std::size_t blk_ = std::numeric_limits<std::size_t>::max();  // the block of the last lookup
    std::size_t piece_ = std::numeric_limits<std::size_t>::max();  // the pattern piece it found (an index in segs_)
    // The last count()'s range and result, when the range lies in block memo_blk_ (one that repeats).
    std::size_t memo_blk_ = std::numeric_limits<std::size_t>::max();
    std::int64_t memo_b_ = 0, memo_e_ = 0;
    std::vector<std::pair<std::uint32_t, std::int64_t>> memo_;
  };

  /// Tile of element i, or -1 when unmapped.
  std::int64_t tile_of(std::int64_t i) const { return Cursor(*this).at(i).tile; }

  /// Adds the mapping (its blocks, after resolving the queue) to `h`, a Hasher.
  template <class H>
  void hash(H& h) const {
    resolve();
    h.add(blocks_.size());
    for (Block const& r : blocks_) {
      h.add2(static_cast<std::uint64_t>(r.reps), r.k);
      if (r.reps > 1) h.add(static_cast<std::uint64_t>(r.period));
      for (std::size_t j = r.first; j < r.first + r.k; ++j) {
        Seg const& p = segs_[j];
        auto const b = static_cast<std::uint64_t>(p.begin), e = static_cast<std::uint64_t>(p.end);
        if (e >> 40 == 0 && p.tile >> 23 == 0) {
          h.add2(b, e | std::uint64_t{p.tile} << 40);
        } else {
          h.add2(b, e);
          h.add(p.tile);
        }
      }
    }
  }

  /// Resolves queued assignments now (compile calls it on every variable before reading mappings in parallel).
  void resolve() const {
    if (!queued_.empty()) apply_queue();
    if (dirty_) index();
  }
  /// Pieces of the mapping, each repeat of a block's pattern counted (after resolve()).
  std::size_t pieces() const noexcept { return pieces_of(blocks_); }
  /// Blocks of the mapping (after resolve()): what it stores.
  std::size_t blocks() const noexcept { return blocks_.size(); }

 private:
  struct Seg {
    std::int64_t begin, end;
    std::uint32_t tile;
  };
  /// An assignment: `rows` ranges of `len` elements from b, `step` apart (rows 1: step == len).
  struct Series {
    std::int64_t b, len, step, rows;
    std::uint32_t tile;
  };
  /// Pieces segs_[first] .. segs_[first + k - 1] (the pattern, at the positions of its first repeat, within
  /// [begin, begin + period)), then the same shifted by period, 2 period, ... reps times in all. A piece on its own:
  /// k 1, reps 1, period its length. end: the last element + 1.
  struct Block {
    std::int64_t begin, end, period, reps;
    std::size_t first, k;
  };

  void append(Series const& s) {
    if (s.rows == 1 && !blocks_.empty() && blocks_.back().reps == 1 && blocks_.back().end == s.b &&
        segs_[blocks_.back().first].tile == s.tile) {
      Block& r = blocks_.back();
      r.end = segs_[r.first].end = s.b + s.len;
      r.period = r.end - r.begin;
      return;
    }
    blocks_.push_back({s.b, s.b + (s.rows - 1) * s.step + s.len, s.step, s.rows, segs_.size(), 1});
    segs_.push_back({s.b, s.b + s.len, s.tile});
  }

  /// Applies the queued assignments (merge_series, else expand_and_sweep).
  void apply_queue() const;
  /// Applies the queue when no two assignments overlap: the blocks' pattern pieces (as series) and the queued
  /// series, sorted by first element, are dealt into blocks again. Series whose spans meet share one period (a
  /// result's blocks of channels, or channel slices of one tensor written by several operators, whatever their
  /// splits of the positions): they become a block per stretch of rows where the same series are live. Returns
  /// false, changing nothing, when two series overlap or their rows cannot be dealt so.
  bool merge_series() const;
  /// merge_series's group of n series (sorted by first element) whose spans meet: dealt into blocks of one period
  /// by stretches of rows, emit(pattern, k, period, reps) for each; false, having emitted part of them, when the
  /// series do not share one period, a row wraps past it, or two overlap.
  template <class Emit>
  static bool merge_rows(Series const* group, std::size_t n, std::vector<Seg>& pattern, Emit&& emit);
  /// Applies the queue piece by piece: every element takes the tile of the last assignment covering it.
  void expand_and_sweep() const;

  static std::size_t pieces_of(std::vector<Block> const& bs) noexcept {
    std::size_t n = 0;
    for (Block const& r : bs) n += r.k * static_cast<std::size_t>(r.reps);
    return n;
  }
  /// Sorts by first element. The queue is mostly a few ascending series (an operator maps its result block by
  /// block, each block position by position): a natural merge sort, O(n log series), takes them as they are.
  static void sort_by_begin(std::vector<Seg>& q);
  /// Merges the queued pieces q into `pieces` (sorted, apart) when they overlap neither each other nor `pieces`;
  /// returns false, changing nothing, when they do.
  static bool merge_pieces(std::vector<Seg>& pieces, std::vector<Seg> q);
  /// Applies the queued pieces q, in order, over `pieces`: a sweep over the boundaries of all of them (priority
  /// 0 for `pieces`, which do not overlap; 1, 2, ... for q in order), keeping the live ones in a max-heap by
  /// priority.
  static void sweep(std::vector<Seg>& pieces, std::vector<Seg> const& q);
  /// Folds each run of single-piece blocks that repeats (a pattern of up to 256 pieces repeated to 16 pieces or
  /// more, on the same tiles) into one block: O(pieces) of the runs. Blocks that repeat already stay as they are.
  void index() const;
  // Mutable: a read resolves the queue first (see the class comment).
  mutable std::vector<Block> blocks_;
  mutable std::vector<Seg> segs_;
  mutable std::vector<Series> queued_;
  mutable bool dirty_ = false;
};

}  // namespace tilebsp::core::detail
