/*
 * llm_tokens - an llm.c-style trainer fed by coordl's token pipeline.
 *
 *   llm_tokens [--workdir DIR] [--check] [--epochs 8] [--vocab 128]
 *              [--tokens 80000] [--seq-len 64] [--batch-size 16] [--lr 0.05]
 *              [--threads 0] [--seed 1] [--into]
 *
 * It writes its own token shards in llm.c's format under DIR/shards (a
 * header of 256 int32: magic 20240520, version 1, token count, then uint16
 * tokens; or magic 20240801, version 7 and uint32 tokens): three uint16
 * shards and one uint32 shard, sampled from a synthetic "language", a Markov
 * chain over --vocab tokens in which every token has four likely successors
 * and a small chance of any token. Every row of the chain has the same
 * probabilities, so the chain's entropy rate H is known exactly: the lowest
 * mean loss any next-token model can reach.
 *
 * coordl does what llm.c's DataLoader does, in its worker threads: it cuts
 * every shard into windows of seq_len + 1 tokens, shuffles the windows of
 * all shards per epoch, keeps the shards' bytes in its MinIO cache, and
 * hands out batches of inputs (tokens 0..seq_len-1 of each window) and
 * targets (tokens 1..seq_len) as int32, zero copy:
 *
 *     cfg.pipeline = COORDL_PIPE_TOKENS;
 *     cfg.source   = "DIR/shards/shard_*.bin";   // a glob, a folder, a file or a list
 *     cfg.seq_len  = T;  cfg.batch_size = B;
 *     while (coordl_next(L, &b) == COORDL_OK) {  // b.data: B x T inputs, b.targets: B x T
 *         loss = train_step(b.data, b.targets, b.n);
 *         coordl_release(L, &b);
 *     }
 *
 * With --into it uses coordl_next_into instead, copying each batch into two
 * caller-owned int32 arrays as llm.c's DataLoader fills loader->inputs and
 * loader->targets.
 *
 * The model is a bigram table: logits[next] = W[current][next], softmax
 * cross-entropy, plain SGD. A bigram model is exactly right for a Markov
 * chain, so its loss goes from log(vocab) down to about H.
 *
 * --check (small and fast, for `make test`): besides training, every row is
 * compared against the shards written (inputs are a window at a multiple of
 * seq_len in the shard named by the label, targets the same window shifted
 * by one), every window must come exactly once per epoch, the glob, folder
 * and list-file forms of the source must index the same windows, and a
 * truncated shard must fail coordl_open with COORDL_ERR_CORRUPT naming it.
 * Exit status: 0 when the checks pass and the mean loss of the last 20 steps
 * is below 0.8 x that of the first 20 steps and within 0.25 nats of H (a
 * loss far below H would mean the targets leak into the inputs); 1
 * otherwise or on any error; 2 for bad arguments.
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
#include <unistd.h>

#include "coordl.h"

#define NSHARDS 4   /* three uint16 shards and one uint32 shard */
#define NSUCC 4     /* likely successors of every token */
#define EPS 0.05    /* chance of a uniformly drawn token instead */

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
        fprintf(stderr, "llm_tokens: path too long: %s...\n", out);
        exit(1);
    }
}

/* mkdir -p. Returns 0, or -1 with a message. */
static int make_dirs(const char *path)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) {
        fprintf(stderr, "llm_tokens: %s: path too long\n", path);
        return -1;
    }
    for (char *p = tmp + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        struct stat st;
        if (mkdir(tmp, 0777) != 0 && !(errno == EEXIST && stat(tmp, &st) == 0 && S_ISDIR(st.st_mode))) {
            fprintf(stderr, "llm_tokens: %s: %s\n", tmp,
                    errno == EEXIST ? "exists and is not a directory" : strerror(errno));
            return -1;
        }
        *p = saved;
        if (saved == '\0') return 0;
    }
}

/* rm -r of the folder this program writes its data into, so that a smaller
 * run never sees the files of an earlier, bigger one. */
