/*
 * test_audio.c - COORDL_PIPE_AUDIO: WAV files (PCM 16-bit, IEEE float
 * 32-bit, WAVE_FORMAT_EXTENSIBLE of those) to mono float rows of
 * audio_samples samples.
 *
 *   - mono = mean of the channels; PCM16 v -> v / 32768.0f; every sample
 *     is compared exactly (the means used here are exact in float);
 *   - chunks other than fmt/data (LIST, an odd-sized chunk with its pad
 *     byte) are skipped;
 *   - N <= audio_samples: the samples, then exact zeros (also when the
 *     ring slot held a longer item before);
 *   - N > audio_samples: a window at the offset coordl_sample_transform
 *     reports (t.x; t.w = audio_samples, t.image_w = N, t.image_h = 1);
 *   - audio_rate != the file's rate: linear interpolation, output i at
 *     input position i * rate_in / rate_out, N_out = floor(N_in * rate_out
 *     / rate_in), checked on a ramp;
 *   - bad files (not RIFF, not WAVE, 8- and 24-bit PCM, an unsupported
 *     extensible subformat, a truncated data chunk, no fmt chunk) fail the
 *     batch with COORDL_ERR_CORRUPT naming the file, or are substituted.
 */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AS 64 /* audio_samples in most tests */

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

