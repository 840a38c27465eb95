#!/usr/bin/env bash
# coordl benchmarks. Run from anywhere; `make bench` runs all of them.
#
#   bash bench/run.sh [all|prep|jpeg|index|cache|placement|mpi|group|llmc|llmc-train|ready|detect|darknet|storage|uring|remote|window|lazy|tarindex|dataset]
#
#   dataset  make the bench dataset if missing (the other parts do it too)
#   prep     image-prep throughput: coordl train/eval vs the libjpeg-turbo
#            decode floor vs torchvision; table in build/bench/prep.txt
#   jpeg     JPEG random access (restart-marker rewrite of cached JPEGs):
#            per epoch until converted and after, converted on/off against
#            the libjpeg-turbo floor and torchvision, 1 thread and all
#            cores, cache bytes, the first epoch against the commit before
#            random access (built in /tmp); table in build/bench/jpeg.txt
#   index    coordl_open on 100,000 tiny files vs torchvision ImageFolder
#   cache    MinIO vs LRU hit rate per epoch at cache = 50% of the dataset
#   placement  workers bound vs unbound, cache + ring page-locked vs
#            pageable (coordl train, whole dataset cached); table in
#            build/bench/placement.txt
#   mpi      partitioned MinIO cache over MPI vs a per-rank cache: storage
#            bytes per epoch and images/s at 1, 2, 4 ranks (builds the
#            library with mpicc -DCOORDL_MPI into build-mpi/, runs mpirun);
#            table in build/bench/mpi.txt. `all` runs it when mpicc and
#            mpirun are installed.
#   uring    local reads in flight: cold (page cache dropped) and warm
#            epochs, io_uring against the I/O-thread path (COORDL_URING=0)
#            at depths 8, 32, 128 (URING_DEPTHS): 2,000 WAV files of 100
#            KiB (storage-bound: a 256-sample crop), then the bench images
#            (eval 32 px, decode-bound); table in build/bench/uring.txt
#   storage  a cold epoch on slow storage (a reader that adds 2 ms and
#            10 ms per read; a loop device under dm-delay where the kernel
#            has it) with read-ahead off and at depths 8, 32, 128, 2 prep
#            threads, each right after a warm (all cached) epoch; table in
#            build/bench/storage.txt. STORAGE_IMAGES (0: whole epochs),
#            STORAGE_ROUNDS (2; medians). About 6 minutes.
#   remote   the same WebDataset shards local, over HTTP (nginx) and over
#            S3 (s3rver, installed by tools/install-deps.sh), each remote
#            one behind tests/tu_http_proxy.js adding 0, 5 and 20 ms per
#            request, read-ahead depths 32, 128, 512, 2 prep threads: cold
#            (open included) and warm images/s, reads in flight, I/O
#            threads, bytes fetched, the servers' CPU; table in
#            build/bench/remote.txt. REMOTE_IMAGES (3072), REMOTE_SIZE
#            (224: output side), REMOTE_ROUNDS (3: each case's median round
#            is reported). About 4 minutes.
#   window   the shard-window order (issue 25) against the full shuffle on
#            the same WebDataset shards (WINDOW_IMAGES, default 3072, in 32
#            shards of gen_dataset JPEGs), side by side in one run: cold
#            (pages dropped, open included) and warm images/s, shards per
#            batch, and the sampler's bytes; WINDOW_SHARDS (4) per window,
#            2 prep threads, medians of BENCH_ROUNDS; build/bench/window.txt
#   lazy     tar shards indexed as the shard window reaches them, on
#            virtual sets (a coordl_io generating the shards: no disk):
#            a 100M-sample set (20,000 shards x 5,000): open and first-batch
#            seconds, RSS, steady images/s; and a 1M set both orders hold:
#            the full shuffle (every shard scanned at open) against the
#            shard-window order, side by side; build/bench/lazy.txt. Under
#            a minute.
#   tarindex a saved index (index_path) on a 1M-item tar set (TAR_SHARDS
#            200 x TAR_PER_SHARD 5000 one-member samples, written once
#            under BENCH_TAR, about 1 GB): coordl_open's seconds, resident
#            bytes per item and storage calls when it scans, scans and
#            saves, and loads, each open in a child process; then 1 rank
#            vs 4 ranks opening over MPI (storage calls, mpi_index);
#            build/bench/tarindex.txt
#   group    coordinated prep: k = 1..4 jobs (processes) each consuming one
#            epoch, as one coordl group vs k separate loaders: images/s per
#            job and the jobs' total CPU per epoch; table in
#            build/bench/group.txt
#   llmc     the trainer's time inside the loader per step: coordl (llm.c's
#            order, coordl_next_into) vs llm.c's own DataLoader on the same
#            shards, B=4 T=64, 2000 steps beside a 2-thread OpenMP trainer
#            step (bench_llmc); llm.c's dataloader.h is compiled from a
#            checkout at bench time (LLMC_SRC, default the mirror
#            /work/.mirror/karpathy+llm.c/repo, cloned into build/bench/);
#            without one only coordl is measured. Table in build/bench/llmc.txt
#   llmc-train  llm.c's train_gpt2.c itself, its DataLoader against coordl
#            (examples/llmc/train_gpt2.patch) on a tiny random GPT-2: step
#            time and context switches per run; build/bench/llmc-train.txt
#   detect   Darknet's load_data_detection vs coordl's detection crop and
#            SSD crop, images/s per core; build/bench/detect.txt
#   ready    a ready batch's cost: next + release with the trainer asleep
#            20 ms per step, alone and in a group, and the trainer thread's
#            system calls per pair under strace -f; build/bench/ready.txt
#   darknet  Darknet's classifier loader alone vs coordl alone with
#            Darknet's augmentation (stock cfgs' crop 128..448 to 256,
#            angle 7, aspect/saturation/exposure .75, hue .1) on the bench
#            images: images/s per core and peak memory (bench_darknet), and
#            peak memory of `darknet classifier train` stock vs with
#            train_classifier.patch; Darknet built with its stock Makefile
#            from DARKNET_SRC (default the mirror
#            /work/.mirror/pjreddie+darknet/repo) into build/bench/; skipped,
#            saying so, without it. Table in build/bench/darknet.txt
#
# Environment: BENCH_DATA (dataset dir, default build/bench-data),
# BENCH_INDEX (index tree, default build/bench-index), BENCH_IMAGES (images
# per timed run, default 2560), BENCH_ROUNDS (default 3), BENCH_SIGMA,
# BENCH_SEED, BENCH_CLASSES, BENCH_PER_CLASS (dataset shape), CC, HWLOC_LIB
# (default -lhwloc, as in the Makefile; empty for a COORDL_NO_HWLOC build).
# mpi part: MPI_DATA (default build/bench-data if present, else
# build/demo-data, made with gen_dataset if missing), MPI_RANKS ("1 2 4"),
# MPI_EPOCHS (4; epochs 1.. are reported), MPI_FRACTION (0.3: each rank's
# cache budget as a fraction of the dataset).
# group part: GROUP_DATA (default BENCH_DATA), GROUP_JOBS ("1,2,3,4"),
# GROUP_ROUNDS (1), GROUP_COMPUTE_MS (0: trivial consumer; else busy CPU per
# batch in every job).
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${1:-all}
case "$MODE" in all|prep|jpeg|index|cache|placement|mpi|group|llmc|llmc-train|ready|detect|darknet|storage|uring|remote|window|lazy|tarindex|dataset) ;;
  *) echo "usage: bash bench/run.sh [all|prep|jpeg|index|cache|placement|mpi|group|llmc|llmc-train|ready|detect|darknet|storage|uring|remote|window|lazy|tarindex|dataset]" >&2; exit 2 ;;
esac
BENCH_DATA=${BENCH_DATA:-build/bench-data}
BENCH_INDEX=${BENCH_INDEX:-build/bench-index}
BENCH_IMAGES=${BENCH_IMAGES:-2560}
BENCH_ROUNDS=${BENCH_ROUNDS:-3}
OUT=build/bench
PY=/usr/bin/python3
CC=${CC:-cc}
CFLAGS=(-O2 -g -std=c11 -Wall -Wextra -Wpedantic -Wshadow -D_GNU_SOURCE -I.)
HWLOC_LIB=${HWLOC_LIB--lhwloc}
LIBS=(-ljpeg $HWLOC_LIB -lcurl -luring -lpthread -lm)
mkdir -p "$OUT"

log() { printf '\n=== %s\n' "$*"; }

apt_updated=0
apt_install() { # apt_install PACKAGE: install it, updating the lists once if needed
    if [ "$(id -u)" != 0 ]; then
        echo "run.sh: need root to apt-get install $1 (or install it yourself)" >&2
        exit 1
    fi
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$1"; then
        [ $apt_updated = 1 ] && exit 1
        apt-get update -q && apt_updated=1
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$1"
    fi
}

build() { # build NAME [needs-lib]
    local src=bench/$1.c bin=$OUT/$1
    local deps=("$src" bench/bench_common.h bench/bench_floor.h)
    [ "${2:-}" = lib ] && deps+=(build/libcoordl.a coordl.h)
    local stale=0 d
    [ -x "$bin" ] || stale=1
    for d in "${deps[@]}"; do [ "$d" -nt "$bin" ] && stale=1; done
    if [ $stale = 1 ]; then
        if [ "${2:-}" = lib ]; then
            $CC "${CFLAGS[@]}" "$src" build/libcoordl.a "${LIBS[@]}" -o "$bin"
        else
            $CC "${CFLAGS[@]}" "$src" "${LIBS[@]}" -o "$bin"
        fi
    fi
}

