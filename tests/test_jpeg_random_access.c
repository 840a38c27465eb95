/*
 * test_jpeg_random_access.c - cached JPEGs rewritten with restart markers
 * (jpeg_random_access) give byte-identical batches, count their bytes
 * honestly against cache_bytes, never cost the cache an item, leave an item
 * whose rewrite fails as it was, and spend at most jpeg_rewrite_budget of
 * the workers' time. (That a spliced crop decodes to exactly a full
 * decode's pixels, layout by layout and scale by scale, is
 * tests/test_jpeg_exact.c.)
 */
#include "test_util.h"

#include <sys/resource.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* Photo-like pixels: a smooth scene plus noise, so files are ~1 byte/px
 * with the standard tables like real photos, and chroma varies. */
static uint8_t *photo(int w, int h, int comps, uint64_t seed)
{
    uint8_t *p = malloc((size_t)w * h * comps);
    assert_non_null(p);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
    const double fx = 3.0 + (double)(seed % 5), fy = 2.0 + (double)(seed % 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < comps; c++) {
                double v = 128 + 70 * sin((x * fx / w + c * 0.7) * 3.14159) * cos(y * fy / h * 3.14159);
                v += (double)(tu_rand(&s) % 48) - 24;
                p[((size_t)y * w + x) * comps + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    return p;
}

/* Writes an arithmetic-coded JPEG (tu_encode_jpeg has no switch for it). */
static void write_arith_jpeg(const char *path, int w, int h, uint64_t seed)
{
    uint8_t *pix = photo(w, h, 3, seed);
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long n = 0;
    jpeg_mem_dest(&c, &out, &n);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 85, TRUE);
    c.arith_code = TRUE;
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = pix + (size_t)c.next_scanline * w * 3;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    tu_write_file(path, out, n);
    free(out);
    free(pix);
}

/* A mixed dataset: mostly 4:2:0 photos of assorted sizes, and 4:2:2,
 * 4:4:4, gray, CMYK, progressive sources and one PNG among them. */
static char *make_mixed(const char *name, int n, uint64_t *bytes)
{
    char *root = tu_join(g_dir, "%s", name);
    for (int i = 0; i < n; i++) {
        const int w = 90 + (i * 37) % 170, h = 80 + (i * 53) % 150;
        tu_jpeg_opts o = {80 + i % 15, TU_SUB_420, 0, 0};
        int comps = 3;
        switch (i % 8) {
        case 1: o.subsampling = TU_SUB_422; break;
        case 2: o.subsampling = TU_SUB_444; break;
        case 3: comps = 1; break;
        case 4: comps = 4; break;
        case 5: o.progressive = 1; break;
        default: break;
        }
        uint8_t *pix = photo(w, h, comps, (uint64_t)i + 1);
        char *path = tu_join(root, "c%d/img_%03d.%s", i % 3, i, i == 6 ? "png" : "jpg");
        if (i == 6) tu_write_png(path, pix, w, h, comps);
        else tu_write_jpeg(path, pix, w, h, comps, &o);
        free(path);
        free(pix);
    }
    *bytes = tu_tree_bytes(root);
    return root;
}

typedef struct run_out {
    uint64_t hash[64];
    size_t nbatches;
    coordl_stats st;
    coordl_epoch_stats es[8];
} run_out;

static coordl_config ra_config(const char *root, uint64_t cache_bytes, int on, float budget)
{
    coordl_config cfg = tu_config(root);
    cfg.out_w = cfg.out_h = 40;
    cfg.layout = COORDL_F32_NCHW;
    cfg.batch_size = 6;
    cfg.seed = 1234;
    cfg.cache_bytes = cache_bytes;
    cfg.cache_pin = COORDL_PIN_OFF;
    cfg.jpeg_random_access = on;
    cfg.jpeg_rewrite_budget = budget;
    return cfg;
}

static void run(const coordl_config *cfg, unsigned epochs, run_out *r)
{
    memset(r, 0, sizeof *r);
    coordl *L = tu_open(cfg);
    tu_run run;
    memset(&run, 0, sizeof run);
    assert_int_equal(tu_run_epochs(L, epochs, &run), COORDL_OK);
    assert_true(run.nbatches <= 64);
    r->nbatches = run.nbatches;
    memcpy(r->hash, run.hash, run.nbatches * sizeof *run.hash);
    tu_run_free(&run);
    coordl_get_stats(L, &r->st);
    for (unsigned e = 0; e < epochs && e < 8; e++)
        assert_int_equal(coordl_get_epoch_stats(L, e, &r->es[e]), COORDL_OK);
    coordl_close(L);
}

static void run_ra(const char *root, uint64_t cache_bytes, int on, float budget, unsigned epochs, run_out *r)
{
    coordl_config cfg = ra_config(root, cache_bytes, on, budget);
    run(&cfg, epochs, r);
}

/* The same with a ring of one batch. With 6 or 24 items the default ring
 * spans epochs, so one item is prepared for two epochs at once: a lookup
 * of an item still being admitted misses by design and reads storage (23
 * hits of 24 in 1 run of 150 under load), and a rewrite finds another
 * reader and leaves the item plain for later (one of 6 arithmetic-coded
 * items collided at every epoch of a run: 5 rewrites, no failure). A
 * dataset of thousands of items never meets itself in the ring. */
static void run_ra_ring1(const char *root, uint64_t cache_bytes, int on, float budget, unsigned epochs, run_out *r)
{
    coordl_config cfg = ra_config(root, cache_bytes, on, budget);
    cfg.prefetch_batches = 1;
    run(&cfg, epochs, r);
}

static void assert_same_batches(const run_out *a, const run_out *b, const char *what)
{
    assert_int_equal(a->nbatches, b->nbatches);
    for (size_t i = 0; i < a->nbatches; i++)
        if (a->hash[i] != b->hash[i])
            fail_msg("%s: batch %zu differs from the run with jpeg_random_access = 0", what, i);
}

#define N_MIXED 24

static void test_batches_identical_with_random_access_on_and_off(void **state)
{
    (void)state;
    uint64_t bytes;
    char *root = make_mixed("mixed", N_MIXED, &bytes);
    run_out off, all, dflt, half;
    run_ra(root, 2 * bytes, 0, 0.1f, 3, &off);
    run_ra(root, 2 * bytes, 1, 1.0f, 3, &all);
    run_ra(root, 2 * bytes, 1, 0.1f, 3, &dflt);
    run_ra(root, bytes / 2, 1, 1.0f, 3, &half);
    assert_same_batches(&off, &all, "every JPEG rewritten");
    assert_same_batches(&off, &dflt, "default budget");
    assert_same_batches(&off, &half, "half the dataset cached");
    /* off: nothing rewritten, the cache holds the items as read */
    assert_int_equal(off.st.jpeg_rewrites + off.st.jpeg_spliced + off.st.jpeg_rewritten_items, 0);
    assert_int_equal(off.st.cache_bytes_used, bytes);
    assert_int_equal(off.st.cache_item_bytes, bytes);
    /* budget 1: the 23 JPEGs rewritten as first read (the PNG is not), and
     * every JPEG sample decoded from a spliced crop (rows prepared ahead
     * for a 4th epoch count too) */
    assert_int_equal(all.st.jpeg_rewrites, N_MIXED - 1);
    assert_int_equal(all.st.jpeg_rewritten_items, N_MIXED - 1);
    assert_int_equal(all.st.jpeg_rewrite_failures, 0);
    assert_true(all.st.jpeg_spliced >= 3 * (N_MIXED - 1) && all.st.jpeg_spliced < all.st.items);
    assert_true(all.st.jpeg_rewrite_ns > 0);
    /* half: only cached items can be rewritten */
    assert_true(half.st.jpeg_rewritten_items > 0);
    assert_true(half.st.jpeg_rewritten_items < half.st.cache_items);
    assert_true(half.st.jpeg_spliced < 3 * (N_MIXED - 1));
    tu_rmtree(root);
    free(root);
}

static void test_rewrite_growth_is_counted_in_cache_bytes_used(void **state)
{
    (void)state;
    uint64_t bytes;
    char *root = make_mixed("growth", N_MIXED, &bytes);
    run_out r;
    coordl_config cfg = ra_config(root, 2 * bytes, 1, 1.0f);
    /* a ring of one batch: no epoch-1 row is prepared while an epoch-0 row
     * still admits or rewrites its item (a lookup then misses, by design,
     * and reads storage: 1 run in 7 saw 23 hits with the default ring) */
    cfg.prefetch_batches = 1;
    run(&cfg, 2, &r);
    /* every item cached; the slab holds their bytes as read plus what the
     * rewrites added and the room kept for them, all in cache_bytes_used */
    assert_int_equal(r.st.cache_items, N_MIXED);
    assert_int_equal(r.st.cache_item_bytes, bytes);
    assert_true(r.st.cache_bytes_used > bytes);
    assert_true(r.st.cache_bytes_used <= bytes + bytes / 8);
    /* epoch 1 is served from the cache as it is now: the rewrites' bytes */
    assert_int_equal(r.es[1].cache_hits, N_MIXED);
    assert_int_equal(r.es[1].storage_bytes, 0);
    assert_true(r.es[1].cache_hit_bytes <= r.st.cache_bytes_used);
    print_message("  dataset %llu B, cached as rewritten %llu B (+%.1f%%), slab used %llu B (+%.1f%%)\n",
                  (unsigned long long)bytes, (unsigned long long)r.es[1].cache_hit_bytes,
                  100.0 * ((double)r.es[1].cache_hit_bytes / (double)bytes - 1),
                  (unsigned long long)r.st.cache_bytes_used,
                  100.0 * ((double)r.st.cache_bytes_used / (double)bytes - 1));
    tu_rmtree(root);
    free(root);
}

static void test_budget_of_exactly_the_dataset_still_caches_every_item(void **state)
{
    (void)state;
    uint64_t bytes;
    char *root = make_mixed("exact", N_MIXED, &bytes);
    run_out off, on;
    run_ra_ring1(root, bytes, 0, 1.0f, 3, &off);
    run_ra_ring1(root, bytes, 1, 1.0f, 3, &on);
    assert_same_batches(&off, &on, "cache_bytes = the dataset");
    /* no room is taken from items: all cached, no storage read after epoch 0 */
    assert_int_equal(on.st.cache_items, N_MIXED);
    assert_int_equal(on.st.cache_item_bytes, bytes);
    assert_true(on.st.cache_bytes_used <= bytes);
    for (int e = 1; e < 3; e++) {
        assert_int_equal(on.es[e].cache_hits, N_MIXED);
        assert_int_equal(on.es[e].storage_bytes, 0);
    }
    /* rewritten only where the rewrite fits in place (optimized tables);
     * every JPEG tried (two workers may try one item at an epoch's turn) */
    assert_true(on.st.jpeg_rewritten_items > 0);
    assert_int_equal(on.st.jpeg_rewritten_items, on.st.jpeg_rewrites);
    assert_true(on.st.jpeg_rewrites + on.st.jpeg_rewrite_failures >= N_MIXED - 1);
    tu_rmtree(root);
    free(root);
}

static void test_failed_rewrite_leaves_item_cached_as_it_was(void **state)
{
    (void)state;
    /* arithmetic-coded sources grow by 14-20% as Huffman: with no room
     * (the budget is exactly the dataset) the rewrite cannot fit */
    char *root = tu_join(g_dir, "arith");
    for (int i = 0; i < 6; i++) {
        char *path = tu_join(root, "c0/img_%d.jpg", i);
        write_arith_jpeg(path, 120 + 16 * i, 100 + 8 * i, (uint64_t)i + 11);
        free(path);
    }
    const uint64_t bytes = tu_tree_bytes(root);
    run_out off, on;
    run_ra_ring1(root, bytes, 0, 1.0f, 6, &off);
    run_ra_ring1(root, bytes, 1, 1.0f, 6, &on);
    assert_same_batches(&off, &on, "failed rewrites");
    /* tried when first read, not again (two workers may try one item at
     * an epoch's turn): 6 epochs would make 36 failures if retried */
    assert_true(on.st.jpeg_rewrite_failures >= 6 && on.st.jpeg_rewrite_failures < 12);
    assert_int_equal(on.st.jpeg_rewrites, 0);
    assert_int_equal(on.st.jpeg_rewritten_items, 0);
    assert_int_equal(on.st.jpeg_spliced, 0);
    assert_int_equal(on.st.cache_items, 6);
    assert_int_equal(on.st.cache_bytes_used, bytes);
    assert_int_equal(on.es[5].cache_hits, 6);
    assert_int_equal(on.es[5].cache_hit_bytes, bytes);
    /* with room they are rewritten, and still identical */
    run_out room;
    run_ra_ring1(root, 2 * bytes, 1, 1.0f, 6, &room);
    assert_same_batches(&off, &room, "arithmetic sources rewritten");
    assert_int_equal(room.st.jpeg_rewrites, 6);
    tu_rmtree(root);
    free(root);
}

/* Rewrites in the first epoch (whose rows are read from storage and
 * admitted), read when the consumer sees its end: prefetched rows of the
 * next epoch may count too. */
static void first_epoch(const char *root, uint64_t cache_bytes, float budget, coordl_stats *st)
{
    coordl_config cfg = ra_config(root, cache_bytes, 1, budget);
    cfg.threads = 1;
    cfg.prefetch_batches = 1;
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    coordl_status rc;
    while ((rc = coordl_next(L, &b)) == COORDL_OK) coordl_release(L, &b);
    assert_int_equal(rc, COORDL_END_OF_EPOCH);
    coordl_get_stats(L, st);
    coordl_close(L);
}

static void test_rewrite_budget_limits_the_rewrites(void **state)
{
    (void)state;
    /* alike photos, so that rewrites cost about the same */
    char *root = tu_join(g_dir, "budget");
    for (int i = 0; i < N_MIXED; i++) {
        uint8_t *pix = photo(160, 120, 3, (uint64_t)i + 3);
        char *path = tu_join(root, "c0/img_%02d.jpg", i);
        tu_jpeg_opts o = {85, TU_SUB_420, 0, 0};
        tu_write_jpeg(path, pix, 160, 120, 3, &o);
        free(path);
        free(pix);
    }
    const uint64_t bytes = tu_tree_bytes(root);
    coordl_stats none, tenth, all;
    first_epoch(root, 2 * bytes, 0.0f, &none);
    first_epoch(root, 2 * bytes, 0.1f, &tenth);
    first_epoch(root, 2 * bytes, 1.0f, &all);
    /* rewrites in idle time (the ring full) are free: not counted here */
    const uint64_t n0 = none.jpeg_rewrites - none.jpeg_rewrites_idle;
    const uint64_t n1 = tenth.jpeg_rewrites - tenth.jpeg_rewrites_idle;
    const uint64_t n2 = all.jpeg_rewrites - all.jpeg_rewrites_idle;
    print_message("  first epoch, rewrites while preparing: budget 0: %llu, 0.1: %llu, 1: %llu "
                  "(and in idle time: %llu, %llu, %llu)\n", (unsigned long long)n0, (unsigned long long)n1,
                  (unsigned long long)n2, (unsigned long long)none.jpeg_rewrites_idle,
                  (unsigned long long)tenth.jpeg_rewrites_idle, (unsigned long long)all.jpeg_rewrites_idle);
    assert_int_equal(n0, 0);          /* 0: never while preparing */
    assert_true(n2 >= N_MIXED - all.jpeg_rewrites_idle); /* 1: each one not done idle, as first read */
    /* 0.1: some, not all (the rule itself, with the time the rewrites
     * save, is checked white-box in tests/test_jpeg_internals.c) */
    assert_true(n1 >= 1 || n1 + tenth.jpeg_rewrites_idle >= N_MIXED); /* unless idle time did them all */
    tu_rmtree(root);
    free(root);
}

static void test_idle_workers_rewrite_the_cache(void **state)
{
    (void)state;
    /* a trainer-bound run: budget 0 (no rewrite during prep), and the
     * consumer pauses after each batch, so the ring fills and the workers
     * would idle: they rewrite the cached JPEGs meanwhile */
    uint64_t bytes;
    char *root = make_mixed("idle", N_MIXED, &bytes);
    run_out off;
    run_ra(root, 2 * bytes, 0, 0.0f, 3, &off);
    coordl_config cfg = ra_config(root, 2 * bytes, 1, 0.0f);
    coordl *L = tu_open(&cfg);
    run_out on;
    memset(&on, 0, sizeof on);
    unsigned ends = 0;
    while (ends < 3) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) {
            ends++;
            continue;
        }
        assert_int_equal(rc, COORDL_OK);
        assert_true(on.nbatches < 64);
        on.hash[on.nbatches++] = tu_batch_hash(&b);
        coordl_release(L, &b);
        struct timespec pause = {0, 20 * 1000 * 1000}; /* the trainer's step */
        nanosleep(&pause, NULL);
    }
    /* and while the trainer would compute on: the rest of the cache */
    coordl_stats st;
    for (int k = 0; k < 500; k++) {
        coordl_get_stats(L, &st);
        /* a worker counts its rewrite after the entry turned rewritten */
        if (st.jpeg_rewritten_items == N_MIXED - 1 && st.jpeg_rewrites >= N_MIXED - 1) break;
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    coordl_close(L);
    assert_same_batches(&off, &on, "rewritten while idle");
    assert_int_equal(st.jpeg_rewritten_items, N_MIXED - 1); /* every JPEG */
    assert_true(st.jpeg_rewrites >= N_MIXED - 1);
    assert_int_equal(st.jpeg_rewrites_idle, st.jpeg_rewrites); /* all in idle time */
    assert_true(st.jpeg_spliced > 0);
    tu_rmtree(root);
    free(root);
}

