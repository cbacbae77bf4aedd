// Explicit instances of the operators' entry points: what the compiled library (tilebsp::compiled) builds once.
#pragma once

// Each operator header lists its entry points' Tensor instances as an X-macro, TILEBSP_OPS_<AREA>_INSTANCES(X),
// X taking one function signature. Where TILEBSP_COMPILED is defined (a target that links tilebsp::compiled), the
// header declares them `extern template`: a file that calls ops::conv then compiles none of its kernels, the
// library's copy is linked instead. Header-only (the default), nothing is declared and a call instantiates the
// operator in the caller's file, as any template. The library's sources (src/) define each list once.
#ifdef TILEBSP_COMPILED
#define TILEBSP_DECLARE_INSTANCES(LIST) LIST(TILEBSP_DETAIL_EXTERN_INSTANCE)
#else
#define TILEBSP_DECLARE_INSTANCES(LIST)
#endif
#define TILEBSP_DETAIL_EXTERN_INSTANCE(...) extern template __VA_ARGS__;
#define TILEBSP_DETAIL_INSTANCE(...) template __VA_ARGS__;
