/* SPDX-License-Identifier: MIT */
/*
 * test_boxes.c - object detection (labels = COORDL_LABELS_BOXES):
 *   images of solid rectangles in distinct colours on white, with their
 *   YOLO label files (.../images/... -> .../labels/....txt): every output
 *   box must cover its colour's pixels in the output row (IoU >= 0.8, the
 *   pixels' bounding box against the box), and every colour visible in a
 *   row must have its box, under COORDL_CROP_RESIZED (boxes cut by the
 *   crop), COORDL_CROP_DARKNET, COORDL_CROP_DARKNET_BOXES (jitter, scale,
 *   grey canvas, the image cut by the canvas) and the eval letterbox, with
 *   flips, from PNGs and from cached JPEGs with jpeg_random_access on
 *   (batches byte-identical, pixels and boxes, with it off);
 *   the flip moves the boxes of the rows it mirrors, and only those;
 *   bad labels (missing, empty, malformed, class negative or not an
 *   integer or not below num_classes, coordinates outside [0, 1] or not
 *   finite): the row's batch fails naming the label file and line, or
 *   with COORDL_BAD_SUBSTITUTE the row is replaced and counted; boxes
 *   beyond max_boxes are dropped, counted and logged once;
 *   a tar shard's .txt members; a list of bare paths (Darknet's
 *   train.txt); coordl_next_into's layout; coordl_seek and a coordinated
 *   group give the same boxes as a plain run.
 */
#include "test_util.h"
#include "tu_tar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NIMG 12
#define NCOL 3
#define OUT 64

static char *g_dir, *g_png_list, *g_jpg_list;
static const uint8_t g_col[NCOL][3] = {{230, 20, 20}, {20, 200, 20}, {20, 20, 230}};

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
    free(g_png_list);
    free(g_jpg_list);
    return 0;
}

/* Image k: W x H, white, NCOL rectangles at places that vary with k (one
 * of them touching the image's edge); writes the image and its label
 * file, and a line of the list. */
static void make_item(const char *root, int k, int jpeg, FILE *list)
{
    const int W = 96 + 16 * (k % 3), H = 72 + 12 * ((k / 3) % 3);
    uint8_t *pix = malloc((size_t)W * H * 3);
    memset(pix, 255, (size_t)W * H * 3);
    char *img = tu_join(root, "images/train/im%02d.%s", k, jpeg ? "jpg" : "png");
    char *lab = tu_join(root, "labels/train/im%02d.txt", k);
    char text[512];
    size_t tl = 0;
    for (int c = 0; c < NCOL; c++) {
        const int rw = 18 + 5 * ((k + c) % 4), rh = 16 + 4 * ((k * 7 + c) % 5);
        int x0 = 4 + c * (W / NCOL) + (k % 5), y0 = 3 + ((k + 2 * c) * 11) % (H - rh - 6);
        if (c == 0 && k % 2) x0 = 0; /* on the image's left edge */
        if (x0 + rw > W) x0 = W - rw;
        for (int y = y0; y < y0 + rh; y++)
            for (int x = x0; x < x0 + rw; x++) memcpy(pix + ((size_t)y * W + x) * 3, g_col[c], 3);
        tl += (size_t)snprintf(text + tl, sizeof text - tl, "%d %.6f %.6f %.6f %.6f\n", c, (x0 + rw / 2.0) / W,
                               (y0 + rh / 2.0) / H, (double)rw / W, (double)rh / H);
    }
    if (jpeg) {
        tu_jpeg_opts o = {95, TU_SUB_444, 0, 0};
        tu_write_jpeg(img, pix, W, H, 3, &o);
    } else {
        tu_write_png(img, pix, W, H, 3);
    }
    tu_write_file(lab, text, tl);
    fprintf(list, "%s\n", img);
    free(pix);
    free(img);
    free(lab);
}

/* A list file of bare paths (Darknet's train.txt) over NIMG items. */
static const char *dataset(int jpeg)
{
    char **slot = jpeg ? &g_jpg_list : &g_png_list;
    if (*slot) return *slot;
    char *root = tu_join(g_dir, jpeg ? "jpg" : "png");
    *slot = tu_join(root, "train.txt");
    tu_mkdirs(root);
    FILE *f = fopen(*slot, "w");
    assert_non_null(f);
    for (int k = 0; k < NIMG; k++) make_item(root, k, jpeg, f);
    fclose(f);
    free(root);
    return *slot;
}

