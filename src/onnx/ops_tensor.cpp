// ONNX's data-movement and shape operators: views of graph tensors (no copies), or folded on the host when their
// inputs are known at import (shape subgraphs, constants).
#include "importer.hpp"

#include <tilebsp/ops/map.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

namespace tilebsp::onnx::detail {
namespace {

Shape to_shape(Dims const& d) { return Shape(d.begin(), d.end()); }

/// The flat indices of a row-major tensor of `shape` in the order of its dimshuffle by `perm`.
std::vector<std::size_t> permuted_indices(Dims const& shape, std::vector<std::size_t> const& perm) {
  std::size_t const r = shape.size();
  std::vector<std::size_t> stride(r, 1);
  for (std::size_t k = r; k-- > 1;) stride[k - 1] = stride[k] * static_cast<std::size_t>(shape[k]);
  Dims out(r);
  for (std::size_t d = 0; d < r; ++d) out[d] = shape[perm[d]];
  std::vector<std::size_t> src(count(out));
  for (std::size_t i = 0; i < src.size(); ++i) {
    std::size_t rest = i, s = 0;
    for (std::size_t d = r; d-- > 0;) {
      auto const n = static_cast<std::size_t>(out[d]);
      s += (rest % n) * stride[perm[d]];
      rest /= n;
    }
    src[i] = s;
  }
  return src;
}

/// A joined view (a concat of several pieces) copied once into a tensor of its own: the operators after it (maps,
/// convolutions, matmuls) then read one strided tensor and run their host kernels, where a joined view would send
/// them through exchanges and per-tile vertices; the copy costs what PyTorch's and ONNX Runtime's Concat costs.
/// The copy lies in the pieces' common element order (`layout`), so a channel concat of convolution results stays
/// channels last.
Tensor materialised(Importer& imp, Tensor const& view, std::vector<std::size_t> const& layout) {
  std::vector<std::size_t> inverse(layout.size());
  for (std::size_t d = 0; d < layout.size(); ++d) inverse[layout[d]] = d;
  Tensor const source = layout.empty() ? view : view.dimshuffle(inverse);
  Tensor t = imp.g.add_variable(source.element_type(), source.shape(), imp.node->name + "/joined");
  map_linearly(imp.g, t);
  imp.prog.add(copy(source, t));
  return layout.empty() ? t : t.dimshuffle(layout);
}

/// A concatenation that extends an earlier one by more inputs (DenseNet: layer k of a block reads the block's input
/// joined with the outputs of layers 1 to k - 1) as a prefix of one buffer along the axis: it copies only the inputs
/// the earlier one lacks, so a chain of L concatenations copies each input once instead of L / 2 times on average.
/// The first of a chain sizes the buffer for the longest concatenation in the model that extends its inputs, each
/// input it lacks counted as large as the smallest of its own after the first (DenseNet's growth rate; never more
/// room than that); one that does not fit moves the chain into a buffer twice as large. The buffer stays held
/// (Importer::holders), so no map writes into it. None for a concatenation nothing extends, with constant inputs, or
/// in a pipelined or sharded import (a chain's copies would cross its stages).
std::optional<Tensor> chained(Importer& imp, std::vector<Value const*> const& parts, std::vector<Tensor> const& ts,
                              std::size_t axis, std::vector<std::size_t> const& layout) {
  auto const& names = imp.node->inputs;
  if (imp.stages || imp.computed || !imp.options.manual_sharding.empty() || ts.size() != parts.size() ||
      names.size() != parts.size())
    return std::nullopt;
  for (auto const* p : parts)
    if (p->constant || p->host_read || !p->zero_lower.empty()) return std::nullopt;
  std::vector<std::size_t> inverse(layout.size());
  for (std::size_t d = 0; d < layout.size(); ++d) inverse[layout[d]] = d;
  auto const physical = [&](Tensor const& t) { return layout.empty() ? t : t.dimshuffle(inverse); };
  std::size_t const pax = layout.empty() ? axis : layout[axis];  // the axis in the physical order
  auto const length = [&](Tensor const& t) { return static_cast<std::int64_t>(t.shape()[axis]); };
  auto const copy_into = [&](Tensor const& buffer, std::size_t from, std::int64_t at) {
    for (std::size_t i = from; i < ts.size(); ++i) {
      auto const n = length(ts[i]);
      Tensor const into = buffer.slice(static_cast<std::size_t>(at), static_cast<std::size_t>(at + n), pax);
      imp.prog.add(copy(physical(ts[i]), into));
      at += n;
    }
    return at;
  };
  // The length along the axis of a buffer with room for `want` (more where the elements stay within the bound on a
  // graph value), at least `need`.
  auto const room = [&](std::int64_t need, std::int64_t want) {
    std::size_t others = 1;
    for (auto const d : physical(ts[0]).shape()) others *= d;
    others /= static_cast<std::size_t>(length(ts[0]));
    auto const most = static_cast<std::int64_t>(max_graph_elements / std::max<std::size_t>(others, 1));
    return static_cast<std::size_t>(std::max(need, std::min(want, most)));
  };
  // Whether a is a strict prefix of b.
  auto const prefix = [&](std::vector<std::string> const& a, std::vector<std::string> const& b) {
    return a.size() < b.size() && std::equal(a.begin(), a.end(), b.begin());
  };
  for (auto& c : imp.chains) {
    if (c.axis != axis || c.layout != layout || !prefix(c.parts, names) || c.buffer.graph_id() != ts[0].graph_id() ||
        c.buffer.element_type() != ts[0].element_type())
      continue;
    Shape want = physical(ts[0]).shape();
    want[pax] = c.buffer.shape()[pax];
    if (c.buffer.shape() != want) continue;
    std::int64_t need = c.filled;
    for (std::size_t i = c.parts.size(); i < ts.size(); ++i) need += length(ts[i]);
    if (need > static_cast<std::int64_t>(c.buffer.shape()[pax])) {  // moved into a buffer twice as large
      Shape shape = want;
      shape[pax] = room(need, 2 * static_cast<std::int64_t>(want[pax]));
      Tensor larger = imp.g.add_variable(c.buffer.element_type(), shape, imp.node->name + "/joined");
      map_linearly(imp.g, larger);
      auto const filled = static_cast<std::size_t>(c.filled);
      imp.prog.add(copy(c.buffer.slice(0, filled, pax), larger.slice(0, filled, pax)));
      imp.hold(larger, 1);
      c.buffer = larger;
    }
    c.filled = copy_into(c.buffer, c.parts.size(), c.filled);
    c.parts = names;
    Tensor const joined = c.buffer.slice(0, static_cast<std::size_t>(c.filled), pax);
    return layout.empty() ? joined : joined.dimshuffle(layout);
  }
  // A new chain where a later concatenation extends this one: the longest such sizes the buffer.
  std::size_t longest = names.size();
  auto const rank = static_cast<std::int64_t>(parts[0]->shape.size());
  for (auto const& n : imp.model.nodes) {
    if (n.op_type != "Concat" || !n.domain.empty() || !prefix(names, n.inputs) || n.inputs.size() <= longest) continue;
    auto const a = n.attributes.find("axis");
    if (a == n.attributes.end() || a->second.kind != Attribute::Kind::i || a->second.i < -rank || a->second.i >= rank ||
        static_cast<std::size_t>(a->second.i < 0 ? a->second.i + rank : a->second.i) != axis)
      continue;
    longest = n.inputs.size();
  }
  if (longest == names.size()) return std::nullopt;
  std::int64_t need = 0, each = length(ts[1]);  // each input to come: as large as the smallest after the first
  for (std::size_t i = 0; i < ts.size(); ++i) {
    need += length(ts[i]);
    if (i > 0) each = std::min(each, length(ts[i]));
  }
  Shape shape = physical(ts[0]).shape();
  auto const to_come = static_cast<std::int64_t>(longest - names.size());
  std::int64_t const most = std::int64_t{1} << 31;  // more than any graph value holds (room bounds it)
  shape[pax] = room(need, to_come > most / std::max<std::int64_t>(each, 1) ? most : need + to_come * each);
  Tensor buffer = imp.g.add_variable(ts[0].element_type(), shape, imp.node->name + "/joined");
  map_linearly(imp.g, buffer);
  imp.hold(buffer, 1);
  std::int64_t const filled = copy_into(buffer, 0, 0);
  imp.chains.push_back({buffer, names, axis, layout, filled});
  Tensor const joined = buffer.slice(0, static_cast<std::size_t>(filled), pax);
  return layout.empty() ? joined : joined.dimshuffle(layout);
}

/// A concatenation along the channels into its Importer::join_slot buffer: the inputs the convolutions computing
/// them wrote there already, the others copied into their slices. None where the inputs do not fit the buffer as
/// join_slot sized it (their channels, type or layout), which the copy into a new tensor then handles.
/// Sets `layout` to the result's (channels last).
std::optional<Tensor> joined_in_place(Importer& imp, std::vector<Value const*> const& parts, std::size_t axis,
                                      std::vector<std::size_t>& layout) {
  auto const it = imp.joins.find(imp.node);
  if (it == imp.joins.end()) return std::nullopt;
  auto const& j = it->second;
  auto const slot = [&](std::size_t i) {
    auto const o = static_cast<std::size_t>(j.offset[i]);
    return j.buffer.slice(o, o + static_cast<std::size_t>(j.size[i]), j.buffer.rank() - 1);
  };
  auto const map_if_unmapped = [&](Tensor const& s) {
    auto const none = [](std::int64_t, std::int64_t, std::uint32_t) {};
    if (core::detail::for_each_mapped(imp.g.impl(), s, none) == static_cast<std::int64_t>(s.num_elements()))
      map_linearly(imp.g, s);
  };
  // Refused: the slices no convolution wrote are mapped all the same (the buffer is a variable of the graph).
  auto const refuse = [&]() -> std::optional<Tensor> {
    for (std::size_t i = 0; i < j.size.size(); ++i) map_if_unmapped(slot(i));
    return std::nullopt;
  };
  std::size_t const rank = parts[0]->shape.size();
  if (axis != 1 || parts.size() != j.size.size() || j.buffer.rank() != rank) return refuse();
  std::vector<std::size_t> const last = to_last(rank);  // the buffer's order
  std::vector<Tensor> physical;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    Value const& p = *parts[i];
    if (p.constant || p.host_read || !p.zero_lower.empty() || p.shape[1] != j.size[i]) return refuse();
    Tensor t = imp.tensor(p);
    if (t.element_type() != j.buffer.element_type()) return refuse();
    t = t.dimshuffle(last);
    if (t.shape() != slot(i).shape()) return refuse();
    physical.push_back(t);
  }
  for (std::size_t i = 0; i < parts.size(); ++i) {
    Tensor const s = slot(i);
    auto const a = physical[i].affine(), b = s.affine();
    if (a && b && a->var == b->var && a->start == b->start && a->strides == b->strides) continue;  // written in place
    map_if_unmapped(s);
    imp.prog.add(copy(physical[i], s));
  }
  layout = to_first(rank);  // the logical (channels-first) view of the buffer
  return j.buffer.dimshuffle(layout);
}

/// Value `v` with the elements at `idx` along `axis` (any order, repeats allowed).
Value select(Importer& imp, Value const& v, std::size_t axis, std::vector<std::int64_t> const& idx) {
  Dims shape = v.shape;
  shape[axis] = static_cast<std::int64_t>(idx.size());
  if (v.constant) {
    std::size_t inner = 1, outer = 1;
    for (std::size_t d = axis + 1; d < v.shape.size(); ++d) inner *= static_cast<std::size_t>(v.shape[d]);
    for (std::size_t d = 0; d < axis; ++d) outer *= static_cast<std::size_t>(v.shape[d]);
    auto const n = static_cast<std::size_t>(v.shape[axis]);
    std::vector<std::size_t> src;
    for (std::size_t o = 0; o < outer; ++o)
      for (auto i : idx)
        for (std::size_t k = 0; k < inner; ++k) src.push_back((o * n + static_cast<std::size_t>(i)) * inner + k);
    Value r = v;
    r.constant = gather_host(*v.constant, shape, src);
    r.shape = shape;
    return r;
  }
  if (idx.empty()) imp.unsupported("an empty result computed at run time (graph tensors have at least one element)");
  // Runs of consecutive indices (rising or falling) are slices; the pieces are joined by a concat view.
  std::vector<Tensor> pieces;
  for (std::size_t i = 0; i < idx.size();) {
    std::size_t j = i + 1;
    int const dir = j < idx.size() && idx[j] == idx[i] + 1 ? 1 : j < idx.size() && idx[j] == idx[i] - 1 ? -1 : 0;
    while (dir != 0 && j < idx.size() && idx[j] == idx[j - 1] + dir) ++j;
    auto const lo = static_cast<std::size_t>(std::min(idx[i], idx[j - 1]));
    auto const hi = static_cast<std::size_t>(std::max(idx[i], idx[j - 1])) + 1;
    Tensor p = v.tensor.slice(lo, hi, axis);
    if (dir < 0) p = p.reverse(axis);
    pieces.push_back(std::move(p));
    i = j;
  }
  Value r;
  r.type = v.type;
  r.shape = shape;
  if (pieces.size() == 1) {
    r.tensor = pieces[0];
    if (idx.size() > 1 && idx[1] > idx[0]) r.layout = v.layout;
  } else {
    r.tensor = materialised(imp, concat(pieces, axis), v.layout);
    r.layout = v.layout;
  }
  return r;
}

Value reshaped(Importer& imp, Value const& v, Dims const& shape) {
  Value r;
  r.type = v.type;
  r.shape = shape;
  if (v.constant) {
    r.constant = *v.constant;
    r.constant->shape = shape;
  } else {
    r.tensor = v.tensor.reshape(to_shape(shape));
  }
  (void)imp;
  return r;
}

Value transposed(Value const& v, std::vector<std::size_t> const& perm) {
  Value r;
  r.type = v.type;
  for (auto p : perm) r.shape.push_back(v.shape[p]);
  if (v.constant) {
    r.constant = gather_host(*v.constant, r.shape, permuted_indices(v.shape, perm));
  } else {
    r.tensor = v.tensor.dimshuffle(perm);
    if (!v.layout.empty())
      for (auto p : perm) r.layout.push_back(v.layout[p]);
  }
  return r;
}

Value concatenated(Importer& imp, std::vector<Value const*> const& parts, std::size_t axis) {
  Value r;
  r.type = parts[0]->type;
  r.shape = parts[0]->shape;
  r.shape[axis] = 0;
  for (auto const* p : parts) {
    if (p->shape.size() != r.shape.size()) imp.invalid("the inputs' ranks differ");
    for (std::size_t d = 0; d < r.shape.size(); ++d)
      if (d != axis && p->shape[d] != r.shape[d]) imp.invalid("the inputs' shapes differ outside the axis");
    if (p->type != r.type) imp.invalid("the inputs' types differ");
    r.shape[axis] += p->shape[axis];
  }
  bool const all_known = std::all_of(parts.begin(), parts.end(), [](Value const* p) { return p->constant.has_value(); });
  if (all_known) {
    std::size_t outer = 1;
    for (std::size_t d = 0; d < axis; ++d) outer *= static_cast<std::size_t>(r.shape[d]);
    HostTensor h;
    h.type = r.type;
    h.shape = r.shape;
    for (std::size_t o = 0; o < outer; ++o)
      for (auto const* p : parts) {
        std::size_t const block = count(p->shape) / outer;
        auto const& c = *p->constant;
        if (is_floating(c.type)) h.floats.insert(h.floats.end(), c.floats.begin() + o * block, c.floats.begin() + (o + 1) * block);
        else h.ints.insert(h.ints.end(), c.ints.begin() + o * block, c.ints.begin() + (o + 1) * block);
      }
    r.constant = std::move(h);
    return r;
  }
  // The copy's element order: the graph pieces' common layout (constants have none of their own).
  std::vector<Tensor> ts;
  std::optional<std::vector<std::size_t>> common;
  for (auto const* p : parts) {
    if (count(p->shape) == 0) continue;
    if (!p->constant) common = !common || *common == p->layout ? p->layout : std::vector<std::size_t>{};
    ts.push_back(imp.tensor(*p));
  }
  std::vector<std::size_t> const layout = common.value_or(std::vector<std::size_t>{});
  if (std::vector<std::size_t> joined; auto const in_place = joined_in_place(imp, parts, axis, joined)) {
    r.tensor = *in_place;
    r.layout = joined;
  } else if (ts.size() == 1) {
    r.tensor = ts[0];  // the one non-empty part, in its own layout
    r.layout = layout;
  } else {
    std::optional<Tensor> const in_chain = chained(imp, parts, ts, axis, layout);
    r.tensor = in_chain ? *in_chain : materialised(imp, concat(ts, axis), layout);
    r.layout = layout;
  }
  return r;
}

std::vector<std::size_t> axes_of(Importer& imp, std::vector<std::int64_t> const& axes, std::size_t rank) {
  std::vector<std::size_t> r;
  for (auto a : axes) r.push_back(imp.axis(a, rank));
  std::sort(r.begin(), r.end());
  if (std::adjacent_find(r.begin(), r.end()) != r.end()) imp.invalid("an axis is named twice");
  return r;
}

void identity(Importer& imp, Node const&) { imp.out(0, imp.in(0)); }

void dropout(Importer& imp, Node const&) {
  imp.only_attrs({"seed"});
  if (imp.has(2)) {
    auto const& t = imp.known(2, "training_mode");
    if (t.ints.size() == 1 && t.ints[0] != 0) imp.unsupported("training_mode true: tilebsp imports models for inference");
  }
  Value const& x = imp.in(0);
  imp.out(0, x);
  if (imp.node->outputs.size() > 1 && !imp.node->outputs[1].empty())
    imp.out_constant(1, make_host(DataType::boolean, x.shape, [](std::size_t) { return 1.0; }));
}

void flatten(Importer& imp, Node const&) {
  imp.only_attrs({"axis"});
  Value const& x = imp.in(0);
  std::int64_t a = imp.attr_int("axis", 1);
  auto const rank = static_cast<std::int64_t>(x.shape.size());
  if (a < -rank || a > rank) imp.invalid("axis " + std::to_string(a) + " is outside [-rank, rank]");
  if (a < 0) a += rank;
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < rank; ++d) (d < a ? outer : inner) *= x.shape[static_cast<std::size_t>(d)];
  imp.out(0, reshaped(imp, x, {outer, inner}));
}

