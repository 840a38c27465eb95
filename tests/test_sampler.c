/*
 * test_sampler.c - the epoch permutation and how it is cut into shards and
 * batches: every item once per epoch, drop_last, rank shards (disjoint,
 * equal, a strided slice of the one permutation), reproducibility by seed,
 * and batches_per_epoch.
 *
 * The items are 100 tiny JPEGs listed by list files, so a dataset of any
 * size N <= 100 costs one small text file.
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL 100

static char *g_dir;

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    for (int i = 0; i < POOL; i++) {
        uint8_t col[3] = {(uint8_t)(i * 2), (uint8_t)(255 - i), 77};
        uint8_t *pix = tu_solid(8, 8, 3, col);
        char *p = tu_join(g_dir, "pool/p%03d.jpg", i);
        tu_write_jpeg(p, pix, 8, 8, 3, NULL);
        free(p);
        free(pix);
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    return 0;
}

/* List file of the first n pool images, labels id % 5. malloc'd path. */
static char *list_of(int n)
{
    char *list = tu_join(g_dir, "list_%d.txt", n);
    size_t cap = (size_t)n * 64 + 1, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, "pool/p%03d.jpg\t%d\n",
                                i, i % 5);
    tu_write_file(list, text, len);
    free(text);
    return list;
}

typedef struct {
    int n;
    uint32_t batch;
    int drop_last, shuffle;
    uint64_t seed;
    int rank, world;
} sampler_case;

static coordl *open_case(const sampler_case *c)
{
    char *list = list_of(c->n);
    coordl_config cfg = tu_config(list);
    cfg.pipeline = COORDL_PIPE_EVAL;
    cfg.out_w = cfg.out_h = 4;
    cfg.batch_size = c->batch;
    cfg.drop_last = c->drop_last;
    cfg.shuffle = c->shuffle;
    cfg.seed = c->seed;
    cfg.rank = c->rank;
    cfg.world = c->world;
    coordl *L = tu_open(&cfg);
    free(list);
    return L;
}

/* Runs `epochs` epochs of case c into run (fresh). */
static void run_case(const sampler_case *c, unsigned epochs, tu_run *run,
                     uint64_t *batches_per_epoch)
{
    coordl *L = open_case(c);
    memset(run, 0, sizeof *run);
    assert_int_equal(tu_run_epochs(L, epochs, run), COORDL_OK);
    if (batches_per_epoch)
        *batches_per_epoch = coordl_batches_per_epoch(L);
    coordl_close(L);
}

/* The ids of epoch e, in order; *n receives the count. malloc'd. */
static uint64_t *epoch_ids(const tu_run *run, uint64_t e, size_t *n)
{
    uint64_t *out = malloc((run->nrows + 1) * sizeof *out);
    assert_non_null(out);
    size_t k = 0;
    for (size_t i = 0; i < run->nrows; i++)
        if (run->row_epoch[i] == e)
            out[k++] = run->ids[i];
    *n = k;
    return out;
}

/* ---- every item once -------------------------------------------------- */

static void check_epoch_cover(const sampler_case *c)
{
    tu_run run;
    uint64_t bpe;
    run_case(c, 2, &run, &bpe);
    size_t n = (size_t)c->n, b = c->batch;
    size_t full = n / b, rows_expected = c->drop_last ? full * b : n;
    size_t batches_expected = c->drop_last ? full : (n + b - 1) / b;
    assert_int_equal(bpe, batches_expected);
    assert_int_equal(run.nbatches, 2 * batches_expected);
    assert_int_equal(run.ends, 2);
    for (uint64_t e = 0; e < 2; e++) {
        size_t k;
        uint64_t *ids = epoch_ids(&run, e, &k);
        assert_int_equal(k, rows_expected);
        uint8_t *seen = calloc(n, 1);
        assert_non_null(seen);
        for (size_t i = 0; i < k; i++) {
            assert_true(ids[i] < n);
            assert_int_equal(seen[ids[i]], 0); /* never twice */
            seen[ids[i]] = 1;
        }
        free(seen);
        free(ids);
    }
    /* batch indices run 0.. within each epoch; only the last may be short */
    for (size_t i = 0; i < run.nbatches; i++) {
        uint64_t idx = i % batches_expected;
        assert_int_equal(run.index[i], idx);
        assert_int_equal(run.epoch[i], i / batches_expected);
        uint32_t expect_n = (uint32_t)b;
        if (idx == batches_expected - 1 && !c->drop_last && n % b)
            expect_n = (uint32_t)(n % b);
        assert_int_equal(run.n[i], expect_n);
    }
    for (size_t i = 0; i < run.nrows; i++)
        assert_int_equal(run.labels[i], (int32_t)(run.ids[i] % 5));
    tu_run_free(&run);
}

