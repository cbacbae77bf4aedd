// Targets, variables, constants, tile mapping, map_linearly and shard views.
#include "helpers.hpp"

#include <doctest/doctest.h>
#include <tilebsp/ops/detail/common.hpp>

#include <algorithm>
#include <map>
#include <random>

namespace tb = tilebsp;

TEST_CASE("target presets") {
  auto mk2 = tb::targets::ipu_mk2();
  CHECK(mk2.num_tiles() == 1472);
  CHECK(mk2.bytes_per_tile == 624 * 1024);
  CHECK(mk2.workers_per_tile == 6);
  auto mk1 = tb::targets::ipu_mk1();
  CHECK(mk1.num_tiles() == 1216);
  CHECK(mk1.bytes_per_tile == 256 * 1024);
  auto four = tb::targets::ipu_mk2(4);
  CHECK(four.num_tiles() == 4 * 1472);
  CHECK(four.ipu_of(1472 * 2 + 5) == 2);
  CHECK(tb::targets::tiny(3, 1000).total_bytes() == 3000);
  CHECK_THROWS_AS(tb::targets::ipu_mk2(0), tb::index_error);
  CHECK_THROWS_AS(tb::targets::tiny(0), tb::index_error);
}

TEST_CASE("a variable larger than the whole target is refused at add_variable, at once") {
  tb::Graph g{tb::targets::tiny(4, 1000)};  // 4000 bytes in all
  CHECK(g.add_variable<float>({1000}, "fits").num_elements() == 1000);  // exactly the target's memory
  CHECK_THROWS_WITH_AS(g.add_variable<float>({1001}, "x"),
                       "add_variable 'x': [1001] f32 is 4004 bytes, more than the whole target's memory (4000 bytes: 4 "
                       "tiles x 1000 bytes, tiny4)",
                       tb::out_of_memory);
  CHECK_THROWS_WITH_AS(g.add_variable(tb::f16, {2001}, "h"),
                       "add_variable 'h': [2001] f16 is 4002 bytes, more than the whole target's memory (4000 bytes: 4 "
                       "tiles x 1000 bytes, tiny4)",
                       tb::out_of_memory);
  // A shape whose size overflows 64 bits (a sample's --batch-size 999999999999 times an image) is refused the same way.
  tb::Graph mk2{tb::targets::ipu_mk2()};
  CHECK_THROWS_WITH_AS(mk2.add_variable<float>({999999999999, 1u << 20, 1u << 20}, "images"),
                       "add_variable 'images': [999999999999, 1048576, 1048576] f32 is more than 2^64 bytes, more than "
                       "the whole target's memory (940572672 bytes: 1472 tiles x 638976 bytes, ipu_mk2)",
                       tb::out_of_memory);
  CHECK(g.add_variable<float>({0}, "empty").num_elements() == 0);
}

TEST_CASE("set_tile_mapping and tile_mapping regions, including views") {
  tb::Graph g{tb::targets::tiny(4)};
  auto t = g.add_variable<float>({4, 4}, "t");
  g.set_tile_mapping(t.slice(0, 2), 1);
  g.set_tile_mapping(t.slice(2, 4), 3);
  auto m = g.tile_mapping(t);
  CHECK(m.tiles() == std::vector<std::size_t>{1, 3});
  CHECK(m.regions_on(1) == std::vector<tb::Interval>{{0, 8}});
  CHECK(m.regions_on(3) == std::vector<tb::Interval>{{8, 16}});
  // Remap a column: regions are over the queried view's flattened indices.
  g.set_tile_mapping(t.slice(1, 2, 1), 0);
  auto col = g.tile_mapping(t.transpose());
  CHECK(col.regions_on(0) == std::vector<tb::Interval>{{4, 8}});
  CHECK(col.regions_on(1) == std::vector<tb::Interval>{{0, 2}, {8, 10}, {12, 14}});
  std::size_t n = 0;
  for (auto const& [tile, region] : g.tile_mapping(t)) n += region.size();
  CHECK(n == 16);
  auto u = g.add_variable<float>({3}, "u");
  g.set_tile_mapping(u.slice(0, 1), 0);
  CHECK_THROWS_WITH_AS(g.tile_mapping(u), "tile_mapping: 2 of 3 elements are not mapped to any tile", tb::mapping_error);
  CHECK_THROWS_WITH_AS(g.set_tile_mapping(u, 4), "set_tile_mapping: tile 4 out of range (this graph has 4 tiles)",
                       tb::index_error);
}

