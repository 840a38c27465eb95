/*
 * test_jpeg_exact.c - the pixels coordl decodes from a JPEG are exactly the
 * pixels of a full decode of that JPEG at the same DCT scale, cut to the
 * crop: byte for byte, at every edge of the crop.
 *
 * coordl decodes only the part of an image a sample needs (libjpeg's ROI
 * decode, or a spliced crop of a restart-marker rewrite of a cached item).
 * Chroma upsampling reads one chroma sample beyond each output pixel, so a
 * region that ends exactly at the crop gets its edge pixels wrong unless
 * the decoder widens it; these tests catch that.
 *
 * How the check sees decoded pixels through the public API: the train
 * pipeline with scale_min = scale_max and ratio 1 draws a square crop of
 * exactly s = d * o source pixels for an image of known size, the DCT
 * scale coordl picks for an o x o output is then 1/d, and when the crop's
 * corner is a multiple of d the resampler maps output pixel i to decoded
 * pixel x/d + i with weight 1 (an exact copy, U8 layout). So the output row
 * must equal the full decode at 1/d cut at (x/d, y/d). coordl_sample_transform
 * says where each crop is. Every sampling layout, CMYK/YCCK, progressive and
 * arithmetic sources, odd sizes, slivers, 1-pixel crops and all four DCT
 * scales are covered, and each case asserts that crops with an edge on an
 * interior MCU boundary (where the error lives) were among those compared.
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

/* ---- sources ------------------------------------------------------------ */

typedef struct variant {
    const char *name;
    int comps;          /* 1 gray, 3 YCbCr, 4 CMYK/YCCK                  */
    int hs, vs;         /* sampling of component 0 (and 3 when 4 comps)  */
    int ycck;           /* 4 comps: 1 = YCCK (else CMYK)                 */
    int no_adobe;       /* CMYK without the Adobe marker                 */
    int progressive, arith, optimize;
    int restart_rows;   /* a DRI in the source itself (MCU rows)         */
    int missing_scans;  /* progressive: the file ends (EOI) this many
                           scans early, its coefficients incomplete      */
} variant;