static coordl_config audio_config(const char *source)
{
    coordl_config cfg = tu_config(source); /* out/layout: ignored */
    cfg.pipeline = COORDL_PIPE_AUDIO;
    cfg.audio_samples = AS;
    cfg.audio_rate = 0;
    cfg.batch_size = 3;
    cfg.seed = 4242;
    return cfg;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static void check_shape(const coordl_batch *b, uint32_t samples)
{
    assert_int_equal(b->layout, COORDL_F32);
    assert_int_equal(b->c, 1);
    assert_int_equal(b->h, 1);
    assert_int_equal(b->w, samples);
    assert_int_equal(b->data_bytes, (size_t)b->n * samples * sizeof(float));
    assert_null(b->targets);
}

/* PCM16 test values: the extremes, zero, +-1, then a spread. */
static int16_t pcm_value(int key, size_t i)
{
    static const int16_t edge[] = {-32768, 32767, 0, -1, 1};
    if (i < 5 && key == 0)
        return edge[i];
    return (int16_t)((int32_t)(((uint32_t)key * 7919u + (uint32_t)i * 1031u + 17u) % 65536u) - 32768);
}

static float f32_value(int key, size_t i)
{
    return (float)(0.9 * sin(0.37 * (double)i + key)) + (float)key * 1e-3f;
}

/* ---- exact decoding ------------------------------------------------------ */

typedef struct {
    const char *rel;    /* path under the root */
    int label;          /* class index (folders sorted) */
    float want[AS];     /* the expected row */
    uint32_t n;         /* decoded length N */
    float tol;          /* 0: exact */
} wav_expect;

#define N_EXACT 12
static wav_expect g_exp[N_EXACT];

/* Writes the "exact" tree: every supported flavour, each 64 frames unless
 * noted, and fills g_exp. Classes: a_pcm (0), b_float (1). */
static char *make_exact_tree(void)
{
    char *root = tu_join(g_dir, "exact");
    int k = 0;
    char *p;
    int16_t i16[AS * 3];
    float f32[AS * 2];

    /* PCM16 mono */
    for (size_t i = 0; i < AS; i++)
        i16[i] = pcm_value(0, i);
    p = tu_join(root, "a_pcm/m16.wav");
    tu_write_wav_i16(p, 1, 16000, i16, AS);
    free(p);
    g_exp[k] = (wav_expect){"a_pcm/m16.wav", 0, {0}, AS, 0};
    for (size_t i = 0; i < AS; i++)
        g_exp[k].want[i] = (float)i16[i] / 32768.0f;
    k++;

    /* PCM16 stereo: (a + b) / 2 (odd sums give halves: exact in float) */
    for (size_t i = 0; i < AS; i++) {
        i16[2 * i] = pcm_value(1, i);
        i16[2 * i + 1] = pcm_value(2, i);
    }
    i16[0] = -32768; i16[1] = -32768; /* the extreme mean */
    i16[2] = 32767; i16[3] = 32766;
    p = tu_join(root, "a_pcm/s16.wav");
    tu_write_wav_i16(p, 2, 16000, i16, AS);
    free(p);
    g_exp[k] = (wav_expect){"a_pcm/s16.wav", 0, {0}, AS, 0};
    for (size_t i = 0; i < AS; i++)
        g_exp[k].want[i] = (float)(((double)i16[2 * i] + i16[2 * i + 1]) / 65536.0);
    k++;

    /* PCM16, 3 channels: the mean to within float rounding */
    for (size_t i = 0; i < AS * 3; i++)
        i16[i] = pcm_value(3, i);
    p = tu_join(root, "a_pcm/tri.wav");
    tu_write_wav_i16(p, 3, 16000, i16, AS);
    free(p);
    g_exp[k] = (wav_expect){"a_pcm/tri.wav", 0, {0}, AS, 2e-6f};
    for (size_t i = 0; i < AS; i++)
        g_exp[k].want[i] = (float)(((double)i16[3 * i] + i16[3 * i + 1] + i16[3 * i + 2]) / 3.0 / 32768.0);
    k++;

    /* upper-case extension, another rate (kept: audio_rate 0) */
    for (size_t i = 0; i < AS; i++)
        i16[i] = pcm_value(4, i);
    p = tu_join(root, "a_pcm/UPPER.WAV");
    tu_write_wav_i16(p, 1, 8000, i16, AS);
    free(p);
    g_exp[k] = (wav_expect){"a_pcm/UPPER.WAV", 0, {0}, AS, 0};
    for (size_t i = 0; i < AS; i++)
        g_exp[k].want[i] = (float)i16[i] / 32768.0f;
    k++;

    /* LIST chunks before fmt and before data */
    {
        tu_wav_spec s;
        memset(&s, 0, sizeof s);
        s.format = 1; s.channels = 1; s.bits = 16; s.rate = 16000;
        s.list_before_fmt = 1;
        s.list_before_data = 1;
        uint8_t raw[AS * 2];
        for (size_t i = 0; i < AS; i++) {
            int16_t v = pcm_value(5, i);
            raw[2 * i] = (uint8_t)((uint16_t)v & 0xff);
            raw[2 * i + 1] = (uint8_t)((uint16_t)v >> 8);
            i16[i] = v;
        }
        p = tu_join(root, "a_pcm/list.wav");
        tu_write_wav(p, &s, raw, AS);
        free(p);
        g_exp[k] = (wav_expect){"a_pcm/list.wav", 0, {0}, AS, 0};
        for (size_t i = 0; i < AS; i++)
            g_exp[k].want[i] = (float)i16[i] / 32768.0f;
        k++;
    }

    /* short: 40 frames, then zeros */
    for (size_t i = 0; i < 40; i++)
        i16[i] = pcm_value(6, i);
    p = tu_join(root, "a_pcm/short.wav");
    tu_write_wav_i16(p, 1, 16000, i16, 40);
    free(p);
    g_exp[k] = (wav_expect){"a_pcm/short.wav", 0, {0}, 40, 0};
    for (size_t i = 0; i < 40; i++)
        g_exp[k].want[i] = (float)i16[i] / 32768.0f;
    k++;

    /* float mono */
    for (size_t i = 0; i < AS; i++)
        f32[i] = f32_value(0, i);
    p = tu_join(root, "b_float/f32.wav");
    tu_write_wav_f32(p, 1, 16000, f32, AS);
    free(p);
    g_exp[k] = (wav_expect){"b_float/f32.wav", 1, {0}, AS, 0};
    memcpy(g_exp[k].want, f32, sizeof g_exp[k].want);
    k++;

    /* float stereo, mixed-case extension: (a + b) / 2 rounds once in any
     * order of float operations */
    for (size_t i = 0; i < AS; i++) {
        f32[2 * i] = f32_value(1, i);
        f32[2 * i + 1] = f32_value(2, i) * 0.5f;
    }
    p = tu_join(root, "b_float/f32s.Wav");
    tu_write_wav_f32(p, 2, 16000, f32, AS);
    free(p);
    g_exp[k] = (wav_expect){"b_float/f32s.Wav", 1, {0}, AS, 0};
    for (size_t i = 0; i < AS; i++)
        g_exp[k].want[i] = (float)(((double)f32[2 * i] + (double)f32[2 * i + 1]) / 2.0);
    k++;

    /* extensible PCM16 stereo */
    {
        tu_wav_spec s;
        memset(&s, 0, sizeof s);
        s.format = 0xFFFE; s.subformat = 1; s.channels = 2; s.bits = 16;
        s.rate = 16000;
        uint8_t raw[AS * 4];
        for (size_t i = 0; i < AS * 2; i++) {
            int16_t v = pcm_value(7, i);
            raw[2 * i] = (uint8_t)((uint16_t)v & 0xff);
            raw[2 * i + 1] = (uint8_t)((uint16_t)v >> 8);
            i16[i] = v;
        }
        p = tu_join(root, "b_float/ext16.wav");
        tu_write_wav(p, &s, raw, AS);
        free(p);
        g_exp[k] = (wav_expect){"b_float/ext16.wav", 1, {0}, AS, 0};
        for (size_t i = 0; i < AS; i++)
            g_exp[k].want[i] = (float)(((double)i16[2 * i] + i16[2 * i + 1]) / 65536.0);
        k++;
    }

    /* extensible float mono */
    {
        tu_wav_spec s;
        memset(&s, 0, sizeof s);
        s.format = 0xFFFE; s.subformat = 3; s.channels = 1; s.bits = 32;
        s.rate = 16000;
        uint8_t raw[AS * 4];
        for (size_t i = 0; i < AS; i++) {
            f32[i] = f32_value(8, i);
            uint32_t u;
            memcpy(&u, &f32[i], 4);
            for (int b = 0; b < 4; b++)
                raw[4 * i + (size_t)b] = (uint8_t)(u >> (8 * b));
        }
        p = tu_join(root, "b_float/extf.wav");
        tu_write_wav(p, &s, raw, AS);
        free(p);
        g_exp[k] = (wav_expect){"b_float/extf.wav", 1, {0}, AS, 0};
        memcpy(g_exp[k].want, f32, sizeof g_exp[k].want);
        k++;
    }

    /* a float file longer than... no: exactly AS frames, ascending */
    for (size_t i = 0; i < AS; i++)
        f32[i] = -0.5f + (float)i / 128.0f;
    p = tu_join(root, "b_float/ramp.wav");
    tu_write_wav_f32(p, 1, 44100, f32, AS);
    free(p);
    g_exp[k] = (wav_expect){"b_float/ramp.wav", 1, {0}, AS, 0};
    memcpy(g_exp[k].want, f32, sizeof g_exp[k].want);
    k++;

    /* a one-frame file */
    i16[0] = -12345;
    p = tu_join(root, "b_float/one.wav");
    tu_write_wav_i16(p, 1, 16000, i16, 1);
    free(p);
    g_exp[k] = (wav_expect){"b_float/one.wav", 1, {0}, 1, 0};
    g_exp[k].want[0] = -12345.0f / 32768.0f;
    k++;
    assert_int_equal(k, N_EXACT);

    /* not audio: ignored */
    p = tu_join(root, "a_pcm/readme.txt");
    tu_write_file(p, "not a wav\n", 10);
    free(p);
    p = tu_join(root, "b_float/x.wav.bak");
    tu_write_file(p, "not a wav\n", 10);
    free(p);
    return root;
}

static const wav_expect *expect_for(coordl *L, uint64_t id)
{
    const char *path = coordl_item_path(L, id);
    assert_non_null(path);
    for (int k = 0; k < N_EXACT; k++) {
        const char *rel = g_exp[k].rel;
        size_t lp = strlen(path), lr = strlen(rel);
        if (lp > lr && !strcmp(path + lp - lr, rel) && path[lp - lr - 1] == '/')
            return &g_exp[k];
    }
    fail_msg("item %llu: unexpected path %s", (unsigned long long)id, path);
    return NULL;
}

static void check_row_exact(const wav_expect *x, const float *row, uint32_t samples,
                            uint64_t id)
{
    for (uint32_t i = 0; i < samples; i++) {
        float want = i < x->n ? x->want[i] : 0.0f;
        int ok = x->tol > 0 ? fabsf(row[i] - want) <= x->tol
                            : memcmp(&row[i], &want, sizeof want) == 0;
        if (!ok)
            fail_msg("%s (item %llu) sample %u: %.9g, expected %.9g", x->rel,
                     (unsigned long long)id, i, (double)row[i], (double)want);
    }
}

static void test_every_format_decodes_exactly(void **state)
{
    (void)state;
    char *root = make_exact_tree();
    coordl_config cfg = audio_config(root);
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), N_EXACT);
    assert_int_equal(coordl_num_classes(L), 2);
    /* 3 epochs, shuffled: padding must be rewritten in reused slots */
    for (uint64_t e = 0; e < 3; e++) {
        int seen[N_EXACT] = {0};
        for (;;) {
            coordl_batch b;
            coordl_status rc = coordl_next(L, &b);
            if (rc == COORDL_END_OF_EPOCH)
                break;
            if (rc != COORDL_OK)
                fail_msg("epoch %llu: status %d: %s", (unsigned long long)e,
                         (int)rc, coordl_errmsg(L));
            check_shape(&b, AS);
            for (uint32_t r = 0; r < b.n; r++) {
                const wav_expect *x = expect_for(L, b.ids[r]);
                seen[x - g_exp]++;
                assert_int_equal(b.labels[r], x->label);
                check_row_exact(x, (const float *)b.data + (size_t)r * AS, AS,
                                b.ids[r]);
            }
            coordl_release(L, &b);
        }
        for (int k = 0; k < N_EXACT; k++)
            assert_int_equal(seen[k], 1);
    }
    /* no crop: the transform says offset 0 and the decoded length */
    for (uint64_t id = 0; id < N_EXACT; id++) {
        coordl_transform t;
        assert_int_equal(coordl_sample_transform(L, 1, id, &t), COORDL_OK);
        const wav_expect *x = expect_for(L, id);
        assert_int_equal(t.image_w, x->n);
        assert_int_equal(t.image_h, 1);
        assert_true(t.x == 0.0);
    }
    coordl_close(L);
    tu_rmtree(root);
    free(root);
}

