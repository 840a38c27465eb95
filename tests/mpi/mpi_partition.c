/* Partitioned MinIO cache over MPI: run under mpirun with 2 or 4 ranks.
 * Builds its own dataset (rank 0 writes JPEGs, everyone waits), then checks:
 *  - every item is delivered exactly once per epoch across ranks;
 *  - storage reads per epoch from epoch 1 on equal the bytes no rank cached
 *    (0 when world x budget covers the dataset, 40% at 2 x 30%);
 *  - batches are identical to the same run without peers (determinism);
 *  - a peer that stops answering makes the others fall back to storage
 *    within peer_timeout_ms, with the same batches.
 * Prints "N passed, M failed" on rank 0; exit status non-zero on failure. */
#include "mpi_common.h"

#define EPOCHS 3

typedef struct run_out {
    unsigned long long hash[EPOCHS];
    uint64_t *ids;         /* delivered ids per epoch, concatenated */
    uint64_t nids[EPOCHS];
    uint64_t storage[EPOCHS];
    uint64_t dataset_bytes, cache_used, items;
    coordl_stats st;
} run_out;

static int g_hang_once;
static void hang_peer(void *u, const char *point) {
    (void)u;
    if (strcmp(point, "peer_serve") == 0 && g_hang_once) { g_hang_once = 0; usleep(1500 * 1000); }
}

