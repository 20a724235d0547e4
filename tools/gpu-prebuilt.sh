#!/bin/sh
# gpu-prebuilt.sh - run tools/gpu-check.sh on a GPU machine that has CUDA but
# none of our Debian build dependencies (jansson, OpenBLAS, libcheck,
# libmicrohttpd), e.g. a borrowed CUDA image with no package access. The
# build happens here; the GPU machine only runs it.
#
#   tools/gpu-prebuilt.sh pack [DIR]   (here, default DIR .dev)
#       builds build-dev (TD_CUDA=ON, Release, sm_90 unless
#       CUDA_ARCH=...), then packs into DIR: build.tar.xz (the test and bench
#       binaries, CTest files, CMakeCache) and libs.tar.xz (every shared
#       library they load, except glibc's, libstdc++/libgcc and CUDA's).
#   tools/gpu-prebuilt.sh run OUTDIR [DIR]   (there, from the repository root)
#       unpacks both, puts on LD_LIBRARY_PATH only the libraries that
#       machine lacks, points /work/main at this checkout when the CTest
#       files' absolute paths need it, runs PREBUILT=1 tools/gpu-check.sh and
#       leaves OUTDIR/gc.tgz (all its logs; a device's file limit may allow
#       only a few files).
#   tools/gpu-prebuilt.sh check [DIR]   (here, after pack)
#       unpacks DIR into a scratch tree as `run` does and uses it on this
#       CPU: every binary there, every library they load found (CUDA's own
#       excepted: the GPU machine brings them), the packed transformerd's
#       version and a translation equal to the default build's, and the
#       packed test_bind on cpu. Exit 0 only when all hold.
#   tools/gpu-prebuilt.sh selftest   (what `make test` runs)
#       pack into build-dev/pack, then check it: the Release build (-O3,
#       warnings as errors, the CUDA module for sm_90) and its pack cannot
#       rot unseen between two lent GPUs. Skipped (exit 0, said so) where
#       this machine has no CUDA toolkit.
#
# DIR (.dev) is git-ignored: a device tool that copies the working tree must
# be told to carry it. The packed binaries need the same CUDA major version there (libcudart,
# libcublas .so.13 for CUDA 13) and a glibc at least as new as here.
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BINS="tests/gpu/test_gpu_ops tests/gpu/test_gpu_attention tests/gpu/test_gpu_golden tests/test_bind bench/engine/bench_engine transformerd
      libtdcuda.so bench/load/bench_load"

# python's tarfile: the GPU machine may have no xz
x() { python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"; }

case "${1:-}" in
pack)
    D=${2:-.dev}
    mkdir -p "$D/libs"
    cmake -S . -B build-dev -DTD_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90-real}" >/dev/null || exit 1
    cmake --build build-dev -j "$(nproc)" >/dev/null || exit 1
    for b in $BINS; do ldd "build-dev/$b"; done | awk '/=>/ {print $1, $3}' | sort -u |
    while read -r n p; do
        case $n in
        libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libgcc_s* | \
        libstdc++* | libcudart* | libcublas*) ;;
        *) cp -L "$p" "$D/libs/$n" ;;
        esac
    done
    tar cJf "$D/libs.tar.xz" -C "$D/libs" . && rm -rf "$D/libs"
    { find build-dev -name CTestTestfile.cmake; echo build-dev/CMakeCache.txt
      for b in $BINS; do echo "build-dev/$b"; done; } >"$D/files"
    tar cJf "$D/build.tar.xz" -T "$D/files" && rm -f "$D/files"
    ls -la "$D"
    ;;
