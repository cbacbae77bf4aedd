// Compile-time probe: one ops::matmul of two 256x256 f32 matrices, compiled and run.
#include <tilebsp/tilebsp.hpp>

#include <cstdio>
namespace tb = tilebsp;

int main() {
  tb::Graph g{tb::targets::ipu_mk2()};
  tb::Tensor a = g.add_variable<float>({256, 256}, "a");
  tb::Tensor b = g.add_variable<float>({256, 256}, "b");
  tb::map_linearly(g, a);
  tb::map_linearly(g, b);
  tb::Sequence prog;
  tb::Tensor c = tb::ops::matmul(g, prog, a, b);
  tb::Engine engine{tb::compile(g, prog)};
  engine.write(a, std::vector<float>(256 * 256, 1.0f));
  engine.write(b, std::vector<float>(256 * 256, 2.0f));
  engine.run();
  std::printf("%g\n", static_cast<double>(engine.read<float>(c)[0]));
}
