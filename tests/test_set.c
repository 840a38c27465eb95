/*
 * test_set.c - runtime knobs and caller-owned buffers on the image
 * pipeline:
 *   coordl_set(OUT_W / OUT_H): from the next batch on, rows have the new
 *     size; the stream position is kept (the next items of the epoch's
 *     permutation), rows equal those of a loader opened with that size
 *     (crops are drawn in source pixels), held batches keep their bytes;
 *     beyond max_out_w/h with a batch held it is refused (and nothing
 *     changes), with none held the ring is reallocated;
 *   coordl_set(BATCH_SIZE): the rest of the epoch is cut into batches of
 *     the new size from the current item on, batch.index keeps counting,
 *     the epoch ends once, coordl_batches_per_epoch reports the new count;
 *   unknown parameters and values out of range are COORDL_ERR_INVALID;
 *   coordl_next_into: the same bytes coordl_next gives, nothing written or
 *     consumed on a too-small buffer, END_OF_EPOCH at the end;
 *   a size-only coordl_set keeps what the read-ahead has read (storage
 *     reads counted through a coordl_io).
 *
 * Dataset: 3 classes x 12 textured JPEGs of 40..64 px: 36 items, batch 4
 * (9 batches), made once for the group.
 */
#include "test_util.h"
#include "tu_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_ITEMS 36

static char *g_dir;
static char *g_root;
static const tu_folder_spec g_spec = {3, 12, 40, 40, 24, TU_PAT_TEXTURED,
                                      TU_FMT_JPEG, 90, 23};

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
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_root);
    return 0;
}

static coordl_config base_config(uint32_t w, uint32_t h)
{
    coordl_config cfg = tu_config(g_root);
    cfg.layout = COORDL_F32_NCHW;
    cfg.out_w = w;
    cfg.out_h = h;
    cfg.batch_size = 4;
    cfg.seed = 77;
    return cfg;
}

static size_t row_bytes(uint32_t w, uint32_t h)
{
    return (size_t)3 * w * h * sizeof(float);
}

/* A reference run: batch hashes, ids, and each (epoch, id)'s row. */
typedef struct {
    tu_run run;
    size_t rb;
    uint8_t *rows; /* [epoch][id] x rb */
    unsigned epochs;
} ref_run;

static void push_batch(tu_run *t, const coordl_batch *b)
{
    size_t nb = t->nbatches + 1, nr = t->nrows + b->n;
    t->hash = realloc(t->hash, nb * sizeof *t->hash);
    t->epoch = realloc(t->epoch, nb * sizeof *t->epoch);
    t->index = realloc(t->index, nb * sizeof *t->index);
    t->n = realloc(t->n, nb * sizeof *t->n);
    t->ids = realloc(t->ids, nr * sizeof *t->ids);
    t->labels = realloc(t->labels, nr * sizeof *t->labels);
    t->row_epoch = realloc(t->row_epoch, nr * sizeof *t->row_epoch);
    assert_true(t->hash && t->epoch && t->index && t->n && t->ids &&
                t->labels && t->row_epoch);
    t->hash[t->nbatches] = tu_batch_hash(b);
    t->epoch[t->nbatches] = b->epoch;
    t->index[t->nbatches] = b->index;
    t->n[t->nbatches] = b->n;
    t->nbatches = nb;
    for (uint32_t i = 0; i < b->n; i++) {
        t->ids[t->nrows] = b->ids[i];
        t->labels[t->nrows] = b->labels[i];
        t->row_epoch[t->nrows] = b->epoch;
        t->nrows++;
    }
}

static void make_ref(const coordl_config *cfg, unsigned epochs, ref_run *r)
{
    memset(r, 0, sizeof *r);
    r->rb = row_bytes(cfg->out_w, cfg->out_h);
    r->epochs = epochs;
    r->rows = calloc((size_t)epochs * N_ITEMS, r->rb);
    assert_non_null(r->rows);
    coordl *L = tu_open(cfg);
    unsigned ends = 0;
    while (ends < epochs) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) {
            r->run.ends++;
            ends++;
            continue;
        }
        assert_int_equal(rc, COORDL_OK);
        push_batch(&r->run, &b);
        for (uint32_t i = 0; i < b.n; i++) {
            assert_true(b.ids[i] < N_ITEMS);
            memcpy(r->rows + ((size_t)b.epoch * N_ITEMS + b.ids[i]) * r->rb,
                   (const uint8_t *)b.data + (size_t)i * r->rb, r->rb);
        }
        coordl_release(L, &b);
    }
    coordl_close(L);
}

