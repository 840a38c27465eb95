/*
 * bench_prep - image-prep throughput with everything in memory.
 *
 *   bench_prep --data DIR [--images 2560] [--rounds 3] [--batch 64]
 *              [--only train1,train2,eval,floor]
 *
 * Cases (each measured over --images images, --rounds times, alternating
 * case by case within a round so that a noisy neighbour hits them all):
 *   train1  coordl COORDL_PIPE_TRAIN, 224x224 F32_NCHW, flip, 1 thread
 *   trainN  the same with threads = all usable cores
 *   eval1   coordl COORDL_PIPE_EVAL, 224, 1 thread
 *   floor   libjpeg-turbo alone: a full decode to RGB of each file, one
 *           decompressor and one output buffer reused, files read into memory
 *           first, 1 thread (the decode floor most loaders sit above)
 *
 * coordl handles get cache_bytes > dataset bytes and run one whole warm-up
 * epoch first, so every item is served from the cache. The consumer only
 * calls coordl_next + coordl_release and touches one byte of each batch.
 * Before each timed run the batches that were prepared while the handle sat
 * idle are drained untimed, so the figure is the workers' production rate,
 * and after it the handle is left to refill its ring and go idle, so that
 * its workers do not run during the next case.
 *
 * Prints a table (median, min, max images/s; per core = median / threads;
 * CPU = process CPU seconds / wall seconds during the timed part, which shows
 * whether idle handles or waiting threads burn CPU) and one line per case:
 *   RESULT <case> <threads> <median img/s> <min> <max> <per-core>
 * for bench/run.sh.
 *
 * With BENCH_PERF_CTL=<fifo> set (perf record --control fifo:<fifo> -D -1),
 * perf is enabled only around the timed runs.
 */
#include <stdio.h>

#include <jpeglib.h> /* after stdio.h */

#define BENCH_PROG "bench_prep"
#include "bench_common.h"
#include "bench_floor.h"

enum { CASE_TRAIN1, CASE_TRAINN, CASE_EVAL1, CASE_FLOOR, NCASES };
static const char *case_name[NCASES] = {"train1", "trainN", "eval1", "floor"};

typedef struct {
    int on;
    int threads;
    coordl *L;
    uint32_t prefetch;
    double *rate; /* per round */
    double cpu_frac_sum;
    double med, mn, mx; /* over the rounds */
    coordl_stats before, after; /* around the timed parts, summed */
    uint64_t d_items, d_read_ns, d_decode_ns, d_augment_ns, d_hits,
        d_misses, d_stall_ns;
} bench_case;

/* ---- coordl cases ------------------------------------------------------ */

static coordl *open_case(const char *data, coordl_pipeline pipe, int threads,
                         uint32_t batch, uint64_t cache_bytes)
{
    coordl_config cfg = train_config(data, threads, batch, cache_bytes);
    cfg.pipeline = pipe;
    /* the ROI path, whatever the idle rounds would convert: random access
     * has its own part (bench_jpeg) */
    cfg.jpeg_random_access = 0;
    return open_or_exit(&cfg);
}

static void warm_up(bench_case *bc, const char *name)
{
    double t0 = now_s();
    uint64_t seen = consume(bc->L, UINT64_MAX, 1);
    coordl_stats st;
    coordl_get_stats(bc->L, &st);
    printf("  warm-up %-7s %llu images in %.1f s; cache holds %llu of %llu items "
           "(%.0f of %.0f MB), %u threads\n",
           name, (unsigned long long)seen, now_s() - t0, (unsigned long long)st.cache_items,
           (unsigned long long)coordl_num_items(bc->L), st.cache_bytes_used / 1e6,
           st.dataset_bytes / 1e6, st.threads);
    if (st.cache_items < coordl_num_items(bc->L))
        printf("  WARNING: %s: not every item is cached; timed runs will read storage\n",
               name);
    if (st.threads && (int)st.threads != bc->threads) {
        printf("  note: %s asked for %d threads, runs %u\n", name, bc->threads, st.threads);
        bc->threads = (int)st.threads;
    }
}

static double measure_coordl(bench_case *bc, uint64_t images, double *cpu_frac)
{
    /* batches prepared while the handle sat idle come out untimed */
    consume(bc->L, (uint64_t)bc->prefetch, 0);
    coordl_stats s0, s1;
    coordl_get_stats(bc->L, &s0);
    perf_enable(1);
    double c0 = cpu_s(), t0 = now_s();
    uint64_t seen = consume(bc->L, images, 0);
    double t1 = now_s(), c1 = cpu_s();
    perf_enable(0);
    coordl_get_stats(bc->L, &s1);
    bc->d_items += s1.items - s0.items;
    bc->d_read_ns += s1.read_ns - s0.read_ns;
    bc->d_decode_ns += s1.decode_ns - s0.decode_ns;
    bc->d_augment_ns += s1.augment_ns - s0.augment_ns;
    bc->d_hits += s1.cache_hits - s0.cache_hits;
    bc->d_misses += s1.cache_misses - s0.cache_misses;
    bc->d_stall_ns += s1.stall_ns - s0.stall_ns;
    *cpu_frac = (c1 - c0) / (t1 - t0);
    settle(bc->L);
    return (double)seen / (t1 - t0);
}

/* ---- the decode floor (bench_floor.h) ---------------------------------- */

