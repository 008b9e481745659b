#!/bin/bash
# pxn_bench.sh: AlltoAll with PXN against without, on a rail-optimised test fabric.
# ferry-cluster builds H hosts x R rails x P ranks/host with a spine (a router between the
# rails); rails are shaped to RAIL (tbf), the spine's ports to SPINE. Each round runs
# alltoall_perf once with PXN (the default: a rank sends to a peer on another host from its
# host's NIC on the peer's rail, so every byte stays on a rail) and once with
# NCCL_PXN_DISABLE=1 (from its own NIC: a cross-rail pair climbs through the spine), in
# alternating order; prints per size the median out-of-place busbw of each and the ratio,
# plus the spine's byte counters of the last round of each.
#
#   perf/tcp/pxn_bench.sh [--build DIR] [--hosts H] [--rails R] [--ranks-per-host P]
#       [--rail-shape RATE] [--spine-shape RATE] [--rounds N] [--timeout S]
#       [--bin PERF] [--a LABEL[:VAR=V,...]] [--b LABEL[:VAR=V,...]]
#       [-- perf args]                    (default -b 1M -e 64M -f 4 -n 2 -w 1)
#
# --bin/--a/--b compare any two settings of any *_perf tool the same way
# (defaults: alltoall_perf, pxn against nopxn:NCCL_PXN_DISABLE=1), e.g. the
# rail-local AlltoAllv against one hop per pair:
#   --bin alltoallv_perf --a rail:NCCL_ALGO=AlltoAll:rail --b direct:NCCL_ALGO=AlltoAll:direct
#
# Needs root and `ip netns` (exits 77 otherwise, like the tests).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
FC=$ROOT/tests/cluster/ferry-cluster
BUILD=${FERRY_BUILD:-$ROOT/build}
HOSTS=4
RAILS=4
PER_HOST=4
RAIL_SHAPE=400mbit
SPINE_SHAPE=100mbit
ROUNDS=3
TIMEOUT=600
PERF_ARGS=(-b 1M -e 64M -f 4 -n 2 -w 1)
BIN=alltoall_perf
A=pxn
B=nopxn:NCCL_PXN_DISABLE=1

while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --hosts) HOSTS=$2; shift 2 ;;
    --rails) RAILS=$2; shift 2 ;;
    --ranks-per-host) PER_HOST=$2; shift 2 ;;
    --rail-shape) RAIL_SHAPE=$2; shift 2 ;;
    --spine-shape) SPINE_SHAPE=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --a) A=$2; shift 2 ;;
    --b) B=$2; shift 2 ;;
    --) shift; PERF_ARGS=("$@"); break ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "pxn_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

A2A=$BUILD/bin/$BIN
LA=${A%%:*}
LB=${B%%:*}
envOf() { [[ $1 == *:* ]] && tr ',' ' ' <<< "${1#*:}"; }
[ -x "$A2A" ] || { echo "pxn_bench.sh: $A2A not built" >&2; exit 2; }
export LD_LIBRARY_PATH=$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Without PXN a 64 MiB AlltoAll takes tens of seconds through the spine: a rank that is done
# waits that long in the next collective for the others, past the default no-progress limit.
export FERRY_TIMEOUT_MS=${FERRY_TIMEOUT_MS:-600000}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# One run: $1 = label ($LA | $LB), $2 = round. Rank 0's data rows go to
# $OUT/<label>.<round> as "size busbw".
run() {
  local label=$1 round=$2 env=()
  # shellcheck disable=SC2207
  if [ "$label" = "$LA" ]; then env=($(envOf "$A")); else env=($(envOf "$B")); fi
  echo "+ round $round $label: ferry-cluster --hosts $HOSTS --rails $RAILS --ranks-per-host $PER_HOST" \
       "--spine --shape $RAIL_SHAPE --spine-shape $SPINE_SHAPE -- ${env[*]} $BIN ${PERF_ARGS[*]}"
  "$FC" --hosts "$HOSTS" --rails "$RAILS" --ranks-per-host "$PER_HOST" --timeout "$TIMEOUT" \
    --spine --shape "$RAIL_SHAPE" --spine-shape "$SPINE_SHAPE" --counters "$OUT/$label.json" -- \
    env "${env[@]}" "$A2A" "${PERF_ARGS[@]}" > "$OUT/$label.log" 2>&1
  local rc=$?
  [ $rc -eq 77 ] && { cat "$OUT/$label.log"; exit 77; }
  [ $rc -eq 0 ] || { tail -20 "$OUT/$label.log"; echo "pxn_bench.sh: $label run failed ($rc)" >&2; exit 1; }
  # busbw from the time (the table rounds it to 0.01 GB/s): size/t * (n-1)/n.
  grep -E '^\[h0\.r0\] +[0-9]+ ' "$OUT/$label.log" |
    awk -v n=$((HOSTS * PER_HOST)) '{ printf "%d %.5f\n", $2, $2 / $7 / 1e3 * (n - 1) / n }' > "$OUT/$label.r$round"
  grep -E '^\[h0\.r0\] +[0-9]+ ' "$OUT/$label.log" | sed 's/^\[h0\.r0\] //'
}

for ((i = 1; i <= ROUNDS; i++)); do
  if ((i % 2)); then run "$LA" "$i"; run "$LB" "$i"; else run "$LB" "$i"; run "$LA" "$i"; fi
done

spine() {  # total bytes the spine's ports sent, from a counters file
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(p["tx_bytes"] for p in d["spine"]["rails"]))' "$1"
}
echo
echo "=== $BIN busbw (GB/s, median of $ROUNDS), $HOSTS hosts x $PER_HOST ranks x $RAILS rails," \
     "rails $RAIL_SHAPE, spine $SPINE_SHAPE ==="
printf "%12s %11s %13s %11s\n" "size(B)" "$LA busbw" "$LB busbw" "$LA/$LB"
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for size in $(awk '{print $1}' "$OUT/$LA.r1"); do
  p=$(cat "$OUT/$LA".r* | awk -v s="$size" '$1 == s {print $2}' | median)
  n=$(cat "$OUT/$LB".r* | awk -v s="$size" '$1 == s {print $2}' | median)
  awk -v s="$size" -v p="$p" -v n="$n" 'BEGIN { printf "%12d %11.5f %13.5f %11.2f\n", s, p, n, (n > 0 ? p / n : 0) }'
done
echo "spine bytes forwarded (last round): $LA $(spine "$OUT/$LA.json"), $LB $(spine "$OUT/$LB.json")"
