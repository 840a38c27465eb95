#!/usr/bin/env bash
# compare_revs.sh - image-prep throughput (bench/bench_prep.c) of coordl.c at
# two git revisions, measured alternately on the same dataset.
#
#   bench/compare_revs.sh [OLD_REV [NEW_REV]]      (default HEAD~1 HEAD)
#
# Each revision's coordl.c and coordl.h (`git show REV:coordl.c`; the word
# WORKTREE takes the files as they are in the working tree, uncommitted
# changes included) go to build/compare-revs/{old,new}/ and are compiled as
# the Makefile compiles the library; bench/bench_prep.c (with bench_common.h
# and bench_floor.h) from the working tree is linked against each, so the
# two binaries differ only in the library. A folder is rebuilt only when the
# sources it was built from changed.
#
# Then the two binaries run alternately, old new old new ..., ROUNDS times
# each, with the same arguments on the same dataset (each run: one warm-up
# epoch that fills the cache, untimed, then IMAGES images timed per case),
# and the per-round images/s are printed side by side with new/old per
# round, the median of those ratios (each pair ran back to back, so a slow
# spell of the machine hits both) and the ratio of the medians.
#
# Environment:
#   ROUNDS   runs of each binary (default 5; 3 at the least)
#   IMAGES   images per timed run and case (bench_prep --images; default
#            5120: about 2 s per case on one core of this machine; a whole
#            comparison with the defaults takes about 2 minutes, builds
#            included)
#   CASES    bench_prep cases (--only; default train1,eval1: 1 worker
#            thread each, the steadiest figures on a shared machine;
#            trainN uses every core)
#   BATCH    batch size (default 64)
#   DATA     the ImageFolder to read; default build/bench-data when it
#            exists (bash bench/run.sh dataset), else build/compare-revs/data,
#            made once with examples/gen_dataset (16 classes x 40 JPEGs of
#            200-400 px, seed 1)
#   CC, HWLOC_LIB (default -lhwloc; empty with EXTRA_CFLAGS=-DCOORDL_NO_HWLOC),
#   EXTRA_CFLAGS  as in the Makefile
# Output: the table on stdout, each run's log in build/compare-revs/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."

OLD_REV=${1:-HEAD~1}
NEW_REV=${2:-HEAD}
ROUNDS=${ROUNDS:-5}
IMAGES=${IMAGES:-5120}
CASES=${CASES:-train1,eval1}
BATCH=${BATCH:-64}
CC=${CC:-cc}
HWLOC_LIB=${HWLOC_LIB--lhwloc}
EXTRA_CFLAGS=${EXTRA_CFLAGS:-}
W=build/compare-revs
# shellcheck disable=SC2206 # HWLOC_LIB and EXTRA_CFLAGS are word lists
LIBS=(-ljpeg $HWLOC_LIB -lcurl -luring -lpthread -lm)
# as the Makefile: $(STD) $(WARN) $(CFLAGS) $(CPPFLAGS) $(EXTRA_CFLAGS), and
# LIB_CFLAGS for the library's object
# shellcheck disable=SC2206
CFLAGS=(-std=c11 -Wall -Wextra -Wpedantic -Wshadow -O2 -g -D_GNU_SOURCE $EXTRA_CFLAGS)

if [ $# -gt 2 ] || [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 2
fi
case $ROUNDS in '' | *[!0-9]* | 0) echo "compare_revs: ROUNDS=$ROUNDS: want a positive integer" >&2; exit 2 ;; esac

mkdir -p "$W/logs"
declare -A DESC=()

# prepare SIDE REV: $W/SIDE/bench_prep built against REV's coordl.c
prepare() {
    local side=$1 rev=$2 dir=$W/$1 desc
    mkdir -p "$dir/src"
    if [ "$rev" = WORKTREE ]; then
        cp coordl.c "$dir/src/coordl.c.new"
        cp coordl.h "$dir/src/coordl.h.new"
        desc="working tree ($(git rev-parse --short HEAD 2>/dev/null || echo '?') + changes)"
    else
        local sha
        if ! sha=$(git rev-parse --verify --quiet "$rev^{commit}"); then
            echo "compare_revs: '$rev' is not a revision of this repository" >&2
            exit 2
        fi
        git show "$sha:coordl.c" >"$dir/src/coordl.c.new" ||
            { echo "compare_revs: $rev has no coordl.c" >&2; exit 2; }
        git show "$sha:coordl.h" >"$dir/src/coordl.h.new" ||
            { echo "compare_revs: $rev has no coordl.h" >&2; exit 2; }
        desc="$(git log -1 --format='%h %s' "$sha" | cut -c1-90)"
    fi
    # rebuild only when the library's sources, the bench's or the flags changed
    local stamp
    stamp=$(cat "$dir/src/coordl.c.new" "$dir/src/coordl.h.new" bench/bench_prep.c bench/bench_common.h \
                bench/bench_floor.h | sha256sum | cut -c1-16)
    stamp="$stamp $CC ${CFLAGS[*]} ${LIBS[*]}"
    if [ -x "$dir/bench_prep" ] && [ "$(cat "$dir/stamp" 2>/dev/null)" = "$stamp" ]; then
        echo "  $side: $rev = $desc (built already)"
    else
        echo "  $side: $rev = $desc: building"
        mv "$dir/src/coordl.c.new" "$dir/src/coordl.c"
        mv "$dir/src/coordl.h.new" "$dir/src/coordl.h"
        rm -f "$dir/stamp" "$dir/bench_prep"
        $CC "${CFLAGS[@]}" -fPIC -fvisibility=hidden -c "$dir/src/coordl.c" -o "$dir/coordl.o"
        # its own coordl.h, not the working tree's: -I the copy, no -I.
        $CC "${CFLAGS[@]}" -I"$dir/src" bench/bench_prep.c "$dir/coordl.o" "${LIBS[@]}" -o "$dir/bench_prep"
        echo "$stamp" >"$dir/stamp"
    fi
    rm -f "$dir/src/coordl.c.new" "$dir/src/coordl.h.new"
    DESC[$side]=$desc
}

