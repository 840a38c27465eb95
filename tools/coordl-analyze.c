/*
 * coordl-analyze - DS-Analyzer on the command line: is a trainer fed by
 * coordl waiting for data, is it waiting for preparation (CPU) or for
 * fetching (storage), and what cache size and thread count would fix it?
 *
 *   coordl-analyze --data DIR --out DIR [--threads N] [--cache-fraction F]
 *                  [--batch-size B] [--batches N] [--step-ms MS]
 *                  [--step sleep|spin|cpu] [--size PX] [--seed S]
 *                  [--validate] [--check TOL]
 *
 * It runs coordl_analyze's differential protocol (synthetic, warm, cold)
 * with a stand-in trainer step of MS milliseconds per batch, then prints a
 * short report on stdout and writes OUT/report.json and OUT/report.svg.
 * The step sleeps by default: the trainer's thread waits for an accelerator
 * while the loader has the CPUs, the setting of the DS-Analyzer paper.
 * --step spin busy-spins MS of monotonic time and --step cpu MS of the
 * thread's CPU time (compute on the CPU, which slows when the loader's
 * threads share its core); both compete with the loader for the cores,
 * which the what-if model only approximates (see docs/analyzer.md).
 *
 * --validate measures settings the model was not fitted on (two cache
 * fractions at --threads, two at one thread) and compares them with
 * coordl_report_predict: each point opens coordl with that cache and that
 * thread count, runs one epoch to fill the MinIO cache, drops the page cache
 * of the dataset's files (posix_fadvise DONTNEED: no root needed), and times
 * --batches batches of the next epoch with the same step. --check TOL (which
 * implies --validate) exits 1 when any |relative error| is above TOL.
 *
 * Exit status: 0 done; 1 the dataset or the output folder cannot be used,
 * a run failed, or --check failed; 2 bad arguments.
 */
#include "coordl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define TOOL "coordl-analyze"

/* ---- arguments ------------------------------------------------------- */

enum { STEP_SPIN = 0, STEP_CPU = 1, STEP_SLEEP = 2 };
static const char *const STEP_NAMES[] = {"spin", "cpu", "sleep"};

static int step_kind_of(const char *s)
{
    for (int k = 0; k < 3; k++)
        if (!strcmp(s, STEP_NAMES[k]))
            return k;
    return -1;
}

typedef struct {
    const char *data, *out;
    int threads;           /* workers of the measured runs                 */
    double cache_fraction; /* the "current setting" shown in the report    */
    uint32_t batch_size;
    uint64_t batches;      /* timed batches per run                        */
    int repeat;            /* timed epochs per validation point            */
    double step_ms;
    int step_kind;         /* STEP_SLEEP (default), STEP_SPIN, STEP_CPU    */
    uint32_t size;         /* output side in pixels                        */
    uint64_t seed;
    int validate;
    int check;             /* 1: --check given                             */
    double check_tol;
} args;

static void usage(FILE *to)
{
    fprintf(to,
            "usage: " TOOL " --data DIR --out DIR [options]\n"
            "\n"
            "Measures whether a trainer fed by coordl stalls on data, splits the\n"
            "stall into prep (CPU) and fetch (storage), and predicts images/s for\n"
            "other cache sizes and thread counts (DS-Analyzer).\n"
            "\n"
            "  --data DIR            dataset: ImageFolder root or a path<TAB>label list\n"
            "  --out DIR             writes DIR/report.json and DIR/report.svg\n"
            "  --threads N           loader threads of the measured runs (default: all cores)\n"
            "  --cache-fraction F    cache of the current setting, 0..1 of the dataset's\n"
            "                        bytes, shown with its prediction (default 0)\n"
            "  --batch-size B        images per batch (default 32)\n"
            "  --batches N           timed batches per run (default 60)\n"
            "  --step-ms MS          the stand-in trainer's time per batch (default 5)\n"
            "  --step sleep|spin|cpu the stand-in step: sleep MS (a thread waiting for an\n"
            "                        accelerator; default), busy-spin MS of wall time, or\n"
            "                        busy-spin until MS of CPU time are used (compute that\n"
            "                        slows when the loader's threads take its core)\n"
            "  --size PX             output crop side (default 64)\n"
            "  --seed S              shuffle and augmentation seed (default 0)\n"
            "  --validate            measure 4 settings not used for fitting and compare\n"
            "                        them with the prediction\n"
            "  --repeat N            run the analysis and time each validation point N\n"
            "                        times and use the medians (default 5)\n"
            "  --check TOL           implies --validate; exit 1 if any |error| > TOL\n"
            "  -h, --help            this text\n");
}

static int bad_arg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, TOOL ": ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    usage(stderr);
    return 2;
}