void reshape(Importer& imp, Node const&) {
  imp.only_attrs({"allowzero"});
  Value const& x = imp.in(0);
  auto shape = imp.known_ints(1, "the shape");
  bool const allowzero = imp.attr_int("allowzero", 0) != 0;
  std::int64_t known = 1;
  int infer = -1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0 && !allowzero) {
      if (d >= x.shape.size()) imp.invalid("shape copies dimension " + std::to_string(d) + " of a rank-" + std::to_string(x.shape.size()) + " input");
      shape[d] = x.shape[d];
    }
    if (shape[d] == -1) {
      if (infer >= 0) imp.invalid("the shape has more than one -1");
      infer = static_cast<int>(d);
    } else if (shape[d] < 0) {
      imp.invalid("the shape has the negative size " + std::to_string(shape[d]));
    } else {
      known *= shape[d];
    }
  }
  auto const total = static_cast<std::int64_t>(count(x.shape));
  if (infer >= 0) {
    if (known == 0 || total % known != 0) imp.invalid("the shape cannot hold the input's " + std::to_string(total) + " elements");
    shape[static_cast<std::size_t>(infer)] = total / known;
  } else if (known != total) {
    imp.invalid("the shape holds " + std::to_string(known) + " elements, the input " + std::to_string(total));
  }
  imp.out(0, reshaped(imp, x, shape));
}

