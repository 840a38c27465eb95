/*
 * test_faults.c - storage faults injected through a test reader (cfg.io,
 * tests/tu_io.h), as SQLite's test VFS does: EIO on the k-th read, short
 * reads, EINTR, a latency spike longer than the prefetch horizon, files
 * that shrink or vanish between indexing and reading, and a reader
 * returning garbage sizes. Each runs under both bad-sample policies over
 * an ImageFolder tree and over a tar shard of it, and checks:
 *   - every batch that can be correct is: its hash equals the fault-free
 *     run's (same ids, labels, every byte);
 *   - the rest are, under COORDL_BAD_FAIL, an error for that batch naming
 *     the file and the reason, and under COORDL_BAD_SUBSTITUTE a batch with
 *     the bad row substituted, counted in bad_samples and logged;
 *   - no batch is lost (every epoch has all its batches, in order), nothing
 *     hangs (the binary has a watchdog), every file the reader opened was
 *     closed; make test-sanitize runs the same under ASan/LSan (no leak).
 * Every test runs twice: with read-ahead off (the workers read) and at
 * depth 32 (the I/O threads read, and the fault reaches the row).
 */
#include "test_util.h"
#include "tu_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BATCH 4
#define EPOCHS 2

static char *g_dir;
static char *g_tree; /* 3 classes x 8 textured JPEGs: 24 items, 6 batches */
static char *g_tar;  /* the same tree as one tar shard */
static const tu_folder_spec SPEC = {3, 8, 28, 24, 6, TU_PAT_TEXTURED, TU_FMT_JPEG, 90, 21};

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    g_tree = tu_join(g_dir, "tree");
    tu_make_image_folder(g_tree, &SPEC);
    g_tar = tu_join(g_dir, "tree.tar");
    char *qt = tu_shell_quote(g_tree), *qa = tu_shell_quote(g_tar), cmd[8192];
    snprintf(cmd, sizeof cmd, "tar -C %s -cf %s .", qt, qa);
    char *err = NULL;
    if (tu_run_capture(cmd, NULL, &err) != 0) fail_msg("%s: %s", cmd, err ? err : "");
    free(err);
    free(qt);
    free(qa);
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

/* What a run saw at each batch position (epoch, index), errors included. */
typedef struct {
    int n;
    coordl_status st[64];
    uint64_t epoch[64], index[64], hash[64];
    uint64_t ids[64][BATCH];
    uint32_t rows[64];
    char msg[64][512];
    uint64_t ends;
    coordl_stats stats;
} frun;

static uint32_t g_readahead; /* each test runs with read-ahead off, then on */

static coordl_config fault_config(const char *source, coordl_bad_policy policy)
{
    coordl_config cfg = tu_config(source);
    cfg.readahead_items = g_readahead;
    cfg.batch_size = BATCH;
    cfg.out_w = cfg.out_h = 12;
    cfg.layout = COORDL_F32_NCHW;
    cfg.seed = 3;
    cfg.prefetch_batches = 2;
    cfg.on_bad_sample = policy;
    return cfg;
}

/* Consumes `epochs` epochs from first_epoch (where the stream stands),
 * recording every call's outcome: the i-th call
 * of an epoch is batch i (an error skips its batch and the next call
 * returns the one after it). */
static void run_all(coordl *L, uint64_t first_epoch, unsigned epochs, frun *r)
{
    memset(r, 0, sizeof *r);
    uint64_t epoch = first_epoch, index = 0;
    while (r->ends < epochs) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) {
            assert_int_equal(b.epoch, epoch);
            r->ends++;
            epoch++;
            index = 0;
            continue;
        }
        assert_true(r->n < 64);
        const int i = r->n++;
        r->st[i] = rc;
        r->epoch[i] = epoch;
        r->index[i] = index++;
        if (rc == COORDL_OK) {
            assert_int_equal(b.epoch, r->epoch[i]);
            assert_int_equal(b.index, r->index[i]);
            r->hash[i] = tu_batch_hash(&b);
            r->rows[i] = b.n;
            for (uint32_t k = 0; k < b.n && k < BATCH; k++) r->ids[i][k] = b.ids[k];
            coordl_release(L, &b);
        } else {
            snprintf(r->msg[i], sizeof r->msg[i], "%s", coordl_errmsg(L));
        }
    }
    coordl_get_stats(L, &r->stats);
}

