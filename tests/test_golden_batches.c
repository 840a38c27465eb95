/*
 * test_golden_batches.c - a fixed run's batches, hashed, are the same
 * before and after a change of coordl.c that must not change any batch
 * (the split of coordl.c into src/ modules, regenerated as one file).
 * The values were made with coordl.c of commit 6b7370c, the last one
 * written by hand before the split.
 *
 * PLATFORM: the golden values below were made on x86-64 (Linux, gcc -O2 as
 * the Makefile builds), with Debian's libjpeg-turbo 2.1.5 (libjpeg62-turbo
 * 1:2.1.5-2) and Debian's stb_image (libstb-dev 0.0~git20220908). The
 * determinism contract holds on one platform; across platforms a JPEG
 * decodes to other pixels with another libjpeg, and float resampling and
 * audio conversion may round differently on another architecture (FMA
 * contraction, another FPU). So the test first checks the platform (the
 * architecture, LIBJPEG_TURBO_VERSION_NUMBER, and a JPEG encoded and
 * decoded by the libjpeg this binary runs with, hashed), and where it
 * differs it says so loudly, names the platform-dependent cases and reports
 * them SKIPPED with their values; the token cases (integer copies) are
 * asserted everywhere (little-endian hosts). AVX2 resampling is chosen at
 * run time when the CPU has it; its output is the SSE2 loops' (see
 * tests/test_resample_simd.c), so the values hold with COORDL_NO_AVX2=1.
 *
 * Each case makes a small dataset at test time, opens it with a fixed
 * config and seed (threads = 2), runs 2 epochs, and hashes every batch
 * (tu_batch_hash: n, epoch, index, ids, labels, every data byte; plus the
 * token targets, the row shape and layout) into one FNV-1a 64 value:
 *   train_jpeg               COORDL_PIPE_TRAIN, JPEGs (4:2:0, 4:2:2, 4:4:4,
 *                            gray, progressive, 96..260 px), no cache
 *   train_jpeg_partial_cache the same with half the dataset cached and
 *                            jpeg_random_access as default (on, budget 1 so
 *                            every cached JPEG is rewritten when first
 *                            read): rewritten and plain items both occur,
 *                            and the batches equal train_jpeg's
 *   train_jpeg_darknet       COORDL_CROP_DARKNET with rotation, aspect and
 *                            the HSV jitter (F32 NHWC)
 *   train_png                COORDL_PIPE_TRAIN, PNGs (stb_image), U8 NHWC
 *   eval_jpeg                COORDL_PIPE_EVAL on the JPEGs, U8 NCHW
 *   tokens_windows           COORDL_PIPE_TOKENS, COORDL_TOKENS_WINDOWS
 *   tokens_llmc              COORDL_PIPE_TOKENS, COORDL_TOKENS_LLMC
 *   audio                    COORDL_PIPE_AUDIO: PCM16 and float WAVs, mono
 *                            and stereo, 8, 16 and 22.05 kHz resampled to
 *                            16 kHz, shorter and longer than the crop
 *   tar_shards               two WebDataset tar shards (JPEG and PNG
 *                            members, .cls labels), half cached
 *
 * Environment:
 *   COORDL_GOLDEN_PRINT=1    print every value (as C, to paste below)
 *                            instead of asserting
 *   COORDL_GOLDEN_THREADS=N  worker threads (default 2): the values must
 *                            not change with it (determinism contract)
 *   COORDL_GOLDEN_VERBOSE=1  each run's counters (cache, rewrites, splices)
 * To remake the values (only when batches are meant to change):
 *   make build/tests/test_golden_batches &&
 *   COORDL_GOLDEN_PRINT=1 build/tests/test_golden_batches
 */
#include "test_util.h"
#include "tu_tar.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

/* ---- the golden values -------------------------------------------------- */

/* What a case's value depends on beyond coordl.c. */
typedef enum {
    DEP_NONE = 0, /* integer copies only: any little-endian host       */
    DEP_ARCH = 1, /* float math (resampling, audio): x86-64            */
    DEP_JPEG = 2  /* the above and libjpeg-turbo 2.1.5's decoded pixels */
} dep_kind;

