/*
 * gen_seeds.c - writes the seed corpus of every fuzz target, generated at
 * build time (no downloaded or committed blobs):
 *   gen_seeds OUTDIR   ->  OUTDIR/{fuzz_image,fuzz_random_access,fuzz_wav,fuzz_shard,fuzz_list,fuzz_group,fuzz_tar,
 *                                  fuzz_index}/NNN-name
 * Each seed is the target's parameter bytes followed by a file: valid
 * files of every kind the parser reads (JPEG baseline, progressive,
 * arithmetic-coded, restart intervals, grayscale, CMYK; PNG, BMP, TGA,
 * PPM/PGM; WAV PCM16, float, extensible, with LIST and odd chunks; token
 * shards of both versions and a shard list; list files with CRLF, tabs,
 * odd labels; group objects as their creator lays them out, with and
 * without patches; tar shards in ustar, GNU and pax forms with class
 * folders or .cls labels, long names, base-256 sizes) and the hostile ones of issue #12 (zero-sized BMP, GIF, a
 * progressive JPEG declaring 10000x10000, a PNG zlib bomb, a 1 Hz WAV);
 * and for fuzz_random_access the JPEGs issue #22 found giving other
 * batches with random access on: odd sampling factors (4x2, 2x4, 1x4,
 * 3x1, 3x2, grey 2x2 and 4x1) at DCT scales 1/2 and 1/4, entropy data
 * that ends early, progressive files missing scans, small progressive
 * files.
 */
#include "../hostile.h"
#include "../tu_tar.h"

#include <errno.h>
#include <jpeglib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

static const char *g_out;
static int g_serial;

static void die(const char *what)
{
    fprintf(stderr, "gen_seeds: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void seed(const char *target, const char *name, const uint8_t *params, size_t np, const void *file,
                 size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", g_out, target);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/%03d-%s", g_out, target, g_serial++, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        die(path);
    if ((np && fwrite(params, 1, np, f) != np) || (n && fwrite(file, 1, n, f) != n))
        die(path);
    fclose(f);
}

/* ---- images ------------------------------------------------------------ */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} mem;

static void mem_write(void *ctx, void *data, int size)
{
    mem *m = ctx;
    if (m->n + (size_t)size > m->cap) {
        m->cap = (m->n + (size_t)size) * 2;
        m->p = realloc(m->p, m->cap);
        if (!m->p)
            die("realloc");
    }
    memcpy(m->p + m->n, data, (size_t)size);
    m->n += (size_t)size;
}

static uint8_t *pattern(int w, int h, int comps)
{
    uint8_t *p = malloc((size_t)w * (size_t)h * (size_t)comps + 1);
    if (!p)
        die("malloc");
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < comps; c++)
                p[((size_t)y * (size_t)w + (size_t)x) * (size_t)comps + (size_t)c] =
                    (uint8_t)(x * 9 + y * 5 + c * 80 + (x ^ y) * 3);
    return p;
}

typedef struct {
    int comps, progressive, arith, restart, sub420, quality;
} jpeg_kind;

static uint8_t *jpeg(int w, int h, const jpeg_kind *k, size_t *n)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &out, &size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = k->comps;
    c.in_color_space = k->comps == 1 ? JCS_GRAYSCALE : k->comps == 4 ? JCS_CMYK : JCS_RGB;
    jpeg_set_defaults(&c);
    if (k->comps == 4)
        jpeg_set_colorspace(&c, JCS_CMYK);
    jpeg_set_quality(&c, k->quality ? k->quality : 85, TRUE);
    if (k->comps == 3) {
        c.comp_info[0].h_samp_factor = c.comp_info[0].v_samp_factor = k->sub420 ? 2 : 1;
    }
    if (k->progressive)
        jpeg_simple_progression(&c);
    c.arith_code = k->arith ? TRUE : FALSE;
    c.restart_interval = (unsigned)k->restart;
    uint8_t *pix = pattern(w, h, k->comps);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = pix + (size_t)c.next_scanline * (size_t)w * (size_t)k->comps;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(pix);
    *n = size;
    return out;
}

static void image_seed(const char *name, uint8_t flags, uint8_t ow, uint8_t oh, const uint8_t *file, size_t n)
{
    /* flags; out 1 + ow % 48 x 1 + oh % 48; scale 0.08..1; ratio 3/4..4/3;
     * epoch 1, id 7; 16 MiB, 256 Ki pixels; Darknet crop defaults; jitter 9 */
    const uint8_t params[16] = {flags, ow, oh, 19, 255, 115, 26, 1, 7, 0, 10, 12, 0, 0, 9, 3};
    seed("fuzz_image", name, params, sizeof params, file, n);
}

