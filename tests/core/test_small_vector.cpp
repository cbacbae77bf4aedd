// SmallVector (a tensor's extents and strides): in place up to N values, on the heap past them, and tensors of
// rank above the in-place capacity behaving exactly like small ones.
#include "helpers.hpp"

#include <tilebsp/core/detail/small_vector.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace tb = tilebsp;
using SmallInts = tb::core::detail::SmallVector<std::int64_t, 4>;

namespace {
std::vector<std::int64_t> small_values(SmallInts const& v) { return {v.begin(), v.end()}; }
}  // namespace

TEST_CASE("SmallVector grows past its in-place capacity and keeps its values") {
  SmallInts v;
  CHECK(v.empty());
  CHECK(v.capacity() == 4);
  for (std::int64_t i = 0; i < 10; ++i) v.push_back(i);
  CHECK(v.size() == 10);
  CHECK(v.capacity() >= 10);
  CHECK(small_values(v) == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  v.insert_at(0, -1);
  v.insert_at(11, 10);
  v.insert_at(5, 99);
  CHECK(small_values(v) == std::vector<std::int64_t>{-1, 0, 1, 2, 3, 99, 4, 5, 6, 7, 8, 9, 10});
  v.erase_at(5);
  v.erase_at(0);
  CHECK(small_values(v) == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  v.assign(3, 7);
  CHECK(small_values(v) == std::vector<std::int64_t>{7, 7, 7});
  v.clear();
  CHECK(v.empty());
}

TEST_CASE("SmallVector copies a short list from the heap (grown, then cleared) into place") {
  SmallInts a;
  for (std::int64_t i = 0; i < 9; ++i) a.push_back(i);
  a.clear();
  a.push_back(7);
  a.push_back(8);
  SmallInts const copy = a;
  CHECK(copy == a);
  CHECK(copy.size() == 2);
  CHECK(copy.capacity() == 4);
}

TEST_CASE("SmallVector copies and moves, in place and on the heap") {
  for (std::size_t n : {2u, 4u, 5u, 9u}) {
    CAPTURE(n);
    SmallInts a;
    for (std::size_t i = 0; i < n; ++i) a.push_back(static_cast<std::int64_t>(i * i));
    SmallInts const copy = a;
    CHECK(copy == a);
    SmallInts assigned{42};
    assigned = a;
    CHECK(assigned == a);
    SmallInts moved = std::move(assigned);
    CHECK(moved == a);
    CHECK(assigned.empty());  // NOLINT(bugprone-use-after-move): a moved-from SmallVector is empty
    SmallInts target{1, 2, 3, 4, 5, 6};
    target = std::move(moved);
    CHECK(target == a);
    a.push_back(-1);  // the copies are independent
    CHECK(!(copy == a));
    CHECK(copy.size() == n);
  }
}

TEST_CASE("tensors of rank above the in-place capacity: views, runs and shapes") {
  tb::Graph g{tb::targets::tiny(2)};
  auto x = g.add_variable<float>({2, 3, 2, 2, 3, 2}, "x");  // rank 6: extents and strides on the heap
  g.set_tile_mapping(x, 0);
  CHECK(x.shape() == tb::Shape{2, 3, 2, 2, 3, 2});
  CHECK(x.num_elements() == 144);
  tb::Tensor const e = x.expand(2).expand(7);  // rank 8
  CHECK(e.shape() == tb::Shape{2, 3, 1, 2, 2, 3, 2, 1});
  CHECK(e.squeeze().shape() == x.shape());
  tb::Tensor const t = x.dimshuffle({5, 4, 3, 2, 1, 0});
  CHECK(t.shape() == tb::Shape{2, 3, 2, 2, 3, 2});
  CHECK(t.strides()[0] == 1);
  CHECK(t.strides()[5] == 72);
  // Element (i0..i5) of t is element (i5..i0) of x: check every one through the runs.
  std::vector<std::int64_t> seen;
  t.for_each_run([&](std::uint32_t, std::int64_t start, std::int64_t stride, std::int64_t count) {
    for (std::int64_t i = 0; i < count; ++i) seen.push_back(start + i * stride);
  });
  REQUIRE(seen.size() == 144);
  std::size_t k = 0;
  for (std::int64_t a = 0; a < 2; ++a)
    for (std::int64_t b = 0; b < 3; ++b)
      for (std::int64_t c = 0; c < 2; ++c)
        for (std::int64_t d = 0; d < 2; ++d)
          for (std::int64_t f = 0; f < 3; ++f)
            for (std::int64_t h = 0; h < 2; ++h, ++k)
              CHECK(seen[k] == ((((h * 3 + f) * 2 + d) * 2 + c) * 3 + b) * 2 + a);
  tb::Tensor const r = t.reshape({6, 24});  // not contiguous: a new element list
  CHECK(r.shape() == tb::Shape{6, 24});
  CHECK(r.runs().size() == t.runs().size());
  tb::Tensor const s = x.slice({1, 1, 0, 1, 0, 1}, {2, 3, 2, 2, 3, 2}).index(0);
  CHECK(s.shape() == tb::Shape{2, 2, 1, 3, 1});
  CHECK(s.reverse(1).shape() == s.shape());
}
