// compile(): mapping checks, write conflicts, copy planning, stream checks, memory accounting and liveness.
#include "helpers.hpp"
#include "program/same_executable.hpp"

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

namespace tb = tilebsp;

TEST_CASE("unmapped data is a compile error naming the tensor") {
  tb::Graph g{tb::targets::tiny(2)};
  auto t = g.add_variable<float>({4}, "weights");
  g.set_tile_mapping(t.slice(0, 2), 0);
  CHECK_THROWS_WITH_AS(tb::compile(g, tb::sync()),
                       "compile: variable 'weights' has 2 of 4 elements not mapped to any tile (first unmapped element: 2)",
                       tb::mapping_error);
}

TEST_CASE("a vertex field connected to data on another tile") {
  tb::Graph g{tb::targets::tiny(2)};
  auto x = g.add_variable<float>({4}, "x"), y = g.add_variable<float>({4}, "y");
  g.set_tile_mapping(x, 0);
  g.set_tile_mapping(y.slice(0, 3), 0);
  g.set_tile_mapping(y.slice(3, 4), 1);
  auto cs = g.add_compute_set("axpy");
  g.add_vertex<tbt::Axpy>(cs, 0, x, y, 2.0f);
  CHECK_THROWS_WITH_AS(tb::compile(g, tb::execute(cs)),
                       "compute set 'axpy': vertex tbt::Axpy on tile 0: field 'y' is connected to element 3 of 'y', "
                       "which is on tile 1 (connect it with fetch() to read data from other tiles)",
                       tb::mapping_error);
}

TEST_CASE("fields of rows (a block of a [rows, columns] variable): locality, conflicts and results as for runs") {
  tb::Graph g{tb::targets::tiny(2)};
  auto x = g.add_variable<float>({4, 6}, "x"), y = g.add_variable<float>({12}, "y");
  g.set_tile_mapping(x, 0);
  g.set_tile_mapping(y, 0);
  tb::Tensor const rows = x.slice(tb::Shape{0, 1}, tb::Shape{4, 4});  // 4 rows of 3 elements, 6 apart
  SUBCASE("a row elsewhere: the message names its element there") {
    g.set_tile_mapping(x.slice(tb::Shape{2, 2}, tb::Shape{3, 3}), 1);  // element 14
    auto cs = g.add_compute_set("rows");
    g.add_vertex<tbt::Copy>(cs, 0, rows, y);
    CHECK_THROWS_WITH_AS(tb::compile(g, tb::execute(cs)),
                         "compute set 'rows': vertex tbt::Copy on tile 0: field 'in' is connected to element 14 of 'x', "
                         "which is on tile 1 (connect it with fetch() to read data from other tiles)",
                         tb::mapping_error);
  }
  SUBCASE("two series of rows writing one element") {
    auto cs = g.add_compute_set("overlap");
    g.add_vertex<tbt::Copy>(cs, 0, y.slice(0, 8), x.slice(tb::Shape{0, 0}, tb::Shape{4, 2}));
    g.add_vertex<tbt::Copy>(cs, 0, y.slice(8, 12), x.slice(tb::Shape{1, 1}, tb::Shape{3, 3}));
    CHECK_THROWS_WITH_AS(tb::compile(g, tb::execute(cs)),
                         "compute set 'overlap': vertex tbt::Copy (tile 0) field 'out' and vertex tbt::Copy (tile 0) "
                         "field 'out' both write element 7 of 'x'",
                         tb::write_conflict_error);
  }
  SUBCASE("rows gathered and scattered: the values land where the views say") {
    auto z = g.add_variable<float>({8}, "z");
    g.set_tile_mapping(z, 1);
    auto cs = g.add_compute_set("copy rows");
    g.add_vertex<tbt::Copy>(cs, 0, rows, y);                                                // gathers columns 1-3
    g.add_vertex<tbt::Copy>(cs, 0, tb::fetch(z), x.slice(tb::Shape{0, 4}, tb::Shape{4, 6}));  // scatters to 4-5
    auto w = g.add_variable<float>({6}, "w");
    g.set_tile_mapping(w, 1);
    g.add_vertex<tbt::Copy>(cs, 1, tb::fetch(x.slice(tb::Shape{0, 1}, tb::Shape{2, 4})), w);  // fetches 2 rows
    auto const exe = tb::compile(g, tb::execute(cs));
    CHECK(exe.schedule().compute_sets.at(0).fetch_bytes == 32 + 24);  // z from tile 1, two rows of x from tile 0
    tb::Engine e{exe};
    std::vector<float> xs(24), zs{-1, -2, -3, -4, -5, -6, -7, -8};
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i);
    e.write(x, xs);
    e.write(z, zs);
    e.run();
    CHECK(e.read<float>(y) == std::vector<float>{1, 2, 3, 7, 8, 9, 13, 14, 15, 19, 20, 21});
    CHECK(e.read<float>(w) == std::vector<float>{1, 2, 3, 7, 8, 9});
    auto const got = e.read<float>(x);
    for (std::size_t r = 0; r < 4; ++r) {
      CHECK(got[r * 6] == xs[r * 6]);
      for (std::size_t c = 1; c < 4; ++c) CHECK(got[r * 6 + c] == xs[r * 6 + c]);
      CHECK(got[r * 6 + 4] == zs[2 * r]);
      CHECK(got[r * 6 + 5] == zs[2 * r + 1]);
    }
  }
}