static void images(void)
{
    static const struct {
        const char *name;
        int w, h;
        jpeg_kind k;
        uint8_t flags;
    } jpegs[] = {
        {"jpeg-baseline-444", 24, 16, {3, 0, 0, 0, 0, 90}, 0x00},
        {"jpeg-420-eval", 33, 17, {3, 0, 0, 0, 1, 75}, 0x01},
        {"jpeg-progressive", 40, 24, {3, 1, 0, 0, 1, 80}, 0x02},
        {"jpeg-arith", 16, 16, {3, 0, 1, 0, 0, 85}, 0x04},
        {"jpeg-restart", 48, 32, {3, 0, 0, 1, 1, 85}, 0x08},
        {"jpeg-gray", 20, 20, {1, 0, 0, 0, 0, 90}, 0x12},
        {"jpeg-cmyk", 16, 16, {4, 0, 0, 0, 0, 90}, 0x40},
        {"jpeg-progressive-darknet-rot", 64, 40, {3, 1, 0, 0, 0, 70}, 0xF0},
    };
    for (size_t i = 0; i < sizeof jpegs / sizeof jpegs[0]; i++) {
        size_t n;
        uint8_t *j = jpeg(jpegs[i].w, jpegs[i].h, &jpegs[i].k, &n);
        image_seed(jpegs[i].name, jpegs[i].flags, 15, 11, j, n);
        if (i == 2) { /* the same progressive file declaring 10000 x 10000 */
            hostile_jpeg_set_size(j, n, 10000, 10000);
            image_seed("jpeg-progressive-declares-10000x10000", 0, 15, 11, j, n);
        }
        if (i == 0) /* cut in its scan data */
            image_seed("jpeg-truncated", 0, 15, 11, j, n * 2 / 3);
        free(j);
    }
    const int formats[][3] = {{24, 16, 3}, {9, 13, 4}, {17, 5, 1}, {8, 8, 2}};
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        const int w = formats[i][0], h = formats[i][1], comps = formats[i][2];
        uint8_t *pix = pattern(w, h, comps);
        char name[64];
        mem m = {0};
        stbi_write_png_to_func(mem_write, &m, w, h, comps, pix, w * comps);
        snprintf(name, sizeof name, "png-%dx%dx%d", w, h, comps);
        image_seed(name, (uint8_t)(i * 0x21), 13, 9, m.p, m.n);
        m.n = 0;
        stbi_write_bmp_to_func(mem_write, &m, w, h, comps, pix);
        snprintf(name, sizeof name, "bmp-%dx%dx%d", w, h, comps);
        image_seed(name, (uint8_t)(i * 0x13), 7, 12, m.p, m.n);
        m.n = 0;
        stbi_write_tga_to_func(mem_write, &m, w, h, comps, pix);
        snprintf(name, sizeof name, "tga-rle-%dx%dx%d", w, h, comps);
        image_seed(name, (uint8_t)(i * 0x0b), 12, 7, m.p, m.n);
        free(m.p);
        free(pix);
    }
    {
        uint8_t *pix = pattern(11, 7, 3);
        char head[32];
        int k = snprintf(head, sizeof head, "P6\n11 7\n255\n");
        mem m = {0};
        mem_write(&m, head, k);
        mem_write(&m, pix, 11 * 7 * 3);
        image_seed("ppm-p6", 0x01, 10, 10, m.p, m.n);
        m.n = 0;
        k = snprintf(head, sizeof head, "P5\n# comment\n11 7\n255\n");
        mem_write(&m, head, k);
        mem_write(&m, pix, 11 * 7);
        image_seed("pgm-p5", 0x00, 5, 20, m.p, m.n);
        free(m.p);
        free(pix);
    }
    size_t n;
    uint8_t *p;
    p = hostile_bmp(0, 16, 3 * 16 * 16, &n);
    image_seed("bmp-zero-width", 0x00, 15, 11, p, n);
    free(p);
    p = hostile_bmp(16, 0, 3 * 16 * 16, &n);
    image_seed("bmp-zero-height-eval", 0x01, 15, 11, p, n);
    free(p);
    p = hostile_bmp(4, -4, 3 * 4 * 4 + 4, &n); /* top-down */
    image_seed("bmp-top-down", 0x00, 3, 3, p, n);
    free(p);
    p = hostile_tga(6, 5, 6 * 5 * 3, &n);
    image_seed("tga-raw", 0x02, 4, 4, p, n);
    free(p);
    p = hostile_gif_1x1(&n);
    image_seed("gif-1x1", 0x00, 15, 11, p, n);
    free(p);
    p = hostile_png_zero_bomb(300, 200, &n);
    image_seed("png-zero-bomb-300x200", 0x00, 15, 11, p, n);
    free(p);
    const char ascii[] = "P3\n2 1\n255\n0 0 0 255 255 255\n";
    image_seed("ppm-ascii", 0x00, 2, 2, (const uint8_t *)ascii, sizeof ascii - 1);
    const uint8_t junk[] = {0x42, 0x4d, 0x00, 0x01, 0x02, 0x03, 0x04};
    image_seed("garbage", 0x00, 2, 2, junk, sizeof junk);
}

/* ---- random access: the same batches whatever the cache holds ---------- */

/* A JPEG with any sampling factors: component 0 at hs x vs, the others
 * 1 x 1 (grey: its one component at hs x vs); progressive or not. */
static uint8_t *jpeg_sampled(int w, int h, int comps, int hs, int vs, int progressive, size_t *n)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &out, &size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = comps == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 85, TRUE);
    c.comp_info[0].h_samp_factor = hs;
    c.comp_info[0].v_samp_factor = vs;
    if (progressive)
        jpeg_simple_progression(&c);
    uint8_t *pix = pattern(w, h, comps);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = pix + (size_t)c.next_scanline * (size_t)w * (size_t)comps;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(pix);
    *n = size;
    return out;
}

