#!/usr/bin/env bash
# MPICH's own test suite (test/mpi of Debian's mpich source package), built against the system's
# Open MPI and run through gdte's interposer with every heap buffer of the tests made fake device
# memory (tests/mpi/heapdev.c), beside the same tests on the MPI alone. A test that passes on the
# MPI alone and fails through gdte is a gdte defect; one that fails both ways is the MPI's (or a
# test of MPICH-only behaviour) and is listed, not counted against gdte.
#
#   tools/mpich_suite.sh [--work DIR] [--build DIR] [--dirs "datatype pt2pt coll rma"]
#                        [--filter REGEX] [--modes "plain heapdev"] [--timeout S]
#
# --build is a gdte build tree with tests (default build/: libgdte_mpi.so and libgdte_heapdev.so).
# Results: DIR/results-<mode>.txt (one line per test run: status, dir, name, np, args) and a
# summary on stdout; exit status 1 when a test passes plain and fails through gdte.
# Needs a deb-src entry (tools/build_gpu_ompi.sh adds one) and network access to fetch the source.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=/tmp/gdte-mpich
build="$here/build"
dirs="datatype pt2pt coll rma"
filter=""
modes="plain heapdev"
limit=120
while [ $# -gt 0 ]; do
  case "$1" in
    --work) work=$2; shift 2 ;;
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --dirs) dirs=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --timeout) limit=$2; shift 2 ;;
    *) echo "usage: $0 [--work DIR] [--build DIR] [--dirs LIST] [--filter REGEX] [--modes LIST] [--timeout S]" >&2; exit 2 ;;
  esac
done
lib="$build/src/mpi/libgdte_mpi.so"
heap="$build/tests/mpi/libgdte_heapdev.so"
for f in "$lib" "$heap"; do [ -f "$f" ] || { echo "mpich_suite: $f missing (build gdte with tests first)" >&2; exit 2; }; done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

mkdir -p "$work"
src=$(ls -d "$work"/mpich-*/test/mpi 2>/dev/null | head -1 || true)
if [ -z "$src" ]; then
  if ! grep -rqs "^deb-src" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "mpich_suite: no deb-src entry in apt's sources (tools/build_gpu_ompi.sh adds one)" >&2; exit 2
  fi
  (cd "$work" && apt-get source --download-only mpich >/dev/null 2>&1)
  tarball=$(ls "$work"/mpich_*.orig.tar.* | head -1)
  top=$(tar tf "$tarball" | head -1 | cut -d/ -f1)
  tar xf "$tarball" -C "$work" "$top/test/mpi" "$top/confdb"
  src="$work/$top/test/mpi"
fi
cd "$src"
if [ ! -f Makefile ]; then
  echo "mpich_suite: configuring $src"
  ./configure CC=mpicc --disable-fortran --disable-cxx --disable-spawn --disable-ft-tests \
      --disable-perftest --disable-romio --enable-strictmpi >"$work/configure.log" 2>&1 ||
    { echo "mpich_suite: configure failed, see $work/configure.log" >&2; exit 1; }
fi
# Open MPI 4.1's mpi.h hides the MPI-1 names that MPI-3 removed; the datatype pools still call
# three of them, whose MPI-2 replacements have the same arguments. (Tests of the removed names
# themselves are marked strict=false in the testlists and skipped.) Tests of MPI 4.0 calls do not
# link against Open MPI 4.1: listed "not built".
compat="-DOMPI_OMIT_MPI1_COMPAT_DECLS=1 -DMPI_Type_hindexed=MPI_Type_create_hindexed"
compat+=" -DMPI_Type_hvector=MPI_Type_create_hvector -DMPI_Type_struct=MPI_Type_create_struct"
compat+=" -DMPI_Address=MPI_Get_address"
for d in util dtpools $dirs; do
  make -C "$d" -j "$(nproc)" -k CPPFLAGS="$compat" >"$work/make-$d.log" 2>&1 ||
    echo "mpich_suite: some of $d did not build (see $work/make-$d.log)"
done