typedef struct {
    const char *name;
    uint64_t golden;
    dep_kind dep;
} golden_case;

enum {
    G_TRAIN_JPEG,
    G_TRAIN_JPEG_PARTIAL_CACHE,
    G_TRAIN_JPEG_DARKNET,
    G_TRAIN_PNG,
    G_EVAL_JPEG,
    G_TOKENS_WINDOWS,
    G_TOKENS_LLMC,
    G_AUDIO,
    G_TAR_SHARDS,
    G_COUNT
};

static const golden_case g_golden[G_COUNT] = {
    [G_TRAIN_JPEG] = {"train_jpeg", 0x253cc9066bf38ae6ULL, DEP_JPEG},
    /* the same batches as train_jpeg: caching and rewriting change none */
    [G_TRAIN_JPEG_PARTIAL_CACHE] = {"train_jpeg_partial_cache", 0x253cc9066bf38ae6ULL, DEP_JPEG},
    [G_TRAIN_JPEG_DARKNET] = {"train_jpeg_darknet", 0xe52933007be6a509ULL, DEP_JPEG},
    [G_TRAIN_PNG] = {"train_png", 0x90af5f0b94ede2b2ULL, DEP_ARCH},
    [G_EVAL_JPEG] = {"eval_jpeg", 0xc0d582c55e65d561ULL, DEP_JPEG},
    [G_TOKENS_WINDOWS] = {"tokens_windows", 0xc1e5c0c210fe0fd9ULL, DEP_NONE},
    [G_TOKENS_LLMC] = {"tokens_llmc", 0x001f0e476e27426dULL, DEP_NONE},
    [G_AUDIO] = {"audio", 0x45f11b14b91ad7e3ULL, DEP_ARCH},
    [G_TAR_SHARDS] = {"tar_shards", 0x0950bfb036507fe1ULL, DEP_JPEG},
};

/* The platform the values were made on: libjpeg-turbo's version in the
 * headers, and the hash of a JPEG encoded and decoded (full size, 1/2 and
 * 1/4 DCT scaling) by the libjpeg the binary runs with. */
#define GOLDEN_LIBJPEG_TURBO_VERSION_NUMBER 2001005
#define GOLDEN_JPEG_CANARY 0x5a1d60cfd09570c3ULL

/* ---- state -------------------------------------------------------------- */

static char *g_dir;
static int g_print;   /* COORDL_GOLDEN_PRINT=1 */
static int g_verbose; /* COORDL_GOLDEN_VERBOSE=1: each run's counters */
static int g_threads; /* COORDL_GOLDEN_THREADS, default 2 */
static int g_arch_ok, g_jpeg_ok;
static char g_platform_why[512];

static char *g_jpeg_root, *g_png_root, *g_tok_glob, *g_wav_root, *g_tar_dir;
static uint64_t g_jpeg_bytes, g_tar_item_bytes;
static uint64_t g_train_jpeg_hash; /* as computed by test_train_jpeg, 0 before */

#define SEQ 16
#define AUDIO_SAMPLES 256

/* ---- datasets (all from test_util's generators) ------------------------- */

/* 3 classes x 12 JPEGs of 96..260 px, a mix of chroma subsamplings, gray
 * and progressive files and qualities: 36 items. */
static void make_jpegs(const char *root)
{
    for (int i = 0; i < 36; i++) {
        const int w = 96 + (i * 37) % 165, h = 90 + (i * 53) % 140;
        uint8_t base[3];
        tu_class_colour(i % 3, base);
        uint8_t *pix = tu_textured_rgb(w, h, base, (uint64_t)i + 100);
        tu_jpeg_opts o = {70 + (i * 7) % 29, TU_SUB_420, 0, 0};
        int comps = 3;
        switch (i % 6) {
        case 1: o.subsampling = TU_SUB_422; break;
        case 2: o.subsampling = TU_SUB_444; break;
        case 3: comps = 1; break;
        case 4: o.progressive = 1; break;
        default: break;
        }
        if (comps == 1) /* gray: the red plane */
            for (size_t p = 0; p < (size_t)w * h; p++) pix[p] = pix[3 * p];
        char *path = tu_join(root, "class_%d/img_%03d.jpg", i % 3, i);
        tu_write_jpeg(path, pix, w, h, comps, &o);
        free(path);
        free(pix);
    }
}

