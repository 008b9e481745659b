# End-to-end runs of every binary through libferry: a short sweep with
# checking on must exit 0 and print "# Out of bounds values : 0 OK"
# (run_check.cmake checks both).
function(perf_test name bin)
  list(JOIN ARGN " " args)
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -DPERF_BIN=$<TARGET_FILE:${bin}>
    "-DPERF_ARGS=${args}" -P ${CMAKE_CURRENT_SOURCE_DIR}/run_check.cmake)
  set_property(GLOBAL APPEND PROPERTY FERRY_PERF_TESTS ${name})
endfunction()

set(_perf_quick -b 8 -e 64K -f 8 -n 2 -w 1 -c 1 -T 60)
foreach(coll IN LISTS FERRY_PERF_COLLS)
  perf_test(perf_${coll}_2ranks ${coll}_perf --nranks 2 ${_perf_quick})
  # Without --nranks: one rank, as nccl-tests without MPI.
  perf_test(perf_${coll}_1rank ${coll}_perf -b 8 -e 4K -f 8 -n 1 -T 60)
endforeach()
# Three ranks (odd counts), every root, and every datatype and op where the
# collective reduces: exact checks for all 12 types x 5 ops.
perf_test(perf_all_reduce_3ranks_all_types_ops all_reduce_perf
  --nranks 3 -b 8 -e 4K -f 16 -n 1 -w 0 -d all -o all -T 60)
perf_test(perf_reduce_scatter_3ranks_all_types_ops reduce_scatter_perf
  --nranks 3 -b 48 -e 6K -f 16 -n 1 -w 0 -d all -o all -T 60)
perf_test(perf_reduce_3ranks_all_roots_types reduce_perf
  --nranks 3 -b 8 -e 1K -f 8 -n 1 -w 0 -d all -o all -r -1 -T 60)
perf_test(perf_broadcast_3ranks_all_roots broadcast_perf
  --nranks 3 -b 8 -e 64K -f 8 -n 2 -w 1 -r -1 -d all -T 60)
perf_test(perf_gather_3ranks_all_roots gather_perf
  --nranks 3 -b 48 -e 48K -f 8 -n 2 -w 1 -r -1 -T 60)
perf_test(perf_scatter_3ranks_all_roots scatter_perf
  --nranks 3 -b 48 -e 48K -f 8 -n 2 -w 1 -r -1 -T 60)
perf_test(perf_all_gather_3ranks all_gather_perf
  --nranks 3 -b 48 -e 48K -f 8 -n 2 -w 1 -d all -T 60)
perf_test(perf_alltoall_3ranks alltoall_perf
  --nranks 3 -b 48 -e 48K -f 8 -n 2 -w 1 -d all -T 60)
perf_test(perf_sendrecv_3ranks sendrecv_perf
  --nranks 3 -b 8 -e 64K -f 8 -n 2 -w 1 -d all -T 60)
perf_test(perf_hypercube_4ranks hypercube_perf
  --nranks 4 -b 64 -e 64K -f 8 -n 2 -w 1 -d all -T 60)
# Unaligned buffers (odd element shift) through the reduction kernels.
perf_test(perf_all_reduce_unaligned all_reduce_perf
  --nranks 2 -b 8 -e 64K -f 8 -n 1 -u 1 -d all -o all -T 60)
perf_test(perf_reduce_scatter_unaligned reduce_scatter_perf
  --nranks 3 -b 48 -e 48K -f 8 -n 1 -u 3 -T 60)
# -R 1: send and receive buffers from ncclMemAlloc, registered with
# ncclCommRegister; exact results for every type and op, and unaligned.
perf_test(perf_all_reduce_register_local all_reduce_perf
  --nranks 2 -b 8 -e 64K -f 8 -n 2 -w 1 -d all -o all -R 1 -T 60)
perf_test(perf_all_gather_register_local_unaligned all_gather_perf
  --nranks 4 -b 64 -e 64K -f 8 -n 2 -w 1 -u 1 --local_register 1 -T 60)
