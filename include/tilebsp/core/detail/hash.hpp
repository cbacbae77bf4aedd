// Hasher: a streaming 128-bit hash of words, bytes and tensors' element runs (the executable cache's key and its
// entries' checksums, the graph's running hash of its vertices). Not cryptographic: it tells apart inputs that
// differ by accident, not by design.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>

namespace tilebsp::core::detail {

class Hasher {
 public:
  /// Two lanes, each folding the word into its state with a 64x64 -> 128-bit multiply (as wyhash does), with
  /// different constants: a collision in one lane is caught by the other. first() and second() finalise.
  void add(std::uint64_t x) noexcept {
    a_ = mum(x ^ 0xA0761D6478BD642Full, a_ ^ 0xE7037ED1A0B428DBull);
    b_ = mum(x ^ 0x8EBC6AF09C88C6E3ull, b_ ^ 0x589965CC75374CC3ull);
  }
  void add_signed(std::int64_t x) noexcept { add(static_cast<std::uint64_t>(x)); }
  /// Two words with one multiply per lane (bulk data such as tile mappings).
  void add2(std::uint64_t x, std::uint64_t y) noexcept {
    a_ = mum(x ^ 0xA0761D6478BD642Full, y ^ a_ ^ 0xE7037ED1A0B428DBull);
    b_ = mum(x ^ 0x8EBC6AF09C88C6E3ull, y ^ b_ ^ 0x589965CC75374CC3ull);
  }
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
  /// A tensor: its element type and shape, its view's offset and strides, and the sequence of variable elements
  /// it views, which determine its elements. A short sequence (a view of one variable, or of a few) is hashed in
  /// place, a long one (a concatenation) by the hash it took when it was made.
  template <class T>  // Tensor (a template: this header comes before tensor.hpp)
  void tensor(T const& t) {
    add(static_cast<std::uint64_t>(t.element_type()));
    add(t.rank());
    for (std::size_t d = 0; d < t.rank(); ++d) add(t.dim(d));
    auto const* seq = t.element_runs();
    if (!seq) return add(0);
    bool const short_seq = seq->runs.size() <= 8;
    add(short_seq ? 1 : 4);
    for (std::size_t d = 0; d < t.rank(); ++d) add_signed(t.strides()[d]);
    add_signed(t.offset());
    add(seq->runs.size());
    if (short_seq) {
      for (auto const& r : seq->runs) run(r.var, r.start, r.stride, r.count);
    } else {
      add(seq->hash[0]);
      add(seq->hash[1]);
    }
  }
  void combine(Hasher const& h) noexcept {
    add(h.first());
    add(h.second());
  }
  void run(std::uint32_t var, std::int64_t start, std::int64_t stride, std::int64_t count) noexcept {
    add(var);
    add_signed(start);
    add_signed(stride);
    add_signed(count);
  }
  std::uint64_t first() const noexcept { return fmix(a_); }
  std::uint64_t second() const noexcept { return mix(b_); }

 private:
  static std::uint64_t mum(std::uint64_t x, std::uint64_t y) noexcept {
    __extension__ using u128 = unsigned __int128;  // GCC and Clang on 64-bit hosts
    u128 const p = static_cast<u128>(x) * y;
    return static_cast<std::uint64_t>(p) ^ static_cast<std::uint64_t>(p >> 64);
  }
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

}  // namespace tilebsp::core::detail
