#!/usr/bin/env bash
# Builds a CUDA-aware Open MPI (Debian 12's source package, 4.1.4) on the developer machine and
# installs a small, relocatable copy into .deps/ompi-cuda (git-ignored), to be carried to the
# GPU machine with the device tool (carry [".deps"]). See tools/README-gpu-ompi.md.
#
#   bash tools/build_gpu_ompi.sh          # idempotent: reuses the source, build and stage below
#   . .deps/ompi-cuda/env.sh              # PATH, LD_LIBRARY_PATH, OPAL_PREFIX for this location
#
# What is built: C bindings only (no Fortran, C++ bindings, Java, OpenSHMEM, MPI-IO), every MCA
# component linked into the libraries (--enable-mca-static: no plugin directory to go stale;
# not --disable-mca-dso, which also disables dlopen and with it CUDA),
# bundled hwloc/libevent/PMIx (the install needs only libc, libm and libz from the system),
# pml ob1 with btl self, vader and smcuda (CUDA IPC inside a node), coll cuda, rcache gpusm and
# rgpusm, the launcher for one node (ess hnp/env/singleton, plm rsh/isolated, rmaps, odls...).
# CUDA: only cuda.h is needed to build; libcuda.so.1 is dlopen()ed at run time (common_cuda),
# so nothing links to the toolkit or its stubs.
# The install is configured for a neutral prefix (/opt/gdte/ompi-cuda, never used as such) and
# always run relocated: env.sh sets OPAL_PREFIX to wherever the folder lies, libraries and
# programs find each other through RUNPATH $ORIGIN.
#
# Environment: GPU_OMPI_PREFIX (default .deps/ompi-cuda), GPU_OMPI_WORK (scratch, default
# /tmp/ompi-cuda-build), GPU_OMPI_JOBS (default 2), CUDA_HOME (default /usr/local/cuda),
# GPU_OMPI_REBUILD=1 (rebuild from a fresh configure). tools/device_deps.sh empties .deps: run
# this again afterwards (it then only copies the cached stage, seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PREFIX=${GPU_OMPI_PREFIX:-$REPO/.deps/ompi-cuda}
WORK=${GPU_OMPI_WORK:-/tmp/ompi-cuda-build}
JOBS=${GPU_OMPI_JOBS:-2}
CUDA=${CUDA_HOME:-/usr/local/cuda}
BAKED=/opt/gdte/ompi-cuda            # configure --prefix; replaced by OPAL_PREFIX at run time
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
log() { printf '== %s\n' "$*"; }

[ -f "$CUDA/include/cuda.h" ] || { echo "no $CUDA/include/cuda.h (set CUDA_HOME)" >&2; exit 1; }
mkdir -p "$WORK"

# 1. Tools: a compiler, make, perl, patchelf (RUNPATH), file, dpkg-source.
need=()
for p in gcc make perl patchelf file xz-utils dpkg-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  $SUDO apt-get install -y --no-install-recommends "${need[@]}"
fi

# 2. Debian's source package (pristine upstream tarball; Debian's patches are for other
#    architectures, Fortran and Debian's libdir, and touch configure.ac/Makefile.am, which
#    would make the build rerun autotools).
SRC=$WORK/src
if [ ! -x "$SRC/configure" ]; then
  if ! apt-cache showsrc openmpi 2>/dev/null | grep -q '^Version:'; then
    log "adding deb-src for bookworm"
    printf '%s\n' "deb-src http://deb.debian.org/debian bookworm main" \
      "deb-src http://deb.debian.org/debian bookworm-updates main" \
      "deb-src http://deb.debian.org/debian-security bookworm-security main" |
      $SUDO tee /etc/apt/sources.list.d/debian-src.list >/dev/null
    $SUDO apt-get update -qq
  fi
  log "apt-get source openmpi into $WORK"
  rm -rf "$SRC" "$WORK"/dl && mkdir -p "$WORK/dl"
  (cd "$WORK/dl" && apt-get source --download-only openmpi && dpkg-source -x --skip-patches ./openmpi_*.dsc "$SRC")
fi
VERSION=$(sed -n "s/^repo_rev=v//p" "$SRC/VERSION")

