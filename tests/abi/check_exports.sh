#!/bin/bash
# Usage: check_exports.sh <NVIDIA libnccl.so.2> <Ferry libnccl.so.2>
# Ferry must export exactly NVIDIA's nccl*/pnccl* set, with the same binding
# (ncclX weak, pncclX strong at the same address, ncclResetDebugInitInternal
# strong), no symbol versions, and nothing else except ferry* extensions.
set -u
real=$1 ours=$2
fail=0
err() { echo "FAIL: $*"; fail=1; }

for lib in "$real" "$ours"; do
  [[ -r $lib ]] || { echo "FAIL: cannot read $lib"; exit 1; }
done
# "<address> <type> <name>" lines of the dynamic symbol table, defined only.
dyn() { nm -D --defined-only "$1" | awk 'NF == 3' | sort -k3; }
real_syms=$(dyn "$real") || exit 1
ours_syms=$(dyn "$ours") || exit 1

n_real=$(grep -c . <<<"$real_syms")
[[ $n_real -eq 105 ]] || err "expected 105 symbols in $real, found $n_real (not NCCL 2.28.9?)"

# Same names with the same type letters.
typed() { awk '$3 ~ /^p?nccl/ {print $2, $3}' | sort; }
if ! diff -u --label NVIDIA --label Ferry <(typed <<<"$real_syms") <(typed <<<"$ours_syms"); then
  err "nccl*/pnccl* exports differ (lines are '<nm type> <name>')"
fi

# Every weak ncclX sits at the address of its pnccl twin.
check_twins() {
  awk '{addr[$3] = $1; type[$3] = $2}
       END {for (n in type) if (type[n] == "W") {
              if (!(("p" n) in addr)) print "no p-twin for " n;
              else if (addr["p" n] != addr[n]) print n " and p" n " have different addresses";
            }}' <<<"$1"
}
problems=$(check_twins "$ours_syms")
[[ -z $problems ]] || err "$(basename "$ours"): $problems"

# Nothing else leaks: the only other names allowed are ferry* functions.
others=$(awk '$3 !~ /^p?nccl/ {print $2, $3}' <<<"$ours_syms")
bad=$(awk '$2 !~ /^ferry[A-Za-z0-9_]*$/ || $1 != "T"' <<<"$others")
[[ -z $bad ]] || err "unexpected exports:"$'\n'"$bad"
for f in ferryGetVersion ferryVersionString; do
  grep -qx "T $f" <<<"$others" || err "$f is not exported"
done

# NCCL's symbols are unversioned; so must ours be.
if readelf -V --wide "$ours" | grep -q '\.gnu\.version_d'; then
  err "$ours defines symbol versions"
fi

if [[ $fail -eq 0 ]]; then
  echo "OK: $(grep -c . <<<"$ours_syms") exports; nccl*/pnccl* identical to NVIDIA's $n_real"
fi
exit $fail
