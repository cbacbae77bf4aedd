// The errors of the ONNX importer (tilebsp::onnx): a file that is not a valid ONNX model, and a valid model that
// uses something tilebsp does not support. Both name the file, and where it applies the node, operator and opset.
#pragma once

#include <tilebsp/core/error.hpp>

namespace tilebsp::onnx {

/// Not an ONNX model, or a broken one: unreadable or truncated file, missing external data, a model that ONNX's
/// checker rejects, an opset the version converter cannot bring to a supported one, a node whose inputs or
/// attributes contradict the operator's definition.
struct model_error : error {
  using error::error;
};

/// A valid model that needs something tilebsp does not have: an operator, an attribute value or an element type.
struct unsupported_error : error {
  using error::error;
};

}  // namespace tilebsp::onnx
