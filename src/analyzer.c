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
    cdl__json_num(&j, "stall_fraction", s.stall_fraction, 1);
    cdl__jsonf(&j, "\"boxes_dropped\":%llu,\"bad_labels\":%llu,", (unsigned long long)s.boxes_dropped,
               (unsigned long long)s.bad_labels);
    /* the order in force (docs/shuffle.md) and what its tables hold */
    cdl__jsonf(&j, "\"shuffle\":%d,\"shuffle_window_shards\":%u,\"sampler_bytes\":%llu,", L ? L->cfg.shuffle : 0,
               L && L->cfg.shuffle == COORDL_SHUFFLE_SHARD_WINDOW ? L->cfg.shuffle_window_shards : 0u,
               (unsigned long long)s.sampler_bytes);
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
        const uint64_t spent = es->stall_ns + es->compute_ns;
        cdl__jsonf(&j, ",");
        cdl__json_num(&j, "stall_fraction", spent ? (double)es->stall_ns / (double)spent : 0.0, 0);
        cdl__jsonf(&j, "}");
        first = 0;
    }
    cdl__jsonf(&j, "]}");
    return cdl__json_finish(&j);
}

/* coordl_analyze_opts_default: the defaults, spelled out (0 in a field
 * still means its default, so a memset struct keeps working). */
#define CDL_ANALYZE_MAX_REPEAT 9
#define CDL_ANALYZE_CENSUS_SHARDS 64 /* a lazily indexed set of more is sampled (coordl_report) */
CDL_PRIVATE void cdl__analyze_opts_default(coordl_analyze_opts *o) {
    memset(o, 0, sizeof *o);
    o->batches = 50;
    o->synthetic_step_ms = 10.0;
    o->repeat = 1;
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
CDL_PRIVATE uint32_t cdl__ra_threads_for(uint32_t depth) { return depth; }

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
    r->dataset_shards_sampled = 0;
    if (L->index.lazy) { /* no count yet: the warm run's cache and the what-if need one */
        uint64_t counted;
        int exact;
        rc = cdl__lazy_census(L, CDL_ANALYZE_CENSUS_SHARDS, &r->dataset_items, &r->dataset_bytes, &counted, &exact);
        if (rc != COORDL_OK) {
            cdl__afree(al, data); cdl__afree(al, labels); cdl__afree(al, ids); cdl__afree(al, targets);
            coordl_close(L);
            return rc;
        }
        r->dataset_shards_sampled = exact ? 0 : counted;
        if (r->dataset_shards_sampled)
            cdl__progress(o, "dataset: about %llu items, %.1f MB (extrapolated from %llu of %zu shards)",
                          (unsigned long long)r->dataset_items, (double)r->dataset_bytes / 1e6,
                          (unsigned long long)r->dataset_shards_sampled, L->index.ntar_shards);
    }
    r->mean_item_bytes = r->dataset_items ? (double)r->dataset_bytes / (double)r->dataset_items : 0.0;
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
    r->step_ms = o->batches ? secs * 1e3 / (double)o->batches : 0.0;
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
    /* an extrapolated size may fall short of the timed batches' items */
    c.cache_bytes = r->dataset_bytes + (r->dataset_shards_sampled ? r->dataset_bytes / 4 : 0) + (1u << 20);
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

/* The paper's differential split, from the time per image of each run:
 * the slowdown that preparing (warm - synthetic) and fetching (cold -
 * warm) add, as shares of the cold run's time. A run faster than the one
 * it is compared with is noise, not a negative cost: the slowdown is 0
 * and marked within noise, so that no report reads it as a measured 0%. */
static void cdl__analyze_split(coordl_report *r) {
    const double ts = r->synthetic.images_per_s > 0 ? 1.0 / r->synthetic.images_per_s : 0.0;
    const double tw = r->warm.images_per_s > 0 ? 1.0 / r->warm.images_per_s : 0.0;
    const double tc = r->cold.images_per_s > 0 ? 1.0 / r->cold.images_per_s : 0.0;
    if (tc > 0) {
        double prep = tw > ts ? (tw - ts) / tc : 0.0, fetch = tc > tw ? (tc - tw) / tc : 0.0;
        if (prep > 1) prep = 1;
        if (prep + fetch > 1) fetch = 1 - prep;
        r->prep_slowdown_fraction = r->prep_stall_fraction = prep;
        r->fetch_slowdown_fraction = r->fetch_stall_fraction = fetch;
        r->prep_within_noise = tw > 0 && tw < ts;
        r->fetch_within_noise = tc < tw;
    }
    r->ingest_images_per_s = r->synthetic.images_per_s;
}

static void cdl__analyze_recommend(coordl_report *r, int skip_cold);

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
    if (!head) return cdl__open_fail(COORDL_ERR_NOMEM, "coordl_analyze: out of memory for %zu what-if points; "
                                     "lower n_whatif_cache_fractions or n_whatif_threads", nfr * nth);
    head->alloc = *al;
    r->whatif = (coordl_whatif *)(void *)(head + 1);
    for (size_t t = 0; t < nth; t++)
        for (size_t k = 0; k < nfr; k++) {
            r->whatif[r->n_whatif].cache_fraction = fr[k];
            r->whatif[r->n_whatif++].threads = th[t];
        }
    cdl__analyze_recommend(r, o->skip_cold);
    return COORDL_OK;
}

