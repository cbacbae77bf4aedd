// NumPy's .npy files as onnx::HostTensor: the inputs and outputs of the `tilebsp` command-line tool. Reading checks
// every count and size against the bytes there are (a truncated, oversized or malformed file is an onnx::model_error
// naming the file and the problem, never a crash).
#pragma once

#include <tilebsp/onnx/error.hpp>
#include <tilebsp/onnx/host_tensor.hpp>

#include <string>
#include <string_view>

namespace tilebsp::onnx {

/// The tensor in a .npy file (versions 1 to 3; little-endian float16/32/64, int8/16/32/64, uint8/16/32/64 and bool;
/// C order). Throws model_error.
HostTensor load_npy(std::string const& path);
/// The same from the file's bytes; `name` names it in errors.
HostTensor parse_npy(std::string_view bytes, std::string const& name = "<memory>");
/// Writes `t` as a version 1 .npy file (its ONNX type: float32 as '<f4', int64 as '<i8', bool as '|b1', ...).
/// Throws tilebsp::error when the file cannot be written.
void save_npy(std::string const& path, HostTensor const& t);

}  // namespace tilebsp::onnx
