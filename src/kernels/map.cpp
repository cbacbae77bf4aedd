// tilebsp::compiled: the Tensor instances of <tilebsp/ops/map.hpp>, built once per instruction set (src/kernels/table.cpp).
#include <tilebsp/ops/map.hpp>

namespace tilebsp::ops {
TILEBSP_OPS_MAP_INSTANCES(TILEBSP_DETAIL_INSTANCE)
}  // namespace tilebsp::ops
