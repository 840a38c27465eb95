/*
 * test_decode_limits.c - what coordl decodes, and within which bounds
 * (issue #12):
 *   - an image whose header gives a zero (or absurd) size is a bad sample,
 *     in both image pipelines and in coordl_sample_transform;
 *   - only JPEG, PNG, BMP, binary PPM/PGM and TGA are decoded: a GIF named
 *     .png, a PSD, a WebP ... is COORDL_ERR_UNSUPPORTED naming the format
 *     (substituted and counted under COORDL_BAD_SUBSTITUTE);
 *   - the memory of one decode is bounded by max_decode_bytes: a small
 *     progressive JPEG declaring 10000 x 10000 and a PNG zlib bomb are
 *     refused before the decoder allocates, stb_image's allocations go
 *     through the allocator hooks and stop at the limit, and a JPEG with
 *     more scans than anyone writes is refused;
 *   - a damaged JPEG that still decodes prints nothing on the process's
 *     stderr (libjpeg's warnings), in the workers and in
 *     coordl_sample_transform;
 *   - audio converts only the window the crop keeps: a 40 KB WAV at 1 Hz
 *     resampled to 16 kHz costs one crop, and the source samples a crop
 *     reads are bounded by max_audio_samples.
 * Every hostile file is made here (tests/hostile.h): no blobs.
 */
#include "test_util.h"
#include "hostile.h"

#include <jpeglib.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static char *g_dir;
static int g_serial;

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

/* ---- a small ImageFolder with one hostile item ------------------------- */

#define N_ITEMS 8
#define BATCH 2
#define VICTIM 5
static const tu_folder_spec SPEC = {1, N_ITEMS, 20, 20, 0, TU_PAT_TEXTURED,
                                    TU_FMT_JPEG, 90, 3};

typedef struct {
    char *root;
    char *victim;
    const char *name;
} tree;

static tree make_tree(const uint8_t *bytes, size_t n)
{
    tree t;
    t.root = tu_join(g_dir, "t%d", g_serial++);
    tu_make_image_folder(t.root, &SPEC);
    t.victim = tu_folder_file(t.root, &SPEC, 0, VICTIM);
    t.name = strrchr(t.victim, '/') + 1;
    tu_write_file(t.victim, bytes, n);
    return t;
}

static void free_tree(tree *t)
{
    tu_rmtree(t->root);
    free(t->root);
    free(t->victim);
}

static coordl_config tree_config(const tree *t, coordl_pipeline pipe, int policy)
{
    coordl_config cfg = tu_config(t->root);
    cfg.pipeline = pipe;
    cfg.batch_size = BATCH;
    cfg.shuffle = 0;
    cfg.on_bad_sample = policy;
    cfg.out_w = cfg.out_h = 12;
    return cfg;
}

/* One epoch under COORDL_BAD_FAIL: the victim's batch fails with `expect`
 * and a message holding the file's name and `why`; the others are full. */
static void expect_batch_fails(const tree *t, coordl_pipeline pipe, coordl_status expect, const char *why)
{
    coordl_config cfg = tree_config(t, pipe, COORDL_BAD_FAIL);
    coordl *L = tu_open(&cfg);
    for (uint64_t i = 0; i < N_ITEMS / BATCH; i++) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (i == VICTIM / BATCH) {
            if (rc != expect)
                fail_msg("%s pipeline %d: status %d (%s): %s; expected %d", t->name, (int)pipe, (int)rc,
                         coordl_strerror(rc), coordl_errmsg(L), (int)expect);
            const char *msg = coordl_errmsg(L);
            if (!strstr(msg, t->name) || !strstr(msg, why))
                fail_msg("\"%s\" does not name %s and \"%s\"", msg, t->name, why);
            continue;
        }
        if (rc != COORDL_OK)
            fail_msg("batch %llu: status %d: %s", (unsigned long long)i, (int)rc, coordl_errmsg(L));
        assert_int_equal(b.n, BATCH);
        coordl_release(L, &b);
    }
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    coordl_close(L);
}

/* Two epochs under COORDL_BAD_SUBSTITUTE: every batch full, the victim
 * never used, one bad sample per epoch. */
static void expect_substituted(const tree *t, coordl_pipeline pipe)
{
    coordl_config cfg = tree_config(t, pipe, COORDL_BAD_SUBSTITUTE);
    cfg.shuffle = 1;
    coordl *L = tu_open(&cfg);
    tu_run run = {0};
    coordl_status rc = tu_run_epochs(L, 2, &run);
    if (rc != COORDL_OK)
        fail_msg("substitute run: %d: %s", (int)rc, coordl_errmsg(L));
    assert_int_equal(run.nrows, 2 * N_ITEMS);
    for (size_t i = 0; i < run.nrows; i++)
        assert_int_not_equal(run.ids[i], VICTIM);
    for (uint64_t e = 0; e < 2; e++) {
        coordl_epoch_stats es;
        assert_int_equal(coordl_get_epoch_stats(L, e, &es), COORDL_OK);
        assert_int_equal(es.bad_samples, 1);
    }
    tu_run_free(&run);
    coordl_close(L);
}

