/* One scan per job (docs/index.md): with mpi_comm, rank 0 alone indexes a
 * tar-shard source (scans it, or loads cfg.index_path) and the other ranks
 * receive its index by MPI_Bcast. A counting coordl_io counts the storage
 * calls (open and read) the opening thread makes inside coordl_open (the
 * workers' item reads are on their own threads and not counted): all the
 * ranks together make at most 1.1x the calls of one rank opening alone.
 * Every rank gets the same index (items, labels, paths) as the rank alone,
 * with and without a saved index, and the same batches. Run under mpirun
 * with 2 and 4 ranks. */
#include "mpi_common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>

static pthread_t g_main;
static atomic_long g_calls;

static void count(void) {
    if (pthread_equal(pthread_self(), g_main)) atomic_fetch_add(&g_calls, 1);
}
static int c_open(void *u, const char *path, void **file, uint64_t *size) {
    (void)u;
    count();
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat sb;
    if (fstat(fd, &sb) != 0) { close(fd); return -EIO; }
    *size = (uint64_t)sb.st_size;
    *file = (void *)(intptr_t)(fd + 1);
    return 0;
}
static int64_t c_read(void *u, void *file, void *buf, uint64_t len, uint64_t off) {
    (void)u;
    count();
    const ssize_t n = pread((int)(intptr_t)file - 1, buf, len, (off_t)off);
    return n < 0 ? -errno : n;
}
static void c_close(void *u, void *file) { (void)u; close((int)(intptr_t)file - 1); }
static const coordl_io g_io = {NULL, c_open, c_read, c_close};

/* FNV-1a of every item's path and label. */
static unsigned long long index_hash(coordl *L) {
    unsigned long long h = 1469598103934665603ull;
    for (uint64_t i = 0; i < coordl_num_items(L); i++) {
        const char *p = coordl_item_path(L, i);
        for (; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
        h = (h ^ (unsigned)coordl_item_label(L, i)) * 1099511628211ull;
    }
    return h;
}

/* 1 when this process maps a coordl-mpi-*.index file that is deleted (the
 * node's one copy of the index, unlinked once every rank mapped it). */
static int node_copy_mapped(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return 0;
    char line[4096];
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "/dev/shm/coordl-mpi-") && strstr(line, ".index (deleted)")) found = 1;
    fclose(f);
    return found;
}

typedef struct opened {
    int node_copy; /* the index is a mapping of the node's /dev/shm copy, its name already gone */
    long calls;
    uint64_t items;
    unsigned long long index, epoch;
} opened;

static int open_and_run(const char *source, const char *index_path, int with_mpi, opened *o) {
    MPI_Comm comm = MPI_COMM_WORLD;
    coordl_config cfg = coordl_config_default();
    cfg.source = source;
    cfg.index_path = index_path;
    cfg.io = &g_io;
    cfg.batch_size = 4;
    cfg.out_w = cfg.out_h = 16;
    cfg.threads = 1;
    cfg.seed = 3;
    cfg.log = silent_log;
    if (with_mpi) cfg.mpi_comm = &comm;
    coordl *L;
    atomic_store(&g_calls, 0);
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "rank %d open: %s\n", g_rank, coordl_errmsg(NULL));
        return 0;
    }
    o->calls = atomic_load(&g_calls);
    o->node_copy = node_copy_mapped();
    o->items = coordl_num_items(L);
    o->index = index_hash(L);
    /* with mpi_comm each rank reads its share; the rank alone reads all:
     * compare the epoch only between runs of the same kind */
    const int ok = consume_epoch(L, &o->epoch) == COORDL_OK;
    coordl_close(L);
    return ok;
}

/* Equal on every rank. */
static int agreed(unsigned long long v) {
    unsigned long long lo, hi;
    MPI_Allreduce(&v, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&v, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

int main(int argc, char **argv) {
    char root[512], shards[600], ix[600], cmd[4096];
    mpi_start(&argc, &argv, "index", root, sizeof root);
    g_main = pthread_self();
    make_dataset(root, 4, 6);
    snprintf(shards, sizeof shards, "%s-shards", root);
    snprintf(ix, sizeof ix, "%s-shards.cdlidx", root);
    if (g_rank == 0) { /* one shard per class folder, and no saved index yet */
        snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' && mkdir -p '%s' && for c in '%s'/c*; do tar -cf '%s'/$(basename $c).tar "
                 "-C '%s' $(basename $c); done", shards, ix, shards, root, shards, root);
        if (system(cmd) != 0) MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    watchdog("alone", 120);
    opened alone = {0}, job = {0}, saved = {0}, loaded = {0};
    int ok = 1;
    if (g_rank == 0) ok = open_and_run(shards, NULL, 0, &alone);
    MPI_Bcast(&alone, sizeof alone, MPI_BYTE, 0, MPI_COMM_WORLD);
    check(ok && alone.items == 24, "rank 0 alone indexes the 24 items of 4 shards");

    watchdog("job", 120);
    ok = open_and_run(shards, NULL, 1, &job);
    const uint64_t calls = sum_u64((uint64_t)job.calls);
    if (g_rank == 0)
        printf("  storage calls during open: %llu (1 rank alone), %llu (%d ranks together)\n",
               (unsigned long long)alone.calls, (unsigned long long)calls, g_world);
    check(ok, "every rank opens and runs an epoch");
    check(calls * 10 <= (uint64_t)alone.calls * 11, "all ranks together: at most 1.1x the storage calls of one");
    check(job.items == alone.items && job.index == alone.index && agreed(job.index),
          "every rank has rank 0's index (items, paths, labels)");
    check(sum_u64((uint64_t)job.node_copy) == (uint64_t)g_world,
          "every rank reads the index from its node's one copy in /dev/shm, unlinked once all mapped it");

    watchdog("saved", 120);
    ok = open_and_run(shards, ix, 1, &saved);
    const uint64_t calls_saved = sum_u64((uint64_t)saved.calls);
    check(ok && access(ix, R_OK) == 0, "with index_path: rank 0 saves the index");
    check(calls_saved * 10 <= (uint64_t)alone.calls * 11, "... the ranks still make one rank's calls");
    watchdog("loaded", 120);
    ok = open_and_run(shards, ix, 1, &loaded);
    const uint64_t calls_loaded = sum_u64((uint64_t)loaded.calls);
    if (g_rank == 0) printf("  storage calls during open with the saved index: %llu\n", (unsigned long long)calls_loaded);
    check(ok && calls_loaded < (uint64_t)alone.calls, "loading the saved index: fewer calls than a scan");
    check(saved.index == alone.index && loaded.index == alone.index && agreed(loaded.index),
          "saved and loaded: the same index on every rank");
    check(saved.epoch == job.epoch && loaded.epoch == job.epoch && agreed(0),
          "the same batches on each rank whether scanned, saved or loaded");
    watchdog("done", 0);
    return finish();
}
