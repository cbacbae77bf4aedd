// The executable cache's definitions: included by <tilebsp/program/compile_impl.hpp>.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/checked.hpp>
#include <tilebsp/core/detail/parallel.hpp>
#include <tilebsp/program/executable_cache.hpp>
#include <tilebsp/program/lower.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tilebsp::program::detail {
using core::detail::VertexRecord;

/// The layout of an entry (docs/01): bump it whenever what is written or how changes.
inline constexpr std::uint32_t cache_format = 5;
inline constexpr char cache_magic[8] = {'T', 'B', 'X', 'C', 'A', 'C', 'H', 'E'};

TILEBSP_INLINE std::string CacheKey::file_name() const {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(name));
  return std::string(buf) + ".tbx";
}

namespace cache {

/// Hashes items [0, n) in fixed chunks on up to `threads` threads, then the chunks' hashes in order: the same key
/// for any number of threads.
template <class F>
void hash_chunks(Hasher& into, std::size_t n, std::size_t chunk, std::size_t threads, F const& item) {
  std::size_t const chunks = (n + chunk - 1) / chunk;
  std::vector<Hasher> part(chunks);
  core::detail::parallel_for(threads, chunks, 1, [&](std::size_t c, std::size_t) {
    for (std::size_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i) item(part[c], i);
  });
  into.add(n);
  for (auto const& h : part) into.combine(h);
}

inline void add_double(Hasher& h, double x) { h.add(std::bit_cast<std::uint64_t>(x)); }

/// Appends the entry's fields in a fixed little-endian-host layout (an entry from a host of another byte order
/// fails its checksum and is compiled afresh).
class Writer {
 public:
  template <class T>
  void put(T x) {
    static_assert(std::is_trivially_copyable_v<T>);
    char b[sizeof(T)];
    std::memcpy(b, &x, sizeof(T));
    out_.append(b, sizeof(T));
  }
  void count(std::size_t n) { put<std::uint64_t>(n); }
  /// LEB128: 7 bits a byte, low first (most of the schedule's numbers are small or close to the previous one).
  void varint(std::uint64_t x) {
    for (; x >= 0x80; x >>= 7) out_.push_back(static_cast<char>(x | 0x80));
    out_.push_back(static_cast<char>(x));
  }
  void zigzag(std::int64_t x) { varint((static_cast<std::uint64_t>(x) << 1) ^ static_cast<std::uint64_t>(x >> 63)); }
  void u32s(std::vector<std::uint32_t> const& v) {
    count(v.size());
    out_.append(reinterpret_cast<char const*>(v.data()), v.size() * sizeof(std::uint32_t));
  }
  void transfers(std::vector<Transfer> const& v) {
    count(v.size());
    for (auto const& x : v) {
      put(x.src_var), put(x.dst_var), put(x.src_start), put(x.src_stride), put(x.dst_start), put(x.dst_stride);
      put(x.count), put(x.src_tile), put(x.dst_tile), put(x.elem_bytes);
    }
  }
  std::string& str() noexcept { return out_; }

