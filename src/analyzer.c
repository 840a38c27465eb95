/* SPDX-License-Identifier: MIT */
/*
 * analyzer.c - DS-Analyzer.
 *
 * The differential protocol of the paper, on the public API: the same
 * step over a batch held in memory (no stall), over a fully cached
 * dataset (prep stall only), and cold (fetch and prep stall); then a
 * what-if model fitted on those rates. Uses only handles it opens.
 *
 * Owns:  nothing per handle: the stats JSON, and the differential protocol,
 *        which opens handles of its own
 * Lock:  none beyond the handles it opens
 * Calls: status, lock, io, index, stream (lower layers only:
 *        src/modules.txt; tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "analyzer.h"
#include "status.h"
#include "status_state.h"
#include "lock.h"
#include "io.h"
#include "index.h"
#include "stream.h"
#include "handle.h"

/* snprintf into a running buffer that keeps counting past its end. */
typedef struct cdl__json {
    char *buf;
    size_t cap, len;
} cdl__json;

static void cdl__jsonf(cdl__json *j, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *at = j->len < j->cap ? j->buf + j->len : NULL;
    size_t room = j->len < j->cap ? j->cap - j->len : 0;
    int n = vsnprintf(at, room, fmt, ap);
    va_end(ap);
    if (n > 0) j->len += (size_t)n;
}

/* JSON has no inf or nan: write null for them. */
static void cdl__json_num(cdl__json *j, const char *key, double v, int comma) {
    if (isfinite(v)) cdl__jsonf(j, "\"%s\":%.6g%s", key, v, comma ? "," : "");
    else cdl__jsonf(j, "\"%s\":null%s", key, comma ? "," : "");
}

static size_t cdl__json_finish(cdl__json *j) {
    if (j->cap) j->buf[j->len < j->cap ? j->len : j->cap - 1] = '\0';
    return j->len;
}

size_t coordl_stats_json(const coordl *L, char *buf, size_t cap) {
    cdl__json j = {buf, buf ? cap : 0, 0};
    coordl_stats s;
    coordl_get_stats(L, &s);
    /* the kept epochs, copied under the lock the workers write them under */
    cdl__epoch_counters epochs[CDL_EPOCH_STATS_KEPT];
    memset(epochs, 0, sizeof epochs);
    if (L) {
        coordl *M = (coordl *)L;
        cdl__lock(M);
        memcpy(epochs, L->stats.epochs, sizeof epochs);
        cdl__unlock(M);
    }
    cdl__jsonf(&j, "{");
#define CDL_JSON_STAT(name, row, in_stats, epoch) \
    CDL_IF_##in_stats(cdl__jsonf(&j, "\"" #name "\":%llu,", (unsigned long long)s.name);)
    CDL_COUNTERS(CDL_JSON_STAT)
#undef CDL_JSON_STAT
    cdl__jsonf(&j, "\"placement_cpus\":\"%s\",\"reserved_cpus\":\"%s\",\"placement_node\":%d,"
               "\"placement_nodes\":%u,\"memory_bound\":%d,", s.placement_cpus, s.reserved_cpus,
               s.placement_node, s.placement_nodes, s.memory_bound);
    cdl__json_num(&j, "storage_mb_per_s", s.storage_mb_per_s, 1);
    cdl__json_num(&j, "bytes_per_item", s.bytes_per_item, 1);
    cdl__json_num(&j, "prep_us_per_item", s.prep_us_per_item, 1);
    cdl__jsonf(&j, "\"epochs\":[");
    /* oldest first */
    uint64_t newest = 0;
    for (int k = 0; k < CDL_EPOCH_STATS_KEPT; k++)
        if (epochs[k].used && epochs[k].epoch > newest) newest = epochs[k].epoch;
    const uint64_t from = newest >= CDL_EPOCH_STATS_KEPT ? newest - CDL_EPOCH_STATS_KEPT + 1 : 0;
    int first = 1;
    for (uint64_t e = from; e <= newest; e++) {
        const cdl__epoch_counters *ec = &epochs[e % CDL_EPOCH_STATS_KEPT];
        if (!ec->used || ec->epoch != e) continue;
        const coordl_epoch_stats *es = &ec->s;
        cdl__jsonf(&j, "%s{\"epoch\":%llu", first ? "" : ",", (unsigned long long)es->epoch);
#define CDL_JSON_EPOCH(name, row, in_stats, epoch) \
    CDL_IF_##epoch(cdl__jsonf(&j, ",\"" #name "\":%llu", (unsigned long long)es->name);)
        CDL_COUNTERS(CDL_JSON_EPOCH)
#undef CDL_JSON_EPOCH
        cdl__jsonf(&j, "}");
        first = 0;
    }
    cdl__jsonf(&j, "]}");
    return cdl__json_finish(&j);
}

