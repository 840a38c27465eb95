/*
 * test_cache.c - the MinIO cache of encoded bytes: admit until the budget
 * is full, never evict, so from the second epoch on the hit rate equals
 * cache_bytes_used / dataset_bytes exactly; LRU with the same budget thrashes
 * under a fresh permutation per epoch; a cache as large as the dataset makes
 * storage traffic zero after the first epoch.
 *
 * Dataset: 10 classes x 200 textured 32 x 32 JPEGs (2000 items of similar
 * size), made once for the group.
 *
 * Exact per-epoch equalities use one worker thread: with several, the
 * first rows of epoch e+1 are prepared while the last rows of epoch e are
 * still in flight, so an item that ends epoch e and starts epoch e+1 can be
 * read first for e+1 (a miss there) and then hit for e. That is pipelining,
 * not a cache property; the multi-threaded tests allow for it.
 */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

static char *g_dir;
static char *g_root;
static uint64_t g_bytes; /* total encoded bytes of the dataset */
static uint64_t g_max_file;
static const tu_folder_spec g_spec = {10, 200, 32, 32, 0, TU_PAT_TEXTURED,
                                      TU_FMT_JPEG, 85, 17};
#define N_ITEMS 2000

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    g_root = tu_join(g_dir, "data");
    g_bytes = tu_make_image_folder(g_root, &g_spec);
    g_max_file = 0;
    for (int k = 0; k < g_spec.classes; k++)
        for (int j = 0; j < g_spec.per_class; j++) {
            char *p = tu_folder_file(g_root, &g_spec, k, j);
            uint64_t s = tu_file_size(p);
            g_max_file = s > g_max_file ? s : g_max_file;
            free(p);
        }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_root);
    return 0;
}

static coordl_config cache_config(uint64_t cache_bytes, coordl_cache_policy p)
{
    coordl_config cfg = tu_config(g_root);
    cfg.out_w = cfg.out_h = 8; /* the cache is the subject: keep prep cheap */
    cfg.batch_size = 50;
    cfg.cache_bytes = cache_bytes;
    cfg.cache_policy = p;
    cfg.cache_pin = COORDL_PIN_OFF;
    cfg.seed = 8;
    cfg.threads = 1; /* see the top of the file */
    /* MinIO's byte accounting of items as read: JPEG rewrites change an
     * item's bytes (their accounting: tests/test_jpeg_random_access.c) */
    cfg.jpeg_random_access = 0;
    return cfg;
}

/* Opens, runs `epochs` epochs, fills es[0..epochs-1] and *st; closes. */
static void run_epochs_stats(const coordl_config *cfg, unsigned epochs,
                             coordl_epoch_stats *es, coordl_stats *st)
{
    coordl *L = tu_open(cfg);
    tu_run run = {0};
    assert_int_equal(tu_run_epochs(L, epochs, &run), COORDL_OK);
    assert_int_equal(run.nrows, (size_t)epochs * N_ITEMS);
    for (unsigned e = 0; e < epochs; e++) {
        assert_int_equal(coordl_get_epoch_stats(L, e, &es[e]), COORDL_OK);
        assert_int_equal(es[e].epoch, e);
        assert_int_equal(es[e].items, N_ITEMS);
    }
    coordl_get_stats(L, st);
    tu_run_free(&run);
    coordl_close(L);
}

static void test_dataset_bytes_and_budget_are_reported(void **state)
{
    (void)state;
    coordl_config cfg = cache_config(g_bytes / 2, COORDL_CACHE_MINIO);
    coordl *L = tu_open(&cfg);
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_int_equal(st.dataset_bytes, g_bytes);
    assert_int_equal(st.cache_bytes_budget, g_bytes / 2);
    assert_true(st.cache_bytes_used <= g_bytes / 2);
    coordl_close(L);
}

static void test_minio_first_epoch_has_no_hits_and_fills_budget(void **state)
{
    (void)state;
    const uint64_t budget = g_bytes / 2;
    coordl_config cfg = cache_config(budget, COORDL_CACHE_MINIO);
    coordl_epoch_stats es[1];
    coordl_stats st;
    run_epochs_stats(&cfg, 1, es, &st);
    assert_int_equal(es[0].cache_hits, 0);
    assert_int_equal(es[0].cache_hit_bytes, 0);
    assert_int_equal(es[0].cache_misses, N_ITEMS);
    assert_int_equal(es[0].fetch_bytes, g_bytes);
    assert_int_equal(es[0].storage_bytes, g_bytes);
    /* admitted until full: within one file of the budget, never over */
    assert_true(st.cache_bytes_used <= budget);
    assert_true(st.cache_bytes_used + g_max_file > budget);
    assert_true(st.cache_items > 0 && st.cache_items < N_ITEMS);
}