static double process_cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* Idle workers convert the cache and then sleep: after one epoch with the
 * whole set cached and a rewrite budget of 0, with the trainer idle (the
 * ring full), once every cached JPEG is rewritten or given up the process
 * uses under 5% of one core. Before the fix two idle workers could land on
 * the same last plain entry, each refusing the other's rewrite while
 * reporting work found, and spin both cores for as long as the trainer
 * idled (2-3 s of CPU every 3 s). */
static void test_idle_workers_sleep_once_the_cache_is_converted(void **state)
{
    (void)state;
    uint64_t bytes;
    char *root = make_mixed("sleep", N_MIXED, &bytes);
    coordl_config cfg = ra_config(root, 2 * bytes, 1, 0.0f);
    cfg.threads = 2;
    cfg.prefetch_batches = 2;
    coordl *L = tu_open(&cfg);
    for (;;) { /* one epoch at full speed: budget 0, nothing rewritten on the way */
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) break;
        assert_int_equal(rc, COORDL_OK);
        coordl_release(L, &b);
    }
    /* the trainer idles: the workers fill the ring, then convert the cache;
     * settled once the counts stay put for half a second */
    coordl_stats st;
    uint64_t last = UINT64_MAX;
    int still = 0;
    for (int k = 0; k < 400 && still < 10; k++) {
        struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
        coordl_get_stats(L, &st);
        const uint64_t now = st.jpeg_rewritten_items * 1000003u + st.jpeg_rewrite_failures;
        still = now == last ? still + 1 : 0;
        last = now;
    }
    const double cpu0 = process_cpu_seconds();
    struct timespec second = {1, 0};
    nanosleep(&second, NULL);
    const double cpu = process_cpu_seconds() - cpu0;
    coordl_get_stats(L, &st);
    coordl_close(L);
    print_message("idle, cache converted (%llu rewritten, %llu given up): %.1f ms of CPU in 1 s\n",
                  (unsigned long long)st.jpeg_rewritten_items, (unsigned long long)st.jpeg_rewrite_failures,
                  cpu * 1e3);
    /* 4:2:0, 4:2:2, 4:4:4 and grey photos convert; CMYK and progressive
     * sources may be kept as they are */
    assert_true(st.jpeg_rewritten_items >= N_MIXED / 2);
    if (cpu >= 0.05)
        fail_msg("the idle loader used %.0f ms of CPU in 1 s (at most 50: 5%% of one core)", cpu * 1e3);
    tu_rmtree(root);
    free(root);
}

