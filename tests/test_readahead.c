/*
 * test_readahead.c - read-ahead in the known order (readahead_items): I/O
 * threads read the items the workers will claim next into an arena the
 * workers decode from.
 *
 *   - batches are byte-identical with read-ahead off and at any depth,
 *     thread count and arena size (one smaller than some items), with a
 *     MinIO or LRU cache, and across coordl_seek and coordl_set;
 *   - the read-ahead reads in claim order (the epoch's permutation), keeps
 *     several reads in flight at once, and skips cache hits;
 *   - nothing is allocated per item in the steady state (allocator hooks);
 *   - closing with reads in flight waits for them, leaks nothing (ASan);
 *   - a coordinated group does not read ahead; coordl_get_config says what
 *     runs; bad values are refused naming the field.
 * Speed is the benchmark's business (bench/bench_storage.c), not this file's.
 */
#include "test_util.h"
#include "tu_io.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char *g_dir;
static char *g_tree; /* 3 classes x 16 textured JPEGs of 20..36 px: 48 items */
static const tu_folder_spec SPEC = {3, 16, 20, 20, 16, TU_PAT_TEXTURED, TU_FMT_JPEG, 90, 9};
#define N_ITEMS 48

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    g_tree = tu_join(g_dir, "tree");
    tu_make_image_folder(g_tree, &SPEC);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_tree);
    return 0;
}

static coordl_config ra_config(uint32_t depth)
{
    coordl_config cfg = tu_config(g_tree);
    cfg.batch_size = 5;
    cfg.out_w = cfg.out_h = 14;
    cfg.layout = COORDL_F32_NCHW;
    cfg.seed = 11;
    cfg.readahead_items = depth;
    return cfg;
}

static tu_run run3(const coordl_config *cfg)
{
    coordl *L = tu_open(cfg);
    tu_run r;
    memset(&r, 0, sizeof r);
    if (tu_run_epochs(L, 3, &r) != COORDL_OK) fail_msg("%s", coordl_errmsg(L));
    coordl_close(L);
    return r;
}

static void assert_same(const tu_run *a, const tu_run *b, const char *what)
{
    if (a->nbatches != b->nbatches) fail_msg("%s: %zu batches, expected %zu", what, b->nbatches, a->nbatches);
    for (size_t i = 0; i < a->nbatches; i++)
        if (a->hash[i] != b->hash[i]) fail_msg("%s: batch %zu differs from read-ahead off", what, i);
}

/* ---- the same batches ----------------------------------------------------- */