static void expect_transform_refused(const tree *t, coordl_status expect)
{
    coordl_config cfg = tree_config(t, COORDL_PIPE_TRAIN, COORDL_BAD_FAIL);
    coordl *L = tu_open(&cfg);
    coordl_transform tr;
    coordl_status rc = coordl_sample_transform(L, 0, VICTIM, &tr);
    if (rc != expect)
        fail_msg("coordl_sample_transform(%s) = %d, expected %d", t->name, (int)rc, (int)expect);
    coordl_close(L);
}

/* ---- zero-sized images ------------------------------------------------- */

static void check_zero_sized(uint8_t *bytes, size_t n, const char *why)
{
    assert_non_null(bytes);
    tree t = make_tree(bytes, n);
    free(bytes);
    expect_batch_fails(&t, COORDL_PIPE_TRAIN, COORDL_ERR_CORRUPT, why);
    expect_batch_fails(&t, COORDL_PIPE_EVAL, COORDL_ERR_CORRUPT, why);
    expect_substituted(&t, COORDL_PIPE_TRAIN);
    expect_transform_refused(&t, COORDL_ERR_CORRUPT);
    free_tree(&t);
}

static void test_zero_width_bmp_is_corrupt_not_read_out_of_bounds(void **state)
{
    (void)state;
    size_t n;
    uint8_t *bmp = hostile_bmp(0, 16, 3 * 16 * 16, &n);
    check_zero_sized(bmp, n, "0x16");
}

static void test_zero_height_bmp_is_corrupt(void **state)
{
    (void)state;
    size_t n;
    uint8_t *bmp = hostile_bmp(16, 0, 3 * 16 * 16, &n);
    check_zero_sized(bmp, n, "16x0");
}

static void test_zero_sized_ppm_and_tga_are_corrupt(void **state)
{
    (void)state;
    size_t n;
    uint8_t *p = hostile_ppm(0, 16, 64, &n);
    tree t = make_tree(p, n);
    free(p);
    expect_batch_fails(&t, COORDL_PIPE_EVAL, COORDL_ERR_CORRUPT, "");
    free_tree(&t);
    p = hostile_tga(16, 0, 64, &n);
    t = make_tree(p, n);
    free(p);
    expect_batch_fails(&t, COORDL_PIPE_EVAL, COORDL_ERR_CORRUPT, "");
    free_tree(&t);
}

/* ---- formats ------------------------------------------------------------ */

static void test_gif_named_png_is_unsupported_not_decoded(void **state)
{
    (void)state;
    size_t n;
    uint8_t *gif = hostile_gif_1x1(&n);
    tree t = make_tree(gif, n);
    free(gif);
    expect_batch_fails(&t, COORDL_PIPE_TRAIN, COORDL_ERR_UNSUPPORTED, "GIF");
    expect_substituted(&t, COORDL_PIPE_TRAIN);
    expect_transform_refused(&t, COORDL_ERR_UNSUPPORTED);
    free_tree(&t);
}

