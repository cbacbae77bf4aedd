// IDX files (the MNIST format), raw or gzip-compressed: a reader that validates the magic number, element type,
// dimensions, counts and length, and the train/test data sets of an MNIST-format directory.
//
// An IDX file is a big-endian header — two zero bytes, an element type byte (0x08: unsigned byte), a dimension
// count byte, one 32-bit size per dimension — followed by the elements in row-major order (Y. LeCun et al., "THE
// MNIST DATABASE of handwritten digits"; Fashion-MNIST uses the same files, H. Xiao et al. 2017).
#pragma once

#include <tilebsp/core/checked.hpp>

#include <zlib.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace mnist {

/// A file that cannot be read as the IDX data it should be. The message names the file and what is wrong.
struct idx_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// An IDX array of unsigned bytes.
struct IdxArray {
  std::vector<std::size_t> dims;
  std::vector<std::uint8_t> data;
};

namespace detail {
/// The whole (decompressed) content of a file; zlib reads plain files unchanged.
inline std::vector<std::uint8_t> read_all(std::string const& path) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), gzclose);
  if (!f) throw idx_error("idx: cannot open '" + path + "'");
  std::vector<std::uint8_t> out;
  std::array<std::uint8_t, 1 << 16> buf;
  for (;;) {
    int const n = gzread(f.get(), buf.data(), static_cast<unsigned>(buf.size()));
    if (n < 0) {
      int code = 0;
      char const* msg = gzerror(f.get(), &code);
      throw idx_error("idx: '" + path + "' is not valid gzip data (" + std::string(msg ? msg : "read error") + ")");
    }
    if (n == 0) break;
    out.insert(out.end(), buf.begin(), buf.begin() + n);
  }
  // A gzip stream cut short reads as a clean end of file; zlib reports it through gzerror.
  int code = 0;
  char const* msg = gzerror(f.get(), &code);
  if (code != Z_OK && code != Z_STREAM_END)
    throw idx_error("idx: '" + path + "' is not valid gzip data (" + std::string(msg ? msg : "read error") + ")");
  return out;
}
inline std::string dims_text(std::vector<std::size_t> const& d) {
  std::string s;
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? "x" : "") + std::to_string(d[i]);
  return s;
}
}  // namespace detail

/// The IDX array in `bytes` (a file's decompressed content; `path` names it in messages). Throws idx_error for a
/// bad magic number, another element type, dimensions whose product overflows, a header or data shorter than it
/// says, or bytes past the data.
inline IdxArray parse_idx(std::vector<std::uint8_t> const& bytes, std::string const& path) {
  if (bytes.size() < 4)
    throw idx_error("idx: '" + path + "' is truncated: " + std::to_string(bytes.size()) +
                    " bytes, not even the 4-byte magic number");
  if (bytes[0] != 0 || bytes[1] != 0 || bytes[3] == 0) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%02x%02x%02x%02x", bytes[0], bytes[1], bytes[2], bytes[3]);
    throw idx_error("idx: '" + path + "' is not an IDX file: magic number " + buf +
                    " (expected 0x0000 then the element type and a dimension count of at least 1)");
  }
  if (bytes[2] != 0x08) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", bytes[2]);
    throw idx_error("idx: '" + path + "' holds elements of type " + buf + "; only unsigned bytes (0x08) are supported");
  }
  std::size_t const rank = bytes[3], header = 4 + 4 * rank;
  if (bytes.size() < header)
    throw idx_error("idx: '" + path + "' is truncated: its header names " + std::to_string(rank) +
                    " dimensions (" + std::to_string(header) + " bytes) but the file has " +
                    std::to_string(bytes.size()) + " bytes");
  IdxArray a;
  for (std::size_t d = 0; d < rank; ++d) {
    std::uint8_t const* p = bytes.data() + 4 + 4 * d;
    a.dims.push_back(std::size_t{p[0]} << 24 | std::size_t{p[1]} << 16 | std::size_t{p[2]} << 8 | std::size_t{p[3]});
  }
  auto const product = tilebsp::checked::product(a.dims);  // 4 x 2^31 x 2^31 would wrap to 0 bytes
  if (!product)
    throw idx_error("idx: '" + path + "' is corrupt: dimensions " + detail::dims_text(a.dims) +
                    " hold more elements than a size can count");
  std::size_t const count = *product;
  std::size_t const have = bytes.size() - header;
  if (have < count)
    throw idx_error("idx: '" + path + "' is truncated: dimensions " + detail::dims_text(a.dims) + " need " +
                    std::to_string(count) + " bytes of data but the file has " + std::to_string(have));
  if (have > count)
    throw idx_error("idx: '" + path + "' has " + std::to_string(have - count) + " bytes past the " +
                    std::to_string(count) + " that dimensions " + detail::dims_text(a.dims) + " hold");
  a.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return a;
}