/* The offset of the k-th SOS marker from the end (k = 1: the last scan). */
static size_t nth_last_sos(const uint8_t *p, size_t n, int k)
{
    for (size_t i = n - 2; i > 2; i--)
        if (p[i] == 0xFF && p[i + 1] == 0xDA && --k == 0)
            return i;
    return 0;
}

/* p[0, cut) and an end-of-image marker: entropy data that ends early, or
 * a progressive file missing its last scans. */
static void ra_seed_cut(const char *name, const uint8_t *params, const uint8_t *p, size_t cut)
{
    uint8_t *q = malloc(cut + 2);
    if (!q)
        die("malloc");
    memcpy(q, p, cut);
    q[cut] = 0xFF;
    q[cut + 1] = 0xD9;
    seed("fuzz_random_access", name, params, 8, q, cut + 2);
    free(q);
}

static void random_access(void)
{
    /* params: eval/flip/layout/batch; out w, h; scale; ratio; seed; max
     * pixels 64 Ki. Out 13 x 13 of a 40..64 px crop: DCT scale 1/2, 1/4 */
    static const uint8_t at_half[8] = {0x00, 12, 12, 100, 255, 128, 5, 10};
    static const uint8_t at_quarter[8] = {0x02, 6, 6, 160, 255, 128, 9, 10};
    static const uint8_t at_full[8] = {0x11, 30, 30, 200, 255, 100, 3, 10};
    static const struct {
        const char *name;
        int w, h, comps, hs, vs, progressive;
    } layouts[] = {
        {"420", 64, 48, 3, 2, 2, 0},       {"4x2-410", 72, 56, 3, 4, 2, 0},
        {"2x4", 56, 72, 3, 2, 4, 0},       {"1x4", 48, 64, 3, 1, 4, 0},
        {"3x1", 72, 40, 3, 3, 1, 0},       {"3x2", 72, 48, 3, 3, 2, 0},
        {"gray-2x2", 50, 50, 1, 2, 2, 0},  {"gray-4x1", 64, 40, 1, 4, 1, 0},
        {"4x2-progressive", 72, 56, 3, 4, 2, 1}, {"progressive-small-8x8", 8, 8, 3, 2, 2, 1},
        {"progressive-small-17x9", 17, 9, 3, 2, 2, 1}, {"progressive-small-1x1", 1, 1, 3, 2, 2, 1},
    };
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        size_t n;
        uint8_t *j = jpeg_sampled(layouts[i].w, layouts[i].h, layouts[i].comps, layouts[i].hs, layouts[i].vs,
                                  layouts[i].progressive, &n);
        char name[96];
        /* each execution opens coordl 5 times: a few seeds a layout */
        snprintf(name, sizeof name, "%s-at-half", layouts[i].name);
        seed("fuzz_random_access", name, at_half, 8, j, n);
        if (i == 1 || i == 2) {
            snprintf(name, sizeof name, "%s-at-quarter", layouts[i].name);
            seed("fuzz_random_access", name, at_quarter, 8, j, n);
        }
        if (i == 0) {
            snprintf(name, sizeof name, "%s-eval", layouts[i].name);
            seed("fuzz_random_access", name, at_full, 8, j, n);
        }
        free(j);
    }
    /* entropy data that ends early: cut at 60% and 97% of the scan, and 2
     * bytes before its end, an end-of-image marker after it */
    size_t n;
    uint8_t *j = jpeg_sampled(64, 64, 3, 2, 2, 0, &n);
    const size_t sos = nth_last_sos(j, n, 1);
    ra_seed_cut("baseline-cut-60", at_half, j, sos + (n - sos) * 6 / 10);
    ra_seed_cut("baseline-cut-97", at_full, j, sos + (n - sos) * 97 / 100);
    ra_seed_cut("baseline-cut-2", at_half, j, n - 4);
    seed("fuzz_random_access", "baseline-cut-no-eoi", at_half, 8, j, n * 3 / 4);
    free(j);
    /* progressive files missing their last scan, their last 3, or part of
     * the last one */
    j = jpeg_sampled(64, 48, 3, 2, 2, 1, &n);
    ra_seed_cut("progressive-no-last-scan", at_half, j, nth_last_sos(j, n, 1));
    ra_seed_cut("progressive-no-last-3-scans", at_full, j, nth_last_sos(j, n, 3));
    const size_t last = nth_last_sos(j, n, 1);
    ra_seed_cut("progressive-last-scan-cut", at_half, j, last + (n - last) / 2);
    free(j);
    static const jpeg_kind arith = {3, 0, 1, 0, 1, 85};
    j = jpeg(64, 48, &arith, &n);
    ra_seed_cut("arithmetic-cut-70", at_half, j, n * 7 / 10);
    free(j);
}

/* ---- WAV ---------------------------------------------------------------- */

static void le(mem *m, uint64_t v, int bytes)
{
    uint8_t b[8];
    hostile_le(b, v, bytes);
    mem_write(m, b, bytes);
}

