/*
 * bench_mpi - the partitioned MinIO cache over MPI against a per-rank cache:
 * storage bytes per epoch and images/s, run under mpirun at N ranks.
 *
 *   mpirun -np N bench_mpi --data DIR [--fraction 0.3] [--epochs 4]
 *          [--threads 0] [--out 64] [--batch 32] [--prefetch 2]
 *          [--timeout-ms 2000] [--no-drop] [--modes rank,part]
 *          [--placement spread|none|default] [--sequential]
 *
 * Both cases run in the same mpirun with the same per-rank budget (fraction
 * x the dataset's bytes) and the same seed; their two handles stay open side
 * by side and their epochs alternate (the order flipped every epoch), so
 * that other load on the machine hits both alike (--sequential: all epochs
 * of the per-rank case, closed, then the partitioned one; without it the
 * per-rank epochs also run beside the partitioned handle's peer thread,
 * whose idle cost is measured at the end and printed):
 *   per-rank     each rank opens WITHOUT mpi_comm (cfg.rank/cfg.world set by
 *                hand): its MinIO cache admits whatever it reads, in every
 *                epoch until full, and never asks a peer;
 *   partitioned  cfg.mpi_comm = &comm: epoch 0 admits each rank's own share,
 *                one exchange of the cache map (an allreduce), then the items a
 *                peer holds come from that peer.
 * Before every epoch the ranks meet at a barrier, the first rank of each
 * node drops the page cache for every dataset file (posix_fadvise
 * DONTNEED; no root needed), and they meet again; each rank then times its
 * epoch up to COORDL_END_OF_EPOCH. The consumer does no work (the loader's
 * own rate). Up to --prefetch batches per rank are prepared while the ranks
 * wait at the barriers (the ring fills ahead): that part of an epoch is
 * neither timed nor necessarily read cold, which is why the ring is small.
 * The barriers sleep (MPI_Ibarrier + MPI_Test + 1 ms naps) so that ranks
 * waiting for the slowest do not spin on the cores the others need.
 *
 * Per epoch (sums over ranks, from coordl_get_epoch_stats): storage bytes,
 * peer bytes (fetch_bytes - cache_hit_bytes - storage_bytes), items; the
 * slowest rank's seconds; the storage bytes expected from what the caches
 * held when the epoch began. From epoch 1 on, the workers' mean time per
 * storage read and per peer fetch (coordl_stats read_ns minus its cache and
 * storage parts, over peer_hits), and the PUs each rank's workers were bound
 * to. Threads per rank: --threads, or 0 = the node's cores / the ranks on
 * the node (at least 1). Placement: coordl binds a handle's workers to the
 * first PUs of the set it is given, and every rank on a node would be given
 * the same set; --placement spread (default) sets cfg.cpuset to a slice per
 * local rank of the PUs the process may use (run it with mpirun --bind-to
 * none, else OpenMPI binds each of 1-2 ranks to one core), none sets
 * cfg.bind = 0 and leaves the workers to the scheduler, default leaves
 * coordl's own choice (every rank from the first PU of its set).
 *
 * Prints a table per case and, for epochs >= 1,
 *   RESULT mpi <ranks> <rank|part> <cache%> <storage%> <peer%> <expected%>
 *          <img/s per rank> <img/s aggregate> <peer fallbacks> <threads>
 *          <us per storage read> <us per peer fetch>
 * with percentages of the dataset's bytes per epoch (cache%: the ranks'
 * caches together, at the end), img/s per rank the median over epochs of
 * the ranks' mean items / seconds, aggregate the median over epochs of all
 * ranks' items / the slowest rank's seconds (what a synchronous
 * data-parallel trainer would get). Then, when the partitioned case ran,
 *   RESULT mpi_idle <ranks> <mean %> <worst %>
 * the CPU (percent of one core per rank) a process burns while its handles
 * sit idle with a partitioned one open: the peer thread polling.
 */
#include <fcntl.h>
#include <mpi.h>
#include <sched.h>

