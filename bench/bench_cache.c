/*
 * bench_cache - MinIO against LRU: cache hit rate per epoch when the cache
 * holds a fraction of the dataset and every epoch reads every item once in a
 * fresh random order.
 *
 *   bench_cache --data DIR [--fraction 0.5] [--epochs 4] [--threads 2]
 *               [--out 64] [--batch 64]
 *
 * For each policy one handle (train pipeline, out x out U8 to keep it quick)
 * runs the epochs; coordl_get_epoch_stats gives each epoch's hits and misses.
 * MinIO's hit rate after the first epoch should equal cache/dataset; LRU's
 * is lower, since a shuffled epoch evicts items just before they come back.
 *
 * Prints the table and per policy
 *   RESULT cache <policy> <hit% epoch 0> <hit% epoch 1> ...
 */
#include "bench_common.h"
#include "coordl.h"

#define MAX_EPOCHS 16 /* coordl keeps the last 16 epochs' stats */

typedef struct {
    double hit[MAX_EPOCHS], byte_hit[MAX_EPOCHS], secs[MAX_EPOCHS];
    uint64_t items[MAX_EPOCHS];
    uint64_t dataset_bytes, budget;
} policy_run;

static int run_policy(const char *data, coordl_cache_policy policy, uint64_t cache_bytes,
                      int epochs, int threads, uint32_t out, uint32_t batch, policy_run *pr)
{
    coordl_config cfg = coordl_config_default();
    cfg.source = data;
    cfg.pipeline = COORDL_PIPE_TRAIN;
    cfg.batch_size = batch;
    cfg.out_w = cfg.out_h = out;
    cfg.layout = COORDL_U8_NHWC;
    cfg.threads = threads;
    cfg.cache_bytes = cache_bytes;
    cfg.cache_policy = policy;
    cfg.seed = 7;
    coordl *L = NULL;
    coordl_status rc = coordl_open(&cfg, &L);
    if (rc != COORDL_OK) {
        fprintf(stderr, "bench_cache: coordl_open: %s: %s\n", coordl_strerror(rc),
                coordl_errmsg(NULL));
        return -1;
    }
    for (int e = 0; e < epochs; e++) {
        double t0 = now_s();
        for (;;) {
            coordl_batch b;
            rc = coordl_next(L, &b);
            if (rc == COORDL_END_OF_EPOCH) break;
            if (rc != COORDL_OK) {
                fprintf(stderr, "bench_cache: coordl_next: %s: %s\n", coordl_strerror(rc),
                        coordl_errmsg(L));
                coordl_close(L);
                return -1;
            }
            coordl_release(L, &b);
        }
        pr->secs[e] = now_s() - t0;
    }
    for (int e = 0; e < epochs; e++) {
        coordl_epoch_stats es;
        if (coordl_get_epoch_stats(L, (uint64_t)e, &es) != COORDL_OK) {
            fprintf(stderr, "bench_cache: no stats for epoch %d\n", e);
            coordl_close(L);
            return -1;
        }
        uint64_t fetches = es.cache_hits + es.cache_misses;
        pr->hit[e] = fetches ? 100.0 * (double)es.cache_hits / (double)fetches : 0;
        pr->byte_hit[e] =
            es.fetch_bytes ? 100.0 * (double)es.cache_hit_bytes / (double)es.fetch_bytes : 0;
        pr->items[e] = es.items;
    }
    coordl_stats st;
    coordl_get_stats(L, &st);
    pr->dataset_bytes = st.dataset_bytes;
    pr->budget = st.cache_bytes_budget;
    coordl_close(L);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_cache --data DIR [--fraction 0.5] [--epochs 4] "
                    "[--threads 2] [--out 64] [--batch 64]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *data = NULL;
    double fraction = 0.5;
    int epochs = 4, threads = 2;
    uint32_t out = 64, batch = 64;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        const char *a = argv[i], *v = argv[++i];
        if (strcmp(a, "--data") == 0) data = v;
        else if (strcmp(a, "--fraction") == 0) fraction = atof(v);
        else if (strcmp(a, "--epochs") == 0) epochs = atoi(v);
        else if (strcmp(a, "--threads") == 0) threads = atoi(v);
        else if (strcmp(a, "--out") == 0) out = (uint32_t)atoi(v);
        else if (strcmp(a, "--batch") == 0) batch = (uint32_t)atoi(v);
        else usage();
    }
    if (!data || fraction <= 0 || epochs <= 0 || epochs > MAX_EPOCHS || threads <= 0 ||
        out == 0 || batch == 0)
        usage();
    file_list fl;
    if (list_image_folder(data, &fl) != 0 || fl.n == 0) {
        fprintf(stderr, "bench_cache: no files under %s\n", data);
        return 1;
    }
    uint64_t cache_bytes = (uint64_t)(fraction * (double)fl.total_bytes);
    printf("bench_cache: %zu files, %.1f MB; cache %.1f MB (%.0f%%), %d epochs, %d threads, "
           "out %ux%u\n",
           fl.n, fl.total_bytes / 1e6, cache_bytes / 1e6, 100 * fraction, epochs, threads, out,
           out);

    static const char *names[2] = {"MinIO", "LRU"};
    static const coordl_cache_policy pols[2] = {COORDL_CACHE_MINIO, COORDL_CACHE_LRU};
    policy_run pr[2];
    memset(pr, 0, sizeof pr);
    for (int p = 0; p < 2; p++)
        if (run_policy(data, pols[p], cache_bytes, epochs, threads, out, batch, &pr[p]) != 0)
            return 1;

    double ideal = 100.0 * (double)pr[0].budget / (double)pr[0].dataset_bytes;
    printf("\n%-6s %8s %16s %16s %10s %10s\n", "epoch", "items", "MinIO hit% (B%)",
           "LRU hit% (B%)", "MinIO s", "LRU s");
    for (int e = 0; e < epochs; e++)
        printf("%-6d %8llu %8.1f (%5.1f) %8.1f (%5.1f) %10.1f %10.1f\n", e,
               (unsigned long long)pr[0].items[e], pr[0].hit[e], pr[0].byte_hit[e],
               pr[1].hit[e], pr[1].byte_hit[e], pr[0].secs[e], pr[1].secs[e]);
    double m = 0, l = 0;
    for (int e = 1; e < epochs; e++) {
        m += pr[0].byte_hit[e];
        l += pr[1].byte_hit[e];
    }
    if (epochs > 1) {
        m /= epochs - 1;
        l /= epochs - 1;
        printf("epochs 1..%d, byte hit rate: MinIO %.1f%%, LRU %.1f%%, MinIO/LRU %.2fx; "
               "ideal (cache/dataset) %.1f%%\n",
               epochs - 1, m, l, l > 0 ? m / l : 0.0, ideal);
    }
    for (int p = 0; p < 2; p++) {
        printf("RESULT cache %s", names[p]);
        for (int e = 0; e < epochs; e++) printf(" %.1f", pr[p].hit[e]);
        printf("\n");
    }
    free_file_list(&fl);
    return 0;
}
