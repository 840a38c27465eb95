/*
 * test_io_async.c - a caller's asynchronous reader (cfg.io_async, issue
 * 24): the read-ahead keeps readahead_items reads in flight through it from
 * one I/O thread, instead of one blocking read_at per I/O thread.
 *
 *   - batches are byte-identical to the synchronous reader's, for a folder
 *     tree and for a tar shard (members read at their offsets);
 *   - with a 50 ms reader, depth 40 and one prep thread, 36-40 reads are in
 *     flight at once on one I/O thread (the synchronous reader needs 40);
 *   - a reader may call done inside read;
 *   - a reader that declines a read (-ENOTSUP) has it read through cfg.io;
 *   - seek and set with reads in flight: the same batches;
 *   - a failed read (-EIO) and a result that is neither a byte count nor an
 *     errno are bad samples naming the file, under both policies;
 *   - a file that grew since it was indexed is read again through cfg.io
 *     (the same batches as the synchronous reader, never cut short);
 *   - coordl_close waits for reads in flight, and, for a reader that never
 *     calls done, gives up after io_timeout_ms with an error log, leaving
 *     the memory a late done touches;
 *   - bad configurations are refused naming the field.
 * Speed is bench_storage's business (--async), not this file's.
 */
#include "test_util.h"
#include "tu_io.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char *g_dir;
static char *g_tree; /* 3 classes x 16 textured JPEGs of 20..36 px: 48 items */
static char *g_tar;  /* the same tree as one tar shard                         */
static const tu_folder_spec SPEC = {3, 16, 20, 20, 16, TU_PAT_TEXTURED, TU_FMT_JPEG, 90, 9};
#define N_ITEMS 48

/* ---- the asynchronous reader ---------------------------------------------
 * A request queue served by one completion thread: each read is done
 * latency_us after it was started (the queue is in start order, and every
 * read has the same latency, so the head is always the next one due). The
 * bytes come through a tu_io of its own (`store`), so that the counters of
 * cfg.io's tu_io (`sync`) count only what coordl read synchronously. */
typedef struct areq {
    struct areq *next;
    char *path;
    void *buf;
    uint64_t len, off, due_ns;
    coordl_io_done_fn done;
    void *token;
} areq;

typedef struct {
    coordl_io_async table;
    tu_io store;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    areq *head, *tail;
    int stop;
    pthread_t thread;
    unsigned latency_us;
    atomic_int in_flight, max_in_flight;
    atomic_long started, declined, failed_dones;
    atomic_long dones;        /* done calls made (counted before each call)  */
    atomic_int other_threads; /* reads started from a thread not named coordl-io */
    int decline;              /* every read: -ENOTSUP (not started)         */
    int inline_done;          /* every read done inside read, before it returns */
    const char *fail_path;    /* reads of a path containing this end with   */
    int64_t fail_result;      /* ... this result                            */
    int hold;                 /* never call done                            */
    const char *watch_path;   /* reads started of a path containing this ... */
    atomic_long watch_reads;  /* ... counted here                           */
    const char *hold_path;    /* reads of a path containing this wait in   */
    areq *held;               /* ... here, never done until the test ends them */
    atomic_int inside, overlapped; /* read calls at once, and overlaps seen */
} async_io;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int async_start_read(async_io *a, const char *path, void *buf, uint64_t len, uint64_t offset,
                            coordl_io_done_fn done, void *token);
static int64_t serve(async_io *a, const areq *q);

/* coordl's call: counts calls from two threads at once (a handle makes
 * none), then queues the read */
static int async_read(void *user, const char *path, void *buf, uint64_t len, uint64_t offset, coordl_io_done_fn done,
                      void *token)
{
    async_io *a = user;
    char name[16] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    if (strcmp(name, "coordl-io") != 0) atomic_fetch_add(&a->other_threads, 1);
    if (atomic_fetch_add(&a->inside, 1) != 0) atomic_fetch_add(&a->overlapped, 1);
    const int rc = async_start_read(a, path, buf, len, offset, done, token);
    atomic_fetch_sub(&a->inside, 1);
    return rc;
}

