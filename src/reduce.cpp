// tilebsp::compiled: the Tensor instances of <tilebsp/ops/reduce.hpp>, built once for every target that links the library.
#include <tilebsp/ops/reduce_impl.hpp>

namespace tilebsp::ops {
TILEBSP_OPS_REDUCE_INSTANCES(TILEBSP_DETAIL_INSTANCE)
}  // namespace tilebsp::ops
