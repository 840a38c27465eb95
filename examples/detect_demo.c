/*
 * detect_demo - object detection batches from coordl: images with YOLO
 * label files in, rows of pixels and their boxes out.
 *
 *   detect_demo [--data LIST] [--size 416] [--batches 2] [--eval] [--check]
 *               [--workdir DIR]
 *
 * LIST is a Darknet train.txt (one image path a line, relative to the
 * list's folder or absolute); each image .../images/.../x.ext has its boxes
 * in .../labels/.../x.txt, one "class cx cy w h" line per box, normalized
 * to the image. Without --data the demo writes a small set of its own (PPM
 * images of coloured rectangles and their label files, in a temporary
 * folder, or DIR) and reads that.
 *
 * coordl applies Darknet's detection augmentation (COORDL_CROP_DARKNET_BOXES:
 * jittered aspect, random scale and placement on a grey canvas, colour,
 * flip) or, with --eval, the letterbox; the boxes move with the pixels.
 * The demo prints each row's boxes in output pixels. --check (make test's
 * example check) runs the train and the eval geometry over the demo's own
 * set at 128 x 128 and removes the set afterwards.
 *
 * Exit status: 0 when every box printed lies inside the output image and
 * has a positive size, 1 otherwise or on any error, 2 for bad arguments.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coordl.h"

/* Writes a W x H PPM of white with three rectangles and its label file. */
static int write_item(const char *dir, int k, FILE *list) {
    const int W = 160 + 32 * (k % 3), H = 120 + 24 * (k % 2);
    static const unsigned char col[3][3] = {{220, 30, 30}, {30, 180, 30}, {30, 30, 220}};
    unsigned char *pix = malloc((size_t)W * H * 3);
    char path[4200];
    if (!pix) return 0;
    memset(pix, 255, (size_t)W * H * 3);
    snprintf(path, sizeof path, "%s/labels/im%03d.txt", dir, k);
    FILE *lab = fopen(path, "w");
    if (!lab) { free(pix); return 0; }
    for (int c = 0; c < 3; c++) {
        const int rw = 30 + 10 * ((k + c) % 3), rh = 24 + 8 * ((k + 2 * c) % 3);
        const int x0 = 8 + c * (W / 3), y0 = 6 + (k * 13 + c * 29) % (H - rh - 12);
        for (int y = y0; y < y0 + rh; y++)
            for (int x = x0; x < x0 + rw; x++) memcpy(pix + ((size_t)y * W + x) * 3, col[c], 3);
        fprintf(lab, "%d %.6f %.6f %.6f %.6f\n", c, (x0 + rw / 2.0) / W, (y0 + rh / 2.0) / H, (double)rw / W,
                (double)rh / H);
    }
    fclose(lab);
    snprintf(path, sizeof path, "%s/images/im%03d.ppm", dir, k);
    FILE *img = fopen(path, "wb");
    if (!img) { free(pix); return 0; }
    fprintf(img, "P6\n%d %d\n255\n", W, H);
    const int ok = fwrite(pix, 1, (size_t)W * H * 3, img) == (size_t)W * H * 3;
    fclose(img);
    free(pix);
    fprintf(list, "images/im%03d.ppm\n", k);
    return ok;
}

static char dir[4096] = "/tmp/detect_demo-XXXXXX";