static const variant V420 = {"4:2:0", 3, 2, 2, 0, 0, 0, 0, 0, 0, 0};
static const variant V422 = {"4:2:2", 3, 2, 1, 0, 0, 0, 0, 0, 0, 0};
static const variant V440 = {"4:4:0", 3, 1, 2, 0, 0, 0, 0, 0, 0, 0};
static const variant V444 = {"4:4:4", 3, 1, 1, 0, 0, 0, 0, 0, 0, 0};
static const variant V411 = {"4:1:1", 3, 4, 1, 0, 0, 0, 0, 0, 0, 0};
static const variant VGRAY = {"gray", 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
static const variant VCMYK = {"CMYK", 4, 1, 1, 0, 0, 0, 0, 0, 0, 0};
static const variant VCMYK_PLAIN = {"CMYK without Adobe marker", 4, 1, 1, 0, 1, 0, 0, 0, 0, 0};
static const variant VYCCK = {"YCCK 2x2", 4, 2, 2, 1, 0, 0, 0, 0, 0, 0};
static const variant VPROG = {"4:2:0 progressive", 3, 2, 2, 0, 0, 1, 0, 0, 0, 0};
static const variant VARITH = {"4:2:0 arithmetic", 3, 2, 2, 0, 0, 0, 1, 0, 0, 0};
static const variant VPROG422 = {"4:2:2 progressive arithmetic", 3, 2, 1, 0, 0, 1, 1, 0, 0, 0};
static const variant VOPT = {"4:2:0 optimized tables, DRI 1 row", 3, 2, 2, 0, 0, 0, 0, 1, 1, 0};
/* Rarer luma sampling factors real files carry (4:1:0, and what cameras
 * and old encoders wrote); libjpeg's ROI crop is not exact for some of
 * them at some scales, so the plain path must fall back to full width. */
static const variant V410 = {"4x2 (4:1:0)", 3, 4, 2, 0, 0, 0, 0, 0, 0, 0};
static const variant V24 = {"2x4", 3, 2, 4, 0, 0, 0, 0, 0, 0, 0};
static const variant V14 = {"1x4", 3, 1, 4, 0, 0, 0, 0, 0, 0, 0};
static const variant V31 = {"3x1", 3, 3, 1, 0, 0, 0, 0, 0, 0, 0};
static const variant V32 = {"3x2", 3, 3, 2, 0, 0, 0, 0, 0, 0, 0};
/* one component with sampling factors above 1: a non-interleaved scan
 * whose MCU is one block, while libjpeg's iMCU is the factors' size */
static const variant VGRAY22 = {"gray 2x2", 1, 2, 2, 0, 0, 0, 0, 0, 0, 0};
static const variant VGRAY41 = {"gray 4x1", 1, 4, 1, 0, 0, 0, 0, 0, 0, 0};
/* progressive files that end early at a scan boundary: libjpeg accepts
 * them without a warning; their AC coefficients are partly unknown */
static const variant VPROG_1 = {"4:2:0 progressive, last scan missing", 3, 2, 2, 0, 0, 1, 0, 0, 0, 1};
static const variant VPROG_6 = {"4:2:2 progressive, 6 scans missing", 3, 2, 1, 0, 0, 1, 0, 0, 0, 6};
static const variant VPROG_GRAY = {"gray progressive, last scan missing", 1, 1, 1, 0, 0, 1, 0, 0, 0, 1};

/* Noise on a gradient: neighbouring chroma samples differ, so a wrong
 * upsampling neighbour changes the pixel. */
static uint8_t *make_pixels(int w, int h, int comps, uint64_t seed)
{
    uint8_t *p = malloc((size_t)w * h * comps);
    assert_non_null(p);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < comps; c++) {
                int base = (x * 255 / (w > 1 ? w - 1 : 1) * (c + 1) + y * 3) & 255;
                int v = base / 2 + (int)(tu_rand(&s) % 128);
                p[((size_t)y * w + x) * comps + c] = (uint8_t)v;
            }
    return p;
}

static uint8_t *encode(const variant *v, int w, int h, uint64_t seed, size_t *n)
{
    uint8_t *pix = make_pixels(w, h, v->comps, seed);
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long outlen = 0;
    jpeg_mem_dest(&c, &out, &outlen);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = v->comps;
    c.in_color_space = v->comps == 1 ? JCS_GRAYSCALE : v->comps == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&c);
    if (v->ycck) jpeg_set_colorspace(&c, JCS_YCCK);
    jpeg_set_quality(&c, 90, TRUE);
    c.comp_info[0].h_samp_factor = v->hs;
    c.comp_info[0].v_samp_factor = v->vs;
    if (v->comps == 4) {
        c.comp_info[3].h_samp_factor = v->hs;
        c.comp_info[3].v_samp_factor = v->vs;
    }
    if (v->no_adobe) c.write_Adobe_marker = FALSE;
    if (v->progressive) jpeg_simple_progression(&c);
    c.arith_code = (boolean)v->arith;
    c.optimize_coding = (boolean)v->optimize;
    c.restart_in_rows = v->restart_rows;
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = pix + (size_t)c.next_scanline * w * v->comps;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(pix);
    *n = outlen;
    if (v->missing_scans) { /* cut before the k-th last SOS, then EOI */
        int k = v->missing_scans;
        size_t at = outlen - 2;
        while (at > 2 && !(out[at] == 0xFF && out[at + 1] == 0xDA && --k == 0)) at--;
        assert_true(at > 2);
        out[at] = 0xFF;
        out[at + 1] = 0xD9;
        *n = at + 2;
    }
    return out;
}

/* The reference: a full decode at 1/d, RGB as coordl makes it (CMYK and
 * YCCK through coordl's documented ink formula). */
