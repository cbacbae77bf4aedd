// ops::map: fused elementwise expressions over tensors, one vectorised vertex per region (or series of regions) of
// each tile's work, run by all of the tile's workers.
#pragma once

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/mapping.hpp>
#include <tilebsp/expr/eval.hpp>
#include <tilebsp/expr/expr.hpp>
#include <tilebsp/ops/detail/host_task.hpp>
#include <tilebsp/ops/detail/instances.hpp>
#include <tilebsp/program/host_path.hpp>
#include <tilebsp/program/programs.hpp>
#include <tilebsp/vertex/add_vertex.hpp>

#include <boost/hana/pair.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/tuple.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tilebsp {
namespace ops {

namespace detail {

using expr::Types;
using expr::VT;

/// The vertex of a map: N operands of the value types In, an output of type Out, the expression (which carries
/// its constants) and which operands are scalars broadcast to every element. Its fields are reflected through a
/// hand-written Hana accessor list, since their number depends on N. With Rows, the operands and the output are
/// [rows, length] views whose rows are contiguous (a scalar operand: one element): one vertex for many equal runs
/// of a tile's output, as a conv output mapped in blocks of channels has one run per position.
/// A multi-worker vertex (Poplar's MultiVertex): `workers` workers share its elements (its rows, with Rows), so
/// a tile's region is one vertex rather than one per worker; its estimate is in tile cycles.
template <class E, Types In, VT Out, std::size_t N, bool Rows = false>
struct MapVertex {
  static constexpr bool supervisor = true;
  template <class T>
  using In_t = std::conditional_t<Rows, input_view<T, 2>, input<T>>;
  template <std::size_t... I>
  static auto make_inputs(std::index_sequence<I...>) -> std::tuple<In_t<expr::storage_t<In[I]>>...>;
  using Inputs = decltype(make_inputs(std::make_index_sequence<N>{}));

  Inputs ins;
  std::conditional_t<Rows, output_view<expr::storage_t<Out>, 2>, output<expr::storage_t<Out>>> out;
  param<std::uint32_t> scalars;
  param<bool> stream;
  param<std::uint32_t> workers;
  param<E> e;

  struct hana_accessors_impl {
    template <std::size_t... I>
    static constexpr auto apply(std::index_sequence<I...>) {
      namespace hana = boost::hana;
      return hana::make_tuple(
          hana::make_pair(hana::string_c<'i', 'n', static_cast<char>('0' + I)>,
                          [](auto&& v) -> decltype(auto) { return std::get<I>(v.ins); })...,
          hana::make_pair(BOOST_HANA_STRING("out"), [](auto&& v) -> decltype(auto) { return (v.out); }),
          hana::make_pair(BOOST_HANA_STRING("scalars"), [](auto&& v) -> decltype(auto) { return (v.scalars); }),
          hana::make_pair(BOOST_HANA_STRING("stream"), [](auto&& v) -> decltype(auto) { return (v.stream); }),
          hana::make_pair(BOOST_HANA_STRING("workers"), [](auto&& v) -> decltype(auto) { return (v.workers); }),
          hana::make_pair(BOOST_HANA_STRING("expr"), [](auto&& v) -> decltype(auto) { return (v.e); }));
    }
    static constexpr auto apply() { return apply(std::make_index_sequence<N>{}); }
  };

  void compute() {
    expr::Operands o;
    o.scalar = scalars;
    if constexpr (Rows) {
      for (std::size_t r = 0; r < out.dim(0); ++r) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          ((o.ptr[I] = std::get<I>(ins).data() +
                       (scalars >> I & 1u ? 0 : std::ptrdiff_t(r) * std::get<I>(ins).stride(0))), ...);
        }(std::make_index_sequence<N>{});
        expr::evaluate<In, Out>(e.get(), o, N, out.data() + std::ptrdiff_t(r) * out.stride(0), out.dim(1), stream);
      }
    } else {
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((o.ptr[I] = std::get<I>(ins).data()), ...);
      }(std::make_index_sequence<N>{});
      expr::evaluate<In, Out>(e.get(), o, N, out.data(), out.size(), stream);
    }
  }
  /// IPU estimate in tile cycles: each worker issues every `workers`-th cycle and takes an equal share of the
  /// 64-bit vectors (2 f32 or 4 f16 lanes), or of the rows, one cycle per node and vector, plus 20 of setup; a row
  /// costs 6 more cycles (loading its pointers and count: our assumption, as for the setup).
  std::uint64_t cycle_estimate() const {
    std::uint64_t const w = Out == VT::f16 ? 4 : 2, nodes = std::max<std::uint64_t>(1, E::nodes);
    std::uint64_t const k = std::max<std::uint64_t>(1, workers);
    if constexpr (Rows) return k * (20 + (out.dim(0) + k - 1) / k * (6 + (out.dim(1) + w - 1) / w * nodes));
    else return k * (20 + ((out.size() + w - 1) / w + k - 1) / k * nodes);
  }
};