static coordl_config box_config(const char *src, int crop)
{
    coordl_config cfg = tu_config(src);
    cfg.labels = COORDL_LABELS_BOXES;
    cfg.max_boxes = 8;
    cfg.out_w = cfg.out_h = OUT;
    cfg.batch_size = 4;
    cfg.seed = 77;
    cfg.train_crop = crop;
    cfg.scale_min = 0.3f;
    return cfg;
}

/* Which colour a pixel is, or -1 (white, grey canvas, a blended edge). */
static int colour_of(const uint8_t *p)
{
    for (int c = 0; c < NCOL; c++) {
        int d = 0;
        for (int i = 0; i < 3; i++) d += abs((int)p[i] - g_col[c][i]);
        if (d < 90) return c;
    }
    return -1;
}

typedef struct {
    unsigned checked, rows;
    unsigned rows_with_all; /* rows holding a box of every colour */
    unsigned centre_checked; /* SSD: boxes whose keeping the centre rule decided */
} cover_stats;

/* COORDL_CROP_SSD drops a box whose centre falls outside the crop though
 * some of its pixels show: a visible colour may then have no box. */
static int g_centre_rule;

/* Boxes narrower than this (output pixels) are not held to IoU 0.8: a
 * pixel of blending at each edge decides a sliver's IoU. */
static double g_min_side = 6;

/* Every box of every row covers its colour's pixels (IoU >= 0.8), and
 * every colour with a visible block has its box. */
