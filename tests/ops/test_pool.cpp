// ops::max_pool against a direct reference: 1-D to 3-D, strides, padding, channel chunks, f16, NaN, errors.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace tb = tilebsp;

namespace {

/// An input shape and its pooling window.
struct PoolCase {
  tb::Shape shape;
  tb::PoolParams p;
};

/// Max over each window of in [N, field..., C] (rank-3 field internally, extent-1 dimensions first).
std::vector<float> pool_ref(std::vector<float> const& in, tb::Shape const& shape, tb::PoolParams const& p,
                            tb::Shape& out_shape) {
  std::size_t const r = shape.size() - 2, N = shape[0], C = shape.back();
  std::int64_t I[3] = {1, 1, 1}, O[3] = {1, 1, 1}, K[3] = {1, 1, 1}, S[3] = {1, 1, 1}, P[3] = {0, 0, 0};
  out_shape = {N};
  for (std::size_t d = 0; d < r; ++d) {
    std::size_t const e = 3 - r + d;
    I[e] = static_cast<std::int64_t>(shape[d + 1]);
    K[e] = p.kernel_shape[d];
    S[e] = p.stride.empty() ? 1 : p.stride[d];
    P[e] = p.padding_lower.empty() ? 0 : p.padding_lower[d];
    std::int64_t const pu = p.padding_upper.empty() ? 0 : p.padding_upper[d];
    O[e] = (I[e] + P[e] + pu - K[e]) / S[e] + 1;
    out_shape.push_back(static_cast<std::size_t>(O[e]));
  }
  out_shape.push_back(C);
  std::vector<float> out;
  for (std::size_t n = 0; n < N; ++n)
    for (std::int64_t a = 0; a < O[0]; ++a)
      for (std::int64_t b = 0; b < O[1]; ++b)
        for (std::int64_t c = 0; c < O[2]; ++c)
          for (std::size_t ch = 0; ch < C; ++ch) {
            float m = -std::numeric_limits<float>::infinity();
            bool nan = false;
            for (std::int64_t x = a * S[0] - P[0]; x < a * S[0] - P[0] + K[0]; ++x)
              for (std::int64_t y = b * S[1] - P[1]; y < b * S[1] - P[1] + K[1]; ++y)
                for (std::int64_t z = c * S[2] - P[2]; z < c * S[2] - P[2] + K[2]; ++z) {
                  if (x < 0 || y < 0 || z < 0 || x >= I[0] || y >= I[1] || z >= I[2]) continue;
                  float const v = in[static_cast<std::size_t>((((static_cast<std::int64_t>(n) * I[0] + x) * I[1] + y) * I[2] + z) *
                                                              static_cast<std::int64_t>(C)) + ch];
                  nan = nan || std::isnan(v);
                  m = std::max(m, v);
                }
            out.push_back(nan ? std::numeric_limits<float>::quiet_NaN() : m);
          }
  return out;
}

template <class T>
std::vector<float> pool_tiles(tb::Shape const& shape, tb::PoolParams const& p, std::vector<float> const& in,
                              std::size_t tiles, std::size_t threads) {
  tb::Graph g{tb::targets::tiny(tiles, 1 << 20)};
  auto x = g.add_variable<T>(shape, "x");
  tb::map_linearly(g, x);
  tb::Sequence prog;
  auto y = tb::ops::max_pool(g, prog, x, p);
  tb::Engine e{tb::compile(g, prog), {.host_threads = threads}};
  e.write(x, std::vector<T>(in.begin(), in.end()));
  e.run();
  std::vector<float> r;
  for (T v : e.read<T>(y)) r.push_back(static_cast<float>(v));
  return r;
}

}  // namespace

