// libFuzzer harness: the samples' weights files (samples/common/tensor_file.hpp), read for the MNIST models and a
// small ResNeXt. The first byte picks the network (0-2: MNIST logreg, mlp, cnn; 3: ResNeXt), the rest is the file.
#include "../../samples/mnist/mnist.hpp"
#include "../../samples/resnext/resnext.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace {

mnist::Config mnist_config(mnist::Model m) {
  mnist::Config c;
  c.model = m;
  c.rows = c.cols = 8;  // small layers: a whole file stays a few kilobytes
  c.classes = 3;
  return c;
}

resnext::Config resnext_config() {
  resnext::Config c;
  c.stage_blocks = {1, 1, 1, 1};
  c.cardinality = 2;
  c.width = 1;
  c.channels = 1;
  c.classes = 2;
  return c;
}

/// Reads `file` as network `pick`'s weights; a refused file is a tilebsp::error, anything else a finding.
void read(unsigned pick, std::string const& file) {
  std::istringstream in(file);
  try {
    if (pick < 3) {
      mnist::Network n = mnist::layout(mnist_config(static_cast<mnist::Model>(pick)));
      samples::read_tensors(mnist::weights_format, in, "fuzz", mnist::named_tensors(n));
    } else {
      resnext::Config const c = resnext_config();
      resnext::Weights w = resnext::layout(c);
      samples::read_tensors(resnext::weights_format, in, "fuzz", resnext::named_tensors(w, c));
    }
  } catch (tilebsp::error const&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // TILEBSP_FUZZ_SEED=DIR writes a valid file of each network there (the seed corpus) and exits.
  if (char const* seed = std::getenv("TILEBSP_FUZZ_SEED")) {
    for (unsigned pick = 0; pick < 4; ++pick) {
      std::string const path = std::string(seed) + "/weights_" + std::to_string(pick);
      std::string const tmp = path + ".tmp";
      if (pick < 3) {
        mnist::Network n = mnist::layout(mnist_config(static_cast<mnist::Model>(pick)));
        for (auto const& t : mnist::named_tensors(n)) t.values->assign(tilebsp::product(t.shape), 0.25f);
        mnist::save_weights(n, tmp);
      } else {
        resnext::Config const c = resnext_config();
        resnext::Weights w = resnext::layout(c);
        for (auto const& t : resnext::named_tensors(w, c)) t.values->assign(tilebsp::product(t.shape), 0.25f);
        resnext::save_weights(w, c, tmp);
      }
      std::ifstream f(tmp, std::ios::binary);
      std::ofstream(path, std::ios::binary) << static_cast<char>(pick) << f.rdbuf();
      std::remove(tmp.c_str());
    }
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* bytes, std::size_t size) {
  if (size == 0) return 0;
  read(bytes[0] % 4u, std::string(reinterpret_cast<char const*>(bytes) + 1, size - 1));
  return 0;
}
