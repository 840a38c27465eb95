/*
 * test_augment.c - the Darknet-style augmentations of the train pipeline
 * (U8_NHWC rows, PNG sources so that pixels are exact):
 *   exposure: a grey image comes out uniformly scaled by a factor in
 *     [0.5, 2], darker and brighter both;
 *   saturation: grey stays grey; a coloured image keeps hue and value and
 *     changes saturation by a factor in [0.5, 2];
 *   hue: pure red shifts by at most hue * 360 degrees, both ways;
 *   all off (the defaults): solid colours come out exact (+-2);
 *   rotate_deg: a centre dot stays in the centre, a uniform image stays
 *     uniform into the corners, the angle fitted to a gradient image stays
 *     within +-rotate_deg (and is 0 without rotation);
 *   aspect: crop widths reported by coordl_sample_transform change for
 *     some items and never leave the image;
 *   every augmentation is deterministic across runs and thread counts.
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

/* ---- data --------------------------------------------------------------- */

typedef uint8_t *(*pix_fn)(int w, int h, int item);

/* root/k/img_%03d.png, `count` items of w x h (+ (item % 3) * jitter on
 * each side). */
static char *make_tree(const char *name, int count, int w, int h, int jitter,
                       pix_fn fn)
{
    char *root = tu_join(g_dir, "%s", name);
    for (int i = 0; i < count; i++) {
        int iw = w + (i % 3) * jitter, ih = h + ((i / 3) % 3) * jitter;
        uint8_t *pix = fn(iw, ih, i);
        char *p = tu_join(root, "k/img_%03d.png", i);
        tu_write_png(p, pix, iw, ih, 3);
        free(p);
        free(pix);
    }
    return root;
}

static uint8_t *pix_grey(int w, int h, int item)
{
    (void)item;
    static const uint8_t c[3] = {100, 100, 100};
    return tu_solid(w, h, 3, c);
}

static uint8_t *pix_pink(int w, int h, int item)
{
    (void)item;
    static const uint8_t c[3] = {200, 100, 100};
    return tu_solid(w, h, 3, c);
}

static uint8_t *pix_red(int w, int h, int item)
{
    (void)item;
    static const uint8_t c[3] = {255, 0, 0};
    return tu_solid(w, h, 3, c);
}

/* black with a white disc of radius 10 around the image centre */
static uint8_t *pix_dot(int w, int h, int item)
{
    (void)item;
    static const uint8_t black[3] = {0, 0, 0};
    uint8_t *p = tu_solid(w, h, 3, black);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double dx = x + 0.5 - w / 2.0, dy = y + 0.5 - h / 2.0;
            if (dx * dx + dy * dy <= 100.0)
                memset(p + ((size_t)y * (size_t)w + (size_t)x) * 3, 255, 3);
        }
    return p;
}

static uint8_t *pix_gradient(int w, int h, int item)
{
    (void)item;
    return tu_gradient_rgb(w, h, 128);
}

/* ---- runs ---------------------------------------------------------------- */

static coordl_config aug_config(const char *root, uint32_t out)
{
    coordl_config cfg = tu_config(root);
    cfg.pipeline = COORDL_PIPE_TRAIN;
    cfg.layout = COORDL_U8_NHWC;
    cfg.out_w = cfg.out_h = out;
    cfg.batch_size = 8;
    cfg.seed = 1234;
    return cfg;
}

typedef struct {
    size_t nrows;
    size_t rb;
    uint8_t *rows;     /* stream order */
    uint64_t *ids;
    uint64_t *epochs;
    int32_t *labels;
} rows_run;