/// NumPy broadcast of shapes; throws shape_error naming the op when they do not broadcast.
inline Shape broadcast_shapes(char const* op, std::vector<Shape> const& shapes) {
  std::size_t rank = 0;
  for (auto const& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (auto const& s : shapes)
    for (std::size_t d = 0; d < s.size(); ++d) {
      std::size_t& o = out[rank - s.size() + d];
      if (s[d] == o || s[d] == 1) continue;
      if (o != 1) {
        std::string list;
        for (auto const& x : shapes) list += (list.empty() ? "" : " and ") + to_string(x);
        throw shape_error(std::string(op) + ": operand shapes " + list + " do not broadcast");
      }
      o = s[d];
    }
  return out;
}

template <VT... Fixed>
constexpr Types make_types() {
  Types t{};
  t.fill(VT::any);
  std::size_t i = 0;
  ((t[i++] = Fixed), ...);
  return t;
}

/// Calls leaf.template operator()<In>() with the value types of the operands, instantiating only the type
/// combinations under which E type-checks.
template <class E, std::size_t N, VT... Fixed, class F>
void dispatch(std::array<VT, N> const& rt, F& leaf) {
  constexpr std::size_t K = sizeof...(Fixed);
  if constexpr (K == N) {
    leaf.template operator()<make_types<Fixed...>()>();
  } else {
    auto const go = [&]<VT T>() {
      if constexpr (E::infer(make_types<Fixed..., T>()).type != VT::error) dispatch<E, N, Fixed..., T>(rt, leaf);
    };
    switch (rt[K]) {
      case VT::f32: go.template operator()<VT::f32>(); break;
      case VT::f16: go.template operator()<VT::f16>(); break;
      case VT::i32: go.template operator()<VT::i32>(); break;
      case VT::u32: go.template operator()<VT::u32>(); break;
      case VT::boolean: go.template operator()<VT::boolean>(); break;
      default: break;
    }
  }
}
template <class F>
void dispatch_out(VT t, F& leaf) {
  switch (t) {
    case VT::f32: leaf.template operator()<VT::f32>(); break;
    case VT::f16: leaf.template operator()<VT::f16>(); break;
    case VT::i32: leaf.template operator()<VT::i32>(); break;
    case VT::u32: leaf.template operator()<VT::u32>(); break;
    default: leaf.template operator()<VT::boolean>(); break;
  }
}

/// A piece of a map's work on one tile: `rows` runs of `length` elements of the flattened output, `stride`
/// elements apart from `begin` (one run when rows is 1).
struct MapPiece {
  std::size_t tile = 0, begin = 0, length = 0, stride = 0, rows = 1;
};

/// Whether piece p's rows can be cut from a [rows, stride] reshape of `total` elements: starting at its first
/// row, or ending with its last.
inline bool rows_fit(MapPiece const& p, std::size_t total) {
  return p.begin + p.rows * p.stride <= total || p.begin + p.length >= p.stride;
}

/// Pieces of `out`'s flattened elements (`out` is 1-D), per tile: each region of the tile, except that a series of
/// regions of one length at one stride (a run per position of a block of channels) is one piece of several rows
/// where rows_fit. Each piece is one vertex, shared by the tile's workers. When `out` is a whole variable, the
/// series come from its mapping's repeats (a few per block of positions) instead of its regions one by one.
inline std::vector<MapPiece> pieces(Graph const& g, Tensor const& out) {
  std::size_t const total = out.num_elements();
  std::vector<MapPiece> found;  // regions (rows 1) and series (rows >= 2), tiles ascending, positions on each
  auto const a = out.affine();
  auto const& impl = g.impl();
  bool done = false;
  if (a && a->start == 0 && a->strides.size() == 1 && a->strides[0] == 1 &&
      static_cast<std::int64_t>(total) == impl.variables[a->var].size) {
    std::size_t const lo = g.first_tile(), hi = lo + g.num_tiles();
    std::int64_t const mapped = impl.variables[a->var].mapping.for_each_series(
        [&](std::int64_t b, std::int64_t e, std::uint32_t tile, std::int64_t period, std::size_t reps) {
          if (tile < lo || tile >= hi) return;
          found.push_back({tile - lo, static_cast<std::size_t>(b), static_cast<std::size_t>(e - b),
                           static_cast<std::size_t>(period), reps});
        });
    if (mapped == static_cast<std::int64_t>(total)) {  // else tile_mapping below throws its mapping_error
      tilebsp::core::detail::group_by_tile(found, g.num_tiles(), [](MapPiece const& p) { return p.tile; });
      done = true;
    } else {
      found.clear();
    }
  }
  if (!done)
    for (auto const& [tile, iv] : g.tile_mapping(out))  // tiles ascending, regions ascending on each
      found.push_back({tile, iv.begin, iv.size(), 0, 1});
  std::vector<MapPiece> r;
  // A series of rows as one piece, or, where its rows do not fit a reshape (the series spans all of out), its
  // last run on its own.
  auto const series = [&](MapPiece p) {
    std::size_t const n = p.rows;
    if (!rows_fit(p, total)) --p.rows;
    if (p.rows >= 2) r.push_back(p);
    else r.push_back({p.tile, p.begin, p.length, 0, 1});
    if (p.rows < n) r.push_back({p.tile, p.begin + (n - 1) * p.stride, p.length, 0, 1});
  };
  for (std::size_t i = 0; i < found.size();) {
    MapPiece const x = found[i];
    if (x.rows >= 2) {
      series(x);
      ++i;
      continue;
    }
    auto const joins = [&](std::size_t j, std::size_t stride) {
      return j < found.size() && found[j].tile == x.tile && found[j].rows == 1 && found[j].length == x.length &&
             found[j].begin - found[j - 1].begin == stride;
    };
    std::size_t n = 1;
    std::size_t const stride = i + 1 < found.size() ? found[i + 1].begin - x.begin : 0;  // of the next region, if any
    if (joins(i + 1, stride)) {
      for (n = 2; joins(i + n, stride);) ++n;
      series({x.tile, x.begin, x.length, stride, n});
    } else {
      r.push_back(x);
    }
    i += n;
  }
  return r;
}

/// The elements of flat (1-D, `total` elements) that piece p covers: [length] for one run, else [rows, length].
inline Tensor piece_of(Tensor const& flat, MapPiece const& p) {
  if (p.rows == 1) return flat.slice(p.begin, p.begin + p.length);
  std::size_t const span = p.rows * p.stride, total = flat.num_elements();
  if (p.begin + span <= total)
    return flat.slice(p.begin, p.begin + span).reshape({p.rows, p.stride}).slice({0, 0}, {p.rows, p.length});
  std::size_t const end = p.begin + span - p.stride + p.length;  // ends with the last row
  return flat.slice(end - span, end).reshape({p.rows, p.stride}).slice({0, p.stride - p.length}, {p.rows, p.stride});
}

enum class Mode { new_output, in_place, given_output };

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
    for (std::size_t k = 0; k < N; ++k)
      if (mode[k] == 2) st->segment_scalars |= 1u << k;
    s_ = std::move(st);
  }
  HostKernel kernel() const { return host_kernel_of(s_); }

 private:
  struct State {
    E e;
    std::uint32_t scalars = 0, segment_scalars = 0;
    bool stream = false;
    Shape shape;
    std::size_t total = 0, inner = 1, outer_rank = 0;
    std::array<std::uint32_t, N + 1> var{};
    std::array<std::int64_t, N + 1> start{};
    std::array<std::vector<std::int64_t>, N + 1> strides;

    std::array<std::byte*, N + 1> bind(HostBinding const& at) const {
      std::array<std::byte*, N + 1> base{};
      for (std::size_t k = 0; k <= N; ++k) base[k] = at(var[k]);
      return base;
    }

    void run(std::array<std::byte*, N + 1> const& base, unsigned t, unsigned threads) const {
      // Equal shares in whole 16-element batches.
      std::size_t const batches = (total + 15) / 16;
      std::size_t const b0 = batches * t / threads * 16, b1 = std::min(total, batches * (t + 1) / threads * 16);
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
          o.ptr[k] = base[k] + at * static_cast<std::int64_t>(expr::detail::width(In[k]));
        }
        auto* dst = base[N] + (off[N] + static_cast<std::int64_t>(in_seg)) * static_cast<std::int64_t>(expr::detail::width(Out));
        expr::evaluate<In, Out>(e, o, N, dst, n, stream);
        i += n;
      }
    }
  };
  std::shared_ptr<State const> s_;
};

