/*
 * test_api.c - version, status strings, config defaults, configurations
 * that coordl_open must refuse, and the batch protocol of coordl_next /
 * coordl_release (end of epoch, held batches, shapes, hooks).
 */
#include "test_util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *g_dir;     /* temp root */
static char *g_images;  /* ImageFolder: 2 classes x 10 images of 20x20 */
static char *g_empty;   /* an empty directory */
static char *g_noimg;   /* class folders holding only non-image files */
static const tu_folder_spec g_spec = {2, 10, 20, 20, 0, TU_PAT_TEXTURED,
                                      TU_FMT_JPEG, 90, 7};

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    g_images = tu_join(g_dir, "images");
    tu_make_image_folder(g_images, &g_spec);
    g_empty = tu_join(g_dir, "empty");
    tu_mkdirs(g_empty);
    g_noimg = tu_join(g_dir, "noimg");
    char *t1 = tu_join(g_noimg, "cls_a/readme.txt");
    char *t2 = tu_join(g_noimg, "cls_b/data.csv");
    tu_write_file(t1, "hello\n", 6);
    tu_write_file(t2, "1,2,3\n", 6);
    free(t1);
    free(t2);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_images);
    free(g_empty);
    free(g_noimg);
    return 0;
}

/* ---- version and strings --------------------------------------------- */

static void test_libversion_matches_header(void **state)
{
    (void)state;
    assert_int_equal(coordl_libversion_number(), COORDL_VERSION_NUMBER);
    assert_int_equal(COORDL_VERSION_NUMBER,
                     COORDL_VERSION_MAJOR * 1000000 +
                         COORDL_VERSION_MINOR * 1000 + COORDL_VERSION_PATCH);
}

static void test_strerror_distinct_nonempty_for_every_code(void **state)
{
    (void)state;
    static const coordl_status codes[] = {
        COORDL_OK,          COORDL_END_OF_EPOCH, COORDL_ERR_INVALID,
        COORDL_ERR_NOMEM,   COORDL_ERR_IO,       COORDL_ERR_CORRUPT,
        COORDL_ERR_GROUP,   COORDL_ERR_PEER,     COORDL_ERR_TIMEOUT,
        COORDL_ERR_UNSUPPORTED};
    size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        const char *s = coordl_strerror(codes[i]);
        assert_non_null(s);
        assert_true(strlen(s) > 0);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(s, coordl_strerror(codes[j]));
    }
    /* the strings come from the header's one list */
    assert_string_equal(coordl_strerror(COORDL_ERR_IO), "I/O error");
    assert_string_equal(coordl_strerror(COORDL_END_OF_EPOCH), "end of epoch");
}

static void test_strerror_unknown_code_is_not_null(void **state)
{
    (void)state;
    const char *s = coordl_strerror((coordl_status)12345);
    assert_non_null(s);
    assert_true(strlen(s) > 0);
}

/* ---- config defaults -------------------------------------------------- */

static void test_config_default_values_match_header(void **state)
{
    (void)state;
    coordl_config c = coordl_config_default();
    assert_null(c.source);
    assert_int_equal(c.pipeline, COORDL_PIPE_TRAIN);
    assert_int_equal(c.batch_size, 32);
    assert_int_equal(c.drop_last, 0);
    assert_int_equal(c.shuffle, 1);
    assert_int_equal(c.seed, 0);
    assert_int_equal(c.out_w, 224);
    assert_int_equal(c.out_h, 224);
    assert_int_equal(c.layout, COORDL_F32_NCHW);
    assert_float_equal(c.mean[0], 0.485, 1e-6);
    assert_float_equal(c.mean[1], 0.456, 1e-6);
    assert_float_equal(c.mean[2], 0.406, 1e-6);
    assert_float_equal(c.std[0], 0.229, 1e-6);
    assert_float_equal(c.std[1], 0.224, 1e-6);
    assert_float_equal(c.std[2], 0.225, 1e-6);
    assert_float_equal(c.scale_min, 0.08, 1e-6);
    assert_float_equal(c.scale_max, 1.0, 1e-6);
    assert_float_equal(c.ratio_min, 3.0 / 4.0, 1e-6);
    assert_float_equal(c.ratio_max, 4.0 / 3.0, 1e-6);
    assert_int_equal(c.flip, 1);
    assert_int_equal(c.cache_bytes, 0);
    assert_int_equal(c.cache_policy, COORDL_CACHE_MINIO);
    assert_int_equal(c.cache_pin, COORDL_PIN_TRY);
    assert_int_equal(c.threads, 0);
    assert_int_equal(c.prefetch_batches, 4);
    assert_int_equal(c.rank, 0);
    assert_int_equal(c.world, 1);
    assert_int_equal(c.on_bad_sample, COORDL_BAD_FAIL);
    assert_int_equal(c.max_pixels, 100000000ULL);
    assert_int_equal(c.max_item_bytes, 256ULL << 20);
    assert_int_equal(c.log_level, COORDL_LOG_WARN);
    assert_null(c.allocator.malloc_fn);
    assert_null(c.allocator.realloc_fn);
    assert_null(c.allocator.free_fn);
    assert_null(c.pin);
}