/* ---- files whose every path must agree (issue 22) ---------------------- */

/* A JPEG with component 0 sampled hs x vs (the others 1 x 1; grey: its
 * one component), optionally progressive and missing its last scans, or
 * with its entropy data cut at cut_per_mille of the scan and an EOI after. */
static void write_odd_jpeg(const char *path, int w, int h, int comps, int hs, int vs, int progressive,
                           int missing_scans, int cut_per_mille, uint64_t seed)
{
    uint8_t *pix = photo(w, h, comps, seed);
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long n = 0;
    jpeg_mem_dest(&c, &out, &n);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = comps == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 85, TRUE);
    c.comp_info[0].h_samp_factor = hs;
    c.comp_info[0].v_samp_factor = vs;
    if (progressive) jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = pix + (size_t)c.next_scanline * w * comps;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    size_t len = n;
    if (missing_scans || cut_per_mille) {
        int k = missing_scans ? missing_scans : 1;
        size_t at = n - 2;
        while (at > 2 && !(out[at] == 0xFF && out[at + 1] == 0xDA && --k == 0)) at--;
        assert_true(at > 2);
        if (cut_per_mille) at += (n - at) * (size_t)cut_per_mille / 1000;
        out[at] = 0xFF;
        out[at + 1] = 0xD9;
        len = at + 2;
    }
    tu_write_file(path, out, len);
    free(out);
    free(pix);
}