TEST_CASE("two vertices of one compute set writing the same element") {
  tb::Graph g{tb::targets::tiny(2)};
  auto x = g.add_variable<float>({4}, "x"), y = g.add_variable<float>({4}, "y");
  g.set_tile_mapping(x, 0);
  g.set_tile_mapping(y, 0);
  auto cs = g.add_compute_set("overlap");
  g.add_vertex<tbt::Copy>(cs, 0, x.slice(0, 2), y.slice(0, 2));
  g.add_vertex<tbt::Copy>(cs, 0, x.slice(1, 3), y.slice(1, 3));
  CHECK_THROWS_WITH_AS(tb::compile(g, tb::execute(cs)),
                       "compute set 'overlap': vertex tbt::Copy (tile 0) field 'out' and vertex tbt::Copy (tile 0) "
                       "field 'out' both write element 1 of 'y'",
                       tb::write_conflict_error);
}

TEST_CASE("a vertex reading what another vertex of the same compute set writes") {
  tb::Graph g{tb::targets::tiny(2)};
  auto x = g.add_variable<float>({4}, "x");
  g.set_tile_mapping(x, 0);
  auto cs = g.add_compute_set("race");
  g.add_vertex<tbt::Copy>(cs, 0, x.slice(0, 2), x.slice(2, 4));
  g.add_vertex<tbt::Copy>(cs, 0, x.slice(3, 4), x.slice(1, 2));
  CHECK_THROWS_WITH_AS(tb::compile(g, tb::execute(cs)),
                       "compute set 'race': vertex tbt::Copy (tile 0) field 'in' reads element 1 of 'x', which vertex "
                       "tbt::Copy (tile 0) field 'out' writes in the same compute set",
                       tb::write_conflict_error);
}

TEST_CASE("strided reads conflict only with the elements they read") {
  // A strided read is checked as a progression, not element by element: writes between its elements are no
  // conflict, a write that hits one is, forwards and reversed.
  tb::Graph g{tb::targets::tiny(2)};
  auto x = g.add_variable<float>({12}, "x"), y = g.add_variable<float>({4}, "y"), z = g.add_variable<float>({4}, "z");
  for (auto const& t : {x, y, z}) g.set_tile_mapping(t, 0);
  tb::Tensor const every_third = x.slice(0, 12).reshape({4, 3}).slice(1, 2, 1).flatten();  // elements 1, 4, 7, 10
  auto ok = g.add_compute_set("between");
  g.add_vertex<tbt::Copy>(ok, 0, every_third, y);
  g.add_vertex<tbt::Copy>(ok, 0, z.slice(0, 2), x.slice(2, 4));    // elements 2, 3
  g.add_vertex<tbt::Copy>(ok, 0, z.slice(0, 2), x.slice(5, 7));    // elements 5, 6
  g.add_vertex<tbt::Copy>(ok, 0, z.slice(0, 1), x.slice(11, 12));  // element 11
  CHECK_NOTHROW(tb::compile(g, tb::execute(ok)));
  for (bool reversed : {false, true}) {
    CAPTURE(reversed);
    auto bad = g.add_compute_set(reversed ? "hit reversed" : "hit");
    g.add_vertex<tbt::Copy>(bad, 0, reversed ? every_third.reverse(0) : every_third, y);
    g.add_vertex<tbt::Copy>(bad, 0, z.slice(0, 3), x.slice(5, 8));  // elements 5, 6, 7
    std::string const message = "compute set '" + std::string(reversed ? "hit reversed" : "hit") +
                                "': vertex tbt::Copy (tile 0) field 'in' reads element 7 of 'x', which vertex "
                                "tbt::Copy (tile 0) field 'out' writes in the same compute set";
    CHECK_THROWS_WITH_AS(tb::compile(g, tb::execute(bad)), message.c_str(), tb::write_conflict_error);
  }
}

