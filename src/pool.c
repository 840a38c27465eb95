/* SPDX-License-Identifier: MIT */
/*
 * pool.c - the worker pool.
 *
 * Owns:  L->pool: the worker threads, the consumer's helper scratch, the
 *        stop flag, and a lazy index's scan-ahead threads
 * Lock:  the stream's lock for claims and stop; each worker's scratch is
 *        its own
 * Calls: status, rand, placement, lock, io, index, sampler, cache, readahead,
 *        decode, stream (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "pool.h"
#include "pool_state.h"
#include "status.h"
#include "status_state.h"
#include "rand.h"
#include "rand_state.h"
#include "placement.h"
#include "placement_state.h"
#include "lock.h"
#include "lock_state.h"
#include "worker_state.h"
#include "index.h"
#include "index_state.h"
#include "sampler.h"
#include "sampler_state.h"
#include "cache.h"
#include "io.h"
#include "readahead.h"
#include "decode.h"
#include "stream.h"
#include "stream_state.h"
#include "handle.h"

/* --- workers ------------------------------------------------------------ */

/* A bad row's message ends with what on_bad_sample did and what it can
 * do instead: the first thing a newcomer whose loop stopped on a damaged
 * file needs to read. The reason (naming the file) is cut, never the hint. */
static void cdl__bad_row_hint(cdl__worker *W, int tried) {
    char hint[256];
    if (W->L->cfg.on_bad_sample == COORDL_BAD_SUBSTITUTE && tried == 0)
        snprintf(hint, sizeof hint, " [on_bad_sample = COORDL_BAD_SUBSTITUTE, but the dataset has no other item "
                 "to stand in; this batch is skipped, the next coordl_next returns the one after it]");
    else if (W->L->cfg.on_bad_sample == COORDL_BAD_SUBSTITUTE)
        snprintf(hint, sizeof hint, " [on_bad_sample = COORDL_BAD_SUBSTITUTE: none of %d substitute items "
                 "decoded either; this batch is skipped, the next coordl_next returns the one after it]", tried);
    else
        snprintf(hint, sizeof hint, " [on_bad_sample = COORDL_BAD_FAIL: this batch is skipped, the next "
                 "coordl_next returns the one after it; set on_bad_sample = COORDL_BAD_SUBSTITUTE to fill a bad "
                 "item's row from another item and keep the batch]");
    const size_t hlen = strlen(hint), room = sizeof W->err - 1 - hlen;
    size_t len = strlen(W->err);
    if (len > room) len = room;
    memcpy(W->err + len, hint, hlen + 1);
}

/* Prepare one row, substituting bad items when configured. Returns the
 * row's status; sets *row_id to the item actually used. */
static coordl_status cdl__prepare_row(cdl__worker *W, uint64_t epoch, uint64_t id, uint64_t pos,
                                      void *dst, uint64_t *row_id) {
    coordl *L = W->L;
    coordl_status rc = cdl__prepare_item(W, epoch, id, dst);
    *row_id = id;
    if (rc == COORDL_OK || rc == COORDL_ERR_NOMEM) return rc;
    if (L->cfg.on_bad_sample != COORDL_BAD_SUBSTITUTE) {
        cdl__bad_row_hint(W, 0);
        return rc;
    }
    if (cdl__ra_is_closing(L)) return rc; /* its read was cut by coordl_close: nobody takes the row */
    int tried = 0;
    for (int attempt = 0; attempt < CDL_SUBSTITUTE_TRIES; attempt++) {
        W->row.bad_samples++;
        cdl__log(L, COORDL_LOG_WARN, "bad sample substituted: %s", W->err);
        const uint64_t draw = cdl__hash4(L->cfg.seed, CDL_STREAM_SUBST, epoch, pos * CDL_SUBSTITUTE_TRIES + (uint64_t)attempt);
        uint64_t sub;
        if (L->index.lazy) { /* a lazy index: another item of the same shard (its count is known) */
            uint32_t count = 0;
            char why[CDL_ERRMSG_MAX];
            if (cdl__lazy_count(L, CDL_LAZY_SHARD(id), &count, why, sizeof why) != COORDL_OK || count == 0 ||
                count == CDL_LAZY_UNKNOWN)
                break;
            uint32_t j = (uint32_t)(draw % count);
            if (j == CDL_LAZY_ORDINAL(id)) j = (j + 1) % count;
            sub = CDL_LAZY_ID(CDL_LAZY_SHARD(id), j);
        } else {
            sub = draw % L->index.num_items;
            if (sub == id) sub = (sub + 1) % L->index.num_items;
        }
        if (sub == id) break; /* a one-item dataset has nothing to substitute */
        rc = cdl__prepare_item(W, epoch, sub, dst);
        *row_id = sub;
        tried++;
        if (rc == COORDL_OK) return rc;
    }
    if (rc != COORDL_ERR_NOMEM) cdl__bad_row_hint(W, tried);
    return rc;
}

