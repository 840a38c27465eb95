/*
 * test_darknet_semantics.c - Darknet's augmentation, checked by value.
 *
 * The references are written for this test from reading pjreddie/darknet
 * (src/utils.c rand_scale, src/image.c random_augment_args,
 * rotate_crop_image, bilinear_interpolate, get_pixel_extend, flip_image,
 * rgb_to_hsv, hsv_to_rgb, distort_image, constrain_image), in Darknet's
 * float [0, 1] pixel scale; coordl's rows are F32 with mean 0 and std 1, so
 * they are x / 255 as well. The draws of each sample come from
 * coordl_sample_transform; the references take them and compute the
 * pixels, and the geometry is also checked against Darknet's ranges:
 *   rand_scale(s): a factor in [min(s, 1/s), max(s, 1/s)] (0.75 is not off);
 *   Darknet's crop: the shorter side min(h, (int)(w * aspect)) scaled to an
 *     integer r in [min_crop, max_crop] (scaled with the output size after
 *     coordl_set), an out_w x out_h window offset by dx, dy within
 *     (w s / a - out_w) / 2 and (h s - out_h) / 2, rotated about the image
 *     centre, black outside the image, flipped after;
 *   distort_image: S and V scaled (not clamped), hue shifted with one wrap,
 *     RGB clamped to [0, 1].
 */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

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

/* ---- references (Darknet's code, reimplemented) ------------------------ */

static float max3(float a, float b, float c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }
static float min3(float a, float b, float c) { return a < b ? (a < c ? a : c) : (b < c ? b : c); }

/* distort_image(im, hue, sat, val) on one pixel, channels in [0, 1] */
static void dn_distort(float rgb[3], float hue, float sat, float val)
{
    float r = rgb[0], g = rgb[1], b = rgb[2];
    float mx = max3(r, g, b), mn = min3(r, g, b), delta = mx - mn;
    float h = 0, s = 0, v = mx;
    if (mx != 0) {
        s = delta / mx;
        if (delta != 0) { /* Darknet computes 0/0 here; with s = 0 it is unused */
            if (r == mx) h = (g - b) / delta;
            else if (g == mx) h = 2 + (b - r) / delta;
            else h = 4 + (r - g) / delta;
            if (h < 0) h += 6;
            h = h / 6.0f;
        }
    }
    s *= sat;
    v *= val;
    h += hue;
    if (h > 1) h -= 1;
    if (h < 0) h += 1;
    if (s == 0) {
        r = g = b = v;
    } else {
        float H6 = 6 * h;
        int index = (int)floorf(H6);
        float f = H6 - index, p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
        if (index == 0) { r = v; g = t; b = p; }
        else if (index == 1) { r = q; g = v; b = p; }
        else if (index == 2) { r = p; g = v; b = t; }
        else if (index == 3) { r = p; g = q; b = v; }
        else if (index == 4) { r = t; g = p; b = v; }
        else { r = v; g = p; b = q; }
    }
    rgb[0] = r < 0 ? 0 : r > 1 ? 1 : r;
    rgb[1] = g < 0 ? 0 : g > 1 ? 1 : g;
    rgb[2] = b < 0 ? 0 : b > 1 ? 1 : b;
}

typedef struct {
    const uint8_t *pix; /* RGB */
    int w, h;
} image;

/* get_pixel_extend: 0 outside the image */
static float px(const image *im, int x, int y, int c)
{
    if (x < 0 || x >= im->w || y < 0 || y >= im->h) return 0;
    return im->pix[((size_t)y * (size_t)im->w + (size_t)x) * 3 + (size_t)c] / 255.0f;
}

static float bilinear(const image *im, float x, float y, int c)
{
    int ix = (int)floorf(x), iy = (int)floorf(y);
    float dx = x - ix, dy = y - iy;
    return (1 - dy) * (1 - dx) * px(im, ix, iy, c) + dy * (1 - dx) * px(im, ix, iy + 1, c) +
           (1 - dy) * dx * px(im, ix + 1, iy, c) + dy * dx * px(im, ix + 1, iy + 1, c);
}