TEST_CASE("crowded writes: a vertex per channel of a channels-last tensor, reading what it writes") {
  // 80 vertices each write one channel of x [64 positions, 80 channels] (their spans overlap 80 deep: checked with
  // a table of each element's writer), each reading the channel it writes: no conflict. A vertex reading an element
  // that another writes conflicts, named by its first such element.
  tb::Graph g{tb::targets::tiny(1, 1 << 20)};
  auto x = g.add_variable<float>({64, 80}, "x"), z = g.add_variable<float>({2}, "z");
  for (auto const& t : {x, z}) g.set_tile_mapping(t, 0);
  auto const column = [&](std::size_t c) { return x.slice(c, c + 1, 1).flatten(); };
  auto const add_channels = [&](tb::ComputeSet cs) {
    for (std::size_t c = 0; c < 80; ++c) g.add_vertex<tbt::Copy>(cs, 0, column(c), column(c));
  };
  auto ok = g.add_compute_set("channels");
  add_channels(ok);
  CHECK_NOTHROW(tb::compile(g, tb::execute(ok)));
  auto bad = g.add_compute_set("channels and a reader");
  add_channels(bad);
  g.add_vertex<tbt::Copy>(bad, 0, x.flatten().slice(801, 803), z);  // elements 801, 802: channels 1 and 2 of row 10
  CHECK_THROWS_WITH_AS(tb::compile(g, tb::execute(bad)),
                       "compute set 'channels and a reader': vertex tbt::Copy (tile 0) field 'in' reads element 801 of "
                       "'x', which vertex tbt::Copy (tile 0) field 'out' writes in the same compute set",
                       tb::write_conflict_error);
}

