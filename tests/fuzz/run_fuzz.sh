#!/usr/bin/env bash
# Runs Ferry's libFuzzer targets on their seed corpora for a bounded time.
#   tests/fuzz/run_fuzz.sh BUILD_DIR LIMIT [TARGET...]
# BUILD_DIR: a build configured with -DFERRY_FUZZ=ON (CC=clang CXX=clang++).
# LIMIT: N (executions, -runs=N, at most FERRY_FUZZ_MAX_SECONDS=20 seconds
# each) or Ns (seconds, -max_total_time=N). TARGET: op_check bootstrap ...
# (default: all). New inputs go to BUILD_DIR/fuzz/corpus/<target> (the seed
# corpus in the source tree is only read); a crash, leak or UB report leaves
# its input in BUILD_DIR/fuzz/artifacts/ and fails the script.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR RUNS|SECONDSs [TARGET...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
limit=$2
shift 2
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(op_check bootstrap net_hello topology plugin_props alltoallv_matrix)
fi
case "$limit" in
  *s) opts=(-max_total_time="${limit%s}") ;;
  *) opts=(-runs="$limit" -max_total_time="${FERRY_FUZZ_MAX_SECONDS:-20}") ;;
esac
status=0
for t in "${targets[@]}"; do
  bin="$build/bin/fuzz_$t"
  if [ ! -x "$bin" ]; then
    echo "run_fuzz: $bin is missing (build with -DFERRY_FUZZ=ON --target ferry_fuzz)" >&2
    exit 2
  fi
  work="$build/fuzz/corpus/$t"
  art="$build/fuzz/artifacts"
  mkdir -p "$work" "$art"
  log="$build/fuzz/$t.log"
  echo "run_fuzz: $t ${opts[*]}"
  # -print_final_stats: the log ends with stat::number_of_executed_units.
  if "$bin" "${opts[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$art/$t-" "$work" "$here/corpus/$t" >"$log" 2>&1; then
    echo "run_fuzz: $t ok: $(grep -o 'number_of_executed_units: *[0-9]*' "$log" | tail -1)"
  else
    status=1
    echo "run_fuzz: $t FAILED (log $log):" >&2
    grep -E 'ERROR|runtime error|FUZZ_CHECK|Test unit written|SUMMARY' "$log" | head -20 >&2 || tail -30 "$log" >&2
  fi
done
exit $status