/* rotate_crop_image + flip_image + distort_image for one sample, from its
 * draws as coordl_sample_transform reports them: the window's footprint
 * (fw x fh source pixels, centred at the point the row's centre (w/2, h/2)
 * reads), the angle, the flip and the colour factors. out: CHW floats. */
static void dn_reference(const image *im, const coordl_transform *t, int w, int h, float *out)
{
    const double rad = t->angle * 3.14159265358979 / 180.0;
    const double cx = t->x + t->w / 2.0, cy = t->y + t->h / 2.0;
    const double sx = t->w / w, sy = t->h / h; /* a / s and 1 / s */
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const double X = (x - w / 2.0) * sx, Y = (y - h / 2.0) * sy;
            const float rx = (float)(cos(rad) * X - sin(rad) * Y + cx);
            const float ry = (float)(sin(rad) * X + cos(rad) * Y + cy);
            float rgb[3];
            for (int c = 0; c < 3; c++) rgb[c] = bilinear(im, rx, ry, c);
            if (t->hue != 0 || t->saturation != 1 || t->exposure != 1)
                dn_distort(rgb, (float)t->hue, (float)t->saturation, (float)t->exposure);
            const int ox = t->flip ? w - 1 - x : x;
            for (int c = 0; c < 3; c++) out[((size_t)c * h + y) * w + ox] = rgb[c];
        }
}

/* ---- data --------------------------------------------------------------- */

/* A smooth, non-symmetric colour pattern: every position is distinct and
 * the gradient is small, so a sub-pixel coordinate rounding difference
 * moves a value by far less than the tolerance. */
static uint8_t *pattern(int w, int h, int item)
{
    uint8_t *p = malloc((size_t)w * h * 3);
    assert_non_null(p);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *q = p + ((size_t)y * w + x) * 3;
            q[0] = (uint8_t)(40 + 170.0 * x / (w - 1));
            q[1] = (uint8_t)(30 + 190.0 * y / (h - 1));
            q[2] = (uint8_t)(128 + 100 * sin((x + 2.0 * y + 13.0 * item) / 9.0));
        }
    return p;
}

static char *make_pngs(const char *name, int count, int w, int h, int jitter)
{
    char *root = tu_join(g_dir, "%s", name);
    for (int i = 0; i < count; i++) {
        int iw = w + (i % 3) * jitter, ih = h + ((i / 3) % 3) * jitter;
        uint8_t *pix = pattern(iw, ih, i);
        char *p = tu_join(root, "k/img_%03d.png", i);
        tu_write_png(p, pix, iw, ih, 3);
        free(p);
        free(pix);
    }
    return root;
}

static coordl_config dn_config(const char *root, uint32_t out)
{
    coordl_config cfg = tu_config(root);
    cfg.pipeline = COORDL_PIPE_TRAIN;
    cfg.layout = COORDL_F32_NCHW;
    for (int c = 0; c < 3; c++) {
        cfg.mean[c] = 0.0f;
        cfg.std[c] = 1.0f;
    }
    cfg.out_w = cfg.out_h = out;
    cfg.batch_size = 4;
    cfg.seed = 99;
    cfg.shuffle = 0;
    return cfg;
}

/* Every row of `epochs` epochs against the reference: the decoded image is
 * loaded by `load` (the PNG's or the JPEG's pixels). Returns the number of
 * output values that are exactly 0 in all three channels (black fill). */
typedef uint8_t *(*load_fn)(const char *path, int *w, int *h);