static int parse_i64(const char *s, long long lo, long long hi, long long *out)
{
    if (!s || !*s)
        return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static int parse_f64(const char *s, double lo, double hi, double *out)
{
    if (!s || !*s)
        return -1;
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int usable_cores(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Returns 0, or the exit status (2) after printing the usage. */
static int parse_args(int argc, char **argv, args *a, int *help)
{
    memset(a, 0, sizeof *a);
    a->threads = usable_cores();
    a->batch_size = 32;
    a->batches = 60;
    a->repeat = 5;
    a->step_ms = 5;
    a->step_kind = STEP_SLEEP;
    a->size = 64;
    *help = 0;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
            *help = 1;
            return 0;
        }
        if (!strcmp(opt, "--validate")) {
            a->validate = 1;
            continue;
        }
        /* every other option takes a value: "--opt VALUE" or "--opt=VALUE" */
        char name[32];
        const char *val = NULL;
        const char *eq = strncmp(opt, "--", 2) == 0 ? strchr(opt, '=') : NULL;
        if (eq) {
            size_t n = (size_t)(eq - opt);
            if (n >= sizeof name)
                return bad_arg("unknown option '%s'", opt);
            memcpy(name, opt, n);
            name[n] = '\0';
            val = eq + 1;
        } else {
            if (strlen(opt) >= sizeof name)
                return bad_arg("unknown option '%s'", opt);
            strcpy(name, opt);
        }
        static const char *const with_value[] = {
            "--data", "--out", "--threads", "--cache-fraction", "--batch-size",
            "--batches", "--step-ms", "--step", "--size", "--seed", "--check", "--repeat"};
        int known = 0;
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++)
            known |= !strcmp(name, with_value[k]);
        if (!known)
            return bad_arg("unknown option '%s'", opt);
        if (!val) {
            if (i + 1 >= argc)
                return bad_arg("%s needs a value", name);
            val = argv[++i];
        }
        long long v;
        uint64_t u;
        if (!strcmp(name, "--data")) {
            if (!*val)
                return bad_arg("--data needs a path");
            a->data = val;
        } else if (!strcmp(name, "--out")) {
            if (!*val)
                return bad_arg("--out needs a path");
            a->out = val;
        } else if (!strcmp(name, "--threads")) {
            if (parse_i64(val, 1, 1024, &v))
                return bad_arg("--threads must be an integer in 1..1024, not '%s'", val);
            a->threads = (int)v;
        } else if (!strcmp(name, "--cache-fraction")) {
            if (parse_f64(val, 0, 1, &a->cache_fraction))
                return bad_arg("--cache-fraction must be a number in 0..1, not '%s'", val);
        } else if (!strcmp(name, "--batch-size")) {
            if (parse_i64(val, 1, 1 << 16, &v))
                return bad_arg("--batch-size must be an integer in 1..65536, not '%s'", val);
            a->batch_size = (uint32_t)v;
        } else if (!strcmp(name, "--batches")) {
            if (parse_i64(val, 1, 100000000, &v))
                return bad_arg("--batches must be an integer >= 1, not '%s'", val);
            a->batches = (uint64_t)v;
        } else if (!strcmp(name, "--step-ms")) {
            if (parse_f64(val, 0.001, 600000, &a->step_ms))
                return bad_arg("--step-ms must be a number of milliseconds > 0, not '%s'", val);
        } else if (!strcmp(name, "--step")) {
            int k = step_kind_of(val);
            if (k < 0)
                return bad_arg("--step must be spin, cpu or sleep, not '%s'", val);
            a->step_kind = k;
        } else if (!strcmp(name, "--size")) {
            if (parse_i64(val, 1, 8192, &v))
                return bad_arg("--size must be an integer in 1..8192, not '%s'", val);
            a->size = (uint32_t)v;
        } else if (!strcmp(name, "--seed")) {
            if (parse_u64(val, &u))
                return bad_arg("--seed must be an unsigned integer, not '%s'", val);
            a->seed = u;
        } else if (!strcmp(name, "--repeat")) {
            if (parse_i64(val, 1, 9, &v))
                return bad_arg("--repeat must be an integer in 1..9, not '%s'", val);
            a->repeat = (int)v;
        } else if (!strcmp(name, "--check")) {
            if (parse_f64(val, 0, 1e6, &a->check_tol))
                return bad_arg("--check must be a tolerance >= 0 (0.15 = 15%%), not '%s'", val);
            a->check = 1;
            a->validate = 1;
        }
    }
    if (!a->data)
        return bad_arg("--data is required");
    if (!a->out)
        return bad_arg("--out is required");
    return 0;
}

/* ---- clock and the stand-in trainer step ------------------------------ */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct {
    double ms;
    int kind;
    volatile uint8_t sink;
} step_ctx;

static long long clock_ns(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* One trainer step: reads the batch's first and last byte (a trainer reads
 * its input), then
 *   spin:  busy-spins until ms of monotonic time have passed (a step of a
 *          fixed duration that keeps a core busy),
 *   cpu:   busy-spins until the thread has used ms of CPU time (compute:
 *          it takes longer when the loader's threads take its core),
 *   sleep: sleeps ms (a thread waiting for an accelerator). */
static int step(void *user, const coordl_batch *b)
{
    step_ctx *s = user;
    if (b && b->data && b->data_bytes)
        s->sink = (uint8_t)(((const uint8_t *)b->data)[0] ^
                            ((const uint8_t *)b->data)[b->data_bytes - 1]);
    long long dur = (long long)(s->ms * 1e6);
    if (s->kind == STEP_SLEEP) {
        long long end_ns = clock_ns(CLOCK_MONOTONIC) + dur;
        struct timespec until = {(time_t)(end_ns / 1000000000LL),
                                 (long)(end_ns % 1000000000LL)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
        }
        return 0;
    }
    clockid_t id = s->kind == STEP_CPU ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
    long long end_ns = clock_ns(id) + dur;
    while (clock_ns(id) < end_ns) {
    }
    return 0;
}

static void progress(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, TOOL ": %s\n", line);
    fflush(stderr);
}

/* ---- files ------------------------------------------------------------- */

static int mkdirs(const char *path)
{
    char *p = strdup(path);
    if (!p)
        return -1;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0777) && errno != EEXIST) {
            free(p);
            return -1;
        }
        *s = '/';
    }
    int rc = mkdir(p, 0777) && errno != EEXIST ? -1 : 0;
    free(p);
    struct stat st;
    if (rc == 0 && (stat(path, &st) || !S_ISDIR(st.st_mode))) {
        errno = ENOTDIR;
        return -1;
    }
    return rc;
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Drops the page cache of every item's file, so that the next reads come
 * from storage. Returns the number of files it could not open. */
static uint64_t drop_page_cache(const coordl *L)
{
    uint64_t n = coordl_num_items(L), failed = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *p = coordl_item_path(L, i);
        int fd = p ? open(p, O_RDONLY | O_CLOEXEC) : -1;
        if (fd < 0) {
            failed++;
            continue;
        }
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
    return failed;
}

/* ---- text helpers ------------------------------------------------------ */

/* Writes s as XML character data: & < > " ' escaped, control characters and
 * bytes that are not valid UTF-8 replaced by '?', so the file stays valid. */
static void xml_text(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = len > 0;
        for (int k = 1; ok && k < len; k++)
            ok = (p[k] & 0xC0) == 0x80;
        if (ok && len == 2 && c < 0xC2)
            ok = 0; /* overlong */
        if (!ok) {
            fputc('?', f);
            p++;
            continue;
        }
        if (len > 1) {
            fwrite(p, 1, (size_t)len, f);
            p += len;
            continue;
        }
        switch (c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            if (c < 0x20 && c != '\t')
                fputc('?', f);
            else
                fputc((int)c, f);
        }
        p++;
    }
}