static int async_start_read(async_io *a, const char *path, void *buf, uint64_t len, uint64_t offset,
                            coordl_io_done_fn done, void *token)
{
    if (a->watch_path && strstr(path, a->watch_path)) atomic_fetch_add(&a->watch_reads, 1);
    if (a->decline) {
        atomic_fetch_add(&a->declined, 1);
        return -ENOTSUP;
    }
    if (a->inline_done) { /* done before read returns, on coordl's own I/O thread */
        areq now = {NULL, (char *)path, buf, len, offset, 0, done, token};
        atomic_fetch_add(&a->started, 1);
        atomic_fetch_add(&a->dones, 1);
        done(token, serve(a, &now));
        return 0;
    }
    areq *q = calloc(1, sizeof *q);
    if (!q) return -ENOMEM;
    q->path = strdup(path);
    q->buf = buf;
    q->len = len;
    q->off = offset;
    q->due_ns = now_ns() + (uint64_t)a->latency_us * 1000u;
    q->done = done;
    q->token = token;
    const int now = atomic_fetch_add(&a->in_flight, 1) + 1;
    int seen = atomic_load(&a->max_in_flight);
    while (now > seen && !atomic_compare_exchange_weak(&a->max_in_flight, &seen, now)) {
    }
    atomic_fetch_add(&a->started, 1);
    pthread_mutex_lock(&a->mu);
    if (a->tail) a->tail->next = q;
    else a->head = q;
    a->tail = q;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return 0;
}

static int64_t serve(async_io *a, const areq *q)
{
    if (a->fail_path && strstr(q->path, a->fail_path)) {
        atomic_fetch_add(&a->failed_dones, 1);
        return a->fail_result;
    }
    void *f;
    uint64_t size;
    const int r = tu_io__open(&a->store, q->path, &f, &size);
    if (r != 0) return r;
    uint64_t got = 0;
    while (got < q->len) {
        const int64_t n = tu_io__read_at(&a->store, f, (char *)q->buf + got, q->len - got, q->off + got);
        if (n < 0) {
            tu_io__close(&a->store, f);
            return n;
        }
        if (n == 0) break;
        got += (uint64_t)n;
    }
    tu_io__close(&a->store, f);
    return (int64_t)got;
}

static void *async_main(void *arg)
{
    async_io *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->stop && (!a->head || a->hold)) pthread_cond_wait(&a->cv, &a->mu);
        if (a->stop && (!a->head || a->hold)) break;
        areq *q = a->head;
        a->head = q->next;
        if (!a->head) a->tail = NULL;
        if (a->hold_path && strstr(q->path, a->hold_path)) { /* never done, until the test says */
            q->next = a->held;
            a->held = q;
            continue;
        }
        pthread_mutex_unlock(&a->mu);
        const uint64_t t = now_ns();
        if (q->due_ns > t) tu_io__sleep_us((q->due_ns - t) / 1000u);
        const int64_t result = serve(a, q);
        atomic_fetch_add(&a->dones, 1);
        q->done(q->token, result);
        atomic_fetch_sub(&a->in_flight, 1);
        free(q->path);
        free(q);
        pthread_mutex_lock(&a->mu);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

static void async_init(async_io *a, unsigned latency_us)
{
    memset(a, 0, sizeof *a);
    a->table.user = a;
    a->table.read = async_read;
    tu_io_init(&a->store);
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    a->latency_us = latency_us;
    if (pthread_create(&a->thread, NULL, async_main, a) != 0) abort();
}

/* Stops the completion thread; requests held (a->hold) are freed unended. */
/* Waits until at least n reads have been started through the reader, or
 * ms have passed; returns how many were started. */
