// ops::max_pool's definitions: the vertices, the host kernels, the builders and the entry points declared in
// <tilebsp/ops/pool.hpp>. Included by that header (header-only) or compiled once into tilebsp::compiled
// (src/pool.cpp); include it directly to use the vertices.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/ops/pool.hpp>

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/half.hpp>
#include <tilebsp/ops/detail/common.hpp>
#include <tilebsp/ops/detail/host_work.hpp>
#include <tilebsp/ops/detail/instances.hpp>
#include <tilebsp/ops/detail/rank6.hpp>
#include <tilebsp/plan/conv.hpp>
#include <tilebsp/plan/detail/conv.hpp>
#include <tilebsp/program/host_path.hpp>
#include <tilebsp/program/programs.hpp>
#include <tilebsp/simd/arch.hpp>
#include <tilebsp/simd/pool.hpp>
#include <tilebsp/vertex/add_vertex.hpp>

#include <boost/hana/define_struct.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tilebsp {
namespace ops {
namespace detail {

/// The loop of a pooling as a depthwise convolution's (simd::ConvLoop, rank 3, extent-1 dimensions first).
inline simd::ConvLoop pool_loop(char const* op, Shape const& in, PoolParams const& p) {
  if (in.size() < 3 || in.size() > 5)
    throw shape_error(std::string(op) + ": input must be [N, field..., C] with a field of 1 to 3 dimensions, got " +
                      to_string(in));
  std::size_t const r = in.size() - 2;
  auto const same_rank = [&](char const* what, std::vector<std::int64_t> const& v, bool optional) {
    if ((optional && v.empty()) || v.size() == r) return;
    throw shape_error(std::string(op) + ": " + what + " has " + std::to_string(v.size()) +
                      " dimensions but the input field has " + std::to_string(r));
  };
  same_rank("kernel_shape", p.kernel_shape, false);
  same_rank("stride", p.stride, true);
  same_rank("padding_lower", p.padding_lower, true);
  same_rank("padding_upper", p.padding_upper, true);
  if (product(in) == 0) throw shape_error(std::string(op) + ": input " + to_string(in) + " is empty");
  simd::ConvLoop L;
  for (std::size_t d = 0; d < r; ++d) {
    auto const at = [&](std::vector<std::int64_t> const& v, std::int64_t def) { return v.empty() ? def : v[d]; };
    std::int64_t const k = p.kernel_shape[d], s = at(p.stride, 1), pl = at(p.padding_lower, 0),
                       pu = at(p.padding_upper, 0), n = static_cast<std::int64_t>(in[d + 1]);
    std::string const where = "[" + std::to_string(d) + "]";
    if (k <= 0) throw shape_error(std::string(op) + ": kernel_shape" + where + " must be positive, got " + std::to_string(k));
    if (s <= 0) throw shape_error(std::string(op) + ": stride" + where + " must be positive, got " + std::to_string(s));
    // A window made of padding only would have no maximum.
    if (pl < 0 || pu < 0 || pl >= k || pu >= k)
      throw shape_error(std::string(op) + ": padding" + where + " must be in [0, kernel) = [0, " + std::to_string(k) +
                        "), got " + std::to_string(pl) + " and " + std::to_string(pu));
    if (n + pl + pu < k)
      throw shape_error(std::string(op) + ": kernel_shape" + where + " = " + std::to_string(k) +
                        " is larger than the padded input (" + std::to_string(n + pl + pu) + ")");
    L.dim[3 - r + d] = {(n + pl + pu - k) / s + 1, n, k, s, 1, -pl, 1};
  }
  return L;
}

/// A pooling vertex's work: its loop, its batch x positions x channels range, and where its gathered input
/// window and output block sit in the rank-6 activation views (group dimension of extent 1).
struct PoolGeometry {
  simd::ConvLoop loop;
  simd::ConvRange range;
  Block6 src, dst;
};

/// The fewest channels a pooling piece splits off: smaller chunks would use more tiles of a modelled IPU, but each
/// piece of a channels-last tensor is then a gather of short runs, which costs a host more than it saves.
inline constexpr std::size_t channel_chunk = 32;

/// dst = max over each window of src (one tile's piece).
template <class T>
struct MaxPoolVertex {
  BOOST_HANA_DEFINE_STRUCT(MaxPoolVertex, (input<T>, src), (output<T>, dst), (param<PoolGeometry>, geom));
  void compute() {
    PoolGeometry const& g = geom;
    simd::max_pool_range<T>(g.loop, g.range, g.src.operand(src.data()), g.dst.operand(dst.data()));
  }
  std::uint64_t cycle_estimate() const {
    // One vector max per 64 bits of channels and tap, as the IPU's f32v2 / f16v4 max instructions do.
    PoolGeometry const& g = geom;
    std::uint64_t const lanes = sizeof(T) == 2 ? 4 : 2;
    return 30 + (dst.size() / lanes + 1) * static_cast<std::uint64_t>(g.loop.taps());
  }
};

/// What a pooling-gradient vertex owns and reads: its band, and the blocks (rank-6, as in PoolGeometry) of the
/// input and output rows its windows touch, gathered, and of its own input gradient.
struct PoolGradGeometry {
  simd::ConvLoop loop;
  simd::PoolBand band;
  Block6 x, y, dx;
};

/// Gradient of max pooling for one band of one image and channel chunk: simd::max_pool_grad_band on its gathered blocks.
template <class T>
struct MaxPoolGradVertex {
  BOOST_HANA_DEFINE_STRUCT(MaxPoolGradVertex, (input<T>, in), (input<T>, out), (input<T>, grad_out),
                           (output<T>, grad_in), (param<PoolGradGeometry>, geom));
  void compute() {
    PoolGradGeometry const& g = geom;
    // f32 sums in place; f16 sums in an f32 buffer and rounds once, where windows overlap.
    std::vector<float> buffer(std::is_same_v<T, float> ? 0 : grad_in.size(), 0.0f);
    float* acc = buffer.data();
    if constexpr (std::is_same_v<T, float>) acc = grad_in.data();
    simd::max_pool_grad_band<T>(g.loop, g.band, g.x.operand(in.data()), g.y.operand(out.data()), g.y.operand(grad_out.data()),
                          g.dx.operand(acc));
    if constexpr (!std::is_same_v<T, float>)
      for (std::size_t i = 0; i < buffer.size(); ++i) grad_in.data()[i] = static_cast<T>(buffer[i]);
  }
  std::uint64_t cycle_estimate() const {
    PoolGradGeometry const& g = geom;
    return 30 + grad_in.size() + 2 * out.size() * static_cast<std::uint64_t>(g.loop.taps());
  }
};

/// The host kernel of max_pool: max_pool_range over the tensors where they are (no gathered windows), in units
/// of one image's output rows (UnitQueue: a share per thread, then what the others left). An output's value does
/// not depend on the unit that computes it, so the results are the vertices' bits for any number of threads. Needs
/// the input to be one variable with its channels contiguous (the output is max_pool's own); otherwise the vertices
/// run.
template <class T>
class MaxPoolHostKernel {
 public:
  MaxPoolHostKernel(simd::ConvLoop const& L, std::size_t row_dim, Tensor const& in6, Tensor const& out6) {
    auto s = std::make_shared<State>(State{L, row_dim, static_cast<std::int64_t>(in6.dim(0)),
                                           static_cast<std::int64_t>(in6.dim(5)), in6.affine(), out6.affine()});
    // max_pool_range reads and writes each position's channels as one contiguous run.
    auto const ok = [&](auto const& a) { return a && (s->channels <= 1 || a->strides[5] == 1); };
    if (ok(s->src) && ok(s->dst) && s->src->var != s->dst->var) s_ = std::move(s);
  }
  HostKernel kernel() const { return host_kernel_of(s_); }