#ifndef COORDL_NO_ANALYZER
/* Evicts the dataset's files from the page cache, so the next read comes
 * from storage (posix_fadvise needs no privilege, unlike drop_caches). */
static void cdl__drop_page_cache(const coordl *L) {
    if (L->io != &cdl__posix_io) return; /* a custom reader's caches are its own */
    const size_t n = L->index.shards ? L->index.nshards : L->index.tar_shards ? L->index.ntar_shards : (size_t)L->index.num_items;
    for (size_t i = 0; i < n; i++) {
        const char *path = L->index.shards ? L->index.strings + L->index.shards[i].path_off
                         : L->index.tar_shards ? L->index.strings + L->index.tar_shards[i] : cdl__item_path(L, i);
        const char *why; /* a file that cannot be opened has nothing cached */
        void *f;
        uint64_t size;
        if (cdl__posix_open_why(path, &f, &size, &why) == 0) {
            posix_fadvise(cdl__posix_fd(f), 0, 0, POSIX_FADV_DONTNEED);
            cdl__posix_close(NULL, f);
        }
    }
}

typedef struct cdl__stepper {
    coordl_step_fn fn;
    void *user;
    double sleep_ms;
    uint64_t cpu_ns; /* the calling thread's CPU time inside steps */
} cdl__stepper;

static int cdl__step(cdl__stepper *st, const coordl_batch *b) {
    uint64_t c0 = cdl__thread_cpu_ns();
    int stop = 0;
    if (st->fn) {
        stop = st->fn(st->user, b);
    } else {
        struct timespec ts;
        double s = st->sleep_ms / 1e3;
        ts.tv_sec = (time_t)s;
        ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    }
    st->cpu_ns += cdl__thread_cpu_ns() - c0;
    return stop;
}

static void cdl__progress(const coordl_analyze_opts *o, const char *fmt, ...) {
    if (!o->progress) return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    o->progress(o->progress_user, line);
}

/* Times `batches` batches through the step on an open loader; the clock
 * starts at open (the caller passes t_open), as a trainer's would. */
static coordl_status cdl__timed_run(coordl *L, cdl__stepper *st, uint64_t batches, uint64_t t_open,
                                    coordl_run_report *out) {
    coordl_stats s0, s1;
    coordl_get_stats(L, &s0);
    uint64_t done = 0, images = 0;
    coordl_status rc = COORDL_OK;
    while (done < batches) {
        coordl_batch b;
        rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) continue;
        if (rc != COORDL_OK) break;
        int stop = cdl__step(st, &b);
        images += b.n;
        done++;
        coordl_release(L, &b);
        if (stop) break;
    }
    double secs = (cdl__now_ns() - t_open) / 1e9;
    coordl_get_stats(L, &s1);
    out->seconds = secs;
    out->images = images;
    out->images_per_s = secs > 0 ? images / secs : 0.0;
    out->stall_fraction = secs > 0 ? (s1.stall_ns - s0.stall_ns) / 1e9 / secs : 0.0;
    if (out->stall_fraction > 1.0) out->stall_fraction = 1.0;
    return rc == COORDL_END_OF_EPOCH ? COORDL_OK : rc;
}

/* The analyzer has no handle between its runs: it allocates through the
 * config's hooks directly (the defaults when none are set). */
static coordl_allocator cdl__analyze_allocator(const coordl_config *c) {
    coordl_allocator a = c->allocator;
    if (!a.malloc_fn || !a.realloc_fn || !a.free_fn) {
        a.malloc_fn = cdl__default_malloc;
        a.realloc_fn = cdl__default_realloc;
        a.free_fn = cdl__default_free;
    }
    return a;
}
static void *cdl__amalloc(const coordl_allocator *a, size_t n) { return a->malloc_fn(a->user, n ? n : 1); }
static void cdl__afree(const coordl_allocator *a, void *p) {
    if (p) a->free_fn(a->user, p);
}

