/*
 * test_decode.c - what reaches a batch row: every image format decodes to
 * its colour, grayscale and CMYK JPEGs become RGB, the four layouts agree,
 * normalization uses mean/std, RandomResizedCrop draws the documented crop
 * distribution, the flip happens half of the time, and the eval pipeline
 * crops the centre after resizing the shorter side.
 *
 * Geometry is read off a gradient image: R = x, G = y on a 256 x 256 image,
 * so an output pixel's R and G say where in the source it was sampled.
 */
#include "test_util.h"

#include <math.h>
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

static const tu_jpeg_opts Q100_444 = {100, TU_SUB_444, 0, 0};

static size_t elem_size(coordl_layout l)
{
    return l == COORDL_F32_NCHW || l == COORDL_F32_NHWC ? 4 : 1;
}

/* Runs `epochs` epochs and returns a malloc'd buffer of every row, indexed
 * by (epoch * num_items + id) * row_bytes; rows never produced stay 0xEE. */
static uint8_t *rows_by_id(const coordl_config *cfg, unsigned epochs,
                           size_t *row_bytes, uint64_t *num_items)
{
    coordl *L = tu_open(cfg);
    uint64_t n = coordl_num_items(L);
    size_t rb = 3 * (size_t)cfg->out_w * cfg->out_h * elem_size(cfg->layout);
    uint8_t *out = malloc((size_t)epochs * n * rb);
    assert_non_null(out);
    memset(out, 0xEE, (size_t)epochs * n * rb);
    unsigned ends = 0;
    while (ends < epochs) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) {
            ends++;
            continue;
        }
        if (rc != COORDL_OK)
            fail_msg("coordl_next = %d: %s", (int)rc, coordl_errmsg(L));
        assert_int_equal(b.data_bytes, (size_t)b.n * rb);
        for (uint32_t i = 0; i < b.n; i++) {
            assert_true(b.ids[i] < n);
            memcpy(out + ((size_t)b.epoch * n + b.ids[i]) * rb,
                   (const uint8_t *)b.data + (size_t)i * rb, rb);
        }
        coordl_release(L, &b);
    }
    coordl_close(L);
    *row_bytes = rb;
    *num_items = n;
    return out;
}

/* Largest |pixel - colour| over an U8_NHWC row of npx pixels. */
static int max_dev_nhwc(const uint8_t *row, size_t npx, const uint8_t col[3])
{
    int worst = 0;
    for (size_t p = 0; p < npx; p++)
        for (int c = 0; c < 3; c++) {
            int d = abs((int)row[p * 3 + c] - (int)col[c]);
            if (d > worst)
                worst = d;
        }
    return worst;
}

/* ---- colours ------------------------------------------------------------- */

static void test_solid_jpeg_decodes_to_class_colour_u8(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "solid_u8");
    tu_folder_spec spec = {6, 2, 32, 32, 0, TU_PAT_SOLID, TU_FMT_JPEG, 100, 1};
    tu_make_image_folder(root, &spec);
    coordl_config cfg = tu_config(root);
    size_t rb;
    uint64_t n;
    uint8_t *rows = rows_by_id(&cfg, 1, &rb, &n);
    assert_int_equal(n, 12);
    for (uint64_t id = 0; id < n; id++) {
        uint8_t col[3];
        tu_class_colour((int)(id / 2), col);
        int dev = max_dev_nhwc(rows + id * rb, 16 * 16, col);
        if (dev > 2)
            fail_msg("item %llu deviates %d from its colour", (unsigned long long)id, dev);
    }
    free(rows);
    tu_rmtree(root);
    free(root);
}

static void test_f32_nchw_is_colour_normalized_with_mean_std(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "solid_f32");
    tu_folder_spec spec = {4, 2, 32, 32, 0, TU_PAT_SOLID, TU_FMT_JPEG, 100, 1};
    tu_make_image_folder(root, &spec);
    coordl_config cfg = tu_config(root);
    cfg.layout = COORDL_F32_NCHW;
    const float mean[3] = {0.5f, 0.25f, 0.125f}, stdv[3] = {0.2f, 0.3f, 0.4f};
    memcpy(cfg.mean, mean, sizeof mean);
    memcpy(cfg.std, stdv, sizeof stdv);
    size_t rb;
    uint64_t n;
    uint8_t *rows = rows_by_id(&cfg, 1, &rb, &n);
    for (uint64_t id = 0; id < n; id++) {
        uint8_t col[3];
        tu_class_colour((int)(id / 2), col);
        const float *f = (const float *)(rows + id * rb);
        for (int c = 0; c < 3; c++) {
            float expect = ((float)col[c] / 255.0f - mean[c]) / stdv[c];
            for (size_t p = 0; p < 16 * 16; p++) /* planar: plane c */
                assert_float_equal(f[(size_t)c * 256 + p], expect, 0.02);
        }
    }
    free(rows);
    tu_rmtree(root);
    free(root);
}

static void test_f32_nhwc_is_interleaved_normalized_colour(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "solid_f32nhwc");
    tu_folder_spec spec = {3, 1, 24, 24, 0, TU_PAT_SOLID, TU_FMT_PNG, 0, 1};
    tu_make_image_folder(root, &spec);
    coordl_config cfg = tu_config(root);
    cfg.layout = COORDL_F32_NHWC;
    size_t rb;
    uint64_t n;
    uint8_t *rows = rows_by_id(&cfg, 1, &rb, &n);
    for (uint64_t id = 0; id < n; id++) {
        uint8_t col[3];
        tu_class_colour((int)id, col);
        const float *f = (const float *)(rows + id * rb);
        for (size_t p = 0; p < 16 * 16; p++)
            for (int c = 0; c < 3; c++) {
                float expect = ((float)col[c] / 255.0f - cfg.mean[c]) / cfg.std[c];
                assert_float_equal(f[p * 3 + c], expect, 0.01);
            }
    }
    free(rows);
    tu_rmtree(root);
    free(root);
}

