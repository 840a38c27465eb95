/*
 * bench_storage - a cold epoch on slow storage, with and without read-ahead,
 * beside the warm (prep-bound) rate, in one run.
 *
 *   bench_storage --data DIR [--images N] [--threads 2] [--batch 32]
 *                 [--latencies 2,10] [--depths 0,8,32,128] [--rounds 3]
 *                 [--device PATH] [--random-access 0|1] [--readers sync,async]
 *
 * Storage: a coordl_io shim that holds the dataset's files in memory and
 * sleeps a fixed latency in every read_at (one per item: coordl reads an
 * item with one call), as a network file system or a cloud disk adds per
 * request; in memory, so that the page cache of this shared machine plays
 * no part and the latency is the only storage cost. --readers async
 * measures the same store through a coordl_io_async beside it
 * (cfg.io_async): each read is queued and done after the same latency by
 * one completion thread, as an object store client's event loop would,
 * so the read-ahead keeps its depth in flight from one I/O thread instead
 * of one thread per read (the "I/O threads" column counts coordl's, and
 * "+1" the reader's own completion thread). With
 * --device, DIR is also read through the POSIX reader with no shim (a
 * dataset on a slow block device, e.g. a loop device under dm-delay; the
 * page cache is dropped for its files before every case).
 *
 * Every case opens a fresh handle (no coordl cache: a cold epoch for the
 * loader), the train pipeline (RandomResizedCrop 224 + flip, F32 NCHW),
 * --threads prep threads, a consumer that takes batches as fast as they
 * come, and times one whole epoch from open (--images N: the first N
 * images instead). readahead_items = 0 is the
 * loader without read-ahead (workers read synchronously, bounded near
 * threads / latency); 8, 32, 128 keep that many items in flight ahead of
 * the workers. The warm case caches the whole dataset, runs a warm-up
 * epoch, then times --images images: the prep-bound rate the cold cases
 * are measured against.
 *
 * --rounds R: every round times every case once, each right after a warm
 * run of the same length (a neighbour's load on this shared machine then
 * hits both alike); the table gives medians over the rounds, the ratio
 * being each case over the warm run just before it. Prints a
 * table and one line per case:
 *   RESULT storage[-async] <latency_ms|warm|device> <depth> <img/s> <ratio to warm>
 *          [<ratio to warm, open excluded> <ratio to the +0 ms cold case>
 *           <ratio to warm, the next cold epoch> <coordl's I/O threads>]
 * The second ratio times the cold epoch from its first coordl_next, as the
 * warm figure is (its handle opened long before); the third needs 0 in
 * --latencies: the same fresh handle with no latency added, so a fresh
 * handle's own costs cancel and what is left is latency not hidden; the
 * fourth is the same handle's next --images images: still every item from
 * the slow reader (the handle has no coordl cache), but its ring and
 * arena touched and its I/O threads started: the steady cold rate.
 */
#include "bench_common.h"
#include "coordl.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>

/* The storage: every dataset file held in memory (so the page cache, and
 * whatever else this shared machine's jobs do to it, is out of the
 * measurement), served with a fixed sleep per read_at. */
typedef struct {
    char *path;
    uint8_t *data;
    uint64_t len;
} mem_file;

typedef struct {
    mem_file *files; /* sorted by path */
    size_t n;
    unsigned latency_us;
} sleepy;

static int cmp_mem_file(const void *a, const void *b)
{
    return strcmp(((const mem_file *)a)->path, ((const mem_file *)b)->path);
}

