/*
 * test_tokens.c - COORDL_PIPE_TOKENS: llm.c token shards cut into windows
 * of seq_len + 1 tokens.
 *
 * A shard with T tokens gives floor((T - 1) / seq_len) windows; window w
 * covers tokens [w*seq_len, w*seq_len + seq_len]. Item ids are global, the
 * first shard's windows first. batch.data holds tokens [0, seq_len) of each
 * window, batch.targets tokens [1, seq_len], both int32; labels are shard
 * indices. Every token written is a known function of (shard, position), so
 * each row is checked token by token.
 *
 * Datasets (made once for the group, seq_len 16):
 *   u16/   shard_000.bin .. shard_003.bin, version 1 (uint16), 81, 17, 64
 *          and 100 tokens: 5 + 1 + 3 + 6 = 15 windows (17 = exactly one
 *          window, 64 = 4 x 16 gives only 3); decoys other_000.bin and
 *          shard_004.txt do not match the glob "u16/shard_*.bin".
 *   u32/   zeta.bin (16 tokens: no window), alpha.bin (50: 3), mid.bin
 *          (33: 2), version 7 (uint32, values > 65535), written out of name
 *          order; a sub-folder holding a shard is not a regular file.
 *   lst/   list.txt naming shards/x1.bin (v7, 40 tokens: 2) then
 *          shards/x0.bin (v1, 35 tokens: 2), in that order.
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SEQ 16

static char *g_dir;

/* Token at position p of a shard with value key k, version v. uint16
 * values spread over the whole range (above 32767 too: a sign-extension
 * bug shows); uint32 values are all above 65535 and below 2^31. */
static uint32_t tokv(int version, int k, uint64_t p)
{
    if (version == 1)
        return (uint32_t)(((uint64_t)k * 20011u + p * 2579u + 40000u) % 65536u);
    return (uint32_t)(100000u + (uint64_t)k * 50000000u + p * 65537u);
}

typedef struct {
    const char *name; /* file name relative to the dataset folder */
    int version;
    int key; /* value key for tokv */
    size_t ntok;
} shard_def;

static void write_shard_def(const char *dir, const shard_def *s)
{
    uint32_t *t = malloc(s->ntok * sizeof *t + 1);
    assert_non_null(t);
    for (size_t p = 0; p < s->ntok; p++)
        t[p] = tokv(s->version, s->key, p);
    char *path = tu_join(dir, "%s", s->name);
    tu_write_shard(path, s->version, t, s->ntok);
    free(path);
    free(t);
}

/* A dataset as the loader should see it: shards in source order. */
typedef struct {
    const char *dir;
    const shard_def *shards;
    int nshards;
    uint64_t nwin; /* total windows */
} dataset;

static uint64_t windows_of(size_t ntok)
{
    return ntok >= 1 ? (uint64_t)(ntok - 1) / SEQ : 0;
}

/* Shard index and window of global item id. */
static void locate(const dataset *d, uint64_t id, int *shard, uint64_t *w)
{
    uint64_t base = 0;
    for (int s = 0; s < d->nshards; s++) {
        uint64_t nw = windows_of(d->shards[s].ntok);
        if (id < base + nw) {
            *shard = s;
            *w = id - base;
            return;
        }
        base += nw;
    }
    fail_msg("id %llu beyond %llu windows", (unsigned long long)id,
             (unsigned long long)base);
}

/* Checks row r of b: every input and target token of its window. */
static void check_row(const dataset *d, const coordl_batch *b, uint32_t r)
{
    int s;
    uint64_t w;
    locate(d, b->ids[r], &s, &w);
    const shard_def *sd = &d->shards[s];
    const int32_t *in = (const int32_t *)b->data + (size_t)r * SEQ;
    const int32_t *tg = b->targets + (size_t)r * SEQ;
    for (uint64_t j = 0; j < SEQ; j++) {
        int32_t want_in = (int32_t)tokv(sd->version, sd->key, w * SEQ + j);
        int32_t want_tg = (int32_t)tokv(sd->version, sd->key, w * SEQ + j + 1);
        if (in[j] != want_in || tg[j] != want_tg)
            fail_msg("id %llu (shard %s window %llu) token %llu: data %d "
                     "target %d, expected %d and %d",
                     (unsigned long long)b->ids[r], sd->name,
                     (unsigned long long)w, (unsigned long long)j, in[j], tg[j],
                     want_in, want_tg);
    }
    assert_int_equal(b->labels[r], s);
}

