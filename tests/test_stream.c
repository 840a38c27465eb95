/*
 * test_stream.c - the stream's consumer path and its guarantees, through the
 * public API:
 *   a stale copy of a released batch releases nothing (the handle carries
 *     the slot's generation): the batch now in that slot keeps its bytes;
 *   coordl_batch keeps its 0.3.0 size and offsets (gen_ is tail padding);
 *   max_out_w/max_out_h are validated like out_w/out_h (a huge value used
 *     to wrap the ring's row size to 0 and crash a worker);
 *   releasing a batch wakes at most one worker (the one that can use the
 *     freed slot), counted from each worker's voluntary context switches;
 *   stall_ns counts only the time inside coordl_next and
 *     coordl_next_into (release, set, seek are the trainer's: compute_ns),
 *     stall + compute cover the run, stall_fraction is their ratio, and
 *     the epochs' counters add up to the totals;
 *   the "any thread" queries polled from another thread while the
 *     consumer trains and calls coordl_set return consistent values
 *     (make test-tsan runs this under ThreadSanitizer);
 *   the pin callback sees every arena registered once and unregistered
 *     once, batch.data always inside a registered arena: after coordl_set
 *     grows the ring, and for a group's shared arenas;
 *   coordl_stats_json has every counter of coordl_stats.
 *
 * Dataset: 4 classes x 16 textured JPEGs of 40..56 px (64 items).
 */
#include "test_util.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N_ITEMS 64u

static char *g_dir;
static char *g_root;
static const tu_folder_spec g_spec = {4, 16, 40, 40, 16, TU_PAT_TEXTURED, TU_FMT_JPEG, 90, 11};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Hashes of every batch of epoch 0 of cfg (a loader of its own). */
static size_t reference_hashes(const coordl_config *cfg, uint64_t *hash, size_t cap)
{
    coordl *L = tu_open(cfg);
    size_t n = 0;
    coordl_batch b;
    coordl_status rc;
    while ((rc = coordl_next(L, &b)) == COORDL_OK) {
        assert_true(n < cap);
        hash[n++] = tu_batch_hash(&b);
        coordl_release(L, &b);
    }
    assert_int_equal(rc, COORDL_END_OF_EPOCH);
    coordl_close(L);
    return n;
}

/* Waits until the workers have prepared `items` rows (bounded). */
static void wait_items(coordl *L, uint64_t items, int limit_ms)
{
    coordl_stats st;
    for (int waited = 0; waited < limit_ms; waited += 5) {
        coordl_get_stats(L, &st);
        if (st.items >= items)
            return;
        sleep_ms(5);
    }
}

/* ---- defect: a stale batch handle released the slot's new batch ------- */

/* Two slots: batch 0 in slot A is released, so batch 2 goes into slot A
 * while batch 1 (slot B) and batch 2 are held. Releasing the stale copy of
 * batch 0 must release nothing: were slot A freed, the workers would write
 * batch 3 over batch 2, which the caller still reads. */
static void test_stale_copy_of_a_released_batch_releases_nothing(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_root);
    cfg.batch_size = 4;
    cfg.prefetch_batches = 2;
    cfg.seed = 5;
    uint64_t ref[N_ITEMS];
    const size_t nref = reference_hashes(&cfg, ref, N_ITEMS);
    assert_int_equal(nref, N_ITEMS / 4);

    coordl *L = tu_open(&cfg);
    coordl_batch a, b, c;
    assert_int_equal(coordl_next(L, &a), COORDL_OK);
    const coordl_batch stale = a;
    coordl_release(L, &a);
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_int_equal(coordl_next(L, &c), COORDL_OK);
    assert_int_equal(c.index, 2);
    /* the test means something only if batch 2 reuses batch 0's slot */
    assert_int_equal(c.slot_, stale.slot_);
    assert_true(tu_batch_hash(&c) == ref[2]);

    coordl_batch again = stale;
    coordl_release(L, &again); /* stale: must be a no-op */
    wait_items(L, 4 * 4, 400);  /* a wrongly freed slot would hold batch 3 by now */
    if (tu_batch_hash(&c) != ref[2])
        fail_msg("releasing a stale copy of batch 0 freed the slot of batch 2, which the workers overwrote "
                 "while it was held");
    /* and the rest of the epoch is the reference's */
    coordl_release(L, &b);
    coordl_release(L, &c);
    coordl_batch d;
    size_t i = 3;
    coordl_status rc;
    while ((rc = coordl_next(L, &d)) == COORDL_OK) {
        assert_true(i < nref);
        assert_true(tu_batch_hash(&d) == ref[i]);
        i++;
        coordl_release(L, &d);
    }
    assert_int_equal(rc, COORDL_END_OF_EPOCH);
    assert_int_equal(i, nref);
    coordl_close(L);
}