# -R 2: symmetric windows (docs/symmetric.md); 4 ranks up to 4 MiB, so the
# one-shot and two-shot symmetric AllReduce both run, exact for every type/op.
add_test(NAME perf_all_reduce_register_window COMMAND ${CMAKE_COMMAND}
  -DPERF_BIN=$<TARGET_FILE:all_reduce_perf>
  "-DPERF_ARGS=--nranks 4 -b 8 -e 4M -f 16 -n 2 -w 1 -d all -o all -R 2 -T 60"
  -P ${CMAKE_CURRENT_SOURCE_DIR}/run_check.cmake)
set_property(GLOBAL APPEND PROPERTY FERRY_PERF_TESTS perf_all_reduce_register_window)
# Options that change the loop: aggregated ops, blocking, averaging modes,
# additive steps and repeated cycles.
perf_test(perf_all_reduce_agg_blocking all_reduce_perf
  --nranks 2 -b 1K -e 3K -i 1K -m 3 -z 1 -a 3 -N 2 -n 2 -T 60)
# Exit codes as nccl-tests, checked exactly by a script: a corrupted element
# gives 7 and a FAILED footer; a rank that never joins with -T 1 gives 4;
# a bad value 255; more GPUs or threads than
# host memory offers 5; -h 0.
foreach(coll all_reduce gather)
  add_test(NAME perf_${coll}_exit_codes COMMAND ${CMAKE_COMMAND}
    -DPERF_BIN=$<TARGET_FILE:${coll}_perf> -P ${CMAKE_CURRENT_SOURCE_DIR}/exit_codes.cmake)
  set_property(GLOBAL APPEND PROPERTY FERRY_PERF_TESTS perf_${coll}_exit_codes)
endforeach()
add_test(NAME perf_hypercube_3ranks_exit5 COMMAND ${CMAKE_COMMAND}
  -DPERF_BIN=$<TARGET_FILE:hypercube_perf> "-DPERF_ARGS=--nranks 3 -b 64 -e 64"
  -DEXPECT_RC=5 "-DEXPECT_RE=power-of-two rank count"
  -P ${CMAKE_CURRENT_SOURCE_DIR}/run_check.cmake)
set_property(GLOBAL APPEND PROPERTY FERRY_PERF_TESTS perf_hypercube_3ranks_exit5)
# Output layout: nccl-tests header lines, the -C column name, a row with the
# nccl-tests field widths, GPU-only options answered with a note.
set(_layout_re "# Collective test starting: reduce_perf\n# nThread 1 nGpus 1 minBytes 64 maxBytes 64 step: 1048576\\(bytes\\) warmup iters: 1 iters: 1 agg iters: 1 validation: 1 graph: 0 unalign: 0\n")
string(APPEND _layout_re "# Reporting cputime: on host memory it equals the completion time\n# Note: -M 1: the GPU memory report; Ferry runs on host memory, so it is ignored\n")
string(APPEND _layout_re ".*root  cputime   algbw   busbw  #wrong  cputime   algbw   busbw  #wrong\n")
string(APPEND _layout_re ".*\n          64            16     int32     max       1  [ 0-9.]+  [ 0-9.]+  [ 0-9.]+       0  [ 0-9.]+  [ 0-9.]+  [ 0-9.]+       0\n")
string(APPEND _layout_re "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : [0-9.e+-]+\n#\n# Collective test concluded: reduce_perf\n")
add_test(NAME perf_output_layout COMMAND ${CMAKE_COMMAND}
  -DPERF_BIN=$<TARGET_FILE:reduce_perf>
  "-DPERF_ARGS=--nranks 2 -b 64 -e 64 -n 1 -d int32 -o max -r 1 -C 1 -M 1"
  -DEXPECT_RC=0 "-DEXPECT_RE=${_layout_re}" -P ${CMAKE_CURRENT_SOURCE_DIR}/run_check.cmake)
set_property(GLOBAL APPEND PROPERTY FERRY_PERF_TESTS perf_output_layout)
get_property(_perf_tests GLOBAL PROPERTY FERRY_PERF_TESTS)
set_tests_properties(${_perf_tests} PROPERTIES TIMEOUT 120 LABELS "perf_tools")

