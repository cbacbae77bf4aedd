// tilebsp::compiled: the Tensor instances of <tilebsp/ops/conv.hpp>, built once per instruction set (src/kernels/table.cpp).
#include <tilebsp/ops/conv_impl.hpp>

namespace tilebsp::ops {
TILEBSP_OPS_CONV_INSTANCES(TILEBSP_DETAIL_INSTANCE)
}  // namespace tilebsp::ops