/* The fault-free run of a source (the POSIX reader). */
static void reference(const char *source, frun *ref)
{
    coordl_config cfg = fault_config(source, COORDL_BAD_FAIL);
    coordl *L = tu_open(&cfg);
    run_all(L, 0, EPOCHS, ref);
    coordl_close(L);
    for (int i = 0; i < ref->n; i++) assert_int_equal(ref->st[i], COORDL_OK);
    assert_int_equal(ref->n, EPOCHS * 6);
}

/* The item id whose path the reader recorded as faulted (-1: none). For a
 * tar the reader sees the shard's path: `member` names the item then. */
static int64_t id_of_path(coordl *L, const char *path)
{
    for (uint64_t id = 0; id < coordl_num_items(L); id++)
        if (strcmp(coordl_item_path(L, id), path) == 0) return (int64_t)id;
    return -1;
}

/* Checks a run against the reference when the items in bad[] (ids of
 * epoch e) could not be read: their batches fail (FAIL) or hold a
 * substitute (SUBSTITUTE); every other batch is the reference's. */
static void check_against(const frun *ref, const frun *got, coordl_bad_policy policy, const uint64_t *bad_epoch,
                          const uint64_t *bad_id, int nbad, const char *need_in_msg, const char *what)
{
    if (got->n != ref->n) fail_msg("%s: %d batches, the fault-free run has %d (lost batches)", what, got->n, ref->n);
    int failed = 0;
    for (int i = 0; i < ref->n; i++) {
        int holds_bad = 0;
        for (int k = 0; k < nbad; k++)
            if (ref->epoch[i] == bad_epoch[k])
                for (uint32_t r = 0; r < ref->rows[i]; r++) holds_bad |= ref->ids[i][r] == bad_id[k];
        if (!holds_bad) {
            if (got->st[i] != COORDL_OK || got->hash[i] != ref->hash[i])
                fail_msg("%s: epoch %llu batch %llu holds no bad item but is %s (%s)", what,
                         (unsigned long long)ref->epoch[i], (unsigned long long)ref->index[i],
                         got->st[i] == COORDL_OK ? "different" : coordl_strerror(got->st[i]), got->msg[i]);
            continue;
        }
        if (policy == COORDL_BAD_FAIL) {
            if (got->st[i] != COORDL_ERR_IO && got->st[i] != COORDL_ERR_CORRUPT)
                fail_msg("%s: epoch %llu batch %llu holds the bad item but is %s", what,
                         (unsigned long long)ref->epoch[i], (unsigned long long)ref->index[i],
                         coordl_strerror(got->st[i]));
            if (need_in_msg && !strstr(got->msg[i], need_in_msg))
                fail_msg("%s: message \"%s\" does not say \"%s\"", what, got->msg[i], need_in_msg);
            failed++;
        } else {
            if (got->st[i] != COORDL_OK) fail_msg("%s: substitute policy, batch is %s: %s", what,
                                                  coordl_strerror(got->st[i]), got->msg[i]);
            /* the other rows are the reference's; the bad row is another item */
            for (uint32_t r = 0; r < ref->rows[i]; r++) {
                int is_bad = 0;
                for (int k = 0; k < nbad; k++) is_bad |= ref->epoch[i] == bad_epoch[k] && ref->ids[i][r] == bad_id[k];
                if (is_bad) assert_int_not_equal(got->ids[i][r], ref->ids[i][r]);
                else assert_int_equal(got->ids[i][r], ref->ids[i][r]);
            }
        }
    }
    if (policy == COORDL_BAD_FAIL && nbad > 0) assert_true(failed >= 1);
}

/* ---- EIO on the k-th read ---------------------------------------------- */

/* The k-th read_at of the run fails with EIO (once). Whichever item that
 * was - the reader records it - its batch of that epoch fails naming it
 * (or holds a substitute), every other batch is right, and the next epoch
 * is whole again. */
