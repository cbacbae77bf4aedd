# Runs a libFuzzer harness RUNS times from seed 1 over a fresh copy of its checked-in corpus, and fails on any
# finding (libFuzzer exits non-zero and writes the input beside the copy: WORK_DIR/crash-*, leak-*, timeout-*).
# Run: cmake -DFUZZER=<harness> -DCORPUS=<dir> -DWORK_DIR=<dir> -DRUNS=<n> -P run.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/corpus)
file(GLOB seeds ${CORPUS}/*)
file(COPY ${seeds} DESTINATION ${WORK_DIR}/corpus)
# Sanitizer reports with function names and lines
find_program(symbolizer NAMES llvm-symbolizer-19 llvm-symbolizer PATHS /usr/lib/llvm-19/bin)
if(symbolizer)
  set(ENV{ASAN_SYMBOLIZER_PATH} ${symbolizer})
endif()
# -seed: the same mutations every run; -timeout: an input that runs 20 s is a finding (a hang); the corpus copy
# grows as the run finds new coverage, the checked-in one never changes.
execute_process(COMMAND ${FUZZER} -runs=${RUNS} -seed=1 -timeout=20 -rss_limit_mb=4096 -print_final_stats=1
                        -artifact_prefix=${WORK_DIR}/ ${WORK_DIR}/corpus
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(GLOB found ${WORK_DIR}/crash-* ${WORK_DIR}/leak-* ${WORK_DIR}/timeout-* ${WORK_DIR}/oom-*)
  message(FATAL_ERROR "fuzzing ${FUZZER} found a problem (exit ${rc}): ${found}")
endif()
