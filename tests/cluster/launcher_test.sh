#!/bin/bash
# Self-test of ferry-cluster (ctest cluster_launcher): environment and addresses of every
# rank, the hosts' network variables set by the launcher whatever the caller exported,
# output prefixes, exit status propagation, --timeout, teardown after SIGTERM,
# SIGKILL + --cleanup-stale (also of a --spine run; the topology files' directory too),
# --shape qdiscs, --counters JSON. The files' content: topo_file_test.py.
# Exit 77 (skip) when not root or `ip netns` does not work (ferry-cluster's own check).
# No fixed sleeps before a signal: the steps wait (up to 30 s) for the ranks' own output,
# so a loaded machine only makes the test slower.
set -u
FC=${1:?usage: launcher_test.sh path/to/ferry-cluster}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# wait_for FILE TEXT N: until FILE has N lines containing TEXT (at most 30 s).
wait_for() {
  local i
  for i in $(seq 300); do
    [ "$(grep -cF -- "$2" "$1")" -ge "$3" ] && return 0
    sleep 0.1
  done
  return 1
}

"$FC" --hosts 1 -- true > "$TMP/probe" 2>&1
rc=$?
if [ $rc -eq 77 ]; then cat "$TMP/probe"; exit 77; fi
[ $rc -eq 0 ] || fail "trivial 1-host run exited $rc: $(cat "$TMP/probe")"

# Leftover check: nothing named after the launcher pid from its first log line.
leftovers() {  # $1 = log file
  local pid
  pid=$(sed -n 's/.*namespaces [A-Za-z_]*[A-Za-z]\([0-9]*\)-h0\.\..*/\1/p' "$1" | head -1)
  [ -n "$pid" ] || { echo "no-pid-in-log"; return; }
  ip netns list | grep -E "^[A-Za-z_]+$pid-(h[0-9]+|spine)" ; ip -o link | grep -E ": fc$pid[bhs]"
  [ -e /run/ferry-cluster/$pid.json ] && echo "state file $pid.json"
  [ -e /run/ferry-cluster/$pid.topo ] && echo "topology files $pid.topo"
}

# 1. Environment and addresses: 2 hosts x 2 rails x 2 ranks. The caller's interface
# variables name this machine's interfaces (here lo, as a single-node run would set them);
# every host must get the launcher's rail values instead, and NCCL_IB_HCA unset.
UCX_NET_DEVICES=lo NCCL_SOCKET_IFNAME=lo UCX_TLS=sm,self NCCL_SOCKET_FAMILY=AF_INET6 \
NCCL_IB_HCA=mlx5_0 GLOO_SOCKET_IFNAME=lo TP_SOCKET_IFNAME=lo \
"$FC" --hosts 2 --rails 2 --ranks-per-host 2 --name envt -- sh -c \
  'echo "ENV $FERRY_CLUSTER_RANK $FERRY_CLUSTER_NRANKS $FERRY_CLUSTER_LOCAL_RANK $FERRY_CLUSTER_HOST $RANK $WORLD_SIZE $LOCAL_RANK $NCCL_HOSTID $MASTER_ADDR:$MASTER_PORT $NCCL_COMM_ID $NCCL_SOCKET_IFNAME"
   echo "NET $NCCL_SOCKET_IFNAME $NCCL_SOCKET_FAMILY $UCX_NET_DEVICES $UCX_TLS ${NCCL_IB_HCA-unset} $GLOO_SOCKET_IFNAME $TP_SOCKET_IFNAME"
   ip -4 -o addr show | awk "{print \"ADDR\", \$2, \$4}"' \
  > "$TMP/env" 2>&1 || fail "env run exited $?"
pid=$(sed -n 's/.*namespaces envt\([0-9]*\)-h0.*/\1/p' "$TMP/env")
base=$(sed -n 's/.*rail 0 subnet 10\.\([0-9]*\)\.0\.0.*/\1/p' "$TMP/env")
for r in 0 1 2 3; do
  h=$((r / 2)); l=$((r % 2))
  want="[h$h.r$r] ENV $r 4 $l $h $r 4 $l envt$pid-h$h 10.$base.0.1:29500 10.$base.0.1:29501 r"
  grep -qxF "$want" "$TMP/env" || fail "rank $r env line missing: $want"
  want="[h$h.r$r] NET r AF_INET r0,r1 tcp,sm,self unset r0 r0"
  grep -qxF "$want" "$TMP/env" ||
    fail "rank $r network variables: want '$want', got '$(grep -F "[h$h.r$r] NET" "$TMP/env")'"
  for rail in 0 1; do
    grep -qxF "[h$h.r$r] ADDR r$rail 10.$((base + rail)).0.$((h + 1))/24" "$TMP/env" ||
      fail "rank $r: r$rail should be 10.$((base + rail)).0.$((h + 1))/24"
  done
  grep -qxF "[h$h.r$r] ADDR lo 127.0.0.1/8" "$TMP/env" || fail "rank $r: lo not up"
done
grep -qF "ignoring the caller's" "$TMP/env" || fail "no log line about the caller's network variables"
[ -z "$(leftovers "$TMP/env")" ] || fail "leftovers after a clean run: $(leftovers "$TMP/env")"