static long wait_for_starts(async_io *a, long n, int ms)
{
    for (int waited = 0; waited < ms && atomic_load(&a->started) < n; waited += 2) tu_io__sleep_us(2000);
    return atomic_load(&a->started);
}

static void async_destroy(async_io *a)
{
    pthread_mutex_lock(&a->mu);
    a->stop = 1;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    for (int list = 0; list < 2; list++)
        for (areq *q = list ? a->held : a->head, *n; q; q = n) {
            n = q->next;
            free(q->path);
            free(q);
        }
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    tu_io_destroy(&a->store);
}

/* ---- fixtures --------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    g_tree = tu_join(g_dir, "tree");
    tu_make_image_folder(g_tree, &SPEC);
    g_tar = tu_join(g_dir, "tree.tar");
    tu_tar_of_folder(g_tar, g_tree, &SPEC);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_tree);
    free(g_tar);
    return 0;
}

static coordl_config async_config(const char *source, uint32_t depth, tu_io *sync, async_io *a)
{
    coordl_config cfg = tu_config(source);
    cfg.batch_size = 5;
    cfg.out_w = cfg.out_h = 14;
    cfg.layout = COORDL_F32_NCHW;
    cfg.seed = 11;
    cfg.readahead_items = depth;
    cfg.io = &sync->table;
    cfg.io_async = a ? &a->table : NULL;
    return cfg;
}

static tu_run run_epochs(const coordl_config *cfg, unsigned epochs, coordl_stats *st)
{
    coordl *L = tu_open(cfg);
    tu_run r;
    memset(&r, 0, sizeof r);
    if (tu_run_epochs(L, epochs, &r) != COORDL_OK) fail_msg("%s", coordl_errmsg(L));
    if (st) coordl_get_stats(L, st);
    coordl_close(L);
    return r;
}

/* The synchronous reader's run: what an io_async run must equal. */
static tu_run sync_reference(const char *source, uint32_t depth, unsigned epochs)
{
    tu_io sync;
    tu_io_init(&sync);
    coordl_config cfg = async_config(source, depth, &sync, NULL);
    tu_run r = run_epochs(&cfg, epochs, NULL);
    tu_io_destroy(&sync);
    return r;
}

static void assert_same(const tu_run *a, const tu_run *b, const char *what)
{
    if (a->nbatches != b->nbatches) fail_msg("%s: %zu batches, expected %zu", what, b->nbatches, a->nbatches);
    for (size_t i = 0; i < a->nbatches; i++)
        if (a->hash[i] != b->hash[i]) fail_msg("%s: batch %zu differs from the synchronous reader's", what, i);
}

/* ---- the same batches, reads in flight on one thread ------------------------- */

static void test_batches_identical_to_the_synchronous_reader(void **state)
{
    (void)state;
    const char *sources[2] = {g_tree, g_tar};
    for (int s = 0; s < 2; s++) {
        tu_run want = sync_reference(sources[s], 16, 3);
        tu_io sync;
        tu_io_init(&sync);
        async_io a;
        async_init(&a, 2000);
        coordl_config cfg = async_config(sources[s], 16, &sync, &a);
        coordl_stats st;
        tu_run got = run_epochs(&cfg, 3, &st);
        assert_same(&want, &got, s ? "tar shard" : "folder tree");
        /* many of the 144 rows came through io_async, from the I/O thread
         * (89-150 on an idle machine, 48-64 beside a CI run under ASan:
         * the workers then overtake the read-ahead and read for themselves) */
        if (atomic_load(&a.started) < N_ITEMS / 2)
            fail_msg("%s: %ld reads through io_async in 3 epochs of %d items", s ? "tar" : "tree",
                     atomic_load(&a.started), N_ITEMS);
        assert_int_equal(atomic_load(&a.other_threads), 0);
        assert_int_equal(atomic_load(&a.overlapped), 0);
        assert_int_equal(st.readahead_io_threads, 1);
        assert_int_equal(st.readahead_late_reads, 0); /* every done came */
        assert_true(st.readahead_hits >= N_ITEMS / 2);
        assert_true(st.readahead_read_ns >= st.readahead_reads * 2000000ull); /* each read took 2 ms */
        async_destroy(&a);
        tu_io_destroy(&sync);
        tu_run_free(&want);
        tu_run_free(&got);
    }
}

