/* The allocator hooks cover every allocation the library makes: run under
 * mpirun with 2 or 4 ranks, also under ASan.
 *
 * Linked with -Wl,--wrap for malloc, calloc, realloc, free and friends (see
 * the Makefile), so every call that coordl.c itself makes to the C
 * library's allocator lands in the __wrap_ functions below and is counted;
 * the allocations inside libjpeg, hwloc, MPI and libc (in shared libraries)
 * are not wrapped and not counted. This file allocates only through
 * __real_ functions. The hooks tag their blocks and keep a set of them,
 * so a hook block freed through libc free, or a libc block handed to the
 * hooks, is counted as a mismatch instead of corrupting the heap.
 *
 * The run exercises the peer paths (map exchange, requests, replies, send
 * buffers), a seek, and, on rank 0, DS-Analyzer (coordl_analyze and
 * coordl_report_free). Expected: no libc allocator call from the library,
 * hooks balanced (nothing live after close / report_free), no mismatch. */
#include <pthread.h>
#include <stdatomic.h>

#include "mpi_common.h"

/* --- the C library's allocator, as the library would reach it --------- */
void *__real_malloc(size_t n);
void *__real_calloc(size_t count, size_t n);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);

static _Atomic long g_libc_calls;   /* calls coordl.c made to libc's allocator */
static const char *volatile g_libc_first; /* the first such function      */

static void libc_called(const char *fn) {
    if (atomic_fetch_add(&g_libc_calls, 1) == 0) g_libc_first = fn;
}

/* --- hooks: tagged blocks, a set of live ones ---------------------------- */
#define HEAD 16
#define SET_CAP (1u << 16)
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static void *g_live_set[SET_CAP]; /* open addressing; (void *)1 = deleted */
static long g_live, g_calls, g_mismatch, g_set_full;

static size_t slot_of(void *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >> 48) & (SET_CAP - 1); }

static void set_add(void *p) { /* under g_mu */
    for (size_t i = slot_of(p), k = 0; k < SET_CAP; i = (i + 1) & (SET_CAP - 1), k++)
        if (!g_live_set[i] || g_live_set[i] == (void *)1) { g_live_set[i] = p; return; }
    g_set_full++;
}

static int set_remove(void *p) { /* under g_mu */
    for (size_t i = slot_of(p), k = 0; k < SET_CAP && g_live_set[i]; i = (i + 1) & (SET_CAP - 1), k++)
        if (g_live_set[i] == p) { g_live_set[i] = (void *)1; return 1; }
    return 0;
}

static void *hook_malloc(void *u, size_t n) {
    (void)u;
    unsigned char *b = __real_malloc(n + HEAD);
    if (!b) return NULL;
    pthread_mutex_lock(&g_mu);
    set_add(b + HEAD);
    g_live++;
    g_calls++;
    pthread_mutex_unlock(&g_mu);
    return b + HEAD;
}

static void hook_free(void *u, void *p) {
    (void)u;
    if (!p) return;
    pthread_mutex_lock(&g_mu);
    int mine = set_remove(p);
    if (mine) g_live--; else g_mismatch++;
    pthread_mutex_unlock(&g_mu);
    if (mine) __real_free((unsigned char *)p - HEAD); /* else: leak it rather than corrupt the heap */
}

static void *hook_realloc(void *u, void *p, size_t n) {
    if (!p) return hook_malloc(u, n);
    pthread_mutex_lock(&g_mu);
    int mine = set_remove(p);
    if (!mine) g_mismatch++;
    pthread_mutex_unlock(&g_mu);
    if (!mine) return NULL;
    unsigned char *b = __real_realloc((unsigned char *)p - HEAD, n + HEAD);
    pthread_mutex_lock(&g_mu);
    set_add(b ? b + HEAD : p); /* a failed realloc leaves the block live */
    g_calls++;
    pthread_mutex_unlock(&g_mu);
    return b ? b + HEAD : NULL;
}

/* --- the wrapped libc allocator: counts, then behaves ------------------- */
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t count, size_t n);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
void *__wrap_malloc(size_t n) { libc_called("malloc"); return __real_malloc(n); }
void *__wrap_calloc(size_t count, size_t n) { libc_called("calloc"); return __real_calloc(count, n); }
void *__wrap_realloc(void *p, size_t n) {
    libc_called("realloc");
    pthread_mutex_lock(&g_mu);
    int mine = p && set_remove(p);
    if (mine) { g_mismatch++; set_add(p); }
    pthread_mutex_unlock(&g_mu);
    return mine ? NULL : __real_realloc(p, n);
}
void __wrap_free(void *p) {
    libc_called("free");
    pthread_mutex_lock(&g_mu);
    int mine = p && set_remove(p);
    if (mine) { g_mismatch++; g_live--; }
    pthread_mutex_unlock(&g_mu);
    __real_free(mine ? (unsigned char *)p - HEAD : p);
}

