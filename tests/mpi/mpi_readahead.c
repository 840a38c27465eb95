/* Read-ahead with the partitioned cache over MPI: run under mpirun with 2
 * or 4 ranks. Every rank's budget is 60% of the dataset, so from epoch 1
 * on every item is in this rank's cache or a peer's: the read-ahead must
 * read nothing from storage after epoch 0 (peer items and cache hits are
 * skipped, and it waits for the map of who holds what before reading any
 * of epoch 1), and the batches must be those of the same run without
 * read-ahead. A run resumed at epoch 1 (coordl_seek at open) caches its
 * share of epoch 1, the admission epoch: the read-ahead reads that epoch
 * ahead (it does not wait for the map there, as the workers do not) and
 * nothing after it. Prints "N passed, M failed" on rank 0; exit status
 * non-zero on failure. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <jpeglib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coordl.h"

#define EPOCHS 3
static int g_rank, g_world, g_pass, g_fail;

static void check(int ok, const char *what) {
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (g_rank == 0) printf("  %s: %s\n", all_ok ? "ok  " : "FAIL", what);
    if (all_ok) g_pass++; else g_fail++;
}

static void write_jpeg(const char *path, int w, int h, unsigned seed) {
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); MPI_Abort(MPI_COMM_WORLD, 2); }
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w; c.image_height = (JDIMENSION)h; c.input_components = 3; c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 90, TRUE);
    jpeg_start_compress(&c, TRUE);
    unsigned char *row = malloc((size_t)w * 3);
    while (c.next_scanline < c.image_height) {
        for (int x = 0; x < w; x++) {
            unsigned v = (unsigned)(x * 5 + (int)c.next_scanline * 11) * (seed | 1u);
            row[3 * x] = (unsigned char)(v >> 2); row[3 * x + 1] = (unsigned char)(v >> 9); row[3 * x + 2] = (unsigned char)seed;
        }
        JSAMPROW r = row;
        jpeg_write_scanlines(&c, &r, 1);
    }
    free(row);
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    fclose(f);
}

static void silent_log(void *u, coordl_log_level l, const char *m) { (void)u; (void)l; (void)m; }

/* The POSIX reader, 5 ms slower in a worker's own reads (threads named
 * coordl-w*): the checks that the read-ahead read epoch 0 (and, resumed,
 * epoch 1) need it ahead of the workers, not racing them (8 ranks'
 * threads on 2 cores starved one rank's read-ahead of every row of an
 * epoch in two landing checks). Batches do not depend on it. */
static int64_t slow_worker_read_at(void *user, void *file, void *buf, uint64_t len, uint64_t offset) {
    char name[16] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    if (strncmp(name, "coordl-w", 8) == 0) usleep(5000);
    return coordl_io_posix()->read_at(user, file, buf, len, offset);
}

typedef struct {
    unsigned long long hash[EPOCHS];
    /* "first": the first epoch consumed (0, or the epoch resumed at) */
    uint64_t ra_reads_after_first, ra_reads_end, ra_skips, storage_after_first, storage_end;
    uint64_t ra_hits_at_start, ra_hits_after_first;
} run_out;

/* Consumes epochs from `first` to EPOCHS - 1 (a seek at open when first is
 * not 0), with a cache of budget_pct percent of the dataset per rank. */