 private:
  struct Bound {
    std::byte *src, *dst;
    std::shared_ptr<UnitQueue> queue;
  };
  struct State {
    simd::ConvLoop loop;
    std::size_t rd;
    std::int64_t batch, channels;
    std::optional<tilebsp::core::detail::Affine> src, dst;

    Bound bind(HostBinding const& at) const { return {at(src->var), at(dst->var), std::make_shared<UnitQueue>(at.threads)}; }
    void run(Bound const& at, unsigned t, unsigned threads) const {
      auto const s6 = affine_operand6<T const>(*src, at.src);
      auto const d6 = affine_operand6<T>(*dst, at.dst);
      std::int64_t const rows = loop.dim[rd].out;
      // At least 4 units per thread where the rows allow.
      std::int64_t const per_image = std::min(rows, std::max<std::int64_t>(1, (4 * static_cast<std::int64_t>(threads) + batch - 1) / batch));
      std::int64_t const chunk = (rows + per_image - 1) / per_image, chunks = (rows + chunk - 1) / chunk;
      at.queue->run(static_cast<std::size_t>(batch * chunks), t, threads, [&](std::size_t u) {
        simd::ConvRange r;
        auto const x = static_cast<std::int64_t>(u);
        r.n0 = x / chunks, r.n1 = r.n0 + 1;
        r.g0 = 0, r.g1 = 1, r.c0 = 0, r.c1 = channels, r.j0 = 0, r.j1 = 1;
        for (std::size_t d = 0; d < 3; ++d) r.lo[d] = 0, r.hi[d] = loop.dim[d].out;
        r.lo[rd] = x % chunks * chunk, r.hi[rd] = std::min(rows, r.lo[rd] + chunk);
        simd::max_pool_range<T>(loop, r, s6, d6);
      });
    }
  };
  std::shared_ptr<State const> s_;
};

/// The host kernel of max_pool_backward: simd::max_pool_grad_band over the tensors where they are, in units of one
/// image's channel blocks, each its image's whole field as one band (the values do not depend on the bands).
/// Needs each tensor to be one variable whose channels are contiguous; otherwise the vertices run.
template <class T>
class MaxPoolGradHostKernel {
 public:
  MaxPoolGradHostKernel(simd::ConvLoop const& L, std::size_t row_dim, Tensor const& in6, Tensor const& out6, Tensor const& dy6,
                        Tensor const& dx6) {
    auto s = std::make_shared<State>();
    s->loop = L;
    s->rd = row_dim;
    s->batch = static_cast<std::int64_t>(in6.dim(0));
    s->channels = static_cast<std::int64_t>(in6.dim(5));
    Tensor const* ts[4] = {&in6, &out6, &dy6, &dx6};
    for (std::size_t k = 0; k < 4; ++k) {
      auto a = ts[k]->affine();
      if (!a || (s->channels > 1 && a->strides[5] != 1)) return;
      s->t[k] = std::move(*a);
    }
    for (std::size_t k = 0; k < 3; ++k)
      if (s->t[k].var == s->t[3].var) return;
    s_ = std::move(s);
  }
  HostKernel kernel() const { return host_kernel_of(s_); }