/* Prepares a claimed row with no lock held: straight into its place in the
 * ring for a private loader (nothing else touches a claimed row there), or
 * into the worker's staging buffer in a group, copied in by complete only
 * if the claim still holds (a member stopped mid-row, dropped and resumed
 * would otherwise write into a slot that by then holds another batch). */
CDL_PRIVATE void cdl__worker_prepare(cdl__worker *W, const cdl__claim *c, cdl__row_result *r) {
    coordl *L = W->L;
    const int staged = L->cfg.group != NULL;
    cdl__u8 *dst = staged ? W->stage : L->ring.arena.base + c->data_off;
    int32_t *targets = NULL;
    if (L->geom.target_row_bytes)
        targets = (int32_t *)(void *)(staged ? W->stage + c->row_bytes : L->ring.arena.base + c->targets_off);
    memset(&W->row, 0, sizeof W->row);
    W->row.items = 1;
    W->targets = targets;
    W->nboxes = 0;
    W->claim = c;
    cdl__perm perm = cdl__perm_for(L, c->epoch);
    const uint64_t id = cdl__item_at_hinted(L, &perm, c->pos, &W->item_hint);
    W->ra_entry = cdl__ra_take(L, c->epoch, c->pos, id);
    r->status = cdl__prepare_row(W, c->epoch, id, c->pos, dst, &r->id);
    cdl__ra_release(L, W->ra_entry); /* decoded: its bytes may be reused */
    W->ra_entry = NULL;
    if (r->status != COORDL_OK) { /* never hand out stale pixels */
        memset(dst, 0, c->row_bytes);
        if (targets) memset(targets, 0, L->geom.target_row_bytes);
    }
    int32_t cached_label; /* a lazily indexed item's, kept by the cache: its shard needs no rescan */
    r->label = cdl__cache_label(L, r->id, &cached_label) ? cached_label : cdl__item_label(L, r->id);
    r->nboxes = r->status == COORDL_OK ? W->nboxes : 0; /* boxes: plan.c wrote them with the geometry */
    r->staged = staged ? dst : NULL;
    r->staged_targets = staged ? targets : NULL;
    r->errmsg = W->err;
    W->claim = NULL;
}

/* Names the worker so that tools (top -H, /proc/<pid>/task) show it. Its
 * affinity was set at creation (cdl__pool_start), so it allocates its
 * scratch already on its own node (first touch). */
static void cdl__worker_bind(cdl__worker *W) {
    char name[16];
    snprintf(name, sizeof name, "coordl-w%d", W->index);
    pthread_setname_np(pthread_self(), name);
}

/* A worker: claim, prepare with no lock held, complete; with nothing to
 * claim, rewrite cached JPEGs while there are any (once it finds none, not
 * again before its next row). */
static void *cdl__worker_main(void *arg) {
    cdl__worker *W = arg;
    coordl *L = W->L;
    cdl__claim c;
    cdl__row_result r;
    int idle = 1, got;
    cdl__worker_bind(W);
#if defined(__linux__) && defined(SCHED_BATCH)
    /* Workers are throughput threads: under SCHED_BATCH (same CPU share,
     * no privilege needed) a woken worker does not preempt the thread that
     * woke it, so the trainer is not pushed off its core inside a coordl
     * call or an OpenMP region; the worker runs at the next tick instead.
     * Best effort: a refusal leaves the default policy. */
    struct sched_param sp;
    memset(&sp, 0, sizeof sp);
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
#endif
    cdl__lock(L);
    while ((got = cdl__stream_claim(L, &c, idle)) != 0) {
        cdl__unlock(L);
        if (got == 2) {
#ifndef COORDL_NO_JPEGTURBO
            cdl__counters done;
            idle = cdl__rewrite_idle(W, &done);
            cdl__lock(L);
            L->stats.st.jpeg_rewrites += done.jpeg_rewrites;
            L->stats.st.jpeg_rewrites_idle += done.jpeg_rewrites_idle;
            L->stats.st.jpeg_rewrite_ns += done.jpeg_rewrite_ns;
            L->stats.st.jpeg_rewrite_failures += done.jpeg_rewrite_failures;
#else
            idle = 0;
            cdl__lock(L);
#endif
            continue;
        }
        idle = 1;
        cdl__test_hook(L, "row_claimed");
        cdl__worker_prepare(W, &c, &r);
        cdl__test_hook(L, "row_written");
        cdl__lock(L);
        cdl__stream_complete(L, &c, &W->row, &r);
    }
    cdl__unlock(L);
    return NULL;
}

