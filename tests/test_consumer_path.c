/*
 * test_consumer_path.c - the trainer's side of the ring for token
 * pipelines (issue #14): what keeps the time inside coordl calls short on a
 * busy machine, checked by what it does rather than by timing it (the
 * times are bench/run.sh llmc's):
 *   - while its next batch is not ready the consumer prepares rows itself:
 *     with a worker that takes 100 ms per row, a few dozen rows come from
 *     the consumer, the worker claims only a few, and the batches are the
 *     same as with a fast worker (the determinism contract);
 *   - workers run under SCHED_BATCH (they do not preempt the thread that
 *     wakes them).
 */
#include "test_util.h"
#include "tu_io.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *g_dir, *g_glob;

static int setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    for (int s = 0; s < 2; s++) {
        uint32_t t[4001];
        for (size_t p = 0; p < 4001; p++) t[p] = (uint32_t)((p * 7 + (size_t)s * 1000) % 60000);
        char *path = tu_join(g_dir, "shard_%d.bin", s);
        tu_write_shard(path, 1, t, 4001);
        free(path);
    }
    g_glob = tu_join(g_dir, "shard_*.bin");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_glob);
    return 0;
}

static coordl_config tokens(void)
{
    coordl_config cfg = tu_config(g_glob);
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.token_order = COORDL_TOKENS_LLMC;
    cfg.seq_len = 16;
    cfg.batch_size = 4;
    cfg.shuffle = 0;
    cfg.threads = 1;
    return cfg;
}

typedef struct {
    pthread_mutex_t mu;
    int claimed;
    int delay_ms;
} slow_worker;

static void slow_hook(void *user, const char *point)
{
    slow_worker *w = user;
    if (strcmp(point, "row_claimed") != 0) return;
    pthread_mutex_lock(&w->mu);
    w->claimed++;
    pthread_mutex_unlock(&w->mu);
    usleep((useconds_t)w->delay_ms * 1000);
}

static void read_batches(coordl *L, int n, uint64_t *hash)
{
    int32_t in[4 * 16], tg[4 * 16];
    for (int k = 0; k < n; k++) {
        coordl_status rc = coordl_next_into(L, in, sizeof in, tg, sizeof tg);
        if (rc == COORDL_END_OF_EPOCH) rc = coordl_next_into(L, in, sizeof in, tg, sizeof tg);
        assert_int_equal(rc, COORDL_OK);
        hash[k] = tu_fnv1a(tu_fnv1a(TU_FNV_OFFSET, in, sizeof in), tg, sizeof tg);
    }
}

static void test_consumer_prepares_rows_while_its_batch_is_not_ready(void **state)
{
    (void)state;
    enum { N = 40 }; /* 160 rows (an epoch is 2 x 62 batches of 4) */
    uint64_t fast[N], slow[N];
    coordl_config cfg = tokens();
    coordl *L = tu_open(&cfg);
    read_batches(L, N, fast);
    coordl_close(L);

    slow_worker w = {PTHREAD_MUTEX_INITIALIZER, 0, 100};
    cfg.test_hook = slow_hook;
    cfg.test_hook_user = &w;
    L = tu_open(&cfg);
    read_batches(L, N, slow);
    coordl_close(L); /* joins the worker: no hook runs after this */
    for (int k = 0; k < N; k++)
        if (fast[k] != slow[k]) fail_msg("batch %d differs when the consumer prepares rows itself", k);
    /* a 100 ms worker claims one row per 100 ms; the consumer did the rest */
    if (w.claimed > N * 4 / 2)
        fail_msg("the worker claimed %d of %d rows: the consumer waited instead of preparing them", w.claimed, N * 4);
}


/* Issue 23: with no workers (threads 0, the default for tokens) the
 * trainer's thread reads the windows itself, from a shard it keeps open,
 * a 64 KiB block at a time: 160 windows of 2 shards cost 2 opens and a
 * read a shard, not 160 of each (open + stat + read + close a window
 * before), and no I/O thread reads ahead. */
static void test_token_windows_read_from_a_shard_kept_open(void **state)
{
    (void)state;
    tu_io io;
    tu_io_init(&io);
    coordl_config cfg = tokens();
    cfg.threads = 0;
    cfg.io = &io.table;
    coordl *L = tu_open(&cfg);
    coordl_config got;
    assert_int_equal(coordl_get_config(L, &got), COORDL_OK);
    assert_int_equal(got.readahead_items, 0);
    const long opens_at_open = atomic_load(&io.opens), reads_at_open = atomic_load(&io.reads);
    uint64_t hash[40];
    read_batches(L, 40, hash);
    coordl_stats st;
    coordl_get_stats(L, &st);
    const long opens = atomic_load(&io.opens) - opens_at_open, reads = atomic_load(&io.reads) - reads_at_open;
    coordl_close(L);
    assert_int_equal(st.threads, 0);
    assert_int_equal(st.readahead_reads, 0);
    /* a read brings a 64 KiB block of a shard (these are 8 KiB): the
     * windows inside it are copies */
    if (reads > 4) fail_msg("%ld reads for 160 windows of 2 shards of 8 KiB", reads);
    if (opens > 2) fail_msg("%ld opens for 160 windows of 2 shards", opens);
    assert_int_equal(atomic_load(&io.open_now), 0); /* closed at coordl_close */
    tu_io_destroy(&io);
}

