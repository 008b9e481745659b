# cmake -DPERF_BIN=<binary> "-DPERF_ARGS=<args, space separated>" -P run_check.cmake
# A run must exit 0 AND print the clean footer (ctest's pass regex alone
# would ignore the exit code).
separate_arguments(args UNIX_COMMAND "${PERF_ARGS}")
execute_process(COMMAND ${PERF_BIN} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err TIMEOUT 100)
message("${out}${err}")
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "exit ${rc}, expected 0")
endif()
if(NOT out MATCHES "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : [0-9.e+-]+\n")
  message(FATAL_ERROR "no '# Out of bounds values : 0 OK' footer")
endif()