/* llm.c shards, uint16 and uint32, 85 windows of SEQ + 1 tokens. */
static void make_shards(const char *dir)
{
    static const struct { int version; size_t ntok; } s[] = {{1, 400}, {7, 300}, {1, 170}, {7, 530}};
    for (int k = 0; k < 4; k++) {
        uint32_t *t = malloc(s[k].ntok * sizeof *t);
        assert_non_null(t);
        uint64_t st = 0x5EED0000u + (uint64_t)k;
        for (size_t p = 0; p < s[k].ntok; p++)
            t[p] = s[k].version == 1 ? (uint32_t)(tu_rand(&st) % 65536u)
                                     : (uint32_t)(100000u + tu_rand(&st) % 2000000000u);
        char *path = tu_join(dir, "shard_%03d.bin", k);
        tu_write_shard(path, s[k].version, t, s[k].ntok);
        free(path);
        free(t);
    }
}

/* 2 classes x 7 WAVs: PCM16 and float, mono and stereo, 8000, 16000 and
 * 22050 Hz, 60..1400 frames (shorter and longer than the crop). */
static void make_wavs(const char *root)
{
    for (int i = 0; i < 14; i++) {
        static const uint32_t rates[] = {16000, 22050, 8000};
        const uint32_t rate = rates[i % 3];
        const uint16_t ch = (uint16_t)(1 + (i % 4 == 1));
        const size_t frames = 60 + ((size_t)i * 331) % 1340;
        uint64_t st = 0xA0D10000u + (uint64_t)i;
        char *path = tu_join(root, "class_%d/clip_%02d.wav", i % 2, i);
        if (i % 2 == 0) {
            int16_t *v = malloc(frames * ch * sizeof *v);
            assert_non_null(v);
            for (size_t j = 0; j < frames * ch; j++) v[j] = (int16_t)(uint16_t)tu_rand(&st);
            tu_write_wav_i16(path, ch, rate, v, frames);
            free(v);
        } else {
            float *v = malloc(frames * ch * sizeof *v);
            assert_non_null(v);
            for (size_t j = 0; j < frames * ch; j++)
                v[j] = (float)((double)(tu_rand(&st) >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
            tu_write_wav_f32(path, ch, rate, v, frames);
            free(v);
        }
        free(path);
    }
}

/* Two WebDataset shards: 17 and 12 samples, a JPEG (every 4th a PNG) and
 * a .cls label each, plus a .json member nobody reads. */
static void make_tars(const char *dir)
{
    tu_mkdirs(dir);
    int sample = 0;
    for (int s = 0; s < 2; s++) {
        char *path = tu_join(dir, "shard-%03d.tar", s);
        tu_tar t;
        tu_tar_open(&t, path);
        for (int j = 0; j < (s ? 12 : 17); j++, sample++) {
            const int w = 80 + (sample * 29) % 120, h = 72 + (sample * 41) % 110;
            uint8_t base[3];
            tu_class_colour(sample % 5, base);
            uint8_t *pix = tu_textured_rgb(w, h, base, (uint64_t)sample + 500);
            char name[64], cls[16];
            snprintf(cls, sizeof cls, "%d", sample % 5);
            snprintf(name, sizeof name, "s%04d.cls", sample);
            tu_tar_file(&t, name, cls, strlen(cls));
            if (sample % 4 == 3) { /* a PNG member, written and read back */
                char *png = tu_join(g_dir, "tmp_%04d.png", sample);
                tu_write_png(png, pix, w, h, 3);
                size_t n;
                uint8_t *bytes = tu_read_file(png, &n);
                snprintf(name, sizeof name, "s%04d.png", sample);
                tu_tar_file(&t, name, bytes, n);
                g_tar_item_bytes += n;
                free(bytes);
                tu_rmtree(png);
                free(png);
            } else {
                tu_jpeg_opts o = {85, sample % 2 ? TU_SUB_420 : TU_SUB_444, 0, 0};
                size_t n;
                uint8_t *jpg = tu_encode_jpeg(pix, w, h, 3, &o, &n);
                snprintf(name, sizeof name, "s%04d.jpg", sample);
                tu_tar_file(&t, name, jpg, n);
                g_tar_item_bytes += n;
                free(jpg);
            }
            snprintf(name, sizeof name, "s%04d.json", sample);
            tu_tar_file(&t, name, "{}", 2);
            free(pix);
        }
        tu_tar_close(&t, 1);
        free(path);
    }
}

/* ---- the platform ------------------------------------------------------- */

/* A 4:2:0 JPEG encoded by this libjpeg, decoded at 1/1, 1/2 and 1/4
 * (islow IDCT, fancy upsampling: libjpeg's defaults), hashed. */
static uint64_t jpeg_canary(void)
{
    const uint8_t base[3] = {90, 140, 200};
    uint8_t *pix = tu_textured_rgb(61, 47, base, 77);
    tu_jpeg_opts o = {83, TU_SUB_420, 0, 0};
    size_t n;
    uint8_t *jpg = tu_encode_jpeg(pix, 61, 47, 3, &o, &n);
    uint64_t h = tu_fnv1a(TU_FNV_OFFSET, jpg, n);
    for (unsigned denom = 1; denom <= 4; denom *= 2) {
        struct jpeg_decompress_struct d;
        struct jpeg_error_mgr err;
        d.err = jpeg_std_error(&err);
        jpeg_create_decompress(&d);
        jpeg_mem_src(&d, jpg, (unsigned long)n);
        assert_int_equal(jpeg_read_header(&d, TRUE), JPEG_HEADER_OK);
        d.scale_num = 1;
        d.scale_denom = denom;
        d.out_color_space = JCS_RGB;
        jpeg_start_decompress(&d);
        const size_t stride = (size_t)d.output_width * d.output_components;
        uint8_t *row = malloc(stride);
        assert_non_null(row);
        while (d.output_scanline < d.output_height) {
            JSAMPROW r = row;
            jpeg_read_scanlines(&d, &r, 1);
            h = tu_fnv1a(h, row, stride);
        }
        free(row);
        jpeg_finish_decompress(&d);
        jpeg_destroy_decompress(&d);
    }
    free(jpg);
    free(pix);
    return h;
}

static void check_platform(void)
{
    g_platform_why[0] = 0;
    g_arch_ok = 1;
#if !defined(__x86_64__) || FLT_EVAL_METHOD != 0 || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    g_arch_ok = 0;
    snprintf(g_platform_why, sizeof g_platform_why, "not x86-64 (SSE2 float math, little-endian)");
#endif
    g_jpeg_ok = g_arch_ok;
    const uint64_t canary = jpeg_canary();
#ifdef LIBJPEG_TURBO_VERSION_NUMBER
    const long jv = (long)LIBJPEG_TURBO_VERSION_NUMBER;
#else
    const long jv = 0; /* not libjpeg-turbo */
#endif
    if (g_print) {
        printf("#define GOLDEN_LIBJPEG_TURBO_VERSION_NUMBER %ld\n", jv);
        printf("#define GOLDEN_JPEG_CANARY 0x%016llxULL\n", (unsigned long long)canary);
        return;
    }
    size_t len = strlen(g_platform_why);
    if (jv != GOLDEN_LIBJPEG_TURBO_VERSION_NUMBER) {
        g_jpeg_ok = 0;
        snprintf(g_platform_why + len, sizeof g_platform_why - len,
                 "%slibjpeg-turbo headers %ld, not %d", len ? "; " : "", jv,
                 GOLDEN_LIBJPEG_TURBO_VERSION_NUMBER);
    } else if (canary != GOLDEN_JPEG_CANARY) {
        g_jpeg_ok = 0;
        snprintf(g_platform_why + len, sizeof g_platform_why - len,
                 "%sthe libjpeg this binary runs with encodes/decodes differently "
                 "(canary 0x%016llx, expected 0x%016llx)",
                 len ? "; " : "", (unsigned long long)canary, (unsigned long long)GOLDEN_JPEG_CANARY);
    }
    if (!g_arch_ok || !g_jpeg_ok) {
        fprintf(stderr,
                "\n*** test_golden_batches: PLATFORM DIFFERS from the one the golden values were made on\n"
                "*** (x86-64, Debian libjpeg-turbo 2.1.5): %s.\n"
                "*** These values are platform-dependent and are NOT compared here (reported SKIPPED):\n",
                g_platform_why);
        for (int i = 0; i < G_COUNT; i++)
            if ((g_golden[i].dep == DEP_JPEG && !g_jpeg_ok) || (g_golden[i].dep == DEP_ARCH && !g_arch_ok))
                fprintf(stderr, "***   %s (%s)\n", g_golden[i].name,
                        g_golden[i].dep == DEP_JPEG ? "libjpeg's pixels and float math" : "float math");
        fprintf(stderr, "*** The token cases are compared on every platform.\n\n");
    }
}

/* ---- runs --------------------------------------------------------------- */

/* 2 epochs of cfg hashed batch by batch into one value; *st receives the
 * stats at the end. */
static uint64_t run_hash(coordl_config cfg, coordl_stats *st)
{
    cfg.threads = g_threads;
    coordl *L = tu_open(&cfg);
    const uint64_t bpe = coordl_batches_per_epoch(L);
    assert_true(bpe > 0);
    uint64_t h = TU_FNV_OFFSET, batches = 0;
    unsigned ends = 0;
    while (ends < 2) {
        coordl_batch b;
        memset(&b, 0, sizeof b);
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) {
            assert_int_equal(b.n, 0);
            assert_int_equal(batches, (uint64_t)(ends + 1) * bpe);
            ends++;
            continue;
        }
        if (rc != COORDL_OK)
            fail_msg("coordl_next = %d (%s): %s", (int)rc, coordl_strerror(rc), coordl_errmsg(L));
        uint64_t bh = tu_batch_hash(&b);
        const uint32_t shape[4] = {b.c, b.h, b.w, (uint32_t)b.layout};
        bh = tu_fnv1a(bh, shape, sizeof shape);
        bh = tu_fnv1a(bh, &b.data_bytes, sizeof b.data_bytes);
        if (b.targets) bh = tu_fnv1a(bh, b.targets, (size_t)b.n * b.w * sizeof *b.targets);
        h = tu_fnv1a(h, &bh, sizeof bh);
        batches++;
        coordl_release(L, &b);
    }
    coordl_get_stats(L, st);
    if (g_verbose)
        fprintf(stderr, "  %llu batches; items %llu, cache: %llu items, %llu hits, %llu misses; jpeg: %llu rewritten "
                "items, %llu rewrites, %llu failures, %llu spliced; bad %llu\n",
                (unsigned long long)batches, (unsigned long long)st->items, (unsigned long long)st->cache_items,
                (unsigned long long)st->cache_hits, (unsigned long long)st->cache_misses,
                (unsigned long long)st->jpeg_rewritten_items, (unsigned long long)st->jpeg_rewrites,
                (unsigned long long)st->jpeg_rewrite_failures, (unsigned long long)st->jpeg_spliced,
                (unsigned long long)st->bad_samples);
    assert_int_equal(st->bad_samples, 0);
    coordl_close(L);
    return h;
}

static void check(int which, uint64_t got)
{
    const golden_case *g = &g_golden[which];
    if (g_print) {
        char id[64];
        size_t k = 0;
        for (; g->name[k] && k < sizeof id - 1; k++)
            id[k] = (char)(g->name[k] >= 'a' && g->name[k] <= 'z' ? g->name[k] - 'a' + 'A' : g->name[k]);
        id[k] = 0;
        printf("    [G_%s] = {\"%s\", 0x%016llxULL, %s},\n", id, g->name, (unsigned long long)got,
               g->dep == DEP_JPEG ? "DEP_JPEG" : g->dep == DEP_ARCH ? "DEP_ARCH" : "DEP_NONE");
        fflush(stdout);
        return;
    }
    if ((g->dep == DEP_JPEG && !g_jpeg_ok) || (g->dep == DEP_ARCH && !g_arch_ok)) {
        fprintf(stderr,
                "*** test_golden_batches: %s = 0x%016llx NOT compared with 0x%016llx: platform-dependent "
                "value, and the platform differs (%s)\n",
                g->name, (unsigned long long)got, (unsigned long long)g->golden, g_platform_why);
        skip();
    }
    if (got != g->golden)
        fail_msg("%s: batches hash to 0x%016llx, golden 0x%016llx (threads %d): a batch changed",
                 g->name, (unsigned long long)got, (unsigned long long)g->golden, g_threads);
}

static coordl_config jpeg_train_config(void)
{
    coordl_config cfg = tu_config(g_jpeg_root);
    cfg.out_w = 40;
    cfg.out_h = 32;
    cfg.layout = COORDL_F32_NCHW;
    cfg.batch_size = 8; /* 36 items: 5 batches, the last of 4 */
    cfg.seed = 20240607;
    cfg.cache_pin = COORDL_PIN_OFF;
    return cfg;
}

/* ---- tests -------------------------------------------------------------- */

static void test_train_jpeg(void **state)
{
    (void)state;
    coordl_stats st;
    g_train_jpeg_hash = run_hash(jpeg_train_config(), &st);
    check(G_TRAIN_JPEG, g_train_jpeg_hash);
}

static void test_train_jpeg_partial_cache(void **state)
{
    (void)state;
    coordl_config cfg = jpeg_train_config();
    cfg.cache_bytes = g_jpeg_bytes / 2;
    cfg.jpeg_rewrite_budget = 1.0f; /* jpeg_random_access: the default (1) */
    coordl_stats st;
    const uint64_t h = run_hash(cfg, &st);
    /* both kinds of entry occurred: items rewritten in the cache (and
     * decoded from spliced crops in epoch 1), and items not cached at all */
    if (st.jpeg_rewritten_items == 0 || st.jpeg_spliced == 0 || st.cache_items >= 36)
        fail_msg("partial cache: %llu rewritten, %llu spliced, %llu of 36 cached: not the mix this case is about",
                 (unsigned long long)st.jpeg_rewritten_items, (unsigned long long)st.jpeg_spliced,
                 (unsigned long long)st.cache_items);
    /* on any platform: the cache and the rewrites changed no batch */
    if (g_train_jpeg_hash && h != g_train_jpeg_hash)
        fail_msg("train_jpeg_partial_cache: 0x%016llx, train_jpeg 0x%016llx: the cache changed batches",
                 (unsigned long long)h, (unsigned long long)g_train_jpeg_hash);
    check(G_TRAIN_JPEG_PARTIAL_CACHE, h);
}

static void test_train_jpeg_darknet(void **state)
{
    (void)state;
    coordl_config cfg = jpeg_train_config();
    cfg.layout = COORDL_F32_NHWC;
    cfg.out_w = cfg.out_h = 32;
    cfg.train_crop = COORDL_CROP_DARKNET;
    cfg.rotate_deg = 7.0f;
    cfg.aspect = 1.15f;
    cfg.hue = 0.1f;
    cfg.saturation = 1.5f;
    cfg.exposure = 1.5f;
    cfg.seed = 99;
    coordl_stats st;
    check(G_TRAIN_JPEG_DARKNET, run_hash(cfg, &st));
}

static void test_train_png(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_png_root);
    cfg.out_w = 24;
    cfg.out_h = 20;
    cfg.layout = COORDL_U8_NHWC;
    cfg.batch_size = 7; /* 30 items: 5 batches, the last of 2 */
    cfg.seed = 314159;
    coordl_stats st;
    check(G_TRAIN_PNG, run_hash(cfg, &st));
}

