// samples/basic: the Poplar tutorial graph, the same model sharded over 4 IPUs, and a multi-tile stencil
// whose halos move in exchange phases ("hello superstep"), with its profile.
#include <tilebsp/tilebsp.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace tb = tilebsp;

/// out = sum of the inputs, elementwise.
struct Sum {
  BOOST_HANA_DEFINE_STRUCT(Sum, (tb::input_list<float>, in), (tb::output<float>, out));
  void compute() {
    for (std::size_t i = 0; i < out.size(); ++i) {
      float s = 0;
      for (auto x : in) s += x[i];
      out[i] = s;
    }
  }
};

/// One Jacobi step of a 1-D heat equation on a tile's chunk, with one halo value from each neighbour.
struct Heat {
  BOOST_HANA_DEFINE_STRUCT(Heat, (tb::input<float>, left), (tb::input<float>, u), (tb::input<float>, right),
                           (tb::output<float>, next), (tb::param<float>, alpha));
  void compute() {
    std::size_t const n = u.size();
    for (std::size_t i = 0; i < n; ++i) {
      float const l = i == 0 ? left[0] : u[i - 1];
      float const r = i + 1 == n ? right[0] : u[i + 1];
      next[i] = u[i] + alpha * (l - 2 * u[i] + r);
    }
  }
  std::uint64_t cycle_estimate() const { return 30 + 4 * u.size(); }
};

std::string show(std::vector<float> const& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(static_cast<int>(v[i]));
  return s + "]";
}

/// The tutorial: a=[1,1], b=[0,1], c=[1,5]; o1 = a+b, o2 = a+c, out = o1+o2.
void tutorial() {
  tb::Graph g{tb::targets::ipu_mk2()};
  auto a = g.add_constant<float>({2}, {1, 1}, "a");
  auto b = g.add_constant<float>({2}, {0, 1}, "b");
  auto c = g.add_constant<float>({2}, {1, 5}, "c");
  auto o1 = g.add_variable<float>({2}, "o1"), o2 = g.add_variable<float>({2}, "o2");
  auto out = g.add_variable<float>({2}, "out");
  for (auto const& t : {a, b, c, o1, o2, out}) g.set_tile_mapping(t, 0);
  auto first = g.add_compute_set("o1, o2"), second = g.add_compute_set("out");
  g.add_vertex<Sum>(first, 0, std::vector{a, b}, o1);
  g.add_vertex<Sum>(first, 0, std::vector{a, c}, o2);
  g.add_vertex<Sum>(second, 0, std::vector{o1, o2}, out);
  tb::Engine engine{tb::compile(g, tb::seq(tb::execute(first), tb::execute(second)))};
  engine.run();
  std::cout << "tutorial: " << show(engine.read<float>(out)) << "\n";
}