static uint8_t *decode_full(const uint8_t *jpg, size_t n, int d, int *ow, int *oh)
{
    struct jpeg_decompress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_decompress(&c);
    jpeg_mem_src(&c, jpg, (unsigned long)n);
    jpeg_read_header(&c, TRUE);
    const int cmyk = c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK;
    c.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    c.scale_num = 1;
    c.scale_denom = (unsigned)d;
    c.dct_method = JDCT_ISLOW;
    /* coordl decodes the coefficients a file holds: no guessing of the
     * ones a progressive file that ends early lacks (block smoothing reads
     * neighbouring blocks, so no crop could equal it) */
    c.do_block_smoothing = FALSE;
    jpeg_start_decompress(&c);
    const int w = (int)c.output_width, h = (int)c.output_height, nc = cmyk ? 4 : 3;
    uint8_t *raw = malloc((size_t)w * h * nc), *rgb = malloc((size_t)w * h * 3);
    assert_non_null(raw);
    assert_non_null(rgb);
    while (c.output_scanline < c.output_height) {
        JSAMPROW row = raw + (size_t)c.output_scanline * w * nc;
        jpeg_read_scanlines(&c, &row, 1);
    }
    const int inverted = c.saw_Adobe_marker;
    jpeg_finish_decompress(&c);
    jpeg_destroy_decompress(&c);
    for (size_t i = 0; i < (size_t)w * h; i++) {
        if (!cmyk) {
            memcpy(rgb + 3 * i, raw + 3 * i, 3);
            continue;
        }
        int C = raw[4 * i], M = raw[4 * i + 1], Y = raw[4 * i + 2], K = raw[4 * i + 3];
        if (!inverted) { C = 255 - C; M = 255 - M; Y = 255 - Y; K = 255 - K; }
        rgb[3 * i] = (uint8_t)((C * K + 127) / 255);
        rgb[3 * i + 1] = (uint8_t)((M * K + 127) / 255);
        rgb[3 * i + 2] = (uint8_t)((Y * K + 127) / 255);
    }
    free(raw);
    *ow = w;
    *oh = h;
    return rgb;
}

/* ---- one case ------------------------------------------------------------ */

/* PATH_PLAIN: no cache, libjpeg's ROI decode of the file. PATH_SPLICED:
 * the whole dataset cached and every item rewritten with restart markers
 * when first read (jpeg_rewrite_budget 1), so every sample is decoded from
 * a spliced crop. */
enum { PATH_PLAIN = 0, PATH_SPLICED = 1 };

#define ITEMS 8

typedef struct exact_case {
    const variant *v;
    int w, h;   /* image size                               */
    int d;      /* DCT scale 1/d                            */
    int o;      /* output side; the crop is d * o square    */
    int min_compared;
} exact_case;

typedef struct coverage {
    size_t compared;
    size_t mcu_left, mcu_right, mcu_top, mcu_bottom; /* crop edge on an interior MCU boundary */
    size_t img_left, img_right, img_top, img_bottom; /* crop edge on the image edge           */
} coverage;

static int mcu_w_of(const variant *v) { return v->comps == 1 ? 8 : 8 * v->hs; }
static int mcu_h_of(const variant *v) { return v->comps == 1 ? 8 : 8 * v->vs; }

