/*
 * test_util.c - data generators and run helpers for the coordl tests.
 * See test_util.h.
 */
#include "test_util.h"
#include "tu_tar.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jpeglib.h>

#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wpedantic"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    assert_non_null(q);
    return q;
}

/* ---- files and directories ------------------------------------------- */

char *tu_mkdtemp(void)
{
    char tmpl[] = "/tmp/coordl-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    char *out = xmalloc(strlen(d) + 1);
    strcpy(out, d);
    return out;
}

void tu_rmtree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *dir = opendir(path);
        if (dir) {
            struct dirent *e;
            while ((e = readdir(dir)) != NULL) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                    continue;
                char *child = tu_join(path, "%s", e->d_name);
                tu_rmtree(child);
                free(child);
            }
            closedir(dir);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

char *tu_join(const char *dir, const char *fmt, ...)
{
    char tail[PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tail, sizeof tail, fmt, ap);
    va_end(ap);
    assert_true(k >= 0 && (size_t)k < sizeof tail);
    size_t n = strlen(dir) + 1 + strlen(tail) + 1;
    char *out = xmalloc(n);
    snprintf(out, n, "%s/%s", dir, tail);
    return out;
}

void tu_mkdirs(const char *path)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    assert_true(n < sizeof buf);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                fail_msg("mkdir %s: %s", buf, strerror(errno));
            buf[i] = c;
        }
    }
}

static void mkdirs_parent(const char *path)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    assert_true(n < sizeof buf);
    memcpy(buf, path, n + 1);
    char *slash = strrchr(buf, '/');
    if (slash && slash != buf) {
        *slash = '\0';
        tu_mkdirs(buf);
    }
}

