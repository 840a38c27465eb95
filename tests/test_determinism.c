/*
 * test_determinism.c - the determinism contract: for a fixed dataset,
 * config and seed the sequence of batches (ids, labels, every data byte) is
 * the same across runs, thread counts, cache sizes, prefetch depths and
 * after coordl_seek, which is O(1) and lands exactly on the batch asked for.
 */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

static char *g_dir;
static char *g_root;
static uint64_t g_bytes;
/* 4 classes x 24 textured JPEGs of 40..64 px: 96 items, 12 batches of 8 */
/* Reference: hashes of every batch of epochs 0..2 (12 batches each), made
 * once by a plain sequential run. */
static tu_run g_ref;
static const tu_folder_spec g_spec = {4, 24, 40, 40, 24, TU_PAT_TEXTURED,
                                      TU_FMT_JPEG, 90, 11};

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    g_root = tu_join(g_dir, "data");
    g_bytes = tu_make_image_folder(g_root, &g_spec);
    coordl_config cfg = tu_config(g_root);
    cfg.layout = COORDL_F32_NCHW;
    cfg.out_w = 24;
    cfg.out_h = 20;
    cfg.batch_size = 8;
    cfg.seed = 2024;
    coordl *L = tu_open(&cfg);
    memset(&g_ref, 0, sizeof g_ref);
    assert_int_equal(tu_run_epochs(L, 3, &g_ref), COORDL_OK);
    assert_int_equal(g_ref.nbatches, 36);
    coordl_close(L);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_run_free(&g_ref);
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_root);
    return 0;
}

/* Must match the reference run made in group_setup. */
static coordl_config base_config(void)
{
    coordl_config cfg = tu_config(g_root);
    cfg.layout = COORDL_F32_NCHW;
    cfg.out_w = 24;
    cfg.out_h = 20;
    cfg.batch_size = 8;
    cfg.seed = 2024;
    return cfg;
}

/* Hash sequence of `epochs` epochs under cfg. */
static void hashes(const coordl_config *cfg, unsigned epochs, tu_run *run)
{
    coordl *L = tu_open(cfg);
    memset(run, 0, sizeof *run);
    assert_int_equal(tu_run_epochs(L, epochs, run), COORDL_OK);
    coordl_close(L);
}

static void assert_same_run(const tu_run *a, const tu_run *b)
{
    assert_int_equal(a->nbatches, b->nbatches);
    for (size_t i = 0; i < a->nbatches; i++)
        if (a->hash[i] != b->hash[i])
            fail_msg("batch %zu (epoch %llu index %llu) differs", i,
                     (unsigned long long)a->epoch[i],
                     (unsigned long long)a->index[i]);
}

static void test_two_runs_give_identical_batches(void **state)
{
    (void)state;
    coordl_config cfg = base_config();
    tu_run a, b;
    hashes(&cfg, 2, &a);
    hashes(&cfg, 2, &b);
    assert_int_equal(a.nbatches, 24);
    assert_same_run(&a, &b);
    tu_run_free(&a);
    tu_run_free(&b);
}

static void test_one_and_four_threads_give_identical_batches(void **state)
{
    (void)state;
    coordl_config cfg = base_config();
    cfg.threads = 1;
    tu_run a, b;
    hashes(&cfg, 2, &a);
    cfg.threads = 4;
    hashes(&cfg, 2, &b);
    assert_same_run(&a, &b);
    tu_run_free(&a);
    tu_run_free(&b);
}

static void test_cache_size_does_not_change_batches(void **state)
{
    (void)state;
    coordl_config cfg = base_config();
    tu_run none, half, all;
    cfg.cache_bytes = 0;
    hashes(&cfg, 3, &none);
    cfg.cache_bytes = g_bytes / 2;
    hashes(&cfg, 3, &half);
    cfg.cache_bytes = g_bytes * 2;
    hashes(&cfg, 3, &all);
    assert_same_run(&none, &half);
    assert_same_run(&none, &all);
    cfg.cache_policy = COORDL_CACHE_LRU;
    cfg.cache_bytes = g_bytes / 3;
    tu_run lru;
    hashes(&cfg, 3, &lru);
    assert_same_run(&none, &lru);
    tu_run_free(&none);
    tu_run_free(&half);
    tu_run_free(&all);
    tu_run_free(&lru);
}

static void test_prefetch_depth_does_not_change_batches(void **state)
{
    (void)state;
    coordl_config cfg = base_config();
    cfg.prefetch_batches = 1;
    cfg.threads = 3;
    tu_run a, b;
    hashes(&cfg, 2, &a);
    cfg.prefetch_batches = 8;
    hashes(&cfg, 2, &b);
    assert_same_run(&a, &b);
    tu_run_free(&a);
    tu_run_free(&b);
}