 private:
  std::string out_;
};

/// Bad content: what is wrong with it.
struct Bad {
  std::string why;
};

class Reader {
 public:
  Reader(char const* p, std::size_t n) : p_(p), end_(p + n) {}
  template <class T>
  T get() {
    if (static_cast<std::size_t>(end_ - p_) < sizeof(T)) throw Bad{"truncated"};
    T x;
    std::memcpy(&x, p_, sizeof(T));
    p_ += sizeof(T);
    return x;
  }
  std::uint64_t varint() {
    std::uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      auto const b = static_cast<std::uint8_t>(get<char>());
      x |= std::uint64_t{b & 0x7Fu} << shift;
      if (b < 0x80) return x;
    }
    throw Bad{"corrupt (a number is too long)"};
  }
  std::int64_t zigzag() {
    std::uint64_t const x = varint();
    return static_cast<std::int64_t>(x >> 1) ^ -static_cast<std::int64_t>(x & 1);
  }
  /// An element count, bounded by the bytes left (each element takes at least `least` bytes).
  std::size_t count(std::size_t least = 1) {
    auto const n = get<std::uint64_t>();
    if (n > static_cast<std::size_t>(end_ - p_) / least) throw Bad{"truncated (a count runs past the end)"};
    return static_cast<std::size_t>(n);
  }
  std::vector<std::uint32_t> u32s(std::size_t limit) {
    std::vector<std::uint32_t> v(count(4));
    if (v.empty()) return v;  // no copy: an empty vector's data() may be null
    std::memcpy(v.data(), p_, v.size() * 4);
    p_ += v.size() * 4;
    for (auto x : v)
      if (x >= limit) throw Bad{"a variable index is out of range"};
    return v;
  }
  std::vector<Transfer> transfers() {
    std::vector<Transfer> v(count(60));
    for (auto& x : v) {
      x.src_var = get<std::uint32_t>(), x.dst_var = get<std::uint32_t>();
      x.src_start = get<std::int64_t>(), x.src_stride = get<std::int64_t>();
      x.dst_start = get<std::int64_t>(), x.dst_stride = get<std::int64_t>(), x.count = get<std::int64_t>();
      x.src_tile = get<std::uint32_t>(), x.dst_tile = get<std::uint32_t>(), x.elem_bytes = get<std::uint32_t>();
    }
    return v;
  }
  bool done() const noexcept { return p_ == end_; }
  /// A string: its length (count) and its bytes.
  std::string text() {
    std::size_t const n = count();
    return std::string(skip(n), n);
  }
  /// The next n bytes, skipped.
  char const* skip(std::size_t n) {
    if (n > static_cast<std::size_t>(end_ - p_)) throw Bad{"truncated"};
    char const* at = p_;
    p_ += n;
    return at;
  }
  std::size_t position(char const* begin) const noexcept { return static_cast<std::size_t>(p_ - begin); }

 private:
  char const* p_;
  char const* end_;
};

/// Every copy of an exchange stays within its variables (checked::run_fits, the one check of a run), and the
/// exchange's byte count is their sum: a staged exchange stages them in a buffer of that many bytes.
inline void check_transfers(GraphImpl const& g, std::vector<Transfer> const& v, std::uint64_t bytes) {
  std::size_t const tiles = g.target.num_tiles();
  std::uint64_t sum = 0;
  for (auto const& x : v) {
    if (x.src_tile >= tiles || x.dst_tile >= tiles) throw Bad{"a tile index is out of range"};
    if (x.src_var >= g.variables.size() || x.dst_var >= g.variables.size())
      throw Bad{"a variable index is out of range"};
    auto const& s = g.variables[x.src_var];
    auto const& d = g.variables[x.dst_var];
    if (x.elem_bytes != size_of(s.type) || s.type != d.type ||
        !checked::run_fits(x.src_start, x.src_stride, x.count, s.size) ||
        !checked::run_fits(x.dst_start, x.dst_stride, x.count, d.size))
      throw Bad{"a copy does not fit its variables"};
    // count < size and elem_bytes <= 8 here; the sum of many may still wrap
    auto const next = checked::add(sum, static_cast<std::uint64_t>(x.count) * x.elem_bytes);
    if (!next) throw Bad{"an exchange's byte count does not match its copies"};
    sum = *next;
  }
  if (sum != bytes) throw Bad{"an exchange's byte count does not match its copies"};
}

/// The header of an entry whose contents are `payload`: magic, format, version, the instruction sets of the kernels
/// that built the graph (core::detail::operator_kernels), key, length and checksum.
inline std::string entry_header(CacheKey key, std::string_view kernels, std::string_view payload) {
  Hasher sum;
  sum.bytes(payload.data(), payload.size());
  Writer head;
  head.str().append(cache_magic, sizeof cache_magic);
  head.put(cache_format);
  head.count(std::string_view(version).size());
  head.str().append(version);
  head.count(kernels.size());
  head.str().append(kernels);
  head.put(key.name), head.put(key.check);
  head.count(payload.size());
  head.put(sum.first()), head.put(sum.second());
  return std::move(head.str());
}

/// Reads the whole entry at `path` into `data` (hit), or says it is absent, or why it is bad: an entry is never
/// followed through a symbolic link (O_NOFOLLOW) and must be a regular file (a FIFO or device is not read).
inline CacheLoad read_entry(std::string const& path, std::string& data, std::string& why) {
  int const fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return CacheLoad::absent;
    why = errno == ELOOP ? "it is a symbolic link, which the cache never follows" : "cannot be read";
    return CacheLoad::bad;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } const closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a regular file";
    return CacheLoad::bad;
  }
  data.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < data.size()) {  // one read for the whole file, unless the kernel returns less
    ssize_t const n = ::read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      why = "cannot be read";
      return CacheLoad::bad;
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  data.resize(got);  // a file that shrank while it was read fails its length check
  return CacheLoad::hit;
}

}  // namespace cache