TEST_CASE("set_tile_mapping of strided views, and ops' map_flat_range, map as element by element") {
  // Views of every kind are mapped a series of runs at a time; map_flat_range maps a row-major range of a view as a
  // few boxes of it. Both must give each element the tile a per-element reference gives it, the last write winning.
  std::mt19937 rng(3);
  for (int round = 0; round < 60; ++round) {
    tb::Graph g{tb::targets::tiny(8)};
    auto v = g.add_variable<float>({3, 4, 5, 6}, "v");
    std::vector<std::size_t> want(v.num_elements(), 0);
    g.set_tile_mapping(v, 0);
    std::vector<std::size_t> perm{0, 1, 2, 3};
    for (int k = 0; k < 6; ++k) {
      std::shuffle(perm.begin(), perm.end(), rng);
      tb::Tensor view = v.dimshuffle(perm);
      std::size_t const d = rng() % 4, lo = rng() % view.dim(d), hi = lo + 1 + rng() % (view.dim(d) - lo);
      view = view.slice(lo, hi, d);
      if (rng() % 3 == 0) view = view.reverse(rng() % 4);
      std::size_t const tile = 1 + rng() % 7, n = view.num_elements();
      std::size_t const b = rng() % n, e = b + rng() % (n - b + 1);
      bool const flat = rng() % 2;
      if (flat) tb::ops::detail::map_flat_range(g, view, b, e, tile);
      else g.set_tile_mapping(view, tile);
      // The reference: the elements of view.flatten() in [b, e) (all of them for set_tile_mapping).
      std::size_t at = 0;
      view.for_each_run([&](std::uint32_t, std::int64_t start, std::int64_t stride, std::int64_t count) {
        for (std::int64_t i = 0; i < count; ++i, ++at)
          if (!flat || (at >= b && at < e)) want[static_cast<std::size_t>(start + i * stride)] = tile;
      });
    }
    std::vector<std::size_t> got(v.num_elements(), 99);
    for (auto const& [tile, region] : g.tile_mapping(v))
      for (std::size_t i = region.begin; i < region.end; ++i) got[i] = tile;
    REQUIRE(got == want);
  }
}

