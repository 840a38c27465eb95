/*
 * bench_window.c - `bash bench/run.sh window` (issue 25): the same
 * WebDataset tar shards read in the full shuffle and in the shard-window
 * order, side by side in one run: a cold epoch (the shards' pages dropped
 * from the page cache first, coordl_open included) and a warm one, images/s
 * of each; the mean and largest number of shards a batch reads from; and
 * the bytes the sampler's tables hold (coordl_stats.sampler_bytes).
 *
 *   bench_window --source DIR --window W [--threads 2] [--batch 32]
 *                [--size 128] [--rounds 3]
 *
 * Prints one RESULT line per order (medians over the rounds, orders
 * alternated within each round):
 *   RESULT window ORDER cold_img/s warm_img/s shards_per_batch_mean
 *          shards_per_batch_max sampler_bytes
 */
#include "bench_common.h"
#include "coordl.h"

#include <dirent.h>
#include <fcntl.h>

#define MAX_SHARDS 256
static char *g_shard[MAX_SHARDS];
static size_t g_nshards;

static void quiet(void *user, coordl_log_level level, const char *msg)
{
    (void)user;
    if (level <= COORDL_LOG_WARN) fprintf(stderr, "  coordl: %s\n", msg);
}

static void list_shards(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) { perror(dir); exit(1); }
    struct dirent *e;
    while ((e = readdir(d)) && g_nshards < MAX_SHARDS) {
        const size_t n = strlen(e->d_name);
        if (n > 4 && strcmp(e->d_name + n - 4, ".tar") == 0) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            g_shard[g_nshards++] = xstrdup(path);
        }
    }
    closedir(d);
}

static void drop_page_cache(void)
{
    for (size_t i = 0; i < g_nshards; i++) {
        int fd = open(g_shard[i], O_RDONLY);
        if (fd >= 0) {
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            close(fd);
        }
    }
}

/* The shard an item's path ("shard:member") names. */
static size_t shard_of(const char *path)
{
    for (size_t i = 0; i < g_nshards; i++) {
        const size_t n = strlen(g_shard[i]);
        if (strncmp(path, g_shard[i], n) == 0 && path[n] == ':') return i;
    }
    return 0;
}

typedef struct {
    double cold, warm, spb_mean;
    unsigned spb_max;
    uint64_t sampler_bytes;
} result;

/* One epoch; images/s; shards per batch summed into *spb_sum / *nb. */
static double epoch(coordl *L, double *spb_sum, unsigned *spb_max, uint64_t *nb)
{
    const double t0 = now_s();
    uint64_t rows = 0;
    coordl_batch b;
    coordl_status rc;
    while ((rc = coordl_next(L, &b)) == COORDL_OK) {
        unsigned char seen[MAX_SHARDS] = {0};
        unsigned k = 0;
        for (uint32_t i = 0; i < b.n; i++) {
            const size_t s = shard_of(coordl_item_path(L, b.ids[i]));
            if (!seen[s]++) k++;
        }
        *spb_sum += k;
        if (k > *spb_max) *spb_max = k;
        (*nb)++;
        rows += b.n;
        coordl_release(L, &b);
    }
    if (rc != COORDL_END_OF_EPOCH) { fprintf(stderr, "bench_window: %s\n", coordl_errmsg(L)); exit(1); }
    return (double)rows / (now_s() - t0);
}

static result run(const char *src, int shuffle, uint32_t window, int threads, uint32_t batch, uint32_t size)
{
    result r;
    memset(&r, 0, sizeof r);
    drop_page_cache();
    coordl_config cfg = coordl_config_default();
    cfg.source = src;
    cfg.log = quiet;
    cfg.threads = threads;
    cfg.batch_size = batch;
    cfg.out_w = cfg.out_h = size;
    cfg.layout = COORDL_U8_NHWC;
    cfg.shuffle = shuffle;
    cfg.shuffle_window_shards = window;
    cfg.seed = 1;
    const double t0 = now_s();
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) { fprintf(stderr, "bench_window: %s\n", coordl_errmsg(NULL)); exit(1); }
    const double open_s = now_s() - t0;
    double spb = 0;
    uint64_t nb = 0;
    const uint64_t n = coordl_num_items(L);
    r.cold = epoch(L, &spb, &r.spb_max, &nb);
    r.cold = (double)n / ((double)n / r.cold + open_s); /* open included */
    r.warm = epoch(L, &spb, &r.spb_max, &nb);
    r.spb_mean = spb / (double)nb;
    coordl_stats st;
    coordl_get_stats(L, &st);
    r.sampler_bytes = st.sampler_bytes;
    coordl_close(L);
    return r;
}

int main(int argc, char **argv)
{
    const char *src = NULL;
    uint32_t window = 4, batch = 32, size = 128;
    int threads = 2, rounds = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--source")) src = argv[i + 1];
        else if (!strcmp(argv[i], "--window")) window = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--size")) size = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
    }
    if (!src || rounds < 1 || rounds > 32) { fprintf(stderr, "usage: bench_window --source DIR --window W ...\n"); return 2; }
    list_shards(src);
    static const int orders[2] = {COORDL_SHUFFLE_FULL, COORDL_SHUFFLE_SHARD_WINDOW};
    static const char *names[2] = {"full", "shard-window"};
    double cold[2][32], warm[2][32], spb[2] = {0, 0};
    unsigned spbmax[2] = {0, 0};
    uint64_t sbytes[2] = {0, 0};
    for (int k = 0; k < rounds; k++)
        for (int o = 0; o < 2; o++) {
            const int oo = (k % 2) ? 1 - o : o; /* alternate which goes first */
            result r = run(src, orders[oo], window, threads, batch, size);
            cold[oo][k] = r.cold;
            warm[oo][k] = r.warm;
            spb[oo] = r.spb_mean;
            if (r.spb_max > spbmax[oo]) spbmax[oo] = r.spb_max;
            sbytes[oo] = r.sampler_bytes;
        }
    for (int o = 0; o < 2; o++)
        printf("RESULT window %s %.1f %.1f %.2f %u %llu\n", names[o], median(cold[o], (size_t)rounds), median(warm[o], (size_t)rounds),
               spb[o], spbmax[o], (unsigned long long)sbytes[o]);
    return 0;
}
