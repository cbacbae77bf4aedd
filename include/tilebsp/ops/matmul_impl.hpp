// ops::matmul's definitions: the vertices, the host kernel, the builder and the entry points declared in
// <tilebsp/ops/matmul.hpp>. Included by that header (header-only) or compiled once into tilebsp::compiled
// (src/matmul.cpp); include it directly to use the vertices.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/ops/matmul.hpp>

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/ops/detail/common.hpp>
#include <tilebsp/ops/detail/host_task.hpp>
#include <tilebsp/ops/detail/instances.hpp>
#include <tilebsp/ops/map.hpp>
#include <tilebsp/plan/matmul.hpp>
#include <tilebsp/program/host_path.hpp>
#include <tilebsp/program/programs.hpp>
#include <tilebsp/simd/gemm.hpp>
#include <tilebsp/simd/partials.hpp>
#include <tilebsp/vertex/add_vertex.hpp>

#include <boost/hana/define_struct.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <concepts>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

namespace tilebsp {
namespace ops {
namespace detail {

/// c[g] (=|+=) a[g] * b[g] for each group g of the tile's piece, f32 accumulation.
template <class TA, class TW, bool Acc>
struct MatmulVertex {
  using Out = std::conditional_t<Acc, inout_view<TW, 3>, output_view<TW, 3>>;
  BOOST_HANA_DEFINE_STRUCT(MatmulVertex, (input_view<TA, 3>, a), (input_view<TA, 3>, b), (Out, c),
                           (param<float>, macs_per_cycle));
  static constexpr bool supervisor = true;
  void compute() {
    for (std::size_t g = 0; g < c.dim(0); ++g) {
      auto const ga = static_cast<std::ptrdiff_t>(g);
      simd::gemm(c.dim(1), c.dim(2), a.dim(2), 1.0f, simd::Matrix<TA>{a.data() + ga * a.stride(0), a.stride(1), a.stride(2)},
                 simd::Matrix<TA>{b.data() + ga * b.stride(0), b.stride(1), b.stride(2)}, Acc ? 1.0f : 0.0f,
                 simd::MatrixOut<TW>{c.data() + ga * c.stride(0), c.stride(1), c.stride(2)});
    }
  }
  std::uint64_t cycle_estimate() const {
    return tilebsp::plan::detail::matmul_vertex_cycles(macs_per_cycle, c.dim(0), c.dim(1), c.dim(2), a.dim(2), sizeof(TW));
  }
};

/// out (=|+=) alpha * (parts[0] + parts[1] + ...), summed in f32 in that order.
template <class TP, class TO, bool Acc>
struct MatmulReduce {
  using Out = std::conditional_t<Acc, inout_view<TO, 2>, output_view<TO, 2>>;
  BOOST_HANA_DEFINE_STRUCT(MatmulReduce, (input_view<TP, 3>, parts), (Out, out), (param<float>, alpha));
  static constexpr bool supervisor = true;
  void compute() {
    std::size_t const rows = out.dim(0), cols = out.dim(1), np = parts.dim(0);
    constexpr std::size_t L = simd::lanes;
    alignas(64) float acc[L];
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j0 = 0; j0 < cols; j0 += L) {
        std::size_t const w = std::min(L, cols - j0);
        simd::sum_partials<TP>(&parts(std::size_t{0}, i, j0), parts.stride(0), parts.stride(2), np, w, acc);
        simd::scale_into<TO, Acc>(acc, &out(i, j0), out.stride(1), w, alpha);
      }
  }
  std::uint64_t cycle_estimate() const {
    return tilebsp::plan::detail::matmul_reduce_cycles(out.dim(0) * out.dim(1), parts.dim(0), sizeof(TP));
  }
};

/// The host kernel of a matmul plan, the task of its host path: computes the whole product (every serial step and
/// the final reduction) bitwise as the vertices do — same K ranges, same kernel, same summation order — without
/// materialising partials. Work is divided by output blocks,
/// whose values do not depend on the division. Needs each operand to be one strided variable and the result not
/// to share a variable with an operand (else the vertices run).
template <class TA, class TP, class TO>
class MatmulHostKernel {
 public:
  MatmulHostKernel(MatmulPlan const& p, Tensor const& a3, Tensor const& b3, Tensor const& c3, float alpha) {
    auto s = std::make_shared<State>(State{p, a3.affine(), b3.affine(), c3.affine(), alpha});
    if (one_variable_each(s->a, s->b, s->c)) s_ = std::move(s);
  }
  HostKernel kernel() const { return host_kernel_of(s_); }

