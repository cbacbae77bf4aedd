// expect: V must be a copyable struct declared with BOOST_HANA_DEFINE_STRUCT and a member compute()
#include "vertices.hpp"
int main() {
  auto g = graph();
  auto t = g.add_variable<float>({4}, "t");
  auto cs = g.add_compute_set("cs");
  g.add_vertex<NoCompute>(cs, 0, t);
}
