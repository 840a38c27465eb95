/*
 * bench_detect.c - detection batches with Darknet's geometry: Darknet's own
 * load_data_detection against coordl (COORDL_CROP_DARKNET_BOXES through
 * examples/darknet/coordl_darknet.h), and coordl's SSD crop, on the same
 * images and YOLO label files: images/s with one thread each (per core).
 *
 *   bench_detect --loader darknet|coordl|coordl-ssd --list FILE
 *                [--threads 1] [--batches 20] [--batch 16] [--size 416]
 *
 * The list holds image paths under an images/ folder; each image's boxes
 * are in the matching labels/....txt (Darknet's layout). The augmentation
 * is yolov3's cfg: 416 x 416, jitter .3, hue .1, saturation 1.5, exposure
 * 1.5, 90 boxes at most.
 *   darknet: train_detector's load_args (DETECTION_DATA, n = batch,
 *     args.threads = --threads), pthread_join, then load_data of the next
 *     batch before the current one is used and freed, as its training loop
 *     does. Needs -DBENCH_WITH_DARKNET with Darknet's include/ and
 *     libdarknet.a (bench/run.sh detect builds them from a checkout at
 *     bench time; Darknet's code is not part of this repository).
 *   coordl: coordl_dn_config_detection from the same values, --threads
 *     workers, coordl_dn_load (shallow) + coordl_dn_free per batch, no
 *     cache (the files are in the page cache for both).
 *   coordl-ssd: the same with train_crop = COORDL_CROP_SSD.
 * The first batch is not timed. Prints one line: RESULT loader threads
 * images seconds images_per_s boxes_per_image.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef BENCH_WITH_DARKNET
#include "darknet.h"
#endif
#include "coordl.h"
#include "../examples/darknet/coordl_darknet.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char **read_lines(const char *path, int *n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(1);
    }
    char line[4096];
    int cap = 1024;
    char **v = malloc((size_t)cap * sizeof *v);
    *n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0]) continue;
        if (*n == cap) v = realloc(v, (size_t)(cap *= 2) * sizeof *v);
        v[(*n)++] = strdup(line);
    }
    fclose(f);
    return v;
}

/* Boxes in a batch's truth rows (entries with a non-zero width). */
static long count_boxes(const float *const *rows, int n, int cols)
{
    long k = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j + 5 <= cols; j += 5) k += rows[i][j + 2] > 0.0f;
    return k;
}

int main(int argc, char **argv)
{
    const char *loader = NULL, *list = NULL;
    int threads = 1, batches = 20, batch = 16, size = 416;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--loader")) loader = v;
        else if (!strcmp(a, "--list")) list = v;
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--batches")) batches = atoi(v);
        else if (!strcmp(a, "--batch")) batch = atoi(v);
        else if (!strcmp(a, "--size")) size = atoi(v);
        else { fprintf(stderr, "bench_detect: unknown option %s\n", a); return 2; }
    }
    if (!loader || !list || threads < 1 || batches < 2) {
        fprintf(stderr, "usage: bench_detect --loader darknet|coordl|coordl-ssd --list FILE [...]\n");
        return 2;
    }
    const int classes = 80, max_boxes = 90;
    const float jitter = .3f, hue = .1f, saturation = 1.5f, exposure = 1.5f;
    int npaths;
    char **paths = read_lines(list, &npaths);
    double t0 = 0, t1 = 0;
    long images = 0, boxes = 0;

    if (!strcmp(loader, "darknet")) {
#ifdef BENCH_WITH_DARKNET
        load_args args = {0};
        args.w = args.h = size;
        args.threads = threads;
        args.coords = 4;
        args.paths = paths;
        args.n = batch;
        args.m = npaths;
        args.classes = classes;
        args.jitter = jitter;
        args.num_boxes = max_boxes;
        args.hue = hue;
        args.saturation = saturation;
        args.exposure = exposure;
        args.type = DETECTION_DATA;
        data buffer, train;
        args.d = &buffer;
        pthread_t th = load_data(args);
        for (int k = 0; k <= batches; k++) {
            if (k == 1) t0 = now_s();
            pthread_join(th, 0);
            train = buffer;
            if (k < batches) th = load_data(args);
            if (k >= 1) {
                images += train.X.rows;
                boxes += count_boxes((const float *const *)train.y.vals, train.y.rows, train.y.cols);
            }
            free_data(train);
        }
        t1 = now_s();
#else
        fprintf(stderr, "bench_detect: built without Darknet (-DBENCH_WITH_DARKNET)\n");
        return 2;
#endif
    } else if (!strcmp(loader, "coordl") || !strcmp(loader, "coordl-ssd")) {
        char coordl_list[] = "/tmp/bench-detect-list-XXXXXX";
        int fd = mkstemp(coordl_list);
        if (fd < 0) {
            perror("mkstemp");
            return 1;
        }
        close(fd);
        if (coordl_dn_write_list(coordl_list, paths, npaths, NULL, 0, NULL, NULL) < 0) return 1;
        coordl_config cfg = coordl_config_default();
        coordl_dn_net n;
        memset(&n, 0, sizeof n);
        n.w = n.h = size;
        n.batch = batch;
        n.subdivisions = 1;
        n.hue = hue;
        n.saturation = saturation;
        n.exposure = exposure;
        if (coordl_dn_config_detection(&cfg, &n, jitter, max_boxes, classes) != COORDL_OK) return 1;
        if (!strcmp(loader, "coordl-ssd")) cfg.train_crop = COORDL_CROP_SSD;
        cfg.source = coordl_list;
        cfg.threads = threads;
        cfg.cache_bytes = 0;
        coordl_dn dn;
        if (coordl_dn_open(&dn, &cfg) != COORDL_OK) {
            fprintf(stderr, "bench_detect: %s\n", coordl_dn_errmsg(&dn));
            return 1;
        }
        data d;
        for (int k = 0; k <= batches; k++) {
            if (k == 1) t0 = now_s();
            if (coordl_dn_load(&dn, classes, &d, COORDL_DN_SHALLOW) != COORDL_OK) return 1;
            if (k >= 1) {
                images += d.X.rows;
                boxes += count_boxes((const float *const *)d.y.vals, d.y.rows, d.y.cols);
            }
            coordl_dn_free(&d);
        }
        t1 = now_s();
        coordl_dn_close(&dn);
        unlink(coordl_list);
    } else {
        fprintf(stderr, "bench_detect: --loader darknet, coordl or coordl-ssd\n");
        return 2;
    }
    printf("RESULT %s %d %ld %.3f %.1f %.2f\n", loader, threads, images, t1 - t0, images / (t1 - t0),
           images ? (double)boxes / images : 0.0);
    return 0;
}