/* The grid's predictions from the report's inputs, and the smallest
 * cache, then the fewest threads, predicted under 3% stall; the read-ahead
 * depth likewise (again after a median of several analyses). */
static void cdl__analyze_recommend(coordl_report *r, int skip_cold) {
    r->recommend_threads = -1;
    r->recommend_cache_fraction = -1;
    for (size_t i = 0; i < r->n_whatif; i++) {
        coordl_whatif w = cdl__report_predict(r, r->whatif[i].cache_fraction, r->whatif[i].threads, 0);
        r->whatif[i] = w;
        if (w.predicted_stall_fraction < 0.03 &&
            (r->recommend_threads < 0 || w.cache_fraction < r->recommend_cache_fraction ||
             (w.cache_fraction == r->recommend_cache_fraction && w.threads < r->recommend_threads))) {
            r->recommend_cache_fraction = w.cache_fraction;
            r->recommend_threads = w.threads;
        }
    }
    /* the read-ahead depth: the smallest whose rate (cold, the measured
     * worker threads) is within 3% of the deepest's */
    r->recommend_readahead_items = -1;
    if (!skip_cold) {
        const double best = cdl__report_predict_ra(r, 0.0, r->threads, 0, 4096, cdl__ra_threads_for(4096)).predicted_images_per_s;
        for (uint32_t d = 0; d <= 4096; d = d ? 2 * d : 1) {
            const double v = cdl__report_predict_ra(r, 0.0, r->threads, 0, d, cdl__ra_threads_for(d)).predicted_images_per_s;
            if (v >= 0.97 * best) {
                r->recommend_readahead_items = (int32_t)d;
                break;
            }
        }
    }
}

/* One analysis: synthetic, warm, cold, then the split and the what-if
 * model fitted on them. */
static coordl_status cdl__analyze_once(const coordl_config *cfg, const coordl_allocator *al, cdl__stepper *st,
                                       const coordl_analyze_opts *o, coordl_report *r) {
    memset(r, 0, sizeof *r);
    r->recommend_threads = -1;
    r->recommend_cache_fraction = -1;
    r->recommend_readahead_items = -1;
    int usable = 1;
    coordl_status rc = cdl__analyze_synthetic(cfg, al, st, o, r, &usable);
    if (rc == COORDL_OK) rc = cdl__analyze_warm(cfg, st, o, r);
    if (rc != COORDL_OK) return rc;
    r->memory_mb_per_s = cdl__memcpy_mb_per_s(al);
    if (o->skip_cold) r->cold = r->warm;
    else if ((rc = cdl__analyze_cold(cfg, st, o, r)) != COORDL_OK) return rc;
    cdl__analyze_split(r);
    return cdl__analyze_whatif(al, o, usable, r);
}

static int cdl__cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The median of one double field over n reports. */
static double cdl__median_field(const coordl_report *reps, size_t n, size_t off) {
    double x[CDL_ANALYZE_MAX_REPEAT];
    for (size_t k = 0; k < n; k++) memcpy(&x[k], (const char *)&reps[k] + off, sizeof x[k]);
    qsort(x, n, sizeof *x, cdl__cmp_double);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

/* The run (at offset off) of median images/s over n reports. */
static coordl_run_report cdl__median_run(const coordl_report *reps, size_t n, size_t off) {
    const coordl_run_report *p[CDL_ANALYZE_MAX_REPEAT];
    for (size_t k = 0; k < n; k++) p[k] = (const coordl_run_report *)(const void *)((const char *)&reps[k] + off);
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && p[k]->images_per_s < p[k - 1]->images_per_s; k--) {
            const coordl_run_report *t = p[k];
            p[k] = p[k - 1];
            p[k - 1] = t;
        }
    return *p[(n - 1) / 2];
}

/* The analyses' median into reps[0]: each run the one of median images/s,
 * each model input and slowdown the median (within noise when most
 * analyses found it so); the grid is predicted again from those inputs
 * and the recommendations chosen again by the same rule. */