static void test_seed_changes_batches(void **state)
{
    (void)state;
    coordl_config cfg = base_config();
    tu_run a, b;
    hashes(&cfg, 1, &a);
    cfg.seed += 1;
    hashes(&cfg, 1, &b);
    size_t same = 0;
    for (size_t i = 0; i < a.nbatches; i++)
        same += a.hash[i] == b.hash[i];
    assert_int_equal(same, 0);
    tu_run_free(&a);
    tu_run_free(&b);
}

static void test_same_item_differs_between_epochs_but_not_runs(void **state)
{
    (void)state;
    /* the augmentation of an item is a function of (seed, epoch, item):
     * item 0 in epoch 0 and epoch 1 differ; in two runs they agree */
    coordl_config cfg = base_config();
    cfg.layout = COORDL_U8_NHWC;
    const size_t rb = 3 * 24 * 20;
    uint8_t *row[2][2];
    for (int run = 0; run < 2; run++) {
        coordl *L = tu_open(&cfg);
        row[run][0] = row[run][1] = NULL;
        unsigned ends = 0;
        while (ends < 2) {
            coordl_batch b;
            coordl_status rc = coordl_next(L, &b);
            if (rc == COORDL_END_OF_EPOCH) {
                ends++;
                continue;
            }
            assert_int_equal(rc, COORDL_OK);
            for (uint32_t i = 0; i < b.n; i++)
                if (b.ids[i] == 0) {
                    row[run][b.epoch] = malloc(rb);
                    assert_non_null(row[run][b.epoch]);
                    memcpy(row[run][b.epoch], (uint8_t *)b.data + i * rb, rb);
                }
            coordl_release(L, &b);
        }
        coordl_close(L);
        assert_non_null(row[run][0]);
        assert_non_null(row[run][1]);
    }
    assert_memory_not_equal(row[0][0], row[0][1], rb);
    assert_memory_equal(row[0][0], row[1][0], rb);
    assert_memory_equal(row[0][1], row[1][1], rb);
    for (int r = 0; r < 2; r++)
        for (int e = 0; e < 2; e++)
            free(row[r][e]);
}

static void test_determinism_holds_for_every_layout_and_eval(void **state)
{
    (void)state;
    static const coordl_layout layouts[] = {COORDL_F32_NCHW, COORDL_U8_NHWC,
                                            COORDL_F32_NHWC, COORDL_U8_NCHW};
    for (int pipe = 0; pipe < 2; pipe++)
        for (size_t k = 0; k < 4; k++) {
            coordl_config cfg = base_config();
            cfg.layout = layouts[k];
            cfg.pipeline = pipe ? COORDL_PIPE_EVAL : COORDL_PIPE_TRAIN;
            cfg.threads = 1;
            tu_run a, b;
            hashes(&cfg, 1, &a);
            cfg.threads = 4;
            cfg.cache_bytes = g_bytes;
            hashes(&cfg, 1, &b);
            assert_same_run(&a, &b);
            tu_run_free(&a);
            tu_run_free(&b);
        }
}

/* ---- seek ------------------------------------------------------------- */



static uint64_t ref_hash(uint64_t epoch, uint64_t batch)
{
    return g_ref.hash[epoch * 12 + batch];
}

/* After seek(L, e, b) the next coordl_next returns exactly that batch. */
static void expect_seek(coordl *L, uint64_t e, uint64_t b)
{
    assert_int_equal(coordl_seek(L, e, b), COORDL_OK);
    coordl_batch x;
    assert_int_equal(coordl_next(L, &x), COORDL_OK);
    assert_int_equal(x.epoch, e);
    assert_int_equal(x.index, b);
    if (tu_batch_hash(&x) != ref_hash(e, b))
        fail_msg("batch after seek(%llu, %llu) differs from the reference",
                 (unsigned long long)e, (unsigned long long)b);
    coordl_release(L, &x);
}

static void test_seek_lands_on_exact_batch(void **state)
{
    (void)state;
    coordl_config cfg = base_config();
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_batches_per_epoch(L), 12);
    expect_seek(L, 1, 3);
    expect_seek(L, 2, 0);
    expect_seek(L, 0, 11); /* backwards, to the last batch of epoch 0 */
    expect_seek(L, 2, 11);
    expect_seek(L, 1, 3); /* the same place twice */
    coordl_close(L);
}

static void test_seek_then_stream_continues_in_order(void **state)
{
    (void)state;
    coordl_config cfg = base_config();
    cfg.threads = 3;
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_seek(L, 1, 9), COORDL_OK);
    /* 1/9, 1/10, 1/11, end, then all of epoch 2, end */
    tu_run run = {0};
    assert_int_equal(tu_run_epochs(L, 2, &run), COORDL_OK);
    assert_int_equal(run.nbatches, 3 + 12);
    for (size_t i = 0; i < run.nbatches; i++) {
        uint64_t e = i < 3 ? 1 : 2, b = i < 3 ? 9 + i : i - 3;
        assert_int_equal(run.epoch[i], e);
        assert_int_equal(run.index[i], b);
        assert_int_equal(run.hash[i], ref_hash(e, b));
    }
    tu_run_free(&run);
    coordl_close(L);
}

