/* SPDX-License-Identifier: MIT */
/*
 * test_channels.c - grey rows (config field channels) and the exact
 * pipeline (COORDL_PIPE_EXACT):
 *   channels = 1: every row of a batch is the BT.601 luma of the same row
 *     of the RGB batch of the same run, byte for byte, for the train crop
 *     with colour jitter and rotation, Darknet's crop and the eval
 *     pipeline, JPEG and PNG sources; float layouts hold that luma
 *     normalized with mean[0] and std[0], bit for bit; the batch says
 *     c = 1 and data_bytes = n x h x w x element size;
 *   coordl_next_into takes the 1-channel size (one byte short is refused,
 *     nothing written or consumed);
 *   channels other than 0, 1, 3, or set for tokens, are refused naming
 *     the field; 0 is reported as 3 by coordl_get_config;
 *   COORDL_PIPE_EXACT: a 28 x 28 grey PNG (and a PGM, and an RGB PNG with
 *     channels = 3, and a 20 x 28 image at out 20 x 28) comes out with its
 *     exact stored bytes, where COORDL_PIPE_EVAL rescales it by 256/224.
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *g_dir;

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

/* The luma the header documents, over 8-bit R, G, B. */
static uint8_t luma(const uint8_t *rgb)
{
    return (uint8_t)((299u * rgb[0] + 587u * rgb[1] + 114u * rgb[2] + 500u) / 1000u);
}

static char *make_folder(const char *name, tu_format fmt)
{
    char *root = tu_join(g_dir, "%s", name);
    tu_folder_spec spec = {.classes = 3, .per_class = 6, .w = 40, .h = 32, .size_jitter = 12,
                           .pattern = TU_PAT_TEXTURED, .format = fmt, .quality = 90, .seed = 7};
    tu_make_image_folder(root, &spec);
    return root;
}

/* One epoch of the config as RGB (U8_NHWC) and as grey (U8_NCHW): every
 * grey row is the luma of the RGB row, byte for byte. Returns the number
 * of rows compared. */
static size_t compare_grey_with_rgb(coordl_config cfg)
{
    coordl_config rgb_cfg = cfg, grey_cfg = cfg;
    rgb_cfg.layout = COORDL_U8_NHWC;
    rgb_cfg.channels = 3;
    grey_cfg.layout = COORDL_U8_NCHW;
    grey_cfg.channels = 1;
    grey_cfg.threads = cfg.threads == 1 ? 2 : 1; /* and another thread count */
    coordl *R = tu_open(&rgb_cfg), *G = tu_open(&grey_cfg);
    size_t rows = 0;
    for (;;) {
        coordl_batch a, b;
        coordl_status ra = coordl_next(R, &a), rb = coordl_next(G, &b);
        assert_int_equal(ra, rb);
        if (ra == COORDL_END_OF_EPOCH) break;
        assert_int_equal(ra, COORDL_OK);
        assert_int_equal(a.n, b.n);
        assert_int_equal(a.c, 3);
        assert_int_equal(b.c, 1);
        assert_int_equal(b.h, a.h);
        assert_int_equal(b.w, a.w);
        const size_t px = (size_t)a.h * a.w;
        assert_int_equal(b.data_bytes, (size_t)b.n * px);
        assert_int_equal(a.data_bytes, (size_t)a.n * px * 3);
        const uint8_t *rgb = a.data, *grey = b.data;
        for (size_t i = 0; i < (size_t)a.n * px; i++)
            if (grey[i] != luma(rgb + 3 * i))
                fail_msg("batch %llu row %zu pixel %zu: grey %u, luma of (%u %u %u) is %u",
                         (unsigned long long)a.index, i / px, i % px, grey[i], rgb[3 * i], rgb[3 * i + 1],
                         rgb[3 * i + 2], luma(rgb + 3 * i));
        assert_memory_equal(a.ids, b.ids, a.n * sizeof(uint64_t));
        assert_memory_equal(a.labels, b.labels, a.n * sizeof(int32_t));
        rows += a.n;
        coordl_release(R, &a);
        coordl_release(G, &b);
    }
    coordl_close(R);
    coordl_close(G);
    return rows;
}

