#!/usr/bin/env bash
# Installs the Debian packages Ferry builds and tests with. Idempotent.
set -euo pipefail
pkgs=(cmake ninja-build g++ make pkg-config libgtest-dev libgmock-dev libbenchmark-dev
      openmpi-bin libopenmpi-dev libhwloc-dev iproute2 libgloo-dev libucx-dev python3
      clang libclang-rt-dev   # clang + libFuzzer/ASan/UBSan runtimes: tools/fuzz-ci.sh
      libfabric-dev)          # perf/fabric's fi_bw baseline (libfabric's tcp provider)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
