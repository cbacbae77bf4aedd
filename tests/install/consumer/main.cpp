// A downstream program: the tutorial graph o1 = a + b, o2 = a + c, out = o1 + o2.
#include <tilebsp/tilebsp.hpp>

#include <iostream>

namespace tb = tilebsp;

struct Add {
  BOOST_HANA_DEFINE_STRUCT(Add, (tb::input<float>, a), (tb::input<float>, b), (tb::output<float>, out));
  void compute() {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = a[i] + b[i];
  }
};

int main() {
  tb::Graph g{tb::targets::tiny(1)};
  auto a = g.add_constant<float>({2}, {1, 1}, "a");
  auto b = g.add_constant<float>({2}, {0, 1}, "b");
  auto c = g.add_constant<float>({2}, {1, 5}, "c");
  auto o1 = g.add_variable<float>({2}, "o1"), o2 = g.add_variable<float>({2}, "o2");
  auto out = g.add_variable<float>({2}, "out");
  for (auto const& t : {a, b, c, o1, o2, out}) g.set_tile_mapping(t, 0);
  auto first = g.add_compute_set("first"), second = g.add_compute_set("second");
  g.add_vertex<Add>(first, 0, a, b, o1);
  g.add_vertex<Add>(first, 0, a, c, o2);
  g.add_vertex<Add>(second, 0, o1, o2, out);
  // An operator too, header-only as a user gets it: instantiated in this file.
  tb::Sequence prog{tb::execute(first), tb::execute(second)};
  auto sum = tb::ops::add(g, prog, o1, o2);
#ifdef TILEBSP_COMPILED
  // Linked to tilebsp::compiled: a matrix product from the library's kernels, chosen when the program starts.
  auto x = g.add_constant<float>({2, 3}, {1, 2, 3, 4, 5, 6}, "x");
  auto y = g.add_constant<float>({3, 2}, {1, 0, 0, 1, 1, 1}, "y");
  g.set_tile_mapping(x, 0);
  g.set_tile_mapping(y, 0);
  auto product = tb::ops::matmul(g, prog, x, y);
#endif
  tb::Engine engine{tb::compile(g, prog)};
  engine.run();
  auto r = engine.read<float>(out), s = engine.read<float>(sum);
  std::cout << "[" << r[0] << ", " << r[1] << "] [" << s[0] << ", " << s[1] << "]";
#ifdef TILEBSP_COMPILED
  auto p = engine.read<float>(product);
  std::cout << " [" << p[0] << ", " << p[1] << ", " << p[2] << ", " << p[3] << "] " << tb::ops::kernels_level()
            << " kernels";
#endif
  std::cout << "\n";
}