void squeeze(Importer& imp, Node const&) {
  imp.only_attrs({});
  Value const& x = imp.in(0);
  std::vector<std::size_t> axes;
  if (imp.has(1)) {
    axes = axes_of(imp, imp.known_ints(1, "the axes"), x.shape.size());
  } else {
    for (std::size_t d = 0; d < x.shape.size(); ++d)
      if (x.shape[d] == 1) axes.push_back(d);
  }
  Dims shape;
  for (std::size_t d = 0; d < x.shape.size(); ++d) {
    bool const drop = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (drop && x.shape[d] != 1) imp.invalid("axis " + std::to_string(d) + " has size " + std::to_string(x.shape[d]) + ", not 1");
    if (!drop) shape.push_back(x.shape[d]);
  }
  imp.out(0, reshaped(imp, x, shape));
}

void unsqueeze(Importer& imp, Node const&) {
  imp.only_attrs({});
  Value const& x = imp.in(0);
  auto const axes = axes_of(imp, imp.known_ints(1, "the axes"), x.shape.size() + imp.known_ints(1, "the axes").size());
  Dims shape;
  std::size_t k = 0;
  for (std::size_t d = 0; d < x.shape.size() + axes.size(); ++d) {
    if (std::find(axes.begin(), axes.end(), d) != axes.end()) shape.push_back(1);
    else shape.push_back(x.shape[k++]);
  }
  imp.out(0, reshaped(imp, x, shape));
}