static int run(const char *root, double budget, int with_peers, int hang_rank, int peer_timeout_ms, run_out *o) {
    memset(o, 0, sizeof *o);
    coordl_config cfg = coordl_config_default();
    cfg.source = root; cfg.batch_size = 8; cfg.out_w = cfg.out_h = 24; cfg.threads = 2; cfg.seed = 42;
    cfg.log = silent_log;
    MPI_Comm comm = MPI_COMM_WORLD;
    if (with_peers) cfg.mpi_comm = &comm;
    else { cfg.rank = g_rank; cfg.world = g_world; }
    cfg.peer_timeout_ms = peer_timeout_ms;
    if (hang_rank == g_rank) { g_hang_once = 1; cfg.test_hook = hang_peer; }
    /* a first open to learn the dataset's size */
    coordl_config probe = cfg;
    probe.mpi_comm = NULL; probe.rank = 0; probe.world = 1;
    coordl *P;
    if (coordl_open(&probe, &P) != COORDL_OK) { fprintf(stderr, "probe: %s\n", coordl_errmsg(NULL)); return 0; }
    coordl_stats ps;
    coordl_get_stats(P, &ps);
    coordl_close(P);
    cfg.cache_bytes = (uint64_t)(budget * (double)ps.dataset_bytes);
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) { fprintf(stderr, "rank %d open: %s\n", g_rank, coordl_errmsg(NULL)); return 0; }
    o->items = coordl_num_items(L);
    o->ids = malloc(sizeof(uint64_t) * o->items * EPOCHS);
    uint64_t at = 0;
    for (int e = 0; e < EPOCHS; e++) {
        unsigned long long h = 1469598103934665603ull;
        coordl_batch b;
        coordl_status rc;
        while ((rc = coordl_next(L, &b)) == COORDL_OK) {
            const unsigned char *p = b.data;
            for (size_t i = 0; i < b.data_bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
            for (uint32_t i = 0; i < b.n; i++) { h = (h ^ b.ids[i]) * 1099511628211ull; o->ids[at++] = b.ids[i]; }
            o->nids[e] += b.n;
            coordl_release(L, &b);
        }
        if (rc != COORDL_END_OF_EPOCH) { fprintf(stderr, "rank %d: %s\n", g_rank, coordl_errmsg(L)); coordl_close(L); return 0; }
        o->hash[e] = h;
    }
    for (int e = 0; e < EPOCHS; e++) {
        coordl_epoch_stats es;
        if (coordl_get_epoch_stats(L, (uint64_t)e, &es) == COORDL_OK) o->storage[e] = es.storage_bytes;
    }
    coordl_get_stats(L, &o->st);
    o->dataset_bytes = o->st.dataset_bytes;
    o->cache_used = o->st.cache_bytes_used;
    coordl_close(L);
    return 1;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    char root[512];
    mpi_start(&argc, &argv, "partition", root, sizeof root);
    make_dataset(root, 8, 25); /* 200 items */
    if (g_rank == 0) printf("mpi_partition: %d ranks\n", g_world);

    /* every item exactly once per epoch across ranks */
    run_out a;
    int ok = run(root, 0.30, 1, -1, 2000, &a);
    check(ok, "open and 3 epochs with peers");
    for (int e = 0; e < EPOCHS && ok; e++) {
        uint64_t share = a.nids[e], base = 0;
        for (int k = 0; k < e; k++) base += a.nids[k];
        uint64_t *all = g_rank == 0 ? malloc(sizeof(uint64_t) * share * (uint64_t)g_world) : NULL;
        MPI_Gather(a.ids + base, (int)share, MPI_UINT64_T, all, (int)share, MPI_UINT64_T, 0, MPI_COMM_WORLD);
        int once = 1;
        if (g_rank == 0) {
            uint64_t n = share * (uint64_t)g_world;
            qsort(all, n, sizeof *all, cmp_u64);
            for (uint64_t i = 1; i < n; i++) if (all[i] == all[i - 1]) once = 0;
            if (n != a.items / (uint64_t)g_world * (uint64_t)g_world) once = 0;
        }
        MPI_Bcast(&once, 1, MPI_INT, 0, MPI_COMM_WORLD);
        char what[96];
        snprintf(what, sizeof what, "epoch %d: every item once across ranks", e);
        check(once, what);
        free(all);
    }
    /* storage from epoch 1 on: the bytes no rank cached */
    uint64_t cached = 0, st1 = 0, st2 = 0;
    MPI_Allreduce(&a.cache_used, &cached, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&a.storage[1], &st1, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&a.storage[2], &st2, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    uint64_t expect = cached >= a.dataset_bytes ? 0 : a.dataset_bytes - cached;
    if (g_rank == 0)
        printf("  aggregate cache %.1f%% of the dataset; storage reads epoch 1 %.1f%%, epoch 2 %.1f%% (expected %.1f%%); "
               "peer hits %llu on rank 0\n", 100.0 * cached / a.dataset_bytes, 100.0 * st1 / a.dataset_bytes,
               100.0 * st2 / a.dataset_bytes, 100.0 * expect / a.dataset_bytes, (unsigned long long)a.st.peer_hits);
    /* with world x 30% < 100% the ranks together hold 60% at 2 ranks; the
     * items dropped by the equal-count split (N mod world) are read too */
    uint64_t slack = a.dataset_bytes / a.items * (a.items % (uint64_t)g_world + 1) * 2;
    check(st1 <= expect + slack && st1 + slack >= expect && st2 <= expect + slack && st2 + slack >= expect,
          "storage reads per epoch = dataset - aggregate cache");
    if (g_world * 30 >= 100) check(st1 == 0 && st2 == 0, "aggregate cache >= 100%: no storage reads from epoch 1");
    check(a.st.peer_fallbacks == 0, "no peer fallbacks when every peer answers");

    /* same batches without peers */
    run_out b;
    ok = run(root, 0.30, 0, -1, 2000, &b);
    int same = ok;
    for (int e = 0; e < EPOCHS && ok; e++) same &= a.hash[e] == b.hash[e];
    check(same, "batch hashes equal the run without peer fetching");

    /* a peer that stops answering: the others fall back within the bound */
    run_out c;
    double t0 = MPI_Wtime();
    ok = run(root, 0.30, 1, g_world - 1, 300, &c);
    double secs = MPI_Wtime() - t0;
    same = ok;
    for (int e = 0; e < EPOCHS && ok; e++) same &= c.hash[e] == a.hash[e];
    uint64_t fallbacks = 0;
    MPI_Allreduce(&c.st.peer_fallbacks, &fallbacks, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) printf("  silent peer: %llu fallbacks, %.1f s\n", (unsigned long long)fallbacks, secs);
    check(same, "a silent peer: same batches");
    check(fallbacks > 0, "a silent peer: requests fell back to storage");
    free(a.ids); free(b.ids); free(c.ids);
    return finish();
}
