/*
 * test_jpeg_internals.c - the parts of JPEG random access (coordl.c
 * sections 8 and 13) that are pure functions, white-box: this file
 * includes coordl.c.
 *
 * What is checked: the rewrite budget's rule (rewrite time <= b x (busy +
 * rewrite) + the time spliced decodes saved), at its edges; the restart
 * interval divides the MCUs per row and grows as MCUs get smaller; the
 * header walk refuses what cannot be rewritten or spliced and never reads
 * past the bytes it is given (every truncation and random damage of a real
 * header, under ASan); a splice of a rewrite whose row index or segments
 * were damaged (a hostile or torn group object) returns 0 instead of
 * reading outside the item.
 */
#include "coordl.c"

#include "test_util.h"

#include <stdlib.h>
#include <string.h>

static cdl__worker *budget_worker(coordl *L, float b)
{
    static cdl__worker W;
    memset(L, 0, sizeof *L);
    L->cfg = cdl__config_default();
    L->cfg.jpeg_rewrite_budget = b;
    memset(&W, 0, sizeof W);
    W.L = L;
    return &W;
}

static void test_rewrite_budget_rule(void **state)
{
    (void)state;
    coordl L;
    cdl__worker *W = budget_worker(&L, 0.1f);
    W->budget.busy_cpu = 900;
    W->budget.rewrite_cpu = 100; /* exactly 0.1 of 1000 */
    assert_true(cdl__rewrite_allowed(W));
    W->budget.rewrite_cpu = 101;
    assert_false(cdl__rewrite_allowed(W));
    /* spliced decodes 400 ns faster than plain ones, 5 of them in the
     * window (of 50 since the start): 2000 saved */
    W->budget.plain_n = 10;
    W->budget.plain_cpu = 10 * 1000;
    W->budget.splice_n = 50;
    W->budget.splice_cpu = 50 * 600;
    W->budget.splice_win = 5;
    W->budget.rewrite_cpu = 2100;
    W->budget.busy_cpu = 900; /* 0.1 x 3000 + 2000 = 2300 */
    assert_true(cdl__rewrite_allowed(W));
    W->budget.rewrite_cpu = 2400;
    assert_false(cdl__rewrite_allowed(W));
    /* a spliced decode slower than a plain one saves nothing */
    W->budget.splice_cpu = 50 * 1200;
    W->budget.rewrite_cpu = 200;
    W->budget.busy_cpu = 1000;
    assert_false(cdl__rewrite_allowed(W));
    /* 0: never; 1: always; random access off: never */
    W = budget_worker(&L, 0.0f);
    assert_false(cdl__rewrite_allowed(W));
    W = budget_worker(&L, 1.0f);
    W->budget.rewrite_cpu = 1000000;
    assert_true(cdl__rewrite_allowed(W));
    L.cfg.jpeg_random_access = 0;
    assert_false(cdl__rewrite_allowed(W));
}

static void test_restart_interval_divides_rows_and_follows_mcu_size(void **state)
{
    (void)state;
    cdl__jpeg_layout lay;
    memset(&lay, 0, sizeof lay);
    lay.mcus_per_row = 30;
    lay.mcu_rows = 25;
    /* ~150 bytes a MCU (an ImageNet-like photo): a marker after every MCU */
    assert_int_equal(cdl__rst_interval(&lay, 750 * 150), 1);
    /* fewer bytes a MCU: longer intervals, always dividing the row */
    uint32_t last = 1;
    for (size_t bpm = 120; bpm >= 4; bpm -= 4) {
        const uint32_t k = cdl__rst_interval(&lay, 750 * bpm);
        assert_int_equal(lay.mcus_per_row % k, 0);
        assert_true(k >= last);
        last = k;
        /* the markers stay under ~3.5% of the bytes where a divisor allows */
        if (k < lay.mcus_per_row) assert_true(750.0 / k * 4.3 <= 0.035 * 750.0 * (double)bpm * 1.0001);
    }
    assert_true(last > 1);
    /* a prime row: 1, or the whole row */
    lay.mcus_per_row = 31;
    const uint32_t k = cdl__rst_interval(&lay, 31 * 25 * 20);
    assert_true(k == 1 || k == 31);
}

static uint8_t *photo_jpeg(int w, int h, size_t *n)
{
    uint8_t *pix = tu_noise_rgb(w, h, 7);
    tu_jpeg_opts o = {85, TU_SUB_420, 0, 0};
    uint8_t *jpg = tu_encode_jpeg(pix, w, h, 3, &o, n);
    free(pix);
    return jpg;
}