/* The report's whatif array carries, in front of it, the allocator that
 * coordl_report_free must return it to. */
typedef union cdl__whatif_head {
    coordl_allocator alloc;
    max_align_t align_;
} cdl__whatif_head;

static double cdl__memcpy_mb_per_s(const coordl_allocator *al) {
    const size_t n = 32u << 20;
    char *a = cdl__amalloc(al, n), *b = cdl__amalloc(al, n);
    if (!a || !b) { cdl__afree(al, a); cdl__afree(al, b); return 0.0; }
    memset(a, 1, n);
    memset(b, 2, n); /* first touch outside the timing */
    uint64_t t0 = cdl__now_ns();
    for (int i = 0; i < 4; i++) memcpy(b, a, n);
    double secs = (cdl__now_ns() - t0) / 1e9;
    volatile char sink = b[n - 1];
    (void)sink;
    cdl__afree(al, a);
    cdl__afree(al, b);
    return secs > 0 ? 4.0 * n / 1e6 / secs : 0.0;
}

/* I/O threads a read-ahead of depth d runs (the default, as at open). */
CDL_PRIVATE uint32_t cdl__ra_threads_for(uint32_t depth) { return depth < 16 ? depth : 16; }

/* The model (see coordl.h): the lowest of what the trainer ingests, the
 * workers' CPU, the reads (waited for by the workers, or kept in flight
 * by the read-ahead: depth and I/O threads), the aggregate storage
 * bandwidth and the cache's memory bandwidth. */
CDL_PRIVATE coordl_whatif cdl__report_predict_ra(const coordl_report *r, double f, int threads, double storage_mb_per_s,
                                            uint32_t depth, uint32_t io_threads) {
    coordl_whatif w;
    memset(&w, 0, sizeof w);
    f = f < 0 ? 0 : f > 1 ? 1 : f;
    if (threads < 1) threads = 1;
    w.cache_fraction = f;
    w.threads = threads;
    const double item = r->mean_item_bytes > 0 ? r->mean_item_bytes : 1.0;
    const double per_core = r->prep_images_per_s_per_core;
    /* one read's time: measured, or (a report without it) from the
     * reader's bandwidth */
    double read_s = r->read_latency_ms > 0 ? r->read_latency_ms / 1e3
                  : r->reader_mb_per_s > 0 ? item / (r->reader_mb_per_s * 1e6) : 0.0;
    const double ra_reads = depth ? (double)(depth < io_threads ? depth : io_threads) : 0.0;
    const double reads_in_flight = ra_reads + threads; /* the workers read what it did not */
    /* the aggregate bandwidth: asked for, as given; else one reader's times
     * the reads that can be in flight */
    double agg = storage_mb_per_s;
    if (!(agg > 0)) {
        const double reader = r->reader_mb_per_s > 0 ? r->reader_mb_per_s : read_s > 0 ? item / read_s / 1e6 : 0.0;
        agg = reader * reads_in_flight;
    }
    w.storage_mb_per_s = agg;
    /* CPU for prep: the worker threads, up to the cores the trainer's own
     * step leaves free (a CPU-bound step holds one core; a GPU-like one
     * that sleeps holds none) */
    double cores = r->cores_for_prep;
    double cpu = per_core * (threads < cores ? threads : cores);
    /* The reads: c = reads the read-ahead keeps in flight (0: off) deliver
     * c / read_s items/s; the workers read the rest themselves, waiting a
     * read each. If the read-ahead alone keeps up, the workers only
     * prepare (the CPU bound below); else the workers' time goes to
     * preparing every item and reading what the read-ahead did not:
     * threads = R / prep + ((1 - f) R - c / read_s) read_s, so
     * R = (threads + c) / (1 / prep + (1 - f) read_s). */
    const double c = ra_reads;
    const double per_item_s = (per_core > 0 ? 1.0 / per_core : 0.0) + (1.0 - f) * read_s;
    double reads_limit = per_item_s > 0 ? (threads + c) / per_item_s : INFINITY;
    if (c > 0 && f < 1.0 && read_s > 0 && c / ((1.0 - f) * read_s) > reads_limit)
        reads_limit = c / ((1.0 - f) * read_s);
    double storage = f < 1.0 && agg > 0 ? agg * 1e6 / ((1.0 - f) * item) : INFINITY;
    double memory = f > 0.0 && r->memory_mb_per_s > 0 ? r->memory_mb_per_s * 1e6 / (f * item) : INFINITY;
    double p = r->ingest_images_per_s;
    if (cpu < p) p = cpu;
    if (reads_limit < p) p = reads_limit;
    if (storage < p) p = storage;
    if (memory < p) p = memory;
    w.predicted_images_per_s = p;
    w.predicted_stall_fraction = r->ingest_images_per_s > 0 ? 1.0 - p / r->ingest_images_per_s : 0.0;
    if (w.predicted_stall_fraction < 0) w.predicted_stall_fraction = 0;
    return w;
}

