// Gradient checks against central finite differences for every backward operator that training uses: matmul
// (input and weight gradients), bias gradients (reduce), ReLU, convolution (input and weight gradients), max
// pooling, and softmax cross-entropy; plus the loss's values, accuracy counts and errors.
#include "helpers.hpp"

#include <tilebsp/ops/loss.hpp>
#include <tilebsp/tilebsp.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

namespace tb = tilebsp;
using namespace tb::expr;

namespace {

using Fixed = std::vector<std::function<void(tb::Engine&)>>;  // writes of the other operands
/// Builds y = F(x) (registering any other operands and their values in `fixed`).
using Forward = std::function<tb::Tensor(tb::Graph&, tb::Sequence&, tb::Tensor const&, Fixed&)>;
/// Builds dL/dx from x, y and dy = dL/dy.
using Backward = std::function<tb::Tensor(tb::Graph&, tb::Sequence&, tb::Tensor const&, tb::Tensor const&,
                                          tb::Tensor const&)>;

/// Distinct values, spaced so that perturbations of +-eps never reorder them (max pooling has no ties).
std::vector<float> distinct(std::size_t n, unsigned seed) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  std::mt19937 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  for (auto& x : v) x = (x - static_cast<float>(n) / 2) * 0.05f;
  return v;
}
std::vector<float> uniform(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

/// Checks the backward operator against central differences of L = sum(dy * F(x)) at x = xv, for 1 and 3 threads.
void fd_check(tb::Shape const& xshape, std::vector<float> const& xv, Forward const& fwd, Backward const& bwd,
              double tol = 2e-2, float eps = 1e-2f) {
  tb::Graph g{tb::targets::tiny(4, 1 << 22)};
  auto x = g.add_variable<float>(xshape, "x");
  tb::map_linearly(g, x);
  Fixed fixed;
  tb::Sequence fprog, bprog;
  tb::Tensor const y = fwd(g, fprog, x, fixed);
  auto dy = g.add_variable<float>(y.shape(), "dy");
  tb::map_linearly(g, dy);
  tb::Tensor const dx = bwd(g, bprog, x, y, dy);
  REQUIRE(dx.shape() == x.shape());
  auto const exe = tb::compile(g, fprog, bprog);
  auto const dyv = uniform(dy.num_elements(), 7);
  std::vector<float> first;
  for (std::size_t threads : {1u, 3u}) {
    tb::Engine e{exe, {.host_threads = threads}};
    for (auto const& write : fixed) write(e);
    e.write(dy, dyv);
    auto const loss = [&](std::vector<float> const& at) {
      e.write(x, at);
      e.run(0);
      auto const yv = e.read<float>(y);
      double s = 0;
      for (std::size_t i = 0; i < yv.size(); ++i) s += static_cast<double>(dyv[i]) * yv[i];
      return s;
    };
    e.write(x, xv);
    e.run(0);
    e.run(1);
    auto const an = e.read<float>(dx);
    if (first.empty()) first = an;
    CHECK(an == first);  // the same bits whatever the number of threads
    if (threads != 1) continue;
    std::vector<float> p = xv;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < xv.size(); ++i) {
      p[i] = xv[i] + eps;
      double const up = loss(p);
      p[i] = xv[i] - eps;
      double const down = loss(p);
      p[i] = xv[i];
      double const fd = (up - down) / (2.0 * static_cast<double>(eps));
      if (std::abs(fd - an[i]) > tol * std::max(1.0, std::abs(fd))) {
        if (bad++ < 5) INFO("element " << i << ": finite difference " << fd << ", backward " << an[i]);
        CHECK(std::abs(fd - an[i]) <= tol * std::max(1.0, std::abs(fd)));
      }
    }
    CHECK(bad == 0);
  }
}

tb::Tensor fixed_var(tb::Graph& g, Fixed& fixed, tb::Shape const& s, char const* name, unsigned seed) {
  auto t = g.add_variable<float>(s, name);
  tb::map_linearly(g, t);
  fixed.push_back([t, v = uniform(t.num_elements(), seed)](tb::Engine& e) { e.write(t, v); });
  return t;
}