static void free_ref(ref_run *r)
{
    tu_run_free(&r->run);
    free(r->rows);
}

static const uint8_t *ref_row(const ref_run *r, uint64_t epoch, uint64_t id)
{
    assert_true(epoch < r->epochs && id < N_ITEMS);
    return r->rows + ((size_t)epoch * N_ITEMS + id) * r->rb;
}

/* Index of batch (epoch, index) in a reference run of fixed batches. */
static size_t ref_batch(const ref_run *r, uint64_t epoch, uint64_t index)
{
    for (size_t i = 0; i < r->run.nbatches; i++)
        if (r->run.epoch[i] == epoch && r->run.index[i] == index)
            return i;
    fail_msg("no reference batch %llu/%llu", (unsigned long long)epoch,
             (unsigned long long)index);
    return 0;
}

/* The ids of epoch e of a reference run, in stream order. */
static size_t ref_epoch_ids(const ref_run *r, uint64_t e, uint64_t *ids)
{
    size_t n = 0;
    for (size_t i = 0; i < r->run.nrows; i++)
        if (r->run.row_epoch[i] == e)
            ids[n++] = r->run.ids[i];
    return n;
}

/* Next batch must equal reference batch (epoch, index) byte for byte. */
static void expect_ref_batch(coordl *L, const ref_run *r, uint64_t epoch,
                             uint64_t index, uint32_t w, uint32_t h)
{
    coordl_batch b;
    coordl_status rc = coordl_next(L, &b);
    if (rc != COORDL_OK)
        fail_msg("expected batch %llu/%llu: status %d: %s",
                 (unsigned long long)epoch, (unsigned long long)index, (int)rc,
                 coordl_errmsg(L));
    assert_int_equal(b.epoch, epoch);
    assert_int_equal(b.index, index);
    assert_int_equal(b.w, w);
    assert_int_equal(b.h, h);
    assert_int_equal(b.c, 3);
    assert_int_equal(b.layout, COORDL_F32_NCHW);
    assert_int_equal(b.data_bytes, (size_t)b.n * row_bytes(w, h));
    size_t k = ref_batch(r, epoch, index);
    assert_int_equal(b.n, r->run.n[k]);
    if (tu_batch_hash(&b) != r->run.hash[k]) {
        for (uint32_t i = 0; i < b.n; i++) {
            size_t row = 0;
            for (size_t j = 0; j < k; j++)
                row += r->run.n[j];
            if (b.ids[i] != r->run.ids[row + i])
                fail_msg("batch %llu/%llu row %u: id %llu, expected %llu",
                         (unsigned long long)epoch, (unsigned long long)index, i,
                         (unsigned long long)b.ids[i],
                         (unsigned long long)r->run.ids[row + i]);
            if (memcmp((const uint8_t *)b.data + (size_t)i * r->rb,
                       ref_row(r, epoch, b.ids[i]), r->rb))
                fail_msg("batch %llu/%llu row %u (item %llu): pixels differ "
                         "from a loader opened at %ux%u",
                         (unsigned long long)epoch, (unsigned long long)index,
                         i, (unsigned long long)b.ids[i], w, h);
        }
        fail_msg("batch %llu/%llu differs from the reference (labels?)",
                 (unsigned long long)epoch, (unsigned long long)index);
    }
    coordl_release(L, &b);
}

/* ---- OUT_W / OUT_H --------------------------------------------------- */