static void assert_boxes_cover(const coordl_batch *b, uint32_t max_boxes, cover_stats *cs)
{
    assert_non_null(b->boxes);
    assert_non_null(b->nboxes);
    const int ow = (int)b->w, oh = (int)b->h;
    for (uint32_t r = 0; r < b->n; r++) {
        const uint8_t *row = (const uint8_t *)b->data + (size_t)r * ow * oh * 3;
        int x0[NCOL], y0[NCOL], x1[NCOL], y1[NCOL], cnt[NCOL] = {0};
        for (int c = 0; c < NCOL; c++) x0[c] = y0[c] = 1 << 20, x1[c] = y1[c] = -1;
        for (int y = 0; y < oh; y++)
            for (int x = 0; x < ow; x++) {
                const int c = colour_of(row + ((size_t)y * ow + x) * 3);
                if (c < 0) continue;
                cnt[c]++;
                if (x < x0[c]) x0[c] = x;
                if (x > x1[c]) x1[c] = x;
                if (y < y0[c]) y0[c] = y;
                if (y > y1[c]) y1[c] = y;
            }
        int seen[NCOL] = {0};
        assert_true(b->nboxes[r] <= max_boxes);
        for (uint32_t k = 0; k < max_boxes; k++) {
            const float *bx = b->boxes + ((size_t)r * max_boxes + k) * 5;
            if (k >= b->nboxes[r]) { /* unused entries are zero */
                for (int i = 0; i < 5; i++) assert_true(bx[i] == 0.0f);
                continue;
            }
            const int c = (int)bx[4];
            assert_true(c >= 0 && c < NCOL && bx[4] == (float)c);
            assert_true(bx[2] > 0.0f && bx[3] > 0.0f && bx[0] - bx[2] / 2 >= -1e-5f && bx[0] + bx[2] / 2 <= 1.00001f);
            seen[c] = 1;
            const double L = (bx[0] - bx[2] / 2) * ow, R = (bx[0] + bx[2] / 2) * ow;
            const double T = (bx[1] - bx[3] / 2) * oh, B = (bx[1] + bx[3] / 2) * oh;
            if (R - L < g_min_side || B - T < g_min_side) continue; /* a sliver: a pixel of blending decides its IoU */
            if (cnt[c] == 0) fail_msg("row %u: box of colour %d at (%.1f %.1f %.1f %.1f) covers no pixel of it", r, c, L, T, R, B);
            const double pl = x0[c], pr = x1[c] + 1, pt = y0[c], pb = y1[c] + 1;
            const double iw = fmin(R, pr) - fmax(L, pl), ih = fmin(B, pb) - fmax(T, pt);
            const double inter = iw > 0 && ih > 0 ? iw * ih : 0;
            const double iou = inter / ((R - L) * (B - T) + (pr - pl) * (pb - pt) - inter);
            if (iou < 0.8)
                fail_msg("batch %llu row %u (item %llu): colour %d box (%.1f %.1f %.1f %.1f) vs pixels (%.0f %.0f %.0f "
                         "%.0f): IoU %.3f < 0.8", (unsigned long long)b->index, r, (unsigned long long)b->ids[r], c,
                         L, T, R, B, pl, pt, pr, pb, iou);
            cs->checked++;
        }
        for (int c = 0; c < NCOL; c++)
            if (!g_centre_rule && cnt[c] >= 40 && x1[c] - x0[c] >= 4 && y1[c] - y0[c] >= 4 && !seen[c])
                fail_msg("row %u: %d pixels of colour %d and no box for it", r, cnt[c], c);
        if (g_centre_rule) { /* SSD: kept iff the box's centre is in the crop */
            const int k = (int)b->ids[r];
            double sx = 0, sy = 0; /* output pixels per source pixel, from a box the crop did not cut */
            for (int c = 0; c < NCOL; c++)
                if (cnt[c] && x0[c] > 0 && x1[c] < ow - 1 && y0[c] > 0 && y1[c] < oh - 1) {
                    sx = (x1[c] - x0[c] + 1) / (double)(18 + 5 * ((k + c) % 4));
                    sy = (y1[c] - y0[c] + 1) / (double)(16 + 4 * ((k * 7 + c) % 5));
                }
            for (int c = 0; sx > 0 && c < NCOL; c++) {
                if (!cnt[c]) continue;
                const double fw = (18 + 5 * ((k + c) % 4)) * sx, fh = (16 + 4 * ((k * 7 + c) % 5)) * sy;
                const double vw = x1[c] - x0[c] + 1, vh = y1[c] - y0[c] + 1;
                const int cut_x = x0[c] == 0 || x1[c] == ow - 1, cut_y = y0[c] == 0 || y1[c] == oh - 1;
                /* the visible share of a cut side tells where its centre is */
                const int centre_in = (!cut_x || vw > fw / 2 + 1.5) && (!cut_y || vh > fh / 2 + 1.5);
                const int centre_out = (cut_x && vw < fw / 2 - 1.5) || (cut_y && vh < fh / 2 - 1.5);
                if (centre_in && !seen[c])
                    fail_msg("row %u (item %d): colour %d shows %.0f x %.0f of %.0f x %.0f pixels, its centre in the "
                             "crop, and has no box", r, k, c, vw, vh, fw, fh);
                if (centre_out && seen[c])
                    fail_msg("row %u (item %d): colour %d shows %.0f x %.0f of %.0f x %.0f pixels, its centre outside "
                             "the crop, and kept its box", r, k, c, vw, vh, fw, fh);
                cs->centre_checked += centre_in || centre_out;
            }
        }
        cs->rows_with_all += b->nboxes[r] == NCOL;
        cs->rows++;
    }
}

/* Runs `epochs` epochs, checking cover (when asked) and hashing pixels
 * and boxes of every batch into h (at most 64 batches). */
static size_t run_boxes(const coordl_config *cfg, unsigned epochs, int check, uint64_t *h, cover_stats *cs)
{
    g_centre_rule = cfg->train_crop == COORDL_CROP_SSD;
    coordl *L = tu_open(cfg);
    coordl_batch b;
    size_t nb = 0;
    unsigned ends = 0;
    while (ends < epochs) {
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) { ends++; continue; }
        if (rc != COORDL_OK) fail_msg("coordl_next: %s: %s", coordl_strerror(rc), coordl_errmsg(L));
        if (check) assert_boxes_cover(&b, cfg->max_boxes, cs);
        uint64_t x = tu_batch_hash(&b);
        x = tu_fnv1a(x, b.boxes, (size_t)b.n * cfg->max_boxes * 5 * sizeof(float));
        x = tu_fnv1a(x, b.nboxes, (size_t)b.n * sizeof(uint32_t));
        assert_true(nb < 64);
        h[nb++] = x;
        coordl_release(L, &b);
    }
    coordl_close(L);
    return nb;
}

