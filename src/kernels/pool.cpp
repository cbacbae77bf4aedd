// tilebsp::compiled: the Tensor instances of <tilebsp/ops/pool.hpp>, built once per instruction set (src/kernels/table.cpp).
#include <tilebsp/ops/pool_impl.hpp>

namespace tilebsp::ops {
TILEBSP_OPS_POOL_INSTANCES(TILEBSP_DETAIL_INSTANCE)
}  // namespace tilebsp::ops
