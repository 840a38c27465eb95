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
#include <pthread.h>

#include "mpi_common.h"

#define EPOCHS 3
static uint64_t g_bytes;

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
    /* said when a check fails, to tell the causes apart */
    uint64_t cache_items, peer_hits, peer_fallbacks, cache_hits_end, cache_misses_end, items_end;
} run_out;

/* Consumes epochs from `first` to EPOCHS - 1 (a seek at open when first is
 * not 0), with a cache of budget_pct percent of the dataset per rank. */
static int run(const char *root, uint32_t readahead, uint64_t first, int budget_pct, int seek_delay_ms, run_out *o) {
    coordl_io slow = *coordl_io_posix();
    slow.read_at = slow_worker_read_at;
    memset(o, 0, sizeof *o);
    coordl_config cfg = coordl_config_default();
    cfg.source = root; cfg.batch_size = 8; cfg.out_w = cfg.out_h = 24; cfg.threads = 2; cfg.seed = 7;
    cfg.log = silent_log;
    cfg.readahead_items = readahead;
    MPI_Comm comm = MPI_COMM_WORLD;
    cfg.mpi_comm = &comm;
    if (g_bytes == 0) return 0; /* the probe failed */
    cfg.cache_bytes = g_bytes * (uint64_t)budget_pct / 100;
    cfg.io = &slow;
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) { fprintf(stderr, "rank %d open: %s\n", g_rank, coordl_errmsg(NULL)); return 0; }
    /* a resume that comes late: the workers have meanwhile prepared the
     * rank's whole share of epoch 0 (the ring holds it) */
    if (seek_delay_ms) usleep((useconds_t)seek_delay_ms * 1000);
    if (first && coordl_seek(L, first, 0) != COORDL_OK) {
        fprintf(stderr, "rank %d seek: %s\n", g_rank, coordl_errmsg(L));
        coordl_close(L);
        return 0;
    }
    coordl_stats s0;
    coordl_get_stats(L, &s0); /* the rows prepared before the seek are done with */
    o->ra_hits_at_start = s0.readahead_hits;
    for (uint64_t e = first; e < EPOCHS; e++) {
        if (consume_epoch(L, &o->hash[e]) != COORDL_OK) { coordl_close(L); return 0; }
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
    o->cache_items = s.cache_items;
    o->peer_hits = s.peer_hits;
    o->peer_fallbacks = s.peer_fallbacks;
    o->cache_hits_end = s.cache_hits;
    o->cache_misses_end = s.cache_misses;
    o->items_end = s.items;
    coordl_close(L);
    return 1;
}

int main(int argc, char **argv) {
    char root[512];
    mpi_start(&argc, &argv, "ra", root, sizeof root);
    make_dataset(root, 3, 24); /* 72 items */
    g_bytes = dataset_bytes(root);
    if (g_rank == 0) printf("mpi_readahead: %d ranks\n", g_world);
    run_out off, on, resumed, late;
    int ok = run(root, 0, 0, 60, 0, &off);
    check(ok, "the run without read-ahead");
    ok = run(root, 32, 0, 60, 0, &on);
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
    ok = run(root, 32, 1, 100, 0, &resumed);
    check(ok, "the run resumed at epoch 1 with read-ahead 32");
    same = 1;
    for (int e = 1; e < EPOCHS; e++) same &= off.hash[e] == resumed.hash[e];
    check(same, "resumed: batches equal those of the uninterrupted run");
    check(resumed.ra_hits_after_first > resumed.ra_hits_at_start,
          "resumed: rows of epoch 1 (the admission epoch) were read ahead");
    check(resumed.ra_reads_end == resumed.ra_reads_after_first, "resumed: the read-ahead reads nothing after epoch 1");
    check(resumed.storage_end == resumed.storage_after_first, "resumed: no storage read after epoch 1");
    /* resumed with the seek 500 ms after open on even ranks, when their
     * workers have long prepared their share of epoch 0 and wait at its
     * end: the map exchange must still wait for the seek (it waits for
     * the first coordl_next), or those ranks would enter the share of
     * epoch 0 and the others that of epoch 1, and the items of neither
     * share would come from storage in every later epoch (a flaky check
     * in CI: a rank's trainer thread starved between open and seek) */
    ok = run(root, 32, 1, 100, g_rank % 2 == 0 ? 500 : 0, &late);
    check(ok, "the run resumed at epoch 1, late on even ranks");
    same = 1;
    for (int e = 1; e < EPOCHS; e++) same &= off.hash[e] == late.hash[e];
    check(same, "resumed late: batches equal those of the uninterrupted run");
    check(late.storage_end == late.storage_after_first, "resumed late: no storage read after epoch 1");
    if (late.storage_end != late.storage_after_first)
        fprintf(stderr, "rank %d resumed late: storage reads %llu then %llu; cached %llu items, peer hits %llu\n",
                g_rank, (unsigned long long)late.storage_after_first, (unsigned long long)late.storage_end,
                (unsigned long long)late.cache_items, (unsigned long long)late.peer_hits);
    if (resumed.storage_end != resumed.storage_after_first || resumed.ra_reads_end != resumed.ra_reads_after_first)
        fprintf(stderr, "rank %d resumed: storage reads %llu then %llu, read-ahead reads %llu then %llu; "
                "cached %llu items, cache hits %llu, misses %llu, peer hits %llu, peer fallbacks %llu, items %llu\n",
                g_rank, (unsigned long long)resumed.storage_after_first, (unsigned long long)resumed.storage_end,
                (unsigned long long)resumed.ra_reads_after_first, (unsigned long long)resumed.ra_reads_end,
                (unsigned long long)resumed.cache_items, (unsigned long long)resumed.cache_hits_end,
                (unsigned long long)resumed.cache_misses_end, (unsigned long long)resumed.peer_hits,
                (unsigned long long)resumed.peer_fallbacks, (unsigned long long)resumed.items_end);
    return finish();
}
