# Trains ${MODEL} for one epoch on Fashion-MNIST twice: on one IPU with batches of 32, and as a 2-IPU pipeline of 4
# accumulated micro-batches of 8 (the same effective batch); the test accuracies must agree within 0.5 points.
function(train out_var)
  execute_process(COMMAND ${SAMPLE} --model ${MODEL} --epochs 1 --host-threads 2 ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}")
  if(NOT rc EQUAL 0 OR NOT out MATCHES "test_accuracy: ([0-9.]+)\n$")
    message(FATAL_ERROR "${ARGN}: exit code ${rc}\n${err}")
  endif()
  set(${out_var} ${CMAKE_MATCH_1} PARENT_SCOPE)
endfunction()
train(one --batch-size 32)
train(piped --batch-size 8 --gradient-accumulation 4 --num-ipus 2)
string(REPLACE "." "" one_i "${one}")
string(REPLACE "." "" piped_i "${piped}")
math(EXPR diff "${one_i} - ${piped_i}")
if(diff GREATER 50 OR diff LESS -50)
  message(FATAL_ERROR "${MODEL}: test accuracy ${piped} on 2 IPUs, ${one} on one: more than 0.5 points apart")
endif()
