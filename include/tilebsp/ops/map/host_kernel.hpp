// The host kernel of ops::map: the expression over the output's elements where the operands live, the same
// instructions as the vertices (bitwise the same values).
#pragma once

#include <tilebsp/core/tensor.hpp>
#include <tilebsp/expr/eval.hpp>
#include <tilebsp/expr/expr.hpp>
#include <tilebsp/expr/program.hpp>
#include <tilebsp/ops/detail/host_work.hpp>
#include <tilebsp/program/host_path.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tilebsp::ops::detail {

using expr::Types;
using expr::VT;

/// The forms of an expression that ColumnOp describes, with _1 the result and _2 the bias: _1 + _2, relu(_1 + _2),
/// min(max(_1 + _2, lo), hi) and (_1 + _2) * sigmoid(_1 + _2) (a convolution's bias with ReLU, ReLU6 or SiLU). Sets
/// the activation; false for any other.
using BiasAdd = expr::Binary<expr::op::Add, expr::Placeholder<1>, expr::Placeholder<2>>;
inline bool column_form(BiasAdd const&, ColumnOp&) noexcept { return true; }
inline bool column_form(expr::Unary<expr::op::Relu, BiasAdd> const&, ColumnOp& c) noexcept {
  c.max_lo = true, c.lo = 0.0f;
  return true;
}
inline bool column_form(expr::Binary<expr::op::Min, expr::Binary<expr::op::Max, BiasAdd, expr::Constant>, expr::Constant> const& e,
                        ColumnOp& c) noexcept {
  c.max_lo = c.min_hi = true, c.lo = static_cast<float>(e.a.b.value), c.hi = static_cast<float>(e.b.value);
  return true;
}
inline bool column_form(expr::Binary<expr::op::Mul, BiasAdd, expr::Unary<expr::op::Sigmoid, BiasAdd>> const&, ColumnOp& c) noexcept {
  c.silu = true;
  return true;
}
template <class E>
bool column_form(E const&, ColumnOp&) noexcept {
  return false;
}

/// The host kernel of a map: the expression over the output's elements, reading every operand where it lives
/// (no fetched copies). The output's elements are walked in segments along which each operand is contiguous or
/// constant; the threads take equal shares of the elements. Each element is computed by the same instructions as
/// in a vertex (evaluate pads partial batches), so the values are the vertices' bitwise.
template <Types In, VT Out, class E, std::size_t N>
class MapHostKernel {
 public:
  /// Empty (run the vertices) unless the output and every operand are affine views of one variable each, an
  /// operand sharing the output's variable is the output's own view, and segments have at least 16 elements.
  MapHostKernel(E const& e, std::array<Tensor, N> const& ins, Tensor const& out, Shape const& shape, std::uint32_t scalars,
                bool stream) {
    auto st = std::make_shared<State>();
    st->e = e;
    st->scalars = scalars;
    st->stream = stream;
    st->shape = shape;
    st->total = product(shape);
    auto const o = out.affine();
    if (!o || st->total == 0) return;
    st->var[N] = o->var, st->start[N] = o->start, st->strides[N] = o->strides;
    // Element widths: the types' (an interpreted map's, VT::any, are its tensors').
    for (std::size_t k = 0; k < N; ++k) st->width[k] = In[k] == VT::any ? size_of(ins[k].element_type()) : expr::detail::width(In[k]);
    st->width[N] = Out == VT::any ? size_of(out.element_type()) : expr::detail::width(Out);
    for (std::size_t k = 0; k < N; ++k) {
      auto const a = (scalars >> k & 1u ? ins[k].flatten().broadcast({1}) : ins[k].broadcast(shape)).affine();
      if (!a) return;
      if (a->var == o->var && (a->start != o->start || (!(scalars >> k & 1u) && a->strides != o->strides))) return;
      st->var[k] = a->var, st->start[k] = a->start;
      st->strides[k] = scalars >> k & 1u ? std::vector<std::int64_t>(shape.size(), 0) : a->strides;
    }
    // The innermost dimensions along which the output and each operand are contiguous (or, for operands,
    // constant) form one segment.
    std::array<int, N + 1> mode{};  // 0 undecided, 1 contiguous, 2 constant
    std::size_t inner = 1, d = shape.size();
    for (; d > 0; --d) {
      std::size_t const n = shape[d - 1];
      if (n == 1) continue;
      bool ok = true;
      std::array<int, N + 1> m = mode;
      for (std::size_t k = 0; k <= N && ok; ++k) {
        std::int64_t const sd = st->strides[k][d - 1];
        if (sd == static_cast<std::int64_t>(inner) && m[k] != 2) m[k] = 1;
        else if (sd == 0 && m[k] != 1 && k < N) m[k] = 2;
        else ok = false;
      }
      if (!ok) break;
      mode = m;
      inner *= n;
    }
    if (inner < 16 && inner < st->total) return;
    st->inner = inner;
    st->outer_rank = d;
    // Elementwise (HostKernel) where the output lies in the variable in its own element order: element i at
    // start + i, or in rows at one pitch apart (a channel slice of a channels-last tensor: VarRange), which an
    // operand in the output's variable reads in place (checked above), not as a scalar (that would read element 0
    // of every part).
    bool unaliased = true, row_major = true;
    for (std::size_t k = 0; k < N; ++k) unaliased = unaliased && !(st->var[k] == o->var && (scalars >> k & 1u));
    for (std::size_t k = shape.size(), step = 1; k-- > 0; step *= shape[k])
      row_major = row_major && (shape[k] == 1 || st->strides[N][k] == static_cast<std::int64_t>(step));
    auto const total = static_cast<std::int64_t>(st->total);
    if (unaliased && row_major) st->elementwise = VarRange{o->var, o->start, total};
    else if (core::detail::RowSeries rs; unaliased && out.row_series(rs))
      st->elementwise = VarRange{rs.var, rs.start, total, rs.len, rs.step};
    for (std::size_t k = 0; k < N; ++k)
      if (mode[k] == 2) st->segment_scalars |= 1u << k;
    // A bias (and clamp) in place over f32 channels-last rows: _1 the output's own view, _2 one vector of the
    // output's innermost extent, constant along the other dimensions (ColumnOp: element i reads bias[i % columns]).
    if constexpr (N == 2 && In[0] == VT::f32 && In[1] == VT::f32 && Out == VT::f32) {
      ColumnOp c;
      auto const& sb = st->strides[1];
      bool const vector_bias = !shape.empty() && shape.back() > 0 &&
                               std::all_of(sb.begin(), sb.end() - 1, [](std::int64_t v) { return v == 0; }) &&
                               (sb.back() == 1 || shape.back() == 1);
      if (st->elementwise && scalars == 0 && st->var[0] == o->var && st->var[1] != o->var && vector_bias && column_form(e, c)) {
        c.bias_var = st->var[1], c.bias_start = st->start[1], c.columns = static_cast<std::int64_t>(shape.back());
        st->column_op = c;
      }
    }
    s_ = std::move(st);
  }
  HostKernel kernel() const { return host_kernel_of(s_); }

