#!/usr/bin/env bash
# What to run on a machine with NVIDIA GPUs (issue 14): Ferry's collectives on
# real device memory. Exits 77 with a message where no GPU is usable (no
# libcuda.so.1, or it sees no device), as on the development machines.
#
#   tools/gpu-check.sh [--build DIR] [--no-build]
#
# (ctest runs it as gpu_check with --no-build: a skip here, the check there.)
#
# On a GPU machine it builds Ferry (tools/build.sh), runs the device suite
# against the real driver (mp_device_test's CUDA cases with
# FERRY_TEST_CUDA_LIBRARY=libcuda.so.1: every collective x datatype x op at 1-4
# ranks, a mixed host/device communicator, the stream contract), then
# all_reduce_perf and sendrecv_perf on cudaMalloc'd buffers (the perf tools
# choose device memory when a GPU is present), whole-buffer against pipelined
# staging (FERRY_BRIDGE_PIECE_BYTES), and prints a summary.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FERRY_BUILD_DIR:-$root/build}
nobuild=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --no-build) nobuild=1; shift ;;
    *) echo "usage: $0 [--build DIR] [--no-build]" >&2; exit 2 ;;
  esac
done

devices=$(python3 - <<'PY' 2>/dev/null
import ctypes
try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError:
    print(0); raise SystemExit
n = ctypes.c_int(0)
print(n.value if cu.cuInit(0) == 0 and cu.cuDeviceGetCount(ctypes.byref(n)) == 0 else 0)
PY
)
if [ "${devices:-0}" -lt 1 ]; then
  echo "gpu-check: SKIP: no usable GPU here (libcuda.so.1 missing or it sees no device)"
  exit 77
fi
echo "gpu-check: $devices CUDA device(s)"
if [ $nobuild = 0 ]; then
  FERRY_BUILD_DIR=$build "$root/tools/build.sh" >/dev/null || { echo "gpu-check: FAIL: build"; exit 1; }
fi

status=0
summary=()
FERRY_TEST_CUDA_LIBRARY=libcuda.so.1 "$build/bin/mp_device_test" --gtest_filter='*cuda*:*/1' \
  >"$build/gpu-check-device.log" 2>&1
rc=$?
summary+=("mp_device_test (CUDA cases): $([ $rc = 0 ] && echo ok || echo FAILED), $build/gpu-check-device.log")
[ $rc = 0 ] || status=1
for t in all_reduce sendrecv; do
  "$build/bin/${t}_perf" --nranks 2 -b 8 -e 64M -f 8 -n 20 -w 5 -c 1 >"$build/gpu-check-$t.log" 2>&1
  rc=$?
  bw=$(grep -E "Avg bus bandwidth" "$build/gpu-check-$t.log" | awk '{print $NF}')
  summary+=("${t}_perf on device buffers: $([ $rc = 0 ] && echo ok || echo FAILED), avg busbw ${bw:-?} GB/s")
  [ $rc = 0 ] || status=1
done
# Pipelined staging (FERRY_BRIDGE_PIECE_BYTES): 1 MiB pieces, the default on
# CUDA, against whole buffers, interleaved, out-of-place time at 4-64 MiB
# (the development machines cannot measure it: their copies take host cores).
piece_times() {
  FERRY_BRIDGE_PIECE_BYTES=$1 "$build/bin/all_reduce_perf" --nranks 2 -b 4M -e 64M -f 4 -n 20 -w 20 -c 1 \
    2>&1 | awk '/^ +[0-9]+ +[0-9]+ /{printf "%s:%s ", $1, $6}'
}
for round in 1 2 3; do
  whole=$(piece_times 0)
  pieces=$(piece_times -1)
  summary+=("all_reduce_perf us, whole buffers / 1 MiB pieces (round $round): $whole/ $pieces")
done
echo "== gpu-check summary =="
for l in "${summary[@]}"; do echo "  $l"; done
exit $status