static void check_batch_shape(const coordl_batch *b)
{
    assert_int_equal(b->layout, COORDL_I32);
    assert_int_equal(b->c, 1);
    assert_int_equal(b->h, 1);
    assert_int_equal(b->w, SEQ);
    assert_int_equal(b->data_bytes, (size_t)b->n * SEQ * sizeof(int32_t));
    assert_non_null(b->targets);
    assert_non_null(b->labels);
    assert_non_null(b->ids);
}

/* Hash of a token batch: tu_batch_hash plus the targets. */
static uint64_t tok_hash(const coordl_batch *b)
{
    uint64_t h = tu_batch_hash(b);
    if (b->n)
        h = tu_fnv1a(h, b->targets, (size_t)b->n * SEQ * sizeof(int32_t));
    return h;
}

/* ---- the datasets ------------------------------------------------------ */

static const shard_def U16[] = {
    {"shard_000.bin", 1, 0, 81},
    {"shard_001.bin", 1, 1, 17},
    {"shard_002.bin", 1, 2, 64},
    {"shard_003.bin", 1, 3, 100},
};
static const shard_def U32_WRITE_ORDER[] = {
    {"zeta.bin", 7, 2, 16},
    {"alpha.bin", 7, 0, 50},
    {"mid.bin", 7, 1, 33},
};
/* the loader's order: sorted by name */
static const shard_def U32[] = {
    {"alpha.bin", 7, 0, 50},
    {"mid.bin", 7, 1, 33},
    {"zeta.bin", 7, 2, 16},
};
/* the list file's order */
static const shard_def LST[] = {
    {"shards/x1.bin", 7, 1, 40},
    {"shards/x0.bin", 1, 0, 35},
};

static char *g_u16, *g_u32, *g_lst;
static char *g_glob, *g_list;
static dataset D16, D32, DL;

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    g_u16 = tu_join(g_dir, "u16");
    g_u32 = tu_join(g_dir, "u32");
    g_lst = tu_join(g_dir, "lst");
    for (int i = 0; i < 4; i++)
        write_shard_def(g_u16, &U16[i]);
    /* decoys the glob must not pick up */
    shard_def decoy = {"other_000.bin", 1, 9, 200};
    write_shard_def(g_u16, &decoy);
    shard_def decoy2 = {"shard_004.txt", 1, 9, 200};
    write_shard_def(g_u16, &decoy2);
    for (int i = 0; i < 3; i++)
        write_shard_def(g_u32, &U32_WRITE_ORDER[i]);
    shard_def sub = {"sub/inner.bin", 7, 5, 200};
    write_shard_def(g_u32, &sub);
    for (int i = 0; i < 2; i++)
        write_shard_def(g_lst, &LST[i]);
    g_list = tu_join(g_lst, "list.txt");
    const char *text = "shards/x1.bin\nshards/x0.bin\n";
    tu_write_file(g_list, text, strlen(text));
    g_glob = tu_join(g_u16, "shard_*.bin");
    D16 = (dataset){g_u16, U16, 4, 15};
    D32 = (dataset){g_u32, U32, 3, 5};
    DL = (dataset){g_lst, LST, 2, 4};
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_u16);
    free(g_u32);
    free(g_lst);
    free(g_glob);
    free(g_list);
    return 0;
}

static coordl_config tok_config(const char *source)
{
    coordl_config cfg = tu_config(source); /* layout U8_NHWC: ignored */
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.seq_len = SEQ;
    cfg.batch_size = 4;
    cfg.seed = 99;
    return cfg;
}

/* 1 if path names the same file as dir/name. */
static int same_file(const char *path, const char *dir, const char *name)
{
    char *want = tu_join(dir, "%s", name);
    struct stat a, b;
    int same = path && stat(path, &a) == 0 && stat(want, &b) == 0 &&
               a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    free(want);
    return same;
}

/* shuffle = 0: ids 0.. in order, every row exact, the epoch ends, then
 * epoch 1 repeats it. */