 private:
  struct Bound {
    std::byte* p[4];
    std::shared_ptr<UnitQueue> queue;
  };
  struct State {
    simd::ConvLoop loop;
    std::size_t rd = 0;
    std::int64_t batch = 0, channels = 0;
    tilebsp::core::detail::Affine t[4];  // in, out, grad_out, grad_in

    Bound bind(HostBinding const& at) const {
      return {{at(t[0].var), at(t[1].var), at(t[2].var), at(t[3].var)}, std::make_shared<UnitQueue>(at.threads)};
    }
    void run(Bound const& at, unsigned thread, unsigned threads) const {
      std::int64_t constexpr block = 64;
      std::int64_t const blocks = (channels + block - 1) / block;
      auto const x = affine_operand6<T const>(t[0], at.p[0]), y = affine_operand6<T const>(t[1], at.p[1]),
                 dy = affine_operand6<T const>(t[2], at.p[2]);
      auto const dx = affine_operand6<T>(t[3], at.p[3]);
      auto const& L = loop.dim;
      at.queue->run(static_cast<std::size_t>(batch * blocks), thread, threads, [&](std::size_t u) {
        simd::PoolBand b;
        b.rd = rd, b.n = static_cast<std::int64_t>(u) / blocks, b.lo = 0, b.hi = L[rd].in;
        b.c0 = static_cast<std::int64_t>(u) % blocks * block, b.c1 = std::min(channels, b.c0 + block);
        if constexpr (std::is_same_v<T, float>) {
          simd::max_pool_grad_band<T>(loop, b, x, y, dy, dx);
        } else {
          // f16 sums in f32 and rounds once, as the vertices do.
          Block6 const blk{{b.n, 0, 0, 0, 0, b.c0}, {1, L[0].in, L[1].in, L[2].in, 1, b.c1 - b.c0}};
          thread_local std::vector<float> buffer;
          buffer.resize(static_cast<std::size_t>(L[0].in * L[1].in * L[2].in * (b.c1 - b.c0)));
          auto const acc = blk.operand(buffer.data());
          simd::max_pool_grad_band<T>(loop, b, x, y, dy, acc);
          for (std::int64_t x0 = 0; x0 < L[0].in; ++x0)
            for (std::int64_t x1 = 0; x1 < L[1].in; ++x1)
              for (std::int64_t x2 = 0; x2 < L[2].in; ++x2) {
                float const* from = acc.at(b.n, x0, x1, x2, 0, b.c0);
                T* to = dx.at(b.n, x0, x1, x2, 0, b.c0);
                for (std::int64_t c = 0; c < b.c1 - b.c0; ++c) to[c] = static_cast<T>(from[c]);
              }
        }
      });
    }
  };
  std::shared_ptr<State const> s_;
};

}  // namespace detail

template <class Tn, class>
Tn max_pool(Graph& g, Sequence& prog, Tn const& in, PoolParams const& params, std::string const& name) {
  OperatorScope const scope(g, "max_pool", name, simd::isa_name());
  g.check_tensor("max_pool", in);
  if (in.element_type() != ElementType::f32 && in.element_type() != ElementType::f16)
    throw type_error("max_pool: input must be f32 or f16, not " + std::string(name_of(in.element_type())));
  simd::ConvLoop const L = detail::pool_loop("max_pool", in.shape(), params);
  std::size_t const r = in.rank() - 2, N = in.dim(0), C = in.dim(in.rank() - 1);
  Shape out_shape{N};
  for (std::size_t d = 0; d < r; ++d) out_shape.push_back(static_cast<std::size_t>(L.dim[3 - r + d].out));
  out_shape.push_back(C);
  Tensor out = g.add_variable(in.element_type(), out_shape, name);
  Tensor const in6 = detail::activations6(in, r, 1), out6 = detail::activations6(out, r, 1);

  // Pieces: batch x output rows of the leading real dimension, then channel chunks (of at least channel_chunk)
  // when there are fewer rows than tiles.
  std::size_t const rd = 3 - r, rows = static_cast<std::size_t>(L.dim[rd].out), tiles = g.num_tiles();
  std::size_t const units = N * rows;
  std::size_t const c_split = std::min((C + detail::channel_chunk - 1) / detail::channel_chunk, std::max<std::size_t>(1, tiles / units));
  std::size_t const c_tile = (C + c_split - 1) / c_split;
  std::size_t const r_split = std::min(units, tiles / c_split == 0 ? 1 : tiles / c_split);
  std::size_t const pieces = r_split * c_split;
  ComputeSet const cs = g.add_compute_set(name);
  HostKernel host;
  detail::with_float_type(in.element_type(), [&]<class T>() {
    host = detail::MaxPoolHostKernel<T>(L, rd, in6, out6).kernel();
    for (std::size_t i = 0; i < pieces; ++i) {
      std::size_t const ir = i / c_split, ic = i % c_split;
      std::size_t const u0 = ir * units / r_split, u1 = (ir + 1) * units / r_split;
      std::size_t const c0 = ic * c_tile, c1 = std::min(C, c0 + c_tile);
      if (c0 >= c1 || u0 >= u1) continue;
      std::size_t const tile = i * tiles / pieces;
      // A piece's units are whole rows of one image or whole images: cut at image boundaries.
      for (std::size_t u = u0; u < u1;) {
        std::size_t const n = u / rows, row0 = u % rows, row1 = std::min(rows, row0 + (u1 - u));
        detail::PoolGeometry geo;
        geo.loop = L;
        simd::ConvRange& rg = geo.range;
        rg.n0 = static_cast<std::int64_t>(n), rg.n1 = rg.n0 + 1;
        rg.c0 = static_cast<std::int64_t>(c0), rg.c1 = static_cast<std::int64_t>(c1);
        rg.g0 = 0, rg.g1 = 1, rg.j0 = 0, rg.j1 = 1;
        detail::Index6 so{rg.n0, 0, 0, 0, 0, rg.c0}, ss{1, 0, 0, 0, 1, rg.c1 - rg.c0};
        for (std::size_t d = 0; d < 3; ++d) {
          rg.lo[d] = 0, rg.hi[d] = L.dim[d].out;
          if (d == rd) rg.lo[d] = static_cast<std::int64_t>(row0), rg.hi[d] = static_cast<std::int64_t>(row1);
          auto const [a, b] = tilebsp::plan::detail::source_range(L.dim[d], rg.lo[d], rg.hi[d]);
          so[d + 1] = a, ss[d + 1] = b - a;
        }
        geo.src = {so, ss};
        geo.dst = {{rg.n0, rg.lo[0], rg.lo[1], rg.lo[2], 0, rg.c0},
                   {1, rg.hi[0] - rg.lo[0], rg.hi[1] - rg.lo[1], rg.hi[2] - rg.lo[2], 1, rg.c1 - rg.c0}};
        Tensor const dst = geo.dst.of(out6);
        g.set_tile_mapping(dst, tile);
        g.add_vertex<detail::MaxPoolVertex<T>>(cs, tile, fetch(geo.src.of(in6)), dst, geo);
        u += row1 - row0;
      }
    }
  });
  prog.add(host_path(name, std::move(host), execute(cs)));
  return out;
}

template <class Tn, class>
Tn max_pool_backward(Graph& g, Sequence& prog, Tn const& in, Tn const& out, Tn const& grad_out, PoolParams const& params,
                    std::string const& name) {
  char const* op = "max_pool_backward";
  OperatorScope const scope(g, op, name, simd::isa_name());
  g.check_tensor(op, in);
  g.check_tensor(op, out);
  g.check_tensor(op, grad_out);
  if (in.element_type() != ElementType::f32 && in.element_type() != ElementType::f16)
    throw type_error(std::string(op) + ": input must be f32 or f16, not " + std::string(name_of(in.element_type())));
  simd::ConvLoop const L = detail::pool_loop(op, in.shape(), params);
  std::size_t const r = in.rank() - 2, N = in.dim(0), C = in.dim(in.rank() - 1);
  Shape pooled{N};
  for (std::size_t d = 0; d < r; ++d) pooled.push_back(static_cast<std::size_t>(L.dim[3 - r + d].out));
  pooled.push_back(C);
  for (auto const* t : {&out, &grad_out}) {
    std::string const what = std::string(op) + (t == &out ? ": the pooled output is " : ": the output gradient is ");
    if (t->shape() != pooled)
      throw shape_error(what + to_string(t->shape()) + " but pooling " + to_string(in.shape()) + " gives " +
                        to_string(pooled));
    if (t->element_type() != in.element_type())
      throw type_error(what + std::string(name_of(t->element_type())) + " but the input is " +
                       std::string(name_of(in.element_type())));
  }
  Tensor grad_in = g.add_variable(in.element_type(), in.shape(), name);
  // Pieces: image x channel chunk (of at least channel_chunk) x band of input rows of the leading spatial
  // dimension, as many as the tiles allow. A piece owns its band's input gradient and reads the input and output
  // rows that the windows over it touch (overlapping windows make neighbouring pieces read the same rows, never
  // write the same elements).
  std::size_t const tiles = g.num_tiles(), rd = 3 - r;
  std::size_t const rows = static_cast<std::size_t>(L.dim[rd].in);
  std::size_t const c_split = std::min((C + detail::channel_chunk - 1) / detail::channel_chunk, std::max<std::size_t>(1, tiles / N));
  std::size_t const c_tile = (C + c_split - 1) / c_split;
  std::size_t const bands = std::clamp<std::size_t>(tiles / (N * c_split), 1, rows);
  std::size_t const pieces = N * c_split * bands;
  Tensor const in6 = detail::activations6(in, r, 1), out6 = detail::activations6(out, r, 1),
               dy6 = detail::activations6(grad_out, r, 1), dx6 = detail::activations6(grad_in, r, 1);
  ComputeSet const cs = g.add_compute_set(name);
  HostKernel host;
  detail::with_float_type(in.element_type(), [&]<class T>() {
    host = detail::MaxPoolGradHostKernel<T>(L, rd, in6, out6, dy6, dx6).kernel();
    for (std::size_t i = 0; i < pieces; ++i) {
      std::size_t const n = i / (c_split * bands), ic = i / bands % c_split, ib = i % bands;
      std::size_t const c0 = ic * c_tile, c1 = std::min(C, c0 + c_tile);
      if (c0 >= c1) continue;
      std::size_t const tile = i * tiles / pieces;
      detail::PoolGradGeometry geo;
      geo.loop = L;
      auto& b = geo.band;
      b.rd = rd, b.n = static_cast<std::int64_t>(n), b.c0 = static_cast<std::int64_t>(c0), b.c1 = static_cast<std::int64_t>(c1);
      b.lo = static_cast<std::int64_t>(ib * rows / bands), b.hi = static_cast<std::int64_t>((ib + 1) * rows / bands);
      auto const [o_lo, o_hi] = simd::pool_outputs_reading(L.dim[rd], b.lo, b.hi);
      auto const [x_lo, x_hi] = tilebsp::plan::detail::source_range(L.dim[rd], o_lo, o_hi);
      // Blocks over the whole field but dimension rd: the input rows the windows read (at least the band), the
      // output rows, the band.
      detail::Index6 const origin{b.n, 0, 0, 0, 0, b.c0};
      detail::Index6 full{1, L.dim[0].in, L.dim[1].in, L.dim[2].in, 1, b.c1 - b.c0};
      detail::Index6 outs{1, L.dim[0].out, L.dim[1].out, L.dim[2].out, 1, b.c1 - b.c0};
      auto const block = [&](detail::Index6 shape, std::int64_t lo, std::int64_t hi) {
        detail::Index6 o = origin;
        o[rd + 1] = lo, shape[rd + 1] = hi - lo;
        return detail::Block6{o, shape};
      };
      geo.x = block(full, std::min(x_lo, b.lo), std::max(x_hi, b.hi));
      geo.y = block(outs, o_lo, o_hi);
      geo.dx = block(full, b.lo, b.hi);
      Tensor const dx = geo.dx.of(dx6);
      g.set_tile_mapping(dx, tile);
      g.add_vertex<detail::MaxPoolGradVertex<T>>(cs, tile, fetch(geo.x.of(in6)), fetch(geo.y.of(out6)), fetch(geo.y.of(dy6)), dx,
                                                 geo);
    }
  });
  prog.add(host_path(name, std::move(host), execute(cs)));
  return grad_in;
}

}  // namespace ops
}  // namespace tilebsp
