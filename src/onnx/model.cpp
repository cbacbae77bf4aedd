// onnx::Model: reading a model with ONNX's library into the importer's form (ir.hpp).
#include "ir.hpp"

#include <tilebsp/core/checked.hpp>
#include <tilebsp/core/half.hpp>

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/version_converter/convert.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

namespace tilebsp::onnx {

std::string shape_text(std::vector<std::int64_t> const& shape) {
  std::string r = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) r += (i ? ", " : "") + std::to_string(shape[i]);
  return r + "]";
}

std::string to_string(DataType t) {
  switch (t) {
    case DataType::undefined: return "undefined";
    case DataType::float32: return "float";
    case DataType::uint8: return "uint8";
    case DataType::int8: return "int8";
    case DataType::uint16: return "uint16";
    case DataType::int16: return "int16";
    case DataType::int32: return "int32";
    case DataType::int64: return "int64";
    case DataType::string: return "string";
    case DataType::boolean: return "bool";
    case DataType::float16: return "float16";
    case DataType::float64: return "double";
    case DataType::uint32: return "uint32";
    case DataType::uint64: return "uint64";
    case DataType::complex64: return "complex64";
    case DataType::complex128: return "complex128";
    case DataType::bfloat16: return "bfloat16";
  }
  return "type " + std::to_string(static_cast<int>(t));
}

namespace {

using detail::Attribute;
using detail::ModelData;
using detail::Node;

/// The oldest opset the version converter is trusted to upgrade.
constexpr std::int64_t oldest_convertible_opset = 7;

/// The largest tensor a model may hold: 2^34 elements (beyond any model that fits a protobuf file and its data).
constexpr std::size_t max_elements = std::size_t{1} << 34;

std::size_t element_bytes(DataType t) {
  switch (t) {
    case DataType::float32: case DataType::int32: case DataType::uint32: return 4;
    case DataType::uint8: case DataType::int8: case DataType::boolean: return 1;
    case DataType::uint16: case DataType::int16: case DataType::float16: case DataType::bfloat16: return 2;
    case DataType::int64: case DataType::uint64: case DataType::float64: return 8;
    default: return 0;
  }
}

/// Reads an ONNX tensor (from the model, or a test data file), its external data relative to `folder`.
class TensorReader {
 public:
  TensorReader(std::string where, std::filesystem::path folder) : where_(std::move(where)), folder_(std::move(folder)) {}

  HostTensor read(::onnx::TensorProto const& p, std::string const& what) const {
    HostTensor t;
    t.type = static_cast<DataType>(p.data_type());
    std::size_t const eb = element_bytes(t.type);
    if (eb == 0)
      throw unsupported_error(where_ + ": " + what + " is of type " + to_string(t.type) + ", which tilebsp does not support");
    for (auto d : p.dims()) {
      if (d < 0) fail(what, "has a negative dimension " + std::to_string(d));
      t.shape.push_back(d);
    }
    auto const n = checked::product(t.shape);
    if (!n || *n > max_elements) fail(what, "has more than 2^34 elements");
    std::string external;
    std::string const* raw = nullptr;
    if (p.data_location() == ::onnx::TensorProto::EXTERNAL) {
      external = read_external(p, what, *n * eb);
      raw = &external;
    } else if (p.has_raw_data()) {
      raw = &p.raw_data();
    }
    if (raw) {
      if (raw->size() != *n * eb)
        fail(what, "holds " + std::to_string(raw->size()) + " bytes of raw data for " + std::to_string(*n) +
                       " elements of " + std::to_string(eb) + " bytes (a truncated or corrupt file)");
      from_raw(t, raw->data(), *n);
      return t;
    }
    auto const need = [&](std::size_t have) {
      if (have != *n)
        fail(what, "holds " + std::to_string(have) + " values for " + std::to_string(*n) + " elements");
    };
    switch (t.type) {
      case DataType::float32:
        need(static_cast<std::size_t>(p.float_data_size()));
        t.floats.assign(p.float_data().begin(), p.float_data().end());
        break;
      case DataType::float64:
        need(static_cast<std::size_t>(p.double_data_size()));
        for (double v : p.double_data()) t.floats.push_back(static_cast<float>(v));
        break;
      case DataType::float16:
      case DataType::bfloat16:
        need(static_cast<std::size_t>(p.int32_data_size()));
        for (auto v : p.int32_data()) t.floats.push_back(from_16(t.type, static_cast<std::uint16_t>(v)));
        break;
      case DataType::int64:
        need(static_cast<std::size_t>(p.int64_data_size()));
        t.ints.assign(p.int64_data().begin(), p.int64_data().end());
        break;
      case DataType::uint32:
      case DataType::uint64:
        need(static_cast<std::size_t>(p.uint64_data_size()));
        for (auto v : p.uint64_data()) t.ints.push_back(static_cast<std::int64_t>(v));
        break;
      default:  // int32, int16, int8, uint16, uint8, bool
        need(static_cast<std::size_t>(p.int32_data_size()));
        t.ints.assign(p.int32_data().begin(), p.int32_data().end());
        break;
    }
    return t;
  }