static void test_batches_identical_at_every_depth(void **state)
{
    (void)state;
    coordl_config cfg = ra_config(0);
    tu_run want = run3(&cfg);
    uint64_t largest = 0;
    for (int k = 0; k < SPEC.classes; k++)
        for (int j = 0; j < SPEC.per_class; j++) {
            char *p = tu_folder_file(g_tree, &SPEC, k, j);
            if (tu_file_size(p) > largest) largest = tu_file_size(p);
            free(p);
        }
    struct { uint32_t depth, threads; uint64_t bytes; uint64_t cache; int lru; int slow; const char *what; } cases[] = {
        {1, 1, 0, 0, 0, 0, "depth 1"},
        {8, 0, 0, 0, 0, 0, "depth 8"},
        {32, 2, 0, 0, 0, 1, "depth 32, 2 threads, slow reader"},
        {128, 8, 0, 0, 0, 0, "depth 128 (past the dataset), 8 threads"},
        {16, 4, 1, 0, 0, 1, "an arena of the largest item's size (wraps; that item read by its worker)"},
        {16, 4, 0, 20000, 0, 0, "a MinIO cache of part of the dataset"},
        {16, 4, 0, 20000, 1, 1, "an LRU cache, slow reader"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tu_io io;
        tu_io_init(&io);
        io.delay_us = cases[k].slow ? 300 : 0;
        cfg = ra_config(cases[k].depth);
        cfg.readahead_threads = cases[k].threads;
        cfg.readahead_bytes = cases[k].bytes ? largest : 0; /* the largest does not fit with its margin */
        cfg.cache_bytes = cases[k].cache;
        cfg.cache_policy = cases[k].lru ? COORDL_CACHE_LRU : COORDL_CACHE_MINIO;
        cfg.io = &io.table;
        coordl *L = tu_open(&cfg);
        tu_run got;
        memset(&got, 0, sizeof got);
        if (tu_run_epochs(L, 3, &got) != COORDL_OK) fail_msg("%s: %s", cases[k].what, coordl_errmsg(L));
        coordl_stats st;
        coordl_get_stats(L, &st);
        coordl_close(L);
        assert_same(&want, &got, cases[k].what);
        /* (how many rows the read-ahead served depends on the scheduler:
         * test_reads_overlap_beyond_the_workers checks that it does) */
        if (cases[k].bytes && st.readahead_skips == 0) fail_msg("%s: no item was too large", cases[k].what);
        assert_int_equal(atomic_load(&io.open_now), 0);
        tu_run_free(&got);
        tu_io_destroy(&io);
    }
    tu_run_free(&want);
}

/* seek and set drop what was read ahead and restart at the new position:
 * the same batches as without read-ahead, reads in flight or not. */
static void run_ops(uint32_t depth, tu_run *r)
{
    tu_io io;
    tu_io_init(&io);
    io.delay_us = 400;
    coordl_config cfg = ra_config(depth);
    cfg.io = &io.table;
    cfg.max_batch_size = 8;
    coordl *L = tu_open(&cfg);
    memset(r, 0, sizeof *r);
    coordl_batch b;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        r->hash = realloc(r->hash, (r->nbatches + 1) * sizeof *r->hash);
        r->hash[r->nbatches++] = tu_batch_hash(&b);
        coordl_release(L, &b);
    }
    assert_int_equal(coordl_seek(L, 1, 4), COORDL_OK);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        r->hash = realloc(r->hash, (r->nbatches + 1) * sizeof *r->hash);
        r->hash[r->nbatches++] = tu_batch_hash(&b);
        coordl_release(L, &b);
    }
    assert_int_equal(coordl_set(L, COORDL_PARAM_BATCH_SIZE, 7), COORDL_OK);
    tu_run rest;
    memset(&rest, 0, sizeof rest);
    assert_int_equal(tu_run_epochs(L, 2, &rest), COORDL_OK);
    r->hash = realloc(r->hash, (r->nbatches + rest.nbatches) * sizeof *r->hash);
    memcpy(r->hash + r->nbatches, rest.hash, rest.nbatches * sizeof *r->hash);
    r->nbatches += rest.nbatches;
    tu_run_free(&rest);
    coordl_close(L);
    assert_int_equal(atomic_load(&io.open_now), 0);
    tu_io_destroy(&io);
}

static void test_seek_and_set_restart_the_readahead(void **state)
{
    (void)state;
    tu_run want, got;
    run_ops(0, &want);
    run_ops(32, &got);
    assert_same(&want, &got, "seek + set with read-ahead 32");
    free(want.hash);
    free(got.hash);
}

/* Rows that turn out to be cache hits while their read ahead is still in
 * flight (reads of varying latency, a ring of 8 entries reused over and
 * over): the read finishes into its own bytes and no later entry is
 * disturbed (COORDL_DEBUG builds assert it); 150 epochs equal the run
 * without read-ahead. */
static uint64_t g_jitter_state;
static int64_t jitter_read_at(void *user, void *file, void *buf, uint64_t len, uint64_t offset)
{
    tu_io *io = user;
    const uint64_t r = __atomic_add_fetch(&g_jitter_state, 0x9e3779b97f4a7c15ull, __ATOMIC_RELAXED);
    tu_io__sleep_us((r >> 40) % 3000);
    return tu_io__read_at(io, file, buf, len, offset);
}

