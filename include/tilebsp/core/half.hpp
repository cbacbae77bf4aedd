// tilebsp::half: IEEE 754 binary16 storage type with correctly rounded (nearest-even) conversion from f32.
#pragma once

#include <bit>
#include <cstdint>

namespace tilebsp {

/// 16-bit float storage. Arithmetic is done in f32: convert, compute, convert back.
/// Conversion from float rounds to nearest, ties to even; overflow gives ±inf; NaN stays NaN (quiet).
class half {
 public:
  constexpr half() = default;
  constexpr half(float f) noexcept : bits_(from_float(f)) {}  // NOLINT: implicit like a built-in float type
  constexpr operator float() const noexcept { return to_float(bits_); }

  static constexpr half from_bits(std::uint16_t b) noexcept {
    half h;
    h.bits_ = b;
    return h;
  }
  constexpr std::uint16_t bits() const noexcept { return bits_; }
  friend constexpr bool operator==(half a, half b) noexcept { return float(a) == float(b); }

  static constexpr std::uint16_t from_float(float f) noexcept {
    // Bit-level rounding after F. Giesen's float_to_half_fast3_rtne (public domain technique).
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    std::uint32_t const sign = u & 0x80000000u;
    u ^= sign;
    std::uint16_t out;
    if (u >= 0x47800000u) {  // |f| >= 65536: inf, or NaN (kept quiet)
      out = u > 0x7f800000u ? 0x7e00 : 0x7c00;
    } else if (u < 0x38800000u) {  // below the smallest normal half: let the FPU round at 2^-24 granularity
      float const magic = 0.5f;    // exponent (127 - 15) + (23 - 10) + 1
      float const v = std::bit_cast<float>(u) + magic;
      out = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(v) - std::bit_cast<std::uint32_t>(magic));
    } else {
      std::uint32_t const mant_odd = (u >> 13) & 1u;
      u += (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfffu;  // rebias exponent, add rounding bias
      u += mant_odd;                                               // ties to even
      out = static_cast<std::uint16_t>(u >> 13);
    }
    return static_cast<std::uint16_t>(out | (sign >> 16));
  }

  static constexpr float to_float(std::uint16_t h) noexcept {
    std::uint32_t const sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t const exp = (h >> 10) & 0x1fu;
    std::uint32_t const mant = h & 0x3ffu;
    if (exp == 0) {
      float const v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24, exact
      return std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) | sign);
    }
    if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
    return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
  }

 private:
  std::uint16_t bits_ = 0;
};

}  // namespace tilebsp