/// Reads an IDX file of unsigned bytes, gzip-compressed or not. Throws idx_error for a file that cannot be opened,
/// bad gzip data, and whatever parse_idx refuses.
inline IdxArray read_idx(std::string const& path) { return parse_idx(detail::read_all(path), path); }

/// Labelled images: `count` images of rows x cols bytes, one label in [0, classes) each.
struct Dataset {
  std::size_t count = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> images;  ///< count x rows x cols, row-major
  std::vector<std::uint8_t> labels;  ///< count
};

/// Reads an image file (3-D) and a label file (1-D) of the same count. Throws idx_error as read_idx, and for
/// wrong ranks, mismatched counts and labels outside [0, classes).
inline Dataset load_dataset(std::string const& images_path, std::string const& labels_path, std::size_t classes = 10) {
  IdxArray im = read_idx(images_path), lb = read_idx(labels_path);
  if (im.dims.size() != 3)
    throw idx_error("idx: '" + images_path + "' should hold images (3 dimensions: count x rows x cols) but has " +
                    std::to_string(im.dims.size()) + " (" + detail::dims_text(im.dims) + ")");
  if (lb.dims.size() != 1)
    throw idx_error("idx: '" + labels_path + "' should hold labels (1 dimension) but has " +
                    std::to_string(lb.dims.size()) + " (" + detail::dims_text(lb.dims) + ")");
  if (im.dims[0] != lb.dims[0])
    throw idx_error("idx: '" + images_path + "' holds " + std::to_string(im.dims[0]) + " images but '" + labels_path +
                    "' holds " + std::to_string(lb.dims[0]) + " labels");
  for (std::size_t i = 0; i < lb.data.size(); ++i)
    if (lb.data[i] >= classes)
      throw idx_error("idx: '" + labels_path + "': label " + std::to_string(lb.data[i]) + " of item " +
                      std::to_string(i) + " is not a class in [0, " + std::to_string(classes) + ")");
  Dataset d;
  d.count = im.dims[0], d.rows = im.dims[1], d.cols = im.dims[2];
  d.images = std::move(im.data);
  d.labels = std::move(lb.data);
  return d;
}

/// The file of `name` in `dir`: `name.gz` when it exists, else `name`.
inline std::string find_file(std::string const& dir, std::string const& name) {
  std::string const gz = dir + "/" + name + ".gz";
  if (std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(gz.c_str(), "rb"), std::fclose); f) return gz;
  return dir + "/" + name;
}

/// The training and test sets of an MNIST-format directory (train-images-idx3-ubyte, train-labels-idx1-ubyte,
/// t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each optionally .gz). The two must have the same image size.
struct Data {
  Dataset train, test;
};
inline Data load_data(std::string const& dir) {
  Data d;
  d.train = load_dataset(find_file(dir, "train-images-idx3-ubyte"), find_file(dir, "train-labels-idx1-ubyte"));
  d.test = load_dataset(find_file(dir, "t10k-images-idx3-ubyte"), find_file(dir, "t10k-labels-idx1-ubyte"));
  if (d.train.rows != d.test.rows || d.train.cols != d.test.cols)
    throw idx_error("idx: the training images are " + std::to_string(d.train.rows) + "x" + std::to_string(d.train.cols) +
                    " but the test images are " + std::to_string(d.test.rows) + "x" + std::to_string(d.test.cols));
  return d;
}

}  // namespace mnist
