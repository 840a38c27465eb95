/*
 * test_lazy_index.c - tar shards indexed as the shard window reaches them
 * (shuffle = COORDL_SHUFFLE_SHARD_WINDOW, no index_path, no LRU cache, one
 * process, .cls labels: docs/shuffle.md). Over a virtual set served by a
 * coordl_io (tu_virtual_tar.h), nothing on disk:
 *   - 100M samples (20,000 shards x 5,000): open reads one shard, not
 *     20,000; num_items and batches_per_epoch say 0 (not known yet); the
 *     first batches come from the first window's shards, with the labels
 *     and names of their members;
 *   - a small set: every item exactly once per epoch, the counts known
 *     after epoch 0, epoch 1 another order;
 *   - a shard that cannot be read counts 0 items (logged; under
 *     COORDL_BAD_FAIL one coordl_next returns the error naming it), the
 *     others are all there;
 *   - the MinIO cache over a lazy index (per-shard entry tables): a budget
 *     of the whole set serves epoch 1 without a storage read, a budget of
 *     100 items holds exactly 100 and serves exactly them, and the batches
 *     are those of the run without a cache;
 *   - the scan-ahead threads ("coordl-index") scan the next window's shards
 *     while the trainer holds still after its first batch, and no shard
 *     beyond it.
 * test_shard_window.c runs the whole shard-window suite both ways and
 * checks the lazy batches equal the fully indexed ones row for row.
 */
#include "test_util.h"
#include "tu_virtual_tar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint8_t *g_jpg;
static size_t g_jpg_len;

static int group_setup(void **state)
{
    (void)state;
    uint8_t base[3] = {120, 60, 200};
    uint8_t *pix = tu_textured_rgb(8, 8, base, 5);
    g_jpg = tu_encode_jpeg(pix, 8, 8, 3, NULL, &g_jpg_len);
    free(pix);
    assert_true(g_jpg_len <= 4096);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    free(g_jpg);
    return 0;
}

static coordl_config lazy_config(tu_vtar *v, uint32_t W, uint32_t batch)
{
    coordl_config cfg = tu_config(v->list_path);
    cfg.io = &v->table;
    cfg.pipeline = COORDL_PIPE_EVAL;
    cfg.out_w = cfg.out_h = 8;
    cfg.batch_size = batch;
    cfg.shuffle = COORDL_SHUFFLE_SHARD_WINDOW;
    cfg.shuffle_window_shards = W;
    cfg.seed = 11;
    cfg.threads = 2;
    return cfg;
}

static void test_virtual_100m_set_opens_reading_one_shard(void **state)
{
    (void)state;
    tu_vtar *v = malloc(sizeof *v);
    assert_non_null(v);
    assert_int_equal(tu_vtar_init(v, "/virtual-100m", 20000, 5000, g_jpg, g_jpg_len), 0);
    coordl_config cfg = lazy_config(v, 8, 32);
    coordl *L = tu_open(&cfg);
    /* open scans the first shard (are its samples .cls-labelled?); the
     * workers and the read-ahead, started by open, may have begun on the
     * first window: at most 2 windows of 8, never the 20,000 */
    const uint64_t at_open = atomic_load(&v->shards_opened);
    if (at_open < 1 || at_open > 1 + 2 * 8) fail_msg("%llu shards opened by coordl_open", (unsigned long long)at_open);
    assert_int_equal(coordl_num_items(L), 0);
    assert_int_equal(coordl_batches_per_epoch(L), 0);
    uint32_t shards[64];
    size_t nshards = 0;
    for (int k = 0; k < 4; k++) {
        coordl_batch b;
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        assert_int_equal(b.n, 32);
        assert_int_equal(b.epoch, 0);
        for (uint32_t i = 0; i < b.n; i++) {
            const uint32_t s = (uint32_t)(b.ids[i] >> 32), j = (uint32_t)(b.ids[i] & 0xFFFFFFFFu);
            assert_true(s < 20000 && j < 5000);
            assert_int_equal(b.labels[i], (int32_t)tu_vtar_label(s, j));
            size_t x = 0;
            while (x < nshards && shards[x] != s) x++;
            if (x == nshards) shards[nshards++] = s;
            if (i == 0 && k == 0) {
                char want[128];
                snprintf(want, sizeof want, "/virtual-100m/shard-%05u.tar:k%05u_%06u.jpg", s, s, j);
                assert_string_equal(coordl_item_path(L, b.ids[i]), want);
                assert_int_equal(coordl_item_label(L, b.ids[i]), (int32_t)tu_vtar_label(s, j));
            }
        }
        coordl_release(L, &b);
    }
    /* 128 rows of a window of 8 shards x 5,000: from those 8 shards */
    assert_true(nshards >= 2 && nshards <= 8);
    /* the first window, the read-ahead's next one at most, and the first shard */
    const uint64_t opened = atomic_load(&v->shards_opened);
    if (opened > 1 + 2 * 8) fail_msg("%llu shards opened for 4 batches", (unsigned long long)opened);
    assert_null(coordl_item_path(L, ((uint64_t)20000 << 32))); /* no such shard */
    coordl_close(L);
    tu_vtar_destroy(v);
    free(v);
}