static void collect(const coordl_config *cfg, unsigned epochs, rows_run *r)
{
    memset(r, 0, sizeof *r);
    r->rb = (size_t)cfg->out_w * cfg->out_h * 3;
    coordl *L = tu_open(cfg);
    size_t cap = 0;
    unsigned ends = 0;
    while (ends < epochs) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) {
            ends++;
            continue;
        }
        if (rc != COORDL_OK)
            fail_msg("status %d: %s", (int)rc, coordl_errmsg(L));
        assert_int_equal(b.layout, COORDL_U8_NHWC);
        assert_int_equal(b.w, cfg->out_w);
        for (uint32_t i = 0; i < b.n; i++) {
            if (r->nrows == cap) {
                cap = cap ? cap * 2 : 64;
                r->rows = realloc(r->rows, cap * r->rb);
                r->ids = realloc(r->ids, cap * sizeof *r->ids);
                r->epochs = realloc(r->epochs, cap * sizeof *r->epochs);
                r->labels = realloc(r->labels, cap * sizeof *r->labels);
                assert_true(r->rows && r->ids && r->epochs && r->labels);
            }
            memcpy(r->rows + r->nrows * r->rb,
                   (const uint8_t *)b.data + (size_t)i * r->rb, r->rb);
            r->ids[r->nrows] = b.ids[i];
            r->epochs[r->nrows] = b.epoch;
            r->labels[r->nrows] = b.labels[i];
            r->nrows++;
        }
        coordl_release(L, &b);
    }
    coordl_close(L);
}

static void free_rows(rows_run *r)
{
    free(r->rows);
    free(r->ids);
    free(r->epochs);
    free(r->labels);
}

static const uint8_t *row_of(const rows_run *r, uint64_t epoch, uint64_t id)
{
    for (size_t i = 0; i < r->nrows; i++)
        if (r->ids[i] == id && r->epochs[i] == epoch)
            return r->rows + i * r->rb;
    fail_msg("no row for item %llu in epoch %llu", (unsigned long long)id,
             (unsigned long long)epoch);
    return NULL;
}

typedef struct {
    double mean[3];
    int min[3], max[3];
} row_stats;

static row_stats stats_of(const uint8_t *row, size_t rb)
{
    row_stats s;
    double sum[3] = {0, 0, 0};
    for (int c = 0; c < 3; c++) {
        s.min[c] = 255;
        s.max[c] = 0;
    }
    for (size_t i = 0; i < rb; i += 3)
        for (int c = 0; c < 3; c++) {
            int v = row[i + (size_t)c];
            sum[c] += v;
            s.min[c] = v < s.min[c] ? v : s.min[c];
            s.max[c] = v > s.max[c] ? v : s.max[c];
        }
    for (int c = 0; c < 3; c++)
        s.mean[c] = sum[c] / (double)(rb / 3);
    return s;
}

/* fail unless every pixel of the row is within tol of the row's mean */
static void expect_uniform(const row_stats *s, int tol, const char *what, size_t row)
{
    for (int c = 0; c < 3; c++)
        if (s->max[c] - s->min[c] > tol)
            fail_msg("%s: row %zu channel %d spans %d..%d, expected uniform",
                     what, row, c, s->min[c], s->max[c]);
}

/* hue in degrees (-180, 180], saturation and value in [0, 1] */
static void rgb_to_hsv(double r, double g, double b, double *h, double *s, double *v)
{
    double mx = fmax(r, fmax(g, b)), mn = fmin(r, fmin(g, b)), d = mx - mn;
    *v = mx / 255.0;
    *s = mx > 0 ? d / mx : 0;
    double hh = 0;
    if (d > 0) {
        if (mx == r)
            hh = 60.0 * fmod((g - b) / d, 6.0);
        else if (mx == g)
            hh = 60.0 * ((b - r) / d + 2.0);
        else
            hh = 60.0 * ((r - g) / d + 4.0);
    }
    while (hh > 180.0)
        hh -= 360.0;
    while (hh <= -180.0)
        hh += 360.0;
    *h = hh;
}

/* ---- all off ------------------------------------------------------------ */

static uint8_t *pix_class(int w, int h, int item)
{
    uint8_t c[3];
    tu_class_colour(item % 4, c);
    return tu_solid(w, h, 3, c);
}