static void test_other_known_formats_are_unsupported_by_name(void **state)
{
    (void)state;
    static const struct {
        const char *bytes;
        size_t n;
        const char *name;
    } cases[] = {
        {"8BPS\0\1\0\0\0\0\0\0\0\3\0\0\0\20\0\0\0\20\0\10\0\3", 26, "PSD"},
        {"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 16 +X 16\n", 47, "HDR"},
        {"RIFF\x40\0\0\0WEBPVP8 ", 16, "WebP"},
        {"II*\0\x08\0\0\0", 8, "TIFF"},
        {"MM\0*\0\0\0\x08", 8, "TIFF"},
        {"P3\n2 2\n255\n0 0 0 1 1 1 2 2 2 3 3 3\n", 35, "netpbm"},
        {"\0\0\0\x0cjP  \r\n\x87\n", 12, "JPEG 2000"},
        {"\0\0\0\x1c" "ftypavif", 12, "HEIF/AVIF"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tree t = make_tree((const uint8_t *)cases[i].bytes, cases[i].n);
        expect_batch_fails(&t, COORDL_PIPE_EVAL, COORDL_ERR_UNSUPPORTED, cases[i].name);
        free_tree(&t);
    }
}

/* ---- memory ------------------------------------------------------------- */

/* Peak resident memory of a child that opens the tree and reads one epoch
 * (its status checked as above), minus the peak before the first batch.
 * Under AddressSanitizer RSS says little (shadow memory, quarantine): the
 * caller skips the measure there. */
#if defined(__SANITIZE_ADDRESS__)
#define TU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif

#ifndef TU_ASAN
typedef struct {
    const tree *t;
    coordl_config cfg;
    const char *why;
} rss_case;

static long child_rss_growth_kb(const rss_case *c)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(0);
        close(fds[0]);
        coordl *L = NULL;
        if (coordl_open(&c->cfg, &L) != COORDL_OK)
            _exit(2);
        struct rusage before, after;
        getrusage(RUSAGE_SELF, &before);
        int ok = 1;
        for (uint64_t i = 0; i < N_ITEMS / BATCH; i++) {
            coordl_batch b;
            coordl_status rc = coordl_next(L, &b);
            if (i == VICTIM / BATCH)
                ok &= rc == COORDL_ERR_CORRUPT && strstr(coordl_errmsg(L), c->why) != NULL;
            else if (rc == COORDL_OK)
                coordl_release(L, &b);
            else
                ok = 0;
        }
        if (!ok)
            fprintf(stderr, "child: %s\n", coordl_errmsg(L));
        coordl_close(L);
        getrusage(RUSAGE_SELF, &after);
        long grow = after.ru_maxrss - before.ru_maxrss;
        ssize_t w = write(fds[1], &grow, sizeof grow);
        (void)w;
        _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    long grow = -1;
    ssize_t r = read(fds[0], &grow, sizeof grow);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || r != (ssize_t)sizeof grow)
        fail_msg("child: status 0x%x (see its message above)", status);
    return grow;
}
#endif

static void check_rss_bound(const tree *t, const char *why, long max_kb)
{
#ifdef TU_ASAN
    (void)t; (void)why; (void)max_kb;
    printf("    (peak-RSS bound not measured under AddressSanitizer: its shadow memory and quarantine "
           "swamp the figure; the status and message are checked above)\n");
#else
    rss_case c = {t, tree_config(t, COORDL_PIPE_TRAIN, COORDL_BAD_FAIL), why};
    c.cfg.threads = 1;
    long grow = child_rss_growth_kb(&c);
    printf("    peak RSS grew by %ld KiB over the epoch (bound %ld KiB)\n", grow, max_kb);
    if (grow > max_kb)
        fail_msg("peak RSS grew by %ld KiB decoding %s; bound %ld KiB", grow, t->name, max_kb);
#endif
}

/* 16 x 16 progressive JPEG whose SOF now says 10000 x 10000 (4:2:0): the
 * coefficient arrays would take 300 MB, over the 256 MiB default. */
static void test_tiny_progressive_jpeg_declaring_10000x10000_refused_before_allocating(void **state)
{
    (void)state;
    uint8_t *pix = tu_textured_rgb(16, 16, (const uint8_t[3]){90, 120, 150}, 1);
    tu_jpeg_opts o = {90, TU_SUB_420, 1, 0};
    size_t n;
    uint8_t *jpg = tu_encode_jpeg(pix, 16, 16, 3, &o, &n);
    free(pix);
    assert_true(hostile_jpeg_set_size(jpg, n, 10000, 10000));
    assert_true(n < 2000);
    tree t = make_tree(jpg, n);
    free(jpg);
    expect_batch_fails(&t, COORDL_PIPE_TRAIN, COORDL_ERR_CORRUPT, "max_decode_bytes");
    expect_batch_fails(&t, COORDL_PIPE_EVAL, COORDL_ERR_CORRUPT, "max_decode_bytes");
    check_rss_bound(&t, "max_decode_bytes", 64 * 1024);
    free_tree(&t);
}

/* A 10000 x 10000 black PNG in a 1.9 MB file: 300 MB of pixels, over the
 * default, refused from its header. */
static void test_png_zlib_bomb_refused_from_its_header(void **state)
{
    (void)state;
    size_t n;
    uint8_t *png = hostile_png_zero_bomb(10000, 10000, &n);
    assert_non_null(png);
    tree t = make_tree(png, n);
    free(png);
    expect_batch_fails(&t, COORDL_PIPE_TRAIN, COORDL_ERR_CORRUPT, "max_decode_bytes");
    check_rss_bound(&t, "max_decode_bytes", 64 * 1024);
    free_tree(&t);
}

/* ---- stb_image's allocations through the hooks ------------------------- */

typedef struct {
    pthread_mutex_t mu;
    size_t live, peak, largest;
    size_t calls;
} counting;

