#!/usr/bin/env bash
# Installs what gdte needs on Debian 12 (idempotent). Run as root or with sudo available.
set -euo pipefail
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
pkgs=(cmake ninja-build gcc g++ make pkg-config git
      libopenmpi-dev openmpi-bin           # MPI: oracle, MPI layer, tests
      libucx-dev ucx-utils                 # UCX: protocols
      uthash-dev                           # hash tables
      clang libclang-rt-14-dev llvm        # sanitizers, libFuzzer, llvm-symbolizer
      hipcc libamdhip64-dev                # HIP compile check (AMD)
      python3 python3-matplotlib)          # plots
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: dependencies present"