/// y = F(a, w) with a pass per operand's gradient: checks each against finite differences with the other fixed
/// (seeds: a, then w, from `seed`).
using Binary = std::function<tb::Tensor(tb::Graph&, tb::Sequence&, tb::Tensor const&, tb::Tensor const&)>;
void check_both_operands(tb::Shape const& a_shape, tb::Shape const& w_shape, unsigned seed, Binary const& fwd,
                         Binary const& grad_a /* (dy, w) */, Binary const& grad_w /* (a, dy) */) {
  tb::Tensor other;
  SUBCASE("with respect to the input") {
    fd_check(a_shape, uniform(tb::product(a_shape), seed),
             [&](tb::Graph& g, tb::Sequence& p, tb::Tensor const& a, Fixed& f) {
               other = fixed_var(g, f, w_shape, "w", seed + 1);
               return fwd(g, p, a, other);
             },
             [&](tb::Graph& g, tb::Sequence& p, tb::Tensor const&, tb::Tensor const&, tb::Tensor const& dy) {
               return grad_a(g, p, dy, other);
             });
  }
  SUBCASE("with respect to the weights") {
    fd_check(w_shape, uniform(tb::product(w_shape), seed + 2),
             [&](tb::Graph& g, tb::Sequence& p, tb::Tensor const& w, Fixed& f) {
               other = fixed_var(g, f, a_shape, "a", seed + 3);
               return fwd(g, p, other, w);
             },
             [&](tb::Graph& g, tb::Sequence& p, tb::Tensor const&, tb::Tensor const&, tb::Tensor const& dy) {
               return grad_w(g, p, other, dy);
             });
  }
}

}  // namespace

TEST_CASE("gradients: matmul, with respect to either operand") {
  check_both_operands(
      {5, 7}, {7, 3}, 1,
      [](tb::Graph& g, tb::Sequence& p, tb::Tensor const& a, tb::Tensor const& w) { return tb::ops::matmul(g, p, a, w); },
      [](tb::Graph& g, tb::Sequence& p, tb::Tensor const& dy, tb::Tensor const& w) {  // dX = dY W^T
        return tb::ops::matmul(g, p, dy, w.transpose());
      },
      [](tb::Graph& g, tb::Sequence& p, tb::Tensor const& a, tb::Tensor const& dy) {  // dW = X^T dY
        return tb::ops::matmul(g, p, a.transpose(), dy);
      });
}

TEST_CASE("gradients: bias (a reduction over the batch) and ReLU") {
  SUBCASE("bias: db = sum over rows of dY") {
    tb::Tensor in;
    fd_check({6}, uniform(6, 5),
             [&](tb::Graph& g, tb::Sequence& p, tb::Tensor const& b, Fixed& f) {
               in = fixed_var(g, f, {4, 6}, "in", 6);
               return tb::ops::map<float, float>(g, p, _1 + _2, in, b);
             },
             [&](tb::Graph& g, tb::Sequence& p, tb::Tensor const&, tb::Tensor const&, tb::Tensor const& dy) {
               return tb::ops::reduce(g, p, dy, {0}, tb::ops::ReduceOp::add);
             });
  }
  SUBCASE("relu: dX = dY where X > 0") {
    auto xs = distinct(40, 8);
    for (auto& v : xs) v += 0.025f;  // no element within eps of 0, where ReLU has no derivative
    fd_check({40}, xs,
             [&](tb::Graph& g, tb::Sequence& p, tb::Tensor const& x, Fixed&) { return tb::ops::relu(g, p, x); },
             [&](tb::Graph& g, tb::Sequence& p, tb::Tensor const& x, tb::Tensor const&, tb::Tensor const& dy) {
               return tb::ops::map<float, float>(g, p, select(_1 > 0.0f, _2, 0.0f), x, dy);
             });
  }
}