static void test_set_out_size_keeps_position_and_matches_direct_open(void **state)
{
    (void)state;
    coordl_config c32 = base_config(32, 24), c48 = base_config(48, 40);
    ref_run r32, r48;
    make_ref(&c32, 2, &r32);
    make_ref(&c48, 2, &r48);
    assert_int_equal(r32.run.nbatches, 18);
    /* the permutation does not depend on the output size */
    assert_memory_equal(r32.run.ids, r48.run.ids, r32.run.nrows * sizeof(uint64_t));

    coordl_config cfg = c32;
    cfg.max_out_w = 64;
    cfg.max_out_h = 64;
    coordl *L = tu_open(&cfg);
    expect_ref_batch(L, &r32, 0, 0, 32, 24);
    coordl_batch held;
    assert_int_equal(coordl_next(L, &held), COORDL_OK);
    uint64_t held_hash = tu_batch_hash(&held);
    assert_int_equal(held_hash, r32.run.hash[1]);

    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_W, 48), COORDL_OK);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_H, 40), COORDL_OK);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_int_equal(b.w, 48);
    assert_int_equal(b.h, 40);
    assert_int_equal(b.n, 4);
    assert_int_equal(b.data_bytes, (size_t)4 * 3 * 40 * 48 * 4);
    assert_int_equal(b.index, 2);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(b.ids[i], r32.run.ids[8 + i]); /* items 8..11 */
    assert_int_equal(tu_batch_hash(&b), r48.run.hash[2]);
    coordl_release(L, &b);
    /* the batch held across the change kept its size and bytes */
    assert_int_equal(held.w, 32);
    assert_int_equal(tu_batch_hash(&held), held_hash);
    coordl_release(L, &held);

    for (uint64_t i = 3; i < 9; i++)
        expect_ref_batch(L, &r48, 0, i, 48, 40);
    assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    /* and back, mid epoch 1 */
    for (uint64_t i = 0; i < 4; i++)
        expect_ref_batch(L, &r48, 1, i, 48, 40);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_W, 32), COORDL_OK);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_H, 24), COORDL_OK);
    for (uint64_t i = 4; i < 9; i++)
        expect_ref_batch(L, &r32, 1, i, 32, 24);
    assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    assert_int_equal(coordl_batches_per_epoch(L), 9);
    coordl_close(L);
    free_ref(&r32);
    free_ref(&r48);
}

/* Waits (10 s at most) until the loader has prepared `rows` rows and the
 * reader has opened items `opens` times or more, then until the opens stay
 * put for 300 ms (the workers and the read-ahead idle: the ring and the
 * read-ahead window full). Returns the opens then. */
static long settle(coordl *L, tu_io *io, uint64_t rows, long opens)
{
    long last = -1;
    int still = 0;
    for (int waited = 0; waited < 10000; waited += 10) {
        coordl_stats st;
        coordl_get_stats(L, &st);
        const long now = atomic_load(&io->opens);
        if (st.items_prepared == rows && now >= opens) {
            still = now == last ? still + 10 : 0;
            if (still >= 300) return now;
        }
        last = now;
        tu_io__sleep_us(10000);
    }
    coordl_stats st;
    coordl_get_stats(L, &st);
    fail_msg("the loader did not settle: %llu rows prepared (expected %llu), %ld opens (expected %ld or more)",
             (unsigned long long)st.items_prepared, (unsigned long long)rows, atomic_load(&io->opens), opens);
    return -1;
}

/* Darknet changes the output size every 10 batches. Such a coordl_set
 * drops the prepared batches (they have the old size) but not what the
 * read-ahead has read: the items at every position are the same. 36
 * items, batch 4, 2 slots, read-ahead depth 16, one worker, no cache:
 * with batch 0 consumed, batches 1 and 2 (positions 4..11) are prepared
 * and positions from 12 on read ahead, up to 27 at most (the read-ahead
 * refills by half windows, racing the worker): 16 to 28 opens, each
 * position read once. After the set,
 * batches 1 and 2 are prepared again (8 items read again), the window may
 * be topped up to position 27, and nothing else: 36 opens at most (28
 * positions, 8 of them twice), not 40 or more (the window read again). The rest of the epoch is
 * byte for byte a loader opened at the new size. */
static void test_set_out_size_keeps_what_readahead_read(void **state)
{
    (void)state;
    coordl_config c48 = base_config(48, 48);
    ref_run r48;
    make_ref(&c48, 1, &r48);
    tu_io io;
    tu_io_init(&io);
    coordl_config cfg = base_config(32, 24);
    cfg.max_out_w = cfg.max_out_h = 64;
    cfg.threads = 1;
    cfg.prefetch_batches = 2;
    cfg.readahead_items = 16;
    cfg.io = &io.table;
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    coordl_release(L, &b);
    /* the read-ahead refills by half windows, racing the worker: positions
     * up to somewhere between 15 and 27 were read */
    const long before = settle(L, &io, 12, 16);
    assert_true(before >= 16 && before <= 28);
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_true(st.readahead_reads >= 12); /* the window ahead was read by the read-ahead */
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_SIZE, 48), COORDL_OK);
    /* positions 0..27 at most once each (the window may be topped up to
     * 16 ahead of position 12), and batches 1 and 2's 8 items again: 36 at
     * most; reading the window again would be 40 or more */
    const long after = settle(L, &io, 12 + 8, before + 8);
    if (after > 36)
        fail_msg("a size-only coordl_set: %ld storage reads in all, at most 36 expected (%ld before, batches 1 and 2 "
                 "prepared again, the window topped up); the read-ahead's items were read again", after, before);
    for (uint64_t i = 1; i < 9; i++)
        expect_ref_batch(L, &r48, 0, i, 48, 48);
    assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    coordl_close(L);
    tu_io_destroy(&io);
    free_ref(&r48);
}