static void run_case(const exact_case *ec, int path, coverage *cov)
{
    const int s = ec->d * ec->o;
    assert_true(s <= ec->w && s <= ec->h);
    char *root = tu_join(g_dir, "%s-%dx%d-d%d-o%d-p%d", ec->v->name, ec->w, ec->h, ec->d, ec->o, path);
    for (char *q = root + strlen(g_dir) + 1; *q; q++)
        if (*q == ' ' || *q == ':' || *q == ',') *q = '_';
    uint8_t *ref[ITEMS];
    int rw = 0, rh = 0;
    uint64_t ids_bytes = 0;
    for (int k = 0; k < ITEMS; k++) {
        size_t n;
        uint8_t *jpg = encode(ec->v, ec->w, ec->h, (uint64_t)k * 7919 + (uint64_t)ec->w, &n);
        char *path_k = tu_join(root, "c0/img_%02d.jpg", k);
        tu_write_file(path_k, jpg, n);
        free(path_k);
        ref[k] = decode_full(jpg, n, ec->d, &rw, &rh);
        ids_bytes += n;
        free(jpg);
    }
    coordl_config cfg = tu_config(root);
    cfg.pipeline = COORDL_PIPE_TRAIN;
    cfg.out_w = cfg.out_h = (uint32_t)ec->o;
    cfg.scale_min = cfg.scale_max = (float)((double)s * s / ((double)ec->w * ec->h));
    cfg.ratio_min = cfg.ratio_max = 1.0f;
    cfg.flip = 0;
    cfg.batch_size = ITEMS;
    cfg.threads = 1;
    cfg.seed = (uint64_t)(ec->w * 31 + ec->h * 7 + ec->d);
    cfg.jpeg_random_access = path == PATH_SPLICED;
    if (path == PATH_SPLICED) {
        cfg.cache_bytes = 2 * ids_bytes + 4096;
        cfg.jpeg_rewrite_budget = 1.0f;
    }
    coordl *L = tu_open(&cfg);
    const uint64_t n_items = coordl_num_items(L);
    assert_int_equal(n_items, ITEMS);
    /* item ids follow the sorted file names, img_00 .. img_07 */
    const int mw = mcu_w_of(ec->v) / ec->d, mh = mcu_h_of(ec->v) / ec->d;
    const size_t row_bytes = (size_t)ec->o * ec->o * 3;
    size_t compared = 0;
    const int max_epochs = 4000;
    for (int e = 0; e < max_epochs && compared < (size_t)ec->min_compared; e++) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) rc = coordl_next(L, &b);
        if (rc != COORDL_OK) fail_msg("%s: coordl_next = %d: %s", ec->v->name, (int)rc, coordl_errmsg(L));
        for (uint32_t i = 0; i < b.n; i++) {
            coordl_transform t;
            assert_int_equal(coordl_sample_transform(L, b.epoch, b.ids[i], &t), COORDL_OK);
            if (t.w != s || t.h != s)
                fail_msg("%s %dx%d: crop %gx%g, expected %dx%d (test geometry)", ec->v->name, ec->w,
                         ec->h, t.w, t.h, s, s);
            const int x = (int)t.x, y = (int)t.y;
            if (x % ec->d || y % ec->d) continue; /* not an exact copy: skip */
            const int sx = x / ec->d, sy = y / ec->d, o = ec->o;
            const uint8_t *got = (const uint8_t *)b.data + (size_t)i * row_bytes;
            const uint8_t *want = ref[b.ids[i]];
            for (int yy = 0; yy < o; yy++)
                for (int xx = 0; xx < o; xx++) {
                    const uint8_t *g = got + ((size_t)yy * o + xx) * 3;
                    const uint8_t *r = want + ((size_t)(sy + yy) * rw + sx + xx) * 3;
                    if (memcmp(g, r, 3) == 0) continue;
                    const char *where = xx == 0 ? "left edge" : xx == o - 1 ? "right edge"
                                      : yy == 0 ? "top edge" : yy == o - 1 ? "bottom edge" : "interior";
                    fail_msg("%s %dx%d at 1/%d, crop %dx%d at (%d,%d), epoch %llu item %llu: pixel "
                             "(%d,%d) of the crop (%s) is %d,%d,%d, a full decode has %d,%d,%d",
                             ec->v->name, ec->w, ec->h, ec->d, s, s, x, y, (unsigned long long)b.epoch,
                             (unsigned long long)b.ids[i], xx, yy, where, g[0], g[1], g[2], r[0], r[1],
                             r[2]);
                }
            compared++;
            cov->compared++;
            const int x1 = sx + o, y1 = sy + o;
            cov->mcu_left += sx > 0 && sx % mw == 0;
            cov->mcu_right += x1 < rw && x1 % mw == 0;
            cov->mcu_top += sy > 0 && sy % mh == 0;
            cov->mcu_bottom += y1 < rh && y1 % mh == 0;
            cov->img_left += sx == 0;
            cov->img_right += x1 == rw;
            cov->img_top += sy == 0;
            cov->img_bottom += y1 == rh;
        }
        coordl_release(L, &b);
    }
    if (compared < (size_t)ec->min_compared)
        fail_msg("%s %dx%d at 1/%d: only %zu crops could be compared", ec->v->name, ec->w, ec->h, ec->d,
                 compared);
    coordl_stats st;
    coordl_get_stats(L, &st);
    if (path == PATH_SPLICED) {
        /* every item was rewritten, and every sample came from a splice */
        if (st.jpeg_rewrites != ITEMS || st.jpeg_rewritten_items != ITEMS || st.jpeg_rewrite_failures != 0 ||
            st.jpeg_spliced != st.items)
            fail_msg("%s %dx%d: %llu rewrites (%llu held, %llu failed), %llu of %llu samples spliced",
                     ec->v->name, ec->w, ec->h, (unsigned long long)st.jpeg_rewrites,
                     (unsigned long long)st.jpeg_rewritten_items, (unsigned long long)st.jpeg_rewrite_failures,
                     (unsigned long long)st.jpeg_spliced, (unsigned long long)st.items);
    } else {
        assert_int_equal(st.jpeg_rewrites, 0);
        assert_int_equal(st.jpeg_spliced, 0);
    }
    coordl_close(L);
    for (int k = 0; k < ITEMS; k++) free(ref[k]);
    tu_rmtree(root);
    free(root);
}

