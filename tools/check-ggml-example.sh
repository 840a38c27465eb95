#!/usr/bin/env bash
# tools/check-ggml-example.sh - examples/ggml/mnist_coordl.c against the real
# ggml: build ggml (ggml-org/ggml) with cmake under /tmp, compile the example
# with coordl.c, and run it: ggml's MNIST fully connected model trained with
# ggml_opt_alloc / ggml_opt_eval on 1-channel batches from coordl
# (channels = 1, COORDL_PIPE_EXACT), fetch before ggml_opt_alloc, a batch
# with a bad image skipped and training going on.
#
#   tools/check-ggml-example.sh [GGML_SRC]
#
# ggml's source is never downloaded: GGML_SRC (a checkout, or a bare git
# directory) or, when present, the mirror /work/.mirror/ggml-org+ggml/repo.
# Without either it prints that it SKIPPED and that nothing was checked,
# and exits 0. Exit 0: passed or skipped (the last line says which); 1: failed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
src=${1:-${GGML_SRC:-/work/.mirror/ggml-org+ggml/repo}}
if [ ! -e "$src" ]; then
    echo "check-ggml-example: SKIPPED: no ggml source at $src (give a ggml-org/ggml checkout or bare git dir as GGML_SRC); nothing was checked"
    exit 0
fi
command -v cmake > /dev/null || { echo "check-ggml-example: SKIPPED: cmake is not installed; nothing was checked"; exit 0; }
work=$(mktemp -d /tmp/coordl-ggml-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "check-ggml-example: FAILED: $*"; exit 1; }

if [ -d "$src/.git" ] || [ -f "$src/HEAD" ]; then
    git clone -q "$src" "$work/ggml"
    echo "check-ggml-example: ggml $(git -C "$work/ggml" log -1 --format='%h %cd' --date=short) from $src"
else
    cp -r "$src" "$work/ggml"
    echo "check-ggml-example: ggml tree copied from $src"
fi
cmake -S "$work/ggml" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
      -DGGML_BUILD_EXAMPLES=OFF -DGGML_BUILD_TESTS=OFF -DGGML_NATIVE=OFF > "$work/cmake.log" 2>&1 \
    || { tail -20 "$work/cmake.log"; fail "ggml's cmake configure failed"; }
cmake --build "$work/build" -j2 > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; fail "ggml did not build"; }
libs=$(find "$work/build" -name 'libggml*.a' | sort -r | tr '\n' ' ')
[ -n "$libs" ] || fail "no libggml*.a in the build"
omp=$(grep -q 'GGML_OPENMP:BOOL=ON' "$work/build/CMakeCache.txt" && echo -fopenmp || true)
cc -O2 -std=c11 -D_GNU_SOURCE -c "$here/coordl.c" -o "$work/coordl.o"
# the ggml libraries twice: ggml, ggml-cpu and ggml-base refer to each other
cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -I"$work/ggml/include" -I"$here" "$here/examples/ggml/mnist_coordl.c" \
   "$work/coordl.o" $libs $libs $omp -lstdc++ -lm -lpthread -ljpeg -lhwloc -lcurl -luring -o "$work/mnist_coordl" 2> "$work/cc.log" \
    || { cat "$work/cc.log"; fail "examples/ggml/mnist_coordl.c did not build against ggml"; }
[ ! -s "$work/cc.log" ] || { cat "$work/cc.log"; fail "warnings building the example"; }
echo "check-ggml-example: built examples/ggml/mnist_coordl.c against ggml ($libs)"
"$work/mnist_coordl" "$work/data" 8 > "$work/run.out" 2> "$work/run.err" \
    || { cat "$work/run.out"; tail -20 "$work/run.err"; fail "the example failed"; }
cat "$work/run.out"
grep -q "skipping a batch: .*0007.pgm" "$work/run.err" || { cat "$work/run.err"; fail "the bad image was not named"; }
grep -q "^mnist_coordl: PASSED" "$work/run.out" || fail "the example did not pass"
echo "check-ggml-example: PASSED"