TEST_CASE("set_tile_mapping_like maps each element where the same element of another tensor lives") {
  tb::Graph g{tb::targets::tiny(4)};
  auto a = g.add_variable<float>({4, 6}, "a");
  // A layout with a piece per row and block of columns, assigned block by block (as an operator maps a result).
  for (std::size_t r = 0; r < 4; ++r) {
    g.set_tile_mapping(a.slice({r, 0}, {r + 1, 2}), 1);
    g.set_tile_mapping(a.slice({r, 2}, {r + 1, 6}), r % 2 == 0 ? 2 : 3);
  }
  auto b = g.add_variable<float>({4, 6}, "b");
  g.set_tile_mapping_like(b, a);
  auto want = g.tile_mapping(a);
  auto got = g.tile_mapping(b);
  for (std::size_t tile = 0; tile < 4; ++tile) CHECK(got.regions_on(tile) == want.regions_on(tile));
  // Onto consecutive elements of a larger variable (a whole variable's blocks copied as they are, shifted).
  auto big = g.add_variable<float>({30}, "big");
  g.set_tile_mapping(big, 0);
  g.set_tile_mapping_like(big.slice(3, 27).reshape({6, 4}), a);
  for (std::size_t tile = 1; tile < 4; ++tile) {
    std::vector<tb::Interval> shifted;
    for (auto const& r : want.regions_on(tile)) shifted.push_back({r.begin + 3, r.end + 3});
    CHECK(g.tile_mapping(big).regions_on(tile) == shifted);
  }
  CHECK(g.tile_mapping(big).regions_on(0) == std::vector<tb::Interval>{{0, 3}, {27, 30}});
  // Views on both sides: a transposed, strided target follows its source's flat order.
  auto c = g.add_variable<float>({6, 4}, "c");
  g.set_tile_mapping_like(c.transpose(), a);
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 6; ++j) {
      auto const m = g.tile_mapping(c[j][i]);
      auto const w = g.tile_mapping(a[i][j]);
      CHECK(m.begin()->first == w.begin()->first);
    }
  auto d = g.add_variable<float>({12}, "d");
  g.set_tile_mapping_like(d, a.slice(1, 3));  // rows 1 and 2
  CHECK(g.tile_mapping(d).regions_on(1) == std::vector<tb::Interval>{{0, 2}, {6, 8}});
  CHECK(g.tile_mapping(d).regions_on(3) == std::vector<tb::Interval>{{2, 6}});
  CHECK(g.tile_mapping(d).regions_on(2) == std::vector<tb::Interval>{{8, 12}});
  // A tensor laid out like itself, reversed: every element takes the tile its mirror had.
  auto e = g.add_variable<float>({4}, "e");
  g.set_tile_mapping(e.slice(0, 1), 0);
  g.set_tile_mapping(e.slice(1, 4), 3);
  g.set_tile_mapping_like(e, e.reverse(0));
  CHECK(g.tile_mapping(e).regions_on(3) == std::vector<tb::Interval>{{0, 3}});
  CHECK(g.tile_mapping(e).regions_on(0) == std::vector<tb::Interval>{{3, 4}});

  auto u = g.add_variable<float>({3}, "u");
  g.set_tile_mapping(u.slice(0, 1), 0);
  CHECK_THROWS_WITH_AS(g.set_tile_mapping_like(e.slice(0, 3), u),
                       "set_tile_mapping_like: 2 of 3 elements to copy from are not mapped to any tile", tb::mapping_error);
  auto f = g.add_variable<float>({3}, "f");  // whole variables both: nothing is mapped before the error
  CHECK_THROWS_WITH_AS(g.set_tile_mapping_like(f, u),
                       "set_tile_mapping_like: 2 of 3 elements to copy from are not mapped to any tile", tb::mapping_error);
  CHECK_THROWS_AS(g.tile_mapping(f.slice(0, 1)), tb::mapping_error);  // u maps its element 0; f does not
  CHECK_THROWS_WITH_AS(g.set_tile_mapping_like(b, u),
                       "set_tile_mapping_like: the tensor of shape [4, 6] has 24 elements but the one to copy from ([3]) has 3",
                       tb::shape_error);
  tb::Graph other{tb::targets::tiny(4)};
  CHECK_THROWS_AS(other.set_tile_mapping_like(other.add_variable<float>({24}, "x"), a), tb::error);
}

TEST_CASE("map_linearly spreads evenly and honours grain and minimum bytes per tile") {
  tb::Graph g{tb::targets::tiny(4)};
  auto t = g.add_variable<float>({10}, "t");
  tb::map_linearly(g, t);
  auto m = g.tile_mapping(t);
  CHECK(m.regions_on(0) == std::vector<tb::Interval>{{0, 3}});
  CHECK(m.regions_on(3) == std::vector<tb::Interval>{{9, 10}});
  auto grain = g.add_variable<float>({10}, "grain");
  tb::map_linearly(g, grain, {.grain = 4});
  CHECK(g.tile_mapping(grain).regions_on(1) == std::vector<tb::Interval>{{4, 8}});
  CHECK(g.tile_mapping(grain).regions_on(2) == std::vector<tb::Interval>{{8, 10}});
  auto big = g.add_variable<float>({10}, "big");
  tb::map_linearly(g, big, {.min_bytes_per_tile = 24});  // at least 6 floats per used tile
  CHECK(g.tile_mapping(big).tiles() == std::vector<std::size_t>{0, 1});
  CHECK_THROWS_AS(tb::map_linearly(g, big, {.grain = 0}), tb::option_error);
}