/* At the depth and I/O threads the measured runs used. */
CDL_PRIVATE coordl_whatif cdl__report_predict(const coordl_report *r, double f, int threads, double storage_mb_per_s) {
    return cdl__report_predict_ra(r, f, threads, storage_mb_per_s, r->readahead_items,
                                  r->readahead_threads ? r->readahead_threads : cdl__ra_threads_for(r->readahead_items));
}

/* (1) synthetic: one real batch, copied out of a loader of its own, then
 * stepped over o->batches times (the trainer with no data stall). Also
 * fills the dataset's figures and *usable (cores the placement offers). */
static coordl_status cdl__analyze_synthetic(const coordl_config *cfg, const coordl_allocator *al, cdl__stepper *st,
                                            const coordl_analyze_opts *o, coordl_report *r, int *usable) {
    coordl_config c = *cfg;
    coordl *L = NULL;
    coordl_status rc;
    c.cache_bytes = 0;
    cdl__progress(o, "synthetic: preparing one batch");
    if ((rc = coordl_open(&c, &L)) != COORDL_OK) return rc;
    coordl_batch b0;
    if ((rc = coordl_next(L, &b0)) != COORDL_OK) {
        coordl_close(L);
        return cdl__open_fail(rc, "coordl_analyze: the first batch failed");
    }
    coordl_batch fake = b0;
    size_t tbytes = b0.targets ? (size_t)b0.n * L->geom.target_row_bytes : 0;
    void *data = cdl__amalloc(al, b0.data_bytes), *targets = cdl__amalloc(al, tbytes);
    int32_t *labels = cdl__amalloc(al, b0.n * sizeof(int32_t));
    uint64_t *ids = cdl__amalloc(al, b0.n * sizeof(uint64_t));
    if (!data || !labels || !ids || !targets) {
        cdl__afree(al, data); cdl__afree(al, labels); cdl__afree(al, ids); cdl__afree(al, targets);
        coordl_close(L);
        return cdl__open_fail(COORDL_ERR_NOMEM, "coordl_analyze: out of memory");
    }
    memcpy(data, b0.data, b0.data_bytes);
    memcpy(labels, b0.labels, b0.n * sizeof(int32_t));
    memcpy(ids, b0.ids, b0.n * sizeof(uint64_t));
    if (tbytes) memcpy(targets, b0.targets, tbytes);
    fake.data = data; fake.labels = labels; fake.ids = ids; fake.targets = b0.targets ? targets : NULL;
    fake.slot_ = 0;
    coordl_release(L, &b0);
    r->dataset_items = L->index.num_items;
    r->dataset_bytes = L->index.dataset_bytes;
    r->mean_item_bytes = L->index.num_items ? (double)L->index.dataset_bytes / (double)L->index.num_items : 0.0;
    r->threads = L->pool.nworkers;
    *usable = L->place.ncores > 0 ? L->place.ncores + L->place.nreserved : 1;
    coordl_close(L);
    uint64_t t0 = cdl__now_ns(), images = 0;
    st->cpu_ns = 0;
    for (uint64_t i = 0; i < o->batches; i++) {
        images += fake.n;
        if (cdl__step(st, &fake)) break;
    }
    double secs = (cdl__now_ns() - t0) / 1e9;
    r->synthetic.seconds = secs;
    r->synthetic.images = images;
    r->synthetic.images_per_s = secs > 0 ? images / secs : 0.0;
    r->synthetic.stall_fraction = 0.0;
    /* the step's own CPU use: a CPU-bound step holds a core */
    double busy = secs > 0 ? st->cpu_ns / 1e9 / secs : 0.0;
    r->cores_for_prep = *usable - busy;
    if (r->cores_for_prep < 0.5) r->cores_for_prep = 0.5;
    cdl__afree(al, data); cdl__afree(al, labels); cdl__afree(al, ids); cdl__afree(al, targets);
    cdl__progress(o, "synthetic: %.1f images/s (the trainer alone)", r->synthetic.images_per_s);
    return COORDL_OK;
}

