#!/usr/bin/env bash
# Build Ferry with sanitizers and run the test suites under them.
#
#   tests/sanitize/run.sh [asan|tsan|all|ci]      (default: all)
#
# asan: gcc, -DFERRY_SANITIZE=address,undefined, build dir build-asan;
#       builds only what the labels unit, net, netsocket, plugins and mp run
#       (the ferry_tests_<label> targets) and runs asan-unit (unit, net,
#       netsocket, plugins), then asan-mp (mp).
# tsan: gcc, -DFERRY_SANITIZE=thread, build dir build-tsan; builds and runs
#       the labels unit, net, netsocket (tsan-unit; sim is a label of its
#       own), then mp (tsan-mp; TSAN_MP narrows it).
#       (clang 14 cannot build src/kernels/reduce.cc: it rejects
#       __builtin_cpu_supports("f16c"); see tests/sanitize/README.md.)
# ci:   the CI step (tools/build-and-test.sh): asan as above, then the
#       threaded tests under TSan in build-tsan-ci: only the targets in
#       TSAN_CI_TARGETS are built there, and ctest runs the unit/net/netsocket
#       and mp tests of those targets (tsan-ci-unit, tsan-ci-mp). Fits about
#       12 minutes cold on 2 cores; see tests/sanitize/README.md.
# Every build is RelWithDebInfo with SAN_OPT (default "-O1 -g1": half the
# compile time of -O2 -g under the sanitizers, line tables in the reports).
# perf/ is not built. A sanitizer report anywhere in a test's output (also
# from a forked rank whose exit status a test tolerates) fails its suite.
# Environment: JOBS (default 2), SAN_BUILD_ROOT (default: the source tree)
# for the build dirs, SAN_OPT, TSAN_MP (ctest -R regex for the TSan mp run),
# TSAN_CI_TARGETS (the targets of the ci TSan build).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
what=${1:-all}
jobs=${JOBS:-2}
broot=${SAN_BUILD_ROOT:-$root}
opt=${SAN_OPT:--O1 -g1}
# Forked ranks inherit these. detect_leaks: LeakSanitizer at exit of every
# process that exits normally (forked ranks end with _exit; the test
# harnesses run a leak check themselves, see tests/support/sanitize.h).
# detect_odr_violation=0: NCCL's plugin ABI has every net/tuner plugin export
# the same table names (ncclNetPlugin_v*, ncclTunerPlugin_v*); the tests load
# several in turn (RTLD_LOCAL, dlclose in between), which ASan's ODR check
# does not support: it reads the unloaded library's ODR indicator and
# crashes (google/sanitizers#318, dlclose is not fully supported).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:detect_odr_violation=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=0:second_deadlock_stack=1}
# UCX's memory hooks (libucm patches mmap/madvise and friends in the process)
# break both sanitizers' machinery: under TSan they crash inside the mutex
# interceptor (glibc calls madvise as a thread exits), and under ASan
# LeakSanitizer's exit-time tracer died with SIGSEGV in
# UcxSetup.RingConnectNextThenPrevOverUcx after the test itself passed (CI,
# 2026-11-28). Every suite runs UCX without them (it does not need them for
# host memory).
export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no
TSAN_MP=${TSAN_MP:-.}
# The threaded parts (README "The ci mode"): the bootstrap root thread and
# the socket network's worker threads (bootstrap, netsocket, net transport
# tests), the config/log state threads read (core tests), ferry-topo
# (calibration threads; its --comm tests fork ranks), and the mp suites that
# run Ferry's own threads in a rank: nonblocking init and grouped init
# (mp_api_test), ncclCommAbort from another thread (mp_fault_test), revoke
# and shrink while a peer fails (mp_resilience_test), the socket network's
# workers across simulated hosts (mp_net_test), and the stream queue's
# progress thread with test-device stream workers (comm_op_queue_test,
# accel_api_test, mp_device_test) and the CUDA backend on the stand-in
# driver's stream threads (accel_cuda_backend_test).
TSAN_CI_TARGETS=${TSAN_CI_TARGETS:-bootstrap_test core_config_test core_log_test core_wait_test
  net_connection_test netsocket_test netsocket_conn_test nettransport_test ferry-topo
  mp_api_test mp_fault_test mp_resilience_test mp_net_test accel_test comm_presence_test
  comm_op_queue_test accel_api_test accel_cuda_backend_test mp_device_test mp_device_window_test
  mp_device_scalar_test}

summary=()
status=0

now() { date +%s; }

