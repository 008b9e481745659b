#!/usr/bin/env bash
# The full soak and chaos runs (tests/soak/README.md), one command:
#   tests/soak/run.sh [--build DIR] [--ops N] [--trials T] [--seed S]
# 1. N random collectives on 4 forked ranks of this host;
# 2. the same sequence on 2 netns hosts x 2 ranks (needs root and ip netns);
# 3. T chaos trials: a random rank killed at a random moment, survivors shrink.
# Each prints its verdict; the script fails if any does.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build ops=10000 trials=100 seed=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --trials) trials=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--ops N] [--trials T] [--seed S]" >&2; exit 2 ;;
  esac
done
bin=$build/bin/ferry_soak
[[ -x $bin ]] || { echo "run.sh: $bin not built" >&2; exit 2; }
export LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
step() { local t0=$SECONDS; "$@" || status=1; echo "($((SECONDS - t0)) s)"; }

echo "== soak: 4 ranks, one host, $ops ops, seed $seed"
step "$bin" soak --ranks 4 --ops "$ops" --seed "$seed"

if [[ $(id -u) == 0 ]] && ip netns list >/dev/null 2>&1; then
  echo "== soak: 2 netns hosts x 2 ranks, $ops ops, seed $seed"
  step "$root/tests/cluster/ferry-cluster" --hosts 2 --ranks-per-host 2 --timeout 7200 -- \
    env FERRY_TIMEOUT_MS=60000 "$bin" rank --ops "$ops" --seed "$seed"
else
  echo "== soak over netns skipped: needs root and ip netns"
fi

echo "== chaos: $trials trials, seed $seed"
step "$bin" chaos --trials "$trials" --seed "$seed"
exit $status
