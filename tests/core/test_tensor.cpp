// Tensor views: slice, index, reshape, flatten, transpose, dimshuffle, broadcast, concat, reverse; errors.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <numeric>

namespace tb = tilebsp;
using tbt::indices;
using V = std::vector<std::int64_t>;

namespace {
V iota(std::int64_t n, std::int64_t from = 0) {
  V v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}
}  // namespace

TEST_CASE("a variable is one contiguous run; shape queries") {
  tb::Graph g{tb::targets::tiny(4)};
  auto t = g.add_variable<float>({2, 3, 4}, "t");
  CHECK(t.rank() == 3);
  CHECK(t.num_elements() == 24);
  CHECK(t.shape() == tb::Shape{2, 3, 4});
  CHECK(t.dim(1) == 3);
  CHECK(t.element_type() == tb::f32);
  CHECK(t.runs().size() == 1);
  CHECK(indices(t) == iota(24));
  CHECK_THROWS_WITH_AS(t.dim(3), "dim: dimension 3 out of range for rank 3", tb::index_error);
}

TEST_CASE("slice, index and per-dimension slices") {
  tb::Graph g{tb::targets::tiny(4)};
  auto t = g.add_variable<float>({3, 4}, "t");
  CHECK(indices(t.slice(1, 3)) == iota(8, 4));
  CHECK(indices(t.slice(1, 3, 1)) == V{1, 2, 5, 6, 9, 10});
  CHECK(indices(t.slice(tb::Interval{2, 3})) == V{8, 9, 10, 11});
  CHECK(indices(t.slice({1, 1}, {3, 3})) == V{5, 6, 9, 10});
  CHECK(indices(t[2]) == V{8, 9, 10, 11});
  CHECK(t[2].shape() == tb::Shape{4});
  CHECK(indices(t[1][3]) == V{7});
  CHECK(t[1][3].rank() == 0);
  CHECK(t.slice(2, 2).num_elements() == 0);
  CHECK(indices(t.slice(2, 2)).empty());
  CHECK_THROWS_WITH_AS(t.slice(2, 5), "slice: range [2, 5) is out of bounds for dimension 0 of size 3", tb::index_error);
  CHECK_THROWS_AS(t.slice(0, 1, 2), tb::index_error);
  CHECK_THROWS_AS(t[1][3].index(0), tb::index_error);
  CHECK_THROWS_AS(t.slice(tb::Shape{0}, tb::Shape{1}), tb::shape_error);
}

TEST_CASE("views of temporaries are the views of copies, and leave no trace on the tensor they came from") {
  tb::Graph g{tb::targets::tiny(4)};
  auto t = g.add_variable<float>({4, 6}, "t");
  tb::Tensor const c = t;
  // The same chains on a named tensor (each view copies) and on temporaries (each view reuses the last).
  CHECK(indices(tb::Tensor(t).slice(1, 3)) == indices(c.slice(1, 3)));
  CHECK(indices(tb::Tensor(t).slice(2, 5, 1).index(3)) == indices(c.slice(2, 5, 1).index(3)));
  CHECK(indices(tb::Tensor(t).slice({1, 2}, {3, 6}).flatten()) == V{8, 9, 10, 11, 14, 15, 16, 17});
  CHECK(indices(t.transpose().slice(1, 3).reshape({2, 4})[1]) == V{2, 8, 14, 20});  // materialised, then indexed
  CHECK(indices(t.flatten().slice(tb::Interval{5, 9})) == V{5, 6, 7, 8});
  CHECK(indices(tb::Tensor(t)[3][5]) == V{23});
  CHECK(indices(t) == iota(24));  // untouched
  CHECK(t.shape() == tb::Shape{4, 6});
  // Errors are the named tensor's: a temporary's view checks the same way.
  CHECK_THROWS_WITH_AS(tb::Tensor(t).slice(2, 5), "slice: range [2, 5) is out of bounds for dimension 0 of size 4",
                       tb::index_error);
  CHECK_THROWS_WITH_AS(tb::Tensor(t).slice({0, 0}, {1, 7}),
                       "slice: range [0, 7) is out of bounds for dimension 1 of size 6", tb::index_error);
  CHECK_THROWS_WITH_AS(tb::Tensor(t).slice(tb::Shape{0}, tb::Shape{1}), "slice: expected 2 begins and ends, got 1 and 1",
                       tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::Tensor(t).reshape({5, 5}), "reshape: cannot reshape [4, 6] (24 elements) to [5, 5]",
                       tb::shape_error);
  CHECK_THROWS_AS(tb::Tensor(t)[1][2].index(0), tb::index_error);
}