/* ---- configurations coordl_open must refuse -------------------------- */

/* Opens cfg, expects COORDL_ERR_INVALID, a NULL handle, and an error
 * message (coordl_errmsg(NULL)) that contains `field`. */
static void expect_open_invalid(const coordl_config *cfg, const char *field)
{
    coordl *L = (coordl *)(uintptr_t)1; /* must be overwritten with NULL */
    coordl_status rc = coordl_open(cfg, &L);
    const char *msg = coordl_errmsg(NULL);
    assert_int_equal(rc, COORDL_ERR_INVALID);
    assert_null(L);
    assert_non_null(msg);
    assert_true(strlen(msg) > 0);
    if (field && !strstr(msg, field))
        fail_msg("error message \"%s\" does not name \"%s\"", msg, field);
}

static void test_open_null_config_is_invalid(void **state)
{
    (void)state;
    coordl *L = (coordl *)(uintptr_t)1;
    assert_int_equal(coordl_open(NULL, &L), COORDL_ERR_INVALID);
    assert_null(L);
    assert_true(strlen(coordl_errmsg(NULL)) > 0);
}

static void test_open_null_out_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    assert_int_equal(coordl_open(&cfg, NULL), COORDL_ERR_INVALID);
    assert_true(strlen(coordl_errmsg(NULL)) > 0);
}

static void test_open_missing_source_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(NULL);
    expect_open_invalid(&cfg, "source");
}

static void test_open_empty_source_string_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config("");
    expect_open_invalid(&cfg, "source");
}

static void test_open_nonexistent_path_fails_naming_it(void **state)
{
    (void)state;
    char *path = tu_join(g_dir, "does-not-exist");
    coordl_config cfg = tu_config(path);
    coordl *L = (coordl *)(uintptr_t)1;
    coordl_status rc = coordl_open(&cfg, &L);
    assert_true(rc == COORDL_ERR_INVALID || rc == COORDL_ERR_IO);
    assert_null(L);
    const char *msg = coordl_errmsg(NULL);
    if (!strstr(msg, "does-not-exist") && !strstr(msg, "source"))
        fail_msg("error message \"%s\" names neither path nor source", msg);
    free(path);
}

static void test_open_empty_directory_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_empty);
    expect_open_invalid(&cfg, "source");
    assert_non_null(strstr(coordl_errmsg(NULL), g_empty)); /* names the path */
}

static void test_open_directory_without_images_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_noimg);
    expect_open_invalid(&cfg, "source");
    assert_non_null(strstr(coordl_errmsg(NULL), g_noimg));
}

static void test_open_batch_size_zero_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.batch_size = 0;
    expect_open_invalid(&cfg, "batch_size");
}

static void test_open_out_w_zero_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.out_w = 0;
    expect_open_invalid(&cfg, "out_w");
}

static void test_open_out_h_zero_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.out_h = 0;
    expect_open_invalid(&cfg, "out_h");
}

static void test_open_rank_not_below_world_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.world = 2;
    cfg.rank = 2;
    expect_open_invalid(&cfg, "rank");
}