static void cdl__worker_free(coordl *L, cdl__worker *W) {
    cdl__kept_free(L, &W->kept);
    cdl__free(L, W->readbuf);
    cdl__free(L, W->pix);
    cdl__free(L, W->row4);
    cdl__free(L, W->tmp);
    cdl__free(L, W->rot);
    cdl__free(L, W->stage);
    cdl__free(L, W->window_row);
    cdl__free(L, W->xstart);
    cdl__free(L, W->xw);
    cdl__free(L, W->xw8);
    cdl__free(L, W->ystart);
    cdl__free(L, W->yw);
    cdl__free(L, W->rw);
    cdl__free(L, W->rwidx);
    cdl__free(L, W->splice);
#ifndef COORDL_NO_JPEGTURBO
    if (W->jd_ready) jpeg_destroy_decompress(&W->jd);
#endif
}

/* The PUs this process's workers use: all the chosen ones, or, for a
 * member of a coordinated group with the default placement, its own slice
 * of the physical cores (the members' workers together form one pool over
 * the machine instead of k pools piled on the first cores). */
static void cdl__pool_pus(const coordl *L, int *first, int *count) {
    const cdl__placement *P = &L->place;
    *first = 0;
    *count = P->nworker_pus;
    if (L->cfg.group && L->cfg.group_size > 1 && L->member.me >= 0 && !L->cfg.cpuset && L->cfg.numa_node < 0 &&
        !L->cfg.pci_bus_id && P->ncores > 0) {
        const int k = L->cfg.group_size, m = L->member.me % k;
        int lo = P->ncores * m / k, hi = P->ncores * (m + 1) / k;
        if (hi <= lo) { lo = m % P->ncores; hi = lo + 1; }
        *first = lo;
        *count = hi - lo; /* worker_pus starts with one PU per core, in core order */
    }
}

/* Starts a worker on its PU: binding at creation rather than from inside
 * the thread means open returns with every worker placed, and no scratch
 * page is ever touched elsewhere. */
static int cdl__worker_start(cdl__worker *W, int bind, int *bound) {
    int e = EINVAL;
    *bound = 0;
    if (bind && W->pu >= 0 && W->pu < CPU_SETSIZE) {
        pthread_attr_t attr;
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(W->pu, &set);
        if (pthread_attr_init(&attr) == 0) {
            if (pthread_attr_setaffinity_np(&attr, sizeof set, &set) == 0)
                e = pthread_create(&W->thread, &attr, cdl__worker_main, W);
            pthread_attr_destroy(&attr);
        }
        *bound = e == 0;
    }
    if (!*bound) e = pthread_create(&W->thread, NULL, cdl__worker_main, W);
    return e;
}

/* A lazy index's scan-ahead thread: makes the shards of the window after
 * the one the order is in resident before a worker, the read-ahead or the
 * stream's assignment (under its lock) would wait for their scan. With two
 * of them a window's shards are scanned two at a time. */
static void *cdl__scan_ahead_main(void *arg) {
    coordl *L = arg;
    uint32_t shards[64];
    pthread_setname_np(pthread_self(), "coordl-index");
    size_t n;
    while ((n = cdl__sampler_ahead(L, shards, 64)) > 0)
        for (size_t i = 0; i < n; i++) cdl__sampler_ahead_scan(L, shards[i]);
    return NULL;
}

