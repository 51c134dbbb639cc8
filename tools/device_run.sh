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
# Environment: GDTETEST_COMMIT (recorded in the CSV), DEVICE_JOBS, DEVICE_BUILD_DIR,
# DEVICE_SANITIZER_ITERS (random types per test under the sanitizers, default 12),
# DEVICE_SANITIZER_TIMEOUT / DEVICE_BENCH_TIMEOUT (seconds per run), BENCH_LAYOUTS (a,b,...).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
BUILD=${DEVICE_BUILD_DIR:-build-device}
JOBS=${DEVICE_JOBS:-$(nproc)}
DEFAULT_SECTIONS="build gpu_tests sanitizers bench_memquery bench_pack"
SECTIONS=${DEVICE_SECTIONS:-$DEFAULT_SECTIONS}
# The commit recorded in CSVs and logs: pass GDTETEST_COMMIT from the checkout the tree came from.
# Without it, HEAD here, marked "+dirty" when the tracked files differ from it (the GPU machine's
# copy of .git may lag the working tree it was given).
if [ -z "${GDTETEST_COMMIT:-}" ]; then
  GDTETEST_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  git diff --quiet HEAD 2>/dev/null || GDTETEST_COMMIT="$GDTETEST_COMMIT+dirty"
fi
export GDTETEST_COMMIT
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
  export GDTETEST_ITERS=${DEVICE_SANITIZER_ITERS:-12} GDTETEST_UNDER_SANITIZER=1
  for tool in memcheck racecheck synccheck; do
    for t in test_gpu_kernels test_gpu_api; do
      local opts=(--tool "$tool" --error-exitcode 99)
      [ "$tool" = memcheck ] && opts+=(--leak-check full)
      echo "== $tool $t (GDTETEST_ITERS=$GDTETEST_ITERS)" >>"$log"
      timeout "${DEVICE_SANITIZER_TIMEOUT:-240}" "$cs" "${opts[@]}" "$BUILD/tests/gpu/$t" >>"$log" 2>&1
      local rc=$?
      local errs
      errs=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
      [ $rc -eq 0 ] && record "$tool:$t" ok "$errs" || record "$tool:$t" FAIL "rc=$rc $errs"
    done
  done
  unset GDTETEST_ITERS GDTETEST_UNDER_SANITIZER
}

section_bench_memquery() {
  [ "$BUILD_OK" = 1 ] || { record bench_memquery skip "no build"; return; }
  local log="$OUT/bench_memquery.log"
  "$BUILD/bench/memquery/memquery_bench" "$OUT/memquery.csv" >"$log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] && record bench_memquery ok "memquery.csv" || record bench_memquery FAIL "rc=$rc"
  sed 's/^ */  /' "$log" | tee -a "$SUMMARY"
}

section_bench_pack() {
  [ "$BUILD_OK" = 1 ] || { record bench_pack skip "no build"; return; }
  local log="$OUT/bench_pack.log"
  timeout "${DEVICE_BENCH_TIMEOUT:-300}" "$BUILD/bench/pack/pack_bench" "$OUT/pack.csv" ${BENCH_LAYOUTS:-} >"$log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] && record bench_pack ok "pack.csv ($(($(wc -l <"$OUT/pack.csv") - 1)) rows)" || record bench_pack FAIL "rc=$rc"
  grep -E "first use|bound|VERIFY" "$log" | sed 's/^ */  /' | tee -a "$SUMMARY"
}

# Optional (not in DEFAULT_SECTIONS): bench/flatlab, the copy-kernel mapping lab.
# DRAM traffic of the pack kernels, read by Nsight Compute's hardware counters: for each layout
# of DEVICE_COUNTER_LAYOUTS (default struct3p,V64,face_x,face_y,T), the first two kernels
# bench/pack launches for it are its verification's pack and unpack with the default variant;
# ncu reads dram__bytes_read.sum, dram__bytes_write.sum and gpu__time_duration.sum of each
# (--clock-control none: the clocks as the benchmark sees them). Rows to
# $OUT/counters-pack.csv: layout,direction,kernel,dram_read,dram_write,ns.
section_pack_counters() {
  [ "$BUILD_OK" = 1 ] || section_build
  [ "$BUILD_OK" = 1 ] || return
  local ncu log="$OUT/pack_counters.log" csv="$OUT/counters-pack.csv" l raw
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  [ -n "$ncu" ] || { record pack_counters skip "ncu not found"; return; }
  echo "layout,direction,kernel,dram_read,dram_write,ns" >"$csv"
  : >"$log"
  for l in $(echo "${DEVICE_COUNTER_LAYOUTS:-struct3p,V64,face_x,face_y,T}" | tr , ' '); do
    raw="$OUT/ncu-$l.csv"
    timeout "${DEVICE_BENCH_TIMEOUT:-300}" "$ncu" --clock-control none --csv --page raw --print-units base \
      --kernel-name regex:'^k_(flat|periodic|strided|tiled|dev_warp|dev_thread|copy)' --launch-count 2 \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
      "$BUILD/bench/pack/pack_bench" "$OUT/ncu-bench-$l.csv" "$l" >"$raw" 2>>"$log"
    # the raw page: a header line, a units line, then one line per kernel
    python3 - "$raw" "$l" >>"$csv" 2>>"$log" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
head = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
h = rows[head]
for n, r in enumerate(rows[head + 2:head + 4]):
    g = lambda k: r[h.index(k)].replace(",", "")
    print(",".join([sys.argv[2], "pack" if n == 0 else "unpack", g("Kernel Name").split("(")[0].split("<")[0],
                    g("dram__bytes_read.sum"), g("dram__bytes_write.sum"), g("gpu__time_duration.sum")]))
PY
  done
  cat "$csv"
  [ "$(wc -l <"$csv")" -gt 1 ] && record pack_counters ok "$(($(wc -l <"$csv") - 1)) kernels" ||
    record pack_counters FAIL "see pack_counters.log"
}

section_flatlab() {
  [ "$BUILD_OK" = 1 ] || { record flatlab skip "no build"; return; }
  local log="$OUT/flatlab.log"
  timeout "${DEVICE_BENCH_TIMEOUT:-300}" "$BUILD/bench/flatlab/flatlab" "$OUT/flatlab.csv" >"$log" 2>&1 &&
    timeout "${DEVICE_BENCH_TIMEOUT:-300}" "$BUILD/bench/flatlab/flatlab" "$OUT/flatlab-small.csv" small >>"$log" 2>&1 &&
    tail -n +2 "$OUT/flatlab-small.csv" >>"$OUT/flatlab.csv"
  local rc=$?
  [ $rc -eq 0 ] && record flatlab ok "flatlab.csv ($(($(wc -l <"$OUT/flatlab.csv") - 1)) rows)" || record flatlab FAIL "rc=$rc"
}

# Optional: V64's half-line write and read patterns alone against full lines (flatlab
# writeprobe): the hardware's own cost of the pattern, V64 unpack's bound. $OUT/writeprobe.csv.
section_writeprobe() {
  [ "$BUILD_OK" = 1 ] || { record writeprobe skip "no build"; return; }
  local log="$OUT/writeprobe.log"
  timeout "${DEVICE_BENCH_TIMEOUT:-300}" "$BUILD/bench/flatlab/flatlab" "$OUT/writeprobe.csv" writeprobe >"$log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] && record writeprobe ok "writeprobe.csv" || record writeprobe FAIL "rc=$rc"
  sed 's/^/  /' "$log" | tee -a "$SUMMARY"
}

# ==== protocols block (src/protocols, tests/protocols, bench/pingpong) =========================
# Kept apart from the sections above. A second build tree, with UCX: headers from .deps/ucx
# (tools/device_deps.sh; carry .deps), linked to the machine's own UCX runtime (libucp.so.0,
# found with ldconfig and given link names in $PROTO_BUILD/ucx-lib), without MPI: the test and
# the benchmark fork themselves into two processes (tests/protocols/twoproc.h).
# Sections: protocols (2-rank tests: one GPU, and two GPUs when there are two), bench_pingpong
# (CSV in $OUT/pingpong-<device>.csv, the layout of bench/results). Per-run logs go into one
# archive per section ($OUT/protocols-logs.tar.gz, $OUT/pingpong-logs.tar.gz: the device tool
# returns few files), the summary names each run. Sized so that "protocols bench_pingpong"
# together, build included, stays under 5 minutes on 2 H200s. UCX: shared memory
# (UCX_TLS=self,sm,cma) when a quick run works with it, else UCX's own choice (TCP); every log
# starts with the transports its endpoint uses. Environment: DEVICE_PROTO_BUILD_DIR,
# DEVICE_PROTO_TIMEOUT (seconds per test run, default 120), DEVICE_UCX_TLS (forces UCX_TLS),
# DEVICE_PINGPONG_SIZES (default 2048,4096), DEVICE_PINGPONG_COPY_SIZES (copy-in/out runs,
# default 2048), DEVICE_PINGPONG_ITERS (default 10), DEVICE_PINGPONG_TIMEOUT (per run, default
# 120), DEVICE_PINGPONG_RUNS ("gpus:protocol ...", default "1:rdma 1:rdma_ring 1:copyinout
# 2:rdma 2:rdma_ring 2:copyinout"; rdma_ring is rdma with GDTE_RDMA_PULL=0; two-GPU runs are
# skipped on one GPU). Copy-in/out and ring runs sweep only the default and unpipelined settings.
PROTO_BUILD=${DEVICE_PROTO_BUILD_DIR:-build-device-proto}
PROTO_OK=0
PROTO_NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)

