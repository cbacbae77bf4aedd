// expect: fetch() connects only input fields
#include "vertices.hpp"
int main() {
  auto g = graph();
  auto t = g.add_variable<float>({4}, "t");
  auto cs = g.add_compute_set("cs");
  g.add_vertex<Scale>(cs, 0, t, tb::fetch(t), 2.0f);
}