TEST_CASE("shard views place data on one IPU and number tiles locally") {
  tb::Graph g{tb::targets::tiny(8, 1024, 4)};
  CHECK(g.num_tiles() == 32);
  auto s2 = g.shard(2);
  CHECK(s2.num_tiles() == 8);
  CHECK(s2.first_tile() == 16);
  auto t = s2.add_variable<float>({16}, "t");
  tb::map_linearly(s2, t);
  CHECK(s2.tile_mapping(t).tiles() == std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(g.tile_mapping(t).tiles() == std::vector<std::size_t>{16, 17, 18, 19, 20, 21, 22, 23});
  CHECK(g.shard(0).tile_mapping(t).empty());
  CHECK_THROWS_WITH_AS(g.shard(4), "shard: IPU 4 out of range (target 'tiny8x4' has 4 IPUs)", tb::index_error);
  CHECK_THROWS_AS(s2.set_tile_mapping(t, 8), tb::index_error);
}

TEST_CASE("constants and tensors of other graphs") {
  tb::Graph g{tb::targets::tiny(2)};
  CHECK_THROWS_WITH_AS(g.add_constant<float>({3}, {1.0f, 2.0f}, "c"),
                       "add_constant: 'c' has shape [3] (3 elements) but 2 values were given", tb::shape_error);
  tb::Graph h{tb::targets::tiny(2)};
  auto t = h.add_variable<float>({2}, "t");
  CHECK_THROWS_WITH_AS(g.set_tile_mapping(t, 0), "set_tile_mapping: the tensor belongs to another graph", tb::error);
}

TEST_CASE("VariableMapping: a cursor finds pieces of repeated patterns (with gaps) as in a plain list") {
  // Repeats are looked up by arithmetic on their pattern: each lookup, in any order, must give the whole piece
  // (or gap) holding the element, as the list of pieces has it.
  tb::core::detail::VariableMapping m;
  std::vector<std::int64_t> want;
  auto const put = [&](std::int64_t b, std::int64_t e, std::uint32_t tile) {
    m.assign(b, e, tile);
    if (static_cast<std::int64_t>(want.size()) < e) want.resize(static_cast<std::size_t>(e), -1);
    for (std::int64_t i = b; i < e; ++i) want[static_cast<std::size_t>(i)] = tile;
  };
  for (std::int64_t pos = 0; pos < 300; ++pos) {  // three pieces and a gap per position
    put(pos * 10, pos * 10 + 3, 1);
    put(pos * 10 + 3, pos * 10 + 7, 2);
    put(pos * 10 + 8, pos * 10 + 10, 3);
  }
  std::mt19937 rng(11);
  std::int64_t at = 3000;
  for (int k = 0; k < 40; ++k) {  // no pattern
    std::int64_t const len = 1 + static_cast<std::int64_t>(rng() % 9);
    put(at, at + len, static_cast<std::uint32_t>(rng() % 5));
    at += len + static_cast<std::int64_t>(rng() % 2);
  }
  for (std::int64_t r = 0; r < 50; ++r) put(at + r * 5, at + r * 5 + 2, 4);  // one piece and a gap per period
  at += 250;
  for (std::int64_t pos = 0; pos < 20; ++pos)  // blocks mapped block by block (queued, then merged)
    for (std::uint32_t block = 0; block < 2; ++block) put(at + pos * 4 + block * 2, at + pos * 4 + block * 2 + 2, 5 + block);
  auto const n = static_cast<std::int64_t>(want.size());
  auto const tile_at = [&](std::int64_t i) { return i < 0 || i >= n ? -1 : want[static_cast<std::size_t>(i)]; };
  tb::core::detail::VariableMapping::Cursor c(m);
  for (int k = 0; k < 20000; ++k) {
    std::int64_t const i = k < n ? k : static_cast<std::int64_t>(rng() % static_cast<unsigned>(n + 20));
    auto const p = c.at(i);
    REQUIRE(p.begin <= i);
    REQUIRE(i < p.end);
    CHECK(p.tile == tile_at(i));
    if (p.begin > 0) CHECK(tile_at(p.begin - 1) != p.tile);  // the whole piece or gap
    if (p.end < n) CHECK(tile_at(p.end) != p.tile);
    for (std::int64_t x = std::max<std::int64_t>(p.begin, 0); x < std::min(p.end, n); ++x) REQUIRE(tile_at(x) == p.tile);
  }
  // Elements per tile of ranges, short and long (whole periods of a repeat are counted per pattern piece).
  for (int k = 0; k < 2000; ++k) {
    std::int64_t const b = static_cast<std::int64_t>(rng() % static_cast<unsigned>(n + 5));
    std::int64_t const e = std::min(n + 5, b + static_cast<std::int64_t>(rng() % (k % 2 ? 40u : 4000u)));
    std::map<std::int64_t, std::int64_t> want_count, got_count;
    for (std::int64_t x = b; x < e; ++x)
      if (tile_at(x) >= 0) ++want_count[tile_at(x)];
    c.count(b, e, [&](std::uint32_t tile, std::int64_t elements) {
      CHECK(elements > 0);
      got_count[tile] += elements;
    });
    REQUIRE(got_count == want_count);
    // The same range a whole number of periods on (a row at the next position): the same counts, or others
    // where it leaves the repeat.
    for (std::int64_t shift : {10, 20, 5, -10, 4}) {
      std::map<std::int64_t, std::int64_t> want_next, got_next;
      for (std::int64_t x = b + shift; x < e + shift; ++x)
        if (tile_at(x) >= 0) ++want_next[tile_at(x)];
      c.count(b + shift, e + shift, [&](std::uint32_t tile, std::int64_t elements) { got_next[tile] += elements; });
      REQUIRE(got_next == want_next);
    }
  }
  // Rows: `rows` ranges of `len`, `step` apart (a whole number of periods or not, inside a repeat, across its end
  // or outside any), summed per tile as the per-element reference sums them.
  for (int k = 0; k < 3000; ++k) {
    std::int64_t const b = static_cast<std::int64_t>(rng() % static_cast<unsigned>(n + 5));
    std::int64_t const len = 1 + static_cast<std::int64_t>(rng() % 12);
    std::int64_t const steps[] = {10, 20, 5, 4, len + 1, 13, 50};
    std::int64_t const step = std::max(len + 1, steps[rng() % 7]);
    std::int64_t const rows = 1 + static_cast<std::int64_t>(rng() % 40);
    std::map<std::int64_t, std::int64_t> want_count, got_count;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t x = b + r * step; x < b + r * step + len; ++x)
        if (tile_at(x) >= 0) ++want_count[tile_at(x)];
    c.count_rows(b, len, step, rows, [&](std::uint32_t tile, std::int64_t elements) {
      CHECK(elements > 0);
      got_count[tile] += elements;
    });
    REQUIRE(got_count == want_count);
  }
}

