// samples/common/rng.hpp: a small portable random generator (splitmix64), so that a seed gives the same weights,
// images and shuffles on every platform and standard library.
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>

namespace samples {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  /// Skips n draws at once (the state is a counter): a generator can start anywhere in another's sequence.
  void discard(std::uint64_t n) { s_ += n * step; }
  std::uint64_t next() {
    std::uint64_t z = (s_ += step);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  double normal() {  // Box-Muller: two draws
    double const u = 1.0 - uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
  /// Two independent standard normal samples from two draws, in single precision (Box-Muller keeping both
  /// outputs: one logarithm and one square root for two samples). For large weight arrays, where normal()'s double
  /// precision costs about five times as much.
  std::pair<float, float> normal_pair() {
    float const u = 1.0f - uniform_float(), v = uniform_float();  // u in (0, 1]
    float const r = std::sqrt(-2.0f * std::log(u)), a = 6.28318531f * v;
    return {r * std::cos(a), r * std::sin(a)};
  }
  float uniform_float() { return static_cast<float>(next() >> 40) * 0x1.0p-24f; }  // [0, 1)
  /// In [0, n) for n > 0 (the modulo bias is below n / 2^64).
  std::uint64_t below(std::uint64_t n) { return next() % n; }

 private:
  static constexpr std::uint64_t step = 0x9e3779b97f4a7c15ull;
  std::uint64_t s_;
};

}  // namespace samples