static long check_rows(coordl *L, int epochs, load_fn load, double tol)
{
    long black = 0;
    for (int e = 0; e < epochs; e++) {
        coordl_batch b;
        while (coordl_next(L, &b) == COORDL_OK) {
            for (uint32_t i = 0; i < b.n; i++) {
                coordl_transform t;
                assert_int_equal(coordl_sample_transform(L, b.epoch, b.ids[i], &t), COORDL_OK);
                int w, h;
                uint8_t *pix = load(coordl_item_path(L, b.ids[i]), &w, &h);
                assert_int_equal(w, (int)t.image_w);
                image im = {pix, w, h};
                const size_t n = (size_t)3 * b.h * b.w;
                float *ref = malloc(n * sizeof *ref);
                assert_non_null(ref);
                dn_reference(&im, &t, (int)b.w, (int)b.h, ref);
                const float *row = (const float *)b.data + i * n;
                for (size_t k = 0; k < n; k++)
                    if (fabs(row[k] - ref[k]) > tol)
                        fail_msg("epoch %llu item %llu value %zu (c %zu y %zu x %zu): coordl %.6f, Darknet %.6f "
                                 "(angle %.2f flip %d aspect %.3f window %.1fx%.1f at %.1f,%.1f)",
                                 (unsigned long long)b.epoch, (unsigned long long)b.ids[i], k, k / (b.h * b.w),
                                 k / b.w % b.h, k % b.w, row[k], ref[k], t.angle, t.flip, t.aspect, t.w, t.h,
                                 t.x, t.y);
                for (size_t k = 0; k < (size_t)b.h * b.w; k++)
                    black += row[k] == 0.0f && row[k + (size_t)b.h * b.w] == 0.0f && row[k + 2 * (size_t)b.h * b.w] == 0.0f;
                free(ref);
                free(pix);
            }
            coordl_release(L, &b);
        }
    }
    return black;
}

static uint8_t *load_png(const char *path, int *w, int *h)
{
    /* the PNGs were written from pattern(): regenerate instead of decoding */
    const char *s = strrchr(path, '_');
    assert_non_null(s);
    int item = atoi(s + 1);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t hdr[24];
    assert_int_equal(fread(hdr, 1, 24, f), 24);
    fclose(f);
    *w = (int)((uint32_t)hdr[16] << 24 | (uint32_t)hdr[17] << 16 | (uint32_t)hdr[18] << 8 | hdr[19]);
    *h = (int)((uint32_t)hdr[20] << 24 | (uint32_t)hdr[21] << 16 | (uint32_t)hdr[22] << 8 | hdr[23]);
    return pattern(*w, *h, item);
}

static uint8_t *load_jpeg(const char *path, int *w, int *h)
{
    size_t n;
    uint8_t *bytes = tu_read_file(path, &n);
    struct jpeg_decompress_struct jd;
    struct jpeg_error_mgr jerr;
    jd.err = jpeg_std_error(&jerr);
    jpeg_create_decompress(&jd);
    jpeg_mem_src(&jd, bytes, (unsigned long)n);
    jpeg_read_header(&jd, TRUE);
    jd.out_color_space = JCS_RGB;
    jd.dct_method = JDCT_ISLOW;
    jpeg_start_decompress(&jd);
    *w = (int)jd.output_width;
    *h = (int)jd.output_height;
    uint8_t *pix = malloc((size_t)*w * *h * 3);
    assert_non_null(pix);
    while (jd.output_scanline < jd.output_height) {
        JSAMPROW row = pix + (size_t)jd.output_scanline * *w * 3;
        jpeg_read_scanlines(&jd, &row, 1);
    }
    jpeg_finish_decompress(&jd);
    jpeg_destroy_decompress(&jd);
    free(bytes);
    return pix;
}

/* ---- rand_scale ---------------------------------------------------------- */

/* saturation = exposure = aspect = 0.75 (stock Darknet cfgs) is a range,
 * not "off": the factors drawn span both sides of 1 inside [0.75, 1/0.75],
 * and the batches differ from those with 1. */
