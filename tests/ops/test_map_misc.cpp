// ops::map: broadcasting, operands on other tiles, in-place and given outputs, helpers, errors, determinism.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

namespace tb = tilebsp;
using namespace tb::expr;

TEST_CASE("NumPy broadcasting: [N, C] + [C], [N, 1] * [1, C], rank extension") {
  tb::Graph g{tb::targets::tiny(8)};
  auto x = g.add_variable<float>({6, 5}, "x"), bias = g.add_variable<float>({5}, "bias");
  auto col = g.add_variable<float>({6, 1}, "col"), row = g.add_variable<float>({1, 5}, "row");
  tb::map_linearly(g, x);
  g.set_tile_mapping(bias, 3);  // lives on one tile: the other tiles need it exchanged
  tb::map_linearly(g, col);
  tb::map_linearly(g, row);
  tb::Sequence prog;
  auto y = tb::ops::map(g, prog, _1 + _2, x, bias);
  auto outer = tb::ops::map(g, prog, _1 * _2, col, row);
  CHECK(y.shape() == tb::Shape{6, 5});
  CHECK(outer.shape() == tb::Shape{6, 5});
  tb::Engine e{tb::compile(g, prog), {.host_threads = 3}};
  std::vector<float> xv(30), bv{1, 2, 3, 4, 5}, cv{1, 2, 3, 4, 5, 6}, rv{10, 20, 30, 40, 50};
  for (std::size_t i = 0; i < 30; ++i) xv[i] = static_cast<float>(i);
  e.write(x, xv);
  e.write(bias, bv);
  e.write(col, cv);
  e.write(row, rv);
  e.run();
  auto yv = e.read<float>(y), ov = e.read<float>(outer);
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 5; ++j) {
      CHECK(yv[i * 5 + j] == xv[i * 5 + j] + bv[j]);
      CHECK(ov[i * 5 + j] == cv[i] * rv[j]);
    }
}

TEST_CASE("the output is mapped like the largest operand; misaligned operands are fetched") {
  tb::Graph g{tb::targets::tiny(4)};
  auto a = g.add_variable<float>({64}, "a"), b = g.add_variable<float>({64}, "b");
  tb::map_linearly(g, a);                                  // 16 per tile
  for (std::size_t t = 0; t < 4; ++t) g.set_tile_mapping(b.slice(t * 16, t * 16 + 16), 3 - t);  // reversed
  tb::Sequence prog;
  auto c = tb::ops::map(g, prog, _1 - _2, a, b);
  CHECK(g.tile_mapping(c).regions_on(0) == std::vector<tb::Interval>{{0, 16}});
  auto exe = tb::compile(g, prog);
  CHECK(exe.schedule().exchanges.empty());  // b's pieces are fetched by the vertices on a's tiles
  REQUIRE(exe.schedule().compute_sets.size() == 1);
  CHECK(exe.schedule().compute_sets[0].fetch_bytes == 64 * sizeof(float));
  tb::Engine e{std::move(exe), {.host_threads = 2}};
  std::vector<float> av(64), bv(64);
  for (std::size_t i = 0; i < 64; ++i) av[i] = 3.0f * i, bv[i] = 1.0f * i;
  e.write(a, av);
  e.write(b, bv);
  e.run();
  auto cv = e.read<float>(c);
  for (std::size_t i = 0; i < 64; ++i) CHECK(cv[i] == 2.0f * i);
}

