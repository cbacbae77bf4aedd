// Replicas in one process: each its own variables and streams, cross-replica collectives in a fixed order, results
// bitwise the same for any host thread count; the model's cost of a collective; the errors of replication.
#include "helpers.hpp"
#include "replicated_sgd.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

namespace tb = tilebsp;
using tb::expr::_1;
using tb::expr::_2;


TEST_CASE("replicas: each has its own variables; write without an index writes them all") {
  tb::Graph g(tb::targets::tiny(2));
  auto x = g.add_variable<float>({4}, "x");
  tb::map_linearly(g, x);
  tb::Sequence prog;
  tb::ops::map_in_place(g, prog, _1 + 1.0f, x);
  tb::Engine e(tb::compile(g, {.replicas = 3}, prog), {.host_threads = 2});
  CHECK(e.replicas() == 3);
  CHECK(e.local_replicas() == 3);
  CHECK(e.first_replica() == 0);
  CHECK(e.executable().replicas() == 3);
  e.write(x, std::vector<float>{1, 2, 3, 4});
  e.write(x, 2, std::vector<float>{10, 20, 30, 40});
  e.run();
  CHECK(e.read<float>(x, 0) == std::vector<float>{2, 3, 4, 5});
  CHECK(e.read<float>(x, 1) == std::vector<float>{2, 3, 4, 5});
  CHECK(e.replica(2).read<float>(x) == std::vector<float>{11, 21, 31, 41});
  CHECK(e.replica(1).replica() == 1);
  // At R = 1 nothing changes: read needs no index.
  tb::Engine one(tb::compile(g, prog), {.host_threads = 2});
  one.write(x, std::vector<float>{1, 2, 3, 4});
  one.run();
  CHECK(one.read<float>(x) == std::vector<float>{2, 3, 4, 5});
  CHECK(one.read<float>(x, 0) == std::vector<float>{2, 3, 4, 5});
}

TEST_CASE("replicas: a shared FIFO hands consecutive transfers to the replicas in order; host callbacks see theirs") {
  tb::Graph g(tb::targets::tiny(2));
  auto x = g.add_variable<float>({2}, "x");
  tb::map_linearly(g, x);
  auto in = g.add_host_to_device_fifo<float>("in", 2);
  auto out = g.add_device_to_host_fifo<float>("out", 2);
  std::vector<std::size_t> seen;
  tb::Sequence prog;
  prog.add(tb::stream_in(in, x));
  tb::ops::map_in_place(g, prog, _1 * 10.0f, x);
  prog.add(tb::host([&](tb::HostContext& h) {
    seen.push_back(h.replica());
    auto v = h.read<float>(x);
    v[1] = static_cast<float>(h.replica());
    h.write(x, v);
  }));
  prog.add(tb::stream_out(x, out));
  tb::Engine e(tb::compile(g, {.replicas = 3}, tb::repeat(2, prog)), {.host_threads = 3});
  std::vector<float> const data{1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0};
  std::vector<float> result(12, -1);
  e.connect(in, data);
  e.connect(out, result);
  e.run();
  CHECK(seen == std::vector<std::size_t>{0, 1, 2, 0, 1, 2});
  CHECK(result == std::vector<float>{10, 0, 20, 1, 30, 2, 40, 0, 50, 1, 60, 2});
  // Per replica connections replace the shared one; a replica left unconnected is named.
  std::vector<float> mine{7, 0};
  e.connect(in, 1, mine);
  CHECK_THROWS_WITH_AS(e.run(), "run: program 0 streams through FIFO 'in', which is not connected for replica 0 "
                                "(Engine::connect)",
                       tb::stream_error);
}