build() {  # build <dir> <cc> <cxx> <sanitizer> <target...>
  local dir=$1 cc=$2 cxx=$3 san=$4 t0
  shift 4
  t0=$(now)
  if ! cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
       -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
       -DCMAKE_C_FLAGS_RELWITHDEBINFO="$opt -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt -DNDEBUG" \
       -DFERRY_SANITIZE="$san" -DFERRY_BUILD_PERF=OFF -DFERRY_WITH_MPI=OFF >"$dir.configure.log" 2>&1 ||
     ! cmake --build "$dir" -j "$jobs" --target "$@" >"$dir.build.log" 2>&1; then
    echo "build of $dir failed; see $dir.configure.log / $dir.build.log" >&2
    tail -20 "$dir.build.log" >&2
    summary+=("$(printf '%-22s %-8s %5ss' "$(basename "$dir") build" FAILED $(( $(now) - t0 )))")
    status=1
    return 1
  fi
  summary+=("$(printf '%-22s %-8s %5ss' "$(basename "$dir") build" ok $(( $(now) - t0 )))")
}

suite() {  # suite <build dir> <name> <ctest args...>
  local dir=$1 name=$2 t0 rc reports log full
  shift 2
  t0=$(now)
  log=$dir/sanitize-$name.log
  full=$dir/sanitize-$name.full.log
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" "$@" >"$log" 2>&1
  rc=$?
  # Keep the full output (LastTest.log is overwritten by the next ctest run).
  cp "$dir/Testing/Temporary/LastTest.log" "$full" 2>/dev/null
  # Reports from processes whose failure did not fail a test still count.
  reports=$(grep -cE 'ERROR: (Address|Leak|Thread)Sanitizer|WARNING: ThreadSanitizer|runtime error:' \
              "$full" 2>/dev/null)
  local tail
  tail=$(grep -E '^[0-9]+% tests passed' "$log" || echo "no tests ran")
  local st=ok
  if [[ $rc -ne 0 || ${reports:-0} -ne 0 || $tail == "no tests ran" ]]; then
    st=FAILED
    status=1
    # What CI shows: the failed tests' output and the first sanitizer reports.
    {
      echo "== $name FAILED: ctest exit $rc, ${reports:-0} sanitizer reports; logs $log, $full"
      grep -vE '^ +Start +[0-9]+:|Test +#[0-9]+: .* Passed +[0-9.]+ sec$' "$log" | head -400
      grep -m 5 -B 2 -A 40 -E 'ERROR: (Address|Leak|Thread)Sanitizer|WARNING: ThreadSanitizer|runtime error:' \
        "$full" 2>/dev/null | head -300
    } >&2
  fi
  summary+=("$(printf '%-22s %-8s %5ss  %s, %s sanitizer reports (%s)' "$name" "$st" $(( $(now) - t0 )) \
                "$tail" "${reports:-0}" "$log")")
}

run_asan() {
  local dir=$broot/build-asan
  build "$dir" gcc g++ address,undefined \
    ferry_tests_unit ferry_tests_net ferry_tests_netsocket ferry_tests_plugins ferry_tests_mp || return
  suite "$dir" asan-unit -L '^(unit|net|netsocket|plugins)$'
  suite "$dir" asan-mp -L '^mp$'
}

run_tsan() {
  local dir=$broot/build-tsan
  build "$dir" gcc g++ thread ferry_tests_unit ferry_tests_net ferry_tests_netsocket ferry_tests_mp || return
  suite "$dir" tsan-unit -L '^(unit|net|netsocket)$' -LE '^sim$'
  suite "$dir" tsan-mp -L '^mp$' -R "$TSAN_MP"
}

run_tsan_ci() {
  # Its own build dir: ctest runs every test of these labels that was built
  # (gtest_discover_tests registers the tests of built targets only).
  local dir=$broot/build-tsan-ci
  # shellcheck disable=SC2086
  build "$dir" gcc g++ thread $TSAN_CI_TARGETS || return
  suite "$dir" tsan-ci-unit -L '^(unit|net|netsocket)$'
  suite "$dir" tsan-ci-mp -L '^mp$'
}

t_all=$(now)
case $what in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all) run_asan; run_tsan ;;
  ci) run_asan; run_tsan_ci ;;
  *) echo "usage: $0 [asan|tsan|all|ci]" >&2; exit 2 ;;
esac

echo
echo "== sanitizer summary ($what, -j$jobs, $opt) =="
for l in "${summary[@]}"; do echo "  $l"; done
echo "  total $(( $(now) - t_all ))s"
exit $status
