#!/usr/bin/env bash
# The stable-ABI check (make test-abi): tests/abi/client.c, a trainer that
# keeps every struct it passes in a guarded block of exactly its own
# sizeof, built against three headers and run against three libraries:
#
#   client header         library                what it shows
#   0.3.0 (verbatim)      today's libcoordl.a    a binary built against 0.3.0
#   0.3.0                 today's libcoordl.so   ... through the shared library
#   0.3.0                 grown                  a library whose structs are
#                                                larger than the caller's
#   today's               grown                  (same, through the macros)
#   grown                 today's                a newer header than the
#                                                library: unknown set field
#                                                refused, outputs zero-filled
#   grown                 grown                  the future field accepted
#
# "grown" is today's coordl.h with a 24-byte field appended to every public
# struct (what the next release's appended fields do), generated here at
# test time, with coordl.c compiled against it.
#
# Env (the Makefile passes them): CC, CFLAGS (incl. sanitizers), LIBS, BUILD.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CC:=cc}" "${CFLAGS:=-std=c11 -O2 -g -D_GNU_SOURCE}" "${LIBS:=-ljpeg -lhwloc -lcurl -luring -lpthread -lm}" "${BUILD:=build}"
out=$BUILD/abi
mkdir -p "$out/grown"

# the dataset: 2 classes x 8 small JPEGs
[ -d "$out/data" ] || "$BUILD/examples/gen_dataset" --out "$out/data" --classes 2 --per-class 8 --seed 3 \
    --min-side 40 --max-side 72 >/dev/null

# today's header with a field appended to each public struct
structs="coordl_config coordl_batch coordl_stats coordl_epoch_stats coordl_transform coordl_analyze_opts coordl_report"
awk -v list="$structs" '
    BEGIN { n = split(list, s, " "); for (i = 1; i <= n; i++) want["} " s[i] ";"] = 1 }
    ($0 in want) { print "    uint64_t abi_future_[3]; /* tests/abi: a field of a later release */"; grown++ }
    { print }
    END { if (grown != 7) { print "tests/abi/run.sh: grew " grown " structs, expected 7" > "/dev/stderr"; exit 1 } }
' coordl.h >"$out/grown/coordl.h"
cp coordl.c "$out/grown/coordl.c"
# shellcheck disable=SC2086
$CC $CFLAGS -c "$out/grown/coordl.c" -o "$out/grown/coordl.o"
rm -f "$out/grown/libcoordl.a"
ar rcs "$out/grown/libcoordl.a" "$out/grown/coordl.o"

fail=0
run() { # name, then the command
    local name=$1; shift
    echo "== abi: $name"
    "$@" "$out/data" || { echo "abi: FAILED: $name"; fail=1; }
}
build() { # exe, header define, include dir, grown client?, grown library?, link args...
    local exe=$1 hdr=$2 inc=$3 cg=$4 lg=$5; shift 5
    # shellcheck disable=SC2086
    $CC $CFLAGS -I"$inc" -DCLIENT_HEADER="\"$hdr\"" -DCLIENT_GROWN="$cg" -DLIB_GROWN="$lg" \
        tests/abi/client.c "$@" $LIBS -o "$out/$exe"
}

build v030-static coordl-0.3.0.h tests/abi 0 0 "$BUILD/libcoordl.a"
build v030-shared coordl-0.3.0.h tests/abi 0 0 -L"$BUILD" -lcoordl
build v030-grownlib coordl-0.3.0.h tests/abi 0 1 "$out/grown/libcoordl.a"
build current-grownlib coordl.h . 0 1 "$out/grown/libcoordl.a"
build grown-current coordl.h "$out/grown" 1 0 "$BUILD/libcoordl.a"
build grown-grownlib coordl.h "$out/grown" 1 1 "$out/grown/libcoordl.a"

# the shared client must really load libcoordl.so.0 (not a static copy)
if ! readelf -d "$out/v030-shared" | grep -q 'NEEDED.*libcoordl\.so\.0'; then
    echo "abi: v030-shared does not need libcoordl.so.0"; fail=1
fi
run "0.3.0 client, libcoordl.a" "$out/v030-static"
run "0.3.0 client, libcoordl.so.0" env LD_LIBRARY_PATH="$BUILD" "$out/v030-shared"
run "0.3.0 client, grown library" "$out/v030-grownlib"
run "current client, grown library" "$out/current-grownlib"
run "grown client, current library" "$out/grown-current"
run "grown client, grown library" "$out/grown-grownlib"
if [ $fail -ne 0 ]; then echo "make test-abi: FAILED"; exit 1; fi
echo "make test-abi: all ABI clients passed"
