/*
 * bench_group - coordinated prep: k training jobs on one machine over the
 * same dataset, as one coordl group (each batch prepared once, every job
 * gets every batch) against k separate loaders (every job prepares every
 * batch itself), measured in one run.
 *
 *   bench_group --data DIR [--jobs 1,2,3,4] [--threads 0] [--batch 64]
 *               [--out 224] [--compute-ms 0] [--rounds 1]
 *               [--cache-fraction 0]
 *
 * A job is a child process (fork) that opens a loader (train pipeline:
 * RandomResizedCrop out x out + flip, F32 NCHW; coordinated: cfg.group
 * with group_size k), tells the parent it is ready, waits for the common
 * start, and consumes one epoch: a trivial consumer that reads one value
 * per row, plus --compute-ms of busy CPU per batch if asked. Then it
 * reports its images/s (its own wall time from the start to its end of
 * epoch), its stall, and the rows its workers prepared, and exits.
 *
 * The parent warms the page cache (reads every file once), then for each
 * k runs both modes (their order alternates with k and round, so drift on
 * a shared machine hits both), waits for every child, and takes their CPU
 * (user + system) from getrusage(RUSAGE_CHILDREN) before and after: the
 * jobs' whole CPU for the epoch, including open (indexing) and the
 * batches prefetched into the next epoch before close.
 *
 * Prints a table and, per case,
 *   RESULT group <k> <coord|uncoord> <img/s per job, mean> <img/s per job,
 *          min> <img/s all jobs> <CPU s> <rows prepared, all jobs> <wall s>
 * and per k
 *   RESULT group_ratio <k> <CPU coord/uncoord> <CPU coord/one job's>
 */
#include "bench_common.h"
#include "coordl.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define MAX_JOBS 16
#define MAX_ROUNDS 16

typedef struct {
    int ok;
    char err[256];
    uint64_t images, batches;
    double secs;          /* go -> end of epoch */
    double stall_s;       /* in coordl_next */
    uint64_t prepared;    /* rows this job's workers prepared */
    uint32_t members;     /* group members right after open */
} job_report;

typedef struct {
    const char *data;
    int threads;
    uint32_t batch, out;
    double compute_ms;
    uint64_t cache_bytes;
} bench_opts;

static volatile float sink;

static double cpu_children_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static void busy_ms(double ms)
{
    if (ms <= 0) return;
    const double until = now_s() + ms * 1e-3;
    float x = 1.0f;
    while (now_s() < until)
        for (int i = 0; i < 1000; i++) x = x * 1.0000001f + 1e-7f;
    sink = x;
}

static void log_quiet(void *user, coordl_log_level level, const char *msg)
{
    (void)user;
    if (level <= COORDL_LOG_WARN) fprintf(stderr, "  coordl: %s\n", msg);
}

/* One job: runs in the child, writes its report to report_fd, exits. */
static void job_main(const bench_opts *o, const char *group, int k, int ready_fd, int go_fd,
                     int report_fd)
{
    job_report R;
    memset(&R, 0, sizeof R);
    coordl_config cfg = coordl_config_default();
    cfg.source = o->data;
    cfg.pipeline = COORDL_PIPE_TRAIN;
    cfg.layout = COORDL_F32_NCHW;
    cfg.batch_size = o->batch;
    cfg.out_w = cfg.out_h = o->out;
    cfg.threads = o->threads;
    cfg.seed = 11;
    cfg.cache_bytes = o->cache_bytes;
    cfg.log = log_quiet;
    if (group) {
        cfg.group = group;
        cfg.group_size = k;
        cfg.group_timeout_ms = 120000;
    }
    coordl *L = NULL;
    coordl_status rc = coordl_open(&cfg, &L);
    char c = 'R';
    if (write(ready_fd, &c, 1) != 1) _exit(3);
    if (rc != COORDL_OK) {
        snprintf(R.err, sizeof R.err, "coordl_open: %s: %s", coordl_strerror(rc), coordl_errmsg(NULL));
        if (write(report_fd, &R, sizeof R) != (ssize_t)sizeof R) _exit(4);
        _exit(0);
    }
    coordl_stats st;
    coordl_get_stats(L, &st);
    R.members = st.group_members; /* all joined by now (later, some may have left) */
    ssize_t got = read(go_fd, &c, 1); /* EOF: the parent closed it, all start */
    (void)got;
    const double t0 = now_s();
    for (;;) {
        coordl_batch b;
        rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) break;
        if (rc != COORDL_OK) {
            snprintf(R.err, sizeof R.err, "coordl_next: %s: %s", coordl_strerror(rc), coordl_errmsg(L));
            break;
        }
        const float *d = b.data;
        const size_t row = (size_t)b.c * b.h * b.w;
        float s = 0;
        for (uint32_t i = 0; i < b.n; i++) s += d[i * row];
        sink = s;
        busy_ms(o->compute_ms);
        R.images += b.n;
        R.batches++;
        coordl_release(L, &b);
    }
    R.secs = now_s() - t0;
    coordl_get_stats(L, &st);
    R.stall_s = (double)st.stall_ns * 1e-9;
    R.prepared = st.items_prepared;
    R.ok = R.err[0] == '\0';
    coordl_close(L);
    if (write(report_fd, &R, sizeof R) != (ssize_t)sizeof R) _exit(4);
    _exit(0);
}

