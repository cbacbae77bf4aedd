// ops::reduce against a double-precision reference, over any set of dimensions, f32 and f16.
#include "ops/map_harness.hpp"

#include <functional>
#include <limits>

namespace tb = tilebsp;
using Op = tb::ops::ReduceOp;

namespace {

double ref_fold(Op op, std::vector<double> const& xs) {
  double const inf = std::numeric_limits<double>::infinity();
  double acc = op == Op::mul ? 1 : op == Op::max || op == Op::log_add ? -inf : op == Op::min ? inf : 0;
  if (op == Op::log_add) {
    if (xs.empty()) return -inf;
    double m = -inf;
    for (double x : xs) m = std::max(m, x);
    double s = 0;
    for (double x : xs) s += std::exp(x - m);
    return m + std::log(s);
  }
  for (double x : xs) {
    switch (op) {
      case Op::add: acc += x; break;
      case Op::mul: acc *= x; break;
      case Op::max: acc = std::max(acc, x); break;
      case Op::min: acc = std::min(acc, x); break;
      case Op::square_add: acc += x * x; break;
      default: break;
    }
  }
  return acc;
}

/// Reduces a tensor of `shape` over `dims` on a 7-tile target and checks every output against double math.
template <class T>
void check_reduce(Op op, tb::Shape const& shape, std::vector<std::size_t> const& dims, double lo, double hi) {
  INFO("op " << static_cast<int>(op) << " shape " << tb::to_string(shape) << " dims " << tb::to_string(dims));
  tb::Graph g{tb::targets::tiny(7, 8 << 20)};
  auto t = g.add_variable<T>(shape, "t");
  tb::map_linearly(g, t, {.grain = 5});
  tb::Sequence prog;
  auto r = tb::ops::reduce(g, prog, t, dims, op);
  tb::Engine e{tb::compile(g, prog), {.host_threads = 2}};
  auto values = tbt::random_values<T>(t.num_elements(), lo, hi, 42);
  if (!values.empty()) e.write(t, values);
  e.run();
  auto const got = e.read<T>(r);
  // Reference: walk every element, accumulate into its output index.
  std::size_t const rank = shape.size();
  std::vector<bool> red(rank, false);
  for (auto d : dims) red[d] = true;
  std::vector<std::vector<double>> groups(got.size());
  std::vector<std::size_t> idx(rank, 0);
  for (std::size_t flat = 0; flat < values.size(); ++flat) {
    std::size_t out = 0;
    for (std::size_t d = 0; d < rank; ++d)
      if (!red[d]) out = out * shape[d] + idx[d];
    groups[out].push_back(static_cast<double>(static_cast<float>(values[flat])));
    for (std::size_t d = rank; d-- > 0;)
      if (++idx[d] < shape[d]) break;
      else idx[d] = 0;
  }
  bool const f16 = std::is_same_v<T, tb::half>;
  for (std::size_t k = 0; k < got.size(); ++k) {
    double const want = ref_fold(op, groups[k]);
    double scale = 0;  // error bound grows with the magnitudes summed
    for (double x : groups[k]) scale += op == Op::square_add ? x * x : std::abs(x);
    double const tol = (f16 ? 1e-3 : 1e-5) * std::max({std::abs(want), scale * (op == Op::add || op == Op::square_add ? 1e-1 : 0), 1e-3});
    INFO("output " << k);
    CHECK(tbt::close<T>(got[k], want, 0, tol));
  }
}

}  // namespace

TEST_CASE_TEMPLATE("every reduction over every dimension set", T, float, tb::half) {
  for (Op op : {Op::add, Op::max, Op::min, Op::square_add, Op::log_add}) {
    check_reduce<T>(op, {1000}, {0}, -2, 2);
    check_reduce<T>(op, {37, 53}, {0}, -2, 2);
    check_reduce<T>(op, {37, 53}, {1}, -2, 2);
    check_reduce<T>(op, {37, 53}, {0, 1}, -2, 2);
    check_reduce<T>(op, {4, 5, 6}, {0, 2}, -2, 2);
    check_reduce<T>(op, {4, 5, 6}, {}, -2, 2);
  }
  check_reduce<T>(Op::mul, {300}, {0}, 0.99, 1.01);
  check_reduce<T>(Op::mul, {20, 30}, {1}, 0.9, 1.1);
}