static void check_sequential(const coordl_config *cfg, const dataset *d)
{
    coordl *L = tu_open(cfg);
    assert_int_equal(coordl_num_items(L), d->nwin);
    uint64_t B = cfg->batch_size;
    assert_int_equal(coordl_batches_per_epoch(L), (d->nwin + B - 1) / B);
    for (uint64_t id = 0; id < d->nwin; id++) {
        int s;
        uint64_t w;
        locate(d, id, &s, &w);
        const char *p = coordl_item_path(L, id);
        if (!same_file(p, d->dir, d->shards[s].name))
            fail_msg("item %llu: path %s, expected the shard %s",
                     (unsigned long long)id, p ? p : "(null)", d->shards[s].name);
    }
    assert_null(coordl_item_path(L, d->nwin));
    for (uint64_t e = 0; e < 2; e++) {
        uint64_t next_id = 0, index = 0;
        for (;;) {
            coordl_batch b;
            coordl_status rc = coordl_next(L, &b);
            if (rc == COORDL_END_OF_EPOCH)
                break;
            if (rc != COORDL_OK)
                fail_msg("epoch %llu: status %d: %s", (unsigned long long)e,
                         (int)rc, coordl_errmsg(L));
            check_batch_shape(&b);
            assert_int_equal(b.epoch, e);
            assert_int_equal(b.index, index);
            uint64_t left = d->nwin - next_id;
            assert_int_equal(b.n, left < B ? left : B);
            for (uint32_t r = 0; r < b.n; r++) {
                assert_int_equal(b.ids[r], next_id + r);
                check_row(d, &b, r);
            }
            next_id += b.n;
            index++;
            coordl_release(L, &b);
        }
        assert_int_equal(next_id, d->nwin);
    }
    coordl_close(L);
}

static void test_glob_uint16_rows_are_exact_windows(void **state)
{
    (void)state;
    coordl_config cfg = tok_config(g_glob);
    cfg.shuffle = 0;
    check_sequential(&cfg, &D16);
}

static void test_directory_uint32_sorted_by_name(void **state)
{
    (void)state;
    coordl_config cfg = tok_config(g_u32);
    cfg.shuffle = 0;
    cfg.batch_size = 2;
    check_sequential(&cfg, &D32);
}

static void test_single_shard_file(void **state)
{
    (void)state;
    char *path = tu_join(g_u16, "shard_003.bin");
    dataset one = {g_u16, &U16[3], 1, 6};
    coordl_config cfg = tok_config(path);
    cfg.shuffle = 0;
    check_sequential(&cfg, &one);
    free(path);
}

static void test_list_file_in_listed_order_mixed_versions(void **state)
{
    (void)state;
    coordl_config cfg = tok_config(g_list);
    cfg.shuffle = 0;
    cfg.batch_size = 3;
    check_sequential(&cfg, &DL);
}

static void test_uint32_tokens_above_65535_survive(void **state)
{
    (void)state;
    /* a direct look at one token: alpha.bin window 1 starts at position 16 */
    coordl_config cfg = tok_config(g_u32);
    cfg.shuffle = 0;
    cfg.batch_size = 2;
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_int_equal(b.n, 2);
    const int32_t *in = b.data;
    assert_int_equal(in[SEQ], (int32_t)(100000u + 16u * 65537u));
    assert_true(in[SEQ] > 65535);
    assert_int_equal(b.targets[SEQ + SEQ - 1], (int32_t)(100000u + 32u * 65537u));
    coordl_release(L, &b);
    coordl_close(L);
}

static void test_header_count_wins_over_longer_file(void **state)
{
    (void)state;
    /* header[2] says 33 tokens (2 windows); 50 are stored: the rest is not
     * part of the shard */
    char *dir = tu_join(g_dir, "longer");
    char *path = tu_join(dir, "s.bin");
    uint32_t t[50];
    for (int p = 0; p < 50; p++)
        t[p] = tokv(1, 4, (uint64_t)p);
    tu_write_shard_raw(path, TU_SHARD_MAGIC_U16, 1, 33, t, 50, 2, 0);
    shard_def sd = {"s.bin", 1, 4, 33};
    dataset d = {dir, &sd, 1, 2};
    coordl_config cfg = tok_config(dir);
    cfg.shuffle = 0;
    check_sequential(&cfg, &d);
    tu_rmtree(dir);
    free(dir);
    free(path);
}

/* ---- shuffle, determinism, shards -------------------------------------- */

typedef struct {
    uint64_t ids[8][64]; /* per epoch, in stream order */
    size_t nids[8];
    uint64_t hash[64];
    size_t nb;
} tok_run;

