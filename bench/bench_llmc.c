/*
 * bench_llmc.c - the trainer's time inside the data loader per step:
 * coordl (token_order = COORDL_TOKENS_LLMC, coordl_next_into) against
 * llm.c's own DataLoader (llmc/dataloader.h), on the same shards, with a
 * trainer step of OpenMP threads running between loader calls.
 *
 *   bench_llmc [--dir DIR] [--steps 2000] [--B 4] [--T 64] [--step-us 2000]
 *              [--omp 2] [--rounds 2] [--threads 0] [--prefetch 16]
 *
 * coordl is configured as docs/integrations.md's llm.c section shows it: token_order
 * LLMC, shuffle off, threads 0 (one worker for tokens), prefetch_batches 16.
 *
 * The llm.c side exists when built with -DBENCH_WITH_LLMC and the include
 * path of an llm.c checkout (bench/run.sh llmc does that, from a checkout
 * it clones at bench time: llm.c's code is never part of this repository);
 * without it only coordl is measured and the table says so.
 *
 * Every step: the loader call (timed: the whole call, as the trainer sees
 * it), then the trainer step: --omp OpenMP threads busy for --step-us
 * microseconds summing the batch's tokens into a float array (llm.c's
 * train_gpt2 runs its layers in OpenMP parallel loops the same way; libgomp
 * threads then spin-wait briefly between regions, competing with loader
 * threads for the cores). The two loaders run in alternating rounds
 * (llm.c, coordl, llm.c, coordl, ...) on the same shards, already in the
 * page cache; with shuffle off they must hand out the same batches, which
 * is checked on the first round.
 *
 * Prints per loader: mean, median, p99 and max time inside the loader per
 * step (microseconds, over all rounds), and for coordl the stall_ns it
 * reports against the time measured around its calls. Then the targets:
 * coordl mean < 50 us and p99 < 0.5 ms.
 */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "coordl.h"
#ifdef BENCH_WITH_LLMC
#include "llmc/dataloader.h"
#endif

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    double mean, p50, p99, max, total;
    long over_1ms;     /* steps that spent more than 1 ms inside the loader */
    double over_1ms_us; /* and the time they spent there                   */
} summary;

static summary summarize(double *v, size_t n)
{
    summary s = {0, 0, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        s.total += v[i];
        if (v[i] > 1000) { s.over_1ms++; s.over_1ms_us += v[i]; }
    }
    qsort(v, n, sizeof *v, cmp_double);
    s.mean = s.total / (double)n;
    s.p50 = v[n / 2];
    s.p99 = v[(size_t)((double)(n - 1) * 0.99)];
    s.max = v[n - 1];
    return s;
}

/* llm.c's shard format: 256 int32 header (magic 20240520, version 1, token
 * count), then uint16 tokens; sizes not multiples of B*T+1. */
static void write_shards(const char *dir, int nshards)
{
    char path[4096];
    for (int s = 0; s < nshards; s++) {
        snprintf(path, sizeof path, "%s/bench_%02d.bin", dir, s);
        size_t ntok = 150001 + (size_t)s * 20011;
        FILE *f = fopen(path, "wb");
        if (!f) { perror(path); exit(1); }
        int32_t h[256] = {0};
        h[0] = 20240520; h[1] = 1; h[2] = (int32_t)ntok;
        fwrite(h, sizeof h, 1, f);
        uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(s + 1);
        for (size_t p = 0; p < ntok; p++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            uint16_t t = (uint16_t)(x % 50257);
            fwrite(&t, 2, 1, f);
        }
        if (fclose(f) != 0) { perror(path); exit(1); }
    }
}

