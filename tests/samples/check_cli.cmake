# Runs the sample ${SAMPLE} with each bad command line below and checks for exit code 2 and its message.
set(cases
  "--conv-amp 1.5|--conv-amp must be a number in \\[0, 1\\], got '1.5'"
  "--matmul-amp -0.1|--matmul-amp must be a number in \\[0, 1\\], got '-0.1'"
  "--batch-size 0|--batch-size must be at least 1, got 0"
  "--dtype f64|--dtype must be f16 or f32, got 'f64'"
  "--partials int8|--partials must be f16 or f32, got 'int8'"
  "--depth 34|--depth must be 50, 101 or 152, got 34"
  "--iterations two|--iterations needs an integer, got 'two'"
  "--frobnicate 1|unknown option '--frobnicate'"
  "--batch-size|--batch-size needs a value")
foreach(c IN LISTS cases)
  string(FIND "${c}" "|" bar)
  string(SUBSTRING "${c}" 0 ${bar} args)
  math(EXPR bar "${bar} + 1")
  string(SUBSTRING "${c}" ${bar} -1 want)
  separate_arguments(parts UNIX_COMMAND "${args}")
  execute_process(COMMAND ${SAMPLE} ${parts} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "${SAMPLE} ${parts}: exit code ${rc}, expected 2\n${out}${err}")
  endif()
  if(NOT err MATCHES "${want}")
    message(FATAL_ERROR "${SAMPLE} ${parts}: message '${err}' does not match '${want}'")
  endif()
endforeach()
execute_process(COMMAND ${SAMPLE} --help RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "--batches-per-step" OR NOT out MATCHES "--report DIR")
  message(FATAL_ERROR "${SAMPLE} --help: exit code ${rc}\n${out}")
endif()