void tu_write_file(const char *path, const void *data, size_t n)
{
    mkdirs_parent(path);
    FILE *f = fopen(path, "wb");
    if (!f)
        fail_msg("fopen %s: %s", path, strerror(errno));
    if (n)
        assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

uint8_t *tu_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("fopen %s: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    uint8_t *buf = xmalloc(cap);
    for (;;) {
        if (len == cap) {
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        len += k;
        if (k == 0)
            break;
    }
    fclose(f);
    *n = len;
    return buf;
}

uint64_t tu_file_size(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        fail_msg("stat %s: %s", path, strerror(errno));
    return (uint64_t)st.st_size;
}

uint64_t tu_tree_bytes(const char *dir)
{
    struct stat st;
    if (lstat(dir, &st) != 0)
        return 0;
    if (S_ISREG(st.st_mode))
        return (uint64_t)st.st_size;
    if (!S_ISDIR(st.st_mode))
        return 0;
    uint64_t sum = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char *child = tu_join(dir, "%s", e->d_name);
        sum += tu_tree_bytes(child);
        free(child);
    }
    closedir(d);
    return sum;
}

/* ---- pixels ------------------------------------------------------------ */

uint64_t tu_rand(uint64_t *state)
{
    /* splitmix64 */
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint8_t *tu_solid(int w, int h, int comps, const uint8_t *colour)
{
    size_t px = (size_t)w * (size_t)h;
    uint8_t *p = xmalloc(px * (size_t)comps);
    for (size_t i = 0; i < px; i++)
        memcpy(p + i * (size_t)comps, colour, (size_t)comps);
    return p;
}

uint8_t *tu_gradient_rgb(int w, int h, uint8_t b)
{
    uint8_t *p = xmalloc((size_t)w * (size_t)h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *q = p + ((size_t)y * (size_t)w + (size_t)x) * 3;
            q[0] = (uint8_t)(w > 1 ? (x * 255 + (w - 1) / 2) / (w - 1) : 0);
            q[1] = (uint8_t)(h > 1 ? (y * 255 + (h - 1) / 2) / (h - 1) : 0);
            q[2] = b;
        }
    return p;
}

static uint8_t clamp_u8(int v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

uint8_t *tu_textured_rgb(int w, int h, const uint8_t base[3], uint64_t seed)
{
    uint64_t st = seed * 0x2545f4914f6cdd1dULL + 1;
    /* a few random low-frequency waves: smooth, so JPEG sizes stay similar */
    int fx = (int)(tu_rand(&st) % 4) + 1, fy = (int)(tu_rand(&st) % 4) + 1;
    int px = (int)(tu_rand(&st) % 64), py = (int)(tu_rand(&st) % 64);
    int amp = 24 + (int)(tu_rand(&st) % 16);
    uint8_t *p = xmalloc((size_t)w * (size_t)h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            /* integer triangle waves, no libm needed */
            int tx = ((x * fx * 64) / (w > 0 ? w : 1) + px) % 64;
            int ty = ((y * fy * 64) / (h > 0 ? h : 1) + py) % 64;
            int wx = tx < 32 ? tx : 64 - tx; /* 0..32 */
            int wy = ty < 32 ? ty : 64 - ty;
            int d = (wx - 16) * amp / 16 + (wy - 16) * amp / 32;
            uint8_t *q = p + ((size_t)y * (size_t)w + (size_t)x) * 3;
            q[0] = clamp_u8(base[0] + d);
            q[1] = clamp_u8(base[1] - d / 2);
            q[2] = clamp_u8(base[2] + (wy - 16));
        }
    return p;
}

uint8_t *tu_noise_rgb(int w, int h, uint64_t seed)
{
    size_t n = (size_t)w * (size_t)h * 3;
    uint8_t *p = xmalloc(n);
    uint64_t st = seed;
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)tu_rand(&st);
    return p;
}

/* ---- image writers ----------------------------------------------------- */

static void jpeg_setup(struct jpeg_compress_struct *c, const uint8_t *pix,
                       int w, int h, int comps, const tu_jpeg_opts *opts)
{
    (void)pix;
    c->image_width = (JDIMENSION)w;
    c->image_height = (JDIMENSION)h;
    c->input_components = comps;
    c->in_color_space = comps == 1 ? JCS_GRAYSCALE
                        : comps == 4 ? JCS_CMYK
                                     : JCS_RGB;
    jpeg_set_defaults(c);
    if (comps == 4) {
        jpeg_set_colorspace(c, JCS_CMYK); /* sets write_Adobe_marker */
        if (opts && opts->no_adobe_marker)
            c->write_Adobe_marker = FALSE;
    }
    int quality = opts && opts->quality ? opts->quality : 95;
    jpeg_set_quality(c, quality, TRUE);
    /* sampling factors of the first component; the others stay 1x1 */
    int hs = 1, vs = 1;
    if (comps == 3 && opts) {
        if (opts->subsampling == TU_SUB_422)
            hs = 2;
        else if (opts->subsampling == TU_SUB_420)
            hs = vs = 2;
    }
    for (int i = 0; i < c->num_components; i++) {
        c->comp_info[i].h_samp_factor = i == 0 ? hs : 1;
        c->comp_info[i].v_samp_factor = i == 0 ? vs : 1;
    }
    if (opts && opts->progressive)
        jpeg_simple_progression(c);
}

static void jpeg_write_rows(struct jpeg_compress_struct *c, const uint8_t *pix,
                            int w, int comps)
{
    jpeg_start_compress(c, TRUE);
    while (c->next_scanline < c->image_height) {
        JSAMPROW row = (JSAMPROW)(pix + (size_t)c->next_scanline *
                                            (size_t)w * (size_t)comps);
        jpeg_write_scanlines(c, &row, 1);
    }
    jpeg_finish_compress(c);
}

uint8_t *tu_encode_jpeg(const uint8_t *pix, int w, int h, int comps,
                        const tu_jpeg_opts *opts, size_t *n)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *mem = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &mem, &size);
    jpeg_setup(&c, pix, w, h, comps, opts);
    jpeg_write_rows(&c, pix, w, comps);
    jpeg_destroy_compress(&c);
    assert_non_null(mem);
    uint8_t *out = xmalloc(size);
    memcpy(out, mem, size);
    free(mem);
    *n = size;
    return out;
}