/* One file per format, each its own colour, in one class. */
static void test_every_format_decodes_to_its_colour(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "formats");
    static const struct {
        const char *name;
        uint8_t col[3];
        int tol;
    } f[] = {
        {"a_base444.jpg", {200, 40, 90}, 2},   {"b_420.jpg", {30, 160, 220}, 3},
        {"c_422.jpeg", {120, 200, 60}, 3},     {"d_progressive.jpg", {250, 250, 10}, 2},
        {"e.png", {10, 100, 200}, 1},          {"f_rgba.png", {90, 30, 140}, 1},
        {"g.bmp", {180, 120, 30}, 1},          {"h.tga", {60, 220, 160}, 1},
        {"i.ppm", {140, 10, 250}, 1},          {"j.pgm", {77, 77, 77}, 1},
        {"k_gray.png", {201, 201, 201}, 1},    {"l_gray.jpg", {33, 33, 33}, 2},
    };
    const size_t nf = sizeof f / sizeof f[0];
    for (size_t i = 0; i < nf; i++) {
        char *p = tu_join(root, "only/%s", f[i].name);
        uint8_t *rgb = tu_solid(40, 30, 3, f[i].col);
        uint8_t rgba[4] = {f[i].col[0], f[i].col[1], f[i].col[2], 255};
        uint8_t *px4 = tu_solid(40, 30, 4, rgba);
        uint8_t *gray = tu_solid(40, 30, 1, f[i].col);
        tu_jpeg_opts o = Q100_444;
        switch (i) {
        case 0: tu_write_jpeg(p, rgb, 40, 30, 3, &o); break;
        case 1: o.subsampling = TU_SUB_420; tu_write_jpeg(p, rgb, 40, 30, 3, &o); break;
        case 2: o.subsampling = TU_SUB_422; tu_write_jpeg(p, rgb, 40, 30, 3, &o); break;
        case 3: o.progressive = 1; tu_write_jpeg(p, rgb, 40, 30, 3, &o); break;
        case 4: tu_write_png(p, rgb, 40, 30, 3); break;
        case 5: tu_write_png(p, px4, 40, 30, 4); break;
        case 6: tu_write_bmp(p, rgb, 40, 30, 3); break;
        case 7: tu_write_tga(p, rgb, 40, 30, 3); break;
        case 8: tu_write_ppm(p, rgb, 40, 30); break;
        case 9: tu_write_pgm(p, gray, 40, 30); break;
        case 10: tu_write_png(p, gray, 40, 30, 1); break;
        case 11: tu_write_jpeg(p, gray, 40, 30, 1, &o); break;
        default: break;
        }
        free(rgb);
        free(px4);
        free(gray);
        free(p);
    }
    for (int pipe = 0; pipe < 2; pipe++) {
        coordl_config cfg = tu_config(root);
        cfg.pipeline = pipe ? COORDL_PIPE_EVAL : COORDL_PIPE_TRAIN;
        cfg.batch_size = 5;
        size_t rb;
        uint64_t n;
        uint8_t *rows = rows_by_id(&cfg, 1, &rb, &n);
        assert_int_equal(n, nf);
        for (uint64_t id = 0; id < n; id++) {
            int dev = max_dev_nhwc(rows + id * rb, 16 * 16, f[id].col);
            if (dev > f[id].tol)
                fail_msg("%s deviates %d from its colour (pipeline %d)",
                         f[id].name, dev, pipe);
        }
        free(rows);
    }
    tu_rmtree(root);
    free(root);
}

static void test_format_is_recognised_by_content_not_extension(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "sniff");
    const uint8_t c_png[3] = {200, 60, 20}, c_jpg[3] = {20, 60, 200},
                  c_bmp[3] = {90, 180, 90};
    uint8_t *a = tu_solid(20, 20, 3, c_png);
    uint8_t *b = tu_solid(20, 20, 3, c_jpg);
    uint8_t *c = tu_solid(20, 20, 3, c_bmp);
    char *pa = tu_join(root, "k/a_png_named.jpg");
    char *pb = tu_join(root, "k/b_jpeg_named.png");
    char *pc = tu_join(root, "k/c_bmp_named.tga");
    tu_write_png(pa, a, 20, 20, 3);
    tu_write_jpeg(pb, b, 20, 20, 3, &Q100_444);
    tu_write_bmp(pc, c, 20, 20, 3);
    coordl_config cfg = tu_config(root);
    size_t rb;
    uint64_t n;
    uint8_t *rows = rows_by_id(&cfg, 1, &rb, &n);
    assert_int_equal(n, 3);
    assert_true(max_dev_nhwc(rows + 0 * rb, 256, c_png) <= 1);
    assert_true(max_dev_nhwc(rows + 1 * rb, 256, c_jpg) <= 2);
    assert_true(max_dev_nhwc(rows + 2 * rb, 256, c_bmp) <= 1);
    free(rows);
    free(a);
    free(b);
    free(c);
    free(pa);
    free(pb);
    free(pc);
    tu_rmtree(root);
    free(root);
}