void transpose(Importer& imp, Node const&) {
  imp.only_attrs({"perm"});
  Value const& x = imp.in(0);
  std::vector<std::size_t> perm;
  auto const p = imp.attr_ints("perm");
  if (p.empty()) {
    for (std::size_t d = x.shape.size(); d-- > 0;) perm.push_back(d);
  } else {
    if (p.size() != x.shape.size()) imp.invalid("perm names " + std::to_string(p.size()) + " axes of a rank-" + std::to_string(x.shape.size()) + " input");
    for (auto a : p) perm.push_back(imp.axis(a, x.shape.size()));
    auto sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t d = 0; d < sorted.size(); ++d)
      if (sorted[d] != d) imp.invalid("perm is not a permutation");
  }
  imp.out(0, transposed(x, perm));
}

void concat_op(Importer& imp, Node const&) {
  imp.only_attrs({"axis"});
  std::vector<Value const*> parts;
  for (std::size_t i = 0; i < imp.inputs(); ++i) parts.push_back(&imp.in(i));
  if (!imp.has_attr("axis")) imp.invalid("the attribute 'axis' is required");
  imp.out(0, concatenated(imp, parts, imp.axis(imp.attr_int("axis", 0), parts[0]->shape.size())));
}

void split(Importer& imp, Node const& n) {
  imp.only_attrs({"axis"});
  Value const& x = imp.in(0);
  std::size_t const axis = imp.axis(imp.attr_int("axis", 0), x.shape.size());
  std::vector<std::int64_t> sizes;
  std::int64_t const len = x.shape[axis];
  if (imp.has(1)) {
    sizes = imp.known_ints(1, "the split sizes");
    if (sizes.size() != n.outputs.size()) imp.invalid("split names " + std::to_string(sizes.size()) + " parts for " + std::to_string(n.outputs.size()) + " outputs");
    std::int64_t s = 0;
    for (auto v : sizes) {
      if (v < 0) imp.invalid("a split size is negative");
      s += v;
    }
    if (s != len) imp.invalid("the split sizes add up to " + std::to_string(s) + ", the axis has " + std::to_string(len));
  } else {
    auto const k = static_cast<std::int64_t>(n.outputs.size());
    if (len % k != 0) imp.invalid("an axis of " + std::to_string(len) + " does not split into " + std::to_string(k) + " equal parts");
    sizes.assign(n.outputs.size(), len / k);
  }
  std::int64_t start = 0;
  for (std::size_t o = 0; o < sizes.size(); ++o) {
    std::vector<std::int64_t> idx(static_cast<std::size_t>(sizes[o]));
    std::iota(idx.begin(), idx.end(), start);
    start += sizes[o];
    imp.out(o, select(imp, x, axis, idx));
  }
}

