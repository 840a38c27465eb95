/*
 * fuzz_random_access.c - differential: one image gives the same batches
 * whatever the cache holds and whether jpeg_random_access is on (the
 * determinism contract, docs/DESIGN.md). Input: 8 parameter bytes, then
 * the file (a JPEG, usually).
 *
 * The file is written twice into a tree (c0/a.jpg, c1/b.jpg) and into a
 * tar shard of the same two members, and the same config runs 3 epochs
 * through the public API in each of these ways:
 *   tree, no cache                          (the reference)
 *   tree, whole set cached, random access off
 *   tree, whole set cached, random access on, budget 1 (rewritten on its
 *         first read, later epochs decoded from spliced crops)
 *   tar,  no cache
 *   tar,  whole set cached, random access on, budget 1
 * Oracle: every run gives the same sequence of batches: the same status
 * for each (a bad item is bad in every run), and for a good batch the
 * same ids, labels and output bytes. Any difference is a finding.
 *
 * Parameters (byte: meaning):
 *   0  bit 0 eval pipeline, bit 1 flip, bits 2-3 layout, bit 4 batch of 1
 *      (else 2)
 *   1, 2  out_w, out_h: 1 + b % 40
 *   3, 4  scale_min = (1 + b3) / 256, scale_max between it and 1
 *   5     ratio_min = 2^((b - 128) / 64), ratio_max = ratio_min x 2
 *   6     seed
 *   7     max_pixels = 2^(6 + b % 11) (64 .. 64 Ki: an execution stays
 *         in milliseconds)
 */
#include "../../coordl.c"
#include "fuzz_common.h"
#include "../tu_tar.h"

#define FZ_PARAMS 8
#define FZ_EPOCHS 3
#define FZ_MAX_BATCHES 16

typedef struct {
    coordl_status rc[FZ_MAX_BATCHES];
    uint64_t hash[FZ_MAX_BATCHES];
    int n;
} fz_run;

/* FNV-1a over a batch's ids, labels and bytes. */
static uint64_t fz_batch_hash(const coordl_batch *b)
{
    uint64_t h = 1469598103934665603ull;
    const uint8_t *parts[3] = {(const uint8_t *)b->ids, (const uint8_t *)b->labels, (const uint8_t *)b->data};
    const size_t lens[3] = {b->n * sizeof *b->ids, b->n * sizeof *b->labels, b->data_bytes};
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < lens[k]; i++)
            h = (h ^ parts[k][i]) * 1099511628211ull;
    return h;
}

static void fz_run_epochs(const coordl_config *cfg, fz_run *r, const char *what)
{
    memset(r, 0, sizeof *r);
    coordl *L = NULL;
    coordl_status rc = coordl_open(cfg, &L);
    FZ_CHECK(rc == COORDL_OK, "%s: coordl_open = %d: %s", what, (int)rc, coordl_errmsg(NULL));
    int ends = 0;
    while (ends < FZ_EPOCHS) {
        coordl_batch b;
        rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) {
            ends++;
            continue;
        }
        FZ_CHECK(r->n < FZ_MAX_BATCHES, "%s: more batches than epochs hold", what);
        FZ_CHECK(rc == COORDL_OK || rc == COORDL_ERR_CORRUPT || rc == COORDL_ERR_UNSUPPORTED, "%s: status %d: %s",
                 what, (int)rc, coordl_errmsg(L));
        r->rc[r->n] = rc;
        if (rc == COORDL_OK) {
            r->hash[r->n] = fz_batch_hash(&b);
            coordl_release(L, &b);
        }
        r->n++;
    }
    coordl_close(L);
}

static void fz_same(const fz_run *ref, const fz_run *r, const char *what)
{
    FZ_CHECK(ref->n == r->n, "%s: %d batches, the reference %d", what, r->n, ref->n);
    for (int i = 0; i < r->n; i++) {
        FZ_CHECK(ref->rc[i] == r->rc[i], "%s: batch %d has status %d, the reference (tree, no cache) %d", what, i,
                 (int)r->rc[i], (int)ref->rc[i]);
        FZ_CHECK(ref->hash[i] == r->hash[i], "%s: batch %d differs from the reference (tree, no cache)", what, i);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_bytes in = {data, size};
    uint8_t b[FZ_PARAMS];
    fz_params(&in, b, FZ_PARAMS);
    if (in.n == 0)
        return 0;
    const char *dir = fz_fixture();
    char tree[1024], tar[1024], path[1100];
    snprintf(tree, sizeof tree, "%s/ra-tree", dir);
    snprintf(tar, sizeof tar, "%s/ra.tar", dir);
    fz_rmtree(tree);
    mkdir(tree, 0700);
    static const char *const members[2] = {"c0/a.jpg", "c1/b.jpg"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/c%d", tree, i);
        mkdir(path, 0700);
        snprintf(path, sizeof path, "ra-tree/%s", members[i]);
        fz_write(path, in.p, in.n);
    }
    tu_tar t;
    tu_tar_open(&t, tar);
    for (int i = 0; i < 2; i++)
        tu_tar_file(&t, members[i], in.p, in.n);
    tu_tar_close(&t, 2);

    coordl_config cfg = fz_config();
    cfg.pipeline = b[0] & 1 ? COORDL_PIPE_EVAL : COORDL_PIPE_TRAIN;
    cfg.flip = b[0] >> 1 & 1;
    cfg.layout = (coordl_layout)(b[0] >> 2 & 3);
    cfg.batch_size = b[0] & 16 ? 1 : 2;
    cfg.out_w = 1u + b[1] % 40u;
    cfg.out_h = 1u + b[2] % 40u;
    cfg.scale_min = (float)(1 + b[3]) / 256.0f;
    cfg.scale_max = cfg.scale_min + (1.0f - cfg.scale_min) * (float)b[4] / 255.0f;
    cfg.ratio_min = exp2f(((float)b[5] - 128.0f) / 64.0f);
    cfg.ratio_max = cfg.ratio_min * 2.0f;
    cfg.seed = b[6];
    cfg.max_pixels = (uint64_t)1 << (6 + b[7] % 11);
    cfg.max_decode_bytes = 16u << 20;
    /* one worker and a ring of one batch: each epoch's rows are prepared
     * after the last epoch's were admitted (and rewritten), so the cached
     * runs decode from the cache from epoch 1 on */
    cfg.threads = 1;
    cfg.prefetch_batches = 1;
    cfg.cache_pin = COORDL_PIN_OFF;
    cfg.jpeg_rewrite_budget = 1.0f;
    if (cdl__validate(&cfg) != COORDL_OK)
        return 0;
    const uint64_t whole = 8 * (uint64_t)in.n + (1u << 20);
    static const struct {
        int tar;
        uint64_t cache;
        int random_access;
        const char *what;
    } runs[] = {
        {0, 0, 0, "tree, no cache"},
        {0, 1, 0, "tree, cached, random access off"},
        {0, 1, 1, "tree, cached, random access on"},
        {1, 0, 0, "tar, no cache"},
        {1, 1, 1, "tar, cached, random access on"},
    };
    fz_run ref, r;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        cfg.source = runs[i].tar ? tar : tree;
        cfg.cache_bytes = runs[i].cache ? whole : 0;
        cfg.jpeg_random_access = runs[i].random_access;
        fz_run_epochs(&cfg, i == 0 ? &ref : &r, runs[i].what);
        if (i > 0)
            fz_same(&ref, &r, runs[i].what);
    }
    return 0;
}
