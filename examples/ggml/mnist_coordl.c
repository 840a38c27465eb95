/* SPDX-License-Identifier: MIT */
/*
 * mnist_coordl - ggml's MNIST trainer (ggml examples/mnist, "mnist-fc")
 * with coordl as its dataset, against the real ggml and ggml-opt.
 *
 *   mnist_coordl WORKDIR [EPOCHS]
 *
 * It writes a small MNIST-like set under WORKDIR (28 x 28 grey PGM files
 * in an ImageFolder, train/ and val/: each class a stroke at its own angle
 * and place, with jitter and noise; one train file damaged) and trains
 * ggml's fully connected MNIST model (784 -> 128 ReLU -> 10, cross-entropy,
 * AdamW) with ggml_opt_alloc / ggml_opt_eval, the batches from coordl:
 *
 *   channels = 1                 one plane: the inputs tensor is [784, B],
 *                                ggml_nbytes(inputs) = B x 784 x 4
 *   pipeline = COORDL_PIPE_EXACT the stored pixels, as ggml's MNIST loader
 *                                reads them (no rescale, no crop)
 *   layout = F32_NCHW, mean 0, std 1: pixel / 255, as ggml's loader
 *   drop_last = 1                ggml-opt's inputs have a fixed batch size
 *
 * The loop fetches first and allocates the graph only for a batch it has:
 * ggml_opt_alloc before a fetch that fails would leave a graph allocated and
 * not evaluated, and the next ggml_opt_alloc aborts
 * (GGML_ASSERT(!opt_ctx->eval_ready)). A batch holding a bad image is
 * skipped and training goes on (on_bad_sample = COORDL_BAD_SUBSTITUTE would
 * fill the row from another item instead).
 *
 * Exit status 0 when: every epoch ends with COORDL_END_OF_EPOCH, the one
 * batch holding the damaged file is skipped in each epoch (and only it), the
 * loss falls (last epoch's below half the first's), and validation accuracy
 * is above 0.9. 1 otherwise.
 *
 * Build (tools/check-ggml-example.sh does it): ggml built with cmake, then
 *   cc -O2 -I$GGML/include mnist_coordl.c coordl.o $GGML_LIBS -lstdc++ -lm -lpthread -ljpeg -lhwloc
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-opt.h"

#include "coordl.h"

#define HW 28
#define NINPUT (HW * HW)
#define NHIDDEN 128
#define NCLASSES 10
#define BATCH 50

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double unit(uint64_t *s) { return (double)(splitmix(s) >> 11) * 0x1p-53; }

static int make_dir(const char *p) { return mkdir(p, 0755) == 0 || errno == EEXIST ? 0 : -1; }

/* A "digit" of class k: a thick stroke through the centre at angle k x 18
 * degrees, shifted by up to 3 pixels, with noise. Binary PGM (P5). */
static int write_digit(const char *path, int k, uint64_t *rng)
{
    unsigned char px[NINPUT];
    const double a = k * 3.14159265358979 / NCLASSES, c = cos(a), s = sin(a);
    const double dx = (unit(rng) - 0.5) * 6, dy = (unit(rng) - 0.5) * 6;
    for (int y = 0; y < HW; y++)
        for (int x = 0; x < HW; x++) {
            const double u = x - 13.5 - dx, v = y - 13.5 - dy;
            const double across = fabs(-s * u + c * v), along = fabs(c * u + s * v);
            double val = across < 2.5 && along < 10 ? 230 : 10;
            val += (unit(rng) - 0.5) * 40;
            px[y * HW + x] = (unsigned char)(val < 0 ? 0 : val > 255 ? 255 : val);
        }
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fprintf(f, "P5\n%d %d\n255\n", HW, HW);
    size_t n = fwrite(px, 1, sizeof px, f);
    return fclose(f) == 0 && n == sizeof px ? 0 : -1;
}

static int write_set(const char *root, int per_class, uint64_t seed)
{
    char p[4096];
    uint64_t rng = seed;
    if (make_dir(root)) return -1;
    for (int k = 0; k < NCLASSES; k++) {
        snprintf(p, sizeof p, "%s/%d", root, k);
        if (make_dir(p)) return -1;
        for (int j = 0; j < per_class; j++) {
            snprintf(p, sizeof p, "%s/%d/%04d.pgm", root, k, j);
            if (write_digit(p, k, &rng)) return -1;
        }
    }
    return 0;
}