static void test_grey_rows_are_luma_of_rgb_rows_byte_for_byte(void **state)
{
    (void)state;
    char *jpg = make_folder("jpg", TU_FMT_JPEG), *png = make_folder("png", TU_FMT_PNG);
    coordl_config cfg = tu_config(jpg);
    cfg.out_w = 24;
    cfg.out_h = 20;
    cfg.seed = 11;
    cfg.hue = 0.1f;
    cfg.saturation = 1.5f;
    cfg.exposure = 1.5f;
    cfg.rotate_deg = 10.0f;
    assert_int_equal(compare_grey_with_rgb(cfg), 18);
    cfg.source = png;
    assert_int_equal(compare_grey_with_rgb(cfg), 18);
    cfg.train_crop = COORDL_CROP_DARKNET; /* the other resampler */
    cfg.source = jpg;
    assert_int_equal(compare_grey_with_rgb(cfg), 18);
    coordl_config ev = tu_config(jpg);
    ev.pipeline = COORDL_PIPE_EVAL;
    ev.shuffle = 0;
    assert_int_equal(compare_grey_with_rgb(ev), 18);
    /* the cache holds encoded items: a cached grey run gives the same rows */
    cfg.cache_bytes = 1 << 20;
    assert_int_equal(compare_grey_with_rgb(cfg), 18);
    free(jpg);
    free(png);
}

/* Float layouts: the grey value is (float)Y x (1 / (255 std[0])) + (-mean[0]
 * / std[0]), bit for bit, one plane in NCHW and NHWC alike. */
static void test_grey_float_layouts_normalize_the_luma_with_channel_0(void **state)
{
    (void)state;
    char *jpg = tu_join(g_dir, "jpg");
    coordl_config cfg = tu_config(jpg);
    cfg.seed = 5;
    cfg.channels = 1;
    cfg.layout = COORDL_U8_NCHW;
    coordl *U = tu_open(&cfg);
    const coordl_layout floats[2] = {COORDL_F32_NCHW, COORDL_F32_NHWC};
    coordl *F[2];
    for (int k = 0; k < 2; k++) {
        coordl_config f = cfg;
        f.layout = floats[k];
        F[k] = tu_open(&f);
    }
    const float scale = 1.0f / (255.0f * cfg.std[0]), bias = -cfg.mean[0] / cfg.std[0];
    coordl_batch u, b;
    while (coordl_next(U, &u) == COORDL_OK) {
        const size_t n = (size_t)u.n * u.h * u.w;
        float *want = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) want[i] = (float)((const uint8_t *)u.data)[i] * scale + bias;
        for (int k = 0; k < 2; k++) {
            assert_int_equal(coordl_next(F[k], &b), COORDL_OK);
            assert_int_equal(b.c, 1);
            assert_int_equal(b.data_bytes, n * sizeof(float));
            assert_memory_equal(b.data, want, n * sizeof(float));
            coordl_release(F[k], &b);
        }
        free(want);
        coordl_release(U, &u);
    }
    coordl_close(U);
    coordl_close(F[0]);
    coordl_close(F[1]);
    free(jpg);
}

/* coordl_next_into with the 1-channel sizes: B x h x w floats fit, one
 * byte less is refused without writing or consuming, and the bytes are
 * coordl_next's. */
static void test_next_into_takes_one_channel_sizes(void **state)
{
    (void)state;
    char *jpg = tu_join(g_dir, "jpg");
    coordl_config cfg = tu_config(jpg);
    cfg.channels = 1;
    cfg.layout = COORDL_F32_NCHW;
    cfg.batch_size = 6;
    cfg.drop_last = 1;
    coordl *A = tu_open(&cfg), *Z = tu_open(&cfg);
    const size_t bytes = (size_t)6 * 16 * 16 * sizeof(float);
    float *buf = malloc(bytes);
    int32_t labels[6];
    memset(buf, 0xAB, bytes);
    assert_int_equal(coordl_next_into(A, buf, bytes - 1, labels, sizeof labels), COORDL_ERR_INVALID);
    assert_true(strstr(coordl_errmsg(A), "data") != NULL);
    assert_int_equal(((uint8_t *)buf)[0], 0xAB);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(coordl_next_into(A, buf, bytes, labels, sizeof labels), COORDL_OK);
        coordl_batch b;
        assert_int_equal(coordl_next(Z, &b), COORDL_OK);
        assert_int_equal(b.data_bytes, bytes);
        assert_memory_equal(buf, b.data, bytes);
        assert_memory_equal(labels, b.labels, sizeof labels);
        coordl_release(Z, &b);
    }
    free(buf);
    coordl_close(A);
    coordl_close(Z);
    free(jpg);
}

static void test_channels_out_of_range_or_for_tokens_are_refused(void **state)
{
    (void)state;
    char *jpg = tu_join(g_dir, "jpg");
    coordl_config cfg = tu_config(jpg);
    coordl *L = NULL;
    cfg.channels = 2;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "channels: 2"));
    cfg.channels = 1;
    cfg.pipeline = COORDL_PIPE_TOKENS;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "channels"));
    cfg = tu_config(jpg);
    L = tu_open(&cfg);
    coordl_config got;
    assert_int_equal(coordl_get_config(L, &got), COORDL_OK);
    assert_int_equal(got.channels, 3);
    coordl_close(L);
    free(jpg);
}