static void test_eval_jpeg(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_jpeg_root);
    cfg.pipeline = COORDL_PIPE_EVAL;
    cfg.out_w = cfg.out_h = 28;
    cfg.layout = COORDL_U8_NCHW;
    cfg.batch_size = 10;
    cfg.seed = 5;
    coordl_stats st;
    check(G_EVAL_JPEG, run_hash(cfg, &st));
}

static coordl_config tokens_config(int order)
{
    coordl_config cfg = tu_config(g_tok_glob);
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.token_order = order;
    cfg.seq_len = SEQ;
    cfg.prefetch_batches = 16;
    cfg.seed = 4321;
    return cfg;
}

static void test_tokens_windows(void **state)
{
    (void)state;
    coordl_config cfg = tokens_config(COORDL_TOKENS_WINDOWS);
    cfg.batch_size = 8; /* 85 windows: 11 batches, the last of 5 */
    coordl_stats st;
    check(G_TOKENS_WINDOWS, run_hash(cfg, &st));
}

static void test_tokens_llmc(void **state)
{
    (void)state;
    coordl_config cfg = tokens_config(COORDL_TOKENS_LLMC);
    cfg.batch_size = 4; /* 6 + 4 + 2 + 8 = 20 batches */
    coordl_stats st;
    check(G_TOKENS_LLMC, run_hash(cfg, &st));
}