/* Layouts libjpeg's ROI crop is not exact for at some scales, files that
 * end early, and small progressive files: 3 of each, sizes such that the
 * crops land at DCT scales 1/1 .. 1/4. */
#define N_ODD 45
static char *make_odd(const char *name, uint64_t *bytes)
{
    static const struct { int comps, hs, vs, progressive, missing, cut; } kinds[] = {
        {3, 4, 2, 0, 0, 0}, {3, 2, 4, 0, 0, 0}, {3, 1, 4, 0, 0, 0}, {3, 3, 1, 0, 0, 0}, {3, 3, 2, 0, 0, 0},
        {1, 2, 2, 0, 0, 0}, {1, 4, 1, 0, 0, 0}, {3, 4, 2, 1, 0, 0},
        {3, 2, 2, 0, 0, 700}, {3, 1, 1, 0, 0, 950}, /* entropy data that ends early */
        {3, 2, 2, 1, 1, 0}, {3, 2, 1, 1, 4, 0},       /* progressive, scans missing */
        {3, 2, 2, 1, 1, 500},                          /* ... and the last one cut */
        {3, 2, 2, 1, 0, 0}, {1, 1, 1, 1, 0, 0},       /* small progressive (below) */
    };
    char *root = tu_join(g_dir, "%s", name);
    for (int i = 0; i < N_ODD; i++) {
        const int k = i / 3;
        int w = 100 + (i * 37) % 110, h = 90 + (i * 53) % 100;
        if (k >= 13) w = 8 + 9 * (i % 3), h = 8 + 5 * (i % 3); /* small */
        char *path = tu_join(root, "c%d/img_%03d.jpg", i % 2, i);
        write_odd_jpeg(path, w, h, kinds[k].comps, kinds[k].hs, kinds[k].vs, kinds[k].progressive, kinds[k].missing,
                       kinds[k].cut, (uint64_t)i + 5);
        free(path);
    }
    *bytes = tu_tree_bytes(root);
    return root;
}