# 2. Exit status: the failing rank's status, and the launcher's summary names it.
"$FC" --hosts 2 --ranks-per-host 2 -- sh -c 'exit $(( RANK == 2 ? 7 : 0 ))' > "$TMP/st" 2>&1
rc=$?; [ $rc -eq 7 ] || fail "exit status: got $rc, expected 7"

# 3. --timeout kills everything, exits 124, leaves nothing.
start=$(date +%s)
"$FC" --hosts 2 --timeout 2 -- sleep 60 > "$TMP/to" 2>&1
rc=$?; took=$(( $(date +%s) - start ))
[ $rc -eq 124 ] || fail "timeout: got $rc, expected 124"
[ $took -le 30 ] || fail "timeout took $took s"   # far below the 60 s sleep; slack for load
[ -z "$(leftovers "$TMP/to")" ] || fail "leftovers after timeout: $(leftovers "$TMP/to")"

# 4. SIGTERM tears down; 5. SIGKILL leaves state that --cleanup-stale removes.
"$FC" --hosts 3 --rails 2 -- sh -c 'echo up; exec sleep 60' > "$TMP/term" 2>&1 &
lp=$!
wait_for "$TMP/term" "] up" 3 || fail "SIGTERM case: ranks not up within 30 s: $(cat "$TMP/term")"
kill -TERM $lp; wait $lp; rc=$?
[ $rc -eq 143 ] || fail "SIGTERM: got $rc, expected 143"
[ -z "$(leftovers "$TMP/term")" ] || fail "leftovers after SIGTERM: $(leftovers "$TMP/term")"

"$FC" --hosts 2 --rails 2 --shape 100mbit -- sh -c 'tc qdisc show dev r0; tc qdisc show dev r1; sleep 60' > "$TMP/kill" 2>&1 &
lp=$!
wait_for "$TMP/kill" "tbf" 4 || fail "SIGKILL case: no qdisc lines within 30 s: $(cat "$TMP/kill")"
kill -KILL $lp; wait $lp 2>/dev/null
grep -q "tbf .*rate 100Mbit" "$TMP/kill" || fail "--shape: no tbf 100Mbit qdisc on the rails: $(cat "$TMP/kill")"
[ -n "$(leftovers "$TMP/kill")" ] || fail "SIGKILL: expected leftovers before --cleanup-stale"
leftovers "$TMP/kill" | grep -q "topology files" || fail "SIGKILL: no topology files before --cleanup-stale"
"$FC" --cleanup-stale > /dev/null 2>&1 || fail "--cleanup-stale exited $?"
[ -z "$(leftovers "$TMP/kill")" ] || fail "leftovers after --cleanup-stale: $(leftovers "$TMP/kill")"

# 5b. The same with --spine: its namespace and its ports on the rail bridges are in the
# state file, so --cleanup-stale removes them too.
"$FC" --hosts 2 --rails 2 --spine --spine-shape 50mbit -- sh -c 'echo up; exec sleep 60' > "$TMP/kills" 2>&1 &
lp=$!
wait_for "$TMP/kills" "] up" 2 || fail "spine SIGKILL case: ranks not up within 30 s: $(cat "$TMP/kills")"
kill -KILL $lp; wait $lp 2>/dev/null
leftovers "$TMP/kills" | grep -q -- "-spine" || fail "spine SIGKILL: no spine namespace before --cleanup-stale"
leftovers "$TMP/kills" | grep -qE ": fc[0-9]+s1" || fail "spine SIGKILL: no spine port before --cleanup-stale"
"$FC" --cleanup-stale > /dev/null 2>&1 || fail "--cleanup-stale exited $?"
[ -z "$(leftovers "$TMP/kills")" ] || fail "spine leftovers after --cleanup-stale: $(leftovers "$TMP/kills")"

# 6. --counters: JSON with per-host rail and lo counters; bytes sent over r0 show up.
XFER='
import os, socket, time
addr = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
if os.environ["RANK"] == "0":
    s = socket.create_server(addr); c, _ = s.accept(); n = 0
    while True:
        b = c.recv(65536)
        if not b: break
        n += len(b)
    print("received", n)
else:
    deadline = time.monotonic() + 30     # rank 0 may start late on a loaded machine
    while True:
        try:
            c = socket.create_connection(addr); break
        except OSError:
            if time.monotonic() > deadline: raise
            time.sleep(0.05)
    c.sendall(bytes(300000)); c.close()
'
"$FC" --hosts 2 --counters "$TMP/c.json" -- python3 -c "$XFER" > "$TMP/cnt" 2>&1 ||
  fail "counters run exited $?: $(cat "$TMP/cnt")"
grep -qxF "[h0.r0] received 300000" "$TMP/cnt" || fail "TCP between hosts: $(cat "$TMP/cnt")"
python3 - "$TMP/c.json" <<'PY' || fail "counters JSON check"
import json, sys
d = json.load(open(sys.argv[1]))
h = d["hosts"]
assert len(h) == 2 and all(len(x["rails"]) == 1 and x["lo"] is not None for x in h), d
assert h[1]["rails"][0]["tx_bytes"] >= 300000, h[1]
assert h[0]["rails"][0]["rx_bytes"] >= 300000, h[0]
PY

[ $fails -eq 0 ] && echo "launcher_test: all checks passed" && exit 0
echo "launcher_test: $fails check(s) failed"; exit 1
