#!/usr/bin/env bash
# Prepares .deps/ (git-ignored) with what the GPU machine lacks, to be carried there with the
# device tool's `carry`: Debian's UCX headers (the machine has UCX 1.16 runtime libraries but
# no headers; we compile against Debian's 1.13 headers and link the machine's own libucp.so.0,
# the same soname, so only one UCX is ever loaded), uthash, and a ucx.pc pointing at them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh >/dev/null
rm -rf .deps && mkdir -p .deps/ucx/include .deps/ucx/lib/pkgconfig .deps/uthash/include
cp -r /usr/include/ucp /usr/include/ucs /usr/include/uct /usr/include/ucm .deps/ucx/include/
cp /usr/include/ut*.h .deps/uthash/include/
# Open MPI's C headers (4.1.4), used only if the GPU machine has no mpi.h of its own; we then
# link its libmpi.so.40 (4.1.6, same soname and ABI line).
mkdir -p .deps/mpi/include
cp /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h /usr/lib/x86_64-linux-gnu/openmpi/include/mpi_portable_platform.h \
   /usr/lib/x86_64-linux-gnu/openmpi/include/mpi-ext.h .deps/mpi/include/
cat > .deps/ucx/lib/pkgconfig/ucx.pc <<'PC'
prefix=${pcfiledir}/../..
includedir=${prefix}/include
libdir=${prefix}/lib
Name: ucx
Description: UCX headers from Debian 12 (1.13), linked against the host's libucp.so.0
Version: 1.13.1
Cflags: -I${includedir}
Libs: -L${libdir} -lucp -luct -lucs -lucm
PC
du -sh .deps
