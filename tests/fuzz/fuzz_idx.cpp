// libFuzzer harness: IDX files (the MNIST sample's reader, samples/mnist/idx.hpp), parsed as the sample parses a
// file's content, then checked as a data set's images or labels.
#include "../../samples/mnist/idx.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

volatile std::size_t sink;  // what a harness reads, kept

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* bytes, std::size_t size) {
  std::vector<std::uint8_t> const data(bytes, bytes + size);
  try {
    mnist::IdxArray const a = mnist::parse_idx(data, "fuzz");
    // What the sample then reads: the last byte of every image (rows x cols), the last label.
    std::size_t sum = 0;
    if (a.dims.size() == 3 && a.dims[1] * a.dims[2] > 0)
      for (std::size_t i = 0; i < a.dims[0]; ++i) sum += a.data[(i + 1) * a.dims[1] * a.dims[2] - 1];
    if (a.dims.size() == 1 && a.dims[0] > 0) sum += a.data[a.dims[0] - 1];
    sink = sum;
  } catch (mnist::idx_error const&) {
  }
  return 0;
}