TEST_CASE("max_pool matches a direct reference in 1 to 3 dimensions") {
  std::vector<PoolCase> const cases = {
      {{2, 9, 9, 5}, {.kernel_shape = {3, 3}, .stride = {2, 2}, .padding_lower = {1, 1}, .padding_upper = {1, 1}}},
      {{1, 8, 7, 40}, {.kernel_shape = {2, 2}, .stride = {2, 2}}},
      {{3, 10, 4}, {.kernel_shape = {4}, .stride = {3}, .padding_lower = {2}, .padding_upper = {0}}},
      {{1, 4, 5, 6, 3}, {.kernel_shape = {2, 3, 2}, .stride = {1, 2, 2}, .padding_lower = {0, 1, 1}}},
      {{1, 2, 2, 33}, {.kernel_shape = {2, 2}}},  // one output row: channels split over tiles
      // Channel blocks of four vectors and a tail (the maxima kept in registers), NaNs inside them
      {{2, 9, 9, 70}, {.kernel_shape = {3, 3}, .stride = {2, 2}, .padding_lower = {1, 1}, .padding_upper = {1, 1}}},
      {{1, 9, 9, 20}, {.kernel_shape = {9, 8}}},  // 72 sources a window: through memory
  };
  for (auto const& c : cases) {
    std::string const label = tb::to_string(c.shape);
    INFO(label);
    auto in = tbt::values<float>(tb::product(c.shape), false, 11);
    in[3] = std::numeric_limits<float>::quiet_NaN();
    for (std::size_t i = 1000; i < in.size(); i += 2113) in[i] = std::numeric_limits<float>::quiet_NaN();
    tb::Shape out_shape;
    auto const want = pool_ref(in, c.shape, c.p, out_shape);
    for (std::size_t tiles : {1u, 7u, 64u}) {
      auto const got = pool_tiles<float>(c.shape, c.p, in, tiles, tiles == 7 ? 3 : 2);
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        CHECK((got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))));
    }
    std::vector<float> inh;
    for (float v : in) inh.push_back(static_cast<float>(tb::half(v)));
    auto const wanth = pool_ref(inh, c.shape, c.p, out_shape);
    auto const goth = pool_tiles<tb::half>(c.shape, c.p, inh, 16, 2);
    for (std::size_t i = 0; i < goth.size(); ++i)
      CHECK((goth[i] == wanth[i] || (std::isnan(goth[i]) && std::isnan(wanth[i]))));
  }
}

TEST_CASE("max_pool errors") {
  tb::Graph g{tb::targets::tiny(4)};
  auto x = g.add_variable<float>({1, 6, 6, 2}, "x"), i = g.add_variable<std::int32_t>({1, 6, 6, 2}, "i");
  auto flat = g.add_variable<float>({6, 2}, "flat");
  tb::Sequence prog;
  CHECK_THROWS_WITH_AS(tb::ops::max_pool(g, prog, x, {.kernel_shape = {3, 3}, .padding_lower = {3, 0}}),
                       "max_pool: padding[0] must be in [0, kernel) = [0, 3), got 3 and 0", tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::max_pool(g, prog, x, {.kernel_shape = {3}}),
                       "max_pool: kernel_shape has 1 dimensions but the input field has 2", tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::max_pool(g, prog, x, {.kernel_shape = {3, 0}}),
                       "max_pool: kernel_shape[1] must be positive, got 0", tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::max_pool(g, prog, x, {.kernel_shape = {3, 3}, .stride = {1, 0}}),
                       "max_pool: stride[1] must be positive, got 0", tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::max_pool(g, prog, x, {.kernel_shape = {7, 2}}),
                       "max_pool: kernel_shape[0] = 7 is larger than the padded input (6)", tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::max_pool(g, prog, flat, {.kernel_shape = {}}),
                       "max_pool: input must be [N, field..., C] with a field of 1 to 3 dimensions, got [6, 2]",
                       tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::max_pool(g, prog, i, {.kernel_shape = {2, 2}}), "max_pool: input must be f32 or f16, not i32",
                       tb::type_error);
}