TEST_CASE("gradients: convolution, with respect to the input and the weights") {
  tb::ConvParams params;
  params.batch = 2;
  params.input_field = {5, 6};
  params.kernel_shape = {3, 3};
  params.input_channels = 4;
  params.output_channels = 6;
  params.groups = 2;
  params.padding_lower = params.padding_upper = {1, 1};
  params.stride = {1, 2};
  check_both_operands(
      params.input_shape(), params.weights_shape(), 9,
      [&](tb::Graph& g, tb::Sequence& p, tb::Tensor const& a, tb::Tensor const& w) {
        return tb::ops::conv(g, p, a, w, params);
      },
      [&](tb::Graph& g, tb::Sequence& p, tb::Tensor const& dy, tb::Tensor const& w) {
        return tb::ops::conv_backward_input(g, p, dy, w, params);
      },
      [&](tb::Graph& g, tb::Sequence& p, tb::Tensor const& a, tb::Tensor const& dy) {
        return tb::ops::conv_weight_gradients(g, p, dy, a, params);
      });
}

TEST_CASE("gradients: max pooling, to the first maximum of each window") {
  for (auto const& [shape, params] :
       std::vector<std::pair<tb::Shape, tb::PoolParams>>{{{2, 6, 6, 3}, {{2, 2}, {2, 2}}},
                                                         {{2, 7, 5, 4}, {{3, 3}, {2, 2}, {1, 1}, {1, 1}}},
                                                         {{1, 9, 2}, {{3}, {1}}}}) {
    INFO("input " << tb::to_string(shape));
    fd_check(shape, distinct(tb::product(shape), 13),
             [&](tb::Graph& g, tb::Sequence& p, tb::Tensor const& x, Fixed&) { return tb::ops::max_pool(g, p, x, params); },
             [&](tb::Graph& g, tb::Sequence& p, tb::Tensor const& x, tb::Tensor const& y, tb::Tensor const& dy) {
               return tb::ops::max_pool_backward(g, p, x, y, dy, params);
             });
  }
}

TEST_CASE("max_pool_backward: ties go to the first maximum; errors") {
  tb::Graph g{tb::targets::tiny(3, 1 << 20)};
  auto x = g.add_variable<float>({1, 2, 2, 1}, "x");
  tb::map_linearly(g, x);
  tb::Sequence prog;
  tb::PoolParams const pp{{2, 2}, {2, 2}};
  auto y = tb::ops::max_pool(g, prog, x, pp);
  auto dy = g.add_variable<float>({1, 1, 1, 1}, "dy");
  tb::map_linearly(g, dy);
  auto dx = tb::ops::max_pool_backward(g, prog, x, y, dy, pp);
  tb::Engine e{tb::compile(g, prog)};
  e.write(x, std::vector<float>{1, 3, 3, 2});
  e.write(dy, std::vector<float>{5});
  e.run();
  CHECK(e.read<float>(dx) == std::vector<float>{0, 5, 0, 0});

  auto bad = g.add_variable<float>({1, 2, 1, 1}, "bad");
  auto h = g.add_variable<tb::half>({1, 1, 1, 1}, "h");
  auto i = g.add_variable<std::int32_t>({1, 2, 2, 1}, "i");
  CHECK_THROWS_WITH_AS(tb::ops::max_pool_backward(g, prog, x, bad, dy, pp),
                       "max_pool_backward: the pooled output is [1, 2, 1, 1] but pooling [1, 2, 2, 1] gives [1, 1, 1, 1]",
                       tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::max_pool_backward(g, prog, x, y, h, pp),
                       "max_pool_backward: the output gradient is f16 but the input is f32", tb::type_error);
  CHECK_THROWS_WITH_AS(tb::ops::max_pool_backward(g, prog, i, y, dy, pp),
                       "max_pool_backward: input must be f32 or f16, not i32", tb::type_error);
  CHECK_THROWS_WITH_AS(tb::ops::max_pool_backward(g, prog, x, y, dy, tb::PoolParams{{2}}),
                       "max_pool_backward: kernel_shape has 1 dimensions but the input field has 2", tb::shape_error);
}

