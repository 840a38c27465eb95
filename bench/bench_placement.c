/*
 * bench_placement - what binding the workers and page-locking the cache and
 * ring buy, measured side by side in one run.
 *
 *   bench_placement --data DIR [--images 2560] [--rounds 3] [--batch 64]
 *                   [--threads 2]
 *
 * Four coordl handles, the same train pipeline (RandomResizedCrop 224 +
 * flip + normalize to F32 NCHW), the same seed, the whole dataset cached:
 *   bound+pinned     bind = 1, cache_pin = COORDL_PIN_TRY
 *   unbound+pinned   bind = 0, cache_pin = COORDL_PIN_TRY
 *   bound+pageable   bind = 1, cache_pin = COORDL_PIN_OFF
 *   unbound+pageable bind = 0, cache_pin = COORDL_PIN_OFF
 * Each handle runs one whole warm-up epoch first (every item then comes
 * from the cache), and is left to refill its ring and go idle before the
 * timed runs. Each round measures every case once, in turn (so a noisy
 * neighbour hits them all); a timed run first drains the batches prepared
 * while the handle sat idle, untimed, then times --images images.
 *
 * Prints per case the placement coordl reported (placement_cpus,
 * threads_bound, memory_bound, pinned_bytes), the median/min/max images/s
 * over the rounds, the ratios bound/unbound (at each pin mode) and
 * pinned/pageable (at each bind mode), and one line per case:
 *   RESULT placement <case> <threads> <median img/s> <min> <max>
 * and per ratio:
 *   RESULT ratio <name> <ratio of medians>
 */
#define BENCH_PROG "bench_placement"
#include "bench_common.h"

enum { B1P1, B0P1, B1P0, B0P0, NCASES };
static const char *case_name[NCASES] = {"bound+pinned", "unbound+pinned", "bound+pageable",
                                        "unbound+pageable"};
static const int case_bind[NCASES] = {1, 0, 1, 0};
static const coordl_pin_mode case_pin[NCASES] = {COORDL_PIN_TRY, COORDL_PIN_TRY, COORDL_PIN_OFF,
                                                 COORDL_PIN_OFF};

typedef struct {
    coordl *L;
    uint32_t prefetch_rows;
    double *rate; /* per round */
    double med, mn, mx;
    coordl_stats st; /* after the warm-up */
} bench_case;

static void log_fn(void *user, coordl_log_level level, const char *msg)
{
    (void)user;
    fprintf(stderr, "  coordl [%d]: %s\n", (int)level, msg);
}

static coordl *open_case(const char *data, int c, int threads, uint32_t batch,
                         uint64_t cache_bytes)
{
    coordl_config cfg = train_config(data, threads, batch, cache_bytes);
    cfg.bind = case_bind[c];
    cfg.cache_pin = case_pin[c];
    cfg.log = log_fn;
    cfg.log_level = COORDL_LOG_WARN;
    return open_or_exit(&cfg);
}