TEST_CASE("VariableMapping: series of rows are stored as blocks, and agree with a per-element reference") {
  using tb::core::detail::VariableMapping;
  auto const check = [](VariableMapping const& m, std::vector<std::int64_t> const& want) {
    auto const n = static_cast<std::int64_t>(want.size());
    std::vector<std::int64_t> got(want.size(), -1);
    std::int64_t unmapped = 0;
    for (auto t : want) unmapped += t < 0;
    CHECK(m.for_each(0, n, [&](std::int64_t b, std::int64_t e, std::uint32_t tile) {
      for (std::int64_t i = b; i < e; ++i) got[static_cast<std::size_t>(i)] = tile;
    }) == unmapped);
    CHECK(m.mapped() == n - unmapped);
    CHECK(got == want);
    VariableMapping::Cursor c(m);
    for (std::int64_t i = 0; i < n; ++i) {
      auto const p = c.at(i);
      REQUIRE(p.begin <= i);
      REQUIRE(i < p.end);
      REQUIRE(p.tile == want[static_cast<std::size_t>(i)]);
    }
  };
  {
    // A result [positions, 4 blocks of 8 channels] mapped block by block, each block in two halves of the positions
    // (how operators map their results): 8 series, stored as 2 blocks of 4-piece patterns.
    VariableMapping m;
    std::int64_t const positions = 10000, period = 32;
    std::vector<std::int64_t> want(static_cast<std::size_t>(positions * period), -1);
    for (std::uint32_t block = 0; block < 4; ++block)
      for (std::int64_t half = 0; half < 2; ++half) {
        std::uint32_t const tile = block * 2 + static_cast<std::uint32_t>(half);
        std::int64_t const b = half * (positions / 2) * period + block * 8;
        m.assign_rows(b, 8, period, positions / 2, tile);
        for (std::int64_t r = 0; r < positions / 2; ++r)
          for (std::int64_t x = 0; x < 8; ++x) want[static_cast<std::size_t>(b + r * period + x)] = tile;
      }
    m.resolve();
    CHECK(m.blocks() == 2);
    CHECK(m.pieces() == static_cast<std::size_t>(positions * 4));
    check(m, want);
    std::size_t calls = 0;
    CHECK(m.for_each_series([&](std::int64_t, std::int64_t, std::uint32_t, std::int64_t p, std::size_t reps) {
      ++calls;
      CHECK(p == period);
      CHECK(reps == static_cast<std::size_t>(positions / 2));
    }) == positions * period);
    CHECK(calls == 8);
    // One more block over the same elements: the last assignment wins, piece by piece.
    m.assign_rows(period * 3 + 4, 8, period, 7, 9);
    for (std::int64_t r = 0; r < 7; ++r)
      for (std::int64_t x = 0; x < 8; ++x) want[static_cast<std::size_t>(period * (3 + r) + 4 + x)] = 9;
    check(m, want);
  }
  {
    // Two operators write the channel halves of one [positions, 16] tensor, each with its own split of the
    // positions (the inputs of a Concat written in place): a block for each stretch of rows where the same series
    // are live (cuts at 0, 450, 700, 900, ...: 11 stretches).
    VariableMapping m;
    std::int64_t const positions = 3000, period = 16;
    std::vector<std::int64_t> want(static_cast<std::size_t>(positions * period), -1);
    auto const write = [&](std::int64_t channel, std::int64_t split, std::uint32_t first_tile) {
      for (std::int64_t p = 0, t = 0; p < positions; p += split, ++t) {
        std::int64_t const rows = std::min(split, positions - p);
        auto const tile = first_tile + static_cast<std::uint32_t>(t);
        m.assign_rows(p * period + channel, 8, period, rows, tile);
        for (std::int64_t r = p; r < p + rows; ++r)
          for (std::int64_t x = 0; x < 8; ++x) want[static_cast<std::size_t>(r * period + channel + x)] = tile;
      }
    };
    write(8, 700, 0);
    m.resolve();
    write(0, 450, 100);  // before what is mapped: queued, then merged
    m.resolve();
    CHECK(m.blocks() == 11);
    check(m, want);
  }
  {
    // Rows that touch (step == len) are one range; a pattern as long as its period is one piece.
    VariableMapping m;
    m.assign_rows(0, 4, 4, 100, 3);
    m.assign_rows(400, 2, 4, 50, 5);
    m.assign_rows(402, 2, 4, 50, 5);
    m.resolve();
    CHECK(m.blocks() == 2);
    CHECK(m.pieces() == 2);
    std::vector<std::int64_t> want(600, 3);
    std::fill(want.begin() + 400, want.end(), 5);
    check(m, want);
  }
  std::mt19937 rng(5);
  for (int round = 0; round < 300; ++round) {
    // Random series (some whole blocks of a result, some anywhere, overlapping or not), ranges and reads between.
    std::int64_t const n = 1 + static_cast<std::int64_t>(rng() % 600);
    std::vector<std::int64_t> want(static_cast<std::size_t>(n), -1);
    VariableMapping m;
    int const ops = 1 + static_cast<int>(rng() % 30);
    std::int64_t const period = 4 + static_cast<std::int64_t>(rng() % 12);
    std::int64_t const same_rows = round % 2 ? 0 : 1 + static_cast<std::int64_t>(rng() % 20);  // series that join
    for (int k = 0; k < ops; ++k) {
      auto const tile = static_cast<std::uint32_t>(rng() % 4);
      std::int64_t b = static_cast<std::int64_t>(rng() % static_cast<unsigned>(n)), len, step, rows;
      switch (rng() % 3) {
        case 0:  // a block of a result: rows of the same period
          b = std::min(n - 1, b / period * period + static_cast<std::int64_t>(rng() % static_cast<unsigned>(period)));
          len = 1 + static_cast<std::int64_t>(rng() % static_cast<unsigned>(period));
          step = period;
          break;
        case 1:  // any series, steps negative or shorter than the rows too
          len = 1 + static_cast<std::int64_t>(rng() % 6);
          step = static_cast<std::int64_t>(rng() % 15) - 4;
          break;
        default:  // one range
          len = 1 + static_cast<std::int64_t>(rng() % 40);
          step = len;
      }
      len = std::min(len, n - b);
      std::int64_t const room = step > 0 ? (n - b - len) / step + 1 : step < 0 ? b / -step + 1 : 50;
      rows = std::max<std::int64_t>(1, std::min<std::int64_t>(room, same_rows > 0 ? same_rows : 1 + static_cast<std::int64_t>(rng() % 60)));
      m.assign_rows(b, len, step, rows, tile);
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t x = b + r * step; x < b + r * step + len; ++x)
          if (x >= 0 && x < n) want[static_cast<std::size_t>(x)] = tile;
      if (rng() % 6 == 0) CHECK(m.tile_of(b) == want[static_cast<std::size_t>(b)]);  // a read between writes
    }
    check(m, want);
  }
}

