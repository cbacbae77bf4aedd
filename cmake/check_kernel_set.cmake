# Fails the build where a kernel set's object (OBJECT) defines a global symbol besides its table (TABLE): the linker
# could then pick that copy, built for this set's instruction set, for callers elsewhere (cmake/kernels.cmake).
execute_process(COMMAND ${NM} --defined-only -g ${OBJECT} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} ${OBJECT}: ${err}")
endif()
string(REGEX REPLACE "[^\n]* ${TABLE}\n" "" rest "${out}")
if(NOT rest STREQUAL "")
  message(FATAL_ERROR "${OBJECT} defines global symbols besides ${TABLE}:\n${rest}")
endif()