/* not used by coordl.c today; wrapped so that a future use is counted */
void *__real_reallocarray(void *p, size_t count, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
void *__wrap_reallocarray(void *p, size_t count, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
void *__wrap_reallocarray(void *p, size_t count, size_t n) { libc_called("reallocarray"); return __real_reallocarray(p, count, n); }
char *__wrap_strdup(const char *s) { libc_called("strdup"); return __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { libc_called("strndup"); return __real_strndup(s, n); }
int __wrap_posix_memalign(void **p, size_t align, size_t n) { libc_called("posix_memalign"); return __real_posix_memalign(p, align, n); }
void *__wrap_aligned_alloc(size_t align, size_t n) { libc_called("aligned_alloc"); return __real_aligned_alloc(align, n); }

static long live_now(void) {
    pthread_mutex_lock(&g_mu);
    long v = g_live;
    pthread_mutex_unlock(&g_mu);
    return v;
}

int main(int argc, char **argv) {
    char root[512];
    mpi_start(&argc, &argv, "hooks", root, sizeof root);
    make_dataset(root, 4, 16); /* 64 items */
    const uint64_t bytes = dataset_bytes(root);
    if (g_rank == 0) printf("mpi_hooks: %d ranks\n", g_world);
    atomic_store(&g_libc_calls, 0); /* count from here: the loader under test */

    MPI_Comm comm = MPI_COMM_WORLD;
    coordl_config cfg = coordl_config_default();
    cfg.source = root;
    cfg.batch_size = 4;
    cfg.out_w = cfg.out_h = 16;
    cfg.threads = 1;
    cfg.prefetch_batches = 2;
    cfg.log = silent_log;
    cfg.cache_bytes = bytes;
    cfg.mpi_comm = &comm;
    cfg.allocator.malloc_fn = hook_malloc;
    cfg.allocator.realloc_fn = hook_realloc;
    cfg.allocator.free_fn = hook_free;
    watchdog("three epochs with peers", 60);
    coordl *L;
    int ok = coordl_open(&cfg, &L) == COORDL_OK;
    if (!ok) fprintf(stderr, "rank %d open: %s\n", g_rank, coordl_errmsg(NULL));
    coordl_stats st;
    memset(&st, 0, sizeof st);
    if (ok) {
        for (int e = 0; e < 3 && ok; e++) ok = consume_epoch(L, NULL) == COORDL_OK;
        if (ok) ok = coordl_seek(L, 1, 1) == COORDL_OK && consume_epoch(L, NULL) == COORDL_OK;
        coordl_get_stats(L, &st);
        coordl_close(L);
    }
    check(ok, "open, 3 epochs with peers, seek, an epoch, close");
    check(sum_u64(st.peer_hits) > 0, "the peer paths ran (peer hits > 0)");

    /* DS-Analyzer on rank 0, per rank (no peers), the same hooks */
    int aok = 1;
    if (g_rank == 0) {
        watchdog("coordl_analyze", 120);
        coordl_config ac = cfg;
        ac.mpi_comm = NULL;
        coordl_analyze_opts o;
        memset(&o, 0, sizeof o);
        o.batches = 4;
        o.synthetic_step_ms = 1.0;
        coordl_report r;
        aok = coordl_analyze(&ac, NULL, NULL, &o, &r) == COORDL_OK;
        if (!aok) fprintf(stderr, "analyze: %s\n", coordl_errmsg(NULL));
        aok &= r.n_whatif > 0;
        coordl_report_free(&r);
    }
    watchdog("end", 0);
    check(aok, "rank 0: coordl_analyze and coordl_report_free with the hooks");

    const long libc = atomic_load(&g_libc_calls), live = live_now();
    pthread_mutex_lock(&g_mu);
    const long calls = g_calls, mismatch = g_mismatch, full = g_set_full;
    pthread_mutex_unlock(&g_mu);
    printf("  rank %d: %ld hook calls, %ld live after close, %ld mismatched, %ld libc allocator calls%s%s%s\n",
           g_rank, calls, live, mismatch, libc, libc ? " (the first: " : "", libc ? g_libc_first : "", libc ? ")" : "");
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    check(calls > 0 && full == 0, "the hooks were used");
    check(libc == 0, "no allocation or free through the C library's allocator");
    check(mismatch == 0, "no hook block freed by libc, no libc block given to the hooks");
    check(live == 0, "every hook allocation freed through the hooks");
    return finish();
}
