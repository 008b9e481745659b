# cmake -DPERF_BIN=<binary> "-DPERF_ARGS=<args, space separated>"
#       [-DEXPECT_RC=<code> "-DEXPECT_RE=<regex>"] ["-DREJECT_RE=<regex>"] -P run_check.cmake
# By default a run must exit 0 AND print the clean footer (ctest's pass
# regex alone would ignore the exit code).
if(NOT DEFINED EXPECT_RC)
  set(EXPECT_RC 0)
  set(EXPECT_RE "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : [0-9.e+-]+\n")
endif()
separate_arguments(args UNIX_COMMAND "${PERF_ARGS}")
execute_process(COMMAND ${PERF_BIN} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err TIMEOUT 100)
message("${out}${err}")
if(NOT rc STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "exit ${rc}, expected ${EXPECT_RC}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT_RE}")
  message(FATAL_ERROR "output does not match '${EXPECT_RE}'")
endif()
if(DEFINED REJECT_RE AND "${out}${err}" MATCHES "${REJECT_RE}")
  message(FATAL_ERROR "output matches '${REJECT_RE}'")
endif()