static coordl *open_loader(const char *root, int shuffle)
{
    coordl_config cfg = coordl_config_default();
    cfg.source = root;
    cfg.pipeline = COORDL_PIPE_EXACT;
    cfg.channels = 1;
    cfg.out_w = cfg.out_h = HW;
    cfg.layout = COORDL_F32_NCHW;
    for (int c = 0; c < 3; c++) {
        cfg.mean[c] = 0.0f;
        cfg.std[c] = 1.0f;
    }
    cfg.batch_size = BATCH;
    cfg.drop_last = 1;
    cfg.shuffle = shuffle;
    cfg.seed = 1;
    cfg.threads = 2;
    cfg.log_level = COORDL_LOG_ERROR; /* the skipped batch is reported by the loop */
    coordl *L = NULL;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "mnist_coordl: coordl_open(%s): %s\n", root, coordl_errmsg(NULL));
        return NULL;
    }
    return L;
}

typedef struct {
    ggml_backend_t backend;
    ggml_backend_sched_t sched;
    struct ggml_context *ctx_static, *ctx_compute;
    ggml_backend_buffer_t buf_static;
    struct ggml_tensor *images, *fc1_w, *fc1_b, *fc2_w, *fc2_b, *logits;
} model;

static void model_init(model *m, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->backend = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(m->backend, 2);
    m->sched = ggml_backend_sched_new(&m->backend, NULL, 1, GGML_DEFAULT_GRAPH_SIZE, false, true);
    struct ggml_init_params ps = {16 * ggml_tensor_overhead(), NULL, true};
    m->ctx_static = ggml_init(ps);
    m->fc1_w = ggml_new_tensor_2d(m->ctx_static, GGML_TYPE_F32, NINPUT, NHIDDEN);
    m->fc1_b = ggml_new_tensor_1d(m->ctx_static, GGML_TYPE_F32, NHIDDEN);
    m->fc2_w = ggml_new_tensor_2d(m->ctx_static, GGML_TYPE_F32, NHIDDEN, NCLASSES);
    m->fc2_b = ggml_new_tensor_1d(m->ctx_static, GGML_TYPE_F32, NCLASSES);
    m->images = ggml_new_tensor_2d(m->ctx_static, GGML_TYPE_F32, NINPUT, BATCH);
    ggml_set_input(m->images);
    m->buf_static = ggml_backend_alloc_ctx_tensors(m->ctx_static, m->backend);
    struct ggml_tensor *w[4] = {m->fc1_w, m->fc1_b, m->fc2_w, m->fc2_b};
    for (int i = 0; i < 4; i++) { /* mnist-common.cpp: normal(0, 0.01) */
        const int64_t n = ggml_nelements(w[i]);
        float *v = malloc((size_t)n * sizeof(float));
        for (int64_t j = 0; j < n; j++) {
            double u1 = unit(&seed) + 1e-12, u2 = unit(&seed);
            v[j] = (float)(0.01 * sqrt(-2 * log(u1)) * cos(2 * 3.14159265358979 * u2));
        }
        ggml_backend_tensor_set(w[i], v, 0, ggml_nbytes(w[i]));
        free(v);
    }
    struct ggml_init_params pc = {1024 * ggml_tensor_overhead() + ggml_graph_overhead(), NULL, true};
    m->ctx_compute = ggml_init(pc);
    for (int i = 0; i < 4; i++) ggml_set_param(w[i]);
    struct ggml_tensor *fc1 = ggml_relu(m->ctx_compute, ggml_add(m->ctx_compute,
        ggml_mul_mat(m->ctx_compute, m->fc1_w, m->images), m->fc1_b));
    m->logits = ggml_add(m->ctx_compute, ggml_mul_mat(m->ctx_compute, m->fc2_w, fc1), m->fc2_b);
    ggml_set_output(m->logits);
}

static void model_free(model *m)
{
    ggml_free(m->ctx_compute);
    ggml_backend_buffer_free(m->buf_static);
    ggml_free(m->ctx_static);
    ggml_backend_sched_free(m->sched);
    ggml_backend_free(m->backend);
}

/* One epoch of L through opt_ctx: fetch first, then allocate and evaluate.
 * Returns the batches evaluated, or -1; *skipped counts bad batches. */