static uint8_t *wav(int format, int ext, int ch, uint32_t rate, int bits, size_t frames, int extra_chunks,
                    size_t *n)
{
    mem m = {0};
    const size_t data = frames * (size_t)ch * (size_t)(bits / 8);
    mem_write(&m, "RIFF", 4);
    le(&m, 0, 4); /* patched below */
    mem_write(&m, "WAVE", 4);
    if (extra_chunks) {
        mem_write(&m, "LIST", 4);
        le(&m, 4, 4);
        mem_write(&m, "INFO", 4);
    }
    mem_write(&m, "fmt ", 4);
    le(&m, ext ? 40 : 16, 4);
    le(&m, ext ? 0xFFFE : (uint64_t)format, 2);
    le(&m, (uint64_t)ch, 2);
    le(&m, rate, 4);
    le(&m, (uint64_t)rate * (uint64_t)ch * (uint64_t)(bits / 8), 4);
    le(&m, (uint64_t)ch * (uint64_t)(bits / 8), 2);
    le(&m, (uint64_t)bits, 2);
    if (ext) {
        le(&m, 22, 2);
        le(&m, (uint64_t)bits, 2);
        le(&m, 0, 4);
        le(&m, (uint64_t)format, 2); /* GUID: format code, then the fixed tail */
        mem_write(&m, "\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71", 14);
    }
    if (extra_chunks) {
        mem_write(&m, "junk", 4);
        le(&m, 3, 4);
        mem_write(&m, "abc\0", 4); /* odd size plus its pad byte */
    }
    mem_write(&m, "data", 4);
    le(&m, data, 4);
    for (size_t i = 0; i < frames * (size_t)ch; i++) {
        if (bits == 16) {
            le(&m, (uint16_t)(int16_t)((i * 7919) % 60000 - 30000), 2);
        } else {
            float v = (float)((int)(i % 200) - 100) / 100.0f;
            uint32_t u;
            memcpy(&u, &v, 4);
            le(&m, u, 4);
        }
    }
    hostile_le(m.p + 4, m.n - 8, 4);
    *n = m.n;
    return m.p;
}

static void wav_seed(const char *name, uint8_t rate_sel, const uint8_t *file, size_t n)
{
    /* audio_samples 1 + 300; rate from the table; epoch 2, id 5; 2^26 work */
    const uint8_t params[8] = {44, 1, rate_sel, 2, 5, 0, 18, 1};
    seed("fuzz_wav", name, params, sizeof params, file, n);
}

static void wavs(void)
{
    size_t n;
    uint8_t *w;
    w = wav(1, 0, 1, 16000, 16, 400, 0, &n);
    wav_seed("pcm16-mono-16k", 0, w, n);
    wav_seed("pcm16-mono-16k-to-44k", 7, w, n);
    free(w);
    w = wav(1, 0, 2, 44100, 16, 500, 1, &n);
    wav_seed("pcm16-stereo-44k-chunks-to-16k", 5, w, n);
    free(w);
    w = wav(3, 0, 1, 22050, 32, 300, 0, &n);
    wav_seed("float-mono-22k", 6, w, n);
    free(w);
    w = wav(3, 1, 3, 48000, 32, 200, 1, &n);
    wav_seed("extensible-float-3ch-48k", 5, w, n);
    free(w);
    w = wav(1, 0, 1, 1, 16, 2000, 0, &n);
    wav_seed("pcm16-1hz-to-16k-bomb", 5, w, n);
    free(w);
    w = wav(1, 0, 2, 8000, 16, 100, 0, &n);
    wav_seed("pcm16-truncated", 3, w, n - 50);
    free(w);
    w = wav(1, 0, 1, 8000, 8, 100, 0, &n);
    wav_seed("pcm8-unsupported", 0, w, n);
    free(w);
}

/* ---- token shards ------------------------------------------------------- */

static uint8_t *shard(int32_t magic, int32_t version, int32_t count, uint32_t ntok, int tb, size_t *n)
{
    *n = 1024 + (size_t)ntok * (size_t)tb;
    uint8_t *b = calloc(1, *n);
    if (!b)
        die("calloc");
    hostile_le(b, (uint32_t)magic, 4);
    hostile_le(b + 4, (uint32_t)version, 4);
    hostile_le(b + 8, (uint32_t)count, 4);
    for (uint32_t i = 0; i < ntok; i++)
        hostile_le(b + 1024 + (size_t)i * (size_t)tb, (i * 40503u) % 50257u, tb);
    return b;
}

static void shards(void)
{
    static const struct {
        const char *name;
        int32_t magic, version, count;
        uint32_t ntok;
        int tb;
        uint8_t mode;
    } s[] = {
        {"u16-v1", 20240520, 1, 100, 100, 2, 0},
        {"u32-v7-llmc", 20240801, 7, 90, 90, 4, 4},
        {"u16-glob", 20240520, 1, 50, 50, 2, 1},
        {"u16-folder-llmc", 20240520, 1, 70, 70, 2, 6},
        {"negative-count", 20240520, 1, -5, 10, 2, 0},
        {"huge-count", 20240520, 1, 0x7fffffff, 10, 2, 0},
        {"bad-magic", 12345, 1, 10, 10, 2, 0},
    };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        size_t n;
        uint8_t *b = shard(s[i].magic, s[i].version, s[i].count, s[i].ntok, s[i].tb, &n);
        const uint8_t params[8] = {7, s[i].mode, 1, 0, 3, 9, 0, 1};
        seed("fuzz_shard", s[i].name, params, sizeof params, b, n);
        free(b);
    }
    const uint8_t params[8] = {4, 0, 1, 0, 2, 1, 0, 0};
    const char list[] = "a.bin\r\nc.bin\n\n./a.bin\n";
    seed("fuzz_shard", "text-list", params, sizeof params, list, sizeof list - 1);
    const char hostile[] = "a.bin\np\nloop\n../null\n";
    seed("fuzz_shard", "text-list-fifo-loop", params, sizeof params, hostile, sizeof hostile - 1);
    const uint8_t short_header[100] = {0x28, 0x0e, 0x35, 0x01};
    seed("fuzz_shard", "short-header", params, sizeof params, short_header, sizeof short_header);
}