static void cdl__analyze_median(coordl_report *reps, size_t n, int skip_cold) {
    coordl_report *r = &reps[0];
    if (n < 2) return;
#define CDL_MED(field) const double med_##field = cdl__median_field(reps, n, offsetof(coordl_report, field))
    CDL_MED(prep_slowdown_fraction); CDL_MED(fetch_slowdown_fraction); CDL_MED(ingest_images_per_s);
    CDL_MED(prep_images_per_s_per_core); CDL_MED(storage_mb_per_s); CDL_MED(memory_mb_per_s);
    CDL_MED(reader_mb_per_s); CDL_MED(cores_for_prep); CDL_MED(read_latency_ms); CDL_MED(step_ms);
#undef CDL_MED
    const coordl_run_report syn = cdl__median_run(reps, n, offsetof(coordl_report, synthetic));
    const coordl_run_report warm = cdl__median_run(reps, n, offsetof(coordl_report, warm));
    const coordl_run_report cold = cdl__median_run(reps, n, offsetof(coordl_report, cold));
    size_t prep_noise = 0, fetch_noise = 0;
    for (size_t k = 0; k < n; k++) {
        prep_noise += reps[k].prep_within_noise != 0;
        fetch_noise += reps[k].fetch_within_noise != 0;
    }
    r->synthetic = syn;
    r->warm = warm;
    r->cold = cold;
    r->prep_slowdown_fraction = r->prep_stall_fraction = med_prep_slowdown_fraction;
    r->fetch_slowdown_fraction = r->fetch_stall_fraction = med_fetch_slowdown_fraction;
    r->prep_within_noise = 2 * prep_noise > n;
    r->fetch_within_noise = 2 * fetch_noise > n;
    r->ingest_images_per_s = med_ingest_images_per_s;
    r->prep_images_per_s_per_core = med_prep_images_per_s_per_core;
    r->storage_mb_per_s = med_storage_mb_per_s;
    r->memory_mb_per_s = med_memory_mb_per_s;
    r->reader_mb_per_s = med_reader_mb_per_s;
    r->cores_for_prep = med_cores_for_prep;
    r->read_latency_ms = med_read_latency_ms;
    r->step_ms = med_step_ms;
    cdl__analyze_recommend(r, skip_cold);
}

/* Writes n bytes of text to path; 0, or an errno. */
static int cdl__write_text(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "w");
    if (!f) return errno ? errno : EIO;
    const int e = fwrite(text, 1, n, f) == n ? 0 : errno ? errno : EIO;
    return fclose(f) != 0 && e == 0 ? (errno ? errno : EIO) : e;
}

/* opts.json_path / opts.svg_path: the report as JSON and as the figure. */
static coordl_status cdl__analyze_files(const coordl_allocator *al, const coordl_analyze_opts *o,
                                        const coordl_report *r) {
    for (int k = 0; k < 2; k++) {
        const char *path = k == 0 ? o->json_path : o->svg_path;
        if (!path) continue;
        const size_t n = k == 0 ? cdl__report_json(r, NULL, 0) : cdl__report_svg(r, NULL, 0, NULL, 0);
        char *text = cdl__amalloc(al, n + 1);
        if (!text) return cdl__open_fail(COORDL_ERR_NOMEM, "coordl_analyze: out of memory for the report");
        if (k == 0) cdl__report_json(r, text, n + 1);
        else cdl__report_svg(r, NULL, 0, text, n + 1);
        const int e = cdl__write_text(path, text, n);
        cdl__afree(al, text);
        if (e) return cdl__open_fail(COORDL_ERR_IO, "coordl_analyze: %s %s: %s", k == 0 ? "json_path" : "svg_path",
                                     path, strerror(e));
    }
    return COORDL_OK;
}

/* The differential protocol, opts.repeat times (the median), then the
 * files asked for. */
