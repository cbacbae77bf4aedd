// Vertices shared by the compile-fail cases.
#pragma once
#include <tilebsp/tilebsp.hpp>
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