/// Map outputs of at least this many bytes use streaming stores on the host.
inline constexpr std::size_t streaming_bytes = std::size_t{8} << 20;

/// True when `t` shares elements of a variable with `out` without being the same view of it.
inline bool overlaps_elsewhere(Tensor const& t, Tensor const& out) {
  auto const a = t.affine(), b = out.affine();
  if (a && b) return a->var == b->var && (a->start != b->start || a->strides != b->strides || t.shape() != out.shape());
  std::vector<std::uint32_t> vars;
  out.for_each_run([&](std::uint32_t v, std::int64_t, std::int64_t, std::int64_t) { vars.push_back(v); });
  bool shared = false;
  t.for_each_run([&](std::uint32_t v, std::int64_t, std::int64_t, std::int64_t) {
    shared = shared || std::find(vars.begin(), vars.end(), v) != vars.end();
  });
  return shared;
}

/// The value type of an operand type named by the caller (map<float, half>(...)).
template <class T>
inline constexpr VT named_type = expr::detail::vt_of(element_type_v<T>);

template <class E, std::size_t N, VT... Named>
Tensor map(Graph& g, Sequence& prog, E const& e, std::array<Tensor, N> const& ins, Tensor out, Mode mode,
           char const* op) {
  static_assert(N <= expr::max_operands, "map: at most 8 tensor operands");
  static_assert(sizeof...(Named) == 0 || sizeof...(Named) == N,
                "map<T...>: name the element type of every tensor operand, or of none");
  static_assert(((Named != VT::error) && ...), "map<T...>: operand types are float, half, int32_t, uint32_t or bool");
  if (E::max_index > N)
    throw index_error(std::string(op) + ": the expression uses _" + std::to_string(E::max_index) + " but only " +
                      std::to_string(N) + " tensor" + (N == 1 ? " was" : "s were") + " given");
  std::vector<Shape> shapes;
  std::array<VT, N> rt{};
  Types types{};
  types.fill(VT::any);
  for (std::size_t k = 0; k < N; ++k) {
    g.check_tensor(op, ins[k]);
    shapes.push_back(ins[k].shape());
    rt[k] = types[k] = expr::detail::vt_of(ins[k].element_type());
    if (rt[k] == VT::error)
      throw type_error(std::string(op) + ": operand _" + std::to_string(k + 1) + " is u8, which expressions do not "
                       "support (use an i32 or u32 tensor)");
    if constexpr (sizeof...(Named) > 0) {
      constexpr std::array<VT, N> named{Named...};
      if (rt[k] != named[k])
        throw type_error(std::string(op) + ": operand _" + std::to_string(k + 1) + " is " + expr::detail::name_of(rt[k]) +
                         " but the call names " + expr::detail::name_of(named[k]) + " for it (" + op + "<T...>)");
    }
  }
  if (mode != Mode::new_output) {
    g.check_tensor(op, out);
    shapes.push_back(out.shape());
  }
  Shape const shape = broadcast_shapes(op, shapes);
  if (mode != Mode::new_output && out.shape() != shape)
    throw shape_error(std::string(op) + ": the output " + to_string(out.shape()) + " would have to be broadcast to " +
                      to_string(shape) + (mode == Mode::in_place ? "; a broadcast tensor cannot be written in place" : ""));
  expr::detail::Inferred const inferred = E::infer(types);
  if (inferred.type == VT::error) throw type_error(std::string(op) + ": " + expr::detail::describe(inferred));
  VT result = inferred.type == VT::weak || inferred.type == VT::any ? VT::f32 : inferred.type;
  if (mode != Mode::new_output) {
    VT const want = expr::detail::vt_of(out.element_type());
    if (inferred.type == VT::weak || inferred.type == VT::any) result = want;
    else if (want != result)
      throw type_error(std::string(op) + ": the expression gives " + expr::detail::name_of(result) +
                       " but the output holds " + std::string(name_of(out.element_type())) + " (use cast<T>)");
    if (want == VT::error) throw type_error(std::string(op) + ": u8 outputs are not supported");
  }
  if (mode == Mode::new_output) {
    out = g.add_variable(expr::detail::element_of(result), shape, op);
    std::size_t largest = N;
    for (std::size_t k = 0; k < N; ++k)
      if (ins[k].shape() == shape && (largest == N || ins[k].num_elements() > ins[largest].num_elements())) largest = k;
    if (largest < N) {
      g.set_tile_mapping_like(out, ins[largest]);
    } else {
      map_linearly(g, out);
    }
  }
  if (out.num_elements() == 0) return out;

  // Operands as flat views over the output's elements; scalars stay one element.
  std::array<Tensor, N> flat;
  std::uint32_t scalar_mask = 0;
  for (std::size_t k = 0; k < N; ++k) {
    if (ins[k].num_elements() == 1) {
      flat[k] = ins[k].flatten();
      scalar_mask |= 1u << k;
    } else {
      flat[k] = ins[k].broadcast(shape).flatten();
    }
  }
  Tensor const out_flat = out.flatten();
  // Outputs far larger than the caches are written past them (non-temporal stores): no read-for-ownership.
  bool const stream = out.num_elements() * size_of(out.element_type()) >= streaming_bytes;
  // Operands on other tiles are fetched (read where they live on the host, modelled as an exchange), except
  // views that overlap the output at other positions: those are copied first, so that no vertex reads what
  // another writes.
  Sequence exchange;
  OperatorScope const scope(g, "map", op);
  ComputeSet const cs = g.add_compute_set(op);
  std::array<bool, N> copied{};
  for (std::size_t k = 0; k < N; ++k) copied[k] = mode != Mode::new_output && overlaps_elsewhere(ins[k], out);
  std::vector<MapPiece> work = pieces(g, out_flat);
  auto const workers = static_cast<std::uint32_t>(std::max<std::size_t>(1, g.target().workers_per_tile));
  // A piece of several rows needs every operand's rows contiguous where they are read in place (not so an
  // operand read at a stride, such as every other element of a variable): otherwise its rows become single runs.
  // A flat view of consecutive elements of one variable has them in every piece (the common case: looked at once).
  auto const consecutive = [](Tensor const& t) {
    auto const a = t.affine();
    return a && a->strides.size() == 1 && a->strides[0] == 1;
  };
  std::array<bool, N + 1> in_place_rows{};
  for (std::size_t k = 0; k < N; ++k) in_place_rows[k] = consecutive(flat[k]);
  in_place_rows[N] = consecutive(out_flat);
  for (std::size_t w = 0, n = work.size(); w < n; ++w) {
    MapPiece const p = work[w];
    if (p.rows == 1) continue;
    auto const rows_contiguous = [&](Tensor const& t, bool consecutive_elements) {
      if (consecutive_elements) return true;
      auto const a = piece_of(t, p).affine();
      return !a || a->strides[1] == 1;  // not affine: gathered into a contiguous buffer
    };
    bool contiguous = rows_contiguous(out_flat, in_place_rows[N]);
    for (std::size_t k = 0; k < N && contiguous; ++k)
      if (!(scalar_mask >> k & 1u) && !copied[k]) contiguous = rows_contiguous(flat[k], in_place_rows[k]);
    if (contiguous) continue;
    work[w] = {p.tile, p.begin, p.length, 0, 1};
    for (std::size_t i = 1; i < p.rows; ++i) work.push_back({p.tile, p.begin + i * p.stride, p.length, 0, 1});
  }

  // Operands that overlap the output elsewhere are copied to each piece's tile first (the same for every type,
  // so outside the kernels' instantiations); every vertex is then made the same way, on the build threads.
  bool const any_copied = std::find(copied.begin(), copied.end(), true) != copied.end();
  auto const view_of = [&](std::size_t k, MapPiece const& p) {
    return !(scalar_mask >> k & 1u) ? piece_of(flat[k], p) : p.rows == 1 ? flat[k] : flat[k].reshape({1, 1});
  };
  std::vector<std::array<Tensor, N>> copies(any_copied ? work.size() : 0);
  for (std::size_t w = 0; w < copies.size(); ++w)
    for (std::size_t k = 0; k < N; ++k) {
      if (!copied[k]) continue;
      Tensor const view = view_of(k, work[w]);
      copies[w][k] = g.add_variable(view.element_type(), view.shape(), std::string(op) + "/operand", {.temporary = true});
      g.set_tile_mapping(copies[w][k], work[w].tile);
      exchange.add(tilebsp::copy(view, copies[w][k]));
    }
  HostKernel host;  // empty where an operand is copied to its tile first (the vertices run)
  auto leaf_out = [&]<Types In, VT Out>() {
    vertex::add_vertices(g, work.size(), [&](std::size_t w) {
      MapPiece const& p = work[w];
      return [&]<std::size_t... I>(std::index_sequence<I...>) {
        [[maybe_unused]] auto const in = [&](std::size_t k) {
          return fetch(any_copied && copied[k] ? copies[w][k] : view_of(k, p));
        };
        if (p.rows == 1)
          return vertex::record<MapVertex<E, In, Out, N, false>>(g, cs, p.tile, in(I)..., piece_of(out_flat, p),
                                                                 scalar_mask, stream, workers, e);
        return vertex::record<MapVertex<E, In, Out, N, true>>(g, cs, p.tile, in(I)..., piece_of(out_flat, p),
                                                              scalar_mask, stream, workers, e);
      }(std::make_index_sequence<N>{});
    });
    if (!any_copied) host = MapHostKernel<In, Out, E, N>(e, ins, out, shape, scalar_mask, stream).kernel();
  };
  auto leaf = [&]<Types In>() {
    constexpr VT R = E::infer(In).type;
    if constexpr (R == VT::weak || R == VT::any) {
      auto with_inputs = [&]<VT Out>() { leaf_out.template operator()<In, Out>(); };
      dispatch_out(result, with_inputs);
    } else {
      leaf_out.template operator()<In, R>();
    }
  };
  if constexpr (sizeof...(Named) > 0) {
    // Only the named types' kernels: the checks above threw for other operands, or when E does not type-check.
    if constexpr (E::max_index <= N && E::infer(make_types<Named...>()).type != VT::error)
      leaf.template operator()<make_types<Named...>()>();
  } else if constexpr (E::max_index <= N) {
    dispatch<E>(rt, leaf);  // otherwise the index_error above was thrown
  }
  if (exchange.size() > 0) prog.add(std::move(exchange));
  prog.add(host_path(std::string(op), std::move(host), execute(cs)));
  return out;
}