CDL_PRIVATE coordl_status cdl__analyze(const coordl_config *cfg, coordl_step_fn step_fn, void *user,
                                  const coordl_analyze_opts *opts_in, coordl_report *r) {
    if (!cfg || !r) return cdl__open_fail(COORDL_ERR_INVALID, "coordl_analyze: cfg and report must not be NULL");
    memset(r, 0, sizeof *r);
    coordl_analyze_opts o;
    cdl__analyze_opts_default(&o);
    if (opts_in) o = *opts_in;
    if (o.batches == 0) o.batches = 50;
    if (!(o.synthetic_step_ms > 0)) o.synthetic_step_ms = 10.0;
    if (o.repeat == 0) o.repeat = 1;
    if (o.repeat > CDL_ANALYZE_MAX_REPEAT)
        return cdl__open_fail(COORDL_ERR_INVALID, "coordl_analyze: repeat %u is out of range (1..%d)", o.repeat,
                              CDL_ANALYZE_MAX_REPEAT);
    cdl__stepper st = {step_fn, user, o.synthetic_step_ms, 0};
    const coordl_allocator al = cdl__analyze_allocator(cfg);
    coordl_report reps[CDL_ANALYZE_MAX_REPEAT];
    coordl_status rc = COORDL_OK;
    uint32_t done = 0;
    for (; done < o.repeat && rc == COORDL_OK; done++) {
        if (o.repeat > 1) cdl__progress(&o, "analysis %u/%u", done + 1, o.repeat);
        rc = cdl__analyze_once(cfg, &al, &st, &o, &reps[done]);
    }
    if (rc == COORDL_OK) cdl__analyze_median(reps, done, o.skip_cold);
    for (uint32_t k = 1; k < done; k++) cdl__report_free(&reps[k]); /* the median keeps reps[0]'s grid */
    if (rc != COORDL_OK) {
        cdl__report_free(&reps[0]);
        return rc;
    }
    *r = reps[0];
    r->batches = o.batches;
    r->batch_size = cfg->batch_size;
    r->out_w = cfg->out_w;
    r->out_h = cfg->out_h;
    r->repeat = o.repeat;
    snprintf(r->source, sizeof r->source, "%s", cfg->source ? cfg->source : "");
    if (o.step_name) snprintf(r->step_name, sizeof r->step_name, "%s", o.step_name);
    else if (step_fn) snprintf(r->step_name, sizeof r->step_name, "step_fn");
    else snprintf(r->step_name, sizeof r->step_name, "sleep %g ms", o.synthetic_step_ms);
    return cdl__analyze_files(&al, &o, r);
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
    /* "stall" is time waiting in coordl_next (the runs' stall_fraction);
     * the differential split is a slowdown, with its noise flag */
    cdl__json_num(&j, "prep_slowdown_fraction", r->prep_slowdown_fraction, 1);
    cdl__json_num(&j, "fetch_slowdown_fraction", r->fetch_slowdown_fraction, 1);
    cdl__jsonf(&j, "\"prep_within_noise\":%s,\"fetch_within_noise\":%s,", r->prep_within_noise ? "true" : "false",
               r->fetch_within_noise ? "true" : "false");
    cdl__jsonf(&j, "\"settings\":{\"source\":\"");
    for (const char *c = r->source; *c; c++) { /* a JSON string: quote, backslash and controls escaped */
        if (*c == '"' || *c == '\\') cdl__jsonf(&j, "\\%c", *c);
        else if ((unsigned char)*c < 0x20) cdl__jsonf(&j, "\\u%04x", (unsigned)(unsigned char)*c);
        else cdl__jsonf(&j, "%c", *c);
    }
    cdl__jsonf(&j, "\",\"batch_size\":%u,\"out_w\":%u,\"out_h\":%u,\"batches\":%llu,\"repeat\":%u,",
               r->batch_size, r->out_w, r->out_h, (unsigned long long)r->batches, r->repeat);
    cdl__json_num(&j, "step_ms", r->step_ms, 1);
    cdl__jsonf(&j, "\"step\":\"");
    for (const char *c = r->step_name; *c; c++) {
        if (*c == '"' || *c == '\\') cdl__jsonf(&j, "\\%c", *c);
        else if ((unsigned char)*c < 0x20) cdl__jsonf(&j, "\\u%04x", (unsigned)(unsigned char)*c);
        else cdl__jsonf(&j, "%c", *c);
    }
    cdl__jsonf(&j, "\"},");
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
    cdl__jsonf(&j, "\"dataset_items\":%llu,\"dataset_bytes\":%llu,\"dataset_shards_sampled\":%llu,\"threads\":%d},",
               (unsigned long long)r->dataset_items, (unsigned long long)r->dataset_bytes,
               (unsigned long long)r->dataset_shards_sampled, r->threads);
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

/* ---- the report as an SVG figure (coordl_report_svg) ------------------ */

static const char *const cdl__palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                      "#9467bd", "#8c564b", "#e377c2", "#17becf"};
#define CDL_NPAL (sizeof cdl__palette / sizeof *cdl__palette)
#define CDL_MAX_CURVES 8

#define CDL_C_COMPUTE "#4c78a8"
#define CDL_C_PREP "#f58518"
#define CDL_C_FETCH "#e45756"
#define CDL_INGEST_STYLE "stroke=\"#555\" stroke-width=\"1.5\" stroke-dasharray=\"2 3\""


/* s as XML character data: & < > " ' escaped, control characters and
 * bytes that are not valid UTF-8 replaced by '?', so the figure stays
 * valid XML whatever the source path holds. */