/* A JSON number, or null when it is not finite. */
static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

static double clamp01(double v)
{
    return !(v > 0) ? 0 : v > 1 ? 1 : v;
}

/* ---- the validation points --------------------------------------------- */

#define MAX_REPEAT 9

typedef struct {
    double cache_fraction;
    int threads;
    double predicted, measured, error;
    uint64_t images;       /* over all repeats */
    double seconds;        /* over all repeats */
    double cache_hit_rate; /* byte hit rate of the timed batches */
    double runs[MAX_REPEAT]; /* images/s of each repeat */
    int nruns;
    int ok;
} vpoint;

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Opens coordl with cache f x dataset bytes and t threads, fills the cache
 * with one epoch, then `repeat` times: drops the page cache, seeks to the
 * start of the next epoch (batches prepared before the drop came from the
 * page cache: they are thrown away) and times `batches` batches (at most an
 * epoch) with the step. The measurement is the median of the repeats. */
static int measure(const coordl_config *base, uint64_t dataset_bytes, uint64_t batches,
                   int repeat, step_ctx *sc, vpoint *v)
{
    coordl_config cfg = *base;
    cfg.cache_bytes = (uint64_t)(v->cache_fraction * (double)dataset_bytes + 0.5);
    cfg.threads = v->threads;
    coordl *L = NULL;
    coordl_status rc = coordl_open(&cfg, &L);
    if (rc != COORDL_OK) {
        fprintf(stderr, TOOL ": %s: %s\n", cfg.source, coordl_errmsg(NULL));
        return -1;
    }
    coordl_batch b;
    /* epoch 0 fills the MinIO cache (it admits until full, never evicts) */
    while ((rc = coordl_next(L, &b)) == COORDL_OK)
        coordl_release(L, &b);
    if (rc != COORDL_END_OF_EPOCH) {
        fprintf(stderr, TOOL ": filling the cache: %s\n", coordl_errmsg(L));
        coordl_close(L);
        return -1;
    }
    uint64_t per_epoch = coordl_batches_per_epoch(L);
    uint64_t nb = batches < per_epoch ? batches : per_epoch;
    uint64_t hit = 0, all = 0;
    v->nruns = 0;
    for (int k = 0; k < repeat && k < MAX_REPEAT; k++) {
        uint64_t failed = drop_page_cache(L);
        if (failed && k == 0)
            fprintf(stderr, TOOL ": warning: could not open %llu files to drop their page cache\n",
                    (unsigned long long)failed);
        rc = coordl_seek(L, (uint64_t)k + 1, 0);
        if (rc != COORDL_OK) {
            fprintf(stderr, TOOL ": seek: %s\n", coordl_errmsg(L));
            coordl_close(L);
            return -1;
        }
        coordl_stats s0, s1;
        coordl_get_stats(L, &s0);
        uint64_t images = 0;
        double t0 = now_s();
        for (uint64_t i = 0; i < nb; i++) {
            rc = coordl_next(L, &b);
            if (rc == COORDL_END_OF_EPOCH)
                break;
            if (rc != COORDL_OK) {
                fprintf(stderr, TOOL ": %s\n", coordl_errmsg(L));
                coordl_close(L);
                return -1;
            }
            step(sc, &b);
            images += b.n;
            coordl_release(L, &b);
        }
        double secs = now_s() - t0;
        coordl_get_stats(L, &s1);
        hit += s1.cache_hit_bytes - s0.cache_hit_bytes;
        all += (s1.cache_hit_bytes - s0.cache_hit_bytes) + (s1.storage_bytes - s0.storage_bytes);
        v->images += images;
        v->seconds += secs;
        v->runs[v->nruns++] = secs > 0 ? (double)images / secs : 0;
    }
    coordl_close(L);
    double sorted[MAX_REPEAT];
    memcpy(sorted, v->runs, (size_t)v->nruns * sizeof *sorted);
    qsort(sorted, (size_t)v->nruns, sizeof *sorted, cmp_double);
    v->measured = v->nruns ? sorted[v->nruns / 2] : 0;
    if (v->nruns && v->nruns % 2 == 0)
        v->measured = (sorted[v->nruns / 2 - 1] + sorted[v->nruns / 2]) / 2;
    v->cache_hit_rate = all ? (double)hit / (double)all : 0;
    v->error = v->measured > 0 ? (v->predicted - v->measured) / v->measured : NAN;
    v->ok = v->nruns > 0;
    return v->ok ? 0 : -1;
}

/* ---- the human report ----------------------------------------------------- */

static const char *thr_word(int t)
{
    return t == 1 ? "thread" : "threads";
}