static void test_grayscale_jpeg_gives_equal_rgb_channels(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "gray");
    /* a gray gradient: every output pixel must have R == G == B, and follow
     * the gradient (left darker than right) */
    uint8_t *rgb = tu_gradient_rgb(64, 64, 0);
    uint8_t gray[64 * 64];
    for (int i = 0; i < 64 * 64; i++)
        gray[i] = rgb[i * 3]; /* = x * 255 / 63 */
    char *p = tu_join(root, "g/gray.jpg");
    tu_write_jpeg(p, gray, 64, 64, 1, &Q100_444);
    coordl_config cfg = tu_config(root);
    cfg.pipeline = COORDL_PIPE_EVAL;
    size_t rb;
    uint64_t n;
    uint8_t *rows = rows_by_id(&cfg, 1, &rb, &n);
    const uint8_t *r = rows;
    for (size_t px = 0; px < 256; px++) {
        assert_int_equal(r[px * 3], r[px * 3 + 1]);
        assert_int_equal(r[px * 3], r[px * 3 + 2]);
    }
    for (size_t y = 0; y < 16; y++)
        assert_true(r[(y * 16 + 15) * 3] > r[(y * 16) * 3] + 100);
    free(rows);
    free(rgb);
    free(p);
    tu_rmtree(root);
    free(root);
}

/* CMYK JPEG of one colour; returns the decoded colour of the (solid) row. */
static void decode_cmyk(const uint8_t cmyk[4], int adobe, uint8_t out[3])
{
    char *root = tu_join(g_dir, "cmyk_%d_%d_%d_%d_%d", cmyk[0], cmyk[1],
                         cmyk[2], cmyk[3], adobe);
    uint8_t *pix = tu_solid(24, 24, 4, cmyk);
    char *p = tu_join(root, "c/cmyk.jpg");
    tu_jpeg_opts o = Q100_444;
    o.no_adobe_marker = !adobe;
    tu_write_jpeg(p, pix, 24, 24, 4, &o);
    coordl_config cfg = tu_config(root);
    size_t rb;
    uint64_t n;
    uint8_t *rows = rows_by_id(&cfg, 1, &rb, &n);
    memcpy(out, rows, 3);
    /* solid: every pixel the same colour */
    assert_true(max_dev_nhwc(rows, 256, out) <= 1);
    free(rows);
    free(pix);
    free(p);
    tu_rmtree(root);
    free(root);
}

static void assert_rgb_near(const uint8_t got[3], int r, int g, int b, int tol)
{
    if (abs(got[0] - r) > tol || abs(got[1] - g) > tol || abs(got[2] - b) > tol)
        fail_msg("got RGB (%d %d %d), expected (%d %d %d) +- %d", got[0], got[1],
                 got[2], r, g, b, tol);
}

static void test_cmyk_jpeg_with_adobe_marker_uses_inverted_convention(void **state)
{
    (void)state;
    /* Adobe CMYK JPEGs store 255 - ink; R = C * K / 255 (what libjpeg
     * based readers, stb_image and OpenCV do). libjpeg writes the marker. */
    const uint8_t cmyk[4] = {255, 128, 0, 200};
    uint8_t rgb[3];
    decode_cmyk(cmyk, 1, rgb);
    assert_rgb_near(rgb, 200, 100, 0, 3);
    const uint8_t white[4] = {255, 255, 255, 255}; /* no ink at all */
    decode_cmyk(white, 1, rgb);
    assert_rgb_near(rgb, 255, 255, 255, 2);
}

static void test_cmyk_jpeg_without_adobe_marker_uses_plain_ink_values(void **state)
{
    (void)state;
    /* plain CMYK (ink amounts): R = (255 - C) * (255 - K) / 255 */
    const uint8_t cmyk[4] = {255, 128, 0, 200};
    uint8_t rgb[3];
    decode_cmyk(cmyk, 0, rgb);
    assert_rgb_near(rgb, 0, 27, 55, 3);
    const uint8_t none[4] = {0, 0, 0, 0};
    decode_cmyk(none, 0, rgb);
    assert_rgb_near(rgb, 255, 255, 255, 2);
}

static void test_u8_nchw_is_planar_copy_of_u8_nhwc(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "layouts");
    tu_folder_spec spec = {2, 5, 48, 40, 16, TU_PAT_TEXTURED, TU_FMT_JPEG, 90, 4};
    tu_make_image_folder(root, &spec);
    coordl_config cfg = tu_config(root);
    cfg.out_w = 20;
    cfg.out_h = 12;
    cfg.seed = 5;
    size_t rb;
    uint64_t n;
    uint8_t *nhwc = rows_by_id(&cfg, 2, &rb, &n);
    cfg.layout = COORDL_U8_NCHW;
    uint8_t *nchw = rows_by_id(&cfg, 2, &rb, &n);
    const size_t plane = 20 * 12;
    for (size_t r = 0; r < 2 * n; r++)
        for (size_t p = 0; p < plane; p++)
            for (size_t c = 0; c < 3; c++)
                assert_int_equal(nchw[r * rb + c * plane + p], nhwc[r * rb + p * 3 + c]);
    free(nhwc);
    free(nchw);
    tu_rmtree(root);
    free(root);
}

