// Per-thread scratch of the kernels: 64-byte aligned buffers that grow on demand and are reused across calls, so
// the steady state allocates nothing (packed GEMM panels, convolution workspaces).
#pragma once

#include <cstddef>
#include <new>

namespace tilebsp::simd::detail {

/// 64-byte aligned scratch that grows on demand; one per thread, reused across calls (no allocation in the
/// steady state).
class Scratch {
 public:
  float* get(std::size_t floats) {
    if (floats > size_) {
      release();
      p_ = static_cast<float*>(::operator new(floats * sizeof(float), std::align_val_t{64}));
      size_ = floats;
    }
    return p_;
  }
  ~Scratch() { release(); }

 private:
  void release() noexcept {
    if (p_) ::operator delete(p_, std::align_val_t{64});
    p_ = nullptr;
    size_ = 0;
  }
  float* p_ = nullptr;
  std::size_t size_ = 0;
};
inline Scratch& scratch_a() {
  thread_local Scratch s;
  return s;
}
inline Scratch& scratch_b() {
  thread_local Scratch s;
  return s;
}
inline Scratch& scratch_c() {
  thread_local Scratch s;
  return s;
}

}  // namespace tilebsp::simd::detail