/* readahead_items is the reads in flight, without a thread each: a 200 ms
 * reader, depth 40, one prep thread: 36-40 reads in flight at once (the
 * worker's own reads of positions not reached go through cfg.io), all
 * started by the one I/O thread. */
static void test_reads_in_flight_reach_the_depth_on_one_thread(void **state)
{
    (void)state;
    tu_io sync;
    tu_io_init(&sync);
    async_io a;
    async_init(&a, 200000);
    coordl_config cfg = async_config(g_tree, 40, &sync, &a);
    cfg.threads = 1;
    coordl_stats st;
    tu_run run = run_epochs(&cfg, 1, &st);
    const int max = atomic_load(&a.max_in_flight);
    if (max < 36 || max > 40) fail_msg("at most %d reads were in flight through io_async (depth 40)", max);
    assert_int_equal(st.readahead_io_threads, 1);
    assert_true(st.readahead_max_in_flight >= 36 && st.readahead_max_in_flight <= 40);
    assert_int_equal(run.nrows, N_ITEMS);
    async_destroy(&a);
    tu_io_destroy(&sync);
    tu_run_free(&run);
}

/* A reader whose done runs inside its read (the read-ahead calls read
 * outside its lock, so that this does not deadlock): the same batches.
 * The reads are instant, so while batches are consumed the workers may
 * overtake the read-ahead and read most rows through cfg.io themselves
 * (CI's run of the switches build once saw fewer than 48 io_async reads
 * in 2 epochs); so the consumer first waits, with the workers held to one
 * batch (prefetch 1), until the read-ahead has read its window ahead. */
static void test_done_inside_read(void **state)
{
    (void)state;
    tu_run want = sync_reference(g_tree, N_ITEMS, 2);
    tu_io sync;
    tu_io_init(&sync);
    async_io a;
    async_init(&a, 0);
    a.inline_done = 1;
    coordl_config cfg = async_config(g_tree, N_ITEMS, &sync, &a);
    cfg.prefetch_batches = 1;
    coordl *L = tu_open(&cfg);
    if (wait_for_starts(&a, N_ITEMS / 2, 10000) < N_ITEMS / 2)
        fail_msg("the read-ahead started %ld reads within 10 s of open (depth %d, nothing consumed)",
                 atomic_load(&a.started), N_ITEMS);
    tu_run got;
    memset(&got, 0, sizeof got);
    if (tu_run_epochs(L, 2, &got) != COORDL_OK) fail_msg("%s", coordl_errmsg(L));
    coordl_close(L);
    assert_same(&want, &got, "done inside read");
    assert_int_equal(atomic_load(&a.other_threads), 0);
    async_destroy(&a);
    tu_io_destroy(&sync);
    tu_run_free(&want);
    tu_run_free(&got);
}

/* A reader that starts no read (-ENOTSUP) leaves every item to cfg.io: the
 * same batches, every row's bytes through read_at. */
static void test_declined_reads_go_through_io(void **state)
{
    (void)state;
    tu_run want = sync_reference(g_tree, 16, 2);
    tu_io sync;
    tu_io_init(&sync);
    async_io a;
    async_init(&a, 0);
    a.decline = 1;
    coordl_config cfg = async_config(g_tree, 16, &sync, &a);
    tu_run got = run_epochs(&cfg, 2, NULL);
    assert_same(&want, &got, "declined");
    assert_true(atomic_load(&a.declined) >= N_ITEMS);
    assert_int_equal(atomic_load(&a.started), 0);
    /* the declined reads block on I/O threads (the pool grows), and still
     * no two threads are inside read at once */
    assert_int_equal(atomic_load(&a.overlapped), 0);
    assert_true(atomic_load(&sync.reads) >= 2 * N_ITEMS); /* every row's bytes: through read_at */
    async_destroy(&a);
    tu_io_destroy(&sync);
    tu_run_free(&want);
    tu_run_free(&got);
}