static void test_defaults_are_off_and_leave_solid_colours_exact(void **state)
{
    (void)state;
    coordl_config d = coordl_config_default();
    assert_true(d.hue == 0.0f);
    assert_true(d.rotate_deg == 0.0f);
    assert_true(d.saturation == 0.0f || d.saturation == 1.0f);
    assert_true(d.exposure == 0.0f || d.exposure == 1.0f);
    assert_true(d.aspect == 0.0f || d.aspect == 1.0f);
    char *root = make_tree("solid", 24, 40, 36, 5, pix_class);
    coordl_config cfg = aug_config(root, 16);
    rows_run r;
    collect(&cfg, 2, &r);
    assert_int_equal(r.nrows, 48);
    for (size_t i = 0; i < r.nrows; i++) {
        uint8_t c[3];
        tu_class_colour((int)(r.ids[i] % 4), c); /* file i has colour i % 4 */
        const uint8_t *row = r.rows + i * r.rb;
        for (size_t p = 0; p < r.rb; p++) {
            int diff = (int)row[p] - (int)c[p % 3];
            if (diff < -2 || diff > 2)
                fail_msg("item %llu byte %zu: %d, expected %d +-2",
                         (unsigned long long)r.ids[i], p, row[p], c[p % 3]);
        }
    }
    free_rows(&r);
    tu_rmtree(root);
    free(root);
}

/* ---- exposure / saturation / hue ----------------------------------------- */

static void test_exposure_scales_grey_uniformly_both_ways(void **state)
{
    (void)state;
    char *root = make_tree("grey", 48, 40, 36, 6, pix_grey);
    coordl_config cfg = aug_config(root, 16);
    cfg.exposure = 2.0f;
    rows_run r;
    collect(&cfg, 3, &r);
    assert_int_equal(r.nrows, 144);
    int darker = 0, brighter = 0;
    double fmin = 10, fmax_ = 0;
    for (size_t i = 0; i < r.nrows; i++) {
        row_stats s = stats_of(r.rows + i * r.rb, r.rb);
        expect_uniform(&s, 2, "exposure", i);
        /* grey stays grey */
        assert_true(fabs(s.mean[0] - s.mean[1]) <= 2 && fabs(s.mean[0] - s.mean[2]) <= 2);
        double f = s.mean[0] / 100.0;
        if (f < 0.5 - 0.03 || f > 2.0 + 0.03)
            fail_msg("row %zu: value %.1f is a factor %.3f of 100, outside "
                     "[0.5, 2]", i, s.mean[0], f);
        darker += f < 0.95;
        brighter += f > 1.05;
        fmin = f < fmin ? f : fmin;
        fmax_ = f > fmax_ ? f : fmax_;
    }
    if (darker < 20 || brighter < 20 || fmin > 0.67 || fmax_ < 1.5)
        fail_msg("exposure 2: %d darker, %d brighter rows of 144, factors "
                 "%.3f..%.3f; expected both ways, spread over [0.5, 2]",
                 darker, brighter, fmin, fmax_);
    free_rows(&r);
    tu_rmtree(root);
    free(root);
}

static void test_saturation_leaves_grey_unchanged(void **state)
{
    (void)state;
    char *root = make_tree("grey_sat", 24, 40, 36, 6, pix_grey);
    coordl_config cfg = aug_config(root, 16);
    cfg.saturation = 3.0f;
    rows_run r;
    collect(&cfg, 2, &r);
    for (size_t i = 0; i < r.nrows; i++)
        for (size_t p = 0; p < r.rb; p++)
            if (r.rows[i * r.rb + p] < 98 || r.rows[i * r.rb + p] > 102)
                fail_msg("row %zu byte %zu: %d; saturation changed grey 100",
                         i, p, r.rows[i * r.rb + p]);
    free_rows(&r);
    tu_rmtree(root);
    free(root);
}