proto_build() {
  [ "$PROTO_OK" = 1 ] && return 0
  local log="$OUT/protocols_build.log" extra=()
  [ -d .deps/ucx/include ] || { record proto_build skip "no .deps/ucx: run tools/device_deps.sh here, carry .deps"; return 1; }
  [ -d .deps/uthash/include ] && extra+=(-DUTHASH_INCLUDE_DIR="$PWD/.deps/uthash/include")
  mkdir -p "$PROTO_BUILD/ucx-lib/pkgconfig"
  local l so
  for l in ucp uct ucs ucm; do
    so=$(ldconfig -p | awk -v n="lib$l.so.0" '$1 == n {print $NF; exit}')
    [ -n "$so" ] && ln -sf "$so" "$PROTO_BUILD/ucx-lib/lib$l.so"
  done
  sed "s|^libdir=.*|libdir=$PWD/$PROTO_BUILD/ucx-lib|; s|^prefix=.*|prefix=$PWD/.deps/ucx|" \
    .deps/ucx/lib/pkgconfig/ucx.pc >"$PROTO_BUILD/ucx-lib/pkgconfig/ucx.pc"
  {
    echo "== $(date -u +%FT%TZ) UCX runtime: $(ldconfig -p | grep -m1 'libucp.so.0')"
    PKG_CONFIG_PATH="$PWD/$PROTO_BUILD/ucx-lib/pkgconfig" cmake -S . -B "$PROTO_BUILD" -G Ninja -DGDTE_GPU=CUDA \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DGDTE_WITH_MPI=OFF -DGDTE_WITH_UCX=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo "${extra[@]}" &&
      cmake --build "$PROTO_BUILD" -j "$JOBS" --target proto_test pingpong
  } >"$log" 2>&1
  if [ $? -eq 0 ]; then PROTO_OK=1; record proto_build ok "$PROTO_BUILD (CUDA, UCX, no MPI)"; return 0; fi
  record proto_build FAIL "see protocols_build.log"; tail -30 "$log"; return 1
}

# Per-run logs of the protocols block: collected here, archived at the end of each section.
PROTO_LOGS="$OUT/proto-logs"
PROTO_TLS_SET=0
PROTO_TLS=()

# UCX on shared memory (posix/sysv for active messages, cma for rendezvous) when it works here;
# otherwise UCX's default (which may be TCP: copy-in/out then runs at TCP speed).
proto_pick_tls() {
  [ "$PROTO_TLS_SET" = 1 ] && return
  PROTO_TLS_SET=1
  if [ -n "${DEVICE_UCX_TLS:-}" ]; then PROTO_TLS=(UCX_TLS="$DEVICE_UCX_TLS"); return; fi
  mkdir -p "$PROTO_LOGS"
  if timeout 60 env UCX_TLS=self,sm,cma UCX_WARN_UNUSED_ENV_VARS=n GDTE_TIMEOUT=20 \
      "$PROTO_BUILD/tests/protocols/proto_test" semantics --protocol copyinout --fork >"$PROTO_LOGS/tls_probe.log" 2>&1; then
    PROTO_TLS=(UCX_TLS=self,sm,cma)
  else
    PROTO_TLS=()
  fi
  record proto_tls ok "${PROTO_TLS[*]:-UCX default} ($(grep -m2 -oE '[a-z_0-9]+/[a-z_0-9.:]+' "$PROTO_LOGS/tls_probe.log" | tr '\n' ' '))"
}

# proto_archive NAME: the section's logs into $OUT/NAME-logs.tar.gz (one file back).
proto_archive() {
  [ -d "$PROTO_LOGS" ] || return 0
  tar -C "$PROTO_LOGS" -czf "$OUT/$1-logs.tar.gz" . && rm -rf "$PROTO_LOGS"
}

# proto_run NAME ENV... -- ARGS...: one two-process run of proto_test.
proto_run() {
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  mkdir -p "$PROTO_LOGS"
  local log="$PROTO_LOGS/protocols_$name.log"
  timeout "${DEVICE_PROTO_TIMEOUT:-120}" env UCX_WARN_UNUSED_ENV_VARS=n "${PROTO_TLS[@]}" "${envs[@]}" \
    "$PROTO_BUILD/tests/protocols/proto_test" "$@" --fork >"$log" 2>&1
  local rc=$?
  local line
  line=$(grep -E "^(random|semantics|burst|ipcshare|kill|survivor)" "$log" | tail -1 | cut -c1-150)
  case $rc in
    0) record "proto:$name" ok "$line" ;;
    77) record "proto:$name" skip "$(tail -1 "$log")" ;;
    124) record "proto:$name" FAIL "timeout (${DEVICE_PROTO_TIMEOUT:-120} s)" ;;
    *) record "proto:$name" FAIL "rc=$rc, see protocols_$name.log"; grep -m5 -E "FAIL|error" "$log" | tee -a "$SUMMARY" ;;
  esac
}

section_protocols() {
  proto_build || return
  proto_pick_tls
  local g
  for g in 1 2; do
    if [ "$g" = 2 ] && [ "${PROTO_NGPU:-0}" -lt 2 ]; then record "proto:${g}gpu" skip "one GPU here"; continue; fi
    local d=(--mem device --gpus "$g")
    # Pull (default for non-contiguous senders; strided and units layouts) and the ring.
    proto_run "rdma_random_${g}gpu" GDTE_LOG=warn -- random "${d[@]}" --protocol rdma --expect-protocol rdma --cases 60 \
      --expect-pulls yes
    proto_run "rdma_random_pull_frags_${g}gpu" GDTE_LOG=warn GDTE_FRAG_SIZE=4096 GDTE_PIPELINE_DEPTH=2 -- \
      random "${d[@]}" --protocol rdma --expect-protocol rdma --cases 40 --seed 7 --expect-pulls yes
    proto_run "rdma_random_pull_same_${g}gpu" GDTE_LOG=warn -- random "${d[@]}" --protocol rdma --expect-protocol rdma \
      --cases 40 --seed 9 --same-type --expect-pulls same
    proto_run "rdma_random_ring_${g}gpu" GDTE_LOG=warn GDTE_RDMA_PULL=0 -- random "${d[@]}" --protocol rdma \
      --expect-protocol rdma --cases 40 --seed 8 --expect-pulls no
    proto_run "rdma_random_peer_unpack_${g}gpu" GDTE_RDMA_LOCAL_COPY=0 GDTE_PIPELINE_DEPTH=2 GDTE_RDMA_PULL=0 -- \
      random "${d[@]}" --protocol rdma --expect-protocol rdma --cases 40 --seed 5 --expect-pulls no
    proto_run "rdma_semantics_${g}gpu" GDTE_LOG=warn -- semantics "${d[@]}" --protocol rdma
    proto_run "copyinout_random_${g}gpu" GDTE_LOG=warn -- random "${d[@]}" --protocol copyinout \
      --expect-protocol copyinout --cases 60
    proto_run "copyinout_random_nozerocopy_${g}gpu" GDTE_ZERO_COPY=off -- random "${d[@]}" --protocol copyinout \
      --cases 40 --seed 6
    proto_run "auto_semantics_${g}gpu" GDTE_LOG=warn -- semantics "${d[@]}" --protocol auto
    proto_run "rdma_kill_receiver_${g}gpu" GDTE_TIMEOUT=5 GDTE_RDMA_PULL=0 -- kill-receiver "${d[@]}" --protocol rdma
    # The ring with the local copy, messages back to back, depth 1..8; one mapping per allocation.
    proto_run "rdma_burst_pull_${g}gpu" GDTE_LOG=warn -- burst "${d[@]}" --protocol rdma --expect-protocol rdma \
      --expect-pulls yes
    proto_run "rdma_burst_${g}gpu" GDTE_LOG=warn GDTE_RDMA_LOCAL_COPY=1 GDTE_RDMA_PULL=0 -- burst "${d[@]}" --protocol rdma \
      --expect-protocol rdma
    proto_run "rdma_ipcshare_${g}gpu" GDTE_LOG=warn -- ipcshare "${d[@]}" --protocol rdma --expect-protocol rdma
  done
  proto_archive protocols
}

