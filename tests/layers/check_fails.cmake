# Shows that tests/layers/check.cmake fails when a rule is broken: on a copy of include/tilebsp/ with one violation
# of each rule injected, it must fail and name each one.
# Run: cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch directory> -P check_fails.cmake.

cmake_minimum_required(VERSION 3.25)

set(copy ${WORK_DIR}/layers_broken)
file(REMOVE_RECURSE ${copy})
file(MAKE_DIRECTORY ${copy}/include)
file(COPY ${SOURCE_DIR}/include/tilebsp DESTINATION ${copy}/include)
set(root ${copy}/include/tilebsp)
# 1. an include upwards; 2. internals outside the layer's namespace; 3. another layer's internals outside the
# contracts (exec reading program's lowering internals, vertex reading exec's), and a name in a comment, which is
# allowed; 4. an operator including another's headers (conv's vertex, matmul's).
file(APPEND ${root}/plan/cost.hpp "\n#include <tilebsp/exec/engine.hpp>\n")
file(APPEND ${root}/simd/pool.hpp "\nnamespace tilebsp::detail {}\n")
file(APPEND ${root}/exec/engine_impl.hpp "\ninline auto* tilebsp_layers_probe = &tilebsp::program::detail::covered_variables<int>;\n")
file(APPEND ${root}/ops/conv/vertex.hpp "\n#include <tilebsp/ops/matmul.hpp>\n")
file(APPEND ${root}/vertex/fields.hpp "\n// exec::detail::EngineCore is named in a comment only\nusing tilebsp_probe = tilebsp::exec::detail::EngineCore;\n")

execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${copy} -P ${CMAKE_CURRENT_LIST_DIR}/check.cmake
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(REMOVE_RECURSE ${copy})
string(REGEX REPLACE "[ \n]+" " " text "${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the layer check passed a tree with broken rules:\n${out}${err}")
endif()
foreach(expected
    "plan/cost.hpp: layer 'plan' includes <tilebsp/exec/engine.hpp>"
    "simd/pool.hpp: 'namespace tilebsp::detail {}': internals of 'simd' belong in tilebsp::simd::detail"
    "exec/engine_impl.hpp: layer 'exec' uses program::detail::covered_variables, not one of the contracts it may use"
    "vertex/fields.hpp: layer 'vertex' uses exec::detail::EngineCore, not one of the contracts it may use"
    "ops/conv/vertex.hpp: operator 'conv' includes another operator's <tilebsp/ops/matmul.hpp>")
  string(FIND "${text}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the layer check did not report: ${expected}\nIt said:\n${out}${err}")
  endif()
endforeach()
string(REGEX MATCHALL "uses exec::detail::EngineCore" hits "${text}")
list(LENGTH hits n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "the layer check counted a name in a comment (${n} reports of exec::detail::EngineCore)")
endif()
message(STATUS "layers: the check fails on each broken rule")