TEST_CASE("strided writes conflict only where they share an element") {
  // A strided write is one progression: vertices writing interleaved columns do not conflict, and a variable they
  // write whole is known to be (full_writes); two writes that share an element conflict, found exactly.
  tb::Graph g{tb::targets::tiny(2)};
  auto x = g.add_variable<float>({12, 5}, "x"), y = g.add_variable<float>({12}, "y");
  auto wide = g.add_variable<float>({10, 60}, "wide"), r = g.add_variable<float>({10}, "r");
  for (auto const& t : {x, y, wide, r}) g.set_tile_mapping(t, 0);
  auto const column = [](tb::Tensor const& t, std::size_t c) { return t.slice(c, c + 1, 1).flatten(); };
  auto const flat = x.flatten();
  std::vector<float> ys(12), rs(10);
  for (std::size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<float>(i + 1);
  for (std::size_t i = 0; i < rs.size(); ++i) rs[i] = static_cast<float>(100 + i);
  auto const run = [&](tb::ComputeSet cs, tb::Tensor const& t) {
    auto const exe = tb::compile(g, tb::execute(cs));
    tb::Engine e{exe};
    e.write(y, ys);
    e.write(r, rs);
    e.run();
    return std::pair{e.read<float>(t), exe.schedule().compute_sets.at(0).full_writes};
  };
  SUBCASE("columns") {
    auto cs = g.add_compute_set("columns");
    for (std::size_t c = 0; c < 5; ++c) g.add_vertex<tbt::Copy>(cs, 0, y, column(x, c));
    auto const [got, full] = run(cs, x);
    for (std::size_t i = 0; i < 60; ++i) CHECK(got[i] == ys[i / 5]);
    CHECK(full == std::vector<std::uint32_t>{x.runs().front().var});
  }
  SUBCASE("many columns (checked element by element)") {
    auto cs = g.add_compute_set("many");
    for (std::size_t c = 0; c < 60; ++c) g.add_vertex<tbt::Copy>(cs, 0, r, column(wide, c));
    auto const [got, full] = run(cs, wide);
    for (std::size_t i = 0; i < 600; ++i) CHECK(got[i] == rs[i / 60]);
    CHECK(full == std::vector<std::uint32_t>{wide.runs().front().var});
    g.add_vertex<tbt::Copy>(cs, 0, r.slice(0, 1), wide.flatten().slice(125, 126));
    CHECK_THROWS_WITH_AS(tb::compile(g, tb::execute(cs)),
                         "compute set 'many': vertex tbt::Copy (tile 0) field 'out' and vertex tbt::Copy (tile 0) field "
                         "'out' both write element 125 of 'wide'",
                         tb::write_conflict_error);
  }
  SUBCASE("thousands of column elements (checked with a table of writers)") {
    // 60 columns of 1200 rows: 72,000 one-element blocks, enough for the writer table instead of the sorted
    // sweep, and more elements than one chunk of it (65,536).
    tb::Graph h{tb::targets::tiny(2, 1024 * 1024)};
    auto tall = h.add_variable<float>({1200, 60}, "tall"), src = h.add_variable<float>({1200}, "src");
    h.set_tile_mapping(tall, 0);
    h.set_tile_mapping(src, 0);
    auto cs = h.add_compute_set("table");
    for (std::size_t c = 0; c < 60; ++c) h.add_vertex<tbt::Copy>(cs, 0, src, column(tall, c));
    auto const exe = tb::compile(h, tb::execute(cs));
    CHECK(exe.schedule().compute_sets.at(0).full_writes == std::vector<std::uint32_t>{tall.runs().front().var});
    tb::Engine e{exe};
    std::vector<float> sv(1200);
    for (std::size_t i = 0; i < sv.size(); ++i) sv[i] = static_cast<float>(i);
    e.write(src, sv);
    e.run();
    auto const got = e.read<float>(tall);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i) wrong += got[i] != sv[i / 60];
    CHECK(wrong == 0);
    // Columns 0-58 only: not every element is written.
    auto partial = h.add_compute_set("partial");
    for (std::size_t c = 0; c + 1 < 60; ++c) h.add_vertex<tbt::Copy>(partial, 0, src, column(tall, c));
    CHECK(tb::compile(h, tb::execute(partial)).schedule().compute_sets.at(0).full_writes.empty());
    // Two writers of element 70001 (in the table's second chunk) and of 70500: the message names the first.
    h.add_vertex<tbt::Copy>(cs, 0, src.slice(0, 1), tall.flatten().slice(70500, 70501));
    h.add_vertex<tbt::Copy>(cs, 0, src.slice(0, 1), tall.flatten().slice(70001, 70002));
    CHECK_THROWS_WITH_AS(tb::compile(h, tb::execute(cs)),
                         "compute set 'table': vertex tbt::Copy (tile 0) field 'out' and vertex tbt::Copy (tile 0) field "
                         "'out' both write element 70001 of 'tall'",
                         tb::write_conflict_error);
  }
  SUBCASE("steps 5 and 3 meet at element 11") {
    auto cs = g.add_compute_set("steps");
    g.add_vertex<tbt::Copy>(cs, 0, y, column(x, 1));                                      // 1, 6, 11, ...
    g.add_vertex<tbt::Copy>(cs, 0, y.slice(0, 4), flat.slice(2, 14).reshape({4, 3}).slice(0, 1, 1).flatten());  // 2, 5, 8, 11
    CHECK_THROWS_WITH_AS(tb::compile(g, tb::execute(cs)),
                         "compute set 'steps': vertex tbt::Copy (tile 0) field 'out' and vertex tbt::Copy (tile 0) field "
                         "'out' both write element 11 of 'x'",
                         tb::write_conflict_error);
  }
  SUBCASE("a dense write across a column") {
    auto cs = g.add_compute_set("dense");
    g.add_vertex<tbt::Copy>(cs, 0, y.slice(0, 3), flat.slice(28, 31));  // 28, 29, 30
    g.add_vertex<tbt::Copy>(cs, 0, y, column(x, 1).reverse(0));         // ..., 26, 31, ...
    g.add_vertex<tbt::Copy>(cs, 0, y.slice(0, 3), flat.slice(32, 35));  // 32, 33, 34: between column 1's 31 and 36
    CHECK_NOTHROW(tb::compile(g, tb::execute(cs)));
    g.add_vertex<tbt::Copy>(cs, 0, y.slice(0, 1), flat.slice(36, 37));
    CHECK_THROWS_WITH_AS(tb::compile(g, tb::execute(cs)),
                         "compute set 'dense': vertex tbt::Copy (tile 0) field 'out' and vertex tbt::Copy (tile 0) field "
                         "'out' both write element 36 of 'x'",
                         tb::write_conflict_error);
  }
  SUBCASE("interleaved columns of another step do not meet") {
    auto cs = g.add_compute_set("apart");
    auto const rows = [&](std::size_t first) {  // every other row's element `first`: first, first + 10, ...
      return flat.reshape({6, 10}).slice(first, first + 1, 1).flatten();
    };
    g.add_vertex<tbt::Copy>(cs, 0, y.slice(0, 6), rows(0));
    g.add_vertex<tbt::Copy>(cs, 0, y.slice(0, 6), rows(5));
    g.add_vertex<tbt::Copy>(cs, 0, y, column(x, 2));  // 2, 7, 12, ...: never a multiple of 5
    auto const [got, full] = run(cs, x);
    CHECK(got[0] == ys[0]);
    CHECK(got[5] == ys[0]);
    CHECK(got[57] == ys[11]);
    CHECK(full.empty());
  }
}