static void test_set_out_size_beyond_max_needs_no_held_batch(void **state)
{
    (void)state;
    coordl_config c32 = base_config(32, 24), c48 = base_config(48, 40),
                  c16 = base_config(16, 24);
    ref_run r32, r48, r16;
    make_ref(&c32, 1, &r32);
    make_ref(&c48, 1, &r48);
    make_ref(&c16, 1, &r16);
    coordl_config cfg = c32; /* max_out_* = 0: the open size */
    coordl *L = tu_open(&cfg);
    coordl_batch held;
    assert_int_equal(coordl_next(L, &held), COORDL_OK);
    uint64_t h = tu_batch_hash(&held);
    assert_int_equal(h, r32.run.hash[0]);
    /* beyond the ring with a batch held: refused, nothing changes */
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_W, 48), COORDL_ERR_INVALID);
    assert_true(strlen(coordl_errmsg(L)) > 0);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_H, 40), COORDL_ERR_INVALID);
    assert_int_equal(tu_batch_hash(&held), h);
    expect_ref_batch(L, &r32, 0, 1, 32, 24);
    /* smaller fits the ring: allowed with a batch held */
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_W, 16), COORDL_OK);
    expect_ref_batch(L, &r16, 0, 2, 16, 24);
    assert_int_equal(tu_batch_hash(&held), h);
    coordl_release(L, &held);
    /* nothing held: the ring grows */
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_W, 48), COORDL_OK);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_H, 40), COORDL_OK);
    for (uint64_t i = 3; i < 9; i++)
        expect_ref_batch(L, &r48, 0, i, 48, 40);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    coordl_close(L);
    free_ref(&r32);
    free_ref(&r48);
    free_ref(&r16);
}

static void test_set_rejects_unknown_params_and_bad_values(void **state)
{
    (void)state;
    coordl_config cfg = base_config(32, 24);
    cfg.max_out_w = cfg.max_out_h = 64;
    cfg.max_batch_size = 16;
    ref_run r;
    make_ref(&cfg, 1, &r);
    coordl *L = tu_open(&cfg);
    static const int64_t bad_values[] = {0, -1, -48, (int64_t)1 << 40,
                                         INT64_MIN};
    static const coordl_param params[] = {COORDL_PARAM_OUT_W, COORDL_PARAM_OUT_H,
                                          COORDL_PARAM_BATCH_SIZE,
                                          COORDL_PARAM_OUT_SIZE};
    for (size_t p = 0; p < 4; p++)
        for (size_t v = 0; v < sizeof bad_values / sizeof *bad_values; v++) {
            coordl_status rc = coordl_set(L, params[p], bad_values[v]);
            if (rc != COORDL_ERR_INVALID)
                fail_msg("coordl_set(%d, %lld) = %d, expected COORDL_ERR_INVALID",
                         (int)params[p], (long long)bad_values[v], (int)rc);
        }
    assert_int_equal(coordl_set(L, (coordl_param)0, 8), COORDL_ERR_INVALID);
    assert_int_equal(coordl_set(L, (coordl_param)5, 8), COORDL_ERR_INVALID);
    assert_int_equal(coordl_set(L, (coordl_param)99, 8), COORDL_ERR_INVALID);
    assert_int_equal(coordl_set(L, (coordl_param)-1, 8), COORDL_ERR_INVALID);
    assert_true(strlen(coordl_errmsg(L)) > 0);
    assert_int_equal(coordl_set(NULL, COORDL_PARAM_OUT_W, 8), COORDL_ERR_INVALID);
    /* nothing changed: the stream is the reference */
    assert_int_equal(coordl_batches_per_epoch(L), 9);
    for (uint64_t i = 0; i < 9; i++)
        expect_ref_batch(L, &r, 0, i, 32, 24);
    coordl_close(L);
    free_ref(&r);
}