static double measure_floor(floor_state *fs, uint64_t images, double *cpu_frac)
{
    double c0 = cpu_s(), t0 = now_s();
    for (uint64_t k = 0; k < images; k++) floor_decode_one(fs);
    double t1 = now_s(), c1 = cpu_s();
    *cpu_frac = (c1 - c0) / (t1 - t0);
    return (double)images / (t1 - t0);
}

/* ---- main -------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: bench_prep --data DIR [--images 2560] [--rounds 3] [--batch 64]\n"
                    "                  [--only train1,trainN,eval1,floor]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *data = NULL, *only = NULL;
    uint64_t images = 2560;
    int rounds = 3;
    uint32_t batch = 64;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        const char *a = argv[i], *v = argv[++i];
        if (strcmp(a, "--data") == 0) data = v;
        else if (strcmp(a, "--images") == 0) images = strtoull(v, NULL, 10);
        else if (strcmp(a, "--rounds") == 0) rounds = atoi(v);
        else if (strcmp(a, "--batch") == 0) batch = (uint32_t)atoi(v);
        else if (strcmp(a, "--only") == 0) only = v;
        else usage();
    }
    if (!data || images == 0 || rounds <= 0 || batch == 0) usage();
    perf_ctl_open();

    file_list fl;
    if (list_image_folder(data, &fl) != 0 || fl.n == 0) {
        fprintf(stderr, "bench_prep: no files under %s\n", data);
        return 1;
    }
    int cores = usable_cores();
    bench_case bc[NCASES];
    memset(bc, 0, sizeof bc);
    for (int c = 0; c < NCASES; c++) {
        bc[c].on = !only || strstr(only, case_name[c]) != NULL;
        bc[c].threads = c == CASE_TRAINN ? cores : 1;
        bc[c].rate = xmalloc((size_t)rounds * sizeof(double));
    }
    printf("bench_prep: %zu files, %.1f MB, %d usable cores, batch %u, %llu images per "
           "timed run, %d rounds\n",
           fl.n, fl.total_bytes / 1e6, cores, batch, (unsigned long long)images, rounds);

    /* a little slack over the dataset so that every item fits */
    uint64_t cache_bytes = fl.total_bytes + fl.total_bytes / 8 + ((uint64_t)64 << 20);
    for (int c = 0; c < CASE_FLOOR; c++) {
        if (!bc[c].on) continue;
        bc[c].L = open_case(data, c == CASE_EVAL1 ? COORDL_PIPE_EVAL : COORDL_PIPE_TRAIN,
                            bc[c].threads, batch, cache_bytes);
        bc[c].prefetch = coordl_config_default().prefetch_batches * batch;
        warm_up(&bc[c], case_name[c]);
        settle(bc[c].L);
    }
    floor_state fs;
    if (bc[CASE_FLOOR].on) floor_init(&fs, &fl);

    for (int r = 0; r < rounds; r++) {
        printf("  round %d:", r + 1);
        for (int c = 0; c < NCASES; c++) {
            if (!bc[c].on) continue;
            double cf;
            bc[c].rate[r] = c == CASE_FLOOR ? measure_floor(&fs, images, &cf)
                                            : measure_coordl(&bc[c], images, &cf);
            bc[c].cpu_frac_sum += cf;
            printf("  %s %.1f img/s (cpu %.2f)", case_name[c], bc[c].rate[r], cf);
            fflush(stdout);
        }
        printf("\n");
    }

    printf("\n%-8s %7s %10s %10s %10s %12s %6s\n", "case", "threads", "median/s", "min/s",
           "max/s", "per-core/s", "cpu");
    for (int c = 0; c < NCASES; c++) {
        if (!bc[c].on) continue;
        bench_case *b = &bc[c];
        b->med = median(b->rate, (size_t)rounds); /* sorts the rates */
        b->mn = b->rate[0];
        b->mx = b->rate[rounds - 1];
        printf("%-8s %7d %10.1f %10.1f %10.1f %12.1f %6.2f\n", case_name[c], b->threads,
               b->med, b->mn, b->mx, b->med / b->threads, b->cpu_frac_sum / rounds);
    }
    printf("\nworker time per item in the timed runs (us, summed over threads):\n");
    printf("%-8s %8s %8s %8s %14s %8s\n", "case", "read", "decode", "augment",
           "consumer-stall", "hit%");
    for (int c = 0; c < CASE_FLOOR; c++) {
        if (!bc[c].on || bc[c].d_items == 0) continue;
        double n = (double)bc[c].d_items;
        uint64_t fetches = bc[c].d_hits + bc[c].d_misses;
        printf("%-8s %8.1f %8.1f %8.1f %14.1f %8.1f\n", case_name[c],
               bc[c].d_read_ns / n / 1e3, bc[c].d_decode_ns / n / 1e3,
               bc[c].d_augment_ns / n / 1e3, bc[c].d_stall_ns / n / 1e3,
               fetches ? 100.0 * (double)bc[c].d_hits / (double)fetches : 0.0);
    }
    printf("\n");
    for (int c = 0; c < NCASES; c++) {
        if (!bc[c].on) continue;
        printf("RESULT %s %d %.1f %.1f %.1f %.1f\n", case_name[c], bc[c].threads,
               bc[c].med, bc[c].mn, bc[c].mx, bc[c].med / bc[c].threads);
    }

    for (int c = 0; c < NCASES; c++) {
        coordl_close(bc[c].L);
        free(bc[c].rate);
    }
    if (bc[CASE_FLOOR].on) floor_free(&fs);
    free_file_list(&fl);
    perf_ctl_close();
    return 0;
}
