#!/bin/bash
# A quick bench/mpi run on the device (gdte_mpi and mpibench built alone, plain Open MPI): used
# where a whole tools/device_run.sh section would not fit the device time. Run by the device
# tool from the repository root with OUT set; carry .deps.
#   QUICK_SIZES     sizes (default 1K,64K,1M,4M,16M); QUICK_BUDGET seconds per measurement (0.1)
#   QUICK_VARIANTS  space-separated label:VAR=VAL,VAR=VAL... runs, each with its own CSV
#                   ($OUT/mpi-quick-<label>.csv) and log; default one run "default:" written
#                   to $OUT/mpi-quick.csv as before.

B=build-q; mkdir -p $B/mpi-lib
lib=$(ldconfig -p | awk '$1 == "libmpi.so.40" {print $NF; exit}'); ln -sf "$lib" $B/mpi-lib/libmpi.so
cmake -S . -B $B -G Ninja -DGDTE_GPU=CUDA -DCMAKE_CUDA_ARCHITECTURES=90 -DGDTE_WITH_MPI=ON -DGDTE_WITH_UCX=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUTHASH_INCLUDE_DIR=$PWD/.deps/uthash/include -DMPI_C_COMPILER=NOTFOUND -DMPI_C_HEADER_DIR=$PWD/.deps/mpi/include -DMPI_C_LIB_NAMES=mpi -DMPI_mpi_LIBRARY=$PWD/$B/mpi-lib/libmpi.so -DMPIEXEC_EXECUTABLE=$(command -v mpirun) > $OUT/q_build.log 2>&1 && cmake --build $B -j 16 --target gdte_mpi mpibench >> $OUT/q_build.log 2>&1 || { tail -20 $OUT/q_build.log; exit 1; }
export GDTETEST_COMMIT=${GDTETEST_COMMIT:-unknown} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
sizes=${QUICK_SIZES:-1K,64K,1M,4M,16M}
for v in ${QUICK_VARIANTS:-default:}; do
    label=${v%%:*} envs=${v#*:} xs=()
    if [ "$label" = default ] && [ -z "$QUICK_VARIANTS" ]; then csv=$OUT/mpi-quick.csv log=$OUT/q_bench.log
    else csv=$OUT/mpi-quick-$label.csv log=$OUT/q_bench-$label.log; fi
    for kv in ${envs//,/ }; do export "$kv"; xs+=(-x "${kv%%=*}"); done
    echo "== variant $label ($envs)"
    timeout 200 mpirun -np 2 --oversubscribe --bind-to none -x GDTETEST_COMMIT "${xs[@]}" -x LD_PRELOAD=$PWD/$B/src/mpi/libgdte_mpi.so $B/bench/mpi/mpibench --mem device --mpi-label plain --csv $csv --sizes $sizes --budget ${QUICK_BUDGET:-0.1} > $log 2>&1
    grep -v "^\[gdte" $log | tail -40
    for kv in ${envs//,/ }; do unset "${kv%%=*}"; done
done
