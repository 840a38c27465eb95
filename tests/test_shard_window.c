/*
 * test_shard_window.c - the shard-window order (shuffle =
 * COORDL_SHUFFLE_SHARD_WINDOW, shuffle_window_shards = W): every item once
 * per epoch; the items of a window come from at most W shards and are
 * contiguous in the epoch; deterministic by seed and different by seed and
 * epoch; coordl_seek resumes the same batches; drop_last; coordl_set
 * mid-epoch, read-ahead, the cache and the thread count change nothing;
 * rank r of P takes the global positions r, r + P, ... (the global batches,
 * ids and pixels, are the same for 1, 2 and 4 ranks); class-folder tar sets
 * (ids not grouped by shard) and token shards; refusals (no shards, llm.c's
 * order, unknown shuffle values); the config and stats report it; a
 * coordinated group's sibling gets the same order and one with another
 * window size is refused naming the field.
 *
 * Every test runs twice: with the shards indexed at open (index_path set:
 * a full scan, saved, then loaded; dense ids) and indexed as the window
 * reaches them (no index_path: the .cls-labelled set is indexed lazily,
 * ids (shard << 32) | ordinal, mapped back to dense ids here). The two
 * must give the same batches, row for row; a test that needs the cache or
 * a group runs that part fully indexed, and still matches the lazy run.
 *
 * Datasets (made once):
 *   tar/  eight .tar shards of 13, 5, 21, 0, 1, 9, 17, 11 samples (77, an
 *         empty shard among them); every sample a 16 x 16 JPEG of its own
 *         texture and a .cls naming its shard, so a row's label is its shard
 *   cf/   three .tar shards of class-folder members (no .cls): ids are in
 *         class order, so a shard's ids are not consecutive
 *   tok/  four llm.c token shards of 10, 2, 7 and 13 windows (seq_len 4)
 *   list.txt  two JPEG files: a source without shards
 */
#include "test_util.h"
#include "tu_tar.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NSHARDS 8
static const int k_sizes[NSHARDS] = {13, 5, 21, 0, 1, 9, 17, 11};
#define NITEMS 77
#define NONEMPTY 7

static char *g_dir, *g_tar, *g_cf, *g_tok, *g_list;
static int g_lazy;               /* this pass indexes the shards lazily    */
static char g_index_path[4096];  /* the other pass's saved index          */

/* A batch id as a dense id of the tar set: a lazy id (shard << 32 |
 * ordinal) becomes the shard's first dense id + ordinal (the .cls set's
 * dense ids run shard by shard). Other ids are dense already. */
static uint64_t dense_id(uint64_t id)
{
    if (id >> 32 == 0) return id;
    uint64_t first = 0;
    for (uint64_t s = 0; s < (id >> 32); s++) first += (uint64_t)k_sizes[s];
    return first + (id & 0xFFFFFFFFu);
}