static void check_eio_kth(const char *source, coordl_bad_policy policy, long k)
{
    frun ref, got;
    reference(source, &ref);
    tu_io io;
    tu_io_init(&io);
    io.fail_read_errno = EIO;
    atomic_store(&io.disarmed, 1); /* not during indexing: counted from the first item read */
    tu_log_record *rec = tu_log_record_new();
    coordl_config cfg = fault_config(source, policy);
    cfg.io = &io.table;
    cfg.log = tu_log_record_fn;
    cfg.log_user = rec;
    coordl *L = tu_open(&cfg);
    io.fail_read_nth = atomic_load(&io.reads) + k; /* published by the atomic store below */
    atomic_store(&io.disarmed, 0);
    run_all(L, 0, EPOCHS, &got);
    /* which item: the faulted path is the item's (a tree) or the shard's
     * (a tar: then the failed batch's message names the member) */
    assert_int_equal(atomic_load(&io.faults), 1);
    int64_t bad = id_of_path(L, io.first_fault_path);
    if (bad < 0) { /* tar: find the batch that failed or was substituted */
        for (int i = 0; i < got.n && bad < 0; i++) {
            if (got.st[i] != COORDL_OK) {
                for (uint64_t id = 0; id < coordl_num_items(L); id++)
                    if (strstr(got.msg[i], coordl_item_path(L, id))) bad = (int64_t)id;
            } else if (got.hash[i] != ref.hash[i]) {
                for (uint32_t r = 0; r < ref.rows[i]; r++)
                    if (got.ids[i][r] != ref.ids[i][r]) bad = (int64_t)ref.ids[i][r];
            }
        }
    }
    /* the epoch the faulted read belonged to: the first one holding a
     * batch that is not the reference's. None: the read was for a row
     * beyond the two epochs consumed (the workers and the read-ahead run
     * ahead into epoch 2), and every consumed batch must be right. */
    int64_t bad_epoch = -1;
    for (int i = 0; i < got.n; i++)
        if (got.st[i] != COORDL_OK || got.hash[i] != ref.hash[i]) { bad_epoch = (int64_t)got.epoch[i]; break; }
    if (bad_epoch < 0) {
        check_against(&ref, &got, policy, NULL, NULL, 0, NULL, source);
        coordl_close(L);
        assert_int_equal(atomic_load(&io.open_now), 0);
        tu_log_record_free(rec);
        tu_io_destroy(&io);
        return;
    }
    if (bad < 0) fail_msg("%s: the EIO on read %ld hit no item (%s)", source, k, io.first_fault_path);
    const uint64_t bad_id = (uint64_t)bad, bad_e = (uint64_t)bad_epoch;
    check_against(&ref, &got, policy, &bad_e, &bad_id, 1, strerror(EIO), source);
    if (policy == COORDL_BAD_FAIL) {
        int errors = 0;
        for (int i = 0; i < got.n; i++) {
            if (got.st[i] == COORDL_OK) continue;
            errors++;
            assert_int_equal(got.st[i], COORDL_ERR_IO);
            if (!strstr(got.msg[i], coordl_item_path(L, bad_id)))
                fail_msg("message \"%s\" does not name %s", got.msg[i], coordl_item_path(L, bad_id));
        }
        assert_int_equal(errors, 1);
        assert_int_equal(got.stats.bad_samples, 0);
    } else {
        assert_int_equal(got.stats.bad_samples, 1); /* one fault, one substitute */
        assert_true(tu_log_contains(rec, coordl_item_path(L, bad_id)));
        assert_true(tu_log_contains(rec, strerror(EIO)));
    }
    coordl_close(L);
    assert_int_equal(atomic_load(&io.open_now), 0);
    assert_int_equal(atomic_load(&io.opens), atomic_load(&io.closes));
    tu_log_record_free(rec);
    tu_io_destroy(&io);
}

static void test_eio_on_kth_read_tree_fail(void **state) { (void)state; check_eio_kth(g_tree, COORDL_BAD_FAIL, 5); }
static void test_eio_on_kth_read_tree_substitute(void **state) { (void)state; check_eio_kth(g_tree, COORDL_BAD_SUBSTITUTE, 9); }
static void test_eio_on_kth_read_tar_fail(void **state) { (void)state; check_eio_kth(g_tar, COORDL_BAD_FAIL, 7); }
static void test_eio_on_kth_read_tar_substitute(void **state) { (void)state; check_eio_kth(g_tar, COORDL_BAD_SUBSTITUTE, 4); }

/* ---- faults that must not show: short reads, EINTR, latency ------------ */

/* A reader that returns at most 7 bytes per call, -EINTR on every third
 * read and every fourth open: every batch is the fault-free run's, no bad
 * sample, under both policies. */
static void check_transparent(const char *source, coordl_bad_policy policy)
{
    frun ref, got;
    reference(source, &ref);
    tu_io io;
    tu_io_init(&io);
    io.max_chunk = 7;
    io.eintr_every = 3;
    io.open_eintr_every = 4;
    coordl_config cfg = fault_config(source, policy);
    cfg.io = &io.table;
    coordl *L = tu_open(&cfg);
    run_all(L, 0, EPOCHS, &got);
    coordl_close(L);
    check_against(&ref, &got, policy, NULL, NULL, 0, NULL, source);
    assert_int_equal(got.stats.bad_samples, 0);
    /* the reads really were cut: a 7-byte reader needs many per item */
    assert_true(atomic_load(&io.reads) > 20 * (long)got.stats.storage_reads);
    assert_int_equal(atomic_load(&io.open_now), 0);
    tu_io_destroy(&io);
}

