/*
 * bench_darknet.c - Darknet's classifier loader alone against coordl alone,
 * with Darknet's augmentation, on the same images: images/s (per core with
 * one thread each) and the process's peak resident memory.
 *
 *   bench_darknet --loader darknet|coordl --list FILE --labels FILE
 *                 [--threads 1] [--batches 20] [--batch 64] [--size 256]
 *                 [--min-crop 128] [--max-crop 448] [--random 0]
 *
 * One loader per process, so the peak resident set (VmHWM) is that
 * loader's. The augmentation is the stock classifier cfgs' (darknet19,
 * darknet53, resnet50: 256 x 256, min_crop 128, max_crop 448, angle 7,
 * aspect .75, hue .1, saturation .75, exposure .75).
 *   darknet: train_classifier's load_args (CLASSIFICATION_DATA, n = batch,
 *     args.threads = --threads), pthread_join, then load_data of the next
 *     batch before the current one is used and freed, as its training loop
 *     does (two batches alive: the peak memory train_classifier has). Needs -DBENCH_WITH_DARKNET
 *     and Darknet's include/ and libdarknet.a (bench/run.sh darknet builds
 *     them from a checkout at bench time; Darknet's code is not part of this
 *     repository).
 *   coordl: examples/darknet/coordl_darknet.h: coordl_dn_config from the
 *     same [net] values (Darknet's crop, rand_scale semantics), --threads
 *     workers, coordl_dn_load (shallow) + coordl_dn_free per batch, no cache
 *     (the files are in the page cache for both).
 * The first batch is not timed. Prints one line: RESULT loader threads
 * images seconds images_per_s peak_rss_kb.
 */
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static long peak_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kb = atol(line + 6);
    if (f) fclose(f);
    return kb;
}

static char **read_lines(const char *path, int *n)
{
    FILE *f = fopen(path, "r");
    if (!f) { perror(path); exit(1); }
    char **v = NULL, line[4096];
    int cap = 0;
    *n = 0;
    while (fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (!len) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 1024;
            v = realloc(v, sizeof *v * (size_t)cap);
            if (!v) exit(1);
        }
        v[(*n)++] = strdup(line);
    }
    fclose(f);
    return v;
}

int main(int argc, char **argv)
{
    const char *loader = NULL, *list = NULL, *labels_path = NULL;
    int threads = 1, batches = 20, batch = 64, size = 256, min_crop = 128, max_crop = 448, random = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--loader")) loader = v;
        else if (!strcmp(a, "--list")) list = v;
        else if (!strcmp(a, "--labels")) labels_path = v;
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--batches")) batches = atoi(v);
        else if (!strcmp(a, "--batch")) batch = atoi(v);
        else if (!strcmp(a, "--size")) size = atoi(v);
        else if (!strcmp(a, "--min-crop")) min_crop = atoi(v);
        else if (!strcmp(a, "--max-crop")) max_crop = atoi(v);
        else if (!strcmp(a, "--random")) random = atoi(v);
        else { fprintf(stderr, "bench_darknet: unknown option %s\n", a); return 2; }
    }
    if (!loader || !list || !labels_path || threads < 1 || batches < 2) {
        fprintf(stderr, "usage: bench_darknet --loader darknet|coordl --list FILE --labels FILE [...]\n");
        return 2;
    }
    int npaths, classes;
    char **paths = read_lines(list, &npaths);
    char **labels = read_lines(labels_path, &classes);
    double t0 = 0, t1 = 0;
    long images = 0;

    if (!strcmp(loader, "darknet")) {
#ifdef BENCH_WITH_DARKNET
        load_args args = {0};
        args.w = args.h = args.size = size;
        args.threads = threads;
        args.min = min_crop;
        args.max = max_crop;
        args.angle = 7;
        args.aspect = .75f;
        args.hue = .1f;
        args.saturation = args.exposure = .75f;
        args.paths = paths;
        args.classes = classes;
        args.n = batch;
        args.m = npaths;
        args.labels = labels;
        args.type = CLASSIFICATION_DATA;
        data buffer, train;
        args.d = &buffer;
        /* train_classifier's loop: the next batch loads while the current
         * one is in use, so two batches are alive at a time */
        pthread_t th = load_data(args);
        for (int k = 0; k <= batches; k++) {
            if (k == 1) t0 = now_s();
            pthread_join(th, 0);
            train = buffer;
            if (k < batches) th = load_data(args);
            if (k >= 1) images += train.X.rows;
            free_data(train);
        }
        t1 = now_s();
#else
        fprintf(stderr, "bench_darknet: built without Darknet (-DBENCH_WITH_DARKNET)\n");
        return 2;
#endif
    } else if (!strcmp(loader, "coordl")) {
        char coordl_list[] = "/tmp/bench-darknet-list-XXXXXX";
        int fd = mkstemp(coordl_list);
        if (fd < 0) { perror("mkstemp"); return 1; }
        close(fd);
        if (coordl_dn_write_list(coordl_list, paths, npaths, labels, classes, NULL, NULL) < 0) return 1;
        coordl_config cfg = coordl_config_default();
        coordl_dn_net n;
        memset(&n, 0, sizeof n);
        n.w = n.h = size;
        n.batch = batch;
        n.subdivisions = 1;
        n.min_ratio = (float)min_crop / size;
        n.max_ratio = (float)max_crop / size;
        n.angle = 7;
        n.aspect = .75f;
        n.hue = .1f;
        n.saturation = n.exposure = .75f;
        n.random = random;
        if (coordl_dn_config(&cfg, &n) != COORDL_OK) return 1;
        cfg.source = coordl_list;
        cfg.threads = threads;
        coordl_dn dn;
        if (coordl_dn_open(&dn, &cfg) != COORDL_OK) {
            fprintf(stderr, "bench_darknet: %s\n", coordl_dn_errmsg(&dn));
            return 1;
        }
        data d;
        for (int k = 0; k <= batches; k++) {
            if (k == 1) t0 = now_s();
            if (coordl_dn_load(&dn, classes, &d, COORDL_DN_SHALLOW) != COORDL_OK) return 1;
            if (k >= 1) images += d.X.rows;
            coordl_dn_free(&d);
        }
        t1 = now_s();
        coordl_dn_close(&dn);
        unlink(coordl_list);
    } else {
        fprintf(stderr, "bench_darknet: --loader darknet or coordl\n");
        return 2;
    }
    printf("RESULT %s %d %ld %.3f %.1f %ld\n", loader, threads, images, t1 - t0, images / (t1 - t0), peak_rss_kb());
    return 0;
}