  /// The `bytes` bytes of an external tensor, from the file its external_data names (inside the model's folder).
  std::string read_external(::onnx::TensorProto const& p, std::string const& what, std::size_t bytes) const {
    std::string location;
    std::int64_t offset = 0, length = -1;
    for (auto const& kv : p.external_data()) {
      try {
        if (kv.key() == "location") location = kv.value();
        else if (kv.key() == "offset") offset = std::stoll(kv.value());
        else if (kv.key() == "length") length = std::stoll(kv.value());
      } catch (std::exception const&) {
        fail(what, "has external data whose " + kv.key() + " is not a number: '" + kv.value() + "'");
      }
    }
    std::filesystem::path const rel(location);
    if (location.empty() || rel.is_absolute() ||
        std::any_of(rel.begin(), rel.end(), [](auto const& part) { return part == ".."; }))
      fail(what, "names external data at '" + location + "', which is not a path inside the model's folder");
    if (offset < 0 || (length >= 0 && static_cast<std::uint64_t>(length) != bytes))
      fail(what, "has external data of offset " + std::to_string(offset) + " and length " + std::to_string(length) +
                     " for " + std::to_string(bytes) + " bytes");
    auto const path = folder_ / rel;
    std::ifstream f(path, std::ios::binary);
    if (!f) fail(what, "keeps its data in '" + path.string() + "', which cannot be opened");
    f.seekg(0, std::ios::end);
    auto const size = static_cast<std::uint64_t>(f.tellg());
    if (static_cast<std::uint64_t>(offset) > size || size - static_cast<std::uint64_t>(offset) < bytes)
      fail(what, "needs " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) + " of '" +
                     path.string() + "', which holds " + std::to_string(size) + " (a truncated data file)");
    std::string data(bytes, '\0');
    f.seekg(offset);
    f.read(data.data(), static_cast<std::streamsize>(bytes));
    if (!f) fail(what, "could not read its data from '" + path.string() + "'");
    return data;
  }

 private:
  [[noreturn]] void fail(std::string const& what, std::string const& problem) const {
    throw model_error(where_ + ": " + what + " " + problem);
  }

  static float from_16(DataType t, std::uint16_t bits) {
    if (t == DataType::float16) return static_cast<float>(half::from_bits(bits));
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
  }

  template <class T>
  static T load(char const* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }

