/*
 * test_readahead_uring.c - the read-ahead's local reads in flight on
 * io_uring (the built-in POSIX reader; docs/storage.md, "Reads in flight").
 *
 *   - on a cold set (every file's pages dropped with posix_fadvise), depth
 *     64 keeps more than 16 reads in flight while the process's I/O
 *     threads (the read-ahead's, the ring's, any io-wq worker) stay <= 2;
 *   - on a warm set the page cache answers every read: nothing goes to the
 *     ring (the depth follows what is missing, not the maximum);
 *   - COORDL_URING=0 at open falls back to the I/O threads, says so once
 *     in the log, and reads the same bytes;
 *   - batches are byte-identical with io_uring, without it and with
 *     read-ahead off, cold and warm, for a tree and a tar shard of it;
 *   - a tar shard cut short after indexing, read cold, fails the rows past
 *     the cut with the message a worker's read gives.
 * Built with COORDL_NO_URING, the ring is never used and the fallback
 * tests still hold.
 */
#include "test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *g_dir;
static char *g_tree; /* 4 classes x 80 textured JPEGs of 96..128 px: 320 items */
static char *g_tar;  /* the same tree as one tar shard                        */
static const tu_folder_spec SPEC = {4, 80, 96, 96, 32, TU_PAT_TEXTURED, TU_FMT_JPEG, 95, 5};
#define N_ITEMS 320

static int group_setup(void **state)
{
    (void)state;
    unsetenv("COORDL_URING");
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

/* Drops the page cache's copy of every file under path (the files are
 * written back first: dirty pages are not dropped). No root needed. */
static void drop_cached(const char *path)
{
    sync();
    DIR *d = opendir(path);
    if (!d) {
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
            (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            close(fd);
        }
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            char *p = tu_join(path, "%s", e->d_name);
            drop_cached(p);
            free(p);
        }
    closedir(d);
}

static coordl_config uring_config(const char *source, uint32_t depth)
{
    coordl_config cfg = tu_config(source);
    cfg.batch_size = 8;
    cfg.out_w = cfg.out_h = 16;
    cfg.layout = COORDL_F32_NCHW;
    cfg.seed = 24;
    cfg.threads = 1;
    cfg.readahead_items = depth;
    return cfg;
}

/* The process's I/O threads now: the read-ahead's ("coordl-io"), the
 * ring's completion thread ("coordl-uring") and the kernel's io-wq
 * workers for this process ("iou-wrk-*"), from /proc/self/task. */
static int io_threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[300], name[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(name, sizeof name, f))
            n += strncmp(name, "coordl-io", 9) == 0 || strncmp(name, "coordl-uring", 12) == 0 ||
                 strncmp(name, "iou-wrk", 7) == 0;
        fclose(f);
    }
    closedir(d);
    return n;
}

typedef struct {
    atomic_int stop;
    atomic_int max_threads;
} thread_watch;

static void *watch_main(void *arg)
{
    thread_watch *w = arg;
    while (!atomic_load(&w->stop)) {
        const int n = io_threads_now();
        if (n > atomic_load(&w->max_threads)) atomic_store(&w->max_threads, n);
        usleep(500);
    }
    return NULL;
}

/* One epoch (and the stats after it), watching the I/O threads. */
static tu_run run_epoch(const coordl_config *cfg, coordl_stats *st, int *max_io_threads)
{
    thread_watch w;
    atomic_init(&w.stop, 0);
    atomic_init(&w.max_threads, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, watch_main, &w), 0);
    coordl *L = tu_open(cfg);
    tu_run r;
    memset(&r, 0, sizeof r);
    if (tu_run_epochs(L, 1, &r) != COORDL_OK) fail_msg("%s", coordl_errmsg(L));
    coordl_get_stats(L, st);
    coordl_close(L);
    atomic_store(&w.stop, 1);
    pthread_join(t, NULL);
    if (max_io_threads) *max_io_threads = atomic_load(&w.max_threads);
    return r;
}

static void assert_same(const tu_run *a, const tu_run *b, const char *what)
{
    if (a->nbatches != b->nbatches) fail_msg("%s: %zu batches, expected %zu", what, b->nbatches, a->nbatches);
    for (size_t i = 0; i < a->nbatches; i++)
        if (a->hash[i] != b->hash[i]) fail_msg("%s: batch %zu differs from read-ahead off", what, i);
}