static void test_saturation_scales_colour_keeping_hue_and_value(void **state)
{
    (void)state;
    /* (200, 100, 100): H 0, S 0.5, V 200. S * [0.5, 2] clamped to 1 gives
     * G = B = 200 * (1 - S') in [0, 150], R stays 200 */
    char *root = make_tree("pink", 48, 40, 36, 6, pix_pink);
    coordl_config cfg = aug_config(root, 16);
    cfg.saturation = 2.0f;
    rows_run r;
    collect(&cfg, 3, &r);
    int more = 0, less = 0;
    for (size_t i = 0; i < r.nrows; i++) {
        row_stats s = stats_of(r.rows + i * r.rb, r.rb);
        expect_uniform(&s, 2, "saturation", i);
        if (fabs(s.mean[0] - 200) > 3 || fabs(s.mean[1] - s.mean[2]) > 3 ||
            s.mean[1] > 153)
            fail_msg("row %zu: (%.1f, %.1f, %.1f); expected (200, g, g) with "
                     "g in [0, 150]", i, s.mean[0], s.mean[1], s.mean[2]);
        more += s.mean[1] < 90;  /* more saturated */
        less += s.mean[1] > 110; /* less saturated */
    }
    if (more < 20 || less < 20)
        fail_msg("saturation 2: %d more and %d less saturated rows of %zu", more,
                 less, r.nrows);
    free_rows(&r);
    tu_rmtree(root);
    free(root);
}

static void test_hue_shift_of_red_is_bounded_and_varied(void **state)
{
    (void)state;
    char *root = make_tree("red", 48, 40, 36, 6, pix_red);
    coordl_config cfg = aug_config(root, 16);
    cfg.hue = 0.1f; /* +-36 degrees */
    rows_run r;
    collect(&cfg, 3, &r);
    double hmin = 360, hmax = -360;
    int pos = 0, neg = 0;
    for (size_t i = 0; i < r.nrows; i++) {
        row_stats s = stats_of(r.rows + i * r.rb, r.rb);
        expect_uniform(&s, 2, "hue", i);
        double h, sat, v;
        rgb_to_hsv(s.mean[0], s.mean[1], s.mean[2], &h, &sat, &v);
        if (fabs(h) > 36.0 + 2.0 || v < 0.97 || sat < 0.97)
            fail_msg("row %zu: (%.1f, %.1f, %.1f) = hue %.2f deg, s %.3f, v "
                     "%.3f; expected |hue| <= 36 with s = v = 1", i, s.mean[0],
                     s.mean[1], s.mean[2], h, sat, v);
        hmin = h < hmin ? h : hmin;
        hmax = h > hmax ? h : hmax;
        pos += h > 10;
        neg += h < -10;
    }
    if (pos < 20 || neg < 20 || hmax - hmin < 40)
        fail_msg("hue 0.1: %d rows shifted > 10 deg, %d < -10 deg, range "
                 "%.1f..%.1f; expected shifts spread over +-36", pos, neg, hmin,
                 hmax);
    free_rows(&r);
    tu_rmtree(root);
    free(root);
}

/* ---- rotation ----------------------------------------------------------- */

static coordl_config whole_image_config(const char *root, uint32_t out)
{
    /* scale 1 and ratio 1 on a square image: the crop is the whole image */
    coordl_config cfg = aug_config(root, out);
    cfg.scale_min = cfg.scale_max = 1.0f;
    cfg.ratio_min = cfg.ratio_max = 1.0f;
    return cfg;
}

static void test_rotate_keeps_centre_dot_and_uniform_corners(void **state)
{
    (void)state;
    char *dot = make_tree("dot", 16, 64, 64, 0, pix_dot);
    coordl_config cfg = whole_image_config(dot, 32);
    cfg.rotate_deg = 30.0f;
    rows_run r;
    collect(&cfg, 2, &r);
    for (size_t i = 0; i < r.nrows; i++) {
        const uint8_t *row = r.rows + i * r.rb;
        for (int y = 15; y <= 16; y++)
            for (int x = 15; x <= 16; x++)
                for (int c = 0; c < 3; c++)
                    if (row[((size_t)y * 32 + (size_t)x) * 3 + (size_t)c] < 200)
                        fail_msg("row %zu: centre pixel (%d, %d) is %d, not "
                                 "bright", i, x, y,
                                 row[((size_t)y * 32 + (size_t)x) * 3 + (size_t)c]);
        static const int corners[4][2] = {{0, 0}, {31, 0}, {0, 31}, {31, 31}};
        for (int k = 0; k < 4; k++)
            for (int c = 0; c < 3; c++) {
                int v = row[((size_t)corners[k][1] * 32 + (size_t)corners[k][0]) * 3 + (size_t)c];
                if (v > 30)
                    fail_msg("row %zu: corner (%d, %d) is %d, not dark", i,
                             corners[k][0], corners[k][1], v);
            }
    }
    free_rows(&r);
    char *grey = make_tree("grey_rot", 16, 64, 64, 0, pix_grey);
    cfg = whole_image_config(grey, 32);
    cfg.rotate_deg = 30.0f;
    collect(&cfg, 2, &r);
    for (size_t i = 0; i < r.nrows; i++)
        for (size_t p = 0; p < r.rb; p++)
            if (r.rows[i * r.rb + p] < 98 || r.rows[i * r.rb + p] > 102)
                fail_msg("row %zu pixel (%zu, %zu): %d; a rotated uniform image "
                         "must stay uniform (corners included)", i,
                         (p / 3) % 32, p / 96, r.rows[i * r.rb + p]);
    free_rows(&r);
    tu_rmtree(dot);
    tu_rmtree(grey);
    free(dot);
    free(grey);
}

