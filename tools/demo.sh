#!/usr/bin/env bash
# The main job: install what the demo needs, build gdte, and run the 2-rank demo (a 3-D halo
# exchange and a transpose ping-pong with derived datatypes) through the interposer, on device
# buffers when gdte sees a GPU, else on host memory posing as device memory. Ends with a table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh --demo
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake -S . -B build-demo -G Ninja -DCMAKE_BUILD_TYPE=Release -DGDTE_BUILD_TESTS=OFF -DGDTE_BUILD_BENCH=OFF >/dev/null
cmake --build build-demo -j "$(nproc)" --target gdte_mpi gdte_demo gdte_info >/dev/null
./build-demo/tools/gdte_info | sed -n '1,10p'
# Real device buffers only when this build of gdte sees a GPU; otherwise the fake device.
fake=1
if ./build-demo/tools/gdte_info --parsable | grep -q '^backends:gpu_devices:[1-9]'; then fake=0; fi
# --oversubscribe: two ranks even on a one-core machine.
mpirun -np 2 --oversubscribe \
  -x LD_PRELOAD="$PWD/build-demo/src/mpi/libgdte_mpi.so" -x GDTE_FAKE_DEVICE=$fake \
  ./build-demo/examples/demo/gdte_demo "${@}"