# Device buffers (issue 14): every tool on Ferry's test device (--device-buffers
# sets FERRY_DEVICE=testdev), so every collective runs through the CPU-forward
# bridge; every datatype (the reductions: every op), exact, and the staged bytes
# printed.
set(_device_tests)
foreach(coll IN LISTS FERRY_PERF_COLLS)
  set(n 3)
  set(ops)
  if(coll STREQUAL "hypercube")
    set(n 4)
  endif()
  if(coll MATCHES "^(all_reduce|reduce|reduce_scatter)$")
    set(ops -o all)
  endif()
  list(JOIN ops " " ops)
  add_test(NAME perf_${coll}_device COMMAND ${CMAKE_COMMAND} -DPERF_BIN=$<TARGET_FILE:${coll}_perf>
    "-DPERF_ARGS=--nranks ${n} -b 48 -e 48K -f 16 -n 2 -w 1 -d all ${ops} --device-buffers -T 60"
    -DEXPECT_RC=0
    "-DEXPECT_RE=# Out of bounds values : 0 OK.*# Staged through host memory [(]rank 0[)]: [1-9]"
    -P ${CMAKE_CURRENT_SOURCE_DIR}/run_check.cmake)
  list(APPEND _device_tests perf_${coll}_device)
endforeach()
# -R 2 on device buffers: ncclMemAlloc's test-device memory as symmetric
# windows, so the four symmetric collectives run as stream work on the
# peers' memory. Exact for every datatype, and only the small buffer that
# combines times across ranks is staged (under 100000 bytes; the same run
# with -R 1 stages ~68 MB).
foreach(coll all_reduce all_gather reduce_scatter broadcast)
  add_test(NAME perf_${coll}_device_windows COMMAND ${CMAKE_COMMAND} -DPERF_BIN=$<TARGET_FILE:${coll}_perf>
    "-DPERF_ARGS=--nranks 3 -b 48 -e 1M -f 16 -n 2 -w 1 -d all -o sum --device-buffers -R 2 -T 60"
    -DEXPECT_RC=0
    "-DEXPECT_RE=# Out of bounds values : 0 OK.*# Staged through host memory [(]rank 0[)]: [0-9]?[0-9]?[0-9]?[0-9]?[0-9] bytes"
    -P ${CMAKE_CURRENT_SOURCE_DIR}/run_check.cmake)
  list(APPEND _device_tests perf_${coll}_device_windows)
endforeach()
set_tests_properties(${_device_tests} PROPERTIES TIMEOUT 120 LABELS "perf_tools;device")
add_test(NAME perf_json_csv_golden COMMAND ${CMAKE_COMMAND}
  -DPERF_BIN=$<TARGET_FILE:all_reduce_perf> -DWORK=${CMAKE_CURRENT_BINARY_DIR}/json_csv_work
  -P ${CMAKE_CURRENT_SOURCE_DIR}/json_csv_check.cmake)
set_tests_properties(perf_json_csv_golden PROPERTIES TIMEOUT 120 LABELS "perf_tools")

# Launch modes besides --nranks. Env mode: 2 processes with torchrun or Slurm
# variables, the id served by rank 0's store on 127.0.0.1.
set(_launch_tests)
foreach(style torchrun slurm)
  add_test(NAME perf_all_reduce_env_${style} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/env_launch_test.sh
    $<TARGET_FILE:all_reduce_perf> ${style} -b 8 -e 64K -f 8 -n 2 -w 1 -c 1 -d all -o all -T 60)
  list(APPEND _launch_tests perf_all_reduce_env_${style})
endforeach()
add_test(NAME perf_reduce_env_torchrun_root1 COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/env_launch_test.sh
  $<TARGET_FILE:reduce_perf> torchrun -b 8 -e 64K -f 8 -n 1 -r 1 -T 60)