static void test_set_out_size_square_at_once(void **state)
{
    (void)state;
    /* OUT_SIZE sets width and height together: the same as OUT_W then
     * OUT_H, position kept, rows equal a loader opened at 40 x 40 */
    coordl_config c32 = base_config(32, 24), c40 = base_config(40, 40);
    ref_run r40;
    make_ref(&c40, 1, &r40);
    coordl_config cfg = c32;
    cfg.max_out_w = cfg.max_out_h = 40;
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        coordl_release(L, &b);
    }
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_SIZE, 40), COORDL_OK);
    for (uint64_t i = 3; i < 9; i++)
        expect_ref_batch(L, &r40, 0, i, 40, 40);
    assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    /* beyond max with a batch held: refused, nothing changes */
    coordl_batch held;
    assert_int_equal(coordl_next(L, &held), COORDL_OK);
    assert_int_equal(held.w, 40);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_SIZE, 41), COORDL_ERR_INVALID);
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_int_equal(b.w, 40);
    assert_int_equal(b.h, 40);
    assert_int_equal(b.index, 1);
    coordl_release(L, &b);
    coordl_release(L, &held);
    coordl_close(L);
    free_ref(&r40);
}

/* ---- BATCH_SIZE -------------------------------------------------------- */

/* Consumes k batches of the open size, sets the batch size to B2, and
 * checks the rest of `epochs` epochs: sizes, indices, one END per epoch,
 * the ids of every epoch concatenated equal the reference's, every row
 * equals the reference's row for its (epoch, id). */
static void check_batch_size_change(coordl_config cfg, uint32_t k, uint32_t B2,
                                    unsigned epochs)
{
    ref_run r;
    coordl_config rcfg = cfg;
    rcfg.drop_last = 0; /* every item of each epoch, for the id order */
    rcfg.max_batch_size = 0;
    make_ref(&rcfg, epochs, &r);
    const uint64_t share = N_ITEMS / (uint64_t)cfg.world;
    coordl *L = tu_open(&cfg);
    uint64_t ids[N_ITEMS];
    uint64_t want_ids[N_ITEMS];
    uint64_t B = cfg.batch_size;
    for (uint64_t e = 0; e < epochs; e++) {
        size_t nref = ref_epoch_ids(&r, e, want_ids);
        assert_int_equal(nref, share);
        size_t n = 0;
        uint64_t index = 0;
        for (;;) {
            if (e == 0 && index == k) {
                coordl_status rc = coordl_set(L, COORDL_PARAM_BATCH_SIZE, B2);
                if (rc != COORDL_OK)
                    fail_msg("coordl_set(BATCH_SIZE, %u) = %d: %s", B2, (int)rc,
                             coordl_errmsg(L));
                B = B2;
                uint64_t bpe = cfg.drop_last ? share / B2 : (share + B2 - 1) / B2;
                assert_int_equal(coordl_batches_per_epoch(L), bpe);
            }
            coordl_batch b;
            coordl_status rc = coordl_next(L, &b);
            if (rc == COORDL_END_OF_EPOCH) {
                assert_int_equal(b.n, 0);
                break;
            }
            if (rc != COORDL_OK)
                fail_msg("epoch %llu batch %llu: status %d: %s",
                         (unsigned long long)e, (unsigned long long)index,
                         (int)rc, coordl_errmsg(L));
            assert_int_equal(b.epoch, e);
            assert_int_equal(b.index, index);
            /* rows left in the epoch: a full batch, or the short last one */
            uint64_t left = share - n;
            uint64_t want_n = left < B ? left : B;
            if (b.n != want_n)
                fail_msg("epoch %llu batch %llu: n = %u, expected %llu",
                         (unsigned long long)e, (unsigned long long)index, b.n,
                         (unsigned long long)want_n);
            if (cfg.drop_last)
                assert_int_equal(b.n, B);
            for (uint32_t i = 0; i < b.n; i++) {
                assert_true(n < N_ITEMS);
                ids[n++] = b.ids[i];
                if (memcmp((const uint8_t *)b.data + (size_t)i * r.rb,
                           ref_row(&r, e, b.ids[i]), r.rb))
                    fail_msg("epoch %llu batch %llu row %u (item %llu): pixels "
                             "differ from the reference", (unsigned long long)e,
                             (unsigned long long)index, i,
                             (unsigned long long)b.ids[i]);
                assert_int_equal(b.labels[i], coordl_item_label(L, b.ids[i]));
            }
            index++;
            coordl_release(L, &b);
        }
        /* without drop_last every item; with it, the full batches' items */
        size_t expect = cfg.drop_last ? n : share;
        assert_int_equal(n, expect);
        if (cfg.drop_last)
            assert_true(share - n < B);
        for (size_t i = 0; i < n; i++)
            if (ids[i] != want_ids[i])
                fail_msg("epoch %llu position %zu: id %llu, expected %llu",
                         (unsigned long long)e, i, (unsigned long long)ids[i],
                         (unsigned long long)want_ids[i]);
    }
    coordl_close(L);
    free_ref(&r);
}