/* tu_batch_hash with dense ids: the same for both passes. */
static uint64_t batch_hash(const coordl_batch *b)
{
    uint64_t h = TU_FNV_OFFSET;
    h = tu_fnv1a(h, &b->n, sizeof b->n);
    h = tu_fnv1a(h, &b->epoch, sizeof b->epoch);
    h = tu_fnv1a(h, &b->index, sizeof b->index);
    for (uint32_t i = 0; i < b->n; i++) {
        const uint64_t d = dense_id(b->ids[i]);
        h = tu_fnv1a(h, &d, sizeof d);
    }
    if (b->n) {
        h = tu_fnv1a(h, b->labels, (size_t)b->n * sizeof *b->labels);
        h = tu_fnv1a(h, b->data, b->data_bytes);
    }
    return h;
}

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    g_tar = tu_join(g_dir, "tar");
    g_cf = tu_join(g_dir, "cf");
    g_tok = tu_join(g_dir, "tok/shard_*.bin");
    char *tokdir = tu_join(g_dir, "tok");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' '%s' '%s'", g_tar, g_cf, tokdir);
    assert_int_equal(system(cmd), 0);
    int item = 0;
    for (int s = 0; s < NSHARDS; s++) {
        char *p = tu_join(g_tar, "shard-%02d.tar", s);
        tu_tar t;
        tu_tar_open(&t, p);
        for (int i = 0; i < k_sizes[s]; i++, item++) {
            uint8_t base[3];
            tu_class_colour(s, base);
            uint8_t *pix = tu_textured_rgb(16, 16, base, (uint64_t)item + 1);
            size_t n;
            uint8_t *jpg = tu_encode_jpeg(pix, 16, 16, 3, NULL, &n);
            char name[64], cls[16];
            snprintf(name, sizeof name, "s%02d_%04d.cls", s, i);
            const int cn = snprintf(cls, sizeof cls, "%d", s);
            tu_tar_file(&t, name, cls, (size_t)cn);
            snprintf(name, sizeof name, "s%02d_%04d.jpg", s, i);
            tu_tar_file(&t, name, jpg, n);
            free(jpg);
            free(pix);
        }
        tu_tar_close(&t, 1);
        free(p);
    }
    /* class folders: shard p holds classes 0..2 with 2 + (p + c) % 3 files each */
    for (int p = 0; p < 3; p++) {
        char *path = tu_join(g_cf, "part-%d.tar", p);
        tu_tar t;
        tu_tar_open(&t, path);
        for (int c = 0; c < 3; c++)
            for (int i = 0; i < 2 + (p + c) % 3; i++) {
                uint8_t base[3];
                tu_class_colour(c, base);
                uint8_t *pix = tu_textured_rgb(16, 16, base, (uint64_t)(p * 100 + c * 10 + i));
                size_t n;
                uint8_t *jpg = tu_encode_jpeg(pix, 16, 16, 3, NULL, &n);
                char name[64];
                snprintf(name, sizeof name, "c%d/p%d_%02d.jpg", c, p, i);
                tu_tar_file(&t, name, jpg, n);
                free(jpg);
                free(pix);
            }
        tu_tar_close(&t, 1);
        free(path);
    }
    /* token shards: floor((n - 1) / 4) windows each */
    static const size_t toks[4] = {41, 9, 29, 53};
    for (int s = 0; s < 4; s++) {
        uint32_t tk[64];
        for (size_t i = 0; i < toks[s]; i++) tk[i] = (uint32_t)(s * 1000 + (int)i);
        char *p = tu_join(tokdir, "shard_%d.bin", s);
        tu_write_shard(p, 1, tk, toks[s]);
        free(p);
    }
    free(tokdir);
    /* a list of two files */
    for (int i = 0; i < 2; i++) {
        uint8_t col[3] = {(uint8_t)(40 + i * 80), 90, 150};
        uint8_t *pix = tu_solid(8, 8, 3, col);
        char *p = tu_join(g_dir, "f%d.jpg", i);
        tu_write_jpeg(p, pix, 8, 8, 3, NULL);
        free(p);
        free(pix);
    }
    g_list = tu_join(g_dir, "list.txt");
    snprintf(g_index_path, sizeof g_index_path, "%s/tar.index", g_dir);
    const char *text = "f0.jpg\t0\nf1.jpg\t1\n";
    tu_write_file(g_list, text, strlen(text));
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_tar);
    free(g_cf);
    free(g_tok);
    free(g_list);
    return 0;
}

/* The tar set in shard-window order: EVAL 4 x 4 U8 rows (cheap, exact). */
static coordl_config window_config(uint32_t W, uint32_t batch)
{
    coordl_config cfg = tu_config(g_tar);
    cfg.pipeline = COORDL_PIPE_EVAL;
    cfg.out_w = cfg.out_h = 4;
    cfg.batch_size = batch;
    cfg.shuffle = COORDL_SHUFFLE_SHARD_WINDOW;
    cfg.shuffle_window_shards = W;
    cfg.seed = 7;
    if (!g_lazy) cfg.index_path = g_index_path;
    return cfg;
}

/* What a run saw, row by row: id, label, epoch and a hash of the row's
 * bytes; and each batch's hash. */
typedef struct {
    size_t nrows, nbatches;
    uint64_t ids[NITEMS * 6], rowhash[NITEMS * 6], epoch[NITEMS * 6];
    int32_t label[NITEMS * 6];
    uint64_t bhash[NITEMS * 6];
    uint64_t ends;
} rows_t;