static void test_rand_scale_075_is_a_range_not_off(void **state)
{
    (void)state;
    char *root = make_pngs("rs", 32, 40, 36, 4);
    coordl_config c1 = dn_config(root, 16), c75 = c1;
    c75.saturation = c75.exposure = c75.aspect = 0.75f;
    coordl *L1 = tu_open(&c1), *L75 = tu_open(&c75);
    double lo[3] = {9, 9, 9}, hi[3] = {0, 0, 0};
    for (uint64_t e = 0; e < 4; e++)
        for (uint64_t id = 0; id < 32; id++) {
            coordl_transform t;
            assert_int_equal(coordl_sample_transform(L75, e, id, &t), COORDL_OK);
            const double f[3] = {t.saturation, t.exposure, t.aspect};
            for (int k = 0; k < 3; k++) {
                assert_true(f[k] >= 0.75 - 1e-6 && f[k] <= 1 / 0.75 + 1e-6);
                lo[k] = fmin(lo[k], f[k]);
                hi[k] = fmax(hi[k], f[k]);
            }
        }
    for (int k = 0; k < 3; k++)
        if (!(lo[k] < 0.85 && hi[k] > 1.2))
            fail_msg("factor %d (saturation, exposure, aspect) drawn only in [%.3f, %.3f] over 128 samples", k,
                     lo[k], hi[k]);
    coordl_batch b1, b75;
    assert_int_equal(coordl_next(L1, &b1), COORDL_OK);
    assert_int_equal(coordl_next(L75, &b75), COORDL_OK);
    assert_true(tu_batch_hash(&b1) != tu_batch_hash(&b75));
    coordl_release(L1, &b1);
    coordl_release(L75, &b75);
    coordl_close(L1);
    coordl_close(L75);
    free(root);
}

/* Solid colours through distort_image: each row equals the reference for
 * its drawn factors, including saturation and value pushed past 1 (Darknet
 * clamps RGB afterwards, not S and V first) and hue wrapping. */
static void test_colour_equals_darknet_distort_image(void **state)
{
    (void)state;
    static const uint8_t colours[6][3] = {{200, 30, 60}, {250, 240, 10}, {20, 20, 200},
                                          {128, 128, 128}, {0, 0, 0}, {90, 200, 250}};
    char *root = tu_join(g_dir, "solid");
    for (int i = 0; i < 6; i++) {
        uint8_t *p = tu_solid(20, 20, 3, colours[i]);
        char *path = tu_join(root, "k/img_%03d.png", i);
        tu_write_png(path, p, 20, 20, 3);
        free(path);
        free(p);
    }
    coordl_config cfg = dn_config(root, 8);
    cfg.hue = 0.4f;
    cfg.saturation = 1.8f;
    cfg.exposure = 0.6f; /* 1/0.6 = 1.67: bright colours go past V = 1 */
    cfg.batch_size = 6;
    coordl *L = tu_open(&cfg);
    int over = 0, sat_over = 0, wrapped = 0;
    for (int e = 0; e < 24; e++) {
        coordl_batch b;
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        for (uint32_t i = 0; i < b.n; i++) {
            coordl_transform t;
            assert_int_equal(coordl_sample_transform(L, b.epoch, b.ids[i], &t), COORDL_OK);
            float ref[3];
            for (int c = 0; c < 3; c++) ref[c] = colours[b.ids[i]][c] / 255.0f;
            float v = max3(ref[0], ref[1], ref[2]);
            over += v * t.exposure > 1.0;
            sat_over += v > 0 && (v - min3(ref[0], ref[1], ref[2])) / v * t.saturation > 1.0;
            wrapped += b.ids[i] == 0 && t.hue > 0.05; /* red, hue ~0.97: wraps past 1 */
            dn_distort(ref, (float)t.hue, (float)t.saturation, (float)t.exposure);
            const float *row = (const float *)b.data + (size_t)i * 3 * 64;
            for (int c = 0; c < 3; c++)
                for (int k = 0; k < 64; k++)
                    if (fabsf(row[c * 64 + k] - ref[c]) > 1e-5f)
                        fail_msg("colour %llu epoch %d channel %d: coordl %.6f, distort_image %.6f (hue %.3f "
                                 "sat %.3f exp %.3f)", (unsigned long long)b.ids[i], e, c, row[c * 64 + k], ref[c],
                                 t.hue, t.saturation, t.exposure);
        }
        coordl_release(L, &b);
        assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    }
    /* the cases that tell Darknet's order of clamping from another came up */
    assert_true(over > 0);
    assert_true(sat_over > 0);
    assert_true(wrapped > 0);
    coordl_close(L);
    tu_rmtree(root);
    free(root);
}

/* ---- Darknet's crop -------------------------------------------------------- */

