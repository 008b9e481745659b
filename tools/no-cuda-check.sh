#!/usr/bin/env bash
# libferry.so on a machine without CUDA (issue 14): it must load and pass its
# tests where no CUDA or NCCL library exists at all.
#  1. libferry.so needs no CUDA, NVIDIA or NCCL library (its NEEDED entries);
#  2. in a private mount namespace, every directory holding libcuda,
#     libcudart or libnccl is covered by an empty tmpfs, the perf tool shows
#     the CUDA runtime cannot be loaded, and the unit, multi-process (device
#     included), topology and perf-tool suites pass. The ABI suites compare
#     with NVIDIA's library and are left out.
# Needs root for the namespace; elsewhere step 2 is skipped with a message.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FERRY_BUILD_DIR:-$root/build}
lib="$build/lib/libferry.so"

needed=$(readelf -d "$lib" | awk '/NEEDED/ {gsub(/[][]/, "", $5); print $5}')
if grep -Eiq 'cuda|nvidia|nvrtc|nccl' <<<"$needed"; then
  echo "no-cuda-check: FAIL: libferry.so needs: $(tr '\n' ' ' <<<"$needed")"
  exit 1
fi
echo "no-cuda-check: libferry.so needs only: $(tr '\n' ' ' <<<"$needed")"

if [ "$(id -u)" != 0 ]; then
  echo "no-cuda-check: SKIP the hidden-CUDA run (needs root for a mount namespace)"
  exit 0
fi
dirs=$(find /usr /opt /lib /lib64 -xdev \( -name 'libcudart.so*' -o -name 'libcuda.so*' \
         -o -name 'libnccl.so*' \) 2>/dev/null | xargs -r -n1 dirname | sort -u | tr '\n' ' ')
echo "no-cuda-check: hiding ${dirs:-nothing (no CUDA here)}"
export FERRY_NOCUDA_DIRS="$dirs" FERRY_NOCUDA_BUILD="$build"
unshare -m --propagation private bash -euo pipefail -c '
  # (a directory inside one hidden already is gone)
  for d in $FERRY_NOCUDA_DIRS; do [ -d "$d" ] && mount -t tmpfs -o size=1m,mode=0555 none "$d"; done
  probe=$("$FERRY_NOCUDA_BUILD/bin/all_reduce_perf" --nranks 1 -b 8 -e 8 -n 1 -w 0 -c 0 2>&1 || true)
  if ! grep -q "cannot be loaded" <<<"$probe"; then
    echo "no-cuda-check: FAIL: the CUDA runtime still loads:"; echo "$probe" | head -20; exit 1
  fi
  echo "no-cuda-check: the CUDA runtime cannot be loaded; running the suites"
  ctest --test-dir "$FERRY_NOCUDA_BUILD" -L "unit|mp|device|topology|perf_tools" \
        --output-on-failure --timeout 600 -j2
'
echo "no-cuda-check: OK"