typedef union {
    size_t size;
    max_align_t align;
} counting_head;

static void *count_malloc(void *u, size_t n)
{
    counting *c = u;
    counting_head *h = malloc(sizeof *h + n);
    if (!h)
        return NULL;
    h->size = n;
    pthread_mutex_lock(&c->mu);
    c->live += n;
    c->calls++;
    if (c->live > c->peak)
        c->peak = c->live;
    if (n > c->largest)
        c->largest = n;
    pthread_mutex_unlock(&c->mu);
    return h + 1;
}

static void count_free(void *u, void *p)
{
    counting *c = u;
    if (!p)
        return;
    counting_head *h = (counting_head *)p - 1;
    pthread_mutex_lock(&c->mu);
    c->live -= h->size;
    pthread_mutex_unlock(&c->mu);
    free(h);
}

static void *count_realloc(void *u, void *p, size_t n)
{
    if (!p)
        return count_malloc(u, n);
    counting *c = u;
    counting_head *h = (counting_head *)p - 1;
    size_t old = h->size;
    counting_head *nh = realloc(h, sizeof *nh + n);
    if (!nh)
        return NULL;
    nh->size = n;
    pthread_mutex_lock(&c->mu);
    c->live = c->live - old + n;
    c->calls++;
    if (c->live > c->peak)
        c->peak = c->live;
    if (n > c->largest)
        c->largest = n;
    pthread_mutex_unlock(&c->mu);
    return nh + 1;
}

static void use_counting(coordl_config *cfg, counting *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    cfg->allocator.malloc_fn = count_malloc;
    cfg->allocator.realloc_fn = count_realloc;
    cfg->allocator.free_fn = count_free;
    cfg->allocator.user = c;
}

static void test_stb_allocations_go_through_the_allocator_hooks(void **state)
{
    (void)state;
    /* one 400 x 300 solid PNG: a small file, but stb's output alone is
     * 360,000 bytes; the crop keeps a few rows, so coordl's own buffers
     * (the read buffer, the crop's rows) stay far smaller */
    char *root = tu_join(g_dir, "hooks");
    char *path = tu_join(root, "k/a.png");
    uint8_t *pix = tu_solid(400, 300, 3, (const uint8_t[3]){10, 200, 30});
    tu_write_png(path, pix, 400, 300, 3);
    free(pix);
    assert_true(tu_file_size(path) < 65536);
    coordl_config cfg = tu_config(root);
    cfg.batch_size = 1;
    cfg.out_w = cfg.out_h = 8;
    cfg.scale_min = cfg.scale_max = 0.01f;
    counting c;
    use_counting(&cfg, &c);
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    coordl_release(L, &b);
    coordl_close(L);
    printf("    hooks: %zu calls, largest block %zu bytes, %zu live after close\n", c.calls, c.largest, c.live);
    if (c.largest < 400 * 300 * 3)
        fail_msg("the hooks never saw stb's %d-byte output (largest block %zu)", 400 * 300 * 3, c.largest);
    assert_int_equal(c.live, 0); /* every block came back through free_fn */
    pthread_mutex_destroy(&c.mu);
    free(path);
    free(root);
}

/* A 2000 x 2000 bomb under a 16 MiB limit: its 12 MB of pixels pass the
 * header check, stb inflates 12 MB, and its output buffer is refused. */
static void test_stb_stops_at_max_decode_bytes(void **state)
{
    (void)state;
    size_t n;
    uint8_t *png = hostile_png_zero_bomb(2000, 2000, &n);
    tree t = make_tree(png, n);
    free(png);
    coordl_config cfg = tree_config(&t, COORDL_PIPE_TRAIN, COORDL_BAD_FAIL);
    cfg.max_decode_bytes = 16u << 20;
    cfg.threads = 1;
    counting c;
    use_counting(&cfg, &c);
    coordl *L = tu_open(&cfg);
    size_t base = c.live;
    for (uint64_t i = 0; i < N_ITEMS / BATCH; i++) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (i == VICTIM / BATCH) {
            assert_int_equal(rc, COORDL_ERR_CORRUPT);
            if (!strstr(coordl_errmsg(L), "max_decode_bytes (16777216)") || !strstr(coordl_errmsg(L), t.name))
                fail_msg("\"%s\"", coordl_errmsg(L));
            continue;
        }
        assert_int_equal(rc, COORDL_OK);
        coordl_release(L, &b);
    }
    coordl_close(L);
    printf("    peak through the hooks: %zu bytes over the %zu after open\n", c.peak - base, base);
    /* stb's blocks within the limit, plus coordl's small scratch and a
     * read buffer of one item */
    assert_true(c.peak - base <= (16u << 20) + (2u << 20));
    pthread_mutex_destroy(&c.mu);
    free_tree(&t);
}

