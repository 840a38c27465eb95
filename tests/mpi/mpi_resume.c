/* Resuming a partitioned cache from a checkpoint: run under mpirun with 2
 * or 4 ranks. A trainer that resumes opens the loader and seeks to where it
 * stopped. Each rank must then cache its share of the first whole epoch it
 * trains, exactly as a fresh run caches its share of epoch 0, so that from
 * the next epoch on storage reads are the same as in a run that never
 * stopped (here 0: the ranks' budgets together cover the dataset), and the
 * batches are the same too.
 *  - seek at open to (epoch 1, batch 0): storage reads of epochs 2 and 3
 *    equal the uninterrupted run's;
 *  - seek at open to the middle of epoch 1: epoch 2 is the first whole
 *    one; storage reads of epoch 3 equal the uninterrupted run's. */
#include "mpi_common.h"

#define EPOCHS 4

typedef struct run_out {
    unsigned long long hash[EPOCHS];
    uint64_t storage[EPOCHS];
    uint64_t peer_hits, fallbacks;
} run_out;

static uint64_t g_bytes;

static int run(const char *root, uint64_t seek_epoch, int seek_mid, run_out *o) {
    memset(o, 0, sizeof *o);
    MPI_Comm comm = MPI_COMM_WORLD;
    coordl_config cfg = coordl_config_default();
    cfg.source = root;
    cfg.batch_size = 4;
    cfg.out_w = cfg.out_h = 16;
    cfg.threads = 1;
    cfg.prefetch_batches = 2;
    cfg.seed = 11;
    cfg.log = silent_log;
    cfg.mpi_comm = &comm;
    /* a rank's share, plus room for the 2 batches prepared before the seek
     * arrives (admitted as epoch 0's), plus slack for uneven item sizes */
    cfg.cache_bytes = (uint64_t)((double)g_bytes * (1.0 / g_world + 0.25));
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "rank %d open: %s\n", g_rank, coordl_errmsg(NULL));
        return 0;
    }
    const uint64_t batch = seek_mid ? coordl_batches_per_epoch(L) / 2 : 0;
    int ok = 1;
    if (seek_epoch || batch) ok = coordl_seek(L, seek_epoch, batch) == COORDL_OK;
    for (uint64_t e = seek_epoch; e < EPOCHS && ok; e++) ok = consume_epoch(L, &o->hash[e]) == COORDL_OK;
    for (uint64_t e = 0; e < EPOCHS; e++) {
        coordl_epoch_stats es;
        if (coordl_get_epoch_stats(L, e, &es) == COORDL_OK) o->storage[e] = sum_u64(es.storage_bytes);
        else o->storage[e] = sum_u64(0);
    }
    coordl_stats st;
    coordl_get_stats(L, &st);
    o->peer_hits = sum_u64(st.peer_hits);
    o->fallbacks = sum_u64(st.peer_fallbacks);
    coordl_close(L);
    return ok;
}

int main(int argc, char **argv) {
    char root[512];
    mpi_start(&argc, &argv, "resume", root, sizeof root);
    make_dataset(root, 4, 24); /* 96 items */
    g_bytes = dataset_bytes(root);
    if (g_rank == 0) printf("mpi_resume: %d ranks\n", g_world);

    run_out ref, seek, mid;
    watchdog("uninterrupted run", 60);
    int ok = run(root, 0, 0, &ref);
    check(ok, "uninterrupted run, 4 epochs");
    if (g_rank == 0)
        printf("  uninterrupted: storage bytes per epoch %llu %llu %llu %llu (all ranks)\n",
               (unsigned long long)ref.storage[0], (unsigned long long)ref.storage[1],
               (unsigned long long)ref.storage[2], (unsigned long long)ref.storage[3]);
    check(ok && ref.storage[2] == 0 && ref.storage[3] == 0,
          "uninterrupted: no storage reads after epoch 0 (budgets cover the dataset)");

    watchdog("seek at open to epoch 1", 60);
    ok = run(root, 1, 0, &seek);
    check(ok, "open, seek to (1, 0), epochs 1-3");
    if (g_rank == 0)
        printf("  resumed at epoch 1: storage bytes per epoch - %llu %llu %llu\n",
               (unsigned long long)seek.storage[1], (unsigned long long)seek.storage[2],
               (unsigned long long)seek.storage[3]);
    check(ok && seek.storage[2] == ref.storage[2] && seek.storage[3] == ref.storage[3],
          "resumed at epoch 1: storage reads of epochs 2 and 3 equal the uninterrupted run's");
    check(ok && seek.hash[1] == ref.hash[1] && seek.hash[2] == ref.hash[2] && seek.hash[3] == ref.hash[3],
          "resumed at epoch 1: batches of epochs 1-3 equal the uninterrupted run's");
    check(ok && seek.fallbacks == 0 && seek.peer_hits > 0, "resumed at epoch 1: rows came from peers, no fallbacks");

    watchdog("seek at open to the middle of epoch 1", 60);
    ok = run(root, 1, 1, &mid);
    check(ok, "open, seek to the middle of epoch 1, epochs 1-3");
    if (g_rank == 0)
        printf("  resumed mid-epoch 1: storage bytes per epoch - %llu %llu %llu\n",
               (unsigned long long)mid.storage[1], (unsigned long long)mid.storage[2],
               (unsigned long long)mid.storage[3]);
    check(ok && mid.storage[3] == ref.storage[3],
          "resumed mid-epoch: storage reads of epoch 3 equal the uninterrupted run's");
    check(ok && mid.hash[2] == ref.hash[2] && mid.hash[3] == ref.hash[3],
          "resumed mid-epoch: batches of epochs 2-3 equal the uninterrupted run's");
    watchdog("end", 0);
    return finish();
}
