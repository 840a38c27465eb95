/*
 * darknet_train - a small Darknet-style classifier trainer fed through
 * examples/darknet/coordl_darknet.h.
 *
 *   darknet_train [--workdir DIR] [--check] [--epochs 8] [--per-class 200]
 *                 [--batch-size 16] [--resize-every 4] [--lr 0.02]
 *                 [--threads 0] [--seed 1] [--copy]
 *
 * It writes an ImageFolder of JPEGs under DIR/images (4 classes; each class
 * owns a background hue, a stripe angle and a shape, every image jitters all
 * of them), then trains the way Darknet's train_classifier does, with the
 * load_data(args) thread replaced by the adapter:
 *
 *     coordl_dn_load(&dn, classes, &train, COORDL_DN_SHALLOW);
 *     loss = train_network(net, train);        (here: train_batch below)
 *     free_data(train);                        (here: coordl_dn_free)
 *
 * Darknet's classifier augmentation comes from its [net] values through
 * coordl_dn_config (Darknet's crop with min_crop 32 and max_crop 48, hue
 * 0.1, saturation 1.5, exposure 1.5, 7 degrees of rotation, aspect 1.15,
 * the flip), and Darknet's `random = 1` input resizing from
 * coordl_dn_resize: every --resize-every batches the input side is drawn
 * from 32, 40 and 48 (random_max = 48 sizes the ring for it, so it never
 * has to grow while batches are held).
 *
 * The network, Darknet-style, forward and backward by hand, the batch split
 * over OpenMP threads:
 *
 *   [convolutional] 3x3/2, 16 filters, leaky
 *   [convolutional] 3x3/2, 32 filters, leaky
 *   [avgpool]  (global: any input size)
 *   [connected] classes, linear
 *   [softmax] + cost
 *
 * SGD with momentum 0.9 and decay 0.0005, as in Darknet's cfg files.
 *
 * Per epoch it prints images/s, the loss and the stall fraction (time spent
 * waiting inside coordl, from coordl_get_stats stall_ns, over the epoch's
 * wall time); every resize prints a line in train_classifier's format.
 *
 * --check (small and fast, for `make test`): exit 1 unless the last epoch's
 * mean loss is below the first epoch's, every batch after a resize has the
 * size asked for (d.w, d.h, X.cols = 3 * w * h, X.rows = batch), the rows of
 * the batch before a resize are still intact after it (shallow loads stay
 * valid for two loads), the adapter steps over epoch ends, and COPY loads
 * (mixed in) are owned, equal-shaped copies. Exit status 2 for bad
 * arguments.
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE and size_t */

#include "coordl.h"
#include "darknet/coordl_darknet.h"

#define PI 3.14159265358979323846
#define MAX_SIDE 48 /* largest input side asked for: max_out_w / max_out_h */

/* ---- small helpers ---------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double unit(uint64_t *s) { return (double)(splitmix(s) >> 11) * 0x1p-53; }
static float normal(uint64_t *s)
{
    double u1 = ((splitmix(s) >> 11) + 1.0) * 0x1p-53, u2 = unit(s);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2 * PI * u2));
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "darknet_train: out of memory\n");
        exit(1);
    }
    return p;
}

/* snprintf into a PATH_MAX buffer; exits when the path does not fit. */
static void path_fmt(char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void path_fmt(char *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, PATH_MAX, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= PATH_MAX) {
        fprintf(stderr, "darknet_train: path too long: %s...\n", out);
        exit(1);
    }
}

/* mkdir -p; exits on failure. */
static void make_dirs(const char *path)
{
    char tmp[PATH_MAX];
    path_fmt(tmp, "%s", path);
    for (char *p = tmp + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        struct stat st;
        if (mkdir(tmp, 0777) != 0 && !(errno == EEXIST && stat(tmp, &st) == 0 && S_ISDIR(st.st_mode))) {
            fprintf(stderr, "darknet_train: %s: %s\n", tmp,
                    errno == EEXIST ? "exists and is not a directory" : strerror(errno));
            exit(1);
        }
        *p = saved;
        if (saved == '\0') return;
    }
}

/* rm -r of the folder this program writes its images into, so that a smaller
 * run never trains on the files of an earlier, bigger one. */
