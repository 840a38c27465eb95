#!/usr/bin/env bash
# tools/check-darknet-patch.sh - examples/darknet/train_classifier.patch on
# pjreddie/darknet's own tree, for real: copy coordl.h, coordl.c and
# coordl_darknet.h into darknet/src/, apply the patch with patch -p1, build
# with Darknet's stock Makefile, train a small classifier for a few batches
# through coordl (checking the losses are finite numbers and the batches
# advance), then again with one corrupt JPEG (checking the adapter names the
# file and stops instead of training on NaN).
#
#   tools/check-darknet-patch.sh [DARKNET_SRC]
#
# Darknet's source is never downloaded: DARKNET_SRC (a checkout, or a bare
# git directory) or, when present, the mirror /work/.mirror/pjreddie+darknet/repo.
# Without either it prints why it is skipped and exits 0 (CI stays green
# on machines that have no copy; the message says nothing was checked).
# Exit 0: passed or skipped (the last line says which); 1: failed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
src=${1:-${DARKNET_SRC:-/work/.mirror/pjreddie+darknet/repo}}
if [ ! -e "$src" ]; then
    echo "check-darknet-patch: SKIPPED: no Darknet source at $src (give a pjreddie/darknet checkout or bare git dir as DARKNET_SRC); nothing was checked"
    exit 0
fi
work=$(mktemp -d /tmp/coordl-darknet-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "check-darknet-patch: FAILED: $*"; exit 1; }

# 1. a clean copy of Darknet's tree
if [ -d "$src/.git" ] || [ -f "$src/HEAD" ]; then
    git clone -q "$src" "$work/darknet"
    echo "check-darknet-patch: darknet $(git -C "$work/darknet" log -1 --format='%h %cd' --date=short) from $src"
else
    cp -r "$src" "$work/darknet"
    echo "check-darknet-patch: darknet tree copied from $src"
fi
cd "$work/darknet"

# 2. the steps of docs/integrations.md (Darknet), as a user types them
cp "$here/coordl.h" "$here/coordl.c" "$here/examples/darknet/coordl_darknet.h" src/
patch -p1 --dry-run < "$here/examples/darknet/train_classifier.patch" > /dev/null || fail "the patch does not apply"
patch -p1 < "$here/examples/darknet/train_classifier.patch"
make -j"$(nproc)" > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; fail "Darknet's Makefile did not build"; }
grep -q "src/coordl.c" "$work/build.log" || fail "the Makefile did not compile src/coordl.c"
echo "check-darknet-patch: patch applied, stock Makefile built ./darknet with coordl.o"

# 3. a small dataset in Darknet's layout: labels by path, a train list
cc -O2 -std=c11 -D_GNU_SOURCE "$here/examples/gen_dataset.c" -ljpeg -lm -o "$work/gen_dataset"
"$work/gen_dataset" --out "$work/data" --classes 4 --per-class 24 --seed 3 --min-side 40 --max-side 64 > /dev/null
find "$work/data" -name '*.jpg' | sort > "$work/train.list"
printf 'class_000\nclass_001\nclass_002\nclass_003\n' > "$work/labels.list"
printf 'classes=4\ntrain=%s\nlabels=%s\nbackup=%s\n' "$work/train.list" "$work/labels.list" "$work/backup" > "$work/small.data"
mkdir -p "$work/backup"
cat > "$work/small.cfg" <<'CFG'
[net]
batch=16
subdivisions=2
height=32
width=32
channels=3
min_crop=32
max_crop=48
angle=7
aspect=.75
hue=.1
saturation=.75
exposure=.75
learning_rate=0.05
policy=poly
power=4
max_batches=12
momentum=0.9
decay=0.0005

[convolutional]
filters=8
size=3
stride=2
pad=1
activation=leaky

[convolutional]
filters=4
size=1
stride=1
pad=1
activation=leaky

[avgpool]

[softmax]
groups=1
CFG

# 4. train through coordl: every batch's loss a number, the batch count advances
./darknet classifier train "$work/small.data" "$work/small.cfg" > "$work/train.out" 2> "$work/train.err" \
    || { tail -20 "$work/train.out" "$work/train.err"; fail "training exited with an error"; }
grep -q "^coordl: 32 x 32, 16 images per batch, crop 32..48" "$work/train.out" \
    || { cat "$work/train.out"; fail "the [net] section did not reach coordl's config"; }
steps=$(grep -cE '^[0-9]+, [0-9.]+: [0-9.]+, [0-9.]+ avg' "$work/train.out" || true)
nan=$(grep -ciE '^[0-9]+, [0-9.]+: .*(nan|inf)' "$work/train.out" || true)
[ "$steps" -eq 12 ] || { cat "$work/train.out"; fail "$steps training steps printed a finite loss, expected 12"; }
[ "$nan" -eq 0 ] || fail "$nan steps printed a NaN/inf loss"
last=$(grep -E '^[0-9]+, ' "$work/train.out" | tail -1 | cut -d, -f1)
[ "$last" = 12 ] || fail "the batch counter ended at $last, expected 12"
[ -s "$work/backup/small.weights" ] || fail "no final weights written"
echo "check-darknet-patch: trained 12 batches through coordl, every loss finite, final weights written"

# 5. a corrupt image: the adapter prints the file and the reason and the run stops
bad=$(sed -n 5p "$work/train.list")
head -c 300 "$bad" > "$bad.cut" && mv "$bad.cut" "$bad"
sed -i 's/^max_batches=12/max_batches=40/' "$work/small.cfg"
./darknet classifier train "$work/small.data" "$work/small.cfg" > "$work/bad.out" 2> "$work/bad.err" \
    || { tail -20 "$work/bad.out" "$work/bad.err"; fail "the run with a corrupt image crashed"; }
grep -q "coordl_dn_load: .*$(basename "$bad")" "$work/bad.err" \
    || { cat "$work/bad.err"; fail "the adapter did not name $(basename "$bad")"; }
nan=$(grep -ciE '^[0-9]+, [0-9.]+: .*(nan|inf)' "$work/bad.out" || true)
[ "$nan" -eq 0 ] || fail "$nan steps trained on a NaN batch"
echo "check-darknet-patch: corrupt $(basename "$bad"): $(grep -m1 'coordl_dn_load' "$work/bad.err")"
echo "check-darknet-patch: PASSED"