 private:
  /// B packed for the micro-kernel (simd::PackedB, ld floats per row of K, k rows per group) once per host write
  /// when no step writes it — weights, which oneDNN likewise packs once. Pieces are a group's column blocks, packed
  /// by the first unit that needs them into storage allocated at bind.
  struct PackedOperand {
    HostWriteCache cache;
    std::size_t ld, per_group, pieces_per_group;
    simd::detail::Scratch storage;  ///< 64-byte aligned
    float* data = nullptr;

    float* base(std::size_t g) const { return data + g * per_group; }
  };
  struct Bound {
    std::byte *a, *b, *c;
    std::shared_ptr<UnitQueue> queue;
    std::shared_ptr<PackedOperand> packed;  ///< null: B is written by the program (packed per call if at all)
  };
  struct State {
    MatmulPlan plan;
    std::optional<tilebsp::core::detail::Affine> a, b, c;
    float alpha;

    Bound bind(HostBinding const& at) const {
      Bound r{at(a->var), at(b->var), at(c->var), std::make_shared<UnitQueue>(), nullptr};
      auto const& q = plan.problem;
      bool const packable = !plan.reduce || (std::is_same_v<TP, float> && plan.k_step <= simd::gemm_kc);
      if (std::uint64_t const* writes = at.host_writes ? at.host_writes(b->var) : nullptr; writes && packable && q.k > 0) {
        std::size_t const pieces = (q.n + simd::gemm_nr - 1) / simd::gemm_nr, ld = pieces * simd::gemm_nr;
        r.packed = std::make_shared<PackedOperand>(HostWriteCache(writes, q.groups * pieces), ld, q.k * ld, pieces);
        r.packed->data = r.packed->storage.get(q.groups * q.k * ld);
      }
      return r;
    }