section_bench_pingpong() {
  proto_build || return
  proto_pick_tls
  mkdir -p "$PROTO_LOGS"
  local csv="" run g p part log rc sizes sweep
  # rdma: pull where the sender's data is non-contiguous (the default); rdma_ring: the same
  # protocol with GDTE_RDMA_PULL=0 (the sender's fragment ring), for comparison.
  local pe
  for run in ${DEVICE_PINGPONG_RUNS:-1:rdma 1:rdma_ring 1:copyinout 2:rdma 2:rdma_ring 2:copyinout}; do
    g=${run%%:*}; p=${run#*:}
    if [ "$g" = 2 ] && [ "${PROTO_NGPU:-0}" -lt 2 ]; then record "pingpong:$run" skip "one GPU here"; continue; fi
    part="$PROTO_LOGS/pingpong-part-${g}gpu-$p.csv"; log="$PROTO_LOGS/pingpong-${g}gpu-$p.log"
    # Copy-in/out is bounded by the host hop, the ring on one GPU by context switches: fewer
    # sizes and only the default and unpipelined settings keep each run within its timeout.
    sizes=${DEVICE_PINGPONG_SIZES:-2048,4096}; sweep=full; pe=GDTE_RDMA_PULL=1
    if [ "$p" = copyinout ]; then sizes=${DEVICE_PINGPONG_COPY_SIZES:-2048}; sweep=default; fi
    if [ "$p" = rdma_ring ]; then sizes=${DEVICE_PINGPONG_COPY_SIZES:-2048}; sweep=default; pe=GDTE_RDMA_PULL=0; fi
    timeout "${DEVICE_PINGPONG_TIMEOUT:-120}" env UCX_WARN_UNUSED_ENV_VARS=n "$pe" "${PROTO_TLS[@]}" \
      "$PROTO_BUILD/bench/pingpong/pingpong" --fork --mem device --gpus "$g" --protocol "${p%_ring}" --sizes "$sizes" \
      --sweep "$sweep" --iters "${DEVICE_PINGPONG_ITERS:-10}" --warmup 2 --csv "$part" >"$log" 2>&1
    rc=$?
    case $rc in
      0) record "pingpong:$run" ok "$(($(wc -l <"$part") - 1)) rows; $(grep -m1 -oE 'lane\[0\]: +[0-9]+:[a-z_0-9]+' "$log")" ;;
      77) record "pingpong:$run" skip "$(tail -1 "$log")"; continue ;;
      124) record "pingpong:$run" FAIL "timeout (${DEVICE_PINGPONG_TIMEOUT:-120} s), partial CSV kept" ;;
      *) record "pingpong:$run" FAIL "rc=$rc, see $(basename "$log")"; grep -m3 -E "error|VERIFY" "$log" | tee -a "$SUMMARY" ;;
    esac
    [ -s "$part" ] || continue
    if [ -z "$csv" ]; then csv="$OUT/pingpong-$(sed -n 2p "$part" | cut -d, -f1).csv"; : >"$csv"; fi
    if [ ! -s "$csv" ]; then cat "$part" >"$csv"; else tail -n +2 "$part" >>"$csv"; fi
  done
  proto_archive pingpong
  if [ -n "$csv" ]; then
    echo "== bench/pingpong, default settings: layout vs contiguous through gdte ($(basename "$csv")) =="
    awk -F, 'NR > 1 && $4 != "contig" && $5 !~ /^model/ && ($7 == 0 || $4 ~ /^raw/) && ($8 == 4 || $4 ~ /^raw/) {
               printf "%d GPU %-10s %-10s %11d B %10.1f us %8.1f GB/s  x%s\n", $3, $4, $5, $6, $9, $10, $11 }' "$csv" |
      tee -a "$SUMMARY"
    echo "== bench/pingpong, pipeline model: measured default / (transfer + one fragment's pack and unpack) ==" |
      tee -a "$SUMMARY"
    awk -F, 'NR > 1 && $5 ~ /^model/ {
               printf "%d GPU %-10s %-16s %11d B model %9.1f us  measured/model %s\n", $3, $4, $5, $6, $9, $11 }' "$csv" |
      tee -a "$SUMMARY"
    echo "== bench/pingpong, rdma V by fragment size and depth (one-way us) ==" | tee -a "$SUMMARY"
    awk -F, 'NR > 1 && $4 == "V" && $5 == "rdma" {
               printf "%d GPU V %11d B frag %10d depth %d %10.1f us %8.1f GB/s\n", $3, $6, $7, $8, $9, $10 }' "$csv" |
      tee -a "$SUMMARY"
  fi
}

[ -z "${DEVICE_SECTIONS:-}" ] && SECTIONS="$SECTIONS protocols bench_pingpong"
# ==== end of protocols block =====================================================================

# ==== MPI block (src/mpi interposer, tests/mpi mpi_gpu, the demo, bench/halo3d) ===================
# A third build tree with MPI (and without UCX). If the machine has no mpi.h of its own, the
# Open MPI C headers carried in .deps/mpi/include (tools/device_deps.sh) are used with the
# machine's libmpi.so.40. Sections: mpi (mpi_gpu tests + the demo on device buffers), bench_halo3d
# (CSV in $OUT/halo3d-<device>.csv). Environment: DEVICE_MPI_BUILD_DIR, DEVICE_HALO_SIZES
# (default 128,256,512), DEVICE_HALO_ITERS (default 20), DEVICE_MPI_TIMEOUT (seconds per run, default 300).
MPI_BUILD=${DEVICE_MPI_BUILD_DIR:-build-device-mpi}
MPI_OK=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# MPS for runs whose ranks share one GPU: a private MPS control daemon of this user (pipe and log
# directories under $OUT's machine-local tmp), started for those runs and quit after them; the
# GPU's own settings (compute mode) are not touched. Without MPS two processes' kernels on one
# GPU take turns at ~150 us a switch (bench/mpi/ctxprobe); with it they share one context.
# mps_start returns 1 where there is no nvidia-cuda-mps-control or it does not start.
MPS_DIR=""
mps_start() {
  command -v nvidia-cuda-mps-control >/dev/null || return 1
  MPS_DIR=$(mktemp -d /tmp/gdte-mps.XXXXXX)
  export CUDA_MPS_PIPE_DIRECTORY=$MPS_DIR/pipe CUDA_MPS_LOG_DIRECTORY=$MPS_DIR/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if ! nvidia-cuda-mps-control -d; then mps_stop; return 1; fi
  sleep 1
}
mps_stop() {
  [ -n "$MPS_DIR" ] || return 0
  echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
  sleep 1
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  rm -rf "$MPS_DIR"
  MPS_DIR=""
}
trap mps_stop EXIT

mpi_build() {
  [ "$MPI_OK" = 1 ] && return 0
  local log="$OUT/mpi_build.log" extra=()
  [ -d .deps/uthash/include ] && extra+=(-DUTHASH_INCLUDE_DIR="$PWD/.deps/uthash/include")
  {
    echo "== $(date -u +%FT%TZ) mpirun: $(mpirun --version 2>&1 | head -1)"
    if ! echo '#include <mpi.h>' | mpicc -E -x c - >/dev/null 2>&1; then
      local lib
      lib=$(ldconfig -p | awk '$1 == "libmpi.so.40" {print $NF; exit}')
      echo "no usable mpi.h here: carried headers + $lib"
      mkdir -p "$MPI_BUILD/mpi-lib" && ln -sf "$lib" "$MPI_BUILD/mpi-lib/libmpi.so"
      extra+=(-DMPI_C_COMPILER=NOTFOUND -DMPI_C_HEADER_DIR="$PWD/.deps/mpi/include" -DMPI_C_LIB_NAMES=mpi
              -DMPI_mpi_LIBRARY="$PWD/$MPI_BUILD/mpi-lib/libmpi.so" -DMPIEXEC_EXECUTABLE="$(command -v mpirun)")
    fi
    cmake -S . -B "$MPI_BUILD" -G Ninja -DGDTE_GPU=CUDA -DCMAKE_CUDA_ARCHITECTURES=90 -DGDTE_WITH_MPI=ON \
      -DGDTE_WITH_UCX=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo "${extra[@]}" &&
      cmake --build "$MPI_BUILD" -j "$JOBS"
  } >"$log" 2>&1
  if [ $? -eq 0 ]; then MPI_OK=1; record mpi_build ok "$MPI_BUILD (CUDA, MPI)"; return 0; fi
  record mpi_build FAIL "see mpi_build.log"; tail -30 "$log"; return 1
}

