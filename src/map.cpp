// tilebsp::compiled: the Tensor instances of <tilebsp/ops/map.hpp>, built once for every target that links the library.
#include <tilebsp/ops/map.hpp>

namespace tilebsp::ops {
TILEBSP_OPS_MAP_INSTANCES(TILEBSP_DETAIL_INSTANCE)
}  // namespace tilebsp::ops
