/*
 * test_bad_input.c - a library never exits on data. Each kind of bad item
 * (truncated, empty, garbage, text named .jpg, too many pixels, too many
 * bytes, deleted after open) is checked under both policies:
 *   COORDL_BAD_FAIL: coordl_next returns COORDL_ERR_CORRUPT / COORDL_ERR_IO
 *     for the batch holding it, coordl_errmsg names the file, and the next
 *     call returns the batch after it;
 *   COORDL_BAD_SUBSTITUTE: every batch is full, the bad id never appears,
 *     bad_samples counts each occurrence, the log names the file, and the
 *     substitution is the same in every run.
 *
 * Dataset per test: 2 classes x 8 textured 24 x 24 JPEGs (16 items), batch
 * size 4 (4 batches), one item replaced by the bad file.
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_ITEMS 16
#define BATCH 4

static char *g_dir;
static int g_serial;

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    return 0;
}

typedef enum {
    BAD_TRUNCATED_JPEG,
    BAD_TRUNCATED_PNG,
    BAD_EMPTY,
    BAD_GARBAGE,
    BAD_TEXT_AS_JPG,
    BAD_TOO_MANY_PIXELS_JPEG,
    BAD_TOO_MANY_PIXELS_PNG,
    BAD_TOO_MANY_BYTES,
    BAD_DELETED
} bad_kind;

typedef struct {
    char *root;
    char *bad_path;       /* full path of the bad file */
    const char *bad_name; /* its base name (what messages must contain) */
    uint64_t bad_id;
} bad_tree;

static const tu_folder_spec SPEC = {2, 8, 24, 24, 0, TU_PAT_TEXTURED,
                                    TU_FMT_JPEG, 90, 5};

/* Makes a fresh tree with item `bad_id` replaced by a bad file of `kind`
 * (except BAD_DELETED, which is removed later by the test). */
static bad_tree make_bad_tree(bad_kind kind, uint64_t bad_id)
{
    bad_tree t;
    t.root = tu_join(g_dir, "t%d", g_serial++);
    tu_make_image_folder(t.root, &SPEC);
    t.bad_id = bad_id;
    t.bad_path = tu_folder_file(t.root, &SPEC, (int)(bad_id / 8), (int)(bad_id % 8));
    t.bad_name = strrchr(t.bad_path, '/') + 1;
    switch (kind) {
    case BAD_TRUNCATED_JPEG: {
        uint8_t *noise = tu_noise_rgb(64, 64, 9);
        size_t n;
        uint8_t *jpg = tu_encode_jpeg(noise, 64, 64, 3, NULL, &n);
        size_t scan = tu_jpeg_scan_offset(jpg, n);
        assert_true(scan > 0 && scan < n / 2); /* the header survives */
        tu_write_file(t.bad_path, jpg, n / 2);
        free(jpg);
        free(noise);
        break;
    }
    case BAD_TRUNCATED_PNG: {
        /* a PNG (named .jpg: the format is sniffed) cut in its pixel data */
        uint8_t *noise = tu_noise_rgb(64, 64, 10);
        tu_write_png(t.bad_path, noise, 64, 64, 3);
        size_t n;
        uint8_t *png = tu_read_file(t.bad_path, &n);
        tu_write_file(t.bad_path, png, n / 2);
        free(png);
        free(noise);
        break;
    }
    case BAD_EMPTY:
        tu_write_file(t.bad_path, "", 0);
        break;
    case BAD_GARBAGE: {
        uint8_t junk[3000];
        uint64_t st = 77;
        for (size_t i = 0; i < sizeof junk; i++)
            junk[i] = (uint8_t)tu_rand(&st);
        junk[0] = 0x42; /* not a JPEG/PNG/BMP signature by chance */
        tu_write_file(t.bad_path, junk, sizeof junk);
        break;
    }
    case BAD_TEXT_AS_JPG: {
        const char *txt = "this is a text file, not an image\n";
        tu_write_file(t.bad_path, txt, strlen(txt));
        break;
    }
    case BAD_TOO_MANY_PIXELS_JPEG: {
        uint8_t *pix = tu_textured_rgb(64, 64, (const uint8_t[3]){90, 90, 90}, 3);
        tu_write_jpeg(t.bad_path, pix, 64, 64, 3, NULL);
        free(pix);
        break;
    }
    case BAD_TOO_MANY_PIXELS_PNG: {
        uint8_t *pix = tu_textured_rgb(64, 64, (const uint8_t[3]){90, 90, 90}, 3);
        tu_write_png(t.bad_path, pix, 64, 64, 3);
        free(pix);
        break;
    }
    case BAD_TOO_MANY_BYTES: {
        /* a valid 24 x 24 image, but a noisy PPM of 64 x 64 bytes beats
         * max_item_bytes = 4096; the others are ~1 KiB JPEGs */
        uint8_t *noise = tu_noise_rgb(64, 64, 11);
        tu_write_ppm(t.bad_path, noise, 64, 64);
        free(noise);
        break;
    }
    case BAD_DELETED:
        break;
    }
    return t;
}

