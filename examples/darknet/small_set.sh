#!/usr/bin/env bash
# examples/darknet/small_set.sh DIR - a small generated classification set in
# Darknet's layout, to try train_classifier.patch without ImageNet:
#   DIR/data/class_00K/img_*.jpg  96 JPEGs, 4 classes (examples/gen_dataset.c)
#   DIR/train.list                their absolute paths (Darknet labels a path
#                                 by the label name it contains)
#   DIR/labels.list               class_000 .. class_003
#   DIR/small.data                classes, train, labels, backup=DIR/backup
#   DIR/small.cfg                 examples/darknet/small.cfg (32 x 32, 12 batches)
# Then, in Darknet's folder:  ./darknet classifier train DIR/small.data DIR/small.cfg
# Needs a C compiler and libjpeg (libjpeg62-turbo-dev). Nothing is downloaded.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1"
dir=$(cd "$1" && pwd)
cc -O2 -std=c11 -D_GNU_SOURCE "$here/examples/gen_dataset.c" -ljpeg -lm -o "$dir/gen_dataset"
"$dir/gen_dataset" --out "$dir/data" --classes 4 --per-class 24 --seed 3 --min-side 40 --max-side 64 > /dev/null
find "$dir/data" -name '*.jpg' | sort > "$dir/train.list"
printf 'class_000\nclass_001\nclass_002\nclass_003\n' > "$dir/labels.list"
mkdir -p "$dir/backup"
printf 'classes=4\ntrain=%s\nlabels=%s\nbackup=%s\n' "$dir/train.list" "$dir/labels.list" "$dir/backup" > "$dir/small.data"
cp "$here/examples/darknet/small.cfg" "$dir/small.cfg"
echo "small_set: $(wc -l < "$dir/train.list") images in $dir; train with: ./darknet classifier train $dir/small.data $dir/small.cfg"
