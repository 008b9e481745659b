# cmake -DPERF_BIN=<a *_perf binary> -P exit_codes.cmake
# Runs the binary with argument lists and checks exact exit codes and output.
function(expect code pattern)
  execute_process(COMMAND ${PERF_BIN} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err TIMEOUT 60)
  if(NOT rc STREQUAL "${code}")
    message(FATAL_ERROR "'${ARGN}': exit ${rc}, expected ${code}\n${out}\n${err}")
  endif()
  if(NOT "${out}${err}" MATCHES "${pattern}")
    message(FATAL_ERROR "'${ARGN}': output lacks '${pattern}'\n${out}\n${err}")
  endif()
  message(STATUS "ok: exit ${rc} for '${ARGN}'")
endfunction()

expect(0 "USAGE" -h)
expect(255 "invalid size 'x' for -b" -b x)
expect(255 "minbytes" -b 2K -e 1K)
expect(255 "invalid value 'bogus' for -d" -d bogus)
expect(255 "invalid value 'mulsum' for -o" -o mulsum)
expect(255 "unknown option" --no-such-option)
expect(255 "invalid value '3' for -R \\(0 none, 1 ncclCommRegister, 2 ncclCommWindowRegister\\)"
       -R 3)
expect(5 "host memory has no GPUs" -g 2)
expect(5 "only 1 thread" -t 2)
expect(7 "# Out of bounds values : [1-9][0-9]* FAILED"
       --nranks 2 -b 64 -e 64 -n 1 -w 0 --corrupt-for-test -T 60)
expect(4 "watchdog deadline passed" --nranks 2 -b 64 -e 64 -n 1 --hang-for-test -T 1)
expect(0 "# Out of bounds values : 0 OK" --nranks 2 -b 64 -e 64 -n 1 -w 0 -G 1 -T 60)
expect(0 "-G 1: CUDA graph capture; Ferry runs on host memory" --nranks 2 -b 64 -e 64 -n 1 -G 1)
