#!/bin/bash
# cluster_bench.sh: Ferry's AllReduce across ferry-cluster hosts next to the raw TCP
# throughput of the same link. For each cluster size (default 2 and 4 hosts):
#   1. tcp_bw from host 1 to host 0 over rail 0 (N streams, D seconds);
#   2. all_reduce_perf in env (torchrun) launch mode, one process per rank,
#      -b 1M -e 64M -f 4 by default;
# then prints, per size, out-of-place busbw, raw TCP GB/s and busbw / TCP.
#
#   perf/tcp/cluster_bench.sh [--build DIR] [--hosts "2 4"] [--ranks-per-host P]
#       [--shape RATE] [--streams N] [--duration S] [--timeout S] [-- all_reduce_perf args]
#
# --shape caps every veth (tbf, both directions, e.g. 1gbit) so the link, not the
# CPU, is the bottleneck. Needs root and `ip netns` (exits 77 otherwise, like the tests).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
FC=$ROOT/tests/cluster/ferry-cluster
BUILD=${FERRY_BUILD:-$ROOT/build}
HOSTS="2 4"
PER_HOST=1
SHAPE=
STREAMS=1
DURATION=3
TIMEOUT=300
PERF_ARGS=(-b 1M -e 64M -f 4)

while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --hosts) HOSTS=$2; shift 2 ;;
    --ranks-per-host) PER_HOST=$2; shift 2 ;;
    --shape) SHAPE=$2; shift 2 ;;
    --streams) STREAMS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --) shift; PERF_ARGS=("$@"); break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "cluster_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

TCP_BW=$BUILD/bin/tcp_bw
ARP=$BUILD/bin/all_reduce_perf
for b in "$TCP_BW" "$ARP"; do
  [ -x "$b" ] || { echo "cluster_bench.sh: $b not built (cmake --build $BUILD --target tcp_bw all_reduce_perf)" >&2; exit 2; }
done
export LD_LIBRARY_PATH=$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SHAPE_ARGS=()
[ -n "$SHAPE" ] && SHAPE_ARGS=(--shape "$SHAPE")
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# tcp_bw: host 0 serves on its rail-0 address, host 1 sends; other hosts idle.
tcp_run() {  # $1 = hosts
  "$FC" --hosts "$1" --ranks-per-host 1 --timeout 60 "${SHAPE_ARGS[@]}" -- bash -c \
    'case $FERRY_CLUSTER_HOST in
       0) exec "$0" --server --bind "$MASTER_ADDR" --timeout 50 ;;
       1) exec "$0" --client "$MASTER_ADDR" --streams "$1" --duration "$2" --timeout 50 ;;
     esac' "$TCP_BW" "$STREAMS" "$DURATION"
}

summary=()
for K in $HOSTS; do
  echo "=== $K hosts x $PER_HOST rank(s)/host${SHAPE:+, links shaped to $SHAPE} ==="
  tcp_run "$K" > "$OUT/tcp$K" 2>&1
  rc=$?
  [ $rc -eq 77 ] && { cat "$OUT/tcp$K"; exit 77; }
  grep -E 'tcp_bw (streams|server)' "$OUT/tcp$K"
  tcp=$(sed -n 's/.*tcp_bw streams=.* seconds=\([0-9.]*\) bytes=\([0-9]*\) .*/\2 \1/p' "$OUT/tcp$K" |
        awk '{ printf "%.4f", $1 / $2 / 1e9 }')
  [ $rc -eq 0 ] && [ -n "$tcp" ] || { cat "$OUT/tcp$K"; echo "cluster_bench.sh: tcp_bw failed ($rc)" >&2; exit 1; }

  echo "+ ferry-cluster --hosts $K --ranks-per-host $PER_HOST ${SHAPE_ARGS[*]} -- all_reduce_perf ${PERF_ARGS[*]}"
  "$FC" --hosts "$K" --ranks-per-host "$PER_HOST" --timeout "$TIMEOUT" "${SHAPE_ARGS[@]}" -- \
    "$ARP" "${PERF_ARGS[@]}" > "$OUT/ar$K" 2>&1
  rc=$?
  grep '^\[h0\.r0\]' "$OUT/ar$K" | sed 's/^\[h0\.r0\] //'
  [ $rc -eq 0 ] || { grep -v '^\[h0\.r0\]' "$OUT/ar$K" | tail -20; echo "cluster_bench.sh: all_reduce_perf failed ($rc)" >&2; exit 1; }
  # Data rows of rank 0: size count type redop root time(us) algbw busbw #wrong ...; busbw
  # is recomputed from the time (the table rounds it to 0.01 GB/s): size/t * 2(n-1)/n.
  while read -r size us; do
    summary+=("$(awk -v k="$K" -v p="$PER_HOST" -v s="$size" -v us="$us" -v t="$tcp" \
      'BEGIN { n = k * p; b = s / us / 1e3 * 2 * (n - 1) / n;
               printf "%5d %8d %12d %12.4f %10.4f %8.3f", k, n, s, b, t, b / t }')")
  done < <(grep -E '^\[h0\.r0\] +[0-9]+ ' "$OUT/ar$K" | awk '{print $2, $7}')
done

echo
echo "=== all_reduce_perf out-of-place busbw vs raw TCP (tcp_bw, $STREAMS stream(s), host1 -> host0)${SHAPE:+, shaped $SHAPE} ==="
echo "hosts    ranks     size(B)  busbw(GB/s)  tcp(GB/s)    ratio"
printf '%s\n' "${summary[@]}"