ensure_lib() {
    make -s lib
}

ensure_dataset() {
    [ -d "$BENCH_DATA" ] && return 0
    log "dataset: $BENCH_DATA (missing; making it once)"
    if [ -z "$(find /usr/share/wallpapers \( -name '*.jpg' -o -name '*.png' \) 2>/dev/null | head -1)" ]; then
        apt_install plasma-workspace-wallpapers
    fi
    [ -f /usr/include/stb/stb_image.h ] || apt_install libstb-dev
    build make_bench_dataset
    "$OUT/make_bench_dataset" --src /usr/share/wallpapers --out "$BENCH_DATA" \
        --classes "${BENCH_CLASSES:-100}" --per-class "${BENCH_PER_CLASS:-50}" \
        --seed "${BENCH_SEED:-1}" --sigma "${BENCH_SIGMA:-32}" --threads "$(nproc)"
}

ensure_torchvision() {
    "$PY" -c 'import torchvision' 2>/dev/null || apt_install python3-torchvision
}

# result FILE NAME FIELD: field FIELD (1-based, after "RESULT NAME") of a RESULT line
result() { awk -v n="$2" -v f="$3" '$1 == "RESULT" && $2 == n { print $(2 + f) }' "$1"; }

run_prep() {
    ensure_lib
    ensure_dataset
    ensure_torchvision
    build bench_prep lib
    log "prep: coordl and the libjpeg-turbo decode floor (bench_prep)"
    "$OUT/bench_prep" --data "$BENCH_DATA" --images "$BENCH_IMAGES" --rounds "$BENCH_ROUNDS" \
        | tee "$OUT/prep-coordl.log"
    log "prep: torchvision (torchvision_bench.py)"
    "$PY" bench/torchvision_bench.py --data "$BENCH_DATA" --images "$BENCH_IMAGES" \
        --rounds "$BENCH_ROUNDS" | tee "$OUT/prep-torchvision.log"

    local c=$OUT/prep-coordl.log t=$OUT/prep-torchvision.log
    {
        echo "coordl image-prep benchmark, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores"
        echo "data: $BENCH_DATA ($(find "$BENCH_DATA" -type f | wc -l) files);" \
             "median of $BENCH_ROUNDS runs of $BENCH_IMAGES images; in memory / page cache"
        echo
        printf '%-44s %7s %10s %10s %10s %12s\n' case threads "img/s" min max "img/s/core"
        row() { # row LABEL FILE NAME
            printf '%-44s %7s %10s %10s %10s %12s\n' "$1" "$(result "$2" "$3" 1)" \
                "$(result "$2" "$3" 2)" "$(result "$2" "$3" 3)" "$(result "$2" "$3" 4)" \
                "$(result "$2" "$3" 5)"
        }
        row "coordl train 224 F32 flip, 1 thread" "$c" train1
        row "coordl train 224 F32 flip, all cores" "$c" trainN
        row "coordl eval 224, 1 thread" "$c" eval1
        row "libjpeg-turbo full decode floor, 1 thread" "$c" floor
        row "torchvision DataLoader num_workers=0" "$t" tv_nw0
        row "torchvision DataLoader num_workers=2" "$t" tv_nw2
        echo
        awk -v t1="$(result "$c" train1 5)" -v tn="$(result "$c" trainN 5)" \
            -v fl="$(result "$c" floor 5)" -v v0="$(result "$t" tv_nw0 5)" \
            -v v2="$(result "$t" tv_nw2 5)" 'BEGIN {
            tv = v0 > v2 ? v0 : v2
            printf "per core, against torchvision (best per core of nw=0 and nw=2, %.1f img/s/core):\n", tv
            printf "  coordl train 1 thread   %6.2fx   (target >= 4.5x: %s)\n", t1 / tv, (t1 / tv >= 4.5 ? "met" : "NOT met")
            printf "  coordl train all cores  %6.2fx   (target >= 4.5x: %s)\n", tn / tv, (tn / tv >= 4.5 ? "met" : "NOT met")
            printf "per core, against the libjpeg-turbo decode floor (%.1f img/s/core):\n", fl
            printf "  coordl train 1 thread   %6.2fx   (target >= 1.0x: %s)\n", t1 / fl, (t1 / fl >= 1.0 ? "met" : "NOT met")
            printf "  coordl train all cores  %6.2fx   (target >= 1.0x: %s)\n", tn / fl, (tn / fl >= 1.0 ? "met" : "NOT met")
        }'
    } > "$OUT/prep.txt"
    log "prep: summary (also in $OUT/prep.txt)"
    cat "$OUT/prep.txt"
}

# JPEG random access (bench_jpeg): at 1 thread and at all cores, the
# per-epoch curve, the converted figures beside the decode floor, and the
# cache bytes; the first epoch from open, alternated over JPEG_ROUNDS
# processes: this tree with random access on and off, and the commit before
# random access (JPEG_BASE_REV; default: the parent of the commit that
# brought it, found in git log) built under JPEG_BASE_DIR (/tmp); then
# torchvision's DataLoader on the same files. Load (uptime) before and after.
run_jpeg() {
    ensure_lib
    ensure_dataset
    ensure_torchvision
    build bench_jpeg lib
    local rounds=${JPEG_ROUNDS:-3} cores
    cores=$(nproc)
    local base_rev=${JPEG_BASE_REV:-} base_dir=${JPEG_BASE_DIR:-/tmp/coordl-bench-jpeg-base} base_bin=""
    if [ -z "$base_rev" ] && git rev-parse --git-dir >/dev/null 2>&1; then
        base_rev=$(git log --format=%H -1 --grep '^JPEG random access: cached JPEGs rewritten' || true)
        [ -n "$base_rev" ] && base_rev=$(git rev-parse "$base_rev^")
    fi
    if [ -n "$base_rev" ]; then
        log "jpeg: the commit before random access ($base_rev) in $base_dir"
        rm -rf "$base_dir" && mkdir -p "$base_dir"
        git archive "$base_rev" | tar -x -C "$base_dir"
        make -s -C "$base_dir" lib HWLOC_LIB="$HWLOC_LIB"
        base_bin=$OUT/bench_jpeg_base
        # its own coordl.h, not this tree's: no -I. here
        $CC -O2 -g -std=c11 -D_GNU_SOURCE -DBENCH_BASE -I"$base_dir" bench/bench_jpeg.c \
            "$base_dir/build/libcoordl.a" "${LIBS[@]}" -o "$base_bin"
    else
        log "jpeg: no git history here: the first-epoch comparison with the base is skipped (set JPEG_BASE_REV)"
    fi
    local load0 load1
    load0=$(uptime)
    local t
    for t in 1 "$cores"; do
        log "jpeg: bench_jpeg --threads $t"
        "$OUT/bench_jpeg" --data "$BENCH_DATA" --threads "$t" --images "$BENCH_IMAGES" --rounds "$BENCH_ROUNDS" \
            | tee "$OUT/jpeg-$t.log"
        [ "$t" = "$cores" ] && break
    done
    log "jpeg: first epoch from open, 1 thread, $rounds rounds (on, off, base alternated)"
    : > "$OUT/jpeg-first.log"
    local r
    for r in $(seq "$rounds"); do
        "$OUT/bench_jpeg" --data "$BENCH_DATA" --threads 1 --first-epoch | tee -a "$OUT/jpeg-first.log"
        "$OUT/bench_jpeg" --data "$BENCH_DATA" --threads 1 --first-epoch --off | tee -a "$OUT/jpeg-first.log"
        [ -n "$base_bin" ] && "$base_bin" --data "$BENCH_DATA" --threads 1 --first-epoch | tee -a "$OUT/jpeg-first.log"
    done
    log "jpeg: torchvision (torchvision_bench.py)"
    "$PY" bench/torchvision_bench.py --data "$BENCH_DATA" --images "$BENCH_IMAGES" --rounds "$BENCH_ROUNDS" \
        | tee "$OUT/jpeg-torchvision.log"
    load1=$(uptime)
    local one=$OUT/jpeg-1.log all=$OUT/jpeg-$cores.log tv=$OUT/jpeg-torchvision.log first=$OUT/jpeg-first.log
    {
        echo "coordl JPEG random access, $(date -u +%Y-%m-%dT%H:%MZ), $cores cores; train 224 F32 NCHW flip, batch 64,"
        echo "whole dataset cached ($BENCH_DATA, $(find -L "$BENCH_DATA" -type f | wc -l) files); medians of $BENCH_ROUNDS rounds of $BENCH_IMAGES images"
        echo "load before: $load0"
        echo "load after:  $load1"
        echo
        # wall: images/s (per core: / threads); cpu: images per CPU-second of
        # the process (per core whatever other jobs take: the steadier figure
        # on a shared machine, used for the targets)
        awk -v c="$cores" '$1 == "RESULT" && $2 == "ra_conv" { on[$3] = $4; off[$3] = $5; fl[$3] = $6 }
            $1 == "RESULT" && $2 == "ra_conv_cpu" { con[$3] = $4; coff[$3] = $5; cfl[$3] = $6 }
            END {
                printf "%-40s %10s %10s %12s %10s\n", "img/s per core", "1 thr wall", "1 thr cpu", c " thr wall", c " thr cpu"
                printf "%-40s %10.1f %10.1f %12.1f %10.1f\n", "random access on, cache converted", on[1], con[1], on[c] / c, con[c]
                printf "%-40s %10.1f %10.1f %12.1f %10.1f\n", "random access off (the ROI path)", off[1], coff[1], off[c] / c, coff[c]
                printf "%-40s %10.1f %10.1f\n", "libjpeg-turbo full-decode floor", fl[1], cfl[1]
            }' "$one" "$all"
        awk '$1 == "RESULT" && ($2 == "tv_nw0" || $2 == "tv_nw2") { printf "%-40s %10.1f   (wall, %s cores)\n", "torchvision DataLoader num_workers=" substr($2, 6), $7, $3 }' "$tv"
        echo
        awk -v c="$cores" 'FNR == NR && $1 == "RESULT" && $2 == "ra_conv" { on[$3] = $4; off[$3] = $5; fl[$3] = $6; next }
            FNR == NR && $1 == "RESULT" && $2 == "ra_conv_cpu" { con[$3] = $4; coff[$3] = $5; cfl[$3] = $6; next }
            $1 == "RESULT" && ($2 == "tv_nw0" || $2 == "tv_nw2") { if ($7 > tv) tv = $7 }
            END {
                r = con[1] / cfl[1]
                printf "converted, 1 thread: on/floor %.2fx per CPU-s (target >= 1.35x: %s), %.2fx wall;\n", r, (r >= 1.35 ? "met" : "NOT met"), on[1] / fl[1]
                printf "  on/off %.2fx per CPU-s, %.2fx wall (%d threads: %.2fx, %.2fx); off/floor %.2fx per CPU-s\n", con[1] / coff[1], on[1] / off[1], c, con[c] / coff[c], on[c] / off[c], coff[1] / cfl[1]
                printf "  on against torchvision best per core (wall): %.2fx\n", on[1] / tv
            }' <(cat "$one" "$all") "$tv"
        awk '$1 == "RESULT" { v[$2] = v[$2] " " $4; s[$2] += $4; n[$2]++; cs[$2] += $5 }
            END {
                if (n["first_epoch"]) {
                    printf "first epoch from open, 1 thread, img/s per round: on%s, off%s", v["first_epoch"], v["first_epoch_off"]
                    if (n["first_epoch_base"]) printf ", base%s", v["first_epoch_base"]
                    printf "\n  mean on/off %.2fx wall, %.2fx per CPU-s", (s["first_epoch"] / n["first_epoch"]) / (s["first_epoch_off"] / n["first_epoch_off"]),
                        (cs["first_epoch"] / n["first_epoch"]) / (cs["first_epoch_off"] / n["first_epoch_off"])
                    if (n["first_epoch_base"]) {
                        r = (cs["first_epoch"] / n["first_epoch"]) / (cs["first_epoch_base"] / n["first_epoch_base"])
                        printf "; on/base %.2fx per CPU-s (target >= 0.9x: %s), %.2fx wall", r, (r >= 0.9 ? "met" : "NOT met"),
                            (s["first_epoch"] / n["first_epoch"]) / (s["first_epoch_base"] / n["first_epoch_base"])
                    }
                    printf "\n"
                }
            }' "$first"
        awk '$1 == "RESULT" && $2 == "ra_cache" {
                printf "cache, %d thread(s): on %.1f MB used, items as read %.1f MB (+%.2f%%), off %.1f MB; every JPEG rewritten after %s epoch(s)\n",
                    $3, $4 / 1e6, $5 / 1e6, 100 * ($4 / $5 - 1), $6 / 1e6, ($7 > 0 ? $7 : "more than the run'"'"'s")
            }' "$one" "$all"
        echo
        echo "per epoch, loader-bound (on img/s, against off's epoch 0 for epoch 0 and its median after; rewritten at the"
        echo "epoch's end; rewrites' share of the worker time in it):"
        awk '$1 == "RESULT" && $2 == "ra_epoch" {
                printf "  %2s thread(s) epoch %2d: %8.1f img/s  %5.2fx  %6.1f%% rewritten  %5.1f%% rewrite time\n",
                    $3, $4, $5, ($6 > 0 ? $5 / $6 : 0), $7, $8 }' "$one" "$all"
    } > "$OUT/jpeg.txt"
    log "jpeg: summary (also in $OUT/jpeg.txt)"
    cat "$OUT/jpeg.txt"
}

