/*
 * gen_dataset - write a procedural, ImageNet-like ImageFolder dataset.
 *
 *   gen_dataset --out DIR --classes K --per-class N [--seed S]
 *               [--min-side 200] [--max-side 400] [--quality 85]
 *
 * writes DIR/class_000/img_00000.jpg ... DIR/class_<K-1>/img_<N-1>.jpg:
 * baseline JPEGs, 4:2:0, each side drawn independently in [min-side,
 * max-side]. Nothing is downloaded, and the same seed gives the same bytes.
 *
 * What a class looks like: every class owns a background hue, a stripe
 * orientation and period, a stripe hue and a foreground shape (disc, square,
 * triangle or ring). Every image then varies all of that (hue and angle
 * jitter, stripe phase and contrast, shape position/size/rotation/colour,
 * a lighting gradient, pixel noise), and some images take a random
 * background hue or stripe angle, so no single feature separates the
 * classes: a small CNN learns them, but not in one step.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE and size_t */

#define PI 3.14159265358979323846

/* ---- a local PRNG (splitmix64): deterministic, no global state ------- */

typedef struct { uint64_t s; } rng;

static uint64_t rng_u64(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rng_unit(rng *r) { return (double)(rng_u64(r) >> 11) * 0x1p-53; }
static double rng_range(rng *r, double lo, double hi) { return lo + (hi - lo) * rng_unit(r); }
static int rng_int(rng *r, int lo, int hi) /* inclusive */
{
    return lo + (int)(rng_u64(r) % (uint64_t)(hi - lo + 1));
}

/* ---- colours ---------------------------------------------------------- */

typedef struct { float r, g, b; } rgb;

static double wrap01(double x) { return x - floor(x); }

static rgb hsv(double h, double s, double v) /* h wraps, s and v in [0,1] */
{
    h = wrap01(h) * 6.0;
    int i = (int)h;
    double f = h - i, p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
    double r, g, b;
    switch (i) {
    case 0: r = v; g = t; b = p; break;
    case 1: r = q; g = v; b = p; break;
    case 2: r = p; g = v; b = t; break;
    case 3: r = p; g = q; b = v; break;
    case 4: r = t; g = p; b = v; break;
    default: r = v; g = p; b = q; break;
    }
    return (rgb){(float)(255 * r), (float)(255 * g), (float)(255 * b)};
}

/* hsv(h, s, v) with s and v drawn from [s0, s1] and [v0, v1]. The draws are
 * separate statements: the order in which a call's arguments are evaluated
 * is unspecified (gcc and clang differ), and the files must not depend on it. */
static rgb jittered_hsv(rng *r, double h, double s0, double s1, double v0, double v1)
{
    double s = rng_range(r, s0, s1);
    double v = rng_range(r, v0, v1);
    return hsv(h, s, v);
}

/* ---- one image ---------------------------------------------------------- */

enum { SHAPE_DISC, SHAPE_SQUARE, SHAPE_TRIANGLE, SHAPE_RING, SHAPE_COUNT };

#define LUT_BITS 10
static float sin_lut[1 << LUT_BITS];

static uint8_t clamp_u8(float v) { return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)(v + 0.5f); }

/* Is (u, v), in the shape's own frame (unit radius), inside the shape? */
static int in_shape(int shape, float u, float v)
{
    float d2 = u * u + v * v;
    switch (shape) {
    case SHAPE_DISC: return d2 <= 1.0f;
    case SHAPE_SQUARE: return fabsf(u) <= 0.75f && fabsf(v) <= 0.75f;
    case SHAPE_TRIANGLE: /* equilateral, inscribed in the unit circle */
        return v <= 0.5f && 0.866f * u - 0.5f * v <= 0.5f && -0.866f * u - 0.5f * v <= 0.5f;
    default: return d2 <= 1.0f && d2 >= 0.36f; /* ring */
    }
}