CDL_PRIVATE coordl_status cdl__pool_start(coordl *L) {
    const cdl__placement *P = &L->place;
    int first, count;
    cdl__pool_pus(L, &first, &count);
    int n = L->cfg.threads > 0 ? L->cfg.threads : (first || count != P->nworker_pus ? count : P->ncores);
    if (n < 1) n = 1;
    L->stats.st.threads_requested = (uint32_t)L->cfg.threads;
    /* More workers than 4 per processing unit only add switches and
     * scratch memory (each holds decode buffers): 1000 threads on 2 cores
     * is a typo or a config from another machine. Say what runs instead. */
    const int pus = P->nworker_pus + P->nreserved > 0 ? P->nworker_pus + P->nreserved : 1;
    if (n > 4 * pus) {
        cdl__log(L, COORDL_LOG_WARN, "threads: %d asked for, but this process may use %d processing unit%s; "
                 "running %d workers (at most 4 per unit; coordl_get_stats reports threads and threads_requested)",
                 n, pus, pus == 1 ? "" : "s", 4 * pus);
        n = 4 * pus;
    }
    /* Token windows by default have no worker threads: a batch is a copy of
     * B x (T + 1) tokens already in memory (read ahead, or cached), cheaper
     * on the trainer's own thread inside coordl_next than a hand-off to a
     * worker and back (issue 23: a hand-off cost 60-70 us and 3 context
     * switches a batch; the copy costs a few microseconds). */
    if (L->cfg.pipeline == COORDL_PIPE_TOKENS && L->cfg.threads == 0) n = 0;
    if (n > 0) {
        L->pool.workers = cdl__calloc(L, (size_t)n, sizeof *L->pool.workers);
        if (!L->pool.workers) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for %d workers; lower threads", n);
    }
    for (int i = 0; i < n; i++) {
        cdl__worker *W = &L->pool.workers[i];
        W->L = L;
        W->index = i;
        W->reader = i < CDL_READER_HELPER ? cdl__cache_reader(L, (uint32_t)i) : NULL; /* beyond: reads miss */
        W->pu = count > 0 ? P->worker_pus[first + i % count] : -1;
        if (i < 64) L->stats.st.worker_cpu[i] = W->pu;
        /* a group stages each row (coordl_set cannot change its size) */
        if (L->cfg.group && !cdl__reserve(L, (void **)&W->stage, &W->stagecap, L->geom.row_bytes + L->geom.target_row_bytes + 16))
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the workers' staging rows; lower threads "
                                  "or out_w/out_h");
        cdl__worker_decoder_init(W);
    }
    for (int i = n; i < 64; i++) L->stats.st.worker_cpu[i] = -1;
    if (L->cfg.pipeline == COORDL_PIPE_TOKENS) { /* the consumer's own scratch (cdl__consumer_help) */
        L->pool.helper = cdl__calloc(L, 1, sizeof *L->pool.helper);
        if (!L->pool.helper) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
        L->pool.helper->L = L;
        L->pool.helper->index = n;
        L->pool.helper->reader = cdl__cache_reader(L, CDL_READER_HELPER);
        L->pool.helper->pu = -1;
        if (L->cfg.group && !cdl__reserve(L, (void **)&L->pool.helper->stage, &L->pool.helper->stagecap,
                                          L->geom.row_bytes + L->geom.target_row_bytes + 16))
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the consumer's staging row");
    }
    const int listed = n < count ? n : count;
    cdl__format_pu_list(P->worker_pus + first, listed, L->stats.st.placement_cpus, sizeof L->stats.st.placement_cpus);
    cdl__format_pu_list(P->reserved_pus, P->nreserved, L->stats.st.reserved_cpus, sizeof L->stats.st.reserved_cpus);
    L->stats.st.placement_node = P->node;
    L->stats.st.placement_nodes = (uint32_t)P->nnodes;
    L->pool.nworkers = n;
    const int bind = L->cfg.bind && !P->simulate;
    for (int i = 0; i < n; i++) {
        int bound, e = cdl__worker_start(&L->pool.workers[i], bind, &bound);
        if (e != 0) return cdl__open_fail(COORDL_ERR_NOMEM, "cannot start worker thread %d: %s; lower threads", i, strerror(e));
        L->pool.workers[i].started = 1;
        L->stats.st.threads_bound += (uint32_t)bound;
    }
    L->stats.st.threads = (uint32_t)n;
    if (L->index.lazy && L->sampler.window) {
        for (int i = 0; i < CDL_SCAN_AHEAD_THREADS; i++) {
            const int e = pthread_create(&L->pool.ahead[i], NULL, cdl__scan_ahead_main, L);
            if (e != 0) return cdl__open_fail(COORDL_ERR_NOMEM, "cannot start a scan-ahead thread: %s", strerror(e));
            L->pool.nahead++;
        }
    }
    return COORDL_OK;
}

CDL_PRIVATE void cdl__pool_stop(coordl *L) {
    if (L->pool.nahead) { /* first: one may be mid-scan, through the readers the others close */
        cdl__sampler_ahead_stop(L);
        for (int i = 0; i < L->pool.nahead; i++) pthread_join(L->pool.ahead[i], NULL);
        L->pool.nahead = 0;
    }
    if (!L->pool.workers && !L->pool.helper) {
        cdl__ra_stop(L);
        return;
    }
    cdl__lock(L);
    L->pool.stop = 1;
    cdl__broadcast(L, &L->S->work_cv);
    cdl__unlock(L);
    cdl__ra_closing(L); /* a worker waiting for a read stops waiting */
    for (int i = 0; i < L->pool.nworkers; i++)
        if (L->pool.workers[i].started) pthread_join(L->pool.workers[i].thread, NULL);
    for (int i = 0; i < L->pool.nworkers; i++) cdl__worker_free(L, &L->pool.workers[i]);
    cdl__free(L, L->pool.workers);
    L->pool.workers = NULL;
    if (L->pool.helper) {
        cdl__worker_free(L, L->pool.helper);
        cdl__free(L, L->pool.helper);
        L->pool.helper = NULL;
    }
    cdl__ra_stop(L); /* after the workers: one may wait for a read */
}

