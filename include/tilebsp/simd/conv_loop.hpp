// The loop a convolution kernel runs: spatial dimensions in virtual coordinates, strided rank-6 operands and a
// block of work. Shared by the direct kernels (conv.hpp) and the Winograd kernel (winograd.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace tilebsp::simd {

/// One spatial dimension of a convolution-like loop, in virtual coordinates: output position o and kernel tap t
/// read virtual position v = o * a + t * b + c of the source, which is source element v / div when v >= 0, div
/// divides v and v / div < in, and zero otherwise (padding, dilation holes).
struct ConvDim {
  std::int64_t out = 1, in = 1, taps = 1, a = 1, b = 1, c = 0, div = 1;
  std::int64_t source(std::int64_t v) const noexcept {
    if (v < 0) return -1;
    if (div != 1) {  // input dilation: holes between the source elements
      if (v % div != 0) return -1;
      v /= div;
    }
    return v < in ? v : -1;
  }
  /// Whether kernel tap t reads a source element (not padding or a dilation hole) at output position o.
  bool reads(std::int64_t o, std::int64_t t) const noexcept { return source(o * a + t * b + c) >= 0; }

  friend bool operator==(ConvDim const&, ConvDim const&) = default;
};

/// Three spatial dimensions (a lower-rank problem leads with dimensions of extent 1).
struct ConvLoop {
  std::array<ConvDim, 3> dim;
  /// Forward-like passes: run as Winograd F(2x2, 3x3) tiles (winograd.hpp) instead of direct chains. Set by the
  /// planner, only where winograd_applies(*this).
  bool winograd = false;
  std::int64_t taps() const noexcept { return dim[0].taps * dim[1].taps * dim[2].taps; }

  friend bool operator==(ConvLoop const&, ConvLoop const&) = default;
};

/// Whether a loop can run as Winograd F(2x2, 3x3): dimension 0 a single tap, dimensions 1 and 2 three taps with
/// stride, kernel dilation and input dilation 1 (any padding).
inline bool winograd_applies(ConvLoop const& L) noexcept {
  auto const three = [](ConvDim const& d) { return d.taps == 3 && d.a == 1 && d.b == 1 && d.div == 1; };
  return L.dim[0].taps == 1 && L.dim[0].div == 1 && three(L.dim[1]) && three(L.dim[2]);
}

/// A strided rank-6 operand relative to an origin: element (i0, ..., i5) at data + sum (i_k - origin_k) * stride_k.
/// Activations are indexed (n, x0, x1, x2, group, channel), weights (group, t0, t1, t2, j, c).
template <class T>
struct Operand6 {
  T* data = nullptr;
  std::array<std::ptrdiff_t, 6> stride{};
  std::array<std::int64_t, 6> origin{};
  T* at(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3, std::int64_t i4, std::int64_t i5) const noexcept {
    std::int64_t const i[6] = {i0, i1, i2, i3, i4, i5};
    std::ptrdiff_t off = 0;
    for (int k = 0; k < 6; ++k) off += static_cast<std::ptrdiff_t>(i[k] - origin[k]) * stride[k];
    return data + off;
  }
};

/// A block of work: batch [n0, n1); output positions [lo[d], hi[d]); lanes over groups [g0, g1) x channels
/// [c0, c1) (the pass's output channels); reduction channels [j0, j1).
struct ConvRange {
  std::int64_t n0 = 0, n1 = 1;
  std::array<std::int64_t, 3> lo{}, hi{};
  std::int64_t g0 = 0, g1 = 1, c0 = 0, c1 = 1, j0 = 0, j1 = 1;
};

}  // namespace tilebsp::simd