section_mpi() {
  mpi_build || return
  local log="$OUT/mpi_gpu.log" res rc
  # (rma_test needs an MPI that creates windows: section mpi_rma runs it where one does)
  (cd "$MPI_BUILD" && ctest -L mpi_gpu -E mpi_gpu_rma --output-on-failure --timeout "${DEVICE_MPI_TIMEOUT:-300}") >"$log" 2>&1
  rc=$?
  res=$(grep -E "tests passed|tests failed" "$log" | tail -1)
  if grep -q "(Skipped)" "$log"; then record mpi_gpu FAIL "skipped on a GPU machine: $res"
  elif [ $rc -eq 0 ]; then record mpi_gpu ok "$res"; else record mpi_gpu FAIL "$res"; fi
  # The demo: an unmodified MPI program on cudaMalloc buffers through the interposer.
  local ng
  ng=$(nvidia-smi -L 2>/dev/null | wc -l)
  log="$OUT/demo.log"
  timeout "${DEVICE_MPI_TIMEOUT:-300}" mpirun -np 2 --oversubscribe --bind-to none \
    -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" "$MPI_BUILD/examples/demo/gdte_demo" 128 4096 >"$log" 2>&1
  rc=$?
  cat "$log" | grep -v "^\[" | tail -8
  if [ $rc -eq 0 ] && grep -Eq "transpose ping-pong +device memory .* yes" "$log"; then record demo ok "2 ranks on $ng GPU(s), device buffers, verified"
  else record demo FAIL "rc=$rc, see demo.log"; fi
  # With several GPUs, the same again with both ranks on one GPU.
  if [ "$ng" -gt 1 ]; then
    log="$OUT/mpi_gpu_1gpu.log"
    (cd "$MPI_BUILD" && CUDA_VISIBLE_DEVICES=0 ctest -L mpi_gpu --output-on-failure --timeout "${DEVICE_MPI_TIMEOUT:-300}") >"$log" 2>&1
    rc=$?
    res=$(grep -E "tests passed|tests failed" "$log" | tail -1)
    [ $rc -eq 0 ] && record mpi_gpu_1gpu ok "2 ranks on one GPU: $res" || record mpi_gpu_1gpu FAIL "$res"
    log="$OUT/demo_1gpu.log"
    timeout "${DEVICE_MPI_TIMEOUT:-300}" mpirun -np 2 --oversubscribe --bind-to none -x CUDA_VISIBLE_DEVICES=0 \
      -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" "$MPI_BUILD/examples/demo/gdte_demo" 128 4096 >"$log" 2>&1
    rc=$?
    grep -v "^\[" "$log" | tail -7
    if [ $rc -eq 0 ] && grep -Eq "transpose ping-pong +device memory .* yes" "$log"; then record demo_1gpu ok "2 ranks on one GPU, verified"
    else record demo_1gpu FAIL "rc=$rc, see demo_1gpu.log"; fi
  fi
  # Both ranks on one GPU: the demo again under MPS, and the MPI GPU tests there too (gdte takes
  # the node path for small messages when MPS shares the contexts: counter node_mps).
  if [ "$ng" -eq 1 ] && mps_start; then
    log="$OUT/demo_mps.log"
    timeout "${DEVICE_MPI_TIMEOUT:-300}" mpirun -np 2 --oversubscribe --bind-to none \
      -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" "$MPI_BUILD/examples/demo/gdte_demo" 128 4096 >"$log" 2>&1
    rc=$?
    grep -v "^\[" "$log" | tail -7
    if [ $rc -eq 0 ] && grep -Eq "transpose ping-pong +device memory .* yes" "$log"; then record demo_mps ok "2 ranks on one GPU under MPS, verified"
    else record demo_mps FAIL "rc=$rc, see demo_mps.log"; fi
    log="$OUT/mpi_gpu_mps.log"
    (cd "$MPI_BUILD" && ctest -L mpi_gpu -E mpi_gpu_rma --output-on-failure --timeout "${DEVICE_MPI_TIMEOUT:-300}") >"$log" 2>&1
    rc=$?
    res=$(grep -E "tests passed|tests failed" "$log" | tail -1)
    [ $rc -eq 0 ] && record mpi_gpu_mps ok "under MPS: $res" || record mpi_gpu_mps FAIL "under MPS: $res"
    mps_stop
  fi
}

# The random nested-type MPI program (tests/mpi/random_test) on cudaMalloc buffers through the
# interposer, every pairing of host and device buffers: DEVICE_MPI_RANDOM_CASES cases (default
# 8000: about 2000 per pairing), two seeds, the second with small fragments.
# The MPI GPU tests over the MPI_PACKED path (GDTE_MPI_IPC=0); section mpi runs them at the
# default, which is the node path on one node. Left out: the tests that assert the node path
# carried their collectives, reductions or windows (`_node_`, `node_window`), and exotic_test,
# whose MPI_C_LONG_DOUBLE_COMPLEX receives past the eager size abort inside this machine's Open
# MPI 4.1.6 whoever sends them, host-only programs without gdte included (docs/RELIABILITY.md;
# at the default, the node path, exotic_test passes in section mpi).
section_mpi_node() {
  mpi_build || return
  local log="$OUT/mpi_node.log" res rc
  (cd "$MPI_BUILD" && GDTE_MPI_IPC=0 ctest -L mpi_gpu -E "_node_|node_window|exotic" --output-on-failure \
     --timeout "${DEVICE_MPI_TIMEOUT:-120}") >"$log" 2>&1
  rc=$?
  res=$(grep -E "tests passed|tests failed" "$log" | tail -1)
  [ $rc -eq 0 ] && record mpi_packed ok "GDTE_MPI_IPC=0: $res" || record mpi_packed FAIL "GDTE_MPI_IPC=0: $res"
  grep -E "Passed|Failed|Timeout" "$log" | tail -20
}

# The node path's windowed bandwidth at 4 and 16 MiB, with the sender's detach after 1 ms (the
# default) and practically never (GDTETEST_NODE_DETACH_US=1e9); the detach count per run.
section_node_probe() {
  mpi_build || return
  local d log
  for d in 1000 1000000000; do
    log="$OUT/node_probe-detach$d.log"
    timeout "${DEVICE_MPIBENCH_TIMEOUT:-300}" mpirun -np 2 --oversubscribe --bind-to none -x GDTE_MPI_IPC=1 \
      -x GDTETEST_NODE_DETACH_US=$d -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" \
      "$MPI_BUILD/bench/mpi/mpibench" --mem device --mpi-label "node-detach$d" --sizes "${NODE_PROBE_SIZES:-4194304,16777216}" \
      --layouts contig,vector,indexed --benchmarks bw --iters 10 --warmup 2 >"$log" 2>&1 &&
      record "node_probe:$d" ok "$(grep -c ' bw ' "$log") rows" || record "node_probe:$d" FAIL "see $(basename "$log")"
    grep -v "^\[gdte" "$log" | tail -12
  done
}

section_mpi_random() {
  mpi_build || return
  local log="$OUT/mpi_random.log" cases=${DEVICE_MPI_RANDOM_CASES:-8000}
  : >"$log"
  # rt_run NAME CASES SEED [mpirun -x options]: one run, its summary line recorded.
  rt_run() {
    local name=$1 n=$2 seed=$3 rc
    shift 3
    timeout "${DEVICE_MPI_TIMEOUT:-300}" mpirun -np 2 --oversubscribe --bind-to none -x GDTETEST_MODE=cuda "$@" \
      -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" "$MPI_BUILD/tests/mpi/random_test" --cases "$n" \
      --seed "$seed" >>"$log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then record "$name" ok "$(grep '^random_test: seed' "$log" | tail -1 | cut -c1-140)"
    else record "$name" FAIL "rc=$rc"; grep "FAIL" "$log" | head -8 | tee -a "$SUMMARY"; fi
  }
  rt_run mpi_random "$cases" 0x7e57
  rt_run mpi_random_frags $((cases / 4)) 0xf4a6 -x GDTE_FRAG_SIZE=8192 -x GDTE_PIPELINE_DEPTH=2 -x GDTE_ZERO_COPY=off
  # Rank 1 as another node (GDTETEST_NODE_SPLIT=1): every device message past the marker's size
  # in fragments of 64 KiB (GDTE_MPI_PIPELINE).
  rt_run mpi_random_remote $((cases / 4)) 0x5e11 -x GDTETEST_NODE_SPLIT=1 -x GDTETEST_NODE_FRAG_MIN=249 \
    -x GDTETEST_NODE_FRAG_SIZE=65536
  # Collectives on device buffers: random types, 2 and 4 ranks.
  local np
  for np in 2 4; do
    timeout "${DEVICE_MPI_TIMEOUT:-300}" mpirun -np $np --oversubscribe --bind-to none -x GDTETEST_MODE=cuda \
      -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" "$MPI_BUILD/tests/mpi/coll_test" --cases 540 --seed $np \
      >>"$log" 2>&1 && record "mpi_coll_random_np$np" ok "540 cases" || record "mpi_coll_random_np$np" FAIL "see mpi_random.log"
  done
}

# One-sided communication on device memory (tests/mpi/rma_test, cudaMalloc windows and buffers):
# on the image's Open MPI, and on the CUDA-aware build told it is not GPU-aware
# (GDTE_MPI_GPU_AWARE=0: gdte's host copies), whose osc component creates windows where the
# image's MPI may create none. osc pt2pt on both (tests/mpi/CMakeLists.txt says why).
# Environment: DEVICE_RMA_CASES (default 200).
section_mpi_rma() {
  mpi_build || return
  local log="$OUT/mpi_rma.log" pre="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" rc
  local args=(--cases "${DEVICE_RMA_CASES:-200}" --seed 9)
  rma_record() {
    case $2 in
      0) record "$1" ok "$(grep '^rma_test: ' "$log" | tail -1 | cut -c1-140)" ;;
      77) record "$1" skip "this MPI creates no windows" ;;
      *) record "$1" FAIL "rc=$2, see mpi_rma.log"; grep "FAIL" "$log" | head -5 | tee -a "$SUMMARY" ;;
    esac
  }
  echo "== the image's MPI" >"$log"
  timeout "${DEVICE_MPI_TIMEOUT:-300}" mpirun -np 2 --oversubscribe --bind-to none --mca osc pt2pt -x GDTETEST_MODE=cuda \
    -x GDTETEST_EXPECT_RMA=1 -x LD_PRELOAD="$pre" "$MPI_BUILD/tests/mpi/rma_test" "${args[@]}" >>"$log" 2>&1
  rma_record mpi_rma $?
  [ -f .deps/ompi-cuda/env.sh ] || return 0
  (
    # shellcheck disable=SC1091
    . .deps/ompi-cuda/env.sh
    echo "== ompi-cuda, GDTE_MPI_GPU_AWARE=0" >>"$log"
    timeout "${DEVICE_MPI_TIMEOUT:-300}" mpirun -np 2 --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader,smcuda \
      --mca osc pt2pt -x GDTE_MPI_GPU_AWARE=0 -x GDTETEST_MODE=cuda -x GDTETEST_EXPECT_RMA=1 -x LD_PRELOAD="$pre" \
      "$MPI_BUILD/tests/mpi/rma_test" "${args[@]}" --seed 10 >>"$log" 2>&1
    rma_record mpi_rma:ompi-cuda $?
  )
}