static void take_batch(rows_t *r, const coordl_batch *b)
{
    const size_t row = b->data_bytes / (b->n ? b->n : 1);
    assert_true(r->nbatches < NITEMS * 6);
    r->bhash[r->nbatches++] = batch_hash(b);
    for (uint32_t i = 0; i < b->n; i++) {
        assert_true(r->nrows < NITEMS * 6);
        r->ids[r->nrows] = dense_id(b->ids[i]);
        r->label[r->nrows] = b->labels[i];
        r->epoch[r->nrows] = b->epoch;
        r->rowhash[r->nrows] = tu_fnv1a(TU_FNV_OFFSET, (const uint8_t *)b->data + i * row, row);
        r->nrows++;
    }
}

/* Reads `epochs` whole epochs of L into r (appending). */
static void read_epochs(coordl *L, unsigned epochs, rows_t *r)
{
    coordl_batch b;
    for (unsigned e = 0; e < epochs;) {
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) {
            r->ends++;
            e++;
            continue;
        }
        if (rc != COORDL_OK) fail_msg("coordl_next: %s: %s", coordl_strerror(rc), coordl_errmsg(L));
        take_batch(r, &b);
        coordl_release(L, &b);
    }
}

static rows_t *run_cfg(const coordl_config *cfg, unsigned epochs)
{
    rows_t *r = calloc(1, sizeof *r);
    assert_non_null(r);
    coordl *L = tu_open(cfg);
    read_epochs(L, epochs, r);
    coordl_close(L);
    return r;
}

/* Rows of epoch e: [*from, *to). */
static void epoch_rows(const rows_t *r, uint64_t e, size_t *from, size_t *to)
{
    size_t i = 0;
    while (i < r->nrows && r->epoch[i] != e) i++;
    *from = i;
    while (i < r->nrows && r->epoch[i] == e) i++;
    *to = i;
}

static void assert_each_item_once(const uint64_t *ids, size_t n, uint64_t total)
{
    assert_int_equal(n, total);
    uint64_t *s = malloc(n * sizeof *s);
    assert_non_null(s);
    memcpy(s, ids, n * sizeof *s);
    qsort(s, n, sizeof *s, tu_cmp_u64);
    for (size_t i = 0; i < n; i++) assert_int_equal(s[i], i);
    free(s);
}

/* ---- every item once ------------------------------------------------- */

/* Window 1, 2, 3, the shard count and more than it; batch 4 (77 = 19 x 4 +
 * 1); three epochs: each epoch holds every id exactly once, in 20 batches. */
static void test_every_item_once_per_epoch(void **state)
{
    (void)state;
    static const uint32_t widths[] = {1, 2, 3, 8, 100};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        coordl_config cfg = window_config(widths[w], 4);
        rows_t *r = run_cfg(&cfg, 3);
        assert_int_equal(r->ends, 3);
        assert_int_equal(r->nbatches, 3 * 20);
        for (uint64_t e = 0; e < 3; e++) {
            size_t a, b;
            epoch_rows(r, e, &a, &b);
            assert_each_item_once(r->ids + a, b - a, NITEMS);
        }
        /* a row's label is its shard: the ids are the tar set's (shard order) */
        for (size_t i = 0; i < r->nrows; i++) {
            int s = 0;
            uint64_t first = 0;
            while (r->ids[i] >= first + (uint64_t)k_sizes[s]) first += (uint64_t)k_sizes[s++];
            assert_int_equal(r->label[i], s);
        }
        free(r);
    }
}

/* ---- locality -------------------------------------------------------- */

/* Groups the epoch's positions [a, b) into runs of overlapping shard spans
 * (a shard's span: its first to its last position); returns the number of
 * runs and the most shards in one. */
static size_t shard_runs(const int32_t *label, size_t n, size_t *most)
{
    int64_t first[NSHARDS], last[NSHARDS];
    for (int s = 0; s < NSHARDS; s++) first[s] = last[s] = -1;
    for (size_t i = 0; i < n; i++) {
        const int s = label[i];
        if (first[s] < 0) first[s] = (int64_t)i;
        last[s] = (int64_t)i;
    }
    size_t runs = 0;
    *most = 0;
    int64_t end = -1;
    size_t in_run = 0;
    for (size_t i = 0; i < n; i++) {
        if ((int64_t)i > end) { /* a new run starts here */
            runs++;
            in_run = 0;
        }
        if (first[label[i]] == (int64_t)i) {
            in_run++;
            if (in_run > *most) *most = in_run;
            if (last[label[i]] > end) end = last[label[i]];
        }
    }
    return runs;
}