/* Seek and set restart the read-ahead with reads still in flight through
 * io_async (20 ms each): they end into their own space and are dropped;
 * the batches are the synchronous reader's, and every done returned. */
static void seek_and_set(async_io *a, tu_run *r)
{
    tu_io sync;
    tu_io_init(&sync);
    coordl_config cfg = async_config(g_tree, 32, &sync, a);
    cfg.max_batch_size = 8;
    coordl *L = tu_open(&cfg);
    memset(r, 0, sizeof *r);
    coordl_batch b;
    for (int i = 0; i < 6; i++) {
        if (i == 2) assert_int_equal(coordl_seek(L, 1, 4), COORDL_OK);
        if (i == 4) assert_int_equal(coordl_set(L, COORDL_PARAM_BATCH_SIZE, 7), COORDL_OK);
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        r->hash = realloc(r->hash, (r->nbatches + 1) * sizeof *r->hash);
        r->hash[r->nbatches++] = tu_batch_hash(&b);
        coordl_release(L, &b);
    }
    tu_run rest;
    memset(&rest, 0, sizeof rest);
    assert_int_equal(tu_run_epochs(L, 2, &rest), COORDL_OK);
    r->hash = realloc(r->hash, (r->nbatches + rest.nbatches) * sizeof *r->hash);
    memcpy(r->hash + r->nbatches, rest.hash, rest.nbatches * sizeof *r->hash);
    r->nbatches += rest.nbatches;
    tu_run_free(&rest);
    coordl_close(L);
    tu_io_destroy(&sync);
}

static void test_seek_and_set_with_reads_in_flight(void **state)
{
    (void)state;
    tu_run want, got;
    seek_and_set(NULL, &want);
    async_io a;
    async_init(&a, 20000);
    seek_and_set(&a, &got);
    assert_same(&want, &got, "seek and set");
    assert_true(atomic_load(&a.started) >= N_ITEMS);
    /* every read started had its done called before close returned (the
     * reader's own in_flight count drops only after done returns, which
     * may come a moment after close has seen the done) */
    assert_int_equal(atomic_load(&a.dones), atomic_load(&a.started));
    async_destroy(&a);
    tu_run_free(&want);
    tu_run_free(&got);
}

/* ---- faults ------------------------------------------------------------------ */

/* One file's reads fail, through io_async (result) and through cfg.io alike
 * (a worker may reach it first): under COORDL_BAD_FAIL the batch is an I/O
 * error naming the file; under COORDL_BAD_SUBSTITUTE exactly one row an
 * epoch is substituted, and the io_async failure was among them. */