  static void from_raw(HostTensor& t, char const* p, std::size_t n) {
    switch (t.type) {
      case DataType::float32: t.floats.resize(n); std::memcpy(t.floats.data(), p, n * 4); return;
      case DataType::float64: for (std::size_t i = 0; i < n; ++i) t.floats.push_back(static_cast<float>(load<double>(p + 8 * i))); return;
      case DataType::float16:
      case DataType::bfloat16: for (std::size_t i = 0; i < n; ++i) t.floats.push_back(from_16(t.type, load<std::uint16_t>(p + 2 * i))); return;
      case DataType::int64: t.ints.resize(n); std::memcpy(t.ints.data(), p, n * 8); return;
      case DataType::uint64: for (std::size_t i = 0; i < n; ++i) t.ints.push_back(static_cast<std::int64_t>(load<std::uint64_t>(p + 8 * i))); return;
      case DataType::int32: for (std::size_t i = 0; i < n; ++i) t.ints.push_back(load<std::int32_t>(p + 4 * i)); return;
      case DataType::uint32: for (std::size_t i = 0; i < n; ++i) t.ints.push_back(load<std::uint32_t>(p + 4 * i)); return;
      case DataType::int16: for (std::size_t i = 0; i < n; ++i) t.ints.push_back(load<std::int16_t>(p + 2 * i)); return;
      case DataType::uint16: for (std::size_t i = 0; i < n; ++i) t.ints.push_back(load<std::uint16_t>(p + 2 * i)); return;
      case DataType::int8: for (std::size_t i = 0; i < n; ++i) t.ints.push_back(static_cast<std::int8_t>(p[i])); return;
      case DataType::uint8: for (std::size_t i = 0; i < n; ++i) t.ints.push_back(static_cast<unsigned char>(p[i])); return;
      default: for (std::size_t i = 0; i < n; ++i) t.ints.push_back(p[i] != 0); return;  // bool
    }
  }

  std::string where_;
  std::filesystem::path folder_;
};

ValueInfo value_info(::onnx::ValueInfoProto const& v) {
  ValueInfo r;
  r.name = v.name();
  if (v.type().has_tensor_type()) {
    auto const& tt = v.type().tensor_type();
    r.type = static_cast<DataType>(tt.elem_type());
    if (tt.has_shape())
      for (auto const& d : tt.shape().dim()) r.dims.push_back(d.has_dim_value() ? Dim{d.dim_value(), {}} : Dim{-1, d.dim_param()});
  }
  return r;
}

Attribute attribute(::onnx::AttributeProto const& a, TensorReader const& reader, std::string const& what) {
  Attribute r;
  using A = ::onnx::AttributeProto;
  switch (a.type()) {
    case A::FLOAT: r.kind = Attribute::Kind::f, r.f = a.f(); break;
    case A::INT: r.kind = Attribute::Kind::i, r.i = a.i(); break;
    case A::STRING: r.kind = Attribute::Kind::s, r.s = a.s(); break;
    case A::TENSOR: r.kind = Attribute::Kind::t, r.t = reader.read(a.t(), what); break;
    case A::FLOATS: r.kind = Attribute::Kind::floats, r.floats.assign(a.floats().begin(), a.floats().end()); break;
    case A::INTS: r.kind = Attribute::Kind::ints, r.ints.assign(a.ints().begin(), a.ints().end()); break;
    case A::STRINGS: r.kind = Attribute::Kind::strings, r.strings.assign(a.strings().begin(), a.strings().end()); break;
    default: r.kind = Attribute::Kind::other; break;
  }
  return r;
}

