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
# Both ranks on one GPU: under MPS, as sites run several ranks per GPU. Without it the two
# processes' GPU work takes turns on the GPU, ~150 us a switch, which device messages of a few
# hundred KiB cannot hide (docs/PERFORMANCE.md). A private MPS daemon of this user is started for
# the run and quit after it (the GPU's settings are not touched); GDTE_DEMO_MPS=0 runs without,
# and where an MPS daemon already serves this user it is used as it is.
mps_dir=""
stop_mps() { [ -n "$mps_dir" ] && { echo quit | nvidia-cuda-mps-control >/dev/null 2>&1; sleep 1; rm -rf "$mps_dir"; }; }
trap stop_mps EXIT
ngpu=$(./build-demo/tools/gdte_info --parsable | sed -n 's/^backends:gpu_devices:\([0-9]*\).*/\1/p' | head -1)
if [ $fake = 0 ] && [ "${ngpu:-0}" -lt 2 ] && [ "${GDTE_DEMO_MPS:-1}" != 0 ] && command -v nvidia-cuda-mps-control >/dev/null &&
  ! echo get_server_list | nvidia-cuda-mps-control >/dev/null 2>&1; then
  mps_dir=$(mktemp -d /tmp/gdte-demo-mps.XXXXXX)
  export CUDA_MPS_PIPE_DIRECTORY=$mps_dir/pipe CUDA_MPS_LOG_DIRECTORY=$mps_dir/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d; then
    echo "both ranks share one GPU: running under MPS (a private daemon for this run; GDTE_DEMO_MPS=0: without)"
  else
    rm -rf "$mps_dir"; mps_dir=""; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  fi
fi
# --oversubscribe: two ranks even on a one-core machine.
mpirun -np 2 --oversubscribe \
  -x LD_PRELOAD="$PWD/build-demo/src/mpi/libgdte_mpi.so" -x GDTE_FAKE_DEVICE=$fake \
  ./build-demo/examples/demo/gdte_demo "${@}"