static void cdl__xml_text(cdl__json *svg, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        const unsigned c = *p;
        const int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = len > 0;
        for (int k = 1; ok && k < len; k++) ok = (p[k] & 0xC0) == 0x80;
        if (!ok) {
            cdl__jsonf(svg, "?");
            p++;
            continue;
        }
        if (len > 1) {
            cdl__jsonf(svg, "%.*s", len, (const char *)p);
            p += len;
            continue;
        }
        switch (c) {
        case '&': cdl__jsonf(svg, "&amp;"); break;
        case '<': cdl__jsonf(svg, "&lt;"); break;
        case '>': cdl__jsonf(svg, "&gt;"); break;
        case '"': cdl__jsonf(svg, "&quot;"); break;
        case '\'': cdl__jsonf(svg, "&apos;"); break;
        default: cdl__jsonf(svg, "%c", c < 0x20 && c != '\t' ? '?' : (char)c);
        }
        p++;
    }
}

static const char *cdl__thr_word(int t) { return t == 1 ? "thread" : "threads"; }

static double cdl__clamp01(double v) { return !(v > 0) ? 0 : v > 1 ? 1 : v; }

/* "12.3%", or "within noise" when the run compared was the faster one. */
static void cdl__slowdown_text(char *buf, size_t cap, double fraction, int within_noise) {
    if (within_noise) snprintf(buf, cap, "within noise");
    else snprintf(buf, cap, "%.1f%%", 100 * fraction);
}

