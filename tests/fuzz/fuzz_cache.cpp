// libFuzzer harness: executable-cache entries as an attacker who can write the cache directory makes them, a valid
// header and checksum (anyone can compute it) around any contents, loaded by compile() and, when accepted, run.
// A small program covers what an entry steers: an exchange (a transposing copy across tiles), a fused map (and its
// host path), a vertex whose fields need staging (a strided view), streams and a host callback.
#include <tilebsp/tilebsp.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

namespace tb = tilebsp;
namespace fs = std::filesystem;

namespace {

/// Doubles every element of a (strided) view: its field is gathered and scattered through staging.
struct Twice {
  BOOST_HANA_DEFINE_STRUCT(Twice, (tb::inout<float>, v));
  void compute() {
    for (std::size_t i = 0; i < v.size(); ++i) v[i] *= 2.0f;
  }
};

struct Program {
  tb::Graph g{tb::targets::tiny(4, 1 << 14)};
  tb::Tensor x, y, out;
  tb::Fifo in, result;
  tb::Sequence body;
  int callbacks = 0;

  Program() {
    x = g.add_variable<float>({8, 8}, "x");
    y = g.add_variable<float>({8, 8}, "y");
    out = g.add_variable<float>({8, 8}, "out");
    for (auto const& t : {x, y, out}) tb::map_linearly(g, t);
    tb::ComputeSet cs = g.add_compute_set("twice");
    for (std::size_t t = 0; t < 4; ++t)  // each tile's two rows of x, columns reversed: a staged field
      g.add_vertex<Twice>(cs, t, x.slice(2 * t, 2 * t + 2, 0).reverse(1));
    body.add(tb::execute(cs));
    using namespace tb::expr;
    tb::Tensor const z = tb::ops::map<float, float>(g, body, _1 * 2.0f + _2, x, y);
    body.add(tb::copy(z.transpose(), out));
    in = g.add_host_to_device_fifo<float>("in", x.num_elements());
    result = g.add_device_to_host_fifo<float>("result", out.num_elements());
  }
  tb::Executable compile(std::string const& dir) {
    return tb::compile(g, {.threads = 1, .cache_dir = dir},
                       tb::seq(tb::stream_in(in, x), tb::repeat(2, body), tb::host([this](tb::HostContext&) { ++callbacks; }),
                               tb::stream_out(out, result)));
  }
  void run(tb::Executable const& exe) {
    tb::Engine e{exe, {.host_threads = 2}};
    e.write(y, std::vector<float>(y.num_elements(), 1.0f));
    std::vector<float> const data(x.num_elements(), 0.5f);
    std::vector<float> got;
    e.connect<float>(in, [&](std::span<float> v) { std::copy(data.begin(), data.end(), v.begin()); });
    e.connect<float>(result, [&](std::span<float const> v) { got.assign(v.begin(), v.end()); });
    e.run();
  }
};

Program* program = nullptr;
std::string dir, entry;
tb::program::detail::CacheKey key;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tb::set_warning_handler([](std::string_view) {});  // every bad entry is warned about: quiet
  fs::path const base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  dir = (base / ("tilebsp_fuzz_cache_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  program = new Program;
  entry = program->compile(dir).cache_entry();
  // The key: the entry's name and, after magic, format, version and the kernels' names, its check.
  std::ifstream f(entry, std::ios::binary);
  std::string const data{std::istreambuf_iterator<char>(f), {}};
  std::size_t at = 8 + 4 + 8 + std::string_view(tb::version).size();
  std::uint64_t kernels = 0;
  if (data.size() >= at + 8) std::memcpy(&kernels, data.data() + at, 8);
  at += 8 + kernels;
  if (entry.empty() || kernels > data.size() || data.size() < at + 16 + 24) {
    std::fprintf(stderr, "fuzz_cache: the program wrote no cache entry\n");
    std::abort();
  }
  std::memcpy(&key.name, data.data() + at, 8);
  std::memcpy(&key.check, data.data() + at + 8, 8);
  // TILEBSP_FUZZ_SEED=FILE writes the good entry's contents there (the seed corpus) and exits.
  if (char const* seed = std::getenv("TILEBSP_FUZZ_SEED")) {
    std::ofstream(seed, std::ios::binary) << data.substr(at + 16 + 24);
    std::exit(0);
  }
  std::atexit([] { fs::remove_all(dir); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* bytes, std::size_t size) {
  std::string_view const payload(reinterpret_cast<char const*>(bytes), size);
  {
    std::ofstream f(entry, std::ios::binary | std::ios::trunc);
    f << tb::program::detail::cache::entry_header(key, tb::core::detail::operator_kernels(program->g.impl()), payload)
      << payload;
  }
  // A typed error is an answer, not a finding: an entry's memory report is taken as written (docs/01), so a planted
  // one can make compile throw out_of_memory.
  try {
    tb::Executable const exe = program->compile(dir);
    if (exe.loaded_from_cache()) program->run(exe);
  } catch (tb::error const&) {
  }
  return 0;
}