void tu_write_jpeg(const char *path, const uint8_t *pix, int w, int h,
                   int comps, const tu_jpeg_opts *opts)
{
    size_t n;
    uint8_t *jpg = tu_encode_jpeg(pix, w, h, comps, opts, &n);
    tu_write_file(path, jpg, n);
    free(jpg);
}

void tu_write_png(const char *path, const uint8_t *pix, int w, int h, int comps)
{
    mkdirs_parent(path);
    assert_true(stbi_write_png(path, w, h, comps, pix, w * comps) != 0);
}

void tu_write_bmp(const char *path, const uint8_t *pix, int w, int h, int comps)
{
    mkdirs_parent(path);
    assert_true(stbi_write_bmp(path, w, h, comps, pix) != 0);
}

void tu_write_tga(const char *path, const uint8_t *pix, int w, int h, int comps)
{
    mkdirs_parent(path);
    assert_true(stbi_write_tga(path, w, h, comps, pix) != 0);
}

static void write_pnm(const char *path, const char *magic, const uint8_t *pix,
                      int w, int h, int comps)
{
    char head[64];
    int k = snprintf(head, sizeof head, "%s\n%d %d\n255\n", magic, w, h);
    size_t body = (size_t)w * (size_t)h * (size_t)comps;
    uint8_t *buf = xmalloc((size_t)k + body);
    memcpy(buf, head, (size_t)k);
    memcpy(buf + k, pix, body);
    tu_write_file(path, buf, (size_t)k + body);
    free(buf);
}

void tu_write_ppm(const char *path, const uint8_t *rgb, int w, int h)
{
    write_pnm(path, "P6", rgb, w, h, 3);
}

void tu_write_pgm(const char *path, const uint8_t *gray, int w, int h)
{
    write_pnm(path, "P5", gray, w, h, 1);
}

size_t tu_jpeg_scan_offset(const uint8_t *jpg, size_t n)
{
    /* walk the marker segments from SOI to the first SOS */
    size_t i = 2;
    while (i + 4 <= n) {
        if (jpg[i] != 0xFF)
            return 0;
        uint8_t marker = jpg[i + 1];
        size_t len = ((size_t)jpg[i + 2] << 8) | jpg[i + 3];
        if (marker == 0xDA)
            return i + 2 + len;
        i += 2 + len;
    }
    return 0;
}

/* ---- ImageFolder datasets -------------------------------------------- */

void tu_class_colour(int k, uint8_t rgb[3])
{
    /* well separated, never 0 or 255 (no clipping in any direction) */
    rgb[0] = (uint8_t)(40 + (k * 67) % 176);
    rgb[1] = (uint8_t)(40 + (k * 131 + 60) % 176);
    rgb[2] = (uint8_t)(40 + (k * 29 + 120) % 176);
}

static const char *format_ext(tu_format f)
{
    switch (f) {
    case TU_FMT_PNG: return "png";
    case TU_FMT_BMP: return "bmp";
    case TU_FMT_TGA: return "tga";
    case TU_FMT_PPM: return "ppm";
    case TU_FMT_JPEG:
    default: return "jpg";
    }
}

char *tu_folder_file(const char *root, const tu_folder_spec *spec, int k, int j)
{
    return tu_join(root, "class_%03d/img_%05d.%s", k, j,
                   format_ext(spec->format));
}

void tu_tar_of_folder(const char *tar_path, const char *root, const tu_folder_spec *spec)
{
    tu_tar t;
    tu_tar_open(&t, tar_path);
    for (int k = 0; k < spec->classes; k++)
        for (int j = 0; j < spec->per_class; j++) {
            char *path = tu_folder_file(root, spec, k, j);
            size_t n;
            uint8_t *data = tu_read_file(path, &n);
            tu_tar_file(&t, path + strlen(root) + 1, data, n);
            free(data);
            free(path);
        }
    tu_tar_close(&t, 2);
}