static int64_t run_epoch(coordl *L, ggml_opt_context_t opt_ctx, ggml_opt_result_t result, int train,
                         float *data, int32_t *labels, float *onehot, int64_t *skipped)
{
    struct ggml_tensor *inputs = ggml_opt_inputs(opt_ctx), *lab = ggml_opt_labels(opt_ctx);
    const size_t nbytes = ggml_nbytes(inputs); /* BATCH x 784 floats: coordl's 1-channel rows */
    int64_t done = 0;
    for (;;) {
        /* fetch first: a batch coordl refuses never reaches ggml */
        coordl_status rc = coordl_next_into(L, data, nbytes, labels, BATCH * sizeof(int32_t));
        if (rc == COORDL_END_OF_EPOCH) return done;
        if (rc == COORDL_ERR_CORRUPT || rc == COORDL_ERR_IO || rc == COORDL_ERR_UNSUPPORTED) {
            fprintf(stderr, "mnist_coordl: skipping a batch: %s\n", coordl_errmsg(L));
            ++*skipped;
            continue; /* one bad image: the next batch */
        }
        if (rc != COORDL_OK) {
            fprintf(stderr, "mnist_coordl: coordl_next_into: %s: %s\n", coordl_strerror(rc), coordl_errmsg(L));
            return -1;
        }
        memset(onehot, 0, (size_t)BATCH * NCLASSES * sizeof(float));
        for (int i = 0; i < BATCH; i++) onehot[i * NCLASSES + labels[i]] = 1.0f;
        ggml_opt_alloc(opt_ctx, train);
        ggml_backend_tensor_set(inputs, data, 0, nbytes);
        ggml_backend_tensor_set(lab, onehot, 0, ggml_nbytes(lab));
        ggml_opt_eval(opt_ctx, result);
        done++;
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mnist_coordl WORKDIR [EPOCHS]\n");
        return 2;
    }
    const int epochs = argc > 2 ? atoi(argv[2]) : 6;
    char train_dir[4096], val_dir[4096], bad[4200];
    snprintf(train_dir, sizeof train_dir, "%s/train", argv[1]);
    snprintf(val_dir, sizeof val_dir, "%s/val", argv[1]);
    if (make_dir(argv[1]) || write_set(train_dir, 60, 1) || write_set(val_dir, 20, 2)) {
        fprintf(stderr, "mnist_coordl: cannot write the dataset under %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    snprintf(bad, sizeof bad, "%s/3/0007.pgm", train_dir); /* a bad image: a header and nothing decodable */
    FILE *f = fopen(bad, "wb");
    if (!f || fputs("this is not an image\n", f) < 0 || fclose(f) != 0) return 1;

    coordl *train_L = open_loader(train_dir, 1), *val_L = open_loader(val_dir, 0);
    if (!train_L || !val_L) return 1;
    model m;
    model_init(&m, 7);
    struct ggml_opt_params params = ggml_opt_default_params(m.sched, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
    params.ctx_compute = m.ctx_compute;
    params.inputs = m.images;
    params.outputs = m.logits;
    ggml_opt_context_t opt_ctx = ggml_opt_init(params);
    if (ggml_nbytes(ggml_opt_inputs(opt_ctx)) != (size_t)BATCH * NINPUT * sizeof(float)) return 1;

    float *data = malloc((size_t)BATCH * NINPUT * sizeof(float)), *onehot = malloc((size_t)BATCH * NCLASSES * sizeof(float));
    int32_t labels[BATCH];
    double first_loss = 0, loss = 0, unc, acc = 0;
    int ok = 1;
    const int64_t bpe = (int64_t)coordl_batches_per_epoch(train_L);
    for (int e = 0; e < epochs && ok; e++) {
        ggml_opt_result_t rt = ggml_opt_result_init(), rv = ggml_opt_result_init();
        int64_t skipped = 0, vskipped = 0;
        int64_t n = run_epoch(train_L, opt_ctx, rt, 1, data, labels, onehot, &skipped);
        int64_t nv = run_epoch(val_L, opt_ctx, rv, 0, data, labels, onehot, &vskipped);
        ggml_opt_result_loss(rt, &loss, &unc);
        ggml_opt_result_accuracy(rv, &acc, &unc);
        if (e == 0) first_loss = loss;
        printf("mnist_coordl: epoch %d: %lld train batches (%lld skipped), loss %.4f, %lld val batches, val accuracy %.3f\n",
               e, (long long)n, (long long)skipped, loss, (long long)nv, acc);
        if (n < 0 || nv < 0 || skipped != 1 || n != bpe - 1 || vskipped != 0) {
            fprintf(stderr, "mnist_coordl: FAILED: epoch %d: %lld batches, %lld skipped (expected %lld and 1)\n", e,
                    (long long)n, (long long)skipped, (long long)bpe - 1);
            ok = 0;
        }
        ggml_opt_result_free(rt);
        ggml_opt_result_free(rv);
    }
    if (ok && !(loss < 0.5 * first_loss)) {
        fprintf(stderr, "mnist_coordl: FAILED: loss %.4f is not below half the first epoch's %.4f\n", loss, first_loss);
        ok = 0;
    }
    if (ok && !(acc > 0.9)) {
        fprintf(stderr, "mnist_coordl: FAILED: validation accuracy %.3f\n", acc);
        ok = 0;
    }
    ggml_opt_free(opt_ctx);
    model_free(&m);
    coordl_close(train_L);
    coordl_close(val_L);
    free(data);
    free(onehot);
    printf("mnist_coordl: %s\n", ok ? "PASSED" : "FAILED");
    return ok ? 0 : 1;
}