typedef struct status_run {
    coordl_status rc[128];
    uint64_t hash[128];
    size_t n, bad;
    coordl_stats st;
} status_run;

/* Epochs as a trainer that keeps going over bad samples sees them: each
 * batch's status, and the hash of each good one. */
static void run_statuses(const coordl_config *cfg, unsigned epochs, status_run *r)
{
    memset(r, 0, sizeof *r);
    coordl *L = tu_open(cfg);
    for (unsigned ends = 0; ends < epochs;) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) {
            ends++;
            continue;
        }
        assert_true(r->n < 128);
        if (rc != COORDL_OK && rc != COORDL_ERR_CORRUPT) fail_msg("coordl_next = %d: %s", (int)rc, coordl_errmsg(L));
        r->rc[r->n] = rc;
        r->bad += rc != COORDL_OK;
        if (rc == COORDL_OK) {
            r->hash[r->n] = tu_batch_hash(&b);
            coordl_release(L, &b);
        }
        r->n++;
    }
    coordl_get_stats(L, &r->st);
    coordl_close(L);
}

static void assert_same_statuses(const status_run *ref, const status_run *r, const char *what)
{
    assert_int_equal(ref->n, r->n);
    size_t rows_differ = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (ref->rc[i] != r->rc[i])
            fail_msg("%s: batch %zu has status %d, with no cache and random access off %d", what, i, (int)r->rc[i],
                     (int)ref->rc[i]);
        rows_differ += ref->hash[i] != r->hash[i];
    }
    if (rows_differ)
        fail_msg("%s: %zu of %zu batches differ from the run with no cache and random access off", what,
                 rows_differ, r->n);
}

