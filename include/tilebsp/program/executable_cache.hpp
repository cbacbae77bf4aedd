// The executable cache: compiled schedules stored on disk under a hash of everything that determines them, and
// loaded in place of lowering when the same graph and programs are compiled again (docs/01, "Compiling").
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/detail/hash.hpp>
#include <tilebsp/program/schedule.hpp>
#include <tilebsp/program/tile_memory.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tilebsp::program::detail {
using core::detail::GraphImpl;
using core::detail::Hasher;

/// An entry's key: two independent 64-bit hashes. The first names the file, the second is checked inside it.
struct CacheKey {
  std::uint64_t name = 0, check = 0;
  std::string file_name() const;
};

/// Whether the executable cache may use the directory `dir` (docs/01, "What a cache entry is trusted for"): an
/// empty string when it may, else why not. A missing directory is created owner-only (0700; its missing parents
/// as usual). An existing one is used when it is this user's and writable by no one else, or whatever it is when
/// `trust` (CompileOptions::trust_cache_dir): its entries direct the executor's copies, so only its owner may write
/// them.
TILEBSP_INLINE std::string use_cache_directory(std::string const& dir, bool trust);

/// The key of a compile: the library and format versions, the target, the graph (variables and their mappings,
/// vertices with their types, tiles, connections and cycle estimates, FIFOs), the recorded programs (`walked`:
/// their instructions and slots; `copies`: every copy's tensors), hashed on up to `threads` threads, and where
/// `with_kernels` the kernels that built the operators (core::detail::operator_kernels: hosts of different
/// instruction sets sharing a cache directory keep an entry each). Not the values of constants or params (the
/// executable reads them from the graph; params feed it only through the estimates), nor compute-set or variable
/// names.
TILEBSP_INLINE CacheKey executable_key(GraphImpl const& g, Schedule const& walked, Hasher const& copies,
                                                      std::size_t threads, bool with_kernels);

/// A fingerprint of a compiled schedule (the key above without the kernels, with the exchanges' transfers in place
/// of the copies): processes that share replicas compare theirs (EngineOptions::communicator), and their
/// kernels_fingerprint apart, to say which differs.
TILEBSP_INLINE CacheKey schedule_fingerprint(Schedule const& s);

/// A hash of the instruction sets of the kernels that built `g`'s operators (core::detail::operator_kernels):
/// processes that share replicas compare it too, since other kernels compute other bits.
inline std::uint64_t kernels_fingerprint(GraphImpl const& g) {
  Hasher h;
  h.text(core::detail::operator_kernels(g));
  return h.first();
}

/// Writes the planned parts of `s` (compute-set and exchange plans, cycle estimates) and the memory report to
/// `path`, through a temporary file in the same directory renamed over it: readers see the old entry or the new
/// one, never a torn one. Returns an empty string, or why it failed.
TILEBSP_INLINE std::string save_executable(std::string const& path, CacheKey key, Schedule const& s,
                                           std::vector<TileMemory> const& memory);

enum class CacheLoad : std::uint8_t { hit, absent, bad };

/// Completes `walked` (a schedule lowered in LowerMode::record) from the entry at `path` and fills `memory`. On
/// `bad` (unreadable, truncated, corrupt, another version or format, another key, or plans that do not fit the
/// graph and programs), `why` says what and `walked` is left unusable. Compute sets are read on up to `threads`
/// threads.
TILEBSP_INLINE CacheLoad load_executable(std::string const& path, CacheKey key, Schedule& walked,
                                         std::vector<TileMemory>& memory, std::string& why, std::size_t threads);

}  // namespace tilebsp::program::detail