template <class... T>
concept Tensors = (std::same_as<std::remove_cvref_t<T>, Tensor> && ...);

}  // namespace detail

/// A new tensor holding expr applied elementwise to the operands (NumPy broadcasting), mapped like the largest
/// operand of the output's shape. Appends any exchanges and one compute set to `prog`.
/// Throws index_error (placeholder beyond the operands), shape_error (shapes that do not broadcast) and
/// type_error (element types mixed without a cast, or an operator that does not take a type).
/// A tensor's element type is known when the program runs, so a map compiles its kernels for every combination
/// of operand types under which the expression type-checks. Naming the types, `map<float, float>(g, prog, e, a, b)`,
/// compiles only theirs (a fraction of the compile time); an operand of another type is then a type_error.
template <class... Named, expr::ExprLike E, class... T>
  requires detail::Tensors<T...>
Tensor map(Graph& g, Sequence& prog, E const& e, T const&... operands) {
  return detail::map<E, sizeof...(T), detail::named_type<Named>...>(g, prog, e, {operands...}, Tensor{},
                                                                           detail::Mode::new_output, "map");
}
/// Writes expr into the first operand, which must already have the broadcast shape.
template <class... Named, expr::ExprLike E, class... T>
  requires detail::Tensors<T...>
void map_in_place(Graph& g, Sequence& prog, E const& e, Tensor const& first, T const&... operands) {
  detail::map<E, sizeof...(T) + 1, detail::named_type<Named>...>(g, prog, e, {first, operands...}, first,
                                                                        detail::Mode::in_place, "map_in_place");
}
/// Writes expr into `out`, whose shape must be the operands' broadcast shape and whose type the expression's.
template <class... Named, expr::ExprLike E, class... T>
  requires detail::Tensors<T...>