uint64_t tu_make_image_folder(const char *root, const tu_folder_spec *spec)
{
    uint64_t total = 0;
    uint64_t jst = spec->seed ^ 0x5eedULL;
    tu_jpeg_opts jo = {spec->quality ? spec->quality : 95, TU_SUB_444, 0, 0};
    for (int k = 0; k < spec->classes; k++) {
        uint8_t col[3];
        tu_class_colour(k, col);
        for (int j = 0; j < spec->per_class; j++) {
            int w = spec->w, h = spec->h;
            if (spec->size_jitter > 0) {
                w += (int)(tu_rand(&jst) % (uint64_t)(spec->size_jitter + 1));
                h += (int)(tu_rand(&jst) % (uint64_t)(spec->size_jitter + 1));
            }
            uint8_t *pix =
                spec->pattern == TU_PAT_SOLID
                    ? tu_solid(w, h, 3, col)
                    : tu_textured_rgb(w, h, col,
                                      spec->seed * 1000003ULL +
                                          (uint64_t)(k * spec->per_class + j));
            char *path = tu_folder_file(root, spec, k, j);
            switch (spec->format) {
            case TU_FMT_PNG: tu_write_png(path, pix, w, h, 3); break;
            case TU_FMT_BMP: tu_write_bmp(path, pix, w, h, 3); break;
            case TU_FMT_TGA: tu_write_tga(path, pix, w, h, 3); break;
            case TU_FMT_PPM: tu_write_ppm(path, pix, w, h); break;
            case TU_FMT_JPEG:
            default: tu_write_jpeg(path, pix, w, h, 3, &jo); break;
            }
            total += tu_file_size(path);
            free(path);
            free(pix);
        }
    }
    return total;
}

/* ---- logging ----------------------------------------------------------- */

void tu_log_quiet(void *user, coordl_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

struct tu_log_record {
    pthread_mutex_t mu;
    char **msgs;
    int count, cap;
};

tu_log_record *tu_log_record_new(void)
{
    tu_log_record *r = xmalloc(sizeof *r);
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    return r;
}

void tu_log_record_free(tu_log_record *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->count; i++)
        free(r->msgs[i]);
    free(r->msgs);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

void tu_log_record_fn(void *user, coordl_log_level level, const char *msg)
{
    (void)level;
    tu_log_record *r = user;
    if (!r || !msg)
        return;
    size_t n = strlen(msg);
    char *copy = malloc(n + 1);
    if (!copy)
        return;
    memcpy(copy, msg, n + 1);
    pthread_mutex_lock(&r->mu);
    if (r->count == r->cap) {
        int cap = r->cap ? r->cap * 2 : 16;
        char **m = realloc(r->msgs, (size_t)cap * sizeof *m);
        if (!m) {
            pthread_mutex_unlock(&r->mu);
            free(copy);
            return;
        }
        r->msgs = m;
        r->cap = cap;
    }
    r->msgs[r->count++] = copy;
    pthread_mutex_unlock(&r->mu);
}

int tu_log_count(tu_log_record *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->count;
    pthread_mutex_unlock(&r->mu);
    return n;
}

int tu_log_contains(tu_log_record *r, const char *needle)
{
    int found = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->count && !found; i++)
        found = strstr(r->msgs[i], needle) != NULL;
    pthread_mutex_unlock(&r->mu);
    return found;
}

/* ---- configs and runs ------------------------------------------------- */

coordl_config tu_config(const char *source)
{
    coordl_config cfg = coordl_config_default();
    cfg.source = source;
    cfg.log = tu_log_quiet;
    cfg.log_user = NULL;
    cfg.threads = 2;
    cfg.batch_size = 8;
    cfg.out_w = 16;
    cfg.out_h = 16;
    cfg.layout = COORDL_U8_NHWC;
    return cfg;
}

coordl *tu_open(const coordl_config *cfg)
{
    coordl *L = NULL;
    coordl_status rc = coordl_open(cfg, &L);
    if (rc != COORDL_OK)
        fail_msg("coordl_open(%s) = %d (%s): %s",
                 cfg->source ? cfg->source : "(null)", (int)rc,
                 coordl_strerror(rc), coordl_errmsg(NULL));
    assert_non_null(L);
    return L;
}

