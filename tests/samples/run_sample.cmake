# run_sample(<out_var> <command...>): runs a sample whose last line is "test_accuracy: <value>", echoes its output,
# fails on a non-zero exit or a missing last line, and sets <out_var> to the accuracy and `output` to what it printed.
function(run_sample out_var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}")
  if(NOT rc EQUAL 0 OR NOT out MATCHES "test_accuracy: ([0-9.]+)\n$")
    message(FATAL_ERROR "${ARGN}: exit code ${rc}\n${err}")
  endif()
  set(${out_var} ${CMAKE_MATCH_1} PARENT_SCOPE)
  set(output "${out}" PARENT_SCOPE)
endfunction()
