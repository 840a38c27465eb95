/* The global order over MPI: run under mpirun with 2 or 4 ranks. Builds
 * six WebDataset tar shards of 11, 7, 16, 3, 9 and 15 samples (61 items:
 * not a multiple of the rank count), then, for the full shuffle and the
 * shard-window order (window 2), checks that rank r of P at batch size
 * G / P holds exactly the global positions r, r + P, ... of the 1-rank
 * order at batch size G (each rank opens the 1-rank loader itself as the
 * reference): row j of its batch k is position (k B + j) P + r, the same
 * id and the same pixels, for two epochs, with the partitioned cache on
 * (epoch 1 is served by peers). So the ranks' batch k together are the
 * 1-rank batch k, for 1, 2 and 4 ranks, in both orders. The 1-rank
 * reference in the shard-window order indexes its shards lazily (one
 * process: docs/shuffle.md), the ranks share rank 0's full index: its ids
 * (shard << 32 | ordinal) are mapped to the full index's dense ones (shard
 * by shard), so this also checks that both give the same items and pixels.
 * Prints "N passed, M failed" on rank 0; exit status non-zero on failure. */
#include "mpi_common.h"
#include "../tu_tar.h"

#define EPOCHS 2
#define G 8
static const int k_sizes[] = {11, 7, 16, 3, 9, 15};
#define NSH ((int)(sizeof k_sizes / sizeof k_sizes[0]))

static void make_shards(const char *root) {
    if (g_rank == 0) {
        mkdir(root, 0700);
        char jpg[700];
        snprintf(jpg, sizeof jpg, "%s/tmp.jpg", root);
        int item = 0;
        for (int s = 0; s < NSH; s++) {
            char path[700];
            snprintf(path, sizeof path, "%s/shard-%02d.tar", root, s);
            tu_tar t;
            tu_tar_open(&t, path);
            for (int i = 0; i < k_sizes[s]; i++, item++) {
                write_jpeg(jpg, 40 + (item * 13) % 40, 40 + (item * 5) % 30, (unsigned)(item + 1));
                FILE *f = fopen(jpg, "rb");
                if (!f) MPI_Abort(MPI_COMM_WORLD, 2);
                static unsigned char buf[1 << 16];
                size_t n = fread(buf, 1, sizeof buf, f);
                fclose(f);
                char name[64], cls[16];
                snprintf(name, sizeof name, "s%02d_%03d.cls", s, i);
                int cn = snprintf(cls, sizeof cls, "%d", s);
                tu_tar_file(&t, name, cls, (size_t)cn);
                snprintf(name, sizeof name, "s%02d_%03d.jpg", s, i);
                tu_tar_file(&t, name, buf, n);
            }
            tu_tar_close(&t, 1);
        }
        remove(jpg);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A lazy id as the full index's dense id (this set's ids run shard by
 * shard: .cls labels); a dense id as it is. */
static uint64_t dense_id(uint64_t id) {
    if (id >> 32 == 0) return id;
    uint64_t first = 0;
    for (uint64_t s = 0; s < (id >> 32); s++) first += (uint64_t)k_sizes[s];
    return first + (id & 0xFFFFFFFFu);
}

typedef struct rows {
    size_t n;
    uint64_t id[64 * EPOCHS], hash[64 * EPOCHS], epoch[64 * EPOCHS];
} rows;

/* Opens (peers: over MPI_COMM_WORLD at batch G / world; else the 1-rank
 * reference at batch G) and reads EPOCHS epochs row by row. */
static int run(const char *root, int shuffle, int peers, uint64_t cache_bytes, rows *r) {
    memset(r, 0, sizeof *r);
    coordl_config cfg = coordl_config_default();
    cfg.source = root; cfg.out_w = cfg.out_h = 12; cfg.layout = COORDL_U8_NHWC; cfg.threads = 2; cfg.seed = 11;
    cfg.log = silent_log; cfg.shuffle = shuffle; cfg.shuffle_window_shards = 2;
    MPI_Comm comm = MPI_COMM_WORLD;
    if (peers) { cfg.mpi_comm = &comm; cfg.batch_size = (uint32_t)(G / g_world); cfg.cache_bytes = cache_bytes; }
    else cfg.batch_size = G;
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) { fprintf(stderr, "rank %d open: %s\n", g_rank, coordl_errmsg(NULL)); return 0; }
    coordl_batch b;
    for (int e = 0; e < EPOCHS;) {
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) { e++; continue; }
        if (rc != COORDL_OK) { fprintf(stderr, "rank %d: %s\n", g_rank, coordl_errmsg(L)); coordl_close(L); return 0; }
        const size_t row = b.data_bytes / b.n;
        for (uint32_t i = 0; i < b.n && r->n < 64 * EPOCHS; i++) {
            unsigned long long h = 1469598103934665603ull;
            const unsigned char *p = (const unsigned char *)b.data + i * row;
            for (size_t k = 0; k < row; k++) h = (h ^ p[k]) * 1099511628211ull;
            r->id[r->n] = dense_id(b.ids[i]); r->hash[r->n] = h; r->epoch[r->n] = b.epoch; r->n++;
        }
        coordl_release(L, &b);
    }
    coordl_close(L);
    return 1;
}

int main(int argc, char **argv) {
    char root[512];
    mpi_start(&argc, &argv, "window", root, sizeof root);
    watchdog("dataset", 120);
    make_shards(root);
    if (G % g_world) { if (g_rank == 0) printf("needs a rank count dividing %d\n", G); return finish(); }
    static const int orders[2] = {COORDL_SHUFFLE_FULL, COORDL_SHUFFLE_SHARD_WINDOW};
    static const char *names[2] = {"full shuffle", "shard-window order (window 2)"};
    const uint64_t total = 11 + 7 + 16 + 3 + 9 + 15, share = total / (uint64_t)g_world;
    for (int o = 0; o < 2; o++) {
        watchdog(names[o], 120);
        static rows ref, mine;
        int ok = run(root, orders[o], 0, 0, &ref) && ref.n == total * EPOCHS;
        ok = ok && run(root, orders[o], 1, 1ull << 30, &mine) && mine.n == share * EPOCHS;
        /* row i of epoch e on this rank is global position i P + r of epoch e */
        for (size_t i = 0; ok && i < mine.n; i++) {
            const uint64_t e = mine.epoch[i], k = i - e * share;
            const size_t pos = (size_t)(e * total + k * (uint64_t)g_world + (uint64_t)g_rank);
            ok = ref.epoch[pos] == e && ref.id[pos] == mine.id[i] && ref.hash[pos] == mine.hash[i];
            if (!ok) fprintf(stderr, "rank %d: row %zu: id %llu, the 1-rank order has %llu\n", g_rank, i,
                             (unsigned long long)mine.id[i], (unsigned long long)ref.id[pos]);
        }
        char what[200];
        snprintf(what, sizeof what, "%s: %d ranks at batch %d hold the 1-rank batches of %d (ids and pixels)",
                 names[o], g_world, G / g_world, G);
        check(ok, what);
        /* together: every position of the first P x share of each epoch once */
        check(sum_u64(mine.n) == (uint64_t)g_world * share * EPOCHS, "the ranks' rows cover P x floor(N / P) per epoch");
    }
    watchdog("finish", 0);
    return finish();
}
