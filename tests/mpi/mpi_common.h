/* Shared by the tests under tests/mpi: each runs under mpirun (2 and 4
 * ranks), builds its own small JPEG dataset (rank 0 writes, everyone
 * waits), checks agreed results across ranks, and prints "N passed, M
 * failed" on rank 0 (exit status non-zero on a failure). A watchdog turns a
 * hang into a failure that names the step (mpirun then stops every rank),
 * so a deadlock never stalls the suite. */
#ifndef MPI_COMMON_H
#define MPI_COMMON_H

#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h> /* after stdio.h: it needs FILE and size_t */
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "coordl.h"

static int g_rank, g_world, g_pass, g_fail;

/* Every rank passes its verdict; all agree on the result. */
static inline void check(int ok, const char *what) {
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (g_rank == 0) printf("  %s: %s\n", all_ok ? "ok  " : "FAIL", what);
    if (all_ok) g_pass++; else g_fail++;
    fflush(stdout);
}

static inline int finish(void) {
    if (g_rank == 0) printf("%d passed, %d failed\n", g_pass, g_fail);
    MPI_Finalize();
    return g_fail ? 1 : 0;
}

/* --- watchdog: a step that does not finish in time fails the run ------ */
static const char *volatile g_step = "start";

static inline void on_watchdog(int sig) {
    (void)sig;
    char msg[256];
    int n = snprintf(msg, sizeof msg, "rank %d: HANG: no progress within the watchdog's bound in \"%s\"\n",
                     g_rank, g_step);
    if (n > 0) (void)!write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
    _exit(3);
}

/* Arms the watchdog for one step; 0 disarms it. */
static inline void watchdog(const char *step, unsigned seconds) {
    g_step = step;
    signal(SIGALRM, on_watchdog);
    alarm(seconds);
}

static inline void silent_log(void *u, coordl_log_level l, const char *m) { (void)u; (void)l; (void)m; }

/* MPI_Init_thread with MPI_THREAD_MULTIPLE (the peer thread), g_rank and
 * g_world; root gets the test's own dataset directory,
 * "<argv[1] or build/mpi-data>-<name>". */
static inline void mpi_start(int *argc, char ***argv, const char *name, char *root, size_t root_size) {
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world);
    snprintf(root, root_size, "%s-%s", *argc > 1 ? (*argv)[1] : "build/mpi-data", name);
}

/* --- dataset ---------------------------------------------------------- */
static inline void write_jpeg(const char *path, int w, int h, unsigned seed) {
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
    if (!row) { fprintf(stderr, "write_jpeg: out of memory\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    while (c.next_scanline < c.image_height) {
        for (int x = 0; x < w; x++) {
            unsigned v = (unsigned)(x * 7 + (int)c.next_scanline * 3) * (seed | 1u);
            row[3 * x] = (unsigned char)(v >> 3); row[3 * x + 1] = (unsigned char)(v >> 7); row[3 * x + 2] = (unsigned char)seed;
        }
        JSAMPROW r = row;
        jpeg_write_scanlines(&c, &r, 1);
    }
    free(row);
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    fclose(f);
}

/* classes x per_class JPEGs of 40-79 x 40-69 pixels under root. */
static inline void make_dataset(const char *root, int classes, int per_class) {
    if (g_rank == 0) {
        mkdir(root, 0700);
        for (int k = 0; k < classes; k++) {
            char dir[600];
            snprintf(dir, sizeof dir, "%s/c%02d", root, k);
            mkdir(dir, 0700);
            for (int i = 0; i < per_class; i++) {
                char path[700];
                snprintf(path, sizeof path, "%s/img%03d.jpg", dir, i);
                write_jpeg(path, 40 + (i * 13 + k * 7) % 40, 40 + (i * 5 + k) % 30, (unsigned)(k * 1000 + i));
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* The dataset's encoded bytes (one throwaway single-rank open). */
static inline uint64_t dataset_bytes(const char *root) {
    coordl_config c = coordl_config_default();
    c.source = root;
    c.threads = 1;
    c.log = silent_log;
    coordl *P;
    if (coordl_open(&c, &P) != COORDL_OK) { fprintf(stderr, "probe: %s\n", coordl_errmsg(NULL)); return 0; }
    coordl_stats s;
    coordl_get_stats(P, &s);
    coordl_close(P);
    return s.dataset_bytes;
}

/* Consumes one epoch up to COORDL_END_OF_EPOCH; FNV-1a of ids and bytes
 * into *hash (when given). COORDL_OK when the epoch ended normally. */
static inline coordl_status consume_epoch(coordl *L, unsigned long long *hash) {
    unsigned long long h = 1469598103934665603ull;
    coordl_batch b;
    coordl_status rc;
    while ((rc = coordl_next(L, &b)) == COORDL_OK) {
        const unsigned char *p = b.data;
        for (size_t i = 0; i < b.data_bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
        for (uint32_t i = 0; i < b.n; i++) h = (h ^ b.ids[i]) * 1099511628211ull;
        coordl_release(L, &b);
    }
    if (hash) *hash = h;
    if (rc != COORDL_END_OF_EPOCH) {
        fprintf(stderr, "rank %d: %s: %s\n", g_rank, coordl_strerror(rc), coordl_errmsg(L));
        return rc;
    }
    return COORDL_OK;
}

static inline uint64_t sum_u64(uint64_t v) {
    uint64_t s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return s;
}

#endif