static void check_mode(int crop, coordl_pipeline pipe, int jpeg)
{
    coordl_config cfg = box_config(dataset(jpeg), crop);
    cfg.pipeline = pipe;
    if (crop == COORDL_CROP_DARKNET_BOXES) {
        cfg.jitter = 0.3f;
        cfg.place_scale_min = 0.6f;
        cfg.place_scale_max = 1.6f; /* > 1: the canvas cuts the image and its boxes */
    }
    uint64_t h[64];
    cover_stats cs = {0, 0, 0, 0};
    run_boxes(&cfg, 2, 1, h, &cs);
    assert_true(cs.rows == 2 * NIMG);
    assert_true(cs.checked >= NIMG); /* not a vacuous pass */
}

static void test_boxes_follow_pixels_resized_crop(void **state) { (void)state; check_mode(COORDL_CROP_RESIZED, COORDL_PIPE_TRAIN, 0); }
static void test_boxes_follow_pixels_darknet_classifier_crop(void **state) { (void)state; check_mode(COORDL_CROP_DARKNET, COORDL_PIPE_TRAIN, 0); }
static void test_boxes_follow_pixels_darknet_detection(void **state) { (void)state; check_mode(COORDL_CROP_DARKNET_BOXES, COORDL_PIPE_TRAIN, 0); }
/* SSD's sampler: every box kept covers its pixels; some rows are crops
 * that dropped a box (its centre outside), others keep all three. */
static void test_boxes_follow_pixels_ssd(void **state)
{
    (void)state;
    coordl_config cfg = box_config(dataset(0), COORDL_CROP_SSD);
    uint64_t h[64];
    cover_stats cs = {0, 0, 0, 0};
    g_centre_rule = 1;
    for (uint64_t seed = 1; seed <= 4; seed++) { /* 4 x 5 epochs: enough crops cut a box past its centre */
        cfg.seed = seed;
        run_boxes(&cfg, 5, 1, h, &cs);
    }
    g_centre_rule = 0;
    assert_true(cs.rows == 20 * NIMG);
    assert_true(cs.checked >= NIMG);
    assert_true(cs.centre_checked >= NIMG); /* the rule was put to the test */
    if (cs.rows_with_all == 0 || cs.rows_with_all == cs.rows)
        fail_msg("%u of %u rows keep every box: SSD's crops should drop boxes in some rows and not in others",
                 cs.rows_with_all, cs.rows);
}

/* SSD's zoom-out (ssd_expand 4): half the rows are the image small on a
 * grey canvas; every box kept still covers its pixels, and the rule of the
 * centre holds. */
static void test_boxes_follow_pixels_ssd_zoom_out(void **state)
{
    (void)state;
    coordl_config cfg = box_config(dataset(1), COORDL_CROP_SSD);
    cfg.ssd_expand = 4.0f;
    cfg.out_w = cfg.out_h = 2 * OUT; /* the zoom-out makes boxes small */
    g_min_side = 12;
    uint64_t h[64];
    cover_stats cs = {0, 0, 0, 0};
    g_centre_rule = 1;
    for (uint64_t seed = 1; seed <= 2; seed++) {
        cfg.seed = seed;
        run_boxes(&cfg, 5, 1, h, &cs);
    }
    g_centre_rule = 0;
    g_min_side = 6;
    assert_true(cs.rows == 10 * NIMG);
    assert_true(cs.checked >= NIMG);
    /* with the zoom-out, batches differ from the crop without it */
    uint64_t h2[64];
    cover_stats cs2 = {0, 0, 0, 0};
    cfg.ssd_expand = 0.0f;
    g_centre_rule = 1;
    const size_t nb = run_boxes(&cfg, 5, 1, h2, &cs2);
    g_centre_rule = 0;
    size_t same = 0;
    for (size_t i = 0; i < nb; i++) same += h[i] == h2[i];
    assert_true(same < nb);
}

static void test_boxes_follow_pixels_letterbox(void **state) { (void)state; check_mode(COORDL_CROP_RESIZED, COORDL_PIPE_EVAL, 0); }