/* Mean distinct shards per batch of g consecutive positions. */
static double shards_per_batch(const int32_t *label, size_t n, size_t g, size_t *most)
{
    double sum = 0;
    size_t batches = 0;
    *most = 0;
    for (size_t a = 0; a < n; a += g) {
        int seen[NSHARDS] = {0};
        size_t k = 0;
        for (size_t i = a; i < n && i < a + g; i++)
            if (!seen[label[i]]++) k++;
        sum += (double)k;
        if (k > *most) *most = k;
        batches++;
    }
    return sum / (double)batches;
}

/* W = 1: each shard's items are one contiguous run (7 runs, the empty shard
 * none). W = 2: runs of overlapping shard spans hold at most 2 shards, and
 * there are at least ceil(7 / 2) of them; a batch of 8 rows reads at most
 * 2W = 4 shards, fewer on average than the full shuffle's. */
static void test_window_items_are_contiguous_and_from_at_most_W_shards(void **state)
{
    (void)state;
    coordl_config c1 = window_config(1, 1);
    rows_t *r1 = run_cfg(&c1, 2);
    for (uint64_t e = 0; e < 2; e++) {
        size_t a, b, most;
        epoch_rows(r1, e, &a, &b);
        size_t changes = 1;
        for (size_t i = a + 1; i < b; i++) changes += r1->label[i] != r1->label[i - 1];
        assert_int_equal(changes, NONEMPTY);
        assert_int_equal(shard_runs(r1->label + a, b - a, &most), NONEMPTY);
        assert_int_equal(most, 1);
    }
    free(r1);

    coordl_config c2 = window_config(2, 1);
    rows_t *r2 = run_cfg(&c2, 3);
    coordl_config cf = c2;
    cf.shuffle = COORDL_SHUFFLE_FULL;
    rows_t *rf = run_cfg(&cf, 3);
    double win_mean = 0, full_mean = 0;
    for (uint64_t e = 0; e < 3; e++) {
        size_t a, b, most, wmost, fmost;
        epoch_rows(r2, e, &a, &b);
        const size_t runs = shard_runs(r2->label + a, b - a, &most);
        assert_true(most <= 2);
        assert_true(runs >= (NONEMPTY + 1) / 2);
        win_mean += shards_per_batch(r2->label + a, b - a, 8, &wmost) / 3;
        assert_true(wmost <= 4);
        epoch_rows(rf, e, &a, &b);
        full_mean += shards_per_batch(rf->label + a, b - a, 8, &fmost) / 3;
    }
    printf("    shards per batch of 8 (8 shards, 77 items): window 2 mean %.2f, full shuffle mean %.2f\n", win_mean,
           full_mean);
    assert_true(win_mean < full_mean);
    free(r2);
    free(rf);
}

/* ---- determinism ----------------------------------------------------- */

static void test_same_seed_same_batches_other_seed_or_epoch_differs(void **state)
{
    (void)state;
    coordl_config cfg = window_config(3, 4);
    rows_t *a = run_cfg(&cfg, 2), *b = run_cfg(&cfg, 2);
    assert_int_equal(a->nbatches, b->nbatches);
    assert_memory_equal(a->bhash, b->bhash, a->nbatches * sizeof a->bhash[0]);
    assert_memory_equal(a->ids, b->ids, a->nrows * sizeof a->ids[0]);
    cfg.seed = 8;
    rows_t *c = run_cfg(&cfg, 1);
    assert_true(memcmp(a->ids, c->ids, NITEMS * sizeof a->ids[0]) != 0);
    /* epoch 1 is another order than epoch 0 */
    assert_true(memcmp(a->ids, a->ids + NITEMS, NITEMS * sizeof a->ids[0]) != 0);
    /* threads, read-ahead and the cache change nothing (second epoch from the cache) */
    cfg.seed = 7;
    cfg.threads = 1;
    cfg.readahead_items = 0;
    cfg.cache_bytes = 64 << 20;
    rows_t *d = run_cfg(&cfg, 2);
    assert_int_equal(d->nbatches, a->nbatches);
    assert_memory_equal(a->bhash, d->bhash, a->nbatches * sizeof a->bhash[0]);
    free(a);
    free(b);
    free(c);
    free(d);
}