/* The same 256 x 256 picture: baseline decodes under a limit that the
 * progressive file's coefficient arrays (256 x 256 x 3 x 2 bytes) pass. */
static void test_progressive_coefficients_count_in_the_limit(void **state)
{
    (void)state;
    uint8_t *pix = tu_textured_rgb(256, 256, (const uint8_t[3]){90, 120, 150}, 2);
    tu_jpeg_opts base = {90, TU_SUB_444, 0, 0}, prog = {90, TU_SUB_444, 1, 0};
    size_t nb, np;
    uint8_t *jb = tu_encode_jpeg(pix, 256, 256, 3, &base, &nb);
    uint8_t *jp = tu_encode_jpeg(pix, 256, 256, 3, &prog, &np);
    free(pix);
    tree t = make_tree(jp, np);
    coordl_config cfg = tree_config(&t, COORDL_PIPE_EVAL, COORDL_BAD_FAIL);
    cfg.max_decode_bytes = 320u << 10; /* coefficients alone: 384 KiB */
    coordl *L = tu_open(&cfg);
    tu_run run = {0};
    coordl_status rc = tu_run_epochs(L, 1, &run);
    assert_int_equal(rc, COORDL_ERR_CORRUPT);
    if (!strstr(coordl_errmsg(L), "max_decode_bytes (327680)"))
        fail_msg("\"%s\"", coordl_errmsg(L));
    tu_run_free(&run);
    coordl_close(L);
    tu_write_file(t.victim, jb, nb);
    L = tu_open(&cfg);
    memset(&run, 0, sizeof run);
    rc = tu_run_epochs(L, 1, &run);
    if (rc != COORDL_OK)
        fail_msg("baseline under the same limit: %d: %s", (int)rc, coordl_errmsg(L));
    tu_run_free(&run);
    coordl_close(L);
    free(jb);
    free(jp);
    free_tree(&t);
}

static void test_max_decode_bytes_zero_means_the_default(void **state)
{
    (void)state;
    uint8_t *pix = tu_textured_rgb(64, 64, (const uint8_t[3]){90, 120, 150}, 2);
    char *root = tu_join(g_dir, "zero");
    char *path = tu_join(root, "k/a.png");
    tu_write_png(path, pix, 64, 64, 3);
    free(pix);
    coordl_config cfg = tu_config(root);
    cfg.batch_size = 1;
    cfg.max_decode_bytes = 0;
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    coordl_release(L, &b);
    coordl_close(L);
    assert_int_equal(coordl_config_default().max_decode_bytes, 256u << 20);
    free(path);
    free(root);
}

/* ---- scans -------------------------------------------------------------- */

/* A 16 x 16 grayscale progressive JPEG with one DC scan and, for each AC
 * coefficient, a first scan at Al = al_first and al_first refinements:
 * 1 + 63 x (al_first + 1) scans. */
static uint8_t *many_scan_jpeg(int al_first, size_t *n, int *nscans)
{
    static jpeg_scan_info scans[1 + 63 * 14];
    int k = 0;
    scans[k++] = (jpeg_scan_info){1, {0}, 0, 0, 0, 0};
    for (int c = 1; c <= 63; c++) {
        scans[k++] = (jpeg_scan_info){1, {0}, c, c, 0, al_first};
        for (int al = al_first; al > 0; al--)
            scans[k++] = (jpeg_scan_info){1, {0}, c, c, al, al - 1};
    }
    *nscans = k;
    uint8_t pix[16 * 16];
    for (int i = 0; i < 256; i++)
        pix[i] = (uint8_t)(i * 7);
    struct jpeg_compress_struct cj;
    struct jpeg_error_mgr err;
    cj.err = jpeg_std_error(&err);
    jpeg_create_compress(&cj);
    unsigned char *mem = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&cj, &mem, &size);
    cj.image_width = cj.image_height = 16;
    cj.input_components = 1;
    cj.in_color_space = JCS_GRAYSCALE;
    jpeg_set_defaults(&cj);
    cj.scan_info = scans;
    cj.num_scans = k;
    jpeg_start_compress(&cj, TRUE);
    while (cj.next_scanline < 16) {
        JSAMPROW row = pix + cj.next_scanline * 16;
        jpeg_write_scanlines(&cj, &row, 1);
    }
    jpeg_finish_compress(&cj);
    jpeg_destroy_compress(&cj);
    uint8_t *out = malloc(size);
    memcpy(out, mem, size);
    free(mem);
    *n = size;
    return out;
}

