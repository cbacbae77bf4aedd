// Pipelines: stages on IPUs over micro-batches, transfers, the multi-IPU cost rules, determinism and errors.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

namespace tb = tilebsp;

namespace {

constexpr std::size_t tiles = 4, width = 16, rows = 4;

/// One layer: relu(x · w), planned on the tiles of `g` (a shard view, or a one-IPU graph).
tb::Tensor layer(tb::Graph& g, tb::Sequence& prog, tb::Tensor const& x, tb::Tensor& w, std::string const& name) {
  using namespace tb::expr;
  w = g.add_variable<float>({width, width}, name + ".w");
  tb::map_linearly(g, w);
  tb::Tensor y = tb::ops::matmul(g, prog, x, w, {}, name);
  tb::ops::map_in_place(g, prog, relu(_1 * 0.5f + 0.25f), y);
  return y;
}

std::vector<float> weights(std::size_t k) { return tbt::values<float>(width * width, false, 100 + static_cast<unsigned>(k)); }
std::vector<float> inputs(std::size_t micro_batches) { return tbt::values<float>(micro_batches * rows * width, false, 7); }

/// Writes the layers' weights, runs `e` over `micro_batches` inputs through `in` and returns what `out` received.
std::vector<float> feed_and_run(tb::Engine& e, std::vector<tb::Tensor> const& w, tb::Fifo const& in, tb::Fifo const& out,
                                std::size_t micro_batches) {
  for (std::size_t k = 0; k < w.size(); ++k) e.write(w[k], weights(k));
  std::vector<float> const data = inputs(micro_batches);
  std::vector<float> result(micro_batches * rows * width);
  e.connect(in, data, false);
  e.connect(out, result, false);
  e.run();
  return result;
}

/// The three layers on one IPU, `micro_batches` times over (the reference).
std::vector<float> unpipelined(std::size_t micro_batches) {
  tb::Graph g{tb::targets::tiny(tiles, 64 * 1024)};
  tb::Tensor x = g.add_variable<float>({rows, width}, "x");
  tb::map_linearly(g, x);
  tb::Sequence net;
  std::vector<tb::Tensor> w(3);
  tb::Tensor h = x;
  for (std::size_t k = 0; k < 3; ++k) h = layer(g, net, h, w[k], "l" + std::to_string(k));
  auto in = g.add_host_to_device_fifo<float>("in", x.num_elements());
  auto out = g.add_device_to_host_fifo<float>("out", h.num_elements());
  tb::Engine e{tb::compile(g, tb::repeat(micro_batches, tb::seq(tb::stream_in(in, x), std::move(net), tb::stream_out(h, out)))),
               {.host_threads = 2}};
  return feed_and_run(e, w, in, out, micro_batches);
}

/// The same layers as a pipeline of three stages, one per IPU of a three-IPU target.
struct Piped {
  tb::Graph g{tb::targets::tiny(tiles, 64 * 1024, 3)};
  std::vector<tb::Tensor> w = std::vector<tb::Tensor>(3);
  tb::Fifo in, out;
  tb::Pipeline pipe;

  explicit Piped(std::size_t micro_batches) : pipe(make(micro_batches)) {}

  tb::Pipeline make(std::size_t micro_batches) {
    std::vector<tb::Stage> stages;
    tb::Tensor h;
    for (std::size_t k = 0; k < 3; ++k) {
      tb::Graph shard = g.shard(k);
      tb::Sequence body;
      tb::Tensor x;
      std::vector<tb::Receive> recv;
      if (k == 0) {
        x = shard.add_variable<float>({rows, width}, "x");
        tb::map_linearly(shard, x);
        in = g.add_host_to_device_fifo<float>("in", x.num_elements());
        body.add(tb::stream_in(in, x));
      } else {
        x = tb::receive_buffer(shard, h, "x" + std::to_string(k));
        recv.push_back(tb::receive(h, x));
      }
      h = layer(shard, body, x, w[k], "l" + std::to_string(k));
      if (k == 2) {
        out = g.add_device_to_host_fifo<float>("out", h.num_elements());
        body.add(tb::stream_out(h, out));
      }
      stages.push_back({shard, std::move(body), std::move(recv)});
    }
    return tb::pipeline({.micro_batches = micro_batches}, std::move(stages));
  }

