#!/usr/bin/env bash
# Build Ferry with sanitizers and run the test suites under them.
#
#   tests/sanitize/run.sh [asan|tsan|all]      (default: all)
#
# asan: gcc, -DFERRY_SANITIZE=address,undefined, build dir build-asan;
#       runs the labels unit, net, netsocket, plugins, then mp.
# tsan: gcc, -DFERRY_SANITIZE=thread, build dir build-tsan; runs the labels
#       unit (minus sim), net, netsocket, then mp (TSAN_MP narrows it).
#       (clang 14 cannot build src/kernels/reduce.cc: it rejects
#       __builtin_cpu_supports("f16c"); see tests/sanitize/README.md.)
# perf/ is not built. A sanitizer report anywhere in a test's output (also
# from a forked rank whose exit status a test tolerates) fails its suite.
# Environment: JOBS (default 2), SAN_BUILD_ROOT (default: the source tree)
# for the build dirs, TSAN_MP (ctest -R regex for the TSan mp run).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
what=${1:-all}
jobs=${JOBS:-2}
broot=${SAN_BUILD_ROOT:-$root}
supp=$root/tests/sanitize
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
TSAN_MP=${TSAN_MP:-.}

summary=()
status=0

now() { date +%s; }

build() {  # build <dir> <cc> <cxx> <sanitizer>
  local dir=$1 cc=$2 cxx=$3 san=$4 t0
  t0=$(now)
  if ! cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
       -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
       -DFERRY_SANITIZE="$san" -DFERRY_BUILD_PERF=OFF >"$dir.configure.log" 2>&1 ||
     ! cmake --build "$dir" -j "$jobs" >"$dir.build.log" 2>&1; then
    echo "build of $dir failed; see $dir.configure.log / $dir.build.log" >&2
    tail -20 "$dir.build.log" >&2
    summary+=("$(printf '%-22s %-8s %5ss' "$(basename "$dir") build" FAILED $(( $(now) - t0 )))")
    status=1
    return 1
  fi
  summary+=("$(printf '%-22s %-8s %5ss' "$(basename "$dir") build" ok $(( $(now) - t0 )))")
}

suite() {  # suite <build dir> <name> <ctest args...>
  local dir=$1 name=$2 t0 rc reports log
  shift 2
  t0=$(now)
  log=$dir/sanitize-$name.log
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" "$@" >"$log" 2>&1
  rc=$?
  # Reports from processes whose failure did not fail a test still count.
  reports=$(grep -cE 'ERROR: (Address|Leak|Thread)Sanitizer|WARNING: ThreadSanitizer|runtime error:' \
              "$dir/Testing/Temporary/LastTest.log" 2>/dev/null)
  local tail
  tail=$(grep -E '^[0-9]+% tests passed' "$log" || echo "no tests ran")
  local st=ok
  if [[ $rc -ne 0 || ${reports:-0} -ne 0 ]]; then st=FAILED; status=1; fi
  summary+=("$(printf '%-22s %-8s %5ss  %s, %s sanitizer reports (%s)' "$name" "$st" $(( $(now) - t0 )) \
                "$tail" "${reports:-0}" "$log")")
  # Keep the full output (LastTest.log is overwritten by the next ctest run).
  cp "$dir/Testing/Temporary/LastTest.log" "$dir/sanitize-$name.full.log" 2>/dev/null
}

run_asan() {
  local dir=$broot/build-asan
  build "$dir" gcc g++ address,undefined || return
  suite "$dir" asan-unit -L '^(unit|net|netsocket|plugins)$'
  suite "$dir" asan-mp -L '^mp$'
}

run_tsan() {
  local dir=$broot/build-tsan
  build "$dir" gcc g++ thread || return
  # UCX's memory hooks (libucm intercepts madvise, called by glibc as a
  # thread exits) crash inside TSan's mutex interceptor: UCX runs without
  # them here (it does not need them for host memory).
  UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no \
    suite "$dir" tsan-unit -L '^(unit|net|netsocket)$' -LE '^sim$'
  UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no \
    suite "$dir" tsan-mp -L '^mp$' -R "$TSAN_MP"
}

t_all=$(now)
case $what in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all) run_asan; run_tsan ;;
  *) echo "usage: $0 [asan|tsan|all]" >&2; exit 2 ;;
esac

echo
echo "== sanitizer summary ($what, -j$jobs) =="
for l in "${summary[@]}"; do echo "  $l"; done
echo "  total $(( $(now) - t_all ))s"
exit $status