Model from_proto(::onnx::ModelProto& m, std::string const& name, std::filesystem::path const& folder) {
  // Initializers kept in external files are read here, with our checks, and held inline from then on: ONNX's
  // checker would look for the files relative to the working directory rather than the model's folder.
  TensorReader const external(name, folder);
  for (auto& t : *m.mutable_graph()->mutable_initializer()) {
    if (t.data_location() != ::onnx::TensorProto::EXTERNAL) continue;
    std::size_t const eb = element_bytes(static_cast<DataType>(t.data_type()));
    auto const n = checked::product(t.dims());
    if (eb == 0 || !n || *n > max_elements) continue;  // read() names the problem
    t.set_raw_data(external.read_external(t, "initializer '" + t.name() + "'", *n * eb));
    t.clear_external_data();
    t.set_data_location(::onnx::TensorProto::DEFAULT);
  }
  try {
    ::onnx::checker::check_model(m);
  } catch (std::exception const& e) {
    throw model_error(name + ": ONNX's checker rejects the model: " + e.what());
  }
  auto data = std::make_shared<ModelData>();
  data->name = name;
  data->producer = m.producer_name() + (m.producer_version().empty() ? "" : " " + m.producer_version());
  for (auto const& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") data->file_opset = o.version();
  if (data->file_opset == 0) throw model_error(name + ": the model imports no opset of the default ONNX domain");
  if (data->file_opset > max_opset)
    throw unsupported_error(name + ": opset " + std::to_string(data->file_opset) + " is newer than the opsets tilebsp takes (" +
                            std::to_string(min_opset) + " to " + std::to_string(max_opset) + ")");
  // Every graph output must be computed (ONNX 1.12's checker lets an output that nothing produces through, and its
  // version converter then crashes on it).
  {
    std::set<std::string> defined;
    for (auto const& i : m.graph().input()) defined.insert(i.name());
    for (auto const& i : m.graph().initializer()) defined.insert(i.name());
    for (auto const& n : m.graph().node())
      for (auto const& o : n.output()) defined.insert(o);
    for (auto const& o : m.graph().output())
      if (!defined.contains(o.name()))
        throw model_error(name + ": graph output '" + o.name() + "' is not an input, an initializer or a node's output");
  }
  // ONNX 1.12's adapters for opsets before 7 (Gemm 6 to 7, ...) dereference shapes a checked model need not declare
  // (found by tests/fuzz/fuzz_onnx_model: corpus/onnx_model/gemm_opset5.onnx); those opsets are refused by number.
  if (data->file_opset < oldest_convertible_opset)
    throw unsupported_error(name + ": opset " + std::to_string(data->file_opset) + " is older than " +
                            std::to_string(oldest_convertible_opset) +
                            ", the oldest tilebsp upgrades with ONNX's version converter; export the model at opset " +
                            std::to_string(min_opset) + " or newer");
  if (data->file_opset < min_opset) {
    try {
      m = ::onnx::version_conversion::ConvertVersion(m, static_cast<int>(min_opset));
    } catch (std::exception const& e) {
      throw unsupported_error(name + ": opset " + std::to_string(data->file_opset) +
                              " is older than 13, and ONNX's version converter could not upgrade it: " + e.what());
    }
  }
  data->opset = std::max(data->file_opset, min_opset);
  // ONNX's shape inference is not run: the importer computes and checks every node's shapes itself, and ONNX 1.12's
  // inference dereferences null on malformed nodes (a Conv whose input has fewer dimensions than its weights:
  // found by tests/fuzz/fuzz_onnx_model: corpus/onnx_model/conv_rank_mismatch.onnx).
  auto const& g = m.graph();
  TensorReader const reader(name, folder);
  for (auto const& init : g.initializer()) {
    HostTensor t = reader.read(init, "initializer '" + init.name() + "'");
    data->parameter_count += t.size();
    data->initializers[init.name()] = std::move(t);
  }
  auto const tensor_only = [&](::onnx::ValueInfoProto const& v, char const* what) {
    if (!v.type().has_tensor_type())
      throw unsupported_error(name + ": " + what + " '" + v.name() + "' is not a tensor (a sequence, map or optional); "
                              "tilebsp takes tensors");
    return value_info(v);
  };
  for (auto const& in : g.input())
    if (!data->initializers.contains(in.name())) data->inputs.push_back(tensor_only(in, "input"));
  for (auto const& out : g.output()) data->outputs.push_back(tensor_only(out, "output"));
  std::map<std::string, int> unnamed;
  for (auto const& n : g.node()) {
    Node node;
    node.op_type = n.op_type();
    node.domain = n.domain() == "ai.onnx" ? "" : n.domain();
    node.name = n.name().empty() ? n.op_type() + "_" + std::to_string(unnamed[n.op_type()]++) : n.name();
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    for (auto const& a : n.attribute())
      node.attributes[a.name()] = attribute(a, reader, "attribute '" + a.name() + "' of node '" + node.name + "'");
    data->nodes.push_back(std::move(node));
  }
  return Model(std::move(data));
}

/// The bytes of a file of at most `limit` bytes (protobuf parses at most 2 GiB at once); a larger one is refused
/// with model_error(path + ": " + over) before its bytes are read.
std::string read_file(std::string const& path, char const* what, std::size_t limit, char const* over) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw model_error(path + ": cannot open the " + std::string(what));
  auto const refuse = [&] { throw model_error(path + ": " + std::string(over)); };
  // Read by the size the file has (one allocation, one read: a 500 MB model once cost seconds of string
  // doubling), then in blocks to its end (all of it, where it cannot seek: a pipe).
  std::string r;
  if (f.seekg(0, std::ios::end)) {
    auto const size = f.tellg();
    f.seekg(0);
    if (size > 0 && static_cast<std::uint64_t>(size) > limit) refuse();
    if (size > 0 && f) {
      r.resize(static_cast<std::size_t>(size));
      f.read(r.data(), static_cast<std::streamsize>(size));
      r.resize(static_cast<std::size_t>(f.gcount()));
    }
  }
  f.clear();
  char block[1 << 16];
  while (f.read(block, sizeof block) || f.gcount() > 0) {
    if (static_cast<std::size_t>(f.gcount()) > limit - r.size()) refuse();
    r.append(block, static_cast<std::size_t>(f.gcount()));
  }
  return r;
}

