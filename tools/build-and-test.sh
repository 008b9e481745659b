#!/usr/bin/env bash
# Build Ferry and run every test suite (unit, multi-process, ABI), then the
# same suites (ABI aside) with every CUDA library hidden (tools/no-cuda-check.sh), then the
# fuzz step (tools/fuzz-ci.sh: a clang build of the libFuzzer targets, each
# run briefly; FERRY_SKIP_FUZZ=1 leaves it out), then the sanitizer step
# (tests/sanitize/run.sh ci: the unit and mp suites under ASan+UBSan and the
# threaded tests under TSan, about 10 minutes cold on 2 cores;
# FERRY_SKIP_SANITIZE=1 leaves it out).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FERRY_BUILD_DIR:-$root/build}
"$root/tools/build.sh"
ctest --test-dir "$build" --output-on-failure --timeout 600 "$@"
# The library without any CUDA library on the machine (about 2 minutes;
# FERRY_SKIP_NOCUDA=1 leaves it out).
if [ "${FERRY_SKIP_NOCUDA:-0}" != 1 ]; then
  "$root/tools/no-cuda-check.sh"
fi
if [ "${FERRY_SKIP_FUZZ:-0}" != 1 ]; then
  "$root/tools/fuzz-ci.sh"
fi
if [ "${FERRY_SKIP_SANITIZE:-0}" != 1 ]; then
  JOBS="${JOBS:-$(nproc)}" "$root/tests/sanitize/run.sh" ci
fi
