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

/* coordl's message in the tool's terms: what the library calls the
 * config's `source` (cfg.source) is the tool's --data. Returns a static
 * buffer (the tool is single-threaded). */
static const char *data_msg(const char *msg)
{
    static char out[2048];
    size_t o = 0;
    const char *p = msg;
    if (strncmp(p, "source: ", 8) == 0) { /* the field's name leading the message */
        o = (size_t)snprintf(out, sizeof out, "--data: ");
        p += 8;
    }
    while (*p && o + 16 < sizeof out) {
        static const char *const names[] = {"cfg.source", "set source to", "source expects"};
        static const char *const subst[] = {"--data", "give --data", "--data expects"};
        size_t k = 0;
        while (k < 3 && strncmp(p, names[k], strlen(names[k])) != 0)
            k++;
        if (k < 3) {
            o += (size_t)snprintf(out + o, sizeof out - o, "%s", subst[k]);
            p += strlen(names[k]);
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    return out;
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

/* A JSON number, or null when it is not finite. */
static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

/* ---- the validation points --------------------------------------------- */

#define MAX_REPEAT 9
#define MAX_CURVES 8

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
        fprintf(stderr, TOOL ": --data %s: %s\n", cfg.source, data_msg(coordl_errmsg(NULL)));
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

/* "12.3%", or "within noise" with the reason. */
static void slowdown_text(char *buf, size_t cap, double fraction, int within_noise)
{
    if (within_noise)
        snprintf(buf, cap, "within noise (the run was faster than its reference)");
    else
        snprintf(buf, cap, "%.1f%%", 100 * fraction);
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

    printf("run                    images/s    stall (time waiting in coordl_next)\n");
    printf("  synthetic          %10.1f   %5.1f%%   trainer alone: its ingestion rate\n",
           r->synthetic.images_per_s, 100 * r->synthetic.stall_fraction);
    printf("  warm (all cached)  %10.1f   %5.1f%%   prep-bound: no storage reads\n",
           r->warm.images_per_s, 100 * r->warm.stall_fraction);
    printf("  cold (no cache)    %10.1f   %5.1f%%   storage + prep\n", r->cold.images_per_s,
           100 * r->cold.stall_fraction);
    /* "stall" above is time waiting in coordl_next; the differential split
     * is a slowdown (a faster run than its reference is noise, not 0%) */
    char prep[80], fetch[80];
    slowdown_text(prep, sizeof prep, r->prep_slowdown_fraction, r->prep_within_noise);
    slowdown_text(fetch, sizeof fetch, r->fetch_slowdown_fraction, r->fetch_within_noise);
    printf("slowdown (share of the cold run's time): prep %s, fetch %s\n\n", prep, fetch);

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

/* The library's figure (coordl_report_svg), with the validation points. */
static int write_svg(const char *path, const coordl_report *r, const vpoint *v, size_t nv)
{
    coordl_measured m[4];
    size_t nm = 0;
    for (size_t i = 0; i < nv && nm < 4; i++)
        if (v[i].ok) {
            m[nm].cache_fraction = v[i].cache_fraction;
            m[nm].threads = v[i].threads;
            m[nm++].images_per_s = v[i].measured;
        }
    size_t n = coordl_report_svg(r, m, nm, NULL, 0);
    char *text = malloc(n + 1);
    if (!text) {
        fprintf(stderr, TOOL ": out of memory\n");
        return -1;
    }
    coordl_report_svg(r, m, nm, text, n + 1);
    FILE *f = fopen(path, "w");
    int bad = !f || fwrite(text, 1, n, f) != n;
    if (f && fclose(f))
        bad = 1;
    if (bad)
        fprintf(stderr, TOOL ": %s: %s\n", path, strerror(errno));
    free(text);
    return bad ? -1 : 0;
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
        fprintf(stderr, TOOL ": cannot read the dataset %s: %s\n", a.data, data_msg(coordl_errmsg(NULL)));
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
    coordl_report r;
    memset(&r, 0, sizeof r);
    if (!json_path || !svg_path) {
        fprintf(stderr, TOOL ": out of memory\n");
        goto done;
    }

    cfg.cache_bytes = (uint64_t)(a.cache_fraction * (double)dataset_bytes + 0.5);
    step_ctx sc = {a.step_ms, a.step_kind, 0};
    /* the library runs the analyses and takes their median */
    coordl_analyze_opts o = coordl_analyze_opts_default();
    o.batches = a.batches;
    o.synthetic_step_ms = a.step_ms;
    o.progress = progress;
    o.repeat = (uint32_t)a.repeat;
    char step_name[64];
    snprintf(step_name, sizeof step_name, "stand-in: %s %.3g ms", STEP_NAMES[a.step_kind], a.step_ms);
    o.step_name = step_name;
    double t_start = now_s();
    coordl_status st_an = coordl_analyze(&cfg, step, &sc, &o, &r);
    if (st_an != COORDL_OK) {
        fprintf(stderr, TOOL ": analysis of %s failed: %s: %s\n", a.data, coordl_strerror(st_an),
                data_msg(coordl_errmsg(NULL)));
        goto done;
    }

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
    io_failed |= write_svg(svg_path, &r, v, nv);
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
    coordl_report_free(&r);
    return rc;
}