#ifndef COORDL_NO_URING
/* Holds the ring's first completion back 300 ms: however fast this
 * machine's storage answers, the reads the read-ahead submits meanwhile
 * are in flight together (without it, how many overlapped depended on the
 * page cache's speed: 8 to 63 of 64). */
static atomic_int g_held_once;
static void hold_first_completion(void *user, const char *point)
{
    (void)user;
    if (strcmp(point, "uring_complete") == 0 && atomic_exchange(&g_held_once, 1) == 0) usleep(300000);
}

/* Depth 64 on a cold set: the reads wait (for the disk, and for the test's
 * held completion), so they pile up in the ring, not on threads. */
static void test_cold_reads_in_flight_without_a_thread_each(void **state)
{
    (void)state;
    coordl_config cfg = uring_config(g_tree, 64);
    atomic_store(&g_held_once, 0);
    cfg.test_hook = hold_first_completion;
    drop_cached(g_tree);
    coordl_stats st;
    int io_threads = 0;
    tu_run r = run_epoch(&cfg, &st, &io_threads);
    assert_int_equal(st.readahead_uring, 1);
    assert_int_equal(st.readahead_io_threads, 1);
    if (st.readahead_max_in_flight <= 16)
        fail_msg("at most %llu reads were in flight at once (depth 64, cold)",
                 (unsigned long long)st.readahead_max_in_flight);
    if (st.readahead_max_in_flight > 64)
        fail_msg("%llu reads in flight at once, beyond the depth 64", (unsigned long long)st.readahead_max_in_flight);
    if (st.readahead_ring_reads < N_ITEMS / 2)
        fail_msg("only %llu of %u cold reads went to the ring", (unsigned long long)st.readahead_ring_reads, N_ITEMS);
    print_message("cold, depth 64: %llu reads in flight at most, %llu of %llu reads in the ring, %d I/O threads\n",
                  (unsigned long long)st.readahead_max_in_flight, (unsigned long long)st.readahead_ring_reads,
                  (unsigned long long)st.readahead_reads, io_threads);
    if (io_threads > 2) fail_msg("%d I/O threads at once (the read-ahead's, the ring's, io-wq workers)", io_threads);
    assert_true(io_threads >= 1);
    tu_run_free(&r);
}

/* A warm set: every read ends in the page cache, nothing waits in the ring
 * (128 buffered reads in flight on warm data ran at 0.6x a pread loop). */
static void test_warm_reads_stay_out_of_the_ring(void **state)
{
    (void)state;
    const coordl_config cfg = uring_config(g_tree, 64);
    coordl_stats st;
    tu_run warmup = run_epoch(&cfg, &st, NULL); /* whatever was cold is now cached */
    tu_run r = run_epoch(&cfg, &st, NULL);
    assert_int_equal(st.readahead_uring, 1);
    assert_int_equal(st.readahead_ring_reads, 0);
    assert_true(st.readahead_max_in_flight <= 1); /* the one thread, inside a cached read */
    assert_true(st.readahead_reads > 0);
    tu_run_free(&warmup);
    tu_run_free(&r);
}
#endif

/* COORDL_URING=0 at open: the I/O threads, one log line saying so. */
static void test_fallback_to_io_threads(void **state)
{
    (void)state;
    coordl_config cfg = uring_config(g_tree, 32);
    tu_log_record *log = tu_log_record_new();
    cfg.log = tu_log_record_fn;
    cfg.log_user = log;
    cfg.log_level = COORDL_LOG_INFO;
    setenv("COORDL_URING", "0", 1);
    drop_cached(g_tree);
    coordl_stats st;
    tu_run r = run_epoch(&cfg, &st, NULL);
    unsetenv("COORDL_URING");
    assert_int_equal(st.readahead_uring, 0);
    assert_int_equal(st.readahead_ring_reads, 0);
    assert_true(st.readahead_reads > 0);
    assert_true(st.readahead_max_in_flight >= 1);
#ifndef COORDL_NO_URING
    assert_true(tu_log_contains(log, "COORDL_URING=0"));
#endif
    cfg.readahead_items = 0;
    tu_run off = run_epoch(&cfg, &st, NULL);
    assert_same(&off, &r, "COORDL_URING=0");
    tu_run_free(&r);
    tu_run_free(&off);
    tu_log_record_free(log);
}

