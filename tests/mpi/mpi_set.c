/* coordl_set(BATCH_SIZE) above the open-time capacity with a partitioned
 * cache: run under mpirun with 2 or 4 ranks (and under ASan: the per-slot
 * peer bookkeeping must grow with the ring; it once kept the open-time row
 * count and a peer request for the bigger batch wrote past it).
 * Batches after the change must equal a run without peers, with the rows
 * beyond the old capacity fetched from peers and no fallbacks. */
#include "mpi_common.h"

#define EPOCHS 3

typedef struct run_out {
    unsigned long long hash[EPOCHS];
    uint64_t peer_hits, fallbacks;
    int rows_after; /* largest batch seen after the change */
} run_out;

static uint64_t g_bytes;

static int run(const char *root, int with_peers, run_out *o) {
    memset(o, 0, sizeof *o);
    MPI_Comm comm = MPI_COMM_WORLD;
    coordl_config cfg = coordl_config_default();
    cfg.source = root;
    cfg.batch_size = 4; /* capacity at open: 4 rows per slot */
    cfg.out_w = cfg.out_h = 16;
    cfg.threads = 1;
    cfg.prefetch_batches = 2;
    cfg.seed = 5;
    cfg.log = silent_log;
    cfg.cache_bytes = g_bytes;
    if (with_peers) cfg.mpi_comm = &comm;
    else { cfg.rank = g_rank; cfg.world = g_world; }
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "rank %d open: %s\n", g_rank, coordl_errmsg(NULL));
        return 0;
    }
    int ok = consume_epoch(L, &o->hash[0]) == COORDL_OK;
    /* the map is exchanged after epoch 0; now 4x the rows per batch */
    if (ok && coordl_set(L, COORDL_PARAM_BATCH_SIZE, 16) != COORDL_OK) {
        fprintf(stderr, "rank %d set: %s\n", g_rank, coordl_errmsg(L));
        ok = 0;
    }
    for (int e = 1; e < EPOCHS && ok; e++) {
        coordl_batch b;
        coordl_status rc;
        unsigned long long h = 1469598103934665603ull;
        while ((rc = coordl_next(L, &b)) == COORDL_OK) {
            const unsigned char *p = b.data;
            for (size_t i = 0; i < b.data_bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
            for (uint32_t i = 0; i < b.n; i++) h = (h ^ b.ids[i]) * 1099511628211ull;
            if ((int)b.n > o->rows_after) o->rows_after = (int)b.n;
            coordl_release(L, &b);
        }
        if (rc != COORDL_END_OF_EPOCH) {
            fprintf(stderr, "rank %d: %s\n", g_rank, coordl_errmsg(L));
            ok = 0;
        }
        o->hash[e] = h;
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
    mpi_start(&argc, &argv, "set", root, sizeof root);
    make_dataset(root, 4, 32); /* 128 items: 2 or 4 batches of 16 per rank */
    g_bytes = dataset_bytes(root);
    if (g_rank == 0) printf("mpi_set: %d ranks\n", g_world);

    run_out a, b;
    watchdog("with peers, batch 4 then 16", 60);
    int ok = run(root, 1, &a);
    check(ok, "with peers: epoch 0 at batch 4, coordl_set(BATCH_SIZE, 16), epochs 1-2");
    check(ok && a.rows_after == 16, "batches of 16 rows after the change");
    watchdog("without peers", 60);
    int ok2 = run(root, 0, &b);
    int same = ok && ok2;
    for (int e = 0; e < EPOCHS && same; e++) same &= a.hash[e] == b.hash[e];
    check(same, "batches equal the run without peers");
    if (g_rank == 0)
        printf("  peer hits %llu, fallbacks %llu (all ranks)\n", (unsigned long long)a.peer_hits,
               (unsigned long long)a.fallbacks);
    check(ok && a.peer_hits > 0 && a.fallbacks == 0, "rows came from peers after the change, no fallbacks");
    watchdog("end", 0);
    return finish();
}