/* The train pipeline's random crops and flips are drawn per sample, not
 * per id: a lazily indexed run and a fully indexed one (index_path) give
 * the same pixels, row by row, two epochs (with the augmentation keyed by
 * the id, a lazy id (shard << 32 | ordinal) drew other crops than the
 * dense id of the same sample: MPI ranks, which share a full index, then
 * disagreed with a 1-rank run). */
static void test_train_augmentation_is_per_sample_lazy_or_not(void **state)
{
    (void)state;
    coordl_config cfg = window_config(3, 4);
    cfg.pipeline = COORDL_PIPE_TRAIN;
    cfg.out_w = cfg.out_h = 8;
    cfg.index_path = NULL; /* lazy */
    rows_t *lazy = run_cfg(&cfg, 2);
    char path[4200];
    snprintf(path, sizeof path, "%s/train.index", g_dir);
    cfg.index_path = path; /* scanned and saved at open: dense ids */
    rows_t *full = run_cfg(&cfg, 2);
    assert_int_equal(lazy->nrows, full->nrows);
    assert_memory_equal(lazy->ids, full->ids, lazy->nrows * sizeof lazy->ids[0]);
    assert_memory_equal(lazy->rowhash, full->rowhash, lazy->nrows * sizeof lazy->rowhash[0]);
    /* and the crops are random: the two epochs' rows of one item differ */
    size_t differ = 0;
    for (size_t i = 0; i < NITEMS; i++)
        for (size_t j = NITEMS; j < 2 * NITEMS; j++)
            if (lazy->ids[j] == lazy->ids[i]) differ += lazy->rowhash[j] != lazy->rowhash[i];
    assert_true(differ > NITEMS / 2);
    free(lazy);
    free(full);
}

/* ---- seek, drop_last, coordl_set ------------------------------------- */

/* coordl_seek(e, k) then reading on gives the batches a run from the start
 * gave from (e, k), to the end of the epoch and into the next one. */
static void test_seek_resumes_the_same_batches(void **state)
{
    (void)state;
    coordl_config cfg = window_config(2, 4);
    rows_t *ref = run_cfg(&cfg, 3);
    static const uint64_t at[][2] = {{0, 0}, {0, 7}, {1, 3}, {1, 19}, {2, 10}};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        coordl *L = tu_open(&cfg);
        assert_int_equal(coordl_seek(L, at[k][0], at[k][1]), COORDL_OK);
        rows_t *r = calloc(1, sizeof *r);
        assert_non_null(r);
        read_epochs(L, 1, r);
        coordl_close(L);
        const size_t from = (size_t)(at[k][0] * 20 + at[k][1]);
        assert_int_equal(r->nbatches, 20 - at[k][1]);
        assert_memory_equal(r->bhash, ref->bhash + from, r->nbatches * sizeof r->bhash[0]);
        free(r);
    }
    free(ref);
}

/* drop_last with batch 10: 7 full batches, 70 distinct ids: the first 70 of
 * the order without it. */
static void test_drop_last_cuts_the_same_order(void **state)
{
    (void)state;
    coordl_config cfg = window_config(2, 10);
    rows_t *all = run_cfg(&cfg, 2);
    cfg.drop_last = 1;
    coordl *L = tu_open(&cfg);
    /* a lazy index knows the count once every shard is reached: 0 before
     * (the workers, started by open, may have reached them all already in
     * a set this small) */
    const uint64_t bpe0 = coordl_batches_per_epoch(L), n0 = coordl_num_items(L);
    if (g_lazy) {
        assert_true(bpe0 == 0 || bpe0 == 7);
        assert_true(n0 == 0 || n0 == NITEMS);
    } else {
        assert_int_equal(bpe0, 7);
        assert_int_equal(n0, NITEMS);
    }
    rows_t *r = calloc(1, sizeof *r);
    assert_non_null(r);
    read_epochs(L, 2, r);
    assert_int_equal(coordl_batches_per_epoch(L), 7);
    assert_int_equal(coordl_num_items(L), NITEMS);
    coordl_close(L);
    assert_int_equal(r->nrows, 140);
    for (uint64_t e = 0; e < 2; e++) {
        size_t a, b, ra, rb;
        epoch_rows(r, e, &ra, &rb);
        epoch_rows(all, e, &a, &b);
        assert_int_equal(rb - ra, 70);
        assert_memory_equal(r->ids + ra, all->ids + a, 70 * sizeof r->ids[0]);
    }
    free(all);
    free(r);
}