/* (2) warm: every timed batch's items in the cache (a first pass fills
 * it, a seek goes back); measures the prep rate per core. */
static coordl_status cdl__analyze_warm(const coordl_config *cfg, cdl__stepper *st, const coordl_analyze_opts *o,
                                       coordl_report *r) {
    coordl_config c = *cfg;
    coordl *L = NULL;
    coordl_status rc;
    c.cache_bytes = r->dataset_bytes + (1u << 20);
    cdl__progress(o, "warm: filling the cache");
    if ((rc = coordl_open(&c, &L)) != COORDL_OK) return rc;
    coordl_run_report fill;
    rc = cdl__timed_run(L, st, o->batches, cdl__now_ns(), &fill);
    if (rc == COORDL_OK) rc = coordl_seek(L, 0, 0);
    coordl_stats s0, s1;
    coordl_get_stats(L, &s0);
    uint64_t t0 = cdl__now_ns();
    if (rc == COORDL_OK) rc = cdl__timed_run(L, st, o->batches, t0, &r->warm);
    coordl_get_stats(L, &s1);
    uint64_t worker_ns = (s1.read_ns - s0.read_ns) + (s1.decode_ns - s0.decode_ns) + (s1.augment_ns - s0.augment_ns);
    uint64_t items = s1.items - s0.items;
    r->prep_images_per_s_per_core = worker_ns ? items / (worker_ns / 1e9) : 0.0;
    coordl_close(L);
    if (rc != COORDL_OK) return cdl__open_fail(rc, "coordl_analyze: warm run failed");
    cdl__progress(o, "warm: %.1f images/s, stall %.1f%%", r->warm.images_per_s, 100 * r->warm.stall_fraction);
    return COORDL_OK;
}

/* (3) cold: the page cache dropped for the dataset's files, no coordl
 * cache; measures one read's time and one reader's storage bandwidth,
 * with the configured read-ahead. */
static coordl_status cdl__analyze_cold(const coordl_config *cfg, cdl__stepper *st, const coordl_analyze_opts *o,
                                       coordl_report *r) {
    coordl_config c = *cfg;
    coordl *L = NULL;
    coordl_status rc;
    c.cache_bytes = 0;
    if ((rc = coordl_open(&c, &L)) != COORDL_OK) return rc;
    /* the workers started at open; pause them while the page cache is
     * dropped, so nothing they read stays cached */
    cdl__lock(L);
    cdl__stream_pause(L);
    cdl__unlock(L);
    cdl__progress(o, "cold: dropping the page cache for %llu items", (unsigned long long)L->index.num_items);
    cdl__drop_page_cache(L);
    cdl__lock(L);
    cdl__stream_restart(L, 0); /* nothing read before the drop is kept */
    cdl__unlock(L);
    coordl_stats s0, s1;
    coordl_get_stats(L, &s0);
    rc = cdl__timed_run(L, st, o->batches, cdl__now_ns(), &r->cold);
    coordl_get_stats(L, &s1);
    uint64_t sb = s1.storage_bytes - s0.storage_bytes, sns = s1.read_storage_ns - s0.read_storage_ns;
    const uint64_t reads = s1.storage_reads - s0.storage_reads;
    const uint64_t ra_reads = s1.readahead_reads - s0.readahead_reads, ra_ns = s1.readahead_read_ns - s0.readahead_read_ns;
    r->readahead_items = L->cfg.readahead_items;
    r->readahead_threads = L->cfg.readahead_threads;
    /* one read's time: the I/O threads' when they read (the workers'
     * wait for a read ahead is not a read's time), else the workers' */
    if (ra_reads) r->read_latency_ms = ra_ns / 1e6 / (double)ra_reads;
    else if (reads) r->read_latency_ms = sns / 1e6 / (double)reads;
    const double per_read = reads ? (double)sb / (double)reads : r->mean_item_bytes;
    r->reader_mb_per_s = r->read_latency_ms > 0 ? per_read / 1e6 / (r->read_latency_ms / 1e3) : 0.0;
    /* aggregate: every reader in flight at once (the workers, or the
     * read-ahead's reads) */
    const double in_flight = (r->readahead_items
        ? (r->readahead_items < r->readahead_threads ? r->readahead_items : r->readahead_threads) : 0) +
        (double)L->pool.nworkers;
    r->storage_mb_per_s = r->reader_mb_per_s * in_flight;
    coordl_close(L);
    if (rc != COORDL_OK) return cdl__open_fail(rc, "coordl_analyze: cold run failed");
    cdl__progress(o, "cold: %.1f images/s, stall %.1f%%, storage %.1f MB/s per reader, %.2f ms per read, "
                  "read-ahead %u", r->cold.images_per_s, 100 * r->cold.stall_fraction, r->reader_mb_per_s,
                  r->read_latency_ms, r->readahead_items);
    return COORDL_OK;
}

