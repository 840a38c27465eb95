/*
 * bench_jpeg - JPEG random access (cfg.jpeg_random_access): what rewriting
 * the cached JPEGs with restart markers buys, what it costs, and how the
 * cache converges. The train pipeline (RandomResizedCrop 224 + flip,
 * F32 NCHW, batch 64) with the whole dataset cached.
 *
 *   bench_jpeg --data DIR --threads N [--images 2560] [--rounds 3]
 *              [--max-epochs 40] [--after 2] [--budget B]
 *   bench_jpeg --data DIR --threads N --first-epoch [--off]
 *
 * Per epoch: a handle with random access on (jpeg_rewrite_budget B, default
 * the library's) runs epoch after epoch back to back, the consumer taking
 * batches as fast as they come (loader-bound: the workers never idle, so
 * every rewrite is paid from the budget); then a handle with it off runs 3
 * epochs the same way. One handle at a time: an idle handle's workers would
 * rewrite in its idle time and take the other's CPU. Prints images/s per
 * epoch, on against the off-handle's median from epoch 1, the share of the
 * items held rewritten at the end of each epoch and of the worker time that
 * went to rewrites in it; stops --after epochs after every cached JPEG is
 * rewritten (or at --max-epochs).
 *
 * Converted: the two handles and the libjpeg-turbo full-decode floor (one
 * decompressor, files in memory, 1 thread; only with --threads 1), --rounds
 * rounds of --images images each, the cases alternated within a round:
 * median images/s, per core, and the ratios on/off and on/floor. Then the
 * cache bytes of both handles.
 *
 * --first-epoch: one fresh handle with the defaults (--off: random access
 * off), the time from
 * coordl_open to the end of epoch 0 (items read from the page cache,
 * admitted, and with random access some rewritten). run.sh alternates this
 * with the same source built against the commit before random access
 * (-DBENCH_BASE: no random-access fields), for "first epoch >= 0.9x".
 *
 * RESULT lines for bench/run.sh:
 *   RESULT ra_epoch <threads> <epoch> <on img/s> <off img/s (median)> <rewritten %> <rewrite % of worker time>
 *   RESULT ra_conv <threads> <on img/s> <off img/s> <floor img/s or 0>
 *   RESULT ra_conv_cpu <threads> <on> <off> <floor>   (images per CPU-second)
 *   RESULT ra_cache <threads> <on cache_bytes_used> <on cache_item_bytes> <off cache_bytes_used> <epochs to convert>
 *   RESULT first_epoch[_off|_base] <threads> <img/s> <img per CPU-s>
 * With BENCH_PERF_CTL naming a perf control fifo, perf is enabled only
 * around the converted on-handle's timed runs (for the profile split).
 */
#include <stdio.h>

#include <jpeglib.h> /* after stdio.h */

#define BENCH_PROG "bench_jpeg"
#include "bench_common.h"
#include "bench_floor.h"

static coordl *open_handle(const char *data, int threads, uint64_t cache_bytes, int random_access,
                           float budget)
{
    coordl_config cfg = train_config(data, threads, 64, cache_bytes);
#ifndef BENCH_BASE
    cfg.jpeg_random_access = random_access;
    if (budget >= 0.0f) cfg.jpeg_rewrite_budget = budget;
#else
    (void)random_access;
    (void)budget;
#endif
    return open_or_exit(&cfg);
}

/* ---- the decode floor (bench_floor.h, as bench_prep's) ----------------- */

static double measure_floor(floor_state *fs, uint64_t images, double *per_cpu_s)
{
    double t0 = now_s(), c0 = cpu_s();
    for (uint64_t k = 0; k < images; k++) floor_decode_one(fs);
    *per_cpu_s = (double)images / (cpu_s() - c0);
    return (double)images / (now_s() - t0);
}

/* ---- first epoch ---------------------------------------------------------- */

static int first_epoch(const char *data, int threads, uint64_t cache_bytes, int random_access)
{
    double t0 = now_s(), c0 = cpu_s();
    coordl *L = open_handle(data, threads, cache_bytes, random_access, -1.0f);
    uint64_t seen = consume(L, UINT64_MAX, 1);
    double t1 = now_s(), c1 = cpu_s();
    coordl_stats st;
    coordl_get_stats(L, &st);
#ifndef BENCH_BASE
    printf("  first epoch (random access %s): %llu images in %.2f s, %llu rewritten\n", random_access ? "on" : "off",
           (unsigned long long)seen, t1 - t0, (unsigned long long)st.jpeg_rewrites);
#else
    printf("  first epoch (base): %llu images in %.2f s\n", (unsigned long long)seen, t1 - t0);
#endif
#ifndef BENCH_BASE
    const char *name = random_access ? "first_epoch" : "first_epoch_off";
#else
    const char *name = "first_epoch_base";
#endif
    printf("RESULT %s %d %.1f %.1f\n", name, threads, (double)seen / (t1 - t0), (double)seen / (c1 - c0));
    coordl_close(L);
    return 0;
}

/* ---- per epoch, and converted ---------------------------------------------- */