TEST_CASE("VariableMapping: appends, out-of-order and overlapping assignments agree with a per-element reference") {
  // The mapping is a sorted vector with a queue of out-of-order assignments, resolved by a sweep: every element
  // takes the tile of the last assignment covering it, as a per-element array does.
  {
    // Blocks of channels at every position, block by block (how operators map their results): every run of a
    // later block lies before pieces already mapped, and none overlaps; the queue merges into the pieces.
    tb::core::detail::VariableMapping m;
    for (std::uint32_t block = 0; block < 4; ++block)
      for (std::int64_t pos = 0; pos < 2000; ++pos) m.assign(pos * 8 + block * 2, pos * 8 + block * 2 + 2, block);
    for (std::int64_t i = 0; i < 16000; ++i) CHECK(m.tile_of(i) == (i % 8) / 2);
    CHECK(m.pieces() == 8000);
  }
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::int64_t const n = 1 + static_cast<std::int64_t>(rng() % 300);
    std::vector<std::int64_t> want(static_cast<std::size_t>(n), -1);
    tb::core::detail::VariableMapping m;
    int const ops = 1 + static_cast<int>(rng() % 60);
    std::int64_t next = 0;  // increasing assignments, with out-of-order ones mixed in
    for (int k = 0; k < ops; ++k) {
      std::int64_t b, e;
      if (rng() % 3 != 0 && next < n) {
        b = next, e = std::min(n, next + 1 + static_cast<std::int64_t>(rng() % 20));
        next = e + static_cast<std::int64_t>(rng() % 3);  // sometimes a gap
      } else {
        b = static_cast<std::int64_t>(rng() % static_cast<unsigned>(n));
        e = std::min(n, b + static_cast<std::int64_t>(rng() % 40));
      }
      auto const tile = static_cast<std::uint32_t>(rng() % 4);
      m.assign(b, e, tile);
      for (std::int64_t i = b; i < e; ++i) want[static_cast<std::size_t>(i)] = tile;
      if (rng() % 5 == 0) CHECK(m.tile_of(b) == (b < e ? tile : want[static_cast<std::size_t>(b)]));  // a read between writes
    }
    std::vector<std::int64_t> got(static_cast<std::size_t>(n), -1);
    std::int64_t unmapped_want = 0;
    for (auto t : want) unmapped_want += t < 0;
    CHECK(m.for_each(0, n, [&](std::int64_t b, std::int64_t e, std::uint32_t tile) {
      for (std::int64_t i = b; i < e; ++i) got[static_cast<std::size_t>(i)] = tile;
    }) == unmapped_want);
    CHECK(got == want);
    tb::core::detail::VariableMapping::Cursor c(m);
    for (std::int64_t i = 0; i < n; i += 1 + static_cast<std::int64_t>(rng() % 3)) {
      auto const p = c.at(i);
      CHECK(p.begin <= i);
      CHECK(i < p.end);
      CHECK(p.tile == want[static_cast<std::size_t>(i)]);
      CHECK(m.tile_of(i) == want[static_cast<std::size_t>(i)]);
    }
  }
}