run_index() {
    ensure_lib
    ensure_torchvision
    build bench_index lib
    log "index: coordl_open on $BENCH_INDEX (bench_index)"
    "$OUT/bench_index" --root "$BENCH_INDEX" | tee "$OUT/index-coordl.log"
    log "index: torchvision datasets.ImageFolder on the same tree"
    "$PY" - "$BENCH_INDEX" <<'PYEOF' | tee "$OUT/index-torchvision.log"
import os, statistics, sys, time
from torchvision import datasets
root = sys.argv[1]
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGESIZE")
times, rss_per_item = [], None
for r in range(3):
    r0 = rss()
    t0 = time.perf_counter()
    ds = datasets.ImageFolder(root)
    t = time.perf_counter() - t0
    n = len(ds)
    if rss_per_item is None:
        rss_per_item = (rss() - r0) / n
    times.append(t)
    print(f"  ImageFolder {r + 1}: {n} items in {t:.3f} s")
    del ds
print(f"RESULT index {n} {min(times):.4f} {statistics.median(times):.4f} {rss_per_item:.1f}")
PYEOF
    local c=$OUT/index-coordl.log t=$OUT/index-torchvision.log
    {
        echo "indexing $(result "$c" index 1) files ($BENCH_INDEX), best of 3 opens"
        printf '%-34s %10s %10s %14s\n' case "best s" "median s" "RSS B/item"
        printf '%-34s %10s %10s %14s\n' "coordl_open, 1 thread" "$(result "$c" index 2)" \
            "$(result "$c" index 3)" "$(result "$c" index 4)"
        printf '%-34s %10s %10s %14s\n' "torchvision ImageFolder" "$(result "$t" index 2)" \
            "$(result "$t" index 3)" "$(result "$t" index 4)"
        echo "coordl heap in use per item: $(result "$c" index 5) B"
        awk -v c="$(result "$c" index 2)" -v t="$(result "$t" index 2)" \
            'BEGIN { printf "coordl_open is %.2fx the speed of ImageFolder (time ratio torchvision/coordl)\n", t / c }'
    } > "$OUT/index.txt"
    log "index: summary (also in $OUT/index.txt)"
    cat "$OUT/index.txt"
}

run_cache() {
    ensure_lib
    ensure_dataset
    build bench_cache lib
    log "cache: MinIO vs LRU at 50% of the dataset (bench_cache)"
    "$OUT/bench_cache" --data "$BENCH_DATA" --fraction 0.5 --epochs 4 --threads "$(nproc)" \
        --out 64 | tee "$OUT/cache.txt"
}

run_placement() {
    ensure_lib
    ensure_dataset
    build bench_placement lib
    log "placement: bound vs unbound workers, pinned vs pageable memory (bench_placement)"
    "$OUT/bench_placement" --data "$BENCH_DATA" --images "$BENCH_IMAGES" --rounds "$BENCH_ROUNDS" \
        --threads 2 | tee "$OUT/placement.txt"
}

# Coordinated prep: k jobs as one group vs k separate loaders (bench_group).
run_group() {
    ensure_lib
    local data=${GROUP_DATA:-$BENCH_DATA}
    if [ "$data" = "$BENCH_DATA" ]; then ensure_dataset; fi
    build bench_group lib
    log "group: coordinated prep, k jobs as one group vs k separate loaders (bench_group)"
    "$OUT/bench_group" --data "$data" --jobs "${GROUP_JOBS:-1,2,3,4}" --rounds "${GROUP_ROUNDS:-1}" \
        --compute-ms "${GROUP_COMPUTE_MS:-0}" | tee "$OUT/group.log"
    grep -v '^RESULT' "$OUT/group.log" > "$OUT/group.txt"
    log "group: summary (also in $OUT/group.txt)"
    cat "$OUT/group.txt"
}