/* Reads `epochs` epochs; ids[e * n + k] is epoch e's k-th row. Returns rows. */
static size_t read_all(coordl *L, unsigned epochs, uint64_t *ids, size_t cap, const tu_vtar *v)
{
    size_t n = 0;
    for (unsigned e = 0; e < epochs;) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) { e++; continue; }
        if (rc != COORDL_OK) fail_msg("coordl_next: %s: %s", coordl_strerror(rc), coordl_errmsg(L));
        for (uint32_t i = 0; i < b.n; i++) {
            assert_true(n < cap);
            const uint32_t s = (uint32_t)(b.ids[i] >> 32), j = (uint32_t)(b.ids[i] & 0xFFFFFFFFu);
            assert_true(s < v->nshards && j < v->per_shard);
            assert_int_equal(b.labels[i], (int32_t)tu_vtar_label(s, j));
            ids[n++] = b.ids[i];
        }
        coordl_release(L, &b);
    }
    return n;
}

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Every id of shards [0, nshards) but `skip`, once, in ids[0..n). */
static void assert_each_once(const uint64_t *ids, size_t n, const tu_vtar *v, int64_t skip)
{
    uint64_t *s = malloc(n * sizeof *s);
    assert_non_null(s);
    memcpy(s, ids, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_u64);
    size_t k = 0;
    for (uint32_t sh = 0; sh < v->nshards; sh++) {
        if ((int64_t)sh == skip) continue;
        for (uint32_t j = 0; j < v->per_shard; j++, k++) {
            assert_true(k < n);
            assert_int_equal(s[k], ((uint64_t)sh << 32) | j);
        }
    }
    assert_int_equal(k, n);
    free(s);
}

static void test_every_item_once_and_the_counts_after_epoch_0(void **state)
{
    (void)state;
    tu_vtar v;
    assert_int_equal(tu_vtar_init(&v, "/virtual-small", 30, 7, g_jpg, g_jpg_len), 0);
    coordl_config cfg = lazy_config(&v, 4, 16);
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 0);
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_int_equal(st.dataset_bytes, 0); /* not every shard counted yet */
    static uint64_t ids[210 * 2];
    const size_t n = read_all(L, 2, ids, 210 * 2, &v);
    coordl_get_stats(L, &st);
    assert_int_equal(st.dataset_bytes, 210 * (uint64_t)g_jpg_len); /* counted: the .jpg members' bytes */
    assert_int_equal(n, 420);
    assert_each_once(ids, 210, &v, -1);
    assert_each_once(ids + 210, 210, &v, -1);
    assert_true(memcmp(ids, ids + 210, 210 * sizeof ids[0]) != 0);
    assert_int_equal(coordl_num_items(L), 210);
    assert_int_equal(coordl_batches_per_epoch(L), 14); /* ceil(210 / 16) */
    /* seek back into epoch 0 gives its batches again */
    assert_int_equal(coordl_seek(L, 0, 3), COORDL_OK);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_memory_equal(b.ids, ids + 3 * 16, 16 * sizeof ids[0]);
    coordl_release(L, &b);
    coordl_close(L);
    tu_vtar_destroy(&v);
}

/* DS-Analyzer on a lazily indexed set: nothing is counted at open, so the
 * analysis counts the set itself (a 30-shard set) or extrapolates from 64
 * shards spread over it (the 100M set). Before, it reported 0 items and 0
 * bytes, and its warm run's cache was 1 MB: the "warm" run read from
 * storage and the what-if model stood on nothing. */
static void analyze_virtual(uint32_t nshards, uint32_t per_shard, coordl_report *r)
{
    tu_vtar *v = malloc(sizeof *v);
    assert_non_null(v);
    assert_int_equal(tu_vtar_init(v, "/virtual-analyze", nshards, per_shard, g_jpg, g_jpg_len), 0);
    coordl_config cfg = lazy_config(v, 4, 16);
    coordl_analyze_opts o = coordl_analyze_opts_default();
    o.batches = 3;
    o.synthetic_step_ms = 1;
    o.skip_cold = 1;
    coordl_status rc = coordl_analyze(&cfg, NULL, NULL, &o, r);
    if (rc != COORDL_OK) fail_msg("coordl_analyze: %s: %s", coordl_strerror(rc), coordl_errmsg(NULL));
    assert_true(r->warm.images > 0);
    tu_vtar_destroy(v);
    free(v);
}