static void test_open_negative_rank_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.world = 2;
    cfg.rank = -1;
    expect_open_invalid(&cfg, "rank");
}

static void test_open_world_zero_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.world = 0;
    cfg.rank = 0;
    expect_open_invalid(&cfg, "world");
}

static void test_open_scale_min_above_max_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.scale_min = 0.9f;
    cfg.scale_max = 0.5f;
    expect_open_invalid(&cfg, "scale");
}

static void test_open_scale_min_not_positive_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.scale_min = 0.0f;
    expect_open_invalid(&cfg, "scale");
    cfg.scale_min = -0.5f;
    expect_open_invalid(&cfg, "scale");
}

static void test_open_ratio_min_above_max_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.ratio_min = 2.0f;
    cfg.ratio_max = 1.0f;
    expect_open_invalid(&cfg, "ratio");
}

static void test_open_prefetch_zero_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.prefetch_batches = 0;
    expect_open_invalid(&cfg, "prefetch_batches");
}

static void test_open_std_zero_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.layout = COORDL_F32_NCHW;
    cfg.std[1] = 0.0f;
    expect_open_invalid(&cfg, "std");
}

static void test_open_drop_last_share_below_batch_is_invalid(void **state)
{
    (void)state;
    /* 20 items, batch 32 with drop_last: an epoch would have no batch */
    coordl_config cfg = tu_config(g_images);
    cfg.batch_size = 32;
    cfg.drop_last = 1;
    expect_open_invalid(&cfg, "batch_size");
}

static void test_open_world_larger_than_dataset_is_invalid(void **state)
{
    (void)state;
    /* 20 items over 32 ranks: floor(20 / 32) = 0 items per rank; the
     * message must point at world (drop_last is off, batch_size is fine) */
    coordl_config cfg = tu_config(g_images);
    cfg.batch_size = 1;
    cfg.world = 32;
    cfg.rank = 31;
    expect_open_invalid(&cfg, "world");
    assert_null(strstr(coordl_errmsg(NULL), "drop_last"));
}

static void test_open_error_message_is_per_failed_open(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.batch_size = 0;
    expect_open_invalid(&cfg, "batch_size");
    cfg = tu_config(g_images);
    cfg.out_h = 0;
    expect_open_invalid(&cfg, "out_h");
    /* the second failure replaced the first message */
    assert_null(strstr(coordl_errmsg(NULL), "batch_size"));
}

static void test_close_null_is_noop(void **state)
{
    (void)state;
    coordl_close(NULL);
}

/* ---- the batch protocol ------------------------------------------------ */

static void test_open_reports_items_classes_and_batches(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.batch_size = 6; /* 20 items: 6 6 6 2 */
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 20);
    assert_int_equal(coordl_num_classes(L), 2);
    assert_int_equal(coordl_batches_per_epoch(L), 4);
    assert_string_equal(coordl_errmsg(L), "");
    coordl_close(L);
    cfg.drop_last = 1;
    L = tu_open(&cfg);
    assert_int_equal(coordl_batches_per_epoch(L), 3);
    coordl_close(L);
}

static void test_open_copies_source_string(void **state)
{
    (void)state;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", g_images);
    coordl_config cfg = tu_config(buf);
    coordl *L = tu_open(&cfg);
    memset(buf, 'x', strlen(buf)); /* the caller's string is gone */
    char *expect = tu_join(g_images, "class_000/img_00000.jpg");
    assert_string_equal(coordl_item_path(L, 0), expect);
    tu_run run = {0};
    assert_int_equal(tu_run_epochs(L, 1, &run), COORDL_OK);
    assert_int_equal(run.nrows, 20);
    tu_run_free(&run);
    free(expect);
    coordl_close(L);
}

static void test_end_of_epoch_returned_once_then_next_epoch_starts(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.batch_size = 8; /* 8 8 4 */
    cfg.shuffle = 0;
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    for (uint64_t e = 0; e < 3; e++) {
        for (uint64_t i = 0; i < 3; i++) {
            assert_int_equal(coordl_next(L, &b), COORDL_OK);
            assert_int_equal(b.epoch, e);
            assert_int_equal(b.index, i);
            assert_int_equal(b.n, i < 2 ? 8 : 4);
            coordl_release(L, &b);
        }
        b.n = 99;
        assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
        assert_int_equal(b.n, 0);
    }
    coordl_close(L);
}