/* ---- list files --------------------------------------------------------- */

static void lists(void)
{
    static const struct {
        const char *name;
        const char *text;
        size_t n;
    } l[] = {
        {"plain", "a.jpg\t0\nb c.png\t1\nsub/d.bmp\t2\n", 0},
        {"crlf-empty-lines", "a.jpg\t3\r\n\r\nt\tab.jpg\t1\r\n", 0},
        {"absolute-and-dotdot", "../coordl-fuzz-none/x.jpg\t0\nsub/../a.jpg\t7\n", 0},
        {"labels-edge", "a.jpg\t2147483646\na.jpg\t2147483647\na.jpg\t007\n", 0},
        {"labels-junk", "a.jpg\t+7\na.jpg\t 7\na.jpg\t-1\na.jpg\t1e3\n", 0},
        {"fifo-loop-null-dir", "p\t0\nloop\t1\nnull\t2\nsub\t3\n", 0},
        {"nul-in-label", "a.jpg\t0\0junk\n", 14},
        {"no-tab", "a.jpg 0\n", 0},
        {"no-final-newline", "a.jpg\t0\nb c.png\t5", 0},
    };
    for (size_t i = 0; i < sizeof l / sizeof l[0]; i++)
        seed("fuzz_list", l[i].name, NULL, 0, l[i].text, l[i].n ? l[i].n : strlen(l[i].text));
}

/* ---- group objects -------------------------------------------------------- */

static void groups(void)
{
    /* built mode (fuzz_group.c): parameters, then 5-byte patches */
    static const uint8_t params[][8] = {
        {1, 0, 0, 0, 15, 0, 0, 0},     /* 1 slot, batch 1, no cache, 16 items */
        {1, 3, 3, 2, 99, 0, 4, 3},     /* 4 slots, batch 4, 8 KiB cache, 2 ranks */
        {1, 5, 5, 3, 255, 1, 2, 5},    /* 6 slots, batch 6, 12 KiB cache, 512 items, 3 ranks */
        {1, 2, 1, 1, 40, 0, 0, 0x82},  /* tokens, seq_len 3 */
    };
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "built-%zu", i);
        seed("fuzz_group", name, params[i], 8, NULL, 0);
    }
    /* patches at the front of the header (magic, version, sizes) and
     * further in (geometry, offsets, the stream, the first slot) */
    uint8_t patches[40];
    const uint32_t offs[8] = {0, 8, 24, 1560, 1600, 1640, 1700, 2100};
    for (int k = 0; k < 8; k++) {
        memcpy(patches + 5 * k, &offs[k], 4);
        patches[5 * k + 4] = (uint8_t)(0x11 * (k + 1));
    }
    seed("fuzz_group", "built-patched", params[1], 8, patches, sizeof patches);
    const uint8_t raw[64] = {0x31, 0x47, 0x6c, 0x64, 0x72, 0x6f, 0x6f, 0x63, 2, 0, 0, 0};
    const uint8_t raw_params[8] = {0};
    seed("fuzz_group", "raw-magic", raw_params, 8, raw, sizeof raw);
}

/* ---- tar shards ----------------------------------------------------------- */

/* Starts a fuzz_tar seed: its parameter bytes, then the tar, written by
 * tu_tar straight into the seed file (tu_tar counts offsets itself, so
 * they are the tar's own). */
static void tar_begin(tu_tar *t, const char *name, uint8_t b0, uint8_t b1, uint8_t b2, uint8_t b3)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/fuzz_tar", g_out);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/fuzz_tar/%03d-%s", g_out, g_serial++, name);
    t->f = fopen(path, "wb");
    if (!t->f)
        die(path);
    const uint8_t params[8] = {b0, b1, b2, b3, 3, 1, 7, 0};
    if (fwrite(params, 1, sizeof params, t->f) != sizeof params)
        die(path);
    t->off = 0;
}

/* Sets parameter byte i of the seed being written (the split point, known
 * only once the members before it are written). */
static void tar_param(tu_tar *t, long i, uint8_t v)
{
    const long at = ftell(t->f);
    if (at < 0 || fseek(t->f, i, SEEK_SET) != 0 || fputc(v, t->f) == EOF || fseek(t->f, at, SEEK_SET) != 0)
        die("tar_param");
}

/* parameter byte 0: source | pipeline << 2 | public API << 4 | reader << 5 */
enum { T_ONE = 0, T_SPLIT = 1, T_TWICE = 2, T_EVAL = 1 << 2, T_AUDIO = 2 << 2, T_API = 1 << 4,
       T_SHORT = 1 << 5, T_LIE = 2 << 5, T_EIO = 3 << 5 };