TEST_CASE_TEMPLATE("reductions keeping the innermost dimension fold columns in memory order", T, float, tb::half) {
  // Bias gradients ([N][H][W][C] over all but C), widths below, at and above a SIMD vector, a unit dimension
  // inside or last, runs the 5-element mapping grain cuts mid-row, and a reduction of nothing.
  for (Op op : {Op::add, Op::max, Op::min, Op::square_add, Op::log_add}) {
    check_reduce<T>(op, {2, 5, 7, 33}, {0, 1, 2}, -2, 2);
    check_reduce<T>(op, {50, 3}, {0}, -2, 2);
    check_reduce<T>(op, {3, 40}, {0}, -2, 2);
    check_reduce<T>(op, {9, 1, 17}, {0}, -2, 2);
    check_reduce<T>(op, {17, 4, 1}, {0, 2}, -2, 2);
    check_reduce<T>(op, {6, 7, 16}, {1}, -2, 2);
    check_reduce<T>(op, {3, 20}, {}, -2, 2);
  }
  check_reduce<T>(Op::mul, {40, 18}, {0}, 0.95, 1.05);
}

TEST_CASE("reduce over a transposed view: the dimension kept last is not the fastest in memory") {
  tb::Graph g{tb::targets::tiny(5, 1 << 20)};
  auto x = g.add_variable<float>({6, 50}, "x");
  tb::map_linearly(g, x, {.grain = 7});
  tb::Sequence prog;
  auto const sums = tb::ops::reduce(g, prog, x.transpose(), {0}, Op::add);  // [6]: the rows of x
  auto const maxs = tb::ops::reduce(g, prog, x.transpose(), {0}, Op::max);
  tb::Engine e{tb::compile(g, prog), {.host_threads = 2}};
  std::vector<float> values(300);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 50) - (i / 50 == 3 ? 100.0f : 0.0f);
  e.write(x, values);
  e.run();
  CHECK(e.read<float>(sums) == std::vector<float>{1225, 1225, 1225, -3775, 1225, 1225});
  CHECK(e.read<float>(maxs) == std::vector<float>{49, 49, 49, -51, 49, 49});
}

TEST_CASE("scaled_reduce scales in f32 before rounding: an f16 mean whose sum overflows f16") {
  tb::Graph g{tb::targets::tiny(4, 1 << 20)};
  auto x = g.add_variable<tb::half>({3, 64}, "x");
  tb::map_linearly(g, x);
  tb::Sequence prog;
  auto const mean = tb::ops::scaled_reduce(g, prog, x, {1}, Op::add, 1.0f / 64, "mean");  // sums up to 128000
  auto const sum = tb::ops::reduce(g, prog, x, {1}, Op::add, "sum");
  auto const msq = tb::ops::scaled_reduce(g, prog, x, {1}, Op::square_add, 0.5f, "half the sum of squares");
  tb::Engine e{tb::compile(g, prog), {.host_threads = 2}};
  std::vector<tb::half> values;
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 64; ++i) values.push_back(tb::half(r == 0 ? 2000.0f : r == 1 ? -3.0f : static_cast<float>(i % 4)));
  e.write(x, values);
  e.run();
  auto const m = e.read<tb::half>(mean), s = e.read<tb::half>(sum), q = e.read<tb::half>(msq);
  CHECK(static_cast<float>(m[0]) == 2000.0f);
  CHECK(static_cast<float>(m[1]) == -3.0f);
  CHECK(static_cast<float>(m[2]) == 1.5f);
  CHECK(std::isinf(static_cast<float>(s[0])));  // the unscaled sum does not fit f16
  CHECK(static_cast<float>(q[2]) == 112.0f);    // (0 + 1 + 4 + 9) * 16 / 2
}

TEST_CASE("reductions of every tested length, including empty ones") {
  for (std::size_t n : tbt::lengths()) {
    check_reduce<float>(Op::add, {n}, {0}, -1, 1);
    check_reduce<float>(Op::max, {n}, {0}, -1, 1);
  }
  check_reduce<float>(Op::add, {0, 4}, {0}, -1, 1);  // identity for empty rows
  check_reduce<float>(Op::add, {4, 0}, {0}, -1, 1);  // empty output
}

