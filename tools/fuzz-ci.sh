#!/usr/bin/env bash
# The fuzz step of CI (called by tools/build-and-test.sh): a second build
# directory configured with clang and -DFERRY_FUZZ=ON builds only the
# libFuzzer targets (tests/fuzz) and ctest runs each one for a bounded number
# of executions on its seed corpus (label fuzz). See tests/fuzz/README.md.
# FERRY_FUZZ_BUILD_DIR: the build directory (default build-fuzz);
# FERRY_FUZZ_RUNS: executions per target (default 20000).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FERRY_FUZZ_BUILD_DIR:-$root/build-fuzz}
start=$(date +%s)
"$root/tools/install-deps.sh"
# No -Werror here: clang warns about a few things GCC does not (the gcc
# build is the one held to -Werror).
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DFERRY_FUZZ=ON -DFERRY_WERROR=OFF \
  -DFERRY_FUZZ_RUNS="${FERRY_FUZZ_RUNS:-20000}"
cmake --build "$build" -j"$(nproc)" --target ferry_fuzz
ctest --test-dir "$build" -L fuzz --output-on-failure -j"$(nproc)"
echo "fuzz-ci: configure, build and fuzz took $(( $(date +%s) - start )) s"