static void print_report(const args *a, const coordl_report *r, const int *tl, size_t nt)
{
    printf("dataset: %s: %llu items, %.1f MB (mean item %.1f KB)\n", a->data,
           (unsigned long long)r->dataset_items, (double)r->dataset_bytes / 1e6,
           r->mean_item_bytes / 1e3);
    printf("settings: batch %u, %ux%u crops, step %.3g ms (%s), %d %s, %llu batches per run, "
           "median of %d %s\n\n",
           a->batch_size, a->size, a->size, a->step_ms, STEP_NAMES[a->step_kind],
           r->threads, thr_word(r->threads), (unsigned long long)a->batches, a->repeat,
           a->repeat == 1 ? "analysis" : "analyses");

    printf("run                    images/s    stall\n");
    printf("  synthetic          %10.1f   %5.1f%%   trainer alone: its ingestion rate\n",
           r->synthetic.images_per_s, 100 * r->synthetic.stall_fraction);
    printf("  warm (all cached)  %10.1f   %5.1f%%   prep-bound: no storage reads\n",
           r->warm.images_per_s, 100 * r->warm.stall_fraction);
    printf("  cold (no cache)    %10.1f   %5.1f%%   storage + prep\n", r->cold.images_per_s,
           100 * r->cold.stall_fraction);
    printf("stall split (share of the cold run's time): prep %.1f%%, fetch %.1f%%\n\n",
           100 * r->prep_stall_fraction, 100 * r->fetch_stall_fraction);

    printf("model inputs\n");
    printf("  ingest (trainer, no stall)  %10.1f images/s\n", r->ingest_images_per_s);
    printf("  prep per core               %10.1f images/s\n", r->prep_images_per_s_per_core);
    printf("  storage bandwidth           %10.1f MB/s (aggregate, cold run)\n", r->storage_mb_per_s);
    printf("  cache-hit copy bandwidth    %10.1f MB/s\n", r->memory_mb_per_s);
    printf("  mean item                   %10.1f KB\n", r->mean_item_bytes / 1e3);
    printf("  one storage read            %10.2f ms (read-ahead %u, on %u I/O threads)\n\n", r->read_latency_ms,
           r->readahead_items, r->readahead_threads);

    coordl_whatif cur = coordl_report_predict(r, a->cache_fraction, a->threads, 0);
    printf("current setting: cache %.0f%%, %d %s: predicted %.1f images/s, stall %.1f%%\n",
           100 * a->cache_fraction, a->threads, thr_word(a->threads),
           cur.predicted_images_per_s, 100 * cur.predicted_stall_fraction);
    if (r->recommend_threads > 0)
        printf("recommendation: cache %.0f%% of the dataset (%.1f MB), %d %s "
               "(smallest predicted stall under 3%%)\n\n",
               100 * r->recommend_cache_fraction,
               r->recommend_cache_fraction * (double)r->dataset_bytes / 1e6,
               r->recommend_threads, thr_word(r->recommend_threads));
    else
        printf("recommendation: none of the what-if grid gets the stall under 3%%: "
               "the trainer is faster than the loader can be made here\n\n");
    printf("read-ahead (no cache, %d %s): predicted images/s", r->threads, thr_word(r->threads));
    static const uint32_t depths[] = {0, 8, 32, 128};
    for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++)
        printf("%s depth %u %.1f", i ? "," : "", depths[i],
               coordl_report_predict_readahead(r, 0.0, r->threads, 0, depths[i]).predicted_images_per_s);
    if (r->recommend_readahead_items >= 0)
        printf("; enough: depth %d\n\n", r->recommend_readahead_items);
    else
        printf("\n\n");

    printf("what-if: predicted images/s\n  cache ");
    for (size_t j = 0; j < nt; j++)
        printf("  %3d thr", tl[j]);
    printf("\n");
    static const double fr[] = {0, 0.25, 0.5, 0.75, 1};
    for (size_t i = 0; i < sizeof fr / sizeof *fr; i++) {
        printf("  %4.0f%% ", 100 * fr[i]);
        for (size_t j = 0; j < nt; j++)
            printf("  %7.1f", coordl_report_predict(r, fr[i], tl[j], 0).predicted_images_per_s);
        printf("\n");
    }
    fflush(stdout);
}

/* ---- report.json ------------------------------------------------------------ */