static void check_failing_result(int64_t result, int sync_errno, int64_t sync_garbage, const char *why)
{
    char *victim = tu_folder_file(g_tree, &SPEC, 1, 7);
    const char *base = victim; /* whole: the file names repeat across the classes */
    for (int policy = 0; policy < 2; policy++) {
        tu_io sync;
        tu_io_init(&sync);
        sync.fail_read_path = sync_errno ? base : NULL;
        sync.fail_read_errno = sync_errno;
        sync.garbage_path = sync_errno ? NULL : base;
        sync.garbage_ret = sync_garbage;
        async_io a;
        async_init(&a, 1000);
        a.fail_path = base;
        a.fail_result = result;
        coordl_config cfg = async_config(g_tree, 32, &sync, &a);
        cfg.on_bad_sample = policy ? COORDL_BAD_SUBSTITUTE : COORDL_BAD_FAIL;
        coordl *L = tu_open(&cfg);
        tu_run run;
        memset(&run, 0, sizeof run);
        const coordl_status rc = tu_run_epochs(L, 3, &run);
        if (!policy) {
            if (rc != COORDL_ERR_IO) fail_msg("%s: expected COORDL_ERR_IO, got %s", why, coordl_strerror(rc));
            if (!strstr(coordl_errmsg(L), base)) fail_msg("%s: the error does not name %s: %s", why, base, coordl_errmsg(L));
        } else {
            if (rc != COORDL_OK) fail_msg("%s: %s", why, coordl_errmsg(L));
            coordl_stats st;
            coordl_get_stats(L, &st);
            /* 3 epochs, and the rows prepared ahead of the 4th */
            if (st.bad_samples < 3 || st.bad_samples > 4)
                fail_msg("%s: %llu rows substituted in 3 epochs (and those prepared ahead), expected 3 or 4", why,
                         (unsigned long long)st.bad_samples);
            if (atomic_load(&a.failed_dones) < 1) fail_msg("%s: no read of %s failed through io_async", why, base);
            assert_int_equal(run.nrows, 3 * N_ITEMS);
        }
        coordl_close(L);
        async_destroy(&a);
        tu_io_destroy(&sync);
        tu_run_free(&run);
    }
    free(victim);
}

static void test_a_failed_read_is_a_bad_sample_naming_the_file(void **state)
{
    (void)state;
    check_failing_result(-EIO, EIO, 0, "-EIO");
}

/* A result above the bytes asked for, or a negative value that is not an
 * errno, is never trusted. */
static void test_a_garbage_result_is_an_io_error(void **state)
{
    (void)state;
    check_failing_result((int64_t)1 << 40, 0, (int64_t)1 << 40, "a result above len");
    check_failing_result(-100000, 0, -100000, "a result below -4095");
}

/* A file that grew since it was indexed: io_async is asked for one byte
 * more than indexed, gets it, and the item is read again through cfg.io,
 * as a synchronous read-ahead does: the same batches as the synchronous
 * reader on the whole file, not the indexed bytes alone. At open the file
 * holds its JPEG but the last 100 bytes (the index takes sizes from the directory scan).
 * The reader holds every read (depth 48: the whole epoch is started at
 * open) until the whole JPEG is written back; cut at the indexed size it
 * would lose its end (a truncated JPEG). */
static void test_a_grown_file_is_read_again_through_io(void **state)
{
    (void)state;
    char *tree = tu_join(g_dir, "grown");
    tu_make_image_folder(tree, &SPEC);
    char *victim = tu_folder_file(tree, &SPEC, 2, 3);
    size_t n;
    uint8_t *data = tu_read_file(victim, &n);
    tu_run runs[2];
    for (int with_async = 0; with_async < 2; with_async++) {
        /* the reference (the synchronous reader) reads the whole file */
        tu_write_file(victim, data, with_async ? n - 100 : n);
        tu_io sync;
        tu_io_init(&sync);
        async_io a;
        async_init(&a, 0);
        a.hold = 1;
        a.watch_path = victim;
        coordl_config cfg = async_config(tree, N_ITEMS, &sync, with_async ? &a : NULL);
        cfg.shuffle = 0;
        coordl *L = tu_open(&cfg);
        if (with_async) assert_int_equal(wait_for_starts(&a, N_ITEMS, 1000), N_ITEMS);
        /* grown since indexed: written beside and renamed over it, so that
         * no read sees it half written */
        char *next = tu_join(tree, "grown.tmp");
        tu_write_file(next, data, n);
        assert_int_equal(rename(next, victim), 0);
        free(next);
        pthread_mutex_lock(&a.mu);
        a.hold = 0;
        pthread_cond_signal(&a.cv);
        pthread_mutex_unlock(&a.mu);
        memset(&runs[with_async], 0, sizeof runs[with_async]);
        if (tu_run_epochs(L, 1, &runs[with_async]) != COORDL_OK) fail_msg("%s", coordl_errmsg(L));
        coordl_close(L);
        if (with_async) {
            /* read through io_async (once an epoch: the read-ahead runs into
             * the next), then again through cfg.io, whole */
            assert_true(atomic_load(&a.watch_reads) >= 1);
            if (atomic_load(&sync.bytes) < n)
                fail_msg("the grown file was not read again through io (%llu bytes read; the file has %zu)",
                         (unsigned long long)atomic_load(&sync.bytes), n);
        }
        async_destroy(&a);
        tu_io_destroy(&sync);
    }
    assert_same(&runs[0], &runs[1], "grown file");
    tu_run_free(&runs[0]);
    tu_run_free(&runs[1]);
    free(data);
    free(victim);
    tu_rmtree(tree);
    free(tree);
}