/* The geometry of every draw lies in Darknet's ranges: r = s x shorter is
 * an integer in [min_crop, max_crop], the offset within the range. */
static void check_geometry(coordl *L, uint64_t n, int out, int min_crop, int max_crop, double aspect_lo,
                           double aspect_hi, double angle)
{
    int r_seen_lo = 1 << 30, r_seen_hi = 0;
    for (uint64_t e = 0; e < 3; e++)
        for (uint64_t id = 0; id < n; id++) {
            coordl_transform t;
            assert_int_equal(coordl_sample_transform(L, e, id, &t), COORDL_OK);
            const double a = t.aspect, s = out / t.h; /* fh = out / s */
            assert_true(a >= aspect_lo - 1e-9 && a <= aspect_hi + 1e-9);
            assert_true(fabs(t.w - out * a / s) < 1e-6);
            assert_true(fabs(t.angle) <= angle + 1e-9);
            int shorter = t.image_h < t.image_w * a ? (int)t.image_h : (int)(t.image_w * a);
            double r = s * shorter;
            if (fabs(r - nearbyint(r)) > 1e-6 || r < min_crop - 1e-6 || r > max_crop + 1e-6)
                fail_msg("item %llu: the shorter side %d went to %.4f, not an integer in [%d, %d]",
                         (unsigned long long)id, shorter, r, min_crop, max_crop);
            r_seen_lo = (int)fmin(r_seen_lo, nearbyint(r));
            r_seen_hi = (int)fmax(r_seen_hi, nearbyint(r));
            /* offset: unrotate the centre's displacement from the image centre */
            const double rad = t.angle * 3.14159265358979 / 180.0;
            const double ux = t.x + t.w / 2 - t.image_w / 2.0, uy = t.y + t.h / 2 - t.image_h / 2.0;
            const double X = cos(rad) * ux + sin(rad) * uy, Y = -sin(rad) * ux + cos(rad) * uy;
            const double dx = X * s / a, dy = Y * s; /* Darknet's dx, dy */
            assert_true(fabs(dx) <= fabs((t.image_w * s / a - out) / 2) + 1e-6);
            assert_true(fabs(dy) <= fabs((t.image_h * s - out) / 2) + 1e-6);
        }
    assert_true(r_seen_hi - r_seen_lo >= (max_crop - min_crop) / 2);
}

/* PNG sources (decoded by stb, whole): every pixel of every row equals
 * rotate_crop_image + flip + distort_image for the sample's draws, with
 * the window partly outside the image (black there, as Darknet fills). */
static void test_darknet_crop_pixels_equal_rotate_crop_image(void **state)
{
    (void)state;
    char *root = make_pngs("crop", 12, 56, 44, 6);
    coordl_config cfg = dn_config(root, 24);
    cfg.train_crop = COORDL_CROP_DARKNET;
    cfg.min_crop = 12; /* a shorter side below the window: black margins */
    cfg.max_crop = 40;
    cfg.rotate_deg = 25.0f;
    cfg.aspect = 0.75f;
    cfg.hue = 0.1f;
    cfg.saturation = cfg.exposure = 1.5f;
    coordl *L = tu_open(&cfg);
    check_geometry(L, 12, 24, 12, 40, 0.75, 1 / 0.75, 25.0);
    long black = check_rows(L, 3, load_png, 2e-5);
    assert_true(black > 0);
    coordl_close(L);
    free(root);
}

/* JPEG sources go through the region decode (only the window's rows and
 * columns): the pixels equal the reference on a full libjpeg decode. */
static void test_darknet_crop_on_jpeg_region_decode(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "jpg");
    for (int i = 0; i < 8; i++) {
        int w = 120 + 16 * (i % 3), h = 100 + 8 * (i % 2);
        uint8_t *pix = pattern(w, h, i);
        char *p = tu_join(root, "k/img_%03d.jpg", i);
        tu_jpeg_opts o = {100, TU_SUB_444, 0, 0};
        tu_write_jpeg(p, pix, w, h, 3, &o);
        free(p);
        free(pix);
    }
    coordl_config cfg = dn_config(root, 32);
    cfg.train_crop = COORDL_CROP_DARKNET;
    cfg.min_crop = 32;
    cfg.max_crop = 64;
    cfg.rotate_deg = 10.0f;
    coordl *L = tu_open(&cfg);
    check_geometry(L, 8, 32, 32, 64, 1.0, 1.0, 10.0);
    check_rows(L, 2, load_jpeg, 2e-5);
    coordl_close(L);
    tu_rmtree(root);
    free(root);
}