static void test_batch_shape_and_bytes_per_layout(void **state)
{
    (void)state;
    static const struct {
        coordl_layout layout;
        size_t elem;
    } cases[] = {{COORDL_F32_NCHW, 4},
                 {COORDL_U8_NHWC, 1},
                 {COORDL_F32_NHWC, 4},
                 {COORDL_U8_NCHW, 1}};
    for (size_t k = 0; k < 4; k++) {
        coordl_config cfg = tu_config(g_images);
        cfg.layout = cases[k].layout;
        cfg.out_w = 24;
        cfg.out_h = 12;
        cfg.batch_size = 5;
        coordl *L = tu_open(&cfg);
        coordl_batch b;
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        assert_int_equal(b.n, 5);
        assert_int_equal(b.c, 3);
        assert_int_equal(b.h, 12);
        assert_int_equal(b.w, 24);
        assert_int_equal(b.layout, cases[k].layout);
        assert_int_equal(b.data_bytes, 5 * 3 * 12 * 24 * cases[k].elem);
        assert_non_null(b.data);
        assert_non_null(b.labels);
        assert_non_null(b.ids);
        for (uint32_t i = 0; i < b.n; i++) {
            assert_true(b.ids[i] < 20);
            assert_int_equal(b.labels[i], coordl_item_label(L, b.ids[i]));
        }
        coordl_release(L, &b);
        coordl_close(L);
    }
}

static void test_holding_more_than_prefetch_batches_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.batch_size = 2; /* 10 batches per epoch */
    cfg.prefetch_batches = 2;
    cfg.shuffle = 0;
    coordl *L = tu_open(&cfg);
    coordl_batch a, b, c;
    assert_int_equal(coordl_next(L, &a), COORDL_OK);
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_int_equal(coordl_next(L, &c), COORDL_ERR_INVALID);
    /* both held batches are still intact views */
    assert_int_equal(a.index, 0);
    assert_int_equal(b.index, 1);
    assert_int_equal(a.ids[0], 0);
    assert_int_equal(b.ids[0], 2);
    /* releasing out of order frees a slot; the refused call lost nothing */
    coordl_release(L, &b);
    assert_int_equal(coordl_next(L, &c), COORDL_OK);
    assert_int_equal(c.index, 2);
    assert_int_equal(c.ids[0], 4);
    coordl_release(L, &a);
    coordl_release(L, &c);
    coordl_close(L);
}

static void test_release_twice_and_zeroed_batch_are_noops(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.batch_size = 4; /* 5 batches */
    cfg.prefetch_batches = 2;
    cfg.shuffle = 0;
    coordl *L = tu_open(&cfg);
    coordl_batch zero;
    memset(&zero, 0, sizeof zero);
    coordl_release(L, &zero);
    coordl_batch held, b;
    assert_int_equal(coordl_next(L, &held), COORDL_OK);
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    coordl_release(L, &b);
    coordl_release(L, &b); /* no-op: must not free a second slot */
    /* the held batch keeps its content while the ring turns */
    assert_int_equal(held.index, 0);
    uint64_t h0 = tu_batch_hash(&held);
    for (uint64_t i = 2; i < 5; i++) {
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        assert_int_equal(b.index, i);
        coordl_release(L, &b);
    }
    assert_int_equal(tu_batch_hash(&held), h0);
    assert_int_equal(held.ids[0], 0);
    coordl_release(L, &held);
    assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    coordl_close(L);
}

static void test_next_null_batch_is_invalid(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_next(L, NULL), COORDL_ERR_INVALID);
    coordl_batch b;
    assert_int_equal(coordl_next(NULL, &b), COORDL_ERR_INVALID);
    /* the stream is not disturbed */
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_int_equal(b.index, 0);
    coordl_release(L, &b);
    coordl_close(L);
}