uint64_t tu_fnv1a(uint64_t h, const void *data, size_t n)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

uint64_t tu_batch_hash(const coordl_batch *b)
{
    uint64_t h = TU_FNV_OFFSET;
    h = tu_fnv1a(h, &b->n, sizeof b->n);
    h = tu_fnv1a(h, &b->epoch, sizeof b->epoch);
    h = tu_fnv1a(h, &b->index, sizeof b->index);
    if (b->n) {
        h = tu_fnv1a(h, b->ids, (size_t)b->n * sizeof *b->ids);
        h = tu_fnv1a(h, b->labels, (size_t)b->n * sizeof *b->labels);
        h = tu_fnv1a(h, b->data, b->data_bytes);
    }
    return h;
}

static void run_push_batch(tu_run *r, const coordl_batch *b)
{
    if (r->nbatches == r->cap_b) {
        r->cap_b = r->cap_b ? r->cap_b * 2 : 64;
        r->hash = xrealloc(r->hash, r->cap_b * sizeof *r->hash);
        r->epoch = xrealloc(r->epoch, r->cap_b * sizeof *r->epoch);
        r->index = xrealloc(r->index, r->cap_b * sizeof *r->index);
        r->n = xrealloc(r->n, r->cap_b * sizeof *r->n);
    }
    r->hash[r->nbatches] = tu_batch_hash(b);
    r->epoch[r->nbatches] = b->epoch;
    r->index[r->nbatches] = b->index;
    r->n[r->nbatches] = b->n;
    r->nbatches++;
    for (uint32_t i = 0; i < b->n; i++) {
        if (r->nrows == r->cap_r) {
            r->cap_r = r->cap_r ? r->cap_r * 2 : 256;
            r->ids = xrealloc(r->ids, r->cap_r * sizeof *r->ids);
            r->labels = xrealloc(r->labels, r->cap_r * sizeof *r->labels);
            r->row_epoch = xrealloc(r->row_epoch, r->cap_r * sizeof *r->row_epoch);
        }
        r->ids[r->nrows] = b->ids[i];
        r->labels[r->nrows] = b->labels[i];
        r->row_epoch[r->nrows] = b->epoch;
        r->nrows++;
    }
}

coordl_status tu_run_epochs(coordl *L, unsigned epochs, tu_run *run)
{
    unsigned seen = 0;
    while (seen < epochs) {
        coordl_batch b;
        memset(&b, 0, sizeof b);
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) {
            assert_int_equal(b.n, 0);
            run->ends++;
            seen++;
            continue;
        }
        if (rc != COORDL_OK)
            return rc;
        run_push_batch(run, &b);
        coordl_release(L, &b);
    }
    return COORDL_OK;
}

void tu_run_free(tu_run *run)
{
    free(run->hash);
    free(run->epoch);
    free(run->index);
    free(run->n);
    free(run->ids);
    free(run->labels);
    free(run->row_epoch);
    memset(run, 0, sizeof *run);
}

size_t tu_run_count_id(const tu_run *run, uint64_t e, uint64_t id)
{
    size_t c = 0;
    for (size_t i = 0; i < run->nrows; i++)
        c += run->row_epoch[i] == e && run->ids[i] == id;
    return c;
}

static void watchdog_fired(int sig)
{
    static const char msg[] =
        "\ntest watchdog: no end after the time limit: a hang (the last "
        "[ RUN ] line names the test)\n";
    ssize_t k = write(2, msg, sizeof msg - 1);
    (void)k;
    signal(sig, SIG_DFL);
    raise(sig);
}

