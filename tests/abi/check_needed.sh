#!/bin/bash
# Usage: check_needed.sh <abi_allreduce>
# The drop-in test binary must depend on libnccl.so.2 by soname (as a real
# NCCL application does) and carry no rpath that could bypass LD_LIBRARY_PATH.
set -u
dyn=$(readelf -d --wide "$1") || exit 1
fail=0
grep -q '(NEEDED).*\[libnccl\.so\.2\]' <<<"$dyn" || { echo "FAIL: no NEEDED libnccl.so.2"; fail=1; }
if grep -qE '\((RPATH|RUNPATH)\)' <<<"$dyn"; then
  echo "FAIL: $1 has an rpath:"; grep -E '\((RPATH|RUNPATH)\)' <<<"$dyn"; fail=1
fi
if grep -q '(NEEDED).*libcuda' <<<"$dyn"; then
  echo "FAIL: $1 depends on a CUDA library"; fail=1
fi
[[ $fail -eq 0 ]] && echo "OK: $(grep '(NEEDED)' <<<"$dyn" | grep -o '\[.*\]' | tr '\n' ' ')"
exit $fail