void slice(Importer& imp, Node const&) {
  imp.only_attrs({});
  Value const& x = imp.in(0);
  auto const starts = imp.known_ints(1, "the starts"), ends = imp.known_ints(2, "the ends");
  if (starts.size() != ends.size()) imp.invalid("starts and ends differ in length");
  std::vector<std::int64_t> axes, steps(starts.size(), 1);
  if (imp.has(3)) axes = imp.known_ints(3, "the axes");
  else for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  if (imp.has(4)) steps = imp.known_ints(4, "the steps");
  if (axes.size() != starts.size() || steps.size() != starts.size()) imp.invalid("starts, ends, axes and steps differ in length");
  Value v = x;
  std::vector<bool> seen(x.shape.size());
  for (std::size_t i = 0; i < starts.size(); ++i) {
    std::size_t const a = imp.axis(axes[i], x.shape.size());
    if (seen[a]) imp.invalid("an axis is named twice");
    seen[a] = true;
    std::int64_t const dim = x.shape[a], step = steps[i];
    if (step == 0) imp.invalid("a step is 0");
    // ONNX's clamping: [0, dim] for positive steps; starts to [0, dim - 1] and ends to [-1, dim - 1] for negative.
    auto clamp = [&](std::int64_t p, bool end) {
      if (p < 0) p += dim;
      if (step > 0) return std::clamp<std::int64_t>(p, 0, dim);
      return std::clamp<std::int64_t>(p, end ? -1 : 0, dim - 1);
    };
    std::int64_t const s = clamp(starts[i], false), e = clamp(ends[i], true);
    std::vector<std::int64_t> idx;
    if (step > 0) for (std::int64_t p = s; p < e; p += step) idx.push_back(p);
    else for (std::int64_t p = s; p > e; p += step) idx.push_back(p);
    if (idx.size() == static_cast<std::size_t>(dim) && step == 1) continue;
    v = select(imp, v, a, idx);
  }
  imp.out(0, v);
}

