// tilebsp::compiled: the Tensor instances of <tilebsp/ops/pool.hpp>, built once for every target that links the library.
#include <tilebsp/ops/pool_impl.hpp>

namespace tilebsp::ops {
TILEBSP_OPS_POOL_INSTANCES(TILEBSP_DETAIL_INSTANCE)
}  // namespace tilebsp::ops