static int write_json(const char *path, const coordl_report *r, const vpoint *v, size_t nv)
{
    char probe[1];
    size_t n = coordl_report_json(r, probe, sizeof probe);
    char *js = malloc(n + 1);
    if (!js) {
        fprintf(stderr, TOOL ": out of memory\n");
        return -1;
    }
    coordl_report_json(r, js, n + 1);
    js[n] = '\0';
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, TOOL ": %s: %s\n", path, strerror(errno));
        free(js);
        return -1;
    }
    char *close_brace = strrchr(js, '}');
    if (!v || !nv || !close_brace) {
        if (v && nv)
            fprintf(stderr, TOOL ": warning: the report JSON is not an object; "
                            "validation left out\n");
        fputs(js, f);
        if (n == 0 || js[n - 1] != '\n')
            fputc('\n', f);
    } else {
        /* insert "validation" as the object's last key */
        size_t k = (size_t)(close_brace - js);
        while (k > 0 && strchr(" \t\r\n", js[k - 1]))
            k--;
        fwrite(js, 1, k, f);
        fputs(k > 0 && js[k - 1] == '{' ? "\n" : ",\n", f);
        fputs("  \"validation\": [", f);
        for (size_t i = 0; i < nv; i++) {
            fprintf(f, "%s\n    {\"cache_fraction\": ", i ? "," : "");
            json_num(f, v[i].cache_fraction);
            fprintf(f, ", \"threads\": %d, \"predicted_images_per_s\": ", v[i].threads);
            json_num(f, v[i].predicted);
            fputs(", \"measured_images_per_s\": ", f);
            json_num(f, v[i].ok ? v[i].measured : NAN);
            fputs(", \"error\": ", f);
            json_num(f, v[i].ok ? v[i].error : NAN);
            fputs(", \"cache_hit_rate\": ", f);
            json_num(f, v[i].ok ? v[i].cache_hit_rate : NAN);
            fputs(", \"measured_runs\": [", f);
            for (int m = 0; m < v[i].nruns; m++) {
                fputs(m ? ", " : "", f);
                json_num(f, v[i].runs[m]);
            }
            fprintf(f, "], \"images\": %llu, \"seconds\": ", (unsigned long long)v[i].images);
            json_num(f, v[i].seconds);
            fputc('}', f);
        }
        fputs("\n  ]\n}\n", f);
    }
    free(js);
    if (fclose(f)) {
        fprintf(stderr, TOOL ": %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- report.svg ------------------------------------------------------------- */

static const char *const PALETTE[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                      "#9467bd", "#8c564b", "#e377c2", "#17becf"};
#define NPAL (sizeof PALETTE / sizeof *PALETTE)
#define MAX_CURVES 8

#define C_COMPUTE "#4c78a8"
#define C_PREP "#f58518"
#define C_FETCH "#e45756"
#define INGEST_STYLE "stroke=\"#555\" stroke-width=\"1.5\" stroke-dasharray=\"2 3\""

/* A "nice" tick step (1, 2 or 5 x 10^k) for about `ticks` ticks up to max. */
static double nice_step(double max, int ticks)
{
    if (!(max > 0))
        return 1;
    double raw = max / ticks, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

static void fmt_tick(char *buf, size_t cap, double v, double stepv)
{
    if (stepv >= 1 || v == 0)
        snprintf(buf, cap, "%.0f", v);
    else if (stepv >= 0.1)
        snprintf(buf, cap, "%.1f", v);
    else
        snprintf(buf, cap, "%.2g", v);
}

static void svg_text(FILE *f, double x, double y, const char *anchor, const char *style,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void svg_text(FILE *f, double x, double y, const char *anchor, const char *style,
                     const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s%s%s>", x, y, anchor,
            style ? " style=\"" : "", style ? style : "", style ? "\"" : "");
    xml_text(f, buf);
    fputs("</text>\n", f);
}

/* Curves of several thread counts often coincide (all at the trainer's
 * rate): later ones are drawn thinner and dashed on top of earlier ones, so
 * every colour stays visible. */
static double curve_width(size_t j, size_t n)
{
    return 2.0 + 1.5 * (double)(n - 1 - j) / (n > 1 ? (double)(n - 1) : 1.0) * 2.0;
}

static const char *curve_dash(size_t j)
{
    static const char *const d[] = {"", " stroke-dasharray=\"10 5\"", " stroke-dasharray=\"3 4\"",
                                    " stroke-dasharray=\"14 4 3 4\""};
    return d[j % 4];
}

static int write_svg(const char *path, const args *a, const coordl_report *r,
                     const int *tl, size_t nt, const vpoint *v, size_t nv)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, TOOL ": %s: %s\n", path, strerror(errno));
        return -1;
    }
    const double W = 980, H = 840;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" "
               "font-size=\"13\">\n",
               W, H, W, H);
    fprintf(f, "<title>");
    xml_text(f, "DS-Analyzer report: ");
    xml_text(f, a->data);
    fprintf(f, "</title>\n<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", W, H);

    /* title */
    svg_text(f, 20, 30, "start", "font-size:18px;font-weight:bold", "DS-Analyzer: %s", a->data);
    svg_text(f, 20, 52, "start", "fill:#444",
             "%llu items, %.1f MB; batch %u, %ux%u crops, trainer step %.3g ms (%s), %d loader %s, "
             "%llu batches per run, median of %d",
             (unsigned long long)r->dataset_items, (double)r->dataset_bytes / 1e6, a->batch_size,
             a->size, a->size, a->step_ms, STEP_NAMES[a->step_kind], r->threads,
             thr_word(r->threads), (unsigned long long)a->batches, a->repeat);

    if (r->recommend_threads > 0)
        svg_text(f, 20, 74, "start", "font-weight:bold",
                 "recommendation: cache %.0f%% of the dataset, %d loader %s (predicted stall under 3%%)",
                 100 * r->recommend_cache_fraction, r->recommend_threads,
                 thr_word(r->recommend_threads));
    else
        svg_text(f, 20, 74, "start", "font-weight:bold",
                 "recommendation: none of the what-if grid gets the predicted stall under 3%%");

    /* ---- panel 1: where the time goes, per run ---- */
    const double px0 = 220, px1 = 680, py0 = 128, bar_h = 34, gap = 20;
    svg_text(f, 20, 108, "start", "font-size:15px;font-weight:bold",
             "1. Where the trainer's time goes (differential runs)");
    const coordl_run_report *runs[3] = {&r->synthetic, &r->warm, &r->cold};
    static const char *const run_name[3] = {"synthetic (trainer only)", "warm (all in cache)",
                                            "cold (nothing cached)"};
    double per100[3], seg[3][3]; /* [run][compute, prep, fetch] seconds per 100 batches */
    double maxt = 0;
    for (int i = 0; i < 3; i++) {
        per100[i] = runs[i]->images_per_s > 0 ? 100.0 * a->batch_size / runs[i]->images_per_s : 0;
        maxt = fmax(maxt, per100[i]);
    }
    double ps = clamp01(r->prep_stall_fraction), fs = clamp01(r->fetch_stall_fraction);
    if (ps + fs > 1) {
        double k = 1 / (ps + fs);
        ps *= k;
        fs *= k;
    }
    /* synthetic: all compute; cold: its time split by the report's
     * fractions; warm: the same prep stall (seconds) as the cold run */
    seg[0][0] = per100[0], seg[0][1] = 0, seg[0][2] = 0;
    seg[2][1] = ps * per100[2], seg[2][2] = fs * per100[2];
    seg[2][0] = per100[2] - seg[2][1] - seg[2][2];
    seg[1][1] = fmin(seg[2][1], per100[1]), seg[1][2] = 0;
    seg[1][0] = per100[1] - seg[1][1];
    double xstep = nice_step(maxt, 5), xmax = xstep * ceil(maxt / xstep);
    if (!(xmax > 0))
        xmax = 1;
    double py_axis = py0 + 3 * (bar_h + gap) - gap + 12;
    /* grid and ticks */
    for (double t = 0; t <= xmax + xstep * 1e-6; t += xstep) {
        double x = px0 + (px1 - px0) * t / xmax;
        char lab[32];
        fmt_tick(lab, sizeof lab, t, xstep);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x,
                py0 - 6, x, py_axis);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", x,
                py_axis, x, py_axis + 5);
        svg_text(f, x, py_axis + 19, "middle", NULL, "%s", lab);
    }
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", px0,
            py_axis, px1, py_axis);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", px0,
            py0 - 6, px0, py_axis);
    svg_text(f, (px0 + px1) / 2, py_axis + 40, "middle", NULL,
             "time (seconds per 100 batches of %u images)", a->batch_size);
    static const char *const seg_col[3] = {C_COMPUTE, C_PREP, C_FETCH};
    for (int i = 0; i < 3; i++) {
        double y = py0 + i * (bar_h + gap), x = px0;
        svg_text(f, px0 - 10, y + bar_h / 2 + 5, "end", NULL, "%s", run_name[i]);
        for (int s = 0; s < 3; s++) {
            double w = (px1 - px0) * fmax(0, seg[i][s]) / xmax;
            if (w <= 0)
                continue;
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                    x, y, w, bar_h, seg_col[s]);
            x += w;
        }
        svg_text(f, x + 8, y + bar_h / 2 - 2, "start", NULL, "%.0f images/s",
                 runs[i]->images_per_s);
        svg_text(f, x + 8, y + bar_h / 2 + 13, "start", "font-size:11px;fill:#555",
                 "stall %.1f%% (measured in coordl_next)", 100 * runs[i]->stall_fraction);
    }
    /* legend */
    static const char *const seg_name[3] = {"compute (trainer step)", "prep stall (decode, augment)",
                                            "fetch stall (storage)"};
    double ly = py_axis + 62;
    for (int s = 0; s < 3; s++) {
        double lx = px0 + s * 230;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/>\n", lx,
                ly - 11, seg_col[s]);
        svg_text(f, lx + 20, ly, "start", NULL, "%s", seg_name[s]);
    }
    svg_text(f, px0, ly + 22, "start", "font-size:11px;fill:#555",
             "prep stall = warm - synthetic, fetch stall = cold - warm (time per image); "
             "cold run: prep %.1f%%, fetch %.1f%% of its time",
             100 * r->prep_stall_fraction, 100 * r->fetch_stall_fraction);

    /* ---- panel 2: what-if curves ---- */
    const double qx0 = 90, qx1 = 660, qy0 = 450, qy1 = 760;
    svg_text(f, 20, qy0 - 26, "start", "font-size:15px;font-weight:bold",
             "2. What-if: predicted throughput by cache size and loader threads");
    double ymaxv = r->ingest_images_per_s;
    for (size_t j = 0; j < nt; j++)
        for (int k = 0; k <= 100; k++)
            ymaxv = fmax(ymaxv, coordl_report_predict(r, k / 100.0, tl[j], 0).predicted_images_per_s);
    for (size_t i = 0; i < nv; i++)
        if (v[i].ok)
            ymaxv = fmax(ymaxv, v[i].measured);
    if (!(ymaxv > 0) || !isfinite(ymaxv))
        ymaxv = 1;
    double ystep = nice_step(ymaxv * 1.05, 6), ymax = ystep * ceil(ymaxv * 1.05 / ystep);