echo "compare_revs: old = $OLD_REV, new = $NEW_REV"
prepare old "$OLD_REV"
prepare new "$NEW_REV"

if [ -z "${DATA:-}" ]; then
    if [ -d build/bench-data ]; then
        DATA=build/bench-data
    else
        DATA=$W/data
        if [ ! -d "$DATA" ]; then
            echo "  dataset: making $DATA with examples/gen_dataset (16 classes x 40 JPEGs)"
            $CC -O2 -std=c11 -D_GNU_SOURCE examples/gen_dataset.c -ljpeg -lm -o "$W/gen_dataset"
            rm -rf "$DATA.tmp"
            "$W/gen_dataset" --out "$DATA.tmp" --classes 16 --per-class 40 --seed 1 >/dev/null
            mv "$DATA.tmp" "$DATA"
        fi
    fi
fi
[ -d "$DATA" ] || { echo "compare_revs: DATA=$DATA is not a folder" >&2; exit 2; }
nfiles=$(find -L "$DATA" -type f | wc -l)
ARGS=(--data "$DATA" --images "$IMAGES" --rounds 1 --batch "$BATCH" --only "$CASES")
echo "  data: $DATA ($nfiles files); bench_prep ${ARGS[*]}"
echo "  $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# run SIDE ROUND: one bench_prep run; per case "SIDE ROUND case img/s cpu"
# from its round line ("  round 1:  train1 3139.2 img/s (cpu 0.98) ..."),
# cpu = process CPU seconds / wall seconds of the timed part
results=$W/logs/results.txt
: >"$results"
run() {
    local side=$1 r=$2 log=$W/logs/$1-$2.log
    if ! "$W/$side/bench_prep" "${ARGS[@]}" >"$log" 2>&1; then
        echo "compare_revs: the $side binary failed (round $r); its log, $log:" >&2
        tail -20 "$log" >&2
        exit 1
    fi
    if grep -q WARNING "$log"; then grep WARNING "$log" | sed "s/^/  $side round $r: /"; fi
    awk -v s="$side" -v r="$r" '$1 == "round" && $2 == "1:" {
        for (i = 3; i + 4 <= NF; i++)
            if ($(i + 2) == "img/s" && $(i + 3) == "(cpu") { c = $(i + 4); sub(/\)$/, "", c); print s, r, $i, $(i + 1), c }
    }' "$log" >>"$results"
    if ! grep -q "^$side $r " "$results"; then
        echo "compare_revs: no figures in $log (bench_prep's output changed?)" >&2
        exit 1
    fi
}

t0=$(date +%s)
for r in $(seq "$ROUNDS"); do
    printf '  round %d/%d: old' "$r" "$ROUNDS"
    run old "$r"
    printf ' new'
    run new "$r"
    printf ' (%d s)\n' $(($(date +%s) - t0))
done
echo "  load after: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "old: $OLD_REV = ${DESC[old]}"
echo "new: $NEW_REV = ${DESC[new]}"
echo "$IMAGES images per timed run and case, batch $BATCH; runs alternated old, new, old, new, ..."
echo "img/s: wall clock; img/cpu-s: images per CPU-second of the process (with 1 worker"
echo "thread the steadier figure when other jobs share the cores)"
awk -v rounds="$ROUNDS" '
    function median(a, n,    i, j, t, b) {
        for (i = 1; i <= n; i++) b[i] = a[i]
        for (i = 2; i <= n; i++) { t = b[i]; for (j = i - 1; j >= 1 && b[j] > t; j--) b[j + 1] = b[j]; b[j + 1] = t }
        return n % 2 ? b[(n + 1) / 2] : (b[n / 2] + b[n / 2 + 1]) / 2
    }
    { v[$1, $2, $3] = $4; u[$1, $2, $3] = $5 > 0 ? $4 / $5 : 0
      if (!($3 in seen)) { seen[$3] = 1; order[++nc] = $3 } }
    END {
        for (c = 1; c <= nc; c++) {
            name = order[c]
            printf "\n%-7s %6s %10s %10s %8s   %12s %12s %8s\n", name, "round", "old img/s", "new img/s", "new/old",
                   "old img/cpu-s", "new img/cpu-s", "new/old"
            n = 0
            for (r = 1; r <= rounds; r++) {
                o = v["old", r, name]; w = v["new", r, name]; co = u["old", r, name]; cw = u["new", r, name]
                if (o + 0 == 0 || w + 0 == 0 || co + 0 == 0 || cw + 0 == 0) { printf "%-7s %6d   (missing)\n", "", r; continue }
                n++; ro[n] = o; rn[n] = w; rr[n] = w / o; cro[n] = co; crn[n] = cw; crr[n] = cw / co
                printf "%-7s %6d %10.1f %10.1f %8.3f   %12.1f %12.1f %8.3f\n", "", r, o, w, w / o, co, cw, cw / co
            }
            if (n == 0) continue
            printf "%-7s %6s %10.1f %10.1f %8s   %12.1f %12.1f %8s\n", "", "median", median(ro, n), median(rn, n), "",
                   median(cro, n), median(crn, n), ""
            printf "%-7s median new/old over %d rounds: %.3f (img/s), %.3f (img/cpu-s)\n", name, n,
                   median(rr, n), median(crr, n)
        }
    }' "$results"
