# A sample's results do not depend on the caches the kernels block for: the same fingerprint (FNV-1a of the logits
# and the estimated cycles) with the detected caches and under TILEBSP_CACHE_SIZES from 4K to 2M of L2; a
# malformed value stops the sample with the option's error (exit code 2), naming it, before anything runs.
# Run: cmake -DSAMPLE=<binary> "-DARGS=<flags;...>" -P check_cache_sizes.cmake
cmake_minimum_required(VERSION 3.25)
function(fingerprint sizes out_var)
  if(sizes STREQUAL "detected")
    set(env --unset=TILEBSP_CACHE_SIZES)
  else()
    set(env TILEBSP_CACHE_SIZES=${sizes})
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${env} ${SAMPLE} ${ARGS}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "fingerprint: ([^\n]+)")
    message(FATAL_ERROR "${SAMPLE} under TILEBSP_CACHE_SIZES=${sizes} exited with ${rc}:\n${out}\n${err}")
  endif()
  message(STATUS "${sizes}: ${CMAKE_MATCH_1}")
  set(${out_var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()
fingerprint(detected want)
foreach(sizes IN ITEMS "4K,16K,64K" "32K,512K,32M" "48K,2M,256M")
  fingerprint(${sizes} got)
  if(NOT got STREQUAL want)
    message(FATAL_ERROR "TILEBSP_CACHE_SIZES=${sizes} changed the results: '${got}', detected caches: '${want}'")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -E env TILEBSP_CACHE_SIZES=32K,512K ${SAMPLE} ${ARGS}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(expect "TILEBSP_CACHE_SIZES=32K,512K: 2 size\\(s\\); expected L1D,L2,L3 such as 32K,512K,32M")
if(NOT rc EQUAL 2 OR NOT err MATCHES "${expect}")
  message(FATAL_ERROR "a malformed TILEBSP_CACHE_SIZES: expected exit code 2 and '${expect}', got ${rc}:\n${out}\n${err}")
endif()