/* Runs `epochs` epochs, checking every row, into *out. */
static void run_tokens(const coordl_config *cfg, const dataset *d,
                       unsigned epochs, tok_run *out)
{
    memset(out, 0, sizeof *out);
    coordl *L = tu_open(cfg);
    for (unsigned e = 0; e < epochs; e++) {
        for (;;) {
            coordl_batch b;
            coordl_status rc = coordl_next(L, &b);
            if (rc == COORDL_END_OF_EPOCH)
                break;
            if (rc != COORDL_OK)
                fail_msg("status %d: %s", (int)rc, coordl_errmsg(L));
            check_batch_shape(&b);
            assert_int_equal(b.epoch, e);
            for (uint32_t r = 0; r < b.n; r++) {
                check_row(d, &b, r);
                assert_true(out->nids[e] < 64);
                out->ids[e][out->nids[e]++] = b.ids[r];
            }
            assert_true(out->nb < 64);
            out->hash[out->nb++] = tok_hash(&b);
            coordl_release(L, &b);
        }
    }
    coordl_close(L);
}

static void test_shuffle_each_window_once_per_epoch_and_deterministic(void **state)
{
    (void)state;
    coordl_config cfg = tok_config(g_glob);
    cfg.shuffle = 1;
    tok_run a, b, c;
    run_tokens(&cfg, &D16, 3, &a);
    for (int e = 0; e < 3; e++) {
        assert_int_equal(a.nids[e], 15);
        uint64_t sorted[15];
        memcpy(sorted, a.ids[e], sizeof sorted);
        qsort(sorted, 15, sizeof *sorted, tu_cmp_u64);
        for (uint64_t i = 0; i < 15; i++)
            assert_int_equal(sorted[i], i);
    }
    /* shuffled, and differently per epoch */
    int ident = 1;
    for (uint64_t i = 0; i < 15; i++)
        ident &= a.ids[0][i] == i;
    assert_false(ident);
    assert_memory_not_equal(a.ids[0], a.ids[1], 15 * sizeof(uint64_t));
    assert_memory_not_equal(a.ids[1], a.ids[2], 15 * sizeof(uint64_t));
    /* the same in another run, and with one thread */
    run_tokens(&cfg, &D16, 3, &b);
    cfg.threads = 1;
    run_tokens(&cfg, &D16, 3, &c);
    assert_int_equal(a.nb, 12);
    assert_int_equal(b.nb, a.nb);
    assert_int_equal(c.nb, a.nb);
    assert_memory_equal(a.hash, b.hash, a.nb * sizeof(uint64_t));
    assert_memory_equal(a.hash, c.hash, a.nb * sizeof(uint64_t));
    /* another seed: another order */
    cfg.seed += 1;
    run_tokens(&cfg, &D16, 1, &c);
    assert_memory_not_equal(a.ids[0], c.ids[0], 15 * sizeof(uint64_t));
}

static void test_rank_world_shards_are_disjoint(void **state)
{
    (void)state;
    coordl_config cfg = tok_config(g_glob);
    cfg.world = 3;
    int seen[2][15];
    memset(seen, 0, sizeof seen);
    for (int r = 0; r < 3; r++) {
        cfg.rank = r;
        coordl *L = tu_open(&cfg);
        assert_int_equal(coordl_batches_per_epoch(L), 2); /* 5 rows: 4 + 1 */
        coordl_close(L);
        tok_run run;
        run_tokens(&cfg, &D16, 2, &run); /* checks every row */
        for (int e = 0; e < 2; e++) {
            assert_int_equal(run.nids[e], 5);
            for (size_t i = 0; i < 5; i++) {
                assert_true(run.ids[e][i] < 15);
                seen[e][run.ids[e][i]]++;
            }
        }
    }
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < 15; i++)
            if (seen[e][i] != 1)
                fail_msg("epoch %d: window %d seen %d times over 3 ranks", e,
                         i, seen[e][i]);
}