static int cdl__cmp_int(const void *x, const void *y) {
    const int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* The thread counts the figure draws: those of the what-if grid and of the
 * runs, at most CDL_MAX_CURVES spread over the grid (keeping the runs'
 * count and 1, or 2 when the runs had 1). Returns how many. */
static size_t cdl__curve_threads(const coordl_report *r, int *tl) {
    int all[64 + 1];
    size_t n = 0;
    for (size_t i = 0; i <= r->n_whatif; i++) {
        const int t = i < r->n_whatif ? r->whatif[i].threads : r->threads;
        int seen = t <= 0;
        for (size_t k = 0; k < n && !seen; k++) seen = all[k] == t;
        if (!seen && n < sizeof all / sizeof *all) all[n++] = t;
    }
    qsort(all, n, sizeof *all, cdl__cmp_int);
    if (n <= CDL_MAX_CURVES) {
        memcpy(tl, all, n * sizeof *tl);
        return n;
    }
    const int must[2] = {r->threads > 0 ? r->threads : 1, r->threads > 1 ? 1 : 2};
    size_t nk = 0;
    for (size_t m = 0; m < 2; m++)
        if (nk == 0 || tl[0] != must[m]) tl[nk++] = must[m];
    for (size_t k = 0; nk < CDL_MAX_CURVES && k < CDL_MAX_CURVES; k++) {
        const int t = all[(k * (n - 1) + (CDL_MAX_CURVES - 1) / 2) / (CDL_MAX_CURVES - 1)];
        int seen = 0;
        for (size_t q = 0; q < nk; q++) seen |= tl[q] == t;
        if (!seen) tl[nk++] = t;
    }
    qsort(tl, nk, sizeof *tl, cdl__cmp_int);
    return nk;
}

/* A "nice" tick step (1, 2 or 5 x 10^k) for about `ticks` ticks up to max. */
static double cdl__nice_step(double max, int ticks)
{
    if (!(max > 0))
        return 1;
    double raw = max / ticks, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

static void cdl__fmt_tick(char *buf, size_t cap, double v, double stepv)
{
    if (stepv >= 1 || v == 0)
        snprintf(buf, cap, "%.0f", v);
    else if (stepv >= 0.1)
        snprintf(buf, cap, "%.1f", v);
    else
        snprintf(buf, cap, "%.2g", v);
}

static void cdl__svg_text(cdl__json *svg, double x, double y, const char *anchor, const char *style,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void cdl__svg_text(cdl__json *svg, double x, double y, const char *anchor, const char *style,
                     const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    cdl__jsonf(svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s%s%s>", x, y, anchor,
            style ? " style=\"" : "", style ? style : "", style ? "\"" : "");
    cdl__xml_text(svg, buf);
    cdl__jsonf(svg, "%s", "</text>\n");
}

/* Curves of several thread counts often coincide (all at the trainer's
 * rate): later ones are drawn thinner and dashed on top of earlier ones, so
 * every colour stays visible. */
static double cdl__curve_width(size_t j, size_t n)
{
    return 2.0 + 1.5 * (double)(n - 1 - j) / (n > 1 ? (double)(n - 1) : 1.0) * 2.0;
}

static const char *cdl__curve_dash(size_t j)
{
    static const char *const d[] = {"", " stroke-dasharray=\"10 5\"", " stroke-dasharray=\"3 4\"",
                                    " stroke-dasharray=\"14 4 3 4\""};
    return d[j % 4];
}

/* The figure: the runs' time split, and the what-if curves (thread counts
 * `tl`, measured points `m`). */
static void cdl__svg_figure(cdl__json *svg, const coordl_report *r, const int *tl, size_t nt,
                            const coordl_measured *m, size_t nv)
{
    const double W = 980, H = 840;
    cdl__jsonf(svg, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" "
               "font-size=\"13\">\n",
               W, H, W, H);
    cdl__jsonf(svg, "<title>");
    cdl__xml_text(svg, "DS-Analyzer report: ");
    cdl__xml_text(svg, r->source);
    cdl__jsonf(svg, "</title>\n<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", W, H);

    /* title */
    cdl__svg_text(svg, 20, 30, "start", "font-size:18px;font-weight:bold", "DS-Analyzer: %s", r->source);
    cdl__svg_text(svg, 20, 52, "start", "fill:#444",
             "%s%llu items, %.1f MB; batch %u, %ux%u crops, trainer step %.3g ms (%s), %d loader %s, "
             "%llu batches per run, median of %d", r->dataset_shards_sampled ? "about " : "",
             (unsigned long long)r->dataset_items, (double)r->dataset_bytes / 1e6, r->batch_size,
             r->out_w, r->out_h, r->step_ms, r->step_name, r->threads,
             cdl__thr_word(r->threads), (unsigned long long)r->batches, r->repeat);

    if (r->recommend_threads > 0)
        cdl__svg_text(svg, 20, 74, "start", "font-weight:bold",
                 "recommendation: cache %.0f%% of the dataset, %d loader %s (predicted stall under 3%%)",
                 100 * r->recommend_cache_fraction, r->recommend_threads,
                 cdl__thr_word(r->recommend_threads));
    else
        cdl__svg_text(svg, 20, 74, "start", "font-weight:bold",
                 "recommendation: none of the what-if grid gets the predicted stall under 3%%");

    /* ---- panel 1: where the time goes, per run ---- */
    const double px0 = 220, px1 = 680, py0 = 128, bar_h = 34, gap = 20;
    cdl__svg_text(svg, 20, 108, "start", "font-size:15px;font-weight:bold",
             "1. Where the trainer's time goes (differential runs)");
    const coordl_run_report *runs[3] = {&r->synthetic, &r->warm, &r->cold};
    static const char *const run_name[3] = {"synthetic (trainer only)", "warm (all in cache)",
                                            "cold (nothing cached)"};
    double per100[3], seg[3][3]; /* [run][compute, prep, fetch] seconds per 100 batches */
    double maxt = 0;
    for (int i = 0; i < 3; i++) {
        per100[i] = runs[i]->images_per_s > 0 ? 100.0 * r->batch_size / runs[i]->images_per_s : 0;
        maxt = fmax(maxt, per100[i]);
    }
    double ps = cdl__clamp01(r->prep_slowdown_fraction), fs = cdl__clamp01(r->fetch_slowdown_fraction);
    if (ps + fs > 1) {
        double k = 1 / (ps + fs);
        ps *= k;
        fs *= k;
    }
    /* synthetic: all compute; cold: its time split by the report's
     * fractions; warm: the same prep slowdown (seconds) as the cold run */
    seg[0][0] = per100[0], seg[0][1] = 0, seg[0][2] = 0;
    seg[2][1] = ps * per100[2], seg[2][2] = fs * per100[2];
    seg[2][0] = per100[2] - seg[2][1] - seg[2][2];
    seg[1][1] = fmin(seg[2][1], per100[1]), seg[1][2] = 0;
    seg[1][0] = per100[1] - seg[1][1];
    double xstep = cdl__nice_step(maxt, 5), xmax = xstep * ceil(maxt / xstep);
    if (!(xmax > 0))
        xmax = 1;
    double py_axis = py0 + 3 * (bar_h + gap) - gap + 12;
    /* grid and ticks */
    for (double t = 0; t <= xmax + xstep * 1e-6; t += xstep) {
        double x = px0 + (px1 - px0) * t / xmax;
        char lab[32];
        cdl__fmt_tick(lab, sizeof lab, t, xstep);
        cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x,
                py0 - 6, x, py_axis);
        cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", x,
                py_axis, x, py_axis + 5);
        cdl__svg_text(svg, x, py_axis + 19, "middle", NULL, "%s", lab);
    }
    cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", px0,
            py_axis, px1, py_axis);
    cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", px0,
            py0 - 6, px0, py_axis);
    cdl__svg_text(svg, (px0 + px1) / 2, py_axis + 40, "middle", NULL,
             "time (seconds per 100 batches of %u images)", r->batch_size);
    static const char *const seg_col[3] = {CDL_C_COMPUTE, CDL_C_PREP, CDL_C_FETCH};
    for (int i = 0; i < 3; i++) {
        double y = py0 + i * (bar_h + gap), x = px0;
        cdl__svg_text(svg, px0 - 10, y + bar_h / 2 + 5, "end", NULL, "%s", run_name[i]);
        for (int s = 0; s < 3; s++) {
            double w = (px1 - px0) * fmax(0, seg[i][s]) / xmax;
            if (w <= 0)
                continue;
            cdl__jsonf(svg, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                    x, y, w, bar_h, seg_col[s]);
            x += w;
        }
        cdl__svg_text(svg, x + 8, y + bar_h / 2 - 2, "start", NULL, "%.0f images/s",
                 runs[i]->images_per_s);
        cdl__svg_text(svg, x + 8, y + bar_h / 2 + 13, "start", "font-size:11px;fill:#555",
                 "stall %.1f%% (time waiting in coordl_next)", 100 * runs[i]->stall_fraction);
    }
    /* legend */
    static const char *const seg_name[3] = {"compute (trainer step)", "prep slowdown (decode, augment)",
                                            "fetch slowdown (storage)"};
    double ly = py_axis + 62;
    for (int s = 0; s < 3; s++) {
        double lx = px0 + s * 230;
        cdl__jsonf(svg, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/>\n", lx,
                ly - 11, seg_col[s]);
        cdl__svg_text(svg, lx + 20, ly, "start", NULL, "%s", seg_name[s]);
    }
    char prep_s[48], fetch_s[48];
    cdl__slowdown_text(prep_s, sizeof prep_s, r->prep_slowdown_fraction, r->prep_within_noise);
    cdl__slowdown_text(fetch_s, sizeof fetch_s, r->fetch_slowdown_fraction, r->fetch_within_noise);
    cdl__svg_text(svg, px0, ly + 22, "start", "font-size:11px;fill:#555",
             "prep slowdown = warm - synthetic, fetch slowdown = cold - warm (time per image); "
             "cold run: prep %s, fetch %s", prep_s, fetch_s);

    /* ---- panel 2: what-if curves ---- */
    const double qx0 = 90, qx1 = 660, qy0 = 450, qy1 = 760;
    cdl__svg_text(svg, 20, qy0 - 26, "start", "font-size:15px;font-weight:bold",
             "2. What-if: predicted throughput by cache size and loader threads");
    double ymaxv = r->ingest_images_per_s;
    for (size_t j = 0; j < nt; j++)
        for (int k = 0; k <= 100; k++)
            ymaxv = fmax(ymaxv, cdl__report_predict(r, k / 100.0, tl[j], 0).predicted_images_per_s);
    for (size_t i = 0; i < nv; i++)
        ymaxv = fmax(ymaxv, m[i].images_per_s);
    if (!(ymaxv > 0) || !isfinite(ymaxv))
        ymaxv = 1;
    double ystep = cdl__nice_step(ymaxv * 1.05, 6), ymax = ystep * ceil(ymaxv * 1.05 / ystep);