# The interposer's MPI GPU tests under compute-sanitizer memcheck (each rank under the tool).
# Environment: DEVICE_MEMCHECK_CASES (random_test's cases), DEVICE_MEMCHECK_PROGRAMS (a subset).
# Failed runtime calls that gdte expects and handles are not reported as errors
# (--report-api-errors no): cudaIpcOpenMemHandle's cudaErrorAlreadyMapped when a peer reused
# memory it had freed (the node path closes its stale mappings and opens again).
section_mpi_memcheck() {
  mpi_build || return
  local cs log="$OUT/mpi_memcheck.log" pre="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" t rc
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  [ -n "$cs" ] || { record mpi_memcheck skip "compute-sanitizer not found"; return; }
  : >"$log"
  local progs=("random_test --cases ${DEVICE_MEMCHECK_CASES:-150}" regress_test pingpong_test errors_test
                wildcard_test finalize_test "halo3d_test 32 3 nonblocking" "coll_test --cases 60"
                "coll_test --cases 90 --seed 22 --all-device --node yes" "reduce_test --seed 11"
                "reduce_test --seed 12 --maxc 3000" frag_test "rma_test --cases 30" unified_test getstatus_test)
  # DEVICE_MEMCHECK_PROGRAMS: a ';'-separated subset (program and arguments) instead.
  [ -n "${DEVICE_MEMCHECK_PROGRAMS:-}" ] && IFS=';' read -r -a progs <<<"$DEVICE_MEMCHECK_PROGRAMS"
  for t in "${progs[@]}"; do
    echo "== memcheck $t" >>"$log"
    # the node path of the reductions at every size for the run with large vectors
    local extra=()
    case "$t" in reduce_test*--maxc*) extra=(-x GDTE_MPI_REDUCE_NODE_MIN=1) ;; esac
    # frag_test across a forced node boundary: fragmented messages (GDTE_MPI_PIPELINE)
    case "$t" in frag_test*) extra=(-x GDTETEST_NODE_SPLIT=1 -x GDTETEST_NODE_FRAG_SIZE=65536) ;; esac
    case "$t" in rma_test* | unified_test*) extra=(--mca osc pt2pt) ;; esac
    # Open MPI's AVX reduction component computes wrong sums under compute-sanitizer (reduce_test's
    # MPI_Reduce_local on host buffers, gdte not involved): the plain C ops are used instead.
    timeout "${DEVICE_MPI_TIMEOUT:-300}" mpirun -np 2 --oversubscribe --bind-to none -x GDTETEST_MODE=cuda \
      "${extra[@]}" -x OMPI_MCA_op='^avx' -x LD_PRELOAD="$pre" "$cs" --tool memcheck --report-api-errors no --error-exitcode 99 --print-limit 20 \
      $MPI_BUILD/tests/mpi/$t >>"$log" 2>&1
    rc=$?
    local name="${t%% *}"
    case "$t" in *--node* | *--maxc*) name="$name:node" ;; esac
    [ $rc -eq 0 ] && record "memcheck:$name" ok "$(grep 'ERROR SUMMARY' "$log" | tail -2 | tr '\n' ' ')" ||
      record "memcheck:$name" FAIL "rc=$rc $(grep 'ERROR SUMMARY' "$log" | tail -2 | tr '\n' ' ')"
  done
}

section_bench_halo3d() {
  mpi_build || return
  local ng dev csv log="$OUT/halo3d.log"
  ng=$(nvidia-smi -L 2>/dev/null | wc -l)
  # "NVIDIA H100 80GB HBM3" -> h100, as the committed halo3d-h100.csv
  dev=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -oiE '[a-z][0-9]{2,4}' | head -1 |
    tr '[:upper:]' '[:lower:]')
  csv="$OUT/halo3d-${dev:-gpu}$([ "$ng" -gt 1 ] && echo "x$ng").csv"
  timeout "${DEVICE_MPI_TIMEOUT:-300}" mpirun -np 2 --oversubscribe --bind-to none \
    -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" -x GDTETEST_COMMIT \
    "$MPI_BUILD/bench/halo3d/halo3d" --sizes "${DEVICE_HALO_SIZES:-128,256,512}" --iters "${DEVICE_HALO_ITERS:-20}" --csv "$csv" >"$log" 2>&1
  local rc=$?
  grep -v "^\[" "$log" | tail -20
  [ $rc -eq 0 ] && [ -s "$csv" ] && record bench_halo3d ok "$(basename "$csv")" || record bench_halo3d FAIL "rc=$rc, see halo3d.log"
  # One GPU: the same under MPS (the expert's kernels and IPC copies too), into halo3d-<dev>-mps.csv.
  if [ "$ng" -eq 1 ] && mps_start; then
    local mcsv="${csv%.csv}-mps.csv" mlog="$OUT/halo3d-mps.log"
    timeout "${DEVICE_MPI_TIMEOUT:-300}" mpirun -np 2 --oversubscribe --bind-to none \
      -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" -x GDTETEST_COMMIT \
      "$MPI_BUILD/bench/halo3d/halo3d" --sizes "${DEVICE_HALO_SIZES:-128,256,512}" --iters "${DEVICE_HALO_ITERS:-20}" \
      --csv "$mcsv" >"$mlog" 2>&1
    local mrc=$?
    mps_stop
    grep -v "^\[" "$mlog" | tail -12
    [ $mrc -eq 0 ] && [ -s "$mcsv" ] && record bench_halo3d:mps ok "$(basename "$mcsv")" ||
      record bench_halo3d:mps FAIL "rc=$mrc, see halo3d-mps.log"
  fi
  # The same on the CUDA-aware Open MPI (device staging), into halo3d-<dev>-gpuaware.csv.
  [ -f .deps/ompi-cuda/env.sh ] || return 0
  (
    # shellcheck disable=SC1091
    . .deps/ompi-cuda/env.sh
    local gcsv="${csv%.csv}-gpuaware.csv" glog="$OUT/halo3d-gpuaware.log"
    timeout "${DEVICE_MPI_TIMEOUT:-300}" mpirun -np 2 --oversubscribe --bind-to none --mca pml ob1 \
      --mca btl self,vader,smcuda -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" -x GDTETEST_COMMIT \
      "$MPI_BUILD/bench/halo3d/halo3d" --sizes "${DEVICE_HALO_SIZES:-128,256,512}" --iters "${DEVICE_HALO_ITERS:-20}" \
      --csv "$gcsv" >"$glog" 2>&1
    local grc=$?
    grep -v "^\[" "$glog" | tail -12
    [ $grc -eq 0 ] && [ -s "$gcsv" ] && record bench_halo3d:gpuaware ok "$(basename "$gcsv")" ||
      record bench_halo3d:gpuaware FAIL "rc=$grc, see halo3d-gpuaware.log"
  )
}
# bench/coll: collectives on device buffers, 4 ranks on the GPU(s), each beside the hand-written
# expert (pack kernels + raw IPC + unpack kernels) in the same run, over the image's MPI
# (mpi=plain) and the CUDA-aware build (mpi=gpu-aware). Rows to $OUT/coll-<device>.csv.
# Environment: DEVICE_COLL_ARGS (extra collbench arguments), DEVICE_COLL_NP (default 4),
# DEVICE_COLL_ENV ("VAR=value ..." for the ranks, e.g. GDTE_MPI_REDUCE_NODE_MIN=0) and
# DEVICE_COLL_TAG (then the rows go to coll-<device>-<tag>.csv, apart from the committed set).
section_bench_coll() {
  mpi_build || return
  local ng dev csv log="$OUT/collbench.log" np=${DEVICE_COLL_NP:-4} xenv=() kv
  for kv in ${DEVICE_COLL_ENV:-}; do xenv+=(-x "$kv"); done
  ng=$(nvidia-smi -L 2>/dev/null | wc -l)
  # "NVIDIA H100 80GB HBM3" -> h100, as the committed coll-h100.csv
  dev=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -oiE '[a-z][0-9]{2,4}' | head -1 |
    tr '[:upper:]' '[:lower:]')
  csv="$OUT/coll-${dev:-gpu}$([ "$ng" -gt 1 ] && echo "x$ng")${DEVICE_COLL_TAG:+-$DEVICE_COLL_TAG}.csv"
  # shellcheck disable=SC2086
  timeout "${DEVICE_MPI_TIMEOUT:-300}" mpirun -np "$np" --oversubscribe --bind-to none "${xenv[@]}" \
    -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" -x GDTETEST_COMMIT \
    "$MPI_BUILD/bench/coll/collbench" --mpi-label plain --csv "$csv" ${DEVICE_COLL_ARGS:-} >"$log" 2>&1
  local rc=$?
  grep -v "^\[" "$log" | tail -30
  [ $rc -eq 0 ] && [ -s "$csv" ] && record bench_coll ok "$(basename "$csv")" || record bench_coll FAIL "rc=$rc, see collbench.log"
  [ -f .deps/ompi-cuda/env.sh ] || return 0
  (
    # shellcheck disable=SC1091
    . .deps/ompi-cuda/env.sh
    local glog="$OUT/collbench-gpuaware.log"
    # shellcheck disable=SC2086
    timeout "${DEVICE_MPI_TIMEOUT:-300}" mpirun -np "$np" --oversubscribe --bind-to none --mca pml ob1 \
      --mca btl self,vader,smcuda "${xenv[@]}" -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" -x GDTETEST_COMMIT \
      "$MPI_BUILD/bench/coll/collbench" --mpi-label gpu-aware --csv "$csv" ${DEVICE_COLL_ARGS:-} >"$glog" 2>&1
    local grc=$?
    grep -v "^\[" "$glog" | tail -30
    [ $grc -eq 0 ] && record bench_coll:gpuaware ok "$(basename "$csv")" ||
      record bench_coll:gpuaware FAIL "rc=$grc, see collbench-gpuaware.log"
  )
}
# ==== end of MPI block ===========================================================================