# Slow storage: bench_storage with a sleeping reader, and (as root, where
# the kernel has device-mapper's delay target) a loop device under dm-delay.
run_storage() {
    ensure_lib
    ensure_dataset
    build bench_storage lib
    local dev_args=() dev_note mnt=$OUT/dm-delay-mnt img=$OUT/dm-delay.img dm=coordl-bench-delay loopdev=""
    if [ "$(id -u)" != 0 ]; then
        dev_note="not run: needs root (losetup, dmsetup)"
    elif ! command -v dmsetup >/dev/null || ! command -v losetup >/dev/null; then
        dev_note="not run: dmsetup/losetup missing (apt-get install dmsetup mount)"
    elif ! dmsetup targets 2>/dev/null | grep -q '^delay'; then
        dev_note="not run: this kernel has no device-mapper delay target ($(dmsetup targets 2>&1 | head -1 || true))"
    else
        # a loop device holding a copy of the dataset, behind 10 ms of dm-delay
        local mb=$(( $(du -sm "$BENCH_DATA" | cut -f1) * 12 / 10 + 64 ))
        truncate -s "${mb}M" "$img" && mkfs.ext4 -q -F "$img" && loopdev=$(losetup -f --show "$img") &&
            mkdir -p "$mnt" && mount "$loopdev" "$mnt" && cp -r "$BENCH_DATA" "$mnt/data" && umount "$mnt" &&
            echo "0 $(blockdev --getsz "$loopdev") delay $loopdev 0 10" | dmsetup create "$dm" &&
            mount "/dev/mapper/$dm" "$mnt" && dev_args=(--device "$mnt/data") &&
            dev_note="a loop device under dm-delay (10 ms per I/O), page cache dropped before each case"
        [ -n "${dev_args[*]}" ] || dev_note="not run: setting up the loop device under dm-delay failed"
    fi
    log "storage: cold epoch with slow storage, read-ahead off/8/32/128 (bench_storage)"
    local load_before load_after
    load_before=$(uptime)
    echo "load before: $load_before"
    "$OUT/bench_storage" --data "$BENCH_DATA" --threads 2 --latencies 2,10 --depths 0,8,32,128 \
        --images "${STORAGE_IMAGES:-0}" --rounds "${STORAGE_ROUNDS:-2}" "${dev_args[@]}" | tee "$OUT/storage.log"
    # the issue's second case: 20 ms per read at depths 128 and 512, beside
    # the same fresh handles with no latency added (x +0 ms cold), through
    # the synchronous reader (an I/O thread per read in flight) and its
    # asynchronous form (cfg.io_async: one I/O thread), side by side
    "$OUT/bench_storage" --data "$BENCH_DATA" --threads 2 --latencies 0,20 --depths 128,512 --readers sync,async \
        --images "${STORAGE_IMAGES:-0}" --rounds "${STORAGE_ROUNDS:-2}" | tee -a "$OUT/storage.log"
    # for reference, the warm rate users see: cached JPEGs rewritten for
    # random access decode only their crops, which no cold read can
    "$OUT/bench_storage" --data "$BENCH_DATA" --threads 2 --latencies 20 --depths 512 --random-access 1 \
        --images "${STORAGE_IMAGES:-0}" --rounds 1 | grep -v '^RESULT' | tee -a "$OUT/storage.log"
    load_after=$(uptime)
    echo "load after: $load_after"
    if [ -n "${dev_args[*]}" ]; then umount "$mnt"; dmsetup remove "$dm"; fi
    [ -n "$loopdev" ] && losetup -d "$loopdev"
    rm -f "$img"
    {
        grep -v '^RESULT' "$OUT/storage.log"
        echo
        echo "real block device: $dev_note"
        awk '$1 == "RESULT" && $2 == "storage" && $3 == "10" && $4 == "128" {
            printf "target: at +10 ms per read, depth 128 reaches %.2fx the warm rate (>= 0.90: %s)\n", $6,
                ($6 >= 0.9 ? "met" : "NOT met") }' "$OUT/storage.log"
        awk '$1 == "RESULT" && $2 == "storage" && $3 == "20" && $4 == "512" {
            printf "target: at +20 ms per read, depth 512 reaches %.2fx the warm rate timed from open (>= 0.90: %s), %.2fx from the first batch asked, %sx the same cold epoch with no latency added, %sx in the next cold epoch\n", $6,
                ($6 >= 0.9 ? "met" : "NOT met"), $7, $8, $9 }' "$OUT/storage.log"
        awk '$1 == "RESULT" && $2 == "storage-async" && $3 == "20" && $4 == "512" {
            printf "target: through io_async at +20 ms per read, depth 512 reaches %.2fx the warm rate timed from open (>= 0.90: %s) with %d I/O thread(s) (and the reader'"'"'s own one), %sx the same cold epoch with no latency added, %sx in the next cold epoch\n", $6,
                ($6 >= 0.9 ? "met" : "NOT met"), $10, $8, $9 }' "$OUT/storage.log"
        awk '$1 == "RESULT" && $2 == "storage" && $3 == "10" && $4 == "0" {
            printf "without read-ahead at +10 ms: %.2fx the warm rate (2 threads / 10 ms = 200 images/s at best)\n", $6 }' \
            "$OUT/storage.log"
        echo "machine load (uptime; other jobs share these $(nproc) cores):"
        echo "  before:$load_before"
        echo "  after: $load_after"
    } > "$OUT/storage.txt"
    log "storage: summary (also in $OUT/storage.txt)"
    cat "$OUT/storage.txt"
}

# Local reads in flight: io_uring against the I/O-thread fallback
# (COORDL_URING=0), cold (page cache dropped) and warm, depths 8/32/128.
run_uring() {
    ensure_lib
    ensure_dataset
    build bench_uring lib
    log "uring: local reads in flight, io_uring vs I/O threads, cold and warm (bench_uring)"
    local load_before
    load_before=$(uptime)
    # storage-bound: 2,000 WAV files of 100 KiB, a 256-sample crop (made once
    # under build/); then the bench images, bound by their JPEG decode
    "$OUT/bench_uring" --wav "${URING_WAV:-build/bench-wav}" --threads 2 --depths "${URING_DEPTHS:-8,32,128}" |
        tee "$OUT/uring.log"
    "$OUT/bench_uring" --data "$BENCH_DATA" --threads 2 --depths "${URING_DEPTHS:-8,32,128}" \
        --images "${URING_IMAGES:-0}" | tee -a "$OUT/uring.log"
    {
        grep -v '^RESULT' "$OUT/uring.log"
        [ "$(id -u)" = 0 ] && echo "cold: echo 3 > /proc/sys/vm/drop_caches before each cold case" ||
            echo "cold: posix_fadvise(DONTNEED) on every file before each cold case (not root)"
        echo "machine load (uptime; other jobs share these $(nproc) cores):"
        echo "  before:$load_before"
        echo "  after: $(uptime)"
    } > "$OUT/uring.txt"
    log "uring: summary (also in $OUT/uring.txt)"
    cat "$OUT/uring.txt"
}

# The partitioned cache over MPI: bench_mpi under mpirun at each of MPI_RANKS,
# both cases (per-rank caches, partitioned) in every run.
run_mpi() {
    if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
        apt_install libopenmpi-dev
        apt_install openmpi-bin
    fi
    log "mpi: library with mpicc -DCOORDL_MPI (make MPI=1 lib -> build-mpi/)"
    make -s MPI=1 lib
    local data=${MPI_DATA:-}
    if [ -z "$data" ]; then
        if [ -d "$BENCH_DATA" ]; then
            data=$BENCH_DATA
        else
            data=build/demo-data
            if [ ! -d "$data" ]; then
                log "mpi: dataset $data (missing; making it once)"
                make -s examples
                build/examples/gen_dataset --out "$data" --classes 10 --per-class 200 --seed 1
            fi
        fi
    fi
    local src=bench/bench_mpi.c bin=$OUT/bench_mpi d stale=0
    [ -x "$bin" ] || stale=1
    for d in "$src" bench/bench_common.h build-mpi/libcoordl.a coordl.h; do
        [ "$d" -nt "$bin" ] && stale=1
    done
    if [ $stale = 1 ]; then mpicc "${CFLAGS[@]}" "$src" build-mpi/libcoordl.a "${LIBS[@]}" -o "$bin"; fi
    # --bind-to none: OpenMPI binds each of 1-2 ranks to one core by default;
    # bench_mpi gives each local rank its own slice of the PUs instead.
    local mpirun=(mpirun --oversubscribe --bind-to none)
    if [ "$(id -u)" = 0 ]; then mpirun+=(--allow-run-as-root); fi
    local n
    for n in ${MPI_RANKS:-1 2 4}; do
        log "mpi: $n rank(s) (bench_mpi: per-rank caches and partitioned, epochs alternating)"
        "${mpirun[@]}" -np "$n" "$bin" --data "$data" --epochs "${MPI_EPOCHS:-4}" \
            --fraction "${MPI_FRACTION:-0.3}" | tee "$OUT/mpi-$n.log"
    done
    {
        echo "coordl partitioned MinIO cache over MPI, $(date -u +%Y-%m-%dT%H:%MZ)," \
             "one machine, $(nproc) cores, ranks oversubscribed beyond that"
        echo "data: $data ($(find "$data" -type f | wc -l) files," \
             "$(find "$data" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.1f", s / 1e6 }') MB);" \
             "each rank's cache budget $(awk -v f="${MPI_FRACTION:-0.3}" 'BEGIN { printf "%g", 100 * f }')%" \
             "of the dataset; out 64x64, batch 32; page cache dropped before every epoch"
        echo "per epoch, epochs 1..$(( ${MPI_EPOCHS:-4} - 1 )) (epoch 0 fills the caches);" \
             "storage and peer bytes summed over ranks, as % of the dataset"
        echo
        printf '%-5s %-12s %6s %8s %8s %8s %7s %9s %9s %6s %8s %8s\n' ranks cache "thr/rk" \
            "cached" "storage" "expected" "peer" "img/s/rk" "img/s all" "fallbk" "us/read" "us/peer"
        for n in ${MPI_RANKS:-1 2 4}; do
            awk '$1 == "RESULT" && $2 == "mpi" {
                printf "%-5s %-12s %6s %7s%% %7s%% %7s%% %6s%% %9s %9s %6s %8s %8s\n", $3,
                    ($4 == "part" ? "partitioned" : "per-rank"), $12, $5, $6, $8, $7, $9, $10, $11,
                    ($13 > 0 ? $13 : "-"), ($14 > 0 ? $14 : "-")
            }' "$OUT/mpi-$n.log"
        done
        echo
        echo "cached: the ranks' caches together at the end; expected storage: from what the caches"
        echo "held when each epoch began (per-rank: cached/N of it is hit; partitioned: all of it);"
        echo "us/read, us/peer: the workers' mean time per item read from storage (cold), and per item"
        echo "from a peer (waiting for the reply, requested when the batch's slot was assigned, and copying it)"
        echo
        echo "partitioned / per-rank:"
        for n in ${MPI_RANKS:-1 2 4}; do
            awk -v n="$n" '$1 == "RESULT" && $2 == "mpi" { s[$4] = $6; r[$4] = $10 }
                END { printf "  %s rank(s): storage reads %s, images/s (all ranks) %.2fx\n", n,
                    (s["rank"] > 0 ? sprintf("%.2fx", s["part"] / s["rank"]) : "n/a"),
                    (r["rank"] > 0 ? r["part"] / r["rank"] : 0) }' "$OUT/mpi-$n.log"
        done
        echo "a partitioned handle sitting idle (ring full, no requests), CPU per rank" \
             "(its peer thread polling):"
        for n in ${MPI_RANKS:-1 2 4}; do
            awk '$1 == "RESULT" && $2 == "mpi_idle" {
                printf "  %s rank(s): %s%% of a core (worst rank %s%%)\n", $3, $4, $5 }' "$OUT/mpi-$n.log"
        done
        echo "img/s: median over epochs; other jobs on this machine move it by 20% or more" \
             "from run to run, storage bytes do not move"
    } > "$OUT/mpi.txt"
    log "mpi: summary (also in $OUT/mpi.txt)"
    cat "$OUT/mpi.txt"
}

