// expect: an input_list field must be connected to a std::vector<tilebsp::Tensor>
#include "vertices.hpp"
int main() {
  auto g = graph();
  auto t = g.add_variable<float>({4}, "t");
  auto cs = g.add_compute_set("cs");
  g.add_vertex<Gather>(cs, 0, t, t);
}