/* The batch size changed mid-epoch: the rows keep the order (positions map
 * to items whatever the batch size). */
static void test_set_batch_size_mid_epoch_keeps_the_order(void **state)
{
    (void)state;
    coordl_config cfg = window_config(2, 4);
    cfg.max_batch_size = 8;
    rows_t *ref = run_cfg(&cfg, 2);
    coordl *L = tu_open(&cfg);
    rows_t *r = calloc(1, sizeof *r);
    assert_non_null(r);
    coordl_batch b;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        take_batch(r, &b);
        coordl_release(L, &b);
    }
    assert_int_equal(coordl_set(L, COORDL_PARAM_BATCH_SIZE, 7), COORDL_OK);
    read_epochs(L, 2, r);
    coordl_close(L);
    assert_int_equal(r->nrows, ref->nrows);
    assert_memory_equal(r->ids, ref->ids, r->nrows * sizeof r->ids[0]);
    assert_memory_equal(r->rowhash, ref->rowhash, r->nrows * sizeof r->rowhash[0]);
    free(ref);
    free(r);
}

/* ---- ranks ----------------------------------------------------------- */

/* Rank r of P at batch G / P: its row j of batch k is global position
 * (k B + j) P + r of the 1-rank run at batch G, id and pixels; so the
 * ranks' batch k together are the 1-rank batch k. Both orders. */
static void test_ranks_take_the_global_positions(void **state)
{
    (void)state;
    static const int shuffles[2] = {COORDL_SHUFFLE_FULL, COORDL_SHUFFLE_SHARD_WINDOW};
    for (int o = 0; o < 2; o++) {
        coordl_config one = window_config(2, 8);
        one.shuffle = shuffles[o];
        rows_t *g = run_cfg(&one, 2);
        for (int P = 2; P <= 4; P *= 2) {
            const uint64_t share = NITEMS / (uint64_t)P;
            for (int rk = 0; rk < P; rk++) {
                coordl_config c = one;
                c.batch_size = (uint32_t)(8 / P);
                c.rank = rk;
                c.world = P;
                rows_t *r = run_cfg(&c, 2);
                assert_int_equal(r->nrows, 2 * share);
                for (uint64_t e = 0; e < 2; e++) {
                    size_t a, b, ga, gb;
                    epoch_rows(r, e, &a, &b);
                    epoch_rows(g, e, &ga, &gb);
                    for (size_t i = a; i < b; i++) {
                        const size_t pos = ga + (i - a) * (size_t)P + (size_t)rk;
                        assert_int_equal(r->ids[i], g->ids[pos]);
                        assert_int_equal(r->rowhash[i], g->rowhash[pos]);
                    }
                }
                free(r);
            }
        }
        free(g);
    }
}

/* ---- other sharded sources ------------------------------------------- */

static int cf_shard_of(const coordl *L, uint64_t id)
{
    const char *p = coordl_item_path(L, id);
    const char *t = p ? strstr(p, "part-") : NULL;
    assert_non_null(t);
    return t[5] - '0';
}

/* A class-folder tar set orders its ids by class: the order groups them by
 * shard itself (4 bytes per item more, in sampler_bytes). W = 1: three
 * runs, one per shard; every item once. */
static void test_class_folder_tar_set_is_grouped_by_shard(void **state)
{
    (void)state;
    coordl_config cfg = window_config(1, 1);
    cfg.source = g_cf;
    coordl *L = tu_open(&cfg);
    const uint64_t n = coordl_num_items(L);
    assert_int_equal(n, 27);
    /* the ids really are not grouped by shard: class order */
    int changes = 0;
    for (uint64_t i = 1; i < n; i++) changes += cf_shard_of(L, i) != cf_shard_of(L, i - 1);
    assert_true(changes > 2);
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_true(st.sampler_bytes >= n * 4);
    rows_t *r = calloc(1, sizeof *r);
    assert_non_null(r);
    read_epochs(L, 2, r);
    for (uint64_t e = 0; e < 2; e++) {
        size_t a, b;
        epoch_rows(r, e, &a, &b);
        assert_each_item_once(r->ids + a, b - a, n);
        int runs = 1;
        for (size_t i = a + 1; i < b; i++) runs += cf_shard_of(L, r->ids[i]) != cf_shard_of(L, r->ids[i - 1]);
        assert_int_equal(runs, 3);
    }
    coordl_close(L);
    free(r);
}

