// ops::map with an expr::Code: the interpreter computes what the expression template computes, on the host kernels
// and on the vertices alike, for any number of threads and any length; its errors.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tb = tilebsp;
using namespace tb::expr;

namespace {

template <class T>
std::vector<T> sample(std::size_t n, unsigned seed, double lo = -3, double hi = 3) {
  std::vector<T> v(n);
  std::uint32_t s = seed * 2654435761u + 1;
  for (std::size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    double const u = lo + (hi - lo) * (s >> 8) / double(1u << 24);
    if constexpr (std::is_same_v<T, bool>) v[i] = (s >> 20) & 1u;
    else if constexpr (std::is_integral_v<T>) v[i] = static_cast<T>(std::lround(u * 10));
    else v[i] = T(static_cast<float>(u));
  }
  return v;
}

/// The same expression as a template and as a Code, over the same operands; every output read on `threads` threads
/// with host kernels on or off.
template <class Out, class... In, class E>
void same_as_template(E const& e, std::size_t n, double tolerance = 0) {
  tb::Graph g{tb::targets::tiny(5, 256 * 1024)};
  tb::Sequence prog;
  std::vector<tb::Tensor> ins;
  std::size_t k = 0;
  ((ins.push_back(g.add_variable<In>({n}, "in" + std::to_string(k++)))), ...);
  for (auto& t : ins) tb::map_linearly(g, t);
  auto const fused = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return tb::ops::map<In...>(g, prog, e, ins[I]...);
  }(std::index_sequence_for<In...>{});
  auto const code = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return tb::ops::map(g, prog, Code{e}, ins[I]...);
  }(std::index_sequence_for<In...>{});
  REQUIRE(code.element_type() == fused.element_type());
  auto const exe = tb::compile(g, prog);
  std::vector<Out> first;
  for (std::size_t threads : {1, 3})
    for (bool host : {true, false}) {
      tb::Engine eng{exe, {.host_threads = threads, .host_kernels = host}};
      unsigned seed = 1;
      ((eng.write(ins[seed - 1], sample<In>(n, seed)), ++seed), ...);
      eng.run();
      auto const want = eng.read<Out>(fused), got = eng.read<Out>(code);
      for (std::size_t i = 0; i < n; ++i) {
        double const w = static_cast<double>(static_cast<float>(Out(want[i]))), x = static_cast<double>(static_cast<float>(Out(got[i])));
        if (std::isnan(w)) {
          CHECK(std::isnan(x));
        } else if (tolerance == 0) {
          CHECK_MESSAGE(x == w, "element " << i << " of " << n);
        } else {
          CHECK_MESSAGE(std::abs(x - w) <= tolerance * (1 + std::abs(w)), "element " << i << " of " << n);
        }
      }
      if (first.empty()) first = got;
      else if constexpr (std::is_same_v<Out, bool>) CHECK(first == got);
      else CHECK(std::memcmp(first.data(), got.data(), n * sizeof(Out)) == 0);  // bitwise: any threads, tiles or host
    }
}

}  // namespace

TEST_CASE("an interpreted map computes what the expression template computes") {
  for (std::size_t n : {std::size_t{1}, std::size_t{15}, std::size_t{17}, std::size_t{255}, std::size_t{256},
                        std::size_t{1000}, std::size_t{4099}}) {
    CAPTURE(n);
    same_as_template<float, float>(relu(_1), n);
    same_as_template<float, float, float>(_1 + _2, n);
    same_as_template<float, float, float>(max(_1 / _2, -_1), n);
    same_as_template<float, float>(sigmoid(_1) * tanh(_1) - exp(-abs(_1)) + sqrt(abs(_1)) + log(abs(_1) + 1.0), n, 1e-6);
    same_as_template<float, float>(erf(_1 * 2.0) + erf(_1 * 0.25), n);
    same_as_template<float, float>(_1 * max(min(_1 * constant(1.0 / 6) + 0.5, 1.0), 0.0), n, 1e-6);
    same_as_template<tb::half, tb::half, tb::half>(_1 * _2 + _1, n, 1e-3);
    same_as_template<std::int32_t, std::int32_t, std::int32_t>(_1 * _2 - _1 / _2 + abs(_2), n);
    same_as_template<bool, float, float>(_1 < _2 || _1 == 0.5, n);
    same_as_template<bool, bool, bool>(!(_1 && _2), n);
    same_as_template<float, bool, float, float>(select(_1, _2, _3 * 2.0), n);
    same_as_template<std::int32_t, float>(cast<std::int32_t>(_1 * 10.0), n);
    same_as_template<float, std::int32_t>(cast<float>(_1) * 0.5, n);
    same_as_template<tb::half, float>(cast<tb::half>(_1), n);
    same_as_template<float, float, float, float, float, float>((_1 - _4) * _2 * rsqrt(_5 + 1e-5) + _3, n, 1e-6);
    same_as_template<float, tb::half, std::int32_t, bool, std::uint32_t>(
        select(_3, cast<float>(_1), cast<float>(_2)) + cast<float>(_4 > 7u), n);
    same_as_template<std::uint32_t, std::uint32_t, std::uint32_t>(max(_1, _2) - min(_1, _2), n);
  }
}