TEST_CASE("replicas: cross-replica sum, mean and max reduce in replica order, for every element type") {
  tb::Graph g(tb::targets::tiny(3));
  auto f = g.add_variable<float>({5, 7}, "f");
  auto h = g.add_variable<tb::half>({9}, "h");
  auto i = g.add_variable<std::int32_t>({6}, "i");
  auto m = g.add_variable<float>({4}, "m");
  for (auto const& t : {f, h, i, m}) tb::map_linearly(g, t);
  tb::Sequence prog;
  tb::Tensor const fsum = tb::ops::cross_replica_sum(g, prog, f.transpose(), "fsum");  // a strided view in
  tb::ops::cross_replica_mean_in_place(prog, h, "hmean");
  tb::ops::cross_replica_sum_in_place(prog, i, "isum");
  tb::ops::cross_replica_max_in_place(prog, m, "mmax");
  std::size_t const R = 3;
  std::vector<std::vector<float>> fv, mv;
  std::vector<std::vector<tb::half>> hv;
  std::vector<std::vector<std::int32_t>> iv;
  for (std::size_t r = 0; r < R; ++r) {
    fv.push_back(tbt::values<float>(35, false, static_cast<unsigned>(r + 1)));
    hv.push_back(tbt::values<tb::half>(9, false, static_cast<unsigned>(r + 11)));
    iv.push_back({2147483647, -5, static_cast<std::int32_t>(r), 3, -7, 1 << 30});
    mv.push_back(tbt::values<float>(4, false, static_cast<unsigned>(r + 21)));
  }
  for (unsigned threads : {1u, 2u, 4u}) {
    CAPTURE(threads);
    tb::Engine e(tb::compile(g, {.replicas = R}, prog), {.host_threads = threads});
    for (std::size_t r = 0; r < R; ++r) {
      e.write(f, r, fv[r]);
      e.write(h, r, hv[r]);
      e.write(i, r, iv[r]);
      e.write(m, r, mv[r]);
    }
    e.run();
    for (std::size_t r = 0; r < R; ++r) {
      CAPTURE(r);
      CHECK(e.read<float>(f, r) == fv[r]);  // the input of the out-of-place sum is left as it was
      auto const s = e.read<float>(fsum, r);
      for (std::size_t a = 0; a < 7; ++a)
        for (std::size_t b = 0; b < 5; ++b) {
          float want = fv[0][b * 7 + a];
          for (std::size_t q = 1; q < R; ++q) want += fv[q][b * 7 + a];
          CHECK(s[a * 5 + b] == want);
        }
      auto const hm = e.read<tb::half>(h, r);
      for (std::size_t k = 0; k < 9; ++k) {
        float acc = static_cast<float>(hv[0][k]);
        for (std::size_t q = 1; q < R; ++q) acc += static_cast<float>(hv[q][k]);
        CHECK(static_cast<float>(hm[k]) == static_cast<float>(tb::half(acc / 3.0f)));
      }
      auto const is = e.read<std::int32_t>(i, r);
      CHECK(is[0] == static_cast<std::int32_t>(3u * 2147483647u));  // wraps modulo 2^32
      CHECK(is[2] == 0 + 1 + 2);
      auto const mm = e.read<float>(m, r);
      for (std::size_t k = 0; k < 4; ++k) CHECK(mm[k] == std::max({mv[0][k], mv[1][k], mv[2][k]}));
    }
  }
}

TEST_CASE("replicas: data-parallel SGD is bitwise the same for any number of host threads") {
  tbt::ReplicatedSgd s(16);
  auto const base = s.run(3, 1, 4);
  for (std::size_t r = 1; r < 3; ++r) CHECK(base[r].first == base[0].first);  // the replicas agree after each update
  for (std::size_t threads : {2u, 3u, 5u}) {
    CAPTURE(threads);
    auto const other = s.run(3, threads, 4);
    for (std::size_t r = 0; r < 3; ++r) {
      CHECK(other[r].first == base[r].first);
      CHECK(std::memcmp(other[r].second.data(), base[r].second.data(), 37 * sizeof(tb::half)) == 0);
    }
  }
  // The reference: the same arithmetic on the host, the mean added in replica order.
  std::vector<float> w = s.initial_w();
  for (std::size_t k = 0; k < 4; ++k) {
    std::vector<float> sum(16);
    for (std::size_t r = 0; r < 3; ++r) {
      auto const x = s.input(r, k);
      for (std::size_t j = 0; j < 16; ++j) {
        float const gj = w[j] * x[j] - x[j] * 0.5f;
        sum[j] = r == 0 ? gj : sum[j] + gj;
      }
    }
    for (std::size_t j = 0; j < 16; ++j) w[j] = w[j] - (sum[j] / 3.0f) * 0.1f;
  }
  CHECK(base[0].first == w);
}

TEST_CASE("replicas: the model charges a ring all-reduce per collective, shown in the profile") {
  tb::Graph g(tb::targets::ipu_mk2());
  auto x = g.add_variable<float>({1472 * 64}, "x");
  tb::map_linearly(g, x);
  tb::Sequence prog;
  tb::ops::cross_replica_sum_in_place(prog, x, "grads");
  tb::Target const& t = g.target();
  std::uint64_t const bytes = 1472 * 64 * 4;
  for (std::size_t R : {1u, 2u, 4u, 16u}) {
    CAPTURE(R);
    auto const exe = tb::compile(g, {.replicas = R}, prog);
    std::uint64_t const want =
        R == 1 ? 0
               : 2 * (R - 1) * (static_cast<std::uint64_t>(static_cast<double>((bytes + R - 1) / R) / t.inter_ipu_bytes_per_cycle) +
                                t.inter_ipu_latency_cycles) + t.inter_ipu_sync_cycles;
    CHECK(exe.estimated_cycles(0) == want);
  }
  // Past a pod (64 IPUs), the ring crosses GW-Links.
  auto const big = tb::compile(g, {.replicas = 128}, prog);
  CHECK(big.estimated_cycles(0) ==
        2 * 127 * (static_cast<std::uint64_t>(static_cast<double>((bytes + 127) / 128) / t.gateway_bytes_per_cycle) +
                   t.inter_ipu_latency_cycles) + t.inter_ipu_sync_cycles);
  tb::Engine e(tb::compile(g, {.replicas = 2}, prog), {.host_threads = 2});
  e.run();
  auto const p = e.profile();
  CHECK(p.replicas == 2);
  REQUIRE(p.programs[0].size() == 1);
  CHECK(p.programs[0][0].kind == "collective");
  CHECK(p.programs[0][0].label == "cross-replica sum 'grads' 376832 B");
  CHECK(p.collective_bytes() == bytes);
  CHECK(tb::report::json(p).find("\"replicas\": 2") != std::string::npos);
  CHECK(tb::report::summary(p).find("cross-replica collectives: 376832 bytes per replica reduced") != std::string::npos);
}