#ifndef BENCH_BASE
typedef struct {
    coordl *L;
    const char *name;
    coordl_stats st;
} handle;

/* Runs one epoch back to back from where the consumer is: images/s from
 * the first batch to the epoch's end (the ring's first batches were
 * prepared before, as in training). */
static double run_epoch(handle *h)
{
    const double t0 = now_s();
    const uint64_t seen = consume(h->L, UINT64_MAX, 1);
    const double rate = (double)seen / (now_s() - t0);
    coordl_get_stats(h->L, &h->st);
    return rate;
}

/* images/s, and images per CPU-second of the process (its idle threads
 * and the blocked consumer take next to none): per core, whatever other
 * jobs on the machine take from it. */
static double time_images(handle *h, uint64_t prefetch_images, uint64_t images, int profile, double *per_cpu_s)
{
    consume(h->L, prefetch_images, 0);
    if (profile) perf_enable(1);
    double t0 = now_s(), c0 = cpu_s();
    uint64_t seen = consume(h->L, images, 0);
    double rate = (double)seen / (now_s() - t0);
    *per_cpu_s = (double)seen / (cpu_s() - c0);
    if (profile) perf_enable(0);
    settle(h->L);
    return rate;
}
#endif

static void usage(void)
{
    fprintf(stderr, "usage: bench_jpeg --data DIR --threads N [--images 2560] [--rounds 3]\n"
                    "                  [--max-epochs 40] [--after 2] [--budget B] [--first-epoch [--off]]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *data = NULL;
    int threads = 1, rounds = 3, max_epochs = 40, after = 2, first = 0, first_off = 0;
    uint64_t images = 2560;
    float budget = -1.0f;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--first-epoch") == 0) { first = 1; continue; }
        if (strcmp(a, "--off") == 0) { first_off = 1; continue; }
        if (i + 1 >= argc) usage();
        const char *v = argv[++i];
        if (strcmp(a, "--data") == 0) data = v;
        else if (strcmp(a, "--threads") == 0) threads = atoi(v);
        else if (strcmp(a, "--images") == 0) images = strtoull(v, NULL, 10);
        else if (strcmp(a, "--rounds") == 0) rounds = atoi(v);
        else if (strcmp(a, "--max-epochs") == 0) max_epochs = atoi(v);
        else if (strcmp(a, "--after") == 0) after = atoi(v);
        else if (strcmp(a, "--budget") == 0) budget = (float)atof(v);
        else usage();
    }
    if (!data || threads < 1 || rounds < 1 || images == 0) usage();
    file_list fl;
    if (list_image_folder(data, &fl) != 0 || fl.n == 0) {
        fprintf(stderr, "bench_jpeg: no files under %s\n", data);
        return 1;
    }
    /* the whole dataset and the room rewrites may take (the clamp's 1/8) */
    const uint64_t cache_bytes = fl.total_bytes + fl.total_bytes / 8 + ((uint64_t)64 << 20);
    if (first) return first_epoch(data, threads, cache_bytes, !first_off);
#ifdef BENCH_BASE
    fprintf(stderr, "bench_jpeg: built with BENCH_BASE: only --first-epoch\n");
    return 2;
#else
    perf_ctl_open();
    const uint64_t prefetch_images = (uint64_t)coordl_config_default().prefetch_batches * 64;
    printf("bench_jpeg: %zu files, %.1f MB, %d thread(s); train 224 F32 NCHW flip, batch 64, whole dataset "
           "cached\n", fl.n, fl.total_bytes / 1e6, threads);

    /* off first: its median per epoch is the reference of the curve */
    handle off = {open_handle(data, threads, cache_bytes, 0, budget), "off", {0}};
    double off_rates[3];
    for (int e = 0; e < 3; e++) off_rates[e] = run_epoch(&off);
    const double off_med = 0.5 * (off_rates[1] + off_rates[2]);
    settle(off.L);
    handle on = {open_handle(data, threads, cache_bytes, 1, budget), "on", {0}};
    printf("\n  per epoch, loader-bound (random access on: jpeg_rewrite_budget %s; off: %.1f img/s in "
           "epoch 0, %.1f after):\n", budget >= 0 ? "as given" : "default", off_rates[0], off_med);
    printf("  %5s %10s %10s %11s %13s\n", "epoch", "on img/s", "on/off", "rewritten", "rewrite time");
    int converted_at = -1, epochs = 0;
    uint64_t rw_ns0 = 0, busy0 = 0;
    for (int e = 0; e < max_epochs; e++) {
        const double r_on = run_epoch(&on);
        const coordl_stats *s = &on.st;
        const uint64_t busy = s->read_ns + s->decode_ns + s->augment_ns, rw = s->jpeg_rewrite_ns;
        const double share = (double)(rw - rw_ns0) / (double)((busy - busy0) + (rw - rw_ns0) + 1);
        rw_ns0 = rw;
        busy0 = busy;
        const double held = s->cache_items ? 100.0 * (double)s->jpeg_rewritten_items / (double)s->cache_items : 0;
        const double ref = e == 0 ? off_rates[0] : off_med;
        printf("  %5d %10.1f %10.2f %10.1f%% %12.1f%%\n", e, r_on, r_on / ref, held, 100.0 * share);
        printf("RESULT ra_epoch %d %d %.1f %.1f %.1f %.1f\n", threads, e, r_on, ref, held, 100.0 * share);
        fflush(stdout);
        epochs = e + 1;
        if (converted_at < 0 && s->jpeg_rewritten_items + s->jpeg_rewrite_failures >= s->cache_items)
            converted_at = e;
        if (converted_at >= 0 && e >= converted_at + after) break;
    }
    settle(on.L);
    if (converted_at < 0)
        printf("  not converted after %d epochs: the converted figures below are partial\n", epochs);
    else
        printf("  every cached JPEG rewritten by the end of epoch %d (%llu failed, %llu rewritten in idle time)\n",
               converted_at, (unsigned long long)on.st.jpeg_rewrite_failures,
               (unsigned long long)on.st.jpeg_rewrites_idle);

    floor_state fs;
    const int with_floor = threads == 1;
    if (with_floor) floor_init(&fs, &fl);
    double *r_on = xmalloc((size_t)rounds * sizeof *r_on), *r_off = xmalloc((size_t)rounds * sizeof *r_off),
           *r_fl = xmalloc((size_t)rounds * sizeof *r_fl), *c_on = xmalloc((size_t)rounds * sizeof *c_on),
           *c_off = xmalloc((size_t)rounds * sizeof *c_off), *c_fl = xmalloc((size_t)rounds * sizeof *c_fl);
    printf("\n  converted: %d rounds of %llu images, cases alternated\n", rounds, (unsigned long long)images);
    for (int r = 0; r < rounds; r++) {
        r_on[r] = time_images(&on, prefetch_images, images, 1, &c_on[r]);
        r_off[r] = time_images(&off, prefetch_images, images, 0, &c_off[r]);
        c_fl[r] = 0.0;
        r_fl[r] = with_floor ? measure_floor(&fs, images, &c_fl[r]) : 0.0;
        printf("  round %d: on %.1f  off %.1f", r + 1, r_on[r], r_off[r]);
        if (with_floor) printf("  floor %.1f", r_fl[r]);
        printf(" img/s;  per CPU-s: on %.1f  off %.1f", c_on[r], c_off[r]);
        if (with_floor) printf("  floor %.1f", c_fl[r]);
        printf("\n");
        fflush(stdout);
    }
    const double m_on = median(r_on, (size_t)rounds), m_off = median(r_off, (size_t)rounds),
                 m_fl = with_floor ? median(r_fl, (size_t)rounds) : 0.0;
    printf("  median: on %.1f img/s (%.1f per core), off %.1f (%.1f per core)", m_on, m_on / threads, m_off,
           m_off / threads);
    if (with_floor) printf(", floor %.1f", m_fl);
    printf("\n  on/off %.2fx", m_on / m_off);
    if (with_floor) printf(", on/floor %.2fx, off/floor %.2fx", m_on / m_fl, m_off / m_fl);
    printf("\n");
    printf("RESULT ra_conv %d %.1f %.1f %.1f\n", threads, m_on, m_off, m_fl);
    const double mc_on = median(c_on, (size_t)rounds), mc_off = median(c_off, (size_t)rounds),
                 mc_fl = with_floor ? median(c_fl, (size_t)rounds) : 0.0;
    printf("  per CPU-second (median): on %.1f, off %.1f", mc_on, mc_off);
    if (with_floor) printf(", floor %.1f: on/floor %.2fx", mc_fl, mc_on / mc_fl);
    printf(", on/off %.2fx\n", mc_on / mc_off);
    printf("RESULT ra_conv_cpu %d %.1f %.1f %.1f\n", threads, mc_on, mc_off, mc_fl);

    coordl_get_stats(on.L, &on.st);
    coordl_get_stats(off.L, &off.st);
    printf("\n  cache: on %.1f MB used (items as read %.1f MB, +%.2f%%; rewritten %llu of %llu), "
           "off %.1f MB\n", on.st.cache_bytes_used / 1e6, on.st.cache_item_bytes / 1e6,
           100.0 * ((double)on.st.cache_bytes_used / (double)on.st.cache_item_bytes - 1.0),
           (unsigned long long)on.st.jpeg_rewritten_items, (unsigned long long)on.st.cache_items,
           off.st.cache_bytes_used / 1e6);
    printf("RESULT ra_cache %d %llu %llu %llu %d\n", threads, (unsigned long long)on.st.cache_bytes_used,
           (unsigned long long)on.st.cache_item_bytes, (unsigned long long)off.st.cache_bytes_used,
           converted_at < 0 ? -1 : converted_at + 1);
    coordl_close(on.L);
    coordl_close(off.L);
    if (with_floor) floor_free(&fs);
    free(r_on);
    free(r_off);
    free(r_fl);
    free(c_on);
    free(c_off);
    free(c_fl);
    perf_ctl_close();
    return 0;
#endif
}