static void tars(void)
{
    static const jpeg_kind k444 = {3, 0, 0, 0, 0, 90};
    size_t nj, np, nw;
    uint8_t *jpg = jpeg(12, 10, &k444, &nj);
    uint8_t *pix = pattern(9, 7, 3);
    mem png = {0};
    stbi_write_png_to_func(mem_write, &png, 9, 7, 3, pix, 9 * 3);
    np = png.n;
    uint8_t *wv = wav(1, 0, 1, 16000, 16, 200, 0, &nw);
    const char *long_dir = "a_folder_with_a_rather_long_name_0123456789/and_another_long_one_abcdefghijklmnopqrstuvwxyz";
    char long_name[512];
    tu_tar t;

    /* an ImageFolder tree: class folders (one empty), ustar prefix, GNU
     * long name, pax path, a hidden file, a text file, a base-256 size */
    const uint8_t tree_modes[][2] = {{T_ONE | T_API, 0}, {T_SPLIT | T_API, 4}, {T_TWICE, 0}, {T_ONE | T_EVAL | T_SHORT | T_API, 0},
                                     {T_ONE | T_LIE | T_API, 0}, {T_SPLIT | T_EIO, 0}};
    for (size_t i = 0; i < sizeof tree_modes / sizeof tree_modes[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "tree-%zu", i);
        tar_begin(&t, name, tree_modes[i][0], 0, 0, (uint8_t)(i * 3));
        tu_tar_dir(&t, "class_a/");
        tu_tar_file(&t, "class_a/img_0.jpg", jpg, nj);
        tu_tar_file(&t, "class_a/.hidden.jpg", jpg, nj);
        tu_tar_file(&t, "./class_a/img_1.png", png.p, np);
        if ((tree_modes[i][0] & 3) == T_SPLIT) /* split between two members */
            tar_param(&t, 1, (uint8_t)(t.off / 512));
        tu_tar_dir(&t, "class_c/");
        tu_tar_file_prefixed(&t, "class_b/deep", "img_2.jpg", jpg, nj);
        snprintf(long_name, sizeof long_name, "class_b/%s/long_%zu.jpg", long_dir, i);
        tu_tar_gnu_long_name(&t, long_name);
        tu_tar_header(&t, "class_b/cut_by_the_long_name", '0', nj, TU_TAR_SIZE_OCTAL, 1);
        tu_tar_data(&t, jpg, nj);
        snprintf(long_name, sizeof long_name, "class_d/%s/pax.png", long_dir);
        tu_tar_pax(&t, "path", long_name, NULL, NULL);
        tu_tar_header(&t, "class_d/pax_cut", '0', np, TU_TAR_SIZE_OCTAL, 0);
        tu_tar_data(&t, png.p, np);
        tu_tar_header(&t, "class_d/b256.jpg", '0', nj, TU_TAR_SIZE_BASE256, 1);
        tu_tar_data(&t, jpg, nj);
        tu_tar_file(&t, "class_d/notes.txt", "text\n", 5);
        tu_tar_file(&t, "top.jpg", jpg, nj);
        tu_tar_close(&t, 1);
    }

    /* WebDataset samples with .cls labels: keys with several members, the
     * first image member taken, .json beside it, odd .cls texts */
    const uint8_t wds_modes[][3] = {{T_ONE | T_API, 0, 0}, {T_SPLIT | T_API, 0, 0}, {T_TWICE | T_EVAL | T_API, 0, 0},
                                    {T_ONE | T_SHORT | T_API, 0, 0x80 | 20}, {T_ONE | T_EIO | T_API, 0, 0}};
    for (size_t i = 0; i < sizeof wds_modes / sizeof wds_modes[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "webdataset-%zu", i);
        tar_begin(&t, name, wds_modes[i][0], 0, wds_modes[i][2], (uint8_t)(5 + i * 4));
        tu_tar_file(&t, "s/000.jpg", jpg, nj);
        tu_tar_file(&t, "s/000.cls", "3", 1);
        tu_tar_file(&t, "s/000.json", "{\"k\": 1}", 8);
        if ((wds_modes[i][0] & 3) == T_SPLIT) /* split inside sample 001 */
            tar_param(&t, 1, (uint8_t)(t.off / 512));
        tu_tar_file(&t, "s/001.cls", " 0\n", 3);
        tu_tar_file(&t, "s/001.png", png.p, np);
        tu_tar_file(&t, "s/001.jpg", jpg, nj);
        tu_tar_pax(&t, "size", "1", "path", "s/002.cls");
        tu_tar_header(&t, "s/002.cls", '0', 0, TU_TAR_SIZE_OCTAL, 0); /* pax size 1 overrides 0 */
        tu_tar_data(&t, "7", 1);
        tu_tar_file(&t, "s/002.tar.jpg", jpg, nj);
        tu_tar_file(&t, "s/003.jpg", jpg, 0); /* an empty image member */
        tu_tar_file(&t, "s/003.cls", "1", 1);
        tu_tar_close(&t, 1);
    }

    /* links: hard, symbolic (beside, across folders, through a folder
     * that is a link, forward, to a link), a GNU 'K' and a pax linkpath
     * target; and links that lead nowhere (absolute, climbing out, a loop,
     * missing, a folder) */
    const uint8_t link_modes[][2] = {{T_ONE | T_API, 0}, {T_SPLIT | T_API, 0}, {T_TWICE | T_EVAL, 0}};
    for (size_t i = 0; i < sizeof link_modes / sizeof link_modes[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "links-%zu", i);
        tar_begin(&t, name, link_modes[i][0], 0, 0, (uint8_t)(2 + i * 5));
        tu_tar_dir(&t, "class_a/");
        tu_tar_file(&t, "class_a/img_0.jpg", jpg, nj);
        tu_tar_file(&t, "./class_a/img_1.png", png.p, np);
        tu_tar_link(&t, "class_a/hard.jpg", '1', "class_a/img_0.jpg");
        tu_tar_link(&t, "class_a/sym.png", '2', "img_1.png");
        tu_tar_link(&t, "class_a/chain.png", '2', "./sym.png");
        if ((link_modes[i][0] & 3) == T_SPLIT) /* split between a link and its target */
            tar_param(&t, 1, (uint8_t)(t.off / 512));
        tu_tar_link(&t, "class_b/fwd.jpg", '2', "../class_a/late.jpg");
        tu_tar_link(&t, "alias", '2', "class_a");
        tu_tar_link(&t, "class_b/via.jpg", '2', "../alias/img_0.jpg");
        tu_tar_gnu_long_link(&t, "class_a/img_0.jpg");
        tu_tar_link(&t, "class_b/k.jpg", '1', "cut");
        tu_tar_pax(&t, "linkpath", "../class_a/img_1.png", NULL, NULL);
        tu_tar_link(&t, "class_b/pax.png", '2', "cut");
        tu_tar_link(&t, "class_b/abs.jpg", '2', "/etc/x.jpg");
        tu_tar_link(&t, "class_b/out.jpg", '2', "../../x.jpg");
        tu_tar_link(&t, "class_b/loop.jpg", '2', "loop.jpg");
        tu_tar_link(&t, "class_b/gone.jpg", '1', "class_b/none.jpg");
        tu_tar_file(&t, "class_a/late.jpg", jpg, nj);
        tu_tar_close(&t, 1);
    }
    /* an old GNU sparse member with extension headers before its data */
    tar_begin(&t, "gnu-sparse", T_ONE | T_API, 0, 0, 0);
    tu_tar_file(&t, "c/a.jpg", jpg, nj);
    tu_tar_gnu_sparse(&t, "c/sparse.jpg", jpg, nj, 2);
    tu_tar_file(&t, "c/b.jpg", jpg, nj);
    tu_tar_close(&t, 1);

    /* audio samples with labels */
    tar_begin(&t, "audio-cls", T_ONE | T_AUDIO | T_API, 0, 0, 0);
    tu_tar_file(&t, "a.wav", wv, nw);
    tu_tar_file(&t, "a.cls", "2", 1);
    tu_tar_file(&t, "b.wav", wv, nw / 2); /* cut short */
    tu_tar_file(&t, "b.cls", "0", 1);
    tu_tar_close(&t, 1);

    /* what open refuses: mixed labels, a bad .cls, a sparse pax member, no
     * end blocks, a size past the end, a bad checksum, a pax record
     * without '=' */
    tar_begin(&t, "mixed-cls", T_ONE, 0, 0, 0);
    tu_tar_file(&t, "c/x.jpg", jpg, nj);
    tu_tar_file(&t, "c/x.cls", "1", 1);
    tu_tar_file(&t, "c/y.jpg", jpg, nj);
    tu_tar_close(&t, 1);
    tar_begin(&t, "cls-not-a-number", T_ONE, 0, 0, 0);
    tu_tar_file(&t, "x.jpg", jpg, nj);
    tu_tar_file(&t, "x.cls", "2147483647", 10);
    tu_tar_close(&t, 1);
    tar_begin(&t, "pax-sparse", T_ONE | T_API, 0, 0, 0);
    tu_tar_pax(&t, "GNU.sparse.size", "100", "path", "c/sparse.jpg");
    tu_tar_file(&t, "c/sparse.jpg", jpg, nj);
    tu_tar_file(&t, "c/ok.jpg", jpg, nj);
    tu_tar_close(&t, 1);
    tar_begin(&t, "no-end-blocks", T_ONE, 0, 0, 0);
    tu_tar_file(&t, "c/x.jpg", jpg, nj);
    tu_tar_close(&t, 0);
    tar_begin(&t, "size-past-end", T_ONE, 0, 0, 0);
    tu_tar_header(&t, "c/x.jpg", '0', 1u << 20, TU_TAR_SIZE_BASE256, 1);
    tu_tar_data(&t, jpg, nj);
    tu_tar_close(&t, 1);
    {
        uint8_t h[512];
        tu_tar_make_header(h, "c/x.jpg", NULL, '0', nj, TU_TAR_SIZE_OCTAL, 0);
        h[148] ^= 1; /* checksum off by one digit */
        tar_begin(&t, "bad-checksum", T_ONE, 0, 0, 0);
        tu_tar__write(&t, h, sizeof h);
        tu_tar_data(&t, jpg, nj);
        tu_tar_close(&t, 1);
    }
    tar_begin(&t, "pax-no-equals", T_ONE, 0, 0, 0);
    tu_tar_header(&t, "PaxHeaders/x", 'x', 11, TU_TAR_SIZE_OCTAL, 0);
    tu_tar_data(&t, "11 pathxyz\n", 11);
    tu_tar_file(&t, "c/x.jpg", jpg, nj);
    tu_tar_close(&t, 1);
    const char junk[] = "not a tar at all";
    seed("fuzz_tar", "garbage", (const uint8_t[8]){0}, 8, junk, sizeof junk - 1);
    free(jpg);
    free(pix);
    free(png.p);
    free(wv);
}

