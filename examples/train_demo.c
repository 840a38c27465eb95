/*
 * train_demo - train a small CNN, written by hand in C, on batches from coordl.
 *
 *   train_demo --data DIR [--epochs 2] [--cache-fraction 0.5] [--batch-size 64]
 *              [--size 64] [--threads 0] [--lr 0.05] [--seed 0]
 *
 * DIR is an ImageFolder root (DIR/<class>/<image>.jpg; gen_dataset writes
 * one). coordl reads, decodes and augments (RandomResizedCrop + flip) in
 * its own worker threads, keeping a share of the encoded files in its MinIO
 * cache (--cache-fraction); this program only trains:
 *
 *   conv 3x3 stride 2 (3 -> 16) + ReLU
 *   conv 3x3 stride 2 (16 -> 32) + ReLU
 *   global average pool -> linear (32 -> classes) -> softmax cross-entropy
 *
 * with SGD + momentum, forward and backward by hand, each batch split over
 * OpenMP threads (OMP_NUM_THREADS; --threads sets coordl's workers).
 *
 * Per epoch it prints throughput, loss, accuracy, the fraction of the time
 * spent waiting for data (stall), and the cache hit rate: 0 in the first
 * epoch (the cache fills), about the cache fraction after it (MinIO never
 * evicts, so every later epoch hits the same items).
 *
 * Exit status: 0 when the last epoch's mean loss is below the mean loss of
 * the first 50 batches (learning happened), 1 otherwise or on any error,
 * 2 for bad arguments.
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "coordl.h"

/* ---- the model ------------------------------------------------------------ */

#define C1 16 /* channels after conv1 */
#define C2 32 /* channels after conv2 */

/* All parameters live in one float array (and so do their gradients and
 * momenta, with the same layout): the optimizer and the reduction of the
 * per-thread gradients are then single loops. */
typedef struct {
    int k;          /* classes */
    int s0, s1, s2; /* side of the input, after conv1, after conv2 */
    size_t w1, b1, w2, b2, w3, b3, n; /* offsets of each tensor; total */
} model;