/* The same batches with io_uring (cold and warm), without it, and with
 * read-ahead off; a tree and its tar shard. */
static void test_batches_identical_with_and_without_uring(void **state)
{
    (void)state;
    const char *sources[2] = {g_tree, g_tar};
    for (int s = 0; s < 2; s++) {
        coordl_config cfg = uring_config(sources[s], 0);
        coordl_stats st;
        tu_run off = run_epoch(&cfg, &st, NULL);
        const uint32_t depths[3] = {8, 64, 128};
        for (int k = 0; k < 3; k++) {
            cfg.readahead_items = depths[k];
            drop_cached(sources[s]);
            tu_run cold = run_epoch(&cfg, &st, NULL);
            char what[128];
            snprintf(what, sizeof what, "%s, depth %u, cold", s ? "tar" : "tree", depths[k]);
            assert_same(&off, &cold, what);
#ifndef COORDL_NO_URING
            assert_int_equal(st.readahead_uring, 1);
#endif
            tu_run warm = run_epoch(&cfg, &st, NULL);
            snprintf(what, sizeof what, "%s, depth %u, warm", s ? "tar" : "tree", depths[k]);
            assert_same(&off, &warm, what);
            setenv("COORDL_URING", "0", 1);
            drop_cached(sources[s]);
            tu_run threads = run_epoch(&cfg, &st, NULL);
            unsetenv("COORDL_URING");
            snprintf(what, sizeof what, "%s, depth %u, I/O threads", s ? "tar" : "tree", depths[k]);
            assert_same(&off, &threads, what);
            tu_run_free(&cold);
            tu_run_free(&warm);
            tu_run_free(&threads);
        }
        tu_run_free(&off);
    }
}

/* A tar shard cut short after indexing, read cold: the rows whose members
 * are past the cut fail with the message a worker's own read gives (found
 * at open for a member past the new end, by the ring for one the cut
 * splits), and the rows before it are batches. */
static void test_shard_cut_short_fails_cold(void **state)
{
    (void)state;
    char *copy = tu_join(g_dir, "cut.tar");
    size_t n;
    uint8_t *data = tu_read_file(g_tar, &n);
    tu_write_file(copy, data, n);
    coordl_config cfg = uring_config(copy, 64);
    cfg.shuffle = 0;
    coordl *L = tu_open(&cfg);
    assert_int_equal(truncate(copy, (off_t)(n / 2)), 0); /* the second half of the members is gone, at once */
    drop_cached(copy);
    coordl_batch b;
    coordl_status rc = COORDL_OK;
    uint64_t ok_batches = 0;
    while ((rc = coordl_next(L, &b)) == COORDL_OK) {
        ok_batches++;
        coordl_release(L, &b);
    }
    if (rc != COORDL_ERR_IO) fail_msg("expected COORDL_ERR_IO past the cut, got %s", coordl_strerror(rc));
    const char *msg = coordl_errmsg(L);
    if (!strstr(msg, "cut.tar") || !(strstr(msg, "shrank since indexing")))
        fail_msg("the error does not name the shard and the cut: %s", msg);
    if (ok_batches == 0) fail_msg("no batch before the cut: %s", msg);
    assert_true(ok_batches < N_ITEMS / 8 / 2 + 1);
    coordl_close(L);
    free(data);
    free(copy);
}

int main(void)
{
    tu_main_init(300);
    const struct CMUnitTest tests[] = {
#ifndef COORDL_NO_URING
        cmocka_unit_test(test_cold_reads_in_flight_without_a_thread_each),
        cmocka_unit_test(test_warm_reads_stay_out_of_the_ring),
#endif
        cmocka_unit_test(test_fallback_to_io_threads),
        cmocka_unit_test(test_batches_identical_with_and_without_uring),
        cmocka_unit_test(test_shard_cut_short_fails_cold),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
