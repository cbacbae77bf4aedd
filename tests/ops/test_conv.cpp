// ops::conv, conv_backward_input, conv_weight_gradients / conv_weight_update against a naive double-precision
// reference (PopLibs-style tolerances), the host kernel against the vertices (bitwise), plan_conv's
// availableMemoryProportion contract, errors, and determinism across host thread counts.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace tb = tilebsp;

namespace {

using tbt::values;

/// Naive reference of the three passes in double precision, straight from the definition.
struct Reference {
  tb::ConvParams p;
  std::size_t rank, cin, cout, G;
  std::vector<std::size_t> in, out, k;
  explicit Reference(tb::ConvParams const& q) : p(q), rank(q.rank()) {
    cin = static_cast<std::size_t>(q.input_channels), cout = static_cast<std::size_t>(q.output_channels);
    G = static_cast<std::size_t>(q.groups);
    auto const of = q.output_field();
    for (std::size_t d = 0; d < rank; ++d) {
      in.push_back(static_cast<std::size_t>(q.input_field[d]));
      out.push_back(of[d]);
      k.push_back(static_cast<std::size_t>(q.kernel_shape[d]));
    }
  }
  static std::size_t count(std::vector<std::size_t> const& s) {
    std::size_t n = 1;
    for (auto v : s) n *= v;
    return n;
  }
  static std::vector<std::size_t> unflatten(std::size_t i, std::vector<std::size_t> const& s) {
    std::vector<std::size_t> r(s.size());
    for (std::size_t d = s.size(); d-- > 0;) r[d] = i % s[d], i /= s[d];
    return r;
  }
  /// Input position (flat) read by output position o and tap t, or -1 for padding / dilation holes.
  long source(std::vector<std::size_t> const& o, std::vector<std::size_t> const& t) const {
    long flat = 0;
    for (std::size_t d = 0; d < rank; ++d) {
      long const v = long(o[d]) * p.stride_of(d) + long(t[d]) * p.kernel_dilation_of(d) - p.padding_lower_of(d);
      long const di = p.input_dilation_of(d);
      if (v < 0 || v % di != 0 || v / di >= long(in[d])) return -1;
      flat = flat * long(in[d]) + v / di;
    }
    return flat;
  }
  /// Calls f(n, input position, output position, group, tap index, ci, co) for every product term.
  template <class F>
  void terms(F&& f) const {
    std::size_t const P = count(out), T = count(k), I = count(in);
    (void)I;
    for (std::size_t n = 0; n < static_cast<std::size_t>(p.batch); ++n)
      for (std::size_t op = 0; op < P; ++op)
        for (std::size_t t = 0; t < T; ++t) {
          long const ip = source(unflatten(op, out), unflatten(t, k));
          if (ip < 0) continue;
          for (std::size_t g = 0; g < G; ++g)
            for (std::size_t ci = 0; ci < cin; ++ci)
              for (std::size_t co = 0; co < cout; ++co) f(n, std::size_t(ip), op, g, t, ci, co);
        }
  }
  std::size_t xi(std::size_t n, std::size_t ip, std::size_t g, std::size_t ci) const {
    return (n * count(in) + ip) * G * cin + g * cin + ci;
  }
  std::size_t yi(std::size_t n, std::size_t op, std::size_t g, std::size_t co) const {
    return (n * count(out) + op) * G * cout + g * cout + co;
  }
  std::size_t wi(std::size_t g, std::size_t t, std::size_t ci, std::size_t co) const {
    return ((g * count(k) + t) * cin + ci) * cout + co;
  }
};

template <class T>
std::vector<double> as_double(std::vector<T> const& v) {
  std::vector<double> r;
  for (auto x : v) r.push_back(static_cast<float>(x));
  return r;
}

/// The reference value of each result and the rounding-error bound of an f32 chain of its terms: gamma_n *
/// sum |term| (n terms, unit roundoff 2^-24; Higham, Accuracy and Stability of Numerical Algorithms, 3.1).
struct Want {
  std::vector<double> v, err;
  std::vector<std::size_t> n;
  explicit Want(std::size_t size) : v(size), err(size), n(size) {}
  void add(std::size_t i, double term) {
    v[i] += term;
    err[i] += std::abs(term);
    ++n[i];
  }
  void finish() {
    for (std::size_t i = 0; i < v.size(); ++i) err[i] *= static_cast<double>(n[i]) * 0x1p-24;
  }
};

/// Counts elements outside the tolerance: exact for +-1 data, else rel 0.01 / abs 1e-6 (f32), 0.1 / 1e-5 (f16)
/// — plus the rounding bound of the summation, without which a result that cancels to nearly zero (|want| ~
/// 1e-5 from terms of magnitude 1) fails the absolute tolerance in any summation order.
template <class T>
std::size_t mismatches(std::vector<T> const& got, Want const& want, bool ones) {
  bool const f16 = std::is_same_v<T, tb::half>;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.v.size(); ++i) {
    double const v = static_cast<float>(got[i]), w = want.v[i];
    bool const ok = ones ? v == w : std::abs(v - w) <= (f16 ? 1e-5 : 1e-6) + (f16 ? 0.1 : 0.01) * std::abs(w) + want.err[i];
    bad += !ok;
  }
  return bad;
}

struct Results {
  std::vector<float> out, dx, dw, w2;
};