void tu_main_init(unsigned seconds)
{
    signal(SIGALRM, watchdog_fired);
    alarm(seconds);
    const char *filter = getenv("COORDL_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
}

int tu_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- token shards (llm.c format) --------------------------------------- */

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void tu_write_shard_raw(const char *path, int32_t magic, int32_t version,
                        int32_t ntok_header, const uint32_t *tokens, size_t n,
                        int token_bytes, size_t body_bytes_cut)
{
    assert_true(token_bytes == 2 || token_bytes == 4);
    size_t body = n * (size_t)token_bytes;
    assert_true(body_bytes_cut <= body);
    size_t total = 256 * 4 + body;
    uint8_t *buf = xmalloc(total);
    memset(buf, 0, 256 * 4);
    put_le(buf + 0, (uint32_t)magic, 4);
    put_le(buf + 4, (uint32_t)version, 4);
    put_le(buf + 8, (uint32_t)ntok_header, 4);
    for (size_t i = 0; i < n; i++)
        put_le(buf + 256 * 4 + i * (size_t)token_bytes, tokens[i], token_bytes);
    tu_write_file(path, buf, total - body_bytes_cut);
    free(buf);
}

void tu_write_shard(const char *path, int version, const uint32_t *tokens,
                    size_t n)
{
    assert_true(version == 1 || version == 7);
    assert_true(n <= (size_t)INT32_MAX);
    if (version == 1)
        for (size_t i = 0; i < n; i++)
            assert_true(tokens[i] < 65536);
    tu_write_shard_raw(path, version == 1 ? TU_SHARD_MAGIC_U16 : TU_SHARD_MAGIC_U32,
                       version, (int32_t)n, tokens, n, version == 1 ? 2 : 4, 0);
}

/* ---- WAV files ---------------------------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} tu_buf;

static void buf_put(tu_buf *b, const void *data, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = xrealloc(b->p, b->cap);
    }
    if (n)
        memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void buf_le(tu_buf *b, uint64_t v, int bytes)
{
    uint8_t tmp[8];
    put_le(tmp, v, bytes);
    buf_put(b, tmp, (size_t)bytes);
}

static void buf_list_chunk(tu_buf *b)
{
    static const char info[] = "INFOISFT\x0e\x00\x00\x00" "coordl tests\0\0";
    buf_put(b, "LIST", 4);
    buf_le(b, sizeof info - 1, 4); /* 26: even */
    buf_put(b, info, sizeof info - 1);
}

uint8_t *tu_encode_wav(const tu_wav_spec *s, const void *samples,
                       size_t nframes, size_t *n)
{
    assert_true(s->channels >= 1 && s->bits >= 8 && s->bits % 8 == 0);
    size_t bps = s->bits / 8u;
    size_t data_bytes = nframes * s->channels * bps;
    tu_buf b = {NULL, 0, 0};
    buf_put(&b, s->not_riff ? "JUNK" : "RIFF", 4);
    buf_le(&b, 0, 4); /* patched below */
    buf_put(&b, s->not_wave ? "AVI " : "WAVE", 4);
    if (s->list_before_fmt)
        buf_list_chunk(&b);
    if (!s->no_fmt) {
        int ext = s->format == 0xFFFE;
        int fl = s->format == 3;
        buf_put(&b, "fmt ", 4);
        buf_le(&b, ext ? 40 : fl ? 18 : 16, 4);
        buf_le(&b, s->format, 2);
        buf_le(&b, s->channels, 2);
        buf_le(&b, s->rate, 4);
        buf_le(&b, (uint64_t)s->rate * s->channels * bps, 4); /* byte rate */
        buf_le(&b, s->channels * bps, 2);                      /* block align */
        buf_le(&b, s->bits, 2);
        if (ext) {
            static const uint8_t guid_tail[14] = {0x00, 0x00, 0x00, 0x00, 0x10,
                                                  0x00, 0x80, 0x00, 0x00, 0xAA,
                                                  0x00, 0x38, 0x9B, 0x71};
            buf_le(&b, 22, 2);          /* cbSize */
            buf_le(&b, s->bits, 2);     /* valid bits per sample */
            buf_le(&b, s->channels == 1 ? 0x4 : s->channels == 2 ? 0x3 : 0, 4);
            buf_le(&b, s->subformat, 2); /* GUID: format code, then the tail */
            buf_put(&b, guid_tail, sizeof guid_tail);
        } else if (fl) {
            buf_le(&b, 0, 2); /* cbSize */
        }
    }
    if (s->list_before_data)
        buf_list_chunk(&b);
    if (s->odd_chunk) {
        buf_put(&b, "junk", 4);
        buf_le(&b, 5, 4);
        buf_put(&b, "abcde", 5);
        buf_put(&b, "\0", 1); /* RIFF pad byte: chunks are word aligned */
    }
    buf_put(&b, "data", 4);
    buf_le(&b, data_bytes + s->data_claim_extra, 4);
    buf_put(&b, samples, data_bytes);
    if (data_bytes & 1)
        buf_put(&b, "\0", 1);
    put_le(b.p + 4, b.n - 8, 4);
    *n = b.n;
    return b.p;
}