static void test_short_reads_and_eintr_are_invisible_tree(void **state)
{
    (void)state;
    check_transparent(g_tree, COORDL_BAD_FAIL);
    check_transparent(g_tree, COORDL_BAD_SUBSTITUTE);
}

static void test_short_reads_and_eintr_are_invisible_tar(void **state)
{
    (void)state;
    check_transparent(g_tar, COORDL_BAD_FAIL);
    check_transparent(g_tar, COORDL_BAD_SUBSTITUTE);
}

/* One read that takes 400 ms, far beyond what the ring of 2 batches (and
 * the read-ahead) hides: the trainer waits (stall), then every batch
 * comes, in order, right; nothing times out or is dropped. */
static void test_latency_spike_beyond_prefetch_horizon(void **state)
{
    (void)state;
    const char *sources[2] = {g_tree, g_tar};
    for (int s = 0; s < 2; s++)
        for (int policy = 0; policy < 2; policy++) {
            frun ref, got;
            reference(sources[s], &ref);
            tu_io io;
            tu_io_init(&io);
            io.spike_ms = 400;
            atomic_store(&io.disarmed, 1); /* not during indexing */
            coordl_config cfg = fault_config(sources[s], policy ? COORDL_BAD_SUBSTITUTE : COORDL_BAD_FAIL);
            cfg.io = &io.table;
            coordl *L = tu_open(&cfg);
            io.spike_nth = atomic_load(&io.reads) + 3;
            atomic_store(&io.disarmed, 0);
            run_all(L, 0, EPOCHS, &got);
            coordl_close(L);
            check_against(&ref, &got, COORDL_BAD_FAIL, NULL, NULL, 0, NULL, sources[s]);
            assert_int_equal(got.stats.bad_samples, 0);
            assert_true(got.stats.stall_ns > 200000000ull); /* the trainer did wait */
            tu_io_destroy(&io);
        }
}

/* ---- the reader lies ------------------------------------------------------ */

/* read_at returning more than asked, a negative that is not an errno, and
 * an open reporting 2^62 bytes: each an error naming the file (never
 * trusted, never a crash), handled by the policy; the other batches are
 * right. Tree: one file lies (its batch in each epoch fails or holds a
 * substitute). Tar: the shard lies once coordl_open has indexed it, so
 * every read of an item lies and no batch can be right. */
static void check_garbage(const char *source, coordl_bad_policy policy, int kind)
{
    frun ref, got;
    reference(source, &ref);
    coordl_config cfg = fault_config(source, policy);
    const int tar = source == g_tar;
    const uint64_t victim = 5;
    char victim_path[4096];
    {
        coordl *P = tu_open(&cfg);
        snprintf(victim_path, sizeof victim_path, "%s", coordl_item_path(P, victim));
        coordl_close(P);
    }
    tu_io io;
    tu_io_init(&io);
    const char *needle;
    if (kind == 0) { io.garbage_ret = 1 << 20; needle = "the reader returned 1048576"; }
    else if (kind == 1) { io.garbage_ret = -5000; needle = "the reader returned -5000"; }
    else { io.garbage_size = 1ull << 62; needle = "max_item_bytes"; }
    const char *match = tar ? g_tar : victim_path;
    if (kind == 2) io.garbage_size_path = match;
    else io.garbage_path = match;
    atomic_store(&io.disarmed, tar); /* a tar: armed once indexed */
    cfg.io = &io.table;
    tu_log_record *rec = tu_log_record_new();
    cfg.log = tu_log_record_fn;
    cfg.log_user = rec;
    coordl *L = tu_open(&cfg);
    if (!tar) {
        run_all(L, 0, EPOCHS, &got);
        const uint64_t be[EPOCHS] = {0, 1}, bi[EPOCHS] = {victim, victim};
        check_against(&ref, &got, policy, be, bi, EPOCHS, needle, source);
        if (policy == COORDL_BAD_SUBSTITUTE) {
            /* once per epoch consumed, and maybe once more in epoch 2,
             * which the workers start before the run stops */
            assert_in_range(got.stats.bad_samples, EPOCHS, EPOCHS + 1);
            assert_true(tu_log_contains(rec, needle));
            assert_true(tu_log_contains(rec, strrchr(victim_path, '/') + 1));
        }
    } else {
        atomic_store(&io.disarmed, 0);
        assert_int_equal(coordl_seek(L, 1, 0), COORDL_OK); /* batches made before arming are dropped */
        run_all(L, 1, 1, &got);
        assert_int_equal(got.n, 6);
        for (int i = 0; i < got.n; i++) {
            if (kind == 2) {
                /* the shard's size is not the one indexed, but each member's
                 * bytes are still there: read at their offsets, right */
                assert_int_equal(got.st[i], COORDL_OK);
                assert_int_equal(got.hash[i], ref.hash[6 + i]);
                continue;
            }
            /* every item lies: the substitutes too, so the batch fails */
            assert_int_equal(got.st[i], COORDL_ERR_IO);
            if (!strstr(got.msg[i], needle) || !strstr(got.msg[i], ".tar:"))
                fail_msg("\"%s\" does not name the member and \"%s\"", got.msg[i], needle);
        }
        if (kind != 2 && policy == COORDL_BAD_SUBSTITUTE) assert_true(tu_log_contains(rec, needle));
    }
    coordl_close(L);
    assert_int_equal(atomic_load(&io.open_now), 0);
    tu_log_record_free(rec);
    tu_io_destroy(&io);
}