# 3. Configure (out of tree). The stamp holds the options: change them and it reconfigures.
NO_BUILD=$(tr -d ' \n' <<'EOF'
btl-ofi,btl-openib,btl-portals4,btl-scif,btl-sm,btl-tcp,btl-uct,btl-ugni,btl-usnic,
common-ofi,common-ucx,common-verbs,common-verbs_usnic,
crs-self,dl-libltdl,memchecker-valgrind,mpool-memkind,rcache-udreg,reachable-netlink,
pmix-cray,pmix-ext1x,pmix-ext2x,pmix-ext3x,pmix-flux,pmix-s1,pmix-s2,
ess-alps,ess-lsf,ess-slurm,ess-tm,odls-alps,oob-alps,oob-ud,plm-alps,plm-lsf,plm-slurm,plm-tm,
ras-alps,ras-gridengine,ras-lsf,ras-simulator,ras-slurm,ras-tm,
schizo-alps,schizo-flux,schizo-jsm,schizo-moab,schizo-singularity,schizo-slurm,
snapc-full,sstore-central,sstore-stage,
coll-adapt,coll-fca,coll-han,coll-hcoll,coll-monitoring,coll-portals4,coll-spacc,coll-ucc,
common-monitoring,common-ompio,crcp-bkmrk,
fbtl-ime,fbtl-plfs,fbtl-posix,fbtl-pvfs2,
fcoll-dynamic,fcoll-dynamic_gen2,fcoll-individual,fcoll-static,fcoll-two_phase,fcoll-vulcan,
fs-gpfs,fs-ime,fs-lustre,fs-plfs,fs-pvfs2,fs-ufs,io-ompio,io-romio321,
sharedfp-individual,sharedfp-lockedfile,sharedfp-sm,
mtl-mxm,mtl-ofi,mtl-portals4,mtl-psm,mtl-psm2,op-avx,
osc-monitoring,osc-portals4,osc-ucx,
pml-cm,pml-crcpw,pml-monitoring,pml-ucx,pml-v,pml-yalla,
rte-pmix,topo-treematch,vprotocol-pessimist
EOF
)
CONF=(--prefix="$BAKED" --with-cuda="$CUDA"
  --enable-shared --disable-static --enable-mca-static --disable-debug
  --disable-mpi-fortran --disable-mpi-cxx --disable-mpi-java --disable-oshmem --disable-io-romio
  --with-hwloc=internal --with-libevent=internal --with-pmix=internal --disable-hwloc-pci
  --without-ucx --without-verbs --without-ofi --without-psm --without-psm2 --without-portals4
  --without-ugni --without-usnic --without-hcoll --without-fca --without-mxm --without-knem
  --without-xpmem --without-cray-xpmem --without-slurm --without-tm --without-lsf --without-alps
  --without-sge --without-valgrind --without-x --without-pmi --without-flux-pmi
  --enable-mca-no-build="$NO_BUILD")
BUILD=$WORK/build
STAMP="$VERSION ${CONF[*]}"
if [ "${GPU_OMPI_REBUILD:-0}" = 1 ] || [ ! -f "$BUILD/config.status" ] ||
   [ "$(cat "$BUILD/.conf-stamp" 2>/dev/null)" != "$STAMP" ]; then
  log "configure Open MPI $VERSION (log: $BUILD/configure.out)"
  rm -rf "$BUILD" "$WORK/destdir" "$WORK/stage" && mkdir -p "$BUILD"
  (cd "$BUILD" && nice -n 10 "$SRC/configure" "${CONF[@]}" >configure.out 2>&1) ||
    { tail -40 "$BUILD/configure.out"; exit 1; }
  echo "$STAMP" >"$BUILD/.conf-stamp"
  grep -q '^#define OPAL_CUDA_SUPPORT 1' "$BUILD/opal/include/opal_config.h" ||
    { echo "configure did not enable CUDA support" >&2; exit 1; }
fi

