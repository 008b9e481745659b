#!/bin/bash
# Usage: compare_outputs.sh <program built on NVIDIA's headers> <same program built on Ferry's>
# Passes only if both run successfully and print exactly the same text.
set -u
real_out=$("$1") || { echo "FAIL: $1 exited with $?"; exit 1; }
ours_out=$("$2") || { echo "FAIL: $2 exited with $?"; exit 1; }
if [[ -z "$real_out" ]]; then
  echo "FAIL: $1 printed nothing"
  exit 1
fi
if ! diff -u --label "NVIDIA ($1)" --label "Ferry ($2)" <(echo "$real_out") <(echo "$ours_out"); then
  echo "FAIL: outputs differ (see diff above)"
  exit 1
fi
echo "OK: $(echo "$real_out" | wc -l) lines identical"
