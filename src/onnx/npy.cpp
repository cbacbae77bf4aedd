// .npy files (NumPy's format: a magic string, a version, a Python-literal header dict, the raw data).
#include <tilebsp/core/checked.hpp>
#include <tilebsp/core/half.hpp>
#include <tilebsp/onnx/npy.hpp>

#include <bit>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

namespace tilebsp::onnx {
namespace {

struct Descr {
  char const* text;
  DataType type;
  std::size_t bytes;
};
constexpr Descr descrs[] = {
    {"<f4", DataType::float32, 4}, {"<f2", DataType::float16, 2}, {"<f8", DataType::float64, 8},
    {"<i8", DataType::int64, 8},   {"<i4", DataType::int32, 4},   {"<i2", DataType::int16, 2},
    {"|i1", DataType::int8, 1},    {"|u1", DataType::uint8, 1},   {"<u2", DataType::uint16, 2},
    {"<u4", DataType::uint32, 4},  {"<u8", DataType::uint64, 8},  {"|b1", DataType::boolean, 1},
};

/// The text after `key` (a quoted dict key and its colon) in the header, with spaces skipped.
std::string_view after(std::string_view header, std::string_view key, std::string const& name) {
  auto const p = header.find(key);
  if (p == std::string_view::npos) throw model_error(name + ": the .npy header has no " + std::string(key));
  std::string_view rest = header.substr(p + key.size());
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == ':')) rest.remove_prefix(1);
  return rest;
}

template <class T>
T load(char const* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

HostTensor parse_npy(std::string_view bytes, std::string const& name) {
  auto const bad = [&](std::string const& what) { return model_error(name + ": not a valid .npy file: " + what); };
  if (bytes.size() < 10 || bytes.substr(0, 6) != "\x93NUMPY") throw bad("it does not begin with \\x93NUMPY");
  auto const major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3) throw bad("version " + std::to_string(major) + " (1 to 3 are read)");
  std::size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    start = 10;
  } else {
    if (bytes.size() < 12) throw bad("the header length is cut off");
    for (int i = 3; i >= 0; --i) header_len = header_len << 8 | static_cast<unsigned char>(bytes[8 + static_cast<std::size_t>(i)]);
    start = 12;
  }
  if (header_len > bytes.size() - start) throw bad("the header runs past the end of the file");
  std::string_view const header = bytes.substr(start, header_len);
  std::string_view d = after(header, "'descr'", name);
  if (d.size() < 5 || d.front() != '\'') throw bad("the descr is not a quoted type");
  std::string_view const text = d.substr(1, d.find('\'', 1) == std::string_view::npos ? 0 : d.find('\'', 1) - 1);
  Descr const* descr = nullptr;
  for (auto const& x : descrs)
    if (text == x.text || (x.bytes == 1 && text.size() == 3 && text.substr(1) == std::string_view(x.text).substr(1)))
      descr = &x;
  if (!descr)
    throw unsupported_error(name + ": the .npy type '" + std::string(text) +
                            "' is not supported (little-endian floats, integers and bool are)");
  if (after(header, "'fortran_order'", name).substr(0, 5) != "False")
    throw unsupported_error(name + ": the .npy data are in Fortran order (C order is supported)");
  std::string_view s = after(header, "'shape'", name);
  if (s.empty() || s.front() != '(') throw bad("the shape is not a tuple");
  HostTensor t;
  t.type = descr->type;
  std::size_t i = 1;
  while (i < s.size() && s[i] != ')') {
    while (i < s.size() && (s[i] == ' ' || s[i] == ',')) ++i;
    if (i < s.size() && s[i] == ')') break;
    std::int64_t v = 0;
    std::size_t digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (++digits > 15) throw bad("a dimension is too large");
      v = v * 10 + (s[i++] - '0');
    }
    if (digits == 0) throw bad("the shape holds something other than sizes");
    t.shape.push_back(v);
  }
  if (i >= s.size()) throw bad("the shape tuple is not closed");
  auto const n = checked::product(t.shape);
  if (!n || *n > (std::size_t{1} << 34)) throw bad("the shape holds more than 2^34 elements");
  std::size_t const data = start + header_len;
  if (bytes.size() - data != *n * descr->bytes)
    throw bad("it holds " + std::to_string(bytes.size() - data) + " bytes of data for " + std::to_string(*n) +
              " elements of " + std::to_string(descr->bytes) + " bytes (a truncated or padded file)");
  char const* p = bytes.data() + data;
  for (std::size_t k = 0; k < *n; ++k, p += descr->bytes) {
    switch (descr->type) {
      case DataType::float32: t.floats.push_back(load<float>(p)); break;
      case DataType::float16: t.floats.push_back(static_cast<float>(half::from_bits(load<std::uint16_t>(p)))); break;
      case DataType::float64: t.floats.push_back(static_cast<float>(load<double>(p))); break;
      case DataType::int64: t.ints.push_back(load<std::int64_t>(p)); break;
      case DataType::int32: t.ints.push_back(load<std::int32_t>(p)); break;
      case DataType::int16: t.ints.push_back(load<std::int16_t>(p)); break;
      case DataType::int8: t.ints.push_back(load<std::int8_t>(p)); break;
      case DataType::uint8: t.ints.push_back(load<std::uint8_t>(p)); break;
      case DataType::uint16: t.ints.push_back(load<std::uint16_t>(p)); break;
      case DataType::uint32: t.ints.push_back(load<std::uint32_t>(p)); break;
      case DataType::uint64: t.ints.push_back(static_cast<std::int64_t>(load<std::uint64_t>(p))); break;
      default: t.ints.push_back(*p != 0); break;  // bool
    }
  }
  return t;
}

