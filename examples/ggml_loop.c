/*
 * ggml_loop - coordl in place of ggml_opt_dataset_get_batch, in a copy of
 * ggml-opt's ggml_opt_epoch loop (without ggml itself).
 *
 *   ggml_loop [--workdir DIR] [--check] [--epochs 10] [--per-class 264]
 *             [--batch-size 32] [--size 16] [--lr 0.02] [--threads 0] [--seed 1]
 *
 * ggml-opt keeps a whole dataset in a ggml tensor and copies batch ibatch of
 * a shuffled permutation into the graph's input and label tensors:
 *
 *     for (; ibatch < ibatch_split; ++ibatch) {
 *         ggml_opt_alloc(opt_ctx, true);
 *         ggml_opt_dataset_get_batch(dataset, inputs, labels, ibatch);
 *         ggml_opt_eval(opt_ctx, result_train);
 *         ...
 *
 * With coordl the dataset stays on disk (and in coordl's MinIO cache), and
 * worker threads decode, crop and normalize the next batches while the graph
 * runs. Each batch is copied with coordl_next_into into two host buffers,
 * then into the tensors with ggml_backend_tensor_set, exactly where
 * ggml_opt_dataset_get_batch used to do it. ggml-opt's loop assumes full
 * batches (its inputs tensor has a fixed batch dimension), so the loader
 * runs with drop_last = 1 and coordl_batches_per_epoch(L) sizes the loop.
 * The train/validation split (ggml's idata_split) becomes two loaders: a
 * shuffled, augmented one over the training folder and an unshuffled eval
 * one over a held-out folder.
 *
 * The "model" is what ggml would build from the graph: softmax regression
 * (one dense layer and softmax cross-entropy) on size x size x 3 F32 inputs,
 * trained with SGD. The ggml pieces are stand-ins of a few lines each, marked
 * "ggml:" below.
 *
 * It generates its own data under DIR: images/train and images/val, an
 * ImageFolder of small JPEGs whose class is a colour (with jitter, a random
 * patch of another colour and noise), and tokens/, two llm.c token shards.
 *
 * --check (small and fast, for `make test`) verifies:
 *   (a) coordl_next_into with a data or label buffer one byte too small
 *       returns COORDL_ERR_INVALID, writes nothing (both buffers keep a
 *       sentinel) and consumes nothing: the next call with the right sizes
 *       returns the batch a second, identical loader returns from coordl_next;
 *   (b) every epoch runs exactly coordl_batches_per_epoch full batches (every
 *       row and label written), then coordl_next_into says END_OF_EPOCH;
 *   (c) the training loss went down (last epoch's mean below 0.8 x the first
 *       epoch's);
 *   (d) tokens: coordl_next_into on token shards writes inputs and, into the
 *       labels_or_targets buffer, targets equal to the inputs shifted by one,
 *       both a window of a shard written.
 * Exit status: 0 when every check passes, 1 otherwise or on any error, 2 for
 * bad arguments.
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE and size_t */

#include "coordl.h"

/* ---- small helpers ---------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double unit(uint64_t *s) { return (double)(splitmix(s) >> 11) * 0x1p-53; }

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
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
        fprintf(stderr, "ggml_loop: path too long: %s...\n", out);
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
            fprintf(stderr, "ggml_loop: %s: %s\n", tmp,
                    errno == EEXIST ? "exists and is not a directory" : strerror(errno));
            exit(1);
        }
        *p = saved;
        if (saved == '\0') return;
    }
}

/* rm -r of a folder this program writes, so that no file of an earlier,
 * bigger run stays in the dataset. Exits on failure. */
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
        fprintf(stderr, "ggml_loop: cannot remove %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "ggml_loop: out of memory\n");
        exit(1);
    }
    return p;
}

/* ---- the image dataset: one colour per class -------------------------------- */

struct jpeg_err {
    struct jpeg_error_mgr mgr;
    const char *path;
};

static void jpeg_fail(j_common_ptr cinfo)
{
    struct jpeg_err *e = (struct jpeg_err *)cinfo->err;
    char msg[JMSG_LENGTH_MAX];
    e->mgr.format_message(cinfo, msg);
    fprintf(stderr, "ggml_loop: %s: libjpeg: %s\n", e->path, msg);
    exit(1);
}