 private:
  /// Rows shorter than this many elements run several to a segment (see range).
  static constexpr std::size_t tiled_rows_below = 512;
  /// Elements per segment of such rows: each segment is an evaluate call, whose setup (the expression and operands
  /// copied, constants broadcast) a segment of 512 elements paid once per 32 batches; the repeated rows of a bias
  /// stay within 8 KiB of f32, in L1.
  static constexpr std::size_t tiled_elements = 2048;
  struct State {
    E e;
    std::uint32_t scalars = 0, segment_scalars = 0;
    bool stream = false;
    Shape shape;
    std::size_t total = 0, inner = 1, outer_rank = 0;
    std::array<std::uint32_t, N + 1> var{};
    std::array<std::int64_t, N + 1> start{};
    std::array<std::vector<std::int64_t>, N + 1> strides;
    std::array<std::size_t, N + 1> width{};
    std::optional<VarRange> elementwise;
    std::optional<ColumnOp> column_op;  ///< where the map is one (HostKernel::column_op)

    std::array<std::byte*, N + 1> bind(HostBinding const& at) const {
      std::array<std::byte*, N + 1> base{};
      for (std::size_t k = 0; k <= N; ++k) base[k] = at(var[k]);
      return base;
    }

    void run(std::array<std::byte*, N + 1> const& base, unsigned t, unsigned threads) const {
      // Equal shares in whole 16-element batches.
      std::size_t const batches = (total + 15) / 16;
      range(base, static_cast<std::int64_t>(batches * t / threads * 16),
            static_cast<std::int64_t>(std::min(total, batches * (t + 1) / threads * 16)), stream);
    }

