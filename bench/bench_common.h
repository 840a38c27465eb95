/*
 * bench_common.h - small helpers shared by the bench programs (header-only,
 * static functions; each program uses a subset): timing, the dataset's
 * files, medians, perf control, and opening, draining and settling coordl
 * handles.
 */
#ifndef COORDL_BENCH_COMMON_H
#define COORDL_BENCH_COMMON_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "coordl.h"

#if defined(__GNUC__) || defined(__clang__)
#define BENCH_UNUSED __attribute__((unused))
#else
#define BENCH_UNUSED
#endif

BENCH_UNUSED static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* User + system CPU seconds of the whole process (all threads). */
BENCH_UNUSED static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

BENCH_UNUSED static int usable_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

BENCH_UNUSED static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "bench: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

BENCH_UNUSED static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

/* An ImageFolder's files: root/<class>/<file>, both levels sorted by name. */
typedef struct {
    char **paths;
    uint64_t *sizes;
    size_t n, cap;
    uint64_t total_bytes;
} file_list;

static int bench_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the entries of dir (no dot entries); NULL on error. */
static char **sorted_names(const char *dir, size_t *count)
{
    DIR *d = opendir(dir);
    if (!d) return NULL;
    size_t n = 0, cap = 64;
    char **v = xmalloc(cap * sizeof *v);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap *= 2;
            char **nv = realloc(v, cap * sizeof *v);
            if (!nv) { fprintf(stderr, "bench: out of memory\n"); exit(1); }
            v = nv;
        }
        v[n++] = xstrdup(e->d_name);
    }
    closedir(d);
    qsort(v, n, sizeof *v, bench_cmp_str);
    *count = n;
    return v;
}

BENCH_UNUSED static int list_image_folder(const char *root, file_list *fl)
{
    memset(fl, 0, sizeof *fl);
    size_t nclasses;
    char **classes = sorted_names(root, &nclasses);
    if (!classes) return -1;
    for (size_t c = 0; c < nclasses; c++) {
        char cdir[4096];
        snprintf(cdir, sizeof cdir, "%s/%s", root, classes[c]);
        size_t nfiles;
        char **files = sorted_names(cdir, &nfiles);
        if (files) {
            for (size_t f = 0; f < nfiles; f++) {
                char p[8192];
                snprintf(p, sizeof p, "%s/%s", cdir, files[f]);
                struct stat st;
                if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
                    if (fl->n == fl->cap) {
                        fl->cap = fl->cap ? 2 * fl->cap : 1024;
                        fl->paths = realloc(fl->paths, fl->cap * sizeof *fl->paths);
                        fl->sizes = realloc(fl->sizes, fl->cap * sizeof *fl->sizes);
                        if (!fl->paths || !fl->sizes) {
                            fprintf(stderr, "bench: out of memory\n");
                            exit(1);
                        }
                    }
                    fl->paths[fl->n] = xstrdup(p);
                    fl->sizes[fl->n] = (uint64_t)st.st_size;
                    fl->total_bytes += (uint64_t)st.st_size;
                    fl->n++;
                }
                free(files[f]);
            }
            free(files);
        }
        free(classes[c]);
    }
    free(classes);
    return 0;
}

BENCH_UNUSED static void free_file_list(file_list *fl)
{
    for (size_t i = 0; i < fl->n; i++) free(fl->paths[i]);
    free(fl->paths);
    free(fl->sizes);
    memset(fl, 0, sizeof *fl);
}

/* Median of v[0..n) (sorts v). */
static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
BENCH_UNUSED static double median(double *v, size_t n)
{
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The process's resident set in bytes (/proc/self/statm), 0 if unreadable. */
BENCH_UNUSED static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
        fclose(f);
    }
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* ---- perf control ------------------------------------------------------- */

/* With BENCH_PERF_CTL=<fifo> set (perf record --control fifo:<fifo> -D -1),
 * perf_enable turns perf on and off around the timed parts. */
BENCH_UNUSED static FILE *perf_ctl;

BENCH_UNUSED static void perf_ctl_open(void)
{
    const char *ctl = getenv("BENCH_PERF_CTL");
    if (ctl && *ctl && !(perf_ctl = fopen(ctl, "w"))) perror(ctl);
}

BENCH_UNUSED static void perf_enable(int on)
{
    if (!perf_ctl) return;
    fputs(on ? "enable\n" : "disable\n", perf_ctl);
    fflush(perf_ctl);
}

BENCH_UNUSED static void perf_ctl_close(void)
{
    if (perf_ctl) fclose(perf_ctl);
    perf_ctl = NULL;
}

/* ---- coordl handles ------------------------------------------------------ */

/* BENCH_PROG (defined before including this header) starts the messages of
 * the helpers below that end the program. */
#ifndef BENCH_PROG
#define BENCH_PROG "bench"
#endif

/* Read by the consumers, so that the compiler keeps the reads. */
BENCH_UNUSED static volatile unsigned bench_sink;

/* The train pipeline the image benchmarks time: RandomResizedCrop 224 +
 * flip to F32 NCHW, seed 42. */
BENCH_UNUSED static coordl_config train_config(const char *data, int threads, uint32_t batch,
                                               uint64_t cache_bytes)
{
    coordl_config cfg = coordl_config_default();
    cfg.source = data;
    cfg.pipeline = COORDL_PIPE_TRAIN;
    cfg.batch_size = batch;
    cfg.out_w = cfg.out_h = 224;
    cfg.layout = COORDL_F32_NCHW;
    cfg.flip = 1;
    cfg.threads = threads;
    cfg.cache_bytes = cache_bytes;
    cfg.seed = 42;
    return cfg;
}

BENCH_UNUSED static coordl *open_or_exit(const coordl_config *cfg)
{
    coordl *L = NULL;
    coordl_status rc = coordl_open(cfg, &L);
    if (rc != COORDL_OK) {
        fprintf(stderr, BENCH_PROG ": coordl_open: %s: %s\n", coordl_strerror(rc), coordl_errmsg(NULL));
        exit(1);
    }
    return L;
}

/* Consumes whole batches, touching one byte of each, until `images` rows
 * have been seen; an end of epoch is passed over, or with stop_at_end ends
 * the run. Returns the rows seen. */
BENCH_UNUSED static uint64_t consume(coordl *L, uint64_t images, int stop_at_end)
{
    uint64_t seen = 0;
    while (seen < images) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) {
            if (stop_at_end) break;
            continue;
        }
        if (rc != COORDL_OK) {
            fprintf(stderr, BENCH_PROG ": coordl_next: %s: %s\n", coordl_strerror(rc), coordl_errmsg(L));
            exit(1);
        }
        bench_sink += ((const unsigned char *)b.data)[b.data_bytes / 2];
        seen += b.n;
        coordl_release(L, &b);
    }
    return seen;
}

/* Waits until the workers have refilled the ring and gone idle (no item
 * prepared for 100 ms), so that they do not run during the next case. */
BENCH_UNUSED static void settle(coordl *L)
{
    coordl_stats st;
    coordl_get_stats(L, &st);
    uint64_t items = st.items;
    for (;;) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        coordl_get_stats(L, &st);
        if (st.items == items) return;
        items = st.items;
    }
}

#endif