/* A read whose done never comes: its worker waits io_timeout_ms, then
 * reads the item through cfg.io (a warning names it); the batches are the
 * synchronous reader's. When the done finally comes, the entry it held is
 * freed, and the handle closes at once. The whole epoch is read ahead at
 * open (depth 48) and started before the first coordl_next, and the item
 * (41 of 48, in order) is far past the rows the workers prepare before it
 * (2 batches of 5), so its read is the read-ahead's. */
static void test_a_read_with_no_done_is_read_through_io_after_io_timeout_ms(void **state)
{
    (void)state;
    char *victim = tu_folder_file(g_tree, &SPEC, 2, 9);
    tu_io sync;
    tu_io_init(&sync);
    coordl_config cfg = async_config(g_tree, N_ITEMS, &sync, NULL);
    cfg.shuffle = 0;
    cfg.prefetch_batches = 2;
    tu_run want = run_epochs(&cfg, 1, NULL);
    tu_io_destroy(&sync);

    tu_io_init(&sync);
    async_io a;
    async_init(&a, 1000);
    a.hold_path = victim;
    tu_log_record *log = tu_log_record_new();
    cfg = async_config(g_tree, N_ITEMS, &sync, &a);
    cfg.shuffle = 0;
    cfg.prefetch_batches = 2;
    cfg.io_timeout_ms = 300;
    cfg.log = tu_log_record_fn;
    cfg.log_user = log;
    coordl *L = tu_open(&cfg);
    assert_int_equal(wait_for_starts(&a, N_ITEMS, 2000), N_ITEMS);
    tu_run got;
    memset(&got, 0, sizeof got);
    if (tu_run_epochs(L, 1, &got) != COORDL_OK) fail_msg("%s", coordl_errmsg(L));
    assert_same(&want, &got, "a read with no done");
    if (!tu_log_contains(log, "had no done within io_timeout_ms"))
        fail_msg("no warning named the read with no done");
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_int_equal(st.readahead_late_reads, 1); /* the one row read through io instead */
    /* the late dones (the read-ahead ran into the next epoch: maybe two) */
    pthread_mutex_lock(&a.mu);
    a.hold_path = NULL; /* reads started from now on are served */
    int held = 0;
    for (areq *q = a.held, *n; q; q = n) {
        n = q->next;
        atomic_fetch_add(&a.dones, 1);
        q->done(q->token, serve(&a, q));
        atomic_fetch_sub(&a.in_flight, 1);
        free(q->path);
        free(q);
        held++;
    }
    a.held = NULL;
    pthread_mutex_unlock(&a.mu);
    assert_true(held >= 1);
    const uint64_t t0 = now_ns();
    coordl_close(L);
    if ((now_ns() - t0) / 1000000u >= 300) fail_msg("close waited %llu ms with no read left in flight",
                                                  (unsigned long long)((now_ns() - t0) / 1000000u));
    async_destroy(&a);
    tu_io_destroy(&sync);
    tu_log_record_free(log);
    tu_run_free(&want);
    tu_run_free(&got);
    free(victim);
}

/* ---- close -------------------------------------------------------------------- */

/* Closing with reads in flight waits for their done (the bytes land in the
 * handle's memory), and leaks nothing (ASan). */