#include "bench_common.h"
#include "coordl.h"

#define MAX_EPOCHS 16 /* coordl keeps the last 16 epochs' stats */

static int g_rank, g_world, g_node_rank, g_node_size;
static MPI_Comm g_node;

typedef struct {
    const char *data;
    double fraction;
    int epochs, threads, drop, timeout_ms;
    uint32_t out, batch, prefetch;
    int spread;       /* 1: cfg.cpuset = this rank's slice; 0: cfg.bind = 0;
                         2: coordl's default (bound from the set's first PU) */
    char cpuset[256]; /* this rank's slice of the PUs it may use */
} bench_opts;

/* This rank's slice of the PUs the process may use: `threads` PUs starting
 * at local rank x threads (wrapping), so that ranks on one node do not all
 * bind their workers to the same first PUs. Returns 0 when the affinity
 * cannot be read. */
static int rank_cpuset(int threads, char *out, size_t cap)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    int pus[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) pus[n++] = c;
    if (n == 0) return 0;
    out[0] = 0;
    for (int i = 0; i < threads && i < n; i++) {
        size_t at = strlen(out);
        snprintf(out + at, cap - at, "%s%d", i ? "," : "", pus[(g_node_rank * threads + i) % n]);
    }
    return 1;
}

typedef struct {
    coordl *L;
    int partitioned;
    double secs[MAX_EPOCHS];
    uint64_t items[MAX_EPOCHS], storage[MAX_EPOCHS], peer[MAX_EPOCHS];
    uint64_t cached_at[MAX_EPOCHS]; /* cache bytes held when the epoch began */
    uint64_t cache_used, peer_hits, peer_fallbacks, peer_served, dataset_bytes;
    coordl_stats s1, s2; /* after epoch 0 and at the end: worker times */
    double drop_s;
} rank_run;

