// Explicit instances of the operators' entry points: what the compiled library (tilebsp::compiled) builds once.
#pragma once

#include <type_traits>

namespace tilebsp::ops::detail {
/// The template head of every operator entry point, `template <class T, class = detail::only<T, Tensor>>`: T is
/// Tensor (Graph for plan_conv and the create_conv_* functions), checked by substitution rather than by a
/// constraint (`template <std::same_as<Tensor> T>`), because compilers mangle constraints differently (GCC 12 leaves
/// them out, clang 17 and later encode them) and the compiled library's entry points must link from both.
template <class T, class Expected>
using only = std::enable_if_t<std::is_same_v<T, Expected>>;
}  // namespace tilebsp::ops::detail

// Each operator header lists its entry points' Tensor instances as an X-macro, TILEBSP_OPS_<AREA>_INSTANCES(X),
// each entry X(RETURN, NAME, (PARAMETER TYPES)). Where TILEBSP_COMPILED is defined (a target that links
// tilebsp::compiled), the header declares them `extern template`: a file that calls ops::conv then compiles none of
// its kernels, the library's copy is linked instead. Header-only (the default), nothing is declared and a call
// instantiates the operator in the caller's file, as any template.
//
// The library builds each list once per instruction set (src/kernels/, one set of kernels per ISA) and defines the
// entry points themselves as forwarders to the set chosen when the program starts (src/dispatch.cpp,
// <tilebsp/ops/kernels.hpp>); that file declares nothing extern (TILEBSP_KERNELS_FORWARD).
#if defined(TILEBSP_COMPILED) && !defined(TILEBSP_KERNELS_FORWARD)
#define TILEBSP_DECLARE_INSTANCES(LIST) LIST(TILEBSP_DETAIL_EXTERN_INSTANCE)
#else
#define TILEBSP_DECLARE_INSTANCES(LIST)
#endif
#define TILEBSP_DETAIL_EXTERN_INSTANCE(R, NAME, PARAMS) extern template R NAME PARAMS;
#define TILEBSP_DETAIL_INSTANCE(R, NAME, PARAMS) template R NAME PARAMS;

// Every entry point of the operators, in one list (the kernel table's layout, <tilebsp/ops/kernels.hpp>).
#define TILEBSP_OPS_ALL_INSTANCES(X) \
  TILEBSP_OPS_MAP_INSTANCES(X)       \
  TILEBSP_OPS_REDUCE_INSTANCES(X)    \
  TILEBSP_OPS_MATMUL_INSTANCES(X)    \
  TILEBSP_OPS_CONV_INSTANCES(X)      \
  TILEBSP_OPS_POOL_INSTANCES(X)      \
  TILEBSP_OPS_LOSS_INSTANCES(X)

// A parameter list's types with names (p<N> ... p1), and those names as arguments: what a forwarder needs.
// TILEBSP_DETAIL_NAMED((int, float)) is (int p2, float p1); TILEBSP_DETAIL_ARGS((int, float)) is (p2, p1).
#define TILEBSP_DETAIL_NAMED(...) (TILEBSP_DETAIL_CAT(TILEBSP_DETAIL_NAMED_, TILEBSP_DETAIL_NARG(__VA_ARGS__))(__VA_ARGS__))
#define TILEBSP_DETAIL_ARGS(...) (TILEBSP_DETAIL_CAT(TILEBSP_DETAIL_ARGS_, TILEBSP_DETAIL_NARG(__VA_ARGS__))(__VA_ARGS__))
#define TILEBSP_DETAIL_NARG(...) TILEBSP_DETAIL_NARG_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define TILEBSP_DETAIL_NARG_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, N, ...) N
#define TILEBSP_DETAIL_CAT(a, b) TILEBSP_DETAIL_CAT_(a, b)
#define TILEBSP_DETAIL_CAT_(a, b) a##b
#define TILEBSP_DETAIL_NAMED_1(t) t p1
#define TILEBSP_DETAIL_NAMED_2(t, ...) t p2, TILEBSP_DETAIL_NAMED_1(__VA_ARGS__)
#define TILEBSP_DETAIL_NAMED_3(t, ...) t p3, TILEBSP_DETAIL_NAMED_2(__VA_ARGS__)
#define TILEBSP_DETAIL_NAMED_4(t, ...) t p4, TILEBSP_DETAIL_NAMED_3(__VA_ARGS__)
#define TILEBSP_DETAIL_NAMED_5(t, ...) t p5, TILEBSP_DETAIL_NAMED_4(__VA_ARGS__)
#define TILEBSP_DETAIL_NAMED_6(t, ...) t p6, TILEBSP_DETAIL_NAMED_5(__VA_ARGS__)
#define TILEBSP_DETAIL_NAMED_7(t, ...) t p7, TILEBSP_DETAIL_NAMED_6(__VA_ARGS__)
#define TILEBSP_DETAIL_NAMED_8(t, ...) t p8, TILEBSP_DETAIL_NAMED_7(__VA_ARGS__)
#define TILEBSP_DETAIL_NAMED_9(t, ...) t p9, TILEBSP_DETAIL_NAMED_8(__VA_ARGS__)
#define TILEBSP_DETAIL_NAMED_10(t, ...) t p10, TILEBSP_DETAIL_NAMED_9(__VA_ARGS__)
#define TILEBSP_DETAIL_NAMED_11(t, ...) t p11, TILEBSP_DETAIL_NAMED_10(__VA_ARGS__)
#define TILEBSP_DETAIL_NAMED_12(t, ...) t p12, TILEBSP_DETAIL_NAMED_11(__VA_ARGS__)
#define TILEBSP_DETAIL_ARGS_1(t) p1
#define TILEBSP_DETAIL_ARGS_2(t, ...) p2, TILEBSP_DETAIL_ARGS_1(__VA_ARGS__)
#define TILEBSP_DETAIL_ARGS_3(t, ...) p3, TILEBSP_DETAIL_ARGS_2(__VA_ARGS__)
#define TILEBSP_DETAIL_ARGS_4(t, ...) p4, TILEBSP_DETAIL_ARGS_3(__VA_ARGS__)
#define TILEBSP_DETAIL_ARGS_5(t, ...) p5, TILEBSP_DETAIL_ARGS_4(__VA_ARGS__)
#define TILEBSP_DETAIL_ARGS_6(t, ...) p6, TILEBSP_DETAIL_ARGS_5(__VA_ARGS__)
#define TILEBSP_DETAIL_ARGS_7(t, ...) p7, TILEBSP_DETAIL_ARGS_6(__VA_ARGS__)
#define TILEBSP_DETAIL_ARGS_8(t, ...) p8, TILEBSP_DETAIL_ARGS_7(__VA_ARGS__)
#define TILEBSP_DETAIL_ARGS_9(t, ...) p9, TILEBSP_DETAIL_ARGS_8(__VA_ARGS__)
#define TILEBSP_DETAIL_ARGS_10(t, ...) p10, TILEBSP_DETAIL_ARGS_9(__VA_ARGS__)
#define TILEBSP_DETAIL_ARGS_11(t, ...) p11, TILEBSP_DETAIL_ARGS_10(__VA_ARGS__)
#define TILEBSP_DETAIL_ARGS_12(t, ...) p12, TILEBSP_DETAIL_ARGS_11(__VA_ARGS__)
