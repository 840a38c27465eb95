/*
 * test_switches.c - the vendoring switches (COORDL_NO_AUDIO,
 * COORDL_NO_TOKENS, COORDL_NO_ANALYZER, COORDL_NO_STB, COORDL_NO_REMOTE): a part compiled out
 * answers COORDL_ERR_UNSUPPORTED with a message naming its switch, and a
 * part compiled in works. Built with the same -D switches as the library
 * (make test builds it without any: every part must work; make
 * test-switches builds it with each switch and with all of them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

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

/* Opens cfg and takes one batch; returns the open's status (and fails the
 * test when a successful open gives no batch). */
static coordl_status open_and_take_one(const coordl_config *cfg)
{
    coordl *L = NULL;
    coordl_status rc = coordl_open(cfg, &L);
    if (rc != COORDL_OK)
        return rc;
    coordl_batch b;
    coordl_status nrc = coordl_next(L, &b);
    if (nrc != COORDL_OK)
        fail_msg("%s: coordl_next = %s: %s", cfg->source, coordl_strerror(nrc), coordl_errmsg(L));
    assert_true(b.n > 0);
    coordl_release(L, &b);
    coordl_close(L);
    return COORDL_OK;
}

#if defined(COORDL_NO_AUDIO) || defined(COORDL_NO_TOKENS) || defined(COORDL_NO_ANALYZER) || defined(COORDL_NO_STB) || \
    defined(COORDL_NO_REMOTE)
static void expect_unsupported(coordl_status rc, const char *msg, const char *sw)
{
    if (rc != COORDL_ERR_UNSUPPORTED)
        fail_msg("built with %s: got %s, expected COORDL_ERR_UNSUPPORTED", sw, coordl_strerror(rc));
    if (!strstr(msg, sw))
        fail_msg("built with %s: the message does not name the switch: \"%s\"", sw, msg);
    printf("built with %s: \"%s\"\n", sw, msg);
}
#endif

static void test_audio_pipeline_or_unsupported(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "audio");
    char *wav = tu_join(dir, "a/clip.wav");
    int16_t pcm[1000];
    for (int i = 0; i < 1000; i++) pcm[i] = (int16_t)(i * 31);
    tu_write_wav_i16(wav, 1, 8000, pcm, 1000);
    coordl_config cfg = tu_config(dir);
    cfg.pipeline = COORDL_PIPE_AUDIO;
    cfg.audio_samples = 500;
    cfg.batch_size = 1;
    coordl_status rc = open_and_take_one(&cfg);
#ifdef COORDL_NO_AUDIO
    expect_unsupported(rc, coordl_errmsg(NULL), "COORDL_NO_AUDIO");
#else
    if (rc != COORDL_OK) fail_msg("audio: %s: %s", coordl_strerror(rc), coordl_errmsg(NULL));
#endif
    free(wav);
    free(dir);
}

static void test_token_pipeline_or_unsupported(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "tokens");
    tu_mkdirs(dir);
    char *shard = tu_join(dir, "shard_000.bin");
    uint32_t toks[400];
    for (int i = 0; i < 400; i++) toks[i] = (uint32_t)(i * 13 % 50000);
    tu_write_shard(shard, 1, toks, 400);
    coordl_config cfg = tu_config(dir);
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.seq_len = 8;
    cfg.batch_size = 2;
    coordl_status rc = open_and_take_one(&cfg);
#ifdef COORDL_NO_TOKENS
    expect_unsupported(rc, coordl_errmsg(NULL), "COORDL_NO_TOKENS");
#else
    if (rc != COORDL_OK) fail_msg("tokens: %s: %s", coordl_strerror(rc), coordl_errmsg(NULL));
#endif
    free(shard);
    free(dir);
}

/* A folder of one JPEG and one PNG: the JPEG always decodes; the PNG needs
 * stb_image. */