static void test_cache_hits_while_reads_are_in_flight(void **state)
{
    (void)state;
    /* 4 items, an LRU cache of half of them (which half changes all the
     * time), a read-ahead of 8 (two epochs ahead: an item's read is often
     * in flight when its row turns out to be a hit) */
    char *root = tu_join(g_dir, "tiny");
    const tu_folder_spec tiny = {2, 2, 24, 24, 8, TU_PAT_TEXTURED, TU_FMT_JPEG, 90, 4};
    const uint64_t bytes = tu_make_image_folder(root, &tiny);
    coordl_config cfg = ra_config(0);
    cfg.source = root;
    cfg.batch_size = 2;
    cfg.cache_bytes = bytes / 2;
    cfg.cache_policy = COORDL_CACHE_LRU; /* the cached half changes every epoch */
    cfg.prefetch_batches = 2;
    coordl *L = tu_open(&cfg);
    tu_run want;
    memset(&want, 0, sizeof want);
    assert_int_equal(tu_run_epochs(L, 150, &want), COORDL_OK);
    coordl_close(L);
    tu_io io;
    tu_io_init(&io);
    coordl_io table = io.table;
    table.read_at = jitter_read_at;
    cfg.io = &table;
    cfg.readahead_items = 8;
    cfg.readahead_threads = 4;
    L = tu_open(&cfg);
    tu_run got;
    memset(&got, 0, sizeof got);
    assert_int_equal(tu_run_epochs(L, 150, &got), COORDL_OK);
    coordl_close(L);
    assert_same(&want, &got, "cache hits while reads are in flight");
    assert_int_equal(atomic_load(&io.open_now), 0);
    tu_run_free(&want);
    tu_run_free(&got);
    tu_io_destroy(&io);
    tu_rmtree(root);
    free(root);
}

/* ---- what it reads, and when ------------------------------------------------ */

/* A reader that records, for reads made by the read-ahead's threads
 * (named "coordl-io"), which path, in order; and how many reads are in
 * flight at once. */
typedef struct {
    tu_io io;
    pthread_mutex_t mu;
    char *order[512];
    int n;
    atomic_int inflight, max_inflight;
    unsigned sleep_us;
} rec_io;

static int64_t rec_read_at(void *user, void *file, void *buf, uint64_t len, uint64_t offset)
{
    rec_io *r = user;
    char name[16] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    const int now = atomic_fetch_add(&r->inflight, 1) + 1;
    int seen = atomic_load(&r->max_inflight);
    while (now > seen && !atomic_compare_exchange_weak(&r->max_inflight, &seen, now)) {
    }
    if (r->sleep_us) tu_io__sleep_us(r->sleep_us);
    if (!strcmp(name, "coordl-io")) {
        pthread_mutex_lock(&r->mu);
        if (r->n < 512) r->order[r->n++] = strdup(((tu_io_file *)file)->path);
        pthread_mutex_unlock(&r->mu);
    }
    int64_t got = tu_io__read_at(&r->io, file, buf, len, offset);
    atomic_fetch_sub(&r->inflight, 1);
    return got;
}
static int rec_open(void *user, const char *path, void **file, uint64_t *size)
{
    return tu_io__open(&((rec_io *)user)->io, path, file, size);
}
static void rec_close(void *user, void *file) { tu_io__close(&((rec_io *)user)->io, file); }

/* One I/O thread: its reads follow the claim order, the epoch's
 * permutation (position by position, into the next epoch), never back. */
static void test_reads_follow_the_claim_order(void **state)
{
    (void)state;
    coordl_config cfg = ra_config(0);
    tu_run want = run3(&cfg); /* the order: ids row by row */
    rec_io r;
    memset(&r, 0, sizeof r);
    tu_io_init(&r.io);
    pthread_mutex_init(&r.mu, NULL);
    r.sleep_us = 200;
    coordl_io table = {&r, rec_open, rec_read_at, rec_close};
    cfg = ra_config(16);
    cfg.readahead_threads = 1;
    cfg.io = &table;
    coordl *L = tu_open(&cfg);
    tu_run got;
    memset(&got, 0, sizeof got);
    assert_int_equal(tu_run_epochs(L, 2, &got), COORDL_OK);
    coordl_close(L);
    pthread_mutex_lock(&r.mu);
    assert_true(r.n > N_ITEMS / 2); /* most items came through the read-ahead */
    size_t last = 0;
    for (int i = 0; i < r.n; i++) {
        /* its row in the run: the first row at or after the last one that
         * holds this path's id */
        size_t row = SIZE_MAX;
        for (size_t k = last; k < want.nrows && row == SIZE_MAX; k++) {
            char *p = tu_folder_file(g_tree, &SPEC, (int)(want.ids[k] / 16), (int)(want.ids[k] % 16));
            if (!strcmp(p, r.order[i])) row = k;
            free(p);
        }
        if (row == SIZE_MAX) fail_msg("read-ahead read %d (%s) is not after read %d in the claim order", i, r.order[i], i - 1);
        last = row;
        free(r.order[i]);
    }
    pthread_mutex_unlock(&r.mu);
    pthread_mutex_destroy(&r.mu);
    tu_run_free(&want);
    tu_run_free(&got);
    tu_io_destroy(&r.io);
}