TEST_CASE("transpose, dimshuffle and reshape of non-contiguous views") {
  tb::Graph g{tb::targets::tiny(4)};
  auto t = g.add_variable<float>({2, 3}, "t");
  auto tt = t.transpose();
  CHECK(tt.shape() == tb::Shape{3, 2});
  CHECK(indices(tt) == V{0, 3, 1, 4, 2, 5});
  CHECK(indices(tt.reshape({6})) == V{0, 3, 1, 4, 2, 5});
  CHECK(indices(tt.flatten().slice(1, 4)) == V{3, 1, 4});
  CHECK(indices(tt.reshape({2, 3})[1]) == V{4, 2, 5});
  auto u = g.add_variable<float>({2, 3, 4}, "u");
  auto s = u.dimshuffle({2, 0, 1});
  CHECK(s.shape() == tb::Shape{4, 2, 3});
  CHECK(indices(s[1][1]) == V{13, 17, 21});
  CHECK(indices(s.dimshuffle({1, 2, 0})) == iota(24));  // back to the original order
  CHECK_THROWS_WITH_AS(u.dimshuffle({0, 0, 1}), "dimshuffle: [0, 0, 1] is not a permutation of the 3 dimensions of [2, 3, 4]",
                       tb::shape_error);
  CHECK_THROWS_AS(u.transpose(), tb::shape_error);
  CHECK_THROWS_WITH_AS(u.reshape({5, 5}), "reshape: cannot reshape [2, 3, 4] (24 elements) to [5, 5]", tb::shape_error);
  CHECK(indices(u.reshape({6, 4})[5]) == V{20, 21, 22, 23});
  // A reshape that merges or splits only dimensions that step over one another whole keeps the view's strides (one
  // variable at affine positions, as NumPy reshapes without a copy): a channel slice of a channels-last tensor as
  // the rows of a matrix, or split again.
  auto c = g.add_variable<float>({2, 3, 4, 6}, "c");
  auto const slice = c.slice(2, 5, 3);  // channels 2, 3, 4 of each position
  auto const rows = slice.reshape({24, 3});
  auto const a = rows.affine();
  REQUIRE(a.has_value());
  CHECK(a->start == 2);
  CHECK(a->strides == std::vector<std::int64_t>{6, 1});
  CHECK(indices(rows) == indices(slice));
  CHECK(indices(rows[5]) == V{32, 33, 34});
  auto const split = rows.reshape({2, 12, 1, 3});
  REQUIRE(split.affine().has_value());
  CHECK(split.affine()->strides == std::vector<std::int64_t>{72, 6, 0, 1});
  CHECK(indices(split) == indices(slice));
  // Merging across the slice's gap (its channels with the next position's) needs a list of the elements.
  auto const flat = slice.reshape({72});
  CHECK(!flat.affine().has_value());
  CHECK(indices(flat) == indices(slice));
  CHECK(indices(slice.reshape({6, 12})[1]) == V{26, 27, 28, 32, 33, 34, 38, 39, 40, 44, 45, 46});
}