static void sleepy_load(sleepy *s, const char *root)
{
    file_list fl;
    if (list_image_folder(root, &fl) != 0) { fprintf(stderr, "bench_storage: cannot list %s\n", root); exit(1); }
    s->files = xmalloc(fl.n * sizeof *s->files);
    s->n = fl.n;
    for (size_t i = 0; i < fl.n; i++) {
        FILE *f = fopen(fl.paths[i], "rb");
        if (!f) { fprintf(stderr, "bench_storage: cannot read %s\n", fl.paths[i]); exit(1); }
        s->files[i].path = fl.paths[i];
        s->files[i].len = fl.sizes[i];
        s->files[i].data = xmalloc(fl.sizes[i] ? fl.sizes[i] : 1);
        if (fread(s->files[i].data, 1, fl.sizes[i], f) != fl.sizes[i]) { fprintf(stderr, "bench_storage: short read\n"); exit(1); }
        fclose(f);
    }
    qsort(s->files, s->n, sizeof *s->files, cmp_mem_file);
    /* read every byte once more: on this project's VM the first read of
     * memory just written by fread ran epochs 10-15% slower (a probe: the
     * same handle's epoch 0 at 0.87x its epoch 1 without this pass, 1.04x
     * with it), and only the first cold case would have paid for it */
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < s->n; i++)
        for (uint64_t j = 0; j < s->files[i].len; j += 64) sink ^= s->files[i].data[j];
    (void)sink;
}

static int sleepy_open(void *user, const char *path, void **file, uint64_t *size)
{
    const sleepy *s = user;
    mem_file key = {(char *)path, NULL, 0};
    mem_file *m = bsearch(&key, s->files, s->n, sizeof *s->files, cmp_mem_file);
    if (!m) return -ENOENT;
    *file = m;
    *size = m->len;
    return 0;
}

static int64_t sleepy_read_at(void *user, void *file, void *buf, uint64_t len, uint64_t offset)
{
    const sleepy *s = user;
    const mem_file *m = file;
    struct timespec ts = {(time_t)(s->latency_us / 1000000u), (long)(s->latency_us % 1000000u) * 1000L};
    while (s->latency_us && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    if (offset >= m->len) return 0;
    if (len > m->len - offset) len = m->len - offset;
    memcpy(buf, m->data + offset, (size_t)len);
    return (int64_t)len;
}

static void sleepy_close(void *user, void *file)
{
    (void)user;
    (void)file;
}

/* The same store as a coordl_io_async: a ring of queued reads, each done
 * latency_us after it was started by one completion thread (every read
 * has the same latency, so the ring is in due order). Nothing is
 * allocated per read. */
#define ASYNC_QUEUE 4096 /* readahead_items is at most 4096 */
typedef struct {
    void *buf;
    const uint8_t *src;
    uint64_t n, due_ns;
    coordl_io_done_fn done;
    void *token;
} async_slot;

typedef struct {
    coordl_io_async table;
    const sleepy *store;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    async_slot q[ASYNC_QUEUE];
    uint64_t head, tail;
    int stop;
    pthread_t thread;
} async_shim;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int async_read(void *user, const char *path, void *buf, uint64_t len, uint64_t offset, coordl_io_done_fn done,
                      void *token)
{
    async_shim *a = user;
    mem_file key = {(char *)path, NULL, 0};
    const mem_file *m = bsearch(&key, a->store->files, a->store->n, sizeof *a->store->files, cmp_mem_file);
    if (!m) return -ENOENT;
    const uint64_t n = offset >= m->len ? 0 : len < m->len - offset ? len : m->len - offset;
    pthread_mutex_lock(&a->mu);
    if (a->tail - a->head == ASYNC_QUEUE) { /* full: never at depth <= 4096; coordl reads it through io */
        pthread_mutex_unlock(&a->mu);
        return -EAGAIN;
    }
    async_slot *q = &a->q[a->tail++ % ASYNC_QUEUE];
    q->buf = buf;
    q->src = m->data + (offset < m->len ? offset : 0);
    q->n = n;
    q->due_ns = mono_ns() + (uint64_t)a->store->latency_us * 1000u;
    q->done = done;
    q->token = token;
    if (a->tail - a->head == 1) pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return 0;
}

static void *async_main(void *arg)
{
    async_shim *a = arg;
    pthread_mutex_lock(&a->mu);
    while (!a->stop || a->head != a->tail) {
        if (a->head == a->tail) {
            pthread_cond_wait(&a->cv, &a->mu);
            continue;
        }
        async_slot q = a->q[a->head % ASYNC_QUEUE];
        const uint64_t now = mono_ns();
        if (q.due_ns > now) {
            struct timespec ts = {(time_t)(q.due_ns / 1000000000u), (long)(q.due_ns % 1000000000u)};
            pthread_cond_timedwait(&a->cv, &a->mu, &ts);
            continue;
        }
        a->head++;
        pthread_mutex_unlock(&a->mu);
        memcpy(q.buf, q.src, (size_t)q.n);
        q.done(q.token, (int64_t)q.n);
        pthread_mutex_lock(&a->mu);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

static async_shim *async_start(const sleepy *store)
{
    async_shim *a = xmalloc(sizeof *a);
    memset(a, 0, sizeof *a);
    a->table.user = a;
    a->table.read = async_read;
    a->store = store;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&a->mu, NULL);
    if (pthread_create(&a->thread, NULL, async_main, a) != 0) { fprintf(stderr, "bench_storage: no thread\n"); exit(1); }
    return a;
}

/* After coordl_close: every read it started is done. */
static void async_stop(async_shim *a)
{
    pthread_mutex_lock(&a->mu);
    a->stop = 1;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a);
}

static void quiet(void *user, coordl_log_level level, const char *msg)
{
    (void)user;
    if (level <= COORDL_LOG_WARN) fprintf(stderr, "  coordl: %s\n", msg);
}

static coordl_config base_config(const char *data, int threads, uint32_t batch)
{
    coordl_config cfg = coordl_config_default();
    cfg.source = data;
    cfg.pipeline = COORDL_PIPE_TRAIN;
    cfg.threads = threads;
    cfg.batch_size = batch;
    cfg.out_w = cfg.out_h = 224;
    cfg.layout = COORDL_F32_NCHW;
    cfg.seed = 1;
    cfg.log = quiet;
    return cfg;
}

/* Times `images` images from open (the handle was just opened at t0);
 * *first: seconds from t0 to the first batch. */
static double timed(coordl *L, uint64_t images, double t0, double *stall, double *first, double *after_open)
{
    const double t_next = now_s(); /* the handle is open: its first coordl_next */
    uint64_t got = 0;
    *first = 0;
    coordl_stats s0;
    coordl_get_stats(L, &s0);
    while (got < images) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) continue;
        if (rc != COORDL_OK) {
            fprintf(stderr, "bench_storage: %s: %s\n", coordl_strerror(rc), coordl_errmsg(L));
            exit(1);
        }
        if (got == 0) *first = now_s() - t0;
        got += b.n;
        coordl_release(L, &b);
    }
    const double secs = now_s() - t0;
    coordl_stats s1;
    coordl_get_stats(L, &s1);
    *stall = (double)(s1.stall_ns - s0.stall_ns) / 1e9 / secs;
    *after_open = (double)got / (now_s() - t_next);
    return (double)got / secs;
}