/* A 20 ms reader, 2 workers: with 8 I/O threads several reads are in
 * flight at once (the workers alone would have at most 2), and the rows
 * find their bytes read ahead. */
static void test_reads_overlap_beyond_the_workers(void **state)
{
    (void)state;
    rec_io r;
    memset(&r, 0, sizeof r);
    tu_io_init(&r.io);
    pthread_mutex_init(&r.mu, NULL);
    r.sleep_us = 20000;
    coordl_io table = {&r, rec_open, rec_read_at, rec_close};
    coordl_config cfg = ra_config(32);
    cfg.readahead_threads = 8;
    cfg.threads = 2;
    cfg.io = &table;
    coordl *L = tu_open(&cfg);
    tu_run got;
    memset(&got, 0, sizeof got);
    assert_int_equal(tu_run_epochs(L, 1, &got), COORDL_OK);
    coordl_stats st;
    coordl_get_stats(L, &st);
    coordl_close(L);
    const int max = atomic_load(&r.max_inflight);
    if (max < 4 || max > 8 + 2) fail_msg("at most %d reads were in flight at once (8 I/O threads, 2 workers)", max);
    assert_true(st.readahead_hits >= N_ITEMS / 2);
    assert_true(st.readahead_reads >= N_ITEMS / 2);
    assert_true(st.readahead_read_ns >= st.readahead_reads * 20000000ull); /* each read took 20 ms */
    for (int i = 0; i < r.n; i++) free(r.order[i]);
    pthread_mutex_destroy(&r.mu);
    tu_run_free(&got);
    tu_io_destroy(&r.io);
}

/* Issue 24: readahead_items is the number of reads in flight. With a
 * reader that takes 50 ms a read, one prep thread and the default I/O
 * threads (0: the depth), the reads in flight reach the depth of 40 (the
 * pool used to stop at 16 threads). */
static void test_reads_in_flight_reach_the_depth(void **state)
{
    (void)state;
    rec_io r;
    memset(&r, 0, sizeof r);
    tu_io_init(&r.io);
    pthread_mutex_init(&r.mu, NULL);
    r.sleep_us = 50000;
    coordl_io table = {&r, rec_open, rec_read_at, rec_close};
    coordl_config cfg = ra_config(40);
    cfg.threads = 1;
    cfg.io = &table;
    coordl *L = tu_open(&cfg);
    coordl_config got;
    assert_int_equal(coordl_get_config(L, &got), COORDL_OK);
    assert_int_equal(got.readahead_threads, 40);
    tu_run run;
    memset(&run, 0, sizeof run);
    assert_int_equal(tu_run_epochs(L, 1, &run), COORDL_OK);
    coordl_close(L);
    const int max = atomic_load(&r.max_inflight);
    /* 40 read ahead, and the worker's own read of a position not reached */
    if (max < 36 || max > 40 + 1) fail_msg("at most %d reads were in flight at once (depth 40, 1 worker)", max);
    for (int i = 0; i < r.n; i++) free(r.order[i]);
    pthread_mutex_destroy(&r.mu);
    tu_run_free(&run);
    tu_io_destroy(&r.io);
}

/* The arena asks for transparent huge pages: with THP in "madvise" mode
 * (Debian's default) a 4 KiB-paged arena's first lap faulted 16,384 pages
 * at depth 512 (64 MiB), about 0.25 s of CPU on this project's VM, most of
 * a cold epoch's loss in bench_storage. The mapping is found in
 * /proc/self/smaps by its odd size; "hg" in its VmFlags is MADV_HUGEPAGE. */
