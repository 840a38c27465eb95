/*
 * bench_lazy.c - `bash bench/run.sh lazy` (issue 25): tar shards indexed
 * as the shard window reaches them, on virtual sets served by a coordl_io
 * (tests/tu_virtual_tar.h: each sample a .cls and one small JPEG,
 * generated from the offset asked for: no disk, no page cache).
 *
 *   1. 100M samples (20,000 shards x 5,000), shard-window order: seconds
 *      to coordl_open, to the first batch, resident memory (VmRSS) after
 *      open and after the timed batches, and steady images/s;
 *   2. the same 100M set behind a reader that sleeps --read-us in every
 *      read (storage latency: a shard's scan is 2 reads a sample): open,
 *      first batch (the first window's 8 shards scanned 3 at a time) and
 *      steady images/s (the scan-ahead threads keep the next window ready);
 *   3. a set both orders can hold (--small-shards x 5,000): the full
 *      shuffle (every shard scanned at open, 24 bytes an item) against the
 *      shard-window order (lazy), open seconds, RSS and images/s, in one
 *      run.
 *
 *   bench_lazy [--shards 20000] [--small-shards 200] [--batches 300]
 *              [--threads 2] [--window 8] [--read-us 20]
 *
 * RESULT lines:
 *   RESULT lazy SET ORDER items open_s first_batch_s rss_open_mb rss_end_mb img/s
 */
#include "bench_common.h"
#include "coordl.h"
#include "tests/tu_virtual_tar.h"

#include <jpeglib.h>

static void quiet(void *user, coordl_log_level level, const char *msg)
{
    (void)user;
    if (level <= COORDL_LOG_WARN) fprintf(stderr, "  coordl: %s\n", msg);
}

static double rss_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double mb = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) mb = atof(line + 6) / 1024.0;
    if (f) fclose(f);
    return mb;
}

static void run(const char *set, tu_vtar *v, int shuffle, uint32_t window, int threads, unsigned batches)
{
    coordl_config cfg = coordl_config_default();
    cfg.source = v->list_path;
    cfg.io = &v->table;
    cfg.pipeline = COORDL_PIPE_EVAL;
    cfg.out_w = cfg.out_h = 32;
    cfg.batch_size = 32;
    cfg.threads = threads;
    cfg.shuffle = shuffle;
    cfg.shuffle_window_shards = window;
    cfg.seed = 3;
    cfg.log = quiet;
    const double rss0 = rss_mb(), t0 = now_s();
    coordl *L = NULL;
    coordl_status rc = coordl_open(&cfg, &L);
    if (rc != COORDL_OK) {
        fprintf(stderr, "coordl_open: %s\n", coordl_errmsg(NULL));
        exit(1);
    }
    const double t_open = now_s() - t0, rss_open = rss_mb() - rss0;
    coordl_batch b;
    double t_first = 0, t_steady = 0;
    uint64_t rows = 0;
    for (unsigned k = 0; k < batches + 1;) {
        rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) continue;
        if (rc != COORDL_OK) {
            fprintf(stderr, "coordl_next: %s\n", coordl_errmsg(L));
            exit(1);
        }
        if (k == 0) {
            t_first = now_s() - t0;
            t_steady = now_s();
        } else {
            rows += b.n;
        }
        coordl_release(L, &b);
        k++;
    }
    const double ips = (double)rows / (now_s() - t_steady), rss_end = rss_mb() - rss0;
    const uint64_t items = (uint64_t)v->nshards * v->per_shard;
    coordl_close(L);
    printf("RESULT lazy %s %s %llu %.3f %.3f %.1f %.1f %.0f\n", set,
           shuffle == COORDL_SHUFFLE_FULL ? "full" : "window", (unsigned long long)items, t_open, t_first, rss_open,
           rss_end, ips);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    uint32_t shards = 20000, small = 200, window = 8;
    unsigned batches = 300;
    long read_us = 20;
    int threads = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--shards")) shards = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--small-shards")) small = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batches")) batches = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--window")) window = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--read-us")) read_us = atol(argv[i + 1]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    /* one 48 x 48 JPEG for every sample */
    unsigned char pix[48 * 48 * 3];
    for (int i = 0; i < 48 * 48 * 3; i++) pix[i] = (unsigned char)((i * 37) ^ (i >> 5));
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr jerr;
    unsigned char *jpg = NULL;
    unsigned long jlen = 0;
    c.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &jpg, &jlen);
    c.image_width = c.image_height = 48;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 85, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < 48) {
        JSAMPROW row = pix + c.next_scanline * 48 * 3;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    tu_vtar *big = malloc(sizeof *big), *both = malloc(sizeof *both);
    if (!big || !both || tu_vtar_init(big, "/virtual-big", shards, 5000, jpg, jlen) != 0 ||
        tu_vtar_init(both, "/virtual-both", small, 5000, jpg, jlen) != 0) {
        fprintf(stderr, "cannot set the virtual sets up\n");
        return 1;
    }
    run("big", big, COORDL_SHUFFLE_SHARD_WINDOW, window, threads, batches);
    if (read_us > 0) {
        big->read_delay_ns = read_us * 1000;
        char set[32];
        snprintf(set, sizeof set, "big+%ldus", read_us);
        run(set, big, COORDL_SHUFFLE_SHARD_WINDOW, window, threads, batches);
        big->read_delay_ns = 0;
    }
    run("both", both, COORDL_SHUFFLE_FULL, window, threads, batches);
    run("both", both, COORDL_SHUFFLE_SHARD_WINDOW, window, threads, batches);
    tu_vtar_destroy(big);
    tu_vtar_destroy(both);
    free(big);
    free(both);
    free(jpg);
    return 0;
}