static void test_odd_sized_chunk_with_pad_byte_is_skipped(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "odd");
    tu_wav_spec s;
    memset(&s, 0, sizeof s);
    s.format = 1; s.channels = 1; s.bits = 16; s.rate = 16000;
    s.odd_chunk = 1;
    uint8_t raw[AS * 2];
    float want[AS];
    for (size_t i = 0; i < AS; i++) {
        int16_t v = pcm_value(9, i);
        raw[2 * i] = (uint8_t)((uint16_t)v & 0xff);
        raw[2 * i + 1] = (uint8_t)((uint16_t)v >> 8);
        want[i] = (float)v / 32768.0f;
    }
    char *p = tu_join(root, "k/odd.wav");
    tu_write_wav(p, &s, raw, AS);
    free(p);
    coordl_config cfg = audio_config(root);
    cfg.batch_size = 1;
    cfg.on_bad_sample = COORDL_BAD_FAIL;
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    coordl_status rc = coordl_next(L, &b);
    if (rc != COORDL_OK)
        fail_msg("odd-sized chunk: status %d: %s", (int)rc, coordl_errmsg(L));
    check_shape(&b, AS);
    assert_memory_equal(b.data, want, sizeof want);
    coordl_release(L, &b);
    coordl_close(L);
    tu_rmtree(root);
    free(root);
}

