/*
 * bench_remote.c - one case of `bash bench/run.sh remote` (issue 24): a cold
 * epoch (coordl_open included) then a warm one (every item cached) of a
 * WebDataset source that is local, over HTTP or over S3.
 *
 *   bench_remote --source SRC --name NAME --lat MS --depth D [--threads 2]
 *                [--batch 32] [--size 128] [--pids P1,P2,...]
 *
 * Prints one line:
 *   RESULT remote NAME LAT DEPTH cold_img/s warm_img/s ratio max_in_flight
 *          io_threads bytes_fetched server_cpu_s process_threads_max open_s
 * where server_cpu_s is the user + system time the processes --pids (the
 * servers and the latency proxy) spent during the two epochs, and
 * process_threads_max the most threads this process had while the cold
 * epoch ran (prep workers, read-ahead I/O threads, the HTTP event loop),
 * and open_s the seconds coordl_open took (part of the cold epoch).
 */
#include "bench_common.h"
#include "coordl.h"

static void quiet(void *user, coordl_log_level level, const char *msg)
{
    (void)user;
    if (level <= COORDL_LOG_WARN) fprintf(stderr, "  coordl: %s\n", msg);
}

static double proc_cpu_s(const char *pids)
{
    double total = 0;
    const long hz = sysconf(_SC_CLK_TCK);
    for (const char *p = pids; p && *p;) {
        char path[64], buf[4096];
        snprintf(path, sizeof path, "/proc/%d/stat", atoi(p));
        FILE *f = fopen(path, "r");
        if (f) {
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            buf[n] = '\0';
            fclose(f);
            const char *c = strrchr(buf, ')');
            unsigned long long ut = 0, st = 0;
            if (c && sscanf(c + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
                total += (double)(ut + st) / (double)hz;
        }
        const char *comma = strchr(p, ',');
        p = comma ? comma + 1 : NULL;
    }
    return total;
}

static int threads_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1) break;
    if (f) fclose(f);
    return n;
}

/* One epoch's images/s; the most threads seen while it ran. */
static double epoch(coordl *L, double t0, int *threads_max)
{
    uint64_t got = 0;
    for (;;) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) break;
        if (rc != COORDL_OK) {
            fprintf(stderr, "bench_remote: %s: %s\n", coordl_strerror(rc), coordl_errmsg(L));
            exit(1);
        }
        got += b.n;
        coordl_release(L, &b);
        const int t = threads_now();
        if (t > *threads_max) *threads_max = t;
    }
    return (double)got / (now_s() - t0);
}

int main(int argc, char **argv)
{
    const char *source = NULL, *name = "?", *pids = NULL;
    int lat = 0, depth = 32, threads = 2, size = 128;
    uint32_t batch = 32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--source") && v) { source = v; i++; }
        else if (!strcmp(a, "--name") && v) { name = v; i++; }
        else if (!strcmp(a, "--lat") && v) { lat = atoi(v); i++; }
        else if (!strcmp(a, "--depth") && v) { depth = atoi(v); i++; }
        else if (!strcmp(a, "--threads") && v) { threads = atoi(v); i++; }
        else if (!strcmp(a, "--batch") && v) { batch = (uint32_t)atoi(v); i++; }
        else if (!strcmp(a, "--size") && v) { size = atoi(v); i++; }
        else if (!strcmp(a, "--pids") && v) { pids = v; i++; }
        else {
            fprintf(stderr, "usage: bench_remote --source SRC --name NAME --lat MS --depth D [--threads 2] "
                            "[--batch 32] [--size 128] [--pids P1,P2]\n");
            return 2;
        }
    }
    if (!source) { fprintf(stderr, "bench_remote: --source is required\n"); return 2; }
    coordl_config cfg = coordl_config_default();
    cfg.source = source;
    cfg.pipeline = COORDL_PIPE_TRAIN;
    cfg.threads = threads;
    cfg.batch_size = batch;
    cfg.out_w = cfg.out_h = (uint32_t)size;
    cfg.layout = COORDL_F32_NCHW;
    cfg.seed = 1;
    cfg.log = quiet;
    cfg.readahead_items = (uint32_t)depth;
    cfg.cache_bytes = 4ull << 30; /* every item: the second epoch is warm */
    const double cpu0 = proc_cpu_s(pids);
    int threads_max = 0, warm_threads = 0;
    double t0 = now_s();
    coordl *L = NULL;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "bench_remote: open %s: %s\n", source, coordl_errmsg(NULL));
        return 1;
    }
    const double open_s = now_s() - t0;
    const double cold = epoch(L, t0, &threads_max);
    coordl_stats st;
    coordl_get_stats(L, &st);
    const double warm = epoch(L, now_s(), &warm_threads);
    const double cpu = proc_cpu_s(pids) - cpu0;
    printf("RESULT remote %s %d %d %.1f %.1f %.3f %llu %u %llu %.2f %d %.3f\n", name, lat, depth, cold, warm,
           cold / warm, (unsigned long long)st.remote_max_in_flight, st.readahead_io_threads,
           (unsigned long long)st.remote_bytes, cpu, threads_max, open_s);
    coordl_close(L);
    return 0;
}