/// Builds all three passes of `params` on `target` (and an SGD update of a copy of the weights), runs them with
/// host kernels and with vertices (which must agree bitwise), and checks each against the reference.
template <class T>
Results check(tb::Target const& target, tb::ConvParams const& params, bool ones, tb::ConvOptions o = {},
              std::size_t threads = 2, bool compare_vertices = true, bool allow_out_of_memory = false) {
  std::string const label = target.name + " " + params.describe() + (ones ? " +-1" : "") + " amp " +
                            std::to_string(o.available_memory_proportion) + (std::is_same_v<T, tb::half> ? " f16" : " f32");
  INFO(label);
  tb::Graph g{target};
  tb::Sequence prog;
  auto x = g.add_variable<T>(params.input_shape(), "x");
  auto w = g.add_variable<T>(params.weights_shape(), "w");
  auto w2 = g.add_variable<T>(params.weights_shape(), "w2");
  auto dy = g.add_variable<T>(params.output_shape(), "dy");
  for (auto const& t : {x, w, w2, dy}) tb::map_linearly(g, t);
  float const scale = -0.5f;
  auto const out = tb::ops::conv(g, prog, x, w, params, o);
  auto const dx = tb::ops::conv_backward_input(g, prog, dy, w, params, o);
  auto const dw = tb::ops::conv_weight_gradients(g, prog, dy, x, params, o);
  tb::ops::conv_weight_update(g, prog, dy, x, w2, scale, params, o);
  auto const exe = tb::compile(g, {.allow_out_of_memory = allow_out_of_memory}, prog);
  auto const xv = values<T>(x.num_elements(), ones, 1), wv = values<T>(w.num_elements(), ones, 2);
  auto const dyv = values<T>(dy.num_elements(), ones, 3), w2v = values<T>(w.num_elements(), ones, 4);
  auto const run = [&](bool host_kernels) {
    tb::Engine e{exe, {.host_threads = threads, .host_kernels = host_kernels}};
    e.write(x, xv);
    e.write(w, wv);
    e.write(w2, w2v);
    e.write(dy, dyv);
    e.run();
    return std::array{e.read<T>(out), e.read<T>(dx), e.read<T>(dw), e.read<T>(w2)};
  };
  auto const got = run(true);
  if (compare_vertices) {
    auto const by_vertices = run(false);
    for (std::size_t i = 0; i < 4; ++i) {
      INFO("result " << i);
      CHECK(std::memcmp(got[i].data(), by_vertices[i].data(), got[i].size() * sizeof(T)) == 0);
    }
  }
  Reference const ref(params);
  Want yo(out.num_elements()), gx(x.num_elements()), gw(w.num_elements());
  auto const X = as_double(xv), W = as_double(wv), DY = as_double(dyv);
  ref.terms([&](std::size_t n, std::size_t ip, std::size_t op, std::size_t gi, std::size_t t, std::size_t ci, std::size_t co) {
    yo.add(ref.yi(n, op, gi, co), X[ref.xi(n, ip, gi, ci)] * W[ref.wi(gi, t, ci, co)]);
    gx.add(ref.xi(n, ip, gi, ci), DY[ref.yi(n, op, gi, co)] * W[ref.wi(gi, t, ci, co)]);
    gw.add(ref.wi(gi, t, ci, co), X[ref.xi(n, ip, gi, ci)] * DY[ref.yi(n, op, gi, co)]);
  });
  for (auto* wt : {&yo, &gx, &gw}) wt->finish();
  Want upd(gw.v.size());
  auto const W2 = as_double(w2v);
  for (std::size_t i = 0; i < gw.v.size(); ++i) {
    upd.v[i] = W2[i] + scale * gw.v[i];
    upd.err[i] = std::abs(scale) * gw.err[i];
  }
  CHECK(mismatches(got[0], yo, ones) == 0);
  CHECK(mismatches(got[1], gx, ones) == 0);
  CHECK(mismatches(got[2], gw, ones) == 0);
  CHECK(mismatches(got[3], upd, ones) == 0);
  Results r;
  for (auto v : got[0]) r.out.push_back(static_cast<float>(v));
  for (auto v : got[1]) r.dx.push_back(static_cast<float>(v));
  for (auto v : got[2]) r.dw.push_back(static_cast<float>(v));
  for (auto v : got[3]) r.w2.push_back(static_cast<float>(v));
  return r;
}

tb::ConvParams conv2d(std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t kh, std::int64_t kw, std::int64_t cin,
                      std::int64_t cout, std::int64_t groups) {
  tb::ConvParams p;
  p.batch = n;
  p.input_field = {h, w};
  p.kernel_shape = {kh, kw};
  p.input_channels = cin;
  p.output_channels = cout;
  p.groups = groups;
  return p;
}
tb::ConvParams padded(tb::ConvParams p, std::int64_t pad) {
  p.padding_lower = p.padding_upper = std::vector<std::int64_t>(p.rank(), pad);
  return p;
}
tb::ConvParams strided(tb::ConvParams p, std::vector<std::int64_t> s) {
  p.stride = std::move(s);
  return p;
}

}  // namespace