/* The determinism contract over the files issue 22 found breaking it: for
 * every file the plain decoder accepts, a rewrite decodes to the same
 * pixels, and a file it cannot reproduce exactly is not rewritten; a bad
 * sample is bad in every run. Before the fix 4x2 and 2x4 sources differed
 * at DCT scale 1/2 and 1/4 (libjpeg's ROI crop), and progressive files
 * missing scans differed wherever they were rewritten (block smoothing). */
static void test_odd_files_give_the_same_batches_whatever_the_cache(void **state)
{
    (void)state;
    uint64_t bytes;
    char *root = make_odd("odd", &bytes);
    coordl_config cfg = ra_config(root, 0, 0, 0.08f);
    cfg.batch_size = 4;
    cfg.scale_min = 0.25f;
    cfg.out_w = cfg.out_h = 24;
    cfg.layout = COORDL_U8_NHWC;
    status_run ref, r;
    run_statuses(&cfg, 3, &ref);
    /* a sample that reaches the damage is bad, one that stops above it good */
    assert_true(ref.bad > 0 && ref.bad < ref.n);
    cfg.cache_bytes = 2 * bytes;
    run_statuses(&cfg, 3, &r);
    assert_same_statuses(&ref, &r, "cached, random access off");
    cfg.jpeg_random_access = 1;
    run_statuses(&cfg, 3, &r);
    assert_same_statuses(&ref, &r, "cached, random access on, default budget");
    cfg.jpeg_rewrite_budget = 1.0f;
    cfg.prefetch_batches = 1;
    run_statuses(&cfg, 3, &r);
    assert_same_statuses(&ref, &r, "cached, random access on, budget 1");
    /* the layouts were rewritten and spliced; the damaged files were not
     * rewritten (libjpeg warned reading them) */
    print_message("  budget 1: %llu rewrites, %llu given up, %llu of %llu samples spliced\n",
                  (unsigned long long)r.st.jpeg_rewrites, (unsigned long long)r.st.jpeg_rewrite_failures,
                  (unsigned long long)r.st.jpeg_spliced, (unsigned long long)r.st.items);
    assert_true(r.st.jpeg_rewritten_items >= 3 * 8);
    assert_true(r.st.jpeg_rewrite_failures >= 3 * 3);
    assert_true(r.st.jpeg_spliced > 2 * 3 * 8);
    tu_rmtree(root);
    free(root);
}