# bench/mpi (OSU-style latency and bw of contig / vector / indexed device messages, 2 ranks, with
# the raw CUDA IPC baseline measured in the same run): not in DEFAULT_SECTIONS, run it with
# DEVICE_SECTIONS=bench_mpi. Rows go to $OUT/mpi-<device>.csv:
#   mpi=plain               the image's MPI (not GPU-aware) under gdte's interposer;
#   mpi=gpu-aware-mpi-only  when .deps/ompi-cuda/env.sh exists (a GPU-aware Open MPI; sourcing it
#                           sets PATH, LD_LIBRARY_PATH, OPAL_PREFIX): the benchmark built alone
#                           with that mpicc (+ nvcc for the backend) and run on it, ob1 + smcuda;
#   mpi=gpu-aware           the same with gdte's interposer built against that MPI
#                           ($DEVICE_OMPI_CUDA_GDTE, default build-device-mpi-ompicuda/src/mpi/
#                           libgdte_mpi.so); skipped while there is no such build.
# Environment: DEVICE_MPIBENCH_ARGS (extra options, e.g. "--sizes 1K,4M --budget 1"),
# DEVICE_MPIBENCH_ROUNDS (mpibench --rounds, default 3),
# DEVICE_MPIBENCH_TIMEOUT (seconds per run, default 300), DEVICE_MPIBENCH_OMPI_BUILD.
section_bench_mpi() {
  mpi_build || return
  local ng dev csv args=()
  ng=$(nvidia-smi -L 2>/dev/null | wc -l)
  dev=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' -' '\n\n' | grep -m1 -E '^[A-Z]+[0-9]')
  dev=$(echo "${dev:-gpu}" | tr 'A-Z' 'a-z')
  csv="$OUT/mpi-${dev}$([ "$ng" -gt 1 ] && echo "x$ng").csv"
  rm -f "$csv"
  # Three rounds: the raw baseline and the layouts measured in turn, medians reported.
  read -r -a args <<<"--rounds ${DEVICE_MPIBENCH_ROUNDS:-3} ${DEVICE_MPIBENCH_ARGS:-}"
  # mpibench_run <mpi label> <binary> <mpirun> [mpirun options...]: one run, rows appended to $csv.
  mpibench_run() {
    local label=$1 bin=$2 log="$OUT/mpibench-$1.log" rc
    shift 2
    timeout "${DEVICE_MPIBENCH_TIMEOUT:-300}" "$@" -np 2 --oversubscribe --bind-to none -x GDTETEST_COMMIT \
      "$bin" --mem device --mpi-label "$label" --csv "$csv" "${args[@]}" >"$log" 2>&1
    rc=$?
    grep -v "^\[gdte" "$log" | tail -60
    case $rc in
      0) record "bench_mpi:$label" ok "$(grep -cE "^$label +(latency|bw) " "$log") rows, $(basename "$csv")" ;;
      124) record "bench_mpi:$label" FAIL "timeout (${DEVICE_MPIBENCH_TIMEOUT:-300} s), partial CSV kept" ;;
      *) record "bench_mpi:$label" FAIL "rc=$rc, see $(basename "$log")"; grep -m3 "VERIFY" "$log" | tee -a "$SUMMARY" ;;
    esac
  }
  mpibench_run plain "$MPI_BUILD/bench/mpi/mpibench" mpirun -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so"
  # The node path (GDTE_MPI_IPC=1): device messages GPU to GPU with MPI carrying markers.
  mpibench_run plain-node "$MPI_BUILD/bench/mpi/mpibench" mpirun -x GDTE_MPI_IPC=1 \
    -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so"
  # Persistent requests (mpibench --persistent: each start of a device send to the peer goes as
  # MPI_Isend does, GPU to GPU).
  local args_save=("${args[@]}")
  args+=(--persistent)
  mpibench_run plain-persistent "$MPI_BUILD/bench/mpi/mpibench" mpirun -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so"
  args=("${args_save[@]}")
  # One GPU: the same under MPS (mpi=plain-mps; the raw baseline then runs under MPS too).
  if [ "$ng" -eq 1 ] && mps_start; then
    mpibench_run plain-mps "$MPI_BUILD/bench/mpi/mpibench" mpirun -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so"
    mps_stop
  fi
  # packbatch: K boxes packed with MPI_Pack into one device buffer and sent (plain MPI).
  timeout 300 mpirun -np 2 --oversubscribe --bind-to none -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" \
    -x GDTETEST_COMMIT "$MPI_BUILD/bench/mpi/packbatch" --mem device --sizes 64,128,256 --iters 50 --warmup 5 \
    --csv "$OUT/packbatch-${dev}.csv" >"$OUT/packbatch.log" 2>&1 &&
    record bench_packbatch ok "packbatch-${dev}.csv" || record bench_packbatch FAIL "see packbatch.log"
  grep -v "^\[gdte" "$OUT/packbatch.log" | tail -12
  if [ -f .deps/ompi-cuda/env.sh ]; then
    (
      # shellcheck disable=SC1091
      . .deps/ompi-cuda/env.sh
      local bdir=${DEVICE_MPIBENCH_OMPI_BUILD:-build-device-mpibench-ompicuda} cuda lib smcuda
      local log="$OUT/mpibench_ompicuda_build.log"
      cuda=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
      mkdir -p "$bdir"
      {
        echo "== $(command -v mpicc): $(mpirun --version 2>&1 | head -1)"
        nvcc -O2 -arch=sm_90 -c bench/mpi/mpibench_cuda.cu -o "$bdir/mpibench_cuda.o" &&
          mpicc -O2 -Wall -DMPIBENCH_CUDA -I"$cuda/include" bench/mpi/mpibench.c "$bdir/mpibench_cuda.o" \
            -L"$cuda/lib64" -L"$cuda/targets/x86_64-linux/lib" -Wl,-rpath,"$cuda/lib64" -lcudart -lstdc++ \
            -o "$bdir/mpibench"
      } >"$log" 2>&1 || { record bench_mpi:ompi-cuda FAIL "build, see $(basename "$log")"; tail -20 "$log"; exit 0; }
      smcuda=(--mca pml ob1 --mca btl self,vader,smcuda)
      mpibench_run gpu-aware-mpi-only "$bdir/mpibench" mpirun "${smcuda[@]}"
      # The interposer built against the image's Open MPI 4.1 runs on this one too (same ABI,
      # libmpi.so.40, found through env.sh's LD_LIBRARY_PATH); it asks MPIX_Query_cuda_support.
      lib=${DEVICE_OMPI_CUDA_GDTE:-$MPI_BUILD/src/mpi/libgdte_mpi.so}
      if [ -f "$lib" ]; then
        mpibench_run gpu-aware "$bdir/mpibench" mpirun "${smcuda[@]}" -x LD_PRELOAD="$(readlink -f "$lib")"
      else
        record bench_mpi:gpu-aware skip "no gdte interposer built against that MPI ($lib)"
      fi
    )
  else
    record bench_mpi:gpu-aware skip "no .deps/ompi-cuda/env.sh"
  fi
  [ -s "$csv" ] || return
  echo "== bench/mpi: ratio to raw CUDA IPC ($(basename "$csv")); targets (mpi=plain, one GPU): bw at 4 MiB" \
    ">= 0.85 contig, 0.80 vector, 0.75 indexed; latency at 1 KiB >= 0.80 and <= 45 us ==" | tee -a "$SUMMARY"
  awk -F, 'NR > 1 && (($5 == "bw" && $7 == 4194304) || ($5 == "latency" && $7 == 1024)) {
             printf "%-20s %-8s %-8s %9d B %10.2f us %9.3f GB/s  x%s\n", $4, $5, $6, $7, $8, $9, $10 }' "$csv" |
    tee -a "$SUMMARY"
}