static void test_float_layouts_are_normalized_u8_values(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "floats");
    tu_folder_spec spec = {2, 4, 48, 40, 16, TU_PAT_TEXTURED, TU_FMT_JPEG, 90, 4};
    tu_make_image_folder(root, &spec);
    coordl_config cfg = tu_config(root);
    cfg.out_w = 20;
    cfg.out_h = 12;
    cfg.seed = 6;
    size_t rb8, rbn, rbh;
    uint64_t n;
    uint8_t *u8 = rows_by_id(&cfg, 1, &rb8, &n);
    cfg.layout = COORDL_F32_NCHW;
    uint8_t *fn = rows_by_id(&cfg, 1, &rbn, &n);
    cfg.layout = COORDL_F32_NHWC;
    uint8_t *fh = rows_by_id(&cfg, 1, &rbh, &n);
    const size_t plane = 20 * 12;
    for (size_t r = 0; r < n; r++) {
        const uint8_t *u = u8 + r * rb8;
        const float *a = (const float *)(fn + r * rbn);
        const float *b = (const float *)(fh + r * rbh);
        for (size_t p = 0; p < plane; p++)
            for (size_t c = 0; c < 3; c++) {
                float expect = ((float)u[p * 3 + c] / 255.0f - cfg.mean[c]) / cfg.std[c];
                /* u8 is rounded: at most half a level off */
                assert_float_equal(a[c * plane + p], expect, 0.6f / 255.0f / cfg.std[c]);
                assert_float_equal(b[p * 3 + c], a[c * plane + p], 1e-5);
            }
    }
    free(u8);
    free(fn);
    free(fh);
    tu_rmtree(root);
    free(root);
}

static void test_any_input_size_decodes_to_its_colour(void **state)
{
    (void)state;
    /* tiny, odd, huge-aspect and upscaled inputs, JPEG and PNG */
    static const int sizes[][2] = {{1, 1},   {2, 3},   {7, 7},   {8, 8},
                                   {9, 17},  {15, 16}, {31, 33}, {63, 64},
                                   {100, 75}, {150, 150}, {200, 3}, {3, 200},
                                   {257, 129}};
    const size_t ns = sizeof sizes / sizeof sizes[0];
    char *root = tu_join(g_dir, "sizes");
    for (size_t i = 0; i < ns; i++) {
        uint8_t col[3];
        tu_class_colour((int)i, col);
        int w = sizes[i][0], h = sizes[i][1];
        uint8_t *pix = tu_solid(w, h, 3, col);
        char *pj = tu_join(root, "s/%02zu_a.jpg", i);
        char *pp = tu_join(root, "s/%02zu_b.png", i);
        tu_write_jpeg(pj, pix, w, h, 3, &Q100_444);
        tu_write_png(pp, pix, w, h, 3);
        free(pix);
        free(pj);
        free(pp);
    }
    for (int pipe = 0; pipe < 2; pipe++) {
        coordl_config cfg = tu_config(root);
        cfg.pipeline = pipe ? COORDL_PIPE_EVAL : COORDL_PIPE_TRAIN;
        cfg.out_w = 24;
        cfg.out_h = 20;
        size_t rb;
        uint64_t n;
        uint8_t *rows = rows_by_id(&cfg, 2, &rb, &n);
        assert_int_equal(n, 2 * ns);
        for (uint64_t r = 0; r < 2 * n; r++) {
            uint8_t col[3];
            tu_class_colour((int)((r % n) / 2), col);
            int dev = max_dev_nhwc(rows + r * rb, 24 * 20, col);
            if (dev > 2)
                fail_msg("size %dx%d (%s) deviates %d (pipeline %d)",
                         sizes[(r % n) / 2][0], sizes[(r % n) / 2][1],
                         (r % 2) ? "png" : "jpg", dev, pipe);
        }
        free(rows);
    }
    tu_rmtree(root);
    free(root);
}

/* ---- crop geometry ------------------------------------------------------- */

/* A 256 x 256 gradient JPEG (R = x, G = y, B = 128) listed `copies` times
 * (each line its own item, so each gets its own crop). Returns the list. */
static char *gradient_list(const char *name, int copies)
{
    char *dir = tu_join(g_dir, "%s", name);
    char *img = tu_join(dir, "gradient.jpg");
    uint8_t *pix = tu_gradient_rgb(256, 256, 128);
    tu_write_jpeg(img, pix, 256, 256, 3, &Q100_444);
    free(pix);
    size_t cap = (size_t)copies * 32 + 1, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    for (int i = 0; i < copies; i++)
        len += (size_t)snprintf(text + len, cap - len, "gradient.jpg\t0\n");
    char *list = tu_join(dir, "list.txt");
    tu_write_file(list, text, len);
    free(text);
    free(img);
    free(dir);
    return list;
}

typedef struct {
    double x0, y0, w, h; /* crop rectangle in source pixels (estimated) */
    int mirrored;        /* R decreases left to right */
} crop_est;

/* Reads the crop off an out x out U8_NHWC row of the gradient image: the
 * mean R of the first and last columns and the mean G of the first and last
 * rows (the output pixel centre i maps to x0 + (i + 0.5) * w / out). */
static crop_est estimate_crop(const uint8_t *row, int out)
{
    double rl = 0, rr = 0, gt = 0, gb = 0;
    for (int k = 0; k < out; k++) {
        rl += row[((size_t)k * out + 0) * 3 + 0];
        rr += row[((size_t)k * out + (size_t)(out - 1)) * 3 + 0];
        gt += row[((size_t)0 * out + (size_t)k) * 3 + 1];
        gb += row[((size_t)(out - 1) * out + (size_t)k) * 3 + 1];
    }
    rl /= out;
    rr /= out;
    gt /= out;
    gb /= out;
    crop_est e;
    e.mirrored = rr < rl;
    double left = e.mirrored ? rr : rl, right = e.mirrored ? rl : rr;
    e.w = (right - left) * out / (out - 1);
    e.h = (gb - gt) * out / (out - 1);
    e.x0 = left + 0.5 - 0.5 * e.w / out;
    e.y0 = gt + 0.5 - 0.5 * e.h / out;
    return e;
}