    void run(Bound const& at, unsigned /*t*/, unsigned threads) const {
      auto const& q = plan.problem;
      // Output blocks, handed out first come first served (a block's values do not depend on the thread or the
      // division), at least 2 per thread where the rows allow, so that a thread the machine slows down takes fewer
      // (finer blocks cost more than they balance on a quiet machine). Column panels first (each block reads or
      // packs only its own columns of B), at most 256 wide and about one per thread, or all columns when A dwarfs
      // B (M >= 4N: each block then reads only its own rows of A, the larger operand); then row blocks (a
      // multiple of the micro-kernel's rows).
      std::size_t const nr = simd::gemm_nr, mr = simd::gemm_mr, want = 2 * std::size_t{threads};
      auto const up = [](std::size_t v, std::size_t m) { return (v + m - 1) / m * m; };
      bool const tall = q.m >= 4 * q.n && q.n <= 256;
      std::size_t cc = q.n <= nr || tall ? q.n : std::min<std::size_t>(256, up(std::max(nr, (q.n + threads - 1) / threads), nr));
      std::size_t rc = q.m;
      auto const blocks = [&] { return q.groups * ((q.m + rc - 1) / rc) * ((q.n + cc - 1) / cc); };
      if (blocks() < want) {
        std::size_t const row_units = (want + blocks() - 1) / blocks();
        rc = std::min(q.m, up((q.m + row_units - 1) / row_units, mr));
      }
      std::size_t const mc = (q.m + rc - 1) / rc, nc = (q.n + cc - 1) / cc;
      at.queue->run(blocks(), threads, [&](std::size_t u) {
        std::size_t const g = u / (mc * nc), r0 = u / nc % mc * rc, c0 = u % nc * cc;
        block(at, g, r0, std::min(q.m, r0 + rc), c0, std::min(q.n, c0 + cc));
      });
    }
    void block(Bound const& at, std::size_t g, std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) const {
      auto const& q = plan.problem;
      auto const& sa = a->strides;
      auto const& sb = b->strides;
      auto const& sc = c->strides;
      auto const i = [](std::size_t v) { return static_cast<std::ptrdiff_t>(v); };
      TA const* pa = reinterpret_cast<TA const*>(at.a) + a->start + i(g) * sa[0] + i(r0) * sa[1];
      TA const* pb = reinterpret_cast<TA const*>(at.b) + b->start + i(g) * sb[0] + i(c0) * sb[2];
      TO* pc = reinterpret_cast<TO*>(at.c) + c->start + i(g) * sc[0] + i(r0) * sc[1] + i(c0) * sc[2];
      std::size_t const m = r1 - r0, n = c1 - c0;
      auto const av = [&](std::size_t k0) { return simd::Matrix<TA>{pa + i(k0) * sa[2], sa[1], sa[2]}; };
      auto const bv = [&](std::size_t k0) { return simd::Matrix<TA>{pb + i(k0) * sb[1], sb[1], sb[2]}; };
      simd::MatrixOut<TO> const out{pc, sc[1], sc[2]};
      // The tile steps over K range [k0, k1) as the vertices do: each step's gemm accumulates onto the previous.
      auto const for_steps = [&](std::size_t k0, std::size_t k1, auto&& f) { plan.serial().each(k0, k1, f); };
      // B packed once per host write (bitwise the same products): the layout of the calls below — the serial
      // steps' K ranges in gemm blocks, or the tiles' K ranges as gemm_ksum groups. Also where a call would read B
      // in place: contiguous panels stream better than rows far apart (the small-M shapes gain most).
      // Only plans whose K ranges start at 0 use it (bind: no partials path).
      float const* packed = nullptr;
      if (at.packed) {
        auto& p = *at.packed;
        float* base = p.base(g);
        p.cache.ensure(g * p.pieces_per_group + c0 / simd::gemm_nr, [&] {
          if (!plan.reduce)
            for_steps(0, q.k, [&](std::size_t, std::size_t s0, std::size_t s1) {
              simd::pack_b_panels(bv(s0), s1 - s0, n, simd::gemm_b_block(), base + s0 * p.ld, p.ld, c0);
            });
          else
            simd::pack_b_panels(bv(0), q.k, n, simd::gemm_b_block(plan.k_tile), base, p.ld, c0);
        });
        packed = base;
      }
      auto const steps = [&](std::size_t k0, std::size_t k1, auto dst) {
        for_steps(k0, k1, [&](std::size_t s, std::size_t s0, std::size_t s1) {
          float const beta = s > 0 ? 1.0f : 0.0f;
          if (packed) simd::gemm(m, n, s1 - s0, 1.0f, av(s0), simd::PackedB{packed + s0 * at.packed->ld, at.packed->ld, c0}, beta, dst);
          else simd::gemm(m, n, s1 - s0, 1.0f, av(s0), bv(s0), beta, dst);
        });
      };
      if (!plan.reduce) {
        steps(0, q.k, out);
        return;
      }
      bool const in_place = std::is_same_v<TO, float> && !q.accumulate && alpha == 1.0f;
      float* sum = nullptr;
      simd::MatrixOut<float> sv{};
      if constexpr (std::is_same_v<TO, float>) {
        if (in_place) sv = {pc, sc[1], sc[2]};
      }
      if (!in_place) {
        sum = scratch(0).get(m * n);
        sv = {sum, i(n), 1};
      }
      if (std::is_same_v<TP, float> && plan.k_step <= simd::gemm_kc) {
        // Groups are the tiles' K ranges, segments their serial steps: one pass, no partials in memory.
        if (packed) simd::gemm_ksum(m, n, q.k, plan.k_tile, plan.k_step, av(0), simd::PackedB{packed, at.packed->ld, c0}, sv);
        else simd::gemm_ksum(m, n, q.k, plan.k_tile, plan.k_step, av(0), bv(0), sv);
      } else {
        auto* part = reinterpret_cast<TP*>(scratch(1).get((m * n * sizeof(TP) + sizeof(float) - 1) / sizeof(float)));
        for (std::size_t j = 0; j < plan.k_split; ++j) {
          auto const kb = plan.block(0, j, 0, 0);
          steps(kb.k0, kb.k1, simd::MatrixOut<TP>{part, i(n), 1});
          for (std::size_t r = 0; r < m; ++r)
            for (std::size_t col = 0; col < n; ++col) {
              float& o = sv.data[i(r) * sv.rs + i(col) * sv.cs];
              float const v = static_cast<float>(part[r * n + col]);
              o = j == 0 ? v : o + v;
            }
        }
      }
      if (in_place) return;
      for (std::size_t r = 0; r < m; ++r) {
        if (q.accumulate) simd::scale_into<TO, true>(sum + r * n, pc + i(r) * sc[1], sc[2], n, alpha);
        else simd::scale_into<TO, false>(sum + r * n, pc + i(r) * sc[1], sc[2], n, alpha);
      }
    }
    static simd::detail::Scratch& scratch(int which) {
      thread_local simd::detail::Scratch s[2];
      return s[which];
    }
  };
  std::shared_ptr<State const> s_;
};

/// Validates operands ([M, K] x [K, N] or [G, M, K] x [G, K, N]) and options; returns the problem.
inline MatmulProblem problem_of(char const* op, Graph const& g, Tensor const& a, Tensor const& b,
                                MatmulOptions const& o, std::optional<ElementType> acc_type) {
  g.check_tensor(op, a);
  g.check_tensor(op, b);
  tilebsp::plan::detail::check_amp(op, o.available_memory_proportion);
  if (a.rank() != b.rank() || (a.rank() != 2 && a.rank() != 3))
    throw shape_error(std::string(op) + ": operands must both be matrices [M, K] x [K, N] or grouped [G, M, K] x "
                      "[G, K, N]; got " + to_string(a.shape()) + " and " + to_string(b.shape()));
  std::size_t const r = a.rank();
  if (r == 3 && a.dim(0) != b.dim(0))
    throw shape_error(std::string(op) + ": group counts differ: " + to_string(a.shape()) + " has " +
                      std::to_string(a.dim(0)) + " groups, " + to_string(b.shape()) + " has " + std::to_string(b.dim(0)));
  if (a.dim(r - 1) != b.dim(r - 2))
    throw shape_error(std::string(op) + ": inner dimensions differ: " + to_string(a.shape()) + " x " +
                      to_string(b.shape()) + " (" + std::to_string(a.dim(r - 1)) + " vs " +
                      std::to_string(b.dim(r - 2)) + ")");
  if (a.element_type() != b.element_type() || (a.element_type() != ElementType::f32 && a.element_type() != ElementType::f16))
    throw type_error(std::string(op) + ": unsupported operand types " + std::string(name_of(a.element_type())) + " x " +
                     std::string(name_of(b.element_type())) + " (both f32 or both f16)");
  check_float(op, "partials", o.partials);
  MatmulProblem q;
  q.groups = r == 3 ? a.dim(0) : 1;
  q.m = a.dim(r - 2);
  q.k = a.dim(r - 1);
  q.n = b.dim(r - 1);
  q.input = a.element_type();
  q.partials = o.partials;
  q.output = o.output_type.value_or(acc_type.value_or(q.input));
  check_float(op, "the output type", q.output);
  q.accumulate = acc_type.has_value();
  return q;
}

/// The final stage of a plan that splits K, where the result lives: each rectangle of a tile's region inside one
/// plan block sums that block's partials (fetched from the K-split tiles) in K-block order.
template <class TP, class TO>
Execute reduce_stage(Graph& g, MatmulPlan const& p, Tensor const& parts, Tensor const& c3, float alpha,
                     std::string const& name) {
  auto const& q = p.problem;
  ComputeSet const cs = g.add_compute_set(name + "/reduce");
  Tensor const by_group = parts.dimshuffle({1, 0, 2, 3});  // [G, k_split, M, N]
  struct Rect {
    std::size_t tile, gi, i, i1, j, j1;
  };
  std::vector<Rect> rects;
  auto const rect = [&](std::size_t tile, std::size_t gi, std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) {
    for (std::size_t i = r0; i < r1;) {
      std::size_t const i1 = std::min(r1, (i / p.m_tile + 1) * p.m_tile);
      for (std::size_t j = c0; j < c1;) {
        std::size_t const j1 = std::min(c1, (j / p.n_tile + 1) * p.n_tile);
        rects.push_back({tile, gi, i, i1, j, j1});
        j = j1;
      }
      i = i1;
    }
  };
  std::size_t const mn = q.m * q.n;
  // A tile's region as rectangles of one group: a run of rows with the same columns (a block narrower than the
  // result has one region per row) is one rectangle, cut only at plan blocks.
  std::optional<Rect> run;
  auto const add = [&](std::size_t tile, std::size_t gi, std::size_t i, std::size_t i1, std::size_t j, std::size_t j1) {
    if (run && run->tile == tile && run->gi == gi && run->i1 == i && run->j == j && run->j1 == j1) {
      run->i1 = i1;
      return;
    }
    if (run) rect(run->tile, run->gi, run->i, run->i1, run->j, run->j1);
    run = Rect{tile, gi, i, i1, j, j1};
  };
  for (auto const& [tile, iv] : g.tile_mapping(c3.flatten())) {
    for (std::size_t b = iv.begin; b < iv.end;) {
      std::size_t const gi = b / mn, rem = b % mn, i = rem / q.n, j = rem % q.n;
      std::size_t const left = iv.end - b;
      if (j != 0 || left < q.n) {  // part of one row
        std::size_t const len = std::min(q.n - j, left);
        add(tile, gi, i, i + 1, j, j + len);
        b += len;
      } else {  // whole rows of one group
        std::size_t const rows = std::min(left / q.n, q.m - i);
        add(tile, gi, i, i + rows, 0, q.n);
        b += rows * q.n;
      }
    }
  }
  if (run) rect(run->tile, run->gi, run->i, run->i1, run->j, run->j1);
  vertex::add_vertices(g, rects.size(), [&](std::size_t k) {
    Rect const& r = rects[k];
    Tensor src = by_group.index(r.gi).slice({0, r.i, r.j}, {p.k_split, r.i1, r.j1});
    Tensor dst = c3.index(r.gi).slice({r.i, r.j}, {r.i1, r.j1});
    if (q.accumulate)
      return vertex::record<MatmulReduce<TP, TO, true>>(g, cs, r.tile, fetch(std::move(src)), std::move(dst), alpha);
    return vertex::record<MatmulReduce<TP, TO, false>>(g, cs, r.tile, fetch(std::move(src)), std::move(dst), alpha);
  });
  return execute(cs);
}

/// Adds the plan's compute sets to `prog` as one host path: serial steps into c3 (or partials), then the final stage
/// into c3; the host kernel computes the same values in one task.
template <class TA, class TP, class TO>
void build(Graph& g, Sequence& prog, MatmulPlan const& p, Tensor const& a3, Tensor const& b3, Tensor const& c3,
           float alpha, std::string const& name) {
  OperatorScope const scope(g, "matmul", name);
  OperatorScope::note_plan(g, p.describe());
  auto const& q = p.problem;
  Tensor parts;
  if (p.reduce) {
    parts = g.add_variable(q.partials, {p.k_split, q.groups, q.m, q.n}, name + "/partials", {.temporary = true});
  }
  auto const each_block = [&](auto&& f) {
    for (std::size_t ig = 0; ig < p.g_split; ++ig)
      for (std::size_t ik = 0; ik < p.k_split; ++ik)
        for (std::size_t in = 0; in < p.n_split; ++in)
          for (std::size_t im = 0; im < p.m_split; ++im) {
            auto const b = p.block(ig, ik, in, im);
            f(p.tile_of(ig, ik, in, im), ik, b.g0, b.g1, b.m0, b.m1, b.n0, b.n1, b.k0, b.k1);
          }
  };
  if (p.reduce)
    each_block([&](std::size_t tile, std::size_t ik, std::size_t g0, std::size_t g1, std::size_t m0, std::size_t m1,
                   std::size_t n0, std::size_t n1, std::size_t, std::size_t) {
      g.set_tile_mapping(parts.slice({ik, g0, m0, n0}, {ik + 1, g1, m1, n1}), tile);
    });
  auto const rate = static_cast<float>(tilebsp::plan::detail::macs_per_cycle(g.target(), q.input));
  Sequence body;
  for (std::size_t s = 0; s < p.k_steps; ++s) {
    ComputeSet const cs = g.add_compute_set(name + (p.k_steps > 1 ? "/step" + std::to_string(s) : ""));
    auto const add = [&]<class TW, bool Acc>(Tensor const& w, std::size_t tile, Tensor const& av, Tensor const& bv) {
      g.add_vertex<MatmulVertex<TA, TW, Acc>>(cs, tile, fetch(av), fetch(bv), w, rate);
    };
    each_block([&](std::size_t tile, std::size_t ik, std::size_t g0, std::size_t g1, std::size_t m0, std::size_t m1,
                   std::size_t n0, std::size_t n1, std::size_t kb, std::size_t ke) {
      auto const [k0, k1] = p.serial().range(kb, ke, s);
      if (k0 >= k1) return;  // this tile's K range is done
      Tensor const av = a3.slice({g0, m0, k0}, {g1, m1, k1}), bv = b3.slice({g0, k0, n0}, {g1, k1, n1});
      Tensor const w = p.reduce ? parts.slice({ik, g0, m0, n0}, {ik + 1, g1, m1, n1}).index(0)
                                : c3.slice({g0, m0, n0}, {g1, m1, n1});
      if (p.reduce) {
        if (s == 0) add.template operator()<TP, false>(w, tile, av, bv);
        else add.template operator()<TP, true>(w, tile, av, bv);
      } else {
        if (s == 0) add.template operator()<TO, false>(w, tile, av, bv);
        else add.template operator()<TO, true>(w, tile, av, bv);
      }
    });
    body.add(execute(cs));
  }
  if (p.reduce) body.add(reduce_stage<TP, TO>(g, p, parts, c3, alpha, name));
  prog.add(host_path(name, MatmulHostKernel<TA, TP, TO>(p, a3, b3, c3, alpha).kernel(), std::move(body)));
}

/// Maps a new result per plan: each block on its tile, split between the K-split tiles when they reduce it.
inline void map_result(Graph& g, MatmulPlan const& p, Tensor const& c3) {
  for (std::size_t ig = 0; ig < p.g_split; ++ig)
    for (std::size_t in = 0; in < p.n_split; ++in)
      for (std::size_t im = 0; im < p.m_split; ++im) {
        auto const [g0, g1, m0, m1, n0, n1, k0, k1] = p.block(ig, 0, in, im);
        std::size_t const parts = p.reduce ? p.k_split : 1, cols = n1 - n0, rows = m1 - m0;
        // Whole rows per part when there are enough rows, else elements (row segments).
        std::size_t const unit = rows >= parts ? cols : 1, e = rows * cols / unit;
        for (std::size_t gi = g0; gi < g1; ++gi)
          for (std::size_t ik = 0; ik < parts; ++ik)  // part ik of the block's elements, row-major
            map_flat_range(g, c3.index(gi).slice({m0, n0}, {m1, n1}), e * ik / parts * unit,
                           e * (ik + 1) / parts * unit, p.tile_of(ig, ik, in, im));
      }
}

template <class F>
void dispatch_types(MatmulProblem const& q, F&& f) {
  with_float_type(q.input, [&]<class TA>() {
    with_float_type(q.partials, [&]<class TP>() {
      with_float_type(q.output, [&]<class TO>() { f.template operator()<TA, TP, TO>(); });
    });
  });
}

}  // namespace detail

template <std::same_as<Tensor> T>
MatmulPlan plan_matmul(Graph const& g, T const& a, T const& b, MatmulOptions const& options) {
  return plan_matmul(detail::view_target(g), detail::problem_of("plan_matmul", g, a, b, options, std::nullopt), options);
}

template <std::same_as<Tensor> T>
T matmul(Graph& g, Sequence& prog, T const& a, T const& b, MatmulOptions const& options,
         std::string const& name) {
  MatmulProblem const q = detail::problem_of("matmul", g, a, b, options, std::nullopt);
  bool const grouped = a.rank() == 3;
  Shape const shape = grouped ? Shape{q.groups, q.m, q.n} : Shape{q.m, q.n};
  Tensor c = g.add_variable(q.output, shape, name);
  if (c.num_elements() == 0) return c;
  Tensor const c3 = grouped ? c : c.expand(0);
  if (q.k == 0) {
    map_linearly(g, c);
    fill(g, prog, c, 0.0);
    return c;
  }
  MatmulPlan const p = plan_matmul(detail::view_target(g), q, options);
  detail::map_result(g, p, c3);
  detail::dispatch_types(q, [&]<class TA, class TP, class TO>() {
    detail::build<TA, TP, TO>(g, prog, p, grouped ? a : a.expand(0), grouped ? b : b.expand(0), c3, 1.0f, name);
  });
  return c;
}

template <std::same_as<Tensor> T>
void matmul_acc(Graph& g, Sequence& prog, T const& c, float k, T const& a, T const& b,
                MatmulOptions const& options, std::string const& name) {
  g.check_tensor("matmul_acc", c);
  MatmulProblem const q = detail::problem_of("matmul_acc", g, a, b, options, c.element_type());
  bool const grouped = a.rank() == 3;
  Shape const shape = grouped ? Shape{q.groups, q.m, q.n} : Shape{q.m, q.n};
  if (c.shape() != shape)
    throw shape_error("matmul_acc: the accumulator is " + to_string(c.shape()) + " but the product is " + to_string(shape));
  if (c.element_type() != q.output)
    throw type_error("matmul_acc: the accumulator is " + std::string(name_of(c.element_type())) +
                     " but output_type is " + std::string(name_of(q.output)));
  if (c.num_elements() == 0 || q.k == 0) return;
  MatmulPlan const p = plan_matmul(detail::view_target(g), q, options);
  detail::dispatch_types(q, [&]<class TA, class TP, class TO>() {
    detail::build<TA, TP, TO>(g, prog, p, grouped ? a : a.expand(0), grouped ? b : b.expand(0), grouped ? c : c.expand(0),
                              k, name);
  });
}

}  // namespace ops
}  // namespace tilebsp
