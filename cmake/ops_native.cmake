# What our own tests, samples and benchmarks link for the operators: tilebsp::compiled when it is built (its kernels
# chosen at run time; the release preset builds the host's level and the baseline, TILEBSP_KERNEL_ISAS "host;generic"),
# else the header-only target, whose kernels then compile in each file for TILEBSP_MARCH. Our own files are built for
# TILEBSP_MARCH (tilebsp_native) either way.
add_library(tilebsp_ops_native INTERFACE)
target_link_libraries(tilebsp_ops_native INTERFACE tilebsp_native)
if(TILEBSP_COMPILED_LIBRARY)
  target_link_libraries(tilebsp_ops_native INTERFACE tilebsp_compiled)
else()
  target_link_libraries(tilebsp_ops_native INTERFACE tilebsp::tilebsp)
endif()