static void free_bad_tree(bad_tree *t)
{
    tu_rmtree(t->root);
    free(t->root);
    free(t->bad_path);
}

static coordl_config bad_config(const bad_tree *t, bad_kind kind)
{
    coordl_config cfg = tu_config(t->root);
    cfg.batch_size = BATCH;
    cfg.prefetch_batches = 2;
    if (kind == BAD_DELETED) /* deleted after open: before any read of it, so no read-ahead */
        cfg.readahead_items = 0;
    cfg.out_w = cfg.out_h = 12;
    if (kind == BAD_TOO_MANY_PIXELS_JPEG || kind == BAD_TOO_MANY_PIXELS_PNG)
        cfg.max_pixels = 1000; /* 24 x 24 = 576 fits, 64 x 64 does not */
    if (kind == BAD_TOO_MANY_BYTES) {
        cfg.max_item_bytes = 4096;
        for (int k = 0; k < SPEC.classes; k++) /* the good ones fit */
            for (int j = 0; j < SPEC.per_class; j++) {
                char *p = tu_folder_file(t->root, &SPEC, k, j);
                if (strcmp(p, t->bad_path))
                    assert_true(tu_file_size(p) < 4096);
                free(p);
            }
        assert_true(tu_file_size(t->bad_path) > 4096);
    }
    return cfg;
}

/* ---- COORDL_BAD_FAIL --------------------------------------------------- */

/* shuffle = 0: batch b holds ids 4b..4b+3. Two epochs: the batch holding
 * the bad item fails with `expect` naming the file, the others come in
 * order, and the epoch still ends. */
static void check_fail_policy(bad_kind kind, uint64_t bad_id, coordl_status expect)
{
    bad_tree t = make_bad_tree(kind, bad_id);
    coordl_config cfg = bad_config(&t, kind);
    cfg.shuffle = 0;
    cfg.on_bad_sample = COORDL_BAD_FAIL;
    coordl *L = tu_open(&cfg);
    if (kind == BAD_DELETED)
        assert_int_equal(unlink(t.bad_path), 0);
    const uint64_t bad_batch = bad_id / BATCH;
    for (uint64_t e = 0; e < 2; e++) {
        for (uint64_t i = 0; i < N_ITEMS / BATCH; i++) {
            coordl_batch b;
            coordl_status rc = coordl_next(L, &b);
            if (i == bad_batch) {
                if (rc != expect)
                    fail_msg("epoch %llu batch %llu: status %d (%s), expected %d",
                             (unsigned long long)e, (unsigned long long)i, (int)rc,
                             coordl_strerror(rc), (int)expect);
                const char *msg = coordl_errmsg(L);
                if (!strstr(msg, t.bad_name))
                    fail_msg("message \"%s\" does not name %s", msg, t.bad_name);
                /* and says what the policy did and how to keep the batch */
                if (!strstr(msg, "on_bad_sample = COORDL_BAD_FAIL") || !strstr(msg, "COORDL_BAD_SUBSTITUTE"))
                    fail_msg("message \"%s\" does not name on_bad_sample and COORDL_BAD_SUBSTITUTE", msg);
                continue;
            }
            if (rc != COORDL_OK)
                fail_msg("epoch %llu batch %llu: status %d: %s",
                         (unsigned long long)e, (unsigned long long)i, (int)rc,
                         coordl_errmsg(L));
            assert_int_equal(b.epoch, e);
            assert_int_equal(b.index, i);
            assert_int_equal(b.n, BATCH);
            for (uint32_t r = 0; r < b.n; r++)
                assert_int_equal(b.ids[r], i * BATCH + r);
            coordl_release(L, &b);
        }
        coordl_batch b;
        assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    }
    coordl_close(L);
    free_bad_tree(&t);
}