/* Every DCT scale for one source layout: images a little larger than the
 * crop (so crops land on every MCU boundary and every image edge), then a
 * 1-pixel crop, a whole-image crop and an odd sliver. Asserts that crops
 * with an edge on an interior MCU boundary were compared on all four sides
 * (the edge error lives there), and on the image edges. */
static void run_variant(const variant *v, int path)
{
    coverage cov = {0};
    static const int o_for_d[9] = {0, 23, 13, 0, 7, 0, 0, 0, 4};
    for (int d = 1; d <= 8; d *= 2) {
        const int o = o_for_d[d], s = d * o;
        exact_case ec = {v, s + 41 + (d & 1), s + 37 + (d & 2), d, o, d == 8 ? 24 : d == 4 ? 32 : 48};
        run_case(&ec, path, &cov);
    }
    assert_true(cov.mcu_left > 0 && cov.mcu_right > 0 && cov.mcu_top > 0 && cov.mcu_bottom > 0);
    const exact_case extra[] = {
        {v, 24, 22, 1, 20, 24}, /* crops touching the edges     */
        {v, 26, 25, 2, 12, 16}, /* the same at 1/2              */
        {v, 37, 29, 1, 1, 32},  /* 1-pixel crops                */
        {v, 19, 21, 1, 1, 96},  /* ... in a last MCU 3 px wide  */
        {v, 61, 45, 4, 1, 32},  /* one pixel at 1/4 (4x4 crop)  */
        {v, 35, 35, 1, 35, 8},  /* the whole image              */
        {v, 8, 8, 8, 1, 8},     /* one pixel at 1/8 of a block  */
        {v, 203, 9, 1, 9, 32},  /* a sliver: a partial MCU row  */
        {v, 9, 150, 2, 4, 16},  /* a tall sliver at 1/2         */
        {v, 1, 1, 1, 1, 4},     /* a 1 x 1 image                */
    };
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) run_case(&extra[i], path, &cov);
    assert_true(cov.img_left > 0 && cov.img_right > 0 && cov.img_top > 0 && cov.img_bottom > 0);
    print_message("  %-34s %5zu crops compared (on an MCU boundary: %zu left %zu right %zu top %zu bottom)\n",
                  v->name, cov.compared, cov.mcu_left, cov.mcu_right, cov.mcu_top, cov.mcu_bottom);
}

#define PLAIN_TEST(fn, var)                                                     \
    static void fn(void **state)                                                \
    {                                                                           \
        (void)state;                                                            \
        run_variant(&var, PATH_PLAIN);                                          \
    }