/* gen_ went into what was tail padding: a 0.3.0 client's coordl_batch
 * holds it, every 0.3.0 field at the same offset; what came later (the
 * boxes, issue 26) starts after the 0.3.0 struct's end, so coordl_release
 * (which takes no size) reads only bytes every release's struct has. */
static void test_batch_struct_keeps_its_size_and_offsets(void **state)
{
    (void)state;
    assert_int_equal(offsetof(coordl_batch, gen_), offsetof(coordl_batch, slot_) + sizeof(uint32_t));
    const size_t v030 = (offsetof(coordl_batch, slot_) + sizeof(uint32_t) + _Alignof(coordl_batch) - 1) /
                        _Alignof(coordl_batch) * _Alignof(coordl_batch);
    assert_true(offsetof(coordl_batch, gen_) + sizeof(uint32_t) <= v030);
    assert_int_equal(offsetof(coordl_batch, boxes), v030);
    assert_int_equal(sizeof(coordl_batch), v030 + 2 * sizeof(void *));
}

/* ---- defect: max_out_w/max_out_h not validated ------------------------ */

/* Opens cfg in a child (a crash must not take the test binary with it)
 * and takes one batch; returns the open status, or -100 - signal when the
 * child died. */
static int open_in_child(const coordl_config *cfg)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        signal(SIGABRT, SIG_DFL);
        alarm(20);
        coordl *L = NULL;
        int rc = coordl_open(cfg, &L);
        if (rc == COORDL_OK) {
            coordl_batch b;
            if (coordl_next(L, &b) == COORDL_OK)
                coordl_release(L, &b);
            coordl_close(L);
        }
        char msg[600];
        snprintf(msg, sizeof msg, "%d %s", rc, rc == COORDL_OK ? "" : coordl_errmsg(NULL));
        ssize_t k = write(fds[1], msg, strlen(msg) + 1);
        (void)k;
        _exit(0);
    }
    close(fds[1]);
    char msg[600] = {0};
    ssize_t got = 0, k;
    while ((k = read(fds[0], msg + got, sizeof msg - 1 - (size_t)got)) > 0)
        got += k;
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        return -100 - WTERMSIG(status);
    int rc = 0;
    char text[600] = {0};
    sscanf(msg, "%d %599[^\n]", &rc, text);
    if (rc != COORDL_OK && !strstr(text, "max_out"))
        fail_msg("open failed with a message that does not name max_out: %s", text);
    return rc;
}

static void test_max_out_size_is_validated(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_root);
    const uint32_t bad[][2] = {{1u << 31, 1u << 31}, {65536, 16}, {16, 70000}, {16384, 16384}, {UINT32_MAX, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cfg.max_out_w = bad[i][0];
        cfg.max_out_h = bad[i][1];
        int rc = open_in_child(&cfg);
        if (rc <= -100)
            fail_msg("max_out %ux%u: the loader crashed (signal %d)", bad[i][0], bad[i][1], -100 - rc);
        if (rc != COORDL_ERR_INVALID)
            fail_msg("max_out %ux%u: coordl_open = %d, expected COORDL_ERR_INVALID", bad[i][0], bad[i][1], rc);
    }
    /* sane values still open, and coordl_set can use them */
    cfg.max_out_w = 32;
    cfg.max_out_h = 24;
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_W, 32), COORDL_OK);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_H, 24), COORDL_OK);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_int_equal(b.w, 32);
    assert_int_equal(b.h, 24);
    coordl_release(L, &b);
    coordl_close(L);
}