static void test_garbage_from_the_reader(void **state)
{
    (void)state;
    for (int kind = 0; kind < 3; kind++)
        for (int policy = 0; policy < 2; policy++) {
            check_garbage(g_tree, policy ? COORDL_BAD_SUBSTITUTE : COORDL_BAD_FAIL, kind);
            check_garbage(g_tar, policy ? COORDL_BAD_SUBSTITUTE : COORDL_BAD_FAIL, kind);
        }
}

/* ---- files that change between indexing and reading ---------------------- */

/* After coordl_open: one tree file cut to 40% of its size, one deleted.
 * Their batches fail naming each (CORRUPT, IO) or hold substitutes; the
 * rest are right. */
static void check_tree_changes(coordl_bad_policy policy)
{
    char *root = tu_join(g_dir, "changing-%d", (int)policy);
    char *q1 = tu_shell_quote(g_tree), *q2 = tu_shell_quote(root), cmd[8192];
    snprintf(cmd, sizeof cmd, "cp -r %s %s", q1, q2);
    assert_int_equal(tu_run_capture(cmd, NULL, NULL), 0);
    free(q1);
    free(q2);
    frun ref, got;
    reference(root, &ref);
    coordl_config cfg = fault_config(root, policy);
    tu_io io;
    tu_io_init(&io);
    cfg.io = &io.table;
    coordl *L = tu_open(&cfg);
    /* the ring of 2 batches may already hold epoch 0's first ones: items
     * are changed now and checked from epoch 1 on (seek restarts there) */
    const uint64_t shrink = 3, vanish = 17;
    char shrunk[4096], gone[4096];
    snprintf(shrunk, sizeof shrunk, "%s", coordl_item_path(L, shrink));
    snprintf(gone, sizeof gone, "%s", coordl_item_path(L, vanish));
    size_t n;
    uint8_t *bytes = tu_read_file(shrunk, &n);
    tu_write_file(shrunk, bytes, n * 4 / 10);
    free(bytes);
    assert_int_equal(unlink(gone), 0);
    assert_int_equal(coordl_seek(L, 1, 0), COORDL_OK);
    run_all(L, 1, 1, &got);
    coordl_close(L);
    /* against the reference's epoch 1 (its batches 6..11) */
    assert_int_equal(got.n, 6);
    int errors = 0;
    for (int i = 0; i < got.n; i++) {
        const int j = 6 + i;
        int has_shrunk = 0, has_gone = 0;
        for (uint32_t r = 0; r < ref.rows[j]; r++) {
            has_shrunk |= ref.ids[j][r] == shrink;
            has_gone |= ref.ids[j][r] == vanish;
        }
        if (!has_shrunk && !has_gone) {
            assert_int_equal(got.st[i], COORDL_OK);
            assert_int_equal(got.hash[i], ref.hash[j]);
            continue;
        }
        if (policy == COORDL_BAD_FAIL) {
            errors++;
            assert_true(got.st[i] == COORDL_ERR_CORRUPT || got.st[i] == COORDL_ERR_IO);
            /* the message names the batch's first bad row */
            const char *b1 = strrchr(shrunk, '/') + 1, *b2 = strrchr(gone, '/') + 1;
            if (!(has_shrunk && strstr(got.msg[i], b1)) && !(has_gone && strstr(got.msg[i], b2)))
                fail_msg("\"%s\" names neither %s nor %s", got.msg[i], b1, b2);
        } else {
            assert_int_equal(got.st[i], COORDL_OK);
        }
    }
    if (policy == COORDL_BAD_FAIL) assert_true(errors >= 1);
    else assert_true(got.stats.bad_samples >= 2); /* a substitute may be one of them too */
    assert_int_equal(atomic_load(&io.open_now), 0);
    tu_io_destroy(&io);
    tu_rmtree(root);
    free(root);
}

