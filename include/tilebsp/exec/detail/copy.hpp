// Host copies of the executor: strided element copies, their merging and their split across threads, and aligned
// buffers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

// Not under AddressSanitizer: its redzones around heap buffers catch a kernel that runs past a variable.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TILEBSP_ASAN_BUILD 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TILEBSP_ASAN_BUILD 1
#endif
#if defined(__unix__) && __has_include(<sys/mman.h>) && !defined(TILEBSP_ASAN_BUILD)
#include <sys/mman.h>
#include <unistd.h>
#define TILEBSP_ANONYMOUS_MAPPINGS 1
#else
#define TILEBSP_ANONYMOUS_MAPPINGS 0
#endif

namespace tilebsp::exec::detail {

/// One host copy: `count` elements of `elem` bytes with byte strides.
struct CopyOp {
  std::byte const* src = nullptr;
  std::byte* dst = nullptr;
  std::int64_t src_stride = 0, dst_stride = 0, count = 0;
  std::uint32_t elem = 4;
};

template <class T>
inline void strided_copy(CopyOp const& c) noexcept {
  for (std::int64_t i = 0; i < c.count; ++i)
    std::memcpy(c.dst + i * c.dst_stride, c.src + i * c.src_stride, sizeof(T));
}
inline bool contiguous(CopyOp const& c) noexcept { return c.src_stride == c.elem && c.dst_stride == c.elem; }
inline void run_copy(CopyOp const& c) noexcept {
  if (contiguous(c)) {
    std::memcpy(c.dst, c.src, static_cast<std::size_t>(c.count) * c.elem);
    return;
  }
  switch (c.elem) {
    case 4: strided_copy<std::uint32_t>(c); break;
    case 2: strided_copy<std::uint16_t>(c); break;
    default: strided_copy<std::uint8_t>(c); break;
  }
}

/// Merges adjacent contiguous copies, then deals the bytes out evenly to `threads` lists.
inline std::vector<std::vector<CopyOp>> split_copies(std::vector<CopyOp> const& in, unsigned threads) {
  std::vector<CopyOp> ops;
  for (auto const& c : in) {
    if (!ops.empty()) {
      auto& p = ops.back();
      if (contiguous(p) && contiguous(c) && p.elem == c.elem && p.src + p.count * p.elem == c.src &&
          p.dst + p.count * p.elem == c.dst) {
        p.count += c.count;
        continue;
      }
    }
    ops.push_back(c);
  }
  std::int64_t total = 0;
  for (auto const& c : ops) total += c.count * c.elem;
  std::vector<std::vector<CopyOp>> out(threads);
  std::int64_t done = 0;
  unsigned t = 0;
  for (auto c : ops) {
    while (c.count > 0) {
      std::int64_t const quota = total * (t + 1) / threads - done;  // bytes thread t still takes
      std::int64_t n = t + 1 == threads ? c.count : std::min<std::int64_t>(c.count, (quota + c.elem - 1) / c.elem);
      if (n <= 0) {
        ++t;
        continue;
      }
      CopyOp part = c;
      part.count = n;
      out[t].push_back(part);
      done += n * c.elem;
      c.src += n * c.src_stride;
      c.dst += n * c.dst_stride;
      c.count -= n;
    }
  }
  return out;
}

/// Frees a Buffer: an anonymous mapping of `mapped` bytes, or (mapped 0) an aligned operator new; nothing for a
/// `borrowed` one (a part of another Buffer).
struct BufferFree {
  std::size_t mapped = 0;
  bool borrowed = false;
  void operator()(std::byte* p) const noexcept {
    if (borrowed) return;
#if TILEBSP_ANONYMOUS_MAPPINGS
    if (mapped) {
      ::munmap(p, mapped);
      return;
    }
#endif
    ::operator delete(p, std::align_val_t{64});
  }
};
/// A zeroed, 64-byte aligned host buffer.
using Buffer = std::unique_ptr<std::byte, BufferFree>;
/// From 1 MiB on, a buffer is an anonymous mapping where the system has them: its pages are zero when first
/// touched and cost nothing until then, so an Engine pays only for the memory its steps use (a model's memory
/// includes what only the vertices touch — partial sums, fetch buffers — which host kernels never do) and does not
/// zero every page twice (the kernel on the first write, then memset). From 2 MiB on, the mapping starts on a 2 MiB
/// boundary and asks for transparent huge pages (Linux's MADV_HUGEPAGE, used where the system enables them): a
/// five-hundredth of the page faults on first touch, and fewer TLB misses when kernels stream weights.
inline Buffer allocate(std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 64);
#if TILEBSP_ANONYMOUS_MAPPINGS
  constexpr std::size_t huge = std::size_t{2} << 20;
  if (bytes >= (std::size_t{1} << 20)) {
    std::size_t const slack = bytes >= huge ? huge : 0;
    void* m = ::mmap(nullptr, bytes + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) {
      auto* p = static_cast<std::byte*>(m);
      if (slack) {  // keep [aligned, aligned + bytes): unmap the slack on either side
        auto const at = reinterpret_cast<std::uintptr_t>(p);
        auto* aligned = p + ((huge - at % huge) % huge);
        if (aligned > p) ::munmap(p, static_cast<std::size_t>(aligned - p));
        static auto const page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
        std::size_t const end = (bytes + page - 1) / page * page;  // whole pages after the buffer
        if (auto const tail = static_cast<std::size_t>(p + bytes + slack - (aligned + end)); tail > 0 && tail < bytes + slack)
          ::munmap(aligned + end, tail);
        p = aligned;
        bytes = end;
#ifdef MADV_HUGEPAGE
        ::madvise(p, bytes, MADV_HUGEPAGE);
#endif
      }
      return Buffer(p, BufferFree{bytes});
    }
  }
#endif
  auto* p = static_cast<std::byte*>(::operator new(bytes, std::align_val_t{64}));
  std::memset(p, 0, bytes);
  return Buffer(p);
}

}  // namespace tilebsp::exec::detail
