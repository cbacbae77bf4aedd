// expect: every reflected vertex member must be input<T>, output<T>, inout<T>, input_list<T>,
#include "vertices.hpp"
int main() {
  auto g = graph();
  auto t = g.add_variable<float>({4}, "t");
  auto cs = g.add_compute_set("cs");
  g.add_vertex<BadMember>(cs, 0, t, t);
}