TEST_CASE("writing a broadcast view or a constant") {
  tb::Graph g{tb::targets::tiny(2)};
  auto x = g.add_variable<float>({1}, "x"), y = g.add_variable<float>({4}, "y");
  auto c = g.add_constant<float>({4}, 1.0f, "c");
  for (auto const& t : {x, y, c}) g.set_tile_mapping(t, 0);
  auto cs = g.add_compute_set("bcast");
  g.add_vertex<tbt::Copy>(cs, 0, y, x.broadcast({4}));
  CHECK_THROWS_WITH_AS(tb::compile(g, tb::execute(cs)),
                       "compute set 'bcast': vertex tbt::Copy field 'out' writes element 0 of 'x' more than once (a "
                       "broadcast view cannot be written)",
                       tb::write_conflict_error);
  CHECK_THROWS_WITH_AS(tb::compile(g, tb::copy(y, x.broadcast({4}))),
                       "copy: the destination holds element 0 of 'x' more than once (a broadcast view cannot be written)",
                       tb::write_conflict_error);
  CHECK_THROWS_WITH_AS(tb::compile(g, tb::copy(y, c)), "copy: the destination 'c' is a constant", tb::error);
}

TEST_CASE("copy between tensors of different shape or type") {
  tb::Graph g{tb::targets::tiny(2)};
  auto a = g.add_variable<float>({4}, "a"), b = g.add_variable<float>({2, 2}, "b");
  auto i = g.add_variable<std::int32_t>({4}, "i");
  CHECK_THROWS_WITH_AS(tb::copy(a, b), "copy: shapes differ (source [4], destination [2, 2])", tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::copy(a, i), "copy: element types differ (source f32, destination i32)", tb::type_error);
  CHECK_NOTHROW(tb::copy(a, b.flatten()));
}

TEST_CASE("stream element count and type mismatches") {
  tb::Graph g{tb::targets::tiny(2)};
  auto a = g.add_variable<float>({4}, "a");
  auto in = g.add_host_to_device_fifo<float>("in", 8);
  auto out = g.add_device_to_host_fifo<float>("out", 4);
  auto ints = g.add_host_to_device_fifo<std::int32_t>("ints", 4);
  CHECK_THROWS_WITH_AS(tb::stream_in(in, a),
                       "stream_in: element count mismatch: the FIFO moves 8 elements but the tensor has 4",
                       tb::stream_error);
  CHECK_THROWS_WITH_AS(tb::stream_in(ints, a), "stream_in: the FIFO carries i32 but the tensor holds f32", tb::type_error);
  CHECK_THROWS_WITH_AS(tb::stream_in(out, a), "stream_in: the FIFO is device-to-host", tb::stream_error);
  CHECK_NOTHROW(tb::stream_out(a, out));
}

TEST_CASE("copies are planned per tile pair; consecutive non-conflicting copies share one exchange") {
  tb::Graph g{tb::targets::tiny(4)};
  auto a = g.add_variable<float>({8}, "a"), b = g.add_variable<float>({8}, "b"), c = g.add_variable<float>({8}, "c");
  tb::map_linearly(g, a);  // 2 elements per tile
  tb::map_linearly(g, b);
  tb::map_linearly(g, c);
  // Shift by one tile: element i of a goes to element (i + 2) % 8 of b.
  auto shift = tb::seq(tb::copy(a.slice(0, 6), b.slice(2, 8)), tb::copy(a.slice(6, 8), b.slice(0, 2)), tb::copy(a, c));
  auto exe = tb::compile(g, shift);
  auto const& s = exe.schedule();
  REQUIRE(s.programs[0].code.size() == 1);  // one superstep
  REQUIRE(s.exchanges.size() == 1);
  auto const& tr = s.exchanges[0].transfers;
  std::size_t cross = 0;
  for (auto const& x : tr) {
    CHECK(x.count == 2);
    cross += x.src_tile != x.dst_tile;
  }
  CHECK(tr.size() == 8);
  CHECK(cross == 4);
  // b written then read: a second exchange.
  auto exe2 = tb::compile(g, tb::seq(tb::copy(a, b), tb::copy(b, c)));
  CHECK(exe2.schedule().exchanges.size() == 2);
  CHECK(exe2.schedule().programs[0].code.size() == 2);
  // Cycle estimate: 8 bytes per tile at 4 bytes per cycle, plus 8 on-tile bytes at 8 per cycle.
  CHECK(s.exchanges[0].cycles == 3);
}

