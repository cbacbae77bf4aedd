// tilebsp::compiled: one instruction set's kernel table, the address of each entry point's instance built for it.
// The build compiles src/kernels/ once per level in TILEBSP_KERNEL_ISAS (TILEBSP_KERNELS_VARIANT names it), links
// each level's objects into one and keeps only its table's symbol global (cmake/kernels.cmake): the levels' copies
// of every inline function and template then stay apart, and none is linked where another level's is called.
#include <tilebsp/ops/kernels.hpp>

#ifndef TILEBSP_KERNELS_VARIANT
#error "src/kernels/ is built once per instruction set, with TILEBSP_KERNELS_VARIANT naming it (cmake/kernels.cmake)"
#endif

#define TILEBSP_DETAIL_STRING(x) TILEBSP_DETAIL_STRING_(x)
#define TILEBSP_DETAIL_STRING_(x) #x
#define TILEBSP_DETAIL_TABLE_ENTRY(R, NAME, PARAMS) &tilebsp::ops::NAME,

static_assert(std::string_view(tilebsp::ops::detail::compiled_level()) ==
                  TILEBSP_DETAIL_STRING(TILEBSP_KERNELS_VARIANT),
              "the kernels' -march does not give the instruction set their table is named after");

extern "C" [[gnu::visibility("default")]] tilebsp::ops::detail::KernelTable const TILEBSP_DETAIL_CAT(
    tilebsp_kernels_, TILEBSP_KERNELS_VARIANT) = {
    sizeof(tilebsp::ops::detail::KernelTable),
    TILEBSP_DETAIL_STRING(TILEBSP_KERNELS_VARIANT),
    tilebsp::simd::isa_name(),
    TILEBSP_OPS_ALL_INSTANCES(TILEBSP_DETAIL_TABLE_ENTRY)};