PLAIN_TEST(test_roi_decode_is_exact_420, V420)
PLAIN_TEST(test_roi_decode_is_exact_422, V422)
PLAIN_TEST(test_roi_decode_is_exact_440, V440)
PLAIN_TEST(test_roi_decode_is_exact_444, V444)
PLAIN_TEST(test_roi_decode_is_exact_411, V411)
PLAIN_TEST(test_roi_decode_is_exact_gray, VGRAY)
PLAIN_TEST(test_roi_decode_is_exact_cmyk, VCMYK)
PLAIN_TEST(test_roi_decode_is_exact_cmyk_without_adobe, VCMYK_PLAIN)
PLAIN_TEST(test_roi_decode_is_exact_ycck, VYCCK)
PLAIN_TEST(test_roi_decode_is_exact_progressive, VPROG)
PLAIN_TEST(test_roi_decode_is_exact_arithmetic, VARITH)
PLAIN_TEST(test_roi_decode_is_exact_progressive_arithmetic_422, VPROG422)
PLAIN_TEST(test_roi_decode_is_exact_optimized_with_restarts, VOPT)
PLAIN_TEST(test_roi_decode_is_exact_410, V410)
PLAIN_TEST(test_roi_decode_is_exact_2x4, V24)
PLAIN_TEST(test_roi_decode_is_exact_1x4, V14)
PLAIN_TEST(test_roi_decode_is_exact_3x1, V31)
PLAIN_TEST(test_roi_decode_is_exact_3x2, V32)
PLAIN_TEST(test_roi_decode_is_exact_gray_2x2, VGRAY22)
PLAIN_TEST(test_roi_decode_is_exact_gray_4x1, VGRAY41)
PLAIN_TEST(test_roi_decode_is_exact_progressive_missing_last_scan, VPROG_1)
PLAIN_TEST(test_roi_decode_is_exact_progressive_missing_6_scans, VPROG_6)
PLAIN_TEST(test_roi_decode_is_exact_progressive_gray_missing_last_scan, VPROG_GRAY)

#define SPLICED_TEST(fn, var)                                                   \
    static void fn(void **state)                                                \
    {                                                                           \
        (void)state;                                                            \
        run_variant(&var, PATH_SPLICED);                                        \
    }
SPLICED_TEST(test_spliced_decode_is_exact_420, V420)
SPLICED_TEST(test_spliced_decode_is_exact_422, V422)
SPLICED_TEST(test_spliced_decode_is_exact_440, V440)
SPLICED_TEST(test_spliced_decode_is_exact_444, V444)
SPLICED_TEST(test_spliced_decode_is_exact_411, V411)
SPLICED_TEST(test_spliced_decode_is_exact_gray, VGRAY)
SPLICED_TEST(test_spliced_decode_is_exact_cmyk, VCMYK)
SPLICED_TEST(test_spliced_decode_is_exact_cmyk_without_adobe, VCMYK_PLAIN)
SPLICED_TEST(test_spliced_decode_is_exact_ycck, VYCCK)
SPLICED_TEST(test_spliced_decode_is_exact_progressive, VPROG)
SPLICED_TEST(test_spliced_decode_is_exact_arithmetic, VARITH)
SPLICED_TEST(test_spliced_decode_is_exact_progressive_arithmetic_422, VPROG422)
SPLICED_TEST(test_spliced_decode_is_exact_optimized_with_restarts, VOPT)
SPLICED_TEST(test_spliced_decode_is_exact_410, V410)
SPLICED_TEST(test_spliced_decode_is_exact_2x4, V24)
SPLICED_TEST(test_spliced_decode_is_exact_1x4, V14)
SPLICED_TEST(test_spliced_decode_is_exact_3x1, V31)
SPLICED_TEST(test_spliced_decode_is_exact_3x2, V32)
SPLICED_TEST(test_spliced_decode_is_exact_gray_2x2, VGRAY22)
SPLICED_TEST(test_spliced_decode_is_exact_gray_4x1, VGRAY41)
SPLICED_TEST(test_spliced_decode_is_exact_progressive_missing_last_scan, VPROG_1)
SPLICED_TEST(test_spliced_decode_is_exact_progressive_missing_6_scans, VPROG_6)
SPLICED_TEST(test_spliced_decode_is_exact_progressive_gray_missing_last_scan, VPROG_GRAY)

