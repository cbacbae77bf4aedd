// tilebsp::compiled: the Tensor instances of <tilebsp/ops/reduce.hpp>, built once per instruction set (src/kernels/table.cpp).
#include <tilebsp/ops/reduce_impl.hpp>

namespace tilebsp::ops {
TILEBSP_OPS_REDUCE_INSTANCES(TILEBSP_DETAIL_INSTANCE)
}  // namespace tilebsp::ops
