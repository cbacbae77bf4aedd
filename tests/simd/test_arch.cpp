// simd::load_partial and simd::store_partial: the first n lanes move, nothing past them is read into the result
// or written; simd::tuning: the overload for the most derived architecture tag is the one taken; comparisons of
// booleans in expressions, on this build's masks.
#include <tilebsp/expr/eval.hpp>
#include <tilebsp/simd/arch.hpp>
#include <tilebsp/simd/tuning.hpp>

#include <doctest/doctest.h>

#include <memory>
#include <vector>

namespace sd = tilebsp::simd;

TEST_CASE("load_partial and store_partial move the first n lanes only") {
  constexpr std::size_t L = sd::lanes;
  for (std::size_t n = 0; n <= L; ++n) {
    CAPTURE(n);
    std::vector<float> src(L + 2), dst(L + 2, -7.0f);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i + 1);
    alignas(64) float got[L];
    sd::load_partial(src.data() + 1, n).store_aligned(got);
    for (std::size_t i = 0; i < L; ++i) CHECK(got[i] == (i < n ? src[i + 1] : 0.0f));
    sd::store_partial(sd::batch<float>::load_unaligned(src.data()), dst.data() + 1, n);
    CHECK(dst[0] == -7.0f);
    for (std::size_t i = 0; i < L; ++i) CHECK(dst[i + 1] == (i < n ? src[i] : -7.0f));
    CHECK(dst[L + 1] == -7.0f);
  }
}

TEST_CASE("tuning: each instruction set takes its own overload, the build's is simd::tuning") {
  namespace isa = sd::isa;
  // Tags derive from the instruction sets below them: fma3<avx2> from avx2, avx512bw from avx512f, sse4.2 and avx
  // from generic; the kernels' blocks follow the register count.
  constexpr auto avx2 = isa::tuning<xsimd::fma3<xsimd::avx2>>(xsimd::fma3<xsimd::avx2>{});
  constexpr auto avx512 = isa::tuning<xsimd::avx512bw>(xsimd::avx512bw{});
  constexpr auto sse = isa::tuning<xsimd::sse4_2>(xsimd::sse4_2{});
  CHECK(avx2.registers == 16);
  CHECK(avx2.gemm_mr == 6);
  CHECK(avx2.grad_kernel_vectors[1] == 1);  // two-vector weight-gradient columns one vector at a time
  CHECK(avx2.grad_row_channels[0] == 4);
  CHECK(avx512.registers == 32);
  CHECK(avx512.gemm_mr == 12);
  CHECK(avx512.row_rows_min[0] == 7);  // 7-wide rows (7² depthwise layers) in row blocks
  CHECK(avx512.grad_kernel_vectors[1] == 2);
  CHECK(sse.registers == 16);
  CHECK(sse.grad_kernel_vectors[1] == 2);
  CHECK(sd::tuning.registers == (sd::lanes >= 16 ? 32u : 16u));
  // Every block fits the registers: accumulators, the operands of a step and one broadcast input.
  for (auto const& t : {avx2, avx512, sse}) {
    CHECK(t.gemm_mr * 2 + 3 <= t.registers);
    CHECK(t.gemm_mr <= 12);  // micro_kernel addresses twelve rows of A
    for (std::size_t v = 1; v <= 2; ++v) {
      INFO("vectors " << v);
      CHECK(t.conv_block_rows[v - 1] * v + v + 1 <= t.registers);
      CHECK(t.row_rows_max[v - 1] * v + 3 * v + 1 <= t.registers);
      std::size_t const kv = t.grad_kernel_vectors[v - 1];
      CHECK(3 * t.grad_row_channels[kv - 1] * kv + 3 * kv + 1 <= t.registers);
      CHECK(t.wino_rows[v - 1] * v + v + 1 <= t.registers);
    }
  }
}

// xsimd 8.1's mask operations differ by instruction set: on AVX-512 the xor of two masks is their or, and on SSE2
// != on masks compares them as floats (all ones is a NaN). == and != on booleans gave true == true as false on
// AVX-512 hosts until the expressions compared masks for equality instead.
TEST_CASE("expressions: == and != on booleans, every lane and the tail") {
  namespace ex = tilebsp::expr;
  using namespace ex;
  std::size_t const n = 4 * sd::lanes + 3;
  std::unique_ptr<bool[]> a(new bool[n]), b(new bool[n]), eq(new bool[n]), ne(new bool[n]);
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = i % 2 != 0;
    b[i] = i / 2 % 2 != 0;
  }
  ex::Operands o;
  o.ptr[0] = a.get();
  o.ptr[1] = b.get();
  constexpr ex::Types in{ex::VT::boolean, ex::VT::boolean, ex::VT::any, ex::VT::any, ex::VT::any, ex::VT::any, ex::VT::any, ex::VT::any};
  ex::evaluate<in, ex::VT::boolean>(_1 == _2, o, 2, eq.get(), n);
  ex::evaluate<in, ex::VT::boolean>(_1 != _2, o, 2, ne.get(), n);
  for (std::size_t i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK(eq[i] == (a[i] == b[i]));
    CHECK(ne[i] == (a[i] != b[i]));
  }
}