# clone_src SRC DIR: a checkout of SRC (a checkout or bare git dir) in DIR, once
clone_src() {
    [ -d "$2/.git" ] && return 0
    rm -rf "$2"
    git clone -q "$1" "$2"
}

run_llmc() {
    ensure_lib
    local src=${LLMC_SRC:-/work/.mirror/karpathy+llm.c/repo} co=$OUT/llm.c with=()
    log "llmc: time inside the loader per step, coordl (llm.c's order) vs llm.c's DataLoader"
    if [ -e "$src" ]; then
        clone_src "$src" "$co"
        echo "llm.c $(git -C "$co" log -1 --format='%h %cd' --date=short) from $src: its llmc/dataloader.h compiled into bench_llmc"
        with=(-DBENCH_WITH_LLMC -I"$co")
    else
        echo "llmc: llm.c's side skipped: no llm.c source at $src (LLMC_SRC: a checkout or bare git dir)"
    fi
    # llm.c's header is compiled as llm.c compiles it (gnu11, no -Wpedantic)
    $CC -O2 -g -std=gnu11 -fopenmp -D_GNU_SOURCE -I. "${with[@]}" bench/bench_llmc.c build/libcoordl.a \
        "${LIBS[@]}" -o "$OUT/bench_llmc"
    { echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before the run"
      "$OUT/bench_llmc" --steps "${LLMC_STEPS:-2000}" --rounds "${LLMC_ROUNDS:-3}"
      echo "machine: load average $(cut -d' ' -f1-3 /proc/loadavg) after the run"; } | tee "$OUT/llmc.txt"
}