#define QX(fr) (qx0 + (qx1 - qx0) * (fr))
#define QY(val) (qy1 - (qy1 - qy0) * fmin(fmax((val) / ymax, 0), 1.02))
    for (double t = 0; t <= ymax + ystep * 1e-6; t += ystep) {
        char lab[32];
        cdl__fmt_tick(lab, sizeof lab, t, ystep);
        cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                qx0, QY(t), qx1, QY(t));
        cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n",
                qx0 - 5, QY(t), qx0, QY(t));
        cdl__svg_text(svg, qx0 - 8, QY(t) + 4, "end", NULL, "%s", lab);
    }
    for (int k = 0; k <= 100; k += 10) {
        cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n",
                QX(k / 100.0), qy0, QX(k / 100.0), qy1);
        cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n",
                QX(k / 100.0), qy1, QX(k / 100.0), qy1 + 5);
        cdl__svg_text(svg, QX(k / 100.0), qy1 + 19, "middle", NULL, "%d", k);
    }
    cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", qx0,
            qy1, qx1, qy1);
    cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", qx0,
            qy0, qx0, qy1);
    cdl__svg_text(svg, (qx0 + qx1) / 2, qy1 + 42, "middle", NULL,
             "cache size (%% of the dataset's %.1f MB, MinIO)", (double)r->dataset_bytes / 1e6);
    cdl__jsonf(svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f %.1f)\">"
               "throughput (images/s)</text>\n",
            28.0, (qy0 + qy1) / 2, 28.0, (qy0 + qy1) / 2);
    /* one curve per thread count */
    for (size_t j = 0; j < nt; j++) {
        cdl__jsonf(svg, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\"%s points=\"",
                cdl__palette[j % CDL_NPAL], cdl__curve_width(j, nt), cdl__curve_dash(j));
        for (int k = 0; k <= 100; k++) {
            double y = cdl__report_predict(r, k / 100.0, tl[j], 0).predicted_images_per_s;
            cdl__jsonf(svg, "%s%.1f,%.1f", k ? " " : "", QX(k / 100.0), QY(isfinite(y) ? y : 0));
        }
        cdl__jsonf(svg, "\"/>\n");
    }
    /* the trainer's ingestion rate: the ceiling */
    cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" " CDL_INGEST_STYLE "/>\n",
            qx0, QY(r->ingest_images_per_s), qx1, QY(r->ingest_images_per_s));
    /* validation: measured points, with a thin line to the prediction */
    for (size_t i = 0; i < nv; i++) {
        const double measured = m[i].images_per_s;
        const double predicted = cdl__report_predict(r, m[i].cache_fraction, m[i].threads, 0).predicted_images_per_s;
        const double error = measured > 0 ? (predicted - measured) / measured : 0.0;
        size_t j = 0;
        while (j < nt && tl[j] != m[i].threads)
            j++;
        const char *col = j < nt ? cdl__palette[j % CDL_NPAL] : "#000";
        double x = QX(m[i].cache_fraction);
        cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"1\"/>\n",
                x, QY(predicted), x, QY(measured), col);
        cdl__jsonf(svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"%s\" stroke=\"#000\" "
                   "stroke-width=\"1.5\"/>\n",
                x, QY(measured), col);
        double pct = 100 * error;
        cdl__svg_text(svg, x + 9, QY(measured) + (measured < predicted ? 14 : -6), "start",
                 "font-size:11px", "%+.0f%%", fabs(pct) < 0.5 ? 0.0 : pct);
    }
    /* legend */
    double lx = qx1 + 25, ly2 = qy0 + 4;
    cdl__svg_text(svg, lx, ly2, "start", "font-weight:bold", "legend");
    ly2 += 22;
    for (size_t j = 0; j < nt; j++, ly2 += 20) {
        cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"%.1f\"%s/>\n",
                lx, ly2 - 4, lx + 30, ly2 - 4, cdl__palette[j % CDL_NPAL], cdl__curve_width(j, nt), cdl__curve_dash(j));
        cdl__svg_text(svg, lx + 38, ly2, "start", NULL, "%d loader %s (predicted)", tl[j], cdl__thr_word(tl[j]));
    }
    cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" " CDL_INGEST_STYLE "/>\n",
            lx, ly2 - 4, lx + 30, ly2 - 4);
    cdl__svg_text(svg, lx + 38, ly2, "start", NULL, "trainer ingest rate (%.0f/s)", r->ingest_images_per_s);
    ly2 += 20;
    if (nv) {
        cdl__jsonf(svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"#bbb\" stroke=\"#000\" "
                   "stroke-width=\"1.5\"/>\n",
                lx + 13, ly2 - 4);
        cdl__svg_text(svg, lx + 38, ly2, "start", NULL, "measured (validation)");
        cdl__svg_text(svg, lx + 38, ly2 + 15, "start", "font-size:11px;fill:#555",
                 "label: (predicted - measured) / measured");
        ly2 += 36;
    }
    cdl__svg_text(svg, lx, ly2 + 6, "start", "font-size:11px;fill:#555", "model: min(ingest,");
    cdl__svg_text(svg, lx, ly2 + 21, "start", "font-size:11px;fill:#555", "  prep/core x threads,");
    cdl__svg_text(svg, lx, ly2 + 36, "start", "font-size:11px;fill:#555",
             "  storage / ((1 - cache) x item))");