void tu_write_wav(const char *path, const tu_wav_spec *s, const void *samples,
                  size_t nframes)
{
    size_t n;
    uint8_t *wav = tu_encode_wav(s, samples, nframes, &n);
    tu_write_file(path, wav, n);
    free(wav);
}

void tu_write_wav_i16(const char *path, uint16_t channels, uint32_t rate,
                      const int16_t *samples, size_t nframes)
{
    tu_wav_spec s;
    memset(&s, 0, sizeof s);
    s.format = 1;
    s.channels = channels;
    s.bits = 16;
    s.rate = rate;
    /* little-endian bytes whatever the host */
    size_t cnt = nframes * channels;
    uint8_t *raw = xmalloc(cnt * 2);
    for (size_t i = 0; i < cnt; i++)
        put_le(raw + 2 * i, (uint16_t)samples[i], 2);
    tu_write_wav(path, &s, raw, nframes);
    free(raw);
}

void tu_write_wav_f32(const char *path, uint16_t channels, uint32_t rate,
                      const float *samples, size_t nframes)
{
    tu_wav_spec s;
    memset(&s, 0, sizeof s);
    s.format = 3;
    s.channels = channels;
    s.bits = 32;
    s.rate = rate;
    size_t cnt = nframes * channels;
    uint8_t *raw = xmalloc(cnt * 4);
    for (size_t i = 0; i < cnt; i++) {
        uint32_t u;
        memcpy(&u, &samples[i], 4);
        put_le(raw + 4 * i, u, 4);
    }
    tu_write_wav(path, &s, raw, nframes);
    free(raw);
}

/* ---- JSON and running programs ------------------------------------------ */

typedef struct {
    const char *s;
    size_t n, i;
    int depth;
} tu_jp;

static void tu_jp_ws(tu_jp *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                           p->s[p->i] == '\r'))
        p->i++;
}

static int tu_jp_lit(tu_jp *p, const char *lit)
{
    size_t k = strlen(lit);
    if (p->n - p->i < k || memcmp(p->s + p->i, lit, k))
        return 0;
    p->i += k;
    return 1;
}

static int tu_jp_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int tu_jp_string(tu_jp *p)
{
    if (p->i >= p->n || p->s[p->i] != '"')
        return 0;
    p->i++;
    while (p->i < p->n) {
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c == '"')
            return 1;
        if (c < 0x20)
            return 0;
        if (c != '\\')
            continue;
        if (p->i >= p->n)
            return 0;
        c = (unsigned char)p->s[p->i++];
        if (c == 'u') {
            for (int k = 0; k < 4; k++, p->i++)
                if (p->i >= p->n || !tu_jp_hex(p->s[p->i]))
                    return 0;
        } else if (!strchr("\"\\/bfnrt", c)) {
            return 0;
        }
    }
    return 0;
}

static int tu_jp_digits(tu_jp *p)
{
    size_t from = p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
        p->i++;
    return p->i > from;
}