list(APPEND _launch_tests perf_reduce_env_torchrun_root1)
# --store instead of MASTER_ADDR/MASTER_PORT: the script's address is given
# as the option and the variables point elsewhere (port 1 refuses).
add_test(NAME perf_all_reduce_env_store_option COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/env_launch_test.sh
  $<TARGET_FILE:all_reduce_perf> slurm-store -b 8 -e 4K -f 8 -n 1 -T 60)
list(APPEND _launch_tests perf_all_reduce_env_store_option)
# Nobody serves the id (port 1 on loopback refuses): rank 1 must fail with
# a message at the -T 3 deadline, not hang. Slurm variables without an
# address are refused up front.
add_test(NAME perf_env_missing_store COMMAND ${CMAKE_COMMAND}
  -DPERF_BIN=${CMAKE_COMMAND}
  "-DPERF_ARGS=-E env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 $<TARGET_FILE:all_reduce_perf> -b 8 -e 8 -T 3"
  -DEXPECT_RC=1 "-DEXPECT_RE=cannot reach rank 0's store at 127.0.0.1:1 within 3 s"
  -P ${CMAKE_CURRENT_SOURCE_DIR}/run_check.cmake)
add_test(NAME perf_env_no_address COMMAND ${CMAKE_COMMAND}
  -DPERF_BIN=${CMAKE_COMMAND}
  "-DPERF_ARGS=-E env SLURM_PROCID=0 SLURM_NTASKS=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=0 $<TARGET_FILE:all_reduce_perf> -b 8 -e 8 -T 2"
  -DEXPECT_RC=255 "-DEXPECT_RE=set MASTER_ADDR and MASTER_PORT"
  -P ${CMAKE_CURRENT_SOURCE_DIR}/run_check.cmake)
list(APPEND _launch_tests perf_env_missing_store perf_env_no_address)
# mpirun mode: only where CMake found MPI and its launcher.
if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
  add_test(NAME perf_all_reduce_mpirun_2ranks COMMAND ${CMAKE_COMMAND}
    -DPERF_BIN=${MPIEXEC_EXECUTABLE}
    "-DPERF_ARGS=--allow-run-as-root --oversubscribe --mca btl self,vader -np 2 $<TARGET_FILE:all_reduce_perf> -b 8 -e 64K -f 8 -n 2 -w 1 -c 1 -d all -o all -T 60"
    -DEXPECT_RC=0 "-DEXPECT_RE=#  Rank  1 Group.*# Out of bounds values : 0 OK\n"
    -P ${CMAKE_CURRENT_SOURCE_DIR}/run_check.cmake)
  # Three ranks, every root, type and op: the rank count comes from MPI.
  add_test(NAME perf_reduce_mpirun_3ranks_all_roots COMMAND ${CMAKE_COMMAND}
    -DPERF_BIN=${MPIEXEC_EXECUTABLE}
    "-DPERF_ARGS=--allow-run-as-root --oversubscribe --mca btl self,vader -np 3 $<TARGET_FILE:reduce_perf> -b 8 -e 4K -f 8 -n 1 -r -1 -d all -o all -T 60"
    -DEXPECT_RC=0 "-DEXPECT_RE=#  Rank  2 Group.*       2  [ 0-9.]+  [ 0-9.]+  [ 0-9.]+       0 .*# Out of bounds values : 0 OK\n"
    -P ${CMAKE_CURRENT_SOURCE_DIR}/run_check.cmake)
  list(APPEND _launch_tests perf_all_reduce_mpirun_2ranks perf_reduce_mpirun_3ranks_all_roots)
else()
  # Without MPI, a process that mpirun started refuses to run alone.
  add_test(NAME perf_mpirun_without_mpi COMMAND ${CMAKE_COMMAND} -DPERF_BIN=${CMAKE_COMMAND}
    "-DPERF_ARGS=-E env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 $<TARGET_FILE:all_reduce_perf> -b 8 -e 8"
    -DEXPECT_RC=5 "-DEXPECT_RE=started under mpirun with 2 processes, but this build has no MPI"
    -P ${CMAKE_CURRENT_SOURCE_DIR}/run_check.cmake)
  list(APPEND _launch_tests perf_mpirun_without_mpi)
