// expect: an input/output/inout field must be connected to a tilebsp::Tensor
#include "vertices.hpp"
int main() {
  auto g = graph();
  auto t = g.add_variable<float>({4}, "t");
  auto cs = g.add_compute_set("cs");
  g.add_vertex<Scale>(cs, 0, 1.0f, t, 2.0f);
}