static int run(const char *root, uint32_t readahead, uint64_t first, int budget_pct, run_out *o) {
    coordl_io slow = *coordl_io_posix();
    slow.read_at = slow_worker_read_at;
    memset(o, 0, sizeof *o);
    coordl_config cfg = coordl_config_default();
    cfg.source = root; cfg.batch_size = 8; cfg.out_w = cfg.out_h = 24; cfg.threads = 2; cfg.seed = 7;
    cfg.log = silent_log;
    cfg.readahead_items = readahead;
    MPI_Comm comm = MPI_COMM_WORLD;
    cfg.mpi_comm = &comm;
    coordl_config probe = cfg;
    probe.mpi_comm = NULL;
    coordl *P;
    if (coordl_open(&probe, &P) != COORDL_OK) { fprintf(stderr, "probe: %s\n", coordl_errmsg(NULL)); return 0; }
    coordl_stats ps;
    coordl_get_stats(P, &ps);
    coordl_close(P);
    cfg.cache_bytes = ps.dataset_bytes * (uint64_t)budget_pct / 100;
    cfg.io = &slow;
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) { fprintf(stderr, "rank %d open: %s\n", g_rank, coordl_errmsg(NULL)); return 0; }
    if (first && coordl_seek(L, first, 0) != COORDL_OK) {
        fprintf(stderr, "rank %d seek: %s\n", g_rank, coordl_errmsg(L));
        coordl_close(L);
        return 0;
    }
    coordl_stats s0;
    coordl_get_stats(L, &s0); /* the rows prepared before the seek are done with */
    o->ra_hits_at_start = s0.readahead_hits;
    for (uint64_t e = first; e < EPOCHS; e++) {
        unsigned long long h = 1469598103934665603ull;
        coordl_batch b;
        coordl_status rc;
        while ((rc = coordl_next(L, &b)) == COORDL_OK) {
            const unsigned char *p = b.data;
            for (size_t i = 0; i < b.data_bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
            for (uint32_t i = 0; i < b.n; i++) h = (h ^ b.ids[i]) * 1099511628211ull;
            coordl_release(L, &b);
        }
        if (rc != COORDL_END_OF_EPOCH) { fprintf(stderr, "rank %d: %s\n", g_rank, coordl_errmsg(L)); coordl_close(L); return 0; }
        o->hash[e] = h;
        if (e == first) {
            coordl_stats s;
            coordl_get_stats(L, &s);
            o->ra_reads_after_first = s.readahead_reads;
            o->storage_after_first = s.storage_reads;
            o->ra_hits_after_first = s.readahead_hits;
        }
    }
    coordl_stats s;
    coordl_get_stats(L, &s);
    o->ra_reads_end = s.readahead_reads;
    o->ra_skips = s.readahead_skips;
    o->storage_end = s.storage_reads;
    coordl_close(L);
    return 1;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world);
    char root[512];
    snprintf(root, sizeof root, "%s-ra", argc > 1 ? argv[1] : "mpi-data");
    if (g_rank == 0) {
        mkdir(root, 0700);
        for (int k = 0; k < 3; k++) {
            char dir[600];
            snprintf(dir, sizeof dir, "%s/c%02d", root, k);
            mkdir(dir, 0700);
            for (int i = 0; i < 24; i++) {
                char path[700];
                snprintf(path, sizeof path, "%s/img%03d.jpg", dir, i);
                write_jpeg(path, 32 + (i * 7 + k) % 24, 28 + (i * 3 + k) % 20, (unsigned)(k * 100 + i));
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) printf("mpi_readahead: %d ranks\n", g_world);
    run_out off, on, resumed;
    int ok = run(root, 0, 0, 60, &off);
    check(ok, "the run without read-ahead");
    ok = run(root, 32, 0, 60, &on);
    check(ok, "the run with read-ahead 32");
    int same = 1;
    for (int e = 0; e < EPOCHS; e++) same &= off.hash[e] == on.hash[e];
    check(same, "batches with read-ahead equal those without");
    check(on.ra_reads_after_first > 0, "epoch 0 was read ahead");
    check(on.ra_reads_end == on.ra_reads_after_first,
          "from epoch 1 (every item in this rank's cache or a peer's) the read-ahead reads nothing");
    check(on.ra_skips > 0, "peer items and cache hits were skipped");
    check(on.storage_end == on.storage_after_first, "no storage read from epoch 1 on");
    /* resumed at epoch 1: a whole budget each, so the pre-seek rows
     * admitted as epoch 0's leave room for the rank's share of epoch 1 */
    ok = run(root, 32, 1, 100, &resumed);
    check(ok, "the run resumed at epoch 1 with read-ahead 32");
    same = 1;
    for (int e = 1; e < EPOCHS; e++) same &= off.hash[e] == resumed.hash[e];
    check(same, "resumed: batches equal those of the uninterrupted run");
    check(resumed.ra_hits_after_first > resumed.ra_hits_at_start,
          "resumed: rows of epoch 1 (the admission epoch) were read ahead");
    check(resumed.ra_reads_end == resumed.ra_reads_after_first, "resumed: the read-ahead reads nothing after epoch 1");
    check(resumed.storage_end == resumed.storage_after_first, "resumed: no storage read after epoch 1");
    if (g_rank == 0) printf("mpi_readahead: %d passed, %d failed\n", g_pass, g_fail);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return g_fail ? 1 : 0;
}