# Device messages to another node, forced on one machine (GDTETEST_NODE_SPLIT=1: rank 1 counts as
# another node, so the node path never takes them): in fragments (GDTE_MPI_PIPELINE=1: a marker,
# then each fragment posted to the MPI as soon as it is packed and on the host, unpacked as it
# arrives) against the whole message packed, sent as one MPI_PACKED message and unpacked
# (GDTE_MPI_PIPELINE=0), alternated in one call. Rows: $OUT/mpi-remote-<device>.csv, mpi =
# remote-frags / remote-packed; ratio_to_raw is still against raw CUDA IPC (an upper bound no
# path through host memory reaches). Environment: REMOTE_SIZES, REMOTE_BUDGET, REMOTE_REPS.
section_bench_remote() {
  mpi_build || return
  local dev csv v rep label log rc
  dev=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' -' '\n\n' | grep -m1 -E '^[A-Z]+[0-9]')
  dev=$(echo "${dev:-gpu}" | tr 'A-Z' 'a-z')
  csv="$OUT/mpi-remote-${dev}.csv"
  rm -f "$csv"
  for rep in $(seq "${REMOTE_REPS:-2}"); do
    for v in 1 0; do
      label=$([ $v = 1 ] && echo remote-frags || echo remote-packed)
      log="$OUT/remote-$label-$rep.log"
      timeout "${DEVICE_MPIBENCH_TIMEOUT:-300}" mpirun -np 2 --oversubscribe --bind-to none -x GDTETEST_COMMIT \
        -x GDTETEST_NODE_SPLIT=1 -x GDTE_MPI_PIPELINE=$v -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" \
        "$MPI_BUILD/bench/mpi/mpibench" --mem device --mpi-label "$label" --csv "$csv" \
        --sizes "${REMOTE_SIZES:-64K,1M,4M,16M}" --budget "${REMOTE_BUDGET:-0.2}" >"$log" 2>&1
      rc=$?
      [ $rc -eq 0 ] && record "bench_remote:$label:$rep" ok "$(grep -cE "^$label +(latency|bw) " "$log") rows" ||
        record "bench_remote:$label:$rep" FAIL "rc=$rc, see $(basename "$log")"
    done
  done
  [ -s "$csv" ] || return
  echo "== device messages to another node (forced): fragments vs one MPI_PACKED message ($(basename "$csv")) ==" |
    tee -a "$SUMMARY"
  awk -F, 'NR > 1 && $7 >= 1048576 { printf "%-14s %-8s %-8s %9d B %10.2f us %9.3f GB/s\n", $4, $5, $6, $7, $8, $9 }' \
    "$csv" | sort -k2,2 -k3,3 -k4,4n -k1,1 | tee -a "$SUMMARY"
}

# How much of a nonblocking device send hides behind the application's work (bench/mpi/overlap):
# to another node, forced (GDTETEST_NODE_SPLIT=1: fragments through pinned host staging; a
# nonblocking send returns with its pack queued), the same under MPI_THREAD_MULTIPLE (the
# interposer's progress thread posts the fragments and tests them until sent; -post: it only
# posts them, GDTETEST_PROGRESS_DRIVE=0), and within the node (the node path). Rows:
# $OUT/overlap-<device>.csv, mpi = plain-remote / plain-remote-mt / plain-remote-mt-post /
# plain-node. Environment: OVERLAP_SIZES.
section_bench_overlap() {
  mpi_build || return
  local dev csv label log rc split mt drive
  dev=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' -' '\n\n' | grep -m1 -E '^[A-Z]+[0-9]')
  dev=$(echo "${dev:-gpu}" | tr 'A-Z' 'a-z')
  csv="$OUT/overlap-${dev}.csv"
  rm -f "$csv"
  for label in plain-remote plain-remote-mt plain-remote-mt-post plain-node; do
    split=$([ $label = plain-node ] && echo 0 || echo 1)
    mt=$(case $label in plain-remote-mt*) echo --thread-multiple ;; esac)
    drive=$([ $label = plain-remote-mt-post ] && echo 0 || echo 1)
    log="$OUT/overlap-$label.log"
    # shellcheck disable=SC2086
    timeout "${DEVICE_MPIBENCH_TIMEOUT:-300}" mpirun -np 2 --oversubscribe --bind-to none -x GDTETEST_COMMIT \
      -x GDTETEST_NODE_SPLIT=$split -x GDTETEST_PROGRESS_DRIVE=$drive -x LD_PRELOAD="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" \
      "$MPI_BUILD/bench/mpi/overlap" --mem device --mpi-label "$label" --csv "$csv" $mt \
      --sizes "${OVERLAP_SIZES:-64K,1M,4M,16M}" >"$log" 2>&1
    rc=$?
    [ $rc -eq 0 ] && record "bench_overlap:$label" ok "$(grep -cE '^(contig|vector) ' "$log") rows" ||
      record "bench_overlap:$label" FAIL "rc=$rc, see $(basename "$log")"
  done
  [ -s "$csv" ] && { echo "== overlap ($(basename "$csv")) =="; cat "$csv"; } | tee -a "$SUMMARY"
}

# The MPI GPU test programs (built against the image's Open MPI, same ABI) run on the CUDA-aware
# Open MPI in .deps/ompi-cuda (ob1 + smcuda), under gdte's interposer, which then stages in
# device memory (GDTE_MPI_GPU_AWARE=auto must find MPIX_Query_cuda_support() = 1: checked in the
# log), and the random device pool through that path.
section_mpi_gpuaware() {
  mpi_build || return
  [ -f .deps/ompi-cuda/env.sh ] || { record mpi_gpuaware skip "no .deps/ompi-cuda/env.sh"; return; }
  (
    # shellcheck disable=SC1091
    . .deps/ompi-cuda/env.sh
    local log="$OUT/mpi_gpuaware.log" pre="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" t rc fails=0 n=0 cs
    local run=(timeout "${DEVICE_MPI_TIMEOUT:-300}" mpirun -np 2 --oversubscribe --bind-to none --mca pml ob1
               --mca btl self,vader,smcuda -x GDTETEST_MODE=cuda -x LD_PRELOAD="$pre")
    : >"$log"
    for t in "pingpong_test" "wildcard_test" "errors_test" "threads_test" "regress_test" "finalize_test" \
             "halo3d_test 32 3 nonblocking" "halo3d_test 32 3 persistent" "halo3d_test 32 2 sendrecv" \
             "random_test --cases ${DEVICE_MPI_RANDOM_CASES:-4000}" \
             "random_test --cases $(( ${DEVICE_MPI_RANDOM_CASES:-4000} / 4 )) --seed 77"; do
      echo "== $t" >>"$log"
      # shellcheck disable=SC2086
      "${run[@]}" -x GDTE_LOG=info $MPI_BUILD/tests/mpi/$t >>"$log" 2>&1
      rc=$?
      n=$((n + 1))
      [ $rc -eq 0 ] || { fails=$((fails + 1)); echo "FAILED rc=$rc: $t" | tee -a "$SUMMARY"; }
    done
    # The device-staging path (messages to other nodes take it) with the node path off.
    for t in "pingpong_test" "random_test --cases $(( ${DEVICE_MPI_RANDOM_CASES:-4000} / 4 )) --seed 78"; do
      echo "== GDTE_MPI_IPC=0 $t" >>"$log"
      # shellcheck disable=SC2086
      "${run[@]}" -x GDTE_LOG=info -x GDTE_MPI_IPC=0 $MPI_BUILD/tests/mpi/$t >>"$log" 2>&1
      rc=$?
      n=$((n + 1))
      [ $rc -eq 0 ] || { fails=$((fails + 1)); echo "FAILED rc=$rc: GDTE_MPI_IPC=0 $t" | tee -a "$SUMMARY"; }
    done
    grep -q "MPI moves device memory (MPIX_Query_cuda_support())" "$log" ||
      { fails=$((fails + 1)); echo "the interposer did not find the MPI GPU-aware" | tee -a "$SUMMARY"; }
    [ $fails -eq 0 ] && record mpi_gpuaware ok "$n programs on ompi-cuda (node path; device staging with GDTE_MPI_IPC=0)" ||
      record mpi_gpuaware FAIL "$fails of $n, see mpi_gpuaware.log"
    # No compute-sanitizer run here: under it this Open MPI's CUDA support fails (its host
    # registration and IPC copies return "invalid argument", then ob1 treats device staging as
    # host memory and faults inside opal_convertor; device-run of 2026-11-24). gdte's kernels on
    # device staging are the ones section mpi_memcheck checks through the host-staged path.
  )
}