TEST_CASE("softmax_cross_entropy: loss, accuracy, gradient and errors") {
  std::size_t const B = 5, K = 4;
  std::vector<std::int32_t> const labels{0, 3, 2, 1, 3};
  SUBCASE("gradient of the summed loss") {
    tb::Tensor l, grad;
    fd_check({B, K}, uniform(B * K, 14),
             [&](tb::Graph& g, tb::Sequence& p, tb::Tensor const& x, Fixed& f) {
               l = g.add_variable<std::int32_t>({B}, "labels");
               tb::map_linearly(g, l);
               f.push_back([l = l, &labels](tb::Engine& e) { e.write(l, labels); });
               auto const r = tb::ops::softmax_cross_entropy(g, p, x, l, 1.0f);
               grad = r.grad;
               return r.loss;
             },
             [&](tb::Graph& g, tb::Sequence& p, tb::Tensor const&, tb::Tensor const&, tb::Tensor const& dy) {
               // dL/dx = sum_b dy_b * dloss_b/dx: the forward program's gradient rows scaled by dy.
               return tb::ops::map<float, float>(g, p, _1 * _2, grad, dy.reshape({B, 1}));
             });
  }
  SUBCASE("values, accuracy and the scaled gradient against a double reference") {
    tb::Graph g{tb::targets::tiny(3, 1 << 20)};
    auto x = g.add_variable<float>({B, K}, "x");
    auto l = g.add_variable<std::int32_t>({B}, "labels");
    tb::map_linearly(g, x);
    tb::map_linearly(g, l);
    tb::Sequence prog;
    auto const r = tb::ops::softmax_cross_entropy(g, prog, x, l, 0.5f);
    tb::Engine e{tb::compile(g, prog)};
    auto const xv = uniform(B * K, 15);
    e.write(x, xv);
    e.write(l, labels);
    e.run();
    auto const loss = e.read<float>(r.loss), grad = e.read<float>(r.grad), correct = e.read<float>(r.correct);
    double total = 0;
    float right = 0;
    for (std::size_t b = 0; b < B; ++b) {
      double m = -1e30, s = 0;
      std::size_t best = 0;
      for (std::size_t k = 0; k < K; ++k)
        if (xv[b * K + k] > m) m = xv[b * K + k], best = k;
      for (std::size_t k = 0; k < K; ++k) s += std::exp(xv[b * K + k] - m);
      double const want = m + std::log(s) - xv[b * K + static_cast<std::size_t>(labels[b])];
      CHECK(loss[b] == doctest::Approx(want).epsilon(1e-5));
      total += want;
      CHECK(correct[b] == (best == static_cast<std::size_t>(labels[b]) ? 1.0f : 0.0f));
      right += correct[b];
      for (std::size_t k = 0; k < K; ++k) {
        double const p = std::exp(xv[b * K + k] - m) / s - (static_cast<std::int32_t>(k) == labels[b] ? 1.0 : 0.0);
        CHECK(grad[b * K + k] == doctest::Approx(0.5 * p).epsilon(1e-5));
      }
    }
    CHECK(e.read<float>(r.total_loss)[0] == doctest::Approx(total).epsilon(1e-5));
    CHECK(e.read<float>(r.total_correct)[0] == right);
    // A label outside [0, classes) gives NaN for its example, never a read out of bounds.
    e.write(l, std::vector<std::int32_t>{0, 3, 4, 1, -1});
    e.run();
    auto const l2 = e.read<float>(r.loss);
    CHECK(std::isnan(l2[2]));
    CHECK(std::isnan(l2[4]));
    CHECK(!std::isnan(l2[0]));
  }
  SUBCASE("errors") {
    tb::Graph g{tb::targets::tiny(2, 1 << 20)};
    auto x = g.add_variable<float>({B, K}, "x");
    auto l = g.add_variable<std::int32_t>({B}, "labels");
    auto lf = g.add_variable<float>({B}, "labels_f");
    auto l3 = g.add_variable<std::int32_t>({3}, "labels3");
    auto v = g.add_variable<float>({B}, "v");
    tb::Sequence prog;
    CHECK_THROWS_WITH_AS(tb::ops::softmax_cross_entropy(g, prog, v, l, 1.0f),
                         "softmax_cross_entropy: logits must be [batch, classes] with at least one class, not [5]",
                         tb::shape_error);
    CHECK_THROWS_WITH_AS(tb::ops::softmax_cross_entropy(g, prog, x, l3, 1.0f),
                         "softmax_cross_entropy: labels must be [5] for logits [5, 4], not [3]", tb::shape_error);
    CHECK_THROWS_WITH_AS(tb::ops::softmax_cross_entropy(g, prog, x, lf, 1.0f),
                         "softmax_cross_entropy: labels must be i32, not f32", tb::type_error);
  }
}