static int tu_jp_number(tu_jp *p)
{
    if (p->i < p->n && p->s[p->i] == '-')
        p->i++;
    if (p->i < p->n && p->s[p->i] == '0')
        p->i++;
    else if (!tu_jp_digits(p))
        return 0;
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        if (!tu_jp_digits(p))
            return 0;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-'))
            p->i++;
        if (!tu_jp_digits(p))
            return 0;
    }
    return 1;
}

static int tu_jp_value(tu_jp *p)
{
    tu_jp_ws(p);
    if (p->i >= p->n)
        return 0;
    char c = p->s[p->i];
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        if (++p->depth > 256)
            return 0;
        p->i++;
        tu_jp_ws(p);
        if (p->i < p->n && p->s[p->i] == close) {
            p->i++;
            p->depth--;
            return 1;
        }
        for (;;) {
            if (c == '{') {
                tu_jp_ws(p);
                if (!tu_jp_string(p))
                    return 0;
                tu_jp_ws(p);
                if (p->i >= p->n || p->s[p->i] != ':')
                    return 0;
                p->i++;
            }
            if (!tu_jp_value(p))
                return 0;
            tu_jp_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->i < p->n && p->s[p->i] == close) {
                p->i++;
                p->depth--;
                return 1;
            }
            return 0;
        }
    }
    if (c == '"')
        return tu_jp_string(p);
    if (c == 't')
        return tu_jp_lit(p, "true");
    if (c == 'f')
        return tu_jp_lit(p, "false");
    if (c == 'n')
        return tu_jp_lit(p, "null");
    return tu_jp_number(p);
}

int tu_json_valid(const char *s, size_t n, size_t *err_off)
{
    tu_jp p = {s, n, 0, 0};
    int ok = s && tu_jp_value(&p);
    if (ok) {
        tu_jp_ws(&p);
        ok = p.i == n;
    }
    if (!ok && err_off)
        *err_off = p.i;
    return ok;
}

int tu_json_has_key(const char *json, const char *key)
{
    size_t k = strlen(key);
    for (const char *at = json; (at = strchr(at, '"')) != NULL; at++) {
        if (strncmp(at + 1, key, k) || at[1 + k] != '"')
            continue;
        const char *q = at + k + 2;
        while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
            q++;
        if (*q == ':')
            return 1;
    }
    return 0;
}

char *tu_shell_quote(const char *s)
{
    size_t n = 3;
    for (const char *c = s; *c; c++)
        n += *c == '\'' ? 4 : 1;
    char *q = malloc(n), *o = q;
    assert_non_null(q);
    *o++ = '\'';
    for (const char *c = s; *c; c++) {
        if (*c == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *c;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return q;
}

int tu_run_capture(const char *cmdline, char **out, char **err)
{
    char *dir = tu_mkdtemp();
    char *fo = tu_join(dir, "stdout"), *fe = tu_join(dir, "stderr");
    char *qo = tu_shell_quote(fo), *qe = tu_shell_quote(fe);
    size_t n = strlen(cmdline) + strlen(qo) + strlen(qe) + 32;
    char *full = malloc(n);
    assert_non_null(full);
    snprintf(full, n, "( %s ) >%s 2>%s", cmdline, qo, qe);
    fflush(NULL);
    int st = system(full);
    int rc;
    if (st == -1)
        rc = -1;
    else if (WIFEXITED(st))
        rc = WEXITSTATUS(st);
    else if (WIFSIGNALED(st))
        rc = 128 + WTERMSIG(st);
    else
        rc = -1;
    size_t len;
    if (out) {
        uint8_t *b = tu_read_file(fo, &len);
        *out = realloc(b, len + 1);
        assert_non_null(*out);
        (*out)[len] = '\0';
    }
    if (err) {
        uint8_t *b = tu_read_file(fe, &len);
        *err = realloc(b, len + 1);
        assert_non_null(*err);
        (*err)[len] = '\0';
    }
    if (rc == -1)
        fail_msg("could not run: %s", cmdline);
    tu_rmtree(dir);
    free(full);
    free(qo);
    free(qe);
    free(fo);
    free(fe);
    free(dir);
    return rc;
}