TILEBSP_INLINE std::string use_cache_directory(std::string const& dir, bool trust) {
  namespace fs = std::filesystem;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return "cannot be inspected: " + std::string(std::strerror(errno));
    // Created owner-only: entries steer the executor, so no one else may write them.
    std::error_code ec;
    if (fs::path const parent = fs::path(dir).parent_path(); !parent.empty()) fs::create_directories(parent, ec);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return "cannot be created: " + std::string(std::strerror(errno));
    if (::stat(dir.c_str(), &st) != 0) return "cannot be inspected: " + std::string(std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return "is not a directory";
  if (trust) return {};
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  if (st.st_uid != ::geteuid())
    return "is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " + std::to_string(::geteuid()) +
           "), mode " + mode;
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return std::string("is writable by ") + ((st.st_mode & S_IWOTH) ? "others" : "its group") + " (mode " + mode + ")";
  return {};
}

TILEBSP_INLINE CacheKey executable_key(GraphImpl const& g, Schedule const& walked, Hasher const& copies,
                                                      std::size_t threads, bool with_kernels) {
  using cache::add_double;
  Hasher h;
  h.text("tilebsp executable");
  h.text(version);
  h.add(cache_format);
  // The kernels that built the graph: hosts of different instruction sets sharing a directory keep one entry each
  // instead of replacing each other's (the header records them too, and a load refuses another set's).
  if (with_kernels) h.text(core::detail::operator_kernels(g));
  Target const& t = g.target;
  h.text(t.name);
  for (std::size_t x : {t.ipus, t.tiles_per_ipu, t.bytes_per_tile, t.workers_per_tile, t.sync_cycles, t.inter_ipu_sync_cycles,
                        t.inter_ipu_latency_cycles, t.ipus_per_pod, walked.replicas})
    h.add(x);
  for (double x : {t.clock_hz, t.exchange_bytes_per_cycle, t.inter_ipu_bytes_per_cycle, t.host_bytes_per_cycle,
                   t.f32_macs_per_cycle, t.f16_macs_per_cycle, t.gateway_bytes_per_cycle})
    add_double(h, x);
  cache::hash_chunks(h, g.variables.size(), 4, threads, [&](Hasher& x, std::size_t i) {
    auto const& v = g.variables[i];
    x.add(static_cast<std::uint64_t>(v.type));
    x.add_signed(v.size);
    x.add(v.shape.size());
    for (auto d : v.shape) x.add(d);
    x.add(std::uint64_t{v.constant} << 1 | std::uint64_t{v.temporary});
    v.mapping.hash(x);
  });
  h.add(g.compute_sets.size());
  for (auto const& f : g.fifos) {
    h.add(static_cast<std::uint64_t>(f.type));
    h.add(f.elements);
    h.add(f.to_device);
  }
  h.add(g.vertices.size());
  h.combine(g.vertex_hash);
  h.add(walked.programs.size());
  for (auto const& p : walked.programs) {
    h.add(p.code.size());
    for (auto const& i : p.code) {
      h.add(static_cast<std::uint64_t>(i.op) | static_cast<std::uint64_t>(static_cast<std::uint32_t>(i.a)) << 8);
      h.add_signed(i.b);
      h.add_signed(i.n);
    }
  }
  h.add(walked.slots.size());
  for (auto const& s : walked.slots) h.tensor(s);
  for (auto const& cs : walked.compute_sets) h.add(cs.id);
  h.add(walked.exchanges.size());
  for (auto const& hp : walked.host_paths) h.text(hp.name);
  h.add(walked.callbacks.size());
  h.add(walked.branches.size());
  for (auto const& b : walked.branches)
    for (std::uint32_t x : {b.program, b.begin, b.end, b.ipu, b.stage, b.slot}) h.add(x);
  h.add(walked.parallels.size());
  for (auto const& pp : walked.parallels) {
    h.add(pp.slots);
    h.add(pp.branches.size());
    for (auto bi : pp.branches) h.add(bi);
  }
  h.add(walked.collectives.size());
  for (auto const& c : walked.collectives) {
    h.add(c.op);
    h.add(static_cast<std::uint64_t>(c.slot));
    h.text(c.name);
  }
  h.combine(copies);
  return CacheKey{h.first(), h.second()};
}

TILEBSP_INLINE CacheKey schedule_fingerprint(Schedule const& s) {
  Hasher copies;
  for (auto const& ex : s.exchanges) {
    copies.add(ex.transfers.size());
    for (auto const& x : ex.transfers)
      for (auto v : {std::uint64_t{x.src_var}, static_cast<std::uint64_t>(x.src_start), static_cast<std::uint64_t>(x.src_stride),
                     std::uint64_t{x.dst_var}, static_cast<std::uint64_t>(x.dst_start), static_cast<std::uint64_t>(x.dst_stride),
                     static_cast<std::uint64_t>(x.count)})
        copies.add(v);
  }
  return executable_key(*s.graph, s, copies, std::max(1u, std::thread::hardware_concurrency()), false);
}

TILEBSP_INLINE std::string save_executable(std::string const& path, CacheKey key, Schedule const& s,
                                           std::vector<TileMemory> const& memory) {
  cache::Writer w;
  w.count(s.programs.size());
  for (auto const& p : s.programs) {
    w.count(p.code.size());
    for (auto const& i : p.code) w.put(static_cast<std::uint8_t>(i.op)), w.put(i.a), w.put(i.b), w.put(i.n);
    w.count(p.cycles.size());
    for (auto c : p.cycles) w.put(c);
  }
  // Compute sets, each in its own block after a table of the blocks' sizes: a loader reads them on several threads.
  std::vector<cache::Writer> sets(s.compute_sets.size());
  for (std::size_t i = 0; i < sets.size(); ++i) {
    auto const& cs = s.compute_sets[i];
    cache::Writer& c = sets[i];
    c.put(cs.id), c.put(cs.cycles), c.put(cs.fetch_cycles), c.put(cs.fetch_bytes);
    c.u32s(cs.vars), c.u32s(cs.reads), c.u32s(cs.writes), c.u32s(cs.full_writes);
    c.count(cs.vertices.size());
    std::int64_t record = 0;  // the previous vertex's: records mostly follow each other
    for (auto const& pv : cs.vertices) {
      c.zigzag(static_cast<std::int64_t>(pv.record) - record);
      record = pv.record;
      c.varint(pv.cycles);
      c.varint(pv.staging.size() << 1 | std::size_t{pv.supervisor});
      for (auto const& st : pv.staging) {
        c.varint(st.field), c.varint(st.item), c.varint(std::uint64_t{st.gather} | std::uint64_t{st.scatter} << 1);
        c.varint(static_cast<std::uint64_t>(st.elements)), c.varint(st.elem_bytes);
      }
    }
  }
  w.count(sets.size());
  for (auto& c : sets) w.count(c.str().size());
  for (auto& c : sets) w.str().append(c.str());
  w.count(s.exchanges.size());
  for (auto const& ex : s.exchanges) {
    w.put(static_cast<std::uint8_t>(ex.staged)), w.put(ex.cycles), w.put(ex.bytes);
    w.transfers(ex.transfers);
  }
  w.count(memory.size());
  for (auto const& m : memory) w.put(m.always_live), w.put(m.peak_live), w.put(m.peak_temporary);
  w.count(s.branches.size());
  for (auto const& b : s.branches) w.put(b.cycles);

  std::string head = cache::entry_header(key, core::detail::operator_kernels(*s.graph), w.str());

  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path const to(path);
  if (to.has_parent_path()) fs::create_directories(to.parent_path(), ec);
  if (ec) return "cannot create the directory: " + ec.message();
  // A name no other writer uses (process, thread, counter, random): each writes its own file, and rename()
  // replaces the entry atomically.
  static std::atomic<std::uint64_t> serial{0};
  std::uint64_t const unique = std::random_device{}() ^ (serial.fetch_add(1) << 32) ^
                               std::hash<std::thread::id>{}(std::this_thread::get_id());
  fs::path const tmp = to.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(unique);
  {
    // A new file (O_EXCL: never an existing one, nor a link planted under the name), readable by its owner only.
    int const fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return "cannot create " + tmp.string() + ": " + std::strerror(errno);
    bool ok = true;
    for (std::string const* part : {&head, &w.str()}) {
      for (std::size_t done = 0; ok && done < part->size();) {
        ssize_t const n = ::write(fd, part->data() + done, part->size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) ok = false;
        else done += static_cast<std::size_t>(n);
      }
    }
    if (::close(fd) != 0) ok = false;
    if (!ok) {
      fs::remove(tmp, ec);
      return "cannot write " + tmp.string();
    }
  }
  fs::rename(tmp, to, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return "cannot rename " + tmp.string() + " to it: " + ec.message();
  }
  return {};
}

TILEBSP_INLINE CacheLoad load_executable(std::string const& path, CacheKey key, Schedule& walked,
                                         std::vector<TileMemory>& memory, std::string& why, std::size_t threads) {
  std::string data;
  if (CacheLoad const read = cache::read_entry(path, data, why); read != CacheLoad::hit) return read;
  GraphImpl const& g = *walked.graph;
  try {
    cache::Reader head(data.data(), data.size());
    for (char c : cache_magic)
      if (head.get<char>() != c) throw cache::Bad{"not an executable cache entry"};
    if (head.get<std::uint32_t>() != cache_format) throw cache::Bad{"another entry format"};
    if (std::string const v = head.text(); v != version) throw cache::Bad{"written by tilebsp " + v + ", this is " + version};
    std::string const k = head.text();
    if (std::string const mine = core::detail::operator_kernels(g); k != mine)
      throw cache::Bad{"made by " + (k.empty() ? std::string("no") : k) + " kernels, this process runs " +
                       (mine.empty() ? std::string("none") : mine) + " (TILEBSP_ISA, docs/11)"};
    if (head.get<std::uint64_t>() != key.name || head.get<std::uint64_t>() != key.check)
      throw cache::Bad{"its key is another compile's (a hash collision or a renamed file)"};
    auto const size = head.get<std::uint64_t>();
    auto const s1 = head.get<std::uint64_t>(), s2 = head.get<std::uint64_t>();
    std::size_t const at = head.position(data.data());
    if (size > data.size() - at) throw cache::Bad{"truncated"};
    if (size < data.size() - at) throw cache::Bad{"longer than its header says"};
    Hasher sum;
    sum.bytes(data.data() + at, size);
    if (sum.first() != s1 || sum.second() != s2) throw cache::Bad{"corrupt (its checksum does not match)"};

    cache::Reader r(data.data() + at, size);
    std::size_t const nvars = g.variables.size(), tiles = g.target.num_tiles();
    if (r.count() != walked.programs.size()) throw cache::Bad{"its programs differ from these"};
    std::vector<std::vector<std::uint64_t>> cycles;
    for (auto const& p : walked.programs) {
      if (r.count(17) != p.code.size()) throw cache::Bad{"its programs differ from these"};
      for (auto const& i : p.code) {
        auto const op = r.get<std::uint8_t>();
        auto const a = r.get<std::int32_t>(), b = r.get<std::int32_t>();
        auto const n = r.get<std::int64_t>();
        if (op != static_cast<std::uint8_t>(i.op) || a != i.a || b != i.b || n != i.n)
          throw cache::Bad{"its programs differ from these"};
      }
      auto& c = cycles.emplace_back(r.count(8));
      if (c.size() != p.code.size()) throw cache::Bad{"its cycle estimates do not fit the programs"};
      for (auto& x : c) x = r.get<std::uint64_t>();
    }
    if (r.count(8) != walked.compute_sets.size()) throw cache::Bad{"its compute sets differ from these"};
    std::vector<std::uint32_t> per_cs(g.compute_sets.size(), 0);
    for (auto const& rec : g.vertices) ++per_cs[rec.compute_set];
    // Each vertex listed once, by its own compute set (so no two threads mark the same one).
    std::vector<char> seen(g.vertices.size(), 0);
    std::vector<ComputeSetPlan> sets(walked.compute_sets.size());
    std::vector<std::pair<char const*, std::size_t>> blocks(sets.size());
    for (auto& b : blocks) b.second = r.count();
    for (auto& b : blocks) b.first = r.skip(b.second);
    // Compute sets decoded on up to `threads` threads; the first bad one (in entry order) is reported.
    auto const decode = [&](std::size_t i) {
      cache::Reader c(blocks[i].first, blocks[i].second);
      auto& cs = sets[i];
      cs.id = c.get<std::uint32_t>();
      if (cs.id != walked.compute_sets[i].id) throw cache::Bad{"its compute sets differ from these"};
      cs.cycles = c.get<std::uint64_t>(), cs.fetch_cycles = c.get<std::uint64_t>(), cs.fetch_bytes = c.get<std::uint64_t>();
      cs.vars = c.u32s(nvars), cs.reads = c.u32s(nvars), cs.writes = c.u32s(nvars), cs.full_writes = c.u32s(nvars);
      cs.vertices.resize(c.count(3));
      if (cs.id >= per_cs.size() || cs.vertices.size() != per_cs[cs.id])
        throw cache::Bad{"a compute set's vertices differ from the graph's"};
      std::int64_t record = 0;
      for (auto& pv : cs.vertices) {
        auto const moved = checked::add(record, c.zigzag());
        if (!moved) throw cache::Bad{"a compute set's vertices differ from the graph's"};
        record = *moved;
        if (record < 0 || static_cast<std::size_t>(record) >= g.vertices.size() ||
            g.vertices[static_cast<std::size_t>(record)].compute_set != cs.id || seen[static_cast<std::size_t>(record)]++)
          throw cache::Bad{"a compute set's vertices differ from the graph's"};
        pv.record = static_cast<std::uint32_t>(record);
        pv.cycles = c.varint();
        auto const staging = c.varint();
        pv.supervisor = (staging & 1) != 0;
        auto const& rec = g.vertices[pv.record];
        if ((staging >> 1) > rec.tensors.size())  // a staging buffer per connected tensor at most
          throw cache::Bad{"a vertex's staging does not fit its fields"};
        pv.staging.resize(staging >> 1);
        for (auto& st : pv.staging) {
          auto const field = c.varint(), item = c.varint(), dir = c.varint();
          auto const elements = c.varint(), elem_bytes = c.varint();
          if (field >= rec.fields.size() || item >= rec.fields[field].count || dir > 3 || elem_bytes > 8)
            throw cache::Bad{"a vertex's staging does not fit its fields"};
          st.field = static_cast<std::uint32_t>(field), st.item = static_cast<std::uint32_t>(item);
          st.gather = (dir & 1) != 0, st.scatter = (dir & 2) != 0;
          st.elements = static_cast<std::int64_t>(elements);
          st.elem_bytes = static_cast<std::uint32_t>(elem_bytes);
          auto const& t = rec.tensors_of(rec.fields[st.field])[st.item];
          if (st.elements != static_cast<std::int64_t>(t.num_elements()) || st.elem_bytes != size_of(t.element_type()))
            throw cache::Bad{"a vertex's staging does not fit its fields"};
        }
      }
      if (!c.done()) throw cache::Bad{"a compute set is longer than its contents"};
    };
    core::detail::parallel_for(threads, sets.size(), 1, [&](std::size_t i, std::size_t) { decode(i); });
    if (r.count() != walked.exchanges.size()) throw cache::Bad{"its exchanges differ from these"};
    for (auto& ex : walked.exchanges) {
      bool const staged = r.get<std::uint8_t>() != 0;
      if (staged != ex.staged) throw cache::Bad{"its exchanges differ from these"};
      ex.cycles = r.get<std::uint64_t>(), ex.bytes = r.get<std::uint64_t>();
      ex.transfers = r.transfers();
      cache::check_transfers(g, ex.transfers, ex.bytes);
    }
    if (r.count(24) != tiles) throw cache::Bad{"its memory report is for another number of tiles"};
    memory.resize(tiles);
    for (auto& m : memory) m.always_live = r.get<std::uint64_t>(), m.peak_live = r.get<std::uint64_t>(), m.peak_temporary = r.get<std::uint64_t>();
    if (r.count(8) != walked.branches.size()) throw cache::Bad{"its pipeline stages differ from these"};
    for (auto& b : walked.branches) b.cycles = r.get<std::uint64_t>();
    if (!r.done()) throw cache::Bad{"longer than its contents"};
    walked.compute_sets = std::move(sets);
    for (std::size_t p = 0; p < cycles.size(); ++p) walked.programs[p].cycles = std::move(cycles[p]);
    return CacheLoad::hit;
  } catch (cache::Bad const& b) {
    why = b.why;
    return CacheLoad::bad;
  }
}

}  // namespace tilebsp::program::detail