/* The start addresses of the mappings of 6,156 kB in /proc/self/smaps (at
 * most cap), and whether each is MADV_HUGEPAGE ("hg" in VmFlags). */
static int arena_sized_maps(uintptr_t *start, int cap, int *advised)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    assert_non_null(f);
    char line[512];
    int n = 0, in_arena = 0;
    uintptr_t here = 0;
    while (fgets(line, sizeof line, f)) {
        long kb;
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, ' ') > strchr(line, '-')) here = (uintptr_t)lo;
        else if (sscanf(line, "Size: %ld kB", &kb) == 1) in_arena = kb == 6156;
        else if (in_arena && !strncmp(line, "VmFlags:", 8)) {
            if (n < cap) {
                start[n] = here;
                if (advised) advised[n] = strstr(line, " hg") != NULL;
                n++;
            }
            in_arena = 0;
        }
    }
    fclose(f);
    return n;
}

static void test_arena_asks_for_huge_pages(void **state)
{
    (void)state;
    FILE *thp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char mode[128] = "";
    if (thp) {
        if (!fgets(mode, sizeof mode, thp)) mode[0] = 0;
        fclose(thp);
    }
    if (!thp || strstr(mode, "[never]")) {
        print_message("NOT CHECKED: this kernel offers no transparent huge pages (%s)\n", thp ? mode : "no sysfs file");
        return;
    }
    /* mappings of the arena's size that are not the arena: there before
     * the open (under AddressSanitizer a freed malloc of about 6 MB stays
     * mapped in its quarantine, and CI's sanitizer run found one) */
    uintptr_t before[64];
    const int nbefore = arena_sized_maps(before, 64, NULL);
    coordl_config cfg = ra_config(64);
    cfg.readahead_bytes = (6u << 20) + (12u << 10); /* a size nothing else of coordl's maps: 6,156 kB */
    coordl *L = tu_open(&cfg);
    uintptr_t after[64];
    int advised_after[64];
    const int nafter = arena_sized_maps(after, 64, advised_after);
    coordl_close(L);
    int found = 0, advised = 0;
    for (int i = 0; i < nafter; i++) {
        int old = 0;
        for (int j = 0; j < nbefore; j++) old |= before[j] == after[i];
        if (old) continue;
        found++;
        advised += advised_after[i];
    }
    assert_int_equal(found, 1);
    if (advised != 1) fail_msg("the read-ahead arena (6,156 kB) is mapped without MADV_HUGEPAGE");
}

/* Cached items are not read ahead: once every item is cached (epoch 0,
 * plus what was read ahead for epoch 1 before its epoch-0 turn), the
 * read-ahead reads nothing more. */
static void test_cache_hits_are_not_read_ahead(void **state)
{
    (void)state;
    coordl_config cfg = ra_config(16);
    cfg.cache_bytes = 1u << 20;
    coordl *L = tu_open(&cfg);
    tu_run r;
    memset(&r, 0, sizeof r);
    assert_int_equal(tu_run_epochs(L, 2, &r), COORDL_OK);
    coordl_stats s1, s2;
    coordl_get_stats(L, &s1);
    /* two more epochs, a little slower than the cache serves them: cache
     * hits are so fast that a busy machine may not schedule the read-ahead
     * thread at all while the workers claim every row (CI saw no skip) */
    for (unsigned e = 0; e < 2;) {
        coordl_batch b;
        const coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) { e++; continue; }
        assert_int_equal(rc, COORDL_OK);
        coordl_release(L, &b);
        const struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    coordl_get_stats(L, &s2);
    coordl_close(L);
    assert_true(s1.readahead_reads <= N_ITEMS + 16);
    assert_int_equal(s2.readahead_reads, s1.readahead_reads);
    assert_true(s2.readahead_skips > s1.readahead_skips);
    assert_int_equal(s2.storage_reads, s1.storage_reads);
    tu_run_free(&r);
}

/* ---- memory ------------------------------------------------------------------ */

static atomic_long g_allocs;
static void *count_malloc(void *u, size_t n) { (void)u; atomic_fetch_add(&g_allocs, 1); return malloc(n); }
static void *count_realloc(void *u, void *p, size_t n) { (void)u; atomic_fetch_add(&g_allocs, 1); return realloc(p, n); }
static void count_free(void *u, void *p) { (void)u; free(p); }