static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}
static int remove_tree(const char *path)
{
    if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT) {
        fprintf(stderr, "llm_tokens: cannot remove %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- the synthetic language and llm.c's shard format ----------------------- */

/* Every token t has NSUCC distinct likely successors succ[t][k] with
 * probability (1 - EPS) * P[k] + EPS / V each; any other token EPS / V. */
static const double P[NSUCC] = {0.55, 0.25, 0.12, 0.08};

typedef struct {
    int vocab;
    int *succ; /* vocab x NSUCC */
    double entropy; /* nats per token: the same from every state */
} chain;

static int chain_init(chain *c, int vocab, uint64_t seed)
{
    c->vocab = vocab;
    c->succ = malloc((size_t)vocab * NSUCC * sizeof *c->succ);
    if (!c->succ) return -1;
    uint64_t s = seed ^ 0x6c6c6d2e63ull;
    for (int t = 0; t < vocab; t++) {
        for (int k = 0; k < NSUCC; k++) {
            int v, dup;
            do { /* distinct successors, so the entropy below is exact */
                v = (int)(splitmix(&s) % (uint64_t)vocab);
                dup = 0;
                for (int j = 0; j < k; j++) dup |= c->succ[t * NSUCC + j] == v;
            } while (dup);
            c->succ[t * NSUCC + k] = v;
        }
    }
    double h = 0, rare = EPS / vocab;
    for (int k = 0; k < NSUCC; k++) {
        double q = (1 - EPS) * P[k] + rare;
        h -= q * log(q);
    }
    h -= (vocab - NSUCC) * rare * log(rare);
    c->entropy = h;
    return 0;
}

static uint32_t chain_step(const chain *c, uint32_t t, uint64_t *s)
{
    if (unit(s) < EPS) return (uint32_t)(splitmix(s) % (uint64_t)c->vocab);
    double u = unit(s), acc = 0;
    for (int k = 0; k < NSUCC - 1; k++) {
        acc += P[k];
        if (u < acc) return (uint32_t)c->succ[t * NSUCC + k];
    }
    return (uint32_t)c->succ[t * NSUCC + NSUCC - 1];
}

/* Writes n tokens in llm.c's format: version 1 (uint16) or 7 (uint32). */
static int write_shard(const char *path, int version, const uint32_t *tok, size_t n)
{
    int32_t header[256] = {0};
    header[0] = version == 1 ? 20240520 : 20240801;
    header[1] = version;
    header[2] = (int32_t)n;
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(header, sizeof header, 1, f) == 1;
    for (size_t i = 0; ok && i < n; i++) {
        if (version == 1) {
            uint16_t v = (uint16_t)tok[i];
            ok = fwrite(&v, sizeof v, 1, f) == 1;
        } else {
            ok = fwrite(&tok[i], sizeof tok[i], 1, f) == 1;
        }
    }
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) fprintf(stderr, "llm_tokens: %s: %s\n", path, strerror(errno));
    return ok ? 0 : -1;
}

/* ---- the model: a bigram logit table ---------------------------------------- */

/* One SGD step on npairs (current, next) pairs; returns their summed loss.
 * W and G are vocab x vocab; G is scratch. The step is on the summed loss
 * with a per-token learning rate: a row seen c times in the batch moves by
 * lr times the sum of its c gradients, so rare contexts learn as fast per
 * occurrence as common ones. */
static double train_step(float *W, float *G, float *prob, int vocab, const int32_t *in,
                         const int32_t *tg, size_t npairs, float lr)
{
    double loss = 0;
    memset(G, 0, (size_t)vocab * vocab * sizeof *G);
    for (size_t i = 0; i < npairs; i++) {
        const float *w = W + (size_t)in[i] * vocab;
        float *g = G + (size_t)in[i] * vocab;
        float zmax = w[0], zsum = 0;
        for (int v = 1; v < vocab; v++) zmax = w[v] > zmax ? w[v] : zmax;
        for (int v = 0; v < vocab; v++) zsum += prob[v] = expf(w[v] - zmax);
        loss += logf(zsum) - (w[tg[i]] - zmax);
        for (int v = 0; v < vocab; v++) g[v] += prob[v] / zsum;
        g[tg[i]] -= 1;
    }
    for (size_t j = 0; j < (size_t)vocab * vocab; j++) W[j] -= lr * G[j];
    return loss;
}

/* ---- what --check verifies about each row ----------------------------------- */

typedef struct {
    uint32_t *tok[NSHARDS]; /* the tokens written */
    size_t ntok[NSHARDS];
    size_t nwin[NSHARDS];   /* floor((T - 1) / seq_len) */
    uint32_t *seen[NSHARDS];/* per window: times seen this epoch */
    int64_t *id_of[NSHARDS];/* per window: the item id coordl gave it (-1: not yet) */
    size_t total_windows;
} shards;

/* Finds the window of shard s (or of any shard when s < 0) whose first
 * seq_len tokens are `in`, and checks that `tg` is the same window shifted by
 * one. Returns the window's number and sets *shard_out, or -1. */
static long find_window(const shards *sh, int s, int seq_len, const int32_t *in,
                        const int32_t *tg, int *shard_out)
{
    for (int k = s < 0 ? 0 : s; k < (s < 0 ? NSHARDS : s + 1); k++) {
        for (size_t w = 0; w < sh->nwin[k]; w++) {
            const uint32_t *t = sh->tok[k] + w * (size_t)seq_len;
            int same = 1;
            for (int j = 0; j < seq_len && same; j++)
                same = (uint32_t)in[j] == t[j] && (uint32_t)tg[j] == t[j + 1];
            if (same) {
                *shard_out = k;
                return (long)w;
            }
        }
    }
    return -1;
}

/* Opens a loader on `source` only to count its windows. */
static long count_windows(const char *source, int seq_len)
{
    coordl_config cfg = coordl_config_default();
    cfg.source = source;
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.seq_len = (uint32_t)seq_len;
    cfg.threads = 1;
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "llm_tokens: FAILED: coordl_open(%s): %s\n", source, coordl_errmsg(NULL));
        return -1;
    }
    long n = (long)coordl_num_items(L);
    coordl_close(L);
    return n;
}