static void test_analyzer_counts_or_samples_a_lazy_set(void **state)
{
    (void)state;
    coordl_report r;
    analyze_virtual(30, 7, &r);
    assert_int_equal(r.dataset_items, 210);
    assert_int_equal(r.dataset_bytes, 210 * (uint64_t)g_jpg_len);
    assert_int_equal(r.dataset_shards_sampled, 0); /* 30 shards: all counted */
    assert_true(fabs(r.mean_item_bytes - (double)g_jpg_len) < 1e-9);
    size_t n = coordl_report_json(&r, NULL, 0);
    char *js = malloc(n + 1);
    assert_non_null(js);
    coordl_report_json(&r, js, n + 1);
    assert_non_null(strstr(js, "\"dataset_items\":210,"));
    assert_non_null(strstr(js, "\"dataset_shards_sampled\":0,"));
    free(js);
    coordl_report_free(&r);

    analyze_virtual(20000, 5000, &r); /* 100M: every shard alike, so the extrapolation is exact */
    assert_int_equal(r.dataset_items, 100000000ull);
    assert_int_equal(r.dataset_bytes, 100000000ull * g_jpg_len);
    if (r.dataset_shards_sampled < 64 || r.dataset_shards_sampled > 64 + 3 * 4 + 1)
        fail_msg("extrapolated from %llu shards", (unsigned long long)r.dataset_shards_sampled);
    coordl_report_free(&r);
}

static void test_a_shard_that_cannot_be_read_counts_zero(void **state)
{
    (void)state;
    for (int policy = 0; policy < 2; policy++) {
        tu_vtar v;
        assert_int_equal(tu_vtar_init(&v, "/virtual-bad", 12, 5, g_jpg, g_jpg_len), 0);
        v.fail_shard = 7;
        tu_log_record *log = tu_log_record_new();
        coordl_config cfg = lazy_config(&v, 3, 8);
        cfg.on_bad_sample = policy ? COORDL_BAD_SUBSTITUTE : COORDL_BAD_FAIL;
        cfg.log = tu_log_record_fn;
        cfg.log_user = log;
        coordl *L = tu_open(&cfg);
        static uint64_t ids[60 * 2];
        size_t n = 0;
        int errors = 0;
        for (unsigned e = 0; e < 2;) {
            coordl_batch b;
            coordl_status rc = coordl_next(L, &b);
            if (rc == COORDL_END_OF_EPOCH) { e++; continue; }
            if (rc != COORDL_OK) {
                /* COORDL_BAD_FAIL: said once, naming the shard; the next call goes on */
                assert_int_equal(policy, 0);
                assert_int_equal(rc, COORDL_ERR_IO);
                assert_non_null(strstr(coordl_errmsg(L), "/virtual-bad/shard-00007.tar"));
                errors++;
                continue;
            }
            for (uint32_t i = 0; i < b.n; i++) {
                assert_true(n < 120);
                ids[n++] = b.ids[i];
            }
            coordl_release(L, &b);
        }
        assert_int_equal(errors, policy ? 0 : 1);
        assert_int_equal(n, 2 * 55);
        assert_each_once(ids, 55, &v, 7);
        assert_each_once(ids + 55, 55, &v, 7);
        assert_int_equal(coordl_num_items(L), 55);
        coordl_close(L);
        assert_true(tu_log_contains(log, "/virtual-bad/shard-00007.tar"));
        assert_true(tu_log_contains(log, "left out of every epoch"));
        tu_log_record_free(log);
        tu_vtar_destroy(&v);
    }
}

/* The hash of `epochs` epochs of batches, chained from h. */
static uint64_t batches_hash(coordl *L, unsigned epochs, uint64_t h)
{
    for (unsigned e = 0; e < epochs;) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) { e++; continue; }
        if (rc != COORDL_OK) fail_msg("coordl_next: %s: %s", coordl_strerror(rc), coordl_errmsg(L));
        h = tu_fnv1a(h, &b.n, sizeof b.n);
        h = tu_fnv1a(h, b.ids, b.n * sizeof b.ids[0]);
        h = tu_fnv1a(h, b.labels, b.n * sizeof b.labels[0]);
        h = tu_fnv1a(h, b.data, b.data_bytes);
        coordl_release(L, &b);
    }
    return h;
}