/* Darknet's train_classifier draws min/max as min_ratio x size after a
 * random resize; coordl_set keeps min_crop / out_w at open as the ratio. */
static void test_darknet_crop_range_scales_with_out_size(void **state)
{
    (void)state;
    char *root = make_pngs("resize", 12, 80, 64, 8);
    coordl_config cfg = dn_config(root, 16);
    cfg.train_crop = COORDL_CROP_DARKNET;
    cfg.min_crop = 16;
    cfg.max_crop = 28; /* ratios 1 and 1.75 */
    cfg.max_out_w = cfg.max_out_h = 32;
    coordl *L = tu_open(&cfg);
    check_geometry(L, 12, 16, 16, 28, 1.0, 1.0, 0.0);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_SIZE, 32), COORDL_OK);
    check_geometry(L, 12, 32, 32, 56, 1.0, 1.0, 0.0);
    check_rows(L, 1, load_png, 2e-5);
    coordl_close(L);
    /* defaults: Darknet's min_crop = w, max_crop = 2 w */
    cfg.min_crop = cfg.max_crop = 0;
    L = tu_open(&cfg);
    check_geometry(L, 12, 16, 16, 32, 1.0, 1.0, 0.0);
    coordl_close(L);
    free(root);
}

/* The default crop is torchvision's RandomResizedCrop (area 0.08..1 of the
 * image, ratio 3/4..4/3, no rotation, not Darknet's). */
static void test_default_crop_is_random_resized(void **state)
{
    (void)state;
    char *root = make_pngs("default", 12, 64, 64, 0);
    coordl_config cfg = dn_config(root, 16);
    assert_int_equal(cfg.train_crop, COORDL_CROP_RESIZED);
    coordl *L = tu_open(&cfg);
    for (uint64_t id = 0; id < 12; id++) {
        coordl_transform t;
        assert_int_equal(coordl_sample_transform(L, 0, id, &t), COORDL_OK);
        double area = t.w * t.h / (64.0 * 64.0), ratio = t.w / t.h;
        assert_true(area >= 0.08 - 0.02 && area <= 1.0);
        assert_true(ratio >= 0.75 - 0.05 && ratio <= 4.0 / 3 + 0.05);
        assert_true(t.x >= 0 && t.y >= 0 && t.x + t.w <= 64 && t.y + t.h <= 64);
        assert_true(t.angle == 0.0 && t.aspect == 1.0 && t.saturation == 1.0);
    }
    coordl_close(L);
    free(root);
}

static void test_bad_darknet_settings_are_refused(void **state)
{
    (void)state;
    char *root = make_pngs("bad", 3, 16, 16, 0);
    coordl *L = NULL;
    coordl_config cfg = dn_config(root, 8);
    cfg.saturation = 0.005f;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "saturation"));
    cfg = dn_config(root, 8);
    cfg.train_crop = 9;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "train_crop"));
    cfg = dn_config(root, 8);
    cfg.train_crop = COORDL_CROP_DARKNET;
    cfg.min_crop = 30;
    cfg.max_crop = 20;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "min_crop"));
    assert_null(L);
    free(root);
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rand_scale_075_is_a_range_not_off),
        cmocka_unit_test(test_colour_equals_darknet_distort_image),
        cmocka_unit_test(test_darknet_crop_pixels_equal_rotate_crop_image),
        cmocka_unit_test(test_darknet_crop_on_jpeg_region_decode),
        cmocka_unit_test(test_darknet_crop_range_scales_with_out_size),
        cmocka_unit_test(test_default_crop_is_random_resized),
        cmocka_unit_test(test_bad_darknet_settings_are_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