  std::vector<float> run(std::size_t micro_batches, std::size_t threads, tb::Profile* profile = nullptr,
                         std::string const& cache = {}, bool* loaded = nullptr) {
    tb::Executable exe = tb::compile(g, {.cache_dir = cache}, pipe);
    if (loaded) *loaded = exe.loaded_from_cache();
    tb::Engine e{std::move(exe), {.host_threads = threads}};
    std::vector<float> result = feed_and_run(e, w, in, out, micro_batches);
    if (profile) *profile = e.profile();
    return result;
  }
};

}  // namespace

TEST_CASE("a pipeline computes what the same network computes on one IPU, bitwise, for any host thread count") {
  for (std::size_t m : {3, 5}) {
    CAPTURE(m);
    std::vector<float> const expect = unpipelined(m);
    Piped p(m);
    for (std::size_t threads : {1, 2, 3, 4, 7}) {
      CAPTURE(threads);
      CHECK(p.run(m, threads) == expect);
    }
  }
}

TEST_CASE("a pipeline in the executable cache: stored, loaded, and run to the same results and estimates") {
  std::size_t const m = 4;
  auto const dir = std::filesystem::temp_directory_path() / ("tilebsp_pipeline_cache_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::vector<float> results[2];
  tb::Profile profiles[2];
  for (int round = 0; round < 2; ++round) {
    Piped p(m);  // the same graph built again, as a second process would
    bool loaded = false;
    results[round] = p.run(m, 2, &profiles[round], dir.string(), &loaded);
    CHECK(loaded == (round == 1));
  }
  CHECK(results[0] == results[1]);
  CHECK(profiles[0].estimated_cycles() == profiles[1].estimated_cycles());
  REQUIRE(profiles[1].stages.size() == 3);
  for (std::size_t k = 0; k < 3; ++k) CHECK(profiles[0].stages[k].est_cycles == profiles[1].stages[k].est_cycles);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a pipeline step costs its slowest IPU plus the transfers and one sync across the IPUs") {
  std::size_t const m = 6;
  Piped p(m);
  tb::Profile prof;
  p.run(m, 2, &prof);
  tb::Target const& t = p.g.target();
  REQUIRE(prof.stages.size() == 3);
  std::uint64_t slowest = 0;
  for (auto const& st : prof.stages) {
    CHECK(st.runs == m);  // each stage takes every micro-batch once
    CHECK(st.ipu == st.stage);
    slowest = std::max(slowest, st.est_cycles);
  }
  // Stage steps run on one IPU: on-chip syncs. Pipeline steps: the busiest IPU, then a sync across IPUs.
  std::size_t steps = 0;
  std::uint64_t pipeline_cycles = 0, transfer_cycles = 0;
  for (auto const& s : prof.programs[0]) {
    if (s.kind == "pipeline_step") {
      steps += s.executions;
      pipeline_cycles += s.est_cycles * s.executions;
      CHECK(s.est_cycles <= slowest + t.inter_ipu_sync_cycles);
    }
    if (s.stage < 0 && s.kind == "superstep") {  // the transfers between steps
      CHECK(s.inter_ipu_bytes == s.exchange_bytes);
      transfer_cycles += s.est_cycles * s.executions;
    }
  }
  CHECK(steps == m + 2);  // ramp-up and ramp-down: K - 1 steps each
  std::uint64_t const full = slowest + t.inter_ipu_sync_cycles;
  CHECK(pipeline_cycles >= m * full);  // the m - 2 full steps and the ramps that run the slowest stage
  CHECK(prof.estimated_cycles() <= steps * full + transfer_cycles + 2 * (t.sync_cycles + 64 * 64));
  // Each transfer moves one activation (rows x width floats) over one link per step that carries data.
  CHECK(prof.inter_ipu_bytes() == 2 * m * rows * width * 4);
}

TEST_CASE("multi-IPU cost rules: one IPU syncs on chip, links cost bytes at their rate plus latency") {
  tb::Graph g{tb::targets::tiny(2, 64 * 1024, 2)};
  auto a = g.add_variable<float>({256}, "a"), b = g.add_variable<float>({256}, "b"), c = g.add_variable<float>({256}, "c");
  g.shard(0).set_tile_mapping(a, 0);
  g.shard(0).set_tile_mapping(b, 1);
  g.shard(1).set_tile_mapping(c, 0);
  tb::Executable on_chip = tb::compile(g, tb::copy(a, b));
  tb::Executable across = tb::compile(g, tb::copy(a, c));
  tb::Target const& t = g.target();
  // 1 KiB at 4 bytes per cycle on one IPU, then its own sync.
  CHECK(on_chip.schedule().programs[0].cycles[0] == 1024 / 4 + t.sync_cycles);
  // Over the link: max(per-tile rate, link rate + latency), then a sync across both IPUs.
  auto const link = static_cast<std::uint64_t>(std::ceil(1024 / t.inter_ipu_bytes_per_cycle)) + t.inter_ipu_latency_cycles;
  CHECK(across.schedule().programs[0].cycles[0] == std::max<std::uint64_t>(1024 / 4, link) + t.inter_ipu_sync_cycles);
}

TEST_CASE("operators on a shard plan on that shard's tiles only, as on a one-IPU target") {
  auto cycles = [](tb::Graph g, tb::Graph whole) {
    tb::Tensor x = g.add_variable<float>({rows, width}, "x");
    tb::map_linearly(g, x);
    tb::Sequence s;
    tb::Tensor w;
    layer(g, s, x, w, "l");
    tb::Engine e{tb::compile(whole, s), {.host_threads = 1}};
    e.run();
    return e.profile().estimated_cycles();
  };
  tb::Graph one{tb::targets::tiny(tiles, 64 * 1024)};
  tb::Graph three{tb::targets::tiny(tiles, 64 * 1024, 3)};
  CHECK(cycles(three.shard(2), three) == cycles(one, one));
}

TEST_CASE("pipeline errors") {
  tb::Graph g{tb::targets::tiny(2, 64 * 1024, 2)};
  tb::Graph s0 = g.shard(0), s1 = g.shard(1);
  auto h = s0.add_variable<float>({8}, "h");
  s0.set_tile_mapping(h, 0);
  auto r = s1.add_variable<float>({8}, "r"), y = s1.add_variable<float>({8}, "y");
  s1.set_tile_mapping(r, 0);
  s1.set_tile_mapping(y, 1);
  SUBCASE("fewer micro-batches than stages") {
    CHECK_THROWS_WITH_AS(tb::pipeline({.micro_batches = 1}, tb::stage(s0, tb::sync()), tb::stage(s1, tb::sync())),
                         "pipeline: 1 micro-batches for 2 stages; a pipeline needs at least as many micro-batches as stages",
                         tb::option_error);
  }
  SUBCASE("an accumulation count of 0") {
    CHECK_THROWS_WITH_AS(tb::pipeline({.micro_batches = 0}, tb::stage(s0, tb::sync())),
                         "pipeline: the micro-batch count (gradient accumulation count) must be at least 1",
                         tb::option_error);
  }
  SUBCASE("a stage that reads another IPU's tensor without a transfer") {
    auto p = tb::pipeline({.micro_batches = 2}, tb::stage(s0, tb::sync()), tb::stage(s1, tb::copy(h, y)));
    CHECK_THROWS_WITH_AS(tb::compile(g, p),
                         "pipeline: stage 1 (IPU 1) reads 'h', which lives on IPU 0 (tile 0), without a pipeline "
                         "transfer: receive it into a tensor on IPU 1 (tb::receive)",
                         tb::mapping_error);
    // With the transfer, it compiles and runs.
    auto q = tb::pipeline({.micro_batches = 2}, tb::stage(s0, tb::sync()), tb::stage(s1, tb::copy(r, y), tb::receive(h, r)));
    tb::Engine e{tb::compile(g, q), {.host_threads = 2}};
    e.write(h, std::vector<float>(8, 3.0f));
    e.run();
    CHECK(e.read<float>(y) == std::vector<float>(8, 3.0f));
  }
  SUBCASE("a stage touching a shard it was not given") {
    auto cs = g.add_compute_set("elsewhere");
    auto q = s1.add_variable<float>({8}, "q");
    s1.set_tile_mapping(q, 0);
    s1.add_vertex<tbt::Copy>(cs, 0, r, q);
    auto p = tb::pipeline({.micro_batches = 2}, tb::stage(s0, tb::execute(cs)), tb::stage(s1, tb::sync()));
    CHECK_THROWS_WITH_AS(tb::compile(g, p),
                         "pipeline: stage 0 (IPU 0) runs compute set 'elsewhere', which has a vertex on tile 2 of IPU 1, "
                         "a shard the stage was not given",
                         tb::mapping_error);
  }
  SUBCASE("transfers between tensors that differ, or from a later stage") {
    auto z = s1.add_variable<float>({4}, "z");
    CHECK_THROWS_WITH_AS(tb::pipeline({.micro_batches = 2}, tb::stage(s0, tb::sync()), tb::stage(s1, tb::sync(), tb::receive(h, z))),
                         "pipeline: stage 1 receives a tensor of shape [8] into one of shape [4]", tb::shape_error);
    CHECK_THROWS_WITH_AS(tb::pipeline({.micro_batches = 2}, tb::stage(s0, tb::sync(), tb::receive(r, h, 1)), tb::stage(s1, tb::sync())),
                         "pipeline: stage 0 receives from stage 1, which is not an earlier stage", tb::option_error);
  }
  SUBCASE("a stage's graph must be one IPU's shard") {
    CHECK_THROWS_WITH_AS(tb::stage(g, tb::sync()),
                         "stage: the graph must be one IPU's shard view (g.shard(i)), not a view of 4 tiles",
                         tb::option_error);
    CHECK_THROWS_WITH_AS(tb::pipeline({.micro_batches = 2}, std::vector<tb::Stage>{{s0, tb::sync(), {}}, {g, tb::sync(), {}}}),
                         "pipeline: stage 1's graph must be one IPU's shard view (g.shard(i)), not a view of 4 tiles",
                         tb::option_error);
  }
}

TEST_CASE("a transfer over two stages keeps each micro-batch's value until the later stage runs it (a stash)") {
  // Stage 0 writes m into h; stage 1 does nothing with it; stage 2 (on IPU 0 again) receives it from stage 0 and
  // appends it to an output stream: the stream must read 0, 1, 2, ... in order.
  tb::Graph g{tb::targets::tiny(2, 64 * 1024, 2)};
  tb::Graph s0 = g.shard(0), s1 = g.shard(1);
  auto counter = s0.add_variable<float>({1}, "counter"), one = s0.add_constant<float>({1}, 1.0f, "one");
  auto h = s0.add_variable<float>({1}, "h"), back = s0.add_variable<float>({1}, "back");
  for (auto const& t : {counter, one, h, back}) s0.set_tile_mapping(t, 0);
  auto cs = g.add_compute_set("count");
  s0.add_vertex<tbt::Add>(cs, 0, counter, one, h);
  auto out = g.add_device_to_host_fifo<float>("out", 1);
  std::size_t const m = 5;
  auto p = tb::pipeline({.micro_batches = m},
                        tb::stage(s0, tb::seq(tb::execute(cs), tb::copy(h, counter))),
                        tb::stage(s1, tb::sync()),
                        tb::stage(s0, tb::stream_out(back, out), tb::receive(h, back, 0)));
  for (std::size_t threads : {1, 2, 3}) {
    tb::Engine e{tb::compile(g, p), {.host_threads = threads}};
    e.write(counter, std::vector<float>{0.0f});
    std::vector<float> got(m);
    e.connect(out, got, false);
    e.run();
    CHECK(got == std::vector<float>{1, 2, 3, 4, 5});
  }
}
