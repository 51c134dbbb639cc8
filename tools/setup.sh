#!/usr/bin/env bash
# Installs what gdte needs on Debian 12 (idempotent). Run as root or with sudo available.
#   tools/setup.sh          everything CI uses (tools/test.sh): the demo's set plus sanitizers,
#                           libFuzzer, the HIP compile check, Doxygen and the plotting tools
#   tools/setup.sh --demo   only what tools/demo.sh needs to build and run the demo
set -euo pipefail
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
demo=(cmake ninja-build gcc make pkg-config       # build
      libopenmpi-dev openmpi-bin                   # MPI: the MPI layer and mpirun
      libucx-dev                                   # UCX: protocols
      uthash-dev)                                  # hash tables and lists
full=(g++ git                                      # emulated-kernel test (C++), build revision
      libc6-dev                                    # static libc: the sanitizer tests' symbolizer wrapper
      ucx-utils                                    # ucx_info, to compare with gdte_info
      clang libclang-rt-14-dev llvm                # sanitizers, libFuzzer, llvm-symbolizer
      hipcc libamdhip64-dev                        # HIP compile check (AMD)
      doxygen                                      # API reference, built in CI without warnings
      python3 python3-matplotlib)                  # plots
case "${1:-}" in
  --demo) pkgs=("${demo[@]}") ;;
  "") pkgs=("${demo[@]}" "${full[@]}") ;;
  *) echo "usage: $0 [--demo]" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: dependencies present${1:+ ($1)}"