static void test_full_cache_serves_every_epoch_after_the_first(void **state)
{
    (void)state;
    coordl_config cfg = tok_config(g_glob);
    cfg.threads = 1; /* exact per-epoch counts (see test_cache.c) */
    /* and one slot: no row of epoch 1 is claimed before the last batch of
     * epoch 0 is complete, its windows cached. With more, the consumer
     * (which prepares token rows itself while it waits) could claim a row
     * of epoch 1 whose window a worker was still reading for epoch 0 (a
     * read ahead in flight): a miss, read twice, correct but not exact. */
    cfg.prefetch_batches = 1;
    cfg.cache_bytes = 1 << 20;
    cfg.cache_pin = COORDL_PIN_OFF;
    coordl *L = tu_open(&cfg);
    for (unsigned e = 0; e < 3; e++) {
        for (;;) {
            coordl_batch b;
            coordl_status rc = coordl_next(L, &b);
            if (rc == COORDL_END_OF_EPOCH)
                break;
            if (rc != COORDL_OK)
                fail_msg("status %d: %s", (int)rc, coordl_errmsg(L));
            for (uint32_t r = 0; r < b.n; r++)
                check_row(&D16, &b, r); /* cached bytes give the same tokens */
            coordl_release(L, &b);
        }
    }
    coordl_epoch_stats es;
    assert_int_equal(coordl_get_epoch_stats(L, 0, &es), COORDL_OK);
    assert_int_equal(es.items, 15);
    assert_true(es.storage_bytes > 0);
    for (uint64_t e = 1; e < 3; e++) {
        assert_int_equal(coordl_get_epoch_stats(L, e, &es), COORDL_OK);
        assert_int_equal(es.items, 15);
        if (es.storage_bytes != 0 || es.cache_misses != 0 || es.cache_hits != 15)
            fail_msg("epoch %llu: storage_bytes %llu, misses %llu, hits %llu; "
                     "expected 0, 0, 15 with a full cache",
                     (unsigned long long)e, (unsigned long long)es.storage_bytes,
                     (unsigned long long)es.cache_misses,
                     (unsigned long long)es.cache_hits);
    }
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_true(st.cache_items > 0);
    coordl_close(L);
    /* control: without a cache every epoch reads storage */
    cfg.cache_bytes = 0;
    L = tu_open(&cfg);
    tu_run run = {0};
    assert_int_equal(tu_run_epochs(L, 2, &run), COORDL_OK);
    assert_int_equal(coordl_get_epoch_stats(L, 1, &es), COORDL_OK);
    assert_true(es.storage_bytes > 0);
    assert_int_equal(es.cache_hits, 0);
    tu_run_free(&run);
    coordl_close(L);
}

/* ---- coordl_next_into -------------------------------------------------- */

static void test_next_into_copies_inputs_and_targets(void **state)
{
    (void)state;
    coordl_config cfg = tok_config(g_glob);
    cfg.prefetch_batches = 2; /* next_into releases: more calls than slots */
    coordl *A = tu_open(&cfg), *B = tu_open(&cfg);
    const size_t full = 4 * SEQ * sizeof(int32_t);
    const size_t cap = full + 64;
    uint8_t *data = malloc(cap), *tg = malloc(cap);
    assert_non_null(data);
    assert_non_null(tg);
    for (uint64_t e = 0; e < 2; e++) {
        for (uint64_t i = 0;; i++) {
            coordl_batch b;
            coordl_status rb = coordl_next(B, &b);
            memset(data, 0xA5, cap);
            memset(tg, 0x5A, cap);
            if (rb == COORDL_END_OF_EPOCH) {
                assert_int_equal(coordl_next_into(A, data, cap, tg, cap),
                                 COORDL_END_OF_EPOCH);
                break;
            }
            assert_int_equal(rb, COORDL_OK);
            const size_t need = (size_t)b.n * SEQ * sizeof(int32_t);
            if (i == 1) {
                /* too small: refused, nothing written, nothing consumed */
                assert_int_equal(coordl_next_into(A, data, need - 1, tg, cap),
                                 COORDL_ERR_INVALID);
                assert_int_equal(coordl_next_into(A, data, cap, tg, need - 4),
                                 COORDL_ERR_INVALID);
                for (size_t k = 0; k < cap; k++)
                    if (data[k] != 0xA5 || tg[k] != 0x5A)
                        fail_msg("byte %zu written by a refused next_into", k);
            }
            /* the last (short) batch fits buffers of exactly its size */
            size_t give = b.n < 4 ? need : cap;
            coordl_status ra = coordl_next_into(A, data, give, tg, give);
            if (ra != COORDL_OK)
                fail_msg("epoch %llu batch %llu: next_into %d: %s",
                         (unsigned long long)e, (unsigned long long)i, (int)ra,
                         coordl_errmsg(A));
            assert_memory_equal(data, b.data, need);
            assert_memory_equal(tg, b.targets, need);
            for (size_t k = need; k < cap; k++)
                if (data[k] != 0xA5 || tg[k] != 0x5A)
                    fail_msg("byte %zu past the batch written", k);
            coordl_release(B, &b);
        }
    }
    /* targets may be left out */
    coordl_batch b;
    assert_int_equal(coordl_next(B, &b), COORDL_OK);
    assert_int_equal(coordl_next_into(A, data, cap, NULL, 0), COORDL_OK);
    assert_memory_equal(data, b.data, b.data_bytes);
    coordl_release(B, &b);
    free(data);
    free(tg);
    coordl_close(A);
    coordl_close(B);
}

