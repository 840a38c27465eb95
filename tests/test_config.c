/*
 * test_config.c - coordl_get_config: the settings a handle runs with after
 * open resolved them (thread count, cache budget after clamping, the layout
 * forced by the token and audio pipelines, the cores and NUMA node chosen,
 * coordl_set's changes), strings owned by the handle, and the caller's
 * struct size respected.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static char *g_dir;
static char *g_images;
static uint64_t g_images_bytes;

static const tu_folder_spec g_spec = {2, 6, 24, 20, 0, TU_PAT_TEXTURED, TU_FMT_JPEG, 90, 7};

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    g_images = tu_join(g_dir, "images");
    g_images_bytes = tu_make_image_folder(g_images, &g_spec);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_images);
    free(g_dir);
    return 0;
}

static void test_get_config_resolves_threads_cache_and_copies_strings(void **state)
{
    (void)state;
    char source[4096];
    snprintf(source, sizeof source, "%s", g_images);
    coordl_config cfg = tu_config(source);
    cfg.threads = 0;                      /* resolved at open            */
    cfg.cache_bytes = (uint64_t)1 << 40;  /* clamped to dataset + 1/8 + 64 MiB */
    cfg.cache_pin = COORDL_PIN_OFF;
    cfg.seed = 99;
    coordl *L = tu_open(&cfg);
    /* the caller's string may go away after open */
    memset(source, 'x', strlen(source));

    coordl_config eff;
    memset(&eff, 0x5a, sizeof eff);
    assert_int_equal(coordl_get_config(L, &eff), COORDL_OK);
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_true(eff.threads >= 1);
    assert_int_equal(eff.threads, (int)st.threads);
    assert_int_equal(st.dataset_bytes, g_images_bytes);
    /* + 1/8: room for JPEG rewrites (jpeg_random_access) */
    assert_int_equal(eff.cache_bytes, g_images_bytes + g_images_bytes / 8 + (64u << 20));
    assert_int_equal(st.cache_bytes_budget, (uint64_t)1 << 40); /* the stats keep what was asked */
    assert_non_null(eff.source);
    assert_ptr_not_equal(eff.source, source);
    assert_string_equal(eff.source, g_images);
    /* what open did not change comes back as given */
    assert_int_equal(eff.batch_size, cfg.batch_size);
    assert_int_equal(eff.out_w, cfg.out_w);
    assert_int_equal(eff.layout, COORDL_U8_NHWC);
    assert_int_equal(eff.seed, 99);
    assert_int_equal(eff.world, 1);
    assert_ptr_equal(eff.log, cfg.log);
    assert_null(eff.group);
    /* placement: the PUs the workers were put on, as the stats list them */
    assert_non_null(eff.cpuset);
    assert_string_equal(eff.cpuset, st.placement_cpus);
    assert_int_equal(eff.numa_node, st.placement_node);
    assert_null(eff.pci_bus_id);
    coordl_close(L);
}

static void test_get_config_cache_below_dataset_is_kept(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.cache_bytes = 4096;
    cfg.cache_pin = COORDL_PIN_OFF;
    coordl *L = tu_open(&cfg);
    coordl_config eff;
    assert_int_equal(coordl_get_config(L, &eff), COORDL_OK);
    assert_int_equal(eff.cache_bytes, 4096);
    coordl_close(L);
}

static void test_get_config_forces_token_and_audio_layouts(void **state)
{
    (void)state;
#if defined(COORDL_NO_TOKENS) || defined(COORDL_NO_AUDIO)
    printf("skip: built with COORDL_NO_TOKENS or COORDL_NO_AUDIO (test_switches checks those refuse to open)\n");
    return;
#endif
    char *tokdir = tu_join(g_dir, "tokens");
    tu_mkdirs(tokdir);
    char *shard = tu_join(tokdir, "shard_000.bin");
    uint32_t toks[600];
    for (int i = 0; i < 600; i++) toks[i] = (uint32_t)(i * 7 % 50257);
    tu_write_shard(shard, 1, toks, 600);
    coordl_config cfg = tu_config(tokdir);
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.seq_len = 16;
    cfg.layout = COORDL_F32_NCHW; /* ignored: tokens are int32 */
    coordl *L = tu_open(&cfg);
    coordl_config eff;
    assert_int_equal(coordl_get_config(L, &eff), COORDL_OK);
    assert_int_equal(eff.layout, COORDL_I32);
    assert_int_equal(eff.pipeline, COORDL_PIPE_TOKENS);
    assert_int_equal(eff.seq_len, 16);
    coordl_close(L);

    char *wavdir = tu_join(g_dir, "audio");
    char *wav = tu_join(wavdir, "a/clip.wav");
    int16_t pcm[800];
    for (int i = 0; i < 800; i++) pcm[i] = (int16_t)(i * 37);
    tu_write_wav_i16(wav, 1, 8000, pcm, 800);
    cfg = tu_config(wavdir);
    cfg.pipeline = COORDL_PIPE_AUDIO;
    cfg.audio_samples = 400;
    cfg.batch_size = 1;
    cfg.layout = COORDL_U8_NHWC; /* ignored: audio is float */
    L = tu_open(&cfg);
    assert_int_equal(coordl_get_config(L, &eff), COORDL_OK);
    assert_int_equal(eff.layout, COORDL_F32);
    assert_int_equal(eff.audio_samples, 400);
    coordl_close(L);
    free(wav);
    free(wavdir);
    free(shard);
    free(tokdir);
}