/* The source forms and the corrupt-shard rule (--check only). */
static int check_sources(const char *workdir, const char *shard_dir, const shards *sh,
                         int seq_len)
{
    char path[PATH_MAX], glob[PATH_MAX], list[PATH_MAX];
    int bad = 0;
    path_fmt(glob, "%s/shard_*.bin", shard_dir);
    /* A list file of paths relative to its own folder (workdir). */
    path_fmt(list, "%s/shards.txt", workdir);
    FILE *f = fopen(list, "w");
    if (!f) {
        fprintf(stderr, "llm_tokens: %s: %s\n", list, strerror(errno));
        return -1;
    }
    for (int k = 0; k < NSHARDS; k++) fprintf(f, "shards/shard_%03d.bin\n", k);
    fclose(f);
    long want = (long)sh->total_windows;
    const char *forms[3] = {glob, shard_dir, list};
    for (int i = 0; i < 3; i++) {
        long got = count_windows(forms[i], seq_len);
        if (got != want) {
            fprintf(stderr, "llm_tokens: FAILED: source %s: %ld windows, expected %ld\n", forms[i],
                    got, want);
            bad = 1;
        }
    }
    path_fmt(path, "%s/shard_000.bin", shard_dir);
    long one = count_windows(path, seq_len);
    if (one != (long)sh->nwin[0]) {
        fprintf(stderr, "llm_tokens: FAILED: source %s: %ld windows, expected %zu\n", path, one,
                sh->nwin[0]);
        bad = 1;
    }

    /* A shard whose header promises more tokens than the file holds. */
    char corrupt_dir[PATH_MAX];
    path_fmt(corrupt_dir, "%s/corrupt", workdir);
    if (remove_tree(corrupt_dir) != 0 || make_dirs(corrupt_dir) != 0) return -1;
    path_fmt(path, "%s/shard_truncated.bin", corrupt_dir);
    if (write_shard(path, 1, sh->tok[0], 1000) != 0 || truncate(path, 1024 + 2 * 600) != 0) {
        fprintf(stderr, "llm_tokens: %s: %s\n", path, strerror(errno));
        return -1;
    }
    coordl_config cfg = coordl_config_default();
    cfg.source = corrupt_dir;
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.seq_len = (uint32_t)seq_len;
    coordl *L = NULL;
    coordl_status rc = coordl_open(&cfg, &L);
    if (rc != COORDL_ERR_CORRUPT || !strstr(coordl_errmsg(NULL), "shard_truncated.bin")) {
        fprintf(stderr, "llm_tokens: FAILED: truncated shard: coordl_open gave %s (\"%s\"); "
                        "expected %s naming shard_truncated.bin\n",
                coordl_strerror(rc), rc == COORDL_OK ? "" : coordl_errmsg(NULL),
                coordl_strerror(COORDL_ERR_CORRUPT));
        bad = 1;
    } else {
        printf("check: truncated shard refused: %s\n", coordl_errmsg(NULL));
    }
    if (L) coordl_close(L);
    if (!bad)
        printf("check: glob, folder, list file: %ld windows each; one shard: %ld\n", want, one);
    return bad;
}