static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}
static void remove_tree(const char *path)
{
    if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT) {
        fprintf(stderr, "darknet_train: cannot remove %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

/* ---- the dataset ------------------------------------------------------------- */

struct jpeg_err {
    struct jpeg_error_mgr mgr;
    const char *path;
};

static void jpeg_fail(j_common_ptr cinfo)
{
    struct jpeg_err *e = (struct jpeg_err *)cinfo->err;
    char msg[JMSG_LENGTH_MAX];
    e->mgr.format_message(cinfo, msg);
    fprintf(stderr, "darknet_train: %s: libjpeg: %s\n", e->path, msg);
    exit(1);
}

static void write_jpeg(const char *path, const uint8_t *rgb, int w, int h)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "darknet_train: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    struct jpeg_compress_struct c;
    struct jpeg_err err;
    c.err = jpeg_std_error(&err.mgr);
    err.mgr.error_exit = jpeg_fail;
    err.path = path;
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 88, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * w * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    if (fclose(f) != 0) {
        fprintf(stderr, "darknet_train: %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

static void hsv_to_rgb(double h, double s, double v, double out[3])
{
    h = (h - floor(h)) * 6;
    int i = (int)h;
    double f = h - i, p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
    double r[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
    for (int c = 0; c < 3; c++) out[c] = 255 * r[i % 6][c];
}

/* Is (u, v), in the shape's own frame (unit radius), inside shape k? */
static int in_shape(int k, double u, double v)
{
    double d2 = u * u + v * v;
    switch (k % 4) {
    case 0: return d2 <= 1.0;                                /* disc */
    case 1: return fabs(u) <= 0.75 && fabs(v) <= 0.75;       /* square */
    case 2: return v <= 0.5 && 0.866 * u - 0.5 * v <= 0.5 && -0.866 * u - 0.5 * v <= 0.5;
    default: return d2 <= 1.0 && d2 >= 0.36;                 /* ring */
    }
}

/* DIR/class_<k>/img_<i>.jpg, sides 64..96 px. */
static uint64_t write_images(const char *dir, int classes, int per_class, uint64_t seed)
{
    uint8_t *img = xmalloc(96 * 96 * 3);
    char path[PATH_MAX];
    uint64_t bytes = 0;
    for (int k = 0; k < classes; k++) {
        path_fmt(path, "%s/class_%02d", dir, k);
        make_dirs(path);
        for (int i = 0; i < per_class; i++) {
            uint64_t s = seed ^ ((uint64_t)k << 40) ^ (uint64_t)i * 0x9e3779b97f4a7c15ull;
            int w = 64 + (int)(splitmix(&s) % 33), h = 64 + (int)(splitmix(&s) % 33);
            double bg[3], st[3], fg[3];
            double hue = (double)k / classes + (unit(&s) - 0.5) * 0.1;
            hsv_to_rgb(hue, 0.5 + 0.4 * unit(&s), 0.6 + 0.35 * unit(&s), bg);
            hsv_to_rgb(hue + 0.5, 0.3 + 0.5 * unit(&s), 0.2 + 0.4 * unit(&s), st);
            hsv_to_rgb(unit(&s), 0.3 + 0.7 * unit(&s), 0.3 + 0.7 * unit(&s), fg);
            double angle = k * PI / classes + (unit(&s) - 0.5) * 0.3;
            double period = 8 + 6 * unit(&s), phase = unit(&s) * 2 * PI;
            double ca = cos(angle) * 2 * PI / period, sa = sin(angle) * 2 * PI / period;
            double rad = (w < h ? w : h) * (0.18 + 0.12 * unit(&s));
            double cx = w * (0.3 + 0.4 * unit(&s)), cy = h * (0.3 + 0.4 * unit(&s));
            double rot = unit(&s) * 2 * PI, cr = cos(rot) / rad, sr = sin(rot) / rad;
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    double m = 0.5 + 0.5 * sin(x * ca + y * sa + phase);
                    int in = in_shape(k, (x - cx) * cr + (y - cy) * sr, (y - cy) * cr - (x - cx) * sr);
                    for (int c = 0; c < 3; c++) {
                        double v = in ? fg[c] : bg[c] + 0.6 * m * (st[c] - bg[c]);
                        v += (unit(&s) - 0.5) * 24;
                        img[((size_t)y * w + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                    }
                }
            path_fmt(path, "%s/class_%02d/img_%04d.jpg", dir, k, i);
            write_jpeg(path, img, w, h);
            struct stat sb;
            if (stat(path, &sb) == 0) bytes += (uint64_t)sb.st_size;
        }
    }
    free(img);
    return bytes;
}

/* ---- the network ---------------------------------------------------------------- */

#define C1 16
#define C2 32

typedef struct {
    int k;                           /* classes */
    size_t w1, b1, w2, b2, w3, b3, n; /* offsets of each tensor in the one array; total */
} net;

static net net_layout(int k)
{
    net m = {.k = k};
    size_t o = 0;
    m.w1 = o; o += (size_t)9 * 3 * C1;
    m.b1 = o; o += C1;
    m.w2 = o; o += (size_t)9 * C1 * C2;
    m.b2 = o; o += C2;
    m.w3 = o; o += (size_t)k * C2;
    m.b3 = o; o += (size_t)k;
    m.n = o;
    return m;
}

static void net_init(const net *m, float *p, uint64_t seed)
{
    memset(p, 0, m->n * sizeof *p);
    float sd1 = sqrtf(2.0f / 27), sd2 = sqrtf(2.0f / (9 * C1)), sd3 = sqrtf(1.0f / C2);
    for (size_t i = 0; i < (size_t)27 * C1; i++) p[m->w1 + i] = sd1 * normal(&seed);
    for (size_t i = 0; i < (size_t)9 * C1 * C2; i++) p[m->w2 + i] = sd2 * normal(&seed);
    for (size_t i = 0; i < (size_t)m->k * C2; i++) p[m->w3 + i] = sd3 * normal(&seed);
}

static float leaky(float x) { return x > 0 ? x : 0.1f * x; }

/* 3x3, stride 2, padding 1, channels-last; w[ky][kx][cin][cout]. */
static void conv_forward(const float *in, int cin, int sin, const float *w, const float *b,
                         float *out, int cout, int sout)
{
    for (int y = 0; y < sout; y++)
        for (int x = 0; x < sout; x++) {
            float *o = out + ((size_t)y * sout + x) * cout;
            for (int co = 0; co < cout; co++) o[co] = b[co];
            for (int ky = 0; ky < 3; ky++) {
                int iy = 2 * y + ky - 1;
                if (iy < 0 || iy >= sin) continue;
                for (int kx = 0; kx < 3; kx++) {
                    int ix = 2 * x + kx - 1;
                    if (ix < 0 || ix >= sin) continue;
                    const float *v = in + ((size_t)iy * sin + ix) * cin;
                    const float *wk = w + (size_t)(ky * 3 + kx) * cin * cout;
                    for (int ci = 0; ci < cin; ci++) {
                        const float *wr = wk + (size_t)ci * cout;
#pragma omp simd
                        for (int co = 0; co < cout; co++) o[co] += v[ci] * wr[co];
                    }
                }
            }
        }
}

static void conv_backward(const float *in, int cin, int sin, const float *w, const float *dout,
                          int cout, int sout, float *dw, float *db, float *din)
{
    for (int y = 0; y < sout; y++)
        for (int x = 0; x < sout; x++) {
            const float *g = dout + ((size_t)y * sout + x) * cout;
            for (int co = 0; co < cout; co++) db[co] += g[co];
            for (int ky = 0; ky < 3; ky++) {
                int iy = 2 * y + ky - 1;
                if (iy < 0 || iy >= sin) continue;
                for (int kx = 0; kx < 3; kx++) {
                    int ix = 2 * x + kx - 1;
                    if (ix < 0 || ix >= sin) continue;
                    size_t at = ((size_t)iy * sin + ix) * cin;
                    size_t wk = (size_t)(ky * 3 + kx) * cin * cout;
                    for (int ci = 0; ci < cin; ci++) {
                        float v = in[at + ci];
                        float *dwr = dw + wk + (size_t)ci * cout;
#pragma omp simd
                        for (int co = 0; co < cout; co++) dwr[co] += v * g[co];
                        if (din) {
                            const float *wr = w + wk + (size_t)ci * cout;
                            float acc = 0;
#pragma omp simd reduction(+ : acc)
                            for (int co = 0; co < cout; co++) acc += wr[co] * g[co];
                            din[at + ci] += acc;
                        }
                    }
                }
            }
        }
}

/* Per-thread activations, sized for MAX_SIDE. */
typedef struct {
    float *x, *z1, *a1, *z2, *a2, *da1, *da2;
} scratch;

/* Forward and backward for one image: x is one row of Darknet's d.X (CHW,
 * side s0), truth one row of d.y. Adds the gradient of loss * scale to grad;
 * returns the loss. */
static float train_image(const net *m, const float *p, const float *x, const float *truth, int s0,
                         float scale, float *grad, scratch *sc)
{
    int s1 = (s0 + 1) / 2, s2 = (s1 + 1) / 2;
    int n0 = s0 * s0, n1 = s1 * s1, n2 = s2 * s2;
    float pool[C2], dpool[C2], z[64];
    for (int i = 0; i < n0; i++)
        for (int c = 0; c < 3; c++) sc->x[i * 3 + c] = x[c * n0 + i];
    conv_forward(sc->x, 3, s0, p + m->w1, p + m->b1, sc->z1, C1, s1);
    for (int i = 0; i < n1 * C1; i++) sc->a1[i] = leaky(sc->z1[i]);
    conv_forward(sc->a1, C1, s1, p + m->w2, p + m->b2, sc->z2, C2, s2);
    memset(pool, 0, sizeof pool);
    for (int i = 0; i < n2 * C2; i++) {
        sc->a2[i] = leaky(sc->z2[i]);
        pool[i % C2] += sc->a2[i] / n2;
    }
    float zmax = -INFINITY;
    for (int k = 0; k < m->k; k++) {
        z[k] = p[m->b3 + k];
        for (int c = 0; c < C2; c++) z[k] += p[m->w3 + (size_t)k * C2 + c] * pool[c];
        zmax = z[k] > zmax ? z[k] : zmax;
    }
    float zsum = 0, loss = 0;
    for (int k = 0; k < m->k; k++) zsum += z[k] = expf(z[k] - zmax);
    memset(dpool, 0, sizeof dpool);
    for (int k = 0; k < m->k; k++) {
        float prob = z[k] / zsum;
        if (truth[k] > 0) loss -= truth[k] * logf(prob > 1e-30f ? prob : 1e-30f);
        float dz = scale * (prob - truth[k]); /* Darknet's softmax delta, sign flipped */
        grad[m->b3 + k] += dz;
        for (int c = 0; c < C2; c++) {
            grad[m->w3 + (size_t)k * C2 + c] += dz * pool[c];
            dpool[c] += dz * p[m->w3 + (size_t)k * C2 + c];
        }
    }
    for (int i = 0; i < n2 * C2; i++) sc->da2[i] = dpool[i % C2] / n2 * (sc->z2[i] > 0 ? 1.0f : 0.1f);
    memset(sc->da1, 0, (size_t)n1 * C1 * sizeof *sc->da1);
    conv_backward(sc->a1, C1, s1, p + m->w2, sc->da2, C2, s2, grad + m->w2, grad + m->b2, sc->da1);
    for (int i = 0; i < n1 * C1; i++) sc->da1[i] *= sc->z1[i] > 0 ? 1.0f : 0.1f;
    conv_backward(sc->x, 3, s0, p + m->w1, sc->da1, C1, s1, grad + m->w1, grad + m->b1, NULL);
    return loss;
}

/* Darknet's train_network(net, d) for this net: one SGD step on the batch;
 * returns the mean loss per image. */
static float train_batch(const net *m, float *p, float *vel, float *grads, scratch *sc, data d,
                         float lr)
{
    int nthreads = omp_get_max_threads();
    double loss = 0;
    memset(grads, 0, (size_t)nthreads * m->n * sizeof *grads);
#pragma omp parallel reduction(+ : loss)
    {
        int t = omp_get_thread_num();
#pragma omp for schedule(static)
        for (int i = 0; i < d.X.rows; i++)
            loss += train_image(m, p, d.X.vals[i], d.y.vals[i], d.w, 1.0f / d.X.rows,
                                grads + (size_t)t * m->n, &sc[t]);
    }
    const float momentum = 0.9f, decay = 0.0005f;
    for (size_t j = 0; j < m->n; j++) {
        float g = 0;
        for (int t = 0; t < nthreads; t++) g += grads[(size_t)t * m->n + j];
        vel[j] = momentum * vel[j] + g + decay * p[j];
        p[j] -= lr * vel[j];
    }
    return (float)(loss / d.X.rows);
}

/* ---- command line --------------------------------------------------------------- */

static void usage(FILE *to)
{
    fprintf(to,
            "usage: darknet_train [--workdir DIR] [--check] [--epochs 8] [--per-class 200]\n"
            "                     [--batch-size 16] [--resize-every 4] [--lr 0.02]\n"
            "                     [--threads 0] [--seed 1] [--copy]\n"
            "  Writes a 4-class JPEG ImageFolder under DIR/images and trains a small\n"
            "  Darknet-style CNN on it through coordl_darknet.h, resizing the input\n"
            "  among 32/40/48 every --resize-every batches. --copy: COPY loads\n"
            "  instead of SHALLOW. --check: a small run (4 epochs, 32 per class);\n"
            "  exit 1 if a check fails.\n");
}

static void bad_arg(const char *opt, const char *val)
{
    fprintf(stderr, "darknet_train: bad value for %s: '%s'\n", opt, val ? val : "(missing)");
    usage(stderr);
    exit(2);
}

static long parse_long(const char *opt, const char *val, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = val ? strtol(val, &end, 10) : 0;
    if (!val || end == val || *end != '\0' || errno != 0 || v < lo || v > hi) bad_arg(opt, val);
    return v;
}

static double parse_double(const char *opt, const char *val, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = val ? strtod(val, &end) : 0;
    if (!val || end == val || *end != '\0' || errno != 0 || !(v >= lo && v <= hi)) bad_arg(opt, val);
    return v;
}

/* A checksum of n floats (the bits, so that any change shows). */
static uint64_t checksum(const float *x, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], sizeof b);
        h = (h ^ b) * 1099511628211ull;
    }
    return h;
}

/* Darknet's own inputs are a train.list of paths and a labels.list of
 * names; coordl_dn_write_list turns them into a coordl list file. Checks
 * that coordl reads it back with the labels of the ImageFolder. */
static int check_list(const char *workdir, int classes, int per_class)
{
    int n = classes * per_class;
    char **paths = xmalloc((size_t)n * sizeof *paths), *labels[16], list[PATH_MAX];
    for (int k = 0; k < classes; k++) {
        labels[k] = xmalloc(32);
        snprintf(labels[k], 32, "class_%02d", k);
        for (int i = 0; i < per_class; i++) {
            paths[k * per_class + i] = xmalloc(80);
            snprintf(paths[k * per_class + i], 80, "images/class_%02d/img_%04d.jpg", k, i);
        }
    }
    path_fmt(list, "%s/train.list", workdir); /* next to images/: the paths are relative to it */
    int unlabelled = 0, ambiguous = 0, bad = 0;
    long lines = coordl_dn_write_list(list, paths, n, labels, classes, &unlabelled, &ambiguous);
    coordl_config cfg = coordl_config_default();
    cfg.source = list;
    coordl *L = NULL;
    if (lines != n || unlabelled || ambiguous) {
        fprintf(stderr, "darknet_train: FAILED: coordl_dn_write_list wrote %ld of %d lines (%d "
                        "unlabelled, %d ambiguous)\n", lines, n, unlabelled, ambiguous);
        bad = 1;
    } else if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "darknet_train: FAILED: coordl_open(%s): %s\n", list, coordl_errmsg(NULL));
        bad = 1;
    } else {
        uint64_t items = coordl_num_items(L);
        for (uint64_t id = 0; id < items && !bad; id++) {
            const char *path = coordl_item_path(L, id), *at = path ? strstr(path, "class_") : NULL;
            if (!at || atoi(at + 6) != coordl_item_label(L, id)) {
                fprintf(stderr, "darknet_train: FAILED: list item %llu (%s) has label %d\n",
                        (unsigned long long)id, path ? path : "?", coordl_item_label(L, id));
                bad = 1;
            }
        }
        if (!bad && items != (uint64_t)n) {
            fprintf(stderr, "darknet_train: FAILED: the list gave %llu items, not %d\n",
                    (unsigned long long)items, n);
            bad = 1;
        }
        coordl_close(L);
    }
    if (!bad) printf("check: Darknet train.list + labels -> coordl list: %d items, labels as the folders\n", n);
    for (int k = 0; k < classes; k++) free(labels[k]);
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
    return bad;
}

/* Waits until coordl's workers stop making progress (every free slot of
 * the ring filled): no new rows for 50 ms, or 2 s in all. */
static void wait_for_workers(const coordl *L)
{
    coordl_stats st;
    coordl_get_stats(L, &st);
    uint64_t items = st.items;
    double start = seconds(), last_change = start;
    struct timespec nap = {0, 2000000};
    while (seconds() - last_change < 0.05 && seconds() - start < 2.0) {
        nanosleep(&nap, NULL);
        coordl_get_stats(L, &st);
        if (st.items != items) {
            items = st.items;
            last_change = seconds();
        }
    }
}

int main(int argc, char **argv)
{
    const char *workdir = "darknet_train-data";
    int check = 0, copy = 0;
    long epochs = -1, per_class = -1, batch_size = 16, resize_every = 4, threads = 0;
    double lr = 0.02;
    uint64_t seed = 1;
    enum { CLASSES = 4 };
    static const int sizes[3] = {32, 40, 48};

    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(opt, "--check")) { check = 1; continue; }
        else if (!strcmp(opt, "--copy")) { copy = 1; continue; }
        else if (!strcmp(opt, "--workdir")) { if (!val || !*val) bad_arg(opt, val); workdir = val; }
        else if (!strcmp(opt, "--epochs")) epochs = parse_long(opt, val, 1, 10000);
        else if (!strcmp(opt, "--per-class")) per_class = parse_long(opt, val, 2, 100000);
        else if (!strcmp(opt, "--batch-size")) batch_size = parse_long(opt, val, 1, 4096);
        else if (!strcmp(opt, "--resize-every")) resize_every = parse_long(opt, val, 1, 1000000);
        else if (!strcmp(opt, "--threads")) threads = parse_long(opt, val, 0, 1024);
        else if (!strcmp(opt, "--lr")) lr = parse_double(opt, val, 1e-6, 10);
        else if (!strcmp(opt, "--seed")) seed = (uint64_t)parse_long(opt, val, 0, LONG_MAX);
        else {
            fprintf(stderr, "darknet_train: unknown argument '%s'\n", opt);
            usage(stderr);
            return 2;
        }
        i++; /* the option's value */
    }
    /* --check: 4 x 32 images, 8 batches of 16 per epoch, 4 epochs. */
    if (epochs < 0) epochs = check ? 4 : 8;
    if (per_class < 0) per_class = check ? 32 : 200;
    if (per_class * CLASSES < batch_size) {
        fprintf(stderr, "darknet_train: %ld images are fewer than one batch of %ld\n",
                per_class * CLASSES, batch_size);
        return 2;
    }

    double t0 = seconds();
    char images[PATH_MAX];
    path_fmt(images, "%s/images", workdir);
    make_dirs(workdir);
    remove_tree(images);
    uint64_t bytes = write_images(images, CLASSES, (int)per_class, seed);
    printf("darknet_train: wrote %ld JPEGs (%d classes), %.1f MB, under %s in %.2f s\n",
           per_class * CLASSES, CLASSES, bytes / 1e6, images, seconds() - t0);

    if (check && check_list(workdir, CLASSES, (int)per_class) != 0) return 1;

    /* Darknet's load_args for the classifier, as coordl options, from the
     * [net] section (coordl_dn_net_of(net, ngpus) fills this from a real
     * Darknet network): the input size, imgs = batch * subdivisions, and
     * the augmentation, with Darknet's crop and rand_scale semantics. */
    coordl_dn_net dn_net;
    memset(&dn_net, 0, sizeof dn_net);
    dn_net.w = dn_net.h = 32;  /* width = 32, height = 32 */
    dn_net.batch = (int)batch_size;
    dn_net.subdivisions = 1;
    dn_net.min_ratio = 1.0f;   /* min_crop = 32   */
    dn_net.max_ratio = 1.5f;   /* max_crop = 48   */
    dn_net.angle = 7.0f;       /* angle = 7       */
    dn_net.aspect = 1.15f;     /* aspect = 1.15   */
    dn_net.hue = 0.1f;         /* hue = .1        */
    dn_net.saturation = 1.5f;  /* saturation = 1.5 */
    dn_net.exposure = 1.5f;    /* exposure = 1.5  */
    dn_net.random = 1;         /* random = 1, sides up to MAX_SIDE */
    dn_net.random_max = MAX_SIDE;
    coordl_config cfg = coordl_config_default();
    if (coordl_dn_config(&cfg, &dn_net) != COORDL_OK) {
        fprintf(stderr, "darknet_train: coordl_dn_config refused the [net] values\n");
        return 1;
    }
    cfg.source = images;
    cfg.cache_bytes = bytes; /* all of it: epochs after the first never touch the disk */
    cfg.threads = (int)threads;
    cfg.seed = seed;
    coordl_dn dn;
    if (coordl_dn_open(&dn, &cfg) != COORDL_OK) {
        fprintf(stderr, "darknet_train: %s\n", coordl_dn_errmsg(&dn));
        return 1;
    }
    if (coordl_num_classes(dn.L) != CLASSES) {
        fprintf(stderr, "darknet_train: %u classes indexed, expected %d\n", coordl_num_classes(dn.L),
                CLASSES);
        coordl_dn_close(&dn);
        return 1;
    }
    const uint64_t nbatches = coordl_batches_per_epoch(dn.L);
    coordl_stats st;
    coordl_get_stats(dn.L, &st);
    printf("darknet_train: %llu images, %llu batches of %ld per epoch; %u loader threads, %d OpenMP "
           "threads; %s loads; input resized every %ld batches among 32/40/48\n",
           (unsigned long long)coordl_num_items(dn.L), (unsigned long long)nbatches, batch_size,
           st.threads, omp_get_max_threads(), copy ? "COPY" : "SHALLOW", resize_every);

    net m = net_layout(CLASSES);
    int nthreads = omp_get_max_threads();
    float *p = xmalloc(m.n * sizeof *p), *vel = calloc(m.n, sizeof *vel);
    float *grads = xmalloc((size_t)nthreads * m.n * sizeof *grads);
    scratch *sc = xmalloc((size_t)nthreads * sizeof *sc);
    const size_t n0 = (size_t)3 * MAX_SIDE * MAX_SIDE, n1 = (size_t)C1 * (MAX_SIDE / 2) * (MAX_SIDE / 2),
                 n2 = (size_t)C2 * (MAX_SIDE / 4) * (MAX_SIDE / 4);
    const size_t per_thread = n0 + 3 * n1 + 3 * n2;
    float *act = xmalloc((size_t)nthreads * per_thread * sizeof *act);
    if (!vel) {
        fprintf(stderr, "darknet_train: out of memory\n");
        return 1;
    }
    for (int t = 0; t < nthreads; t++) {
        float *a = act + (size_t)t * per_thread;
        sc[t] = (scratch){a, a + n0, a + n0 + n1, a + n0 + 2 * n1, a + n0 + 2 * n1 + n2,
                          a + n0 + 2 * n1 + 2 * n2, a + n0 + 2 * n1 + 2 * n2 + n1};
    }
    net_init(&m, p, seed);

    int status = 0, side = 32, resizes = 0, keepalive_checks = 0, copies = 0;
    uint64_t rs = seed ^ 0xda4c;
    long batches_total = 0, seen = 0;
    double first_epoch_loss = 0, last_epoch_loss = 0, avg_loss = -1;
    /* The batch before a resize, for the keep-alive check. */
    const float *prev_rows = NULL;
    size_t prev_n = 0;
    uint64_t prev_sum = 0;
    double train_t0 = seconds();
    for (long epoch = 0; epoch < epochs && status == 0; epoch++) {
        coordl_stats before, after;
        coordl_get_stats(dn.L, &before);
        double te = seconds(), loss_sum = 0;
        long imgs = 0;
        for (uint64_t i = 0; i < nbatches && status == 0; i++) {
            /* Darknet: if (net->random && count++ % 40 == 0) { dim = ...;
             * resize_network(net, dim, dim); } -- and for the loader: */
            int resized = 0;
            if (batches_total > 0 && batches_total % resize_every == 0) {
                int dim = sizes[splitmix(&rs) % 3];
                if (coordl_dn_resize(&dn, dim, dim) != COORDL_OK) {
                    fprintf(stderr, "darknet_train: %s\n", coordl_dn_errmsg(&dn));
                    status = 1;
                    break;
                }
                side = dim;
                resized = 1;
                resizes++;
            }
            data train;
            coordl_dn_mode mode = copy || (check && batches_total % 5 == 3) ? COORDL_DN_COPY
                                                                           : COORDL_DN_SHALLOW;
            coordl_status rc = coordl_dn_load(&dn, CLASSES, &train, mode);
            if (rc != COORDL_OK) {
                fprintf(stderr, "darknet_train: coordl_dn_load: %s: %s\n", coordl_strerror(rc),
                        coordl_dn_errmsg(&dn));
                status = 1;
                break;
            }
            /* The batch is the size asked for, from the first load after the
             * resize on (and the adapter steps over epoch ends by itself). */
            if (train.w != side || train.h != side || train.X.cols != 3 * side * side ||
                train.X.rows != batch_size || train.y.cols != CLASSES ||
                dn.epoch != (uint64_t)epoch || dn.index != i ||
                train.shallow != (mode == COORDL_DN_SHALLOW)) {
                fprintf(stderr, "darknet_train: FAILED: batch %ld: %dx%d (X %d x %d, y %d x %d, "
                                "shallow %d), epoch %llu index %llu; expected %dx%d (X %ld x %d), "
                                "epoch %ld index %llu, shallow %d%s\n",
                        batches_total, train.w, train.h, train.X.rows, train.X.cols, train.y.rows,
                        train.y.cols, train.shallow, (unsigned long long)dn.epoch,
                        (unsigned long long)dn.index, side, side, batch_size, 3 * side * side,
                        epoch, (unsigned long long)i, mode == COORDL_DN_SHALLOW,
                        resized ? " (first batch after a resize)" : "");
                coordl_dn_free(&train);
                status = 1;
                break;
            }
            copies += mode == COORDL_DN_COPY;

            float loss = train_batch(&m, p, vel, grads, sc, train, (float)lr);
            /* The rows of the previous (shallow) load are still what they
             * were, though a resize and a load came since, and the workers
             * have filled every slot they could (a slot given back too
             * early would hold a newer batch by now). */
            if (check && resized && prev_rows) {
                if (keepalive_checks < 3) wait_for_workers(dn.L);
                if (checksum(prev_rows, prev_n) != prev_sum) {
                    fprintf(stderr, "darknet_train: FAILED: the rows of the batch before the resize "
                                    "changed after it (the adapter must keep them for two loads)\n");
                    coordl_dn_free(&train);
                    status = 1;
                    break;
                }
                keepalive_checks++;
            }
            loss_sum += loss * train.X.rows;
            imgs += train.X.rows;
            seen += train.X.rows;
            avg_loss = avg_loss < 0 ? loss : avg_loss * 0.9 + loss * 0.1;
            if (resized || batches_total == 0)
                printf("%ld, %.3f: %f, %f avg, %f rate, %dx%d, %ld images\n", batches_total + 1,
                       (double)seen / (double)coordl_num_items(dn.L), loss, avg_loss, lr, side, side,
                       seen);
            /* Shallow rows stay valid for one more load: remember them for
             * the check after the next resize. */
            prev_rows = NULL;
            if (check && train.shallow && (batches_total + 1) % resize_every == 0) {
                prev_rows = train.X.vals[0];
                prev_n = (size_t)train.X.rows * (size_t)train.X.cols;
                prev_sum = checksum(prev_rows, prev_n);
            }
            coordl_dn_free(&train); /* Darknet: free_data(train) */
            batches_total++;
        }
        if (status != 0) break;
        double wall = seconds() - te;
        coordl_get_stats(dn.L, &after);
        double mean = loss_sum / (imgs ? imgs : 1);
        if (epoch == 0) first_epoch_loss = mean;
        last_epoch_loss = mean;
        printf("epoch %ld: %ld images, %.0f img/s, loss %.4f, stall %.1f%%\n", epoch, imgs,
               imgs / wall, mean, 100.0 * (double)(after.stall_ns - before.stall_ns) / (wall * 1e9));
        fflush(stdout);
    }
    double train_wall = seconds() - train_t0;
    coordl_dn_close(&dn);
    free(p);
    free(vel);
    free(grads);
    free(sc);
    free(act);

    if (status == 0) {
        printf("darknet_train: %ld batches in %.2f s, %d resizes", batches_total, train_wall, resizes);
        if (check) printf(", %d keep-alive checks, %d COPY loads", keepalive_checks, copies);
        printf("\n");
        if (!(last_epoch_loss < first_epoch_loss)) {
            fprintf(stderr, "darknet_train: FAILED: the last epoch's loss %.4f is not below the "
                            "first epoch's %.4f\n", last_epoch_loss, first_epoch_loss);
            status = 1;
        } else if (check && (resizes == 0 || (!copy && keepalive_checks == 0))) {
            fprintf(stderr, "darknet_train: FAILED: the run had %d resizes and %d keep-alive "
                            "checks; need at least one of each\n", resizes, keepalive_checks);
            status = 1;
        } else {
            printf("darknet_train: OK: loss %.4f (epoch 0) -> %.4f (epoch %ld); every batch had the "
                   "size asked for\n", first_epoch_loss, last_epoch_loss, epochs - 1);
        }
    }
    return status;
}
