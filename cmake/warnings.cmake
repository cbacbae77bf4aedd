# Warning flags for tilebsp's own targets (tests, samples, benchmarks); never inherited by users.
add_library(tilebsp_warnings INTERFACE)
target_compile_options(tilebsp_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Werror)

# Native code generation for samples and benchmarks only.
add_library(tilebsp_native INTERFACE)
target_compile_options(tilebsp_native INTERFACE -march=native)