void gather(Importer& imp, Node const&) {
  imp.only_attrs({"axis"});
  Value const& x = imp.in(0);
  std::size_t const axis = imp.axis(imp.attr_int("axis", 0), x.shape.size());
  HostTensor const& ind = imp.known(1, "the indices");
  std::vector<std::int64_t> idx;
  for (auto i : ind.ints) {
    if (i < -x.shape[axis] || i >= x.shape[axis]) imp.invalid("index " + std::to_string(i) + " is outside an axis of " + std::to_string(x.shape[axis]));
    idx.push_back(i < 0 ? i + x.shape[axis] : i);
  }
  Value v = select(imp, x, axis, idx);
  Dims shape(x.shape.begin(), x.shape.begin() + static_cast<std::ptrdiff_t>(axis));
  shape.insert(shape.end(), ind.shape.begin(), ind.shape.end());
  shape.insert(shape.end(), x.shape.begin() + static_cast<std::ptrdiff_t>(axis) + 1, x.shape.end());
  imp.out(0, reshaped(imp, v, shape));
}

void shape_op(Importer& imp, Node const&) {
  imp.only_attrs({"start", "end"});
  Value const& x = imp.in(0);
  auto const r = static_cast<std::int64_t>(x.shape.size());
  auto clamp = [&](std::int64_t p) { return std::clamp<std::int64_t>(p < 0 ? p + r : p, 0, r); };
  std::int64_t const s = clamp(imp.attr_int("start", 0)), e = clamp(imp.attr_int("end", r));
  HostTensor t;
  t.type = DataType::int64;
  for (std::int64_t d = s; d < e; ++d) t.ints.push_back(x.shape[static_cast<std::size_t>(d)]);
  t.shape = {static_cast<std::int64_t>(t.ints.size())};
  imp.out_constant(0, std::move(t));
}

void size_op(Importer& imp, Node const&) {
  imp.only_attrs({});
  HostTensor t;
  t.type = DataType::int64;
  t.ints = {static_cast<std::int64_t>(count(imp.in(0).shape))};
  imp.out_constant(0, std::move(t));
}

void constant(Importer& imp, Node const& n) {
  if (n.attributes.size() != 1) imp.invalid("a Constant takes exactly one value attribute");
  auto const& [name, a] = *n.attributes.begin();
  HostTensor t;
  if (name == "value") {
    t = a.t;
  } else if (name == "value_float") {
    t.type = DataType::float32, t.floats = {a.f};
  } else if (name == "value_floats") {
    t.type = DataType::float32, t.floats = a.floats, t.shape = {static_cast<std::int64_t>(a.floats.size())};
  } else if (name == "value_int") {
    t.type = DataType::int64, t.ints = {a.i};
  } else if (name == "value_ints") {
    t.type = DataType::int64, t.ints = a.ints, t.shape = {static_cast<std::int64_t>(a.ints.size())};
  } else {
    imp.unsupported("attribute '" + name + "' is not supported (value, value_float(s) and value_int(s) are)");
  }
  imp.out_constant(0, std::move(t));
}

