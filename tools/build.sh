#!/usr/bin/env bash
# Configure and build Ferry into ${FERRY_BUILD_DIR:-build}.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FERRY_BUILD_DIR:-$root/build}
"$root/tools/install-deps.sh"
# FERRY_CMAKE_ARGS adds configure options (CI sets -DFERRY_WERROR=ON).
# shellcheck disable=SC2086
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${FERRY_CMAKE_ARGS:-} "$@"
cmake --build "$build" -j"$(nproc)"