static void test_list_file_source_gives_labels(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "listsrc");
    int16_t a[AS], c[AS];
    for (size_t i = 0; i < AS; i++) {
        a[i] = pcm_value(10, i);
        c[i] = pcm_value(11, i);
    }
    char *p = tu_join(root, "clips/a.wav");
    tu_write_wav_i16(p, 1, 16000, a, AS);
    free(p);
    p = tu_join(root, "clips/c.wav");
    tu_write_wav_i16(p, 1, 16000, c, AS);
    free(p);
    char *list = tu_join(root, "train.txt");
    const char *text = "clips/c.wav\t7\nclips/a.wav\t2\n";
    tu_write_file(list, text, strlen(text));
    coordl_config cfg = audio_config(list);
    cfg.shuffle = 0;
    cfg.batch_size = 2;
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    check_shape(&b, AS);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.labels[0], 7);
    assert_int_equal(b.labels[1], 2);
    const float *row = b.data;
    for (size_t i = 0; i < AS; i++) {
        assert_true(row[i] == (float)c[i] / 32768.0f);
        assert_true(row[AS + i] == (float)a[i] / 32768.0f);
    }
    coordl_release(L, &b);
    coordl_close(L);
    tu_rmtree(root);
    free(root);
    free(list);
}

/* ---- crop ---------------------------------------------------------------- */

#define CROP_FILES 6
#define CROP_N 200

static int16_t crop_value(int f, size_t i)
{
    return (int16_t)(f * 3000 - 9000 + (int)i * 13);
}

static char *make_crop_tree(void)
{
    char *root = tu_join(g_dir, "crop");
    int16_t v[CROP_N];
    for (int f = 0; f < CROP_FILES; f++) {
        for (size_t i = 0; i < CROP_N; i++)
            v[i] = crop_value(f, i);
        char *p = tu_join(root, "c%d/f%d.wav", f % 2, f);
        tu_write_wav_i16(p, 1, 16000, v, CROP_N);
        free(p);
    }
    return root;
}

static int crop_file_of(coordl *L, uint64_t id)
{
    const char *name = base_name(coordl_item_path(L, id));
    int f = -1;
    assert_int_equal(sscanf(name, "f%d.wav", &f), 1);
    assert_true(f >= 0 && f < CROP_FILES);
    return f;
}

