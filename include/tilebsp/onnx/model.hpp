// onnx::Model: an ONNX file read with ONNX's own library (its protobuf classes, checker and version converter) into
// tilebsp's protobuf-free form. Loading checks everything that does not depend on import options;
// import() (<tilebsp/onnx/import.hpp>) builds the graph.
#pragma once

#include <tilebsp/onnx/error.hpp>
#include <tilebsp/onnx/host_tensor.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tilebsp::onnx::detail {
struct ModelData;  ///< the importer's form of a model (src/onnx/ir.hpp)
}

namespace tilebsp::onnx {

/// One dimension of a graph input or output: a size, or a symbolic name (`param`) with value -1.
struct Dim {
  std::int64_t value = -1;
  std::string param;
};

/// A graph input or output as the model declares it.
struct ValueInfo {
  std::string name;
  DataType type = DataType::undefined;
  std::vector<Dim> dims;
};

/// A node: its name (ONNX names are optional: unnamed nodes get "<op_type>_<index>"), operator and domain.
struct NodeInfo {
  std::string name;
  std::string op_type;
  std::string domain;  ///< "" for the default ONNX domain
};

/// The opsets the importer takes: models of opset 13 to 17; opsets 7 to 12 are upgraded to 13 by ONNX's version
/// converter, older ones are refused by number.
inline constexpr std::int64_t min_opset = 13;
inline constexpr std::int64_t max_opset = 17;

class Model {
 public:
  /// Reads, checks and (for opsets below 13) upgrades the model at `path`; external data files are resolved
  /// relative to its folder. Throws model_error naming the file and the problem.
  static Model load(std::string const& path);
  /// The same from the bytes of a model file; `name` names it in errors.
  static Model parse(std::string_view bytes, std::string const& name = "<memory>");

  std::string const& name() const;
  /// The default domain's opset after any upgrade, and as the file declared it.
  std::int64_t opset() const;
  std::int64_t file_opset() const;
  std::string const& producer() const;
  /// The graph inputs that are not initializers, and the graph outputs.
  std::vector<ValueInfo> const& inputs() const;
  std::vector<ValueInfo> const& outputs() const;
  std::vector<NodeInfo> nodes() const;
  /// The number of values the initializers hold (the model's parameters).
  std::size_t parameter_count() const;

  /// The importer's form of the model (src/onnx/ir.hpp).
  explicit Model(std::shared_ptr<detail::ModelData const> d) : data_(std::move(d)) {}
  detail::ModelData const& data() const { return *data_; }

 private:
  std::shared_ptr<detail::ModelData const> data_;
};

/// Reads a TensorProto file (ONNX's test data: input_0.pb, output_0.pb). Throws model_error.
HostTensor load_tensor(std::string const& path);

}  // namespace tilebsp::onnx