static void test_close_with_held_batches_and_mid_epoch(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.batch_size = 2;
    cfg.prefetch_batches = 3;
    coordl *L = tu_open(&cfg);
    coordl_batch a, b;
    assert_int_equal(coordl_next(L, &a), COORDL_OK);
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    coordl_close(L); /* ASan/LSan check: no leak, no use after free */
    /* a loader closed right after open, before any next */
    L = tu_open(&cfg);
    coordl_close(L);
}

static void test_stats_count_batches_items_and_threads(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.batch_size = 8;
    cfg.threads = 3;
    coordl *L = tu_open(&cfg);
    tu_run run = {0};
    assert_int_equal(tu_run_epochs(L, 2, &run), COORDL_OK);
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_int_equal(st.batches, 6);
    assert_true(st.items >= 40); /* workers may have prepared ahead */
    assert_int_equal(st.threads, 3);
    assert_int_equal(st.dataset_bytes, tu_tree_bytes(g_images));
    assert_int_equal(st.bad_samples, 0);
    coordl_epoch_stats es;
    assert_int_equal(coordl_get_epoch_stats(L, 0, &es), COORDL_OK);
    assert_int_equal(es.epoch, 0);
    assert_int_equal(es.items, 20);
    assert_int_equal(es.fetch_bytes, st.dataset_bytes);
    assert_int_equal(coordl_get_epoch_stats(L, 1000, &es), COORDL_ERR_INVALID);
    tu_run_free(&run);
    coordl_close(L);
}

static void test_epoch_stats_keep_last_16_epochs(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.batch_size = 20; /* one batch per epoch */
    cfg.prefetch_batches = 1; /* the workers run at most one epoch ahead */
    coordl *L = tu_open(&cfg);
    tu_run run = {0};
    assert_int_equal(tu_run_epochs(L, 18, &run), COORDL_OK);
    coordl_epoch_stats es;
    /* 18 epochs done (epoch 18 may have started): the last 16 kept are
     * 2..17 or 3..18, so 5 and 17 are kept and 0 and 1 are gone (with the
     * default ring of 4 one-batch epochs the workers could be at epoch 21,
     * and epoch 5 gone: a slow consumer under ASan saw it) */
    assert_int_equal(coordl_get_epoch_stats(L, 17, &es), COORDL_OK);
    assert_int_equal(es.epoch, 17);
    assert_int_equal(es.items, 20);
    assert_int_equal(coordl_get_epoch_stats(L, 5, &es), COORDL_OK);
    assert_int_equal(es.epoch, 5);
    assert_int_equal(es.items, 20);
    assert_int_equal(coordl_get_epoch_stats(L, 0, &es), COORDL_ERR_INVALID);
    assert_int_equal(coordl_get_epoch_stats(L, 1, &es), COORDL_ERR_INVALID);
    tu_run_free(&run);
    coordl_close(L);
}

static void test_item_queries_out_of_range(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    coordl *L = tu_open(&cfg);
    assert_null(coordl_item_path(L, 20));
    assert_null(coordl_item_path(L, UINT64_MAX));
    assert_int_equal(coordl_item_label(L, 20), -1);
    assert_non_null(coordl_item_path(L, 19));
    assert_int_equal(coordl_item_label(L, 19), 1);
    coordl_close(L);
}

/* ---- hooks --------------------------------------------------------------- */

typedef struct {
    pthread_mutex_t mu;
    long live, calls;
    int bad_free;
} counting_alloc;

#define ALLOC_MAGIC 0xC0D1A110CULL
#define ALLOC_HEAD 16

static void *ca_malloc(void *user, size_t n)
{
    counting_alloc *a = user;
    uint8_t *p = malloc(n + ALLOC_HEAD);
    if (!p)
        return NULL;
    uint64_t m = ALLOC_MAGIC;
    memcpy(p, &m, sizeof m);
    pthread_mutex_lock(&a->mu);
    a->live++;
    a->calls++;
    pthread_mutex_unlock(&a->mu);
    return p + ALLOC_HEAD;
}