static void test_crop_window_matches_sample_transform(void **state)
{
    (void)state;
    char *root = make_crop_tree();
    coordl_config cfg = audio_config(root);
    cfg.batch_size = 4;
    coordl *L = tu_open(&cfg);
    int offsets_seen[CROP_N - AS + 1] = {0};
    int distinct = 0, rows = 0;
    double first_off[CROP_FILES] = {-1, -1, -1, -1, -1, -1};
    int moved[CROP_FILES] = {0};
    for (uint64_t e = 0; e < 5; e++) {
        for (;;) {
            coordl_batch b;
            coordl_status rc = coordl_next(L, &b);
            if (rc == COORDL_END_OF_EPOCH)
                break;
            if (rc != COORDL_OK)
                fail_msg("status %d: %s", (int)rc, coordl_errmsg(L));
            check_shape(&b, AS);
            for (uint32_t r = 0; r < b.n; r++) {
                uint64_t id = b.ids[r];
                int f = crop_file_of(L, id);
                coordl_transform t;
                assert_int_equal(coordl_sample_transform(L, b.epoch, id, &t),
                                 COORDL_OK);
                assert_int_equal(t.image_w, CROP_N);
                assert_int_equal(t.image_h, 1);
                assert_true(t.w == (double)AS);
                assert_true(t.x >= 0 && t.x <= CROP_N - AS);
                assert_true(t.x == floor(t.x));
                size_t off = (size_t)t.x;
                const float *row = (const float *)b.data + (size_t)r * AS;
                for (size_t i = 0; i < AS; i++) {
                    float want = (float)crop_value(f, off + i) / 32768.0f;
                    if (row[i] != want)
                        fail_msg("f%d epoch %llu offset %zu sample %zu: %.9g, "
                                 "expected %.9g", f, (unsigned long long)e, off,
                                 i, (double)row[i], (double)want);
                }
                if (!offsets_seen[off]++)
                    distinct++;
                if (e == 0)
                    first_off[f] = t.x;
                else if (t.x != first_off[f])
                    moved[f] = 1;
                rows++;
            }
            coordl_release(L, &b);
        }
    }
    assert_int_equal(rows, 5 * CROP_FILES);
    /* 30 draws from 137 offsets: many distinct ones, and each file's window
     * moves between epochs */
    if (distinct < 15)
        fail_msg("only %d distinct crop offsets in %d rows", distinct, rows);
    for (int f = 0; f < CROP_FILES; f++)
        assert_true(moved[f]);
    coordl_close(L);
    tu_rmtree(root);
    free(root);
}

static void test_crop_deterministic_across_runs_and_threads(void **state)
{
    (void)state;
    char *root = make_crop_tree();
    coordl_config cfg = audio_config(root);
    cfg.batch_size = 4;
    tu_run a = {0}, b = {0}, c = {0};
    coordl *L = tu_open(&cfg);
    assert_int_equal(tu_run_epochs(L, 3, &a), COORDL_OK);
    coordl_close(L);
    L = tu_open(&cfg);
    assert_int_equal(tu_run_epochs(L, 3, &b), COORDL_OK);
    coordl_close(L);
    cfg.threads = 1;
    cfg.cache_bytes = 1 << 20;
    L = tu_open(&cfg);
    assert_int_equal(tu_run_epochs(L, 3, &c), COORDL_OK);
    coordl_close(L);
    assert_int_equal(a.nbatches, 6);
    assert_int_equal(b.nbatches, a.nbatches);
    assert_int_equal(c.nbatches, a.nbatches);
    assert_memory_equal(a.hash, b.hash, a.nbatches * sizeof *a.hash);
    assert_memory_equal(a.hash, c.hash, a.nbatches * sizeof *a.hash);
    /* another seed crops elsewhere */
    cfg.seed += 1;
    tu_run d = {0};
    L = tu_open(&cfg);
    assert_int_equal(tu_run_epochs(L, 3, &d), COORDL_OK);
    coordl_close(L);
    size_t same = 0;
    for (size_t i = 0; i < a.nbatches; i++)
        same += a.hash[i] == d.hash[i];
    assert_true(same < a.nbatches);
    tu_run_free(&a);
    tu_run_free(&b);
    tu_run_free(&c);
    tu_run_free(&d);
    tu_rmtree(root);
    free(root);
}

/* ---- resampling ---------------------------------------------------------- */

/* One float ramp file x[i] = i / 1000 at rate_in, read at rate_out into
 * rows of `samples`: N_out = floor(N_in * rate_out / rate_in) samples of
 * the interpolated ramp, then zeros. */