static void write_jpeg(const char *path, const uint8_t *rgb, int w, int h)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "ggml_loop: %s: %s\n", path, strerror(errno));
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
    jpeg_set_quality(&c, 90, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * w * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    if (fclose(f) != 0) {
        fprintf(stderr, "ggml_loop: %s: %s\n", path, strerror(errno));
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

/* DIR/<split>/class_<k>/img_<i>.jpg: a background of the class's hue
 * (jittered), a patch of a random colour, noise; sides 24..48 px. */
static uint64_t write_images(const char *dir, int classes, int per_class, uint64_t seed)
{
    uint64_t bytes = 0;
    uint8_t *img = xmalloc(48 * 48 * 3);
    char path[PATH_MAX];
    for (int k = 0; k < classes; k++) {
        path_fmt(path, "%s/class_%02d", dir, k);
        make_dirs(path);
        for (int i = 0; i < per_class; i++) {
            uint64_t s = seed ^ ((uint64_t)k << 32) ^ (uint64_t)i * 0x9e3779b97f4a7c15ull;
            int w = 24 + (int)(splitmix(&s) % 25), h = 24 + (int)(splitmix(&s) % 25);
            double bg[3], fg[3];
            hsv_to_rgb((double)k / classes + (unit(&s) - 0.5) * 0.2, 0.3 + 0.7 * unit(&s),
                       0.5 + 0.5 * unit(&s), bg);
            hsv_to_rgb(unit(&s), unit(&s), unit(&s), fg);
            int pw = 4 + (int)(splitmix(&s) % (uint64_t)(w / 2)), ph = 4 + (int)(splitmix(&s) % (uint64_t)(h / 2));
            int px = (int)(splitmix(&s) % (uint64_t)(w - pw)), py = (int)(splitmix(&s) % (uint64_t)(h - ph));
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    int in = x >= px && x < px + pw && y >= py && y < py + ph;
                    for (int c = 0; c < 3; c++) {
                        double v = (in ? fg[c] : bg[c]) + (unit(&s) - 0.5) * 40;
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

/* ---- ggml: stand-ins for the pieces of ggml-opt the loop touches ------------- */

/* ggml: a 2-D F32 tensor [ne0, ne1] in backend memory (here: host memory). */
typedef struct {
    int64_t ne[2];
    float *data;
} tensor;

/* ggml: ggml_backend_tensor_set(tensor, data, offset, size) copies host bytes
 * into a tensor that may live on a GPU. */
static void backend_tensor_set(tensor *t, const void *src, size_t offset, size_t size)
{
    memcpy((char *)t->data + offset, src, size);
}

/* ggml: ggml_opt_result: what ggml_opt_result_loss/_accuracy report. */
typedef struct {
    int64_t ndata, ncorrect, nbatches;
    double loss_sum; /* summed over batches of the per-batch mean loss */
} result;

/* ggml: ggml_opt_context: the graph's inputs [D, B] and labels [K, B] (one-hot
 * F32, as ggml's cross-entropy loss takes them), and the parameters. */
typedef struct {
    tensor inputs, labels;
    int64_t D, K, B;
    float *W, *bias, *gW, *gb, *probs;
    float lr;
} opt_ctx;

/* ggml: ggml_opt_alloc(opt_ctx, backward) + ggml_opt_eval(opt_ctx, result):
 * dense layer + softmax cross-entropy on the batch in the input and label
 * tensors, and with backward one SGD step. */
static void opt_eval(opt_ctx *o, result *res, int backward)
{
    const int64_t D = o->D, K = o->K, B = o->B;
    double loss = 0;
    int64_t correct = 0;
    if (backward) {
        memset(o->gW, 0, (size_t)(K * D) * sizeof *o->gW);
        memset(o->gb, 0, (size_t)K * sizeof *o->gb);
    }
    for (int64_t i = 0; i < B; i++) {
        const float *x = o->inputs.data + i * D, *y = o->labels.data + i * K;
        float *z = o->probs;
        float zmax = -INFINITY, zsum = 0;
        int64_t pred = 0, truth = 0;
        for (int64_t k = 0; k < K; k++) {
            float acc = o->bias[k];
            const float *w = o->W + k * D;
            for (int64_t d = 0; d < D; d++) acc += w[d] * x[d];
            z[k] = acc;
            if (acc > zmax) { zmax = acc; pred = k; }
            if (y[k] > y[truth]) truth = k;
        }
        for (int64_t k = 0; k < K; k++) zsum += z[k] = expf(z[k] - zmax);
        for (int64_t k = 0; k < K; k++) {
            z[k] /= zsum;
            loss -= y[k] * logf(z[k] > 1e-30f ? z[k] : 1e-30f);
        }
        correct += pred == truth;
        if (!backward) continue;
        for (int64_t k = 0; k < K; k++) {
            float g = (z[k] - y[k]) / (float)B;
            o->gb[k] += g;
            float *gw = o->gW + k * D;
            for (int64_t d = 0; d < D; d++) gw[d] += g * x[d];
        }
    }
    if (backward) {
        for (int64_t j = 0; j < K * D; j++) o->W[j] -= o->lr * o->gW[j];
        for (int64_t k = 0; k < K; k++) o->bias[k] -= o->lr * o->gb[k];
    }
    res->ndata += B;
    res->ncorrect += correct;
    res->nbatches++;
    res->loss_sum += loss / (double)B;
}

/* ggml: ggml_opt_epoch_callback_progress_bar, as one line at the end. */
static void progress(int train, const result *res, int64_t ibatch, int64_t ibatch_max, double t0)
{
    if (ibatch != ibatch_max) return;
    printf("  %s data=%06lld/%06lld, loss=%.4f, accuracy=%.1f%%, t=%.2fs\n", train ? "train:" : "val:  ",
           (long long)res->ndata, (long long)res->ndata, res->loss_sum / (double)res->nbatches,
           100.0 * (double)res->ncorrect / (double)res->ndata, seconds() - t0);
}

/* ---- the loop: ggml_opt_epoch with coordl as the dataset ---------------------- */

/* Host buffers for one batch, as ggml_opt_dataset_get_batch_host fills them. */
typedef struct {
    void *data;         /* B rows of D floats (coordl's F32 NCHW rows) */
    size_t data_bytes;
    int32_t *labels;    /* B int32 class labels */
    size_t label_bytes;
    float *onehot;      /* B x K floats for the label tensor */
} host_batch;

/* What replaces ggml_opt_dataset_get_batch(dataset, inputs, labels, ibatch):
 * the next batch of the loader's epoch into the host buffers, then into the
 * tensors. (ibatch is implicit: coordl hands out its batches in order.) */
static coordl_status get_batch(coordl *L, host_batch *hb, opt_ctx *o, int check)
{
    if (check) { /* sentinels, so that (b) can tell that every byte was written */
        memset(hb->data, 0xA5, hb->data_bytes);
        memset(hb->labels, 0xA5, hb->label_bytes);
    }
    coordl_status rc = coordl_next_into(L, hb->data, hb->data_bytes, hb->labels, hb->label_bytes);
    if (rc != COORDL_OK) return rc;
    if (check) {
        uint32_t sentinel, first, last;
        memset(&sentinel, 0xA5, sizeof sentinel);
        for (int64_t r = 0; r < o->B; r++) {
            const float *row = (const float *)hb->data + r * o->D;
            memcpy(&first, row, sizeof first);
            memcpy(&last, row + o->D - 1, sizeof last);
            if (first == sentinel || last == sentinel) {
                fprintf(stderr, "ggml_loop: FAILED (b): row %lld of a batch of %lld was not written\n",
                        (long long)r, (long long)o->B);
                return COORDL_ERR_INVALID;
            }
            if (hb->labels[r] < 0 || hb->labels[r] >= o->K) {
                fprintf(stderr, "ggml_loop: FAILED (b): label %lld of the batch is %d (not written?)\n",
                        (long long)r, hb->labels[r]);
                return COORDL_ERR_INVALID;
            }
        }
    }
    /* ggml's cross-entropy loss takes one-hot F32 labels [K, B]. */
    memset(hb->onehot, 0, (size_t)(o->B * o->K) * sizeof *hb->onehot);
    for (int64_t i = 0; i < o->B; i++) hb->onehot[i * o->K + hb->labels[i]] = 1.0f;
    /* ggml: from here on it is ggml's: ggml_backend_tensor_set copies the
     * host buffers into the graph's input and label tensors. */
    backend_tensor_set(&o->inputs, hb->data, 0, hb->data_bytes);
    backend_tensor_set(&o->labels, hb->onehot, 0, (size_t)(o->B * o->K) * sizeof *hb->onehot);
    return COORDL_OK;
}

/* ggml_opt_epoch, with the dataset replaced by a training and an eval
 * loader. Returns 0, or -1 after printing why. */
static int opt_epoch(coordl *train_L, int64_t train_batch, coordl *eval_L, int64_t eval_batch,
                     opt_ctx *o, host_batch *hb, result *result_train, result *result_eval, int check)
{
    /* ggml: nbatches = ndata / ndata_batch, with GGML_ASSERT that it divides:
     * with drop_last = 1 coordl_batches_per_epoch counts full batches only. */
    coordl *loaders[2] = {train_L, eval_L};
    for (int pass = 0; pass < 2; pass++) {
        coordl *L = loaders[pass];
        const int train = pass == 0;
        o->B = train ? train_batch : eval_batch; /* ggml: the inputs' ne[1] */
        const int64_t nbatches = (int64_t)coordl_batches_per_epoch(L);
        double t_loop_start = seconds();
        for (int64_t ibatch = 0; ibatch < nbatches; ++ibatch) {
            /* was: ggml_opt_dataset_get_batch(dataset, inputs, labels, ibatch); */
            coordl_status rc = get_batch(L, hb, o, check);
            if (rc != COORDL_OK) {
                fprintf(stderr, "ggml_loop: %s batch %lld of %lld: %s: %s\n", train ? "train" : "eval",
                        (long long)ibatch, (long long)nbatches, coordl_strerror(rc), coordl_errmsg(L));
                return -1;
            }
            /* ggml: ggml_opt_alloc(opt_ctx, train); ggml_opt_eval(opt_ctx, result) */
            opt_eval(o, train ? result_train : result_eval, train);
            progress(train, train ? result_train : result_eval, ibatch + 1, nbatches, t_loop_start);
        }
        /* The epoch ends: coordl says so once, then starts the next one.
         * (ggml needs no such call; coordl needs it to move to epoch e+1.) */
        coordl_status rc = coordl_next_into(L, hb->data, hb->data_bytes, hb->labels, hb->label_bytes);
        if (rc != COORDL_END_OF_EPOCH) {
            fprintf(stderr, "ggml_loop: FAILED (b): after %lld batches the %s loader gave %s, not "
                            "END_OF_EPOCH\n", (long long)nbatches, train ? "train" : "eval",
                    coordl_strerror(rc));
            return -1;
        }
    }
    return 0;
}

/* ---- (a): a too-small buffer consumes nothing --------------------------------- */

static int check_too_small(const coordl_config *cfg, size_t row_bytes)
{
    coordl *A, *B;
    if (coordl_open(cfg, &A) != COORDL_OK) {
        fprintf(stderr, "ggml_loop: coordl_open: %s\n", coordl_errmsg(NULL));
        return -1;
    }
    if (coordl_open(cfg, &B) != COORDL_OK) {
        fprintf(stderr, "ggml_loop: coordl_open: %s\n", coordl_errmsg(NULL));
        coordl_close(A);
        return -1;
    }
    const size_t n = cfg->batch_size, data_bytes = n * row_bytes, label_bytes = n * sizeof(int32_t);
    uint8_t *data = xmalloc(data_bytes), *labels = xmalloc(label_bytes);
    const int64_t nbatches = (int64_t)coordl_batches_per_epoch(A);
    int bad = 0, tries = 0;
    for (int64_t i = 0; i <= nbatches && !bad; i++) {
        /* Every other batch (and the end of the epoch): first a data buffer,
         * then a label buffer, one byte too small. */
        for (int which = 0; which < 2 && i % 2 == 0 && i < nbatches; which++) {
            memset(data, 0x5A, data_bytes);
            memset(labels, 0x5A, label_bytes);
            coordl_status rc = coordl_next_into(A, data, data_bytes - (which == 0),
                                                labels, label_bytes - (which == 1));
            int untouched = 1;
            for (size_t j = 0; j < data_bytes; j++) untouched &= data[j] == 0x5A;
            for (size_t j = 0; j < label_bytes; j++) untouched &= labels[j] == 0x5A;
            if (rc != COORDL_ERR_INVALID || !untouched) {
                fprintf(stderr, "ggml_loop: FAILED (a): batch %lld, %s buffer one byte short: %s, "
                                "buffers %s\n", (long long)i, which == 0 ? "data" : "label",
                        coordl_strerror(rc), untouched ? "untouched" : "WRITTEN");
                bad = 1;
            }
            tries++;
        }
        coordl_batch b;
        coordl_status rb = coordl_next(B, &b);
        coordl_status ra = coordl_next_into(A, data, data_bytes, labels, label_bytes);
        if (ra != rb) {
            fprintf(stderr, "ggml_loop: FAILED (a): batch %lld: coordl_next_into gave %s, the "
                            "reference loader's coordl_next %s\n", (long long)i,
                    coordl_strerror(ra), coordl_strerror(rb));
            bad = 1;
        } else if (rb == COORDL_OK) {
            /* Identical configurations give identical batches (every random
             * choice is a function of seed, epoch and item): had the short
             * call consumed a batch, this would be the reference's next one. */
            if (b.n != n || b.index != (uint64_t)i || memcmp(data, b.data, data_bytes) != 0 ||
                memcmp(labels, b.labels, label_bytes) != 0) {
                fprintf(stderr, "ggml_loop: FAILED (a): batch %lld copied by coordl_next_into "
                                "differs from the reference loader's batch %llu\n",
                        (long long)i, (unsigned long long)b.index);
                bad = 1;
            }
            coordl_release(B, &b);
        }
    }
    coordl_close(A);
    coordl_close(B);
    free(data);
    free(labels);
    if (!bad)
        printf("check (a): %d one-byte-short calls: COORDL_ERR_INVALID, buffers untouched, nothing "
               "consumed (%lld batches equal to a second loader's)\n", tries, (long long)nbatches);
    return bad;
}

/* ---- (d): tokens into caller buffers ---------------------------------------- */

static int write_shard(const char *path, int version, const uint32_t *tok, size_t n)
{
    int32_t header[256] = {0};
    header[0] = version == 1 ? 20240520 : 20240801;
    header[1] = version;
    header[2] = (int32_t)n;
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(header, sizeof header, 1, f) == 1;
    for (size_t i = 0; ok && i < n; i++) {
        uint16_t v16 = (uint16_t)tok[i];
        ok = version == 1 ? fwrite(&v16, 2, 1, f) == 1 : fwrite(&tok[i], 4, 1, f) == 1;
    }
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) fprintf(stderr, "ggml_loop: %s: %s\n", path, strerror(errno));
    return ok ? 0 : -1;
}

static int check_tokens(const char *workdir, uint64_t seed)
{
    enum { T = 32, BS = 8, NS = 2 };
    char dir[PATH_MAX], path[PATH_MAX];
    path_fmt(dir, "%s/tokens", workdir);
    remove_tree(dir);
    make_dirs(dir);
    size_t ntok[NS] = {3001, 2050};
    uint32_t *tok[NS];
    for (int k = 0; k < NS; k++) {
        tok[k] = xmalloc(ntok[k] * sizeof *tok[k]);
        uint64_t s = seed + 77 * (uint64_t)k;
        for (size_t i = 0; i < ntok[k]; i++) tok[k][i] = (uint32_t)(splitmix(&s) % 50000);
        path_fmt(path, "%s/shard_%d.bin", dir, k);
        if (write_shard(path, k == 0 ? 1 : 7, tok[k], ntok[k]) != 0) return -1;
    }
    coordl_config cfg = coordl_config_default();
    cfg.source = dir; /* a folder: its files sorted by name */
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.seq_len = T;
    cfg.batch_size = BS;
    cfg.drop_last = 1;
    cfg.seed = seed;
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "ggml_loop: coordl_open(%s): %s\n", dir, coordl_errmsg(NULL));
        return -1;
    }
    /* llama.cpp: ggml_opt_dataset_get_batch_host(dataset, tokens.data(),
     * n_ctx*sizeof(llama_token), labels_sparse.data(), idata) */
    int32_t inputs[BS * T], targets[BS * T];
    const uint64_t nbatches = coordl_batches_per_epoch(L);
    uint64_t windows = ((ntok[0] - 1) / T + (ntok[1] - 1) / T), got = 0;
    int bad = 0;
    /* A targets buffer one byte short: refused, nothing consumed. */
    if (coordl_next_into(L, inputs, sizeof inputs, targets, sizeof targets - 1) != COORDL_ERR_INVALID) {
        fprintf(stderr, "ggml_loop: FAILED (d): a targets buffer one byte short was accepted\n");
        bad = 1;
    }
    coordl_status rc;
    while (!bad && (rc = coordl_next_into(L, inputs, sizeof inputs, targets, sizeof targets)) == COORDL_OK) {
        for (int r = 0; r < BS && !bad; r++) {
            const int32_t *in = inputs + r * T, *tg = targets + r * T;
            int found = 0;
            for (int k = 0; k < NS && !found; k++)
                for (size_t w = 0; w < (ntok[k] - 1) / T && !found; w++) {
                    const uint32_t *t = tok[k] + w * T;
                    found = 1;
                    for (int j = 0; j < T && found; j++)
                        found = (uint32_t)in[j] == t[j] && (uint32_t)tg[j] == t[j + 1];
                }
            for (int j = 0; j + 1 < T; j++) bad |= tg[j] != in[j + 1];
            if (!found || bad) {
                fprintf(stderr, "ggml_loop: FAILED (d): batch %llu row %d: %s\n",
                        (unsigned long long)got, r,
                        bad ? "targets are not the inputs shifted by one" : "not a window of a shard");
                bad = 1;
            }
        }
        got++;
    }
    if (!bad && (rc != COORDL_END_OF_EPOCH || got != nbatches || nbatches != windows / BS)) {
        fprintf(stderr, "ggml_loop: FAILED (d): %llu batches then %s; expected %llu then "
                        "END_OF_EPOCH (%llu windows)\n", (unsigned long long)got, coordl_strerror(rc),
                (unsigned long long)(windows / BS), (unsigned long long)windows);
        bad = 1;
    }
    if (!bad)
        printf("check (d): tokens: %llu batches of %d x %d into caller buffers, targets = inputs "
               "shifted by one, every row a shard window\n", (unsigned long long)got, BS, T);
    coordl_close(L);
    for (int k = 0; k < NS; k++) free(tok[k]);
    return bad;
}

/* ---- command line ---------------------------------------------------------- */

static void usage(FILE *to)
{
    fprintf(to,
            "usage: ggml_loop [--workdir DIR] [--check] [--epochs 10] [--per-class 264]\n"
            "                 [--batch-size 32] [--size 16] [--lr 0.02] [--threads 0] [--seed 1]\n"
            "  Writes a 5-class JPEG dataset under DIR/images (and token shards under\n"
            "  DIR/tokens with --check) and trains softmax regression in a copy of\n"
            "  ggml-opt's epoch loop fed by coordl_next_into. --check: a small run\n"
            "  (6 epochs, 66 per class) that checks itself; exit 1 if a check fails.\n");
}

static void bad_arg(const char *opt, const char *val)
{
    fprintf(stderr, "ggml_loop: bad value for %s: '%s'\n", opt, val ? val : "(missing)");
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

int main(int argc, char **argv)
{
    const char *workdir = "ggml_loop-data";
    int check = 0;
    long epochs = -1, per_class = -1, batch_size = 32, size = 16, threads = 0;
    double lr = 0.02;
    uint64_t seed = 1;
    enum { CLASSES = 5 };

    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(opt, "--check")) { check = 1; continue; }
        else if (!strcmp(opt, "--workdir")) { if (!val || !*val) bad_arg(opt, val); workdir = val; }
        else if (!strcmp(opt, "--epochs")) epochs = parse_long(opt, val, 1, 10000);
        else if (!strcmp(opt, "--per-class")) per_class = parse_long(opt, val, 2, 100000);
        else if (!strcmp(opt, "--batch-size")) batch_size = parse_long(opt, val, 1, 4096);
        else if (!strcmp(opt, "--size")) size = parse_long(opt, val, 4, 256);
        else if (!strcmp(opt, "--threads")) threads = parse_long(opt, val, 0, 1024);
        else if (!strcmp(opt, "--lr")) lr = parse_double(opt, val, 1e-6, 100);
        else if (!strcmp(opt, "--seed")) seed = (uint64_t)parse_long(opt, val, 0, LONG_MAX);
        else {
            fprintf(stderr, "ggml_loop: unknown argument '%s'\n", opt);
            usage(stderr);
            return 2;
        }
        i++; /* the option's value */
    }
    /* --check: 330 training images (10 full batches of 32 and 10 images that
     * drop_last leaves out), 6 epochs. Without it: 4x the images, 10 epochs. */
    if (epochs < 0) epochs = check ? 6 : 10;
    if (per_class < 0) per_class = check ? 66 : 264;
    if (per_class * CLASSES < batch_size) {
        fprintf(stderr, "ggml_loop: %ld images are fewer than one batch of %ld\n",
                per_class * CLASSES, batch_size);
        return 2;
    }

    /* ---- the dataset ------------------------------------------------------ */
    double t0 = seconds();
    char images[PATH_MAX], train_dir[PATH_MAX], val_dir[PATH_MAX];
    path_fmt(images, "%s/images", workdir);
    path_fmt(train_dir, "%s/train", images);
    path_fmt(val_dir, "%s/val", images);
    make_dirs(workdir);
    remove_tree(images);
    long val_per_class = per_class / 3 > 4 ? per_class / 3 : 4;
    uint64_t train_bytes = write_images(train_dir, CLASSES, (int)per_class, seed);
    write_images(val_dir, CLASSES, (int)val_per_class, seed + 1000);
    printf("ggml_loop: wrote %ld + %ld JPEGs (%d colour classes) under %s in %.2f s\n",
           per_class * CLASSES, val_per_class * CLASSES, CLASSES, images, seconds() - t0);

    /* ---- the loaders ------------------------------------------------------ */
    coordl_config cfg = coordl_config_default();
    cfg.source = train_dir;
    cfg.pipeline = COORDL_PIPE_TRAIN;
    cfg.batch_size = (uint32_t)batch_size;
    cfg.drop_last = 1; /* ggml-opt's loop asserts full batches */
    cfg.out_w = cfg.out_h = (uint32_t)size;
    cfg.layout = COORDL_F32_NCHW; /* each row: D = 3 x size x size floats, ggml's ne0 */
    cfg.scale_min = 0.25f;        /* RandomResizedCrop's area range: keep most of the colour */
    cfg.cache_bytes = train_bytes; /* the whole training set: later epochs read memory only */
    cfg.threads = (int)threads;
    cfg.seed = seed;
    coordl_config eval_cfg = cfg;
    eval_cfg.source = val_dir;
    eval_cfg.pipeline = COORDL_PIPE_EVAL;
    eval_cfg.shuffle = 0;
    eval_cfg.batch_size = (uint32_t)(val_per_class * CLASSES < batch_size ? val_per_class * CLASSES
                                                                          : batch_size);
    const size_t D = (size_t)3 * size * size;

    int status = 0;
    if (check) {
        int rc = check_too_small(&cfg, D * sizeof(float));
        if (rc < 0) return 1;
        status |= rc;
    }

    coordl *train_L, *eval_L;
    if (coordl_open(&cfg, &train_L) != COORDL_OK) {
        fprintf(stderr, "ggml_loop: coordl_open(%s): %s\n", train_dir, coordl_errmsg(NULL));
        return 1;
    }
    if (coordl_open(&eval_cfg, &eval_L) != COORDL_OK) {
        fprintf(stderr, "ggml_loop: coordl_open(%s): %s\n", val_dir, coordl_errmsg(NULL));
        coordl_close(train_L);
        return 1;
    }
    /* The eval loader's batch may be smaller: it runs with drop_last too,
     * and its own count of full batches. One set of host buffers of the
     * larger batch size serves both (coordl_next_into takes any buffer at
     * least as large as the batch). */
    uint64_t nb_train = coordl_batches_per_epoch(train_L), nb_eval = coordl_batches_per_epoch(eval_L);
    printf("ggml_loop: train %llu images -> %llu batches of %ld per epoch (drop_last leaves %llu "
           "out); val %llu images -> %llu batches of %u\n",
           (unsigned long long)coordl_num_items(train_L), (unsigned long long)nb_train, batch_size,
           (unsigned long long)(coordl_num_items(train_L) - nb_train * (uint64_t)batch_size),
           (unsigned long long)coordl_num_items(eval_L), (unsigned long long)nb_eval,
           eval_cfg.batch_size);
    if (nb_train != coordl_num_items(train_L) / (uint64_t)batch_size) {
        fprintf(stderr, "ggml_loop: FAILED (b): coordl_batches_per_epoch %llu, expected %llu full "
                        "batches\n", (unsigned long long)nb_train,
                (unsigned long long)(coordl_num_items(train_L) / (uint64_t)batch_size));
        status = 1;
    }

    /* ggml: the "graph": tensors and parameters, zero-initialized. */
    opt_ctx o = {.D = (int64_t)D, .K = CLASSES, .B = batch_size, .lr = (float)lr};
    o.inputs = (tensor){{o.D, o.B}, xmalloc(D * (size_t)batch_size * sizeof(float))};
    o.labels = (tensor){{o.K, o.B}, xmalloc((size_t)(CLASSES * batch_size) * sizeof(float))};
    o.W = calloc(D * CLASSES, sizeof *o.W);
    o.gW = xmalloc(D * CLASSES * sizeof *o.gW);
    o.bias = calloc(CLASSES, sizeof *o.bias);
    o.gb = xmalloc(CLASSES * sizeof *o.gb);
    o.probs = xmalloc(CLASSES * sizeof *o.probs);
    if (!o.W || !o.bias) {
        fprintf(stderr, "ggml_loop: out of memory\n");
        return 1;
    }
    host_batch hb;
    hb.data_bytes = D * (size_t)batch_size * sizeof(float);
    hb.label_bytes = (size_t)batch_size * sizeof(int32_t);
    hb.data = xmalloc(hb.data_bytes);
    hb.labels = xmalloc(hb.label_bytes);
    hb.onehot = xmalloc((size_t)(CLASSES * batch_size) * sizeof(float));

    double first_loss = 0, last_loss = 0, train_t0 = seconds();
    for (long epoch = 0; epoch < epochs && status == 0; epoch++) {
        result rtrain = {0}, reval = {0};
        printf("epoch %ld:\n", epoch);
        /* ggml_opt_epoch(opt_ctx, dataset, result_train, result_val, idata_split,
         *                callback_train, callback_eval) */
        int rc = opt_epoch(train_L, batch_size, eval_L, (int64_t)eval_cfg.batch_size, &o, &hb,
                           &rtrain, &reval, check);
        if (rc != 0) { status = 1; break; }
        double loss = rtrain.loss_sum / (double)rtrain.nbatches;
        if (epoch == 0) first_loss = loss;
        last_loss = loss;
        if (check && (uint64_t)rtrain.nbatches != nb_train) {
            fprintf(stderr, "ggml_loop: FAILED (b): epoch %ld ran %lld batches, not %llu\n", epoch,
                    (long long)rtrain.nbatches, (unsigned long long)nb_train);
            status = 1;
        }
    }
    double train_wall = seconds() - train_t0;
    coordl_stats st;
    coordl_get_stats(train_L, &st);
    coordl_close(train_L);
    coordl_close(eval_L);
    printf("ggml_loop: %ld epochs in %.2f s, stall %.1f%% of the time\n", epochs, train_wall,
           100.0 * (double)st.stall_ns / (train_wall * 1e9));

    if (status == 0 && check) {
        printf("check (b): every epoch ran coordl_batches_per_epoch = %llu full batches, then "
               "END_OF_EPOCH\n", (unsigned long long)nb_train);
        int rc = check_tokens(workdir, seed);
        if (rc != 0) status = 1;
    }
    if (status == 0) {
        if (!(last_loss < 0.8 * first_loss)) {
            fprintf(stderr, "ggml_loop: FAILED (c): the last epoch's loss %.4f is not below 0.8 x "
                            "the first epoch's %.4f\n", last_loss, first_loss);
            status = 1;
        } else {
            printf("ggml_loop: OK: training loss %.4f (epoch 0) -> %.4f (epoch %ld)\n", first_loss,
                   last_loss, epochs - 1);
        }
    }
    free(o.inputs.data);
    free(o.labels.data);
    free(o.W);
    free(o.gW);
    free(o.bias);
    free(o.gb);
    free(o.probs);
    free(hb.data);
    free(hb.labels);
    free(hb.onehot);
    return status;
}