/* ---- command line ------------------------------------------------------------ */

static void usage(FILE *to)
{
    fprintf(to,
            "usage: llm_tokens [--workdir DIR] [--check] [--epochs 8] [--vocab 128]\n"
            "                  [--tokens 80000] [--seq-len 64] [--batch-size 16] [--lr 0.05]\n"
            "                  [--threads 0] [--seed 1] [--into]\n"
            "  Writes 4 token shards (llm.c format) of about --tokens tokens each under\n"
            "  DIR/shards and trains a bigram model on them through coordl.\n"
            "  --check: a small run (4 epochs, 20000 tokens) that verifies every batch;\n"
            "  exit 1 if a check fails.\n"
            "  --into: copy batches with coordl_next_into (llm.c's inputs/targets arrays).\n");
}

static void bad_arg(const char *opt, const char *val)
{
    fprintf(stderr, "llm_tokens: bad value for %s: '%s'\n", opt, val ? val : "(missing)");
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
    const char *workdir = "llm_tokens-data";
    int check = 0, into = 0;
    long epochs = -1, vocab = 128, tokens = -1, seq_len = 64, batch_size = 16, threads = 0;
    double lr = 0.05;
    uint64_t seed = 1;

    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(opt, "--check")) { check = 1; continue; }
        else if (!strcmp(opt, "--into")) { into = 1; continue; }
        else if (!strcmp(opt, "--workdir")) { if (!val || !*val) bad_arg(opt, val); workdir = val; }
        else if (!strcmp(opt, "--epochs")) epochs = parse_long(opt, val, 1, 10000);
        else if (!strcmp(opt, "--vocab")) vocab = parse_long(opt, val, 8, 4096);
        else if (!strcmp(opt, "--tokens")) tokens = parse_long(opt, val, 1000, 100000000);
        else if (!strcmp(opt, "--seq-len")) seq_len = parse_long(opt, val, 2, 65536);
        else if (!strcmp(opt, "--batch-size")) batch_size = parse_long(opt, val, 1, 4096);
        else if (!strcmp(opt, "--threads")) threads = parse_long(opt, val, 0, 1024);
        else if (!strcmp(opt, "--lr")) lr = parse_double(opt, val, 1e-6, 100);
        else if (!strcmp(opt, "--seed")) seed = (uint64_t)parse_long(opt, val, 0, LONG_MAX);
        else {
            fprintf(stderr, "llm_tokens: unknown argument '%s'\n", opt);
            usage(stderr);
            return 2;
        }
        i++; /* the option's value */
    }
    /* --check: about 1200 windows, 76 batches per epoch, 4 epochs: about
     * 300 steps in a second or two. Without it: 4x the tokens, 8 epochs. */
    if (epochs < 0) epochs = check ? 4 : 8;
    if (tokens < 0) tokens = check ? 20000 : 80000;

    /* ---- write the shards -------------------------------------------------- */
    double t0 = seconds();
    char shard_dir[PATH_MAX], path[PATH_MAX];
    path_fmt(shard_dir, "%s/shards", workdir);
    if (make_dirs(workdir) != 0 || remove_tree(shard_dir) != 0 || make_dirs(shard_dir) != 0) return 1;
    chain ch;
    if (chain_init(&ch, (int)vocab, seed) != 0) {
        fprintf(stderr, "llm_tokens: out of memory\n");
        return 1;
    }
    /* Shard lengths are deliberately not multiples of seq_len (+1): the
     * tail of every shard that does not fill a window is left out. */
    shards sh = {0};
    const double len_scale[NSHARDS] = {1.0, 0.75, 1.5, 0.6};
    uint64_t total_bytes = 0, cache_bytes = 0;
    for (int k = 0; k < NSHARDS; k++) {
        sh.ntok[k] = (size_t)(tokens * len_scale[k]) + (size_t)k * 7 + 3;
        sh.tok[k] = malloc(sh.ntok[k] * sizeof *sh.tok[k]);
        sh.seen[k] = NULL;
        if (!sh.tok[k]) {
            fprintf(stderr, "llm_tokens: out of memory\n");
            return 1;
        }
        uint64_t s = seed * 1000003u + (uint64_t)k;
        uint32_t t = (uint32_t)(splitmix(&s) % (uint64_t)vocab);
        for (size_t i = 0; i < sh.ntok[k]; i++) {
            sh.tok[k][i] = t;
            t = chain_step(&ch, t, &s);
        }
        int version = k == NSHARDS - 1 ? 7 : 1; /* the last shard in uint32 */
        path_fmt(path, "%s/shard_%03d.bin", shard_dir, k);
        if (write_shard(path, version, sh.tok[k], sh.ntok[k]) != 0) return 1;
        total_bytes += 1024 + sh.ntok[k] * (version == 1 ? 2 : 4);
        sh.nwin[k] = (sh.ntok[k] - 1) / (size_t)seq_len;
        sh.total_windows += sh.nwin[k];
        cache_bytes += sh.nwin[k] * (uint64_t)(seq_len + 1) * (version == 1 ? 2 : 4);
    }
    printf("llm_tokens: wrote %d shards (3 x uint16, 1 x uint32), %zu+%zu+%zu+%zu tokens, "
           "%.1f KB, vocab %ld, in %.2f s\n",
           NSHARDS, sh.ntok[0], sh.ntok[1], sh.ntok[2], sh.ntok[3], total_bytes / 1e3, vocab,
           seconds() - t0);
    printf("llm_tokens: chain entropy rate H = %.4f nats/token (log vocab = %.4f)\n", ch.entropy,
           log((double)vocab));

    int status = 0;
    if (check) {
        int rc = check_sources(workdir, shard_dir, &sh, (int)seq_len);
        if (rc < 0) return 1;
        status |= rc;
        for (int k = 0; k < NSHARDS; k++) {
            sh.seen[k] = calloc(sh.nwin[k] ? sh.nwin[k] : 1, sizeof *sh.seen[k]);
            sh.id_of[k] = malloc((sh.nwin[k] ? sh.nwin[k] : 1) * sizeof *sh.id_of[k]);
            if (!sh.seen[k] || !sh.id_of[k]) {
                fprintf(stderr, "llm_tokens: out of memory\n");
                return 1;
            }
            for (size_t w = 0; w < sh.nwin[k]; w++) sh.id_of[k][w] = -1;
        }
    }

    /* ---- open coordl ------------------------------------------------------- */
    char glob[PATH_MAX];
    path_fmt(glob, "%s/shard_*.bin", shard_dir);
    coordl_config cfg = coordl_config_default();
    cfg.source = glob;
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.seq_len = (uint32_t)seq_len;
    cfg.batch_size = (uint32_t)batch_size;
    /* The cache holds windows (seq_len + 1 tokens each, so neighbours share
     * a token): this budget holds all of them, and every epoch after the
     * first reads from memory only. */
    cfg.cache_bytes = cache_bytes;
    cfg.threads = (int)threads;
    cfg.seed = seed;
    /* coordl_next_into does not say how many rows it wrote, so the --into
     * path keeps only full batches (as llm.c's DataLoader does). */
    cfg.drop_last = into;
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "llm_tokens: coordl_open: %s\n", coordl_errmsg(NULL));
        return 1;
    }
    uint64_t nwin = coordl_num_items(L), nbatches = coordl_batches_per_epoch(L);
    printf("llm_tokens: %llu windows of %ld+1 tokens, %llu batches of %ld per epoch, %s\n",
           (unsigned long long)nwin, seq_len, (unsigned long long)nbatches, batch_size,
           into ? "copied with coordl_next_into" : "zero copy with coordl_next");
    if (nwin != sh.total_windows) {
        fprintf(stderr, "llm_tokens: FAILED: coordl indexed %llu windows, expected %zu\n",
                (unsigned long long)nwin, sh.total_windows);
        coordl_close(L);
        return 1;
    }

    /* ---- train --------------------------------------------------------------- */
    size_t rows_max = (size_t)batch_size * (size_t)seq_len;
    float *W = calloc((size_t)vocab * vocab, sizeof *W); /* zeros: uniform, loss log(vocab) */
    float *G = malloc((size_t)vocab * vocab * sizeof *G);
    float *prob = malloc((size_t)vocab * sizeof *prob);
    int32_t *inputs = malloc(rows_max * sizeof *inputs), *targets = malloc(rows_max * sizeof *targets);
    if (!W || !G || !prob || !inputs || !targets) {
        fprintf(stderr, "llm_tokens: out of memory\n");
        coordl_close(L);
        return 1;
    }
    enum { WINDOW = 20 }; /* steps averaged in the progress lines and the check */
    double first_sum = 0, recent[WINDOW] = {0};
    long step = 0, rows_checked = 0;
    double train_t0 = seconds();
    for (long epoch = 0; epoch < epochs && status == 0; epoch++) {
        coordl_stats before, after;
        coordl_get_stats(L, &before);
        double te = seconds(), epoch_loss = 0;
        long epoch_tokens = 0, batches = 0;
        uint64_t coordl_epoch = (uint64_t)epoch;
        coordl_status rc;
        for (;;) {
            coordl_batch b = {0};
            const int32_t *in, *tg;
            uint32_t n;
            if (into) {
                /* llm.c style: the loader fills the trainer's own arrays. */
                rc = coordl_next_into(L, inputs, rows_max * sizeof *inputs, targets,
                                      rows_max * sizeof *targets);
                in = inputs;
                tg = targets;
                n = (uint32_t)batch_size; /* drop_last: always full */
            } else {
                rc = coordl_next(L, &b);
                in = b.data;
                tg = b.targets;
                n = b.n;
            }
            if (rc != COORDL_OK) break;
            if (!into && (b.layout != COORDL_I32 || b.w != (uint32_t)seq_len || b.c != 1 ||
                          b.h != 1 || !b.targets || n == 0 || n > (uint32_t)batch_size)) {
                fprintf(stderr, "llm_tokens: FAILED: batch of %u rows, %ux%ux%u, layout %d, "
                                "targets %p; expected up to %ld rows of 1x1x%ld int32 with targets\n",
                        n, b.c, b.h, b.w, (int)b.layout, (void *)b.targets, batch_size, seq_len);
                coordl_release(L, &b);
                status = 1;
                break;
            }
            if (!into) coordl_epoch = b.epoch;
            /* --check: every row is a window of the shard its label names. */
            for (uint32_t r = 0; check && r < n && status == 0; r++) {
                const int32_t *ri = in + (size_t)r * seq_len, *rt = tg + (size_t)r * seq_len;
                int s = into ? -1 : b.labels[r], found = -1;
                long w = (s < -1 || s >= NSHARDS) ? -1
                                                  : find_window(&sh, s, (int)seq_len, ri, rt, &found);
                if (w < 0) {
                    fprintf(stderr, "llm_tokens: FAILED: epoch %ld batch %ld row %u (label %d): "
                                    "not a window of the shards written, or targets are not the "
                                    "inputs shifted by one\n", epoch, batches, r, s);
                    status = 1;
                    break;
                }
                sh.seen[found][w]++;
                if (!into) { /* item ids are stable: the same window, the same id */
                    int64_t id = (int64_t)b.ids[r];
                    if (sh.id_of[found][w] < 0) sh.id_of[found][w] = id;
                    else if (sh.id_of[found][w] != id) {
                        fprintf(stderr, "llm_tokens: FAILED: shard %d window %ld had id %lld, now %lld\n",
                                found, w, (long long)sh.id_of[found][w], (long long)id);
                        status = 1;
                    }
                }
                rows_checked++;
            }
            if (status != 0) {
                if (!into) coordl_release(L, &b);
                break;
            }
            size_t npairs = (size_t)n * (size_t)seq_len;
            double loss = train_step(W, G, prob, (int)vocab, in, tg, npairs, (float)lr) / npairs;
            if (!into) coordl_release(L, &b);

            if (step < WINDOW) first_sum += loss;
            recent[step % WINDOW] = loss;
            step++;
            epoch_loss += loss * npairs;
            epoch_tokens += (long)npairs;
            batches++;
            if (step % (check ? 50 : 250) == 0) {
                double m = 0;
                for (int j = 0; j < WINDOW; j++) m += recent[j];
                printf("step %5ld (epoch %ld): loss %.4f (mean of the last %d steps)\n", step,
                       epoch, m / WINDOW, WINDOW);
            }
        }
        if (status != 0) break;
        if (rc != COORDL_END_OF_EPOCH) {
            fprintf(stderr, "llm_tokens: epoch %ld: %s: %s\n", epoch, coordl_strerror(rc),
                    coordl_errmsg(L));
            status = 1;
            break;
        }
        if ((uint64_t)batches != nbatches) {
            fprintf(stderr, "llm_tokens: FAILED: epoch %ld had %ld batches; coordl_batches_per_epoch "
                            "says %llu\n", epoch, batches, (unsigned long long)nbatches);
            status = 1;
            break;
        }
        if (check) { /* every window exactly once (all of them, or all full batches' worth) */
            long missing = 0, twice = 0, dropped_ok = into ? (long)(nwin % (uint64_t)batch_size) : 0;
            for (int k = 0; k < NSHARDS; k++)
                for (size_t w = 0; w < sh.nwin[k]; w++) {
                    missing += sh.seen[k][w] == 0;
                    twice += sh.seen[k][w] > 1;
                    sh.seen[k][w] = 0;
                }
            if (twice != 0 || missing != dropped_ok) {
                fprintf(stderr, "llm_tokens: FAILED: epoch %ld: %ld windows missing (expected %ld), "
                                "%ld seen more than once\n", epoch, missing, dropped_ok, twice);
                status = 1;
                break;
            }
        }
        double wall = seconds() - te;
        coordl_get_stats(L, &after);
        coordl_epoch_stats es = {0};
        coordl_get_epoch_stats(L, coordl_epoch, &es);
        uint64_t fetches = es.cache_hits + es.cache_misses;
        printf("epoch %ld: %ld batches, %.0f tokens/s, loss %.4f, stall %.1f%%, cache hit rate %.1f%%\n",
               epoch, batches, epoch_tokens / wall, epoch_loss / (epoch_tokens ? epoch_tokens : 1),
               100.0 * (double)(after.stall_ns - before.stall_ns) / (wall * 1e9),
               100.0 * (double)es.cache_hits / (double)(fetches ? fetches : 1));
        fflush(stdout);
    }
    double train_wall = seconds() - train_t0;
    coordl_close(L);

    /* ---- the check ------------------------------------------------------------ */
    if (status == 0) {
        long m = step < WINDOW ? step : WINDOW;
        double first = first_sum / (m ? m : 1), last = 0;
        for (long j = 0; j < m; j++) last += recent[j];
        last /= m ? m : 1;
        printf("llm_tokens: %ld steps in %.2f s; mean loss of the first %d steps %.4f, of the last "
               "%d %.4f; H %.4f (excess %+.4f)\n",
               step, train_wall, WINDOW, first, WINDOW, last, ch.entropy, last - ch.entropy);
        if (check) printf("check: %ld rows matched their shard windows, every window once per epoch\n",
                          rows_checked);
        if (step < 2 * WINDOW) {
            fprintf(stderr, "llm_tokens: FAILED: only %ld steps; need at least %d to compare\n",
                    step, 2 * WINDOW);
            status = 1;
        } else if (!(last < 0.8 * first)) {
            fprintf(stderr, "llm_tokens: FAILED: the loss did not go down enough (%.4f is not "
                            "below 0.8 x %.4f)\n", last, first);
            status = 1;
        } else if (!(fabs(last - ch.entropy) < 0.25)) {
            fprintf(stderr, "llm_tokens: FAILED: final loss %.4f is not within 0.25 nats of the "
                            "chain's entropy rate %.4f%s\n", last, ch.entropy,
                    last < ch.entropy ? " (below it: do the targets leak into the inputs?)" : "");
            status = 1;
        } else {
            printf("llm_tokens: OK: loss %.4f -> %.4f, within %.3f nats of H\n", first, last,
                   fabs(last - ch.entropy));
        }
    }
    for (int k = 0; k < NSHARDS; k++) {
        free(sh.tok[k]);
        free(sh.seen[k]);
        free(sh.id_of[k]);
    }
    free(ch.succ);
    free(W);
    free(G);
    free(prob);
    free(inputs);
    free(targets);
    return status;
}
