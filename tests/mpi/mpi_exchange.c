/* The cache map exchange when things go wrong: run under mpirun with 2 or 4
 * ranks. Rank 0 has no cache at all (cache_bytes 0); the others can hold
 * everything.
 *  - the exchange must never need memory it may not get: the test fails
 *    every calloc that coordl.c makes from its peer thread (linked with
 *    -Wl,--wrap=calloc; see the Makefile). An exchange that gave up for
 *    want of memory once still declared the map ready, all zeros, so every
 *    rank asked rank 0 for every item, and rank 0, holding no cache,
 *    dereferenced a NULL cache table;
 *  - a rank without a cache is never asked (nothing maps to it), asks the
 *    others, and every rank's batches equal a run without peers. */
#include <pthread.h>
#include <stdatomic.h>

#include "mpi_common.h"

#define EPOCHS 3

void *__real_calloc(size_t count, size_t n);
void *__wrap_calloc(size_t count, size_t n);

static pthread_t g_main;
static _Atomic int g_armed;
static _Atomic long g_failed;

/* Fails callocs from coordl's own threads other than its workers (the
 * peer thread), once armed. */
void *__wrap_calloc(size_t count, size_t n) {
    if (atomic_load(&g_armed) && !pthread_equal(pthread_self(), g_main)) {
        char name[16] = "";
        pthread_getname_np(pthread_self(), name, sizeof name);
        if (strncmp(name, "coordl-w", 8) != 0) {
            atomic_fetch_add(&g_failed, 1);
            return NULL;
        }
    }
    return __real_calloc(count, n);
}

typedef struct run_out {
    unsigned long long hash[EPOCHS];
    uint64_t peer_hits, fallbacks, served;
} run_out;

static uint64_t g_bytes;

static int run(const char *root, int with_peers, run_out *o) {
    memset(o, 0, sizeof *o);
    MPI_Comm comm = MPI_COMM_WORLD;
    coordl_config cfg = coordl_config_default();
    cfg.source = root;
    cfg.batch_size = 4;
    cfg.out_w = cfg.out_h = 16;
    cfg.threads = 1;
    cfg.prefetch_batches = 2;
    cfg.seed = 3;
    cfg.log = silent_log;
    cfg.peer_timeout_ms = 500;
    cfg.cache_bytes = g_rank == 0 ? 0 : g_bytes;
    if (with_peers) cfg.mpi_comm = &comm;
    else { cfg.rank = g_rank; cfg.world = g_world; }
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "rank %d open: %s\n", g_rank, coordl_errmsg(NULL));
        return 0;
    }
    atomic_store(&g_armed, with_peers);
    int ok = 1;
    for (int e = 0; e < EPOCHS && ok; e++) ok = consume_epoch(L, &o->hash[e]) == COORDL_OK;
    coordl_stats st;
    coordl_get_stats(L, &st);
    o->peer_hits = st.peer_hits;
    o->fallbacks = st.peer_fallbacks;
    o->served = st.peer_served;
    coordl_close(L);
    atomic_store(&g_armed, 0);
    return ok;
}

int main(int argc, char **argv) {
    g_main = pthread_self();
    char root[512];
    mpi_start(&argc, &argv, "exchange", root, sizeof root);
    make_dataset(root, 4, 16); /* 64 items */
    g_bytes = dataset_bytes(root);
    if (g_rank == 0) printf("mpi_exchange: %d ranks\n", g_world);

    run_out a, b;
    watchdog("with peers, the peer thread's callocs failing", 60);
    int ok = run(root, 1, &a);
    const long failed = sum_u64((uint64_t)atomic_load(&g_failed));
    check(ok, "with peers, rank 0 without a cache, the peer thread's callocs failing: 3 epochs");
    if (g_rank == 0) printf("  callocs failed in coordl's peer threads: %ld\n", failed);
    watchdog("without peers", 60);
    int ok2 = run(root, 0, &b);
    int same = ok && ok2;
    for (int e = 0; e < EPOCHS && same; e++) same &= a.hash[e] == b.hash[e];
    check(same, "batches equal the run without peers");
    check(sum_u64(g_rank == 0 ? a.served : 0) == 0, "rank 0, without a cache, was asked for nothing");
    check(sum_u64(g_rank == 0 ? a.peer_hits : 0) > 0, "rank 0 got items from the others");
    check(sum_u64(a.fallbacks) == 0, "no peer fallbacks");
    watchdog("end", 0);
    return finish();
}