static void test_set_batch_size_mid_epoch(void **state)
{
    (void)state;
    coordl_config cfg = base_config(16, 16);
    cfg.max_batch_size = 8;
    /* 3 x 4, then 5, 5, 5, 5, 4 (indices 3..7); epoch 1: 7 x 5 + 1 */
    check_batch_size_change(cfg, 3, 5, 3);
}

static void test_set_batch_size_mid_epoch_drop_last(void **state)
{
    (void)state;
    coordl_config cfg = base_config(16, 16);
    cfg.max_batch_size = 8;
    cfg.drop_last = 1;
    /* 3 x 4, then 4 x 5 (4 items dropped); epoch 1: 7 x 5 */
    check_batch_size_change(cfg, 3, 5, 2);
}

static void test_set_batch_size_smaller_mid_epoch(void **state)
{
    (void)state;
    coordl_config cfg = base_config(16, 16);
    cfg.batch_size = 7; /* 5 x 7 + 1 */
    check_batch_size_change(cfg, 2, 3, 2); /* 14 items, then 22 = 7 x 3 + 1 */
}

static void test_set_batch_size_with_ranks(void **state)
{
    (void)state;
    coordl_config cfg = base_config(16, 16);
    cfg.world = 2;
    cfg.rank = 1; /* 18 items per epoch */
    cfg.max_batch_size = 8;
    check_batch_size_change(cfg, 2, 3, 2); /* 8 items, then 3, 3, 3, 1 */
}

static void test_set_batch_size_at_epoch_boundary(void **state)
{
    (void)state;
    coordl_config cfg = base_config(16, 16);
    cfg.max_batch_size = 8;
    ref_run r;
    make_ref(&cfg, 3, &r);
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    /* all 9 batches of epoch 0, but not its END yet */
    for (uint64_t i = 0; i < 9; i++)
        expect_ref_batch(L, &r, 0, i, 16, 16);
    assert_int_equal(coordl_set(L, COORDL_PARAM_BATCH_SIZE, 6), COORDL_OK);
    assert_int_equal(coordl_batches_per_epoch(L), 6);
    assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    assert_int_equal(b.epoch, 0);
    uint64_t want[N_ITEMS];
    assert_int_equal(ref_epoch_ids(&r, 1, want), N_ITEMS);
    for (uint64_t i = 0; i < 6; i++) {
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        assert_int_equal(b.epoch, 1);
        assert_int_equal(b.index, i);
        assert_int_equal(b.n, 6);
        for (uint32_t j = 0; j < 6; j++)
            assert_int_equal(b.ids[j], want[i * 6 + j]);
        coordl_release(L, &b);
    }
    assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    assert_int_equal(b.epoch, 1);
    /* right after an END: 36 = 5 x 7 + 1 */
    assert_int_equal(coordl_set(L, COORDL_PARAM_BATCH_SIZE, 7), COORDL_OK);
    assert_int_equal(coordl_batches_per_epoch(L), 6);
    assert_int_equal(ref_epoch_ids(&r, 2, want), N_ITEMS);
    for (uint64_t i = 0; i < 6; i++) {
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        assert_int_equal(b.epoch, 2);
        assert_int_equal(b.index, i);
        assert_int_equal(b.n, i < 5 ? 7 : 1);
        for (uint32_t j = 0; j < b.n; j++)
            assert_int_equal(b.ids[j], want[i * 7 + j]);
        coordl_release(L, &b);
    }
    assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    coordl_close(L);
    free_ref(&r);
}

