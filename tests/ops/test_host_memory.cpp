// EngineOptions::reuse_host_memory: variables whose live ranges do not overlap share host memory. A network-like
// program (maps into new tensors, convolutions with serial steps and reductions, a matmul) gives the same bits with
// and without it, with host paths on and off, on 1, 2 and 3 threads; a variable that shares memory is read between
// runs only where the program leaves it live at its end, and is never written between runs.
#include "helpers.hpp"

#include <tilebsp/exec/detail/host_memory.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace tb = tilebsp;

TEST_CASE("reuse_host_memory: the same bits, and intermediates neither read nor written between runs") {
  tb::Graph g{tb::targets::tiny(7, 64 * 1024)};
  tb::Sequence prog;
  using namespace tb::expr;
  double const amp = 0.05;  // small temporary memory: serial steps and reductions inside the convolutions' bodies
  tb::ConvParams p;
  p.batch = 2;
  p.input_field = {10, 10};
  p.kernel_shape = {3, 3};
  p.padding_lower = p.padding_upper = {1, 1};
  p.channels(16, 16, 1);
  auto const x = tb::ops::create_conv_input(g, p);
  auto const w1 = tb::ops::create_conv_weights(g, p);
  auto const w2 = tb::ops::create_conv_weights(g, p);
  // x -> a (a map into a new tensor) -> b (conv) -> c (relu in place on b, then a new tensor) -> d (conv) -> e.
  auto const a = tb::ops::map<float>(g, prog, _1 * 0.5f, x);
  auto const b = tb::ops::conv(g, prog, a, w1, p, {.available_memory_proportion = amp});
  tb::ops::map_in_place<float>(g, prog, relu(_1), b);
  auto const c = tb::ops::map<float>(g, prog, _1 - 0.25f, b);
  auto const d = tb::ops::conv(g, prog, c, w2, p, {.available_memory_proportion = amp});
  auto const e = tb::ops::map<float, float>(g, prog, _1 + _2, d, c);  // c read again: live across the second conv
  auto const exe = tb::compile(g, {.allow_out_of_memory = true}, prog);
  auto const xv = tbt::values<float>(x.num_elements(), false, 1), w1v = tbt::values<float>(w1.num_elements(), false, 2),
             w2v = tbt::values<float>(w2.num_elements(), false, 3);
  auto const run = [&](std::size_t threads, bool host, bool reuse) {
    tb::Engine eng{exe, {.host_threads = threads, .host_kernels = host, .reuse_host_memory = reuse}};
    eng.write(x, xv);
    eng.write(w1, w1v);
    eng.write(w2, w2v);
    eng.run();
    eng.run();  // a second run over memory the first left behind
    return eng.read<float>(e);
  };
  // The plan shares: a and d (or b and e) are never live together, so the block is smaller than its variables.
  auto const plan = tb::exec::detail::plan_host_memory(exe.schedule());
  std::size_t shared_bytes = 0;
  for (std::uint32_t v = 0; v < plan.offset.size(); ++v)
    if (plan.shared(v)) shared_bytes += exe.schedule().graph->variables[v].size * sizeof(float);
  CHECK(plan.bytes > 0);
  CHECK(plan.bytes < shared_bytes);
  for (auto const& t : {a, b, d}) t.for_each_run([&](std::uint32_t v, auto...) { CHECK(plan.shared(v)); });
  x.for_each_run([&](std::uint32_t v, auto...) { CHECK(!plan.shared(v)); });  // written by the host

  auto const want = run(2, true, false);
  for (std::size_t threads : {1, 2, 3})
    for (bool host : {true, false}) {
      CAPTURE(threads);
      CAPTURE(host);
      auto const got = run(threads, host, true);
      REQUIRE(got.size() == want.size());
      CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
    }

  tb::Engine eng{exe, {.host_threads = 2, .reuse_host_memory = true}};
  eng.write(x, xv);  // read by the program before any write: memory of its own, written as always
  eng.write(w1, w1v);
  eng.write(w2, w2v);
  CHECK_THROWS_WITH_AS(eng.read<float>(e), doctest::Contains("the last program run does not leave it live"), tb::error);
  eng.run();
  CHECK(eng.read<float>(e).size() == want.size());  // written and not read again: live at the end
  CHECK(eng.read<float>(x) == xv);
  CHECK_THROWS_WITH_AS(eng.read<float>(a), doctest::Contains("shares host memory with variables whose live ranges"), tb::error);
  CHECK_THROWS_WITH_AS(eng.read<float>(b), doctest::Contains("EngineOptions::reuse_host_memory"), tb::error);
  CHECK(eng.read<float>(c).size() == c.num_elements());  // the last step reads it: live at the end
  CHECK_THROWS_WITH_AS(eng.write(b, std::vector<float>(b.num_elements())), doctest::Contains("a value written between runs would never be read"),
                       tb::error);
}