run_darknet() {
    ensure_lib
    ensure_dataset
    local src=${DARKNET_SRC:-/work/.mirror/pjreddie+darknet/repo} here=$PWD
    local stock=$OUT/darknet-stock patched=$OUT/darknet-coordl
    log "darknet: Darknet's classifier loader vs coordl with Darknet's augmentation"
    if [ ! -e "$src" ]; then
        echo "darknet: skipped: no Darknet source at $src (DARKNET_SRC: a checkout or bare git dir)"
        return 0
    fi
    clone_src "$src" "$stock"
    [ -f "$stock/libdarknet.a" ] || make -C "$stock" -j"$(nproc)" > "$OUT/darknet-stock-build.log" 2>&1
    if [ ! -f "$patched/darknet" ] || [ coordl.c -nt "$patched/darknet" ]; then
        rm -rf "$patched"
        clone_src "$src" "$patched"
        cp coordl.h coordl.c examples/darknet/coordl_darknet.h "$patched/src/"
        (cd "$patched" && patch -s -p1 < "$here/examples/darknet/train_classifier.patch")
        make -C "$patched" -j"$(nproc)" > "$OUT/darknet-coordl-build.log" 2>&1
    fi
    echo "darknet $(git -C "$stock" log -1 --format='%h %cd' --date=short) from $src, built with its stock Makefile"
    $CC -O2 -g -std=gnu11 -Wall -Wextra -DBENCH_WITH_DARKNET -I. -I"$stock/include" bench/bench_darknet.c \
        "$stock/libdarknet.a" build/libcoordl.a "${LIBS[@]}" -o "$OUT/bench_darknet"
    # the bench images as Darknet sees them: absolute paths, labelled by the
    # class folder name they contain
    local data
    data=$(realpath "$BENCH_DATA")
    find "$data" -name '*.jpg' | sort > "$OUT/darknet-train.list"
    ls "$data" > "$OUT/darknet-labels.list"
    local rounds=${DARKNET_ROUNDS:-3} batches=${DARKNET_BATCHES:-10} r case
    : > "$OUT/darknet.log"
    for r in $(seq "$rounds"); do
        # train_classifier's own loader runs args.threads = 32 threads
        for case in "darknet 1" "coordl 1" "darknet $(nproc)" "coordl $(nproc)" "darknet 32"; do
            set -- $case
            "$OUT/bench_darknet" --loader "$1" --threads "$2" --list "$OUT/darknet-train.list" \
                --labels "$OUT/darknet-labels.list" --batches "$batches" --batch 64 | tee -a "$OUT/darknet.log"
        done
    done
    # whole training runs: a two-layer network so the loader's memory shows
    local work=$OUT/darknet-run
    rm -rf "$work"; mkdir -p "$work/backup"
    printf 'classes=%s\ntrain=%s\nlabels=%s\nbackup=%s\n' "$(wc -l < "$OUT/darknet-labels.list" | tr -d ' ')" \
        "$(realpath "$OUT/darknet-train.list")" "$(realpath "$OUT/darknet-labels.list")" "$(realpath "$work/backup")" \
        > "$work/bench.data"
    local classes
    classes=$(wc -l < "$OUT/darknet-labels.list")
    cat > "$work/bench.cfg" <<CFG
[net]
batch=64
subdivisions=1
height=256
width=256
channels=3
min_crop=128
max_crop=448
angle=7
hue=.1
saturation=.75
exposure=.75
aspect=.75
learning_rate=0.01
policy=poly
power=4
max_batches=10
momentum=0.9
decay=0.0005

[convolutional]
filters=8
size=3
stride=4
pad=1
activation=leaky

[maxpool]
size=8
stride=8

[convolutional]
filters=$classes
size=1
stride=1
pad=1
activation=leaky

[avgpool]

[softmax]
groups=1
CFG
    local which
    for r in $(seq "$rounds"); do
        for which in stock coordl; do
            local dir=$stock; [ $which = coordl ] && dir=$patched
            dir=$(realpath "$dir") # before the cd below
            # a failed run prints why and leaves no RESULT (/usr/bin/time
            # reports a failed command's time and RSS too)
            if (cd "$work" && /usr/bin/time -f "RESULT train_$which %e %M" "$dir/darknet" classifier train \
                bench.data bench.cfg > "train-$which.out" 2> "train-$which.err"); then
                grep RESULT "$work/train-$which.err" | tee -a "$OUT/darknet.log"
            else
                echo "darknet: $which classifier train failed ($work/train-$which.err):"
                grep -v '^RESULT' "$work/train-$which.err" | tail -5
            fi
        done
    done
    {
        echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
        echo "loader alone, $batches batches of 64 after one untimed, 256 x 256, stock-cfg augmentation; median of $rounds rounds"
        printf '%-28s %8s %10s %12s %14s\n' loader threads "img/s" "img/s/core" "peak RSS MB"
        awk '$1 == "RESULT" && ($2 == "darknet" || $2 == "coordl") { k = $2 " " $3; n[k]++; v[k, n[k]] = $6; m[k] = $7 > m[k] ? $7 : m[k] }
             END { for (k in n) { # median by insertion sort
                       for (i = 1; i <= n[k]; i++) a[i] = v[k, i]
                       for (i = 2; i <= n[k]; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
                       med[k] = a[int((n[k] + 1) / 2)] }
                   split("darknet 1|coordl 1|darknet CORES|coordl CORES|darknet 32", order, "|")
                   for (o = 1; o <= 5; o++) { k = order[o]; sub("CORES", cores, k); if (!(k in n)) continue
                       split(k, kk, " "); t = kk[2] + 0; c = t < cores ? t : cores
                       printf "%-28s %8d %10.1f %12.1f %14.1f\n", (kk[1] == "coordl" ? "coordl (Darknet crop)" : "Darknet load_data"), t, med[k], med[k] / c, m[k] / 1024 }
                   if (("coordl 1" in med) && ("darknet 1" in med))
                       printf "coordl / Darknet, one thread each (per core): %.2fx images/s\n", med["coordl 1"] / med["darknet 1"] }' \
            cores="$(nproc)" "$OUT/darknet.log"
        echo "darknet classifier train, 10 batches of 64 at 256 x 256 (a 2-layer network): wall s and peak RSS MB, each round"
        awk '$1 == "RESULT" && $2 ~ /^train_/ { w = substr($2, 7); printf "  %-14s %6.1f s %8.1f MB\n", w, $3, $4 / 1024
                 n[w]++; t[w, n[w]] = $3; m[w, n[w]] = $4 }
             function med(a, w,   i, j, x, v) { for (i = 1; i <= n[w]; i++) v[i] = a[w, i]
                 for (i = 2; i <= n[w]; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
                 return v[int((n[w] + 1) / 2)] }
             END { if (n["stock"] && n["coordl"])
                       printf "coordl / stock, medians: peak RSS %.2fx (%.1f / %.1f MB), wall %.2fx\n",
                           med(m, "coordl") / med(m, "stock"), med(m, "coordl") / 1024, med(m, "stock") / 1024,
                           med(t, "coordl") / med(t, "stock")
                   else print "coordl / stock: not measured (a training run failed: see above)" }' "$OUT/darknet.log"
    } > "$OUT/darknet.txt"
    log "darknet: summary (also in $OUT/darknet.txt)"
    cat "$OUT/darknet.txt"
}

# llmc-train: llm.c's own train_gpt2.c, unchanged but for its step count,
# against the same file with examples/llmc/train_gpt2.patch applied (its
# DataLoader replaced by coordl), on a tiny random GPT-2 and token shards
# made by bench/llmc_tiny.py (no download); the two run alternately,
# LLMC_TRAIN_ROUNDS times each, LLMC_TRAIN_STEPS steps a run. Prints each
# run's mean and median step time (train_gpt2's own "took ... ms", step 0
# left out) and its voluntary and involuntary context switches, then the
# medians side by side and coordl/native ratios. Table in
# build/bench/llmc-train.txt
run_llmc_train() {
    ensure_lib
    local src=${LLMC_SRC:-/work/.mirror/karpathy+llm.c/repo} steps=${LLMC_TRAIN_STEPS:-500}
    local rounds=${LLMC_TRAIN_ROUNDS:-3} base=$OUT/llmc-train here=$PWD
    log "llmc-train: llm.c's train_gpt2.c, native DataLoader vs coordl (examples/llmc/train_gpt2.patch)"
    if [ ! -e "$src" ]; then
        echo "llmc-train: skipped: no llm.c source at $src (LLMC_SRC: a checkout or bare git dir)" | tee "$OUT/llmc-train.txt"
        return 0
    fi
    rm -rf "$base" && mkdir -p "$base"
    git clone -q "$src" "$base/native"
    sed -i "s/step <= 40; step++/step <= $steps; step++/" "$base/native/train_gpt2.c"
    grep -q "step <= $steps; step++" "$base/native/train_gpt2.c" || { echo "llmc-train: train_gpt2.c's step loop not found"; return 1; }
    cp -r "$base/native" "$base/coordl"
    (cd "$base/coordl" && git apply "$here/examples/llmc/train_gpt2.patch")
    cp coordl.h coordl.c "$base/coordl/"
    $CC -O2 -c "$base/coordl/coordl.c" -o "$base/coordl/coordl.o"
    for v in native coordl; do
        python3 bench/llmc_tiny.py "$base/$v"
        if [ $v = coordl ]; then
            make -s -C "$base/$v" train_gpt2 LDLIBS="-lm coordl.o -ljpeg $HWLOC_LIB -lcurl -luring -lpthread" > "$base/$v.build.log" 2>&1
        else
            make -s -C "$base/$v" train_gpt2 > "$base/$v.build.log" 2>&1
        fi || { tail -20 "$base/$v.build.log"; echo "llmc-train: building the $v train_gpt2 failed"; return 1; }
    done
    echo "llm.c $(git -C "$base/native" log -1 --format='%h %cd' --date=short); train_gpt2.c as shipped but for $steps steps (B=4, T=64), OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}, tiny random GPT-2 (2 layers, 64 channels, V 512)" > "$OUT/llmc-train.log"
    local r v
    for r in $(seq 1 "$rounds"); do
        for v in native coordl; do
            (cd "$base/$v" && OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} /usr/bin/time -f "RUSAGE %w %c %e" ./train_gpt2 > out.txt 2> time.txt) ||
                { tail -5 "$base/$v/out.txt" "$base/$v/time.txt"; echo "llmc-train: the $v run failed"; return 1; }
            python3 - "$v" "$r" "$base/$v/out.txt" "$base/$v/time.txt" >> "$OUT/llmc-train.log" <<'PY'
import re, statistics, sys
v, r, out, tm = sys.argv[1:5]
steps = [(int(m.group(1)), float(m.group(2)), float(m.group(3))) for m in
         re.finditer(r"^step (\d+): train loss ([-0-9.e]+) \(took ([0-9.]+) ms\)", open(out).read(), re.M)]
t = [ms for s, _, ms in steps if s > 0]
vol, invol, wall = open(tm).read().split("RUSAGE")[1].split()[:3]
print("RUN", v, r, "%.4f %.4f %.4f" % (statistics.mean(t), statistics.median(t), steps[-1][1]), vol, invol, wall)
PY
        done
    done
    {
        head -1 "$OUT/llmc-train.log"
        python3 - "$OUT/llmc-train.log" <<'PY'
import statistics, sys
runs = [l.split() for l in open(sys.argv[1]) if l.startswith("RUN ")]
print("%-8s %5s %14s %12s %10s %12s %14s %8s" % ("run", "round", "mean step ms", "median ms", "last loss",
                                                 "vol. switch", "invol. switch", "wall s"))
for _, v, r, mean, med, loss, vol, invol, wall in runs:
    print("%-8s %5s %14s %12s %10s %12s %14s %8s" % (v, r, mean, med, loss, vol, invol, wall))
def m(v, i): return statistics.median(float(x[i]) for x in runs if x[1] == v)
sn, sc, wn, wc = m("native", 3), m("coordl", 3), m("native", 6), m("coordl", 6)
print("medians: mean step %.4f ms native, %.4f ms coordl (coordl/native %.3f); voluntary context switches "
      "per run %d native, %d coordl (coordl/native %.2f)" % (sn, sc, sc / sn, wn, wc, wc / max(wn, 1)))
PY
    } | tee "$OUT/llmc-train.txt"
}

# detect: detection batches with Darknet's geometry (yolov3's cfg: 416 x
# 416, jitter .3, colour jitter, 90 boxes): Darknet's own
# load_data_detection (built from a checkout, as for `darknet`) against
# coordl's COORDL_CROP_DARKNET_BOXES through examples/darknet/coordl_darknet.h,
# and coordl's SSD crop, one thread each (images/s per core), on the bench
# photos with 1-4 generated boxes each (YOLO label files under labels/).
# DETECT_ROUNDS (3), DETECT_BATCHES (15). Table in build/bench/detect.txt
run_detect() {
    ensure_lib
    ensure_dataset
    local src=${DARKNET_SRC:-/work/.mirror/pjreddie+darknet/repo} stock=$OUT/darknet-stock det=$OUT/detect-set
    log "detect: Darknet's load_data_detection vs coordl (Darknet's detection crop, SSD's crop), one thread each"
    if [ ! -e "$src" ]; then
        echo "detect: skipped: no Darknet source at $src (DARKNET_SRC: a checkout or bare git dir)" | tee "$OUT/detect.txt"
        return 0
    fi
    clone_src "$src" "$stock"
    [ -f "$stock/libdarknet.a" ] || make -C "$stock" -j"$(nproc)" > "$OUT/darknet-stock-build.log" 2>&1
    if [ ! -f "$det/train.list" ]; then
        python3 - "$BENCH_DATA" "$det" <<'PY'
import os, random, sys
src, det = sys.argv[1], sys.argv[2]
imgs = sorted(os.path.join(r, f) for r, _, fs in os.walk(src) for f in fs if f.endswith(".jpg"))[:400]
rng = random.Random(5)
os.makedirs(os.path.join(det, "images"), exist_ok=True)
os.makedirs(os.path.join(det, "labels"), exist_ok=True)
out = []
for k, p in enumerate(imgs):
    dst = os.path.join(det, "images", "img_%04d.jpg" % k)
    if not os.path.exists(dst): os.symlink(os.path.abspath(p), dst)
    lines = []
    for _ in range(rng.randrange(1, 5)):
        w, h = rng.uniform(0.1, 0.5), rng.uniform(0.1, 0.5)
        lines.append("%d %.6f %.6f %.6f %.6f" % (rng.randrange(80), rng.uniform(w / 2, 1 - w / 2), rng.uniform(h / 2, 1 - h / 2), w, h))
    open(os.path.join(det, "labels", "img_%04d.txt" % k), "w").write("\n".join(lines) + "\n")
    out.append(os.path.abspath(dst))
open(os.path.join(det, "train.list"), "w").write("\n".join(out) + "\n")
PY
    fi
    $CC -O2 -g -std=gnu11 -Wall -Wextra -DBENCH_WITH_DARKNET -I. -I"$stock/include" bench/bench_detect.c \
        "$stock/libdarknet.a" build/libcoordl.a "${LIBS[@]}" -o "$OUT/bench_detect"
    echo "darknet $(git -C "$stock" log -1 --format='%h %cd' --date=short) from $src; $(wc -l < "$det/train.list") photos with generated boxes; 416 x 416, batch 16, one thread each" > "$OUT/detect.log"
    local r l
    for r in $(seq 1 "${DETECT_ROUNDS:-3}"); do
        for l in darknet coordl coordl-ssd; do
            "$OUT/bench_detect" --loader $l --list "$det/train.list" --threads 1 --batches "${DETECT_BATCHES:-15}" \
                --batch 16 --size 416 >> "$OUT/detect.log" || { echo "detect: the $l run failed"; return 1; }
        done
    done
    {
        head -1 "$OUT/detect.log"
        python3 - "$OUT/detect.log" <<'PY'
import statistics, sys
runs = [l.split() for l in open(sys.argv[1]) if l.startswith("RESULT ")]
med = {}
print("%-11s %14s %16s" % ("loader", "images/s (median)", "boxes per image"))
for name in ("darknet", "coordl", "coordl-ssd"):
    v = [float(x[5]) for x in runs if x[1] == name]
    b = [float(x[6]) for x in runs if x[1] == name]
    med[name] = statistics.median(v)
    print("%-11s %14.1f %16.2f   (rounds: %s)" % (name, med[name], statistics.median(b), ", ".join("%.1f" % x for x in v)))
print("coordl / darknet, images/s per core: %.2fx (target >= 2x); SSD crop / Darknet crop (coordl): %.2fx"
      % (med["coordl"] / med["darknet"], med["coordl-ssd"] / med["coordl"]))
PY
    } | tee "$OUT/detect.txt"
}

