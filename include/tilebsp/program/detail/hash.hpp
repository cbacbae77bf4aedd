// Hasher: a streaming 128-bit hash of words, bytes and tensors' element runs (the executable cache's key and its
// entries' checksums). Not cryptographic: it tells apart inputs that differ by accident, not by design.
#pragma once

#include <tilebsp/core/tensor.hpp>

#include <cstdint>
#include <cstring>
#include <string_view>

namespace tilebsp::program::detail {

class Hasher {
 public:
  /// Two lanes, each a bijective mixer applied after every word: differently seeded and mixed, so that a
  /// collision in one lane is caught by the other.
  void add(std::uint64_t x) noexcept {
    a_ = fmix(a_ ^ x) + 0x9E3779B97F4A7C15ull;
    b_ = mix(b_ + x * 0xD1342543DE82EF95ull) ^ 0xA0761D6478BD642Full;
  }
  void add_signed(std::int64_t x) noexcept { add(static_cast<std::uint64_t>(x)); }
  void bytes(void const* p, std::size_t n) noexcept {
    auto const* c = static_cast<unsigned char const*>(p);
    add(n);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, c + i, 8);
      add(w);
    }
    if (i < n) {
      std::uint64_t w = 0;
      std::memcpy(&w, c + i, n - i);
      add(w);
    }
  }
  void text(std::string_view s) noexcept { bytes(s.data(), s.size()); }
  /// A tensor as the lowering sees it: element type and its runs of variable elements.
  void tensor(Tensor const& t) {
    add(static_cast<std::uint64_t>(t.element_type()));
    add(t.num_elements());
    t.for_each_run([this](std::uint32_t var, std::int64_t start, std::int64_t stride, std::int64_t count) {
      add(var);
      add_signed(start);
      add_signed(stride);
      add_signed(count);
    });
  }
  void combine(Hasher const& h) noexcept {
    add(h.a_);
    add(h.b_);
  }
  std::uint64_t first() const noexcept { return a_; }
  std::uint64_t second() const noexcept { return b_; }

 private:
  static std::uint64_t fmix(std::uint64_t x) noexcept {  // MurmurHash3's finaliser
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    return x ^ (x >> 33);
  }
  static std::uint64_t mix(std::uint64_t x) noexcept {  // a different xor-shift-multiply bijection
    x ^= x >> 32;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 29;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 32);
  }
  std::uint64_t a_ = 0x243F6A8885A308D3ull, b_ = 0x13198A2E03707344ull;
};

}  // namespace tilebsp::program::detail