/* Token shards (COORDL_TOKENS_WINDOWS): the windows are the items; W = 1
 * reads one shard after another (labels are shard indices); W = 2 covers
 * every window once. */
static void test_token_shards_in_windows(void **state)
{
    (void)state;
    for (uint32_t W = 1; W <= 2; W++) {
        coordl_config cfg = tu_config(g_tok);
        cfg.pipeline = COORDL_PIPE_TOKENS;
        cfg.seq_len = 4;
        cfg.threads = 0;
        cfg.batch_size = 3;
        cfg.shuffle = COORDL_SHUFFLE_SHARD_WINDOW;
        cfg.shuffle_window_shards = W;
        cfg.seed = 5;
        coordl *L = tu_open(&cfg);
        assert_int_equal(coordl_num_items(L), 32);
        rows_t *r = calloc(1, sizeof *r);
        assert_non_null(r);
        read_epochs(L, 2, r);
        coordl_close(L);
        for (uint64_t e = 0; e < 2; e++) {
            size_t a, b;
            epoch_rows(r, e, &a, &b);
            assert_each_item_once(r->ids + a, b - a, 32);
            int runs = 1;
            for (size_t i = a + 1; i < b; i++) runs += r->label[i] != r->label[i - 1];
            if (W == 1) assert_int_equal(runs, 4);
        }
        free(r);
    }
}

/* ---- refusals and reports -------------------------------------------- */

static void expect_invalid(const coordl_config *cfg, const char *needle)
{
    coordl *L = NULL;
    coordl_status rc = coordl_open(cfg, &L);
    if (rc != COORDL_ERR_INVALID)
        fail_msg("coordl_open = %d (%s), expected COORDL_ERR_INVALID; message: %s", rc, coordl_strerror(rc),
                 coordl_errmsg(NULL));
    assert_null(L);
    if (!strstr(coordl_errmsg(NULL), needle))
        fail_msg("message \"%s\" does not name \"%s\"", coordl_errmsg(NULL), needle);
}

static void test_refusals_and_what_is_reported(void **state)
{
    (void)state;
    /* a list of files has no shards */
    coordl_config cfg = window_config(2, 1);
    cfg.source = g_list;
    expect_invalid(&cfg, "shuffle: COORDL_SHUFFLE_SHARD_WINDOW");
    /* unknown order */
    cfg = window_config(2, 1);
    cfg.shuffle = 3;
    expect_invalid(&cfg, "shuffle: 3");
    cfg.shuffle = -1;
    expect_invalid(&cfg, "shuffle: -1");
    /* llm.c's order is already a shard order */
    cfg = tu_config(g_tok);
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.seq_len = 4;
    cfg.token_order = COORDL_TOKENS_LLMC;
    cfg.shuffle = COORDL_SHUFFLE_SHARD_WINDOW;
    expect_invalid(&cfg, "COORDL_TOKENS_LLMC");

    /* the config says the window in force (0 = 8); stats the tables' bytes */
    cfg = window_config(0, 4);
    coordl *L = tu_open(&cfg);
    coordl_config got;
    assert_int_equal(coordl_get_config(L, &got), COORDL_OK);
    assert_int_equal(got.shuffle, COORDL_SHUFFLE_SHARD_WINDOW);
    assert_int_equal(got.shuffle_window_shards, 8);
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_true(st.sampler_bytes > 0);
    assert_true(st.sampler_bytes < 2048); /* O(shards): 8 shards, no per-item table */
    char json[16384];
    assert_true(coordl_stats_json(L, json, sizeof json) < sizeof json);
    assert_non_null(strstr(json, "\"shuffle\":2,\"shuffle_window_shards\":8,\"sampler_bytes\":"));
    coordl_close(L);
    cfg.shuffle = COORDL_SHUFFLE_FULL;
    L = tu_open(&cfg);
    coordl_get_stats(L, &st);
    assert_int_equal(st.sampler_bytes, 0);
    coordl_close(L);
}

/* ---- a coordinated group --------------------------------------------- */

