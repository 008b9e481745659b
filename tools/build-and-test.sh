#!/usr/bin/env bash
# Build Ferry and run every test suite (unit, multi-process, ABI).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FERRY_BUILD_DIR:-$root/build}
"$root/tools/build.sh"
ctest --test-dir "$build" --output-on-failure --timeout 600 "$@"