run)
    [ $# -ge 2 ] || { echo "usage: $0 run OUTDIR [DIR]" >&2; exit 2; }
    O=$2
    D=${3:-.dev}
    G=/tmp/gc
    L=/tmp/gpu-prebuilt-libs
    mkdir -p "$G" "$L/all" "$L/use" "$O"
    x "$D/libs.tar.xz" "$L/all" && x "$D/build.tar.xz" . || exit 1
    for f in "$L"/all/*; do
        n=$(basename "$f")
        ldconfig -p | grep -q "^[[:space:]]*$n " || cp -a "$f" "$L/use/"
    done
    # the CTest files name the source tree this was built in
    SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' build-dev/CMakeCache.txt)
    if [ -n "$SRC" ] && [ "$SRC" != "$ROOT" ] && [ ! -e "$SRC" ]; then
        mkdir -p "$(dirname "$SRC")" && ln -s "$ROOT" "$SRC"
    fi
    export LD_LIBRARY_PATH="$L/use${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    {
        echo "carried libraries used: $(ls "$L/use" | tr '\n' ' ')"
        for b in $BINS; do ldd "build-dev/$b" | grep "not found"; done
    } | tee "$G/env.log"
    cd "${SRC:-$ROOT}" || exit 1
    PREBUILT=1 BUILD=build-dev SANITIZE=${SANITIZE:-1} timeout "${GC_TIMEOUT:-420}" \
        tools/gpu-check.sh "$G"
    rc=$?
    tar czf "$O/gc.tgz" -C /tmp gc
    exit $rc
    ;;
check)
    D=${2:-.dev}
    T=$(mktemp -d /tmp/td-pack-check.XXXXXX)
    trap 'rm -rf "$T"' EXIT INT TERM
    mkdir -p "$T/libs" "$T/tree"
    x "$D/libs.tar.xz" "$T/libs" && x "$D/build.tar.xz" "$T/tree" || exit 1
    bad=0
    for b in $BINS; do
        f="$T/tree/build-dev/$b"
        if [ ! -f "$f" ]; then
            echo "check: $b is not in the pack"; bad=1; continue
        fi
        miss=$(LD_LIBRARY_PATH="$T/libs" ldd "$f" | awk '/not found/ {print $1}' |
               grep -v -E '^lib(cuda|cudart|cublas|cublasLt)\.so' || true)
        [ -z "$miss" ] || { echo "check: $b needs $(echo $miss) (not packed)"; bad=1; }
    done
    [ "$bad" = 0 ] || exit 1
    ex="$T/tree/build-dev/transformerd"
    LD_LIBRARY_PATH="$T/libs" "$ex" version || { echo "check: the packed transformerd does not run"; exit 1; }
    M=${MODEL:-models/en-de}
    if [ -f "$M/config.json" ]; then
        printf 'Hello world.\nThe file could not be saved.\n' >"$T/in.txt"
        LD_LIBRARY_PATH="$T/libs" "$ex" translate --model "$M" --device cpu <"$T/in.txt" >"$T/packed.txt" ||
            { echo "check: the packed transformerd cannot translate"; exit 1; }
        [ -s "$T/packed.txt" ] || { echo "check: the packed transformerd translated nothing"; exit 1; }
        if [ -x "${BUILD:-build}/transformerd" ]; then
            "${BUILD:-build}/transformerd" translate --model "$M" --device cpu <"$T/in.txt" >"$T/default.txt" &&
                cmp -s "$T/packed.txt" "$T/default.txt" ||
                { echo "check: the Release build translates otherwise than ${BUILD:-build}:";
                  cat "$T/packed.txt" "$T/default.txt"; exit 1; }
        fi
        echo "check: the packed transformerd translates: $(tr '\n' '|' <"$T/packed.txt")"
    fi
    # test_bind's test data are named by this checkout's absolute paths
    LD_LIBRARY_PATH="$T/libs" TD_TEST_DEVICE=cpu "$T/tree/build-dev/tests/test_bind" >"$T/bind.log" 2>&1 ||
        { tail -20 "$T/bind.log"; echo "check: the packed test_bind failed on cpu"; exit 1; }
    echo "check: the pack in $D holds, runs and passes test_bind on cpu"
    ;;
selftest)
    if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
        echo "gpu-prebuilt selftest: skipped: no CUDA toolkit (nvcc) on this machine"
        exit 0
    fi
    sh "$0" pack build-dev/pack >/dev/null && sh "$0" check build-dev/pack
    ;;
*)
    echo "usage: $0 pack [DIR] | check [DIR] | selftest | run OUTDIR [DIR]" >&2
    exit 2
    ;;
esac