/* ---- saved indexes (fuzz_index) ------------------------------------------
 * The image indexfile.c writes (docs/index.md), for the source
 * "/fz/source": header, source, shard records, 24-byte items, name
 * offsets, names. The checksum is left zero: the seeds' parameter byte
 * asks the harness to write the right one (and the length). */
static void ix_put(uint8_t *p, size_t at, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[at + (size_t)i] = (uint8_t)(v >> (8 * i));
}

static size_t ix_image(uint8_t *p, int nshards, int nitems, int audio)
{
    static const char src[] = "/fz/source";
    memset(p, 0, 4096);
    memcpy(p, "coordlIX", 8);
    ix_put(p, 8, 0x01020304u, 4);
    ix_put(p, 12, 1, 4);
    size_t at = 144;
    memcpy(p + at, src, strlen(src));
    ix_put(p, 64, at, 8);
    ix_put(p, 72, strlen(src), 8);
    at = (at + strlen(src) + 7) / 8 * 8;
    const size_t sh = at;
    for (int s = 0; s < nshards; s++) {
        char path[64];
        snprintf(path, sizeof path, "/fz/shard-%d.tar", s);
        ix_put(p, at, 10240, 8);
        ix_put(p, at + 8, (uint64_t)1700000000 * 1000000000u, 8);
        ix_put(p, at + 16, strlen(path), 4);
        ix_put(p, at + 20, s ? 6 : 0, 4);
        memcpy(p + at + 24, path, strlen(path));
        if (s)
            memcpy(p + at + 24 + strlen(path), "\"etag\"", 6);
        at += (24 + strlen(path) + (s ? 6 : 0) + 7) / 8 * 8;
    }
    ix_put(p, 80, sh, 8);
    ix_put(p, 88, at - sh, 8);
    const size_t items = at, offs = items + 24 * (size_t)nitems, names = offs + 8 * (size_t)nitems;
    size_t name_at = 0;
    uint64_t bytes = 0;
    for (int i = 0; i < nitems; i++) {
        ix_put(p, items + 24 * (size_t)i, 512 + 1024 * (uint64_t)i, 8);
        ix_put(p, items + 24 * (size_t)i + 8, 100 + (uint64_t)i, 8);
        ix_put(p, items + 24 * (size_t)i + 16, (uint64_t)(i % nshards), 4);
        ix_put(p, items + 24 * (size_t)i + 20, (uint64_t)(i % 3), 4);
        bytes += 100 + (uint64_t)i;
        ix_put(p, offs + 8 * (size_t)i, name_at, 8);
        name_at += (size_t)sprintf((char *)p + names + name_at, "/fz/shard-%d.tar:k%d.jpg", i % nshards, i) + 1;
    }
    if (!name_at)
        name_at = 1;
    ix_put(p, 96, items, 8);
    ix_put(p, 104, 24 * (uint64_t)nitems, 8);
    ix_put(p, 112, offs, 8);
    ix_put(p, 120, 8 * (uint64_t)nitems, 8);
    ix_put(p, 128, names, 8);
    ix_put(p, 136, name_at, 8);
    const size_t total = names + name_at;
    ix_put(p, 16, total, 8);
    ix_put(p, 32, (uint64_t)nitems, 8);
    ix_put(p, 40, (uint64_t)nshards, 8);
    ix_put(p, 48, bytes, 8);
    ix_put(p, 56, 3, 4);
    ix_put(p, 60, (uint64_t)audio, 4);
    return total;
}