int main(void)
{
    tu_main_init(600); /* 46 cases; ASan builds run them 3-4x slower */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roi_decode_is_exact_420),
        cmocka_unit_test(test_roi_decode_is_exact_422),
        cmocka_unit_test(test_roi_decode_is_exact_440),
        cmocka_unit_test(test_roi_decode_is_exact_444),
        cmocka_unit_test(test_roi_decode_is_exact_411),
        cmocka_unit_test(test_roi_decode_is_exact_gray),
        cmocka_unit_test(test_roi_decode_is_exact_cmyk),
        cmocka_unit_test(test_roi_decode_is_exact_cmyk_without_adobe),
        cmocka_unit_test(test_roi_decode_is_exact_ycck),
        cmocka_unit_test(test_roi_decode_is_exact_progressive),
        cmocka_unit_test(test_roi_decode_is_exact_arithmetic),
        cmocka_unit_test(test_roi_decode_is_exact_progressive_arithmetic_422),
        cmocka_unit_test(test_roi_decode_is_exact_optimized_with_restarts),
        cmocka_unit_test(test_roi_decode_is_exact_410),
        cmocka_unit_test(test_roi_decode_is_exact_2x4),
        cmocka_unit_test(test_roi_decode_is_exact_1x4),
        cmocka_unit_test(test_roi_decode_is_exact_3x1),
        cmocka_unit_test(test_roi_decode_is_exact_3x2),
        cmocka_unit_test(test_roi_decode_is_exact_gray_2x2),
        cmocka_unit_test(test_roi_decode_is_exact_gray_4x1),
        cmocka_unit_test(test_roi_decode_is_exact_progressive_missing_last_scan),
        cmocka_unit_test(test_roi_decode_is_exact_progressive_missing_6_scans),
        cmocka_unit_test(test_roi_decode_is_exact_progressive_gray_missing_last_scan),
        cmocka_unit_test(test_spliced_decode_is_exact_420),
        cmocka_unit_test(test_spliced_decode_is_exact_422),
        cmocka_unit_test(test_spliced_decode_is_exact_440),
        cmocka_unit_test(test_spliced_decode_is_exact_444),
        cmocka_unit_test(test_spliced_decode_is_exact_411),
        cmocka_unit_test(test_spliced_decode_is_exact_gray),
        cmocka_unit_test(test_spliced_decode_is_exact_cmyk),
        cmocka_unit_test(test_spliced_decode_is_exact_cmyk_without_adobe),
        cmocka_unit_test(test_spliced_decode_is_exact_ycck),
        cmocka_unit_test(test_spliced_decode_is_exact_progressive),
        cmocka_unit_test(test_spliced_decode_is_exact_arithmetic),
        cmocka_unit_test(test_spliced_decode_is_exact_progressive_arithmetic_422),
        cmocka_unit_test(test_spliced_decode_is_exact_optimized_with_restarts),
        cmocka_unit_test(test_spliced_decode_is_exact_410),
        cmocka_unit_test(test_spliced_decode_is_exact_2x4),
        cmocka_unit_test(test_spliced_decode_is_exact_1x4),
        cmocka_unit_test(test_spliced_decode_is_exact_3x1),
        cmocka_unit_test(test_spliced_decode_is_exact_3x2),
        cmocka_unit_test(test_spliced_decode_is_exact_gray_2x2),
        cmocka_unit_test(test_spliced_decode_is_exact_gray_4x1),
        cmocka_unit_test(test_spliced_decode_is_exact_progressive_missing_last_scan),
        cmocka_unit_test(test_spliced_decode_is_exact_progressive_missing_6_scans),
        cmocka_unit_test(test_spliced_decode_is_exact_progressive_gray_missing_last_scan),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