static void test_train_crop_area_and_aspect_follow_random_resized_crop(void **state)
{
    (void)state;
    /* 64 items x 25 epochs = 1600 crops of the 256 x 256 gradient.
     * For a square image torchvision's sampler (scale U(0.08, 1), log-ratio
     * U(ln 3/4, ln 4/3), redrawn when the crop does not fit) gives a mean
     * area fraction of 0.479 (Monte Carlo, 4e5 draws), about 9% of crops
     * below 0.15 and 2.5% above 0.9. */
    char *list = gradient_list("rrc", 64);
    coordl_config cfg = tu_config(list);
    cfg.out_w = cfg.out_h = 32;
    cfg.flip = 0;
    cfg.batch_size = 16;
    cfg.seed = 123;
    size_t rb;
    uint64_t n;
    const unsigned epochs = 25;
    uint8_t *rows = rows_by_id(&cfg, epochs, &rb, &n);
    size_t total = (size_t)epochs * n, small = 0, large = 0, tall = 0, wide = 0,
           mirrored = 0;
    double area_sum = 0, cx_sum = 0, cy_sum = 0;
    for (size_t r = 0; r < total; r++) {
        crop_est e = estimate_crop(rows + r * rb, 32);
        double area = e.w * e.h / (256.0 * 256.0), ratio = e.w / e.h;
        area_sum += area;
        small += area < 0.15;
        large += area > 0.85;
        tall += ratio < 0.88;
        wide += ratio > 1.14;
        mirrored += e.mirrored;
        cx_sum += e.x0 + e.w / 2;
        cy_sum += e.y0 + e.h / 2;
        if (ratio < 0.75 / 1.12 || ratio > 4.0 / 3.0 * 1.12)
            fail_msg("crop %zu: aspect %.3f (w %.1f h %.1f) outside 3/4..4/3",
                     r, ratio, e.w, e.h);
        if (e.x0 < -4 || e.y0 < -4 || e.x0 + e.w > 260 || e.y0 + e.h > 260)
            fail_msg("crop %zu: (%.1f %.1f %.1f %.1f) leaves the image", r,
                     e.x0, e.y0, e.w, e.h);
        if (area < 0.08 * 0.8 || area > 1.04)
            fail_msg("crop %zu: area fraction %.3f outside 0.08..1", r, area);
    }
    double mean = area_sum / (double)total;
    if (mean < 0.43 || mean > 0.53)
        fail_msg("mean crop area fraction %.3f, expected ~0.479", mean);
    assert_int_equal(mirrored, 0); /* flip = 0: never mirrored */
    assert_true(small > total / 30);  /* expected ~9% */
    assert_true(large > total / 200); /* expected ~5% */
    assert_true(tall > total / 10);   /* the ratio range is used both ways */
    assert_true(wide > total / 10);
    /* crop positions are uniform over the free space: centred on average */
    assert_float_equal(cx_sum / (double)total, 128.0, 8.0);
    assert_float_equal(cy_sum / (double)total, 128.0, 8.0);
    free(rows);
    free(list);
}

static void test_train_flip_mirrors_about_half_of_the_samples(void **state)
{
    (void)state;
    char *list = gradient_list("flip", 64);
    coordl_config cfg = tu_config(list);
    cfg.out_w = cfg.out_h = 16;
    cfg.flip = 1;
    cfg.batch_size = 16;
    cfg.seed = 321;
    size_t rb;
    uint64_t n;
    const unsigned epochs = 16;
    uint8_t *rows = rows_by_id(&cfg, epochs, &rb, &n);
    size_t total = (size_t)epochs * n, mirrored = 0;
    for (size_t r = 0; r < total; r++) {
        const uint8_t *row = rows + r * rb;
        crop_est e = estimate_crop(row, 16);
        mirrored += e.mirrored;
        /* horizontal only: G still grows downwards */
        assert_true(e.h > 0);
        /* every row of a mirrored sample is decreasing, of the others
         * increasing: the flip is per sample, not per row */
        for (int y = 0; y < 16; y++) {
            int l = row[((size_t)y * 16) * 3], rr = row[((size_t)y * 16 + 15) * 3];
            assert_true(e.mirrored ? rr < l : rr > l);
        }
    }
    double frac = (double)mirrored / (double)total;
    if (frac < 0.4 || frac > 0.6)
        fail_msg("%.3f of the samples mirrored, expected ~0.5", frac);
    free(rows);
    free(list);
}

static void test_fixed_scale_and_ratio_give_that_crop_size(void **state)
{
    (void)state;
    char *list = gradient_list("fixed", 32);
    coordl_config cfg = tu_config(list);
    cfg.out_w = cfg.out_h = 32;
    cfg.flip = 0;
    cfg.scale_min = cfg.scale_max = 0.25f; /* 128 x 128 */
    cfg.ratio_min = cfg.ratio_max = 1.0f;
    size_t rb;
    uint64_t n;
    uint8_t *rows = rows_by_id(&cfg, 2, &rb, &n);
    double xmin = 1e9, xmax = -1e9;
    for (size_t r = 0; r < 2 * n; r++) {
        crop_est e = estimate_crop(rows + r * rb, 32);
        if (fabs(e.w - 128) > 4 || fabs(e.h - 128) > 4)
            fail_msg("crop %zu is %.1f x %.1f, expected 128 x 128", r, e.w, e.h);
        xmin = e.x0 < xmin ? e.x0 : xmin;
        xmax = e.x0 > xmax ? e.x0 : xmax;
    }
    assert_true(xmax - xmin > 40); /* the position still varies */
    free(rows);
    free(list);
}