/* ---- issue 14: release wakes at most one worker --------------------- */

/* Voluntary context switches of each of this process's coordl workers
 * (threads named coordl-w*), in tid order; returns how many. */
static int worker_switches(long *out, int cap)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    long tids[64];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[320], comm[64] = {0};
        snprintf(path, sizeof path, "/proc/self/task/%.256s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (!fgets(comm, sizeof comm, f))
            comm[0] = '\0';
        fclose(f);
        if (strncmp(comm, "coordl-w", 8) != 0 || n >= cap || n >= 64)
            continue;
        tids[n++] = atol(e->d_name);
    }
    closedir(d);
    for (int i = 0; i < n; i++) /* tid order, so the same index is the same thread */
        for (int j = i + 1; j < n; j++)
            if (tids[j] < tids[i]) {
                long t = tids[i];
                tids[i] = tids[j];
                tids[j] = t;
            }
    for (int i = 0; i < n; i++) {
        char path[128], line[256];
        snprintf(path, sizeof path, "/proc/self/task/%ld/status", tids[i]);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        out[i] = -1;
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0)
                out[i] = atol(line + 24);
        fclose(f);
    }
    return n;
}

/* Four workers wait for a slot (the ring of two is full); a batch of one
 * row is taken and released: exactly one worker may wake to prepare the
 * one row of the freed slot. Waking all four (a broadcast) cost the
 * consumer ~0.6 ms per release on a loaded machine. */
static void test_release_wakes_at_most_one_worker(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_root);
    cfg.threads = 4;
    cfg.batch_size = 1;
    cfg.prefetch_batches = 2;
    cfg.bind = 0;
    coordl *L = tu_open(&cfg);
    int worst = 0;
    for (int round = 0; round < 3; round++) {
        coordl_batch b;
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        wait_items(L, (uint64_t)round + 2, 2000); /* the ring is full again */
        sleep_ms(100);                            /* every worker waits */
        long before[8], after[8];
        const int n = worker_switches(before, 8);
        assert_int_equal(n, 4);
        coordl_release(L, &b);
        wait_items(L, (uint64_t)round + 3, 2000);
        sleep_ms(100);
        assert_int_equal(worker_switches(after, 8), n);
        int woke = 0;
        for (int i = 0; i < n; i++)
            woke += after[i] != before[i];
        if (woke > worst)
            worst = woke;
    }
    if (worst != 1)
        fail_msg("a release woke %d of 4 waiting workers; the freed slot has one row for one worker", worst);
    coordl_close(L);
}

/* ---- issue 22: stall_ns counts only the wait inside coordl_next ------ */

typedef struct {
    int delay_ms; /* each pin callback sleeps this long */
} slow_pin;

static int slow_pin_cb(void *user, void *addr, size_t bytes, int register_it)
{
    (void)addr;
    (void)bytes;
    (void)register_it;
    sleep_ms(((slow_pin *)user)->delay_ms);
    return 0;
}

static atomic_int g_release_delay_ms;

static void release_hook(void *user, const char *point)
{
    (void)user;
    if (strcmp(point, "release") == 0 && atomic_load(&g_release_delay_ms) > 0)
        sleep_ms(atomic_load(&g_release_delay_ms));
}

/* Every call is timed by the test. stall_ns must be the time inside
 * coordl_next and coordl_next_into (the library measures inside the
 * call, so at most a few microseconds less per call) and nothing else:
 * coordl_set grows the ring through a pin callback that sleeps 25 ms per
 * call (unregister + register: 50 ms), coordl_release is slowed 10 ms by a
 * hook once, and a seek restarts the stream; those are the trainer's own
 * calls, counted in compute_ns. Both together cover the span from the
 * first call to the last, stall_fraction is stall / (stall + compute), and
 * the kept epochs' counters add up to the totals. */