/* Cached JPEGs rewritten for random access: byte-identical batches (pixels
 * and boxes) with it on and off, and the boxes still cover their pixels. */
static void random_access_case(int crop)
{
    coordl_config cfg = box_config(dataset(1), crop);
    cfg.cache_bytes = 64u << 20;
    cfg.cache_pin = COORDL_PIN_OFF;
    cfg.jpeg_rewrite_budget = 1.0f;
    cfg.out_w = cfg.out_h = OUT;
    if (crop == COORDL_CROP_DARKNET_BOXES) {
        cfg.jitter = 0.2f;
        cfg.place_scale_min = 0.8f;
        cfg.place_scale_max = 2.0f;
    } else {
        cfg.scale_min = 0.15f; /* small crops: the splice covers part of the image */
    }
    uint64_t on[64], off[64];
    cover_stats cs = {0, 0, 0, 0};
    cfg.jpeg_random_access = 1;
    const size_t n_on = run_boxes(&cfg, 3, 1, on, &cs);
    cfg.jpeg_random_access = 0;
    const size_t n_off = run_boxes(&cfg, 3, 0, off, &cs);
    assert_int_equal(n_on, n_off);
    for (size_t i = 0; i < n_on; i++)
        if (on[i] != off[i]) fail_msg("batch %zu differs with jpeg_random_access on and off", i);
    assert_true(cs.checked >= NIMG);
}

static void test_boxes_identical_with_random_access_resized(void **state) { (void)state; random_access_case(COORDL_CROP_RESIZED); }
static void test_boxes_identical_with_random_access_darknet(void **state) { (void)state; random_access_case(COORDL_CROP_DARKNET_BOXES); }
static void test_boxes_identical_with_random_access_ssd(void **state)
{
    (void)state;
    g_centre_rule = 1;
    random_access_case(COORDL_CROP_SSD);
    g_centre_rule = 0;
}

/* The flip is the detection crop's last draw: with it on, the rows it
 * mirrors have their boxes mirrored (x -> 1 - x) and every other row is
 * the same as with it off. */
static void test_flip_mirrors_the_boxes_of_flipped_rows(void **state)
{
    (void)state;
    coordl_config cfg = box_config(dataset(0), COORDL_CROP_DARKNET_BOXES);
    cfg.jitter = 0.2f;
    cfg.batch_size = NIMG;
    cfg.shuffle = 0;
    float with[NIMG * 8 * 5], without[NIMG * 8 * 5];
    for (int f = 0; f < 2; f++) {
        cfg.flip = f;
        coordl *L = tu_open(&cfg);
        coordl_batch b;
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        memcpy(f ? with : without, b.boxes, sizeof with);
        coordl_release(L, &b);
        coordl_close(L);
    }
    int flipped = 0, same = 0;
    for (int r = 0; r < NIMG; r++) {
        const float *a = with + r * 8 * 5, *o = without + r * 8 * 5;
        if (memcmp(a, o, 8 * 5 * sizeof(float)) == 0) { same++; continue; }
        flipped++;
        for (int k = 0; k < 8; k++) {
            if (o[k * 5 + 2] == 0.0f) continue;
            assert_true(fabsf(a[k * 5] - (1.0f - o[k * 5])) < 1e-5f);
            if (!(a[k * 5 + 1] == o[k * 5 + 1] && fabsf(a[k * 5 + 2] - o[k * 5 + 2]) < 1e-6f && a[k * 5 + 3] == o[k * 5 + 3] &&
                  a[k * 5 + 4] == o[k * 5 + 4]))
                fail_msg("row %d box %d: flipped (%.9g %.9g %.9g %.9g %.9g), not (%.9g %.9g %.9g %.9g %.9g)", r, k, a[k * 5], a[k * 5 + 1],
                         a[k * 5 + 2], a[k * 5 + 3], a[k * 5 + 4], o[k * 5], o[k * 5 + 1], o[k * 5 + 2], o[k * 5 + 3],
                         o[k * 5 + 4]);
        }
    }
    assert_true(flipped > 0 && same > 0);
}

/* One item with a bad label among good ones: the batch holding it fails
 * naming the file and line (COORDL_BAD_FAIL), or it is replaced and
 * counted (COORDL_BAD_SUBSTITUTE). */