static void test_jpeg_with_more_than_500_scans_is_corrupt(void **state)
{
    (void)state;
    size_t n;
    int nscans;
    uint8_t *jpg = many_scan_jpeg(8, &n, &nscans); /* 1 + 63 x 9 = 568 scans */
    assert_int_equal(nscans, 568);
    tree t = make_tree(jpg, n);
    free(jpg);
    expect_batch_fails(&t, COORDL_PIPE_TRAIN, COORDL_ERR_CORRUPT, "more than 500 scans");
    free_tree(&t);
    jpg = many_scan_jpeg(6, &n, &nscans); /* 442 scans: decodes */
    assert_int_equal(nscans, 442);
    t = make_tree(jpg, n);
    free(jpg);
    coordl_config cfg = tree_config(&t, COORDL_PIPE_TRAIN, COORDL_BAD_FAIL);
    coordl *L = tu_open(&cfg);
    tu_run run = {0};
    coordl_status rc = tu_run_epochs(L, 1, &run);
    if (rc != COORDL_OK)
        fail_msg("442 scans: %d: %s", (int)rc, coordl_errmsg(L));
    tu_run_free(&run);
    coordl_close(L);
    free_tree(&t);
}


/* 20,000 frames at 1 Hz (a 40 KB file) resampled to 16 kHz is 320 million
 * output samples: the crop of 16,000 reads two source frames. */

/* 8 channels at 48 kHz to 16 kHz: a 16,000-sample crop reads 32,000
 * frames x 8 channels = 256,000 source samples. */

/* ---- audio: only the kept window is converted ---------------------------- */

/* 20,000 frames at 1 Hz (a 40 KB file) resampled to 16 kHz is 320 million
 * output samples: the crop of 16,000 reads two source frames. */
static void test_wav_at_1hz_converts_only_the_kept_window(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "wavbomb");
    char *path = tu_join(root, "k/a.wav");
    enum { FRAMES = 20000 };
    static int16_t s[FRAMES];
    for (int i = 0; i < FRAMES; i++)
        s[i] = (int16_t)((i * 7919) % 65536 - 32768);
    tu_write_wav_i16(path, 1, 1, s, FRAMES);
    coordl_config cfg = tu_config(root);
    cfg.pipeline = COORDL_PIPE_AUDIO;
    cfg.audio_rate = 16000;
    cfg.audio_samples = 16000;
    cfg.batch_size = 1;
    cfg.seed = 3;
    counting c;
    use_counting(&cfg, &c);
    coordl *L = tu_open(&cfg);
    const size_t base = c.live;
    coordl_transform tr;
    assert_int_equal(coordl_sample_transform(L, 0, 0, &tr), COORDL_OK);
    assert_int_equal(tr.image_w, 320000000u); /* the resampled length, from the header */
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    const float *out = b.data;
    const double step = 1.0 / 16000.0;
    for (uint64_t i = 0; i < 16000; i++) {
        const double x = (double)((uint64_t)tr.x + i) * step;
        const uint64_t i0 = (uint64_t)x;
        const double fr = x - (double)i0;
        const float a = (float)s[i0 < FRAMES ? i0 : FRAMES - 1] / 32768.0f;
        const float bb = (float)s[i0 + 1 < FRAMES ? i0 + 1 : FRAMES - 1] / 32768.0f;
        const float want = (float)(a + (bb - a) * fr);
        if (fabsf(out[i] - want) > 1e-6f)
            fail_msg("sample %llu: %g, expected %g", (unsigned long long)i, out[i], want);
    }
    coordl_release(L, &b);
    printf("    peak through the hooks after open: %zu bytes\n", c.peak - base);
    if (c.peak - base > (1u << 20))
        fail_msg("the crop took %zu bytes through the hooks (the whole resampled file is 1.28 GB)", c.peak - base);
    coordl_close(L);
    pthread_mutex_destroy(&c.mu);
    free(path);
    free(root);
}

/* 8 channels at 48 kHz to 16 kHz: a 16,000-sample crop reads 32,000
 * frames x 8 channels = 256,000 source samples. */