/* A grey JPEG whose DC values drift past what a baseline file can hold
 * (|DC| > 1023 for 8 bits) while every difference the file codes stays
 * legal: row r of blocks gets DC 1100 x (1, 2, 3, 2, 1, 2, 3, ...), so
 * each row's first block differs from the one before by 1,100 (an 11-bit
 * category, in the standard table). The rest of the coefficients are a
 * photo's at quality 100. A rewrite with a restart marker per row codes
 * 2,200 and 3,300 from a fresh predictor: 12 bits, a category the
 * standard DC table has no code for (what CI's fuzz_random_access found
 * in a 50x50 grey file). */
static void write_drifting_dc_jpeg(const char *path, int w, int h, uint64_t seed)
{
    uint8_t *pix = photo(w, h, 1, seed);
    const tu_jpeg_opts q100 = {100, TU_SUB_444, 0, 0};
    size_t n;
    uint8_t *out = tu_encode_jpeg(pix, w, h, 1, &q100, &n);
    free(pix);

    /* its coefficients, with the DC values replaced */
    struct jpeg_decompress_struct d;
    struct jpeg_error_mgr derr;
    d.err = jpeg_std_error(&derr);
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, out, n);
    assert_int_equal(jpeg_read_header(&d, TRUE), JPEG_HEADER_OK);
    jvirt_barray_ptr *coefs = jpeg_read_coefficients(&d);
    assert_non_null(coefs);
    const jpeg_component_info *ci = &d.comp_info[0];
    static const int steps[4] = {1, 2, 3, 2};
    for (JDIMENSION r = 0; r < ci->height_in_blocks; r++) {
        JBLOCKARRAY row = (*d.mem->access_virt_barray)((j_common_ptr)&d, coefs[0], r, 1, TRUE);
        for (JDIMENSION b = 0; b < ci->width_in_blocks; b++) row[0][b][0] = (JCOEF)(1100 * steps[r % 4]);
    }
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *drifted = NULL;
    unsigned long dn = 0;
    jpeg_mem_dest(&c, &drifted, &dn);
    jpeg_copy_critical_parameters(&d, &c);
    c.optimize_coding = FALSE; /* the standard tables, as the source had */
    jpeg_write_coefficients(&c, coefs);
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    free(out);
    tu_write_file(path, drifted, dn);
    free(drifted);
}