/* Fills img (w x h, interleaved RGB) with one sample of class c of k. */
static void draw_image(uint8_t *img, int w, int h, int c, int k, rng *r)
{
    /* Class features. The golden-ratio steps spread any number of classes
     * over hue, angle and period, and keep neighbours in hue apart in angle. */
    double hue = (double)c / k;
    double angle = wrap01(c * 0.6180339887 + 0.1) * PI;
    double period_frac = 0.06 + 0.12 * wrap01(c * 0.3819660113 + 0.35);
    double stripe_hue = hue + 0.25 + 0.5 * wrap01(c * 0.7548776662);
    int shape = c % SHAPE_COUNT;

    /* Per-image variation: jitter every feature, and sometimes replace one
     * outright, so classes overlap. */
    hue += rng_range(r, -0.7, 0.7) / k;
    if (rng_unit(r) < 0.15) hue = rng_unit(r);
    angle += rng_range(r, -0.25, 0.25);
    if (rng_unit(r) < 0.15) angle = rng_unit(r) * PI;
    double side = w < h ? w : h;
    double period = side * period_frac * rng_range(r, 0.8, 1.25);
    stripe_hue += rng_range(r, -0.08, 0.08);
    rgb bg = jittered_hsv(r, hue, 0.45, 0.9, 0.55, 0.95);
    rgb st = jittered_hsv(r, stripe_hue, 0.3, 0.8, 0.25, 0.7);
    float contrast = (float)rng_range(r, 0.35, 0.85);
    /* Lighting gradient: brightness goes from 1-g to 1+g across the image. */
    double ga = rng_unit(r) * 2 * PI;
    double g = rng_range(r, 0.0, 0.25);
    float gx = (float)(g * cos(ga) / w * 2), gy = (float)(g * sin(ga) / h * 2);

    /* The shape: any colour, anywhere (mostly inside), any rotation. */
    rgb fg = jittered_hsv(r, rng_unit(r), 0.2, 1.0, 0.15, 1.0);
    float rad = (float)(side * rng_range(r, 0.12, 0.3));
    float cx = (float)(rng_range(r, 0.15, 0.85) * w);
    float cy = (float)(rng_range(r, 0.15, 0.85) * h);
    double rot = rng_unit(r) * 2 * PI;
    float cr = (float)cos(rot) / rad, sr = (float)sin(rot) / rad;
    int x0 = (int)fmaxf(0, cx - rad), x1 = (int)fminf(w - 1, cx + rad);
    int y0 = (int)fmaxf(0, cy - rad), y1 = (int)fminf(h - 1, cy + rad);

    /* Pixel noise: the sum of two uniform bytes is a cheap triangular
     * distribution; one 64-bit draw covers the three channels of a pixel. */
    float amp = (float)rng_range(r, 4.0, 18.0) / 255.0f;

    /* One pass over the pixels. The stripe phase is a 32-bit fixed-point
     * angle (2^32 = one period) stepped per pixel: no sin() in the loop. */
    const double turn = 4294967296.0;
    uint32_t dx = (uint32_t)(int64_t)llround(cos(angle) / period * turn);
    uint32_t dy = (uint32_t)(int64_t)llround(sin(angle) / period * turn);
    uint32_t row_phase = (uint32_t)rng_u64(r);
    for (int y = 0; y < h; y++, row_phase += dy) {
        uint8_t *p = img + (size_t)y * w * 3;
        uint32_t ph = row_phase;
        float light = 1.0f + gy * (y - h / 2) - gx * (w / 2);
        for (int x = 0; x < w; x++, ph += dx, p += 3) {
            float s = contrast * (0.5f + 0.5f * sin_lut[ph >> (32 - LUT_BITS)]);
            float l = light + gx * x;
            float v[3] = {l * (bg.r + s * (st.r - bg.r)), l * (bg.g + s * (st.g - bg.g)),
                          l * (bg.b + s * (st.b - bg.b))};
            if (y >= y0 && y <= y1 && x >= x0 && x <= x1 &&
                in_shape(shape, (x - cx) * cr + (y - cy) * sr, (y - cy) * cr - (x - cx) * sr)) {
                v[0] = fg.r;
                v[1] = fg.g;
                v[2] = fg.b;
            }
            uint64_t bits = rng_u64(r);
            for (int ch = 0; ch < 3; ch++, bits >>= 16) {
                int n = (int)(bits & 0xff) + (int)((bits >> 8) & 0xff) - 255;
                p[ch] = clamp_u8(v[ch] + amp * n);
            }
        }
    }
}