/// The same model over 4 IPUs: o1 on shard 0, o2 on shard 1, o3 = b+c on shard 2, out = o1+o2+o3 on shard 3.
void sharded() {
  tb::Graph g{tb::targets::ipu_mk2(4)};
  std::vector<tb::Graph> shard;
  for (std::size_t i = 0; i < 4; ++i) shard.push_back(g.shard(i));
  std::vector<tb::Tensor> a, b, c, o(3);
  tb::Sequence prog;
  auto out_cs = g.add_compute_set("out");
  std::vector<tb::Tensor> inputs;  // o1, o2, o3 copied to shard 3
  for (std::size_t i = 0; i < 3; ++i) {
    auto& s = shard[i];
    auto const tag = std::to_string(i);
    a.push_back(s.add_constant<float>({2}, {1, 1}, "a" + tag));
    b.push_back(s.add_constant<float>({2}, {0, 1}, "b" + tag));
    c.push_back(s.add_constant<float>({2}, {1, 5}, "c" + tag));
    o[i] = s.add_variable<float>({2}, "o" + std::to_string(i + 1));
    for (auto const& t : {a[i], b[i], c[i], o[i]}) s.set_tile_mapping(t, 0);
    auto cs = g.add_compute_set("o" + std::to_string(i + 1));
    std::vector<tb::Tensor> ins = i == 0 ? std::vector{a[i], b[i]} : i == 1 ? std::vector{a[i], c[i]} : std::vector{b[i], c[i]};
    s.add_vertex<Sum>(cs, 0, ins, o[i]);
    prog.add(tb::execute(cs));
    auto in = shard[3].add_variable<float>({2}, "in" + std::to_string(i + 1));
    shard[3].set_tile_mapping(in, 0);
    inputs.push_back(in);
  }
  for (std::size_t i = 0; i < 3; ++i) prog.add(tb::copy(o[i], inputs[i]));  // one inter-IPU exchange
  auto out = shard[3].add_variable<float>({2}, "out");
  shard[3].set_tile_mapping(out, 0);
  shard[3].add_vertex<Sum>(out_cs, 0, inputs, out);
  prog.add(tb::execute(out_cs));
  tb::Engine engine{tb::compile(g, prog)};
  engine.run();
  std::cout << "sharded over 4 IPUs: " << show(engine.read<float>(out)) << "\n";
  tb::Profile const p = engine.profile();
  std::cout << "  estimated inter-IPU traffic: " << p.inter_ipu_bytes() << " bytes over IPU-Links, "
            << p.estimated_cycles() << " cycles in all\n";
}

/// Hello superstep: a heat equation over every tile of an IPU; each step exchanges one halo value with each
/// neighbour (a ring), then every tile computes its chunk.
void hello_superstep() {
  tb::Graph g{tb::targets::ipu_mk2()};
  std::size_t const tiles = g.num_tiles(), per = 256, n = tiles * per;
  auto u = g.add_variable<float>({n}, "u"), next = g.add_variable<float>({n}, "next");
  auto left = g.add_variable<float>({tiles}, "left"), right = g.add_variable<float>({tiles}, "right");
  tb::map_linearly(g, u);
  tb::map_linearly(g, next);
  tb::map_linearly(g, left);
  tb::map_linearly(g, right);
  auto cs = g.add_compute_set("heat");
  tb::Sequence halos;
  for (std::size_t t = 0; t < tiles; ++t) {
    std::size_t const lo = t * per, hi = lo + per;
    g.add_vertex<Heat>(cs, t, left.slice(t, t + 1), u.slice(lo, hi), right.slice(t, t + 1), next.slice(lo, hi), 0.25f);
    std::size_t const l = (lo + n - 1) % n, r = hi % n;
    halos.add(tb::copy(u.slice(l, l + 1), left.slice(t, t + 1)));
    halos.add(tb::copy(u.slice(r, r + 1), right.slice(t, t + 1)));
  }
  int const steps = 200;
  auto prog = tb::repeat(steps, tb::seq(std::move(halos), tb::execute(cs), tb::copy(next, u)));
  tb::Engine engine{tb::compile(g, prog), {.profiling = true}};
  std::vector<float> init(n, 0.0f);
  init[n / 2] = 1000.0f;  // a heat spike in the middle
  engine.write(u, init);
  engine.run();
  auto result = engine.read<float>(u);
  double total = 0;
  for (float v : result) total += v;
  bool const ok = std::abs(total - 1000.0) < 1e-2 && result[n / 2] < 1000.0f && result[n / 2 + 10] > 0.0f;
  std::printf("halo exchange: %s (heat conserved: %.4f, centre %.3f after %d supersteps on %zu tiles)\n",
              ok ? "ok" : "WRONG", total, result[n / 2], steps, tiles);
  std::cout << tb::report::summary(engine.profile());
}

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::cout << "usage: basic\n  Runs the tutorial graph, its 4-IPU sharded version and a multi-tile stencil.\n";
    return 0;
  }
  tutorial();
  sharded();
  hello_superstep();
}
