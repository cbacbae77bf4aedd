// The executable cache: a hit gives the executable a fresh compile gives, anything that changes the result
// misses, bad entries are warned about and replaced, concurrent writers leave a whole entry.
#include "helpers.hpp"
#include "program/same_executable.hpp"

#include <tilebsp/program/executable_cache.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace tb = tilebsp;
namespace fs = std::filesystem;

namespace {

/// A fresh, empty directory under the system's temporary directory, removed at the end of the test.
struct TempDir {
  fs::path path;
  explicit TempDir(std::string const& name) : path(fs::temp_directory_path() / ("tilebsp_cache_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/// Collects warnings while it lives.
struct Warnings {
  std::mutex m;
  std::vector<std::string> seen;
  tb::WarningHandler previous;
  Warnings() {
    previous = tb::set_warning_handler([this](std::string_view w) {
      std::lock_guard lock(m);
      seen.emplace_back(w);
    });
  }
  ~Warnings() { tb::set_warning_handler(previous); }
};

/// A small network with every kind of step: a convolution (a host path), a matmul splitting K (fetches, a
/// reduction), a map, a transposing copy (an exchange), a repeat, a host callback and streams.
struct Net {
  tb::Graph g{tb::targets::tiny(8, 1 << 16)};
  tb::Tensor x, w, b, y, out;
  tb::Fifo in, result;
  std::function<tb::Executable(tb::CompileOptions const&)> compile;
  int callbacks = 0;

  explicit Net(float scale = 2.0f, std::size_t repeats = 2) {
    tb::ConvParams p;
    p.batch = 2;
    p.input_field = {6, 6};
    p.kernel_shape = {3, 3};
    p.channels(4, 8, 2);
    p.padding_lower = p.padding_upper = {1, 1};
    x = g.add_variable<float>(p.input_shape(), "x");
    w = g.add_variable<float>(p.weights_shape(), "w");
    b = g.add_variable<float>({8 * 36, 12}, "b");
    for (auto const& t : {x, w, b}) tb::map_linearly(g, t);
    tb::Sequence body;
    auto c = tb::ops::conv(g, body, x, w, p);
    auto m = tb::ops::matmul(g, body, c.reshape({2, 8 * 36}), b, {.available_memory_proportion = 0.05});
    using namespace tb::expr;
    y = tb::ops::map(g, body, _1 * scale + 1.0f, m);
    out = g.add_variable<float>({12, 2}, "out");
    tb::map_linearly(g, out);
    body.add(tb::copy(y.transpose(), out));
    in = g.add_host_to_device_fifo<float>("in", x.num_elements());
    result = g.add_device_to_host_fifo<float>("result", out.num_elements());
    compile = [this, body, repeats](tb::CompileOptions const& o) {
      return tb::compile(g, o,
                         tb::seq(tb::stream_in(in, x), tb::repeat(repeats, body), tb::host([this](tb::HostContext&) { ++callbacks; }),
                                 tb::stream_out(out, result)));
    };
  }

  /// Runs `exe` once and returns what the outfeed received.
  std::vector<float> run(tb::Executable const& exe) {
    tb::Engine e{exe, {.host_threads = 2}};
    e.write(w, tbt::values<float>(w.num_elements(), false, 2));
    e.write(b, tbt::values<float>(b.num_elements(), false, 3));
    e.connect<float>(in, [](std::span<float> v) {
      auto const data = tbt::values<float>(v.size(), false, 1);
      std::copy(data.begin(), data.end(), v.begin());
    });
    std::vector<float> got;
    e.connect<float>(result, [&](std::span<float const> v) { got.assign(v.begin(), v.end()); });
    e.run();
    return got;
  }
};

std::string contents(fs::path const& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void overwrite(fs::path const& p, std::string const& data) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(data.data(), static_cast<std::streamsize>(data.size()));
}
std::size_t files_in(fs::path const& dir) {
  std::size_t n = 0;
  for (auto const& e : fs::directory_iterator(dir)) n += e.is_regular_file();
  return n;
}

/// Rewrites the entry of `exe` (compiled with a cache) as `mutate` changes its schedule: a valid header and
/// checksum around planted contents, as anyone who can write the directory could make it.
template <class F>
void plant_entry(tb::Executable const& exe, F mutate) {
  std::string const data = contents(exe.cache_entry());
  // magic, format, the version and the kernels' names (each a 64-bit length and its characters), then the key
  std::size_t at = 8 + 4 + 8 + std::string_view(tb::version).size();
  REQUIRE(data.size() > at + 8);
  std::uint64_t kernels = 0;
  std::memcpy(&kernels, data.data() + at, 8);
  at += 8 + kernels;
  REQUIRE(data.size() > at + 16);
  tb::program::detail::CacheKey key;
  std::memcpy(&key.name, data.data() + at, 8);
  std::memcpy(&key.check, data.data() + at + 8, 8);
  tb::schedule::Schedule s = exe.schedule();
  mutate(s);
  REQUIRE(tb::program::detail::save_executable(exe.cache_entry(), key, s, exe.memory()).empty());
}

/// What a compile warned about the entry it could not use, and that it compiled afresh and computes as before.
void check_refused(fs::path const& dir, std::string const& why) {
  Warnings warnings;
  Net net;
  auto const exe = net.compile({.cache_dir = dir.string()});
  CHECK_FALSE(exe.loaded_from_cache());
  REQUIRE(warnings.seen.size() == 1);
  CHECK(warnings.seen[0] == "executable cache: " + exe.cache_entry() + " is unusable (" + why +
                                "); compiling afresh and replacing it");
  Net reference;
  CHECK(net.run(exe) == reference.run(reference.compile({})));
}

/// Mode bits of `p`.
unsigned mode_of(fs::path const& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777u;
}

}  // namespace

TEST_CASE("executable cache: a miss stores the entry, a hit loads the same executable and computes the same") {
  TempDir dir("hit");
  Warnings warnings;
  Net plain;
  auto const reference = plain.compile({});
  CHECK(reference.cache_entry().empty());
  CHECK_FALSE(reference.loaded_from_cache());
  auto const expected = plain.run(reference);
  CHECK(plain.callbacks == 1);

  Net first;
  auto const stored = first.compile({.cache_dir = dir.path.string()});
  CHECK_FALSE(stored.loaded_from_cache());
  REQUIRE_FALSE(stored.cache_entry().empty());
  CHECK(fs::exists(stored.cache_entry()));
  CHECK(fs::path(stored.cache_entry()).parent_path() == dir.path);
  CHECK(files_in(dir.path) == 1);

  Net second;  // the same graph, built again
  std::vector<std::string> phases;
  auto const loaded = second.compile({.cache_dir = dir.path.string(),
                                      .progress = [&](std::string_view p, std::size_t, std::size_t) {
                                        if (phases.empty() || phases.back() != p) phases.emplace_back(p);
                                      }});
  CHECK(loaded.loaded_from_cache());
  CHECK(loaded.cache_entry() == stored.cache_entry());
  CHECK(phases == std::vector<std::string>{"checking the mapping", "hashing the graph and programs",
                                           "loading the executable cache"});
  tbt::check_same_executable(reference, loaded);
  CHECK(second.run(loaded) == expected);  // the host callback and the convolution's host path are bound again
  CHECK(second.callbacks == 1);
  CHECK(warnings.seen.empty());
}

TEST_CASE("executable cache: the environment variable names the directory when the option does not") {
  TempDir dir("env");
  ::setenv("TILEBSP_EXECUTABLE_CACHE", dir.path.c_str(), 1);
  Net a, b;
  auto const first = a.compile({});
  auto const second = b.compile({});
  ::unsetenv("TILEBSP_EXECUTABLE_CACHE");
  CHECK(fs::path(first.cache_entry()).parent_path() == dir.path);
  CHECK_FALSE(first.loaded_from_cache());
  CHECK(second.loaded_from_cache());
  Net c;
  CHECK(c.compile({}).cache_entry().empty());  // unset again: no cache
}

TEST_CASE("executable cache: what changes the executable changes the entry") {
  TempDir dir("keys");
  Net base;
  auto const entry = base.compile({.cache_dir = dir.path.string()}).cache_entry();
  SUBCASE("not a constant of an expression: the engine reads it from the graph it runs") {
    Net other(3.0f), fresh(3.0f);
    auto const e = other.compile({.cache_dir = dir.path.string()});
    CHECK(e.loaded_from_cache());
    CHECK(e.cache_entry() == entry);
    CHECK(other.run(e) == fresh.run(fresh.compile({})));
  }
  SUBCASE("the programs") {
    Net other(2.0f, 3);
    auto const e = other.compile({.cache_dir = dir.path.string()});
    CHECK_FALSE(e.loaded_from_cache());
    CHECK(e.cache_entry() != entry);
  }
  SUBCASE("a tile mapping") {
    Net other;
    other.g.set_tile_mapping(other.b.slice(0, 1), 7);
    auto const e = other.compile({.cache_dir = dir.path.string()});
    CHECK_FALSE(e.loaded_from_cache());
    CHECK(e.cache_entry() != entry);
  }
  SUBCASE("not the number of planning threads, nor allow_out_of_memory") {
    Net other;
    auto const e = other.compile({.allow_out_of_memory = true, .threads = 3, .cache_dir = dir.path.string()});
    CHECK(e.loaded_from_cache());
    CHECK(e.cache_entry() == entry);
  }
}

TEST_CASE("executable cache: the vertices' connections count, long concatenations included") {
  TempDir dir("connections");
  // A vertex copying a gather of x (one concatenation of 12 single elements: a sequence too long to hash in place).
  auto const compile = [&](std::vector<std::size_t> const& order, std::size_t tile) {
    tb::Graph g{tb::targets::tiny(2)};
    auto x = g.add_variable<float>({16}, "x");
    auto y = g.add_variable<float>({order.size()}, "y");
    g.set_tile_mapping(x, 0);
    g.set_tile_mapping(y, tile);
    std::vector<tb::Tensor> parts;
    for (std::size_t i : order) parts.push_back(x.slice(i, i + 1));
    auto cs = g.add_compute_set("gather");
    g.add_vertex<tbt::Copy>(cs, tile, tb::fetch(tb::concat(parts, 0)), y);
    auto exe = tb::compile(g, {.cache_dir = dir.path.string()}, tb::execute(cs));
    tb::Engine e{exe};
    std::vector<float> xs(16);
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i);
    e.write(x, xs);
    e.run();
    return std::tuple{exe.cache_entry(), exe.loaded_from_cache(), e.read<float>(y)};
  };
  std::vector<std::size_t> const order{3, 7, 1, 9, 0, 5, 2, 8, 4, 6, 11, 13};
  auto const [entry, loaded, y] = compile(order, 1);
  CHECK_FALSE(loaded);
  CHECK(y == std::vector<float>{3, 7, 1, 9, 0, 5, 2, 8, 4, 6, 11, 13});
  auto const [entry2, loaded2, y2] = compile(order, 1);
  CHECK(loaded2);
  CHECK(entry2 == entry);
  CHECK(y2 == y);
  auto swapped = order;
  std::swap(swapped[4], swapped[5]);  // one run of the long sequence differs
  auto const [entry3, loaded3, y3] = compile(swapped, 1);
  CHECK_FALSE(loaded3);
  CHECK(entry3 != entry);
  CHECK(y3 == std::vector<float>{3, 7, 1, 9, 5, 0, 2, 8, 4, 6, 11, 13});
  auto const [entry4, loaded4, y4] = compile(order, 0);  // the vertex on another tile
  CHECK_FALSE(loaded4);
  CHECK(entry4 != entry);
  CHECK(y4 == y);
}

TEST_CASE("executable cache: a bad entry is warned about by name, compiled afresh and replaced") {
  TempDir dir("bad");
  Net reference_net;
  auto const reference = reference_net.compile({});
  auto const expected = reference_net.run(reference);
  Net first;
  fs::path const entry = first.compile({.cache_dir = dir.path.string()}).cache_entry();
  std::string const good = contents(entry);
  REQUIRE(good.size() > 100);

  struct Case {
    char const* name;
    std::string data;
    char const* why;
  };
  std::string corrupt = good, other_version = good, not_an_entry = "hello";
  corrupt[good.size() - 5] ^= 0x40;
  auto const v = other_version.find(tb::version);
  REQUIRE(v != std::string::npos);
  other_version.replace(v, std::string_view(tb::version).size(), std::string(std::string_view(tb::version).size(), '9'));
  // An entry made by other kernels (another TILEBSP_ISA, another host): the header names them after the version.
  std::string const kernels = tb::core::detail::operator_kernels(first.g.impl());
  REQUIRE(!kernels.empty());
  std::string other_kernels = good;
  auto const k = other_kernels.find(kernels, v);
  REQUIRE(k != std::string::npos);
  other_kernels.replace(k, kernels.size(), std::string(kernels.size(), 'x'));
  std::string const other_kernels_why =
      "made by " + std::string(kernels.size(), 'x') + " kernels, this process runs " + kernels + " (TILEBSP_ISA, docs/11)";
  std::vector<Case> const cases = {
      {"other kernels", other_kernels, other_kernels_why.c_str()},
      {"truncated", good.substr(0, good.size() / 2), "truncated"},
      {"corrupt", corrupt, "corrupt (its checksum does not match)"},
      {"another version", other_version, "written by tilebsp 99999, this is 0.1.0"},
      {"not an entry", not_an_entry, "not an executable cache entry"},
      {"empty", "", "truncated"},
  };
  for (auto const& c : cases) {
    CAPTURE(c.name);
    overwrite(entry, c.data);
    Warnings warnings;
    Net net;
    auto const exe = net.compile({.cache_dir = dir.path.string()});
    CHECK_FALSE(exe.loaded_from_cache());
    REQUIRE(warnings.seen.size() == 1);
    CHECK(warnings.seen[0] == "executable cache: " + entry.string() + " is unusable (" + c.why +
                                  "); compiling afresh and replacing it");
    CHECK(net.run(exe) == expected);
    CHECK(contents(entry) == good);  // replaced by the fresh compile's entry
    Net again;
    CHECK(again.compile({.cache_dir = dir.path.string()}).loaded_from_cache());
  }
}

TEST_CASE("executable cache: graphs built by other kernels keep entries of their own") {
  // What two hosts of different instruction sets (or TILEBSP_ISA) sharing a directory give: the same graph and
  // programs, built by other kernels (here a scope that says so), are another entry, and neither replaces the other.
  TempDir dir("kernels");
  Net a, b;
  { tb::OperatorScope const scope(b.g, "other", "other", "sse9"); }
  REQUIRE(tb::core::detail::operator_kernels(a.g.impl()) != tb::core::detail::operator_kernels(b.g.impl()));
  fs::path const ea = a.compile({.cache_dir = dir.path.string()}).cache_entry();
  fs::path const eb = b.compile({.cache_dir = dir.path.string()}).cache_entry();
  CHECK(ea != eb);
  Net again_a, again_b;
  { tb::OperatorScope const scope(again_b.g, "other", "other", "sse9"); }
  CHECK(again_a.compile({.cache_dir = dir.path.string()}).loaded_from_cache());
  CHECK(again_b.compile({.cache_dir = dir.path.string()}).loaded_from_cache());
}

TEST_CASE("executable cache: another compile's entry under this one's name (a collision) is refused") {
  TempDir dir("collision");
  Net a, b(2.0f, 3);
  fs::path const ea = a.compile({.cache_dir = dir.path.string()}).cache_entry();
  fs::path const eb = b.compile({.cache_dir = dir.path.string()}).cache_entry();
  REQUIRE(ea != eb);
  fs::copy_file(eb, ea, fs::copy_options::overwrite_existing);  // what a collision of the file names would give
  Warnings warnings;
  Net again;
  auto const exe = again.compile({.cache_dir = dir.path.string()});
  CHECK_FALSE(exe.loaded_from_cache());
  REQUIRE(warnings.seen.size() == 1);
  CHECK(warnings.seen[0] == "executable cache: " + ea.string() +
                                " is unusable (its key is another compile's (a hash collision or a renamed file)); "
                                "compiling afresh and replacing it");
  Net reference;
  CHECK(again.run(exe) == reference.run(reference.compile({})));
}

TEST_CASE("executable cache: concurrent compiles of one graph leave one whole entry and no temporary files") {
  TempDir dir("race");
  Warnings warnings;
  std::atomic<int> hits{0};
  std::vector<std::thread> team;
  for (int t = 0; t < 4; ++t)
    team.emplace_back([&] {
      for (int i = 0; i < 3; ++i) {
        Net net;
        hits += net.compile({.threads = 1, .cache_dir = dir.path.string()}).loaded_from_cache();
      }
    });
  for (auto& t : team) t.join();
  CHECK(warnings.seen.empty());  // no reader saw a torn entry
  CHECK(hits > 0);
  CHECK(files_in(dir.path) == 1);
  Net net;
  CHECK(net.compile({.cache_dir = dir.path.string()}).loaded_from_cache());
}

TEST_CASE("executable cache: an unwritable directory is warned about; the compile succeeds") {
  TempDir dir("unwritable");
  fs::create_directories(dir.path);
  fs::path const file = dir.path / "a file";
  overwrite(file, "x");
  Warnings warnings;
  Net net;
  auto const exe = net.compile({.cache_dir = file.string()});
  CHECK_FALSE(exe.loaded_from_cache());
  CHECK(exe.cache_entry().empty());
  REQUIRE(warnings.seen.size() == 1);
  CHECK(warnings.seen[0].starts_with("executable cache: not using '" + file.string() + "': it is not a directory; "
                                     "compiling without the cache"));
  Net reference;
  CHECK(net.run(exe) == reference.run(reference.compile({})));
}

namespace tbt {
/// A vertex with a param of a type with padding bytes, read by its cycle estimate.
struct Scaled {
  struct Factor {
    float k;
    double cost;
  };
  BOOST_HANA_DEFINE_STRUCT(Scaled, (tb::inout<float>, y), (tb::param<Factor>, f));
  void compute() {
    for (auto& v : y) v *= f.get().k;
  }
  std::uint64_t cycle_estimate() const { return static_cast<std::uint64_t>(f.get().cost); }
};
}  // namespace tbt

TEST_CASE("executable cache: params count through the estimates they give, whatever their type") {
  TempDir dir("params");
  auto const compile = [&](float k, double cost) {
    tb::Graph g{tb::targets::tiny(2)};
    auto y = g.add_variable<float>({4}, "y");
    g.set_tile_mapping(y, 0);
    auto cs = g.add_compute_set("scale");
    g.add_vertex<tbt::Scaled>(cs, 0, y, tbt::Scaled::Factor{k, cost});
    auto exe = tb::compile(g, {.cache_dir = dir.path.string()}, tb::execute(cs));
    tb::Engine e{exe};
    e.write(y, std::vector<float>{1, 2, 3, 4});
    e.run();
    return std::tuple{exe.cache_entry(), exe.loaded_from_cache(), e.read<float>(y), exe.schedule().programs[0].cycles};
  };
  auto const [entry, loaded, y, cycles] = compile(3.0f, 100.0);
  CHECK_FALSE(loaded);
  CHECK(y == std::vector<float>{3, 6, 9, 12});
  // Another factor, the same estimate: the same executable (the engine reads the params from the graph).
  auto const [entry2, loaded2, y2, cycles2] = compile(2.0f, 100.0);
  CHECK(entry2 == entry);
  CHECK(loaded2);
  CHECK(y2 == std::vector<float>{2, 4, 6, 8});
  // Another estimate: another entry.
  auto const [entry3, loaded3, y3, cycles3] = compile(2.0f, 900.0);
  CHECK(entry3 != entry);
  CHECK_FALSE(loaded3);
  CHECK(cycles3 != cycles);
}
TEST_CASE("executable cache: a hit still checks memory unless allow_out_of_memory") {
  TempDir dir("oom");
  auto const build = [](tb::Graph& g) {
    auto a = g.add_variable<float>({600}, "a"), b = g.add_variable<float>({600}, "b");
    g.set_tile_mapping(a, 0);
    g.set_tile_mapping(b, 0);
    return tb::copy(a, b);
  };
  tb::Graph g1{tb::targets::tiny(2, 4096)};
  auto const p1 = build(g1);
  auto const stored = tb::compile(g1, {.allow_out_of_memory = true, .cache_dir = dir.path.string()}, p1);
  CHECK_FALSE(stored.loaded_from_cache());
  tb::Graph g2{tb::targets::tiny(2, 4096)};
  auto const p2 = build(g2);
  CHECK_THROWS_AS(tb::compile(g2, {.cache_dir = dir.path.string()}, p2), tb::out_of_memory);
  auto const loaded = tb::compile(g2, {.allow_out_of_memory = true, .cache_dir = dir.path.string()}, p2);
  CHECK(loaded.loaded_from_cache());
}

TEST_CASE("executable cache: a planted entry cannot steer a copy outside its variables") {
  TempDir dir("planted");
  Net first;
  auto const exe = first.compile({.cache_dir = dir.path.string()});
  REQUIRE_FALSE(exe.schedule().exchanges.empty());
  using tb::schedule::Schedule;
  auto first_transfer = [](Schedule& s) -> tb::plan::detail::Transfer& {
    for (auto& ex : s.exchanges)
      if (!ex.transfers.empty()) return ex.transfers.front();
    FAIL("no transfer");
    return s.exchanges.front().transfers.front();
  };
  SUBCASE("a stride whose last element wraps back into range: 5 + 4 * 2^62") {
    plant_entry(exe, [&](Schedule& s) {
      auto& x = first_transfer(s);
      x.src_start = 5, x.src_stride = std::int64_t{1} << 62, x.count = 5;
    });
    check_refused(dir.path, "a copy does not fit its variables");
  }
  SUBCASE("a negative start, a negative count, a stride past the variable") {
    for (int k = 0; k < 3; ++k) {
      plant_entry(exe, [&](Schedule& s) {
        auto& x = first_transfer(s);
        if (k == 0) x.dst_start = -1;
        if (k == 1) x.count = -3;
        if (k == 2) x.count = 1, x.dst_stride = std::numeric_limits<std::int64_t>::max();
      });
      check_refused(dir.path, "a copy does not fit its variables");
    }
  }
  SUBCASE("an exchange whose byte count is not its copies' (a staging buffer sized by it would overflow)") {
    plant_entry(exe, [&](Schedule& s) {
      for (auto& ex : s.exchanges) ex.bytes = ex.bytes / 2;
    });
    check_refused(dir.path, "an exchange's byte count does not match its copies");
  }
  SUBCASE("a tile or variable index out of range") {
    plant_entry(exe, [&](Schedule& s) { first_transfer(s).dst_tile = 8; });
    check_refused(dir.path, "a tile index is out of range");
    plant_entry(exe, [&](Schedule& s) { first_transfer(s).src_var = 1u << 30; });
    check_refused(dir.path, "a variable index is out of range");
  }
}

TEST_CASE("executable cache: empty variable lists load (a zero-length read never copies to a null pointer)") {
  // Regression (fuzzing): Reader::u32s copied 0 bytes to an empty vector's data(), null, which UBSan reports.
  TempDir dir("empty_lists");
  Net first;
  auto const exe = first.compile({.cache_dir = dir.path.string()});
  plant_entry(exe, [](tb::schedule::Schedule& s) {
    for (auto& cs : s.compute_sets) cs.vars.clear(), cs.reads.clear(), cs.writes.clear(), cs.full_writes.clear();
  });
  Warnings warnings;
  Net again;
  CHECK(again.compile({.cache_dir = dir.path.string()}).loaded_from_cache());
  CHECK(warnings.seen.empty());
}

TEST_CASE("executable cache: an entry is never read through a symbolic link") {
  TempDir dir("symlink");
  Net first;
  fs::path const entry = first.compile({.cache_dir = dir.path.string()}).cache_entry();
  fs::path const elsewhere = dir.path.string() + "_target";
  fs::remove(elsewhere);
  fs::rename(entry, elsewhere);
  std::string const good = contents(elsewhere);
  fs::create_symlink(elsewhere, entry);
  check_refused(dir.path, "it is a symbolic link, which the cache never follows");
  CHECK_FALSE(fs::is_symlink(entry));        // replaced by the fresh compile's entry
  CHECK(contents(elsewhere) == good);        // and the link's target untouched
  fs::remove(elsewhere);
}

TEST_CASE("executable cache: only an owner-only directory is used, unless trusted") {
  TempDir dir("trust");
  Net first;
  CHECK_FALSE(first.compile({.cache_dir = (dir.path / "made").string()}).cache_entry().empty());
  CHECK(mode_of(dir.path / "made") == 0700);  // created owner-only
  fs::path const loose = dir.path / "loose";
  fs::create_directories(loose);
  for (unsigned mode : {0777u, 0775u, 0722u}) {
    CAPTURE(mode);
    REQUIRE(::chmod(loose.c_str(), mode) == 0);
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", mode);
    Warnings warnings;
    Net net;
    auto const exe = net.compile({.cache_dir = loose.string()});
    CHECK(exe.cache_entry().empty());
    CHECK(files_in(loose) == 0);
    REQUIRE(warnings.seen.size() == 1);
    CHECK(warnings.seen[0] == "executable cache: not using '" + loose.string() + "': it is writable by " +
                                  ((mode & 02) ? "others" : "its group") + " (mode " + octal +
                                  "); compiling without the cache (make it this user's and owner-only, chmod 700, or "
                                  "trust it with CompileOptions::trust_cache_dir or TILEBSP_EXECUTABLE_CACHE_TRUST=1)");
    Net reference;
    CHECK(net.run(exe) == reference.run(reference.compile({})));
  }
  // Trusted on purpose: by the option, or by the environment
  Warnings warnings;
  Net a, b;
  auto const stored = a.compile({.cache_dir = loose.string(), .trust_cache_dir = true});
  CHECK(files_in(loose) == 1);
  ::setenv("TILEBSP_EXECUTABLE_CACHE_TRUST", "1", 1);
  auto const loaded = b.compile({.cache_dir = loose.string()});
  ::unsetenv("TILEBSP_EXECUTABLE_CACHE_TRUST");
  CHECK(loaded.loaded_from_cache());
  CHECK(warnings.seen.empty());
  // Another user's directory (root can make one; the CI runs as root)
  if (::geteuid() == 0) {
    fs::path const theirs = dir.path / "theirs";
    fs::create_directories(theirs);
    REQUIRE(::chmod(theirs.c_str(), 0700) == 0);
    REQUIRE(::chown(theirs.c_str(), 65534, 65534) == 0);
    Warnings w;
    Net net;
    CHECK(net.compile({.cache_dir = theirs.string()}).cache_entry().empty());
    REQUIRE(w.seen.size() == 1);
    CHECK(w.seen[0].starts_with("executable cache: not using '" + theirs.string() +
                                "': it is owned by uid 65534, not by this user (uid 0), mode 0700; compiling without"));
  }
}