static int g_joined_fd = -1;
static void joined_hook(void *user, const char *point)
{
    (void)user;
    if (strcmp(point, "joined") == 0 && g_joined_fd >= 0) {
        (void)!write(g_joined_fd, "J", 1);
        g_joined_fd = -1;
    }
}

/* A sibling (a child process) and this process in a group of 2, window 2:
 * both get the private loader's batches; a third member with window 3 is
 * refused naming shuffle_window_shards while the first one waits. */
static void test_group_sibling_gets_the_same_order(void **state)
{
    (void)state;
    char group[64];
    snprintf(group, sizeof group, "tswin-%d", (int)getpid());
    coordl_config cfg = window_config(2, 4);
    rows_t *ref = run_cfg(&cfg, 2);
    cfg.group = group;
    cfg.group_size = 2;
    cfg.group_timeout_ms = 20000;
    char *out = tu_join(g_dir, "child.bin");
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(60);
        close(fds[0]);
        g_joined_fd = fds[1];
        coordl_config c = cfg;
        c.test_hook = joined_hook;
        coordl *L = NULL;
        if (coordl_open(&c, &L) != COORDL_OK) _exit(2);
        static rows_t r;
        coordl_batch b;
        for (unsigned e = 0; e < 2;) {
            coordl_status rc = coordl_next(L, &b);
            if (rc == COORDL_END_OF_EPOCH) { e++; continue; }
            if (rc != COORDL_OK) _exit(3);
            r.bhash[r.nbatches++] = batch_hash(&b);
            coordl_release(L, &b);
        }
        coordl_close(L);
        FILE *f = fopen(out, "wb");
        if (!f || fwrite(r.bhash, sizeof r.bhash[0], r.nbatches, f) != r.nbatches) _exit(4);
        fclose(f);
        _exit(0);
    }
    close(fds[1]);
    char byte = 0;
    assert_int_equal(read(fds[0], &byte, 1), 1);
    close(fds[0]);
    coordl_config other = cfg;
    other.shuffle_window_shards = 3;
    coordl *L = NULL;
    assert_int_equal(coordl_open(&other, &L), COORDL_ERR_GROUP);
    if (!strstr(coordl_errmsg(NULL), "shuffle_window_shards"))
        fail_msg("message \"%s\" does not name shuffle_window_shards", coordl_errmsg(NULL));
    L = tu_open(&cfg);
    rows_t *r = calloc(1, sizeof *r);
    assert_non_null(r);
    read_epochs(L, 2, r);
    coordl_close(L);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(r->nbatches, ref->nbatches);
    assert_memory_equal(r->bhash, ref->bhash, r->nbatches * sizeof r->bhash[0]);
    size_t n = 0;
    uint64_t *child = (uint64_t *)tu_read_file(out, &n);
    assert_int_equal(n, ref->nbatches * sizeof ref->bhash[0]);
    assert_memory_equal(child, ref->bhash, n);
    free(child);
    free(out);
    free(r);
    free(ref);
}

int main(void)
{
    tu_main_init(300);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_item_once_per_epoch),
        cmocka_unit_test(test_window_items_are_contiguous_and_from_at_most_W_shards),
        cmocka_unit_test(test_same_seed_same_batches_other_seed_or_epoch_differs),
        cmocka_unit_test(test_train_augmentation_is_per_sample_lazy_or_not),
        cmocka_unit_test(test_seek_resumes_the_same_batches),
        cmocka_unit_test(test_drop_last_cuts_the_same_order),
        cmocka_unit_test(test_set_batch_size_mid_epoch_keeps_the_order),
        cmocka_unit_test(test_ranks_take_the_global_positions),
        cmocka_unit_test(test_class_folder_tar_set_is_grouped_by_shard),
        cmocka_unit_test(test_token_shards_in_windows),
        cmocka_unit_test(test_refusals_and_what_is_reported),
        cmocka_unit_test(test_group_sibling_gets_the_same_order),
    };
    int failed = cmocka_run_group_tests_name("indexed at open", tests, group_setup, NULL);
    snprintf(g_index_path, sizeof g_index_path, "%s", "");
    g_lazy = 1;
    failed += cmocka_run_group_tests_name("indexed as the window reaches the shards", tests, NULL, group_teardown);
    return failed;
}