static void test_header_walk_refuses_damage_without_reading_outside(void **state)
{
    (void)state;
    size_t n;
    uint8_t *jpg = photo_jpeg(67, 45, &n);
    cdl__jpeg_layout lay;
    assert_true(cdl__jpeg_walk(jpg, n, &lay));
    assert_int_equal(lay.w, 67);
    assert_int_equal(lay.h, 45);
    assert_int_equal(lay.mcu_w, 16);
    assert_int_equal(lay.mcus_per_row, 5);
    assert_int_equal(lay.mcu_rows, 3);
    assert_true(lay.subsampled && lay.hsub);
    assert_int_equal(lay.index_off, 0);
    /* every truncation before the scan: refused, and read inside (ASan) */
    for (size_t k = 0; k < lay.data_off; k++) {
        uint8_t *cut = malloc(k ? k : 1);
        memcpy(cut, jpg, k);
        assert_false(cdl__jpeg_walk(cut, k, &lay));
        free(cut);
    }
    /* random damage to the header: any answer, never an out-of-bounds read */
    uint64_t rng = 99;
    uint8_t *m = malloc(n);
    for (int t = 0; t < 5000; t++) {
        memcpy(m, jpg, n);
        for (int j = 0; j < 4; j++) m[tu_rand(&rng) % 200] = (uint8_t)tu_rand(&rng);
        (void)cdl__jpeg_walk(m, n, &lay);
        (void)cdl__rst_room(m, n);
    }
    free(m);
    free(jpg);
}

static void test_splice_of_damaged_rewrite_returns_nothing(void **state)
{
    (void)state;
    coordl L;
    memset(&L, 0, sizeof L);
    L.alloc.malloc_fn = cdl__default_malloc;
    L.alloc.realloc_fn = cdl__default_realloc;
    L.alloc.free_fn = cdl__default_free;
    L.cfg = cdl__config_default();
    L.cfg.max_decode_bytes = CDL_DEFAULT_MAX_DECODE_BYTES;
    cdl__worker W;
    memset(&W, 0, sizeof W);
    W.L = &L;
    W.jd.err = jpeg_std_error(&W.jerr.pub);
    W.jerr.pub.error_exit = cdl__jpeg_error_exit;
    W.jerr.pub.emit_message = cdl__jpeg_emit_message;
    jpeg_create_decompress(&W.jd);
    W.jdest.pub.init_destination = cdl__jdest_init;
    W.jdest.pub.empty_output_buffer = cdl__jdest_full;
    W.jdest.pub.term_destination = cdl__jdest_term;
    size_t n;
    uint8_t *jpg = photo_jpeg(150, 90, &n);
    cdl__jpeg_layout lay;
    int too_big;
    const size_t rn = cdl__jpeg_rewrite(&W, jpg, n, n + n / 4, 0, &lay, &too_big);
    assert_true(rn > 0);
    assert_int_equal(lay.interval, 1);
    uint8_t *rw = malloc(rn);
    memcpy(rw, W.rw, rn);
    int ox, oy;
    assert_true(cdl__jpeg_splice(&W, rw, rn, &lay, 1, 20, 100, 10, 60, &ox, &oy) > 0);
    /* a room too small: the rewrite stops at it, and says so */
    assert_int_equal(cdl__jpeg_rewrite(&W, jpg, n, n / 2, 0, &lay, &too_big), 0);
    assert_true(too_big);
    assert_true(cdl__jpeg_walk(rw, rn, &lay));
    /* row offsets pointing anywhere: 0 or a splice, never a read outside
     * (ASan); segments cut short: 0 */
    uint8_t *m = malloc(rn);
    uint64_t rng = 7;
    int refused = 0;
    for (int t = 0; t < 2000; t++) {
        memcpy(m, rw, rn);
        uint8_t *tab = m + lay.index_off + 4 + CDL_RST_HEAD;
        const uint32_t r = (uint32_t)(tu_rand(&rng) % lay.mcu_rows);
        const uint32_t off = (uint32_t)tu_rand(&rng);
        memcpy(tab + 4 * r, &off, 4);
        refused += cdl__jpeg_splice(&W, m, rn, &lay, 1, 0, 150, 0, 90, &ox, &oy) == 0;
    }
    assert_true(refused > 0);
    for (size_t cut = lay.data_off; cut < rn; cut += 97)
        assert_int_equal(cdl__jpeg_splice(&W, rw, cut, &lay, 1, 0, 150, 0, 90, &ox, &oy), 0);
    free(m);
    free(rw);
    free(jpg);
    jpeg_destroy_decompress(&W.jd);
    cdl__free(&L, W.rw);
    cdl__free(&L, W.rwidx);
    cdl__free(&L, W.splice);
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rewrite_budget_rule),
        cmocka_unit_test(test_restart_interval_divides_rows_and_follows_mcu_size),
        cmocka_unit_test(test_header_walk_refuses_damage_without_reading_outside),
        cmocka_unit_test(test_splice_of_damaged_rewrite_returns_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