void constant_of_shape(Importer& imp, Node const& n) {
  imp.only_attrs({"value"});
  auto const shape = imp.known_ints(0, "the shape");
  HostTensor value;
  value.type = DataType::float32;
  value.floats = {0.0f};
  if (auto it = n.attributes.find("value"); it != n.attributes.end()) value = it->second.t;
  if (value.size() != 1) imp.invalid("the value must hold one element");
  for (auto d : shape)
    if (d < 0) imp.invalid("the shape has a negative size");
  double const v = value.value(0);
  imp.out_constant(0, make_host(value.type, shape, [&](std::size_t) { return v; }));
}

void cast(Importer& imp, Node const&) {
  imp.only_attrs({"to", "saturate"});
  Value const& x = imp.in(0);
  auto const to = static_cast<DataType>(imp.attr_int("to", 0));
  if (x.constant) {
    HostTensor const& c = *x.constant;
    imp.out_constant(0, make_host(to, x.shape, [&](std::size_t i) {
                       double const v = c.value(i);
                       return is_floating(to) || to == DataType::boolean ? v : std::trunc(v);
                     }));
    return;
  }
  ElementType const t = imp.graph_type(to);
  Value r = x;
  r.type = to;
  if (t != x.tensor.element_type()) {
    std::vector<std::size_t> layout;
    switch (t) {
      case ElementType::f32: r.tensor = imp.map(expr::cast<float>(expr::_1), layout, x); break;
      case ElementType::f16: r.tensor = imp.map(expr::cast<half>(expr::_1), layout, x); break;
      case ElementType::i32: r.tensor = imp.map(expr::cast<std::int32_t>(expr::_1), layout, x); break;
      default: r.tensor = imp.map(expr::cast<bool>(expr::_1), layout, x); break;
    }
    r.layout = layout;
  }
  imp.out(0, r);
}

void expand(Importer& imp, Node const&) {
  imp.only_attrs({});
  Value const& x = imp.in(0);
  Dims const shape = broadcast(x.shape, imp.known_ints(1, "the shape"));
  if (shape == Dims{-1}) imp.invalid("the shape does not broadcast with the input's");
  Value r;
  r.type = x.type;
  r.shape = shape;
  if (x.constant) {
    r.constant = make_host(x.type, shape, [&](std::size_t i) { return x.constant->value(broadcast_index(x.shape, shape, i)); });
  } else {
    Shape full(shape.size() - x.shape.size(), 1);
    for (auto d : x.shape) full.push_back(static_cast<std::size_t>(d));
    r.tensor = x.tensor.reshape(full).broadcast(to_shape(shape));
  }
  imp.out(0, r);
}

void tile(Importer& imp, Node const&) {
  imp.only_attrs({});
  Value v = imp.in(0);
  auto const repeats = imp.known_ints(1, "the repeats");
  if (repeats.size() != v.shape.size()) imp.invalid("repeats must name every axis");
  for (std::size_t a = 0; a < repeats.size(); ++a) {
    if (repeats[a] < 1) imp.unsupported("a repeat count below 1");
    if (repeats[a] == 1) continue;
    std::vector<std::int64_t> idx;
    for (std::int64_t k = 0; k < repeats[a]; ++k)
      for (std::int64_t i = 0; i < v.shape[a]; ++i) idx.push_back(i);
    v = select(imp, v, a, idx);
  }
  imp.out(0, v);
}

void range(Importer& imp, Node const&) {
  imp.only_attrs({});
  auto const& s = imp.known(0, "start");
  auto const& l = imp.known(1, "limit");
  auto const& d = imp.known(2, "delta");
  double const start = s.value(0), limit = l.value(0), delta = d.value(0);
  if (delta == 0) imp.invalid("delta is 0");
  auto const n = static_cast<std::int64_t>(std::max(0.0, std::ceil((limit - start) / delta)));
  imp.out_constant(0, make_host(s.type, {n}, [&](std::size_t i) { return start + static_cast<double>(i) * delta; }));
}