# Small-message latency probe (issue: 1-16 KiB device messages far slower than 64 KiB): bench/mpi
# latency rows for contig at 1K..64K under variants of the MPI's shared-memory protocol and of
# gdte's zero copy, each with the raw IPC row, into $OUT/latprobe.csv (mpi column = variant).
section_latprobe() {
  mpi_build || return
  local csv="$OUT/latprobe.csv" pre="$PWD/$MPI_BUILD/src/mpi/libgdte_mpi.so" v log="$OUT/latprobe.log"
  rm -f "$csv"; : >"$log"
  lp() {
    local label=$1; shift
    echo "== $label: $*" >>"$log"
    timeout 120 mpirun -np 2 --oversubscribe --bind-to none -x GDTETEST_COMMIT -x LD_PRELOAD="$pre" "$@" \
      "$MPI_BUILD/bench/mpi/mpibench" --mem device --mpi-label "$label" --csv "$csv" --benchmarks latency \
      --layouts contig,vector --sizes 1K,16K,32K,64K,256K --budget 0.3 >>"$log" 2>&1 || echo "rc=$? $label" >>"$log"
  }
  lp default
  lp zc-off -x GDTE_ZERO_COPY=off
  lp vader-nocma --mca btl_vader_single_copy_mechanism none
  lp vader-eager64k --mca btl_vader_eager_limit 65536 --mca btl_vader_max_send_size 65536
  lp spin-yield -x CUDA_DEVICE_MAX_CONNECTIONS=1
  timeout 300 mpirun -np 2 --oversubscribe --bind-to none "$MPI_BUILD/bench/mpi/ctxprobe" --iters 100 \
    --csv "$OUT/ctxprobe.csv" >>"$log" 2>&1 || echo "ctxprobe rc=$?" >>"$log"
  grep "^ctxprobe" "$log" | tee -a "$SUMMARY"
  awk -F, 'NR > 1 { printf "%-16s %-8s %-8s %8d B %10.2f us\n", $4, $5, $6, $7, $8 }' "$csv" | tee -a "$SUMMARY"
  record latprobe ok "$(basename "$csv")"
}

# ==== GPU-aware Open MPI check (on demand: DEVICE_SECTIONS=gpuompi_check; not in DEFAULT_SECTIONS) ====
# The CUDA-aware Open MPI 4.1.4 built by tools/build_gpu_ompi.sh and carried in .deps/ompi-cuda
# (carry .deps): ompi_info's CUDA flag, then tools/gpu_ompi_check.c (cudaMalloc'ed buffers straight
# into MPI_Send/MPI_Recv, verified; a 4 MiB ping-pong for the bandwidth) compiled here with the
# carried mpicc against the CUDA toolkit of nvcc, run on 2 ranks with pml ob1 and btl
# self,vader,smcuda (CUDA IPC within the node, logged by btl_smcuda_cuda_ipc_verbose). With more
# than one GPU it runs again with both ranks on GPU 0. Logs: $OUT/gpuompi_check.log (ompi_info,
# compile), $OUT/gpuompi_run[_gpu0].log (the runs).
# Environment: DEVICE_GPUOMPI_TIMEOUT (seconds per run, default 120).
section_gpuompi_check() {
  local log="$OUT/gpuompi_check.log" dir="$PWD/.deps/ompi-cuda" bdir=build-gpuompi cuda rc ng line
  [ -f "$dir/env.sh" ] || { record gpuompi_check skip "no .deps/ompi-cuda: run tools/build_gpu_ompi.sh, carry .deps"; return; }
  cuda=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")")
  ng=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  (
    . "$dir/env.sh"
    echo "== $(date -u +%FT%TZ) $(hostname); mpicc: $(command -v mpicc); CUDA: $cuda"
    cat "$dir/BUILD-INFO" 2>/dev/null | head -1
    ompi_info --parsable --all | grep mpi_built_with_cuda_support
  ) >"$log" 2>&1
  if grep -q 'mpi_built_with_cuda_support:value:true' "$log"; then record gpuompi_info ok "mpi_built_with_cuda_support:value:true"
  else record gpuompi_info FAIL "no CUDA support in ompi_info, see gpuompi_check.log"; return; fi
  (
    . "$dir/env.sh"
    mkdir -p "$bdir" &&
      mpicc -O2 -o "$bdir/gpu_ompi_check" tools/gpu_ompi_check.c -I"$cuda/include" -L"$cuda/lib64" \
        -Wl,-rpath,"$cuda/lib64" -lcudart
  ) >>"$log" 2>&1 || { record gpuompi_check FAIL "compile failed, see gpuompi_check.log"; tail -20 "$log"; return; }
  local runs=("") r
  [ "${ng:-0}" -gt 1 ] && runs+=(0)
  for r in "${runs[@]}"; do
    local rlog="$OUT/gpuompi_run${r:+_gpu$r}.log"
    (
      . "$dir/env.sh"
      [ -z "$r" ] || export CUDA_VISIBLE_DEVICES=$r
      echo "== mpirun, CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset}"
      timeout "${DEVICE_GPUOMPI_TIMEOUT:-120}" mpirun -np 2 --oversubscribe --bind-to none --mca pml ob1 \
        --mca btl self,vader,smcuda --mca btl_smcuda_cuda_ipc_verbose 10 "$bdir/gpu_ompi_check"
    ) >"$rlog" 2>&1
    rc=$?
    line=$(grep -E '^gpu_ompi_check: 4 MiB one-way' "$rlog" | tail -1 | sed 's/^gpu_ompi_check: //')
    line="$line; CUDA IPC: $(grep -c 'ACCESS=1' "$rlog") ACCESS=1, $(grep -c 'ACCESS=0\|Access is disabled\|no P2P' "$rlog") refused"
    grep -q 'CUDA-aware support is disabled' "$rlog" && line="$line; libcuda.so.1 NOT loaded"
    if [ $rc -eq 0 ] && grep -q '^gpu_ompi_check: OK' "$rlog"; then
      record "gpuompi_check${r:+_gpu$r}" ok "$ng GPU(s): $line"
    else
      record "gpuompi_check${r:+_gpu$r}" FAIL "rc=$rc, see $(basename "$rlog")"; grep -v '^\[' "$rlog" | tail -15
    fi
    grep -E '^gpu_ompi_check: (MPIX|OK|FAIL)' "$rlog" | sed 's/^/  /' | tee -a "$SUMMARY"
  done
}
# ==== end of GPU-aware Open MPI check ============================================================

# The machine's own Open MPI alone (host buffers, nothing of gdte's): tools/ompi_ldc_probe.c,
# 32-, 16- and 20-byte elements received through a vector of stride 2, sent as MPI_PACKED,
# as contiguous elements and as bytes, below and past the eager size, with the shared-memory
# single copy on and off (docs/RELIABILITY.md). Log: $OUT/ompi_probe.log.
section_ompi_probe() {
  local log="$OUT/ompi_probe.log" exe=build-ompi-probe/ompi_ldc_probe mca el how n line aborts=0 bad=0 runs=0
  mkdir -p build-ompi-probe
  if command -v mpicc >/dev/null; then mpicc -O2 -o "$exe" tools/ompi_ldc_probe.c
  else gcc -O2 -I.deps/mpi/include -o "$exe" tools/ompi_ldc_probe.c -lmpi; fi >"$log" 2>&1 ||
    { record ompi_probe FAIL "compile failed, see ompi_probe.log"; return; }
  echo "== $(date -u +%FT%TZ) $(mpirun --version 2>&1 | head -1)" >>"$log"
  for mca in "" "--mca btl_vader_single_copy_mechanism none"; do
    for el in ldc ld ldi; do
      for how in 0 1 2; do
        for n in 12 1000; do
          line=$(timeout 30 mpirun -np 2 --oversubscribe --bind-to none $mca "$exe" $how $n $el 2>&1 |
                 grep -E "bad elements|buffer overflow" | head -1)
          echo "mca[${mca:-default}] el $el how $how n $n: ${line:-no result}" >>"$log"
          runs=$((runs + 1))
          case "$line" in *overflow*) aborts=$((aborts + 1)) ;; *" 0 bad"*) ;; *) bad=$((bad + 1)) ;; esac
        done
      done
    done
  done
  record ompi_probe ok "$runs runs: $aborts aborted in the MPI, $bad wrong or no result (see ompi_probe.log)"
}

for s in $SECTIONS; do
  if declare -F "section_$s" >/dev/null; then "section_$s"; else record "$s" skip "no such section"; fi
done

echo
echo "== summary ($GDTETEST_COMMIT) =="
cat "$SUMMARY"
if [ -f "$OUT/pack.csv" ]; then
  echo
  echo "== bench/pack: gdte (GB/s of packed bytes, ratio to cudaMemcpy of the same bytes) =="
  awk -F, 'NR > 1 && ($4 == "gdte" || $4 ~ /first_use|cached_wall/) {
             printf "%-10s %-16s %-6s %9.1f GB/s  x%s\n", $3, $4, $5, $8, $9 }' "$OUT/pack.csv"
fi
grep -q FAIL "$SUMMARY" && exit 1 || exit 0