TEST_CASE("replicas: misuse is refused with typed errors") {
  tb::Graph g(tb::targets::tiny(2));
  auto x = g.add_variable<float>({4}, "x");
  auto flag = g.add_variable<bool>({1}, "flag");
  auto b = g.add_variable<bool>({4}, "b");
  auto k = g.add_variable<std::int32_t>({4}, "k");
  std::vector<float> const cv{1, 2, 3, 4};
  auto c = g.add_constant<float>({4}, std::span<float const>(cv), "c");
  for (auto const& t : {x, flag, b, k}) tb::map_linearly(g, t);
  tb::map_linearly(g, c);
  tb::Sequence prog;
  tb::ops::map_in_place(g, prog, _1 + 1.0f, x);
  CHECK_THROWS_WITH_AS(tb::compile(g, {.replicas = 0}, prog), "compile: replicas must be at least 1", tb::option_error);
  tb::Engine e(tb::compile(g, {.replicas = 2}, prog), {.host_threads = 2});
  CHECK_THROWS_WITH_AS(e.read<float>(x, 2), "replica: replica 2 out of range (the executable has 2 replica(s))",
                       tb::index_error);
  CHECK_THROWS_WITH_AS(e.write(x, 5, std::vector<float>(4)), "replica: replica 5 out of range (the executable has 2 replica(s))",
                       tb::index_error);
  CHECK_THROWS_WITH_AS(e.replica(2), "replica: replica 2 out of range (the executable has 2 replica(s))", tb::index_error);
  auto in = g.add_host_to_device_fifo<float>("in", 4);
  tb::Engine e2(tb::compile(g, {.replicas = 2}, tb::stream_in(in, x)), {.host_threads = 1});
  std::vector<float> buf(4);
  CHECK_THROWS_WITH_AS(e2.connect(in, 3, buf), "connect: replica 3 out of range (the executable has 2 replica(s))",
                       tb::index_error);
  CHECK_THROWS_WITH_AS(e.read<float>(x),
                       "read: the executable has 2 replicas, each with its own copy of the tensor: name one "
                       "(engine.read<T>(t, replica))",
                       tb::replica_error);
  CHECK_THROWS_WITH_AS(tb::all_reduce(b, tb::CollectiveOp::sum, "b"),
                       "all_reduce: 'b' holds bool; reduce u8, i32, u32, f16 or f32 tensors", tb::type_error);
  CHECK_THROWS_WITH_AS(tb::all_reduce(k, tb::CollectiveOp::mean, "k"),
                       "all_reduce: the mean of 'k' (i32) needs a floating-point tensor; use CollectiveOp::sum for "
                       "integers",
                       tb::type_error);
  CHECK_THROWS_WITH_AS(tb::compile(g, tb::all_reduce(c, tb::CollectiveOp::sum, "c")),
                       "all_reduce: the destination 'c' is a constant", tb::error);
  CHECK_THROWS_WITH_AS(tb::compile(g, tb::all_reduce(x.reshape({1, 4}).broadcast({2, 4}), tb::CollectiveOp::sum, "bx")),
                       doctest::Contains("more than once (a broadcast view cannot be written)"), tb::write_conflict_error);
  // Replicas run in lockstep in one process: a flag that differs between them stops the run.
  tb::Engine d(tb::compile(g, {.replicas = 2}, tb::if_(flag, prog)), {.host_threads = 2});
  d.write(flag, 0, std::vector<bool>{true});
  d.write(flag, 1, std::vector<bool>{false});
  CHECK_THROWS_WITH_AS(d.run(),
                       "engine: the replicas' control flow diverged: the flag 'flag' is true in replica 0 but false in "
                       "replica 1 (replicas must take the same branches: derive flags from replicated data)",
                       tb::replica_error);
}

TEST_CASE("replicas: a collective belongs after a pipeline, not in a stage") {
  tb::Graph g(tb::targets::tiny(2, 64 * 1024, 2));
  auto x = g.add_variable<float>({4}, "x");
  g.set_tile_mapping(x, 0);
  tb::Sequence body;
  tb::ops::cross_replica_sum_in_place(body, x, "x");
  CHECK_THROWS_WITH_AS(tb::compile(g, tb::pipeline({.micro_batches = 2}, tb::stage(g.shard(0), body))),
                       "all_reduce: 'x' is inside pipeline stage 0; reduce across replicas after the pipeline (the "
                       "stages' sums are complete there)",
                       tb::error);
}