static void drop_page_cache(const char *root)
{
    size_t nclasses;
    char **classes = sorted_names(root, &nclasses);
    for (size_t c = 0; classes && c < nclasses; c++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", root, classes[c]);
        size_t n;
        char **files = sorted_names(dir, &n);
        for (size_t f = 0; files && f < n; f++) {
            char p[8192];
            snprintf(p, sizeof p, "%s/%s", dir, files[f]);
            int fd = open(p, O_RDONLY);
            if (fd >= 0) { posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); close(fd); }
            free(files[f]);
        }
        free(files);
        free(classes[c]);
    }
    free(classes);
}

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        out[n++] = atoi(s);
        const char *c = strchr(s, ',');
        if (!c) break;
        s = c + 1;
    }
    return n;
}

int main(int argc, char **argv)
{
    const char *data = NULL, *device = NULL;
    uint64_t images = 0; /* 0: one whole epoch */
    int threads = 2, rounds = 3, random_access = 0;
    uint32_t batch = 32;
    int lat[8] = {2, 10}, nlat = 2, dep[8] = {0, 8, 32, 128}, ndep = 4;
    int nread = 1, readers[2] = {0, 1}; /* 0: coordl_io (sync); 1: coordl_io_async */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--data") && v) { data = v; i++; }
        else if (!strcmp(a, "--images") && v) { images = strtoull(v, NULL, 10); i++; }
        else if (!strcmp(a, "--threads") && v) { threads = atoi(v); i++; }
        else if (!strcmp(a, "--batch") && v) { batch = (uint32_t)atoi(v); i++; }
        else if (!strcmp(a, "--rounds") && v) { rounds = atoi(v); i++; }
        else if (!strcmp(a, "--latencies") && v) { nlat = parse_list(v, lat, 8); i++; }
        else if (!strcmp(a, "--depths") && v) { ndep = parse_list(v, dep, 8); i++; }
        else if (!strcmp(a, "--device") && v) { device = v; i++; }
        else if (!strcmp(a, "--random-access") && v) { random_access = atoi(v); i++; }
        else if (!strcmp(a, "--readers") && v) {
            nread = 0;
            if (strstr(v, "sync") && (strncmp(v, "sync", 4) == 0 || strstr(v, ",sync"))) readers[nread++] = 0;
            if (strstr(v, "async")) readers[nread++] = 1;
            if (nread == 0) { fprintf(stderr, "bench_storage: --readers takes sync, async or sync,async\n"); return 2; }
            i++;
        }
        else {
            fprintf(stderr, "usage: bench_storage --data DIR [--images N] [--threads 2] [--batch 32] "
                            "[--latencies 2,10] [--depths 0,8,32,128] [--rounds 3] [--device DIR] "
                            "[--random-access 0|1] [--readers sync,async]\n");
            return 2;
        }
    }
    if (!data) { fprintf(stderr, "bench_storage: --data DIR is required\n"); return 2; }

    /* warm: the prep-bound rate, from a handle whose cache holds the whole
     * dataset after a warm-up epoch; it stays open (idle, its ring full)
     * and is timed again in every round, beside the cold cases */
    coordl_config cfg = base_config(data, threads, batch);
    cfg.cache_bytes = (uint64_t)64 << 30; /* clamped to the dataset */
    /* By default the warm handle decodes the files as stored, as the cold
     * handles (no coordl cache) must: with jpeg_random_access its idle
     * workers rewrite the cached JPEGs with restart markers and then decode
     * only each crop (warm 2,570-2,590 images/s against 1,850-1,950 for the
     * same files decoded whole, one run), a speed-up no storage can give a
     * cold epoch. --random-access 1 measures against that warm rate. */
    cfg.jpeg_random_access = random_access;
    coordl *W = NULL;
    if (coordl_open(&cfg, &W) != COORDL_OK) { fprintf(stderr, "bench_storage: %s\n", coordl_errmsg(NULL)); return 1; }
    const uint64_t n_items = coordl_num_items(W);
    if (images == 0 || images > n_items) images = n_items;
    for (;;) { /* one whole warm-up epoch fills the cache */
        coordl_batch b;
        coordl_status rc = coordl_next(W, &b);
        if (rc == COORDL_END_OF_EPOCH) break;
        if (rc != COORDL_OK) { fprintf(stderr, "bench_storage: %s\n", coordl_errmsg(W)); return 1; }
        coordl_release(W, &b);
    }
    sleepy store;
    memset(&store, 0, sizeof store);
    sleepy_load(&store, data);
    /* rows: every latency with each reader, then the device */
    const int ndev = device ? 1 : 0, nrow = nlat * nread + ndev, ncases = nrow * ndep;
    double *rate = calloc((size_t)(rounds * ncases), sizeof *rate), *ratio = calloc((size_t)(rounds * ncases), sizeof *ratio);
    double *wait_ms = calloc((size_t)ncases, sizeof *wait_ms), *io_ms = calloc((size_t)ncases, sizeof *io_ms);
    double *ratio_open = calloc((size_t)(rounds * ncases), sizeof *ratio_open);
    double *ratio_steady = calloc((size_t)(rounds * ncases), sizeof *ratio_steady);
    double *open_ms = calloc((size_t)ncases, sizeof *open_ms), *first_ms = calloc((size_t)ncases, sizeof *first_ms);
    uint32_t *io_threads = calloc((size_t)ncases, sizeof *io_threads);
    uint64_t *in_flight = calloc((size_t)ncases, sizeof *in_flight);
    if (!io_threads || !in_flight) { fprintf(stderr, "bench_storage: out of memory\n"); return 1; }
    if (!rate || !ratio || !ratio_open || !ratio_steady || !wait_ms || !io_ms || !open_ms || !first_ms) { fprintf(stderr, "bench_storage: out of memory\n"); return 1; }
    printf("coordl storage benchmark: %llu items in %s; %d prep threads, batch %u, train 224 F32; %llu images timed "
           "per case from open (cold: a fresh handle, no coordl cache); %d round(s): each case timed right after "
           "the warm rate, its ratio to that warm run; medians; warm JPEGs %s\n",
           (unsigned long long)n_items, data, threads, batch, (unsigned long long)images, rounds,
           random_access ? "rewritten for random access (crops decoded alone)" : "decoded as stored, as cold ones are");
    fflush(stdout);
    double *warm_pair = calloc((size_t)(rounds * ncases), sizeof *warm_pair);
    if (!warm_pair) { fprintf(stderr, "bench_storage: out of memory\n"); return 1; }
    for (int r = 0; r < rounds; r++) {
        for (int li = 0; li < nrow; li++) {
            const int dev = li == nlat * nread, async = !dev && readers[li / nlat];
            sleepy sh = store;
            sh.latency_us = dev ? 0u : (unsigned)lat[li % nlat] * 1000u;
            coordl_io io = {&sh, sleepy_open, sleepy_read_at, sleepy_close};
            for (int di = 0; di < ndep; di++) {
                const int k = li * ndep + di;
                { /* warm, right before the case: both see the same load */
                    coordl_batch b;
                    for (uint32_t q = 0; q < cfg.prefetch_batches && coordl_next(W, &b) == COORDL_OK; q++)
                        coordl_release(W, &b);
                    double st, fb, ao;
                    warm_pair[r * ncases + k] = timed(W, images, now_s(), &st, &fb, &ao);
                    /* its workers refill its ring: let them finish, or the
                     * cold case pays for them (a fresh handle's open took
                     * 170-230 ms beside a refilling warm handle, 35 ms
                     * alone) */
                    settle(W);
                }
                coordl_config c = base_config(dev ? device : data, threads, batch);
                c.io = dev ? NULL : &io;
                async_shim *as = async ? async_start(&sh) : NULL;
                c.io_async = as ? &as->table : NULL;
                c.readahead_items = (uint32_t)dep[di];
                if (dev) drop_page_cache(device);
                const double t0 = now_s();
                coordl *H = NULL;
                if (coordl_open(&c, &H) != COORDL_OK) {
                    fprintf(stderr, "bench_storage: %s\n", coordl_errmsg(NULL));
                    return 1;
                }
                const double opened = now_s();
                double st, fb, ao;
                rate[r * ncases + k] = timed(H, images, t0, &st, &fb, &ao);
                ratio_open[r * ncases + k] = ao / warm_pair[r * ncases + k];
                open_ms[k] += (opened - t0) * 1e3 / rounds;
                first_ms[k] += fb * 1e3 / rounds;
                ratio[r * ncases + k] = rate[r * ncases + k] / warm_pair[r * ncases + k];
                coordl_stats s;
                coordl_get_stats(H, &s);
                if (!dev) { /* the device's next epoch finds the page cache warm: not cold */
                    double st2, fb2, ao2;
                    (void)timed(H, images, now_s(), &st2, &fb2, &ao2);
                    ratio_steady[r * ncases + k] = ao2 / warm_pair[r * ncases + k];
                }
                coordl_close(H);
                if (as) async_stop(as);
                if (s.readahead_io_threads > io_threads[k]) io_threads[k] = s.readahead_io_threads;
                if (s.readahead_max_in_flight > in_flight[k]) in_flight[k] = s.readahead_max_in_flight;
                wait_ms[k] += s.readahead_wait_ns / 1e6 / rounds;
                io_ms[k] += (s.readahead_reads ? s.readahead_read_ns / 1e6 / (double)s.readahead_reads
                             : s.storage_reads ? s.read_storage_ns / 1e6 / (double)s.storage_reads : 0) / rounds;
            }
        }
        fprintf(stderr, "  round %d of %d done\n", r + 1, rounds);
    }
    coordl_close(W);
    /* x +0 ms: the case over the cold case at the same depth with no added
     * latency (when --latencies has 0): a fresh handle's own costs (its
     * open, the first touch of its ring and read-ahead arena, the reader's
     * copies) are in both, so this ratio is the latency left unhidden */
    int zero = -1;
    for (int li = 0; li < nlat; li++)
        if (lat[li] == 0) zero = li;
    printf("\n%-24s %10s %10s %12s %12s %10s %12s %12s %12s %10s %12s %9s %9s\n", "storage", "read-ahead", "img/s",
           "x warm (the", "x warm,", "x +0 ms", "x warm, next", "worker wait", "ms per read", "open ms", "1st batch ms",
           "I/O", "reads in");
    printf("%-24s %10s %10s %12s %12s %10s %12s %12s %12s %10s %12s %9s %9s\n", "", "", "(median)", "run before)",
           "open excl.", "cold", "cold epoch", "ms per run", "", "(mean)", "(from open)", "threads", "flight");
    const double warm_med = median(warm_pair, (size_t)(rounds * ncases));
    printf("%-24s %10s %10.1f %12.2f %12.2f %10s %12s %12s %12s %10s %12s %9s %9s\n", "warm (all cached)", "-", warm_med,
           1.0, 1.0, "-", "-", "-", "-", "-", "-", "-", "-");
    printf("RESULT storage warm 0 %.2f 1.000\n", warm_med);
    for (int li = 0; li < nrow; li++)
        for (int di = 0; di < ndep; di++) {
            const int k = li * ndep + di, dev = li == nlat * nread, async = !dev && readers[li / nlat];
            /* the +0 ms case of the same reader */
            const int zrow = zero >= 0 && !dev ? li / nlat * nlat + zero : -1;
            double v[64], q[64], qo[64], qs[64], z[64];
            for (int r = 0; r < rounds && r < 64; r++) {
                v[r] = rate[r * ncases + k];
                q[r] = ratio[r * ncases + k];
                qo[r] = ratio_open[r * ncases + k];
                qs[r] = ratio_steady[r * ncases + k];
                z[r] = zrow >= 0 ? rate[r * ncases + k] / rate[r * ncases + zrow * ndep + di] : 0;
            }
            const int n = rounds < 64 ? rounds : 64;
            char what[64], depth[16], threads_s[16], flight_s[24];
            if (dev) snprintf(what, sizeof what, "device (dm-delay)");
            else snprintf(what, sizeof what, "+%d ms per read%s", lat[li % nlat], async ? ", async" : "");
            if (dep[di]) snprintf(depth, sizeof depth, "%d", dep[di]);
            else snprintf(depth, sizeof depth, "off");
            snprintf(threads_s, sizeof threads_s, "%u%s", io_threads[k], async ? "+1" : "");
            snprintf(flight_s, sizeof flight_s, "%llu", (unsigned long long)in_flight[k]);
            char vs_zero[16] = "-";
            if (zrow >= 0) snprintf(vs_zero, sizeof vs_zero, "%.2f", median(z, (size_t)n));
            char steady[16] = "-"; /* not timed for the device */
            if (!dev) snprintf(steady, sizeof steady, "%.2f", median(qs, (size_t)n));
            printf("%-24s %10s %10.1f %12.2f %12.2f %10s %12s %12.0f %12.2f %10.1f %12.1f %9s %9s\n", what, depth,
                   median(v, (size_t)n), median(q, (size_t)n), median(qo, (size_t)n), vs_zero, steady, wait_ms[k],
                   io_ms[k], open_ms[k], first_ms[k], threads_s, flight_s);
            if (dev) printf("RESULT storage device %d %.2f %.3f\n", dep[di], median(v, (size_t)n), median(q, (size_t)n));
            else printf("RESULT %s %d %d %.2f %.3f %.3f %s %s %u\n", async ? "storage-async" : "storage", lat[li % nlat],
                        dep[di], median(v, (size_t)n), median(q, (size_t)n), median(qo, (size_t)n), vs_zero, steady,
                        io_threads[k]);
        }
    free(warm_pair); free(rate); free(ratio); free(ratio_open); free(ratio_steady); free(wait_ms); free(io_ms); free(open_ms); free(first_ms); free(io_threads); free(in_flight);
    return 0;
}
