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

struct AlignedFree {
  void operator()(std::byte* p) const noexcept { ::operator delete(p, std::align_val_t{64}); }
};
/// A zeroed, 64-byte aligned host buffer.
using Buffer = std::unique_ptr<std::byte, AlignedFree>;
inline Buffer allocate(std::size_t bytes) {
  auto* p = static_cast<std::byte*>(::operator new(std::max<std::size_t>(bytes, 64), std::align_val_t{64}));
  std::memset(p, 0, std::max<std::size_t>(bytes, 64));
  return Buffer(p);
}

}  // namespace tilebsp::exec::detail