static void test_audio_work_over_max_audio_samples_is_corrupt(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "wavwork");
    char *path = tu_join(root, "k/a.wav");
    enum { FRAMES = 96000, CH = 8 };
    int16_t *s = calloc((size_t)FRAMES * CH, sizeof *s);
    tu_write_wav_i16(path, CH, 48000, s, FRAMES);
    free(s);
    coordl_config cfg = tu_config(root);
    cfg.pipeline = COORDL_PIPE_AUDIO;
    cfg.audio_rate = 16000;
    cfg.audio_samples = 16000;
    cfg.batch_size = 1;
    cfg.max_audio_samples = 255999;
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_ERR_CORRUPT);
    if (!strstr(coordl_errmsg(L), "a.wav") || !strstr(coordl_errmsg(L), "256000 source samples") ||
        !strstr(coordl_errmsg(L), "max_audio_samples (255999)"))
        fail_msg("\"%s\"", coordl_errmsg(L));
    coordl_close(L);
    cfg.max_audio_samples = 256000;
    L = tu_open(&cfg);
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    coordl_release(L, &b);
    coordl_close(L);
    cfg.max_audio_samples = 0; /* the default */
    L = tu_open(&cfg);
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    coordl_release(L, &b);
    coordl_close(L);
    assert_int_equal(coordl_config_default().max_audio_samples, 1u << 26);
    free(path);
    free(root);
}


/* Found by fuzz_image: stb converts a 16-bit PGM to RGB as if it were
 * 8-bit and then reads twice its buffer; coordl now asks stb for the
 * file's own channels and makes RGB itself. */
static void test_sixteen_bit_pgm_decodes_to_its_grey(void **state)
{
    (void)state;
    enum { W = 6, H = 5 };
    char head[32];
    int k = snprintf(head, sizeof head, "P5\n%d %d\n65535\n", W, H);
    uint8_t file[64 + 2 * W * H];
    memcpy(file, head, (size_t)k);
    for (int i = 0; i < W * H; i++) { /* big-endian 16-bit grey 77 * 257 */
        file[k + 2 * i] = 77;
        file[k + 2 * i + 1] = 77;
    }
    tree t = make_tree(file, (size_t)k + 2 * W * H);
    coordl_config cfg = tree_config(&t, COORDL_PIPE_EVAL, COORDL_BAD_FAIL);
    cfg.batch_size = N_ITEMS;
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    const uint8_t *row = (const uint8_t *)b.data + (size_t)VICTIM * 12 * 12 * 3;
    for (int i = 0; i < 12 * 12 * 3; i++)
        if (row[i] != 77)
            fail_msg("byte %d is %d, expected 77", i, row[i]);
    coordl_release(L, &b);
    coordl_close(L);
    free_tree(&t);
}


/* Found by fuzz_image: stb keeps a PNG's or BMP's palette in an
 * uninitialized stack array, so an index past the palette copied whatever
 * that stack held into the batch: here the palette of the image the same
 * worker decoded before (a.*, 256 entries, entry 200 = 210,220,230).
 * coordl pads short palettes to 256 black entries: such pixels are black
 * on every run, whatever was decoded before. */
static void check_index_past_palette(int bmp)
{
    char *root = tu_join(g_dir, "palette%d", bmp);
    const char *ext = bmp ? "bmp" : "png";
    static const struct { const char *name; int entries; uint8_t index; } files[3] = {
        {"a", 256, 200}, {"b", 2, 200}, {"c", 2, 1}};
    for (int f = 0; f < 3; f++) {
        size_t n = 0;
        uint8_t *img = bmp ? hostile_bmp_palette(16, 16, files[f].entries, files[f].index, &n)
                           : hostile_png_palette(16, 16, files[f].entries, files[f].index, &n);
        assert_non_null(img);
        char *path = tu_join(root, "k/%s.%s", files[f].name, ext);
        tu_write_file(path, img, n);
        free(img);
        free(path);
    }
    coordl_config cfg = tu_config(root);
    cfg.threads = 1;
    cfg.shuffle = 0;
    cfg.batch_size = 3;
    cfg.pipeline = COORDL_PIPE_EVAL;
    cfg.out_w = cfg.out_h = 8;
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    const uint8_t *row0 = b.data, *row1 = row0 + 8 * 8 * 3, *row2 = row1 + 8 * 8 * 3;
    for (int i = 0; i < 8 * 8; i++) { /* entries 200 and 1 of the palettes */
        if (row0[3 * i] != 210 || row0[3 * i + 1] != 220 || row0[3 * i + 2] != 230)
            fail_msg("%s a: pixel %d is %d,%d,%d, expected 210,220,230", ext, i, row0[3 * i], row0[3 * i + 1],
                     row0[3 * i + 2]);
        if (row2[3 * i] != 11 || row2[3 * i + 1] != 21 || row2[3 * i + 2] != 31)
            fail_msg("%s c: pixel %d is %d,%d,%d, expected 11,21,31", ext, i, row2[3 * i], row2[3 * i + 1],
                     row2[3 * i + 2]);
    }
    for (int i = 0; i < 8 * 8 * 3; i++)
        if (row1[i] != 0)
            fail_msg("%s b: index past the palette gave byte %d = %d, expected black (0)", ext, i, row1[i]);
    coordl_release(L, &b);
    coordl_close(L);
    free(root);
}

