// samples/common/tensor_file.hpp: the parameter files of the samples — named f32 tensors after an 8-byte magic
// that says which sample (and format version) wrote them.
//
// Layout: the magic, a little-endian u32 tensor count, then per tensor (in the order the sample lists them) a u32
// name length, the name, a u32 rank, u64 dimensions and the f32 values.
#pragma once

#include <tilebsp/core/checked.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/core/shape.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <istream>
#include <string>
#include <vector>

namespace samples {

namespace tb = tilebsp;

/// What a parameter file holds: magic, what to call such a file in messages, and what to check when the tensor
/// count is wrong.
struct TensorFileFormat {
  char magic[8];
  char const* kind;       ///< e.g. "tilebsp ResNeXt weights file"
  char const* count_hint; ///< e.g. "check --depth, --cardinality and --width"
};

/// One tensor of a file: its name, shape and values (V: std::vector<float> to read into, const to write from).
template <class V = std::vector<float>>
struct NamedTensor {
  std::string name;
  tb::Shape shape;
  V* values;
};

/// Writes `tensors` to `path`; throws tilebsp::error ("save_weights: ...") when the file cannot be written.
inline void save_tensors(TensorFileFormat const& fmt, std::string const& path, std::vector<NamedTensor<std::vector<float> const>> const& tensors) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw tb::error("save_weights: cannot open '" + path + "' for writing");
  auto put = [&](auto v) { f.write(reinterpret_cast<char const*>(&v), sizeof v); };
  f.write(fmt.magic, 8);
  put(static_cast<std::uint32_t>(tensors.size()));
  for (auto const& t : tensors) {
    put(static_cast<std::uint32_t>(t.name.size()));
    f.write(t.name.data(), static_cast<std::streamsize>(t.name.size()));
    put(static_cast<std::uint32_t>(t.shape.size()));
    for (auto d : t.shape) put(static_cast<std::uint64_t>(d));
    f.write(reinterpret_cast<char const*>(t.values->data()), static_cast<std::streamsize>(t.values->size() * sizeof(float)));
  }
  if (!f) throw tb::error("save_weights: failed writing '" + path + "'");
}

/// Reads `tensors` (names and shapes as listed, values resized and filled) from the stream `f`, which `path` names
/// in messages. Throws tilebsp::error ("load_weights: ...") naming the file and the first problem: another kind of
/// file, a wrong tensor count, a missing or differently named tensor, a shape that differs, a truncated file, or
/// trailing bytes. Every number the file holds is checked against what the network expects before it is used.
inline void read_tensors(TensorFileFormat const& fmt, std::istream& f, std::string const& path,
                         std::vector<NamedTensor<>> const& tensors) {
  auto fail = [&](std::string const& why) { throw tb::error("load_weights: '" + path + "': " + why); };
  auto get = [&](auto& v, char const* what) {
    if (!f.read(reinterpret_cast<char*>(&v), sizeof v)) fail(std::string("truncated while reading ") + what);
  };
  char magic[8] = {};
  if (!f.read(magic, 8) || std::memcmp(magic, fmt.magic, 8) != 0) fail(std::string("not a ") + fmt.kind + " (bad magic)");
  std::uint32_t count = 0;
  get(count, "the tensor count");
  if (count != tensors.size())
    fail("holds " + std::to_string(count) + " tensors but this network has " + std::to_string(tensors.size()) + " (" +
         fmt.count_hint + ")");
  for (auto const& t : tensors) {
    std::uint32_t len = 0, rank = 0;
    get(len, "a name length");
    if (len > 4096) fail("corrupt name length " + std::to_string(len));
    std::string got(len, '\0');
    if (!f.read(got.data(), len)) fail("truncated while reading a name");
    if (got != t.name) fail("expected tensor '" + t.name + "', found '" + got + "'");
    get(rank, "a rank");
    if (rank != t.shape.size())
      fail("'" + t.name + "' has rank " + std::to_string(rank) + ", expected " + std::to_string(t.shape.size()));
    tb::Shape s(rank);
    for (auto& d : s) {
      std::uint64_t x = 0;
      get(x, "a dimension");
      d = static_cast<std::size_t>(x);
    }
    if (s != t.shape) fail("'" + t.name + "' has shape " + tb::to_string(s) + ", expected " + tb::to_string(t.shape));
    auto const elements = tb::checked::product(t.shape);
    if (!elements || !tb::checked::bytes_fit(*elements, sizeof(float), PTRDIFF_MAX))
      fail("'" + t.name + "' has more values than this host can hold");
    t.values->resize(*elements);
    if (!t.values->empty() &&
        !f.read(reinterpret_cast<char*>(t.values->data()), static_cast<std::streamsize>(t.values->size() * sizeof(float))))
      fail("truncated in the values of '" + t.name + "'");
  }
  if (f.peek() != std::char_traits<char>::eof()) fail("trailing bytes after the last tensor");
}

/// read_tensors from the file at `path`; throws tilebsp::error ("load_weights: ...") when it cannot be opened, and
/// as read_tensors.
inline void load_tensors(TensorFileFormat const& fmt, std::string const& path, std::vector<NamedTensor<>> const& tensors) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw tb::error("load_weights: cannot open '" + path + "'");
  read_tensors(fmt, f, path, tensors);
}

}  // namespace samples
