// Test harness for ops::map: builds operands of every tested length spread over many tiles, runs an expression
// and compares each element with a scalar reference.
#pragma once

#include <tilebsp/tilebsp.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace tbt {
namespace tb = tilebsp;

/// x computed in float like the kernels, rounded to T (a float reference of the map tables).
template <class T>
double rounded(float x) {
  return static_cast<double>(static_cast<float>(T(x)));
}

/// The lengths the issue asks for: 0, 1, 15, 16, 17, 1000 and 2^20 + 3.
inline std::vector<std::size_t> const& lengths() {
  static std::vector<std::size_t> const l{0, 1, 15, 16, 17, 1000, (1u << 20) + 3};
  return l;
}

template <class T>
std::vector<T> random_values(std::size_t n, double lo, double hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(n);
  if constexpr (std::is_same_v<T, bool>) {
    std::bernoulli_distribution d(0.5);
    for (std::size_t i = 0; i < n; ++i) v[i] = d(rng);
  } else if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<long long> d(static_cast<long long>(lo), static_cast<long long>(hi));
    for (auto& x : v) x = static_cast<T>(d(rng));
  } else {
    std::uniform_real_distribution<double> d(lo, hi);
    for (auto& x : v) x = T(static_cast<float>(d(rng)));
  }
  return v;
}

/// Close enough: exact for integers and bools; for floats within rel/abs tolerance (both NaN also matches).
template <class T>
bool close(T got, double want, double rel, double abs) {
  if constexpr (std::is_same_v<T, bool> || std::is_integral_v<T>) {
    return static_cast<double>(got) == want;
  } else {
    double const g = static_cast<double>(static_cast<float>(got));
    if (std::isnan(want)) return std::isnan(g);
    if (std::isinf(want)) return g == want;
    return std::abs(g - want) <= abs + rel * std::abs(want);
  }
}

/// Runs `e` over operands of types A (and B) for every length and checks element i against ref(a[i], b[i]).
/// `operands` must be the expression's (1 for an expression of _1 alone, else 2).
/// Operands are spread over 8 tiles; b may be broadcast (b_scalar: a single element on another tile).
template <class Out, class A, class B = A, class E, class Ref>
void check_map(std::string const& what, E const& e, Ref ref, double lo, double hi, double rel = 0, double abs = 0,
               int operands = 2, bool b_scalar = false) {
  INFO(what);
  tb::Graph g{tb::targets::tiny(8, 8 << 20)};
  tb::Sequence prog;
  struct Case {
    std::size_t n;
    tb::Tensor a, b, out;
    std::vector<A> av;
    std::vector<B> bv;
  };
  std::vector<Case> cases;
  unsigned seed = 1;
  for (std::size_t n : lengths()) {
    Case c;
    c.n = n;
    c.a = g.add_variable<A>({n}, "a");
    c.b = g.add_variable<B>({b_scalar ? std::size_t{1} : n}, "b");
    tb::map_linearly(g, c.a);
    if (b_scalar) g.set_tile_mapping(c.b, 7);
    else tb::map_linearly(g, c.b);
    c.av = random_values<A>(n, lo, hi, seed++);
    c.bv = random_values<B>(c.b.num_elements(), lo, hi, seed++);
    // One map call per expression, chosen at compile time: a unary expression called with a second operand would
    // also instantiate its kernels for each type that unused operand could have. The operand types are named, so
    // that only their kernels compile (not those of every type the expression accepts).
    REQUIRE(operands == (E::max_index <= 1 ? 1 : 2));
    if constexpr (E::max_index <= 1) c.out = tb::ops::map<A>(g, prog, e, c.a);
    else c.out = tb::ops::map<A, B>(g, prog, e, c.a, c.b);
    REQUIRE(c.out.element_type() == tb::element_type_v<Out>);
    cases.push_back(std::move(c));
  }
  tb::Engine engine{tb::compile(g, prog), {.host_threads = 2}};
  for (auto& c : cases) {
    if (c.n) engine.write(c.a, c.av);
    if (c.b.num_elements()) engine.write(c.b, c.bv);
  }
  engine.run();
  for (auto const& c : cases) {
    auto const got = engine.read<Out>(c.out);
    REQUIRE(got.size() == c.n);
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < c.n; ++i) {
      B const bi = c.bv[b_scalar ? 0 : i];
      double const want = ref(c.av[i], bi);
      if (!close<Out>(got[i], want, rel, abs) && bad++ == 0) first = i;
    }
    INFO("length " << c.n << ", first mismatch at " << first);
    CHECK(bad == 0);
  }
}

}  // namespace tbt