/* ---- coordl_set on tokens ---------------------------------------------- */

static void test_set_batch_size_and_out_size_on_tokens(void **state)
{
    (void)state;
    coordl_config cfg = tok_config(g_glob);
    cfg.max_batch_size = 8;
    tok_run ref;
    run_tokens(&cfg, &D16, 1, &ref);
    coordl *L = tu_open(&cfg);
    /* image sizes are not a token parameter */
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_W, 32), COORDL_ERR_INVALID);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_H, 32), COORDL_ERR_INVALID);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_SIZE, 32), COORDL_ERR_INVALID);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_int_equal(b.n, 4);
    uint64_t ids[15];
    size_t n = 0;
    for (uint32_t r = 0; r < b.n; r++)
        ids[n++] = b.ids[r];
    coordl_release(L, &b);
    assert_int_equal(coordl_set(L, COORDL_PARAM_BATCH_SIZE, 3), COORDL_OK);
    /* 11 windows left: 3, 3, 3, 2 */
    static const uint32_t want_n[] = {3, 3, 3, 2};
    for (int i = 0; i < 4; i++) {
        coordl_status rc = coordl_next(L, &b);
        if (rc != COORDL_OK)
            fail_msg("batch %d after set: status %d: %s", i, (int)rc,
                     coordl_errmsg(L));
        check_batch_shape(&b);
        assert_int_equal(b.n, want_n[i]);
        assert_int_equal(b.index, 1 + i);
        for (uint32_t r = 0; r < b.n; r++) {
            check_row(&D16, &b, r);
            assert_true(n < 15);
            ids[n++] = b.ids[r];
        }
        coordl_release(L, &b);
    }
    assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    assert_int_equal(n, 15);
    assert_memory_equal(ids, ref.ids[0], sizeof ids);
    assert_int_equal(coordl_batches_per_epoch(L), 5);
    coordl_close(L);
}

/* ---- bad shards and bad configurations ---------------------------------- */

typedef enum {
    SH_BAD_MAGIC,
    SH_BAD_VERSION,
    SH_TRUNCATED_BODY_U16,
    SH_TRUNCATED_BODY_U32,
    SH_TRUNCATED_HEADER
} bad_shard;

static void check_bad_shard(bad_shard kind, int as_single_file)
{
    static int serial;
    char *dir = tu_join(g_dir, "bad%d", serial++);
    shard_def good0 = {"s0.bin", 1, 0, 81}, good2 = {"s2.bin", 1, 2, 81};
    write_shard_def(dir, &good0);
    write_shard_def(dir, &good2);
    char *bad = tu_join(dir, "s1.bin");
    uint32_t t[100];
    for (int p = 0; p < 100; p++)
        t[p] = tokv(1, 1, (uint64_t)p);
    switch (kind) {
    case SH_BAD_MAGIC:
        tu_write_shard_raw(bad, 20240519, 1, 100, t, 100, 2, 0);
        break;
    case SH_BAD_VERSION:
        tu_write_shard_raw(bad, TU_SHARD_MAGIC_U16, 2, 100, t, 100, 2, 0);
        break;
    case SH_TRUNCATED_BODY_U16: /* one token short */
        tu_write_shard_raw(bad, TU_SHARD_MAGIC_U16, 1, 100, t, 100, 2, 2);
        break;
    case SH_TRUNCATED_BODY_U32: /* one byte short */
        tu_write_shard_raw(bad, TU_SHARD_MAGIC_U32, 7, 100, t, 100, 4, 1);
        break;
    case SH_TRUNCATED_HEADER: { /* 100 bytes of a header */
        size_t n;
        char *full = tu_join(dir, "full.tmp");
        tu_write_shard_raw(full, TU_SHARD_MAGIC_U16, 1, 100, t, 100, 2, 0);
        uint8_t *bytes = tu_read_file(full, &n);
        tu_write_file(bad, bytes, 100);
        tu_rmtree(full);
        free(full);
        free(bytes);
        break;
    }
    }
    coordl_config cfg = tok_config(as_single_file ? bad : dir);
    static char not_null;
    coordl *L = (coordl *)(void *)&not_null; /* must be reset to NULL */
    coordl_status rc = coordl_open(&cfg, &L);
    if (rc != COORDL_ERR_CORRUPT)
        fail_msg("bad shard kind %d: coordl_open = %d (%s), expected "
                 "COORDL_ERR_CORRUPT; message: %s", (int)kind, (int)rc,
                 coordl_strerror(rc), coordl_errmsg(NULL));
    assert_null(L);
    if (!strstr(coordl_errmsg(NULL), "s1.bin"))
        fail_msg("message \"%s\" does not name s1.bin", coordl_errmsg(NULL));
    tu_rmtree(dir);
    free(dir);
    free(bad);
}