static void test_fail_truncated_jpeg_is_corrupt_naming_file(void **state)
{
    (void)state;
    check_fail_policy(BAD_TRUNCATED_JPEG, 5, COORDL_ERR_CORRUPT);
}

static void test_fail_truncated_png_is_corrupt_naming_file(void **state)
{
    (void)state;
    check_fail_policy(BAD_TRUNCATED_PNG, 9, COORDL_ERR_CORRUPT);
}

static void test_fail_empty_file_is_corrupt_naming_file(void **state)
{
    (void)state;
    check_fail_policy(BAD_EMPTY, 5, COORDL_ERR_CORRUPT);
}

static void test_fail_garbage_bytes_is_corrupt_naming_file(void **state)
{
    (void)state;
    check_fail_policy(BAD_GARBAGE, 0, COORDL_ERR_CORRUPT); /* first batch */
}

static void test_fail_text_named_jpg_is_corrupt_naming_file(void **state)
{
    (void)state;
    check_fail_policy(BAD_TEXT_AS_JPG, 15, COORDL_ERR_CORRUPT); /* last row */
}

static void test_fail_too_many_pixels_jpeg_is_corrupt(void **state)
{
    (void)state;
    check_fail_policy(BAD_TOO_MANY_PIXELS_JPEG, 6, COORDL_ERR_CORRUPT);
}

static void test_fail_too_many_pixels_png_is_corrupt(void **state)
{
    (void)state;
    check_fail_policy(BAD_TOO_MANY_PIXELS_PNG, 6, COORDL_ERR_CORRUPT);
}

static void test_fail_file_over_max_item_bytes_is_corrupt(void **state)
{
    (void)state;
    check_fail_policy(BAD_TOO_MANY_BYTES, 10, COORDL_ERR_CORRUPT);
}

static void test_fail_file_deleted_after_open_is_io(void **state)
{
    (void)state;
    /* last batch: with 2 ring slots the workers cannot have read it yet */
    check_fail_policy(BAD_DELETED, 14, COORDL_ERR_IO);
}

/* ---- COORDL_BAD_SUBSTITUTE -------------------------------------------- */

static coordl_config substitute_config(const bad_tree *t, bad_kind kind,
                                       int threads, tu_log_record *rec)
{
    coordl_config cfg = bad_config(t, kind);
    cfg.shuffle = 1;
    cfg.seed = 31;
    cfg.threads = threads;
    cfg.prefetch_batches = 1;
    cfg.on_bad_sample = COORDL_BAD_SUBSTITUTE;
    cfg.log = tu_log_record_fn;
    cfg.log_user = rec;
    return cfg;
}

/* shuffle = 1, 3 epochs, into *run. BAD_DELETED: the file exists at open
 * (it is indexed) and is removed right after. */
static void run_substitute(const bad_tree *t, bad_kind kind, int threads,
                           tu_run *run, tu_log_record *rec, coordl_stats *st,
                           uint64_t per_epoch_bad[3])
{
    coordl_config cfg = substitute_config(t, kind, threads, rec);
    size_t saved_n = 0;
    uint8_t *saved = NULL;
    if (kind == BAD_DELETED)
        saved = tu_read_file(t->bad_path, &saved_n);
    coordl *L = tu_open(&cfg);
    if (kind == BAD_DELETED)
        assert_int_equal(unlink(t->bad_path), 0);
    memset(run, 0, sizeof *run);
    coordl_status rc = tu_run_epochs(L, 3, run);
    if (rc != COORDL_OK)
        fail_msg("substitute run: status %d: %s", (int)rc, coordl_errmsg(L));
    coordl_get_stats(L, st);
    for (uint64_t e = 0; e < 3; e++) {
        coordl_epoch_stats es;
        assert_int_equal(coordl_get_epoch_stats(L, e, &es), COORDL_OK);
        per_epoch_bad[e] = es.bad_samples;
    }
    coordl_close(L);
    if (kind == BAD_DELETED) { /* put it back for the next run */
        tu_write_file(t->bad_path, saved, saved_n);
        free(saved);
    }
}