TEST_CASE("rows a tile holds whole reduce there in one stage; only rows split between tiles go through partials, read in place") {
  for (bool split : {false, true}) {
    INFO("split rows " << split);
    tb::Graph g{tb::targets::tiny(4)};
    auto t = g.add_variable<float>({6, 10}, "t");
    for (std::size_t r = 0; r < 6; ++r) g.set_tile_mapping(t[r], r % 4);  // row r on tile r % 4
    if (split) {  // row 4 half on tile 0, half on tile 1; row 5 begins on tile 2 and ends on tile 3
      g.set_tile_mapping(t.slice(tb::Shape{4, 5}, tb::Shape{5, 10}), 1);
      g.set_tile_mapping(t.slice(tb::Shape{5, 0}, tb::Shape{6, 3}), 2);
      g.set_tile_mapping(t.slice(tb::Shape{5, 3}, tb::Shape{6, 10}), 3);
    }
    tb::Sequence prog;
    auto r = tb::ops::scaled_reduce(g, prog, t, {1}, Op::add, 0.5f);
    // Each output on its row's tile (a split row's on the tile of its first part).
    std::vector<std::size_t> const want_tiles{0, 1, 2, 3, 0, split ? 2u : 1u};
    for (std::size_t k = 0; k < 6; ++k) CHECK(g.tile_mapping(r[k]).begin()->first == want_tiles[k]);
    auto const exe = tb::compile(g, prog);
    // No copy: stage 2 (for the split rows only) reads each row's partial from the other tile where it lives.
    auto const& sets = exe.schedule().compute_sets;
    CHECK(exe.schedule().exchanges.empty());
    REQUIRE(sets.size() == (split ? 2u : 1u));
    CHECK(sets.back().fetch_bytes == (split ? 2u * 4u : 0u));  // row 4's part on tile 1, row 5's on tile 3
    for (std::size_t threads : {1, 2, 3}) {
      tb::Engine e{exe, {.host_threads = threads}};
      std::vector<float> xs(60);
      for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 13) - 6.0f;
      e.write(t, xs);
      e.run();
      auto const got = e.read<float>(r);
      for (std::size_t k = 0; k < 6; ++k) {
        float sum = 0;
        for (std::size_t j = 0; j < 10; ++j) sum += xs[k * 10 + j];
        CHECK(got[k] == sum * 0.5f);  // small integers: exact in any order
      }
    }
  }
}

TEST_CASE("rows split in column blocks (a product's result): a vertex per block, partials at a stride, the last alone") {
  // Columns 0-2 of every row on tile 0; columns 3-7 of rows 0-2 on tile 1, of rows 3-5 on tile 2. Each row has two
  // partials, row by row: tile 0's at 0, 2, ..., 10; tile 1's at 1, 3, 5; tile 2's at 7, 9, 11 (its last one
  // cannot be the end of a [rows, 2] slice: written on its own).
  tb::Graph g{tb::targets::tiny(4)};
  auto t = g.add_variable<float>({6, 8}, "t");
  g.set_tile_mapping(t.slice(tb::Shape{0, 0}, tb::Shape{6, 3}), 0);
  g.set_tile_mapping(t.slice(tb::Shape{0, 3}, tb::Shape{3, 8}), 1);
  g.set_tile_mapping(t.slice(tb::Shape{3, 3}, tb::Shape{6, 8}), 2);
  for (Op op : {Op::add, Op::max, Op::log_add}) {
    tb::Sequence prog;
    auto r = tb::ops::reduce(g, prog, t, {1}, op);
    for (std::size_t k = 0; k < 6; ++k) CHECK(g.tile_mapping(r[k]).begin()->first == 0);  // the first part's tile
    tb::Engine e{tb::compile(g, prog), {.host_threads = 2}};
    std::vector<float> xs(48);
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 7) % 11) - 5.0f;
    e.write(t, xs);
    e.run();
    auto const got = e.read<float>(r);
    for (std::size_t k = 0; k < 6; ++k) {
      std::vector<double> row(xs.begin() + static_cast<std::ptrdiff_t>(k * 8), xs.begin() + static_cast<std::ptrdiff_t>(k * 8 + 8));
      CHECK(got[k] == doctest::Approx(ref_fold(op, row)).epsilon(1e-6));
    }
  }
}

TEST_CASE("reduce errors") {
  tb::Graph g{tb::targets::tiny(2)};
  auto t = g.add_variable<float>({3, 4}, "t");
  auto i = g.add_variable<std::int32_t>({3}, "i");
  tb::Sequence prog;
  CHECK_THROWS_WITH_AS(tb::ops::reduce(g, prog, t, {2}, Op::add), "reduce: dimension 2 out of range for rank 2",
                       tb::index_error);
  CHECK_THROWS_WITH_AS(tb::ops::reduce(g, prog, t, {1, 1}, Op::add), "reduce: dimension 1 is listed twice",
                       tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::reduce(g, prog, i, {0}, Op::add), "reduce: only f32 and f16 tensors can be reduced, not i32",
                       tb::type_error);
}
