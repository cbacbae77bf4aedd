# Warning flags for tilebsp's own targets (tests, samples, benchmarks); never inherited by users.
add_library(tilebsp_warnings INTERFACE)
target_compile_options(tilebsp_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Werror)
# GCC 12 reports a false -Wrestrict inside std::string concatenation at -O2 (GCC bug 105329) and false
# -Wmaybe-uninitialized / -Wuninitialized inside its own AVX-512 intrinsic headers (_mm512_undefined_ps,
# GCC bug 105593). The sanitizer presets still catch real uninitialised reads.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(tilebsp_warnings INTERFACE -Wno-restrict -Wno-maybe-uninitialized -Wno-uninitialized)
endif()

# clang with GCC 12's libstdc++ warns inside libstdc++'s own std::stable_sort (its get_temporary_buffer is marked
# deprecated in C++17 and later, and libstdc++ 13 stopped calling it): any stable_sort in a C++20 file warns, ours
# or not. Only with that library; our own code has nothing deprecated.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  include(CheckCXXSourceCompiles)
  check_cxx_source_compiles("#include <version>
#if defined(_GLIBCXX_RELEASE) && _GLIBCXX_RELEASE < 13
#error libstdc++ before 13
#endif
int main() {}" TILEBSP_STDLIB_WITHOUT_TEMPBUF_DEPRECATION)
  if(NOT TILEBSP_STDLIB_WITHOUT_TEMPBUF_DEPRECATION)
    target_compile_options(tilebsp_warnings INTERFACE -Wno-deprecated-declarations)
  endif()
endif()

# Native code generation for samples and benchmarks only. TILEBSP_MARCH picks another target (x86-64-v3 builds
# the AVX2 kernels, x86-64-v4 the AVX-512 ones), e.g. to measure AVX2 code on an AVX-512 host.
set(TILEBSP_MARCH "native" CACHE STRING "-march of the samples and benchmarks (native, x86-64-v3, znver3, ...)")
add_library(tilebsp_native INTERFACE)
target_compile_options(tilebsp_native INTERFACE -march=${TILEBSP_MARCH})