static void test_minio_byte_hit_rate_equals_cached_fraction(void **state)
{
    (void)state;
    const uint64_t budget = g_bytes / 2;
    coordl_config cfg = cache_config(budget, COORDL_CACHE_MINIO);
    coordl_epoch_stats es[3];
    coordl_stats st;
    run_epochs_stats(&cfg, 3, es, &st);
    assert_true(st.cache_bytes_used <= budget);
    double fraction = (double)st.cache_bytes_used / (double)g_bytes;
    assert_float_equal(fraction, 0.5, 0.02);
    for (int e = 1; e < 3; e++) {
        /* every item is fetched once per epoch and the cached set never
         * changes after epoch 0: the hits are exactly the cached bytes */
        assert_int_equal(es[e].fetch_bytes, g_bytes);
        double rate = (double)es[e].cache_hit_bytes / (double)es[e].fetch_bytes;
        assert_float_equal(rate, fraction, 0.01);
        assert_int_equal(es[e].cache_hit_bytes, st.cache_bytes_used);
        assert_int_equal(es[e].storage_bytes, g_bytes - st.cache_bytes_used);
    }
}

static void test_minio_count_hit_rate_equals_cached_item_fraction(void **state)
{
    (void)state;
    /* four workers: the epoch boundary may shift a few items, the rate
     * still matches within 0.01 */
    coordl_config cfg = cache_config(g_bytes / 2, COORDL_CACHE_MINIO);
    cfg.threads = 4;
    coordl_epoch_stats es[3];
    coordl_stats st;
    run_epochs_stats(&cfg, 3, es, &st);
    double byte_fraction = (double)st.cache_bytes_used / (double)g_bytes;
    for (int e = 1; e < 3; e++) {
        uint64_t fetches = es[e].cache_hits + es[e].cache_misses;
        assert_int_equal(fetches, N_ITEMS);
        double rate = (double)es[e].cache_hits / (double)fetches;
        /* files are of similar size: item and byte fractions agree */
        assert_float_equal(rate, byte_fraction, 0.01);
        assert_float_equal(rate, (double)st.cache_items / N_ITEMS, 0.01);
        double byte_rate = (double)es[e].cache_hit_bytes / (double)es[e].fetch_bytes;
        assert_float_equal(byte_rate, byte_fraction, 0.01);
    }
}

static void test_minio_never_evicts(void **state)
{
    (void)state;
    coordl_config cfg = cache_config(g_bytes / 4, COORDL_CACHE_MINIO);
    coordl *L = tu_open(&cfg);
    tu_run run = {0};
    coordl_stats after0, after3;
    assert_int_equal(tu_run_epochs(L, 1, &run), COORDL_OK);
    coordl_get_stats(L, &after0);
    assert_int_equal(tu_run_epochs(L, 3, &run), COORDL_OK);
    coordl_get_stats(L, &after3);
    /* the same items stay: counts and bytes unchanged, and each later
     * epoch hits exactly those */
    assert_int_equal(after3.cache_items, after0.cache_items);
    assert_int_equal(after3.cache_bytes_used, after0.cache_bytes_used);
    for (uint64_t e = 1; e < 4; e++) {
        coordl_epoch_stats es;
        assert_int_equal(coordl_get_epoch_stats(L, e, &es), COORDL_OK);
        assert_int_equal(es.cache_hits, after0.cache_items);
        assert_int_equal(es.cache_hit_bytes, after0.cache_bytes_used);
    }
    tu_run_free(&run);
    coordl_close(L);
}

static void test_lru_hit_rate_is_below_minio_under_shuffle(void **state)
{
    (void)state;
    /* LRU under a fresh permutation per epoch keeps the items read last,
     * which the next epoch wants at a random time: expected ~12.5% at a
     * 50% budget, against MinIO's 50% */
    coordl_epoch_stats minio[3], lru[3];
    coordl_stats sm, sl;
    coordl_config cfg = cache_config(g_bytes / 2, COORDL_CACHE_MINIO);
    cfg.threads = 2;
    run_epochs_stats(&cfg, 3, minio, &sm);
    cfg.cache_policy = COORDL_CACHE_LRU;
    run_epochs_stats(&cfg, 3, lru, &sl);
    assert_true(sl.cache_bytes_used <= g_bytes / 2);
    for (int e = 1; e < 3; e++) {
        double rm = (double)minio[e].cache_hits / N_ITEMS;
        double rl = (double)lru[e].cache_hits / N_ITEMS;
        if (!(rm > rl + 0.05))
            fail_msg("epoch %d: MinIO hit rate %.3f not above LRU %.3f + 0.05",
                     e, rm, rl);
        assert_true(lru[e].cache_hits > 0); /* LRU does cache something */
        assert_int_equal(lru[e].fetch_bytes, g_bytes);
        assert_int_equal(lru[e].cache_hit_bytes + lru[e].storage_bytes, g_bytes);
    }
}