/* The paper's split of the stall, from the time per image of each run. */
static void cdl__analyze_split(coordl_report *r) {
    const double ts = r->synthetic.images_per_s > 0 ? 1.0 / r->synthetic.images_per_s : 0.0;
    const double tw = r->warm.images_per_s > 0 ? 1.0 / r->warm.images_per_s : 0.0;
    const double tc = r->cold.images_per_s > 0 ? 1.0 / r->cold.images_per_s : 0.0;
    if (tc > 0) {
        double prep = tw > ts ? (tw - ts) / tc : 0.0, fetch = tc > tw ? (tc - tw) / tc : 0.0;
        if (prep > 1) prep = 1;
        if (prep + fetch > 1) fetch = 1 - prep;
        r->prep_stall_fraction = prep;
        r->fetch_stall_fraction = fetch;
    }
    r->ingest_images_per_s = r->synthetic.images_per_s;
}

/* The what-if grid (cache fractions x thread counts) and the smallest
 * cache, then the fewest threads, whose predicted stall is under 3%. */
static coordl_status cdl__analyze_whatif(const coordl_allocator *al, const coordl_analyze_opts *o, int usable,
                                         coordl_report *r) {
    static const double default_fractions[] = {0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};
    const double *fr = o->whatif_cache_fractions ? o->whatif_cache_fractions : default_fractions;
    size_t nfr = o->whatif_cache_fractions ? o->n_whatif_cache_fractions : 11;
    int default_threads[64];
    size_t nth = o->n_whatif_threads;
    const int *th = o->whatif_threads;
    if (!th) {
        nth = 0;
        for (int t = 1; t <= 2 * usable && nth < 64; t++) default_threads[nth++] = t;
        th = default_threads;
    }
    if (nfr * nth > (SIZE_MAX - sizeof(cdl__whatif_head)) / sizeof *r->whatif)
        return cdl__open_fail(COORDL_ERR_INVALID, "coordl_analyze: too many what-if points");
    cdl__whatif_head *head = cdl__amalloc(al, sizeof *head + nfr * nth * sizeof *r->whatif);
    if (!head) return cdl__open_fail(COORDL_ERR_NOMEM, "coordl_analyze: out of memory");
    head->alloc = *al;
    r->whatif = (coordl_whatif *)(void *)(head + 1);
    r->recommend_threads = -1;
    r->recommend_cache_fraction = -1;
    for (size_t t = 0; t < nth; t++)
        for (size_t k = 0; k < nfr; k++) {
            coordl_whatif w = cdl__report_predict(r, fr[k], th[t], 0);
            r->whatif[r->n_whatif++] = w;
            if (w.predicted_stall_fraction < 0.03 &&
                (r->recommend_threads < 0 || fr[k] < r->recommend_cache_fraction ||
                 (fr[k] == r->recommend_cache_fraction && th[t] < r->recommend_threads))) {
                r->recommend_cache_fraction = fr[k];
                r->recommend_threads = th[t];
            }
        }
    /* the read-ahead depth: the smallest whose rate (cold, the measured
     * worker threads) is within 3% of the deepest's */
    r->recommend_readahead_items = -1;
    if (!o->skip_cold) {
        const double best = cdl__report_predict_ra(r, 0.0, r->threads, 0, 4096, cdl__ra_threads_for(4096)).predicted_images_per_s;
        for (uint32_t d = 0; d <= 4096; d = d ? 2 * d : 1) {
            const double v = cdl__report_predict_ra(r, 0.0, r->threads, 0, d, cdl__ra_threads_for(d)).predicted_images_per_s;
            if (v >= 0.97 * best) {
                r->recommend_readahead_items = (int32_t)d;
                break;
            }
        }
    }
    return COORDL_OK;
}