static void die(const char *what, coordl_status rc, const char *msg)
{
    fprintf(stderr, "bench_mpi: rank %d: %s: %s: %s\n", g_rank, what, coordl_strerror(rc), msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void log_fn(void *user, coordl_log_level level, const char *msg)
{
    (void)user;
    if (level <= COORDL_LOG_WARN) fprintf(stderr, "bench_mpi: rank %d: coordl: %s\n", g_rank, msg);
}

/* A barrier that naps instead of spinning: oversubscribed ranks that wait
 * for the slowest one leave it the cores. */
static void sleepy_barrier(MPI_Comm comm)
{
    MPI_Request r;
    MPI_Ibarrier(comm, &r);
    for (;;) {
        int done = 0;
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (done) break;
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Drops the page cache of every dataset file (this node's). */
static void drop_page_cache(const file_list *fl)
{
    for (size_t i = 0; i < fl->n; i++) {
        int fd = open(fl->paths[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

static void open_case(const bench_opts *o, const file_list *fl, int partitioned, int threads,
                      rank_run *rr)
{
    memset(rr, 0, sizeof *rr);
    rr->partitioned = partitioned;
    coordl_config cfg = coordl_config_default();
    cfg.source = o->data;
    cfg.pipeline = COORDL_PIPE_TRAIN;
    cfg.batch_size = o->batch;
    cfg.prefetch_batches = o->prefetch;
    cfg.out_w = cfg.out_h = o->out;
    cfg.layout = COORDL_U8_NHWC;
    cfg.threads = threads;
    cfg.seed = 7;
    cfg.cache_bytes = (uint64_t)(o->fraction * (double)fl->total_bytes);
    cfg.cache_policy = COORDL_CACHE_MINIO;
    cfg.peer_timeout_ms = o->timeout_ms;
    cfg.log = log_fn;
    if (o->spread == 1) cfg.cpuset = o->cpuset;
    else if (o->spread == 0) cfg.bind = 0;
    MPI_Comm comm = MPI_COMM_WORLD; /* coordl duplicates it at open */
    if (partitioned) {
        cfg.mpi_comm = &comm;
    } else {
        cfg.rank = g_rank;
        cfg.world = g_world;
    }
    coordl_status rc = coordl_open(&cfg, &rr->L); /* collective when partitioned */
    if (rc != COORDL_OK) die("coordl_open", rc, coordl_errmsg(NULL));
}

/* One epoch of one case: barrier, page cache dropped, barrier, timed. */
static void run_epoch(const bench_opts *o, const file_list *fl, rank_run *rr, int e)
{
    sleepy_barrier(MPI_COMM_WORLD);
    if (o->drop && g_node_rank == 0) {
        double d0 = now_s();
        drop_page_cache(fl);
        rr->drop_s += now_s() - d0;
    }
    sleepy_barrier(MPI_COMM_WORLD);
    coordl_stats st;
    coordl_get_stats(rr->L, &st);
    rr->cached_at[e] = st.cache_bytes_used;
    if (e == 1) rr->s1 = st;
    double t0 = now_s();
    for (;;) {
        coordl_batch b;
        coordl_status rc = coordl_next(rr->L, &b);
        if (rc == COORDL_END_OF_EPOCH) break;
        if (rc != COORDL_OK) die("coordl_next", rc, coordl_errmsg(rr->L));
        coordl_release(rr->L, &b);
    }
    rr->secs[e] = now_s() - t0;
}

static void close_case(const bench_opts *o, rank_run *rr)
{
    for (int e = 0; e < o->epochs; e++) {
        coordl_epoch_stats es;
        coordl_status rc = coordl_get_epoch_stats(rr->L, (uint64_t)e, &es);
        if (rc != COORDL_OK) die("coordl_get_epoch_stats", rc, "epoch not kept");
        rr->items[e] = es.items;
        rr->storage[e] = es.storage_bytes;
        /* fetch_bytes counts cache hits, peer fetches and storage reads */
        uint64_t local = es.cache_hit_bytes + es.storage_bytes;
        rr->peer[e] = es.fetch_bytes > local ? es.fetch_bytes - local : 0;
    }
    coordl_get_stats(rr->L, &rr->s2);
    rr->cache_used = rr->s2.cache_bytes_used;
    rr->peer_hits = rr->s2.peer_hits;
    rr->peer_fallbacks = rr->s2.peer_fallbacks;
    rr->peer_served = rr->s2.peer_served;
    rr->dataset_bytes = rr->s2.dataset_bytes;
    coordl_close(rr->L); /* collective when partitioned */
    rr->L = NULL;
}

/* CPU this process burns over one second while its handles sit idle
 * (every ring full, nothing consumed): with a partitioned handle open, that
 * is its peer thread polling. Percent of one core. */
static double idle_cpu(void)
{
    sleepy_barrier(MPI_COMM_WORLD);
    struct timespec ts = {0, 300000000L}; /* let the rings fill */
    nanosleep(&ts, NULL);
    const double c0 = cpu_s(), t0 = now_s();
    ts.tv_sec = 1;
    ts.tv_nsec = 0;
    nanosleep(&ts, NULL);
    const double pct = 100.0 * (cpu_s() - c0) / (now_s() - t0);
    sleepy_barrier(MPI_COMM_WORLD);
    return pct;
}

static uint64_t sum_u64(uint64_t v)
{
    uint64_t s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return s;
}

static double reduce_d(double v, MPI_Op op)
{
    double r = 0;
    MPI_Allreduce(&v, &r, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
    return r;
}

/* Expected storage bytes of an epoch >= 1 from the bytes the ranks' caches
 * held when it began: partitioned, the bytes no rank holds; per-rank, a
 * rank's cached item falls in its own share of an epoch with probability
 * 1/N, so the ranks hit cached/N together. */
static double expected_storage(int partitioned, double D, double cached)
{
    if (partitioned) return D > cached ? D - cached : 0;
    return D - cached / g_world;
}

/* Reduces one case over the ranks, prints its table and RESULT line. */
static void report(const bench_opts *o, const rank_run *rr, int threads)
{
    const int partitioned = rr->partitioned;
    const char *name = partitioned ? "partitioned" : "per-rank";
    const double D = (double)rr->dataset_bytes;
    const uint64_t cached = sum_u64(rr->cache_used);
    const uint64_t hits = sum_u64(rr->peer_hits), falls = sum_u64(rr->peer_fallbacks);
    const uint64_t served = sum_u64(rr->peer_served);
    const double drop_s = reduce_d(rr->drop_s, MPI_MAX);
    /* worker time per item from epoch 1 on (the ring's prefetch blurs the
     * edges): storage reads, and peer fetches (waiting for the reply, which
     * was requested when the slot was assigned, and copying it out) */
    const coordl_stats *a = &rr->s1, *b = &rr->s2;
    const uint64_t d_read = b->read_ns - a->read_ns, d_cache = b->read_cache_ns - a->read_cache_ns;
    const uint64_t d_stor = b->read_storage_ns - a->read_storage_ns;
    const double peer_ns = (double)sum_u64(d_read > d_cache + d_stor ? d_read - d_cache - d_stor : 0);
    const double stor_ns = (double)sum_u64(d_stor);
    const uint64_t peer_items = sum_u64(b->peer_hits - a->peer_hits);
    const uint64_t stor_items = sum_u64(b->storage_reads - a->storage_reads);
    /* where each rank's workers ran (coordl binds them one per PU) */
    char pus[48] = "", *all_pus = g_rank == 0 ? xmalloc(sizeof pus * (size_t)g_world) : NULL;
    for (uint32_t i = 0; i < b->threads && i < 64; i++) {
        size_t at = strlen(pus);
        snprintf(pus + at, sizeof pus - at, "%s%d", i ? "," : "", (int)b->worker_cpu[i]);
    }
    MPI_Gather(pus, (int)sizeof pus, MPI_CHAR, all_pus, (int)sizeof pus, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (g_rank == 0) {
        printf("\n%s cache, %d rank%s, %d thread%s/rank: at the end the caches together hold "
               "%.1f%% of the dataset\n",
               name, g_world, g_world > 1 ? "s" : "", threads, threads > 1 ? "s" : "",
               100.0 * cached / D);
        printf("workers' PUs as coordl reports them (bound unless --placement none), rank by rank:");
        for (int r = 0; r < g_world; r++) printf(" [%s]", all_pus + (size_t)r * sizeof pus);
        printf("\n");
        free(all_pus);
        printf("%-6s %7s %10s %9s %9s %10s %9s %9s %11s %11s\n", "epoch", "items", "storage MB",
               "storage%", "expected", "peer MB", "peer%", "slowest s", "img/s/rank",
               "img/s total");
    }
    double st_sum = 0, ex_sum = 0, peer_sum = 0, rates[MAX_EPOCHS], aggs[MAX_EPOCHS];
    int nr = 0;
    for (int e = 0; e < o->epochs; e++) {
        const uint64_t items = sum_u64(rr->items[e]), storage = sum_u64(rr->storage[e]);
        const uint64_t peer = sum_u64(rr->peer[e]);
        const double ex = e == 0 ? D : expected_storage(partitioned, D, (double)sum_u64(rr->cached_at[e]));
        const double slow = reduce_d(rr->secs[e], MPI_MAX);
        const double my_rate = rr->secs[e] > 0 ? (double)rr->items[e] / rr->secs[e] : 0;
        const double rate = reduce_d(my_rate, MPI_SUM) / g_world;
        if (g_rank == 0)
            printf("%-6d %7llu %10.1f %8.1f%% %8.1f%% %10.1f %8.1f%% %9.2f %11.0f %11.0f%s\n", e,
                   (unsigned long long)items, storage / 1e6, 100.0 * storage / D, 100.0 * ex / D,
                   peer / 1e6, 100.0 * peer / D, slow, rate, slow > 0 ? items / slow : 0.0,
                   e == 0 ? "  (fills the caches)" : "");
        if (e >= 1) {
            st_sum += (double)storage;
            ex_sum += ex;
            peer_sum += (double)peer;
            rates[nr] = rate;
            aggs[nr++] = slow > 0 ? items / slow : 0.0;
        }
    }
    const int n = o->epochs - 1;
    const double rate_med = median(rates, (size_t)nr), agg_med = median(aggs, (size_t)nr);
    if (g_rank == 0) {
        printf("epochs 1..%d: storage %.1f%% of the dataset per epoch (expected %.1f%%), peers "
               "%.1f%%; median %.0f img/s per rank, %.0f img/s in all\n",
               n, 100.0 * st_sum / n / D, 100.0 * ex_sum / n / D, 100.0 * peer_sum / n / D,
               rate_med, agg_med);
        printf("  peer hits %llu, items served %llu, fallbacks %llu; worker time per item: "
               "storage read %.0f us, peer fetch %.0f us; page-cache drop %.2f s per case\n",
               (unsigned long long)hits, (unsigned long long)served, (unsigned long long)falls,
               stor_items ? stor_ns / 1e3 / (double)stor_items : 0.0,
               peer_items ? peer_ns / 1e3 / (double)peer_items : 0.0, drop_s);
        printf("RESULT mpi %d %s %.1f %.1f %.1f %.1f %.0f %.0f %llu %d %.0f %.0f\n", g_world,
               partitioned ? "part" : "rank", 100.0 * cached / D, 100.0 * st_sum / n / D,
               100.0 * peer_sum / n / D, 100.0 * ex_sum / n / D, rate_med, agg_med,
               (unsigned long long)falls, threads,
               stor_items ? stor_ns / 1e3 / (double)stor_items : 0.0,
               peer_items ? peer_ns / 1e3 / (double)peer_items : 0.0);
        fflush(stdout);
    }
}

static void usage(void)
{
    if (g_rank == 0)
        fprintf(stderr, "usage: mpirun -np N bench_mpi --data DIR [--fraction 0.3] [--epochs 4] "
                        "[--threads 0] [--out 64] [--batch 32] [--prefetch 2] "
                        "[--timeout-ms 2000] [--no-drop] [--modes rank,part] "
                        "[--placement spread|none|default] [--sequential]\n");
    MPI_Finalize();
    exit(2);
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (g_rank == 0) fprintf(stderr, "bench_mpi: this MPI does not provide MPI_THREAD_MULTIPLE\n");
        MPI_Finalize();
        return 1;
    }
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &g_node);
    MPI_Comm_rank(g_node, &g_node_rank);
    MPI_Comm_size(g_node, &g_node_size);

    bench_opts o = {NULL, 0.3, 4, 0, 1, 2000, 64, 32, 2, 1, ""};
    int do_rank = 1, do_part = 1, sequential = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--no-drop") == 0) { o.drop = 0; continue; }
        if (strcmp(a, "--sequential") == 0) { sequential = 1; continue; }
        if (i + 1 >= argc) usage();
        const char *v = argv[++i];
        if (strcmp(a, "--data") == 0) o.data = v;
        else if (strcmp(a, "--fraction") == 0) o.fraction = atof(v);
        else if (strcmp(a, "--epochs") == 0) o.epochs = atoi(v);
        else if (strcmp(a, "--threads") == 0) o.threads = atoi(v);
        else if (strcmp(a, "--out") == 0) o.out = (uint32_t)atoi(v);
        else if (strcmp(a, "--batch") == 0) o.batch = (uint32_t)atoi(v);
        else if (strcmp(a, "--prefetch") == 0) o.prefetch = (uint32_t)atoi(v);
        else if (strcmp(a, "--timeout-ms") == 0) o.timeout_ms = atoi(v);
        else if (strcmp(a, "--placement") == 0) {
            if (strcmp(v, "spread") == 0) o.spread = 1;
            else if (strcmp(v, "none") == 0) o.spread = 0;
            else if (strcmp(v, "default") == 0) o.spread = 2;
            else usage();
        }
        else if (strcmp(a, "--modes") == 0) {
            do_rank = strstr(v, "rank") != NULL;
            do_part = strstr(v, "part") != NULL;
        } else usage();
    }
    if (!o.data || o.fraction <= 0 || o.epochs < 2 || o.epochs > MAX_EPOCHS || o.threads < 0 ||
        o.out == 0 || o.batch == 0 || o.prefetch == 0 || o.timeout_ms <= 0 || !(do_rank || do_part))
        usage();
    file_list fl;
    if (list_image_folder(o.data, &fl) != 0 || fl.n == 0) {
        fprintf(stderr, "bench_mpi: rank %d: no files under %s\n", g_rank, o.data);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const int threads = o.threads ? o.threads
                                  : (usable_cores() / g_node_size > 0 ? usable_cores() / g_node_size : 1);
    if (o.spread == 1 && !rank_cpuset(threads, o.cpuset, sizeof o.cpuset)) o.spread = 0;
    if (g_rank == 0) {
        printf("bench_mpi: %d rank%s (%d on this node, %d cores here), %zu files, %.1f MB; "
               "budget %.1f MB per rank (%.0f%%); %d epochs, out %ux%u U8, batch %u, "
               "prefetch %u, %d thread%s/rank, workers %s; page cache %s before every epoch\n",
               g_world, g_world > 1 ? "s" : "", g_node_size, usable_cores(), fl.n,
               fl.total_bytes / 1e6, o.fraction * (double)fl.total_bytes / 1e6, 100 * o.fraction,
               o.epochs, o.out, o.out, o.batch, o.prefetch, threads, threads > 1 ? "s" : "",
               o.spread == 1 ? "bound to a cpuset per local rank"
                             : o.spread == 2 ? "bound by coordl's default" : "unbound",
               o.drop ? "dropped" : "NOT dropped");
        fflush(stdout);
    }
    /* Both handles stay open side by side and their epochs alternate (the
     * order flipped every epoch), so that a noisy neighbour on the machine
     * hits both cases alike. */
    rank_run rr[2];
    int ncases = 0;
    double idle = -1;
    if (sequential) {
        if (do_rank) {
            open_case(&o, &fl, 0, threads, &rr[ncases]);
            for (int e = 0; e < o.epochs; e++) run_epoch(&o, &fl, &rr[ncases], e);
            close_case(&o, &rr[ncases++]);
        }
        if (do_part) {
            open_case(&o, &fl, 1, threads, &rr[ncases]);
            for (int e = 0; e < o.epochs; e++) run_epoch(&o, &fl, &rr[ncases], e);
            idle = idle_cpu();
            close_case(&o, &rr[ncases++]);
        }
    } else {
        if (do_rank) open_case(&o, &fl, 0, threads, &rr[ncases++]);
        if (do_part) open_case(&o, &fl, 1, threads, &rr[ncases++]);
        for (int e = 0; e < o.epochs; e++)
            for (int k = 0; k < ncases; k++) run_epoch(&o, &fl, &rr[(e + k) % ncases], e);
        if (do_part) idle = idle_cpu();
        for (int k = 0; k < ncases; k++) close_case(&o, &rr[k]);
    }
    for (int k = 0; k < ncases; k++) report(&o, &rr[k], threads);
    if (idle >= 0) {
        const double mean = reduce_d(idle, MPI_SUM) / g_world, worst = reduce_d(idle, MPI_MAX);
        if (g_rank == 0) {
            printf("\nidle partitioned handle (ring full, no requests): %.1f%% of a core per rank "
                   "(worst rank %.1f%%), the peer thread polling\n", mean, worst);
            printf("RESULT mpi_idle %d %.1f %.1f\n", g_world, mean, worst);
        }
    }
    free_file_list(&fl);
    MPI_Comm_free(&g_node);
    MPI_Finalize();
    return 0;
}