static void test_png_index_past_its_palette_is_black_not_stack(void **state)
{
    (void)state;
    check_index_past_palette(0);
}

static void test_bmp_index_past_its_palette_is_black_not_stack(void **state)
{
    (void)state;
    check_index_past_palette(1);
}

/* ---- nothing on the trainer's stderr ------------------------------------ */

/* A JPEG with junk bytes before a marker decodes (libjpeg warns "Corrupt
 * JPEG data: N extraneous bytes before marker"): neither the workers nor
 * coordl_sample_transform may print that on the process's stderr (a
 * library speaks through cfg.log only). coordl_sample_transform's header
 * reader once kept libjpeg's default message handler (fuzz_tar). */
static void test_damaged_jpeg_prints_nothing_on_stderr(void **state)
{
    (void)state;
    static const uint8_t base[3] = {90, 140, 200};
    uint8_t *pix = tu_textured_rgb(20, 20, base, 3);
    size_t n;
    uint8_t *jpg = tu_encode_jpeg(pix, 20, 20, 3, NULL, &n);
    uint8_t *bad = malloc(n + 135);
    assert_non_null(bad);
    assert_true(jpg[2] == 0xFF && jpg[3] == 0xE0); /* SOI, APP0 (JFIF), then junk before the next marker */
    const size_t at = 4 + ((size_t)jpg[4] << 8 | jpg[5]);
    memcpy(bad, jpg, at);
    memset(bad + at, 0x5a, 135);
    memcpy(bad + at + 135, jpg + at, n - at);
    tree t = make_tree(bad, n + 135);
    char *errfile = tu_join(g_dir, "stderr-%d.txt", g_serial++);
    fflush(stderr);
    const int saved = dup(2);
    FILE *f = fopen(errfile, "w");
    assert_non_null(f);
    assert_true(saved >= 0 && dup2(fileno(f), 2) == 2);
    coordl_config cfg = tree_config(&t, COORDL_PIPE_TRAIN, COORDL_BAD_FAIL);
    coordl *L = NULL;
    coordl_status open_rc = coordl_open(&cfg, &L), transform_rc = COORDL_ERR_INVALID, next_rc = COORDL_ERR_INVALID;
    if (open_rc == COORDL_OK) {
        coordl_transform tr;
        transform_rc = coordl_sample_transform(L, 0, VICTIM, &tr);
        tu_run run = {0};
        next_rc = tu_run_epochs(L, 1, &run);
        tu_run_free(&run);
        coordl_close(L);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(f);
    size_t printed = 0;
    char *text = (char *)tu_read_file(errfile, &printed);
    assert_int_equal(open_rc, COORDL_OK);
    assert_int_equal(transform_rc, COORDL_OK); /* the junk is harmless: it decodes */
    assert_int_equal(next_rc, COORDL_OK);
    if (printed != 0)
        fail_msg("coordl printed %zu bytes on stderr: %.*s", printed, (int)printed, text);
    free(text);
    free(errfile);
    free_tree(&t);
    free(bad);
    free(jpg);
    free(pix);
}

int main(void)
{
    tu_main_init(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zero_width_bmp_is_corrupt_not_read_out_of_bounds),
        cmocka_unit_test(test_zero_height_bmp_is_corrupt),
        cmocka_unit_test(test_zero_sized_ppm_and_tga_are_corrupt),
        cmocka_unit_test(test_gif_named_png_is_unsupported_not_decoded),
        cmocka_unit_test(test_other_known_formats_are_unsupported_by_name),
        cmocka_unit_test(test_tiny_progressive_jpeg_declaring_10000x10000_refused_before_allocating),
        cmocka_unit_test(test_png_zlib_bomb_refused_from_its_header),
        cmocka_unit_test(test_stb_allocations_go_through_the_allocator_hooks),
        cmocka_unit_test(test_stb_stops_at_max_decode_bytes),
        cmocka_unit_test(test_progressive_coefficients_count_in_the_limit),
        cmocka_unit_test(test_max_decode_bytes_zero_means_the_default),
        cmocka_unit_test(test_jpeg_with_more_than_500_scans_is_corrupt),
        cmocka_unit_test(test_sixteen_bit_pgm_decodes_to_its_grey),
        cmocka_unit_test(test_png_index_past_its_palette_is_black_not_stack),
        cmocka_unit_test(test_bmp_index_past_its_palette_is_black_not_stack),
        cmocka_unit_test(test_damaged_jpeg_prints_nothing_on_stderr),
        cmocka_unit_test(test_wav_at_1hz_converts_only_the_kept_window),
        cmocka_unit_test(test_audio_work_over_max_audio_samples_is_corrupt),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