TEST_CASE("map_in_place, map_with_output and the named helpers") {
  tb::Graph g{tb::targets::tiny(4)};
  auto w = g.add_variable<float>({100}, "w"), grad = g.add_variable<float>({100}, "grad");
  auto out = g.add_variable<float>({100}, "out"), f = g.add_variable<tb::half>({100}, "f");
  for (auto const& t : {w, grad, out, f}) tb::map_linearly(g, t);
  tb::Sequence prog;
  tb::ops::scaled_add(g, prog, w, grad, -0.5);  // w -= 0.5 * grad
  tb::ops::map_with_output(g, prog, _1 * _2, out, w, grad);
  auto sum = tb::ops::add(g, prog, w, grad);
  auto diff = tb::ops::sub(g, prog, w, grad);
  auto prod = tb::ops::mul(g, prog, w, grad);
  auto pos = tb::ops::relu(g, prog, diff);
  tb::ops::fill(g, prog, f, 2.5);
  auto ints = tb::ops::cast(g, prog, sum, tb::i32);
  auto halves = tb::ops::cast(g, prog, sum, tb::f16);
  CHECK(ints.element_type() == tb::i32);
  CHECK(halves.element_type() == tb::f16);
  tb::Engine e{tb::compile(g, prog), {.host_threads = 2}};
  std::vector<float> wv(100), gv(100);
  for (std::size_t i = 0; i < 100; ++i) wv[i] = float(i), gv[i] = 2.0f;
  e.write(w, wv);
  e.write(grad, gv);
  e.run();
  auto const W = e.read<float>(w);
  for (std::size_t i = 0; i < 100; ++i) {
    float const nw = float(i) - 1.0f;
    CHECK(W[i] == nw);
    CHECK(e.read<float>(out)[i] == nw * 2.0f);
    CHECK(e.read<float>(sum)[i] == nw + 2.0f);
    CHECK(e.read<float>(diff)[i] == nw - 2.0f);
    CHECK(e.read<float>(prod)[i] == nw * 2.0f);
    CHECK(e.read<float>(pos)[i] == std::max(0.0f, nw - 2.0f));
    CHECK(float(e.read<tb::half>(f)[i]) == 2.5f);
    CHECK(e.read<std::int32_t>(ints)[i] == static_cast<std::int32_t>(nw + 2.0f));
  }
}

TEST_CASE("map errors: shapes, placeholders, mixed types, in-place broadcast, unsupported operands") {
  tb::Graph g{tb::targets::tiny(2)};
  auto a = g.add_variable<float>({3}, "a"), b = g.add_variable<float>({4}, "b");
  auto i = g.add_variable<std::int32_t>({3}, "i"), m = g.add_variable<float>({2, 3}, "m");
  auto u = g.add_variable<std::uint8_t>({3}, "u");
  for (auto const& t : {a, b, i, m, u}) tb::map_linearly(g, t);
  tb::Sequence prog;
  CHECK_THROWS_WITH_AS(tb::ops::map(g, prog, _1 + _2, a, b), "map: operand shapes [3] and [4] do not broadcast",
                       tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::map(g, prog, _1 + _3, a, a), "map: the expression uses _3 but only 2 tensors were given",
                       tb::index_error);
  CHECK_THROWS_WITH_AS(tb::ops::map(g, prog, _1 + _2, a, i),
                       "map: mixing element types without a cast: operator '+' has f32 and i32 operands (use cast<T>)",
                       tb::type_error);
  CHECK_NOTHROW(tb::ops::map(g, prog, _1 + cast<float>(_2), a, i));
  CHECK_THROWS_WITH_AS(tb::ops::map(g, prog, exp(_1), i), "map: operator 'exp' does not accept a i32 operand",
                       tb::type_error);
  CHECK_THROWS_WITH_AS(tb::ops::map(g, prog, select(_1, _1, _1), a), "map: operator 'select' does not accept a f32 operand",
                       tb::type_error);
  CHECK_THROWS_WITH_AS(tb::ops::map_in_place(g, prog, _1 + _2, a, m),
                       "map_in_place: the output [3] would have to be broadcast to [2, 3]; a broadcast tensor cannot be "
                       "written in place",
                       tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::map_with_output(g, prog, _1 < _2, a, a, a),
                       "map_with_output: the expression gives bool but the output holds f32 (use cast<T>)", tb::type_error);
  CHECK_THROWS_AS(tb::ops::map(g, prog, _1 + 1, u), tb::type_error);
  CHECK_THROWS_AS(tb::ops::cast(g, prog, a, tb::u8), tb::type_error);
}