static void test_stall_counts_only_the_wait_inside_coordl_next(void **state)
{
    (void)state;
    slow_pin sp = {0};
    coordl_config cfg = tu_config(g_root);
    cfg.batch_size = 4;
    cfg.pin = slow_pin_cb;
    cfg.pin_user = &sp;
    cfg.cache_pin = COORDL_PIN_OFF;
    cfg.test_hook = release_hook;
    coordl *L = tu_open(&cfg);
    sp.delay_ms = 25;
    uint64_t in_next = 0, set_ns = 0, release_ns = 0, calls = 0;
    coordl_stats s0;
    coordl_get_stats(L, &s0);
    assert_int_equal(s0.stall_ns, 0);
    assert_true(s0.stall_fraction == 0.0);
    /* the span starts as the first call does: time before it (the query
     * above, a preemption on a loaded machine) is neither stall nor compute */
    uint64_t first = 0, last = 0;
    for (int step = 0; step < 24; step++) {
        coordl_batch b;
        uint64_t t0 = now_ns();
        if (!first) first = t0;
        coordl_status rc = coordl_next(L, &b);
        /* the span ends as the last call returns: time after it (the
         * release, a preemption) is counted at a next call that never
         * comes */
        last = now_ns();
        in_next += last - t0;
        calls++;
        if (rc == COORDL_END_OF_EPOCH)
            continue;
        assert_int_equal(rc, COORDL_OK);
        if (step == 5)
            atomic_store(&g_release_delay_ms, 10);
        t0 = now_ns();
        coordl_release(L, &b);
        uint64_t d = now_ns() - t0;
        if (step == 5) {
            atomic_store(&g_release_delay_ms, 0);
            release_ns = d;
        }
        if (step == 9) { /* a bigger output: the ring grows (no batch held) */
            t0 = now_ns();
            assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_SIZE, 40), COORDL_OK);
            set_ns = now_ns() - t0;
        }
        if (step == 15)
            assert_int_equal(coordl_seek(L, 3, 1), COORDL_OK);
        if (step == 19) {
            static uint8_t data[4 * 40 * 40 * 3];
            int32_t labels[4];
            t0 = now_ns();
            rc = coordl_next_into(L, data, sizeof data, labels, sizeof labels);
            last = now_ns();
            in_next += last - t0;
            calls++;
            assert_true(rc == COORDL_OK || rc == COORDL_END_OF_EPOCH);
        }
    }
    coordl_stats st;
    coordl_get_stats(L, &st);
    const uint64_t slack = calls * 20000ull; /* 20 us a call: clock reads, lock */
    assert_true(set_ns >= 45000000ull);    /* the slow pin callback ran */
    assert_true(release_ns >= 9000000ull); /* the slow release hook ran */
    if (st.stall_ns + slack < in_next || st.stall_ns > in_next)
        fail_msg("stall_ns %.3f ms, but the calls to coordl_next took %.3f ms (coordl_set took %.3f ms and a "
                 "release %.3f ms besides: neither is a wait for data)", st.stall_ns / 1e6, in_next / 1e6,
                 set_ns / 1e6, release_ns / 1e6);
    const uint64_t span = last - first;
    if (st.stall_ns + st.compute_ns > span || st.stall_ns + st.compute_ns + slack < span - (span / 50))
        fail_msg("stall %.3f + compute %.3f ms should cover the %.3f ms from the first call to the last",
                 st.stall_ns / 1e6, st.compute_ns / 1e6, span / 1e6);
    const double want = (double)st.stall_ns / (double)(st.stall_ns + st.compute_ns);
    if (fabs(st.stall_fraction - want) > 1e-9)
        fail_msg("stall_fraction %.6f, stall / (stall + compute) is %.6f", st.stall_fraction, want);
    /* the epochs: 0, and 3 after the seek */
    uint64_t ep_stall = 0, ep_compute = 0;
    for (uint64_t e = 0; e < 8; e++) {
        coordl_epoch_stats es;
        if (coordl_get_epoch_stats(L, e, &es) != COORDL_OK)
            continue;
        ep_stall += es.stall_ns;
        ep_compute += es.compute_ns;
        if (es.stall_ns + es.compute_ns &&
            fabs(es.stall_fraction - (double)es.stall_ns / (double)(es.stall_ns + es.compute_ns)) > 1e-9)
            fail_msg("epoch %llu: stall_fraction %.6f is not stall / (stall + compute)", (unsigned long long)e,
                     es.stall_fraction);
    }
    assert_int_equal(ep_compute, st.compute_ns);
    /* the last call's tail moves into its epoch with the next call */
    assert_true(ep_stall <= st.stall_ns && ep_stall + slack >= st.stall_ns);
    coordl_close(L);
}

