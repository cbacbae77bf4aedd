// onnx::HostTensor: an ONNX tensor's values on the host (initializers, constants folded at import, a model's inputs
// and outputs), free of protobuf types. Floating-point values are held as float, integers and booleans as int64.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tilebsp::onnx {

/// ONNX's element types, numbered as TensorProto.DataType.
enum class DataType : int {
  undefined = 0,
  float32 = 1,
  uint8 = 2,
  int8 = 3,
  uint16 = 4,
  int16 = 5,
  int32 = 6,
  int64 = 7,
  string = 8,
  boolean = 9,
  float16 = 10,
  float64 = 11,
  uint32 = 12,
  uint64 = 13,
  complex64 = 14,
  complex128 = 15,
  bfloat16 = 16,
};

/// ONNX's name of the type ("float", "int64", "float16", ...).
std::string to_string(DataType t);
/// A shape as messages and the tool print it: "[4, 3, 224, 224]".
std::string shape_text(std::vector<std::int64_t> const& shape);

/// True for float16, bfloat16, float32 and float64.
constexpr bool is_floating(DataType t) noexcept {
  return t == DataType::float32 || t == DataType::float16 || t == DataType::float64 || t == DataType::bfloat16;
}

struct HostTensor {
  DataType type = DataType::float32;
  std::vector<std::int64_t> shape;
  std::vector<float> floats;       ///< the values of a floating-point tensor, row-major
  std::vector<std::int64_t> ints;  ///< the values of an integer or boolean tensor, row-major

  /// The number of elements the shape holds (1 for a scalar).
  std::size_t size() const noexcept {
    std::size_t n = 1;
    for (auto d : shape) n *= static_cast<std::size_t>(d);
    return n;
  }
  /// Element i as a double.
  double value(std::size_t i) const { return is_floating(type) ? static_cast<double>(floats[i]) : static_cast<double>(ints[i]); }
};

}  // namespace tilebsp::onnx
