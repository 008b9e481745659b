#!/usr/bin/env bash
# Build Ferry and run the main job: a float-sum AllReduce across 4 local
# ranks (forked, no MPI) that checks every result and prints its bandwidth,
# with nccl-tests' all_reduce_perf command line.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FERRY_BUILD_DIR:-$root/build}
"$root/tools/build.sh"
"$build/bin/all_reduce_perf" --nranks 4 -b 8 -e 64M -f 4 "$@"