static void test_train_crops_differ_by_epoch_and_item(void **state)
{
    (void)state;
    char *list = gradient_list("vary", 8);
    coordl_config cfg = tu_config(list);
    size_t rb;
    uint64_t n;
    uint8_t *rows = rows_by_id(&cfg, 2, &rb, &n);
    size_t same = 0;
    for (size_t a = 0; a < 2 * n; a++)
        for (size_t b = a + 1; b < 2 * n; b++)
            same += memcmp(rows + a * rb, rows + b * rb, rb) == 0;
    assert_int_equal(same, 0); /* 16 crops of one image, all different */
    free(rows);
    free(list);
}

static void test_sample_transform_reports_the_crop_seen_in_pixels(void **state)
{
    (void)state;
    /* the rectangle and flip coordl_sample_transform reports are the ones
     * the pixels show, for every row of two epochs */
    char *list = gradient_list("transform", 32);
    coordl_config cfg = tu_config(list);
    cfg.out_w = cfg.out_h = 32;
    cfg.batch_size = 8;
    cfg.seed = 77;
    coordl *L = tu_open(&cfg);
    unsigned ends = 0;
    size_t rows = 0, flips = 0;
    while (ends < 2) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) {
            ends++;
            continue;
        }
        assert_int_equal(rc, COORDL_OK);
        for (uint32_t i = 0; i < b.n; i++) {
            coordl_transform t;
            assert_int_equal(coordl_sample_transform(L, b.epoch, b.ids[i], &t),
                             COORDL_OK);
            assert_int_equal(t.image_w, 256);
            assert_int_equal(t.image_h, 256);
            crop_est e = estimate_crop((const uint8_t *)b.data + (size_t)i * 32 * 32 * 3, 32);
            if (fabs(t.x - e.x0) > 3 || fabs(t.y - e.y0) > 3 ||
                fabs(t.w - e.w) > 4 || fabs(t.h - e.h) > 4 || t.flip != e.mirrored)
                fail_msg("epoch %llu id %llu: transform (%.1f %.1f %.1f %.1f flip %d)"
                         " but pixels show (%.1f %.1f %.1f %.1f flip %d)",
                         (unsigned long long)b.epoch, (unsigned long long)b.ids[i],
                         t.x, t.y, t.w, t.h, t.flip, e.x0, e.y0, e.w, e.h, e.mirrored);
            /* RandomResizedCrop boxes are whole pixels */
            assert_true(t.x == floor(t.x) && t.w == floor(t.w));
            rows++;
            flips += (size_t)t.flip;
        }
        coordl_release(L, &b);
    }
    assert_int_equal(rows, 64);
    assert_true(flips > 0 && flips < rows);
    coordl_transform t;
    assert_int_equal(coordl_sample_transform(L, 0, 32, &t), COORDL_ERR_INVALID);
    coordl_close(L);
    free(list);
}

/* Runs one whole epoch on L, releasing every batch. */
static void run_one_epoch(coordl *L)
{
    for (;;) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) return;
        assert_int_equal(rc, COORDL_OK);
        coordl_release(L, &b);
    }
}

static void test_sample_transform_reads_a_cached_item_deleted_from_storage(void **state)
{
    (void)state;
    /* coordl_sample_transform reads "from the cache or storage": once an
     * epoch has cached every item (MinIO, and the LRU alternative), an item
     * deleted from disk still answers with the size its header gives; a
     * handle without a cache fails it with COORDL_ERR_IO and says which
     * file, and a bad id says why too */
    char *root = tu_join(g_dir, "transform_cached");
    tu_folder_spec spec = {2, 4, 40, 30, 24, TU_PAT_TEXTURED, TU_FMT_JPEG, 90, 5};
    const uint64_t bytes = tu_make_image_folder(root, &spec);
    const coordl_cache_policy policies[2] = {COORDL_CACHE_MINIO, COORDL_CACHE_LRU};
    for (int k = 0; k < 2; k++) {
        char *victim = tu_folder_file(root, &spec, 1, 2 + k); /* a different file each round */
        coordl_config cfg = tu_config(root);
        cfg.cache_policy = policies[k];
        cfg.cache_bytes = 2 * bytes;
        coordl *L = tu_open(&cfg);
        cfg.cache_bytes = 0;
        coordl *uncached = tu_open(&cfg);
        uint64_t id = UINT64_MAX;
        for (uint64_t i = 0; i < coordl_num_items(L); i++)
            if (strcmp(coordl_item_path(L, i), victim) == 0) id = i;
        assert_true(id != UINT64_MAX);
        coordl_transform before, after;
        assert_int_equal(coordl_sample_transform(L, 0, id, &before), COORDL_OK);
        assert_true(before.image_w >= 40 && before.image_w <= 64);
        run_one_epoch(L);
        coordl_stats st;
        coordl_get_stats(L, &st);
        assert_int_equal(st.cache_items, coordl_num_items(L));
        assert_int_equal(remove(victim), 0);
        coordl_status rc = coordl_sample_transform(L, 0, id, &after);
        if (rc != COORDL_OK)
            fail_msg("%s cache: coordl_sample_transform of a cached item deleted from storage = %d (%s)",
                     k ? "LRU" : "MinIO", (int)rc, coordl_errmsg(L));
        assert_int_equal(after.image_w, before.image_w);
        assert_int_equal(after.image_h, before.image_h);
        assert_true(after.x == before.x && after.y == before.y && after.w == before.w && after.h == before.h);
        assert_int_equal(after.flip, before.flip);
        /* no cache: storage only, and the error names the file */
        assert_int_equal(coordl_sample_transform(uncached, 0, id, &after), COORDL_ERR_IO);
        if (!strstr(coordl_errmsg(uncached), victim))
            fail_msg("errmsg \"%s\" does not name %s", coordl_errmsg(uncached), victim);
        assert_int_equal(after.image_w, 0);
        assert_int_equal(coordl_sample_transform(uncached, 0, coordl_num_items(L), &after), COORDL_ERR_INVALID);
        if (!strstr(coordl_errmsg(uncached), "num_items"))
            fail_msg("errmsg \"%s\" for a bad id does not say why", coordl_errmsg(uncached));
        coordl_close(uncached);
        coordl_close(L);
        free(victim);
    }
    tu_rmtree(root);
    free(root);
}