static void test_minio_cache_over_a_lazy_index(void **state)
{
    (void)state;
    tu_vtar v;
    assert_int_equal(tu_vtar_init(&v, "/virtual-cache", 30, 7, g_jpg, g_jpg_len), 0);
    coordl_config cfg = lazy_config(&v, 4, 16);
    cfg.threads = 1; /* exact per-epoch counts (no overlap of epochs) */
    cfg.readahead_items = 0;
    coordl *L = tu_open(&cfg);
    const uint64_t plain = batches_hash(L, 3, TU_FNV_OFFSET);
    coordl_close(L);

    /* the whole set cached: epoch 1 and 2 read nothing from storage */
    cfg.cache_bytes = 1 << 20;
    L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 0); /* still lazy with a cache */
    coordl_stats st1;
    uint64_t whole = batches_hash(L, 1, TU_FNV_OFFSET);
    coordl_get_stats(L, &st1);
    assert_int_equal(st1.cache_items, 210);
    const uint64_t reads0 = st1.storage_reads;
    /* nor any shard again for its index: the cache keeps the labels, and a
     * message names a cached item without its block (before, 20 shards
     * were opened and scanned again in epochs 1-2, for the labels, the
     * names and the scan-ahead: at scale, the whole set read each epoch) */
    const uint64_t io_reads0 = atomic_load(&v.reads), opens0 = atomic_load(&v.shard_opens);
    whole = batches_hash(L, 2, whole);
    coordl_get_stats(L, &st1);
    assert_int_equal(st1.storage_reads, reads0); /* (epoch 3's rows prepared ahead are hits too) */
    assert_int_equal(atomic_load(&v.shard_opens) - opens0, 0);
    assert_int_equal(atomic_load(&v.reads) - io_reads0, 0);
    /* per epoch: the workers prepare the next epoch's first rows ahead, so
     * the totals since open may hold a few of epoch 3's */
    for (uint64_t e = 1; e <= 2; e++) {
        coordl_epoch_stats es;
        assert_int_equal(coordl_get_epoch_stats(L, e, &es), COORDL_OK);
        assert_int_equal(es.cache_hits, 210);
        assert_int_equal(es.cache_misses, 0);
    }
    coordl_close(L);
    assert_true(whole == plain);

    /* 100 items' worth: exactly 100 cached, exactly 100 hits an epoch */
    cfg.cache_bytes = 100 * g_jpg_len;
    L = tu_open(&cfg);
    const uint64_t cut = batches_hash(L, 3, TU_FNV_OFFSET);
    coordl_get_stats(L, &st1);
    assert_int_equal(st1.cache_items, 100);
    for (uint64_t e = 1; e <= 2; e++) {
        coordl_epoch_stats es;
        assert_int_equal(coordl_get_epoch_stats(L, e, &es), COORDL_OK);
        assert_int_equal(es.cache_hits, 100);
        assert_int_equal(es.cache_misses, 110);
    }
    coordl_close(L);
    assert_true(cut == plain);
    tu_vtar_destroy(&v);
}

/* 40 shards x 100, window 4 (400 items); the ring and read-ahead hold
 * fewer than 400 rows, so after one batch the workers and the read-ahead
 * need window 0's shards only: window 1's are scanned by the scan-ahead
 * threads (all but shard 0, which open scans, if it is one of them). */
static void test_scan_ahead_threads_scan_the_next_window(void **state)
{
    (void)state;
    tu_vtar v;
    assert_int_equal(tu_vtar_init(&v, "/virtual-ahead", 40, 100, g_jpg, g_jpg_len), 0);
    coordl_config cfg = lazy_config(&v, 4, 16);
    cfg.prefetch_batches = 4;
    cfg.readahead_items = 32;
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    /* up to 10 s for window 1 to be scanned (it takes milliseconds) */
    size_t by_index = 0;
    for (int t = 0; t < 1000; t++) {
        if (atomic_load(&v.shards_opened) >= 8) {
            by_index = 0;
            for (uint32_t s = 0; s < v.nshards; s++)
                by_index += atomic_load(&v.opened[s]) && strcmp(v.first_opener[s], "coordl-index") == 0;
            if (by_index >= 3) break;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    const uint64_t opened = atomic_load(&v.shards_opened);
    printf("after one batch: %llu shards opened, %zu first by a scan-ahead thread\n", (unsigned long long)opened,
           by_index);
    assert_true(opened >= 8 && opened <= 9); /* windows 0 and 1, and shard 0 */
    assert_true(by_index >= 3);
    coordl_release(L, &b);
    coordl_close(L);
    tu_vtar_destroy(&v);
}

int main(void)
{
    tu_main_init(300);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_virtual_100m_set_opens_reading_one_shard),
        cmocka_unit_test(test_every_item_once_and_the_counts_after_epoch_0),
        cmocka_unit_test(test_a_shard_that_cannot_be_read_counts_zero),
        cmocka_unit_test(test_analyzer_counts_or_samples_a_lazy_set),
        cmocka_unit_test(test_minio_cache_over_a_lazy_index),
        cmocka_unit_test(test_scan_ahead_threads_scan_the_next_window),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
