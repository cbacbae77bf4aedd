// The importer's protobuf-free form of a model: what model.cpp reads from ONNX's classes and import.cpp builds from.
#pragma once

#include <tilebsp/onnx/model.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tilebsp::onnx::detail {

struct Attribute {
  enum class Kind { f, i, s, t, floats, ints, strings, other };
  Kind kind = Kind::other;
  float f = 0;
  std::int64_t i = 0;
  std::string s;
  HostTensor t;
  std::vector<float> floats;
  std::vector<std::int64_t> ints;
  std::vector<std::string> strings;
};

struct Node {
  std::string name, op_type, domain;
  std::vector<std::string> inputs, outputs;  ///< "" for an omitted optional input
  std::map<std::string, Attribute> attributes;
};

struct ModelData {
  std::string name;
  std::int64_t opset = 0, file_opset = 0;
  std::string producer;
  std::vector<ValueInfo> inputs, outputs;
  std::map<std::string, HostTensor> initializers;
  std::vector<Node> nodes;
  std::size_t parameter_count = 0;
};

}  // namespace tilebsp::onnx::detail