# ready: the trainer's cost of a ready batch (issue 23): next + release with
# the trainer sleeping 20 ms per step (its batch always ready), alone and in
# a coordinated group; then the same under strace -f, with a marker write
# around each pair, counting the system calls the trainer's thread made
# inside the pairs (the strace run's own times are not reported: strace
# slows every call). Table in build/bench/ready.txt
run_ready() {
    ensure_lib
    build bench_ready lib
    local data=${READY_DATA:-build/demo-data}
    if [ ! -d "$data" ]; then
        make -s examples
        build/examples/gen_dataset --out "$data" --classes 10 --per-class 200 --seed 1 > /dev/null
    fi
    command -v strace > /dev/null || apt_install strace
    log "ready: next + release of a ready batch (trainer step 20 ms, prefetch 8)"
    { "$OUT/bench_ready" --data "$data" --calls "${READY_CALLS:-300}"
      "$OUT/bench_ready" --data "$data" --calls "${READY_CALLS:-300}" --group "bench-ready-$$"
      strace -f -qq -o "$OUT/ready.strace" "$OUT/bench_ready" --data "$data" --calls 100 --markers > /dev/null
      awk -v self="$(head -1 "$OUT/ready.strace" | awk '{print $1}')" '
          $1 != self { next }
          /coordl-mark/ { if (inside) { pairs++; if (n == 0) zero++; total += n; if (n > most) most = n }
                          inside = !inside; n = 0; next }
          inside && !/resumed>/ { n++ }
          END { printf "strace -f, one process, 100 pairs: %d made no system call on the trainer'"'"'s thread; %d system calls in all (most in one pair: %d)\n", zero, total, most }' "$OUT/ready.strace"
    } | tee "$OUT/ready.txt"
}

# Remote sources (issue 24): the same shards local, over HTTP and over S3,
# behind a latency-adding proxy, at several read-ahead depths.
# A saved index on a 1M-item tar set: open's seconds, resident bytes per
# item and storage calls when it scans, scans and saves, and loads; then
# the storage calls of 1 rank against 4 ranks opening together over MPI
# (tests/mpi/mpi_index counts them on its own set: the ratio is the figure).
run_tarindex() {
    ensure_lib
    build bench_tarindex lib
    log "tarindex: scan, save and load a saved index (bench_tarindex, ${TAR_SHARDS:-200} x ${TAR_PER_SHARD:-5000})"
    "$OUT/bench_tarindex" --root "${BENCH_TAR:-build/bench-tar}" --shards "${TAR_SHARDS:-200}" \
        --per-shard "${TAR_PER_SHARD:-5000}" --repeat "${TAR_REPEAT:-3}" | tee "$OUT/tarindex.log"
    if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
        log "tarindex: storage calls during coordl_open, 1 rank vs 4 ranks (tests/mpi/mpi_index under mpirun -np 4)"
        make -s MPI=1 build-mpi/tests/mpi/mpi_index
        local np_root=""
        [ "$(id -u)" = 0 ] && np_root=--allow-run-as-root
        mpirun --oversubscribe $np_root -np 4 build-mpi/tests/mpi/mpi_index build-mpi/mpi-data 2>&1 |
            grep -E "storage calls" | tee -a "$OUT/tarindex.log"
    else
        echo "tarindex: MPI row not run (no mpicc/mpirun; bash bench/run.sh mpi installs OpenMPI)" | tee -a "$OUT/tarindex.log"
    fi
    grep -v '^RESULT' "$OUT/tarindex.log" > "$OUT/tarindex.txt"
}

# The shard-window order (issue 25) against the full shuffle, same shards.
run_window() {
    ensure_lib
    build bench_window lib
    make -s build/examples/gen_dataset
    local work=$OUT/window images=${WINDOW_IMAGES:-3072} per_window=${WINDOW_SHARDS:-4}
    local shards=$work/shards
    if [ ! -f "$shards/.done-$images" ]; then
        rm -rf "$work"
        mkdir -p "$shards"
        log "window: $images images in 32 WebDataset shards (gen_dataset, 160-320 px JPEGs)"
        build/examples/gen_dataset --out "$work/images" --classes 16 --per-class $(( images / 16 )) --seed 5 \
            --min-side 160 --max-side 320 >/dev/null
        "$PY" - "$work/images" "$shards" <<'PYEOF'
import os, sys, tarfile, io
src, out = sys.argv[1], sys.argv[2]
items = []
for c, cls in enumerate(sorted(os.listdir(src))):
    for f in sorted(os.listdir(os.path.join(src, cls))):
        items.append((c, os.path.join(src, cls, f)))
per = (len(items) + 31) // 32
for s in range(32):
    with tarfile.open(os.path.join(out, 'shard-%06d.tar' % s), 'w', format=tarfile.USTAR_FORMAT) as t:
        for i, (c, p) in enumerate(items[s * per:(s + 1) * per]):
            key = 'i%06d' % (s * per + i)
            t.add(p, arcname=key + '.jpg')
            b = str(c).encode()
            ti = tarfile.TarInfo(key + '.cls'); ti.size = len(b)
            t.addfile(ti, io.BytesIO(b))
PYEOF
        touch "$shards/.done-$images"
    fi
    log "window: full shuffle vs shard-window order ($per_window shards per window), 2 prep threads, 128 px"
    "$OUT/bench_window" --source "$shards" --window "$per_window" --rounds "$BENCH_ROUNDS" | tee "$work/result.log"
    {
        echo "shard-window order vs full shuffle: $images images in 32 tar shards, window $per_window shards, batch 32,"
        echo "2 prep threads, 128 px U8; medians of $BENCH_ROUNDS rounds (orders alternated); cold = pages dropped, open included"
        printf '%-14s %12s %12s %18s %17s %14s\n' order cold_img/s warm_img/s shards/batch_mean shards/batch_max sampler_bytes
        awk '/^RESULT window/ { printf "%-14s %12s %12s %18s %17s %14s\n", $3, $4, $5, $6, $7, $8 }' "$work/result.log"
    } | tee "$OUT/window.txt"
}

# Shards indexed as the window reaches them (issue 25), on virtual sets.
run_lazy() {
    ensure_lib
    build bench_lazy lib
    log "lazy: a virtual 100M-sample set (20,000 shards x 5,000) in shard-window order; a 1M set, full vs window"
    "$OUT/bench_lazy" --threads 2 --batches 300 | tee "$OUT/lazy.log"
    {
        echo "virtual WebDataset sets (coordl_io, one 48 px JPEG + .cls a sample, 32 px EVAL output, batch 32, 2 prep"
        echo "threads, window 8 shards); RSS = growth of VmRSS from before coordl_open; img/s over 300 batches after the first"
        echo "big+20us: the same 100M set behind a reader sleeping 20 us in every read (a shard's scan: 2 reads a sample)"
        printf '%-9s %-7s %10s %8s %14s %12s %11s %9s\n' set order items open_s first_batch_s rss_open_MB rss_end_MB img/s
        awk '/^RESULT lazy/ { printf "%-9s %-7s %10s %8s %14s %12s %11s %9s\n", $3, $4, $5, $6, $7, $8, $9, $10 }' "$OUT/lazy.log"
    } | tee "$OUT/lazy.txt"
}

run_remote() {
    ensure_lib
    build bench_remote lib
    make -s build/examples/gen_dataset
    local s3rver=build/npm/node_modules/s3rver/bin/s3rver.js node=/usr/bin/node nginx=/usr/sbin/nginx
    [ -f "$s3rver" ] || { echo "run.sh: s3rver missing: run tools/install-deps.sh" >&2; exit 1; }
    [ -x "$nginx" ] && [ -x "$node" ] || { echo "run.sh: nginx and node are needed: run tools/install-deps.sh" >&2; exit 1; }
    local work=$OUT/remote images=${REMOTE_IMAGES:-3072}
    local shards=$work/shards
    rm -rf "$work"
    mkdir -p "$work/tmp" "$work/s3rver" "$shards"
    log "remote: $images images in 8 WebDataset shards (gen_dataset, 160-320 px JPEGs)"
    build/examples/gen_dataset --out "$work/images" --classes 16 --per-class $(( images / 16 )) --seed 3 \
        --min-side 160 --max-side 320 >/dev/null
    "$PY" - "$work/images" "$shards" <<'PYEOF'
import os, sys, tarfile, io
src, out = sys.argv[1], sys.argv[2]
items = []
for c, cls in enumerate(sorted(os.listdir(src))):
    for f in sorted(os.listdir(os.path.join(src, cls))):
        items.append((c, os.path.join(src, cls, f)))
per = (len(items) + 7) // 8
for s in range(8):
    with tarfile.open(os.path.join(out, 'shard-%06d.tar' % s), 'w', format=tarfile.USTAR_FORMAT) as t:
        for i, (c, p) in enumerate(items[s * per:(s + 1) * per]):
            key = 'i%06d' % (s * per + i)
            t.add(p, arcname=key + '.jpg')
            b = str(c).encode()
            ti = tarfile.TarInfo(key + '.cls'); ti.size = len(b)
            t.addfile(ti, io.BytesIO(b))
PYEOF
    local pids=() fifos=()
    free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
    local nginx_port s3_port
    nginx_port=$(free_port); s3_port=$(free_port)
    cat > "$work/nginx.conf" <<NGEOF
$([ "$(id -u)" = 0 ] && echo "user root;")
daemon off; master_process off; worker_processes 1; pid $PWD/$work/nginx.pid; error_log $PWD/$work/error.log;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 100000; keepalive_timeout 60s;
  client_body_temp_path $PWD/$work/tmp; proxy_temp_path $PWD/$work/tmp; fastcgi_temp_path $PWD/$work/tmp;
  uwsgi_temp_path $PWD/$work/tmp; scgi_temp_path $PWD/$work/tmp;
  server { listen 127.0.0.1:$nginx_port; root $PWD/$shards; location / { } } }
NGEOF
    "$nginx" -p "$PWD/$work" -c "$PWD/$work/nginx.conf" & local nginx_pid=$!
    NODE_OPTIONS=--openssl-legacy-provider "$node" "$s3rver" --directory "$work/s3rver" --address 127.0.0.1 \
        --port "$s3_port" --silent & local s3_pid=$!
    pids+=("$nginx_pid" "$s3_pid")
    trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
    local i
    for i in $(seq 100); do
        (echo > /dev/tcp/127.0.0.1/$nginx_port) 2>/dev/null && (echo > /dev/tcp/127.0.0.1/$s3_port) 2>/dev/null && break
        sleep 0.1
    done
    curl -sf -X PUT "http://127.0.0.1:$s3_port/bench" >/dev/null
    for f in "$shards"/*.tar; do curl -sf -T "$f" "http://127.0.0.1:$s3_port/bench/train/$(basename "$f")" >/dev/null; done
    # a latency proxy per (server, latency); each prints its port
    declare -A proxy_port proxy_pid
    local server lat upstream
    for server in http s3; do
        for lat in 0 5 20; do
            upstream=$([ $server = http ] && echo "$nginx_port" || echo "$s3_port")
            TU_PROXY_KEEP=1 "$node" tests/tu_http_proxy.js "$upstream" "$lat" < /dev/null > "$work/p-$server-$lat.port" &
            proxy_pid[$server-$lat]=$!
            pids+=("$!")
        done
    done
    for server in http s3; do
        for lat in 0 5 20; do
            for i in $(seq 100); do [ -s "$work/p-$server-$lat.port" ] && break; sleep 0.1; done
            proxy_port[$server-$lat]=$(awk '{print $2}' "$work/p-$server-$lat.port")
        done
    done
    log "remote: cold (open included) and warm epochs, 2 prep threads (bench_remote)"
    local load_before; load_before=$(uptime)
    : > "$work/remote.log"
    local depth src ids round rounds=${REMOTE_ROUNDS:-3}
    # the latencies of one depth run back to back, and the whole set
    # REMOTE_ROUNDS times: the machine's other load (2 shared cores) moves
    # between cases, and the targets compare cases; the table gives each
    # case's median round
    for round in $(seq "$rounds"); do
        for depth in 32 128 512; do
            "$OUT/bench_remote" --source "$shards/shard-{000000..000007}.tar" --name local --lat 0 --depth $depth \
                --size "${REMOTE_SIZE:-224}" | tee -a "$work/remote.log"
        done
        for server in http s3; do
            for depth in 32 128 512; do
                for lat in 0 5 20; do
                    if [ $server = http ]; then
                        src="http://127.0.0.1:${proxy_port[$server-$lat]}/shard-{000000..000007}.tar"; ids=$nginx_pid
                    else
                        src="s3://bench/train/shard-{000000..000007}.tar"; ids=$s3_pid
                    fi
                    AWS_ENDPOINT_URL="http://127.0.0.1:${proxy_port[$server-$lat]}" AWS_ACCESS_KEY_ID=S3RVER \
                    AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1 \
                    "$OUT/bench_remote" --source "$src" --name $server --lat $lat --depth $depth \
                        --size "${REMOTE_SIZE:-224}" --pids "$ids,${proxy_pid[$server-$lat]}" | tee -a "$work/remote.log"
                done
            done
        done
    done
    # each case's median round (by cold images/s), in the order above
    "$PY" - "$work/remote.log" > "$work/remote.median" <<'PYEOF'
import sys
cases = {}
for line in open(sys.argv[1]):
    f = line.split()
    if f and f[0] == 'RESULT':
        cases.setdefault((f[2], f[3], f[4]), []).append(f)
for key in sorted(cases, key=lambda k: (['local', 'http', 's3'].index(k[0]), int(k[1]), int(k[2]))):
    runs = sorted(cases[key], key=lambda f: float(f[5]))
    print(' '.join(runs[len(runs) // 2]))
PYEOF
    kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    trap - EXIT
    {
        echo "remote sources: $images images (8 shards, 160-320 px JPEGs -> ${REMOTE_SIZE:-224} px), 2 prep threads,"
        echo "each case a fresh process: cold epoch from coordl_open (open s: the open's part), then a warm one (all cached);"
        echo "each row the median (by cold images/s) of $rounds rounds, the latencies of a depth run back to back"
        printf '%-6s %5s %6s %7s %10s %10s %6s %9s %7s %8s %10s %9s\n' source "+ms" depth "open s" "cold i/s" \
            "warm i/s" "c/w" "inflight" "io thr" "threads" "MB fetched" "srv CPU s"
        awk '$1 == "RESULT" { printf "%-6s %5s %6s %7.2f %10.1f %10.1f %6.2f %9s %7s %8s %10.1f %9.2f\n",
            $3, $4, $5, $14, $6, $7, $8, $9, $10, $13, $11 / 1e6, $12 }' "$work/remote.median"
        echo
        echo "srv CPU: the server (nginx or s3rver) and its latency proxy (node), user + system, during both epochs"
        echo "threads: the loader process's most threads in the cold epoch (main, 2 prep workers, read-ahead"
        echo "I/O threads, the one HTTP event loop, libcurl's resolver)"
        awk '$1 == "RESULT" && $3 != "local" { k = $3 " " $5; if ($4 == 0) base[k] = $6; if ($4 == 20) slow[k] = $6; io[k] = $10 }
             END { for (s = 0; s < 2; s++) { src = s ? "s3" : "http"; k = src " 512"
                   if (base[k] > 0) printf "target %s: cold at +20 ms, depth 512 = %.2fx cold at +0 ms (>= 0.90: %s), %s I/O threads (<= 2: %s)\n",
                       src, slow[k] / base[k], (slow[k] / base[k] >= 0.9 ? "met" : "NOT met"), io[k], (io[k] <= 2 ? "met" : "NOT met") } }' \
            "$work/remote.median"
        awk '$1 == "RESULT" && $3 == "http" && $4 == 20 && $5 == 512 {
             printf "http at +20 ms, depth 512: cold %.2fx warm (the server shares the 2 cores: %.2f s of its CPU)\n", $8, $12 }' \
            "$work/remote.median"
        echo "machine load before: $load_before"
        echo "machine load after:  $(uptime)"
    } > "$OUT/remote.txt"
    log "remote: summary (also in $OUT/remote.txt)"
    cat "$OUT/remote.txt"
}

case "$MODE" in
    dataset) ensure_dataset ;;
    mpi) run_mpi ;;
    group) run_group ;;
    llmc) run_llmc ;;
    ready) run_ready ;;
    detect) run_detect ;;
    llmc-train) run_llmc_train ;;
    darknet) run_darknet ;;
    storage) run_storage ;;
    uring) run_uring ;;
    remote) run_remote ;;
    window) run_window ;;
    lazy) run_lazy ;;
    tarindex) run_tarindex ;;
    prep) run_prep ;;
    jpeg) run_jpeg ;;
    index) run_index ;;
    cache) run_cache ;;
    placement) run_placement ;;
    all) run_prep; run_jpeg; run_index; run_cache; run_placement; run_group; run_llmc; run_llmc_train; run_ready; run_darknet; run_detect; run_storage; run_uring; run_remote; run_window; run_lazy; run_tarindex
         if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then run_mpi
         else log "mpi: skipped (no mpicc/mpirun; bash bench/run.sh mpi installs OpenMPI)"; fi ;;
esac
