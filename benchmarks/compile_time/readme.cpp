// Compile-time probe: the README example (a vertex, a compute set, a stream, a repeat, an engine).
#include <tilebsp/tilebsp.hpp>

#include <cstdio>
namespace tb = tilebsp;

struct Axpy {
  BOOST_HANA_DEFINE_STRUCT(Axpy, (tb::input<float>, x), (tb::inout<float>, y), (tb::param<float>, a));
  void compute() {
    for (std::size_t i = 0; i < y.size(); ++i) y[i] += a * x[i];
  }
};

int main() {
  tb::Graph g{tb::targets::ipu_mk2()};
  tb::Tensor x = g.add_variable<float>({1 << 16}, "x");
  tb::Tensor y = g.add_variable<float>({1 << 16}, "y");
  tb::map_linearly(g, x);
  tb::map_linearly(g, y);
  tb::ComputeSet cs = g.add_compute_set("axpy");
  for (auto const& [tile, region] : g.tile_mapping(y)) g.add_vertex<Axpy>(cs, tile, x.slice(region), y.slice(region), 2.0f);
  auto infeed = g.add_host_to_device_fifo<float>("x", x.num_elements());
  auto prog = tb::seq(tb::stream_in(infeed, x), tb::repeat(10, tb::execute(cs)));
  tb::Engine engine{tb::compile(g, prog), {.host_threads = 2}};
  std::vector<float> host_x(x.num_elements(), 1.0f);
  engine.connect(infeed, host_x);
  engine.run();
  std::printf("%g\n", static_cast<double>(engine.read<float>(y)[0]));
}