/* ---- defect: "any thread" queries raced with workers and coordl_set --- */

typedef struct {
    coordl *L;
    atomic_int stop;
    uint64_t bpe_ok[2];       /* the two batch counts coordl_set alternates */
    coordl_transform t_ok[2]; /* item 0's eval transform at the two sizes */
    long polls, bad_bpe, bad_transform, bad_json;
} poller;

static void *poll_queries(void *arg)
{
    poller *p = arg;
    static char json[1 << 16];
    while (!atomic_load(&p->stop)) {
        coordl_stats st;
        coordl_get_stats(p->L, &st);
        coordl_epoch_stats es;
        (void)coordl_get_epoch_stats(p->L, 0, &es);
        uint64_t bpe = coordl_batches_per_epoch(p->L);
        if (bpe != p->bpe_ok[0] && bpe != p->bpe_ok[1])
            p->bad_bpe++;
        size_t n = coordl_stats_json(p->L, json, sizeof json);
        if (n >= sizeof json || !tu_json_valid(json, n, NULL))
            p->bad_json++;
        coordl_transform t;
        if (coordl_sample_transform(p->L, 0, 0, &t) == COORDL_OK) {
            int same = 0;
            for (int k = 0; k < 2; k++)
                same |= t.x == p->t_ok[k].x && t.y == p->t_ok[k].y && t.w == p->t_ok[k].w && t.h == p->t_ok[k].h;
            if (!same)
                p->bad_transform++;
        }
        (void)coordl_num_items(p->L);
        (void)coordl_item_path(p->L, 3);
        p->polls++;
    }
    return NULL;
}

/* The consumer trains 3 epochs of the eval pipeline and switches output
 * size (16 <-> 24, both sides at once) and batch size (4 <-> 8) while
 * another thread polls every query. Each answer must be one of the two
 * consistent states, never a mix (out_w of one size with out_h of the
 * other); under ThreadSanitizer, no data race may be reported. */
static void test_queries_from_another_thread_during_training_and_set(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_root);
    cfg.pipeline = COORDL_PIPE_EVAL;
    cfg.batch_size = 4;
    cfg.max_out_w = cfg.max_out_h = 24;
    cfg.max_batch_size = 8;
    poller p;
    memset(&p, 0, sizeof p);
    for (int k = 0; k < 2; k++) {
        coordl_config c = cfg;
        c.out_w = c.out_h = k ? 24 : 16;
        coordl *R = tu_open(&c);
        assert_int_equal(coordl_sample_transform(R, 0, 0, &p.t_ok[k]), COORDL_OK);
        coordl_close(R);
    }
    assert_true(p.t_ok[0].w != p.t_ok[1].w || p.t_ok[0].x != p.t_ok[1].x);
    p.bpe_ok[0] = N_ITEMS / 4;
    p.bpe_ok[1] = N_ITEMS / 8;
    p.L = tu_open(&cfg);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, poll_queries, &p), 0);
    unsigned ends = 0;
    int step = 0;
    while (ends < 3) {
        coordl_batch b;
        coordl_status rc = coordl_next(p.L, &b);
        if (rc == COORDL_END_OF_EPOCH) {
            ends++;
            continue;
        }
        assert_int_equal(rc, COORDL_OK);
        coordl_release(p.L, &b);
        step++;
        assert_int_equal(coordl_set(p.L, COORDL_PARAM_OUT_SIZE, step % 2 ? 24 : 16), COORDL_OK);
        if (step % 5 == 0)
            assert_int_equal(coordl_set(p.L, COORDL_PARAM_BATCH_SIZE, step % 10 ? 8 : 4), COORDL_OK);
    }
    atomic_store(&p.stop, 1);
    pthread_join(th, NULL);
    coordl_close(p.L);
    assert_true(p.polls > 0);
    if (p.bad_bpe || p.bad_transform || p.bad_json)
        fail_msg("%ld polls: %ld inconsistent batches_per_epoch, %ld transforms of neither size, %ld bad JSON",
                 p.polls, p.bad_bpe, p.bad_transform, p.bad_json);
}