#ifdef __linux__
/* SCHED_BATCH is policy 3; /proc/self/task/<tid>/stat field 41 */
static int threads_with_policy(int policy)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[300], buf[4096];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = 0;
        char *p = strrchr(buf, ')'); /* the command may hold spaces */
        if (!p) continue;
        int field = 2, val = -1;
        for (char *tok = strtok(p + 1, " "); tok; tok = strtok(NULL, " "))
            if (++field == 41) { val = atoi(tok); break; }
        n += val == policy;
    }
    closedir(d);
    return n;
}

static void test_workers_run_sched_batch(void **state)
{
    (void)state;
    const int before = threads_with_policy(SCHED_BATCH);
    coordl_config cfg = tokens();
    cfg.threads = 2;
    coordl *L = tu_open(&cfg);
    int32_t in[4 * 16], tg[4 * 16]; /* the workers have run */
    assert_int_equal(coordl_next_into(L, in, sizeof in, tg, sizeof tg), COORDL_OK);
    /* each worker sets its policy when it starts: give both a moment */
    int n = 0;
    for (int i = 0; i < 200 && (n = threads_with_policy(SCHED_BATCH) - before) < 2; i++) usleep(10000);
    assert_int_equal(n, 2);
    assert_int_equal(sched_getscheduler(0), SCHED_OTHER); /* the trainer's thread is left alone */
    coordl_close(L);
}

/* Context switches (voluntary and not) of the loader's worker threads
 * (named coordl-w<N>): how often an idle worker woke. */
static long worker_switches(void)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    struct dirent *e;
    long sum = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[300], line[256], name[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        long n = 0;
        while (fgets(line, sizeof line, f)) {
            if (!strncmp(line, "Name:", 5)) sscanf(line + 5, "%63s", name);
            if (!strncmp(line, "voluntary_ctxt_switches:", 24)) n += atol(line + 24);
            if (!strncmp(line, "nonvoluntary_ctxt_switches:", 27)) n += atol(line + 27);
        }
        fclose(f);
        if (!strncmp(name, "coordl-w", 8)) sum += n;
    }
    closedir(d);
    return sum;
}

/* Rows prepared once the count has not moved for 300 ms (the ring full). */
static uint64_t rows_when_settled(coordl *L)
{
    coordl_stats st;
    uint64_t last = UINT64_MAX;
    for (int i = 0; i < 100; i++) {
        coordl_get_stats(L, &st);
        if (st.items == last) return last;
        last = st.items;
        usleep(300000);
    }
    fail_msg("the rows prepared never settled");
    return 0;
}

/* Issue 23: an idle loader (ring full, trainer asleep, nothing to rewrite)
 * makes no wake-ups: its workers are parked without a timer, alone and in
 * a coordinated group (whose waits polled every 50 ms before: 20 wake-ups
 * a second per worker). And the wake-up protocol: releases that free half
 * the ring wake a parked worker, which fills it again. */
static void idle_workers_make_no_wakeups(const char *group)
{
    coordl_config cfg = tokens();
    cfg.threads = 2;
    cfg.prefetch_batches = 4;
    cfg.group = group;
    cfg.group_size = 1;
    coordl *L = tu_open(&cfg);
    int32_t in[4 * 16], tg[4 * 16];
    assert_int_equal(coordl_next_into(L, in, sizeof in, tg, sizeof tg), COORDL_OK);
    const uint64_t full = rows_when_settled(L); /* the ring is full */
    const long before = worker_switches();
    usleep(1000000);
    const long idle = worker_switches() - before;
    if (idle > 1)
        fail_msg("%s: idle workers woke %ld times in 1 s with the ring full", group ? "group" : "alone", idle);
    /* take the ring; the workers must wake and fill it again */
    for (int k = 0; k < 4; k++) assert_int_equal(coordl_next_into(L, in, sizeof in, tg, sizeof tg), COORDL_OK);
    const uint64_t refilled = rows_when_settled(L);
    if (refilled < full + 4 * 4)
        fail_msg("%s: %llu rows prepared after 4 batches were taken from a full ring of %llu: no worker woke",
                 group ? "group" : "alone", (unsigned long long)refilled, (unsigned long long)full);
    assert_true(worker_switches() - before > idle);
    coordl_close(L);
}

static void test_idle_workers_make_no_wakeups(void **state)
{
    (void)state;
    idle_workers_make_no_wakeups(NULL);
    char group[64];
    snprintf(group, sizeof group, "cdlt-%d-idle", (int)getpid());
    idle_workers_make_no_wakeups(group);
}
#endif

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_consumer_prepares_rows_while_its_batch_is_not_ready),
        cmocka_unit_test(test_token_windows_read_from_a_shard_kept_open),
#ifdef __linux__
        cmocka_unit_test(test_workers_run_sched_batch),
        cmocka_unit_test(test_idle_workers_make_no_wakeups),
#endif
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