static void test_tree_files_shrink_or_vanish_after_open(void **state)
{
    (void)state;
    check_tree_changes(COORDL_BAD_FAIL);
    check_tree_changes(COORDL_BAD_SUBSTITUTE);
}

/* A shard cut after coordl_open (its last members gone): the members still
 * inside it are read, those past the cut fail "shrank since indexing"
 * naming shard and member (or are substituted by members still there);
 * the shard deleted: every batch fails naming it. */
static void test_tar_shard_shrinks_or_vanishes_after_open(void **state)
{
    (void)state;
    for (int policy = 0; policy < 2; policy++) {
        char *tar = tu_join(g_dir, "shrinking-%d.tar", policy);
        size_t n;
        uint8_t *bytes = tu_read_file(g_tar, &n);
        tu_write_file(tar, bytes, n);
        coordl_config cfg = fault_config(tar, policy ? COORDL_BAD_SUBSTITUTE : COORDL_BAD_FAIL);
        tu_log_record *rec = tu_log_record_new();
        cfg.log = tu_log_record_fn;
        cfg.log_user = rec;
        coordl *L = tu_open(&cfg);
        tu_write_file(tar, bytes, n / 2); /* about half the members are past the cut */
        assert_int_equal(coordl_seek(L, 1, 0), COORDL_OK);
        frun got;
        run_all(L, 1, 1, &got);
        int ok = 0, bad = 0;
        for (int i = 0; i < got.n; i++) {
            if (got.st[i] == COORDL_OK) { ok++; continue; }
            bad++;
            assert_int_equal(got.st[i], COORDL_ERR_IO);
            assert_non_null(strstr(got.msg[i], tar));
            assert_non_null(strstr(got.msg[i], "shrank since indexing"));
        }
        assert_int_equal(got.n, 6);
        if (policy == 0) assert_true(bad >= 1);
        else {
            assert_true(got.stats.bad_samples >= 1);
            assert_true(tu_log_contains(rec, "shrank since indexing"));
        }
        (void)ok;
        assert_int_equal(unlink(tar), 0);
        assert_int_equal(coordl_seek(L, 2, 0), COORDL_OK);
        run_all(L, 2, 1, &got);
        assert_int_equal(got.n, 6);
        for (int i = 0; i < got.n; i++) {
            assert_int_equal(got.st[i], COORDL_ERR_IO);
            assert_non_null(strstr(got.msg[i], "cannot open the shard"));
        }
        coordl_close(L);
        tu_log_record_free(rec);
        free(bytes);
        free(tar);
    }
}

static int setup_readahead_off(void **state)
{
    g_readahead = 0;
    return group_setup(state);
}

static int setup_readahead_on(void **state)
{
    g_readahead = 32; /* the faults then hit the I/O threads' reads */
    return group_setup(state);
}

int main(void)
{
    tu_main_init(300);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eio_on_kth_read_tree_fail),
        cmocka_unit_test(test_eio_on_kth_read_tree_substitute),
        cmocka_unit_test(test_eio_on_kth_read_tar_fail),
        cmocka_unit_test(test_eio_on_kth_read_tar_substitute),
        cmocka_unit_test(test_short_reads_and_eintr_are_invisible_tree),
        cmocka_unit_test(test_short_reads_and_eintr_are_invisible_tar),
        cmocka_unit_test(test_latency_spike_beyond_prefetch_horizon),
        cmocka_unit_test(test_garbage_from_the_reader),
        cmocka_unit_test(test_tree_files_shrink_or_vanish_after_open),
        cmocka_unit_test(test_tar_shard_shrinks_or_vanishes_after_open),
    };
    int failed = cmocka_run_group_tests_name("read-ahead off", tests, setup_readahead_off, group_teardown);
    failed += cmocka_run_group_tests_name("read-ahead 32", tests, setup_readahead_on, group_teardown);
    return failed;
}