static void test_audio(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_wav_root);
    cfg.pipeline = COORDL_PIPE_AUDIO;
    cfg.audio_samples = AUDIO_SAMPLES;
    cfg.audio_rate = 16000;
    cfg.batch_size = 4; /* 14 items: 4 batches, the last of 2 */
    cfg.seed = 777;
    coordl_stats st;
    check(G_AUDIO, run_hash(cfg, &st));
}

static void test_tar_shards(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_tar_dir);
    cfg.out_w = cfg.out_h = 24;
    cfg.layout = COORDL_F32_NCHW;
    cfg.batch_size = 6; /* 29 items: 5 batches, the last of 5 */
    cfg.seed = 8080;
    cfg.cache_bytes = g_tar_item_bytes / 2; /* about half the items */
    cfg.cache_pin = COORDL_PIN_OFF;
    coordl_stats st;
    const uint64_t h = run_hash(cfg, &st);
    if (st.cache_items == 0 || st.cache_items >= 29)
        fail_msg("tar shards: %llu of 29 items cached, not part of them", (unsigned long long)st.cache_items);
    check(G_TAR_SHARDS, h);
}

/* ---- setup -------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    g_jpeg_root = tu_join(g_dir, "jpeg");
    make_jpegs(g_jpeg_root);
    g_jpeg_bytes = tu_tree_bytes(g_jpeg_root);
    g_png_root = tu_join(g_dir, "png");
    const tu_folder_spec png = {3, 10, 70, 60, 50, TU_PAT_TEXTURED, TU_FMT_PNG, 0, 31};
    tu_make_image_folder(g_png_root, &png);
    char *tok = tu_join(g_dir, "tok");
    make_shards(tok);
    g_tok_glob = tu_join(tok, "shard_*.bin");
    free(tok);
    g_wav_root = tu_join(g_dir, "wav");
    make_wavs(g_wav_root);
    g_tar_dir = tu_join(g_dir, "tar");
    make_tars(g_tar_dir);
    check_platform();
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_jpeg_root);
    free(g_png_root);
    free(g_tok_glob);
    free(g_wav_root);
    free(g_tar_dir);
    return 0;
}

int main(void)
{
    tu_main_init(120);
    const char *p = getenv("COORDL_GOLDEN_PRINT");
    g_print = p && p[0] == '1';
    const char *v = getenv("COORDL_GOLDEN_VERBOSE");
    g_verbose = v && v[0] == '1';
    const char *t = getenv("COORDL_GOLDEN_THREADS");
    g_threads = t && *t ? atoi(t) : 2;
    if (g_threads < 1 || g_threads > 64) {
        fprintf(stderr, "COORDL_GOLDEN_THREADS=%s: want 1..64\n", t);
        return 2;
    }
    if (g_print) printf("/* test_golden_batches values, threads %d: */\n", g_threads);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_jpeg),
        cmocka_unit_test(test_train_jpeg_partial_cache),
        cmocka_unit_test(test_train_jpeg_darknet),
        cmocka_unit_test(test_train_png),
        cmocka_unit_test(test_eval_jpeg),
        cmocka_unit_test(test_tokens_windows),
        cmocka_unit_test(test_tokens_llmc),
        cmocka_unit_test(test_audio),
        cmocka_unit_test(test_tar_shards),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
