# Warning flags for tilebsp's own targets (tests, samples, benchmarks); never inherited by users.
add_library(tilebsp_warnings INTERFACE)
target_compile_options(tilebsp_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Werror)
# GCC 12 reports a false -Wrestrict inside std::string concatenation at -O2 (GCC bug 105329) and false
# -Wmaybe-uninitialized / -Wuninitialized inside its own AVX-512 intrinsic headers (_mm512_undefined_ps,
# GCC bug 105593). The sanitizer presets still catch real uninitialised reads.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(tilebsp_warnings INTERFACE -Wno-restrict -Wno-maybe-uninitialized -Wno-uninitialized)
endif()

# Native code generation for samples and benchmarks only.
add_library(tilebsp_native INTERFACE)
target_compile_options(tilebsp_native INTERFACE -march=native)