static void test_seek_mid_epoch_after_consuming_batches(void **state)
{
    (void)state;
    coordl_config cfg = base_config();
    cfg.prefetch_batches = 3;
    coordl *L = tu_open(&cfg);
    /* consume a few so workers are busy preparing ahead, then jump */
    for (uint64_t i = 0; i < 5; i++) {
        coordl_batch b;
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        assert_int_equal(b.index, i);
        assert_int_equal(tu_batch_hash(&b), ref_hash(0, i));
        coordl_release(L, &b);
    }
    expect_seek(L, 0, 2); /* back within the same epoch */
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_int_equal(b.index, 3);
    assert_int_equal(tu_batch_hash(&b), ref_hash(0, 3));
    coordl_release(L, &b);
    coordl_close(L);
}

static void test_seek_keeps_held_batch_valid(void **state)
{
    (void)state;
    coordl_config cfg = base_config();
    cfg.prefetch_batches = 2;
    coordl *L = tu_open(&cfg);
    coordl_batch held;
    assert_int_equal(coordl_next(L, &held), COORDL_OK);
    uint64_t h = tu_batch_hash(&held);
    assert_int_equal(h, ref_hash(0, 0));
    expect_seek(L, 2, 5);
    expect_seek(L, 1, 7);
    /* the batch held across the seeks still reads the same */
    assert_int_equal(tu_batch_hash(&held), h);
    coordl_release(L, &held);
    expect_seek(L, 0, 1);
    coordl_close(L);
}

static void test_seek_to_far_epoch_gives_full_valid_batch(void **state)
{
    (void)state;
    /* no replay: epoch 1,000,000 is reached at once and holds a full batch
     * of distinct valid ids */
    coordl_config cfg = base_config();
    coordl *L = tu_open(&cfg);
    expect_seek(L, 2, 6);
    assert_int_equal(coordl_seek(L, 1000000, 4), COORDL_OK);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_int_equal(b.epoch, 1000000);
    assert_int_equal(b.index, 4);
    assert_int_equal(b.n, 8);
    for (uint32_t i = 0; i < b.n; i++) {
        assert_true(b.ids[i] < 96);
        for (uint32_t j = 0; j < i; j++)
            assert_true(b.ids[i] != b.ids[j]);
    }
    coordl_release(L, &b);
    coordl_close(L);
}

static void test_seek_past_last_batch_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = base_config();
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_seek(L, 0, 12), COORDL_ERR_INVALID);
    assert_int_equal(coordl_seek(L, 3, 1000), COORDL_ERR_INVALID);
    assert_true(strlen(coordl_errmsg(L)) > 0);
    /* the stream is untouched by a refused seek */
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_int_equal(b.epoch, 0);
    assert_int_equal(b.index, 0);
    assert_int_equal(tu_batch_hash(&b), ref_hash(0, 0));
    coordl_release(L, &b);
    coordl_close(L);
}

static void test_seek_with_shards_matches_sequential_shard(void **state)
{
    (void)state;
    coordl_config cfg = base_config();
    cfg.world = 3;
    cfg.rank = 2;
    tu_run seq;
    hashes(&cfg, 2, &seq);
    coordl *L = tu_open(&cfg);
    uint64_t bpe = coordl_batches_per_epoch(L);
    assert_int_equal(bpe, 4); /* 32 items per rank / 8 */
    assert_int_equal(seq.nbatches, 8);
    for (uint64_t k = 0; k < 8; k++) {
        uint64_t e = (7 - k) / bpe, i = (7 - k) % bpe; /* backwards */
        assert_int_equal(coordl_seek(L, e, i), COORDL_OK);
        coordl_batch b;
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        assert_int_equal(tu_batch_hash(&b), seq.hash[7 - k]);
        coordl_release(L, &b);
    }
    coordl_close(L);
    tu_run_free(&seq);
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_runs_give_identical_batches),
        cmocka_unit_test(test_one_and_four_threads_give_identical_batches),
        cmocka_unit_test(test_cache_size_does_not_change_batches),
        cmocka_unit_test(test_prefetch_depth_does_not_change_batches),
        cmocka_unit_test(test_seed_changes_batches),
        cmocka_unit_test(test_same_item_differs_between_epochs_but_not_runs),
        cmocka_unit_test(test_determinism_holds_for_every_layout_and_eval),
        cmocka_unit_test(test_seek_lands_on_exact_batch),
        cmocka_unit_test(test_seek_then_stream_continues_in_order),
        cmocka_unit_test(test_seek_mid_epoch_after_consuming_batches),
        cmocka_unit_test(test_seek_keeps_held_batch_valid),
        cmocka_unit_test(test_seek_to_far_epoch_gives_full_valid_batch),
        cmocka_unit_test(test_seek_past_last_batch_is_invalid),
        cmocka_unit_test(test_seek_with_shards_matches_sequential_shard),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