static void bad_label_case(const char *name, const char *text, size_t len, int32_t num_classes, const char *expect)
{
    char *root = tu_join(g_dir, "bad_%s", name);
    char *list = tu_join(root, "train.txt");
    tu_mkdirs(root);
    FILE *f = fopen(list, "w");
    for (int k = 0; k < 4; k++) make_item(root, k, 0, f);
    fclose(f);
    char *lab = tu_join(root, "labels/train/im02.txt");
    if (text) tu_write_file(lab, text, len);
    else remove(lab);
    for (int policy = 0; policy < 2; policy++) {
        coordl_config cfg = box_config(list, COORDL_CROP_RESIZED);
        cfg.batch_size = 4;
        cfg.num_classes = num_classes;
        cfg.on_bad_sample = policy ? COORDL_BAD_SUBSTITUTE : COORDL_BAD_FAIL;
        coordl *L = tu_open(&cfg);
        coordl_stats st;
        coordl_get_stats(L, &st);
        assert_int_equal(st.bad_labels, 1);
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (policy == 0) {
            assert_int_equal(rc, COORDL_ERR_CORRUPT);
            const char *msg = coordl_errmsg(L);
            if (!strstr(msg, "labels/train/im02.txt") || !strstr(msg, expect))
                fail_msg("%s: message \"%s\" should name the label file and say \"%s\"", name, msg, expect);
        } else {
            assert_int_equal(rc, COORDL_OK);
            for (uint32_t r = 0; r < b.n; r++) assert_true(b.ids[r] != 2 && b.nboxes[r] <= NCOL);
            coordl_release(L, &b);
            coordl_get_stats(L, &st);
            assert_true(st.bad_samples >= 1); /* and more in the batches prepared ahead */
        }
        coordl_close(L);
    }
    free(lab);
    free(list);
    free(root);
}

static void test_bad_labels_are_named_or_substituted(void **state)
{
    (void)state;
    bad_label_case("missing", NULL, 0, 0, "missing label file");
    bad_label_case("empty", "", 0, 0, "empty label file");
    bad_label_case("blank", "\n  \n", 4, 0, "empty label file");
    bad_label_case("malformed", "0 0.5 0.5 0.2 0.2\nhello\n", 24, 0, "line 2");
    bad_label_case("short", "0 0.5 0.5 0.2\n", 14, 0, "line 1: expected 5 fields");
    bad_label_case("extra", "0 0.5 0.5 0.2 0.2 7\n", 20, 0, "more than 5 fields");
    bad_label_case("negative", "0 0.5 0.5 0.2 0.2\n-1 0.5 0.5 0.2 0.2\n", 36, 0, "line 2: the class is negative");
    bad_label_case("fraction", "1.5 0.5 0.5 0.2 0.2\n", 20, 0, "not an integer");
    bad_label_case("outside", "0 1.5 0.5 0.2 0.2\n", 18, 0, "outside [0, 1]");
    bad_label_case("nan", "0 nan 0.5 0.2 0.2\n", 18, 0, "not finite");
    bad_label_case("huge", "0 0.5 0.5 1e39 0.2\n", 19, 0, "not finite");
    bad_label_case("class_bound", "0 0.5 0.5 0.2 0.2\n3 0.5 0.5 0.2 0.2\n", 36, 3, "line 2: the class is not below num_classes");
    bad_label_case("nul", "0 0.5 0.5\0 0.2 0.2\n", 19, 0, "NUL");
}

/* Boxes beyond max_boxes are dropped at open, counted, logged once. */
static void test_boxes_beyond_max_are_dropped_and_counted(void **state)
{
    (void)state;
    coordl_config cfg = box_config(dataset(0), COORDL_CROP_RESIZED);
    cfg.max_boxes = 2;
    tu_log_record *rec = tu_log_record_new();
    cfg.log = tu_log_record_fn;
    cfg.log_user = rec;
    coordl *L = tu_open(&cfg);
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_int_equal(st.boxes_dropped, NIMG); /* one of 3 per item */
    assert_int_equal(tu_log_count(rec), 1);
    assert_true(tu_log_contains(rec, "beyond max_boxes"));
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    for (uint32_t r = 0; r < b.n; r++) assert_true(b.nboxes[r] <= 2);
    coordl_release(L, &b);
    coordl_close(L);
    tu_log_record_free(rec);
}