# 4. Build and install into a scratch DESTDIR (make is a no-op when nothing changed).
if [ ! -f "$WORK/.installed" ] || [ "$BUILD/.conf-stamp" -nt "$WORK/.installed" ]; then
  log "make -j$JOBS (log: $BUILD/make.out)"
  (cd "$BUILD" && nice -n 10 make -j"$JOBS" >make.out 2>&1) || { tail -40 "$BUILD/make.out"; exit 1; }
  rm -rf "$WORK/destdir" "$WORK/stage"
  (cd "$BUILD" && nice -n 10 make install DESTDIR="$WORK/destdir" >install.out 2>&1) ||
    { tail -40 "$BUILD/install.out"; exit 1; }
  touch "$WORK/.installed"
fi

# 5. Stage: prune, strip, RUNPATH $ORIGIN, pkg-config files relative to themselves.
STAGE=$WORK/stage
if [ ! -f "$WORK/.staged" ] || [ "$WORK/.installed" -nt "$WORK/.staged" ]; then
  log "staging (prune, strip) in $STAGE"
  rm -rf "$STAGE" && cp -a "$WORK/destdir$BAKED" "$STAGE"
  ( cd "$STAGE"
    rm -rf share/man share/doc share/openmpi/amca-param-sets share/openmpi/*.pl lib/openmpi lib/pmix
    rm -f lib/*.la lib/*.a lib/*.mod include/*.mod include/mpif*.h
    rm -f share/openmpi/mpif*-wrapper-data.txt share/openmpi/mpifort-wrapper-data.txt \
          share/openmpi/ortecc-wrapper-data.txt share/openmpi/oshmem*-wrapper-data.txt \
          share/openmpi/shmem*-wrapper-data.txt lib/pkgconfig/ompi-fort.pc lib/pkgconfig/ompi-f*.pc
    for f in bin/*; do
      case $(basename "$f") in
        mpicc|mpicxx|mpic++|mpiCC|mpirun|mpiexec|orterun|orted|ompi_info|orte-info|opal_wrapper|orte-clean|ompi-clean) ;;
        *) rm -f "$f" ;;
      esac
    done
    find . -type f \( -name '*.so*' -o -path './bin/*' \) -print0 | while IFS= read -r -d '' f; do
      file -b "$f" | grep -q '^ELF' || continue
      strip --strip-unneeded "$f"
      if patchelf --print-rpath "$f" | grep -q .; then
        case $f in ./bin/*) patchelf --set-rpath '$ORIGIN/../lib' "$f" ;; *) patchelf --set-rpath '$ORIGIN' "$f" ;; esac
      fi
    done
    sed -i "s|^prefix=.*|prefix=\${pcfiledir}/../..|" lib/pkgconfig/*.pc 2>/dev/null || true
    cat >env.sh <<'ENV'
# Source this (bash): uses the CUDA-aware Open MPI in this folder, wherever the folder lies.
_gdte_ompi=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)
export OPAL_PREFIX=$_gdte_ompi
export PATH=$_gdte_ompi/bin:$PATH
export LD_LIBRARY_PATH=$_gdte_ompi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export MPI_HOME=$_gdte_ompi          # hint for CMake's FindMPI
unset _gdte_ompi
ENV
  )
  touch "$WORK/.staged"
fi

# 6. Into the repository's .deps (emptied by tools/device_deps.sh: then just run this again).
log "installing into $PREFIX"
rm -rf "$PREFIX" && mkdir -p "$(dirname "$PREFIX")" && cp -a "$STAGE" "$PREFIX"
echo "Open MPI $VERSION, CUDA from $CUDA, configured prefix $BAKED (relocated by env.sh)" >"$PREFIX/BUILD-INFO"
echo "configure ${CONF[*]}" >>"$PREFIX/BUILD-INFO"

# 7. Quick check (needs no GPU) and the size.
( . "$PREFIX/env.sh"
  ompi_info --parsable --all 2>/dev/null | grep -m1 'mpi_built_with_cuda_support:value:true' ||
    { echo "ompi_info: no CUDA support" >&2; exit 1; }
  ompi_info | grep -E 'MPI extensions|btl: smcuda|coll: cuda|rcache: gpusm' )
log "prefix $PREFIX: $(du -sh "$PREFIX" | cut -f1) ($(du -sb "$PREFIX" | cut -f1) bytes)"
