/* Fast image prep against a slow reference: full 8/8 decode, then crop,
 * then antialiased bilinear resize in double precision (PIL/torchvision's
 * formula). The fast path decodes only the crop, at a DCT scale, and
 * resamples in float; these tests bound the difference and check that the
 * geometry and the flip are exactly those coordl_sample_transform reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <jpeglib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coordl.h"

static void quiet_log(void *u, coordl_log_level l, const char *m) { (void)u; (void)l; (void)m; }

/* A textured but JPEG-friendly image: waves plus soft-edged checks, so
 * that a one-pixel geometry error shows up as a large difference. */
static unsigned char *make_image(int w, int h, unsigned seed) {
    unsigned char *p = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double fx = (double)x / w, fy = (double)y / h;
            double r = 128 + 90 * sin(fx * 23.0 + seed) * cos(fy * 7.0);
            double g = 128 + 90 * sin(fy * 19.0 + fx * 5.0 + seed * 0.3);
            /* soft-edged checks, 12 x 10 across the image whatever its
             * size, so they stay above the output's Nyquist limit (1-px
             * steps at 2-3 output pixels per check cost the DCT-scaled path
             * up to 3/255 MAE on this channel) */
            double b = 130 + 70 * tanh(4.0 * sin(fx * 3.14159265 * 12) * sin(fy * 3.14159265 * 10));
            unsigned char *q = p + ((size_t)y * w + x) * 3;
            q[0] = (unsigned char)r;
            q[1] = (unsigned char)g;
            q[2] = (unsigned char)b;
        }
    return p;
}

static void write_jpeg(const char *path, const unsigned char *rgb, int w, int h, int quality,
                       int subsample420, int progressive) {
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    int hs = subsample420 ? 2 : 1;
    c.comp_info[0].h_samp_factor = hs;
    c.comp_info[0].v_samp_factor = hs;
    if (progressive) jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * w * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    fclose(f);
}

/* Full-size decode with libjpeg's defaults: the reference pixels. */
static unsigned char *decode_full(const char *path, int *w, int *h) {
    struct jpeg_decompress_struct d;
    struct jpeg_error_mgr err;
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    d.err = jpeg_std_error(&err);
    jpeg_create_decompress(&d);
    jpeg_stdio_src(&d, f);
    jpeg_read_header(&d, TRUE);
    d.out_color_space = JCS_RGB;
    jpeg_start_decompress(&d);
    *w = (int)d.output_width;
    *h = (int)d.output_height;
    unsigned char *p = malloc((size_t)*w * *h * 3);
    while (d.output_scanline < d.output_height) {
        JSAMPROW row = p + (size_t)d.output_scanline * *w * 3;
        jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    fclose(f);
    return p;
}

/* PIL's antialiased bilinear weights for one output coordinate. */
static int ref_taps(double x0, double span, int out, int i, int lo, int hi, int *first, double *w) {
    double scale = span / out, fs = scale > 1 ? scale : 1, support = fs;
    double center = x0 + (i + 0.5) * scale;
    int xmin = (int)floor(center - support + 0.5), xmax = (int)floor(center + support + 0.5);
    if (xmin < lo) xmin = lo;
    if (xmax > hi) xmax = hi;
    double sum = 0;
    for (int x = xmin; x < xmax; x++) {
        double t = fabs((x - center + 0.5) / fs);
        w[x - xmin] = t < 1 ? 1 - t : 0;
        sum += w[x - xmin];
    }
    for (int x = xmin; x < xmax; x++) w[x - xmin] /= sum;
    *first = xmin;
    return xmax - xmin;
}

/* Reference row: resample [x,y,w,h] of img (clipped to clip) to ow x oh. */
static void ref_resample(const unsigned char *img, int iw, double x, double y, double w, double h,
                         int cx0, int cy0, int cx1, int cy1, int ow, int oh, int flip, double *out) {
    double wx[4096], wy[4096];
    for (int j = 0; j < oh; j++) {
        int fy, ny = ref_taps(y, h, oh, j, cy0, cy1, &fy, wy);
        for (int i = 0; i < ow; i++) {
            int fx, nx = ref_taps(x, w, ow, i, cx0, cx1, &fx, wx);
            int o = flip ? ow - 1 - i : i;
            for (int c = 0; c < 3; c++) {
                double acc = 0;
                for (int ky = 0; ky < ny; ky++)
                    for (int kx = 0; kx < nx; kx++)
                        acc += wy[ky] * wx[kx] * img[((size_t)(fy + ky) * iw + fx + kx) * 3 + c];
                out[((size_t)j * ow + o) * 3 + c] = acc;
            }
        }
    }
}

typedef struct prep_case {
    int img_w, img_h, quality, sub420, progressive;
    uint32_t out;
    coordl_pipeline pipe;
    double max_mae; /* per channel, in 0..255 units */
    int want_scaled; /* 1: the case must exercise a DCT scale below 8/8 */
} prep_case;

static void run_case(const prep_case *pc) {
    char dir[] = "/tmp/coordl_prep_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cls[600], path[700];
    snprintf(cls, sizeof cls, "%s/c0", dir);
    assert_int_equal(mkdir(cls, 0700), 0);
    snprintf(path, sizeof path, "%s/img.jpg", cls);
    unsigned char *src = make_image(pc->img_w, pc->img_h, 3);
    write_jpeg(path, src, pc->img_w, pc->img_h, pc->quality, pc->sub420, pc->progressive);
    free(src);
    int iw, ih;
    unsigned char *full = decode_full(path, &iw, &ih);

    coordl_config cfg = coordl_config_default();
    cfg.source = dir;
    cfg.batch_size = 1;
    cfg.out_w = cfg.out_h = pc->out;
    cfg.layout = COORDL_U8_NHWC;
    cfg.pipeline = pc->pipe;
    cfg.threads = 1;
    cfg.log = quiet_log;
    coordl *L;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_OK);
    const int ow = (int)pc->out, oh = (int)pc->out;
    double *ref = malloc(sizeof(double) * ow * oh * 3);
    double worst = 0;
    int scaled_seen = 0, flips = 0;
    const int epochs = 24;
    for (int e = 0; e < epochs; e++) {
        coordl_batch b;
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        coordl_transform t;
        assert_int_equal(coordl_sample_transform(L, (uint64_t)e, b.ids[0], &t), COORDL_OK);
        assert_int_equal(t.image_w, (uint32_t)iw);
        assert_int_equal(t.image_h, (uint32_t)ih);
        if (pc->pipe == COORDL_PIPE_TRAIN) {
            /* RandomResizedCrop boxes are whole pixels inside the image */
            assert_true(t.x == floor(t.x) && t.w == floor(t.w) && t.x >= 0 && t.y >= 0);
            assert_true(t.x + t.w <= iw && t.y + t.h <= ih);
            ref_resample(full, iw, t.x, t.y, t.w, t.h, (int)t.x, (int)t.y, (int)(t.x + t.w),
                         (int)(t.y + t.h), ow, oh, t.flip, ref);
        } else {
            ref_resample(full, iw, t.x, t.y, t.w, t.h, 0, 0, iw, ih, ow, oh, t.flip, ref);
        }
        if (t.w / 2 >= ow && t.h / 2 >= oh) scaled_seen++;
        flips += t.flip;
        const unsigned char *got = b.data;
        for (int c = 0; c < 3; c++) {
            double mae = 0;
            for (int p = 0; p < ow * oh; p++) mae += fabs(got[p * 3 + c] - ref[p * 3 + c]);
            mae /= ow * oh;
            if (mae > worst) worst = mae;
            if (mae > pc->max_mae)
                fail_msg("epoch %d channel %d: MAE %.3f/255 exceeds %.3f/255 (crop %g,%g %gx%g flip %d)",
                         e, c, mae, pc->max_mae, t.x, t.y, t.w, t.h, t.flip);
        }
        coordl_release(L, &b);
        assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    }
    if (pc->want_scaled) assert_true(scaled_seen >= epochs / 3);
    else assert_int_equal(scaled_seen, 0);
    if (pc->pipe == COORDL_PIPE_TRAIN) assert_true(flips > 0 && flips < epochs);
    print_message("  worst per-channel MAE %.3f/255 over %d samples (%d DCT-scaled)\n", worst, epochs,
                  scaled_seen);
    free(ref);
    free(full);
    coordl_close(L);
    unlink(path);
    rmdir(cls);
    rmdir(dir);
}