TEST_CASE("conv: groups 1, 2, 3, 4, 32 and depthwise, f32, exact for +-1 data") {
  auto const t = tb::targets::tiny(16, 256 * 1024);
  for (bool ones : {true, false}) {
    check<float>(t, padded(conv2d(1, 8, 8, 3, 3, 4, 8, 1), 1), ones);
    check<float>(t, conv2d(2, 7, 9, 3, 3, 3, 2, 2), ones);
    check<float>(t, padded(conv2d(1, 6, 5, 3, 3, 5, 7, 3), 1), ones);
    check<float>(t, padded(conv2d(1, 6, 6, 3, 3, 8, 8, 4), 1), ones);
    check<float>(t, padded(conv2d(1, 8, 8, 3, 3, 4, 4, 32), 1), ones);
    check<float>(t, padded(conv2d(2, 9, 7, 3, 3, 1, 1, 24), 1), ones);  // depthwise
    check<float>(t, padded(conv2d(1, 5, 5, 3, 3, 1, 2, 8), 1), ones);   // depthwise multiplier 2
    check<float>(t, padded(conv2d(2, 6, 7, 3, 3, 2, 2, 6), 1), ones);   // 2 channels per group: interleaved lanes
    check<float>(t, padded(conv2d(1, 5, 6, 3, 3, 2, 2, 3), 1), ones);   // ... a vector with unused groups
    check<float>(t, padded(conv2d(1, 6, 6, 3, 3, 4, 4, 8), 1), ones);   // 4 channels per group, 8 groups
  }
}