TEST_CASE("map with named operand types: the same results, and an operand of another type is a type_error") {
  tb::Graph g{tb::targets::tiny(2)};
  auto a = g.add_variable<float>({5}, "a"), b = g.add_variable<float>({5}, "b");
  auto i = g.add_variable<std::int32_t>({5}, "i");
  for (auto const& t : {a, b, i}) tb::map_linearly(g, t);
  tb::Sequence prog;
  auto named = tb::ops::map<float, float>(g, prog, _1 * _2 + 1, a, b);
  auto dispatched = tb::ops::map(g, prog, _1 * _2 + 1, a, b);
  auto mixed = tb::ops::map<float, std::int32_t>(g, prog, _1 - cast<float>(_2), a, i);
  auto c = g.add_variable<float>({5}, "c");
  tb::map_linearly(g, c);
  tb::ops::map_with_output<float>(g, prog, sqrt(_1), c, b);
  tb::ops::map_in_place<float, float>(g, prog, _1 + _2, b, a);
  CHECK_THROWS_WITH_AS((tb::ops::map<float, float>(g, prog, _1 + _2, a, i)),
                       "map: operand _2 is i32 but the call names f32 for it (map<T...>)", tb::type_error);
  CHECK_THROWS_WITH_AS((tb::ops::map_in_place<float, float>(g, prog, _1 + cast<float>(_2), a, i)),
                       "map_in_place: operand _2 is i32 but the call names f32 for it (map_in_place<T...>)",
                       tb::type_error);
  CHECK_THROWS_WITH_AS(tb::ops::map<std::int32_t>(g, prog, exp(_1), i), "map: operator 'exp' does not accept a i32 operand",
                       tb::type_error);
  tb::Engine e{tb::compile(g, prog), {.host_threads = 2}};
  std::vector<float> const av{1.5f, -2, 0.25f, 3, -0.5f}, bv{2, 4, 9, 0.5f, 16};
  e.write(a, av);
  e.write(b, bv);
  e.write(i, std::vector<std::int32_t>{1, -2, 3, -4, 5});
  e.run();
  auto const n = e.read<float>(named), d = e.read<float>(dispatched), m = e.read<float>(mixed);
  auto const r = e.read<float>(c), sum = e.read<float>(b);
  for (std::size_t k = 0; k < 5; ++k) {
    CHECK(n[k] == d[k]);
    CHECK(n[k] == av[k] * bv[k] + 1);
    CHECK(r[k] == std::sqrt(bv[k]));
    CHECK(sum[k] == av[k] + bv[k]);
  }
  CHECK(m == std::vector<float>{0.5f, 0, -2.75f, 7, -5.5f});
}