HostTensor load_npy(std::string const& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw model_error(path + ": cannot open the .npy file");
  std::ostringstream s;
  s << f.rdbuf();
  std::string const bytes = std::move(s).str();
  return parse_npy(bytes, path);
}

void save_npy(std::string const& path, HostTensor const& t) {
  Descr const* descr = nullptr;
  for (auto const& x : descrs)
    if (x.type == t.type) descr = &x;
  if (!descr) throw error("save_npy: " + path + ": type " + to_string(t.type) + " has no .npy form here");
  std::string shape = "(";
  for (std::size_t i = 0; i < t.shape.size(); ++i) shape += std::to_string(t.shape[i]) + (t.shape.size() == 1 ? "," : i + 1 < t.shape.size() ? ", " : "");
  shape += ")";
  std::string header = "{'descr': '" + std::string(descr->text) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  std::size_t const n = t.size();
  auto put = [&](auto v) { out.append(reinterpret_cast<char const*>(&v), sizeof v); };
  for (std::size_t k = 0; k < n; ++k) {
    switch (t.type) {
      case DataType::float32: put(t.floats[k]); break;
      case DataType::float16: put(half(t.floats[k]).bits()); break;
      case DataType::float64: put(static_cast<double>(t.floats[k])); break;
      case DataType::int64: put(t.ints[k]); break;
      case DataType::int32: put(static_cast<std::int32_t>(t.ints[k])); break;
      case DataType::int16: put(static_cast<std::int16_t>(t.ints[k])); break;
      case DataType::int8: put(static_cast<std::int8_t>(t.ints[k])); break;
      case DataType::uint8: put(static_cast<std::uint8_t>(t.ints[k])); break;
      case DataType::uint16: put(static_cast<std::uint16_t>(t.ints[k])); break;
      case DataType::uint32: put(static_cast<std::uint32_t>(t.ints[k])); break;
      case DataType::uint64: put(static_cast<std::uint64_t>(t.ints[k])); break;
      default: put(static_cast<std::uint8_t>(t.ints[k] != 0)); break;
    }
  }
  std::ofstream f(path, std::ios::binary);
  if (!f || !f.write(out.data(), static_cast<std::streamsize>(out.size())))
    throw error("save_npy: cannot write " + path);
}

}  // namespace tilebsp::onnx