TEST_CASE("out of memory names the tile, the bytes and the largest occupants; the option allows inspection") {
  tb::Graph g{tb::targets::tiny(2, 1024)};
  auto big = g.add_variable<float>({200}, "big"), small = g.add_variable<float>({100}, "small");
  g.set_tile_mapping(big, 1);
  g.set_tile_mapping(small, 1);
  CHECK_THROWS_WITH_AS(tb::compile(g, tb::sync()),
                       "compile: tile 1 is out of memory: it needs 1200 bytes (always-live 1200, not-always-live peak 0) but "
                       "has 1024; largest occupants: 'big' 800 B, 'small' 400 B",
                       tb::out_of_memory);
  auto exe = tb::compile(g, tb::CompileOptions{.allow_out_of_memory = true}, tb::sync());
  CHECK(exe.memory()[1].always_live == 1200);
  CHECK(exe.memory()[0].total() == 0);
}

TEST_CASE("temporary variables count only while live; staging buffers are temporary") {
  tb::Graph g{tb::targets::tiny(1, 4096)};
  auto x = g.add_variable<float>({64}, "x");
  auto t1 = g.add_variable<float>({64}, "t1", {.temporary = true});
  auto t2 = g.add_variable<float>({64}, "t2", {.temporary = true});
  for (auto const& t : {x, t1, t2}) g.set_tile_mapping(t, 0);
  // t1 and t2 are never live together: the peak is one of them. x is read first: always live.
  auto exe = tb::compile(g, tb::seq(tb::copy(x, t1), tb::copy(t1, x), tb::copy(x, t2), tb::copy(t2, x)));
  CHECK(exe.memory()[0].always_live == 256);
  CHECK(exe.memory()[0].peak_temporary == 256);
  CHECK(exe.memory()[0].peak_live == 256);
  // Inside a loop, a temporary written in full before any read lives from that write; one read before it is
  // written in the body (t1 here: its value carries from one iteration to the next) covers the whole loop.
  auto looped = tb::compile(g, tb::repeat(3, tb::seq(tb::copy(x, t1), tb::copy(t1, x), tb::copy(x, t2))));
  CHECK(looped.memory()[0].peak_temporary == 256);
  auto carried = tb::compile(g, tb::repeat(3, tb::seq(tb::copy(t1, x), tb::copy(x, t1), tb::copy(x, t2))));
  CHECK(carried.memory()[0].peak_temporary == 512);
  // A transposed (non-contiguous) field is gathered into a temporary buffer.
  auto m = g.add_variable<float>({8, 8}, "m");
  g.set_tile_mapping(m, 0);
  auto cs = g.add_compute_set("transpose");
  g.add_vertex<tbt::Copy>(cs, 0, m.transpose().flatten(), x);
  auto staged = tb::compile(g, tb::execute(cs));
  CHECK(staged.memory()[0].peak_temporary == 256);
}

TEST_CASE("liveness: a variable counts from its first full write to its last use, unless its value can outlive a run") {
  tb::Graph g{tb::targets::tiny(1, 1 << 20)};
  auto in = g.add_variable<float>({64}, "in");
  std::vector<tb::Tensor> a;
  for (int i = 0; i < 4; ++i) a.push_back(g.add_variable<float>({64}, "a" + std::to_string(i)));
  auto out = g.add_variable<float>({64}, "out");
  for (auto const& t : {in, a[0], a[1], a[2], a[3], out}) g.set_tile_mapping(t, 0);
  auto const chain = [&] {
    return tb::seq(tb::copy(in, a[0]), tb::copy(a[0], a[1]), tb::copy(a[1], a[2]), tb::copy(a[2], a[3]),
                   tb::copy(a[3], out));
  };
  auto const fifo = g.add_host_to_device_fifo<float>("x", 64);
  SUBCASE("a chain: two links live at a time; in (read first) is always live; out (never read) to the end") {
    auto exe = tb::compile(g, chain());
    CHECK(exe.memory()[0].always_live == 256);  // in
    // At the copy a2 -> a3 (exchange step), a2 and a3 are live, and out is not yet written.
    CHECK(exe.memory()[0].peak_live == 2 * 256);
    CHECK(exe.memory()[0].peak_temporary == 0);
  }
  SUBCASE("a streamed input is written in full: live from the stream") {
    auto exe = tb::compile(g, tb::seq(tb::stream_in(fifo, in), chain()));
    CHECK(exe.memory()[0].always_live == 0);
    CHECK(exe.memory()[0].peak_live == 2 * 256);
  }
  SUBCASE("inside a loop body, a chain does not pile up") {
    auto exe = tb::compile(g, tb::repeat(5, tb::seq(tb::stream_in(fifo, in), chain())));
    CHECK(exe.memory()[0].always_live == 0);
    // out is written in the body and read by nobody: live to the end, so the whole loop.
    CHECK(exe.memory()[0].peak_live == 3 * 256);
  }
  SUBCASE("a partial write does not kill the old value: always live") {
    auto exe = tb::compile(g, tb::seq(tb::copy(in.slice(0, 32), a[0].slice(0, 32)), tb::copy(a[0], out)));
    CHECK(exe.memory()[0].always_live == 5 * 256);  // all but out: a variable no program uses is always live
    CHECK(exe.memory()[0].peak_live == 256);
  }
  SUBCASE("a second program reading before writing keeps the variable always live") {
    auto exe = tb::compile(g, chain(), tb::copy(a[1], out));
    CHECK(exe.memory()[0].always_live == 2 * 256);  // in and a1
  }
  SUBCASE("a write in one branch of an if is not a full write") {
    auto flag = g.add_variable<std::int32_t>({}, "flag");
    g.set_tile_mapping(flag, 0);
    auto exe = tb::compile(g, tb::seq(tb::if_(flag, tb::copy(in, a[0])), tb::copy(a[0], out)));
    CHECK(exe.memory()[0].always_live == 5 * 256 + 4);  // all but out, and the flag
  }
  SUBCASE("a host callback may read anything written before it") {
    auto exe = tb::compile(g, tb::seq(chain(), tb::host([](tb::HostContext&) {})));
    CHECK(exe.memory()[0].peak_live == 5 * 256);  // a0..a3 and out, all live at the callback
  }
}

