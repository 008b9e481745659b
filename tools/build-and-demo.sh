#!/usr/bin/env bash
# Build Ferry and run the main job: a float-sum AllReduce across 4 local
# ranks (forked, no MPI) that checks every result and prints its bandwidth.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FERRY_BUILD_DIR:-$root/build}
"$root/tools/build.sh"
"$build/bin/ferry_allreduce_demo" --nranks 4 -b 8 -e 64M -f 4 "$@"