void pad(Importer& imp, Node const&) {
  imp.only_attrs({"mode"});
  Value v = imp.in(0);
  std::string const mode = imp.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge") imp.unsupported("mode '" + mode + "'");
  auto const pads = imp.known_ints(1, "the pads");
  std::size_t const r = v.shape.size();
  std::vector<std::size_t> axes;
  if (imp.has(3)) {
    for (auto a : imp.known_ints(3, "the axes")) axes.push_back(imp.axis(a, r));
  } else {
    for (std::size_t a = 0; a < r; ++a) axes.push_back(a);
  }
  if (pads.size() != 2 * axes.size()) imp.invalid("pads must hold two values per axis");
  // A pad beyond 2^31 either way leaves no graph value (at most 2^31 elements): refused before the sums below,
  // which could overflow.
  auto const bound = static_cast<std::int64_t>(max_graph_elements);
  for (auto p : pads)
    if (p < -bound || p > bound)
      throw shape_error("pad " + std::to_string(p) + " is outside [-2^31, 2^31]: a graph value holds at most 2^31 elements");
  double value = 0;
  if (imp.has(2)) {
    auto const& c = imp.known(2, "the constant value");
    if (c.size() == 1) value = c.value(0);
  }
  // Zeros around the spatial axes of a value only a convolution or an average pool reads: that node takes them
  // as its own padding (no copy of the padded activations; torchvision's Inception exports its average pools so).
  if (mode == "constant" && value == 0 && !v.constant && r >= 3 && r <= 5) {
    Node const* next = imp.sole_consumer(imp.node->outputs[0]);
    bool const consumer = next && !next->inputs.empty() && next->inputs[0] == imp.node->outputs[0] &&
                          (next->op_type == "Conv" || next->op_type == "AveragePool");
    std::vector<std::int64_t> lower(r - 2, 0), upper(r - 2, 0);
    bool spatial = consumer && v.zero_lower.empty();
    for (std::size_t k = 0; k < axes.size() && spatial; ++k) {
      std::int64_t const lo = pads[k], hi = pads[k + axes.size()];
      auto const big = static_cast<std::int64_t>(max_graph_elements);  // past any graph value: the general path's checks
      if (lo < 0 || hi < 0 || lo > big || hi > big || (axes[k] < 2 && (lo != 0 || hi != 0))) spatial = false;
      else if (axes[k] >= 2) lower[axes[k] - 2] += lo, upper[axes[k] - 2] += hi;
    }
    if (spatial) {
      Value lazy = v;
      for (std::size_t d = 0; d + 2 < r; ++d) lazy.shape[d + 2] += lower[d] + upper[d];
      lazy.zero_lower = std::move(lower);
      lazy.zero_upper = std::move(upper);
      imp.out(0, std::move(lazy));
      return;
    }
  }
  for (std::size_t k = 0; k < axes.size(); ++k) {
    std::size_t const a = axes[k];
    std::int64_t const lo = pads[k], hi = pads[k + axes.size()], n = v.shape[a];
    if (lo == 0 && hi == 0) continue;
    if (n + lo + hi <= 0) imp.unsupported("pads that leave an axis empty");
    if (mode == "constant") {
      // Crop negative pads, then join the constant blocks (a broadcast scalar: no memory) on either side.
      std::vector<std::int64_t> keep;
      for (std::int64_t i = std::max<std::int64_t>(0, -lo); i < n - std::max<std::int64_t>(0, -hi); ++i) keep.push_back(i);
      if (keep.size() != static_cast<std::size_t>(n)) v = select(imp, v, a, keep);
      std::vector<Value> blocks;
      for (std::int64_t len : {std::max<std::int64_t>(0, lo), std::max<std::int64_t>(0, hi)}) {
        Value b;
        b.type = v.type;
        b.shape = v.shape;
        b.shape[a] = len;
        if (len == 0) {
          blocks.push_back(b);
          continue;
        }
        if (v.constant) {
          b.constant = make_host(v.type, b.shape, [&](std::size_t) { return value; });
        } else {
          Value scalar;
          scalar.type = v.type;
          scalar.constant = make_host(v.type, {}, [&](std::size_t) { return value; });
          b.tensor = imp.tensor(scalar).reshape(Shape(b.shape.size(), 1)).broadcast(to_shape(b.shape));
        }
        blocks.push_back(b);
      }
      std::vector<Value const*> parts;
      if (blocks[0].shape[a] > 0) parts.push_back(&blocks[0]);
      parts.push_back(&v);
      if (blocks[1].shape[a] > 0) parts.push_back(&blocks[1]);
      Value joined = concatenated(imp, parts, a);
      v = std::move(joined);
    } else {
      std::vector<std::int64_t> idx;
      for (std::int64_t i = -lo; i < n + hi; ++i) {
        std::int64_t j = i;
        if (mode == "edge") {
          j = std::clamp<std::int64_t>(i, 0, n - 1);
        } else {
          if (n == 1) imp.invalid("reflect padding of an axis of size 1");
          std::int64_t const period = 2 * (n - 1);
          j = ((i % period) + period) % period;
          if (j >= n) j = period - j;
        }
        idx.push_back(j);
      }
      v = select(imp, v, a, idx);
    }
  }
  imp.out(0, v);
}

}  // namespace

void add_tensor_ops(Registry& r) {
  r["Identity"] = identity;
  r["Dropout"] = dropout;
  r["Flatten"] = flatten;
  r["Reshape"] = reshape;
  r["Squeeze"] = squeeze;
  r["Unsqueeze"] = unsqueeze;
  r["Transpose"] = transpose;
  r["Concat"] = concat_op;
  r["Split"] = split;
  r["Slice"] = slice;
  r["Gather"] = gather;
  r["Shape"] = shape_op;
  r["Size"] = size_op;
  r["Constant"] = constant;
  r["ConstantOfShape"] = constant_of_shape;
  r["Cast"] = cast;
  r["Expand"] = expand;
  r["Tile"] = tile;
  r["Range"] = range;
  r["Pad"] = pad;
}

}  // namespace tilebsp::onnx::detail