/* ---- defect: the pin callback, once per arena ------------------------- */

#define MAX_PINS 32
typedef struct {
    struct {
        uintptr_t addr;
        size_t bytes;
        int live;
    } a[MAX_PINS];
    int n, registers, unregisters, double_register, unmatched;
} pin_book;

static int pin_book_cb(void *user, void *addr, size_t bytes, int register_it)
{
    pin_book *p = user;
    const uintptr_t x = (uintptr_t)addr;
    if (register_it) {
        p->registers++;
        for (int i = 0; i < p->n; i++)
            if (p->a[i].live && x < p->a[i].addr + p->a[i].bytes && p->a[i].addr < x + bytes)
                p->double_register++;
        if (p->n < MAX_PINS) {
            p->a[p->n].addr = x;
            p->a[p->n].bytes = bytes;
            p->a[p->n].live = 1;
            p->n++;
        }
    } else {
        p->unregisters++;
        int found = 0;
        for (int i = 0; i < p->n; i++)
            if (p->a[i].live && p->a[i].addr == x && p->a[i].bytes == bytes) {
                p->a[i].live = 0;
                found = 1;
                break;
            }
        if (!found)
            p->unmatched++;
    }
    return 0;
}

static int pinned(const pin_book *p, const void *addr, size_t bytes)
{
    const uintptr_t x = (uintptr_t)addr;
    for (int i = 0; i < p->n; i++)
        if (p->a[i].live && x >= p->a[i].addr && x + bytes <= p->a[i].addr + p->a[i].bytes)
            return 1;
    return 0;
}

static int live_pins(const pin_book *p)
{
    int n = 0;
    for (int i = 0; i < p->n; i++)
        n += p->a[i].live;
    return n;
}

static void check_batches_pinned(coordl *L, pin_book *p, int batches)
{
    for (int i = 0; i < batches; i++) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH)
            continue;
        assert_int_equal(rc, COORDL_OK);
        if (!pinned(p, b.data, b.data_bytes))
            fail_msg("batch %llu's data is not inside a registered arena", (unsigned long long)b.index);
        coordl_release(L, &b);
    }
}

static void test_pin_callback_once_per_arena_after_growth(void **state)
{
    (void)state;
    pin_book p;
    memset(&p, 0, sizeof p);
    coordl_config cfg = tu_config(g_root);
    cfg.cache_bytes = 1 << 20;
    cfg.cache_pin = COORDL_PIN_OFF;
    cfg.pin = pin_book_cb;
    cfg.pin_user = &p;
    coordl *L = tu_open(&cfg);
    assert_int_equal(p.registers, 2); /* cache slab + batch ring */
    check_batches_pinned(L, &p, 3);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_SIZE, 64), COORDL_OK); /* beyond the ring: it grows */
    assert_int_equal(p.registers, 3);
    assert_int_equal(p.unregisters, 1); /* the old ring */
    check_batches_pinned(L, &p, 3);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_SIZE, 32), COORDL_OK); /* fits: no new arena */
    assert_int_equal(p.registers, 3);
    check_batches_pinned(L, &p, 3);
    coordl_close(L);
    assert_int_equal(p.double_register, 0);
    assert_int_equal(p.unmatched, 0);
    assert_int_equal(p.unregisters, p.registers);
    assert_int_equal(live_pins(&p), 0);
}