typedef struct {
    double rate_mean, rate_min, rate_all, cpu_s, wall_s, stall_frac;
    uint64_t prepared, images_per_job;
} case_result;

/* Runs k jobs at once, coordinated (one group) or not; fills *cr. */
static int run_case(const bench_opts *o, int k, int coordinated, int round, case_result *cr)
{
    char group[96];
    snprintf(group, sizeof group, "bench-%d-%d-%d", (int)getpid(), k, round);
    char shm[128];
    snprintf(shm, sizeof shm, "/coordl-%s", group);
    shm_unlink(shm);
    int ready[2], go[2], rep[2];
    if (pipe(ready) || pipe(go) || pipe(rep)) { perror("pipe"); return -1; }
    const double cpu0 = cpu_children_s();
    pid_t pid[MAX_JOBS];
    fflush(NULL);
    for (int j = 0; j < k; j++) {
        pid[j] = fork();
        if (pid[j] < 0) { perror("fork"); return -1; }
        if (pid[j] == 0) {
            close(ready[0]);
            close(go[1]);
            close(rep[0]);
            job_main(o, coordinated ? group : NULL, k, ready[1], go[0], rep[1]);
        }
    }
    close(ready[1]);
    close(go[0]);
    close(rep[1]);
    for (int j = 0; j < k; j++) {
        char c;
        if (read(ready[0], &c, 1) != 1) { fprintf(stderr, "bench_group: a job died before it was ready\n"); break; }
    }
    const double t0 = now_s();
    close(go[1]); /* every job reads EOF: start */
    job_report R[MAX_JOBS];
    int nrep = 0, failed = 0;
    while (nrep < k) {
        ssize_t n = read(rep[0], &R[nrep], sizeof R[0]);
        if (n == (ssize_t)sizeof R[0]) { nrep++; continue; }
        if (n < 0 && errno == EINTR) continue;
        break;
    }
    for (int j = 0; j < k; j++) {
        int status;
        waitpid(pid[j], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
    }
    const double wall = now_s() - t0;
    const double cpu = cpu_children_s() - cpu0;
    close(ready[0]);
    close(rep[0]);
    shm_unlink(shm); /* normally gone already: the last job out removes it */
    if (nrep != k || failed) {
        fprintf(stderr, "bench_group: %d of %d jobs reported (%s)\n", nrep, k, failed ? "some failed" : "");
        return -1;
    }
    memset(cr, 0, sizeof *cr);
    cr->rate_min = 1e30;
    double stall = 0, secs = 0;
    for (int j = 0; j < k; j++) {
        if (!R[j].ok) { fprintf(stderr, "bench_group: job %d: %s\n", j, R[j].err); return -1; }
        const double rate = (double)R[j].images / R[j].secs;
        cr->rate_mean += rate / k;
        if (rate < cr->rate_min) cr->rate_min = rate;
        cr->prepared += R[j].prepared;
        cr->images_per_job = R[j].images;
        stall += R[j].stall_s;
        secs += R[j].secs;
        if (coordinated && R[j].members != (uint32_t)k)
            fprintf(stderr, "bench_group: job %d saw %u group members, expected %d\n", j, R[j].members, k);
    }
    cr->rate_all = (double)cr->images_per_job * k / wall;
    cr->cpu_s = cpu;
    cr->wall_s = wall;
    cr->stall_frac = secs > 0 ? stall / secs : 0;
    return 0;
}

/* Reads every file once (warm page cache); returns the dataset's bytes. */
static uint64_t warm_page_cache(const char *root, size_t *nfiles)
{
    file_list fl;
    if (list_image_folder(root, &fl) != 0) {
        fprintf(stderr, "bench_group: cannot list %s\n", root);
        exit(1);
    }
    char *buf = xmalloc(1 << 20);
    for (size_t i = 0; i < fl.n; i++) {
        FILE *f = fopen(fl.paths[i], "rb");
        if (!f) continue;
        while (fread(buf, 1, 1 << 20, f) > 0) {
        }
        fclose(f);
    }
    free(buf);
    const uint64_t bytes = fl.total_bytes;
    *nfiles = fl.n;
    free_file_list(&fl);
    return bytes;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_group --data DIR [--jobs 1,2,3,4] [--threads 0] [--batch 64] [--out 224]\n"
                    "                   [--compute-ms 0] [--rounds 1] [--cache-fraction 0]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    bench_opts o = {NULL, 0, 64, 224, 0, 0};
    const char *jobs_arg = "1,2,3,4";
    int rounds = 1;
    double cache_fraction = 0;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage();
        if (!strcmp(a, "--data")) o.data = v;
        else if (!strcmp(a, "--jobs")) jobs_arg = v;
        else if (!strcmp(a, "--threads")) o.threads = atoi(v);
        else if (!strcmp(a, "--batch")) o.batch = (uint32_t)atoi(v);
        else if (!strcmp(a, "--out")) o.out = (uint32_t)atoi(v);
        else if (!strcmp(a, "--compute-ms")) o.compute_ms = atof(v);
        else if (!strcmp(a, "--rounds")) rounds = atoi(v);
        else if (!strcmp(a, "--cache-fraction")) cache_fraction = atof(v);
        else usage();
    }
    if (!o.data || o.batch == 0 || o.out == 0 || rounds < 1 || rounds > MAX_ROUNDS) usage();
    int ks[MAX_JOBS], nk = 0;
    for (const char *p = jobs_arg; *p && nk < MAX_JOBS;) {
        int k = atoi(p);
        if (k < 1 || k > MAX_JOBS) usage();
        ks[nk++] = k;
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    signal(SIGPIPE, SIG_IGN);
    size_t nfiles = 0;
    const uint64_t bytes = warm_page_cache(o.data, &nfiles);
    o.cache_bytes = (uint64_t)(cache_fraction * (double)bytes);

    printf("coordl coordinated prep, %d cores; data %s (%zu files, %.1f MB, page cache warm)\n",
           usable_cores(), o.data, nfiles, (double)bytes / 1e6);
    printf("each job: one epoch, train %ux%u F32 NCHW, batch %u, %s workers, cache %.0f%% of the dataset%s, "
           "trivial consumer", o.out, o.out, o.batch, o.threads ? "fixed" : "one per core",
           cache_fraction * 100, cache_fraction > 0 ? " (coordinated: one shared; separate: one per job)" : "");
    if (o.compute_ms > 0) printf(" + %.1f ms busy CPU per batch", o.compute_ms);
    printf("; median of %d round(s)\n\n", rounds);
    printf("%-3s %-13s %12s %12s %12s %8s %10s %10s %8s %9s\n", "k", "mode", "img/s/job", "min/job",
           "img/s all", "wall s", "CPU s", "CPU/epoch", "stall", "prepared");

    double cpu[MAX_JOBS][2];
    double one_job_cpu = 0;
    for (int ki = 0; ki < nk; ki++) {
        const int k = ks[ki];
        case_result res[2][MAX_ROUNDS];
        for (int r = 0; r < rounds; r++)
            for (int m = 0; m < 2; m++) {
                const int coordinated = (m + ki + r) % 2; /* alternate which goes first */
                if (run_case(&o, k, coordinated, r, &res[coordinated][r]) != 0) return 1;
            }
        for (int coordinated = 0; coordinated < 2; coordinated++) {
            double v[6][MAX_ROUNDS];
            for (int r = 0; r < rounds; r++) {
                const case_result *c = &res[coordinated][r];
                v[0][r] = c->rate_mean;
                v[1][r] = c->rate_min;
                v[2][r] = c->rate_all;
                v[3][r] = c->wall_s;
                v[4][r] = c->cpu_s;
                v[5][r] = c->stall_frac;
            }
            double med[6];
            for (int q = 0; q < 6; q++) med[q] = median(v[q], (size_t)rounds);
            const case_result *c0 = &res[coordinated][0];
            /* CPU per epoch: the k jobs each consumed one epoch */
            printf("%-3d %-13s %12.1f %12.1f %12.1f %8.2f %10.2f %10.2f %7.1f%% %9llu\n", k,
                   coordinated ? "coordinated" : "separate", med[0], med[1], med[2], med[3], med[4],
                   med[4] / k, 100 * med[5], (unsigned long long)c0->prepared);
            printf("RESULT group %d %s %.1f %.1f %.1f %.3f %llu %.3f\n", k, coordinated ? "coord" : "uncoord",
                   med[0], med[1], med[2], med[4], (unsigned long long)c0->prepared, med[3]);
            cpu[ki][coordinated] = med[4];
        }
        if (k == 1) one_job_cpu = cpu[ki][0];
        fflush(stdout);
    }
    printf("\nCPU of all k jobs for their epoch, coordinated / separate, and coordinated / one job alone:\n");
    for (int ki = 0; ki < nk; ki++) {
        const double r = cpu[ki][0] > 0 ? cpu[ki][1] / cpu[ki][0] : 0;
        const double r1 = one_job_cpu > 0 ? cpu[ki][1] / one_job_cpu : 0;
        printf("  k=%d: %.2fx of separate (1/k = %.2f); %.2fx one job's\n", ks[ki], r, 1.0 / ks[ki], r1);
        printf("RESULT group_ratio %d %.3f %.3f\n", ks[ki], r, r1);
    }
    printf("img/s/job: each job's images over its own time from the common start to its end of epoch\n"
           "(mean over jobs; min: the slowest job); CPU s: user + system of all k jobs (getrusage of the\n"
           "children), open and the batches prefetched past the epoch included; prepared: rows the jobs'\n"
           "workers prepared, summed (coordinated: each row once for the group)\n");
    return 0;
}
