# Runs mpi_faults under mpirun -np 2 in mode MODE and checks that it ends (bounded time, a TIMEOUT of the ctest
# entry as well) with rank 0 reporting EXPECT. -DMPIRUN, -DPROGRAM, -DMODE, -DEXPECT.
string(TIMESTAMP start "%s")
execute_process(COMMAND ${MPIRUN} --allow-run-as-root --oversubscribe -np 2 ${PROGRAM} ${MODE}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 60)
string(TIMESTAMP end "%s")
math(EXPR seconds "${end} - ${start}")
message(STATUS "mode ${MODE}: rc ${rc} after ${seconds} s\n${out}\n${err}")
if(rc STREQUAL "0")
  message(FATAL_ERROR "mode ${MODE}: mpirun succeeded; a fault must fail the job")
endif()
if(NOT out MATCHES "rank 0: replica_error: [^\n]*${EXPECT}")
  message(FATAL_ERROR "mode ${MODE}: rank 0 did not report '${EXPECT}'")
endif()
if(seconds GREATER 45)
  message(FATAL_ERROR "mode ${MODE}: took ${seconds} s")
endif()