# Runs one testlist line in one mode; prints "PASS|FAIL|SKIP dir name np args".
run_one() {
  local mode=$1 d=$2; shift 2
  local name=$1 np=$2; shift 2
  local args=() envs=() t=$limit kv
  for kv in "$@"; do
    case "$kv" in
      # The datatype-pool tests pick each buffer's memory kind; without a GPU in the suite's
      # build, "random" divides by a device count of 0. Host memory: heapdev makes it device.
      arg=-memtype=random|arg=-memtype=all) args+=(-memtype=host) ;;
      arg=*) args+=("${kv#arg=}") ;;
      env=*) envs+=(-x "${kv#env=}") ;;
      timeLimit=*) t=$(( ${kv#timeLimit=} > limit ? ${kv#timeLimit=} : limit )) ;;
      strict=false|strict=FALSE) echo "SKIP $d $name $np (not strict MPI)"; return ;;
      mpiversion=*) [ "${kv#mpiversion=}" \> "3.1" ] && { echo "SKIP $d $name $np (MPI ${kv#mpiversion=})"; return; } ;;
      xfail=*) echo "SKIP $d $name $np (expected to fail: ${kv#xfail=})"; return ;;
    esac
  done
  [ -x "$d/$name" ] || { echo "SKIP $d $name $np (not built)"; return; }
  local pre=()
  case "$mode" in
    heapdev) pre=(-x LD_PRELOAD="$heap:$lib" -x GDTE_FAKE_DEVICE=1 -x GDTETEST_HEAPDEV_LIBS=libdtpools) ;;
    plain) ;;
  esac
  local out rc=0
  out=$(cd "$d" && timeout "$t" mpirun -np "$np" --oversubscribe -x OMPI_MCA_btl=self,vader "${pre[@]}" "${envs[@]}" \
          ./"$name" "${args[@]}" 2>&1 </dev/null) || rc=$?
  if [ $rc -eq 0 ] && grep -q "No Errors" <<<"$out"; then
    echo "PASS $d $name $np ${args[*]}"
  else
    echo "FAIL $d $name $np ${args[*]} (rc $rc)"
    { echo "=== $mode $d $name $np ${args[*]} (rc $rc)"; tail -40 <<<"$out"; } >>"$work/failures-$mode.log"
  fi
}

for mode in $modes; do
  : >"$work/results-$mode.txt"; : >"$work/failures-$mode.log"
  for d in $dirs; do
    for list in "$d/testlist" "$d/testlist.gpu" "$d/testlist.dtp"; do
      [ -f "$list" ] || continue
      while read -r -a f; do
        [ ${#f[@]} -ge 2 ] || continue
        case "${f[0]}" in \#*) continue ;; esac
        [ -z "$filter" ] || [[ "$d/${f[0]}" =~ $filter ]] || continue
        run_one "$mode" "$d" "${f[@]}" | tee -a "$work/results-$mode.txt"
      done <"$list"
    done
  done
done

# Summary: per mode counts; tests that pass plain and fail through gdte.
for mode in $modes; do
  printf "%-8s pass %4d  fail %4d  skip %4d\n" "$mode" "$(grep -c ^PASS "$work/results-$mode.txt" || true)" \
    "$(grep -c ^FAIL "$work/results-$mode.txt" || true)" "$(grep -c ^SKIP "$work/results-$mode.txt" || true)"
done
status=0
if [[ " $modes " == *" plain "* ]]; then
  for mode in $modes; do
    [ "$mode" = plain ] && continue
    regress=$(comm -12 <(sed -n "s/^PASS \(.*\)$/\1/p" "$work/results-plain.txt" | sed "s/ *$//" | sort) \
                         <(sed -n 's/^FAIL \(.*\) (rc.*$/\1/p' "$work/results-$mode.txt" | sed 's/ *$//' | sort) || true)
    if [ -n "$regress" ]; then
      echo "passes on the MPI alone, fails under $mode:"; sed 's/^/  /' <<<"$regress"; status=1
    fi
  done
fi
exit $status