static void ca_free(void *user, void *ptr)
{
    counting_alloc *a = user;
    if (!ptr)
        return;
    uint8_t *p = (uint8_t *)ptr - ALLOC_HEAD;
    uint64_t m;
    memcpy(&m, p, sizeof m);
    pthread_mutex_lock(&a->mu);
    if (m != ALLOC_MAGIC)
        a->bad_free++;
    a->live--;
    pthread_mutex_unlock(&a->mu);
    m = 0;
    memcpy(p, &m, sizeof m);
    free(p);
}

static void *ca_realloc(void *user, void *ptr, size_t n)
{
    counting_alloc *a = user;
    if (!ptr)
        return ca_malloc(user, n);
    uint8_t *p = (uint8_t *)ptr - ALLOC_HEAD;
    uint64_t m;
    memcpy(&m, p, sizeof m);
    if (m != ALLOC_MAGIC) {
        pthread_mutex_lock(&a->mu);
        a->bad_free++;
        pthread_mutex_unlock(&a->mu);
        return NULL;
    }
    uint8_t *q = realloc(p, n + ALLOC_HEAD);
    if (!q)
        return NULL;
    pthread_mutex_lock(&a->mu);
    a->calls++;
    pthread_mutex_unlock(&a->mu);
    return q + ALLOC_HEAD;
}

static void test_allocator_hooks_are_used_and_balanced(void **state)
{
    (void)state;
    counting_alloc a;
    memset(&a, 0, sizeof a);
    pthread_mutex_init(&a.mu, NULL);
    coordl_config cfg = tu_config(g_images);
    cfg.allocator.malloc_fn = ca_malloc;
    cfg.allocator.realloc_fn = ca_realloc;
    cfg.allocator.free_fn = ca_free;
    cfg.allocator.user = &a;
    coordl *L = tu_open(&cfg);
    tu_run run = {0};
    assert_int_equal(tu_run_epochs(L, 1, &run), COORDL_OK);
    coordl_close(L);
    tu_run_free(&run);
    assert_true(a.calls > 0);
    assert_int_equal(a.live, 0);
    assert_int_equal(a.bad_free, 0);
    pthread_mutex_destroy(&a.mu);
}

static void test_partial_allocator_hooks_are_invalid(void **state)
{
    (void)state;
    counting_alloc a;
    memset(&a, 0, sizeof a);
    coordl_config cfg = tu_config(g_images);
    cfg.allocator.malloc_fn = ca_malloc; /* "all three or none" */
    cfg.allocator.user = &a;
    expect_open_invalid(&cfg, "alloc");
}

typedef struct {
    int reg, unreg;
    void *addr[16];
    size_t bytes[16];
    int matched;
} pin_log;

static int pin_cb(void *user, void *addr, size_t bytes, int register_it)
{
    pin_log *p = user;
    if (register_it) {
        if (p->reg < 16) {
            p->addr[p->reg] = addr;
            p->bytes[p->reg] = bytes;
        }
        p->reg++;
    } else {
        for (int i = 0; i < p->reg && i < 16; i++)
            if (p->addr[i] == addr && p->bytes[i] == bytes)
                p->matched++;
        p->unreg++;
    }
    return 0;
}

static void test_pin_callback_registers_cache_and_ring_once_each(void **state)
{
    (void)state;
    pin_log p;
    memset(&p, 0, sizeof p);
    coordl_config cfg = tu_config(g_images);
    cfg.cache_bytes = 1 << 20;
    cfg.cache_pin = COORDL_PIN_OFF;
    cfg.pin = pin_cb;
    cfg.pin_user = &p;
    coordl *L = tu_open(&cfg);
    assert_int_equal(p.reg, 2); /* cache slab + batch ring */
    assert_int_equal(p.unreg, 0);
    for (int i = 0; i < 2; i++) {
        assert_non_null(p.addr[i]);
        assert_true(p.bytes[i] > 0);
    }
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_int_equal(st.pinned_bytes, 0); /* PIN_OFF: nothing locked */
    assert_int_equal(st.cache_bytes_budget, 1 << 20);
    coordl_close(L);
    assert_int_equal(p.unreg, 2);
    assert_int_equal(p.matched, 2); /* same addr and size as registered */
}

