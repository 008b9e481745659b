#!/bin/bash
# env_launch_test.sh <perf binary> torchrun|slurm|slurm-store [perf args...]
# Starts 2 ranks of a perf binary as torchrun or Slurm would (one process per
# rank, rank 0's store on 127.0.0.1 at a random port) and requires both to
# exit 0 and rank 0 to print a clean footer. A port already taken shows as
# "cannot listen" and is retried with another one.
set -u
bin=$1 style=$2
shift 2
for attempt in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 30000))
  out0=$(mktemp) out1=$(mktemp)
  for r in 1 0; do
    if [ "$style" != torchrun ]; then
      vars=(SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_LOCALID=$r)
    else
      vars=(RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r)
    fi
    out=$out1; [ $r = 0 ] && out=$out0
    if [ "$style" = slurm-store ]; then
      vars+=(MASTER_ADDR=127.0.0.1 MASTER_PORT=1)
      args=(--store "127.0.0.1:$port")
    else
      vars+=(MASTER_ADDR=127.0.0.1 MASTER_PORT=$port)
      args=()
    fi
    env -u RANK -u SLURM_PROCID "${vars[@]}" timeout 90 "$bin" "${args[@]}" "$@" >"$out" 2>&1 &
    pids[$r]=$!
  done
  wait "${pids[0]}"; rc0=$?
  wait "${pids[1]}"; rc1=$?
  cat "$out0"; sed 's/^/[rank 1] /' "$out1"
  if grep -q "cannot listen" "$out0"; then rm -f "$out0" "$out1"; continue; fi
  ok=1
  [ $rc0 = 0 ] && [ $rc1 = 0 ] || { echo "FAIL: exit codes $rc0 $rc1"; ok=0; }
  grep -q "^# Out of bounds values : 0 OK$" "$out0" || { echo "FAIL: no clean footer"; ok=0; }
  grep -q "^#  Rank  1 Group" "$out0" || { echo "FAIL: rank 1 missing from header"; ok=0; }
  rm -f "$out0" "$out1"
  [ $ok = 1 ] && exit 0 || exit 1
done
echo "FAIL: no free port found"
exit 1