/* Crops here stay below 2x the output, so every decode is at 8/8. */
static void test_full_scale_matches_reference(void **state) {
    (void)state;
    prep_case pc = {160, 120, 95, 0, 0, 112, COORDL_PIPE_TRAIN, 1.0, 0};
    run_case(&pc);
}

static void test_full_scale_420_matches_reference(void **state) {
    (void)state;
    prep_case pc = {150, 130, 92, 1, 0, 100, COORDL_PIPE_TRAIN, 1.0, 0};
    run_case(&pc);
}

/* Big image, small output: most crops decode at 1/2, 1/4 or 1/8. */
static void test_dct_scaled_matches_reference(void **state) {
    (void)state;
    prep_case pc = {1200, 900, 95, 0, 0, 48, COORDL_PIPE_TRAIN, 2.0, 1};
    run_case(&pc);
}

static void test_dct_scaled_420_matches_reference(void **state) {
    (void)state;
    prep_case pc = {1000, 800, 90, 1, 0, 40, COORDL_PIPE_TRAIN, 2.0, 1};
    run_case(&pc);
}

static void test_progressive_matches_reference(void **state) {
    (void)state;
    prep_case pc = {900, 700, 92, 1, 1, 48, COORDL_PIPE_TRAIN, 2.0, 1};
    run_case(&pc);
}

static void test_eval_matches_reference(void **state) {
    (void)state;
    prep_case pc = {200, 150, 95, 0, 0, 112, COORDL_PIPE_EVAL, 1.0, 0};
    run_case(&pc);
}

static void test_eval_dct_scaled_matches_reference(void **state) {
    (void)state;
    prep_case pc = {1280, 960, 95, 0, 0, 56, COORDL_PIPE_EVAL, 2.0, 1};
    run_case(&pc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_scale_matches_reference),
        cmocka_unit_test(test_full_scale_420_matches_reference),
        cmocka_unit_test(test_dct_scaled_matches_reference),
        cmocka_unit_test(test_dct_scaled_420_matches_reference),
        cmocka_unit_test(test_progressive_matches_reference),
        cmocka_unit_test(test_eval_matches_reference),
        cmocka_unit_test(test_eval_dct_scaled_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