TEST_CASE("an interpreted map broadcasts scalars and rows, and keeps shared subexpressions once") {
  tb::Graph g{tb::targets::tiny(4)};
  tb::Sequence prog;
  auto x = g.add_variable<float>({3, 40}, "x"), row = g.add_variable<float>({40}, "row"), s = g.add_variable<float>({1}, "s");
  tb::map_linearly(g, x);
  tb::map_linearly(g, row);
  g.set_tile_mapping(s, 2);
  Code const c{(_1 + _2) * (_1 + _2) + _3};
  auto const y = tb::ops::map(g, prog, c, x, row, s);
  CHECK(y.shape() == tb::Shape{3, 40});
  tb::Engine e{tb::compile(g, prog), {.host_threads = 2}};
  auto const xv = sample<float>(120, 1), rv = sample<float>(40, 2);
  e.write(x, xv);
  e.write(row, rv);
  e.write(s, std::vector<float>{0.25f});
  e.run();
  auto const yv = e.read<float>(y);
  for (std::size_t i = 0; i < 120; ++i) {
    float const t = xv[i] + rv[i % 40];
    CHECK(yv[i] == t * t + 0.25f);
  }
  tb::expr::Types in{};
  in.fill(tb::expr::VT::any);
  in[0] = in[1] = in[2] = tb::expr::VT::f32;
  tb::expr::Lowering low(c, in);
  tb::expr::Program const p = low.lower(tb::expr::VT::f32);
  CHECK(p.operations() == 3);  // one add (shared), one multiply, one add
}

TEST_CASE("a Code composed at run time") {
  tb::Graph g{tb::targets::tiny(2)};
  tb::Sequence prog;
  auto a = g.add_variable<float>({50}, "a");
  tb::map_linearly(g, a);
  Code x = Code::operand(0);
  for (int i = 0; i < 4; ++i) x = Code::binary(Opcode::add, Code::binary(Opcode::mul, x, Code::constant(2)), Code::constant(1));
  auto const y = tb::ops::map(g, prog, Code::unary(Opcode::relu, x), a);
  tb::Engine e{tb::compile(g, prog)};
  auto const av = sample<float>(50, 3);
  e.write(a, av);
  e.run();
  auto const yv = e.read<float>(y);
  for (std::size_t i = 0; i < 50; ++i) {
    float v = av[i];
    for (int k = 0; k < 4; ++k) v = v * 2 + 1;
    CHECK(yv[i] == std::max(v, 0.0f));
  }
}

TEST_CASE("interpreted maps: errors") {
  tb::Graph g{tb::targets::tiny(2)};
  tb::Sequence prog;
  auto f = g.add_variable<float>({8}, "f");
  auto i = g.add_variable<std::int32_t>({8}, "i");
  auto u = g.add_variable<std::uint32_t>({8}, "u");
  auto b = g.add_variable<bool>({8}, "b");
  for (auto* t : {&f, &i, &u, &b}) tb::map_linearly(g, *t);
  CHECK_THROWS_WITH_AS(tb::ops::map(g, prog, Code{_1 + _2}, f, i),
                       "map: mixing element types without a cast: operator '+' has f32 and i32 operands (use cast<T>)",
                       tb::type_error);
  auto bytes = g.add_variable<std::uint8_t>({8}, "bytes");
  tb::map_linearly(g, bytes);
  CHECK_THROWS_WITH_AS(tb::ops::map(g, prog, Code{_1 + _2}, f, bytes),
                       "map: operand _2 is u8, which expressions do not support (use an i32 or u32 tensor)", tb::type_error);
  CHECK_THROWS_WITH_AS(tb::ops::map(g, prog, Code{_1 + _3}, f, f), "map: the expression uses _3 but only 2 tensors were given",
                       tb::index_error);
  CHECK_THROWS_WITH_AS(tb::ops::map(g, prog, Code{sqrt(_1)}, i), "map: operator 'sqrt' does not accept a i32 operand",
                       tb::type_error);
  CHECK_THROWS_WITH_AS(tb::ops::map(g, prog, Code{}, f), "map: the expression (an expr::Code) is empty", tb::option_error);
  Code big = Code::operand(0);
  for (int k = 0; k < 70; ++k) big = Code::binary(Opcode::add, big, Code::constant(k % 3));
  CHECK_THROWS_WITH_AS(tb::ops::map(g, prog, big, f),
                       "expr::Code: the expression has more than 64 distinct operations; split it into several maps",
                       tb::option_error);
  CHECK_THROWS_AS(Code::binary(Opcode::relu, Code::operand(0), Code::operand(1)), tb::option_error);
  CHECK_THROWS_AS(Code::operand(8), tb::index_error);
  CHECK(prog.size() == 0);  // nothing was added by the maps that threw
}