TEST_CASE("max_pool_backward: wide channel blocks with ties and NaN match a scalar reference, f32 and f16") {
  // 80 channels: whole SIMD vectors, a tail, and two blocks of the backward vertex; values drawn from {0..3} so
  // that most windows tie, and a few NaNs, which propagate and take the gradient where they first appear.
  tb::Shape const shape{2, 5, 6, 80};
  tb::PoolParams const pp{{3, 3}, {2, 2}, {1, 1}, {1, 1}};
  std::size_t const H = 5, W = 6, C = 80, OH = 3, OW = 3;
  std::mt19937 rng(21);
  std::vector<float> xv(tb::product(shape)), dyv(2 * OH * OW * C);
  for (auto& v : xv) v = static_cast<float>(rng() % 4);
  for (std::size_t i = 0; i < xv.size(); i += 97) xv[i] = std::nanf("");
  for (auto& v : dyv) v = static_cast<float>(rng() % 8) - 3.0f;
  // Reference: each output's gradient to the first source (window order) equal to its maximum, or its first NaN.
  std::vector<float> want(xv.size(), 0.0f);
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t oh = 0; oh < OH; ++oh)
      for (std::size_t ow = 0; ow < OW; ++ow)
        for (std::size_t c = 0; c < C; ++c) {
          std::vector<std::size_t> window;
          for (std::size_t kh = 0; kh < 3; ++kh)
            for (std::size_t kw = 0; kw < 3; ++kw) {
              std::ptrdiff_t const h = static_cast<std::ptrdiff_t>(oh * 2 + kh) - 1, w = static_cast<std::ptrdiff_t>(ow * 2 + kw) - 1;
              if (h >= 0 && w >= 0 && h < static_cast<std::ptrdiff_t>(H) && w < static_cast<std::ptrdiff_t>(W))
                window.push_back(((n * H + static_cast<std::size_t>(h)) * W + static_cast<std::size_t>(w)) * C + c);
            }
          auto const nan = std::find_if(window.begin(), window.end(), [&](std::size_t i) { return std::isnan(xv[i]); });
          std::size_t at = 0;
          if (nan != window.end()) at = *nan;
          else at = *std::max_element(window.begin(), window.end(), [&](std::size_t a, std::size_t b) { return xv[a] < xv[b]; });
          want[at] += dyv[((n * OH + oh) * OW + ow) * C + c];
        }
  for (auto type : {tb::ElementType::f32, tb::ElementType::f16}) {
    INFO(tb::name_of(type));
    tb::Graph g{tb::targets::tiny(3, 1 << 22)};
    auto x = g.add_variable(type, shape, "x");
    auto dy = g.add_variable(type, {2, OH, OW, C}, "dy");
    tb::map_linearly(g, x);
    tb::map_linearly(g, dy);
    tb::Sequence prog;
    auto y = tb::ops::max_pool(g, prog, x, pp);
    auto dx = tb::ops::max_pool_backward(g, prog, x, y, dy, pp);
    auto dx32 = tb::ops::cast(g, prog, dx, tb::ElementType::f32);
    for (std::size_t threads : {1u, 2u}) {
      tb::Engine e{tb::compile(g, prog), {.host_threads = threads}};
      if (type == tb::ElementType::f32) e.write(x, xv), e.write(dy, dyv);
      else e.write(x, std::vector<tb::half>(xv.begin(), xv.end())), e.write(dy, std::vector<tb::half>(dyv.begin(), dyv.end()));
      e.run();
      CHECK(e.read<float>(dx32) == want);
    }
  }
}