static void check_resample(uint32_t rate_in, uint32_t rate_out, size_t n_in,
                           uint32_t samples)
{
    static int serial;
    char *root = tu_join(g_dir, "rs%d", serial++);
    float *x = malloc(n_in * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n_in; i++)
        x[i] = (float)i / 1000.0f;
    char *p = tu_join(root, "k/ramp.wav");
    tu_write_wav_f32(p, 1, rate_in, x, n_in);
    free(p);
    uint64_t n_out = (uint64_t)n_in * rate_out / rate_in;
    assert_true(n_out <= samples); /* no crop: offset 0 */
    coordl_config cfg = audio_config(root);
    cfg.audio_rate = rate_out;
    cfg.audio_samples = samples;
    cfg.batch_size = 1;
    coordl *L = tu_open(&cfg);
    coordl_transform t;
    assert_int_equal(coordl_sample_transform(L, 0, 0, &t), COORDL_OK);
    if (t.image_w != n_out)
        fail_msg("%u -> %u Hz, %zu frames: length %u, expected %llu", rate_in,
                 rate_out, n_in, t.image_w, (unsigned long long)n_out);
    assert_true(t.x == 0.0);
    coordl_batch b;
    coordl_status rc = coordl_next(L, &b);
    if (rc != COORDL_OK)
        fail_msg("status %d: %s", (int)rc, coordl_errmsg(L));
    check_shape(&b, samples);
    const float *row = b.data;
    const double ratio = (double)rate_in / rate_out;
    for (size_t i = 0; i < samples; i++) {
        double pos = (double)i * ratio;
        if (i >= n_out) {
            if (row[i] != 0.0f)
                fail_msg("%u -> %u Hz: sample %zu past N_out = %llu is %.9g, "
                         "expected 0", rate_in, rate_out, i,
                         (unsigned long long)n_out, (double)row[i]);
        } else if (pos <= (double)(n_in - 1)) {
            double want = pos / 1000.0;
            if (fabs(row[i] - want) > 1e-5)
                fail_msg("%u -> %u Hz: sample %zu (input position %.4f) is "
                         "%.7f, expected %.7f", rate_in, rate_out, i, pos,
                         (double)row[i], want);
        } else {
            /* past the last input frame: between it and the extrapolation */
            double lo = (double)(n_in - 1) / 1000.0 - 1e-5;
            assert_true(row[i] >= lo && row[i] <= pos / 1000.0 + 1e-5);
        }
    }
    coordl_release(L, &b);
    coordl_close(L);
    tu_rmtree(root);
    free(root);
    free(x);
}

static void test_resample_down_by_two(void **state)
{
    (void)state;
    check_resample(16000, 8000, 300, 200); /* 150 samples, every 2nd input */
}

static void test_resample_up_by_two(void **state)
{
    (void)state;
    check_resample(8000, 16000, 100, 256); /* 200 samples, halves between */
}

static void test_resample_22050_to_16000(void **state)
{
    (void)state;
    check_resample(22050, 16000, 450, 400); /* 326 samples, step 1.378125 */
}

static void test_resample_same_rate_is_exact(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "same");
    float x[AS];
    for (size_t i = 0; i < AS; i++)
        x[i] = f32_value(3, i);
    char *p = tu_join(root, "k/s.wav");
    tu_write_wav_f32(p, 1, 16000, x, AS);
    free(p);
    coordl_config cfg = audio_config(root);
    cfg.audio_rate = 16000;
    cfg.batch_size = 1;
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_memory_equal(b.data, x, sizeof x);
    coordl_release(L, &b);
    coordl_close(L);
    tu_rmtree(root);
    free(root);
}

static void test_resample_then_crop(void **state)
{
    (void)state;
    /* 48 kHz, 600 frames -> 16 kHz: 200 samples; crop 64 at t.x, whose
     * sample j is input position (x + j) * 3 */
    char *root = tu_join(g_dir, "rscrop");
    float x[600];
    for (size_t i = 0; i < 600; i++)
        x[i] = (float)i / 1000.0f;
    char *p = tu_join(root, "k/r.wav");
    tu_write_wav_f32(p, 1, 48000, x, 600);
    free(p);
    coordl_config cfg = audio_config(root);
    cfg.audio_rate = 16000;
    cfg.batch_size = 1;
    coordl *L = tu_open(&cfg);
    for (uint64_t e = 0; e < 4; e++) {
        coordl_batch b;
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        coordl_transform t;
        assert_int_equal(coordl_sample_transform(L, e, 0, &t), COORDL_OK);
        assert_int_equal(t.image_w, 200);
        assert_true(t.x >= 0 && t.x <= 200 - AS && t.x == floor(t.x));
        const float *row = b.data;
        for (size_t j = 0; j < AS; j++) {
            double want = (t.x + (double)j) * 3.0 / 1000.0;
            if (fabs(row[j] - want) > 1e-5)
                fail_msg("epoch %llu offset %g sample %zu: %.7f, expected %.7f",
                         (unsigned long long)e, t.x, j, (double)row[j], want);
        }
        coordl_release(L, &b);
        assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    }
    coordl_close(L);
    tu_rmtree(root);
    free(root);
}