static void test_eval_center_crop_after_shorter_side_resize(void **state)
{
    (void)state;
    /* 256 x 256, out 32: shorter side to 32*256/224 = 36.6 (37 px), then the
     * central 32: source x from ~14 to ~235. Output column 0 samples x ~17,
     * column 31 x ~231 (+-3 for rounding of the resize size and offset). */
    char *list = gradient_list("eval", 2);
    coordl_config cfg = tu_config(list);
    cfg.pipeline = COORDL_PIPE_EVAL;
    cfg.out_w = cfg.out_h = 32;
    size_t rb;
    uint64_t n;
    uint8_t *rows = rows_by_id(&cfg, 2, &rb, &n);
    const uint8_t *r = rows;
    int r0 = r[0], r31 = r[31 * 3], g0 = r[1], g31 = r[(31 * 32) * 3 + 1];
    if (r0 < 13 || r0 > 21 || r31 < 227 || r31 > 238)
        fail_msg("eval columns sample R %d .. %d, expected ~17 .. ~231", r0, r31);
    if (g0 < 13 || g0 > 21 || g31 < 227 || g31 > 238)
        fail_msg("eval rows sample G %d .. %d, expected ~17 .. ~231", g0, g31);
    int rc = r[(16 * 32 + 16) * 3], gc = r[(16 * 32 + 16) * 3 + 1];
    assert_true(abs(rc - 128) <= 8 && abs(gc - 128) <= 8);
    /* eval has no randomness: both items, both epochs identical */
    for (size_t k = 1; k < 2 * n; k++)
        assert_memory_equal(rows, rows + k * rb, rb);
    free(rows);
    free(list);
}

static void test_eval_resizes_shorter_side_of_wide_image(void **state)
{
    (void)state;
    /* 512 x 256 PNG, R = x * 255 / 511: the height becomes 37, the width
     * 74, and the centre 32 of 74 columns cover source x ~145 .. ~367, so
     * column 0 reads R ~74 and column 31 R ~181 (squashing the whole width
     * would give ~4 .. ~251) */
    char *root = tu_join(g_dir, "eval_wide");
    uint8_t *pix = tu_gradient_rgb(512, 256, 50);
    char *p = tu_join(root, "k/wide.png");
    tu_write_png(p, pix, 512, 256, 3);
    coordl_config cfg = tu_config(root);
    cfg.pipeline = COORDL_PIPE_EVAL;
    cfg.out_w = cfg.out_h = 32;
    size_t rb;
    uint64_t n;
    uint8_t *rows = rows_by_id(&cfg, 1, &rb, &n);
    int r0 = rows[(16 * 32) * 3], r31 = rows[(16 * 32 + 31) * 3];
    if (r0 < 69 || r0 > 79 || r31 < 176 || r31 > 186)
        fail_msg("wide eval columns sample R %d .. %d, expected ~74 .. ~181", r0, r31);
    int g0 = rows[16 * 3 + 1], g31 = rows[(31 * 32 + 16) * 3 + 1];
    if (g0 < 13 || g0 > 21 || g31 < 227 || g31 > 238)
        fail_msg("wide eval rows sample G %d .. %d, expected ~17 .. ~231", g0, g31);
    free(rows);
    free(pix);
    free(p);
    tu_rmtree(root);
    free(root);
}

/* ---- each image decodes on its own --------------------------------------- */

/* The JPEG enc without the DHT (marker 0xC4) or DQT (0xDB) segment that
 * defines table `slot` of its class (DHT: the class/slot byte, e.g. 0x01
 * for DC table 1; DQT: the table number). libjpeg writes one table per
 * segment. */
static uint8_t *without_table(const uint8_t *enc, size_t n, int marker, int tc_th, size_t *out_n)
{
    uint8_t *out = malloc(n);
    assert_non_null(out);
    size_t at = 2, o = 2, dropped = 0;
    memcpy(out, enc, 2);
    while (at + 4 <= n && enc[at] == 0xFF && enc[at + 1] != 0xDA) {
        const size_t seg = 2 + ((size_t)enc[at + 2] << 8 | enc[at + 3]);
        assert_true(at + seg <= n);
        if (enc[at + 1] == marker && enc[at + 4] == tc_th) dropped++;
        else {
            memcpy(out + o, enc + at, seg);
            o += seg;
        }
        at += seg;
    }
    assert_int_equal(dropped, 1);
    memcpy(out + o, enc + at, n - at); /* the scan(s) and EOI */
    *out_n = o + n - at;
    return out;
}

