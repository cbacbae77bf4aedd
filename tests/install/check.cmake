# Builds and runs tests/install/consumer against tilebsp, either installed into a temporary prefix and found
# with find_package (MODE=find_package) or pulled in with add_subdirectory (MODE=add_subdirectory). The consumer
# keeps CMake's default build type (none: no optimisation flags, as a project that sets none gets): the test is
# about packaging, and -O3 would double its compile time (68 s instead of 30 on a Zen 3 core).
file(REMOVE_RECURSE ${WORK_DIR})
set(consumer ${SOURCE_DIR}/tests/install/consumer)
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed: ${ARGV}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/lib -DCMAKE_CXX_COMPILER=${CXX} -DTILEBSP_BUILD_TESTS=OFF
      -DTILEBSP_BUILD_BENCHMARKS=OFF -DTILEBSP_BUILD_SAMPLES=OFF -DTILEBSP_INSTALL=ON)
  run(${CMAKE_COMMAND} --install ${WORK_DIR}/lib --prefix ${WORK_DIR}/prefix)
  run(${CMAKE_COMMAND} -S ${consumer} -B ${WORK_DIR}/app -DCMAKE_CXX_COMPILER=${CXX}
      -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
else()
  run(${CMAKE_COMMAND} -S ${consumer} -B ${WORK_DIR}/app -DCMAKE_CXX_COMPILER=${CXX}
      -DTILEBSP_SOURCE_DIR=${SOURCE_DIR})
endif()
run(${CMAKE_COMMAND} --build ${WORK_DIR}/app)
run(${WORK_DIR}/app/consumer)
if(NOT last_output MATCHES "\\[3, 8\\] \\[3, 8\\]")
  message(FATAL_ERROR "consumer printed: ${last_output}")
endif()
message(STATUS "consumer (${MODE}) printed: ${last_output}")