/* The first (only) batch of a one-item source, as bytes. */
static uint8_t *one_row(coordl_config cfg, size_t *n)
{
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_int_equal(b.n, 1);
    uint8_t *out = malloc(b.data_bytes);
    memcpy(out, b.data, b.data_bytes);
    *n = b.data_bytes;
    coordl_release(L, &b);
    coordl_close(L);
    return out;
}

/* An image of the output size comes out as stored: no rescale, no crop. */
static void test_exact_pipeline_gives_the_stored_pixels(void **state)
{
    (void)state;
    uint8_t grey[28 * 28], rgb[20 * 28 * 3];
    uint64_t s = 99;
    for (size_t i = 0; i < sizeof grey; i++) grey[i] = (uint8_t)tu_rand(&s);
    for (size_t i = 0; i < sizeof rgb; i++) rgb[i] = (uint8_t)tu_rand(&s);
    char *png = tu_join(g_dir, "exact/png/0/digit.png"), *pgm = tu_join(g_dir, "exact/pgm/0/digit.pgm");
    char *col = tu_join(g_dir, "exact/rgb/0/wide.png");
    const char *dirs[3] = {"exact/png/0", "exact/pgm/0", "exact/rgb/0"};
    for (int k = 0; k < 3; k++) {
        char *d = tu_join(g_dir, "%s", dirs[k]);
        tu_mkdirs(d);
        free(d);
    }
    tu_write_png(png, grey, 28, 28, 1);
    tu_write_pgm(pgm, grey, 28, 28);
    tu_write_png(col, rgb, 20, 28, 3);
    char *png_root = tu_join(g_dir, "exact/png"), *pgm_root = tu_join(g_dir, "exact/pgm");
    char *rgb_root = tu_join(g_dir, "exact/rgb");

    coordl_config cfg = tu_config(png_root);
    cfg.pipeline = COORDL_PIPE_EXACT;
    cfg.batch_size = 1;
    cfg.out_w = cfg.out_h = 28;
    cfg.channels = 1;
    cfg.layout = COORDL_U8_NCHW;
    size_t n;
    uint8_t *row = one_row(cfg, &n);
    assert_int_equal(n, sizeof grey);
    assert_memory_equal(row, grey, sizeof grey);
    free(row);
    cfg.source = pgm_root;
    cfg.layout = COORDL_U8_NHWC; /* one channel: the same bytes */
    row = one_row(cfg, &n);
    assert_memory_equal(row, grey, sizeof grey);
    free(row);
    /* what COORDL_PIPE_EVAL does to it: rescaled by 256/224, not the file */
    cfg.pipeline = COORDL_PIPE_EVAL;
    row = one_row(cfg, &n);
    assert_memory_not_equal(row, grey, sizeof grey);
    free(row);
    /* RGB, not square, out_w != out_h */
    cfg = tu_config(rgb_root);
    cfg.pipeline = COORDL_PIPE_EXACT;
    cfg.batch_size = 1;
    cfg.out_w = 20;
    cfg.out_h = 28;
    cfg.layout = COORDL_U8_NHWC;
    row = one_row(cfg, &n);
    assert_int_equal(n, sizeof rgb);
    assert_memory_equal(row, rgb, sizeof rgb);
    free(row);
    /* float: the stored value normalized, (x / 255 - mean) / std as the
     * layout says, computed as the library does */
    cfg.layout = COORDL_F32_NCHW;
    cfg.mean[0] = cfg.mean[1] = cfg.mean[2] = 0.0f;
    cfg.std[0] = cfg.std[1] = cfg.std[2] = 1.0f;
    row = one_row(cfg, &n);
    const float *f = (const float *)(void *)row;
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 20 * 28; i++) assert_true(f[c * 20 * 28 + i] == (float)rgb[3 * i + c] * (1.0f / 255.0f));
    free(row);
    free(png);
    free(pgm);
    free(col);
    free(png_root);
    free(pgm_root);
    free(rgb_root);
}

int main(void)
{
    tu_main_init(300);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grey_rows_are_luma_of_rgb_rows_byte_for_byte),
        cmocka_unit_test(test_grey_float_layouts_normalize_the_luma_with_channel_0),
        cmocka_unit_test(test_next_into_takes_one_channel_sizes),
        cmocka_unit_test(test_channels_out_of_range_or_for_tokens_are_refused),
        cmocka_unit_test(test_exact_pipeline_gives_the_stored_pixels),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