/* Removes the demo's own set. */
static void remove_dataset(void) {
    char path[4200];
    for (int k = 0; k < 16; k++) {
        snprintf(path, sizeof path, "%s/images/im%03d.ppm", dir, k);
        unlink(path);
        snprintf(path, sizeof path, "%s/labels/im%03d.txt", dir, k);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/images", dir);
    rmdir(path);
    snprintf(path, sizeof path, "%s/labels", dir);
    rmdir(path);
    snprintf(path, sizeof path, "%s/train.txt", dir);
    unlink(path);
    rmdir(dir);
}

/* The demo's own set, in workdir (made if missing) or a temporary folder. */
static int make_dataset(const char *workdir, char *list_path, size_t cap) {
    char sub[4200];
    if (workdir) {
        snprintf(dir, sizeof dir, "%s", workdir);
        mkdir(dir, 0755);
    } else if (!mkdtemp(dir)) {
        return 0;
    }
    snprintf(sub, sizeof sub, "%s/images", dir);
    mkdir(sub, 0755);
    snprintf(sub, sizeof sub, "%s/labels", dir);
    mkdir(sub, 0755);
    snprintf(list_path, cap, "%s/train.txt", dir);
    FILE *list = fopen(list_path, "w");
    if (!list) return 0;
    int ok = 1;
    for (int k = 0; k < 16 && ok; k++) ok = write_item(dir, k, list);
    fclose(list);
    printf("wrote 16 images and their labels under %s\n", dir);
    return ok;
}

/* Prints `batches` batches of boxes; returns 0 when every box lies in the
 * output image with a positive size, 1 otherwise or on an error. */
static int run(const char *data, int size, int batches, int eval) {
    coordl_config cfg = coordl_config_default();
    cfg.source = data;
    cfg.labels = COORDL_LABELS_BOXES;
    cfg.max_boxes = 16;
    cfg.out_w = cfg.out_h = (uint32_t)size;
    cfg.batch_size = 4;
    cfg.pipeline = eval ? COORDL_PIPE_EVAL : COORDL_PIPE_TRAIN;
    cfg.train_crop = COORDL_CROP_DARKNET_BOXES;
    cfg.jitter = 0.3f; /* yolov3-tiny.cfg's [yolo] jitter */
    cfg.hue = 0.1f;
    cfg.saturation = 1.5f;
    cfg.exposure = 1.5f;
    cfg.layout = COORDL_F32_NCHW;
    cfg.mean[0] = cfg.mean[1] = cfg.mean[2] = 0.0f; /* Darknet's pixels: 0..1 */
    cfg.std[0] = cfg.std[1] = cfg.std[2] = 1.0f;
    coordl *L = NULL;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "detect_demo: %s\n", coordl_errmsg(NULL));
        return 1;
    }
    int bad = 0;
    for (int i = 0; i < batches; i++) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) { i--; continue; }
        if (rc != COORDL_OK) {
            fprintf(stderr, "detect_demo: %s: %s\n", coordl_strerror(rc), coordl_errmsg(L));
            coordl_close(L);
            return 1;
        }
        for (uint32_t r = 0; r < b.n; r++) {
            printf("batch %llu row %u: %s, %u boxes\n", (unsigned long long)b.index, r, coordl_item_path(L, b.ids[r]),
                   b.nboxes[r]);
            for (uint32_t k = 0; k < b.nboxes[r]; k++) {
                const float *x = b.boxes + ((size_t)r * cfg.max_boxes + k) * 5;
                const float l = (x[0] - x[2] / 2) * b.w, t = (x[1] - x[3] / 2) * b.h;
                printf("  class %d: x %.1f..%.1f y %.1f..%.1f (of %ux%u)\n", (int)x[4], l, l + x[2] * b.w, t,
                       t + x[3] * b.h, b.w, b.h);
                if (!(x[2] > 0 && x[3] > 0 && x[0] - x[2] / 2 >= -1e-4f && x[0] + x[2] / 2 <= 1.0001f &&
                      x[1] - x[3] / 2 >= -1e-4f && x[1] + x[3] / 2 <= 1.0001f))
                    bad = 1;
            }
        }
        coordl_release(L, &b);
    }
    coordl_close(L);
    if (bad) fprintf(stderr, "detect_demo: a box lies outside the output image\n");
    return bad;
}

int main(int argc, char **argv) {
    const char *data = NULL, *workdir = NULL;
    int size = 416, batches = 2, eval = 0, check = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) data = argv[++i];
        else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) size = atoi(argv[++i]);
        else if (strcmp(argv[i], "--batches") == 0 && i + 1 < argc) batches = atoi(argv[++i]);
        else if (strcmp(argv[i], "--eval") == 0) eval = 1;
        else if (strcmp(argv[i], "--check") == 0) check = 1;
        else if (strcmp(argv[i], "--workdir") == 0 && i + 1 < argc) workdir = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--data LIST] [--size 416] [--batches 2] [--eval] [--check] [--workdir DIR]\n", argv[0]);
            return 2;
        }
    }
    if (size < 32 || size > 4096 || batches < 1) {
        fprintf(stderr, "detect_demo: --size 32..4096, --batches >= 1\n");
        return 2;
    }
    char list[4200];
    const int own = data == NULL;
    if (own) {
        if (!make_dataset(workdir, list, sizeof list)) {
            fprintf(stderr, "detect_demo: cannot write the demo's dataset\n");
            return 1;
        }
        data = list;
    }
    int rc;
    if (check) {
        rc = run(data, 128, 2, 0);
        if (rc == 0) rc = run(data, 128, 1, 1);
        if (rc == 0) printf("detect_demo: OK: every box lies inside its row, train and eval geometry\n");
    } else {
        rc = run(data, size, batches, eval);
    }
    if (own && check) remove_dataset();
    return rc;
}