/* The id at position `pos` of epoch 0 under the substitute config (the
 * permutation does not depend on file contents). */
static uint64_t id_at_epoch0_position(const bad_tree *t, bad_kind kind, size_t pos)
{
    coordl_config cfg = substitute_config(t, kind, 2, NULL);
    cfg.log = tu_log_quiet;
    coordl *L = tu_open(&cfg);
    tu_run run = {0};
    assert_int_equal(tu_run_epochs(L, 1, &run), COORDL_OK);
    assert_true(pos < run.nrows);
    uint64_t id = run.ids[pos];
    tu_run_free(&run);
    coordl_close(L);
    return id;
}

static void check_substitute_policy(bad_kind kind, uint64_t bad_id)
{
    bad_tree t = make_bad_tree(kind, bad_id);
    if (kind == BAD_DELETED) {
        /* the workers start on batch 0 at open (one ring slot): delete an
         * item of the last batch of epoch 0, which cannot have been read */
        t.bad_id = id_at_epoch0_position(&t, kind, N_ITEMS - 1);
        free(t.bad_path);
        t.bad_path = tu_folder_file(t.root, &SPEC, (int)(t.bad_id / 8),
                                    (int)(t.bad_id % 8));
        t.bad_name = strrchr(t.bad_path, '/') + 1;
    }
    tu_log_record *rec = tu_log_record_new();
    tu_run a, b;
    coordl_stats sa, sb;
    uint64_t bad_a[3], bad_b[3];
    run_substitute(&t, kind, 2, &a, rec, &sa, bad_a);
    run_substitute(&t, kind, 4, &b, rec, &sb, bad_b);
    for (int r = 0; r < 2; r++) {
        const tu_run *run = r ? &b : &a;
        assert_int_equal(run->nbatches, 3 * N_ITEMS / BATCH);
        for (size_t i = 0; i < run->nbatches; i++)
            assert_int_equal(run->n[i], BATCH); /* every batch full */
        assert_int_equal(run->nrows, 3 * N_ITEMS);
        for (uint64_t e = 0; e < 3; e++)
            assert_int_equal(tu_run_count_id(run, e, t.bad_id), 0);
        for (size_t i = 0; i < run->nrows; i++)
            assert_true(run->ids[i] < N_ITEMS);
    }
    /* the bad item is drawn once per epoch: one substitution each */
    for (int e = 0; e < 3; e++) {
        assert_int_equal(bad_a[e], 1);
        assert_int_equal(bad_b[e], 1);
    }
    assert_true(sa.bad_samples >= 3); /* epoch 3 may have started */
    /* the same substitute in every run, whatever the thread count */
    assert_memory_equal(a.hash, b.hash, a.nbatches * sizeof *a.hash);
    if (!tu_log_contains(rec, t.bad_name))
        fail_msg("no log message names %s (%d messages)", t.bad_name,
                 tu_log_count(rec));
    tu_run_free(&a);
    tu_run_free(&b);
    tu_log_record_free(rec);
    free_bad_tree(&t);
}

static void test_substitute_truncated_jpeg(void **state)
{
    (void)state;
    check_substitute_policy(BAD_TRUNCATED_JPEG, 5);
}

static void test_substitute_empty_file(void **state)
{
    (void)state;
    check_substitute_policy(BAD_EMPTY, 12);
}

static void test_substitute_garbage_bytes(void **state)
{
    (void)state;
    check_substitute_policy(BAD_GARBAGE, 0);
}

static void test_substitute_text_named_jpg(void **state)
{
    (void)state;
    check_substitute_policy(BAD_TEXT_AS_JPG, 15);
}

static void test_substitute_too_many_pixels(void **state)
{
    (void)state;
    check_substitute_policy(BAD_TOO_MANY_PIXELS_JPEG, 3);
}

static void test_substitute_file_over_max_item_bytes(void **state)
{
    (void)state;
    check_substitute_policy(BAD_TOO_MANY_BYTES, 8);
}

static void test_substitute_deleted_file(void **state)
{
    (void)state;
    check_substitute_policy(BAD_DELETED, 7);
}

