// tilebsp::compiled: the Tensor instances of <tilebsp/ops/loss.hpp>, built once per instruction set (src/kernels/table.cpp).
#include <tilebsp/ops/loss_impl.hpp>

namespace tilebsp::ops {
TILEBSP_OPS_LOSS_INSTANCES(TILEBSP_DETAIL_INSTANCE)
}  // namespace tilebsp::ops