TEST_CASE("broadcast, expand, squeeze and reverse") {
  tb::Graph g{tb::targets::tiny(4)};
  auto row = g.add_variable<float>({3}, "row");
  CHECK(indices(row.broadcast({2, 3})) == V{0, 1, 2, 0, 1, 2});
  auto col = g.add_variable<float>({2, 1}, "col");
  CHECK(indices(col.broadcast({2, 3})) == V{0, 0, 0, 1, 1, 1});
  CHECK(indices(row.expand(1).broadcast({3, 2})) == V{0, 0, 1, 1, 2, 2});
  CHECK(row.expand(0).shape() == tb::Shape{1, 3});
  CHECK(col.squeeze().shape() == tb::Shape{2});
  CHECK(indices(row.reverse(0)) == V{2, 1, 0});
  auto m = g.add_variable<float>({2, 3}, "m");
  CHECK(indices(m.reverse(1)) == V{2, 1, 0, 5, 4, 3});
  CHECK(indices(m.reverse(0).reverse(1)) == V{5, 4, 3, 2, 1, 0});
  CHECK(indices(m.reverse(1).reshape({3, 2}).transpose()) == V{2, 0, 4, 1, 5, 3});
  CHECK_THROWS_WITH_AS(row.broadcast({2, 4}), "broadcast: cannot broadcast [3] to [2, 4]", tb::shape_error);
  CHECK_THROWS_AS(m.broadcast({3}), tb::shape_error);
}

TEST_CASE("concat along any dimension, across variables") {
  tb::Graph g{tb::targets::tiny(4)};
  auto a = g.add_variable<float>({2, 2}, "a");
  auto b = g.add_variable<float>({2, 1}, "b");
  auto c = tb::concat({a, b}, 1);
  CHECK(c.shape() == tb::Shape{2, 3});
  auto e = tbt::elements(c);
  REQUIRE(e.size() == 6);
  std::uint32_t const va = tbt::elements(a)[0].first, vb = tbt::elements(b)[0].first;
  CHECK(e == std::vector<std::pair<std::uint32_t, std::int64_t>>{{va, 0}, {va, 1}, {vb, 0}, {va, 2}, {va, 3}, {vb, 1}});
  auto r = tb::concat({a, a.reverse(0)}, 0);
  CHECK(indices(r) == V{0, 1, 2, 3, 2, 3, 0, 1});
  CHECK(indices(c.transpose()[2]) == V{0, 1});  // column 2 is b
  CHECK_THROWS_WITH_AS(tb::concat({a, b}, 0), "concat: shapes [2, 2] and [2, 1] differ outside dimension 0",
                       tb::shape_error);
  auto i = g.add_variable<std::int32_t>({2, 2}, "i");
  CHECK_THROWS_AS(tb::concat({a, i}, 0), tb::type_error);
  CHECK_THROWS_AS(tb::concat({}, 0), tb::shape_error);
}

TEST_CASE("large views stay compact: a transposed 1024x1024 matrix has one run per row") {
  tb::Graph g{tb::targets::tiny(4, 1 << 20)};  // 4 MiB of data must fit the target
  auto m = g.add_variable<float>({1024, 1024}, "m");
  CHECK(m.transpose().runs().size() == 1024);
  CHECK(m.slice(0, 512, 1).runs().size() == 1024);
  CHECK(m.slice(0, 512, 0).runs().size() == 1);
  CHECK(m.broadcast({4, 1024, 1024}).runs().size() == 4);  // one run per repetition
}