static void test_set_batch_size_beyond_max_needs_no_held_batch(void **state)
{
    (void)state;
    coordl_config cfg = base_config(16, 16); /* max_batch_size 0: 4 */
    ref_run r;
    make_ref(&cfg, 1, &r);
    uint64_t want[N_ITEMS];
    assert_int_equal(ref_epoch_ids(&r, 0, want), N_ITEMS);
    coordl *L = tu_open(&cfg);
    coordl_batch held, b;
    assert_int_equal(coordl_next(L, &held), COORDL_OK);
    uint64_t h = tu_batch_hash(&held);
    assert_int_equal(coordl_set(L, COORDL_PARAM_BATCH_SIZE, 8), COORDL_ERR_INVALID);
    assert_true(strlen(coordl_errmsg(L)) > 0);
    assert_int_equal(coordl_batches_per_epoch(L), 9);
    /* smaller is fine while holding */
    assert_int_equal(coordl_set(L, COORDL_PARAM_BATCH_SIZE, 2), COORDL_OK);
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.index, 1);
    assert_int_equal(b.ids[0], want[4]);
    assert_int_equal(b.ids[1], want[5]);
    coordl_release(L, &b);
    assert_int_equal(tu_batch_hash(&held), h);
    coordl_release(L, &held);
    /* nothing held: the ring grows; 30 items left = 3 x 8 + 6 */
    assert_int_equal(coordl_set(L, COORDL_PARAM_BATCH_SIZE, 8), COORDL_OK);
    assert_int_equal(coordl_batches_per_epoch(L), 5);
    size_t pos = 6;
    for (uint64_t i = 2; i < 6; i++) {
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        assert_int_equal(b.index, i);
        assert_int_equal(b.n, i < 5 ? 8 : 6);
        for (uint32_t j = 0; j < b.n; j++)
            assert_int_equal(b.ids[j], want[pos++]);
        if (memcmp(b.data, ref_row(&r, 0, b.ids[0]), r.rb))
            fail_msg("batch %llu: row 0 differs", (unsigned long long)i);
        coordl_release(L, &b);
    }
    assert_int_equal(pos, N_ITEMS);
    assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    coordl_close(L);
    free_ref(&r);
}

/* ---- coordl_next_into -------------------------------------------------- */

static void test_next_into_matches_next(void **state)
{
    (void)state;
    coordl_config cfg = base_config(32, 24);
    cfg.batch_size = 5; /* 7 x 5 + 1 */
    cfg.prefetch_batches = 2;
    const size_t rb = row_bytes(32, 24);
    const size_t cap = 5 * rb + 64, lcap = 5 * sizeof(int32_t) + 16;
    uint8_t *data = malloc(cap), *lab = malloc(lcap);
    assert_non_null(data);
    assert_non_null(lab);
    coordl *A = tu_open(&cfg), *B = tu_open(&cfg);
    assert_int_equal(coordl_next_into(NULL, data, cap, lab, lcap), COORDL_ERR_INVALID);
    for (uint64_t e = 0; e < 2; e++) {
        for (uint64_t i = 0;; i++) {
            coordl_batch b;
            coordl_status rb_ = coordl_next(B, &b);
            memset(data, 0xA5, cap);
            memset(lab, 0x5A, lcap);
            if (rb_ == COORDL_END_OF_EPOCH) {
                assert_int_equal(i, 8);
                assert_int_equal(coordl_next_into(A, data, cap, lab, lcap),
                                 COORDL_END_OF_EPOCH);
                break;
            }
            assert_int_equal(rb_, COORDL_OK);
            const size_t need = (size_t)b.n * rb, lneed = b.n * sizeof(int32_t);
            if (i == 2 || i == 7) {
                assert_int_equal(coordl_next_into(A, data, need - 1, lab, lcap),
                                 COORDL_ERR_INVALID);
                assert_int_equal(coordl_next_into(A, data, cap, lab, lneed - 1),
                                 COORDL_ERR_INVALID);
                assert_int_equal(coordl_next_into(A, NULL, 0, lab, lcap),
                                 COORDL_ERR_INVALID);
                for (size_t k = 0; k < cap; k++)
                    if (data[k] != 0xA5)
                        fail_msg("data byte %zu written by a refused call", k);
                for (size_t k = 0; k < lcap; k++)
                    if (lab[k] != 0x5A)
                        fail_msg("label byte %zu written by a refused call", k);
            }
            /* the short last batch fits buffers of exactly its size */
            int exact = b.n < 5;
            coordl_status ra = coordl_next_into(A, data, exact ? need : cap, lab,
                                                exact ? lneed : lcap);
            if (ra != COORDL_OK)
                fail_msg("epoch %llu batch %llu: next_into = %d: %s",
                         (unsigned long long)e, (unsigned long long)i, (int)ra,
                         coordl_errmsg(A));
            if (memcmp(data, b.data, need))
                fail_msg("epoch %llu batch %llu: data differs from coordl_next",
                         (unsigned long long)e, (unsigned long long)i);
            assert_memory_equal(lab, b.labels, lneed);
            for (size_t k = need; k < cap; k++)
                if (data[k] != 0xA5)
                    fail_msg("data byte %zu past the batch written", k);
            for (size_t k = lneed; k < lcap; k++)
                if (lab[k] != 0x5A)
                    fail_msg("label byte %zu past the batch written", k);
            coordl_release(B, &b);
        }
    }
    /* labels may be left out */
    coordl_batch b;
    assert_int_equal(coordl_next(B, &b), COORDL_OK);
    memset(data, 0, cap);
    assert_int_equal(coordl_next_into(A, data, cap, NULL, 0), COORDL_OK);
    assert_memory_equal(data, b.data, b.data_bytes);
    coordl_release(B, &b);
    /* a batch held from coordl_next and next_into mix: the stream goes on */
    coordl_batch held;
    assert_int_equal(coordl_next(A, &held), COORDL_OK);
    assert_int_equal(coordl_next(B, &b), COORDL_OK);
    assert_int_equal(tu_batch_hash(&held), tu_batch_hash(&b));
    coordl_release(B, &b);
    assert_int_equal(coordl_next(B, &b), COORDL_OK);
    assert_int_equal(coordl_next_into(A, data, cap, lab, lcap), COORDL_OK);
    assert_memory_equal(data, b.data, b.data_bytes);
    coordl_release(B, &b);
    coordl_release(A, &held);
    coordl_close(A);
    coordl_close(B);
    free(data);
    free(lab);
}

