// Test helpers: element lists of tensor views, and a small set of test vertices.
#pragma once

#include <tilebsp/tilebsp.hpp>

#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace tbt {
namespace tb = tilebsp;

/// The whole of a text file ("" when it cannot be read).
inline std::string read_text(std::string const& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// a [m, k] and b [k, n] (named `a_name` and "b"), mapped linearly, and their product by ops::matmul named `name`.
inline tb::Tensor mapped_product(tb::Graph& g, tb::Sequence& prog, std::size_t m, std::size_t k, std::size_t n,
                                 std::string const& name, std::string const& a_name = "a") {
  auto a = g.add_variable<float>({m, k}, a_name), b = g.add_variable<float>({k, n}, "b");
  tb::map_linearly(g, a);
  tb::map_linearly(g, b);
  return tb::ops::matmul(g, prog, a, b, {}, name);
}

/// (variable, element) of each element of `t`, row-major.
inline std::vector<std::pair<std::uint32_t, std::int64_t>> elements(tb::Tensor const& t) {
  std::vector<std::pair<std::uint32_t, std::int64_t>> r;
  t.for_each_run([&](std::uint32_t v, std::int64_t s, std::int64_t st, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) r.emplace_back(v, s + i * st);
  });
  return r;
}
/// Element indices of `t` when it views a single variable.
inline std::vector<std::int64_t> indices(tb::Tensor const& t) {
  std::vector<std::int64_t> r;
  for (auto const& [v, i] : elements(t)) r.push_back(i);
  return r;
}

/// n values in [-1, 1) from a fixed seed, or only -1 and +1 (`ones`: sums of products are then exact).
template <class T>
std::vector<T> values(std::size_t n, bool ones, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<T> v(n);
  for (auto& x : v) x = T(ones ? (d(rng) < 0 ? -1.0f : 1.0f) : d(rng));
  return v;
}

/// out = a + b elementwise.
struct Add {
  BOOST_HANA_DEFINE_STRUCT(Add, (tb::input<float>, a), (tb::input<float>, b), (tb::output<float>, out));
  void compute() {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = a[i] + b[i];
  }
};
/// y = k * x + y.
struct Axpy {
  BOOST_HANA_DEFINE_STRUCT(Axpy, (tb::input<float>, x), (tb::inout<float>, y), (tb::param<float>, k));
  void compute() {
    for (std::size_t i = 0; i < y.size(); ++i) y[i] += k * x[i];
  }
};
/// out[i] = in[i] (any layout).
struct Copy {
  BOOST_HANA_DEFINE_STRUCT(Copy, (tb::input<float>, in), (tb::output<float>, out));
  void compute() {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = in[i];
  }
};
/// Decrements an i32 counter and sets flag = (counter > 0).
struct CountDown {
  BOOST_HANA_DEFINE_STRUCT(CountDown, (tb::inout<std::int32_t>, n), (tb::output<bool>, more));
  void compute() {
    n[0] -= 1;
    more[0] = n[0] > 0;
  }
};
}  // namespace tbt