/* coordl_next_into: n x max_boxes x 5 floats, then n counts when they fit;
 * the boxes alone (Darknet's truth matrix) are enough. */
static void test_next_into_boxes_layout(void **state)
{
    (void)state;
    coordl_config cfg = box_config(dataset(0), COORDL_CROP_DARKNET_BOXES);
    cfg.shuffle = 0;
    const size_t row = OUT * OUT * 3, nb = 4 * 8 * 5 * sizeof(float);
    uint8_t *data = malloc(4 * row), *lab = malloc(nb + 16);
    coordl *A = tu_open(&cfg), *B = tu_open(&cfg);
    coordl_batch b;
    assert_int_equal(coordl_next(A, &b), COORDL_OK);
    assert_int_equal(coordl_next_into(B, data, 4 * row, lab, nb - 1), COORDL_ERR_INVALID);
    memset(lab, 0xEE, nb + 16);
    assert_int_equal(coordl_next_into(B, data, 4 * row, lab, nb + 16), COORDL_OK);
    assert_memory_equal(data, b.data, 4 * row);
    assert_memory_equal(lab, b.boxes, nb);
    assert_memory_equal(lab + nb, b.nboxes, 16);
    coordl_release(A, &b);
    assert_int_equal(coordl_next(A, &b), COORDL_OK);
    memset(lab, 0xEE, nb + 16);
    assert_int_equal(coordl_next_into(B, data, 4 * row, lab, nb), COORDL_OK); /* no room for counts */
    assert_memory_equal(lab, b.boxes, nb);
    assert_true(lab[nb] == 0xEE);
    coordl_release(A, &b);
    coordl_close(A);
    coordl_close(B);
    free(data);
    free(lab);
}

/* coordl_seek and a coordinated group (its rows staged and copied into
 * the shared ring, where the slots hold the counts) give the plain run's
 * batches, boxes included. */
static void test_seek_and_group_give_the_same_boxes(void **state)
{
    (void)state;
    coordl_config cfg = box_config(dataset(0), COORDL_CROP_DARKNET_BOXES);
    cfg.jitter = 0.3f;
    uint64_t plain[64], grp[64];
    cover_stats cs = {0, 0, 0, 0};
    const size_t n = run_boxes(&cfg, 2, 0, plain, &cs);
    /* seek to epoch 1, batch 1: the plain run's batch at that place */
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_seek(L, 1, 1), COORDL_OK);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    uint64_t x = tu_batch_hash(&b);
    x = tu_fnv1a(x, b.boxes, (size_t)b.n * cfg.max_boxes * 5 * sizeof(float));
    x = tu_fnv1a(x, b.nboxes, (size_t)b.n * sizeof(uint32_t));
    const size_t per_epoch = (size_t)coordl_batches_per_epoch(L);
    assert_true(x == plain[per_epoch + 1]);
    coordl_release(L, &b);
    coordl_close(L);
    char name[64];
    snprintf(name, sizeof name, "cdl-boxes-%d", (int)getpid());
    cfg.group = name;
    cfg.group_size = 1;
    const size_t ng = run_boxes(&cfg, 2, 0, grp, &cs);
    assert_int_equal(n, ng);
    for (size_t i = 0; i < n; i++)
        if (plain[i] != grp[i]) fail_msg("group batch %zu differs from the private run's", i);
}

