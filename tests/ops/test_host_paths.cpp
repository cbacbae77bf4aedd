// The host paths' contract across operators: one program of matmul (K split over tiles, serial steps), the three
// convolution passes (partials, serial steps), a fused map and max pooling with its gradient, run with host paths
// on and off on 1, 2, 3 and 7 host threads: every result bitwise the same.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

namespace tb = tilebsp;

TEST_CASE("host paths write their bodies' bits, for any number of threads") {
  tb::Graph g{tb::targets::tiny(7, 32 * 1024)};
  tb::Sequence prog;
  double const amp = 0.05;  // small temporary memory: K and reduction channels split over tiles and serial steps

  auto a = g.add_variable<float>({24, 96}, "a"), b = g.add_variable<float>({96, 20}, "b");
  tb::map_linearly(g, a);
  tb::map_linearly(g, b);
  auto const mp = tb::ops::plan_matmul(g, a, b, {.available_memory_proportion = amp});
  CHECK((mp.reduce || mp.k_steps > 1));
  auto c = tb::ops::matmul(g, prog, a, b, {.available_memory_proportion = amp});

  tb::ConvParams p;
  p.batch = 2;
  p.input_field = {9, 9};
  p.kernel_shape = {3, 3};
  p.padding_lower = p.padding_upper = {1, 1};
  p.channels(32, 32, 2);
  tb::ConvOptions const o{.available_memory_proportion = amp};
  auto const cp = tb::ops::plan_conv(g, p, tb::ConvPass::forward, tb::ElementType::f32, o);
  CHECK((cp.reduce || cp.steps > 1));
  auto x = tb::ops::create_conv_input(g, p), w = tb::ops::create_conv_weights(g, p);
  auto y = tb::ops::conv(g, prog, x, w, p, o);
  auto dx = tb::ops::conv_backward_input(g, prog, y, w, p, o);
  auto dw = tb::ops::conv_weight_gradients(g, prog, y, x, p, o);

  using namespace tb::expr;
  auto m = tb::ops::map<float, float>(g, prog, relu(_1 * 2.0f + _2), y, dx);
  tb::PoolParams const pp{.kernel_shape = {3, 3}, .stride = {2, 2}, .padding_lower = {1, 1}, .padding_upper = {1, 1}};
  auto pooled = tb::ops::max_pool(g, prog, m, pp);
  auto dm = tb::ops::max_pool_backward(g, prog, m, pooled, pooled, pp);

  auto const exe = tb::compile(g, {.allow_out_of_memory = true}, prog);
  auto const av = tbt::values<float>(a.num_elements(), false, 1), bv = tbt::values<float>(b.num_elements(), false, 2);
  auto const xv = tbt::values<float>(x.num_elements(), false, 3), wv = tbt::values<float>(w.num_elements(), false, 4);
  auto const run = [&](std::size_t threads, bool host) {
    tb::Engine e{exe, {.host_threads = threads, .host_kernels = host}};
    e.write(a, av);
    e.write(b, bv);
    e.write(x, xv);
    e.write(w, wv);
    e.run();
    std::size_t spans = 0, tasks = 0;  // host path steps run, and those that ran their task
    auto const profile = e.profile();
    for (auto const& step : profile.programs[0])
      if (step.kind == "host_path") {
        spans += step.executions;
        if (step.label.find("(body runs)") == std::string::npos) tasks += step.executions;
      }
    CHECK(spans >= 5);  // at least the matmul, the three convolution passes and max_pool
    CHECK(tasks == (host ? spans : 0));
    std::vector<std::vector<float>> out;
    for (auto const& t : {c, y, dx, dw, m, pooled, dm}) out.push_back(e.read<float>(t));
    return out;
  };
  auto const want = run(1, false);
  for (std::size_t threads : {1, 2, 3, 7})
    for (bool host : {true, false}) {
      CAPTURE(threads);
      CAPTURE(host);
      auto const got = run(threads, host);
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        REQUIRE(got[i].size() == want[i].size());
        CHECK(std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)) == 0);
      }
    }
}