static model model_layout(int k, int size)
{
    model m = {.k = k, .s0 = size};
    m.s1 = (m.s0 + 1) / 2; /* 3x3, stride 2, padding 1 */
    m.s2 = (m.s1 + 1) / 2;
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

/* splitmix64 + Box-Muller: a local generator for the initial weights. */
static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float normal(uint64_t *s)
{
    double u1 = ((splitmix(s) >> 11) + 1.0) * 0x1p-53; /* (0, 1] */
    double u2 = (splitmix(s) >> 11) * 0x1p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* He initialisation (std sqrt(2 / fan_in)) for the layers followed by a
 * ReLU; biases start at zero. */
static void model_init(const model *m, float *p, uint64_t seed)
{
    memset(p, 0, m->n * sizeof *p);
    float sd1 = sqrtf(2.0f / (9 * 3)), sd2 = sqrtf(2.0f / (9 * C1)), sd3 = sqrtf(1.0f / C2);
    for (size_t i = 0; i < (size_t)9 * 3 * C1; i++) p[m->w1 + i] = sd1 * normal(&seed);
    for (size_t i = 0; i < (size_t)9 * C1 * C2; i++) p[m->w2 + i] = sd2 * normal(&seed);
    for (size_t i = 0; i < (size_t)m->k * C2; i++) p[m->w3 + i] = sd3 * normal(&seed);
}

/* The convolutions are 3x3, stride 2, padding 1, on channels-last tensors
 * (side x side x channels) with weights w[ky][kx][cin][cout]: the innermost
 * loops then run over contiguous channels, and `omp simd` vectorizes them. */

/* out = bias + conv(in, w). */
static void conv_forward(const float *in, int cin, int sin, const float *w, const float *b,
                         float *out, int cout, int sout)
{
    for (int y = 0; y < sout; y++) {
        for (int x = 0; x < sout; x++) {
            float *o = out + ((size_t)y * sout + x) * cout;
            for (int co = 0; co < cout; co++) o[co] = b[co];
            for (int ky = 0; ky < 3; ky++) {
                int iy = 2 * y + ky - 1;
                if (iy < 0 || iy >= sin) continue; /* zero padding */
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
}

/* Given dout, the loss gradient at the output: adds the gradients of w and b
 * into dw and db and, when din is not NULL, of the input into din. */
static void conv_backward(const float *in, int cin, int sin, const float *w, const float *dout,
                          int cout, int sout, float *dw, float *db, float *din)
{
    for (int y = 0; y < sout; y++) {
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
}

/* Per-thread buffers for one sample: the input made channels-last, the
 * activations and their gradients. */
typedef struct {
    float *x, *a1, *a2, *da1, *da2;
} scratch;

/* Forward and backward for one sample (x: 3 x s0 x s0, planar, as coordl
 * delivers it) with label y. Adds the gradient of (its loss * scale) into
 * grad; returns the loss, and the predicted class in *pred. */
static float train_sample(const model *m, const float *p, const float *x, int y, float scale,
                          float *grad, scratch *s, int *pred)
{
    int n0 = m->s0 * m->s0, n1 = m->s1 * m->s1, n2 = m->s2 * m->s2;
    float pool[C2], dpool[C2], z[1024];

    /* forward */
    for (int i = 0; i < n0; i++)
        for (int c = 0; c < 3; c++) s->x[i * 3 + c] = x[c * n0 + i];
    conv_forward(s->x, 3, m->s0, p + m->w1, p + m->b1, s->a1, C1, m->s1);
    for (int i = 0; i < n1 * C1; i++) s->a1[i] = s->a1[i] > 0 ? s->a1[i] : 0;
    conv_forward(s->a1, C1, m->s1, p + m->w2, p + m->b2, s->a2, C2, m->s2);
    memset(pool, 0, sizeof pool);
    for (int i = 0; i < n2; i++) /* ReLU, then global average pool */
        for (int c = 0; c < C2; c++) {
            float *a = &s->a2[i * C2 + c];
            *a = *a > 0 ? *a : 0;
            pool[c] += *a / n2;
        }
    float zmax = -INFINITY;
    for (int k = 0; k < m->k; k++) {
        z[k] = p[m->b3 + k];
        for (int c = 0; c < C2; c++) z[k] += p[m->w3 + (size_t)k * C2 + c] * pool[c];
        if (z[k] > zmax) { zmax = z[k]; *pred = k; }
    }
    /* softmax cross-entropy, shifted by the max so exp() cannot overflow */
    float zsum = 0;
    for (int k = 0; k < m->k; k++) zsum += expf(z[k] - zmax);
    float loss = logf(zsum) - (z[y] - zmax);

    /* backward: dloss/dz = softmax(z) - onehot(y) */
    memset(dpool, 0, sizeof dpool);
    for (int k = 0; k < m->k; k++) {
        float dz = scale * (expf(z[k] - zmax) / zsum - (k == y));
        grad[m->b3 + k] += dz;
        for (int c = 0; c < C2; c++) {
            grad[m->w3 + (size_t)k * C2 + c] += dz * pool[c];
            dpool[c] += dz * p[m->w3 + (size_t)k * C2 + c];
        }
    }
    for (int i = 0; i < n2; i++) /* back through the pool and the ReLU */
        for (int c = 0; c < C2; c++)
            s->da2[i * C2 + c] = s->a2[i * C2 + c] > 0 ? dpool[c] / n2 : 0;
    memset(s->da1, 0, (size_t)n1 * C1 * sizeof *s->da1);
    conv_backward(s->a1, C1, m->s1, p + m->w2, s->da2, C2, m->s2, grad + m->w2, grad + m->b2, s->da1);
    for (int i = 0; i < n1 * C1; i++)
        if (s->a1[i] <= 0) s->da1[i] = 0;
    conv_backward(s->x, 3, m->s0, p + m->w1, s->da1, C1, m->s1, grad + m->w1, grad + m->b1, NULL);
    return loss;
}

/* One SGD step on a batch; returns the summed loss of its samples and adds
 * the correct predictions to *correct. The batch is split over the OpenMP threads; each
 * thread sums its samples' gradients into its own buffer (no locks, no
 * atomics), then the buffers are added up and the momentum step applied. */
static double train_batch(const model *m, float *p, float *vel, float *grads, scratch *sc,
                          const coordl_batch *b, float lr, long *correct)
{
    int nthreads = omp_get_max_threads();
    size_t row = (size_t)3 * m->s0 * m->s0;
    double loss = 0;
    long hits = 0;
    /* Zeroed here, not in the region: the team may be smaller than
     * nthreads, and every buffer is summed below. */
    memset(grads, 0, (size_t)nthreads * m->n * sizeof *grads);
#pragma omp parallel reduction(+ : loss, hits)
    {
        int t = omp_get_thread_num();
        float *g = grads + (size_t)t * m->n;
#pragma omp for schedule(static)
        for (int i = 0; i < (int)b->n; i++) {
            int pred = -1;
            loss += train_sample(m, p, (const float *)b->data + i * row, b->labels[i],
                                 1.0f / b->n, g, &sc[t], &pred);
            hits += pred == b->labels[i];
        }
    }
    const float momentum = 0.9f;
    for (size_t j = 0; j < m->n; j++) {
        float g = 0;
        for (int t = 0; t < nthreads; t++) g += grads[(size_t)t * m->n + j];
        vel[j] = momentum * vel[j] + g;
        p[j] -= lr * vel[j];
    }
    *correct += hits;
    return loss;
}

/* ---- command line and the dataset's size ----------------------------------- */

static void usage(FILE *to)
{
    fprintf(to,
            "usage: train_demo --data DIR [--epochs 2] [--cache-fraction 0.5]\n"
            "                  [--batch-size 64] [--size 64] [--threads 0] [--lr 0.05] [--seed 0]\n"
            "  DIR: ImageFolder root. --cache-fraction: share of the dataset's bytes\n"
            "  coordl may cache (0..1). --size: side of the training crops (16..512).\n"
            "  --threads: coordl worker threads (0: all usable cores); the model's\n"
            "  OpenMP threads follow OMP_NUM_THREADS.\n");
}

static void bad_arg(const char *opt, const char *val)
{
    fprintf(stderr, "train_demo: bad value for %s: '%s'\n", opt, val ? val : "(missing)");
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

/* nftw callback: adds up the sizes of the regular files under DIR. nftw has
 * no user pointer, hence the file-scope total. */
static uint64_t tree_bytes;
static int add_file(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)path;
    (void)ftw;
    if (type == FTW_F && S_ISREG(st->st_mode)) tree_bytes += (uint64_t)st->st_size;
    return 0;
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const char *data = NULL;
    long epochs = 2, batch_size = 64, size = 64, threads = 0;
    double cache_fraction = 0.5, lr = 0.05;
    uint64_t seed = 0;

    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(opt, "--data")) { if (!val || !*val) bad_arg(opt, val); data = val; }
        else if (!strcmp(opt, "--epochs")) epochs = parse_long(opt, val, 1, 1000);
        else if (!strcmp(opt, "--cache-fraction")) cache_fraction = parse_double(opt, val, 0, 1);
        else if (!strcmp(opt, "--batch-size")) batch_size = parse_long(opt, val, 1, 4096);
        else if (!strcmp(opt, "--size")) size = parse_long(opt, val, 16, 512);
        else if (!strcmp(opt, "--threads")) threads = parse_long(opt, val, 0, 1024);
        else if (!strcmp(opt, "--lr")) lr = parse_double(opt, val, 1e-6, 10);
        else if (!strcmp(opt, "--seed")) seed = (uint64_t)parse_long(opt, val, 0, LONG_MAX);
        else {
            fprintf(stderr, "train_demo: unknown argument '%s'\n", opt);
            usage(stderr);
            return 2;
        }
    }
    if (!data) {
        fprintf(stderr, "train_demo: --data is required\n");
        usage(stderr);
        return 2;
    }

    /* The cache budget is a fraction of the dataset's encoded bytes, which
     * must be known before coordl_open (coordl_stats.dataset_bytes only
     * comes after it). Files coordl does not index count too: harmless. */
    if (nftw(data, add_file, 16, FTW_PHYS) != 0) {
        fprintf(stderr, "train_demo: %s: %s\n", data, strerror(errno));
        return 1;
    }

    coordl_config cfg = coordl_config_default();
    cfg.source = data;
    cfg.pipeline = COORDL_PIPE_TRAIN;
    cfg.batch_size = (uint32_t)batch_size;
    cfg.out_w = cfg.out_h = (uint32_t)size;
    cfg.layout = COORDL_F32_NCHW;
    cfg.cache_bytes = (uint64_t)(cache_fraction * (double)tree_bytes);
    cfg.threads = (int)threads;
    cfg.seed = seed;
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "train_demo: coordl_open: %s\n", coordl_errmsg(NULL));
        return 1;
    }
    uint32_t classes = coordl_num_classes(L);
    if (classes < 2 || classes > 1024) {
        fprintf(stderr, "train_demo: %s: %u classes; this demo handles 2..1024\n", data, classes);
        coordl_close(L);
        return 1;
    }
    coordl_stats st;
    coordl_get_stats(L, &st);
    printf("train_demo: %llu images, %u classes, %.1f MB; cache %.1f MB (%.0f%%); "
           "%u loader threads, %d OpenMP threads; %ldx%ld crops, batch %ld\n",
           (unsigned long long)coordl_num_items(L), classes, st.dataset_bytes / 1e6,
           cfg.cache_bytes / 1e6, 100 * cache_fraction, st.threads, omp_get_max_threads(),
           size, size, batch_size);
    /* what the loader actually runs with, after open resolved the defaults */
    coordl_config eff;
    if (coordl_get_config(L, &eff) == COORDL_OK)
        printf("train_demo: coordl %s runs %d workers on PUs %s (NUMA node %d), cache budget %.1f MB, "
               "%u ring slots\n", COORDL_VERSION, eff.threads, eff.cpuset, eff.numa_node,
               eff.cache_bytes / 1e6, eff.prefetch_batches);

    /* Parameters, momenta, one gradient buffer and one scratch per thread. */
    model m = model_layout((int)classes, (int)size);
    int nthreads = omp_get_max_threads();
    float *p = malloc(m.n * sizeof *p), *vel = calloc(m.n, sizeof *vel);
    float *grads = malloc((size_t)nthreads * m.n * sizeof *grads);
    scratch *sc = calloc((size_t)nthreads, sizeof *sc);
    size_t n0 = (size_t)3 * m.s0 * m.s0, n1 = (size_t)C1 * m.s1 * m.s1, n2 = (size_t)C2 * m.s2 * m.s2;
    size_t per_thread = n0 + 2 * (n1 + n2);
    float *act = malloc((size_t)nthreads * per_thread * sizeof *act);
    if (!p || !vel || !grads || !sc || !act) {
        fprintf(stderr, "train_demo: out of memory\n");
        coordl_close(L);
        return 1;
    }
    for (int t = 0; t < nthreads; t++) {
        float *a = act + (size_t)t * per_thread;
        sc[t] = (scratch){a, a + n0, a + n0 + n1, a + n0 + n1 + n2, a + n0 + 2 * n1 + n2};
    }
    model_init(&m, p, seed);

    /* For the learning check: the summed loss and the images of the first 50
     * batches, and the mean loss of the last epoch. */
    double first_loss = 0, last_loss = 0;
    long first_images = 0, first_epoch_batches = 0;
    int status = 0;
    for (long epoch = 0; epoch < epochs && status == 0; epoch++) {
        coordl_stats before, after;
        coordl_get_stats(L, &before);
        double t0 = seconds(), loss_sum = 0;
        long correct = 0, images = 0, batches = 0;
        uint64_t coordl_epoch = 0; /* the epoch number coordl gave the batches */
        /* The whole of coordl in the training loop: take a batch (it waits
         * only if the workers are behind), train on it in place, give the
         * slot back so the workers can refill it. */
        coordl_batch b;
        coordl_status rc;
        while ((rc = coordl_next(L, &b)) == COORDL_OK) {
            if (b.c != 3 || b.h != (uint32_t)size || b.w != (uint32_t)size ||
                b.layout != COORDL_F32_NCHW) {
                fprintf(stderr, "train_demo: batch of %ux%ux%u, layout %d; expected 3x%ldx%ld\n",
                        b.c, b.h, b.w, (int)b.layout, size, size);
                coordl_release(L, &b);
                status = 1;
                break;
            }
            double loss = train_batch(&m, p, vel, grads, sc, &b, (float)lr, &correct);
            if (epoch == 0 && batches < 50) {
                first_loss += loss;
                first_images += b.n;
            }
            loss_sum += loss;
            images += b.n;
            batches++;
            coordl_epoch = b.epoch;
            coordl_release(L, &b);
        }
        if (status == 0 && rc != COORDL_END_OF_EPOCH) {
            fprintf(stderr, "train_demo: epoch %ld: %s: %s\n", epoch, coordl_strerror(rc),
                    coordl_errmsg(L));
            status = 1;
        }
        if (status != 0) break;
        if (epoch == 0) first_epoch_batches = batches;

        double wall = seconds() - t0;
        coordl_get_stats(L, &after);
        coordl_epoch_stats es = {0};
        coordl_get_epoch_stats(L, coordl_epoch, &es);
        uint64_t fetches = es.cache_hits + es.cache_misses;
        last_loss = loss_sum / (images ? images : 1);
        printf("epoch %ld: %ld images, %.0f img/s, loss %.4f, accuracy %.1f%%, "
               "stall %.1f%%, cache hit rate %.1f%%\n",
               epoch, images, images / wall, last_loss, 100.0 * correct / (images ? images : 1),
               100.0 * (double)(after.stall_ns - before.stall_ns) / (wall * 1e9),
               100.0 * (double)es.cache_hits / (double)(fetches ? fetches : 1));
        fflush(stdout);
    }
    coordl_close(L);

    /* The example's own check: the model learned something. */
    first_loss /= first_images ? first_images : 1;
    if (status != 0) {
        /* already reported */
    } else if (epochs == 1 && first_epoch_batches <= 50) {
        printf("train_demo: one epoch of at most 50 batches: nothing to compare, no learning check\n");
    } else if (!(last_loss < first_loss)) {
        fprintf(stderr, "train_demo: FAILED: the last epoch's mean loss %.4f is not below "
                        "the first 50 batches' %.4f\n", last_loss, first_loss);
        status = 1;
    } else {
        printf("train_demo: mean loss %.4f (first 50 batches) -> %.4f (last epoch): it learned\n",
               first_loss, last_loss);
    }
    free(p);
    free(vel);
    free(grads);
    free(sc);
    free(act);
    return status;
}