static void test_get_config_reports_synthetic_placement(void **state)
{
    (void)state;
#ifdef COORDL_NO_HWLOC
    printf("skip: built with COORDL_NO_HWLOC, synthetic topologies need hwloc\n");
#else
    coordl_config cfg = tu_config(g_images);
    cfg.threads = 0;
    cfg.topology = "synthetic:package:2 numa:1 core:4 pu:2";
    cfg.numa_node = 1;
    cfg.cache_pin = COORDL_PIN_OFF;
    coordl *L = tu_open(&cfg);
    coordl_config eff;
    assert_int_equal(coordl_get_config(L, &eff), COORDL_OK);
    coordl_stats st;
    coordl_get_stats(L, &st);
    /* node 1 of that machine: 4 cores, PUs 8-15; one worker per core */
    assert_int_equal(eff.numa_node, 1);
    assert_int_equal(eff.threads, 4);
    assert_non_null(eff.cpuset);
    assert_string_equal(eff.cpuset, st.placement_cpus);
    assert_string_equal(eff.cpuset, "8,10,12,14");
    assert_non_null(eff.topology);
    assert_string_equal(eff.topology, "synthetic:package:2 numa:1 core:4 pu:2");
    coordl_close(L);
#endif
}

static void test_get_config_follows_coordl_set(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.max_out_w = cfg.max_out_h = 32;
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_SIZE, 24), COORDL_OK);
    assert_int_equal(coordl_set(L, COORDL_PARAM_BATCH_SIZE, 3), COORDL_OK);
    coordl_config eff;
    assert_int_equal(coordl_get_config(L, &eff), COORDL_OK);
    assert_int_equal(eff.out_w, 24);
    assert_int_equal(eff.out_h, 24);
    assert_int_equal(eff.batch_size, 3);
    coordl_close(L);
}

static void test_get_config_writes_only_the_callers_size(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_get_config(NULL, &cfg), COORDL_ERR_INVALID);
    assert_int_equal(coordl_get_config(L, NULL), COORDL_ERR_INVALID);

    /* a caller whose coordl_config ends before `threads` */
    const size_t small = offsetof(coordl_config, threads);
    unsigned char buf[sizeof(coordl_config) + 64];
    memset(buf, 0xA5, sizeof buf);
    assert_int_equal(coordl_get_config_sized(L, (coordl_config *)(void *)buf, small), COORDL_OK);
    for (size_t i = small; i < sizeof buf; i++)
        if (buf[i] != 0xA5) fail_msg("byte %zu past the caller's %zu-byte struct was written", i, small);
    coordl_config head;
    memcpy(&head, buf, small);
    assert_int_equal(head.batch_size, cfg.batch_size);

    /* a caller with a newer header: the bytes this library knows nothing
     * about come back zero */
    memset(buf, 0xA5, sizeof buf);
    assert_int_equal(coordl_get_config_sized(L, (coordl_config *)(void *)buf, sizeof buf), COORDL_OK);
    for (size_t i = sizeof(coordl_config); i < sizeof buf; i++)
        if (buf[i] != 0) fail_msg("byte %zu beyond the library's coordl_config is %#x, not 0", i, buf[i]);
    coordl_close(L);
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_config_resolves_threads_cache_and_copies_strings),
        cmocka_unit_test(test_get_config_cache_below_dataset_is_kept),
        cmocka_unit_test(test_get_config_forces_token_and_audio_layouts),
        cmocka_unit_test(test_get_config_reports_synthetic_placement),
        cmocka_unit_test(test_get_config_follows_coordl_set),
        cmocka_unit_test(test_get_config_writes_only_the_callers_size),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