/* ---- JPEG encoding ------------------------------------------------------ */

struct jpeg_err {
    struct jpeg_error_mgr mgr;
    const char *path; /* the file being written, for the message */
};

static void jpeg_fail(j_common_ptr cinfo)
{
    struct jpeg_err *e = (struct jpeg_err *)cinfo->err;
    char msg[JMSG_LENGTH_MAX];
    e->mgr.format_message(cinfo, msg);
    fprintf(stderr, "gen_dataset: %s: libjpeg: %s\n", e->path, msg);
    exit(1);
}

/* Encodes img and writes it to path. Returns the file's size in bytes. */
static unsigned long write_jpeg(const char *path, const uint8_t *img, int w, int h, int quality)
{
    struct jpeg_compress_struct cinfo;
    struct jpeg_err err;
    cinfo.err = jpeg_std_error(&err.mgr);
    err.mgr.error_exit = jpeg_fail;
    err.path = path;
    jpeg_create_compress(&cinfo);

    unsigned char *buf = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&cinfo, &buf, &size);
    cinfo.image_width = (JDIMENSION)w;
    cinfo.image_height = (JDIMENSION)h;
    cinfo.input_components = 3;
    cinfo.in_color_space = JCS_RGB;
    jpeg_set_defaults(&cinfo);         /* YCbCr, Huffman, not progressive */
    jpeg_set_quality(&cinfo, quality, TRUE); /* TRUE: baseline tables */
    cinfo.comp_info[0].h_samp_factor = 2; /* 4:2:0, like most photos */
    cinfo.comp_info[0].v_samp_factor = 2;
    cinfo.comp_info[1].h_samp_factor = cinfo.comp_info[1].v_samp_factor = 1;
    cinfo.comp_info[2].h_samp_factor = cinfo.comp_info[2].v_samp_factor = 1;
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
        JSAMPROW row = (JSAMPROW)(img + (size_t)cinfo.next_scanline * w * 3);
        jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);

    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, size, f) != size || fclose(f) != 0) {
        fprintf(stderr, "gen_dataset: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    free(buf);
    return size;
}

/* mkdir -p: creates path and its missing parents. */
static void make_dirs(const char *path)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) {
        fprintf(stderr, "gen_dataset: %s: path too long\n", path);
        exit(1);
    }
    for (char *p = tmp + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        struct stat st;
        if (mkdir(tmp, 0777) != 0 && !(errno == EEXIST && stat(tmp, &st) == 0 && S_ISDIR(st.st_mode))) {
            fprintf(stderr, "gen_dataset: %s: %s\n", tmp,
                    errno == EEXIST ? "exists and is not a directory" : strerror(errno));
            exit(1);
        }
        *p = saved;
        if (saved == '\0') break;
    }
}

/* ---- command line --------------------------------------------------------- */

static void usage(FILE *to)
{
    fprintf(to,
            "usage: gen_dataset --out DIR --classes K --per-class N [--seed S]\n"
            "                   [--min-side 200] [--max-side 400] [--quality 85]\n"
            "  Writes DIR/class_000/img_00000.jpg ...: K classes (1..1000) of N\n"
            "  images (1..100000), sides drawn in [min-side, max-side] (16..8192),\n"
            "  JPEG quality 1..100. The same seed gives the same files.\n");
}