static void test_cache_as_large_as_dataset_stops_storage_reads(void **state)
{
    (void)state;
    coordl_config cfg = cache_config(g_bytes, COORDL_CACHE_MINIO);
    coordl_epoch_stats es[3];
    coordl_stats st;
    run_epochs_stats(&cfg, 3, es, &st);
    assert_int_equal(st.cache_items, N_ITEMS);
    assert_int_equal(st.cache_bytes_used, g_bytes);
    assert_int_equal(es[0].storage_bytes, g_bytes);
    for (int e = 1; e < 3; e++) {
        assert_int_equal(es[e].storage_bytes, 0);
        assert_int_equal(es[e].cache_hits, N_ITEMS);
        assert_int_equal(es[e].cache_misses, 0);
        assert_int_equal(es[e].cache_hit_bytes, g_bytes);
    }
    /* totals: only the first epoch touched storage */
    assert_int_equal(st.storage_bytes, g_bytes);
    assert_int_equal(st.storage_reads, N_ITEMS);
}

static void test_no_cache_reads_storage_every_epoch(void **state)
{
    (void)state;
    coordl_config cfg = cache_config(0, COORDL_CACHE_MINIO);
    coordl_epoch_stats es[2];
    coordl_stats st;
    run_epochs_stats(&cfg, 2, es, &st);
    assert_int_equal(st.cache_bytes_used, 0);
    assert_int_equal(st.cache_items, 0);
    for (int e = 0; e < 2; e++) {
        assert_int_equal(es[e].cache_hits, 0);
        assert_int_equal(es[e].cache_hit_bytes, 0);
        assert_int_equal(es[e].storage_bytes, g_bytes);
        assert_int_equal(es[e].fetch_bytes, g_bytes);
    }
    assert_true(st.storage_reads >= 2 * N_ITEMS);
}

static void test_cache_budget_smaller_than_any_file_caches_nothing(void **state)
{
    (void)state;
    coordl_config cfg = cache_config(16, COORDL_CACHE_MINIO);
    coordl_epoch_stats es[2];
    coordl_stats st;
    run_epochs_stats(&cfg, 2, es, &st);
    assert_int_equal(st.cache_items, 0);
    assert_int_equal(st.cache_bytes_used, 0);
    assert_int_equal(es[1].cache_hits, 0);
    assert_int_equal(es[1].storage_bytes, g_bytes);
}

static void test_sharded_minio_hit_rate_per_rank(void **state)
{
    (void)state;
    /* world 2, rank 1: 1000 items per epoch; with a budget of half of the
     * rank's share the rank caches items of its first-epoch share; later
     * epochs (a different share) hit only what they happen to draw, and
     * the accounting stays consistent */
    coordl_config cfg = cache_config(g_bytes / 4, COORDL_CACHE_MINIO);
    cfg.world = 2;
    cfg.rank = 1;
    coordl *L = tu_open(&cfg);
    tu_run run = {0};
    assert_int_equal(tu_run_epochs(L, 2, &run), COORDL_OK);
    assert_int_equal(run.nrows, 2 * N_ITEMS / 2);
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_true(st.cache_bytes_used <= g_bytes / 4);
    for (uint64_t e = 0; e < 2; e++) {
        coordl_epoch_stats es;
        assert_int_equal(coordl_get_epoch_stats(L, e, &es), COORDL_OK);
        assert_int_equal(es.items, N_ITEMS / 2);
        assert_int_equal(es.cache_hits + es.cache_misses, N_ITEMS / 2);
        assert_int_equal(es.cache_hit_bytes + es.storage_bytes, es.fetch_bytes);
        if (e == 0)
            assert_int_equal(es.cache_hits, 0);
    }
    tu_run_free(&run);
    coordl_close(L);
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dataset_bytes_and_budget_are_reported),
        cmocka_unit_test(test_minio_first_epoch_has_no_hits_and_fills_budget),
        cmocka_unit_test(test_minio_byte_hit_rate_equals_cached_fraction),
        cmocka_unit_test(test_minio_count_hit_rate_equals_cached_item_fraction),
        cmocka_unit_test(test_minio_never_evicts),
        cmocka_unit_test(test_lru_hit_rate_is_below_minio_under_shuffle),
        cmocka_unit_test(test_cache_as_large_as_dataset_stops_storage_reads),
        cmocka_unit_test(test_no_cache_reads_storage_every_epoch),
        cmocka_unit_test(test_cache_budget_smaller_than_any_file_caches_nothing),
        cmocka_unit_test(test_sharded_minio_hit_rate_per_rank),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
