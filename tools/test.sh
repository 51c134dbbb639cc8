#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs dependencies, then
#   1. compile-and-link checks of the GPU backends (CUDA sm_90 with nvcc, HIP gfx90a with hipcc),
#   2. the suite under AddressSanitizer + UndefinedBehaviorSanitizer,
#   3. install, then build the installed examples and outside projects against it,
#   4. the API reference (Doxygen, warnings are errors),
#   5. the suite on the plain build (last, so the run ends with ctest's summary).
# Options through the environment: GDTETEST_QUICK=1 skips stages 1 and 2;
# GDTETEST_FUZZ_SECONDS (default 120) is the fuzzing time.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
jobs=$(nproc)
common=(-G Ninja -DGDTE_WERROR=ON)

if [ "${GDTETEST_QUICK:-0}" != 1 ]; then
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
  # The suppressions name Open MPI's entry points: they need full allocation stacks, symbolized
  # by a symbolizer that the ranks' LD_PRELOAD cannot break (tools/asan/symbolizer.c says why).
  mkdir -p build-ci-asan/asan-tools
  cc -static -O2 -o build-ci-asan/asan-tools/llvm-symbolizer tools/asan/symbolizer.c
  (cd build-ci-asan && ASAN_OPTIONS=detect_leaks=1:external_symbolizer_path=$PWD/asan-tools/llvm-symbolizer \
      LSAN_OPTIONS=suppressions=$PWD/../tests/engine/lsan-openmpi.supp:fast_unwind_on_malloc=0:print_suppressions=0 \
      ctest -j "$jobs" --output-on-failure)
  secs=${GDTETEST_FUZZ_SECONDS:-120}
  echo "== libFuzzer: fuzz_pack for ${secs}s against MPI_Pack =="
  mkdir -p build-ci-asan/fuzz-corpus
  (cd build-ci-asan && ASAN_OPTIONS=detect_leaks=0 OMPI_MCA_btl=self OMPI_MCA_pml=ob1 \
      ./tests/fuzz/fuzz_pack -max_total_time="$secs" -print_final_stats=1 fuzz-corpus ../tests/fuzz/corpus 2>&1 \
      | grep -E "stat::number_of_executed_units|stat::peak_rss|MISMATCH|ERROR|Done" ) || { echo "fuzzing failed"; exit 1; }
  # On demand (GDTETEST_TSAN=1), not by default: the interposer under MPI_THREAD_MULTIPLE, its
  # tables and progress passes shared by threads (a report fails the test: TSan exits 66). Only
  # the interposer and the threaded programs are built: the kernel emulator's tests carry ASan
  # of their own. Open MPI's own locking reads as races from outside: tests/mpi/tsan-openmpi.supp,
  # and ignore_noninstrumented_modules. Not in every CI run because TSan itself can deadlock when
  # it reports while Open MPI unloads its components at MPI_Finalize (seen: a report's module
  # lookup waiting on the loader lock that dlclose holds, dlclose waiting on TSan's slot lock).
  if [ "${GDTETEST_TSAN:-0}" = 1 ]; then
    echo "== ThreadSanitizer: the interposer's threaded tests (clang) =="
    cmake -S . -B build-ci-tsan "${common[@]}" -DGDTE_GPU=NONE -DGDTE_SANITIZE=thread -DCMAKE_C_COMPILER=clang \
          -DGDTE_BUILD_BENCH=OFF >/dev/null
    cmake --build build-ci-tsan -j "$jobs" --target gdte_mpi threads_test random_test outside_p2p_test
    (cd build-ci-tsan && TSAN_OPTIONS="suppressions=$PWD/../tests/mpi/tsan-openmpi.supp report_signal_unsafe=0 history_size=4 symbolize=0 ignore_noninstrumented_modules=1" \
        ctest -j "$jobs" --output-on-failure -R "^mpi_(threads_np2|random_threads_np2|frag_random_threads_np2|packed_random_threads_np2|packed_threads_np2|frag_threads_np2|outside_p2p_np2)$")
  fi
fi

echo "== install, then build the installed examples and outside projects against it =="
rm -rf build-ci-inst/prefix build-ci-inst/examples
cmake -S . -B build-ci-inst "${common[@]}" -DGDTE_GPU=NONE -DGDTE_BUILD_TESTS=OFF -DGDTE_BUILD_BENCH=OFF \
      -DCMAKE_INSTALL_PREFIX="$PWD/build-ci-inst/prefix" >/dev/null
cmake --build build-ci-inst -j "$jobs" >/dev/null
cmake --install build-ci-inst >/dev/null
prefix="$PWD/build-ci-inst/prefix"
lib="$prefix/lib"
export PKG_CONFIG_PATH="$lib/pkgconfig"
for f in libgdte.so.0 libgdte_mpi.so.0 libgdte_ucx.so.0; do  # versioned sonames
  readelf -d "$lib/$f" | grep -q "SONAME.*\[$f\]" || { echo "install: $f lacks its soname"; exit 1; }
done
for f in LICENSE CHANGELOG.md README.md; do [ -f "$prefix/share/doc/gdte/$f" ] || { echo "install: no $f"; exit 1; }; done
[ -f "$prefix/share/man/man1/gdte_info.1" ] || { echo "install: no gdte_info man page"; exit 1; }
# The installed examples, built by their own CMake file (find_package(gdte COMPONENTS ucx), MPI).
cmake -S "$prefix/share/gdte/examples" -B build-ci-inst/examples -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build build-ci-inst/examples >/dev/null
ex=build-ci-inst/examples
LD_LIBRARY_PATH="$lib" "$ex/consumer"
LD_LIBRARY_PATH="$lib" "$ex/partial_pack"
mpirun -np 2 -x LD_PRELOAD="$lib/libgdte_mpi.so" -x GDTE_FAKE_DEVICE=1 "$ex/gdte_demo" 16 64 \
  | grep -E "transpose ping-pong +host memory posing as device memory .* yes"
mpirun -np 2 -x LD_LIBRARY_PATH="$lib" "$ex/ucx_generic_dt"
# An outside CMake project, and pkg-config for gdte and gdte_ucx.
cmake -S examples/consumer -B build-ci-inst/consumer -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build build-ci-inst/consumer >/dev/null
LD_LIBRARY_PATH="$lib" ./build-ci-inst/consumer/consumer
cc examples/consumer/consumer.c $(pkg-config --cflags --libs gdte) -o build-ci-inst/consumer-pc
LD_LIBRARY_PATH="$lib" ./build-ci-inst/consumer-pc
mpicc examples/mpi_backend/ucx_generic_dt.c $(pkg-config --cflags --libs gdte_ucx) -o build-ci-inst/ucx_generic_dt-pc
mpirun -np 2 -x LD_LIBRARY_PATH="$lib" ./build-ci-inst/ucx_generic_dt-pc
unset PKG_CONFIG_PATH

echo "== main build and full suite =="
cmake -S . -B build-ci "${common[@]}" -DGDTE_GPU=NONE >/dev/null
cmake --build build-ci -j "$jobs"
echo "== API reference (Doxygen; a warning fails the step) =="
cmake --build build-ci --target doc
cd build-ci && ctest -j "$jobs" --output-on-failure
