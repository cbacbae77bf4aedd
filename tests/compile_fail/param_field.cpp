// expect: a param<T> field must be connected to a value convertible to T
#include "vertices.hpp"
int main() {
  auto g = graph();
  auto t = g.add_variable<float>({4}, "t");
  auto cs = g.add_compute_set("cs");
  g.add_vertex<Scale>(cs, 0, t, t, t);
}
