#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs dependencies, then
#   1. compile-and-link checks of the GPU backends (CUDA sm_90 with nvcc, HIP gfx90a with hipcc),
#   2. the suite under AddressSanitizer + UndefinedBehaviorSanitizer,
#   3. the suite on the plain build (last, so the run ends with ctest's summary).
# Options through the environment: GDTE_TEST_QUICK=1 skips stages 1 and 2.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
jobs=$(nproc)
common=(-G Ninja -DGDTE_WERROR=ON)

if [ "${GDTE_TEST_QUICK:-0}" != 1 ]; then
  nvcc_bin=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
  if [ -n "$nvcc_bin" ]; then
    echo "== CUDA backend: compile and link (sm_90) =="
    cmake -S . -B build-ci-cuda "${common[@]}" -DGDTE_GPU=CUDA -DCMAKE_CUDA_COMPILER="$nvcc_bin" \
          -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
    cmake --build build-ci-cuda -j "$jobs"
    # No GPU here: the GPU tests must skip, the rest must pass with the CUDA build too.
    (cd build-ci-cuda && ctest -j "$jobs" --output-on-failure -LE "slow")
  else
    echo "== CUDA backend: nvcc not found, compile check skipped =="
  fi
  if command -v hipcc >/dev/null; then
    echo "== HIP backend: compile and link (gfx90a) =="
    cmake -S . -B build-ci-hip "${common[@]}" -DGDTE_GPU=HIP -DGDTE_HIP_ARCH=gfx90a -DGDTE_BUILD_TESTS=ON >/dev/null
    cmake --build build-ci-hip -j "$jobs"
  fi
  echo "== sanitizers: address,undefined (clang, with the libFuzzer target) =="
  cmake -S . -B build-ci-asan "${common[@]}" -DGDTE_GPU=NONE -DGDTE_SANITIZE=address,undefined \
        -DCMAKE_C_COMPILER=clang -DGDTE_FUZZ=ON >/dev/null
  cmake --build build-ci-asan -j "$jobs"
  # The suppressions name Open MPI's entry points: they need full allocation stacks.
  (cd build-ci-asan && ASAN_OPTIONS=detect_leaks=1 \
      LSAN_OPTIONS=suppressions=$PWD/../tests/engine/lsan-openmpi.supp:fast_unwind_on_malloc=0:print_suppressions=0 \
      ctest -j "$jobs" --output-on-failure)
  secs=${GDTE_FUZZ_SECONDS:-120}
  echo "== libFuzzer: fuzz_pack for ${secs}s against MPI_Pack =="
  mkdir -p build-ci-asan/fuzz-corpus
  (cd build-ci-asan && ASAN_OPTIONS=detect_leaks=0 OMPI_MCA_btl=self OMPI_MCA_pml=ob1 \
      ./tests/fuzz/fuzz_pack -max_total_time="$secs" -print_final_stats=1 fuzz-corpus ../tests/fuzz/corpus 2>&1 \
      | grep -E "stat::number_of_executed_units|stat::peak_rss|MISMATCH|ERROR|Done" ) || { echo "fuzzing failed"; exit 1; }
fi

echo "== install, then build an outside project against it (CMake package and pkg-config) =="
cmake -S . -B build-ci-inst "${common[@]}" -DGDTE_GPU=NONE -DGDTE_BUILD_TESTS=OFF -DGDTE_BUILD_BENCH=OFF \
      -DCMAKE_INSTALL_PREFIX="$PWD/build-ci-inst/prefix" >/dev/null
cmake --build build-ci-inst -j "$jobs" >/dev/null
cmake --install build-ci-inst >/dev/null
cmake -S examples/consumer -B build-ci-inst/consumer -G Ninja -DCMAKE_PREFIX_PATH="$PWD/build-ci-inst/prefix" >/dev/null
cmake --build build-ci-inst/consumer >/dev/null
LD_LIBRARY_PATH="$PWD/build-ci-inst/prefix/lib" ./build-ci-inst/consumer/consumer
PKG_CONFIG_PATH="$PWD/build-ci-inst/prefix/lib/pkgconfig" \
  cc examples/consumer/consumer.c $(PKG_CONFIG_PATH="$PWD/build-ci-inst/prefix/lib/pkgconfig" pkg-config --cflags --libs gdte) \
     -o build-ci-inst/consumer-pc
LD_LIBRARY_PATH="$PWD/build-ci-inst/prefix/lib" ./build-ci-inst/consumer-pc

echo "== main build and full suite =="
cmake -S . -B build-ci "${common[@]}" -DGDTE_GPU=NONE >/dev/null
cmake --build build-ci -j "$jobs"
cd build-ci && ctest -j "$jobs" --output-on-failure