/* After a warm-up epoch, whole epochs with read-ahead allocate nothing
 * (the arena, the entries and the workers' scratch are reused). */
static void test_no_allocation_per_item_in_steady_state(void **state)
{
    (void)state;
    coordl_config cfg = ra_config(16);
    cfg.allocator.malloc_fn = count_malloc;
    cfg.allocator.realloc_fn = count_realloc;
    cfg.allocator.free_fn = count_free;
    coordl *L = tu_open(&cfg);
    tu_run r;
    memset(&r, 0, sizeof r);
    assert_int_equal(tu_run_epochs(L, 1, &r), COORDL_OK);
    tu_run_free(&r);
    memset(&r, 0, sizeof r);
    assert_int_equal(tu_run_epochs(L, 1, &r), COORDL_OK); /* scratch grows to the largest item */
    tu_run_free(&r);
    memset(&r, 0, sizeof r);
    const long before = atomic_load(&g_allocs);
    assert_int_equal(tu_run_epochs(L, 3, &r), COORDL_OK);
    const long after = atomic_load(&g_allocs);
    coordl_stats st;
    coordl_get_stats(L, &st);
    coordl_close(L);
    tu_run_free(&r);
    assert_true(st.readahead_hits > 0);
    /* 144 rows: a per-item allocation would show 144 or more. A worker's
     * scratch can still grow (by doubling from 4 KiB): its read buffer the
     * first time a claim outruns the read-ahead, its resampling tables at a
     * more extreme crop; and under load one worker may have prepared no
     * row before this point (the other took them all), so its whole
     * scratch set, about ten buffers, comes now (seen: 9 allocations of
     * 4 KiB in one run of 20 under a load of 10). At most 2 workers x 16
     * here, never per item. */
    if (after - before > 32) fail_msg("%ld allocations in 3 steady-state epochs (144 rows)", after - before);
}

/* ---- closing, groups, configuration --------------------------------------------- */

/* Close while the read-ahead has 200 ms reads in flight: it waits for them
 * (no hang, no use after free: ASan), and every file opened is closed. */
static void test_close_with_reads_in_flight(void **state)
{
    (void)state;
    tu_io io;
    tu_io_init(&io);
    io.delay_us = 200000;
    coordl_config cfg = ra_config(32);
    cfg.readahead_threads = 8;
    cfg.io = &io.table;
    coordl *L = tu_open(&cfg);
    usleep(50000); /* reads are in flight now */
    coordl_close(L);
    assert_int_equal(atomic_load(&io.open_now), 0);
    assert_int_equal(atomic_load(&io.opens), atomic_load(&io.closes));
    tu_io_destroy(&io);
}

static void test_config_reports_and_validates_readahead(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_tree);
    assert_int_equal(cfg.readahead_items, 32); /* the default */
    assert_int_equal(cfg.readahead_threads, 0);
    assert_int_equal(cfg.readahead_bytes, 0);
    coordl *L = tu_open(&cfg);
    coordl_config got;
    assert_int_equal(coordl_get_config(L, &got), COORDL_OK);
    coordl_stats st;
    coordl_get_stats(L, &st);
    coordl_close(L);
    assert_int_equal(got.readahead_items, 32);
    assert_int_equal(got.readahead_threads, 32); /* at most one per read in flight */
    assert_int_equal(got.readahead_bytes, st.dataset_bytes + (1u << 20)); /* a small dataset: less than 64 MiB */
    cfg.readahead_items = 4;
    cfg.readahead_bytes = 1u << 16;
    L = tu_open(&cfg);
    assert_int_equal(coordl_get_config(L, &got), COORDL_OK);
    coordl_close(L);
    assert_int_equal(got.readahead_threads, 4);
    assert_int_equal(got.readahead_bytes, 1u << 16);
    /* a coordinated group does not read ahead */
    char group[64];
    snprintf(group, sizeof group, "ra-%d", (int)getpid());
    cfg = tu_config(g_tree);
    cfg.group = group;
    L = tu_open(&cfg);
    assert_int_equal(coordl_get_config(L, &got), COORDL_OK);
    tu_run r;
    memset(&r, 0, sizeof r);
    assert_int_equal(tu_run_epochs(L, 1, &r), COORDL_OK);
    coordl_get_stats(L, &st);
    coordl_close(L);
    tu_run_free(&r);
    assert_int_equal(got.readahead_items, 0);
    assert_int_equal(st.readahead_reads, 0);
    /* refused values name the field */
    cfg = tu_config(g_tree);
    cfg.readahead_items = 5000;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "readahead_items"));
    cfg = tu_config(g_tree);
    cfg.readahead_threads = 5000;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "readahead_threads"));
}