/// What protobuf parses at once.
constexpr std::size_t parse_limit = static_cast<std::size_t>(std::numeric_limits<int>::max());
constexpr char const model_over_limit[] = "more than 2 GiB in one file; keep the weights in external data";

Model parse_in(std::string_view bytes, std::string const& name, std::filesystem::path const& folder) {
  if (bytes.size() > parse_limit) throw model_error(name + ": " + std::string(model_over_limit));
  ::onnx::ModelProto m;
  if (!m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw model_error(name + ": not an ONNX model (the bytes do not parse as a ModelProto: not ONNX, or truncated)");
  if (!m.has_graph()) throw model_error(name + ": not an ONNX model (it has no graph)");
  return from_proto(m, name, folder);
}

}  // namespace

Model Model::parse(std::string_view bytes, std::string const& name) {
  return parse_in(bytes, name, std::filesystem::current_path());
}

Model Model::load(std::string const& path) {
  std::string const bytes = read_file(path, "model file", parse_limit, model_over_limit);
  return parse_in(bytes, path, std::filesystem::absolute(path).parent_path());
}

std::string const& Model::name() const { return data_->name; }
std::int64_t Model::opset() const { return data_->opset; }
std::int64_t Model::file_opset() const { return data_->file_opset; }
std::string const& Model::producer() const { return data_->producer; }
std::vector<ValueInfo> const& Model::inputs() const { return data_->inputs; }
std::vector<ValueInfo> const& Model::outputs() const { return data_->outputs; }
std::size_t Model::parameter_count() const { return data_->parameter_count; }
std::vector<NodeInfo> Model::nodes() const {
  std::vector<NodeInfo> r;
  for (auto const& n : data_->nodes) r.push_back({n.name, n.op_type, n.domain});
  return r;
}

HostTensor load_tensor(std::string const& path) {
  std::string const bytes = read_file(path, "tensor file", parse_limit, "not an ONNX tensor (more than 2 GiB in one file)");
  ::onnx::TensorProto p;
  if (!p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw model_error(path + ": not an ONNX tensor (the bytes do not parse as a TensorProto)");
  return TensorReader(path, std::filesystem::absolute(path).parent_path()).read(p, "the tensor");
}

}  // namespace tilebsp::onnx