/* Fits v = a + bx * dx + by * dy over the disc of radius 11 around the
 * centre of a 32 x 32 row (channel c); returns the gradient's angle in
 * degrees and *mag its length. The disc is symmetric: the fit is two sums. */
static double gradient_angle(const uint8_t *row, int c, double *mag)
{
    double sx = 0, sy = 0, sxx = 0, syy = 0;
    for (int y = 0; y < 32; y++)
        for (int x = 0; x < 32; x++) {
            double dx = x - 15.5, dy = y - 15.5;
            if (dx * dx + dy * dy > 121.0)
                continue;
            double v = row[((size_t)y * 32 + (size_t)x) * 3 + (size_t)c];
            sx += v * dx;
            sy += v * dy;
            sxx += dx * dx;
            syy += dy * dy;
        }
    double bx = sx / sxx, by = sy / syy;
    *mag = sqrt(bx * bx + by * by);
    return atan2(by, bx) * 180.0 / M_PI;
}

static double wrap_deg(double a)
{
    while (a > 180.0)
        a -= 360.0;
    while (a <= -180.0)
        a += 360.0;
    return a;
}

static void test_rotate_angle_fitted_on_gradient_is_bounded(void **state)
{
    (void)state;
    char *root = make_tree("grad", 24, 64, 64, 0, pix_gradient);
    coordl_config cfg = whole_image_config(root, 32);
    cfg.flip = 0;
    rows_run r0, r30;
    collect(&cfg, 2, &r0);
    cfg.rotate_deg = 30.0f;
    collect(&cfg, 2, &r30);
    assert_int_equal(r0.nrows, 48);
    assert_int_equal(r30.nrows, 48);
    /* R = x * 255 / 63, G = y * 255 / 63 in the source: 8.1 per output px */
    coordl_config cfg0 = cfg;
    cfg0.rotate_deg = 0.0f;
    coordl *L0 = tu_open(&cfg0);
    for (uint64_t id = 0; id < 24; id++) {
        coordl_transform t;
        assert_int_equal(coordl_sample_transform(L0, 1, id, &t), COORDL_OK);
        assert_true(t.angle == 0.0);
    }
    coordl_close(L0);
    for (size_t i = 0; i < r0.nrows; i++) {
        double mag;
        double a = gradient_angle(r0.rows + i * r0.rb, 0, &mag);
        if (fabs(a) > 1.0 || mag < 7.0 || mag > 9.2)
            fail_msg("rotate 0, row %zu: gradient angle %.2f deg, length %.2f; "
                     "expected 0 and 8.1", i, a, mag);
    }
    double amin = 360, amax = -360;
    int big = 0, differ = 0, same_sign = 0, opposite_sign = 0;
    coordl *L = tu_open(&cfg); /* for coordl_sample_transform */
    for (size_t i = 0; i < r30.nrows; i++) {
        const uint8_t *row = r30.rows + i * r30.rb;
        double mr, mg;
        double ar = gradient_angle(row, 0, &mr);
        double ag = wrap_deg(gradient_angle(row, 1, &mg) - 90.0);
        if (fabs(ar) > 32.0 || fabs(wrap_deg(ar - ag)) > 3.0 || mr < 7.0 ||
            mr > 9.2 || mg < 7.0 || mg > 9.2)
            fail_msg("rotate 30, row %zu: R gradient at %.2f deg (length %.2f), "
                     "G at %.2f + 90 deg (length %.2f); expected one rotation "
                     "within +-30 deg", i, ar, mr, ag, mg);
        /* the reported angle is the one applied (one sign convention) */
        coordl_transform t;
        assert_int_equal(coordl_sample_transform(L, r30.epochs[i], r30.ids[i], &t),
                         COORDL_OK);
        if (fabs(t.angle) > 30.0 || fabs(fabs(t.angle) - fabs(ar)) > 2.0)
            fail_msg("rotate 30, row %zu: coordl_sample_transform angle %.2f, "
                     "fitted %.2f deg", i, t.angle, ar);
        if (fabs(ar) > 3.0) {
            same_sign += (ar > 0) == (t.angle > 0);
            opposite_sign += (ar > 0) != (t.angle > 0);
        }
        amin = ar < amin ? ar : amin;
        amax = ar > amax ? ar : amax;
        big += fabs(ar) > 10.0;
        differ += memcmp(row, row_of(&r0, r30.epochs[i], r30.ids[i]), r30.rb) != 0;
    }
    coordl_close(L);
    if (same_sign && opposite_sign)
        fail_msg("the sign of coordl_transform.angle agrees with the pixels for "
                 "%d rows and not for %d", same_sign, opposite_sign);
    if (big < 10 || amax - amin < 25.0 || differ < 24)
        fail_msg("rotate 30: %d rows beyond +-10 deg, angles %.1f..%.1f, %d of "
                 "48 rows differ from rotate 0", big, amin, amax, differ);
    free_rows(&r0);
    free_rows(&r30);
    tu_rmtree(root);
    free(root);
}