static void test_substitute_every_item_bad_fails_without_hanging(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "allbad");
    for (int j = 0; j < 6; j++) {
        char *p = tu_join(root, "k/x%d.jpg", j);
        tu_write_file(p, "bad", 3);
        free(p);
    }
    coordl_config cfg = tu_config(root);
    cfg.batch_size = 3;
    cfg.on_bad_sample = COORDL_BAD_SUBSTITUTE;
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    /* nothing can stand in: the batch fails, and so does the next */
    assert_int_equal(coordl_next(L, &b), COORDL_ERR_CORRUPT);
    assert_true(strlen(coordl_errmsg(L)) > 0);
    /* says that the policy was on and that no substitute decoded */
    if (!strstr(coordl_errmsg(L), "on_bad_sample = COORDL_BAD_SUBSTITUTE") ||
        !strstr(coordl_errmsg(L), "substitute items decoded"))
        fail_msg("message \"%s\" does not say that no substitute decoded", coordl_errmsg(L));
    assert_int_equal(coordl_next(L, &b), COORDL_ERR_CORRUPT);
    assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    coordl_close(L);
    tu_rmtree(root);
    free(root);
}

static void test_bad_sample_does_not_disturb_other_rows(void **state)
{
    (void)state;
    /* with SUBSTITUTE and shuffle off, every batch that does not hold the
     * bad item is byte-identical to the same batch of a clean tree */
    bad_tree t = make_bad_tree(BAD_GARBAGE, 9);
    char *clean = tu_join(g_dir, "clean");
    tu_make_image_folder(clean, &SPEC);
    coordl_config cfg = bad_config(&t, BAD_GARBAGE);
    cfg.shuffle = 0;
    cfg.on_bad_sample = COORDL_BAD_SUBSTITUTE;
    tu_run bad = {0}, good = {0};
    coordl *L = tu_open(&cfg);
    assert_int_equal(tu_run_epochs(L, 1, &bad), COORDL_OK);
    coordl_close(L);
    cfg.source = clean;
    L = tu_open(&cfg);
    assert_int_equal(tu_run_epochs(L, 1, &good), COORDL_OK);
    coordl_close(L);
    assert_int_equal(bad.nbatches, 4);
    assert_int_equal(good.nbatches, 4);
    for (size_t i = 0; i < 4; i++) {
        if (i == 9 / BATCH)
            assert_int_not_equal(bad.hash[i], good.hash[i]);
        else
            assert_int_equal(bad.hash[i], good.hash[i]);
    }
    /* in the bad batch, only row 1 changed its id */
    for (size_t r = 0; r < 16; r++)
        if (r != 9)
            assert_int_equal(bad.ids[r], r);
    assert_int_not_equal(bad.ids[9], 9);
    tu_run_free(&bad);
    tu_run_free(&good);
    tu_rmtree(clean);
    free(clean);
    free_bad_tree(&t);
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fail_truncated_jpeg_is_corrupt_naming_file),
        cmocka_unit_test(test_fail_truncated_png_is_corrupt_naming_file),
        cmocka_unit_test(test_fail_empty_file_is_corrupt_naming_file),
        cmocka_unit_test(test_fail_garbage_bytes_is_corrupt_naming_file),
        cmocka_unit_test(test_fail_text_named_jpg_is_corrupt_naming_file),
        cmocka_unit_test(test_fail_too_many_pixels_jpeg_is_corrupt),
        cmocka_unit_test(test_fail_too_many_pixels_png_is_corrupt),
        cmocka_unit_test(test_fail_file_over_max_item_bytes_is_corrupt),
        cmocka_unit_test(test_fail_file_deleted_after_open_is_io),
        cmocka_unit_test(test_substitute_truncated_jpeg),
        cmocka_unit_test(test_substitute_empty_file),
        cmocka_unit_test(test_substitute_garbage_bytes),
        cmocka_unit_test(test_substitute_text_named_jpg),
        cmocka_unit_test(test_substitute_too_many_pixels),
        cmocka_unit_test(test_substitute_file_over_max_item_bytes),
        cmocka_unit_test(test_substitute_deleted_file),
        cmocka_unit_test(test_substitute_every_item_bad_fails_without_hanging),
        cmocka_unit_test(test_bad_sample_does_not_disturb_other_rows),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