void map_with_output(Graph& g, Sequence& prog, E const& e, Tensor const& out, T const&... operands) {
  detail::map<E, sizeof...(T), detail::named_type<Named>...>(g, prog, e, {operands...}, out,
                                                                    detail::Mode::given_output, "map_with_output");
}

/// a + b. (The helpers are templates so that only the ones a program uses are instantiated.)
template <std::same_as<Tensor> T>
T add(Graph& g, Sequence& prog, T const& a, T const& b) { return map(g, prog, expr::_1 + expr::_2, a, b); }
/// a - b
template <std::same_as<Tensor> T>
T sub(Graph& g, Sequence& prog, T const& a, T const& b) { return map(g, prog, expr::_1 - expr::_2, a, b); }
/// a * b
template <std::same_as<Tensor> T>
T mul(Graph& g, Sequence& prog, T const& a, T const& b) { return map(g, prog, expr::_1 * expr::_2, a, b); }
/// max(a, 0)
template <std::same_as<Tensor> T>
T relu(Graph& g, Sequence& prog, T const& a) { return map(g, prog, expr::relu(expr::_1), a); }
/// a += k * b (the SGD update when b is a gradient and k = -learning rate).
template <std::same_as<Tensor> T>
void scaled_add(Graph& g, Sequence& prog, T const& a, T const& b, double k) {
  map_in_place(g, prog, expr::_1 + expr::_2 * k, a, b);
}
/// Sets every element of t to value.
template <std::same_as<Tensor> T>
void fill(Graph& g, Sequence& prog, T const& t, double value) {
  map_with_output(g, prog, expr::constant(value), t);
}
/// A new tensor holding t converted to `type` (f32, f16, i32, u32 or bool).
template <std::same_as<Tensor> T>
T cast(Graph& g, Sequence& prog, T const& t, ElementType type) {
  using namespace expr;
  switch (type) {
    case ElementType::f32: return map(g, prog, expr::cast<float>(_1), t);
    case ElementType::f16: return map(g, prog, expr::cast<half>(_1), t);
    case ElementType::i32: return map(g, prog, expr::cast<std::int32_t>(_1), t);
    case ElementType::u32: return map(g, prog, expr::cast<std::uint32_t>(_1), t);
    case ElementType::boolean: return map(g, prog, expr::cast<bool>(_1), t);
    case ElementType::u8: break;
  }
  throw type_error("cast: u8 is not a supported target type");
}

#define TILEBSP_OPS_MAP_INSTANCES(X)                                   \
  X(Tensor add(Graph&, Sequence&, Tensor const&, Tensor const&))       \
  X(Tensor sub(Graph&, Sequence&, Tensor const&, Tensor const&))       \
  X(Tensor mul(Graph&, Sequence&, Tensor const&, Tensor const&))       \
  X(Tensor relu(Graph&, Sequence&, Tensor const&))                     \
  X(void scaled_add(Graph&, Sequence&, Tensor const&, Tensor const&, double)) \
  X(void fill(Graph&, Sequence&, Tensor const&, double))               \
  X(Tensor cast(Graph&, Sequence&, Tensor const&, ElementType))
TILEBSP_DECLARE_INSTANCES(TILEBSP_OPS_MAP_INSTANCES)
}  // namespace ops
}  // namespace tilebsp