/* ---- aspect ------------------------------------------------------------- */

static void test_aspect_changes_crop_width_inside_the_image(void **state)
{
    (void)state;
    char *root = make_tree("aspect", 24, 48, 40, 8, pix_gradient);
    coordl_config c0 = aug_config(root, 16);
    c0.scale_min = c0.scale_max = 1.0f;
    c0.flip = 0;
    coordl_config c2 = c0;
    c2.aspect = 2.0f;
    coordl *L0 = tu_open(&c0), *L2 = tu_open(&c2);
    int changed = 0, narrower_id = -1, total = 0;
    for (uint64_t e = 0; e < 4; e++)
        for (uint64_t id = 0; id < 24; id++) {
            coordl_transform t0, t2;
            assert_int_equal(coordl_sample_transform(L0, e, id, &t0), COORDL_OK);
            assert_int_equal(coordl_sample_transform(L2, e, id, &t2), COORDL_OK);
            assert_int_equal(t0.image_w, t2.image_w);
            assert_int_equal(t0.image_h, t2.image_h);
            const double eps = 1e-6;
            if (t2.x < -eps || t2.y < -eps || t2.w < 1 || t2.h < 1 ||
                t2.x + t2.w > t2.image_w + eps || t2.y + t2.h > t2.image_h + eps)
                fail_msg("epoch %llu item %llu: crop (%g, %g) %g x %g leaves "
                         "the %u x %u image", (unsigned long long)e,
                         (unsigned long long)id, t2.x, t2.y, t2.w, t2.h,
                         t2.image_w, t2.image_h);
            if (fabs(t2.w - t0.w) > 0.5) {
                changed++;
                /* a stretch by [0.5, 2], clamped to the image */
                if (t2.w < 0.5 * t0.w - 1 || t2.w > 2 * t0.w + 1)
                    fail_msg("epoch %llu item %llu: width %g from %g is not a "
                             "stretch by [0.5, 2]", (unsigned long long)e,
                             (unsigned long long)id, t2.w, t0.w);
                if (e == 0 && t2.w < t0.w - 2)
                    narrower_id = (int)id;
            }
            total++;
        }
    if (changed < total / 4)
        fail_msg("aspect 2: only %d of %d crops changed width", changed, total);
    coordl_close(L0);
    coordl_close(L2);
    /* the pixels follow the transform: a narrower crop is another row */
    assert_true(narrower_id >= 0);
    rows_run r0, r2;
    collect(&c0, 1, &r0);
    collect(&c2, 1, &r2);
    assert_memory_not_equal(row_of(&r0, 0, (uint64_t)narrower_id),
                            row_of(&r2, 0, (uint64_t)narrower_id), r0.rb);
    free_rows(&r0);
    free_rows(&r2);
    tu_rmtree(root);
    free(root);
}