#undef QX
#undef QY
    cdl__jsonf(svg, "%s", "</svg>\n");
}


CDL_PRIVATE size_t cdl__report_svg(const coordl_report *r, const coordl_measured *m, size_t nm, char *buf, size_t cap) {
    cdl__json svg = {buf, buf ? cap : 0, 0};
    int tl[CDL_MAX_CURVES];
    const size_t nt = cdl__curve_threads(r, tl);
    cdl__svg_figure(&svg, r, tl, nt, m, m ? nm : 0);
    return cdl__json_finish(&svg);
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

CDL_PRIVATE size_t cdl__report_svg(const coordl_report *r, const coordl_measured *m, size_t nm, char *buf, size_t cap) {
    cdl__json j = {buf, buf ? cap : 0, 0};
    (void)r, (void)m, (void)nm;
    cdl__jsonf(&j, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"600\" height=\"40\"><text x=\"10\" y=\"25\">"
               "DS-Analyzer is not in this build (COORDL_NO_ANALYZER)</text></svg>\n");
    return cdl__json_finish(&j);
}

CDL_PRIVATE void cdl__report_free(coordl_report *r) {
    if (!r) return;
    r->whatif = NULL; /* this build never allocates one */
    r->n_whatif = 0;
}
#endif /* COORDL_NO_ANALYZER */

