/*
 * test_resample_simd.c - the AVX2 resampling loops (chosen at open when the
 * CPU has AVX2) give byte-identical batches to the SSE2 loops
 * (COORDL_NO_AVX2=1), over output widths that exercise every tail, flips,
 * DCT scales, every layout and normalization. Their accuracy against the
 * double-precision reference is tests/test_prep.c, which runs the AVX2 path
 * on a CPU that has it; identical output carries it over to SSE2.
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *g_root;

static int group_setup(void **state)
{
    (void)state;
    g_root = tu_mkdtemp();
    /* photo-like files of assorted sizes: textured, 4:2:0 and 4:4:4 */
    for (int i = 0; i < 12; i++) {
        const int w = 150 + 61 * i, h = 120 + 37 * i;
        const uint8_t base[3] = {(uint8_t)(40 + 15 * i), 120, (uint8_t)(200 - 12 * i)};
        uint8_t *pix = tu_textured_rgb(w, h, base, (uint64_t)i + 1);
        char *path = tu_join(g_root, "c%d/img_%02d.jpg", i % 2, i);
        tu_jpeg_opts o = {88, i % 3 ? TU_SUB_420 : TU_SUB_444, 0, 0};
        tu_write_jpeg(path, pix, w, h, 3, &o);
        free(path);
        free(pix);
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_root);
    free(g_root);
    return 0;
}

static void hashes(const coordl_config *cfg, int no_avx2, uint64_t *h, size_t *n)
{
    if (no_avx2) setenv("COORDL_NO_AVX2", "1", 1);
    else unsetenv("COORDL_NO_AVX2");
    coordl *L = tu_open(cfg); /* the loops are chosen at open */
    unsetenv("COORDL_NO_AVX2");
    tu_run run;
    memset(&run, 0, sizeof run);
    assert_int_equal(tu_run_epochs(L, 2, &run), COORDL_OK);
    assert_true(run.nbatches <= 16);
    memcpy(h, run.hash, run.nbatches * sizeof *h);
    *n = run.nbatches;
    tu_run_free(&run);
    coordl_close(L);
}

static void test_avx2_and_sse2_resampling_give_identical_batches(void **state)
{
    (void)state;
#if defined(__x86_64__)
    if (!__builtin_cpu_supports("avx2"))
        print_message("  this CPU has no AVX2: both runs use the SSE2 loops (the comparison is trivial)\n");
#else
    print_message("  not x86-64: no AVX2 loops, both runs use the portable ones (the comparison is trivial)\n");
#endif
    const struct { uint32_t w, h; coordl_layout layout; coordl_pipeline pipe; int rot; } cases[] = {
        {224, 224, COORDL_F32_NCHW, COORDL_PIPE_TRAIN, 0}, /* 8-wide all through  */
        {37, 29, COORDL_F32_NCHW, COORDL_PIPE_TRAIN, 0},   /* 4- and 1-wide tails */
        {13, 61, COORDL_U8_NHWC, COORDL_PIPE_TRAIN, 0},
        {64, 48, COORDL_F32_NHWC, COORDL_PIPE_EVAL, 0},
        {45, 45, COORDL_U8_NCHW, COORDL_PIPE_TRAIN, 1},    /* rotation's path    */
        {16, 16, COORDL_F32_NCHW, COORDL_PIPE_TRAIN, 0},   /* DCT-scaled crops   */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        coordl_config cfg = tu_config(g_root);
        cfg.out_w = cases[c].w;
        cfg.out_h = cases[c].h;
        cfg.layout = cases[c].layout;
        cfg.pipeline = cases[c].pipe;
        cfg.batch_size = 4;
        cfg.seed = 5 + c;
        if (cases[c].rot) cfg.rotate_deg = 20.0f;
        uint64_t a[16], b[16];
        size_t na, nb;
        hashes(&cfg, 0, a, &na);
        hashes(&cfg, 1, b, &nb);
        assert_int_equal(na, nb);
        for (size_t i = 0; i < na; i++)
            if (a[i] != b[i])
                fail_msg("case %zu (%ux%u layout %d): batch %zu differs between AVX2 and SSE2", c,
                         cases[c].w, cases[c].h, (int)cases[c].layout, i);
    }
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_avx2_and_sse2_resampling_give_identical_batches),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