static void test_log_callback_receives_message_naming_bad_file(void **state)
{
    (void)state;
    /* an undecodable file in an otherwise good tree: a substituted bad
     * sample is logged at WARN or ERROR, so it passes the default level */
    char *root = tu_join(g_dir, "logtree");
    tu_folder_spec spec = g_spec;
    spec.per_class = 4;
    tu_make_image_folder(root, &spec);
    char *bad = tu_folder_file(root, &spec, 0, 1);
    tu_write_file(bad, "not an image", 12);
    tu_log_record *rec = tu_log_record_new();
    coordl_config cfg = tu_config(root);
    cfg.on_bad_sample = COORDL_BAD_SUBSTITUTE;
    cfg.log = tu_log_record_fn;
    cfg.log_user = rec;
    coordl *L = tu_open(&cfg);
    tu_run run = {0};
    assert_int_equal(tu_run_epochs(L, 1, &run), COORDL_OK);
    coordl_close(L);
    assert_true(tu_log_contains(rec, "img_00001.jpg"));
    tu_log_record_free(rec);
    tu_run_free(&run);
    tu_rmtree(root);
    free(root);
    free(bad);
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_libversion_matches_header),
        cmocka_unit_test(test_strerror_distinct_nonempty_for_every_code),
        cmocka_unit_test(test_strerror_unknown_code_is_not_null),
        cmocka_unit_test(test_config_default_values_match_header),
        cmocka_unit_test(test_open_null_config_is_invalid),
        cmocka_unit_test(test_open_null_out_is_invalid),
        cmocka_unit_test(test_open_missing_source_is_invalid),
        cmocka_unit_test(test_open_empty_source_string_is_invalid),
        cmocka_unit_test(test_open_nonexistent_path_fails_naming_it),
        cmocka_unit_test(test_open_empty_directory_is_invalid),
        cmocka_unit_test(test_open_directory_without_images_is_invalid),
        cmocka_unit_test(test_open_batch_size_zero_is_invalid),
        cmocka_unit_test(test_open_out_w_zero_is_invalid),
        cmocka_unit_test(test_open_out_h_zero_is_invalid),
        cmocka_unit_test(test_open_rank_not_below_world_is_invalid),
        cmocka_unit_test(test_open_negative_rank_is_invalid),
        cmocka_unit_test(test_open_world_zero_is_invalid),
        cmocka_unit_test(test_open_scale_min_above_max_is_invalid),
        cmocka_unit_test(test_open_scale_min_not_positive_is_invalid),
        cmocka_unit_test(test_open_ratio_min_above_max_is_invalid),
        cmocka_unit_test(test_open_prefetch_zero_is_invalid),
        cmocka_unit_test(test_open_std_zero_is_invalid),
        cmocka_unit_test(test_open_drop_last_share_below_batch_is_invalid),
        cmocka_unit_test(test_open_world_larger_than_dataset_is_invalid),
        cmocka_unit_test(test_open_error_message_is_per_failed_open),
        cmocka_unit_test(test_close_null_is_noop),
        cmocka_unit_test(test_open_reports_items_classes_and_batches),
        cmocka_unit_test(test_open_copies_source_string),
        cmocka_unit_test(test_end_of_epoch_returned_once_then_next_epoch_starts),
        cmocka_unit_test(test_batch_shape_and_bytes_per_layout),
        cmocka_unit_test(test_holding_more_than_prefetch_batches_is_invalid),
        cmocka_unit_test(test_release_twice_and_zeroed_batch_are_noops),
        cmocka_unit_test(test_next_null_batch_is_invalid),
        cmocka_unit_test(test_close_with_held_batches_and_mid_epoch),
        cmocka_unit_test(test_stats_count_batches_items_and_threads),
        cmocka_unit_test(test_epoch_stats_keep_last_16_epochs),
        cmocka_unit_test(test_item_queries_out_of_range),
        cmocka_unit_test(test_allocator_hooks_are_used_and_balanced),
        cmocka_unit_test(test_partial_allocator_hooks_are_invalid),
        cmocka_unit_test(test_pin_callback_registers_cache_and_ring_once_each),
        cmocka_unit_test(test_log_callback_receives_message_naming_bad_file),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