/* ---- the what-if model learns the depth ------------------------------------------ */

/* DS-Analyzer over a 10 ms store: it measures the read's time, and its
 * model says that without read-ahead 2 workers are held near 2 / 10 ms,
 * that depth buys throughput up to the I/O threads' reads in flight, and
 * which depth is enough. */
static void test_analyzer_models_readahead_depth(void **state)
{
    (void)state;
    tu_io io;
    tu_io_init(&io);
    io.delay_us = 10000;
    coordl_config cfg = ra_config(32);
    cfg.threads = 2;
    cfg.io = &io.table;
    coordl_analyze_opts o;
    memset(&o, 0, sizeof o);
    o.batches = 6;
    o.synthetic_step_ms = 1;
    coordl_report r;
    coordl_status rc = coordl_analyze(&cfg, NULL, NULL, &o, &r);
    if (rc != COORDL_OK) fail_msg("coordl_analyze: %s", coordl_errmsg(NULL));
    if (!(r.read_latency_ms >= 10.0 && r.read_latency_ms < 1000.0))
        fail_msg("read latency measured as %.3f ms; the reader sleeps 10 ms", r.read_latency_ms);
    assert_int_equal(r.readahead_items, 32);
    assert_int_equal(r.readahead_threads, 32); /* one per read in flight */
    double prev = 0;
    const uint32_t depths[] = {0, 1, 2, 4, 8, 16};
    for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++) {
        coordl_whatif w = coordl_report_predict_readahead(&r, 0.0, 2, 0, depths[i]);
        if (!(w.predicted_images_per_s > prev)) fail_msg("depth %u predicts %.1f images/s, not above %.1f", depths[i],
                                                         w.predicted_images_per_s, prev);
        prev = w.predicted_images_per_s;
    }
    /* off: each of the 2 workers waits 10 ms per item */
    const double off = coordl_report_predict_readahead(&r, 0.0, 2, 0, 0).predicted_images_per_s;
    assert_true(off <= 2.0 / (r.read_latency_ms / 1e3) + 1e-6);
    /* a cache of everything needs no storage at any depth */
    const double cached = coordl_report_predict_readahead(&r, 1.0, 2, 0, 0).predicted_images_per_s;
    assert_true(cached > off);
    assert_true(r.recommend_readahead_items >= 8);
    char json[65536];
    size_t n = coordl_report_json(&r, json, sizeof json);
    assert_true(n < sizeof json && tu_json_valid(json, n, NULL));
    assert_true(tu_json_has_key(json, "read_latency_ms"));
    assert_true(tu_json_has_key(json, "recommend_readahead_items"));
    coordl_report_free(&r);
    tu_io_destroy(&io);
}

int main(void)
{
    tu_main_init(180);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batches_identical_at_every_depth),
        cmocka_unit_test(test_seek_and_set_restart_the_readahead),
        cmocka_unit_test(test_cache_hits_while_reads_are_in_flight),
        cmocka_unit_test(test_reads_follow_the_claim_order),
        cmocka_unit_test(test_reads_overlap_beyond_the_workers),
        cmocka_unit_test(test_reads_in_flight_reach_the_depth),
        cmocka_unit_test(test_arena_asks_for_huge_pages),
        cmocka_unit_test(test_cache_hits_are_not_read_ahead),
        cmocka_unit_test(test_no_allocation_per_item_in_steady_state),
        cmocka_unit_test(test_close_with_reads_in_flight),
        cmocka_unit_test(test_config_reports_and_validates_readahead),
        cmocka_unit_test(test_analyzer_models_readahead_depth),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