namespace {

/// max_pool and max_pool_backward run once; the bytes of the pooled output and of the input gradient.
template <class T>
std::pair<std::vector<T>, std::vector<T>> pool_both(tb::Shape const& shape, tb::PoolParams const& p, std::vector<float> const& x,
                                                    std::vector<float> const& dy, bool host, std::size_t threads,
                                                    bool shuffled) {
  tb::Graph g{tb::targets::tiny(13, 1 << 20)};
  // `shuffled`: the input and the output gradient as views of channels-first variables, which the host kernels
  // decline (no single strided view once reshaped to rank 6): the vertices run.
  auto const tensor = [&](tb::Shape const& shape_, char const* name) {
    if (!shuffled) {
      auto v = g.add_variable<T>(shape_, name);
      tb::map_linearly(g, v);
      return v;
    }
    tb::Shape s{shape_.back()};
    for (std::size_t d = 0; d + 1 < shape_.size(); ++d) s.push_back(shape_[d]);
    auto v = g.add_variable<T>(s, name);
    tb::map_linearly(g, v);
    std::vector<std::size_t> perm;
    for (std::size_t d = 1; d < s.size(); ++d) perm.push_back(d);
    perm.push_back(0);
    return v.dimshuffle(perm);
  };
  auto const xin = tensor(shape, "x");
  tb::Sequence prog;
  auto y = tb::ops::max_pool(g, prog, xin, p);
  auto const dy_t = tensor(y.shape(), "dy");
  auto dx = tb::ops::max_pool_backward(g, prog, xin, y, dy_t, p);
  tb::Engine e{tb::compile(g, prog), {.host_threads = threads, .host_kernels = host}};
  e.write(xin, std::vector<T>(x.begin(), x.end()));
  e.write(dy_t, std::vector<T>(dy.begin(), dy.end()));
  e.run();
  return {e.read<T>(y), e.read<T>(dx)};
}

template <class T>
bool same_bits(std::vector<T> const& a, std::vector<T> const& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace

TEST_CASE("max_pool host kernels write the vertices' bits, for any number of threads") {
  std::vector<PoolCase> const cases = {
      {{2, 9, 9, 70}, {.kernel_shape = {3, 3}, .stride = {2, 2}, .padding_lower = {1, 1}, .padding_upper = {1, 1}}},
      {{4, 8, 8, 16}, {.kernel_shape = {2, 2}, .stride = {2, 2}}},
      {{3, 10, 4}, {.kernel_shape = {4}, .stride = {3}, .padding_lower = {2}, .padding_upper = {0}}},
      {{1, 4, 5, 6, 3}, {.kernel_shape = {2, 3, 2}, .stride = {1, 2, 2}, .padding_lower = {0, 1, 1}}},
  };
  for (auto const& c : cases) {
    for (bool shuffled : {false, true}) {
      INFO(tb::to_string(c.shape) << (shuffled ? ", input and output gradient channels-first" : ""));
      // +-1 inputs: windows full of ties, which go to the first maximum; and NaNs, which propagate.
      auto x = tbt::values<float>(tb::product(c.shape), true, 5);
      x[1] = x[x.size() / 2] = std::numeric_limits<float>::quiet_NaN();
      tb::Shape out_shape;
      std::size_t const pooled = pool_ref(x, c.shape, c.p, out_shape).size();
      auto const dy = tbt::values<float>(pooled, false, 6);
      auto const vf = pool_both<float>(c.shape, c.p, x, dy, false, 2, shuffled);
      auto const vh = pool_both<tb::half>(c.shape, c.p, x, dy, false, 2, shuffled);
      for (std::size_t threads : {1u, 3u}) {
        auto const hf = pool_both<float>(c.shape, c.p, x, dy, true, threads, shuffled);
        CHECK(same_bits(hf.first, vf.first));
        CHECK(same_bits(hf.second, vf.second));
        auto const hh = pool_both<tb::half>(c.shape, c.p, x, dy, true, threads, shuffled);
        CHECK(same_bits(hh.first, vh.first));
        CHECK(same_bits(hh.second, vh.second));
      }
      // And the values: the first maximum of each window takes the gradient (checked against the f32 reference
      // of the forward pass and the sum of all gradients, which every window hands on exactly once).
      auto const want = pool_ref(x, c.shape, c.p, out_shape);
      for (std::size_t i = 0; i < want.size(); ++i)
        CHECK((vf.first[i] == want[i] || (std::isnan(vf.first[i]) && std::isnan(want[i]))));
      double sum_dx = 0, sum_dy = 0;
      for (float v : vf.second) sum_dx += v;
      for (float v : dy) sum_dy += v;
      CHECK(sum_dx == doctest::Approx(sum_dy).epsilon(1e-5));
    }
  }
}

TEST_CASE("max_pool_backward spreads one image over tiles in bands of input rows") {
  // One image, 3x3/2 windows that overlap: the input gradient's rows go to several tiles, and the result is the
  // same as on one tile.
  tb::Shape const shape{1, 12, 10, 8};
  tb::PoolParams const p{.kernel_shape = {3, 3}, .stride = {2, 2}, .padding_lower = {1, 1}, .padding_upper = {1, 1}};
  auto const x = tbt::values<float>(tb::product(shape), true, 9);
  tb::Shape out_shape;
  auto const dy = tbt::values<float>(pool_ref(x, shape, p, out_shape).size(), false, 10);
  std::vector<float> results[2];
  for (std::size_t k = 0; k < 2; ++k) {
    std::size_t const tiles = k == 0 ? 1 : 6;
    tb::Graph g{tb::targets::tiny(tiles, 1 << 20)};
    auto xin = g.add_variable<float>(shape, "x");
    auto dyt = g.add_variable<float>(out_shape, "dy");
    tb::map_linearly(g, xin);
    tb::map_linearly(g, dyt);
    tb::Sequence prog;
    auto y = tb::ops::max_pool(g, prog, xin, p);
    auto dx = tb::ops::max_pool_backward(g, prog, xin, y, dyt, p);
    std::set<std::size_t> used;
    for (auto const& [tile, r] : g.tile_mapping(dx)) used.insert(tile);
    CHECK(used.size() == tiles);
    tb::Engine e{tb::compile(g, prog), {.host_threads = 2, .host_kernels = false}};
    e.write(xin, x);
    e.write(dyt, dy);
    e.run();
    results[k] = e.read<float>(dx);
  }
  CHECK(same_bits(results[0], results[1]));
}