TEST_CASE("conv: strided depthwise layers read their source in place, the same bits on 1, 2 and 3 threads") {
  // Groups of one channel filling whole vectors at stride 2: the host splits rows before groups, and the kernels
  // read the source where it lies (simd::detail::forward_in_place), the positions next to padding from boxes of
  // their own; a 5x5 kernel on a small field keeps the boxes. Host kernels and vertices agree bitwise (check), and
  // neither depends on the threads.
  auto const t = tb::targets::tiny(16, 256 * 1024);
  for (bool ones : {true, false})
    for (auto const& p : {strided(padded(conv2d(2, 31, 29, 3, 3, 1, 1, 32), 1), {2, 2}),
                          strided(padded(conv2d(1, 60, 60, 5, 5, 1, 1, 32), 2), {2, 2}),
                          strided(padded(conv2d(1, 9, 9, 5, 5, 1, 1, 32), 2), {2, 2})}) {
      Results const one = check<float>(t, p, ones, {}, 1);
      for (std::size_t threads : {2, 3}) {
        Results const more = check<float>(t, p, ones, {}, threads, false);
        REQUIRE(more.out.size() == one.out.size());
        CHECK(std::memcmp(more.out.data(), one.out.data(), one.out.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(more.dx.data(), one.dx.data(), one.dx.size() * sizeof(float)) == 0);
      }
    }
}

TEST_CASE("conv: odd channel counts, strides, padding, dilations, batch") {
  auto const t = tb::targets::tiny(16, 256 * 1024);
  for (bool ones : {true, false}) {
    check<float>(t, padded(conv2d(1, 4, 3, 3, 3, 65, 129, 1), 1), ones);       // 65 in, 129 out per group
    check<float>(t, padded(conv2d(1, 5, 4, 2, 2, 65, 129, 2), 0), ones);       // ... in two groups
    check<float>(t, padded(conv2d(1, 6, 7, 3, 3, 16, 6, 2), 1), ones);         // transposed weights: 4 x 4 blocks + 2
    check<float>(t, padded(conv2d(2, 3, 2, 3, 3, 4, 4, 2), 1), ones);          // rows of 2: the weight-gradient row block's edges
    check<float>(t, padded(conv2d(1, 2, 3, 3, 3, 16, 32, 1), 1), ones);        // ... of 3, two vectors of lanes
    check<float>(t, strided(padded(conv2d(2, 11, 10, 3, 3, 4, 6, 2), 2), {2, 2}), ones);  // 3x3 stride 2 pad 2
    check<float>(t, strided(conv2d(1, 12, 13, 3, 3, 3, 5, 1), {2, 3}), ones);   // asymmetric stride
    auto asym = conv2d(1, 7, 6, 3, 3, 4, 4, 2);
    asym.padding_lower = {1, 1};
    asym.padding_upper = {2, 2};
    check<float>(t, asym, ones);                                                  // asymmetric padding
    check<float>(t, strided(padded(conv2d(2, 13, 11, 5, 5, 3, 8, 1), 2), {2, 2}), ones);  // 5x5 stride 2
    auto kd = padded(conv2d(1, 9, 9, 3, 3, 4, 4, 4), 2);
    kd.kernel_dilation = {2, 2};
    check<float>(t, kd, ones);                                                    // kernel dilation
    auto id = padded(conv2d(1, 5, 6, 3, 3, 3, 4, 1), 1);
    id.input_dilation = {2, 1};
    check<float>(t, id, ones);                                                    // input dilation
    check<float>(t, padded(conv2d(4, 5, 5, 3, 3, 8, 8, 2), 1), ones);             // batch 4
    // A group with a vector of output channels or more reads an f32 source in place where a row's padding is at
    // most its first and last input, and through a box otherwise.
    check<float>(t, padded(conv2d(2, 7, 9, 3, 3, 12, 16, 2), 2), ones);           // padding 2: the box
    auto edge = conv2d(1, 6, 8, 3, 3, 10, 16, 1);
    edge.padding_lower = {0, 2};
    edge.padding_upper = {1, 0};
    check<float>(t, edge, ones);                                                  // ... on one side only
    edge.padding_lower = {2, 0};
    edge.padding_upper = {0, 1};
    check<float>(t, edge, ones);                                                  // in place, one side padded
    auto rows = padded(conv2d(1, 9, 7, 3, 3, 5, 16, 2), 2);
    rows.kernel_dilation = {2, 1};
    rows.padding_lower = rows.padding_upper = {2, 1};
    check<float>(t, rows, ones);                                                  // in place, dilated kernel rows
    rows.kernel_dilation = {1, 1};
    rows.input_dilation = {2, 1};
    check<float>(t, rows, ones);                                                  // input dilation: the box
  }
}

TEST_CASE("conv: 1-D, 3-D, 1x1 fields, thin fields, pointwise and stem-like layers") {
  auto const t = tb::targets::tiny(16, 256 * 1024);
  for (bool ones : {true, false}) {
    tb::ConvParams c1;
    c1.batch = 2;
    c1.input_field = {17};
    c1.kernel_shape = {3};
    c1.channels(6, 8, 2);
    c1.padding_lower = {1};
    c1.padding_upper = {0};
    check<float>(t, c1, ones);                                                    // 1-D
    c1.stride = {2};
    check<float>(t, c1, ones);                                                    // 1-D strided
    tb::ConvParams c3;
    c3.input_field = {4, 5, 3};
    c3.kernel_shape = {2, 3, 3};
    c3.channels(4, 8, 2);
    c3.padding_lower = c3.padding_upper = {0, 1, 1};
    check<float>(t, c3, ones);                                                    // 3-D
    check<float>(t, padded(conv2d(2, 1, 1, 3, 3, 8, 16, 1), 1), ones);            // a 1x1 field
    check<float>(t, padded(conv2d(1, 1, 128, 1, 3, 4, 4, 4), 0), ones);           // a thin field
    check<float>(t, conv2d(2, 5, 7, 1, 1, 16, 24, 1), ones);                      // pointwise: the matmul path
    check<float>(t, conv2d(1, 5, 7, 1, 1, 16, 24, 4), ones);                      // grouped pointwise
    check<float>(t, strided(conv2d(1, 8, 8, 1, 1, 16, 32, 1), {2, 2}), ones);     // strided 1x1: subsampled
    check<float>(t, strided(conv2d(2, 6, 9, 1, 1, 8, 12, 2), {3, 3}), ones);      // grouped, stride 3, subsampled
    check<float>(t, strided(conv2d(1, 9, 7, 1, 1, 16, 8, 1), {2, 3}), ones);      // stride not dividing: general
    check<float>(t, strided(padded(conv2d(1, 20, 20, 7, 7, 3, 16, 1), 3), {2, 2}), ones);  // stem-like 7x7/2
  }
}

TEST_CASE("conv: the four ResNeXt-101 32x4d grouped layers at batch 1") {
  auto const t = tb::targets::ipu_mk2(1);
  check<float>(t, padded(conv2d(1, 56, 56, 3, 3, 4, 4, 32), 1), false);
  check<float>(t, padded(conv2d(1, 28, 28, 3, 3, 8, 8, 32), 1), false);
  check<float>(t, padded(conv2d(1, 14, 14, 3, 3, 16, 16, 32), 1), false);
  check<float>(t, padded(conv2d(1, 7, 7, 3, 3, 32, 32, 32), 1), true);
}

TEST_CASE("conv: tiny targets force multi-tile splits, serial steps and reductions") {
  // Small tiles (the operands themselves do not fit: the test is about the splits' values).
  for (auto const& t : {tb::targets::tiny(4, 16 * 1024), tb::targets::tiny(7, 32 * 1024)})
    for (double amp : {0.0, 0.05, 0.3, 1.0}) {
      check<float>(t, padded(conv2d(2, 10, 9, 3, 3, 24, 16, 2), 1), true, {.available_memory_proportion = amp}, 2, true,
                   true);
      check<float>(t, strided(padded(conv2d(1, 12, 12, 3, 3, 40, 8, 1), 1), {2, 2}), false,
                   {.available_memory_proportion = amp}, 2, true, true);
      check<float>(t, padded(conv2d(1, 9, 9, 3, 3, 8, 8, 8), 1), false, {.available_memory_proportion = amp}, 3, true, true);
      // Row blocks over interleaved columns (4 channels per group), continued across serial steps.
      check<float>(t, padded(conv2d(1, 5, 12, 3, 3, 4, 4, 8), 1), true, {.available_memory_proportion = amp}, 2, true, true);
    }
  // Many input channels on a small field: the plan splits them across tiles and reduces the partials.
  auto const mk2 = tb::targets::ipu_mk2(1);
  auto const deep = padded(conv2d(1, 4, 4, 3, 3, 256, 16, 1), 1);
  tb::Graph g{mk2};
  CHECK(tb::ops::plan_conv(g, deep).j_split > 1);
  check<float>(mk2, deep, true);
  check<float>(mk2, deep, true, {.partials = tb::f16});  // f16 partials: exact for +-1 data
}

TEST_CASE("conv: f16 operands with f32 or f16 partials") {
  auto const t = tb::targets::tiny(8, 128 * 1024);
  for (bool ones : {true, false}) {
    check<tb::half>(t, padded(conv2d(1, 6, 6, 3, 3, 4, 4, 8), 1), ones);
    check<tb::half>(t, padded(conv2d(2, 5, 6, 3, 3, 6, 10, 1), 1), ones, {.partials = tb::f16});
    check<tb::half>(t, padded(conv2d(1, 8, 8, 3, 3, 16, 8, 1), 1), ones,
                    {.available_memory_proportion = 0.05, .partials = tb::f16});
    check<tb::half>(t, conv2d(2, 4, 4, 1, 1, 8, 8, 1), ones);
  }
}

TEST_CASE("conv: results do not depend on the number of host threads") {
  auto const t = tb::targets::tiny(8, 64 * 1024);
  auto const p = strided(padded(conv2d(2, 11, 10, 3, 3, 12, 12, 3), 1), {1, 2});
  auto const base = check<float>(t, p, false, {.available_memory_proportion = 0.1}, 1, false);
  for (std::size_t threads : {2, 3, 7}) {
    auto const r = check<float>(t, p, false, {.available_memory_proportion = 0.1}, threads, false);
    CHECK(r.out == base.out);
    CHECK(r.dx == base.dx);
    CHECK(r.dw == base.dw);
    CHECK(r.w2 == base.w2);
  }
}

TEST_CASE("conv: winograd F(2x2, 3x3) forward and backward input") {
  tb::ConvOptions const wino{.algorithm = tb::ConvAlgorithm::winograd};
  auto const t = tb::targets::tiny(16, 256 * 1024);
  for (bool ones : {true, false}) {
    check<float>(t, padded(conv2d(1, 8, 8, 3, 3, 4, 8, 1), 1), ones, wino);
    check<float>(t, padded(conv2d(2, 7, 9, 3, 3, 3, 5, 2), 1), ones, wino);       // odd fields: half tiles
    check<float>(t, conv2d(1, 6, 5, 3, 3, 16, 16, 1), ones, wino);                // no padding
    check<float>(t, padded(conv2d(1, 9, 6, 3, 3, 6, 4, 2), 2), ones, wino);       // padding 2
    auto asym = conv2d(1, 7, 6, 3, 3, 4, 4, 2);
    asym.padding_lower = {1, 0};
    asym.padding_upper = {2, 1};
    check<float>(t, asym, ones, wino);                                            // asymmetric padding
    check<float>(t, padded(conv2d(1, 4, 3, 3, 3, 65, 129, 1), 1), ones, wino);    // 65 in, 129 out: partial vectors
    check<float>(t, padded(conv2d(2, 1, 9, 3, 3, 4, 4, 1), 1), ones, wino);       // one row
    check<float>(t, padded(conv2d(1, 6, 6, 3, 3, 16, 16, 4), 1), ones, wino);     // groups
  }
  // Splits across tiles (rows at odd boundaries, serial steps, reductions): vertices and host kernels agree bitwise.
  for (auto const& tiny : {tb::targets::tiny(4, 16 * 1024), tb::targets::tiny(7, 32 * 1024)})
    for (double amp : {0.0, 0.3, 1.0}) {
      tb::ConvOptions o = wino;
      o.available_memory_proportion = amp;
      check<float>(tiny, padded(conv2d(2, 10, 9, 3, 3, 24, 16, 2), 1), true, o, 2, true, true);
      check<float>(tiny, padded(conv2d(1, 11, 7, 3, 3, 8, 20, 1), 1), false, o, 3, true, true);
    }
  // f16 operands, f32 or f16 partials.
  auto const t8 = tb::targets::tiny(8, 128 * 1024);
  for (bool ones : {true, false}) {
    check<tb::half>(t8, padded(conv2d(1, 6, 6, 3, 3, 16, 16, 1), 1), ones, wino);
    tb::ConvOptions o = wino;
    o.partials = tb::f16;
    check<tb::half>(t8, padded(conv2d(2, 5, 6, 3, 3, 6, 10, 1), 1), ones, o);
  }
  // Thread counts.
  auto const p = padded(conv2d(2, 11, 10, 3, 3, 12, 20, 3), 1);
  tb::ConvOptions o = wino;
  o.available_memory_proportion = 0.1;
  auto const base = check<float>(t8, p, false, o, 1, false);
  for (std::size_t threads : {2, 3, 7}) {
    auto const r = check<float>(t8, p, false, o, threads, false);
    CHECK(r.out == base.out);
    CHECK(r.dx == base.dx);
  }
}

namespace {
/// The host kernel keeps weights it prepared (Winograd's transform, the direct form's packed panels) across runs
/// while only the host writes them; a new write must be seen by the next run, on every thread count, bitwise as the
/// vertices compute it.
void check_weights_kept_per_host_write(tb::Target const& t, tb::ConvParams const& params, tb::ConvOptions const& o) {
  tb::Graph g{t};
  tb::Sequence prog;
  auto x = g.add_variable<float>(params.input_shape(), "x");
  auto w = g.add_variable<float>(params.weights_shape(), "w");
  for (auto const& v : {x, w}) tb::map_linearly(g, v);
  auto const y = tb::ops::conv(g, prog, x, w, params, o);
  auto const exe = tb::compile(g, {}, prog);
  auto const xv = values<float>(x.num_elements(), false, 1);
  auto const w1 = values<float>(w.num_elements(), false, 2), w2 = values<float>(w.num_elements(), false, 5);
  auto const fresh = [&](std::vector<float> const& wv, bool host_kernels) {
    tb::Engine e{exe, {.host_threads = 2, .host_kernels = host_kernels}};
    e.write(x, xv);
    e.write(w, wv);
    e.run();
    return e.read<float>(y);
  };
  auto const want1 = fresh(w1, false), want2 = fresh(w2, false);
  REQUIRE(want1 != want2);
  for (std::size_t threads : {1, 2, 3}) {
    INFO("threads " << threads);
    tb::Engine e{exe, {.host_threads = threads}};
    e.write(x, xv);
    e.write(w, w1);
    e.run();
    CHECK(e.read<float>(y) == want1);
    e.run();
    CHECK(e.read<float>(y) == want1);
    e.write(w, w2);
    e.run();
    CHECK(e.read<float>(y) == want2);
    e.write(w, w1);
    e.run();
    CHECK(e.read<float>(y) == want1);
  }
}
}  // namespace

TEST_CASE("conv: winograd weights transformed once per host write") {
  check_weights_kept_per_host_write(tb::targets::tiny(8, 128 * 1024), padded(conv2d(2, 9, 10, 3, 3, 16, 24, 2), 1),
                                    {.algorithm = tb::ConvAlgorithm::winograd});
}

TEST_CASE("conv: direct weights packed once per host write") {
  // Small fields with many channels: plans that split the reduction channels into parts (each part's panels packed
  // once), output channels that end in a partial column pair, groups, and a 5-wide kernel.
  tb::ConvOptions const direct{.algorithm = tb::ConvAlgorithm::direct};
  auto const t = tb::targets::tiny(16, 128 * 1024);
  bool parts = false;
  for (auto const& params : {padded(conv2d(2, 5, 5, 3, 3, 96, 40, 1), 1), padded(conv2d(1, 6, 5, 3, 3, 64, 72, 2), 1),
                             conv2d(2, 7, 7, 3, 3, 48, 33, 1), padded(conv2d(1, 5, 6, 5, 5, 40, 24, 1), 2)}) {
    INFO("input " << tb::to_string(params.input_shape()) << " weights " << tb::to_string(params.weights_shape()));
    tb::Graph g{t};
    parts = parts || tb::ops::plan_conv(g, params, tb::ConvPass::forward, tb::ElementType::f32, direct).reduce;
    check_weights_kept_per_host_write(t, params, direct);
  }
  CHECK(parts);  // at least one plan sums parts of the reduction
}

TEST_CASE("conv: the automatic algorithm, and winograd where it does not apply") {
  auto const mk2 = tb::targets::ipu_mk2(1);
  tb::Graph g{mk2};
  auto const layer = [](std::int64_t h, std::int64_t c) { return padded(conv2d(4, h, h, 3, 3, c, c, 32), 1); };
  auto const algorithm = [&](tb::ConvParams const& p, tb::ConvPass pass, tb::ConvOptions o = {}) {
    std::string const d = tb::ops::plan_conv(g, p, pass, tb::f32, o).describe();
    return d.find("winograd") != std::string::npos ? "winograd" : d.find("direct") != std::string::npos ? "direct" : "neither";
  };
  // 16 or more channels per group each way and a field of 8x8 or more: Winograd; fewer: direct.
  CHECK(algorithm(layer(14, 16), tb::ConvPass::forward) == std::string("winograd"));
  CHECK(algorithm(layer(14, 16), tb::ConvPass::backward_input) == std::string("winograd"));
  CHECK(algorithm(layer(7, 32), tb::ConvPass::forward) == std::string("direct"));
  CHECK(algorithm(layer(28, 8), tb::ConvPass::forward) == std::string("direct"));
  CHECK(algorithm(padded(conv2d(1, 3, 3, 3, 3, 32, 32, 1), 1), tb::ConvPass::forward) == std::string("direct"));
  CHECK(algorithm(layer(14, 16), tb::ConvPass::forward, {.algorithm = tb::ConvAlgorithm::direct}) == std::string("direct"));
  CHECK(algorithm(layer(28, 8), tb::ConvPass::forward, {.algorithm = tb::ConvAlgorithm::winograd}) == std::string("winograd"));
  CHECK(algorithm(layer(14, 16), tb::ConvPass::weight_update, {.algorithm = tb::ConvAlgorithm::winograd}) == std::string("neither"));
  // Winograd asked for where it does not apply.
  tb::ConvOptions const wino{.algorithm = tb::ConvAlgorithm::winograd};
  auto const refuses = [&](tb::ConvParams const& p) {
    tb::Graph h{mk2};
    tb::Sequence prog;
    auto x = h.add_variable<float>(p.input_shape(), "x");
    auto w = h.add_variable<float>(p.weights_shape(), "w");
    tb::map_linearly(h, x);
    tb::map_linearly(h, w);
    CHECK_THROWS_WITH_AS(tb::ops::conv(h, prog, x, w, p, wino),
                         doctest::Contains("conv: the winograd algorithm needs a 2-D forward or backward-input pass of a 3x3 kernel "
                                           "with stride 1 and no dilation"),
                         tb::option_error);
  };
  refuses(strided(padded(conv2d(1, 8, 8, 3, 3, 4, 4, 1), 1), {2, 2}));
  refuses(padded(conv2d(1, 8, 8, 5, 5, 4, 4, 1), 2));
  auto dilated = padded(conv2d(1, 9, 9, 3, 3, 4, 4, 1), 2);
  dilated.kernel_dilation = {2, 2};
  refuses(dilated);
  tb::ConvParams c1;
  c1.input_field = {17};
  c1.kernel_shape = {3};
  c1.channels(4, 4, 1);
  refuses(c1);
}

TEST_CASE("add_bias: acts += bias along channels") {
  tb::Graph g{tb::targets::tiny(4)};
  tb::Sequence prog;
  auto a = g.add_variable<float>({2, 3, 4}, "a"), b = g.add_variable<float>({4}, "b");
  tb::map_linearly(g, a);
  tb::map_linearly(g, b);
  tb::ops::add_bias(g, prog, a, b);
  {
    tb::Graph other{tb::targets::tiny(4)};
    tb::Sequence p2;
    auto a2 = other.add_variable<float>({2, 3, 4}, "a");
    CHECK_THROWS_WITH_AS(tb::ops::add_bias(other, p2, a2, other.add_variable<float>({3}, "c")),
                         "add_bias: bias [3] does not match the channels of [2, 3, 4]", tb::shape_error);
    CHECK_THROWS_WITH_AS(tb::ops::add_bias(other, p2, a2, other.add_variable<tb::half>({4}, "h")),
                         "add_bias: bias is f16 but activations are f32", tb::type_error);
  }
  tb::Engine e{tb::compile(g, prog), {.host_threads = 2}};
  std::vector<float> av(24);
  for (std::size_t i = 0; i < 24; ++i) av[i] = float(i);
  e.write(a, av);
  e.write(b, std::vector<float>{1, 2, 3, 4});
  e.run();
  auto const got = e.read<float>(a);
  for (std::size_t i = 0; i < 24; ++i) CHECK(got[i] == float(i) + float(i % 4 + 1));
}

TEST_CASE("conv: errors") {
  tb::Graph g{tb::targets::tiny(4)};
  tb::Sequence prog;
  auto const p = padded(conv2d(1, 6, 6, 3, 3, 4, 4, 2), 1);
  auto x = g.add_variable<float>(p.input_shape(), "x");
  auto w = g.add_variable<float>(p.weights_shape(), "w");
  auto dy = g.add_variable<float>(p.output_shape(), "dy");
  CHECK_THROWS_WITH_AS(tb::ops::conv(g, prog, x, w, p, {.available_memory_proportion = 1.5}),
                       "conv: available_memory_proportion must be in [0, 1], got 1.500000", tb::option_error);
  CHECK_THROWS_WITH_AS(tb::ops::conv_backward_input(g, prog, dy, w, p, {.available_memory_proportion = -1}),
                       "conv_backward_input: available_memory_proportion must be in [0, 1], got -1.000000",
                       tb::option_error);
  CHECK_THROWS_WITH_AS(tb::ops::plan_conv(g, p, tb::ConvPass::weight_update, tb::f32, {.available_memory_proportion = 2}),
                       "plan_conv: available_memory_proportion must be in [0, 1], got 2.000000", tb::option_error);
  auto wrong = g.add_variable<float>({2, 3, 3, 4, 5}, "wrong");
  CHECK_THROWS_WITH_AS(tb::ops::conv(g, prog, x, wrong, p),
                       "conv: weights are [2, 3, 3, 4, 5] but the parameters need [2, 3, 3, 4, 4]", tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::conv(g, prog, dy.slice(0, 1, 3), w, p),
                       "conv: inputs are [1, 6, 6, 1] but the parameters need [1, 6, 6, 8]", tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::conv_weight_update(g, prog, dy, x, wrong, 0.1f, p),
                       "conv_weight_update: weights are [2, 3, 3, 4, 5] but the parameters need [2, 3, 3, 4, 4]",
                       tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::conv_weight_gradients(g, prog, wrong, x, p),
                       "conv_weight_gradients: output gradients are [2, 3, 3, 4, 5] but the parameters need [1, 6, 6, 8]",
                       tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::conv_backward_input(g, prog, dy, wrong, p),
                       "conv_backward_input: weights are [2, 3, 3, 4, 5] but the parameters need [2, 3, 3, 4, 4]",
                       tb::shape_error);
  auto zero = p;
  zero.batch = 0;
  CHECK_THROWS_WITH_AS(tb::ops::conv(g, prog, x, w, zero), "conv: ConvParams: batch must be positive, got 0", tb::shape_error);
  auto neg = p;
  neg.kernel_shape = {3, -1};
  CHECK_THROWS_WITH_AS(tb::ops::conv(g, prog, x, w, neg), "conv: ConvParams: kernel_shape[1] must be positive, got -1",
                       tb::shape_error);
  auto big = p;
  big.kernel_shape = {9, 3};
  CHECK_THROWS_WITH_AS(tb::ops::conv(g, prog, x, w, big),
                       "conv: ConvParams: the kernel is larger than the padded input in dimension 0: 9 (dilated) > 8 "
                       "(dilated and padded)",
                       tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ConvParams{}.channels(65, 128, 2), "ConvParams: input channels 65 are not divisible into 2 groups",
                       tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::conv(g, prog, x, g.add_variable<tb::half>(p.weights_shape(), "wh"), p),
                       "conv: inputs are f32 but weights are f16", tb::type_error);
  CHECK_THROWS_WITH_AS(tb::ops::conv(g, prog, g.add_variable<std::int32_t>(p.input_shape(), "xi"), w, p),
                       "conv: inputs must be f32 or f16, not i32", tb::type_error);
  CHECK_THROWS_WITH_AS(tb::ops::conv(g, prog, x, w, p, {.partials = tb::i32}), "conv: partials must be f32 or f16, not i32",
                       tb::type_error);
  // conv_with_output: the output's shape and type, and no variable shared with an operand.
  auto joined = g.add_variable<float>({1, 6, 6, 12}, "joined");
  CHECK_THROWS_WITH_AS(tb::ops::conv_with_output(g, prog, x, w, joined.slice(0, 7, 3), p),
                       "conv_with_output: the output is [1, 6, 6, 7] but the parameters need [1, 6, 6, 8]",
                       tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::conv_with_output(g, prog, x, w, g.add_variable<tb::half>(p.output_shape(), "yh"), p),
                       "conv_with_output: the output is f16 but the result is f32", tb::type_error);
  auto both = g.add_variable<float>({1, 6, 6, 16}, "both");
  CHECK_THROWS_WITH_AS(tb::ops::conv_with_output(g, prog, both.slice(0, 8, 3), w, both.slice(8, 16, 3), p),
                       "conv_with_output: the output shares a variable with the inputs", tb::write_conflict_error);
  CHECK_THROWS_WITH_AS(tb::ops::conv_with_output(g, prog, x, w, dy, p, {.available_memory_proportion = 2}),
                       "conv_with_output: available_memory_proportion must be in [0, 1], got 2.000000",
                       tb::option_error);
  CHECK_THROWS_WITH_AS(tb::ops::conv_with_output(g, prog, x, wrong, dy, p),
                       "conv_with_output: weights are [2, 3, 3, 4, 5] but the parameters need [2, 3, 3, 4, 4]",
                       tb::shape_error);
  // conv_accumulate: the same checks of its accumulator.
  CHECK_THROWS_WITH_AS(tb::ops::conv_accumulate(g, prog, x, w, joined.slice(0, 7, 3), p),
                       "conv_accumulate: the output is [1, 6, 6, 7] but the parameters need [1, 6, 6, 8]",
                       tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ops::conv_accumulate(g, prog, x, w, g.add_variable<tb::half>(p.output_shape(), "ah"), p),
                       "conv_accumulate: the output is f16 but the result is f32", tb::type_error);
  CHECK_THROWS_WITH_AS(tb::ops::conv_accumulate(g, prog, both.slice(0, 8, 3), w, both.slice(8, 16, 3), p),
                       "conv_accumulate: the output shares a variable with the inputs", tb::write_conflict_error);
  CHECK_THROWS_WITH_AS(tb::ops::conv_accumulate(g, prog, x, wrong, dy, p),
                       "conv_accumulate: weights are [2, 3, 3, 4, 5] but the parameters need [2, 3, 3, 4, 4]",
                       tb::shape_error);
  CHECK(prog.size() == 0);  // nothing added by the refused calls
}

TEST_CASE("plan_conv: temporary memory within availableMemoryProportion, monotone in it") {
  std::vector<std::string> warnings;
  auto const previous = tb::set_warning_handler([&](std::string_view w) { warnings.emplace_back(w); });
  std::vector<tb::ConvParams> const problems{
      padded(conv2d(4, 56, 56, 3, 3, 4, 4, 32), 1), padded(conv2d(4, 7, 7, 3, 3, 32, 32, 32), 1),
      strided(padded(conv2d(4, 224, 224, 7, 7, 3, 64, 1), 3), {2, 2}), padded(conv2d(2, 28, 28, 3, 3, 64, 64, 1), 1),
      strided(conv2d(1, 30, 30, 3, 3, 40, 8, 1), {2, 2})};
  std::vector<tb::Target> const machines{tb::targets::ipu_mk2(1), tb::targets::tiny(16, 64 * 1024), tb::targets::tiny(4, 16 * 1024)};
  std::size_t relaxed = 0;
  for (auto const& t : machines) {
    tb::Graph g{t};
    for (auto const& pr : problems)
      for (auto kind : {tb::ConvPass::forward, tb::ConvPass::backward_input, tb::ConvPass::weight_update}) {
        std::uint64_t previous_temp = 0;
        for (double amp : {0.0, 0.05, 0.1, 0.3, 0.6, 1.0}) {
          auto const p = tb::ops::plan_conv(g, pr, kind, tb::f32, {.available_memory_proportion = amp});
          INFO(p.describe());
          CHECK(p.bound == static_cast<std::uint64_t>(amp * static_cast<double>(t.bytes_per_tile)));
          if (p.fit == tb::PlanFit::within_bound) CHECK(p.temp_bytes <= p.bound);
          if (p.fit == tb::PlanFit::relaxed) {
            CHECK(p.temp_bytes <= p.relaxed_bound);
            ++relaxed;
          }
          CHECK((amp == 0.0) == (p.fit == tb::PlanFit::least_memory));
          CHECK(p.tiles <= t.num_tiles());
          CHECK(p.g_split * p.g_tile >= p.problem.groups);
          CHECK(p.j_split * p.j_tile >= p.problem.j);
          CHECK(p.c_split * p.c_tile >= p.problem.c);
          CHECK(p.n_split * p.n_tile >= p.problem.batch);
          CHECK(p.r_split * p.r_tile >= p.rows());
          if (amp > 0.0) CHECK(p.temp_bytes >= previous_temp);  // lower AMP never needs more temporary memory
          previous_temp = p.temp_bytes;
        }
      }
  }
  CHECK(relaxed > 0);  // the 16 KiB tiles cannot hold the big layers' windows
  CHECK(warnings.size() >= relaxed);
  tb::set_warning_handler(previous);
}