/* ---- bad files ------------------------------------------------------------ */

typedef enum {
    W_NOT_RIFF,
    W_NOT_WAVE,
    W_PCM8,
    W_PCM24,
    W_EXT_ADPCM,
    W_TRUNCATED_DATA,
    W_NO_FMT,
    W_GARBAGE
} bad_wav;

#define BAD_ID 5 /* k1/f1.wav */

/* 2 classes x 4 good PCM16 files (64 frames), then k1/f1.wav replaced by
 * a bad one. Returns the root; *bad_name its file name. */
static char *make_bad_tree(bad_wav kind)
{
    static int serial;
    char *root = tu_join(g_dir, "bad%d", serial++);
    int16_t v[AS];
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 4; j++) {
            for (size_t i = 0; i < AS; i++)
                v[i] = pcm_value(20 + k * 4 + j, i);
            char *p = tu_join(root, "k%d/f%d.wav", k, j);
            tu_write_wav_i16(p, 1, 16000, v, AS);
            free(p);
        }
    tu_wav_spec s;
    memset(&s, 0, sizeof s);
    s.format = 1; s.channels = 1; s.bits = 16; s.rate = 16000;
    uint8_t raw[AS * 4];
    for (size_t i = 0; i < sizeof raw; i++)
        raw[i] = (uint8_t)(i * 37 + 1);
    size_t frames = AS;
    switch (kind) {
    case W_NOT_RIFF: s.not_riff = 1; break;
    case W_NOT_WAVE: s.not_wave = 1; break;
    case W_PCM8: s.bits = 8; break;
    case W_PCM24: s.bits = 24; break;
    case W_EXT_ADPCM: s.format = 0xFFFE; s.subformat = 2; break;
    case W_TRUNCATED_DATA: s.data_claim_extra = 64; break;
    case W_NO_FMT: s.no_fmt = 1; break;
    case W_GARBAGE: break;
    }
    char *p = tu_join(root, "k1/f1.wav");
    if (kind == W_GARBAGE) {
        tu_write_file(p, "this is not audio at all, just text\n", 36);
    } else {
        tu_write_wav(p, &s, raw, frames);
    }
    free(p);
    return root;
}

static int16_t bad_tree_value(uint64_t id, size_t i)
{
    return pcm_value(20 + (int)id, i); /* id = k * 4 + j */
}

static void check_bad_fail(bad_wav kind)
{
    char *root = make_bad_tree(kind);
    coordl_config cfg = audio_config(root);
    cfg.shuffle = 0;
    cfg.batch_size = 4;
    cfg.prefetch_batches = 2;
    cfg.on_bad_sample = COORDL_BAD_FAIL;
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 8);
    assert_non_null(strstr(coordl_item_path(L, BAD_ID), "k1/f1.wav"));
    for (uint64_t e = 0; e < 2; e++) {
        coordl_batch b;
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        check_shape(&b, AS);
        for (uint32_t r = 0; r < 4; r++) {
            assert_int_equal(b.ids[r], r);
            const float *row = (const float *)b.data + (size_t)r * AS;
            for (size_t i = 0; i < AS; i++)
                assert_true(row[i] == (float)bad_tree_value(r, i) / 32768.0f);
        }
        coordl_release(L, &b);
        coordl_status rc = coordl_next(L, &b);
        if (rc != COORDL_ERR_CORRUPT)
            fail_msg("bad wav kind %d, epoch %llu: status %d (%s), expected "
                     "COORDL_ERR_CORRUPT", (int)kind, (unsigned long long)e,
                     (int)rc, coordl_strerror(rc));
        if (!strstr(coordl_errmsg(L), "f1.wav"))
            fail_msg("message \"%s\" does not name f1.wav", coordl_errmsg(L));
        assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    }
    coordl_close(L);
    tu_rmtree(root);
    free(root);
}