/* A group's cache slab and ring are arenas too: registered once by the
 * member that maps them, batch data inside, unregistered at close. */
static void test_pin_callback_registers_a_groups_shared_arenas(void **state)
{
    (void)state;
    pin_book p;
    memset(&p, 0, sizeof p);
    char group[64];
    snprintf(group, sizeof group, "cdlt-%d-pin", (int)getpid());
    coordl_config cfg = tu_config(g_root);
    cfg.cache_bytes = 1 << 20;
    cfg.cache_pin = COORDL_PIN_OFF;
    cfg.pin = pin_book_cb;
    cfg.pin_user = &p;
    cfg.group = group;
    coordl *L = tu_open(&cfg);
    if (p.registers != 2)
        fail_msg("a group member registered %d arenas with the pin callback, expected 2 (cache slab, ring)",
                 p.registers);
    check_batches_pinned(L, &p, 10);
    coordl_close(L);
    assert_int_equal(p.double_register, 0);
    assert_int_equal(p.unmatched, 0);
    assert_int_equal(p.unregisters, 2);
    assert_int_equal(live_pins(&p), 0);
}

/* ---- stats JSON: every counter --------------------------------------- */

static void test_stats_json_has_every_counter(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_root);
    coordl *L = tu_open(&cfg);
    tu_run run;
    memset(&run, 0, sizeof run);
    assert_int_equal(tu_run_epochs(L, 1, &run), COORDL_OK);
    tu_run_free(&run);
    static char json[1 << 16];
    size_t n = coordl_stats_json(L, json, sizeof json);
    assert_true(n < sizeof json);
    assert_true(tu_json_valid(json, n, NULL));
    static const char *const keys[] = {
        "stall_ns", "compute_ns", "batches", "items", "cache_hits", "cache_misses", "cache_hit_bytes",
        "cache_bytes_used", "cache_items", "cache_bytes_budget", "dataset_bytes", "storage_bytes",
        "storage_reads", "bad_samples", "read_ns", "read_cache_ns", "read_storage_ns", "decode_ns",
        "augment_ns", "wait_slot_ns", "threads", "pinned_bytes", "threads_bound", "items_prepared",
        "group_members", "peer_hits", "peer_bytes", "peer_fallbacks", "peer_served", "placement_cpus",
        "storage_mb_per_s", "epochs", "fetch_bytes", "cache_bytes_requested", "threads_requested",
        "stall_fraction"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!tu_json_has_key(json, keys[i]))
            fail_msg("coordl_stats_json has no \"%s\": %s", keys[i], json);
    coordl_close(L);
}

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    g_root = tu_join(g_dir, "data");
    tu_make_image_folder(g_root, &g_spec);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    char name[96];
    snprintf(name, sizeof name, "/coordl-cdlt-%d-pin", (int)getpid());
    shm_unlink(name);
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_root);
    return 0;
}

int main(void)
{
    tu_main_init(300);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_copy_of_a_released_batch_releases_nothing),
        cmocka_unit_test(test_batch_struct_keeps_its_size_and_offsets),
        cmocka_unit_test(test_max_out_size_is_validated),
        cmocka_unit_test(test_release_wakes_at_most_one_worker),
        cmocka_unit_test(test_stall_counts_only_the_wait_inside_coordl_next),
        cmocka_unit_test(test_queries_from_another_thread_during_training_and_set),
        cmocka_unit_test(test_pin_callback_once_per_arena_after_growth),
        cmocka_unit_test(test_pin_callback_registers_a_groups_shared_arenas),
        cmocka_unit_test(test_stats_json_has_every_counter),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