static void test_bad_magic_is_corrupt_naming_file(void **state)
{
    (void)state;
    check_bad_shard(SH_BAD_MAGIC, 0);
    check_bad_shard(SH_BAD_MAGIC, 1);
}

static void test_bad_version_is_corrupt_naming_file(void **state)
{
    (void)state;
    check_bad_shard(SH_BAD_VERSION, 0);
    check_bad_shard(SH_BAD_VERSION, 1);
}

static void test_truncated_body_is_corrupt_naming_file(void **state)
{
    (void)state;
    check_bad_shard(SH_TRUNCATED_BODY_U16, 0);
    check_bad_shard(SH_TRUNCATED_BODY_U32, 0);
    check_bad_shard(SH_TRUNCATED_BODY_U16, 1);
}

static void test_truncated_header_is_corrupt_naming_file(void **state)
{
    (void)state;
    check_bad_shard(SH_TRUNCATED_HEADER, 0);
}

static void test_no_windows_at_all_is_invalid(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "short");
    shard_def a = {"a.bin", 1, 0, SEQ}, b = {"b.bin", 7, 1, 3};
    write_shard_def(dir, &a);
    write_shard_def(dir, &b);
    coordl_config cfg = tok_config(dir);
    coordl *L = NULL;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_null(L);
    assert_true(strlen(coordl_errmsg(NULL)) > 0);
    /* one token more and there is exactly one window */
    shard_def a1 = {"a.bin", 1, 0, SEQ + 1};
    write_shard_def(dir, &a1);
    L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 1);
    coordl_close(L);
    /* a longer seq_len leaves none again */
    cfg.seq_len = SEQ + 1;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_null(L);
    tu_rmtree(dir);
    free(dir);
}

static void test_seq_len_zero_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tok_config(g_glob);
    cfg.seq_len = 0;
    coordl *L = NULL;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_null(L);
    assert_non_null(strstr(coordl_errmsg(NULL), "seq_len"));
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glob_uint16_rows_are_exact_windows),
        cmocka_unit_test(test_directory_uint32_sorted_by_name),
        cmocka_unit_test(test_single_shard_file),
        cmocka_unit_test(test_list_file_in_listed_order_mixed_versions),
        cmocka_unit_test(test_uint32_tokens_above_65535_survive),
        cmocka_unit_test(test_header_count_wins_over_longer_file),
        cmocka_unit_test(test_shuffle_each_window_once_per_epoch_and_deterministic),
        cmocka_unit_test(test_rank_world_shards_are_disjoint),
        cmocka_unit_test(test_full_cache_serves_every_epoch_after_the_first),
        cmocka_unit_test(test_next_into_copies_inputs_and_targets),
        cmocka_unit_test(test_set_batch_size_and_out_size_on_tokens),
        cmocka_unit_test(test_bad_magic_is_corrupt_naming_file),
        cmocka_unit_test(test_bad_version_is_corrupt_naming_file),
        cmocka_unit_test(test_truncated_body_is_corrupt_naming_file),
        cmocka_unit_test(test_truncated_header_is_corrupt_naming_file),
        cmocka_unit_test(test_no_windows_at_all_is_invalid),
        cmocka_unit_test(test_seq_len_zero_is_invalid),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