static void check_bad_substitute(bad_wav kind)
{
    char *root = make_bad_tree(kind);
    coordl_config cfg = audio_config(root);
    cfg.batch_size = 4;
    cfg.on_bad_sample = COORDL_BAD_SUBSTITUTE;
    coordl *L = tu_open(&cfg);
    for (uint64_t e = 0; e < 3; e++) {
        uint32_t rows = 0;
        for (;;) {
            coordl_batch b;
            coordl_status rc = coordl_next(L, &b);
            if (rc == COORDL_END_OF_EPOCH)
                break;
            if (rc != COORDL_OK)
                fail_msg("bad wav kind %d substitute: status %d: %s", (int)kind,
                         (int)rc, coordl_errmsg(L));
            assert_int_equal(b.n, 4); /* full */
            for (uint32_t r = 0; r < b.n; r++) {
                assert_true(b.ids[r] < 8);
                assert_int_not_equal(b.ids[r], BAD_ID);
                const float *row = (const float *)b.data + (size_t)r * AS;
                for (size_t i = 0; i < AS; i++)
                    assert_true(row[i] ==
                                (float)bad_tree_value(b.ids[r], i) / 32768.0f);
            }
            rows += b.n;
            coordl_release(L, &b);
        }
        assert_int_equal(rows, 8);
        coordl_epoch_stats es;
        assert_int_equal(coordl_get_epoch_stats(L, e, &es), COORDL_OK);
        assert_int_equal(es.bad_samples, 1);
    }
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_true(st.bad_samples >= 3);
    coordl_close(L);
    tu_rmtree(root);
    free(root);
}

static void test_bad_not_riff(void **state)
{
    (void)state;
    check_bad_fail(W_NOT_RIFF);
    check_bad_substitute(W_NOT_RIFF);
}

static void test_bad_riff_but_not_wave(void **state)
{
    (void)state;
    check_bad_fail(W_NOT_WAVE);
    check_bad_substitute(W_NOT_WAVE);
}

static void test_bad_pcm8(void **state)
{
    (void)state;
    check_bad_fail(W_PCM8);
    check_bad_substitute(W_PCM8);
}

static void test_bad_pcm24(void **state)
{
    (void)state;
    check_bad_fail(W_PCM24);
    check_bad_substitute(W_PCM24);
}

static void test_bad_extensible_adpcm(void **state)
{
    (void)state;
    check_bad_fail(W_EXT_ADPCM);
    check_bad_substitute(W_EXT_ADPCM);
}

static void test_bad_truncated_data_chunk(void **state)
{
    (void)state;
    check_bad_fail(W_TRUNCATED_DATA);
    check_bad_substitute(W_TRUNCATED_DATA);
}

static void test_bad_missing_fmt(void **state)
{
    (void)state;
    check_bad_fail(W_NO_FMT);
    check_bad_substitute(W_NO_FMT);
}

static void test_bad_text_named_wav(void **state)
{
    (void)state;
    check_bad_fail(W_GARBAGE);
    check_bad_substitute(W_GARBAGE);
}

static void test_bad_config(void **state)
{
    (void)state;
    char *root = make_crop_tree();
    coordl_config cfg = audio_config(root);
    coordl *L = NULL;
    cfg.audio_samples = 0;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_null(L);
    assert_non_null(strstr(coordl_errmsg(NULL), "audio_samples"));
    /* a folder of images only holds no audio */
    char *img = tu_join(g_dir, "imgs");
    tu_folder_spec spec = {1, 2, 8, 8, 0, TU_PAT_SOLID, TU_FMT_JPEG, 90, 1};
    tu_make_image_folder(img, &spec);
    cfg = audio_config(img);
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_null(L);
    /* image sizes are not an audio parameter */
    cfg = audio_config(root);
    L = tu_open(&cfg);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_W, 32), COORDL_ERR_INVALID);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_SIZE, 32), COORDL_ERR_INVALID);
    coordl_close(L);
    tu_rmtree(img);
    free(img);
    tu_rmtree(root);
    free(root);
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_format_decodes_exactly),
        cmocka_unit_test(test_odd_sized_chunk_with_pad_byte_is_skipped),
        cmocka_unit_test(test_list_file_source_gives_labels),
        cmocka_unit_test(test_crop_window_matches_sample_transform),
        cmocka_unit_test(test_crop_deterministic_across_runs_and_threads),
        cmocka_unit_test(test_resample_down_by_two),
        cmocka_unit_test(test_resample_up_by_two),
        cmocka_unit_test(test_resample_22050_to_16000),
        cmocka_unit_test(test_resample_same_rate_is_exact),
        cmocka_unit_test(test_resample_then_crop),
        cmocka_unit_test(test_bad_not_riff),
        cmocka_unit_test(test_bad_riff_but_not_wave),
        cmocka_unit_test(test_bad_pcm8),
        cmocka_unit_test(test_bad_pcm24),
        cmocka_unit_test(test_bad_extensible_adpcm),
        cmocka_unit_test(test_bad_truncated_data_chunk),
        cmocka_unit_test(test_bad_missing_fmt),
        cmocka_unit_test(test_bad_text_named_wav),
        cmocka_unit_test(test_bad_config),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