/* libjpeg keeps the Huffman and quantization tables an image defines in
 * its decompress object for the next image (abbreviated streams), and a
 * worker decodes every image with one object. A file that uses a table
 * it does not define (Motion-JPEG style: a missing Huffman table means
 * the standard one) must decode the same whatever the worker decoded
 * before it. One worker, index order: 4 progressive files (optimized
 * tables in every slot), then 4 baseline files without their DC table 1
 * (libjpeg uses the standard one, which they were written with), then 4
 * without quantization table 1 (not decodable: no standard exists).
 * Before each decode started from a fresh object, the first file without
 * its DC table decoded with the progressive file's (CI's fuzz_random_access
 * found it through the rewrite), and the files without a quantization
 * table decoded with the last one seen. */
static void test_a_table_a_file_does_not_define_is_never_the_previous_files(void **state)
{
    (void)state;
    char *with = tu_join(g_dir, "tables_whole"), *without = tu_join(g_dir, "tables_missing");
    for (int i = 0; i < 12; i++) {
        const int kind = i / 4; /* 0 progressive, 1 no DC table 1, 2 no DQT 1 */
        uint8_t base[3] = {(uint8_t)(40 + 50 * kind), (uint8_t)(200 - 30 * (i % 4)), 90};
        uint8_t *pix = tu_textured_rgb(64 + 8 * (i % 3), 48 + 8 * (i % 2), base, (uint64_t)i + 3);
        const tu_jpeg_opts opts = {90, TU_SUB_420, kind == 0, 0};
        size_t n, m;
        uint8_t *enc = tu_encode_jpeg(pix, 64 + 8 * (i % 3), 48 + 8 * (i % 2), 3, &opts, &n);
        char *a = tu_join(with, "k%d/img_%02d.jpg", kind, i), *b = tu_join(without, "k%d/img_%02d.jpg", kind, i);
        tu_write_file(a, enc, n);
        if (kind == 0) tu_write_file(b, enc, n);
        else {
            uint8_t *cut = without_table(enc, n, kind == 1 ? 0xC4 : 0xDB, 0x01, &m);
            tu_write_file(b, cut, m);
            free(cut);
        }
        free(a);
        free(b);
        free(enc);
        free(pix);
    }
    coordl_config cfg = tu_config(with);
    cfg.pipeline = COORDL_PIPE_EVAL;
    cfg.shuffle = COORDL_SHUFFLE_OFF;
    cfg.threads = 1;
    cfg.batch_size = 1;
    cfg.on_bad_sample = COORDL_BAD_FAIL;
    size_t rb;
    uint64_t n;
    uint8_t *want = rows_by_id(&cfg, 1, &rb, &n);
    assert_int_equal(n, 12);
    cfg.source = without;
    coordl *L = tu_open(&cfg);
    for (uint64_t k = 0; k < 12; k++) {
        coordl_batch b;
        const coordl_status rc = coordl_next(L, &b);
        if (k < 8) {
            if (rc != COORDL_OK) fail_msg("item %llu: %s", (unsigned long long)k, coordl_errmsg(L));
            assert_int_equal(b.ids[0], k);
            if (memcmp(b.data, want + k * rb, rb) != 0)
                fail_msg("item %llu (%s) decoded other pixels than the file with all its tables",
                         (unsigned long long)k, k < 4 ? "progressive" : "no DC table 1");
            coordl_release(L, &b);
        } else if (rc != COORDL_ERR_CORRUPT || !strstr(coordl_errmsg(L), "table")) {
            fail_msg("item %llu uses a quantization table it does not define: status %d, %s", (unsigned long long)k,
                     (int)rc, coordl_errmsg(L));
        }
    }
    coordl_close(L);
    free(want);
    tu_rmtree(with);
    tu_rmtree(without);
    free(with);
    free(without);
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_solid_jpeg_decodes_to_class_colour_u8),
        cmocka_unit_test(test_f32_nchw_is_colour_normalized_with_mean_std),
        cmocka_unit_test(test_f32_nhwc_is_interleaved_normalized_colour),
        cmocka_unit_test(test_every_format_decodes_to_its_colour),
        cmocka_unit_test(test_format_is_recognised_by_content_not_extension),
        cmocka_unit_test(test_grayscale_jpeg_gives_equal_rgb_channels),
        cmocka_unit_test(test_cmyk_jpeg_with_adobe_marker_uses_inverted_convention),
        cmocka_unit_test(test_cmyk_jpeg_without_adobe_marker_uses_plain_ink_values),
        cmocka_unit_test(test_u8_nchw_is_planar_copy_of_u8_nhwc),
        cmocka_unit_test(test_float_layouts_are_normalized_u8_values),
        cmocka_unit_test(test_any_input_size_decodes_to_its_colour),
        cmocka_unit_test(test_train_crop_area_and_aspect_follow_random_resized_crop),
        cmocka_unit_test(test_train_flip_mirrors_about_half_of_the_samples),
        cmocka_unit_test(test_fixed_scale_and_ratio_give_that_crop_size),
        cmocka_unit_test(test_train_crops_differ_by_epoch_and_item),
        cmocka_unit_test(test_sample_transform_reports_the_crop_seen_in_pixels),
        cmocka_unit_test(test_sample_transform_reads_a_cached_item_deleted_from_storage),
        cmocka_unit_test(test_eval_center_crop_after_shorter_side_resize),
        cmocka_unit_test(test_eval_resizes_shorter_side_of_wide_image),
        cmocka_unit_test(test_a_table_a_file_does_not_define_is_never_the_previous_files),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