static void bad_arg(const char *opt, const char *val)
{
    fprintf(stderr, "gen_dataset: bad value for %s: '%s'\n", opt, val ? val : "(missing)");
    usage(stderr);
    exit(2);
}

/* Parses val as an integer in [lo, hi], or exits with the usage. */
static long parse_int(const char *opt, const char *val, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = val ? strtol(val, &end, 10) : 0;
    if (!val || end == val || *end != '\0' || errno != 0 || v < lo || v > hi) bad_arg(opt, val);
    return v;
}

int main(int argc, char **argv)
{
    const char *out = NULL;
    long classes = -1, per_class = -1, min_side = 200, max_side = 400, quality = 85;
    uint64_t seed = 0;

    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(opt, "--out")) { if (!val || !*val) bad_arg(opt, val); out = val; }
        else if (!strcmp(opt, "--classes")) classes = parse_int(opt, val, 1, 1000);
        else if (!strcmp(opt, "--per-class")) per_class = parse_int(opt, val, 1, 100000);
        else if (!strcmp(opt, "--min-side")) min_side = parse_int(opt, val, 16, 8192);
        else if (!strcmp(opt, "--max-side")) max_side = parse_int(opt, val, 16, 8192);
        else if (!strcmp(opt, "--quality")) quality = parse_int(opt, val, 1, 100);
        else if (!strcmp(opt, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long v = val ? strtoull(val, &end, 10) : 0;
            if (!val || end == val || *end != '\0' || errno != 0 || val[0] == '-') bad_arg(opt, val);
            seed = (uint64_t)v;
        } else {
            fprintf(stderr, "gen_dataset: unknown argument '%s'\n", opt);
            usage(stderr);
            return 2;
        }
    }
    if (!out || classes < 0 || per_class < 0) {
        fprintf(stderr, "gen_dataset: --out, --classes and --per-class are required\n");
        usage(stderr);
        return 2;
    }
    if (min_side > max_side) {
        fprintf(stderr, "gen_dataset: --min-side %ld is larger than --max-side %ld\n", min_side, max_side);
        usage(stderr);
        return 2;
    }

    for (int i = 0; i < (1 << LUT_BITS); i++) sin_lut[i] = (float)sin(2 * PI * i / (1 << LUT_BITS));
    uint8_t *img = malloc((size_t)max_side * max_side * 3);
    if (!img) { fprintf(stderr, "gen_dataset: out of memory\n"); return 1; }

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t total = 0;
    char path[PATH_MAX];
    for (long c = 0; c < classes; c++) {
        /* %03d: class folders sort by name in label order. */
        if (snprintf(path, sizeof path, "%s/class_%03ld", out, c) >= (int)sizeof path) {
            fprintf(stderr, "gen_dataset: %s: path too long\n", out);
            return 1;
        }
        make_dirs(path);
        for (long i = 0; i < per_class; i++) {
            /* Each image has its own stream, a function of (seed, class,
             * index) only: the files do not depend on the order of work. */
            rng r = {seed};
            uint64_t key = rng_u64(&r) ^ (uint64_t)c;
            r.s = key;
            key = rng_u64(&r) ^ (uint64_t)i;
            r.s = key;
            int w = rng_int(&r, (int)min_side, (int)max_side);
            int h = rng_int(&r, (int)min_side, (int)max_side);
            draw_image(img, w, h, (int)c, (int)classes, &r);
            snprintf(path, sizeof path, "%s/class_%03ld/img_%05ld.jpg", out, c, i);
            total += write_jpeg(path, img, w, h, (int)quality);
        }
    }
    free(img);
    clock_gettime(CLOCK_MONOTONIC, &t1);

    long files = classes * per_class;
    printf("gen_dataset: %ld files (%ld classes x %ld) in %s, %llu bytes, mean %llu bytes/file, %.2f s\n",
           files, classes, per_class, out, (unsigned long long)total,
           (unsigned long long)(total / (uint64_t)files),
           (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
    return 0;
}