/* The differential protocol: synthetic, warm, cold, then the split and the
 * what-if model fitted on them. */
CDL_PRIVATE coordl_status cdl__analyze(const coordl_config *cfg, coordl_step_fn step_fn, void *user,
                                  const coordl_analyze_opts *opts_in, coordl_report *r) {
    if (!cfg || !r) return cdl__open_fail(COORDL_ERR_INVALID, "coordl_analyze: cfg and report must not be NULL");
    memset(r, 0, sizeof *r);
    coordl_analyze_opts o;
    memset(&o, 0, sizeof o);
    if (opts_in) o = *opts_in;
    if (o.batches == 0) o.batches = 50;
    if (!(o.synthetic_step_ms > 0)) o.synthetic_step_ms = 10.0;
    cdl__stepper st = {step_fn, user, o.synthetic_step_ms, 0};
    const coordl_allocator al = cdl__analyze_allocator(cfg);
    int usable = 1;
    coordl_status rc = cdl__analyze_synthetic(cfg, &al, &st, &o, r, &usable);
    if (rc == COORDL_OK) rc = cdl__analyze_warm(cfg, &st, &o, r);
    if (rc != COORDL_OK) return rc;
    r->memory_mb_per_s = cdl__memcpy_mb_per_s(&al);
    if (o.skip_cold) r->cold = r->warm;
    else if ((rc = cdl__analyze_cold(cfg, &st, &o, r)) != COORDL_OK) return rc;
    cdl__analyze_split(r);
    return cdl__analyze_whatif(&al, &o, usable, r);
}

CDL_PRIVATE size_t cdl__report_json(const coordl_report *r, char *buf, size_t cap) {
    cdl__json j = {buf, buf ? cap : 0, 0};
    const coordl_run_report *runs[3] = {&r->synthetic, &r->warm, &r->cold};
    static const char *names[3] = {"synthetic", "warm", "cold"};
    cdl__jsonf(&j, "{\"runs\":{");
    for (int i = 0; i < 3; i++) {
        cdl__jsonf(&j, "\"%s\":{", names[i]);
        cdl__json_num(&j, "images_per_s", runs[i]->images_per_s, 1);
        cdl__json_num(&j, "stall_fraction", runs[i]->stall_fraction, 1);
        cdl__json_num(&j, "seconds", runs[i]->seconds, 1);
        cdl__jsonf(&j, "\"images\":%llu}%s", (unsigned long long)runs[i]->images, i < 2 ? "," : "");
    }
    cdl__jsonf(&j, "},");
    cdl__json_num(&j, "prep_stall_fraction", r->prep_stall_fraction, 1);
    cdl__json_num(&j, "fetch_stall_fraction", r->fetch_stall_fraction, 1);
    cdl__jsonf(&j, "\"model\":{");
    cdl__json_num(&j, "ingest_images_per_s", r->ingest_images_per_s, 1);
    cdl__json_num(&j, "prep_images_per_s_per_core", r->prep_images_per_s_per_core, 1);
    cdl__json_num(&j, "cores_for_prep", r->cores_for_prep, 1);
    cdl__json_num(&j, "storage_mb_per_s", r->storage_mb_per_s, 1);
    cdl__json_num(&j, "reader_mb_per_s", r->reader_mb_per_s, 1);
    cdl__json_num(&j, "memory_mb_per_s", r->memory_mb_per_s, 1);
    cdl__json_num(&j, "mean_item_bytes", r->mean_item_bytes, 1);
    cdl__json_num(&j, "read_latency_ms", r->read_latency_ms, 1);
    cdl__jsonf(&j, "\"readahead_items\":%u,\"readahead_threads\":%u,", r->readahead_items, r->readahead_threads);
    cdl__jsonf(&j, "\"dataset_items\":%llu,\"dataset_bytes\":%llu,\"threads\":%d},",
               (unsigned long long)r->dataset_items, (unsigned long long)r->dataset_bytes, r->threads);
    cdl__jsonf(&j, "\"whatif\":[");
    for (size_t i = 0; i < r->n_whatif; i++) {
        const coordl_whatif *w = &r->whatif[i];
        cdl__jsonf(&j, "%s{", i ? "," : "");
        cdl__json_num(&j, "cache_fraction", w->cache_fraction, 1);
        cdl__jsonf(&j, "\"threads\":%d,", w->threads);
        cdl__json_num(&j, "storage_mb_per_s", w->storage_mb_per_s, 1);
        cdl__json_num(&j, "predicted_images_per_s", w->predicted_images_per_s, 1);
        cdl__json_num(&j, "predicted_stall_fraction", w->predicted_stall_fraction, 0);
        cdl__jsonf(&j, "}");
    }
    cdl__jsonf(&j, "],\"recommendation\":");
    if (r->recommend_threads > 0) {
        cdl__jsonf(&j, "{");
        cdl__json_num(&j, "cache_fraction", r->recommend_cache_fraction, 1);
        cdl__jsonf(&j, "\"threads\":%d}", r->recommend_threads);
    } else {
        cdl__jsonf(&j, "null");
    }
    cdl__jsonf(&j, ",\"recommend_readahead_items\":%d", r->recommend_readahead_items);
    cdl__jsonf(&j, "}");
    return cdl__json_finish(&j);
}

