// Compile-time probe: one convolution training step (forward, backward input, weight gradients), f32.
#include <tilebsp/tilebsp.hpp>

#include <cstdio>
namespace tb = tilebsp;

int main() {
  tb::Graph g{tb::targets::ipu_mk2()};
  tb::ConvParams params;
  params.batch = 2;
  params.input_field = {16, 16};
  params.kernel_shape = {3, 3};
  params.padding_lower = params.padding_upper = {1, 1};
  params.channels(32, 32, 4);
  tb::Tensor in = tb::ops::create_conv_input(g, params);
  tb::Tensor w = tb::ops::create_conv_weights(g, params);
  tb::Sequence prog;
  tb::Tensor out = tb::ops::conv(g, prog, in, w, params);
  tb::Tensor grad_in = tb::ops::conv_backward_input(g, prog, out, w, params);
  tb::Tensor grad_w = tb::ops::conv_weight_gradients(g, prog, out, in, params);
  tb::Engine engine{tb::compile(g, prog)};
  engine.write(in, std::vector<float>(in.num_elements(), 1.0f));
  engine.write(w, std::vector<float>(w.num_elements(), 0.5f));
  engine.run();
  std::printf("%g %g\n", static_cast<double>(engine.read<float>(grad_in)[0]), static_cast<double>(engine.read<float>(grad_w)[0]));
}