static void test_png_needs_stb_jpeg_never(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "mixed");
    char *jpg = tu_join(dir, "a/one.jpg"), *png = tu_join(dir, "b/two.png");
    uint8_t *pix = tu_gradient_rgb(24, 20, 40);
    tu_mkdirs(dir);
    tu_write_jpeg(jpg, pix, 24, 20, 3, NULL);
    tu_write_png(png, pix, 24, 20, 3);
    coordl_config cfg = tu_config(dir);
    cfg.batch_size = 1;
    cfg.shuffle = 0; /* item 0 is the JPEG (class a), item 1 the PNG */
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    coordl_status rc = coordl_next(L, &b);
    if (rc != COORDL_OK) fail_msg("the JPEG: %s: %s", coordl_strerror(rc), coordl_errmsg(L));
    assert_int_equal(b.ids[0], 0);
    coordl_release(L, &b);
    rc = coordl_next(L, &b);
#ifdef COORDL_NO_STB
    expect_unsupported(rc, coordl_errmsg(L), "COORDL_NO_STB");
#else
    if (rc != COORDL_OK) fail_msg("the PNG: %s: %s", coordl_strerror(rc), coordl_errmsg(L));
    assert_int_equal(b.ids[0], 1);
    coordl_release(L, &b);
#endif
    coordl_close(L);
    free(pix);
    free(jpg);
    free(png);
    free(dir);
}

static int quick_step(void *user, const coordl_batch *b)
{
    (void)user;
    (void)b;
    return 0;
}

static void test_analyzer_or_unsupported(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "images");
    const tu_folder_spec spec = {2, 8, 24, 20, 0, TU_PAT_TEXTURED, TU_FMT_JPEG, 90, 3};
    tu_make_image_folder(dir, &spec);
    coordl_config cfg = tu_config(dir);
    coordl_analyze_opts o;
    memset(&o, 0, sizeof o);
    o.batches = 2;
    o.skip_cold = 1;
    coordl_report r;
    coordl_status rc = coordl_analyze(&cfg, quick_step, NULL, &o, &r);
#ifdef COORDL_NO_ANALYZER
    expect_unsupported(rc, coordl_errmsg(NULL), "COORDL_NO_ANALYZER");
    assert_null(r.whatif);
    assert_int_equal(r.n_whatif, 0);
#else
    if (rc != COORDL_OK) fail_msg("coordl_analyze: %s: %s", coordl_strerror(rc), coordl_errmsg(NULL));
    assert_true(r.n_whatif > 0);
    assert_true(coordl_report_json(&r, NULL, 0) > 0);
#endif
    coordl_report_free(&r);
    /* the stats stay: they are the loader's, not the analyzer's */
    coordl *L = tu_open(&cfg);
    char js[64];
    assert_true(coordl_stats_json(L, js, sizeof js) > 0);
    coordl_close(L);
    free(dir);
}

/* A remote source: compiled out, refused naming the switch; compiled in,
 * read (here a port nothing listens on: an I/O error naming the URL; the
 * servers are test_remote's). */
static void test_remote_source_or_unsupported(void **state)
{
    (void)state;
    const char *url = "http://127.0.0.1:9/shard-000000.tar"; /* the discard port: nothing listens */
    coordl_config cfg = tu_config(url);
    cfg.io_timeout_ms = 2000;
    coordl *L = NULL;
    coordl_status rc = coordl_open(&cfg, &L);
#ifdef COORDL_NO_REMOTE
    expect_unsupported(rc, coordl_errmsg(NULL), "COORDL_NO_REMOTE");
#else
    if (rc != COORDL_ERR_IO || !strstr(coordl_errmsg(NULL), url))
        fail_msg("remote: got %s: %s, expected an I/O error naming the URL", coordl_strerror(rc), coordl_errmsg(NULL));
#endif
    assert_null(L);
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_audio_pipeline_or_unsupported),
        cmocka_unit_test(test_token_pipeline_or_unsupported),
        cmocka_unit_test(test_png_needs_stb_jpeg_never),
        cmocka_unit_test(test_analyzer_or_unsupported),
        cmocka_unit_test(test_remote_source_or_unsupported),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
