/* coordl_close over MPI: run under mpirun with 2 or 4 ranks.
 *  - close after 0, 1 and 2 epochs, every rank alike, repeated: the map
 *    exchange (a collective) and the closing barrier must pair up however
 *    far each rank's peer thread got (it once skipped the exchange when the
 *    close flag came first, and the ranks hung in different collectives);
 *  - one rank closes after an epoch (its map exchanged) while the others
 *    close before their first epoch was prepared, and the reverse;
 *  - close while a worker waits for a peer that does not answer returns
 *    without waiting out peer_timeout_ms (the wait honours stop).
 * A watchdog fails a run that does not finish within its bound. */
#include <stdatomic.h>

#include "mpi_common.h"

static uint64_t g_bytes;

static coordl_config close_config(const char *root) {
    coordl_config cfg = coordl_config_default();
    cfg.source = root;
    cfg.batch_size = 4;
    cfg.out_w = cfg.out_h = 16;
    cfg.threads = 1;
    cfg.prefetch_batches = 2;
    cfg.seed = 7;
    cfg.log = silent_log;
    cfg.cache_bytes = g_bytes; /* every rank could hold everything */
    return cfg;
}

/* Opens, consumes `epochs` epochs, waits delay_ms, closes. */
static int open_train_close(const char *root, int epochs, int delay_ms) {
    MPI_Comm comm = MPI_COMM_WORLD;
    coordl_config cfg = close_config(root);
    cfg.mpi_comm = &comm;
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "rank %d open: %s\n", g_rank, coordl_errmsg(NULL));
        return 0;
    }
    int ok = 1;
    for (int e = 0; e < epochs && ok; e++) ok = consume_epoch(L, NULL) == COORDL_OK;
    if (delay_ms) usleep((useconds_t)delay_ms * 1000);
    coordl_close(L);
    return ok;
}

/* --- a silent peer while closing ---------------------------------------- */
static _Atomic int g_hang_serve;      /* the next serve sleeps this long (ms) */
static _Atomic uint64_t g_last_row_ns; /* when a worker last finished a row    */

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void silent_peer_hook(void *u, const char *point) {
    (void)u;
    if (strcmp(point, "peer_serve") == 0) {
        int ms = atomic_exchange(&g_hang_serve, 0);
        if (ms) usleep((useconds_t)ms * 1000);
    } else if (strcmp(point, "row_written") == 0) {
        atomic_store(&g_last_row_ns, mono_ns());
    }
}

/* Epoch 0 fills every rank's cache, so in epoch 1 most rows come from
 * peers; the last rank's peer thread sleeps hang_ms on its first request.
 * Every other rank closes 300 ms into epoch 1's prefetch, while its worker
 * waits for that rank's reply (peer_timeout_ms 20 s). Returns, on those
 * ranks, how long after coordl_close began a worker still finished a row. */
static int close_during_peer_wait(const char *root, int hang_ms, double *lag_s) {
    MPI_Comm comm = MPI_COMM_WORLD;
    coordl_config cfg = close_config(root);
    cfg.mpi_comm = &comm;
    cfg.peer_timeout_ms = 20000;
    cfg.test_hook = silent_peer_hook;
    const int silent = g_rank == g_world - 1;
    atomic_store(&g_hang_serve, silent ? hang_ms : 0);
    atomic_store(&g_last_row_ns, 0);
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "rank %d open: %s\n", g_rank, coordl_errmsg(NULL));
        return 0;
    }
    int ok = consume_epoch(L, NULL) == COORDL_OK;
    usleep(300 * 1000);
    const uint64_t t0 = mono_ns();
    coordl_close(L);
    const uint64_t last = atomic_load(&g_last_row_ns);
    *lag_s = !silent && last > t0 ? (double)(last - t0) / 1e9 : 0.0;
    return ok;
}

int main(int argc, char **argv) {
    char root[512];
    mpi_start(&argc, &argv, "close", root, sizeof root);
    make_dataset(root, 4, 16); /* 64 items: 8 batches of 4 per rank at 2 ranks */
    g_bytes = dataset_bytes(root);
    if (g_rank == 0) printf("mpi_close: %d ranks\n", g_world);

    static const char *names[3] = {"close after 0 epochs", "close after 1 epoch", "close after 2 epochs"};
    const int repeats = 3;
    for (int epochs = 0; epochs <= 2; epochs++) {
        int ok = 1;
        for (int i = 0; i < repeats; i++) {
            watchdog(names[epochs], 30);
            ok &= open_train_close(root, epochs, 0);
        }
        watchdog("between runs", 0);
        char what[128];
        snprintf(what, sizeof what, "%s, every rank, %d runs: no hang", names[epochs], repeats);
        check(ok, what);
    }

    /* Rank 0 trains an epoch and lingers, so its peer thread has exchanged
     * its map before it closes; the others close at once, before their
     * first epoch was prepared (2 slots of 4 rows hold less than a share).
     * Then the same with the roles swapped. */
    for (int swap = 0; swap <= 1; swap++) {
        int ok = 1;
        for (int i = 0; i < 2; i++) {
            const int trains = (g_rank == 0) != swap;
            watchdog(swap ? "others train an epoch, rank 0 closes at once" : "rank 0 trains an epoch, others close at once", 30);
            ok &= open_train_close(root, trains ? 1 : 0, trains ? 100 : 0);
        }
        watchdog("between runs", 0);
        check(ok, swap ? "others close after an epoch, rank 0 before its first: no hang, 2 runs"
                       : "rank 0 closes after an epoch, the others before their first: no hang, 2 runs");
    }

    /* close while a worker waits for a silent peer */
    double lag = 0;
    watchdog("close during a peer wait", 60);
    int ok = close_during_peer_wait(root, 2500, &lag);
    watchdog("between runs", 0);
    double worst = 0;
    MPI_Allreduce(&lag, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (g_rank == 0) printf("  a worker finished its last row %.2f s after close began (peer silent for 2.5 s)\n", worst);
    check(ok && worst < 1.0, "close while a worker waits for a silent peer: the wait ends at once (< 1 s, not peer_timeout_ms)");
    return finish();
}