static void indexes(void)
{
    static uint8_t img[4096];
    const uint8_t fix = 3, fix_audio = 7, raw = 0;
    size_t n = ix_image(img, 2, 5, 0);
    seed("fuzz_index", "two-shards", &fix, 1, img, n);
    seed("fuzz_index", "unfixed", &raw, 1, img, n);
    n = ix_image(img, 1, 0, 0);
    seed("fuzz_index", "no-items", &fix, 1, img, n);
    n = ix_image(img, 3, 9, 1);
    seed("fuzz_index", "audio", &fix_audio, 1, img, n);
    seed("fuzz_index", "audio-as-images", &fix, 1, img, n);
    n = ix_image(img, 2, 5, 0);
    img[200] ^= 0x40; /* inside the shard records */
    seed("fuzz_index", "bad-shard", &fix, 1, img, n);
    n = ix_image(img, 2, 5, 0);
    seed("fuzz_index", "cut", &fix, 1, img, n - 30);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_seeds OUTDIR\n");
        return 2;
    }
    g_out = argv[1];
    mkdir(g_out, 0755);
    images();
    random_access();
    wavs();
    shards();
    lists();
    groups();
    tars();
    indexes();
    printf("gen_seeds: %d seeds in %s\n", g_serial, g_out);
    return 0;
}