/* ---- determinism -------------------------------------------------------- */

static void run_hashes(const coordl_config *cfg, unsigned epochs, tu_run *run)
{
    coordl *L = tu_open(cfg);
    memset(run, 0, sizeof *run);
    assert_int_equal(tu_run_epochs(L, epochs, run), COORDL_OK);
    coordl_close(L);
}

static void test_all_augmentations_deterministic(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "tex");
    tu_folder_spec spec = {2, 16, 40, 40, 16, TU_PAT_TEXTURED, TU_FMT_PNG, 0, 3};
    tu_make_image_folder(root, &spec);
    coordl_config cfg = aug_config(root, 24);
    tu_run off, a, b, c;
    run_hashes(&cfg, 2, &off);
    cfg.hue = 0.1f;
    cfg.saturation = 1.5f;
    cfg.exposure = 1.5f;
    cfg.rotate_deg = 20.0f;
    cfg.aspect = 1.5f;
    run_hashes(&cfg, 2, &a);
    run_hashes(&cfg, 2, &b);
    cfg.threads = 1;
    run_hashes(&cfg, 2, &c);
    assert_int_equal(a.nbatches, 8);
    assert_int_equal(b.nbatches, 8);
    assert_int_equal(c.nbatches, 8);
    assert_memory_equal(a.hash, b.hash, 8 * sizeof *a.hash);
    assert_memory_equal(a.hash, c.hash, 8 * sizeof *a.hash);
    /* the same items in the same order, other pixels */
    assert_memory_equal(a.ids, off.ids, a.nrows * sizeof *a.ids);
    size_t same = 0;
    for (size_t i = 0; i < 8; i++)
        same += a.hash[i] == off.hash[i];
    assert_int_equal(same, 0);
    /* the transforms agree between handles too */
    coordl *L1 = tu_open(&cfg);
    cfg.threads = 2;
    coordl *L2 = tu_open(&cfg);
    for (uint64_t id = 0; id < 32; id++) {
        coordl_transform t1, t2;
        assert_int_equal(coordl_sample_transform(L1, 1, id, &t1), COORDL_OK);
        assert_int_equal(coordl_sample_transform(L2, 1, id, &t2), COORDL_OK);
        assert_int_equal(t1.image_w, t2.image_w);
        assert_int_equal(t1.image_h, t2.image_h);
        assert_true(t1.x == t2.x && t1.y == t2.y && t1.w == t2.w && t1.h == t2.h);
        assert_int_equal(t1.flip, t2.flip);
    }
    coordl_close(L1);
    coordl_close(L2);
    tu_run_free(&off);
    tu_run_free(&a);
    tu_run_free(&b);
    tu_run_free(&c);
    tu_rmtree(root);
    free(root);
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_off_and_leave_solid_colours_exact),
        cmocka_unit_test(test_exposure_scales_grey_uniformly_both_ways),
        cmocka_unit_test(test_saturation_leaves_grey_unchanged),
        cmocka_unit_test(test_saturation_scales_colour_keeping_hue_and_value),
        cmocka_unit_test(test_hue_shift_of_red_is_bounded_and_varied),
        cmocka_unit_test(test_rotate_keeps_centre_dot_and_uniform_corners),
        cmocka_unit_test(test_rotate_angle_fitted_on_gradient_is_bounded),
        cmocka_unit_test(test_aspect_changes_crop_width_inside_the_image),
        cmocka_unit_test(test_all_augmentations_deterministic),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