CDL_PRIVATE void cdl__report_free(coordl_report *r) {
    if (!r) return;
    if (r->whatif) {
        cdl__whatif_head *head = (cdl__whatif_head *)(void *)r->whatif - 1;
        const coordl_allocator al = head->alloc;
        al.free_fn(al.user, head);
    }
    r->whatif = NULL;
    r->n_whatif = 0;
}

#else /* COORDL_NO_ANALYZER: the differential protocol and the what-if model
        * are left out; the stats and coordl_stats_json are the loader's. */
CDL_PRIVATE coordl_whatif cdl__report_predict(const coordl_report *r, double f, int threads, double storage_mb_per_s) {
    coordl_whatif w;
    (void)r, (void)f, (void)threads, (void)storage_mb_per_s;
    memset(&w, 0, sizeof w);
    return w;
}

CDL_PRIVATE uint32_t cdl__ra_threads_for(uint32_t depth) { return depth; }

CDL_PRIVATE coordl_whatif cdl__report_predict_ra(const coordl_report *r, double f, int threads, double storage_mb_per_s,
                                            uint32_t depth, uint32_t io_threads) {
    (void)depth, (void)io_threads;
    return cdl__report_predict(r, f, threads, storage_mb_per_s);
}

CDL_PRIVATE coordl_status cdl__analyze(const coordl_config *cfg, coordl_step_fn step_fn, void *user,
                                  const coordl_analyze_opts *opts_in, coordl_report *r) {
    (void)cfg, (void)step_fn, (void)user, (void)opts_in;
    memset(r, 0, sizeof *r);
    r->recommend_threads = -1;
    r->recommend_cache_fraction = -1;
    r->recommend_readahead_items = -1;
    return cdl__open_fail(COORDL_ERR_UNSUPPORTED, "coordl_analyze: DS-Analyzer is not in this build (coordl.c "
                          "was compiled with COORDL_NO_ANALYZER)");
}

CDL_PRIVATE size_t cdl__report_json(const coordl_report *r, char *buf, size_t cap) {
    cdl__json j = {buf, buf ? cap : 0, 0};
    (void)r;
    cdl__jsonf(&j, "{\"error\":\"DS-Analyzer is not in this build (COORDL_NO_ANALYZER)\"}");
    return cdl__json_finish(&j);
}

CDL_PRIVATE void cdl__report_free(coordl_report *r) {
    if (!r) return;
    r->whatif = NULL; /* this build never allocates one */
    r->n_whatif = 0;
}
#endif /* COORDL_NO_ANALYZER */