static double measure(bench_case *bc, uint64_t images)
{
    consume(bc->L, bc->prefetch_rows, 0); /* prepared while idle: untimed */
    double t0 = now_s();
    uint64_t seen = consume(bc->L, images, 0);
    double t1 = now_s();
    settle(bc->L);
    return (double)seen / (t1 - t0);
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_placement --data DIR [--images 2560] [--rounds 3] "
                    "[--batch 64] [--threads 2]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *data = NULL;
    uint64_t images = 2560;
    int rounds = 3, threads = 2;
    uint32_t batch = 64;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        const char *a = argv[i], *v = argv[++i];
        if (strcmp(a, "--data") == 0) data = v;
        else if (strcmp(a, "--images") == 0) images = strtoull(v, NULL, 10);
        else if (strcmp(a, "--rounds") == 0) rounds = atoi(v);
        else if (strcmp(a, "--batch") == 0) batch = (uint32_t)atoi(v);
        else if (strcmp(a, "--threads") == 0) threads = atoi(v);
        else usage();
    }
    if (!data || images == 0 || rounds <= 0 || batch == 0 || threads <= 0) usage();

    file_list fl;
    if (list_image_folder(data, &fl) != 0 || fl.n == 0) {
        fprintf(stderr, "bench_placement: no files under %s\n", data);
        return 1;
    }
    printf("bench_placement: %zu files, %.1f MB, %d usable cores, %d threads per handle, "
           "batch %u, %llu images per timed run, %d rounds\n",
           fl.n, fl.total_bytes / 1e6, usable_cores(), threads, batch,
           (unsigned long long)images, rounds);

    uint64_t cache_bytes = fl.total_bytes + fl.total_bytes / 8 + ((uint64_t)64 << 20);
    bench_case bc[NCASES];
    memset(bc, 0, sizeof bc);
    for (int c = 0; c < NCASES; c++) {
        bc[c].rate = xmalloc((size_t)rounds * sizeof(double));
        bc[c].L = open_case(data, c, threads, batch, cache_bytes);
        bc[c].prefetch_rows = coordl_config_default().prefetch_batches * batch;
        double t0 = now_s();
        uint64_t seen = consume(bc[c].L, UINT64_MAX, 1); /* the warm-up epoch */
        coordl_get_stats(bc[c].L, &bc[c].st);
        const coordl_stats *st = &bc[c].st;
        printf("  warm-up %-17s %llu images in %.1f s; cache %llu of %zu items; workers on "
               "\"%s\", node %d of %u, threads_bound %u/%u, memory_bound %d, pinned %.0f MB\n",
               case_name[c], (unsigned long long)seen, now_s() - t0,
               (unsigned long long)st->cache_items, fl.n, st->placement_cpus,
               (int)st->placement_node, (unsigned)st->placement_nodes,
               (unsigned)st->threads_bound, (unsigned)st->threads, (int)st->memory_bound,
               st->pinned_bytes / 1e6);
        if (st->cache_items < coordl_num_items(bc[c].L))
            printf("  WARNING: %s: not every item is cached; timed runs will read storage\n",
                   case_name[c]);
        if (case_pin[c] == COORDL_PIN_TRY && st->pinned_bytes == 0)
            printf("  WARNING: %s: nothing page-locked (no CAP_IPC_LOCK / RLIMIT_MEMLOCK?)\n",
                   case_name[c]);
        if (case_bind[c] && st->threads_bound == 0)
            printf("  WARNING: %s: no worker bound\n", case_name[c]);
        settle(bc[c].L);
    }

    for (int r = 0; r < rounds; r++) {
        printf("  round %d:", r + 1);
        /* rotate the starting case each round, so none is always first */
        for (int k = 0; k < NCASES; k++) {
            int c = (k + r) % NCASES;
            bc[c].rate[r] = measure(&bc[c], images);
            printf("  %s %.1f", case_name[c], bc[c].rate[r]);
            fflush(stdout);
        }
        printf("  (img/s)\n");
    }

    printf("\n%-18s %7s %-10s %6s %6s %10s %10s %10s %10s\n", "case", "threads", "cpus",
           "bound", "mem", "pinned MB", "median/s", "min/s", "max/s");
    for (int c = 0; c < NCASES; c++) {
        bench_case *b = &bc[c];
        b->med = median(b->rate, (size_t)rounds); /* sorts the rates */
        b->mn = b->rate[0];
        b->mx = b->rate[rounds - 1];
        printf("%-18s %7u %-10s %6u %6d %10.0f %10.1f %10.1f %10.1f\n", case_name[c],
               (unsigned)b->st.threads, b->st.placement_cpus, (unsigned)b->st.threads_bound,
               (int)b->st.memory_bound, b->st.pinned_bytes / 1e6, b->med, b->mn, b->mx);
    }
    static const struct {
        const char *name;
        int num, den;
    } ratios[4] = {{"bound/unbound(pinned)", B1P1, B0P1},
                   {"bound/unbound(pageable)", B1P0, B0P0},
                   {"pinned/pageable(bound)", B1P1, B1P0},
                   {"pinned/pageable(unbound)", B0P1, B0P0}};
    printf("\nratios of medians:\n");
    for (int i = 0; i < 4; i++)
        printf("  %-26s %6.3f\n", ratios[i].name, bc[ratios[i].num].med / bc[ratios[i].den].med);
    printf("\n");
    for (int c = 0; c < NCASES; c++)
        printf("RESULT placement %s %u %.1f %.1f %.1f\n", case_name[c], (unsigned)bc[c].st.threads,
               bc[c].med, bc[c].mn, bc[c].mx);
    for (int i = 0; i < 4; i++)
        printf("RESULT ratio %s %.3f\n", ratios[i].name, bc[ratios[i].num].med / bc[ratios[i].den].med);

    for (int c = 0; c < NCASES; c++) {
        coordl_close(bc[c].L);
        free(bc[c].rate);
    }
    free_file_list(&fl);
    return 0;
}