TEST_CASE("an interpreted map into a given output, or in place into one of its operands") {
  std::size_t const n = 1000;
  tb::Graph g{tb::targets::tiny(5, 256 * 1024)};
  tb::Sequence prog;
  auto a = g.add_variable<float>({n}, "a");
  auto b = g.add_variable<float>({n}, "b");
  auto out = g.add_variable<float>({n}, "out");
  // Rows of 24 with a broadcast row (a bias over channels): the host kernel runs runs of rows as one segment, the
  // row laid out again and again; a column that changes from row to row (col) keeps the rows apart.
  auto row = g.add_variable<float>({24}, "row");
  auto col = g.add_variable<float>({40, 1}, "col");
  auto m = g.add_variable<float>({40, 24}, "m");
  auto m2 = g.add_variable<float>({40, 24}, "m2");
  auto m3 = g.add_variable<float>({40, 24}, "m3");
  for (auto* t : {&a, &b, &out, &row, &col, &m, &m2, &m3}) tb::map_linearly(g, *t);
  Code const code{relu(_1 + _2 * 2.0f)};
  tb::ops::map_with_output(g, prog, code, out, a, b);          // a new place
  tb::ops::map_with_output(g, prog, code, b, a, b);            // in place into the second operand
  tb::ops::map_with_output(g, prog, Code{_1 - _2}, m, m, row);  // in place, with a broadcast row
  tb::ops::map_in_place(g, prog, _1 * 0.5f + _2, m2, row);       // the same with a compiled kernel
  tb::ops::map_with_output(g, prog, Code{_1 - _2 * _3}, m3, m3, row, col);
  auto const exe = tb::compile(g, prog);
  std::vector<float> first;
  for (std::size_t threads : {1, 3})
    for (bool host : {true, false}) {
      tb::Engine eng{exe, {.host_threads = threads, .host_kernels = host}};
      auto const va = sample<float>(n, 1), vb = sample<float>(n, 2), vr = sample<float>(24, 3), vm = sample<float>(960, 4);
      auto const vc = sample<float>(40, 5);
      eng.write(a, va);
      eng.write(b, vb);
      eng.write(row, vr);
      eng.write(col, vc);
      for (auto* t : {&m, &m2, &m3}) eng.write(*t, vm);
      eng.run();
      auto const o = eng.read<float>(out), ob = eng.read<float>(b);
      for (std::size_t i = 0; i < n; ++i) {
        float const want = std::max(va[i] + vb[i] * 2.0f, 0.0f);
        CHECK(o[i] == want);
        CHECK(ob[i] == want);
      }
      auto const om = eng.read<float>(m), om2 = eng.read<float>(m2), om3 = eng.read<float>(m3);
      for (std::size_t i = 0; i < 960; ++i) {
        CHECK(om[i] == vm[i] - vr[i % 24]);
        CHECK(om2[i] == vm[i] * 0.5f + vr[i % 24]);
        volatile float const product = vr[i % 24] * vc[i / 24];  // rounded on its own, as the map rounds it
        CHECK(om3[i] == vm[i] - product);
      }
      if (first.empty()) first = ob;
      else CHECK(std::memcmp(first.data(), ob.data(), n * sizeof(float)) == 0);
    }
}

TEST_CASE("an interpreted map into a given output: errors") {
  tb::Graph g{tb::targets::tiny(2)};
  tb::Sequence prog;
  auto f = g.add_variable<float>({8}, "f");
  auto i = g.add_variable<std::int32_t>({8}, "i");
  auto small = g.add_variable<float>({4}, "small");
  auto row = g.add_variable<float>({1, 8}, "row");
  auto m = g.add_variable<float>({3, 8}, "m");
  for (auto* t : {&f, &i, &small, &row, &m}) tb::map_linearly(g, *t);
  CHECK_THROWS_WITH_AS(tb::ops::map_with_output(g, prog, Code{_1 + 1.0f}, i, f),
                       "map_with_output: the expression gives f32 but the output holds i32 (use cast<T>)", tb::type_error);
  CHECK_THROWS_WITH_AS(tb::ops::map_with_output(g, prog, Code{_1 + 1.0f}, small, f),
                       "map_with_output: operand shapes [8] and [4] do not broadcast", tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::map_with_output(g, prog, Code{_1 + _2}, row, row, m),
                       "map_with_output: the output [1, 8] would have to be broadcast to [3, 8]", tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::map_with_output(g, prog, Code{_1 + _3}, f, f, f),
                       "map_with_output: the expression uses _3 but only 2 tensors were given", tb::index_error);
  CHECK(prog.size() == 0);
}
