# Builds and runs tests/install/consumer against tilebsp:
# - MODE=find_package: the header-only package (no library built) installed into a temporary prefix, found with
#   find_package, the consumer linking tilebsp::tilebsp;
# - MODE=add_subdirectory: the source tree pulled in with add_subdirectory, header-only;
# - MODE=compiled: this build's package (BUILD_DIR: tilebsp::compiled with its kernel sets LEVELS) installed into a
#   temporary prefix (LEVELS: its levels, comma-separated); consumers built with plain -O2 and no -march, by this compiler and, where CLANG is set, by
#   clang, link tilebsp::compiled and run with the kernels the CPU picks and under TILEBSP_ISA=<each level>. A shared
#   library (TILEBSP_SHARED_LIBRARY) has the SONAME libtilebsp.so.<major>.<minor>, exports tilebsp's symbols only, and
#   is the one the consumers load (their RUNPATH names the prefix).
# The header-only consumers keep CMake's default build type (none: no optimisation flags, as a project that sets
# none gets): the test is about packaging, and -O3 would double its compile time (68 s instead of 30 on a Zen 3 core).
file(REMOVE_RECURSE ${WORK_DIR})
set(consumer ${SOURCE_DIR}/tests/install/consumer)
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed: ${ARGV}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
function(expect pattern what)
  if(NOT last_output MATCHES "${pattern}")
    message(FATAL_ERROR "${what} printed: ${last_output}")
  endif()
  message(STATUS "${what} printed: ${last_output}")
endfunction()

if(MODE STREQUAL "compiled")
  run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
  if(NOT EXISTS ${WORK_DIR}/prefix/lib/cmake/tilebsp/tilebspConfig.cmake
     AND NOT EXISTS ${WORK_DIR}/prefix/lib64/cmake/tilebsp/tilebspConfig.cmake)
    file(GLOB_RECURSE found ${WORK_DIR}/prefix/tilebspConfig.cmake)
    message(FATAL_ERROR "a package with its library keeps its CMake files in the library directory; found: ${found}")
  endif()
  file(GLOB shared ${WORK_DIR}/prefix/lib*/libtilebsp.so.*.*.*)
  if(shared)
    find_program(READELF NAMES readelf REQUIRED)
    find_program(NM NAMES nm REQUIRED)
    get_filename_component(libdir ${shared} DIRECTORY)
    run(${READELF} -d ${shared})
    expect("\\(SONAME\\) +Library soname: \\[libtilebsp\\.so\\.[0-9]+\\.[0-9]+\\]" "readelf -d ${shared}")
    run(${NM} -D --defined-only ${shared})  # mangled: ours are in namespace tilebsp (N7tilebsp) or tilebsp_*
    string(REGEX REPLACE "\n$" "" symbols "${last_output}")
    string(REPLACE "\n" ";" symbols "${symbols}")
    list(LENGTH symbols count)
    set(foreign)
    foreach(line IN LISTS symbols)
      if(NOT line MATCHES " (_ZN7tilebsp|_ZNK7tilebsp|_ZT[ISV]N7tilebsp|tilebsp_kernels_)")
        list(APPEND foreign "${line}")
      endif()
    endforeach()
    if(foreign OR count LESS 100)
      list(JOIN foreign "\n" foreign)
      message(FATAL_ERROR "${shared} exports ${count} symbols, these not tilebsp's (hidden by default):\n${foreign}")
    endif()
    message(STATUS "${shared}: ${count} dynamic symbols, all tilebsp's")
  endif()
  set(compilers ${CXX})
  if(CLANG)
    list(APPEND compilers ${CLANG})
  endif()
  foreach(compiler IN LISTS compilers)
    get_filename_component(name ${compiler} NAME)
    run(${CMAKE_COMMAND} -S ${consumer} -B ${WORK_DIR}/app_${name} -DCMAKE_CXX_COMPILER=${compiler}
        -DCMAKE_CXX_FLAGS=-O2 -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DTILEBSP_TARGET=tilebsp::compiled)
    run(${CMAKE_COMMAND} --build ${WORK_DIR}/app_${name})
    if(shared)
      run(${READELF} -d ${WORK_DIR}/app_${name}/consumer)
      expect("NEEDED.*\\[libtilebsp\\.so\\.[0-9]+\\.[0-9]+\\].*PATH.*${libdir}" "readelf -d consumer (${name})")
    endif()
    run(${WORK_DIR}/app_${name}/consumer)
    expect("^\\[3, 8\\] \\[3, 8\\] \\[4, 5, 10, 11\\] [a-z0-9]+ kernels" "consumer (${name}, tilebsp::compiled)")
    string(REPLACE "," ";" levels "${LEVELS}")
    foreach(level IN LISTS levels)
      run(${CMAKE_COMMAND} -E env TILEBSP_ISA=${level} ${WORK_DIR}/app_${name}/consumer)
      expect("^\\[3, 8\\] \\[3, 8\\] \\[4, 5, 10, 11\\] ${level} kernels"
             "consumer (${name}, tilebsp::compiled, TILEBSP_ISA=${level})")
    endforeach()
  endforeach()
  return()
endif()

if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/lib -DCMAKE_CXX_COMPILER=${CXX} -DTILEBSP_BUILD_TESTS=OFF
      -DTILEBSP_BUILD_BENCHMARKS=OFF -DTILEBSP_BUILD_SAMPLES=OFF -DTILEBSP_COMPILED_LIBRARY=OFF -DTILEBSP_INSTALL=ON)
  run(${CMAKE_COMMAND} --install ${WORK_DIR}/lib --prefix ${WORK_DIR}/prefix)
  run(${CMAKE_COMMAND} -S ${consumer} -B ${WORK_DIR}/app -DCMAKE_CXX_COMPILER=${CXX}
      -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
else()
  run(${CMAKE_COMMAND} -S ${consumer} -B ${WORK_DIR}/app -DCMAKE_CXX_COMPILER=${CXX}
      -DTILEBSP_SOURCE_DIR=${SOURCE_DIR})
endif()
run(${CMAKE_COMMAND} --build ${WORK_DIR}/app)
run(${WORK_DIR}/app/consumer)
expect("\\[3, 8\\] \\[3, 8\\]" "consumer (${MODE})")