endif()
set_tests_properties(${_launch_tests} PROPERTIES TIMEOUT 120 LABELS "perf_tools")

# -S and -I: exact row widths (prefix 52, half 33, -I 36 per half, -S 21),
# the header names, per-iteration JSON/CSV, and -I with -G refused.
function(perf_layout name bin len)
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -DPERF_BIN=$<TARGET_FILE:${bin}>
    -DROW_LEN=${len} ${ARGN} -P ${CMAKE_CURRENT_SOURCE_DIR}/layout_check.cmake)
  set_tests_properties(${name} PROPERTIES TIMEOUT 120 LABELS "perf_tools")
endfunction()
perf_layout(perf_timestamps_layout all_reduce_perf 139 -DTIMESTAMP=1
  "-DPERF_ARGS=--nranks 2 -b 8 -e 1K -f 4 -n 2 -S 1")
perf_layout(perf_per_iter_layout reduce_scatter_perf 190 -DPER_ITER=1
  "-DPERF_ARGS=--nranks 3 -b 48 -e 3K -f 4 -n 4 -I 1 -K 1")
perf_layout(perf_per_iter_timestamps_layout alltoallv_perf 211 -DPER_ITER=1 -DTIMESTAMP=1
  "-DPERF_ARGS=--nranks 2 -b 1K -e 4K -f 4 -n 3 -I 1 -S 1")
add_test(NAME perf_per_iter_json COMMAND ${CMAKE_COMMAND}
  -DPERF_BIN=$<TARGET_FILE:all_reduce_perf> -DWORK=${CMAKE_CURRENT_BINARY_DIR}/periter_work
  -P ${CMAKE_CURRENT_SOURCE_DIR}/periter_json_check.cmake)
add_test(NAME perf_per_iter_with_graph_refused COMMAND ${CMAKE_COMMAND}
  -DPERF_BIN=$<TARGET_FILE:all_reduce_perf> "-DPERF_ARGS=-I 1 -G 1 -b 8 -e 8"
  -DEXPECT_RC=255 "-DEXPECT_RE=-I \\(per-iteration timing\\) cannot be combined with -G"
  -P ${CMAKE_CURRENT_SOURCE_DIR}/run_check.cmake)
set_tests_properties(perf_per_iter_json perf_per_iter_with_graph_refused PROPERTIES
  TIMEOUT 120 LABELS "perf_tools")

# AlltoAllv (nccl-tests 2.19 semantics; out of place through ferryAlltoAllv).
# Rows checked exactly: 3 ranks, 1K float -> 84 per peer, 0/336/672 bytes
# by distance = 1008; 4 ranks at spread 0.5, 1K -> 128/208/288/384 = 1008.
set(_a2av_tests)
macro(a2av_test name)
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} ${ARGN}
    -P ${CMAKE_CURRENT_SOURCE_DIR}/run_check.cmake)
  list(APPEND _a2av_tests ${name})
endmacro()
set(_row_ok "  [ 0-9.]+  [ 0-9.]+  [ 0-9.]+       0  [ 0-9.]+  [ 0-9.]+  [ 0-9.]+     N/A\n")
a2av_test(perf_alltoallv_3ranks_all_types -DPERF_BIN=$<TARGET_FILE:alltoallv_perf>
  "-DPERF_ARGS=--nranks 3 -b 1K -e 64K -f 8 -n 2 -d all -T 60"
  "-DEXPECT_RE=\n        1008            84     float    none      -1${_row_ok}.*# Out of bounds values : 0 OK\n")
a2av_test(perf_alltoallv_4ranks_spread_summary -DPERF_BIN=${CMAKE_COMMAND}
  "-DPERF_ARGS=-E env NCCL_TESTS_ALLTOALLV_SPREAD=0.5 NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY=1 $<TARGET_FILE:alltoallv_perf> --nranks 4 -b 1K -e 1K -n 2 -d float -T 60"
  "-DEXPECT_RE=mode=generated nranks=4 total_bytes=1024 spread=0.500 .*\n#   rank=3 send_bytes=1008 recv_bytes=1008 .*\n        1008            64     float    none      -1${_row_ok}# Out of bounds values : 0 OK\n")
