#!/usr/bin/env python3
"""examples/darknet/small_detect_set.py DIR - a small generated detection
set in Darknet's layout, to try train_detector.patch without COCO or VOC:

  DIR/images/train/img_NNN.ppm  64 images, 96 x 96, grey noise with 1-3
                                solid rectangles, each of one of 2 classes
                                (red squares-ish, blue wide bars)
  DIR/labels/train/img_NNN.txt  their YOLO labels: class cx cy w h,
                                normalized (Darknet's label layout)
  DIR/train.list                the images' absolute paths
  DIR/small-detect.data         classes=2, train, backup=DIR/backup
  DIR/small-yolo.cfg            examples/darknet/small-yolo.cfg

Then, in Darknet's folder (patched):
  ./darknet detector train DIR/small-detect.data DIR/small-yolo.cfg
Seeded: the same bytes every run. Python 3 only; nothing is downloaded.
"""
import os
import random
import shutil
import sys

W = H = 96
N = 64


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: small_detect_set.py DIR")
    d = os.path.abspath(sys.argv[1])
    here = os.path.dirname(os.path.abspath(__file__))
    imgs, labs = os.path.join(d, "images", "train"), os.path.join(d, "labels", "train")
    os.makedirs(imgs, exist_ok=True)
    os.makedirs(labs, exist_ok=True)
    os.makedirs(os.path.join(d, "backup"), exist_ok=True)
    rng = random.Random(7)
    paths = []
    for k in range(N):
        pix = bytearray(rng.randrange(90, 160) for _ in range(W * H * 3))
        lines = []
        for _ in range(rng.randrange(1, 4)):
            c = rng.randrange(2)
            w = rng.randrange(14, 30) if c == 0 else rng.randrange(30, 60)
            h = rng.randrange(14, 30) if c == 0 else rng.randrange(8, 16)
            x0, y0 = rng.randrange(0, W - w), rng.randrange(0, H - h)
            col = (220, 30, 30) if c == 0 else (30, 40, 220)
            for y in range(y0, y0 + h):
                for x in range(x0, x0 + w):
                    i = (y * W + x) * 3
                    pix[i:i + 3] = bytes(col)
            lines.append("%d %.6f %.6f %.6f %.6f" % (c, (x0 + w / 2) / W, (y0 + h / 2) / H, w / W, h / H))
        p = os.path.join(imgs, "img_%03d.ppm" % k)
        with open(p, "wb") as f:
            f.write(b"P6\n%d %d\n255\n" % (W, H))
            f.write(pix)
        with open(os.path.join(labs, "img_%03d.txt" % k), "w") as f:
            f.write("\n".join(lines) + "\n")
        paths.append(p)
    with open(os.path.join(d, "train.list"), "w") as f:
        f.write("\n".join(paths) + "\n")
    with open(os.path.join(d, "small-detect.data"), "w") as f:
        f.write("classes=2\ntrain=%s\nbackup=%s\n" % (os.path.join(d, "train.list"), os.path.join(d, "backup")))
    shutil.copy(os.path.join(here, "small-yolo.cfg"), os.path.join(d, "small-yolo.cfg"))
    print("small_detect_set: %d images in %s; train with: ./darknet detector train %s %s" %
          (N, d, os.path.join(d, "small-detect.data"), os.path.join(d, "small-yolo.cfg")))


if __name__ == "__main__":
    main()
