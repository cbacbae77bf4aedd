// The grouped matmul as an operator common: its vertex, its host kernel, the mapping of a new result and the builder
// of a plan's compute sets (serial K steps, then the partial-sum stage of ops/detail/partials.hpp). ops::matmul and
// the pointwise convolutions (ops::conv) both build through it.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/ops/detail/common.hpp>
#include <tilebsp/ops/detail/host_work.hpp>
#include <tilebsp/ops/detail/partials.hpp>
#include <tilebsp/ops/map.hpp>
#include <tilebsp/plan/detail/matmul.hpp>
#include <tilebsp/plan/matmul.hpp>
#include <tilebsp/program/host_path.hpp>
#include <tilebsp/program/programs.hpp>
#include <tilebsp/simd/blocks.hpp>
#include <tilebsp/simd/gemm.hpp>
#include <tilebsp/vertex/add_vertex.hpp>

#include <boost/hana/define_struct.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace tilebsp::ops::detail {

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

/// The host kernel of a matmul plan, the task of its host path: computes the whole product (every serial step and
/// the final reduction) bitwise as the vertices do — same K ranges, same kernel, same summation order — without
/// materialising partials. Work is divided by output blocks,
/// whose values do not depend on the division. Needs each operand to be one strided variable and the result not
/// to share a variable with an operand (else the vertices run).
template <class TA, class TP, class TO>
class MatmulHostKernel {
 public:
  MatmulHostKernel(MatmulPlan const& p, Tensor const& a3, Tensor const& b3, Tensor const& c3, float alpha) {
    auto s = std::make_shared<State>(State{p, a3.affine(), b3.affine(), c3.affine(), alpha, std::nullopt});
    s->writes = row_range(c3);  // an epilogue runs on each block once final (HostKernel::writes)
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
    std::optional<VarRange> writes;

    Bound bind(HostBinding const& at) const {
      auto const& q = plan.problem;
      Bound r{at(a->var), at(b->var), at(c->var), std::make_shared<UnitQueue>(at.threads), nullptr};
      bool const packable = !plan.reduce || (std::is_same_v<TP, float> && plan.k_step <= simd::gemm_kc);
      if (std::uint64_t const* counter = at.host_writes ? at.host_writes(b->var) : nullptr; counter && packable && q.k > 0) {
        std::size_t const pieces = (q.n + simd::gemm_nr - 1) / simd::gemm_nr, ld = pieces * simd::gemm_nr;
        r.packed = std::make_shared<PackedOperand>(HostWriteCache(counter, q.groups * pieces), ld, q.k * ld, pieces);
        r.packed->data = r.packed->storage.get(q.groups * q.k * ld);
      }
      return r;
    }

    /// The bias-and-clamp span after the product as a post-op (bound to `at`'s memory), where the product can apply
    /// it: f32 results in rows of unit column stride, one group, and the op's columns the product's. The span's
    /// element i is the result's (row, column) in row-major order, so its bias index i % columns is the column. A plan
    /// of one step per output element applies it in its gemm calls' stores; one of partial sums over each block once
    /// the block is summed (simd::post_op_rows).
    std::optional<simd::PostOp> post_op(HostBinding const& at, ColumnOp const& op) const {
      auto const& q = plan.problem;
      if (!std::is_same_v<TO, float> || q.groups != 1 || q.k == 0 || c->strides[2] != 1 ||
          op.columns != static_cast<std::int64_t>(q.n))
        return std::nullopt;
      simd::PostOp p{reinterpret_cast<float const*>(at(op.bias_var)) + op.bias_start};
      p.lo = op.lo, p.hi = op.hi, p.max_lo = op.max_lo, p.min_hi = op.min_hi, p.silu = op.silu;
      return p;
    }

    void run(Bound const& at, unsigned t, unsigned threads, Epilogue const* epilogue = nullptr, simd::PostOp const* post = nullptr) const {
      auto const& q = plan.problem;
      // Output blocks, a share per thread and then what the others left (UnitQueue; a block's values do not depend on
      // the thread or the division). Column panels first (each block reads or packs only its own columns of B), at most
      // 256 wide and about one per thread, or all columns when A dwarfs B (M >= 4N: each block then reads only its own
      // rows of A, the larger operand); then row blocks (a multiple of the micro-kernel's rows): at least 2 per thread
      // where the rows allow, and up to 4 per thread while a block keeps at least the gemm's L2 block of rows (MC), so
      // that a thread the machine slows down takes fewer. Blocks of MC rows cost no more traffic than one block of
      // their sum: the gemm streams its K block of B once per MC rows either way.
      std::size_t const mr = simd::gemm_mr, mcb = simd::blocks().gemm_mc;
      auto const up = [](std::size_t v, std::size_t m) { return (v + m - 1) / m * m; };
      std::size_t const cc = column_block(threads);
      std::size_t const col_blocks = q.groups * ((q.n + cc - 1) / cc);
      auto const rows_for = [&](std::size_t per_thread) {
        std::size_t const want = per_thread * std::size_t{threads};
        if (col_blocks >= want) return q.m;
        std::size_t const row_units = (want + col_blocks - 1) / col_blocks;
        return std::min(q.m, up((q.m + row_units - 1) / row_units, mr));
      };
      std::size_t rc = rows_for(2);
      if (std::size_t const fine = std::max(rows_for(4), std::min(q.m, mcb)); fine < rc)
        rc = fine > mcb ? std::min(rc, up(fine, mcb)) : fine;  // whole MC blocks where a block has more
      // As many row blocks, of equal rows (a gemm's rows need not start at a multiple of its register block), and,
      // where the rows fill an L2 block per thread, a multiple of the threads unless the column blocks are: each
      // thread's share is then whole blocks of rows, the rows the next layer's share of positions reads. A last
      // block of a few rows (196 rows as 192 + 4), or shares of 108 and 88 rows, left one thread idle to take
      // blocks from the other's share, whose results the next layer then read from the other core.
      bool const align = col_blocks % threads != 0 && q.m >= std::size_t{threads} * mcb;
      if (rc < q.m || align) {
        std::size_t nb = (q.m + rc - 1) / rc;
        if (align) nb = up(nb, threads);
        rc = (q.m + nb - 1) / nb;
      }
      auto const blocks = [&] { return col_blocks * ((q.m + rc - 1) / rc); };
      std::size_t const mc = (q.m + rc - 1) / rc, nc = (q.n + cc - 1) / cc;
      // With an epilogue (blocks of whole rows: fuses), a block runs in parts of micro-kernel rows within
      // Blocks::epilogue (a row's values do not depend on the part), each handed to the epilogue while it is still in
      // the cache.
      std::size_t const part = std::max(mr, simd::blocks().epilogue / (cc * sizeof(TO)) / mr * mr);
      at.queue->run(blocks(), t, threads, [&](std::size_t u) {
        std::size_t const g = u / (mc * nc), r0 = u / nc % mc * rc, c0 = u % nc * cc, r1 = std::min(q.m, r0 + rc),
                          c1 = std::min(q.n, c0 + cc);
        if (!epilogue) return block(at, g, r0, r1, c0, c1, post);
        auto const& sc = c->strides;
        TO const* first = reinterpret_cast<TO const*>(at.c) + c->start;
        for (std::size_t p0 = r0; p0 < r1; p0 += part) {
          std::size_t const p1 = std::min(r1, p0 + part);
          block(at, g, p0, p1, c0, c1);
          EpilogueRuns runs(epilogue, first, sizeof(TO), *writes);
          // Rows that lie end to end in a range without gaps are one run: no offset arithmetic per row, which
          // dominates where rows are a vector or two long.
          if (sc[2] == 1 && sc[1] == static_cast<std::ptrdiff_t>(c1 - c0) && (writes->row == 0 || writes->row == writes->pitch)) {
            runs.add(first + static_cast<std::ptrdiff_t>(g) * sc[0] + static_cast<std::ptrdiff_t>(p0) * sc[1] + static_cast<std::ptrdiff_t>(c0),
                     static_cast<std::int64_t>((p1 - p0) * (c1 - c0)));
            runs.flush();
            continue;
          }
          for (std::size_t r = p0; r < p1; ++r) {
            TO const* row = first + static_cast<std::ptrdiff_t>(g) * sc[0] + static_cast<std::ptrdiff_t>(r) * sc[1] +
                            static_cast<std::ptrdiff_t>(c0) * sc[2];
            if (sc[2] == 1) runs.add(row, static_cast<std::int64_t>(c1 - c0));
            else
              for (std::size_t col = c0; col < c1; ++col) runs.add(row + static_cast<std::ptrdiff_t>(col - c0) * sc[2], 1);
          }
          runs.flush();
        }
      });
    }
    /// Columns per output block of a run on `threads` threads (run).
    std::size_t column_block(unsigned threads) const {
      auto const& q = plan.problem;
      std::size_t const nr = simd::gemm_nr;
      auto const up = [](std::size_t v, std::size_t m) { return (v + m - 1) / m * m; };
      bool const tall = q.m >= 4 * q.n && q.n <= 256;
      if (q.n <= nr || tall) return q.n;
      // As many panels, of equal columns in whole register panels (576 as 192 x 3, not 256 + 256 + 64).
      std::size_t const cc = std::min<std::size_t>(256, up(std::max(nr, (q.n + threads - 1) / threads), nr));
      std::size_t const panels = (q.n + cc - 1) / cc;
      return up((q.n + panels - 1) / panels, nr);
    }
    /// Whether a run on `threads` threads has blocks of whole rows, so that an epilogue runs on long runs of the
    /// result while they are in the cache (HostKernel::bind_with). Blocks of some columns would hand it rows of 256
    /// or fewer: measured slower than the separate pass.
    bool fuses(HostBinding const& at) const { return column_block(at.threads) >= plan.problem.n; }
    /// Output block [r0, r1) x [c0, c1) of group g, each value stored through `post` where given (post_op).
    void block(Bound const& at, std::size_t g, std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1,
               simd::PostOp const* post = nullptr) const {
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
      // `last`: the post-op the last step's gemm stores through (an f32 destination), at the block's columns.
      auto const steps = [&](std::size_t k0, std::size_t k1, auto dst, simd::PostOp const* last = nullptr) {
        for_steps(k0, k1, [&](std::size_t s, std::size_t s0, std::size_t s1) {
          float const beta = s > 0 ? 1.0f : 0.0f;
          auto const product = [&](auto const&... op) {
            if (packed) simd::gemm(m, n, s1 - s0, 1.0f, av(s0), simd::PackedB{packed + s0 * at.packed->ld, at.packed->ld, c0}, beta, dst, op...);
            else simd::gemm(m, n, s1 - s0, 1.0f, av(s0), bv(s0), beta, dst, op...);
          };
          if constexpr (std::is_same_v<decltype(dst), simd::MatrixOut<float>>) {
            if (last && s1 == k1) return product(*last);
          }
          product();
        });
      };
      if (!plan.reduce) {
        simd::PostOp op{nullptr};
        if (post) op = *post, op.bias += c0;
        steps(0, q.k, out, post ? &op : nullptr);
        return;
      }
      // An accumulation of one f32 part and one serial step within a K block of the gemm (conv_accumulate's plan of
      // a plain product): the gemm adds its sum to C as it stores it (beta 1: fl(s + C), the reduction's
      // addition), then the post-op, so that C is read and written once, from the registers. Within one K block,
      // B packed for the reduction (gemm_b_block(k_tile)) has the gemm's layout: one block of all K rows.
      if constexpr (std::is_same_v<TO, float> && std::is_same_v<TP, float>) {
        if (q.accumulate && alpha == 1.0f && plan.k_split == 1 && plan.k_steps == 1 && q.k <= simd::gemm_kc) {
          simd::PostOp op{nullptr};
          if (post) op = *post, op.bias += c0;
          auto const product = [&](auto const&... o) {
            if (packed) simd::gemm(m, n, q.k, 1.0f, av(0), simd::PackedB{packed, at.packed->ld, c0}, 1.0f, out, o...);
            else simd::gemm(m, n, q.k, 1.0f, av(0), bv(0), 1.0f, out, o...);
          };
          if (post) product(op);
          else product();
          return;
        }
      }
      bool const in_place = std::is_same_v<TO, float> && !q.accumulate && alpha == 1.0f;
      if (!in_place) {
        // The sums go to scratch and then into C (added to it, scaled or converted): rows in parts whose scratch
        // stays in L2, so that C's lines are read and written once (a row's values do not depend on the part).
        std::size_t const mr = simd::gemm_mr;
        std::size_t const part = std::max(mr, simd::blocks().epilogue / (n * sizeof(float)) / mr * mr);
        if (m > part) {
          for (std::size_t p0 = r0; p0 < r1; p0 += part) block(at, g, p0, std::min(r1, p0 + part), c0, c1, post);
          return;
        }
      }
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
      simd::PostOp op{nullptr};
      if (post) op = *post, op.bias += c0;
      if constexpr (std::is_same_v<TO, float>) {
        // alpha 1: its product exact, so the vector and scalar forms of scale_into's fma agree on every ISA.
        if (q.accumulate && alpha == 1.0f && sc[2] == 1)
          return simd::accumulate_rows(sum, pc, sc[1], m, n, 1.0f, post ? &op : nullptr);
      }
      // Row by row, each row's post-op while the row is in L1.
      for (std::size_t r = 0; r < m; ++r) {
        TO* row = pc + i(r) * sc[1];
        if (!in_place) {
          if (q.accumulate) simd::scale_into<TO, true>(sum + r * n, row, sc[2], n, alpha);
          else simd::scale_into<TO, false>(sum + r * n, row, sc[2], n, alpha);
        }
        if constexpr (std::is_same_v<TO, float>) {
          if (post) simd::post_op_rows(row, sc[1], 1, n, op);
        }
      }
    }
    static simd::detail::Scratch& scratch(int which) {
      thread_local simd::detail::Scratch s[2];
      return s[which];
    }
  };
  std::shared_ptr<State const> s_;
};

/// Adds the plan's compute sets to `prog` as one host path: serial steps into c3 (or partials), then the final stage
/// into c3; the host kernel computes the same values in one task.
template <class TA, class TP, class TO>
void build(Graph& g, Sequence& prog, MatmulPlan const& p, Tensor const& a3, Tensor const& b3, Tensor const& c3,
           float alpha, std::string const& name) {
  OperatorScope const scope(g, "matmul", name, simd::isa_name());
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
  if (p.reduce)
    body.add(sum_partials_stage<TP, TO>(g, name, parts, c3, alpha, q.accumulate, p.m_tile, p.n_tile));
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

}  // namespace tilebsp::ops::detail