TEST_CASE("an executable keeps the graph it was compiled from; building on afterwards leaves it unchanged") {
  tb::Graph g{tb::targets::tiny(2)};
  auto x = g.add_variable<float>({4}, "x"), y = g.add_variable<float>({4}, "y");
  g.set_tile_mapping(x, 0);
  g.set_tile_mapping(y, 0);
  auto cs = g.add_compute_set("axpy");
  g.add_vertex<tbt::Axpy>(cs, 0, x, y, 2.0f);
  auto const compiled_from = g.snapshot();
  tb::Engine first{tb::compile(g, tb::execute(cs))};
  CHECK(g.snapshot() == compiled_from);  // compile shares the graph's state rather than copying it
  // Building on: a second vertex in the same compute set and a new variable on the other tile.
  auto z = g.add_variable<float>({4}, "z");
  g.set_tile_mapping(z, 1);
  g.add_vertex<tbt::Axpy>(cs, 1, tb::fetch(x), z, 3.0f);
  CHECK(g.snapshot() != compiled_from);
  CHECK(compiled_from->vertices.size() == 1);
  CHECK(compiled_from->variables.size() == 2);
  CHECK(std::as_const(g).impl().vertices.size() == 2);
  tb::Engine second{tb::compile(g, tb::execute(cs))};
  for (auto* e : {&first, &second}) {
    e->write(x, std::vector<float>{1, 2, 3, 4});
    e->write(y, std::vector<float>(4, 1.0f));
  }
  second.write(z, std::vector<float>(4, 0.0f));
  first.run();
  second.run();
  CHECK(first.read<float>(y) == std::vector<float>{3, 5, 7, 9});
  CHECK(second.read<float>(y) == std::vector<float>{3, 5, 7, 9});
  CHECK(second.read<float>(z) == std::vector<float>{3, 6, 9, 12});
  CHECK_THROWS_WITH_AS(first.read<float>(z),
                       "read: the tensor's variable was added to the graph after this program was compiled", tb::error);
  CHECK_THROWS_WITH_AS(first.write(z, std::vector<float>(4, 0.0f)),
                       "write: the tensor's variable was added to the graph after this program was compiled",
                       tb::error);
}

TEST_CASE("compute sets are planned on several threads: the executable is the same for any number") {
  // A matmul that splits K (fetched partials, a reduction stage) and a map: several compute sets with fetches.
  auto build = [](tb::Graph& g) {
    auto a = g.add_variable<float>({48, 300}, "a"), b = g.add_variable<float>({300, 40}, "b");
    tb::map_linearly(g, a);
    tb::map_linearly(g, b);
    tb::Sequence prog;
    auto c = tb::ops::matmul(g, prog, a, b, {.available_memory_proportion = 0.05});
    using namespace tb::expr;
    static_cast<void>(tb::ops::map(g, prog, _1 * 2.0f + 1.0f, c));
    return prog;
  };
  auto compile = [&](std::size_t threads) {
    tb::Graph g{tb::targets::tiny(16, 1 << 16)};
    auto prog = build(g);
    return tb::compile(g, {.threads = threads}, prog);
  };
  auto const one = compile(1);
  REQUIRE(one.schedule().compute_sets.size() >= 3);
  for (std::size_t threads : {2u, 3u, 7u}) tbt::check_same_executable(one, compile(threads));
}

