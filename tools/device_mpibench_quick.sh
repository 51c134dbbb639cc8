#!/bin/bash
# A quick bench/mpi run on the device (gdte_mpi and mpibench built alone, plain Open MPI, one
# configuration): used where a whole tools/device_run.sh section would not fit the device time.
# Run by the device tool from the repository root with OUT set; carry .deps.

B=build-q; mkdir -p $B/mpi-lib
lib=$(ldconfig -p | awk '$1 == "libmpi.so.40" {print $NF; exit}'); ln -sf "$lib" $B/mpi-lib/libmpi.so
cmake -S . -B $B -G Ninja -DGDTE_GPU=CUDA -DCMAKE_CUDA_ARCHITECTURES=90 -DGDTE_WITH_MPI=ON -DGDTE_WITH_UCX=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUTHASH_INCLUDE_DIR=$PWD/.deps/uthash/include -DMPI_C_COMPILER=NOTFOUND -DMPI_C_HEADER_DIR=$PWD/.deps/mpi/include -DMPI_C_LIB_NAMES=mpi -DMPI_mpi_LIBRARY=$PWD/$B/mpi-lib/libmpi.so -DMPIEXEC_EXECUTABLE=$(command -v mpirun) > $OUT/q_build.log 2>&1 && cmake --build $B -j 16 --target gdte_mpi mpibench >> $OUT/q_build.log 2>&1 || { tail -20 $OUT/q_build.log; exit 1; }
export GDTETEST_COMMIT=${GDTETEST_COMMIT:-unknown} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
timeout 200 mpirun -np 2 --oversubscribe --bind-to none -x GDTETEST_COMMIT -x LD_PRELOAD=$PWD/$B/src/mpi/libgdte_mpi.so $B/bench/mpi/mpibench --mem device --mpi-label plain --csv $OUT/mpi-quick.csv --sizes 1K,64K,1M,4M,16M --budget 0.1 > $OUT/q_bench.log 2>&1
grep -v "^\[gdte" $OUT/q_bench.log | tail -40