TEST_CASE("row_series: rows of one variable, at one distance, recognised without walking the runs") {
  tb::Graph g{tb::targets::tiny(4)};
  auto x = g.add_variable<float>({4, 6}, "x"), y = g.add_variable<float>({4}, "y");
  auto const series = [](tb::Tensor const& t) {
    tb::core::detail::RowSeries s;
    bool const found = t.row_series(s);
    // Found or not, the runs are what a series would be (each row one unit-stride run, `step` apart).
    if (found) {
      auto const runs = t.runs();
      CHECK(static_cast<std::int64_t>(runs.size()) == s.rows);
      for (std::size_t r = 0; r < runs.size(); ++r) {
        CHECK(runs[r].var == s.var);
        CHECK(runs[r].start == s.start + static_cast<std::int64_t>(r) * s.step);
        CHECK(runs[r].count == s.len);
        CHECK((runs[r].stride == 1 || runs[r].count == 1));
      }
    }
    return found ? std::vector<std::int64_t>{s.start, s.len, s.step, s.rows} : std::vector<std::int64_t>{};
  };
  CHECK(series(x.slice(tb::Shape{0, 1}, tb::Shape{4, 4})) == V{1, 3, 6, 4});
  CHECK(series(x.slice(tb::Shape{0, 2}, tb::Shape{4, 5}).slice(1, 3)) == V{8, 3, 6, 2});
  // The flat view of a block cut as map cuts its pieces: rows of a [rows, stride] reshape.
  CHECK(series(x.flatten().slice(2, 20).reshape({3, 6}).slice(tb::Shape{0, 0}, tb::Shape{3, 2})) == V{2, 2, 6, 3});
  CHECK(series(x).empty());                                                    // one run
  CHECK(series(x.slice(1, 3)).empty());                                        // one run
  CHECK(series(x.slice(tb::Shape{1, 2}, tb::Shape{3, 3})).empty());            // a column: one strided run
  CHECK(series(x.transpose()).empty());                                        // rows of one at stride 6: not unit
  CHECK(series(x.reverse(1).slice(tb::Shape{0, 1}, tb::Shape{4, 4})).empty()); // descending rows
  CHECK(series(x.slice(0, 2).broadcast({3, 2, 6})).empty());                  // repeats its rows
  CHECK(series(tb::concat({x.slice(0, 1), x.slice(2, 3)}, 0)).empty());       // another sequence
  CHECK(series(g.add_variable<float>({2, 3, 4}, "z").slice(tb::Shape{0, 0, 0}, tb::Shape{2, 2, 2})).empty());  // 3 levels
  CHECK(series(y.slice(0, 1)).empty());
}

TEST_CASE("for_each_row_series: a view of more levels is a row series per index of its outer dimensions") {
  tb::Graph g{tb::targets::tiny(4)};
  auto w = g.add_variable<float>({3, 3, 10, 32}, "w");  // taps x input channels x output channels
  auto const series = [](tb::Tensor const& t) {
    std::vector<tb::core::detail::RowSeries> out;
    bool const found = t.for_each_row_series([&](tb::core::detail::RowSeries const& s) { out.push_back(s); });
    if (!found) CHECK(out.empty());
    // Found, the series' rows are the view's runs, in order.
    std::vector<tb::core::detail::Run> rows;
    for (auto const& s : out)
      for (std::int64_t r = 0; r < s.rows; ++r) rows.push_back({s.var, s.start + r * s.step, 1, s.len});
    if (found) {
      auto const runs = t.runs();
      REQUIRE(runs.size() == rows.size());
      for (std::size_t r = 0; r < runs.size(); ++r) {
        CHECK(runs[r].var == rows[r].var);
        CHECK(runs[r].start == rows[r].start);
        CHECK(runs[r].count == rows[r].count);
      }
    }
    return found ? static_cast<std::int64_t>(out.size()) : std::int64_t{-1};
  };
  // A block of 4 input channels x 16 output channels for every tap: the taps merge into one dimension, 9 series.
  CHECK(series(w.slice(tb::Shape{0, 0, 2, 8}, tb::Shape{3, 3, 6, 24})) == 9);
  CHECK(series(w.slice(tb::Shape{1, 0, 2, 8}, tb::Shape{2, 2, 6, 24})) == 2);
  CHECK(series(w.slice(tb::Shape{0, 0, 0, 0}, tb::Shape{3, 3, 10, 8})) == 1);  // all input channels: 90 rows
  CHECK(series(w.slice(tb::Shape{0, 0, 0, 0}, tb::Shape{1, 1, 4, 8})) == 1);  // what row_series takes
  CHECK(series(w) == -1);                                                       // one run
  CHECK(series(w.slice(tb::Shape{0, 0, 0, 0}, tb::Shape{3, 3, 10, 8}).reverse(0)) == -1);  // descending taps
  CHECK(series(w.slice(tb::Shape{0, 0, 0, 0}, tb::Shape{1, 3, 2, 8}).broadcast({2, 1, 3, 2, 8})) == -1);  // repeats
  CHECK(series(w.slice(tb::Shape{0, 0, 0, 0}, tb::Shape{3, 3, 10, 1})) == -1);  // single elements at a stride
  CHECK(series(tb::concat({w.slice(0, 1), w.slice(2, 3)}, 0).slice(tb::Shape{0, 0, 0, 0}, tb::Shape{2, 3, 10, 8})) == -1);
}