#define QX(fr) (qx0 + (qx1 - qx0) * (fr))
#define QY(val) (qy1 - (qy1 - qy0) * fmin(fmax((val) / ymax, 0), 1.02))
    for (double t = 0; t <= ymax + ystep * 1e-6; t += ystep) {
        char lab[32];
        fmt_tick(lab, sizeof lab, t, ystep);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                qx0, QY(t), qx1, QY(t));
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n",
                qx0 - 5, QY(t), qx0, QY(t));
        svg_text(f, qx0 - 8, QY(t) + 4, "end", NULL, "%s", lab);
    }
    for (int k = 0; k <= 100; k += 10) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n",
                QX(k / 100.0), qy0, QX(k / 100.0), qy1);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n",
                QX(k / 100.0), qy1, QX(k / 100.0), qy1 + 5);
        svg_text(f, QX(k / 100.0), qy1 + 19, "middle", NULL, "%d", k);
    }
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", qx0,
            qy1, qx1, qy1);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", qx0,
            qy0, qx0, qy1);
    svg_text(f, (qx0 + qx1) / 2, qy1 + 42, "middle", NULL,
             "cache size (%% of the dataset's %.1f MB, MinIO)", (double)r->dataset_bytes / 1e6);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f %.1f)\">"
               "throughput (images/s)</text>\n",
            28.0, (qy0 + qy1) / 2, 28.0, (qy0 + qy1) / 2);
    /* one curve per thread count */
    for (size_t j = 0; j < nt; j++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\"%s points=\"",
                PALETTE[j % NPAL], curve_width(j, nt), curve_dash(j));
        for (int k = 0; k <= 100; k++) {
            double y = coordl_report_predict(r, k / 100.0, tl[j], 0).predicted_images_per_s;
            fprintf(f, "%s%.1f,%.1f", k ? " " : "", QX(k / 100.0), QY(isfinite(y) ? y : 0));
        }
        fputs("\"/>\n", f);
    }
    /* the trainer's ingestion rate: the ceiling */
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" " INGEST_STYLE "/>\n",
            qx0, QY(r->ingest_images_per_s), qx1, QY(r->ingest_images_per_s));
    /* validation: measured points, with a thin line to the prediction */
    for (size_t i = 0; i < nv; i++) {
        if (!v[i].ok)
            continue;
        size_t j = 0;
        while (j < nt && tl[j] != v[i].threads)
            j++;
        const char *col = j < nt ? PALETTE[j % NPAL] : "#000";
        double x = QX(v[i].cache_fraction);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"1\"/>\n",
                x, QY(v[i].predicted), x, QY(v[i].measured), col);
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"%s\" stroke=\"#000\" "
                   "stroke-width=\"1.5\"/>\n",
                x, QY(v[i].measured), col);
        double pct = 100 * v[i].error;
        svg_text(f, x + 9, QY(v[i].measured) + (v[i].measured < v[i].predicted ? 14 : -6), "start",
                 "font-size:11px", "%+.0f%%", fabs(pct) < 0.5 ? 0.0 : pct);
    }
    /* legend */
    double lx = qx1 + 25, ly2 = qy0 + 4;
    svg_text(f, lx, ly2, "start", "font-weight:bold", "legend");
    ly2 += 22;
    for (size_t j = 0; j < nt; j++, ly2 += 20) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"%.1f\"%s/>\n",
                lx, ly2 - 4, lx + 30, ly2 - 4, PALETTE[j % NPAL], curve_width(j, nt), curve_dash(j));
        svg_text(f, lx + 38, ly2, "start", NULL, "%d loader %s (predicted)", tl[j], thr_word(tl[j]));
    }
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" " INGEST_STYLE "/>\n",
            lx, ly2 - 4, lx + 30, ly2 - 4);
    svg_text(f, lx + 38, ly2, "start", NULL, "trainer ingest rate (%.0f/s)", r->ingest_images_per_s);
    ly2 += 20;
    if (nv) {
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"#bbb\" stroke=\"#000\" "
                   "stroke-width=\"1.5\"/>\n",
                lx + 13, ly2 - 4);
        svg_text(f, lx + 38, ly2, "start", NULL, "measured (validation)");
        svg_text(f, lx + 38, ly2 + 15, "start", "font-size:11px;fill:#555",
                 "label: (predicted - measured) / measured");
        ly2 += 36;
    }
    svg_text(f, lx, ly2 + 6, "start", "font-size:11px;fill:#555", "model: min(ingest,");
    svg_text(f, lx, ly2 + 21, "start", "font-size:11px;fill:#555", "  prep/core x threads,");
    svg_text(f, lx, ly2 + 36, "start", "font-size:11px;fill:#555",
             "  storage / ((1 - cache) x item))");