/* A tar shard: each sample's .txt member is its label file. */
static void test_tar_txt_members_are_box_labels(void **state)
{
    (void)state;
    const char *list = dataset(0);
    char *shard = tu_join(g_dir, "boxes.tar");
    tu_tar t;
    tu_tar_open(&t, shard);
    char *root = tu_join(g_dir, "png");
    for (int k = 0; k < 4; k++) {
        char *img = tu_join(root, "images/train/im%02d.png", k), *lab = tu_join(root, "labels/train/im%02d.txt", k);
        size_t ni, nl;
        uint8_t *pi = tu_read_file(img, &ni), *pl = tu_read_file(lab, &nl);
        char name[64];
        snprintf(name, sizeof name, "s%02d.png", k);
        tu_tar_file(&t, name, pi, ni);
        if (k != 3) { /* the last sample has none: a bad label */
            snprintf(name, sizeof name, "s%02d.txt", k);
            tu_tar_file(&t, name, pl, nl);
        }
        free(pi), free(pl), free(img), free(lab);
    }
    tu_tar_close(&t, 1);
    (void)list;
    coordl_config cfg = box_config(shard, COORDL_CROP_RESIZED);
    cfg.on_bad_sample = COORDL_BAD_SUBSTITUTE;
    cfg.shuffle = 0;
    coordl *L = tu_open(&cfg);
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_int_equal(st.bad_labels, 1);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    cover_stats cs = {0, 0, 0, 0};
    assert_boxes_cover(&b, cfg.max_boxes, &cs);
    for (uint32_t r = 0; r < b.n; r++) assert_true(b.ids[r] != 3);
    coordl_release(L, &b);
    coordl_close(L);
    free(root);
    free(shard);
}

/* Darknet's random=1: coordl_set changes the output size between batches;
 * the boxes are normalized, and still cover their pixels at the new size. */
static void test_boxes_follow_a_size_change(void **state)
{
    (void)state;
    coordl_config cfg = box_config(dataset(0), COORDL_CROP_DARKNET_BOXES);
    cfg.jitter = 0.2f;
    cfg.max_out_w = cfg.max_out_h = 96;
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    cover_stats cs = {0, 0, 0, 0};
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_boxes_cover(&b, cfg.max_boxes, &cs);
    coordl_release(L, &b);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_SIZE, 96), COORDL_OK);
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_int_equal(b.w, 96);
    assert_boxes_cover(&b, cfg.max_boxes, &cs);
    coordl_release(L, &b);
    coordl_close(L);
    assert_true(cs.checked >= 4);
}

/* Settings that cannot work with boxes are refused naming the field. */
static void test_box_settings_are_checked(void **state)
{
    (void)state;
    coordl *L = NULL;
    coordl_config cfg = box_config(dataset(0), COORDL_CROP_RESIZED);
    cfg.rotate_deg = 10.0f;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "rotate_deg"));
    cfg = box_config(dataset(0), COORDL_CROP_RESIZED);
    cfg.max_boxes = 5000;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "max_boxes"));
    cfg = box_config(dataset(0), COORDL_CROP_RESIZED);
    cfg.labels = 7;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    cfg = box_config(dataset(0), COORDL_CROP_DARKNET_BOXES);
    cfg.jitter = -0.1f;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "jitter"));
    /* class labels: no boxes in the batch */
    cfg = box_config(dataset(0), COORDL_CROP_RESIZED);
    cfg.labels = COORDL_LABELS_CLASS;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID); /* bare paths need boxes mode */
}

int main(void)
{
    tu_main_init(600);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boxes_follow_pixels_resized_crop),
        cmocka_unit_test(test_boxes_follow_pixels_darknet_classifier_crop),
        cmocka_unit_test(test_boxes_follow_pixels_darknet_detection),
        cmocka_unit_test(test_boxes_follow_pixels_letterbox),
        cmocka_unit_test(test_boxes_follow_pixels_ssd),
        cmocka_unit_test(test_boxes_follow_pixels_ssd_zoom_out),
        cmocka_unit_test(test_boxes_identical_with_random_access_resized),
        cmocka_unit_test(test_boxes_identical_with_random_access_darknet),
        cmocka_unit_test(test_boxes_identical_with_random_access_ssd),
        cmocka_unit_test(test_flip_mirrors_the_boxes_of_flipped_rows),
        cmocka_unit_test(test_bad_labels_are_named_or_substituted),
        cmocka_unit_test(test_boxes_beyond_max_are_dropped_and_counted),
        cmocka_unit_test(test_next_into_boxes_layout),
        cmocka_unit_test(test_seek_and_group_give_the_same_boxes),
        cmocka_unit_test(test_tar_txt_members_are_box_labels),
        cmocka_unit_test(test_boxes_follow_a_size_change),
        cmocka_unit_test(test_box_settings_are_checked),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