a2av_test(perf_alltoallv_4ranks_all_types -DPERF_BIN=$<TARGET_FILE:alltoallv_perf>
  "-DPERF_ARGS=--nranks 4 -b 64 -e 256K -f 16 -n 1 -d all -m 2 -T 60")
# Matrix 0 100 200 / 50 0 75 / 300 150 0 -> 16-byte rounding gives rank 2
# the largest total, 432 bytes; the count column is 0 as upstream.
a2av_test(perf_alltoallv_matrix_file -DPERF_BIN=${CMAKE_COMMAND}
  "-DPERF_ARGS=-E env NCCL_TESTS_ALLTOALLV_MATRIX_FILE=${CMAKE_CURRENT_SOURCE_DIR}/alltoallv_matrix_3.txt $<TARGET_FILE:alltoallv_perf> --nranks 3 -b 1K -e 1K -n 2 -d all -T 60"
  "-DEXPECT_RE=matrix .*alltoallv_matrix_3.txt pattern.*\n         432             0    double    none      -1${_row_ok}.*# Out of bounds values : 0 OK\n")
a2av_test(perf_alltoallv_matrix_scaled -DPERF_BIN=${CMAKE_COMMAND}
  "-DPERF_ARGS=-E env NCCL_TESTS_ALLTOALLV_MATRIX_FILE=${CMAKE_CURRENT_SOURCE_DIR}/alltoallv_matrix_3.txt NCCL_TESTS_ALLTOALLV_MATRIX_SCALE=10 $<TARGET_FILE:alltoallv_perf> --nranks 3 -b 8K -e 8K -n 1 -T 60"
  "-DEXPECT_RE=\n        4480             0     float    none      -1${_row_ok}")
a2av_test(perf_alltoallv_bad_matrix -DPERF_BIN=${CMAKE_COMMAND}
  "-DPERF_ARGS=-E env NCCL_TESTS_ALLTOALLV_MATRIX_FILE=${CMAKE_CURRENT_SOURCE_DIR}/alltoallv_matrix_bad.txt $<TARGET_FILE:alltoallv_perf> --nranks 3 -b 1K -e 1K"
  -DEXPECT_RC=1 "-DEXPECT_RE=invalid value at row 1 col 1 of alltoallv traffic matrix [^ ]*alltoallv_matrix_bad.txt .must be non-negative.")
a2av_test(perf_alltoallv_matrix_needs_b_eq_e -DPERF_BIN=${CMAKE_COMMAND}
  "-DPERF_ARGS=-E env NCCL_TESTS_ALLTOALLV_MATRIX_FILE=${CMAKE_CURRENT_SOURCE_DIR}/alltoallv_matrix_3.txt $<TARGET_FILE:alltoallv_perf> --nranks 3 -b 256 -e 1K"
  -DEXPECT_RC=1 "-DEXPECT_RE=-b and -e must be equal")
a2av_test(perf_alltoallv_matrix_too_small -DPERF_BIN=${CMAKE_COMMAND}
  "-DPERF_ARGS=-E env NCCL_TESTS_ALLTOALLV_MATRIX_FILE=${CMAKE_CURRENT_SOURCE_DIR}/alltoallv_matrix_3.txt $<TARGET_FILE:alltoallv_perf> --nranks 4 -b 1K -e 1K"
  -DEXPECT_RC=1 "-DEXPECT_RE=is 3x3, smaller than the 4 ranks")
a2av_test(perf_alltoallv_corrupt_exit7 -DPERF_BIN=$<TARGET_FILE:alltoallv_perf>
  "-DPERF_ARGS=--nranks 3 -b 1K -e 1K -n 1 --corrupt-for-test -T 60"
  -DEXPECT_RC=7 "-DEXPECT_RE=# Out of bounds values : 3 FAILED")
