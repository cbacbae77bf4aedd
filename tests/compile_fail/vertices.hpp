// Vertices shared by the compile-fail cases.
#pragma once
// Only what add_vertex needs: through the umbrella header each case took 9 s to parse, 1 s this way.
#include <tilebsp/core/target.hpp>
#include <tilebsp/vertex/add_vertex.hpp>
namespace tb = tilebsp;
struct Scale {
  BOOST_HANA_DEFINE_STRUCT(Scale, (tb::input<float>, in), (tb::output<float>, out), (tb::param<float>, k));
  void compute() {}
};
struct Gather {
  BOOST_HANA_DEFINE_STRUCT(Gather, (tb::input_list<float>, ins), (tb::output<float>, out));
  void compute() {}
};
struct BadMember {
  BOOST_HANA_DEFINE_STRUCT(BadMember, (float*, raw), (tb::output<float>, out));
  void compute() {}
};
struct NoCompute {
  BOOST_HANA_DEFINE_STRUCT(NoCompute, (tb::output<float>, out));
};
inline tb::Graph graph() { return tb::Graph{tb::targets::tiny(2)}; }
