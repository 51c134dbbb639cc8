#!/usr/bin/env bash
# On the GPU machine, from the repository root: build the CUDA backend, run the GPU-labelled
# tests, run them again under compute-sanitizer (memcheck, racecheck, synccheck), run
# bench/pack, and leave every log and CSV under $OUT (default ./device-out). A short summary
# table comes last.
#
# Sections run in order; pick some with DEVICE_SECTIONS="build gpu_tests ..." (default: all of
# DEFAULT_SECTIONS). To add one, write a function section_<name> that appends to $OUT and
# calls `record <name> <status> <note>`, and add <name> to DEFAULT_SECTIONS.
#
# The machine has cmake, ninja and nvcc but no MPI development setup and no UCX headers: the
# build is configured with -DGDTE_WITH_MPI=OFF -DGDTE_WITH_UCX=OFF. uthash is taken from
# .deps/uthash/include when tools/device_deps.sh prepared it (carry .deps with the call).
# Environment: GDTE_COMMIT (recorded in the CSV), DEVICE_JOBS, DEVICE_BUILD_DIR,
# DEVICE_SANITIZER_ITERS (random types per test under the sanitizers, default 12),
# DEVICE_SANITIZER_TIMEOUT / DEVICE_BENCH_TIMEOUT (seconds per run), BENCH_LAYOUTS (a,b,...).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
BUILD=${DEVICE_BUILD_DIR:-build-device}
JOBS=${DEVICE_JOBS:-$(nproc)}
DEFAULT_SECTIONS="build gpu_tests sanitizers bench_pack"
SECTIONS=${DEVICE_SECTIONS:-$DEFAULT_SECTIONS}
export GDTE_COMMIT=${GDTE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
BUILD_OK=0

record() { printf '%-22s %-6s %s\n' "$1" "$2" "$3" | tee -a "$SUMMARY"; }

section_build() {
  local log="$OUT/build.log" extra=()
  [ -d .deps/uthash/include ] && extra+=(-DUTHASH_INCLUDE_DIR="$PWD/.deps/uthash/include")
  {
    echo "== $(date -u +%FT%TZ) $(hostname)"
    nvidia-smi -L 2>&1 || true
    nvcc --version 2>&1 | tail -1
    cmake --version | head -1
    cmake -S . -B "$BUILD" -G Ninja -DGDTE_GPU=CUDA -DCMAKE_CUDA_ARCHITECTURES=90 -DGDTE_WITH_MPI=OFF \
          -DGDTE_WITH_UCX=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo "${extra[@]}" &&
      cmake --build "$BUILD" -j "$JOBS"
  } >"$log" 2>&1
  if [ $? -eq 0 ]; then BUILD_OK=1; record build ok "$BUILD (CUDA sm_90)"; else record build FAIL "see build.log"; tail -30 "$log"; fi
}

section_gpu_tests() {
  [ "$BUILD_OK" = 1 ] || { record gpu_tests skip "no build"; return; }
  local log="$OUT/ctest_gpu.log"
  (cd "$BUILD" && ctest -L '^gpu$' --output-on-failure -V --timeout 300) >"$log" 2>&1
  local rc=$?
  local res
  res=$(grep -E "tests passed|tests failed" "$log" | tail -1)
  if grep -q "(Skipped)" "$log"; then record gpu_tests FAIL "skipped on a GPU machine: $res"; return; fi
  [ $rc -eq 0 ] && record gpu_tests ok "$res" || record gpu_tests FAIL "$res"
}

section_sanitizers() {
  [ "$BUILD_OK" = 1 ] || { record sanitizers skip "no build"; return; }
  local log="$OUT/sanitizers.log" cs
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  [ -n "$cs" ] || { record sanitizers skip "compute-sanitizer not found"; return; }
  : >"$log"
  export GDTE_TEST_ITERS=${DEVICE_SANITIZER_ITERS:-12} GDTE_TEST_UNDER_SANITIZER=1
  for tool in memcheck racecheck synccheck; do
    for t in test_gpu_kernels test_gpu_api; do
      local opts=(--tool "$tool" --error-exitcode 99)
      [ "$tool" = memcheck ] && opts+=(--leak-check full)
      echo "== $tool $t (GDTE_TEST_ITERS=$GDTE_TEST_ITERS)" >>"$log"
      timeout "${DEVICE_SANITIZER_TIMEOUT:-240}" "$cs" "${opts[@]}" "$BUILD/tests/gpu/$t" >>"$log" 2>&1
      local rc=$?
      local errs
      errs=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
      [ $rc -eq 0 ] && record "$tool:$t" ok "$errs" || record "$tool:$t" FAIL "rc=$rc $errs"
    done
  done
  unset GDTE_TEST_ITERS GDTE_TEST_UNDER_SANITIZER
}

section_bench_pack() {
  [ "$BUILD_OK" = 1 ] || { record bench_pack skip "no build"; return; }
  local log="$OUT/bench_pack.log"
  timeout "${DEVICE_BENCH_TIMEOUT:-300}" "$BUILD/bench/pack/pack_bench" "$OUT/pack.csv" ${BENCH_LAYOUTS:-} >"$log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] && record bench_pack ok "pack.csv ($(($(wc -l <"$OUT/pack.csv") - 1)) rows)" || record bench_pack FAIL "rc=$rc"
  grep -E "first use|bound|VERIFY" "$log" | sed 's/^ */  /' | tee -a "$SUMMARY"
}

for s in $SECTIONS; do
  if declare -F "section_$s" >/dev/null; then "section_$s"; else record "$s" skip "no such section"; fi
done

echo
echo "== summary ($GDTE_COMMIT) =="
cat "$SUMMARY"
if [ -f "$OUT/pack.csv" ]; then
  echo
  echo "== bench/pack: gdte (GB/s of packed bytes, ratio to cudaMemcpy of the same bytes) =="
  awk -F, 'NR > 1 && ($4 == "gdte" || $4 ~ /first_use|cached_wall/) {
             printf "%-10s %-16s %-6s %9.1f GB/s  x%s\n", $3, $4, $5, $8, $9 }' "$OUT/pack.csv"
fi
grep -q FAIL "$SUMMARY" && exit 1 || exit 0