/* The trainer's step: nthreads OpenMP threads busy for step_us. */
static float g_sink;
static void trainer_step(const int *inputs, size_t n, double step_us, int nthreads)
{
    double end = now_us() + step_us;
    float acc = 0.0f;
#pragma omp parallel num_threads(nthreads) reduction(+ : acc)
    {
        float local = 0.0f;
        int tid = omp_get_thread_num();
        while (now_us() < end)
            for (size_t i = (size_t)tid; i < n; i += (size_t)nthreads) local += sinf((float)inputs[i]);
        acc += local;
    }
    g_sink += acc;
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    int steps = 2000, B = 4, T = 64, omp = 2, rounds = 2, threads = 0, prefetch = 16;
    double step_us = 2000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { fprintf(stderr, "bench_llmc: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--dir")) dir = v;
        else if (!strcmp(a, "--steps")) steps = atoi(v);
        else if (!strcmp(a, "--B")) B = atoi(v);
        else if (!strcmp(a, "--T")) T = atoi(v);
        else if (!strcmp(a, "--step-us")) step_us = atof(v);
        else if (!strcmp(a, "--omp")) omp = atoi(v);
        else if (!strcmp(a, "--rounds")) rounds = atoi(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--prefetch")) prefetch = atoi(v);
        else { fprintf(stderr, "bench_llmc: unknown option %s\n", a); return 2; }
        i++;
    }
    if (steps < 100 || B < 1 || T < 1 || omp < 1 || rounds < 1) { fprintf(stderr, "bench_llmc: bad arguments\n"); return 2; }
    char tmp[] = "/tmp/bench-llmc-XXXXXX";
    if (!dir) {
        if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
        dir = tmp;
    }
    const int nshards = 4;
    write_shards(dir, nshards);
    char pattern[4096];
    snprintf(pattern, sizeof pattern, "%s/bench_*.bin", dir);

    const size_t bt = (size_t)B * T, bytes = bt * sizeof(int);
    int *in = malloc(bytes), *tg = malloc(bytes), *ref_in = malloc(bytes);
    double *t_coordl = malloc(sizeof(double) * (size_t)steps * rounds);
    double *t_llmc = malloc(sizeof(double) * (size_t)steps * rounds);
    if (!in || !tg || !ref_in || !t_coordl || !t_llmc) return 1;
    double coordl_measured_us = 0, coordl_stall_us = 0;
    long mismatches = 0;
    int have_llmc = 0;

    for (int r = 0; r < rounds; r++) {
#ifdef BENCH_WITH_LLMC
        have_llmc = 1;
        {
            DataLoader dl;
            dataloader_init(&dl, pattern, (size_t)B, (size_t)T, 0, 1, 0);
            for (int k = 0; k < steps; k++) {
                double t0 = now_us();
                dataloader_next_batch(&dl);
                t_llmc[(size_t)r * steps + k] = now_us() - t0;
                trainer_step(dl.inputs, bt, step_us, omp);
            }
            dataloader_free(&dl);
        }
#endif
        coordl_config cfg = coordl_config_default();
        cfg.source = pattern;
        cfg.pipeline = COORDL_PIPE_TOKENS;
        cfg.token_order = COORDL_TOKENS_LLMC;
        cfg.seq_len = (uint32_t)T;
        cfg.batch_size = (uint32_t)B;
        cfg.shuffle = 0;
        cfg.threads = threads;
        if (prefetch > 0) cfg.prefetch_batches = (uint32_t)prefetch;
        coordl *L;
        if (coordl_open(&cfg, &L) != COORDL_OK) {
            fprintf(stderr, "bench_llmc: coordl_open: %s\n", coordl_errmsg(NULL));
            return 1;
        }
#ifdef BENCH_WITH_LLMC
        DataLoader check; /* the same batches, checked on the first round */
        if (r == 0) dataloader_init(&check, pattern, (size_t)B, (size_t)T, 0, 1, 0);
#endif
        coordl_stats s0, s1;
        coordl_get_stats(L, &s0);
        double measured = 0;
        for (int k = 0; k < steps; k++) {
            double t0 = now_us();
            coordl_status rc = coordl_next_into(L, in, bytes, tg, bytes);
            if (rc == COORDL_END_OF_EPOCH) rc = coordl_next_into(L, in, bytes, tg, bytes);
            double dt = now_us() - t0;
            if (rc != COORDL_OK) {
                fprintf(stderr, "bench_llmc: coordl_next_into: %s\n", coordl_errmsg(L));
                return 1;
            }
            t_coordl[(size_t)r * steps + k] = dt;
            measured += dt;
#ifdef BENCH_WITH_LLMC
            if (r == 0) {
                dataloader_next_batch(&check);
                mismatches += memcmp(in, check.inputs, bytes) != 0 || memcmp(tg, check.targets, bytes) != 0;
            }
#endif
            trainer_step(in, bt, step_us, omp);
        }
        coordl_get_stats(L, &s1);
        coordl_measured_us += measured;
        coordl_stall_us += (double)(s1.stall_ns - s0.stall_ns) / 1e3;
#ifdef BENCH_WITH_LLMC
        if (r == 0) dataloader_free(&check);
#endif
        coordl_close(L);
    }
    const size_t n = (size_t)steps * rounds;
    summary c = summarize(t_coordl, n);
    printf("bench_llmc: B=%d T=%d, %d steps x %d rounds, trainer step %.0f us on %d OpenMP threads, "
           "%d shards of unaligned size, coordl threads=%d (0: default, 1 for tokens), prefetch_batches=%d\n",
           B, T, steps, rounds, step_us, omp, nshards, threads, prefetch);
    printf("%-34s %10s %10s %10s %10s %16s\n", "time inside the loader per step", "mean us", "p50 us", "p99 us",
           "max us", "steps > 1 ms");
    summary l = {0, 0, 0, 0, 0, 0, 0};
    if (have_llmc) {
        l = summarize(t_llmc, n);
        printf("%-34s %10.1f %10.1f %10.1f %10.1f %6ld (%5.1f ms)\n", "llm.c dataloader_next_batch", l.mean, l.p50,
               l.p99, l.max, l.over_1ms, l.over_1ms_us / 1e3);
    } else {
        printf("%-34s   (not built: bench/run.sh llmc compiles llm.c's dataloader.h from a checkout)\n",
               "llm.c dataloader_next_batch");
    }
    printf("%-34s %10.1f %10.1f %10.1f %10.1f %6ld (%5.1f ms)\n", "coordl coordl_next_into (LLMC)", c.mean, c.p50,
           c.p99, c.max, c.over_1ms, c.over_1ms_us / 1e3);
    if (have_llmc)
        printf("coordl / llm.c: mean %.2fx, p99 %.2fx; batches compared on round 1: %d, differing: %ld\n",
               c.mean / l.mean, c.p99 / l.p99, steps, mismatches);
    printf("coordl stall_ns: %.0f us reported vs %.0f us measured around its calls (%.0f%%)\n", coordl_stall_us,
           coordl_measured_us, coordl_measured_us > 0 ? 100.0 * coordl_stall_us / coordl_measured_us : 0.0);
    printf("targets: mean < 50 us: %s (%.1f us); p99 < 500 us: %s (%.1f us)\n", c.mean < 50 ? "met" : "NOT met",
           c.mean, c.p99 < 500 ? "met" : "NOT met", c.p99);
    if (dir == tmp) {
        char path[4096];
        for (int s = 0; s < nshards; s++) {
            snprintf(path, sizeof path, "%s/bench_%02d.bin", dir, s);
            unlink(path);
        }
        rmdir(dir);
    }
    free(in); free(tg); free(ref_in); free(t_coordl); free(t_llmc);
    return mismatches != 0;
}
