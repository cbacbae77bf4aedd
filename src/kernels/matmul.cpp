// tilebsp::compiled: the Tensor instances of <tilebsp/ops/matmul.hpp>, built once per instruction set (src/kernels/table.cpp).
#include <tilebsp/ops/matmul_impl.hpp>

namespace tilebsp::ops {
TILEBSP_OPS_MATMUL_INSTANCES(TILEBSP_DETAIL_INSTANCE)
}  // namespace tilebsp::ops