TEST_CASE("a compute set's error is thrown only where a program executes it, whatever the planning threads") {
  tb::Graph g{tb::targets::tiny(2)};
  auto x = g.add_variable<float>({4}, "x"), y = g.add_variable<float>({4}, "y");
  g.set_tile_mapping(x, 0);
  g.set_tile_mapping(y, 0);
  auto bad = g.add_compute_set("overlap");
  g.add_vertex<tbt::Copy>(bad, 0, x.slice(0, 2), y.slice(0, 2));
  g.add_vertex<tbt::Copy>(bad, 0, x.slice(1, 3), y.slice(1, 3));
  auto good = g.add_compute_set("fine");
  g.add_vertex<tbt::Copy>(good, 0, x, y);
  for (std::size_t threads : {1u, 2u, 4u}) {
    CHECK_NOTHROW(tb::compile(g, {.threads = threads}, tb::execute(good)));
    CHECK_THROWS_WITH_AS(tb::compile(g, {.threads = threads}, tb::seq(tb::execute(good), tb::execute(bad))),
                         "compute set 'overlap': vertex tbt::Copy (tile 0) field 'out' and vertex tbt::Copy (tile 0) "
                         "field 'out' both write element 1 of 'y'",
                         tb::write_conflict_error);
  }
}

TEST_CASE("a field along a channel of a channels-last variable: one lookup per block, each block's tile") {
  // x: 8 positions of 4 channels. Positions 0-3 hold channel c on tile c, positions 4-7 on tile (c + 1) % 4: two
  // blocks of a repeated pattern. A channel read along the positions (a stride of 4) crosses both.
  tb::Graph g{tb::targets::tiny(4)};
  auto x = g.add_variable<float>({8, 4}, "x"), y = g.add_variable<float>({8}, "y");
  for (std::size_t p = 0; p < 8; ++p)
    for (std::size_t c = 0; c < 4; ++c)
      g.set_tile_mapping(x.slice(tb::Shape{p, c}, tb::Shape{p + 1, c + 1}), p < 4 ? c : (c + 1) % 4);
  g.set_tile_mapping(y, 2);
  tb::Tensor const channel = x.transpose()[2];  // elements 2, 6, ..., 30
  SUBCASE("not fetched: the first element in the other block is named") {
    auto cs = g.add_compute_set("channel");
    g.add_vertex<tbt::Copy>(cs, 2, channel, y);
    CHECK_THROWS_WITH_AS(tb::compile(g, tb::execute(cs)),
                         "compute set 'channel': vertex tbt::Copy on tile 2: field 'in' is connected to element 18 of "
                         "'x', which is on tile 3 (connect it with fetch() to read data from other tiles)",
                         tb::mapping_error);
    auto reversed = g.add_compute_set("reversed");  // a negative stride: the last position first
    g.add_vertex<tbt::Copy>(reversed, 2, channel.reverse(0), y);
    CHECK_THROWS_WITH_AS(tb::compile(g, tb::execute(reversed)),
                         "compute set 'reversed': vertex tbt::Copy on tile 2: field 'in' is connected to element 30 of "
                         "'x', which is on tile 3 (connect it with fetch() to read data from other tiles)",
                         tb::mapping_error);
    // Every other position (a stride of two periods), in the first block only: all on tile 2.
    tb::Tensor const every_other = x.reshape({4, 8}).transpose()[2];  // elements 2, 10, 18, 26
    auto first = g.add_compute_set("first block");
    g.add_vertex<tbt::Copy>(first, 2, every_other.slice(0, 2), y.slice(0, 2));
    CHECK_NOTHROW(tb::compile(g, tb::execute(first)));
    auto both = g.add_compute_set("both blocks");
    g.add_vertex<tbt::Copy>(both, 2, every_other, y.slice(0, 4));
    CHECK_THROWS_WITH_AS(tb::compile(g, tb::execute(both)),
                         "compute set 'both blocks': vertex tbt::Copy on tile 2: field 'in' is connected to element 18 "
                         "of 'x', which is on tile 3 (connect it with fetch() to read data from other tiles)",
                         tb::mapping_error);
  }
  SUBCASE("fetched: the second block's elements travel, and the values arrive in order") {
    auto cs = g.add_compute_set("channel");
    g.add_vertex<tbt::Copy>(cs, 2, tb::fetch(channel), y);
    auto const exe = tb::compile(g, tb::execute(cs));
    CHECK(exe.schedule().compute_sets.at(0).fetch_bytes == 4 * 4);  // positions 4-7, from tile 3
    tb::Engine e{exe};
    std::vector<float> xs(32);
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i);
    e.write(x, xs);
    e.run();
    CHECK(e.read<float>(y) == std::vector<float>{2, 6, 10, 14, 18, 22, 26, 30});
  }
}