/* The determinism contract over coefficients a rewrite cannot code: such
 * a file decodes (libjpeg keeps the drifted DC values and clamps their
 * pixels), so it is a good sample in every run, and it is left as it is
 * rather than rewritten into other pixels. Before the fix its rewrite
 * coded the out-of-range differences with no Huffman code and the cached
 * runs' batches differed from the reference's. */
static void test_coefficients_a_rewrite_cannot_code_are_not_rewritten(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "drift");
    for (int i = 0; i < 8; i++) {
        char *path = tu_join(root, "c%d/img_%02d.jpg", i % 2, i);
        write_drifting_dc_jpeg(path, 16 + 8 * (i % 3), 96 + 16 * (i % 2), (uint64_t)i + 11);
        free(path);
    }
    const uint64_t bytes = tu_tree_bytes(root);
    coordl_config cfg = ra_config(root, 0, 0, 1.0f);
    cfg.batch_size = 4;
    cfg.scale_min = 0.5f;
    cfg.out_w = cfg.out_h = 16;
    cfg.layout = COORDL_U8_NHWC;
    cfg.prefetch_batches = 1;
    status_run ref, r;
    run_statuses(&cfg, 3, &ref);
    assert_int_equal(ref.bad, 0);
    cfg.cache_bytes = 2 * bytes;
    cfg.jpeg_random_access = 1;
    run_statuses(&cfg, 3, &r);
    assert_same_statuses(&ref, &r, "drifting DC, cached, random access on, budget 1");
    assert_int_equal(r.st.jpeg_rewritten_items, 0);
    assert_true(r.st.jpeg_rewrite_failures >= 8);
    tu_rmtree(root);
    free(root);
}

static void test_random_access_settings_are_validated(void **state)
{
    (void)state;
    coordl_config cfg = coordl_config_default();
    assert_int_equal(cfg.jpeg_random_access, 1);
    assert_true(cfg.jpeg_rewrite_budget > 0.079f && cfg.jpeg_rewrite_budget < 0.081f);
    char *root = tu_join(g_dir, "validate");
    tu_folder_spec spec = {1, 2, 16, 16, 0, TU_PAT_SOLID, TU_FMT_JPEG, 90, 1};
    tu_make_image_folder(root, &spec);
    const struct { int on; float budget; } bad[] = {{2, 0.1f}, {-1, 0.1f}, {1, -0.01f}, {1, 1.5f}, {1, NAN}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        coordl_config c = ra_config(root, 0, bad[i].on, bad[i].budget);
        coordl *L = NULL;
        assert_int_equal(coordl_open(&c, &L), COORDL_ERR_INVALID);
        assert_null(L);
        assert_non_null(strstr(coordl_errmsg(NULL), "jpeg_"));
    }
    tu_rmtree(root);
    free(root);
}

int main(void)
{
    tu_main_init(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batches_identical_with_random_access_on_and_off),
        cmocka_unit_test(test_rewrite_growth_is_counted_in_cache_bytes_used),
        cmocka_unit_test(test_budget_of_exactly_the_dataset_still_caches_every_item),
        cmocka_unit_test(test_failed_rewrite_leaves_item_cached_as_it_was),
        cmocka_unit_test(test_rewrite_budget_limits_the_rewrites),
        cmocka_unit_test(test_idle_workers_rewrite_the_cache),
        cmocka_unit_test(test_idle_workers_sleep_once_the_cache_is_converted),
        cmocka_unit_test(test_odd_files_give_the_same_batches_whatever_the_cache),
        cmocka_unit_test(test_coefficients_a_rewrite_cannot_code_are_not_rewritten),
        cmocka_unit_test(test_random_access_settings_are_validated),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