static void test_next_into_after_set_uses_new_size(void **state)
{
    (void)state;
    coordl_config c48 = base_config(48, 40);
    ref_run r48;
    make_ref(&c48, 1, &r48);
    coordl_config cfg = base_config(32, 24);
    cfg.max_out_w = cfg.max_out_h = 48;
    coordl *L = tu_open(&cfg);
    const size_t rb32 = row_bytes(32, 24), rb48 = row_bytes(48, 40);
    uint8_t *data = malloc(4 * rb48);
    assert_non_null(data);
    assert_int_equal(coordl_next_into(L, data, 4 * rb32, NULL, 0), COORDL_OK);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_W, 48), COORDL_OK);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_H, 40), COORDL_OK);
    /* a buffer sized for the old rows is now too small */
    assert_int_equal(coordl_next_into(L, data, 4 * rb32, NULL, 0), COORDL_ERR_INVALID);
    assert_int_equal(coordl_next_into(L, data, 4 * rb48, NULL, 0), COORDL_OK);
    /* batch 1 of the 48 x 40 reference */
    size_t row = 4;
    assert_int_equal(r48.run.index[1], 1);
    for (uint32_t i = 0; i < 4; i++)
        if (memcmp(data + i * rb48, ref_row(&r48, 0, r48.run.ids[row + i]), rb48))
            fail_msg("row %u differs from a loader opened at 48x40", i);
    free(data);
    coordl_close(L);
    free_ref(&r48);
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_out_size_keeps_position_and_matches_direct_open),
        cmocka_unit_test(test_set_out_size_keeps_what_readahead_read),
        cmocka_unit_test(test_set_out_size_beyond_max_needs_no_held_batch),
        cmocka_unit_test(test_set_rejects_unknown_params_and_bad_values),
        cmocka_unit_test(test_set_out_size_square_at_once),
        cmocka_unit_test(test_set_batch_size_mid_epoch),
        cmocka_unit_test(test_set_batch_size_mid_epoch_drop_last),
        cmocka_unit_test(test_set_batch_size_smaller_mid_epoch),
        cmocka_unit_test(test_set_batch_size_with_ranks),
        cmocka_unit_test(test_set_batch_size_at_epoch_boundary),
        cmocka_unit_test(test_set_batch_size_beyond_max_needs_no_held_batch),
        cmocka_unit_test(test_next_into_matches_next),
        cmocka_unit_test(test_next_into_after_set_uses_new_size),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
