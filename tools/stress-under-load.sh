#!/usr/bin/env bash
# Runs test suites N times in a row while a full clean build of Ferry runs
# over and over in another directory (the load a CI machine shares its 2 cores
# with). Prints one line per round (passed/failed counts, wall time) and exits
# non-zero if any round failed. The caller's environment passes through, so
# e.g. UCX_NET_DEVICES=lo NCCL_SOCKET_IFNAME=lo can be exported to check that
# the suites do not depend on it.
#   tools/stress-under-load.sh [--rounds N] [--build DIR] [-- ctest args...]
# Default ctest args: -L 'mp|cluster|net|netsocket|netucx|plugins'.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=5 build=$root/build
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
ctest_args=("$@")
[[ ${#ctest_args[@]} -gt 0 ]] || ctest_args=(-L 'mp|cluster|net|netsocket|netucx|plugins')
loaddir=$(mktemp -d /tmp/ferry-load.XXXXXX)
logdir=$(mktemp -d /tmp/ferry-stress.XXXXXX)
# The load: configure and build the whole tree from scratch, again and again.
setsid bash -c "while true; do rm -rf '$loaddir/b'; cmake -S '$root' -B '$loaddir/b' -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null 2>&1; cmake --build '$loaddir/b' -j2 >/dev/null 2>&1; done" &
loadpid=$!
trap 'kill -- -$loadpid 2>/dev/null; rm -rf "$loaddir"' EXIT
sleep 10  # let the build get going
fail=0
for ((i = 1; i <= rounds; i++)); do
  t0=$(date +%s)
  if ctest --test-dir "$build" --timeout 600 "${ctest_args[@]}" >"$logdir/round$i.log" 2>&1; then rc=ok; else rc=FAILED; fail=1; fi
  t1=$(date +%s)
  summary=$(grep -E 'tests passed' "$logdir/round$i.log" || echo "no summary")
  echo "round $i: $rc: $summary ($((t1 - t0)) s, load $(cut -d' ' -f1 /proc/loadavg))"
  grep -E '\*\*\*(Failed|Timeout|Exception)' "$logdir/round$i.log" | head -5 || true
done
echo "logs: $logdir"
exit $fail