static void test_every_item_exactly_once_per_epoch_shuffled(void **state)
{
    (void)state;
    static const sampler_case cases[] = {
        {1, 1, 0, 1, 3, 0, 1},   {7, 3, 0, 1, 3, 0, 1},
        {10, 4, 0, 1, 9, 0, 1},  {33, 8, 0, 1, 1, 0, 1},
        {100, 7, 0, 1, 5, 0, 1}, {100, 100, 0, 1, 5, 0, 1},
        {5, 8, 0, 1, 5, 0, 1}, /* batch larger than the dataset */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_epoch_cover(&cases[i]);
}

static void test_every_item_exactly_once_per_epoch_unshuffled(void **state)
{
    (void)state;
    static const sampler_case cases[] = {
        {1, 1, 0, 0, 0, 0, 1}, {10, 3, 0, 0, 0, 0, 1}, {64, 8, 0, 0, 0, 0, 1},
        {99, 10, 0, 0, 0, 0, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_epoch_cover(&cases[i]);
}

static void test_drop_last_keeps_only_full_batches(void **state)
{
    (void)state;
    static const sampler_case cases[] = {
        {20, 6, 1, 1, 2, 0, 1}, /* 3 full, 2 dropped */
        {18, 6, 1, 1, 2, 0, 1}, /* exact: nothing dropped */
        {100, 7, 1, 0, 0, 0, 1},
        {37, 4, 1, 1, 8, 0, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_epoch_cover(&cases[i]);
}

static void test_unshuffled_order_is_identity_every_epoch(void **state)
{
    (void)state;
    sampler_case c = {23, 5, 0, 0, 77, 0, 1};
    tu_run run;
    run_case(&c, 3, &run, NULL);
    assert_int_equal(run.nrows, 69);
    for (size_t i = 0; i < run.nrows; i++)
        assert_int_equal(run.ids[i], i % 23);
    tu_run_free(&run);
    /* drop_last without shuffle keeps the first full batches */
    sampler_case d = {23, 5, 1, 0, 0, 0, 1};
    run_case(&d, 1, &run, NULL);
    assert_int_equal(run.nrows, 20);
    for (size_t i = 0; i < run.nrows; i++)
        assert_int_equal(run.ids[i], i);
    tu_run_free(&run);
}

/* ---- order ------------------------------------------------------------- */

static int same_order(const uint64_t *a, const uint64_t *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

static void test_shuffled_epochs_have_different_orders(void **state)
{
    (void)state;
    sampler_case c = {50, 10, 0, 1, 11, 0, 1};
    tu_run run;
    run_case(&c, 3, &run, NULL);
    size_t n0, n1, n2;
    uint64_t *e0 = epoch_ids(&run, 0, &n0);
    uint64_t *e1 = epoch_ids(&run, 1, &n1);
    uint64_t *e2 = epoch_ids(&run, 2, &n2);
    assert_int_equal(n0, 50);
    assert_int_equal(n1, 50);
    assert_false(same_order(e0, e1, 50));
    assert_false(same_order(e1, e2, 50));
    assert_false(same_order(e0, e2, 50));
    /* and none of them is the identity */
    int identity = 1;
    for (uint64_t i = 0; i < 50; i++)
        identity &= e0[i] == i;
    assert_false(identity);
    free(e0);
    free(e1);
    free(e2);
    tu_run_free(&run);
}

static void test_same_seed_reproduces_order(void **state)
{
    (void)state;
    sampler_case c = {60, 7, 0, 1, 42, 0, 1};
    tu_run a, b;
    run_case(&c, 3, &a, NULL);
    run_case(&c, 3, &b, NULL);
    assert_int_equal(a.nrows, 180);
    assert_int_equal(b.nrows, 180);
    assert_memory_equal(a.ids, b.ids, a.nrows * sizeof *a.ids);
    tu_run_free(&a);
    tu_run_free(&b);
}

static void test_different_seed_changes_order(void **state)
{
    (void)state;
    sampler_case c = {60, 7, 0, 1, 42, 0, 1};
    tu_run a, b;
    run_case(&c, 1, &a, NULL);
    c.seed = 43;
    run_case(&c, 1, &b, NULL);
    assert_int_equal(a.nrows, 60);
    assert_int_equal(b.nrows, 60);
    assert_false(same_order(a.ids, b.ids, 60));
    tu_run_free(&a);
    tu_run_free(&b);
}

static void test_permutation_is_unbiased(void **state)
{
    (void)state;
    /* 200 epochs of 10 items: each item leads an epoch ~20 times, and there
     * is ~1 fixed point per epoch (a Sattolo-style shuffle has none, a
     * biased one piles items up at some positions) */
    sampler_case c = {10, 10, 0, 1, 5, 0, 1};
    tu_run run;
    run_case(&c, 200, &run, NULL);
    assert_int_equal(run.nrows, 2000);
    int first[10] = {0}, fixed = 0;
    for (size_t i = 0; i < run.nrows; i++) {
        size_t pos = i % 10;
        if (pos == 0)
            first[run.ids[i]]++;
        fixed += run.ids[i] == pos;
    }
    for (int k = 0; k < 10; k++)
        if (first[k] < 5 || first[k] > 45)
            fail_msg("item %d led %d of 200 epochs (expected ~20)", k, first[k]);
    if (fixed < 120 || fixed > 280)
        fail_msg("%d fixed points in 200 epochs (expected ~200)", fixed);
    tu_run_free(&run);
}

/* ---- shards ------------------------------------------------------------ */

static void test_shards_are_disjoint_equal_and_cover_floor(void **state)
{
    (void)state;
    const int n = 50;
    for (int world = 2; world <= 4; world++) {
        size_t share = (size_t)(n / world);
        uint8_t seen[2][POOL];
        memset(seen, 0, sizeof seen);
        for (int rank = 0; rank < world; rank++) {
            sampler_case c = {n, 4, 0, 1, 21, rank, world};
            tu_run run;
            uint64_t bpe;
            run_case(&c, 2, &run, &bpe);
            assert_int_equal(bpe, (share + 3) / 4);
            for (uint64_t e = 0; e < 2; e++) {
                size_t k;
                uint64_t *ids = epoch_ids(&run, e, &k);
                assert_int_equal(k, share); /* equal counts */
                for (size_t i = 0; i < k; i++) {
                    assert_true(ids[i] < (uint64_t)n);
                    /* disjoint across ranks and distinct within one */
                    assert_int_equal(seen[e][ids[i]], 0);
                    seen[e][ids[i]] = 1;
                }
                free(ids);
            }
            tu_run_free(&run);
        }
        for (int e = 0; e < 2; e++) {
            size_t covered = 0;
            for (int i = 0; i < n; i++)
                covered += seen[e][i];
            assert_int_equal(covered, share * (size_t)world);
        }
    }
}

static void test_unshuffled_shard_is_every_world_th_id(void **state)
{
    (void)state;
    const int n = 50, world = 3;
    for (int rank = 0; rank < world; rank++) {
        sampler_case c = {n, 5, 0, 0, 0, rank, world};
        tu_run run;
        run_case(&c, 1, &run, NULL);
        assert_int_equal(run.nrows, 16); /* floor(50 / 3) */
        for (size_t i = 0; i < run.nrows; i++)
            assert_int_equal(run.ids[i], i * (size_t)world + (size_t)rank);
        tu_run_free(&run);
    }
}

static void test_shard_is_strided_slice_of_the_epoch_permutation(void **state)
{
    (void)state;
    /* world 1 shows the permutation of (seed, epoch) itself; rank r of W
     * must get positions r, r+W, r+2W, ... of the same permutation */
    const int n = 47;
    sampler_case whole = {n, 47, 0, 1, 99, 0, 1};
    tu_run all;
    run_case(&whole, 2, &all, NULL);
    assert_int_equal(all.nrows, 94);
    for (int world = 2; world <= 4; world++)
        for (int rank = 0; rank < world; rank++) {
            sampler_case c = {n, 3, 0, 1, 99, rank, world};
            tu_run run;
            run_case(&c, 2, &run, NULL);
            size_t share = (size_t)(n / world);
            assert_int_equal(run.nrows, 2 * share);
            for (uint64_t e = 0; e < 2; e++) {
                size_t k, kp;
                uint64_t *ids = epoch_ids(&run, e, &k);
                uint64_t *perm = epoch_ids(&all, e, &kp);
                assert_int_equal(kp, (size_t)n);
                for (size_t i = 0; i < k; i++)
                    assert_int_equal(ids[i], perm[i * (size_t)world + (size_t)rank]);
                free(ids);
                free(perm);
            }
            tu_run_free(&run);
        }
    tu_run_free(&all);
}

static void test_permutation_does_not_depend_on_batch_size(void **state)
{
    (void)state;
    sampler_case a = {40, 40, 0, 1, 7, 0, 1}, b = {40, 3, 0, 1, 7, 0, 1};
    tu_run ra, rb;
    run_case(&a, 2, &ra, NULL);
    run_case(&b, 2, &rb, NULL);
    assert_int_equal(ra.nrows, 80);
    assert_int_equal(rb.nrows, 80);
    assert_memory_equal(ra.ids, rb.ids, 80 * sizeof *ra.ids);
    tu_run_free(&ra);
    tu_run_free(&rb);
}

static void test_batches_per_epoch_with_shards_and_drop_last(void **state)
{
    (void)state;
    /* share = floor(N / W); ceil(share / B), or floor with drop_last */
    static const struct {
        int n, world;
        uint32_t batch;
        int drop_last;
        uint64_t expect;
    } cases[] = {
        {100, 1, 7, 0, 15}, {100, 1, 7, 1, 14}, {100, 3, 7, 0, 5},
        {100, 3, 7, 1, 4},  {100, 4, 5, 1, 5},  {99, 2, 10, 0, 5},
        {99, 2, 10, 1, 4},  {9, 4, 2, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sampler_case c = {cases[i].n, cases[i].batch, cases[i].drop_last, 1, 3,
                          cases[i].world - 1, cases[i].world};
        tu_run run;
        uint64_t bpe;
        run_case(&c, 1, &run, &bpe);
        assert_int_equal(bpe, cases[i].expect);
        assert_int_equal(run.nbatches, cases[i].expect);
        tu_run_free(&run);
    }
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_item_exactly_once_per_epoch_shuffled),
        cmocka_unit_test(test_every_item_exactly_once_per_epoch_unshuffled),
        cmocka_unit_test(test_drop_last_keeps_only_full_batches),
        cmocka_unit_test(test_unshuffled_order_is_identity_every_epoch),
        cmocka_unit_test(test_shuffled_epochs_have_different_orders),
        cmocka_unit_test(test_same_seed_reproduces_order),
        cmocka_unit_test(test_different_seed_changes_order),
        cmocka_unit_test(test_permutation_is_unbiased),
        cmocka_unit_test(test_shards_are_disjoint_equal_and_cover_floor),
        cmocka_unit_test(test_unshuffled_shard_is_every_world_th_id),
        cmocka_unit_test(test_shard_is_strided_slice_of_the_epoch_permutation),
        cmocka_unit_test(test_permutation_does_not_depend_on_batch_size),
        cmocka_unit_test(test_batches_per_epoch_with_shards_and_drop_last),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