#undef QX
#undef QY
    fputs("</svg>\n", f);
    if (fclose(f)) {
        fprintf(stderr, TOOL ": %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- repeated analyses --------------------------------------------------------- */

static double median_of(const coordl_report *reps, size_t n, size_t field_off)
{
    double x[MAX_REPEAT];
    for (size_t k = 0; k < n; k++)
        memcpy(&x[k], (const char *)&reps[k] + field_off, sizeof x[k]);
    qsort(x, n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

static const coordl_run_report *median_run(const coordl_report *reps, size_t n, size_t run_off)
{
    const coordl_run_report *p[MAX_REPEAT];
    for (size_t k = 0; k < n; k++)
        p[k] = (const coordl_run_report *)((const char *)&reps[k] + run_off);
    for (size_t i = 1; i < n; i++) /* insertion sort by images/s */
        for (size_t j = i; j > 0 && p[j]->images_per_s < p[j - 1]->images_per_s; j--) {
            const coordl_run_report *t = p[j];
            p[j] = p[j - 1];
            p[j - 1] = t;
        }
    return p[(n - 1) / 2];
}

/* The analyses' median: each run is the run of median images/s, each model
 * input and stall fraction the median; the what-if grid (borrowed from
 * reps[0]) is predicted again from those inputs, and the recommendation is
 * chosen again by the library's rule (the smallest cache, then the fewest
 * threads, predicted under 3% stall). One analysis is returned as is. */
static void median_report(const coordl_report *reps, size_t n, coordl_report *r)
{
    *r = reps[0];
    if (n < 2)
        return;
#define MED(field) r->field = median_of(reps, n, offsetof(coordl_report, field))
    MED(prep_stall_fraction);
    MED(fetch_stall_fraction);
    MED(ingest_images_per_s);
    MED(prep_images_per_s_per_core);
    MED(storage_mb_per_s);
    MED(memory_mb_per_s);
    MED(reader_mb_per_s);
    MED(cores_for_prep);
    MED(read_latency_ms);
#undef MED
    r->synthetic = *median_run(reps, n, offsetof(coordl_report, synthetic));
    r->warm = *median_run(reps, n, offsetof(coordl_report, warm));
    r->cold = *median_run(reps, n, offsetof(coordl_report, cold));
    r->recommend_threads = -1;
    r->recommend_cache_fraction = -1;
    for (size_t i = 0; i < r->n_whatif; i++) {
        coordl_whatif *w = &r->whatif[i];
        *w = coordl_report_predict(r, w->cache_fraction, w->threads, 0);
        if (w->predicted_stall_fraction < 0.03 &&
            (r->recommend_threads < 0 || w->cache_fraction < r->recommend_cache_fraction ||
             (w->cache_fraction == r->recommend_cache_fraction &&
              w->threads < r->recommend_threads))) {
            r->recommend_cache_fraction = w->cache_fraction;
            r->recommend_threads = w->threads;
        }
    }
    /* the depth again, by the library's rule, from the median inputs */
    if (r->recommend_readahead_items >= 0) {
        const double best = coordl_report_predict_readahead(r, 0.0, r->threads, 0, 4096).predicted_images_per_s;
        for (uint32_t d = 0; d <= 4096; d = d ? 2 * d : 1)
            if (coordl_report_predict_readahead(r, 0.0, r->threads, 0, d).predicted_images_per_s >= 0.97 * best) {
                r->recommend_readahead_items = (int32_t)d;
                break;
            }
    }
}

/* ---- main ---------------------------------------------------------------------- */

static int cmp_int(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
    args a;
    int help = 0;
    int rc = parse_args(argc, argv, &a, &help);
    if (rc)
        return rc;
    if (help) {
        usage(stdout);
        return 0;
    }

    coordl_config cfg = coordl_config_default();
    cfg.source = a.data;
    cfg.batch_size = a.batch_size;
    cfg.out_w = cfg.out_h = a.size;
    cfg.threads = a.threads;
    cfg.seed = a.seed;
    cfg.on_bad_sample = COORDL_BAD_SUBSTITUTE; /* a few bad files do not stop the analysis */

    /* index once: is the dataset readable, and how big is it? */
    coordl_config probe_cfg = cfg;
    probe_cfg.threads = 1;
    probe_cfg.prefetch_batches = 1;
    coordl *L = NULL;
    if (coordl_open(&probe_cfg, &L) != COORDL_OK) {
        fprintf(stderr, TOOL ": cannot read the dataset %s: %s\n", a.data, coordl_errmsg(NULL));
        return 1;
    }
    coordl_stats st;
    coordl_get_stats(L, &st);
    uint64_t dataset_bytes = st.dataset_bytes;
    coordl_close(L);

    if (mkdirs(a.out) || access(a.out, W_OK)) {
        fprintf(stderr, TOOL ": cannot write to the output folder %s: %s\n", a.out, strerror(errno));
        return 1;
    }

    /* the figures are timings: say so when something else uses the CPUs */
    double load[1];
    if (getloadavg(load, 1) == 1 && load[0] > 0.5)
        fprintf(stderr, TOOL ": warning: the CPUs are busy before the analysis starts (load "
                        "average %.1f, %d cores): the figures will be noisy\n",
                load[0], usable_cores());

    rc = 1;
    char *json_path = join(a.out, "report.json"), *svg_path = join(a.out, "report.svg");
    int *tl = NULL;
    coordl_report r, reps[MAX_REPEAT];
    int nreps = 0;
    memset(&r, 0, sizeof r);
    memset(reps, 0, sizeof reps);
    if (!json_path || !svg_path) {
        fprintf(stderr, TOOL ": out of memory\n");
        goto done;
    }

    cfg.cache_bytes = (uint64_t)(a.cache_fraction * (double)dataset_bytes + 0.5);
    step_ctx sc = {a.step_ms, a.step_kind, 0};
    coordl_analyze_opts o;
    memset(&o, 0, sizeof o);
    o.batches = a.batches;
    o.synthetic_step_ms = a.step_ms;
    o.progress = progress;
    double t_start = now_s();
    for (int k = 0; k < a.repeat; k++) {
        if (a.repeat > 1) {
            char line[64];
            snprintf(line, sizeof line, "analysis %d/%d", k + 1, a.repeat);
            progress(NULL, line);
        }
        coordl_status st_an = coordl_analyze(&cfg, step, &sc, &o, &reps[k]);
        nreps = k + 1;
        if (st_an != COORDL_OK) {
            fprintf(stderr, TOOL ": analysis of %s failed: %s: %s\n", a.data,
                    coordl_strerror(st_an), coordl_errmsg(NULL));
            goto done;
        }
    }
    median_report(reps, (size_t)nreps, &r);

    /* the thread counts of the what-if grid (plus --threads) */
    size_t nt = 0;
    tl = malloc((r.n_whatif + 1) * sizeof *tl);
    if (!tl) {
        fprintf(stderr, TOOL ": out of memory\n");
        goto done;
    }
    for (size_t i = 0; i <= r.n_whatif; i++) {
        int t = i < r.n_whatif ? r.whatif[i].threads : a.threads;
        int seen = 0;
        for (size_t j = 0; j < nt; j++)
            seen |= tl[j] == t;
        if (!seen && t > 0)
            tl[nt++] = t;
    }
    qsort(tl, nt, sizeof *tl, cmp_int);
    /* at most MAX_CURVES thread counts in the table and the plot: spread
     * over the grid, keeping --threads and the validation's other count */
    if (nt > MAX_CURVES) {
        int must[2] = {a.threads, a.threads > 1 ? 1 : 2};
        int keep[MAX_CURVES];
        size_t nk = 0;
        for (size_t m = 0; m < 2; m++)
            if (nk == 0 || keep[0] != must[m])
                keep[nk++] = must[m];
        for (size_t k = 0; nk < MAX_CURVES && k < MAX_CURVES; k++) {
            int t = tl[(k * (nt - 1) + (MAX_CURVES - 1) / 2) / (MAX_CURVES - 1)];
            int seen = 0;
            for (size_t j = 0; j < nk; j++)
                seen |= keep[j] == t;
            if (!seen)
                keep[nk++] = t;
        }
        memcpy(tl, keep, nk * sizeof *tl);
        nt = nk;
        qsort(tl, nt, sizeof *tl, cmp_int);
    }

    print_report(&a, &r, tl, nt);

    /* validation: settings the model was not fitted on (it was fitted at
     * --threads with 100% and 0% cache) */
    vpoint v[4];
    size_t nv = 0;
    int check_failed = 0;
    if (a.validate) {
        int t_other = a.threads > 1 ? 1 : 2;
        const struct { double f; int t; } pts[4] = {
            {0.25, a.threads}, {0.75, a.threads}, {1.0, t_other}, {0.5, t_other}};
        for (size_t i = 0; i < 4; i++) {
            memset(&v[nv], 0, sizeof v[nv]);
            v[nv].cache_fraction = pts[i].f;
            v[nv].threads = pts[i].t;
            v[nv].predicted = coordl_report_predict(&r, pts[i].f, pts[i].t, 0).predicted_images_per_s;
            char line[160];
            snprintf(line, sizeof line, "validation %zu/4: cache %.0f%%, %d %s", i + 1,
                     100 * pts[i].f, pts[i].t, thr_word(pts[i].t));
            progress(NULL, line);
            if (measure(&cfg, dataset_bytes, a.batches, a.repeat, &sc, &v[nv])) {
                fprintf(stderr, TOOL ": validation point %zu could not be measured\n", i + 1);
                check_failed = 1;
            }
            nv++;
        }
        printf("\nvalidation: settings not used for fitting (fitted: %d %s at cache 100%% and 0%%)\n",
               r.threads, thr_word(r.threads));
        printf("  cache  threads   predicted    measured    error   cache hits   spread of %d\n",
               a.repeat);
        double worst = 0;
        for (size_t i = 0; i < nv; i++) {
            if (!v[i].ok) {
                printf("  %4.0f%%  %7d  %10.1f    (failed)\n", 100 * v[i].cache_fraction,
                       v[i].threads, v[i].predicted);
                continue;
            }
            double lo = v[i].runs[0], hi = v[i].runs[0];
            for (int m = 1; m < v[i].nruns; m++) {
                lo = fmin(lo, v[i].runs[m]);
                hi = fmax(hi, v[i].runs[m]);
            }
            printf("  %4.0f%%  %7d  %10.1f  %10.1f  %+6.1f%%      %5.1f%%       %5.1f%%\n",
                   100 * v[i].cache_fraction, v[i].threads, v[i].predicted, v[i].measured,
                   100 * v[i].error, 100 * v[i].cache_hit_rate,
                   v[i].measured > 0 ? 100 * (hi - lo) / v[i].measured : 0.0);
            if (!isfinite(v[i].error))
                check_failed = 1;
            else
                worst = fmax(worst, fabs(v[i].error));
        }
        printf("  max |error| %.1f%%", 100 * worst);
        if (a.check) {
            check_failed |= worst > a.check_tol;
            printf(" (--check %.1f%%: %s)", 100 * a.check_tol, check_failed ? "FAILED" : "passed");
        }
        printf("\n");
    }

    int io_failed = write_json(json_path, &r, v, nv);
    io_failed |= write_svg(svg_path, &a, &r, tl, nt, v, nv);
    printf("\nwrote %s and %s (%.1f s)\n", json_path, svg_path, now_s() - t_start);
    fflush(stdout);
    rc = 0;
    if (io_failed)
        rc = 1;
    else if (a.check && check_failed) {
        fprintf(stderr, TOOL ": validation error above the tolerance %.3g\n", a.check_tol);
        rc = 1;
    }
done:
    free(tl);
    free(json_path);
    free(svg_path);
    /* r borrows the what-if grid of one of reps */
    for (int k = 0; k < nreps; k++)
        coordl_report_free(&reps[k]);
    return rc;
}