foreach(n 1 2 3 4)
  add_test(NAME perf_ferry_alltoallv_api_${n}ranks COMMAND ferry_alltoallv_api_test ${n})
  list(APPEND _a2av_tests perf_ferry_alltoallv_api_${n}ranks)
endforeach()
# On simulated hosts ferryAlltoAllv runs rail-local unless NCCL_ALGO says
# AlltoAll:direct: both forced in turn, and the TUNING log must show every
# rank ran the forced one.
foreach(shape "4;2" "6;3" "8;4")
  list(GET shape 0 _n)
  list(GET shape 1 _h)
  foreach(algo rail direct)
    set(_t perf_ferry_alltoallv_api_${_n}ranks_${_h}nodes_${algo})
    set(_other rail)
    if(algo STREQUAL "rail")
      set(_other direct)
    endif()
    string(REPEAT "NCCL INFO AlltoAllv: algorithm ${algo}.*" ${_n} _ran)
    add_test(NAME ${_t} COMMAND ${CMAKE_COMMAND}
      -DPERF_BIN=${CMAKE_COMMAND}
      "-DPERF_ARGS=-E env NCCL_ALGO=AlltoAll:${algo} NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING $<TARGET_FILE:ferry_alltoallv_api_test> ${_n} ${_h}"
      -DEXPECT_RC=0 "-DEXPECT_RE=${_ran}on ${_h} node.s.: OK" "-DREJECT_RE=algorithm ${_other}"
      -P ${CMAKE_CURRENT_SOURCE_DIR}/run_check.cmake)
    list(APPEND _a2av_tests ${_t})
  endforeach()
endforeach()
# A Send/Recv group that is a full exchange runs as one rail exchange with
# FERRY_P2P_RAIL=1 on simulated hosts (every rank logs it, at least once per
# round), never with it off or on one host; the results are exact each way.
foreach(case "4;2;1" "6;3;1" "8;4;1" "8;4;0" "4;1;1")
  list(GET case 0 _n)
  list(GET case 1 _h)
  list(GET case 2 _on)
  set(_t perf_ferry_p2p_exchange_${_n}ranks_${_h}nodes_rail${_on})
  if(_on AND _h GREATER 1)
    string(REPEAT "NCCL INFO Send/Recv group: [0-9]+ ops run as one rail exchange.*" ${_n} _ran)
    set(_check "-DEXPECT_RE=${_ran}on ${_h} node.s.: OK")
  else()
    set(_check "-DEXPECT_RE=on ${_h} node.s.: OK" "-DREJECT_RE=rail exchange")
  endif()
  add_test(NAME ${_t} COMMAND ${CMAKE_COMMAND}
    -DPERF_BIN=${CMAKE_COMMAND}
    "-DPERF_ARGS=-E env FERRY_P2P_RAIL=${_on} NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING $<TARGET_FILE:ferry_p2p_exchange_test> ${_n} ${_h}"
    -DEXPECT_RC=0 ${_check} -P ${CMAKE_CURRENT_SOURCE_DIR}/run_check.cmake)
  list(APPEND _a2av_tests ${_t})
endforeach()
set_tests_properties(${_a2av_tests} PROPERTIES TIMEOUT 120 LABELS "perf_tools")
# Host buffers on request (the gtest covers a missing libcudart): one note line.
add_test(NAME perf_host_buffers_env COMMAND ${CMAKE_COMMAND} -DPERF_BIN=${CMAKE_COMMAND}
  "-DPERF_ARGS=-E env FERRY_PERF_HOST=1 $<TARGET_FILE:all_reduce_perf> --nranks 2 -b 8 -e 1K -f 8 -n 1 -T 60"
  "-DEXPECT_RE=\n# Note: buffers in host memory .asked for with --host-buffers or FERRY_PERF_HOST=1.\n#\n# Using devices\n.*# Out of bounds values : 0 OK\n"
  -P ${CMAKE_CURRENT_SOURCE_DIR}/run_check.cmake)
set_tests_properties(perf_host_buffers_env PROPERTIES TIMEOUT 120 LABELS "perf_tools")