static void test_close_waits_for_reads_in_flight(void **state)
{
    (void)state;
    tu_io sync;
    tu_io_init(&sync);
    async_io a;
    async_init(&a, 500000); /* 0.5 s a read */
    coordl_config cfg = async_config(g_tree, 32, &sync, &a);
    coordl *L = tu_open(&cfg);
    assert_int_equal(wait_for_starts(&a, 32, 200), 32);
    assert_true(atomic_load(&a.in_flight) > 0);
    coordl_close(L);
    assert_int_equal(atomic_load(&a.dones), atomic_load(&a.started)); /* every done called before close returned */
    async_destroy(&a);
    tu_io_destroy(&sync);
}

/* A reader that never calls done: coordl_close returns after io_timeout_ms
 * with an error log, and a done called after it touches nothing freed.
 * In a child process: the memory left to late dones is a deliberate leak,
 * which the child's _exit keeps out of LeakSanitizer's report. */
static void test_close_gives_up_on_a_stuck_reader(void **state)
{
    (void)state;
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        tu_io sync;
        tu_io_init(&sync);
        async_io a;
        async_init(&a, 0);
        a.hold = 1;
        tu_log_record *log = tu_log_record_new();
        coordl_config cfg = async_config(g_tree, 8, &sync, &a);
        cfg.io_timeout_ms = 300;
        cfg.log = tu_log_record_fn;
        cfg.log_user = log;
        coordl *L = tu_open(&cfg);
        for (int i = 0; i < 200 && atomic_load(&a.started) < 8; i++) tu_io__sleep_us(5000);
        if (atomic_load(&a.started) < 8) _exit(10);
        const uint64_t t0 = now_ns();
        coordl_close(L);
        const uint64_t ms = (now_ns() - t0) / 1000000u;
        if (ms < 250 || ms > 5000) _exit(11);
        if (!tu_log_contains(log, "had no done within io_timeout_ms")) _exit(12);
        /* the late dones: into memory coordl left for them */
        pthread_mutex_lock(&a.mu);
        for (areq *q = a.head; q; q = q->next) q->done(q->token, (int64_t)q->len);
        pthread_mutex_unlock(&a.mu);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("the child failed: %s %d (10: no reads started, 11: close did not return within 0.25-5 s, "
                 "12: no error log)", WIFEXITED(status) ? "exit" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

/* ---- configuration --------------------------------------------------------------- */

static void test_bad_configurations_are_refused(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_tree);
    async_io a;
    async_init(&a, 0);
    cfg.io_async = &a.table; /* without io */
    coordl *L = NULL;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "io_async needs io"));
    tu_io sync;
    tu_io_init(&sync);
    cfg.io = &sync.table;
    coordl_io_async no_read = {&a, NULL};
    cfg.io_async = &no_read;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "io_async: set read"));
    assert_null(L);
    async_destroy(&a);
    tu_io_destroy(&sync);
}

int main(void)
{
    tu_main_init(300);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batches_identical_to_the_synchronous_reader),
        cmocka_unit_test(test_reads_in_flight_reach_the_depth_on_one_thread),
        cmocka_unit_test(test_done_inside_read),
        cmocka_unit_test(test_declined_reads_go_through_io),
        cmocka_unit_test(test_seek_and_set_with_reads_in_flight),
        cmocka_unit_test(test_a_failed_read_is_a_bad_sample_naming_the_file),
        cmocka_unit_test(test_a_garbage_result_is_an_io_error),
        cmocka_unit_test(test_a_grown_file_is_read_again_through_io),
        cmocka_unit_test(test_a_read_with_no_done_is_read_through_io_after_io_timeout_ms),
        cmocka_unit_test(test_close_waits_for_reads_in_flight),
        cmocka_unit_test(test_close_gives_up_on_a_stuck_reader),
        cmocka_unit_test(test_bad_configurations_are_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