TEST_CASE("map and reduce results are bitwise identical for 1, 2, 3 and 7 host threads") {
  auto run = [](std::size_t threads) {
    tb::Graph g{tb::targets::tiny(13, 1 << 20)};
    auto x = g.add_variable<float>({50000}, "x"), y = g.add_variable<float>({50000}, "y");
    tb::map_linearly(g, x);
    tb::map_linearly(g, y, {.grain = 7});
    tb::Sequence prog;
    auto z = tb::ops::map<float, float>(g, prog, tanh(_1 * 0.37f + _2) * exp(-square(_2)) / (abs(_1) + 1), x, y);
    auto s = tb::ops::reduce(g, prog, z.reshape({100, 500}), {1}, tb::ops::ReduceOp::add);
    auto l = tb::ops::reduce(g, prog, z, {0}, tb::ops::ReduceOp::log_add);
    tb::Engine e{tb::compile(g, prog), {.host_threads = threads}};
    std::vector<float> xv(50000), yv(50000);
    for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(0.001f * i) * 3, yv[i] = std::cos(0.0013f * i);
    e.write(x, xv);
    e.write(y, yv);
    e.run();
    auto r = e.read<float>(z);
    auto sv = e.read<float>(s);
    r.insert(r.end(), sv.begin(), sv.end());
    r.push_back(e.read<float>(l)[0]);
    return r;
  };
  auto const ref = run(1);
  for (std::size_t t : {2, 3, 7}) {
    auto const r = run(t);
    REQUIRE(r.size() == ref.size());
    CHECK(std::memcmp(r.data(), ref.data(), r.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("maps: host kernels and vertices agree on broadcast, scalar, strided and aliased operands") {
  // The host kernel walks segments along which each operand is contiguous or constant; the vertices read
  // fetched pieces. Both must write the same bits, whatever the host thread count.
  std::vector<std::vector<float>> first;
  for (bool host : {true, false})
    for (std::size_t threads : {1u, 3u}) {
      tb::Graph g{tb::targets::tiny(5)};
      auto x = g.add_variable<float>({4, 6, 24}, "x"), bias = g.add_variable<float>({24}, "bias");
      auto col = g.add_variable<float>({6, 1}, "col"), s = g.add_variable<float>({1}, "s");
      auto h = g.add_variable<tb::half>({4, 6, 24}, "h"), v = g.add_variable<float>({24, 6}, "v");
      for (auto const& t : {x, bias, col, s, h, v}) tb::map_linearly(g, t);
      tb::Sequence prog;
      // bias over the last dimension; a column (constant segments); a transposed operand; in place with a broadcast
      auto y = tb::ops::map<float, float, float>(g, prog, relu(_1 + _2) * _3, x, bias, s);
      auto z = tb::ops::map<float, float, tb::half>(g, prog, _1 * _2 + cast<float>(_3), x, col, h);
      auto t = tb::ops::map<float, float>(g, prog, _1 - _2, x[0], v.transpose());
      auto shifted = g.add_variable<float>({48}, "shifted");
      tb::map_linearly(g, shifted);
      tb::ops::map_in_place<float, float>(g, prog, _1 + _2, shifted.slice(0, 24), shifted.slice(24, 48));
      tb::ops::map_in_place<float, float>(g, prog, _1 * 2.0f + _2, x, bias);
      tb::Engine e{tb::compile(g, prog), {.host_threads = threads, .host_kernels = host}};
      auto const xv = tbt::values<float>(4 * 6 * 24, false, 1), bv = tbt::values<float>(24, false, 2), cv = tbt::values<float>(6, false, 3), vv = tbt::values<float>(144, false, 4);
      auto const sv = std::vector<float>{1.5f}, sh = tbt::values<float>(48, false, 5);
      std::vector<tb::half> hv;
      for (float f : tbt::values<float>(4 * 6 * 24, false, 6)) hv.push_back(tb::half(f));
      e.write(x, xv), e.write(bias, bv), e.write(col, cv), e.write(s, sv), e.write(h, hv), e.write(v, vv);
      e.write(shifted, sh);
      e.run();
      auto const yv = e.read<float>(y), zv = e.read<float>(z), tv = e.read<float>(t), xo = e.read<float>(x);
      auto const so = e.read<float>(shifted);
      for (std::size_t i = 0; i < 4 * 6 * 24; ++i) {
        std::size_t const c = i % 24, r = i / 24 % 6;
        CHECK(yv[i] == std::max(xv[i] + bv[c], 0.0f) * 1.5f);
        CHECK(zv[i] == doctest::Approx(xv[i] * cv[r] + float(hv[i])).epsilon(1e-6));
        CHECK(xo[i] == xv[i] * 2.0f + bv[c]);
        if (i < 144) CHECK(tv[i] == xv[i] - vv[c * 6 + r]);
      }
      for (std::size_t i = 0; i < 24; ++i) CHECK(so[i] == sh[i] + sh[24 + i]);
      std::vector<std::vector<float>> const all{yv, zv, tv, xo, so};
      if (first.empty()) first = all;
      CHECK(all == first);  // bitwise, with and without host kernels, for any thread count
    }
}

TEST_CASE("maps: short segments run as rows, each with its padded tail, across row and thread boundaries") {
  // [3, 5, 7, 20] channels-last activations: a bias over the 20 channels makes 20-element segments (a vector and
  // a 4-element tail), run as rows of up to 7 positions; a per-position scale is constant along each segment and
  // steps from row to row. Thread shares (1, 2, 3 threads) end inside rows and inside segments.
  std::vector<std::vector<float>> first;
  for (bool host : {true, false})
    for (std::size_t threads : {1u, 2u, 3u}) {
      tb::Graph g{tb::targets::tiny(4)};
      auto x = g.add_variable<float>({3, 5, 7, 20}, "x"), bias = g.add_variable<float>({20}, "bias");
      auto scale = g.add_variable<float>({3, 5, 7, 1}, "scale");
      for (auto const& t : {x, bias, scale}) tb::map_linearly(g, t);
      tb::Sequence prog;
      auto y = tb::ops::map<float, float, float>(g, prog, min(max(_1 + _2, 0.0f), 6.0f) * _3, x, bias, scale);
      tb::ops::map_in_place<float, float>(g, prog, _1 - _2, x, bias);
      tb::Engine e{tb::compile(g, prog), {.host_threads = threads, .host_kernels = host}};
      auto const xv = tbt::values<float>(2100, false, 21), bv = tbt::values<float>(20, false, 22);
      auto const sv = tbt::values<float>(105, false, 23);
      e.write(x, xv), e.write(bias, bv), e.write(scale, sv);
      e.run();
      auto const yv = e.read<float>(y), xo = e.read<float>(x);
      for (std::size_t i = 0; i < 2100; ++i) {
        CHECK(yv[i] == std::min(std::max(xv[i] + bv[i % 20], 0.0f), 6.0f) * sv[i / 20]);
        CHECK(xo[i] == xv[i] - bv[i % 20]);
      }
      std::vector<std::vector<float>> const all{yv, xo};
      if (first.empty()) first = all;
      CHECK(all == first);  // bitwise, with and without host kernels, for any thread count
    }
}

TEST_CASE("maps: a long run of short rows runs in several segments of repeated bias rows") {
  // [2, 301, 20]: 301 positions of 20 channels in one run of rows, more than a segment holds (tiled_elements), so
  // the segments end inside the run; thread shares (1, 2, 3 threads) end inside segments too.
  std::vector<std::vector<float>> first;
  for (bool host : {true, false})
    for (std::size_t threads : {1u, 2u, 3u}) {
      tb::Graph g{tb::targets::tiny(4)};
      auto x = g.add_variable<float>({2, 301, 20}, "x"), bias = g.add_variable<float>({20}, "bias");
      for (auto const& t : {x, bias}) tb::map_linearly(g, t);
      tb::Sequence prog;
      auto y = tb::ops::map<float, float>(g, prog, min(max(_1 + _2, 0.0f), 6.0f), x, bias);
      tb::Engine e{tb::compile(g, prog), {.host_threads = threads, .host_kernels = host}};
      auto const xv = tbt::values<float>(12040, false, 31), bv = tbt::values<float>(20, false, 32);
      e.write(x, xv), e.write(bias, bv);
      e.run();
      auto const yv = e.read<float>(y);
      for (std::size_t i = 0; i < yv.size(); ++i) CHECK(yv[i] == std::min(std::max(xv[i] + bv[i % 20], 0.0f), 6.0f));
      if (first.empty()) first.push_back(yv);
      CHECK(yv == first.front());  // bitwise, with and without host kernels, for any thread count
    }
}

TEST_CASE("an operand that overlaps the output elsewhere is read before any of it is written") {
  // v[0:47] = v[0:47] + v[1:48] over 4 tiles: the second operand is copied to the pieces' tiles first (an exchange),
  // so every element sums the values from before the map, whatever the order the vertices run in.
  for (std::size_t threads : {1u, 3u}) {
    tb::Graph g{tb::targets::tiny(4)};
    auto v = g.add_variable<float>({48}, "v");
    tb::map_linearly(g, v);
    tb::Sequence prog;
    tb::ops::map_in_place(g, prog, _1 + _2 * 2.0f, v.slice(0, 47), v.slice(1, 48));
    tb::Engine e{tb::compile(g, prog), {.host_threads = threads}};
    auto const in = tbt::values<float>(48, false, 7);
    e.write(v, in);
    e.run();
    auto const out = e.read<float>(v);
    for (std::size_t i = 0; i < 47; ++i) CHECK(out[i] == in[i] + in[i + 1] * 2.0f);
    CHECK(out[47] == in[47]);
  }
}

/// Maps the first `positions` rows of x [rows, 12] with tile t holding channels 3t..3t+2 of every position, as a
/// conv output mapped in blocks of channels: a run of 3 per position and tile, 12 apart.
namespace {
void map_blocks_of_channels(tb::Graph& g, tb::Tensor const& x, std::size_t positions) {
  for (std::size_t p = 0; p < positions; ++p)
    for (std::size_t t = 0; t < 4; ++t) g.set_tile_mapping(x[p].slice(3 * t, 3 * t + 3), t);
}
}  // namespace

TEST_CASE("maps over runs of one length at one stride: a row vertex per tile, the bits of single runs") {
  // x [60 positions, 12 channels], tile t holding channels 3t..3t+2 of every position (as a conv output mapped in
  // blocks of channels): 60 runs of 3 per tile, 12 apart, taken as rows by one vertex (its workers share them).
  std::vector<std::vector<float>> first;
  for (bool host : {true, false})
    for (std::size_t threads : {1u, 3u}) {
      tb::Graph g{tb::targets::tiny(4)};
      auto x = g.add_variable<float>({60, 12}, "x"), bias = g.add_variable<float>({12}, "bias");
      auto u = g.add_variable<float>({720, 2}, "u");
      map_blocks_of_channels(g, x, 60);
      tb::map_linearly(g, bias);
      tb::map_linearly(g, u);
      tb::Sequence relu_prog, sum_prog;
      tb::ops::map_in_place<float, float>(g, relu_prog, relu(_1 + _2), x, bias);
      // An operand read in place at a stride (every other element of u): its rows are not contiguous, so
      // those pieces become single runs again.
      tb::Tensor const y =
          tb::ops::map<float, float>(g, sum_prog, _1 * 2.0f - _2, x, u.transpose()[0].reshape({60, 12}));
      CHECK(g.tile_mapping(y).regions_on(0).size() == 60);  // mapped like x
      std::size_t const relu_vertices = tb::compile(g, relu_prog).schedule().compute_sets.at(0).vertices.size();
      std::size_t const sum_vertices = tb::compile(g, sum_prog).schedule().compute_sets.at(0).vertices.size();
      // One vertex of rows per tile instead of 60 single runs; on tiles 1 and 2 the last run on its own (a
      // [60, 12] reshape from their first run would pass the end).
      CHECK(relu_vertices == 6);
      // Multi-worker vertices, estimated in tile cycles: 6 workers taking 10 rows each (of 60, or 59) of 2 vectors
      // (3 f32 at 2 lanes), a cycle per node and vector, 6 per row and 20 of setup; a single run's 2 vectors go to
      // one worker while the others only start.
      std::uint64_t const nodes = decltype(relu(_1 + _2))::nodes;
      auto const relu_exe = tb::compile(g, relu_prog);
      std::size_t rows = 0, single = 0;
      for (auto const& v : relu_exe.schedule().compute_sets.at(0).vertices) {
        CHECK(v.supervisor);
        std::uint64_t const own = relu_exe.schedule().graph->vertices.at(v.record).cycles;  // before any gathers
        rows += own == 6 * (20 + 10 * (6 + 2 * nodes));
        single += own == 6 * (20 + nodes);
      }
      CHECK(rows == 4);
      CHECK(single == 2);
      CHECK(sum_vertices == 240);
      tb::Sequence prog;
      prog.add(relu_prog);
      prog.add(sum_prog);
      tb::Engine e{tb::compile(g, prog), {.host_threads = threads, .host_kernels = host}};
      auto const xv = tbt::values<float>(720, false, 11), bv = tbt::values<float>(12, false, 12);
      auto const uv = tbt::values<float>(1440, false, 13);
      e.write(x, xv), e.write(bias, bv), e.write(u, uv);
      e.run();
      auto const xo = e.read<float>(x), yo = e.read<float>(y);
      for (std::size_t i = 0; i < 720; ++i) {
        float const r = std::max(xv[i] + bv[i % 12], 0.0f);
        CHECK(xo[i] == r);
        CHECK(yo[i] == r * 2.0f - uv[2 * i]);
      }
      std::vector<std::vector<float>> const all{xo, yo};
      if (first.empty()) first = all;
      CHECK(all == first);  // bitwise, with and without host kernels, for any thread count
    }
}

TEST_CASE("map pieces: a whole variable's series from its mapping's repeats, a view's from its regions, alike") {
  // x [60, 12] and the first 60 rows of z [61, 12], tile t holding channels 3t..3t+2 of every position: x's
  // mapping is one repeat (a pattern of 4 pieces, 60 times), read a series per tile; the view of z goes region by
  // region. Both give the same pieces: per tile one vertex of rows (tiles 1 and 2: 59 rows and the last run).
  tb::Graph g{tb::targets::tiny(4)};
  auto x = g.add_variable<float>({60, 12}, "x"), z = g.add_variable<float>({61, 12}, "z");
  auto bias = g.add_variable<float>({12}, "bias");
  map_blocks_of_channels(g, x, 60);
  map_blocks_of_channels(g, z, 61);
  tb::map_linearly(g, bias);
  tb::Tensor const zv = z.slice(0, 60);
  auto const shapes = [&](tb::Tensor const& t) {
    tb::Sequence prog;
    tb::ops::map_in_place<float, float>(g, prog, _1 * _2, t, bias);
    auto const exe = tb::compile(g, prog);
    std::vector<std::pair<std::size_t, std::vector<std::size_t>>> r;  // (tile, output shape) per vertex
    auto const& graph = *exe.schedule().graph;
    for (auto const& v : exe.schedule().compute_sets.at(0).vertices) {
      auto const& rec = graph.vertices.at(v.record);
      r.emplace_back(rec.tile, rec.tensors.at(2).shape());
    }
    return r;
  };
  auto const whole = shapes(x), view = shapes(zv);
  CHECK(whole.size() == 6);
  CHECK(whole == view);
  tb::Sequence prog;
  tb::ops::map_in_place<float, float>(g, prog, _1 * _2, x, bias);
  tb::ops::map_in_place<float, float>(g, prog, _1 * _2, zv, bias);
  tb::Engine e{tb::compile(g, prog), {.host_threads = 2, .host_kernels = false}};
  auto const xv = tbt::values<float>(720, false, 31), zv0 = tbt::values<float>(732, false, 32);
  auto const bv = tbt::values<float>(12, false, 33);
  e.write(x, xv), e.write(z, zv0), e.write(bias, bv);
  e.run();
  auto const xo = e.read<float>(x), zo = e.read<float>(z);
  for (std::size_t i = 0; i < 720; ++i) {
    CHECK(xo[i] == xv[i] * bv[i % 12]);
    CHECK(zo[i] == zv0[i] * bv[i % 12]);
  }
  for (std::size_t i = 720; i < 732; ++i) CHECK(zo[i] == zv0[i]);
}

TEST_CASE("map rows: a series of runs that spans the whole tensor keeps its last run apart") {
  // x [4, 12], tile t holding channels 3t..3t+2: one piece of rows per tile takes all 4 runs where a [4, 12]
  // reshape reaches them from the first run (tile 0) or back from the last (tile 3); tiles 1 and 2 take 3 rows
  // and a single run.
  tb::Graph g{tb::targets::tiny(4)};
  auto x = g.add_variable<float>({4, 12}, "x"), bias = g.add_variable<float>({12}, "bias");
  map_blocks_of_channels(g, x, 4);
  tb::map_linearly(g, bias);
  tb::Sequence prog;
  tb::ops::map_in_place<float, float>(g, prog, _1 * _2, x, bias);
  auto exe = tb::compile(g, prog);
  auto const& vertices = exe.schedule().compute_sets.at(0).vertices;
  CHECK(vertices.size() == 6);
  for (bool host : {true, false}) {
    tb::Engine e{tb::compile(g, prog), {.host_threads = 2, .host_kernels = host}};
    auto const xv = tbt::values<float>(48, false, 21), bv = tbt::values<float>(12, false, 22);
    e.write(x, xv), e.write(bias, bv);
    e.run();
    auto const xo = e.read<float>(x);
    for (std::size_t i = 0; i < 48; ++i) CHECK(xo[i] == xv[i] * bv[i % 12]);
  }
}