    /// Elements [first, last) of the output in its element order (each element's value does not depend on the
    /// range), with streaming stores where `streaming`.
    void range(std::array<std::byte*, N + 1> const& base, std::int64_t first, std::int64_t last, bool streaming = false) const {
      std::size_t const b0 = static_cast<std::size_t>(first), b1 = static_cast<std::size_t>(last);
      // Whole segments run as rows along the innermost outer dimension, one evaluate_rows call for as many as
      // that dimension has left (a channels-last bias map: a row per position, its channels a segment).
      std::size_t const row_dim = outer_rank > 0 ? outer_rank - 1 : 0, per_row = outer_rank > 0 ? shape[row_dim] : 1;
      std::array<std::ptrdiff_t, N> step{};
      for (std::size_t k = 0; k < N && outer_rank > 0; ++k)
        step[k] = scalars >> k & 1u ? 0 : static_cast<std::ptrdiff_t>(strides[k][row_dim] * static_cast<std::int64_t>(width[k]));
      std::ptrdiff_t const out_step =
          outer_rank > 0 ? static_cast<std::ptrdiff_t>(strides[N][row_dim] * static_cast<std::int64_t>(width[N])) : 0;
      // Short rows (a layer's channels, as few as 16) cost a pass of the expression's setup each. Where the rows lie
      // end to end in the output and in every operand but those that repeat one row (step 0: a bias), a run of rows
      // is one segment, each repeating operand's row laid out that many times in a buffer of this thread: the same
      // values, element for element.
      std::uint32_t repeating = 0;
      bool tiled = outer_rank > 0 && !streaming && inner < tiled_rows_below && out_step == static_cast<std::ptrdiff_t>(inner * width[N]);
      for (std::size_t k = 0; k < N && tiled; ++k) {
        if (scalars >> k & 1u) continue;
        if (segment_scalars >> k & 1u) tiled = step[k] == 0;  // one value for all the rows, or not tiled
        else if (step[k] == 0) repeating |= 1u << k;
        else tiled = step[k] == static_cast<std::ptrdiff_t>(inner * width[k]);
      }
      // Rows per tiled segment: a whole number of batches of lanes, about tiled_elements elements.
      std::size_t const unit = std::lcm(inner, simd::lanes) / inner;
      std::size_t const per_tile = std::max<std::size_t>(1, tiled_elements / (unit * inner)) * unit;
      thread_local std::array<std::vector<std::byte>, N> copies;
      std::array<void const*, N> copied_from{};
      for (std::size_t i = b0; i < b1;) {
        std::size_t const seg = i / inner, in_seg = i % inner, n = std::min(b1 - i, inner - in_seg);
        // Offsets of the segment's first element: mixed radix over the outer dimensions.
        std::array<std::int64_t, N + 1> off = start;
        std::size_t rest = seg;
        for (std::size_t d = outer_rank; d > 0; --d) {
          std::size_t const idx = rest % shape[d - 1];
          rest /= shape[d - 1];
          for (std::size_t k = 0; k <= N; ++k) off[k] += static_cast<std::int64_t>(idx) * strides[k][d - 1];
        }
        expr::Operands o;
        o.scalar = scalars | segment_scalars;
        for (std::size_t k = 0; k < N; ++k) {
          std::int64_t const at = off[k] + (o.scalar >> k & 1u ? 0 : static_cast<std::int64_t>(in_seg));
          o.ptr[k] = base[k] + at * static_cast<std::int64_t>(width[k]);
        }
        auto* dst = base[N] + (off[N] + static_cast<std::int64_t>(in_seg)) * static_cast<std::int64_t>(width[N]);
        std::size_t const rows = in_seg == 0 && n == inner ? std::min(per_row - seg % per_row, (b1 - i) / inner) : 1;
        if (rows > 1 && tiled) {
          for (std::size_t k = 0; k < N; ++k) {
            if (!(repeating >> k & 1u) || copied_from[k] == o.ptr[k]) continue;
            auto& c = copies[k];
            std::size_t const row_bytes = inner * width[k];
            c.resize(per_tile * row_bytes);
            for (std::size_t r = 0; r < per_tile; ++r) std::memcpy(c.data() + r * row_bytes, o.ptr[k], row_bytes);
            copied_from[k] = o.ptr[k];
          }
          expr::Operands tile = o;
          for (std::size_t k = 0; k < N; ++k)
            if (repeating >> k & 1u) tile.ptr[k] = copies[k].data();
          for (std::size_t r = 0; r < rows; r += per_tile) {
            std::size_t const m = std::min(per_tile, rows - r);
            expr::evaluate<In, Out>(e, tile, N, dst + static_cast<std::ptrdiff_t>(r) * out_step, m * inner, false);
            for (std::size_t k = 0; k < N; ++k)
              if (!((repeating | tile.scalar) >> k & 1u))
                tile.ptr[k] = static_cast<std::byte const*>(tile.ptr[k]) + static_cast<std::ptrdiff_t>(m) * step[k];
          }
        } else if (rows > 1) expr::evaluate_rows<In, Out>(e, o, N, dst, n, rows, step.data(), out_step, streaming);
        else expr::evaluate<In, Out>(e, o, N, dst, n, streaming);
        i += rows * n;
      }
    }
  };
  std::shared_ptr<State const> s_;
};

}  // namespace tilebsp::ops::detail
