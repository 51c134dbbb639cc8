#!/usr/bin/env bash
# The main job: install what is needed, build gdte, and run the 2-rank demo (a 3-D halo
# exchange and a transpose ping-pong with derived datatypes) through the interposer, on device
# buffers when a GPU is present, else on the host backend. Ends with a table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake -S . -B build-demo -G Ninja -DCMAKE_BUILD_TYPE=Release -DGDTE_BUILD_BENCH=OFF >/dev/null
cmake --build build-demo -j "$(nproc)" --target gdte_mpi gdte_demo gdte_info >/dev/null
./build-demo/tools/gdte_info | sed -n '1,12p'
fake=1
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then fake=0; fi
np_flags=(-np 2)
[ "$(nproc)" -lt 2 ] || true
mpirun "${np_flags[@]}" --oversubscribe \
  -x LD_PRELOAD="$PWD/build-demo/src/mpi/libgdte_mpi.so" -x GDTE_FAKE_DEVICE=$fake \
  ./build-demo/examples/demo/gdte_demo "${@}"
