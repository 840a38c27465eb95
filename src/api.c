/* SPDX-License-Identifier: MIT */
/*
 * api.c - the public API.
 *
 * Owns:  L->consumer: the consumer thread's position and stall timing;
 *        coordl_open, next, release, seek, set, stats, close
 * Lock:  the stream's lock for everything shared; the consumer fields are
 *        the calling thread's (the API is single-consumer)
 * Calls: status, placement, lock, remote, io, uring, index, indexfile,
 *        source, sampler, cache, peers, readahead, plan, resample, audio,
 *        decode, config, stream, pool, group (lower layers only:
 *        src/modules.txt; tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "api.h"
#include "status.h"
#include "status_state.h"
#include "placement.h"
#include "lock.h"
#include "lock_state.h"
#include "worker_state.h"
#include "remote.h"
#include "remote_state.h"
#include "http_state.h"
#include "io.h"
#include "uring.h"
#include "uring_state.h"
#include "index.h"
#include "indexfile.h"
#include "source.h"
#include "sampler.h"
#include "sampler_state.h"
#include "cache.h"
#include "peers.h"
#include "readahead.h"
#include "plan.h"
#include "plan_state.h"
#include "resample.h"
#include "audio.h"
#include "audio_state.h"
#include "decode.h"
#include "config.h"
#include "config_state.h"
#include "stream.h"
#include "stream_state.h"
#include "pool.h"
#include "group.h"
#include "handle.h"

static coordl_status cdl__open_handle(const coordl_config *cfg, coordl **out) {
    coordl_allocator a = cfg->allocator;
    if (!a.malloc_fn) {
        a.malloc_fn = cdl__default_malloc;
        a.realloc_fn = cdl__default_realloc;
        a.free_fn = cdl__default_free;
    }
    coordl *L = a.malloc_fn(a.user, sizeof *L);
    if (!L) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the handle");
    memset(L, 0, sizeof *L);
    pthread_mutex_init(&L->api_reader.mu, NULL); /* coordl_close destroys it */
    L->alloc = a;
    L->cfg = *cfg;
    L->io = cfg->io ? cfg->io : &cdl__posix_io;
    L->member.me = -1;
    *out = L;
    L->geom.avx2 = cdl__resample_use_avx2();
    L->lock_repair = cdl__stream_repair;
    /* limits added after 0.3.0: 0 (a caller that predates them) = default */
    if (!L->cfg.max_decode_bytes) L->cfg.max_decode_bytes = CDL_DEFAULT_MAX_DECODE_BYTES;
    if (!L->cfg.max_audio_samples) L->cfg.max_audio_samples = CDL_DEFAULT_MAX_AUDIO_SAMPLES;
    /* Strings are copied: the caller's config may go away after open. */
    size_t slen = strlen(cfg->source);
    L->conf.source_copy = cdl__malloc(L, slen + 1);
    if (!L->conf.source_copy) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    memcpy(L->conf.source_copy, cfg->source, slen + 1);
    /* a folder's trailing '/' goes; an s3:// prefix keeps it: it asks for
     * a listing (docs/remote.md) */
    if (strncasecmp(L->conf.source_copy, "s3://", 5) != 0)
        while (slen > 1 && L->conf.source_copy[slen - 1] == '/') L->conf.source_copy[--slen] = '\0';
    L->cfg.source = L->conf.source_copy;
    if (cfg->group) {
        size_t glen = strlen(cfg->group);
        L->conf.group_copy = cdl__malloc(L, glen + 1);
        if (!L->conf.group_copy) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
        memcpy(L->conf.group_copy, cfg->group, glen + 1);
        L->cfg.group = L->conf.group_copy;
    }
    if (cfg->topology) { /* kept: coordl_get_config says what the cpuset indexes */
        size_t tlen = strlen(cfg->topology);
        L->conf.topology_copy = cdl__malloc(L, tlen + 1);
        if (!L->conf.topology_copy) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
        memcpy(L->conf.topology_copy, cfg->topology, tlen + 1);
        L->cfg.topology = L->conf.topology_copy;
    }
    return COORDL_OK;
}

/* From the indexed dataset: the rank's share, batches per epoch, the row
 * sizes and the ring's capacity (the largest sizes coordl_set may ask for
 * without reallocating it). */
static coordl_status cdl__open_geometry(coordl *L) {
    L->sampler.share = L->sampler.llmc ? L->sampler.llmc->total * L->cfg.batch_size : L->index.num_items / (uint64_t)L->cfg.world;
    if (L->index.lazy) L->sampler.share = UINT64_MAX; /* known once every shard is counted (cdl__sampler_settle) */
    L->sampler.bpe = cdl__batches_for(L, L->cfg.batch_size);
    if (L->index.lazy) {
        /* nothing to check before the shards are counted */
    } else if (L->sampler.share == 0)
        return cdl__open_fail(COORDL_ERR_INVALID, "world: %d ranks but only %llu items; every rank needs at least "
                              "one item per epoch", L->cfg.world, (unsigned long long)L->index.num_items);
    else if (L->sampler.bpe == 0)
        return cdl__open_fail(COORDL_ERR_INVALID, "batch_size: %u is larger than this rank's %llu items per epoch "
                              "with drop_last; lower batch_size", L->cfg.batch_size, (unsigned long long)L->sampler.share);
    cdl__output_setup(L);
    const uint32_t mw = L->cfg.max_out_w > L->cfg.out_w ? L->cfg.max_out_w : L->cfg.out_w;
    const uint32_t mh = L->cfg.max_out_h > L->cfg.out_h ? L->cfg.max_out_h : L->cfg.out_h;
    L->geom.slot_rows_cap = L->cfg.max_batch_size > L->cfg.batch_size ? L->cfg.max_batch_size : L->cfg.batch_size;
    const size_t max_row = cdl__row_bytes_at(L, mw, mh); /* mw x mh <= 2^26 (cdl__validate) */
    if (max_row > SIZE_MAX / L->geom.slot_rows_cap)
        return cdl__open_fail(COORDL_ERR_INVALID, "max_batch_size: %u rows of %zu bytes do not fit this platform",
                              L->geom.slot_rows_cap, max_row);
    L->geom.slot_data_cap = (size_t)L->geom.slot_rows_cap * max_row;
    L->ring.nslots = L->cfg.prefetch_batches;
    /* read-ahead as it will run (coordl_get_config reports it) */
    if (L->cfg.group) L->cfg.readahead_items = 0;
    /* token windows read by the trainer's thread (no workers): a window is
     * a read call on a shard kept open, and the kernel's file read-ahead
     * keeps a shard's pages ahead; I/O threads would only add a wake-up
     * per half window (issue 23: context switches per run within 2x of
     * llm.c's own loader) */
    if (L->cfg.pipeline == COORDL_PIPE_TOKENS && L->cfg.threads == 0) L->cfg.readahead_items = 0;
    if (L->cfg.readahead_items == 0) {
        L->cfg.readahead_threads = 0;
        L->cfg.readahead_bytes = 0;
    } else {
        /* the depth is the reads in flight: up to one I/O thread each,
         * started as reads wait (readahead.c) */
        if (L->cfg.readahead_threads == 0 || L->cfg.readahead_threads > L->cfg.readahead_items)
            L->cfg.readahead_threads = L->cfg.readahead_items;
        if (L->cfg.readahead_bytes == 0) {
            /* twice the depth's worth of mean items, 4..64 MiB (every page
             * of it is touched once per lap: no bigger than it needs) */
            const uint64_t mean = L->index.num_items ? L->index.dataset_bytes / L->index.num_items : 0;
            uint64_t b = 2 * (uint64_t)L->cfg.readahead_items * (mean + 64);
            if (b < ((uint64_t)4 << 20)) b = (uint64_t)4 << 20;
            if (b > ((uint64_t)64 << 20)) b = (uint64_t)64 << 20;
            const uint64_t small = L->index.dataset_bytes + ((uint64_t)1 << 20);
            L->cfg.readahead_bytes = small < b ? small : b;
        }
        if (L->cfg.readahead_bytes > SIZE_MAX / 4)
            return cdl__open_fail(COORDL_ERR_INVALID, "readahead_bytes: %llu is too large for this platform",
                                  (unsigned long long)L->cfg.readahead_bytes);
    }
    L->stats.st.dataset_bytes = L->index.dataset_bytes;
    return COORDL_OK;
}

/* A private stream: this process is the only member (index 0). */
static coordl_status cdl__open_private_stream(coordl *L) {
    L->S = cdl__calloc(L, 1, sizeof *L->S);
    coordl_status rc = L->S ? cdl__stream_init(L->S, 0) : cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    if (rc != COORDL_OK) return rc;
    L->member.me = 0;
    L->member.bit = 1;
    L->member.my_gen = 1;
    atomic_store(&L->S->members[0].gen, 1);
    atomic_store(&L->S->members[0].pid, (int32_t)getpid());
    atomic_store(&L->S->live_mask, 1u);
    L->S->started = 1;
    rc = cdl__cache_create(L);
    if (rc == COORDL_OK) rc = cdl__ring_alloc(L, L->geom.slot_rows_cap, L->geom.slot_data_cap);
    return rc;
}

static void cdl__open_log(coordl *L) {
    cdl__log(L, COORDL_LOG_INFO, "opened %s: %llu items, %u classes, %llu batches/epoch, %d workers, "
             "cache %llu bytes", L->cfg.source, (unsigned long long)L->index.num_items, L->index.num_classes,
             /* a lazy index's workers may have settled it already */
             (unsigned long long)__atomic_load_n(&L->sampler.bpe, __ATOMIC_RELAXED), L->pool.nworkers,
             (unsigned long long)L->cfg.cache_bytes);
    char node[32];
    if (L->place.node >= 0) snprintf(node, sizeof node, "node %d", L->place.node);
    else snprintf(node, sizeof node, "%d nodes (interleaved)", L->place.nnodes);
    cdl__log(L, COORDL_LOG_INFO, "placement%s: workers on PUs %s%s%s; memory on %s, %s; "
             "%llu bytes page-locked", L->place.simulate ? " (simulated topology, nothing bound)" : "",
             L->stats.st.placement_cpus, L->stats.st.reserved_cpus[0] ? "; reserved for the trainer: PUs " : "",
             L->stats.st.reserved_cpus, node, L->stats.st.memory_bound ? "bound" : "not bound",
             (unsigned long long)L->stats.st.pinned_bytes);
}

CDL_PRIVATE coordl_status cdl__open(const coordl_config *cfg, coordl **out) {
    cdl__open_errmsg[0] = '\0';
    if (out) *out = NULL;
    if (!cfg || !out) return cdl__open_fail(COORDL_ERR_INVALID, "coordl_open: cfg and out must not be NULL");
    coordl_status rc = cdl__validate(cfg);
    if (rc != COORDL_OK) return rc;
    coordl *L = NULL;
    rc = cdl__open_handle(cfg, &L);
    if (rc == COORDL_OK && L->cfg.mpi_comm) {
#ifdef COORDL_MPI
        rc = cdl__peer_open(L);
#else
        rc = cdl__open_fail(COORDL_ERR_UNSUPPORTED, "mpi_comm: this build has no MPI; build with COORDL_MPI "
                            "(make MPI=1)");
#endif
    }
#ifdef COORDL_MPI
    /* one scan per job: rank 0 indexes, the others receive its index */
    if (rc == COORDL_OK && L->peers.comm_set && L->cfg.world > 1) rc = cdl__peer_index(L);
    else
#endif
    if (rc == COORDL_OK) rc = cdl__index_source(L);
    if (rc == COORDL_OK && L->cfg.pipeline == COORDL_PIPE_TOKENS && L->cfg.token_order == COORDL_TOKENS_LLMC)
        rc = cdl__llmc_init(L);
    if (rc == COORDL_OK && L->cfg.shuffle == COORDL_SHUFFLE_SHARD_WINDOW) rc = cdl__window_init(L);
    if (rc == COORDL_OK) rc = cdl__open_geometry(L);
    if (rc == COORDL_OK) rc = cdl__placement_choose(L, &L->place);
    if (rc == COORDL_OK) {
        L->place.memory_bound_all = L->cfg.bind && !L->place.simulate;
        rc = cdl__cache_clamp(L);
    }
    if (rc == COORDL_OK && L->cfg.group) {
        L->place.memory_bound_all = 0; /* the shm object is placed by first touch */
        rc = cdl__group_open(L); /* allocates the ring's private arrays */
    } else if (rc == COORDL_OK) {
        rc = cdl__open_private_stream(L);
    }
#ifdef COORDL_MPI
    /* before the workers: they read the peer bookkeeping */
    if (rc == COORDL_OK && L->peers.comm_set) rc = cdl__peer_start(L);
#endif
    if (rc == COORDL_OK) {
        L->stats.st.memory_bound = L->place.memory_bound_all;
        if (L->place.pin_failed)
            cdl__log(L, COORDL_LOG_WARN, "cache and batch ring are not page-locked (%s); using pageable "
                     "memory (raise RLIMIT_MEMLOCK or grant CAP_IPC_LOCK to pin them)", L->place.pin_error);
        rc = cdl__ra_start(L);
        if (rc == COORDL_OK) rc = cdl__pool_start(L);
    }
    if (rc != COORDL_OK) {
        char keep[CDL_ERRMSG_MAX];
        memcpy(keep, cdl__open_errmsg, sizeof keep);
        coordl_close(L);
        memcpy(cdl__open_errmsg, keep, sizeof keep);
        return rc;
    }
    cdl__open_log(L);
    L->consumer.last_return_ns = 0;
    /* the placement strings were consumed by open; drop the caller's
     * pointers so nothing can read them after the caller frees them (the
     * topology points to the handle's copy) */
    L->cfg.cpuset = L->cfg.pci_bus_id = NULL;
    L->cfg.index_path = NULL;
    *out = L;
    return COORDL_OK;
}

/* The consumer's time inside coordl_next (and coordl_next_into, the same
 * call with a copy) counts as stall: the trainer waits for its batch
 * there and nowhere else. The time between the end of one such call and
 * the start of the next is compute, whatever else the trainer calls in
 * between (release, seek, set are its own work, not a wait for data). The
 * stall goes to `epoch`'s counters, the compute to the epoch of the call
 * before it. cdl__consumer_time, at the end of each such call under mu,
 * counts up to now and returns now; cdl__consumer_done, after the unlock,
 * keeps the rest (the unlock, a wake-up, the thread preempted meanwhile)
 * as the tail that the next call moves into the counters
 * (coordl_get_stats adds it meanwhile). */
static CDL_HOT uint64_t cdl__consumer_time(coordl *L, uint64_t t_enter, uint64_t epoch) {
    const uint64_t now = cdl__now_ns();
    const uint64_t tail = atomic_exchange(&L->consumer.stall_tail_ns, 0);
    if (tail) {
        L->stats.st.stall_ns += tail;
        cdl__epoch_entry(L, L->consumer.stall_tail_epoch)->s.stall_ns += tail;
    }
    if (L->consumer.last_return_ns && t_enter > L->consumer.last_return_ns) {
        const uint64_t compute = t_enter - L->consumer.last_return_ns;
        L->stats.st.compute_ns += compute;
        cdl__epoch_entry(L, L->consumer.stall_tail_epoch)->s.compute_ns += compute;
    }
    L->stats.st.stall_ns += now - t_enter;
    cdl__epoch_entry(L, epoch)->s.stall_ns += now - t_enter;
    return now;
}

static CDL_HOT void cdl__consumer_done(coordl *L, uint64_t counted_until, uint64_t epoch) {
    const uint64_t end = cdl__now_ns();
    L->consumer.stall_tail_epoch = epoch;
    atomic_store(&L->consumer.stall_tail_ns, end > counted_until ? end - counted_until : 0);
    L->consumer.last_return_ns = end;
}

/* While its next batch is not ready the consumer of a token pipeline
 * prepares rows itself, as a worker would (claim, prepare, complete): a
 * window is a copy of a few hundred bytes, so doing it is cheaper than
 * waiting for a worker that the trainer's own threads or other processes
 * keep off the cores. A private loader claims up to CDL_HELP_ROWS rows of
 * one slot in one critical section and completes them in another (issue
 * 23: two lock round trips a row made a B = 128 batch cost 2.3x llm.c's
 * loader); a group stages each row in the one staging buffer, so it goes
 * row by row. 1 when it prepared a row. Under mu (released while the rows
 * are prepared). */
enum { CDL_HELP_ROWS = 64 };

static int cdl__consumer_help(coordl *L) {
    cdl__worker *H = L->pool.helper;
    cdl__claim c[CDL_HELP_ROWS];
    cdl__row_result r[CDL_HELP_ROWS];
    cdl__counters sum;
    char first_err[CDL_ERRMSG_MAX];
    if (!H || !cdl__stream_try_claim(L, &c[0])) return 0;
    const int most = L->cfg.group ? 1 : CDL_HELP_ROWS;
    int n = 1;
    while (n < most) {
        const cdl__slot *sl = &L->ring.slots[c[0].slot];
        if (sl->gen != c[0].slot_gen || sl->rows_claimed >= sl->n || !cdl__stream_try_claim(L, &c[n])) break;
        n++;
    }
    cdl__unlock(L);
    memset(&sum, 0, sizeof sum);
    first_err[0] = '\0';
    for (int i = 0; i < n; i++) {
        cdl__worker_prepare(H, &c[i], &r[i]);
#define CDL_COUNTER_SUM(name, per_row, in_stats, ep) CDL_IF_##per_row(sum.name += H->row.name;)
        CDL_COUNTERS(CDL_COUNTER_SUM)
#undef CDL_COUNTER_SUM
        /* the worker's message buffer is the next row's: keep the first
         * failed row's (the slot records only its lowest failed row) */
        if (r[i].status != COORDL_OK && !first_err[0]) snprintf(first_err, sizeof first_err, "%s", r[i].errmsg);
        r[i].errmsg = first_err;
    }
    cdl__lock(L);
    cdl__counters none;
    memset(&none, 0, sizeof none);
    for (int i = 0; i < n; i++) cdl__stream_complete(L, &c[i], i == 0 ? &sum : &none, &r[i]);
    return 1;
}

/* coordl_next under mu: the end of an epoch, or the next batch in order
 * (waiting for it). *epoch: the epoch the call's time belongs to. */
/* The consumer is at the end of its epoch: the next call starts the next. */
static CDL_HOT coordl_status cdl__consumer_epoch_ended(coordl *L, coordl_batch *out) {
    out->epoch = L->consumer.cur_epoch;
    L->consumer.cur_epoch++;
    L->consumer.cur_pos = 0;
    L->consumer.cur_index = 0;
    return COORDL_END_OF_EPOCH;
}

static CDL_HOT coordl_status cdl__consumer_next(coordl *L, coordl_batch *out, uint64_t *epoch) {
    cdl__stream *S = L->S;
    memset(out, 0, sizeof *out);
    L->errmsg[0] = '\0';
    *epoch = L->consumer.cur_epoch;
    cdl__peer_consumer_started(L);
    coordl_status lazy_rc;
    if (L->index.lazy && L->cfg.on_bad_sample == COORDL_BAD_FAIL &&
        cdl__lazy_new_failure(L, &lazy_rc, L->errmsg, sizeof L->errmsg))
        return lazy_rc; /* a shard the order left out: said once; the next call goes on */
    if (L->consumer.cur_pos >= cdl__epoch_end(L, L->consumer.cur_epoch)) return cdl__consumer_epoch_ended(L, out);
    if (S->broken) {
        snprintf(L->errmsg, sizeof L->errmsg, "the batch ring could not be reallocated by coordl_set; "
                 "close this handle");
        return COORDL_ERR_NOMEM;
    }
    if (L->consumer.held >= L->ring.nslots) {
        snprintf(L->errmsg, sizeof L->errmsg, "all %u batch slots are held; release a batch before "
                 "asking for the next (or raise prefetch_batches)", L->ring.nslots);
        return COORDL_ERR_INVALID;
    }
    for (;;) {
        if (!cdl__member_current(L)) {
            snprintf(L->errmsg, sizeof L->errmsg, "group %s: this member was dropped from the group "
                     "(no heartbeat within group_timeout_ms); close and reopen", L->cfg.group ? L->cfg.group : "");
            return COORDL_ERR_GROUP;
        }
        const int s = cdl__stream_find(L);
        if (s >= 0) return cdl__stream_take(L, (uint32_t)s, out);
        /* a lazy index's epoch end, learned while this call waited */
        if (L->consumer.cur_pos >= cdl__epoch_end(L, L->consumer.cur_epoch)) return cdl__consumer_epoch_ended(L, out);
        if (cdl__consumer_help(L)) continue;
        cdl__signal(L, &S->work_cv); /* below the release mark a worker may sleep */
        cdl__wait(L, &S->ready_cv);
    }
}

CDL_PRIVATE CDL_HOT coordl_status cdl__next(coordl *L, coordl_batch *out) {
    if (!L || !out) return COORDL_ERR_INVALID;
    const uint64_t t0 = cdl__now_ns();
    uint64_t epoch;
    cdl__lock(L);
    const coordl_status rc = cdl__consumer_next(L, out, &epoch);
    const uint64_t counted = cdl__consumer_time(L, t0, epoch);
    cdl__unlock(L);
    cdl__consumer_done(L, counted, epoch);
    return rc;
}

CDL_HOT void coordl_release(coordl *L, coordl_batch *b) {
    if (!L || !b || b->slot_ == 0) return;
    cdl__test_hook(L, "release");
    cdl__lock(L);
    const int freed = cdl__stream_release(L, b);
    cdl__unlock(L);
    if (freed) cdl__signal_unlocked(L, &L->S->work_cv);
    b->slot_ = 0;
}

CDL_HOT coordl_status coordl_next_into(coordl *L, void *data, size_t data_bytes, void *labels_or_targets,
                               size_t label_bytes) {
    if (!L || !data) return COORDL_ERR_INVALID;
    const uint64_t t0 = cdl__now_ns();
    uint64_t epoch = L->consumer.cur_epoch;
    coordl_batch b;
    coordl_status rc = COORDL_OK;
    cdl__lock(L);
    const uint64_t end = cdl__epoch_end(L, L->consumer.cur_epoch);
    if (L->consumer.cur_pos < end) {
        /* Check sizes against the batch that comes next, before taking it,
         * so that a too-small buffer consumes nothing. */
        const uint64_t left = end - L->consumer.cur_pos;
        const size_t n = (size_t)(left < L->cfg.batch_size ? left : L->cfg.batch_size);
        const size_t need_data = n * L->geom.row_bytes;
        const size_t need_labels = n * (L->geom.target_row_bytes ? L->geom.target_row_bytes : sizeof(int32_t));
        if (data_bytes < need_data || (labels_or_targets && label_bytes < need_labels)) {
            snprintf(L->errmsg, sizeof L->errmsg, "coordl_next_into: the next batch needs %zu data bytes "
                     "and %zu %s bytes; got %zu and %zu", need_data, need_labels,
                     L->geom.box_rows ? "box" : L->geom.target_row_bytes ? "target" : "label", data_bytes, label_bytes);
            rc = COORDL_ERR_INVALID;
        }
    }
    if (rc == COORDL_OK) rc = cdl__consumer_next(L, &b, &epoch);
    if (rc != COORDL_OK) {
        const uint64_t counted = cdl__consumer_time(L, t0, epoch);
        cdl__unlock(L);
        cdl__consumer_done(L, counted, epoch);
        return rc;
    }
    /* The batch is held, so the workers need not wait for the copy: its
     * slot is not reused while this member holds it. But a group may drop
     * this member meanwhile (silent past group_timeout_ms: stopped,
     * descheduled), and then the slot goes back to the ring and may be
     * refilled under the copy. So, as a seqlock's reader: copy, then check
     * under the lock that the batch is still this member's (generation,
     * slot generation, its taken bit); the check and the release are one
     * critical section, so nothing can reuse the slot between them. */
    cdl__unlock(L);
    cdl__test_hook(L, "copying");
    /* what goes to labels_or_targets: boxes (Darknet's truth rows, then
     * the counts if they fit), token targets, or labels */
    size_t label_copy = 0, counts_copy = 0;
    if (labels_or_targets) {
        if (b.boxes) {
            label_copy = (size_t)b.n * L->geom.target_row_bytes;
            if (label_bytes - label_copy >= (size_t)b.n * sizeof(uint32_t)) counts_copy = (size_t)b.n * sizeof(uint32_t);
        } else {
            label_copy = b.targets ? (size_t)b.n * L->geom.target_row_bytes : (size_t)b.n * sizeof(int32_t);
        }
    }
    memcpy(data, b.data, b.data_bytes);
    if (label_copy)
        memcpy(labels_or_targets, b.boxes ? (const void *)b.boxes : b.targets ? (const void *)b.targets
                                                                           : (const void *)b.labels, label_copy);
    if (counts_copy) memcpy((unsigned char *)labels_or_targets + label_copy, b.nboxes, counts_copy);
    cdl__lock(L);
    const int held = cdl__stream_holds(L, &b);
    const int freed = held ? cdl__stream_release(L, &b) : 0;
    if (!held) {
        L->consumer.held--; /* the drop took the slot; this handle's count is its own */
        snprintf(L->errmsg, sizeof L->errmsg, "group %s: this member was dropped from the group while "
                 "coordl_next_into copied a batch (no heartbeat within group_timeout_ms); the copy is void "
                 "(zeroed); close and reopen", L->cfg.group ? L->cfg.group : "");
    }
    const uint64_t counted = cdl__consumer_time(L, t0, epoch);
    cdl__unlock(L);
    if (freed) cdl__signal_unlocked(L, &L->S->work_cv);
    cdl__consumer_done(L, counted, epoch);
    if (!held) { /* never hand out rows that may mix two batches */
        memset(data, 0, b.data_bytes);
        if (label_copy) memset(labels_or_targets, 0, label_copy + counts_copy);
        return COORDL_ERR_GROUP;
    }
    return COORDL_OK;
}

coordl_status coordl_seek(coordl *L, uint64_t epoch, uint64_t batch) {
    if (!L) return COORDL_ERR_INVALID;
    if (L->cfg.group) {
        snprintf(L->errmsg, sizeof L->errmsg, "coordl_seek: a coordinated group shares one stream; members cannot "
                 "seek alone");
        return COORDL_ERR_UNSUPPORTED;
    }
    cdl__lock(L);
    if (L->index.lazy && L->sampler.bpe == 0) {
        /* a lazy index not all counted: the batch's first row must map
         * (this counts the shards of its epoch up to it) */
        cdl__sampler_known(L, epoch, batch * L->cfg.batch_size, 1);
        cdl__sampler_settle(L);
    }
    /* still unknown after that: the first row maps, so it is before the end */
    const int count_known = !(L->index.lazy && L->sampler.bpe == 0);
    if (count_known && batch >= L->sampler.bpe) {
        snprintf(L->errmsg, sizeof L->errmsg, "coordl_seek: batch %llu is not below batches_per_epoch (%llu)",
                 (unsigned long long)batch, (unsigned long long)L->sampler.bpe);
        cdl__unlock(L);
        return COORDL_ERR_INVALID;
    }
    cdl__stream_pause(L);
    L->consumer.cur_epoch = epoch;
    L->consumer.cur_pos = batch * L->cfg.batch_size;
    L->consumer.cur_index = batch;
    L->S->cut_epoch = UINT64_MAX; /* whole epochs of the current size again */
    L->S->cut_pos = 0;
    cdl__peer_seek(L, epoch, batch);
    cdl__sampler_seeked(L);
    cdl__stream_restart(L, 0);
    cdl__unlock(L);
    return COORDL_OK;
}

/* An error of coordl_from_llmc / coordl_to_llmc: the detail goes to
 * coordl_errmsg(L). They take a const handle because they only read it;
 * the handle itself is never const (coordl_open allocates it). */
static coordl_status cdl__llmc_fail(const coordl *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (L) cdl__vformat(((coordl *)(uintptr_t)L)->errmsg, sizeof L->errmsg, fmt, ap);
    va_end(ap);
    return COORDL_ERR_INVALID;
}

coordl_status coordl_from_llmc(const coordl *L, uint64_t epoch, uint64_t shard_idx, uint64_t sample_idx,
                               uint64_t *out_epoch, uint64_t *out_batch) {
    if (!L) return COORDL_ERR_INVALID;
    if (!L->sampler.llmc)
        return cdl__llmc_fail(L, "coordl_from_llmc: llm.c positions need token_order = COORDL_TOKENS_LLMC");
    if (!out_epoch || !out_batch) return cdl__llmc_fail(L, "coordl_from_llmc: out_epoch and out_batch must not be NULL");
    if (shard_idx >= L->index.nshards)
        return cdl__llmc_fail(L, "coordl_from_llmc: shard_idx %llu is not below the %zu shards",
                              (unsigned long long)shard_idx, L->index.nshards);
    cdl__llmc *M = L->sampler.llmc;
    pthread_mutex_lock(&M->mu);
    const cdl__llmc_epoch *e = cdl__llmc_table(L, epoch);
    const uint64_t first = e->prefix[shard_idx], count = e->prefix[shard_idx + 1] - first;
    pthread_mutex_unlock(&M->mu);
    if (sample_idx > count)
        return cdl__llmc_fail(L, "coordl_from_llmc: sample_idx %llu is above the %llu samples at shard position "
                              "%llu of epoch %llu (is epoch the one the position belongs to, that of the last "
                              "batch taken: (k - 1) / coordl_batches_per_epoch after k batches?)",
                              (unsigned long long)sample_idx, (unsigned long long)count,
                              (unsigned long long)shard_idx, (unsigned long long)epoch);
    const uint64_t batch = first + sample_idx;
    *out_epoch = batch < M->total ? epoch : epoch + 1;
    *out_batch = batch < M->total ? batch : 0;
    return COORDL_OK;
}

coordl_status coordl_to_llmc(const coordl *L, uint64_t epoch, uint64_t batch, uint64_t *shard_idx,
                             uint64_t *sample_idx) {
    if (!L) return COORDL_ERR_INVALID;
    if (!L->sampler.llmc)
        return cdl__llmc_fail(L, "coordl_to_llmc: llm.c positions need token_order = COORDL_TOKENS_LLMC");
    if (!shard_idx || !sample_idx) return cdl__llmc_fail(L, "coordl_to_llmc: shard_idx and sample_idx must not be NULL");
    if (batch >= L->sampler.llmc->total)
        return cdl__llmc_fail(L, "coordl_to_llmc: batch %llu is not below coordl_batches_per_epoch (%llu)",
                              (unsigned long long)batch, (unsigned long long)L->sampler.llmc->total);
    uint32_t shard;
    cdl__llmc_locate(L, epoch, batch, shard_idx, sample_idx, &shard);
    return COORDL_OK;
}

/* coordl_set's checks: the new (w, h, B) for parameter p, or an error. */
static coordl_status cdl__set_sizes(coordl *L, coordl_param p, int64_t value, uint32_t *w, uint32_t *h, uint32_t *B) {
    const int image = cdl__pipeline_is_image(L->cfg.pipeline);
    switch (p) {
    case COORDL_PARAM_OUT_W:
    case COORDL_PARAM_OUT_H:
    case COORDL_PARAM_OUT_SIZE:
        if (!image || value < 1 || value > 65535) {
            snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: %s %lld is out of range (1..65535, image "
                     "pipelines only)", p == COORDL_PARAM_OUT_W ? "out_w" : p == COORDL_PARAM_OUT_H ? "out_h"
                     : "out size", (long long)value);
            return COORDL_ERR_INVALID;
        }
        if (p != COORDL_PARAM_OUT_H) *w = (uint32_t)value;
        if (p != COORDL_PARAM_OUT_W) *h = (uint32_t)value;
        if ((uint64_t)*w * *h > (1u << 26)) {
            snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: output size %ux%u is too large", *w, *h);
            return COORDL_ERR_INVALID;
        }
        return COORDL_OK;
    case COORDL_PARAM_BATCH_SIZE:
        if (L->sampler.llmc) {
            snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: llm.c's token order cuts every shard into "
                     "samples of world x batch_size windows at open; the batch size cannot change");
            return COORDL_ERR_INVALID;
        }
        if (value < 1 || value > UINT32_MAX || (L->cfg.drop_last && (uint64_t)value > L->sampler.share)) {
            snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: batch_size %lld is out of range (1..%llu)",
                     (long long)value, (unsigned long long)(L->cfg.drop_last ? L->sampler.share : UINT32_MAX));
            return COORDL_ERR_INVALID;
        }
        *B = (uint32_t)value;
        return COORDL_OK;
    default:
        snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: unknown parameter %d", (int)p);
        return COORDL_ERR_INVALID;
    }
}

/* Grows the ring for B rows of row_bytes (paused, nothing held): through
 * the ring allocator, falling back to the old size when the new one cannot
 * be mapped; the handle is broken only when not even that maps again. */
static coordl_status cdl__set_grow_ring(coordl *L, uint32_t B, size_t row_bytes) {
    const size_t old_cap = L->geom.slot_data_cap;
    const uint32_t old_rows = L->geom.slot_rows_cap;
    const uint32_t rows = B > old_rows ? B : old_rows;
    if (row_bytes > SIZE_MAX / rows) {
        snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: %u rows of %zu bytes do not fit this platform", rows, row_bytes);
        return COORDL_ERR_INVALID;
    }
    const size_t cap = (size_t)rows * row_bytes > old_cap ? (size_t)rows * row_bytes : old_cap;
    if (cdl__ring_alloc(L, rows, cap) == COORDL_OK) return COORDL_OK;
    snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: %.400s", cdl__open_errmsg);
    if (cdl__ring_alloc(L, old_rows, old_cap) != COORDL_OK) L->S->broken = 1;
    return COORDL_ERR_NOMEM;
}

coordl_status coordl_set(coordl *L, coordl_param p, int64_t value) {
    if (!L) return COORDL_ERR_INVALID;
    if (L->cfg.group) {
        snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: a coordinated group shares one stream; set the sizes "
                 "at open");
        return COORDL_ERR_UNSUPPORTED;
    }
    uint32_t w = L->cfg.out_w, h = L->cfg.out_h, B = L->cfg.batch_size;
    coordl_status rc = cdl__set_sizes(L, p, value, &w, &h, &B);
    if (rc != COORDL_OK) return rc;
    const size_t row_bytes = cdl__row_bytes_at(L, w, h);
    const int grow = B > L->geom.slot_rows_cap || (size_t)B * row_bytes > L->geom.slot_data_cap;
    cdl__lock(L);
    if (grow && L->consumer.held > 0) {
        snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: %ux%u x %u rows needs a bigger ring while %u "
                 "batch(es) are held; release them first, or set max_out_w/max_out_h/max_batch_size at "
                 "open", w, h, B, L->consumer.held);
        cdl__unlock(L);
        return COORDL_ERR_INVALID;
    }
    cdl__stream_pause(L);
    const uint32_t old_B = L->cfg.batch_size;
    if (grow) rc = cdl__set_grow_ring(L, B, row_bytes);
    if (rc == COORDL_OK) {
        L->cfg.out_w = w;
        L->cfg.out_h = h;
        if (B != L->cfg.batch_size) {
            L->S->cut_epoch = L->consumer.cur_epoch;
            L->S->cut_pos = L->consumer.cur_pos;
        }
        L->cfg.batch_size = B;
        L->geom.row_bytes = row_bytes;
        L->sampler.bpe = cdl__batches_for(L, B);
    }
    /* a broken handle stays paused and every later coordl_next reports it;
     * a new output size alone leaves every position's item as it was, so
     * what was read ahead stays */
    if (!L->S->broken) cdl__stream_restart(L, L->cfg.batch_size == old_B);
    cdl__unlock(L);
    return rc;
}

/* Queries ("any thread") read what workers and coordl_set write under the
 * stream's lock, so they take it too. */
CDL_PRIVATE void cdl__get_stats(const coordl *L, coordl_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!L) return;
    coordl *M = (coordl *)L; /* the mutex is the only thing touched */
    cdl__lock(M);
    *out = L->stats.st;
    out->stall_ns += atomic_load(&M->consumer.stall_tail_ns); /* the consumer's last call, not yet moved in */
    out->group_members = (uint32_t)__builtin_popcount(atomic_load(&M->S->live_mask));
    cdl__unlock(M);
    if (cdl__cache_minio(L)) {
        out->cache_bytes_used = atomic_load(&M->S->cache_used);
        out->cache_items = atomic_load(&M->S->cache_items);
        out->cache_item_bytes = atomic_load(&M->S->cache_src_bytes);
        out->jpeg_rewritten_items = atomic_load(&M->S->cache_rst_items);
    } else if (L->cache.lru) {
        pthread_mutex_lock(&L->cache.lru->mu);
        out->cache_bytes_used = out->cache_item_bytes = L->cache.lru->bytes_used;
        out->cache_items = L->cache.lru->items;
        pthread_mutex_unlock(&L->cache.lru->mu);
    }
    out->items_prepared = out->items;
    out->boxes_dropped = L->index.boxes.dropped; /* read-only after open */
    out->bad_labels = L->index.boxes.bad_items;
    out->sampler_bytes = cdl__sampler_bytes(L); /* fixed at open */
    if (L->index.lazy) { /* a lazy index's: once every shard is counted (the first epoch read) */
        uint64_t items, bytes, counted;
        int exact;
        if (cdl__lazy_census(L, 0, &items, &bytes, &counted, &exact) == COORDL_OK && exact) out->dataset_bytes = bytes;
    }
    if (L->pool.ra) {
        pthread_mutex_lock(&L->pool.ra->mu);
        out->readahead_reads = L->pool.ra->reads;
        out->readahead_read_ns = L->pool.ra->read_ns;
        out->readahead_skips = L->pool.ra->skips;
        out->readahead_io_threads = (uint32_t)L->pool.ra->nthreads;
        out->readahead_max_in_flight = L->pool.ra->max_reading;
        if (L->pool.ra->max_user_reads > out->readahead_max_in_flight) /* cfg.io_async */
            out->readahead_max_in_flight = L->pool.ra->max_user_reads;
        out->readahead_uring = L->pool.ra->uring != NULL;
        out->readahead_late_reads = L->pool.ra->user_timeouts > UINT32_MAX ? UINT32_MAX
                                                                            : (uint32_t)L->pool.ra->user_timeouts;
        cdl__uring_counters uc;
        cdl__uring_counters_get(L->pool.ra->uring, &uc);
        out->readahead_ring_reads = uc.reads;
        if (uc.max_in_flight > out->readahead_max_in_flight) out->readahead_max_in_flight = uc.max_in_flight;
        pthread_mutex_unlock(&L->pool.ra->mu);
    }
    cdl__remote_counters rc;
    cdl__remote_counters_get(L, &rc);
    out->remote_requests = rc.requests;
    out->remote_retries = rc.retries;
    out->remote_bytes = rc.bytes;
    out->remote_max_in_flight = rc.max_in_flight;
    if (out->stall_ns + out->compute_ns) out->stall_fraction = (double)out->stall_ns / (double)(out->stall_ns + out->compute_ns);
    if (out->read_storage_ns) out->storage_mb_per_s = out->storage_bytes / 1e6 / (out->read_storage_ns / 1e9);
    if (out->items) {
        out->bytes_per_item = (double)(out->cache_hit_bytes + out->storage_bytes) / (double)out->items;
        out->prep_us_per_item = (out->read_ns + out->decode_ns + out->augment_ns) / 1e3 / (double)out->items;
    }
}

CDL_PRIVATE coordl_status cdl__get_epoch_stats(const coordl *L, uint64_t epoch, coordl_epoch_stats *out) {
    if (!L || !out) return COORDL_ERR_INVALID;
    coordl *M = (coordl *)L;
    coordl_status rc = COORDL_ERR_INVALID;
    cdl__lock(M);
    const cdl__epoch_counters *e = &L->stats.epochs[epoch % CDL_EPOCH_STATS_KEPT];
    if (e->used && e->epoch == epoch) {
        *out = e->s;
        rc = COORDL_OK;
    }
    cdl__unlock(M);
    if (rc == COORDL_OK && out->stall_ns + out->compute_ns)
        out->stall_fraction = (double)out->stall_ns / (double)(out->stall_ns + out->compute_ns);
    return rc;
}

/* The settings L runs with: the config as open resolved it, and as
 * coordl_set changed it since (under the lock, like the stats). */
CDL_PRIVATE void cdl__get_config(const coordl *L, coordl_config *out) {
    coordl *M = (coordl *)L; /* the mutex is the only thing touched */
    cdl__lock(M);
    *out = L->cfg;
    cdl__unlock(M);
    out->threads = L->pool.nworkers;
    out->prefetch_batches = L->ring.nslots;
    /* the placement chosen, in the terms of the inputs: the PUs the workers
     * run on (reserve_cores already left out) and the memory's node (-1:
     * several, interleaved); the pci_bus_id it came from is resolved */
    out->cpuset = L->stats.st.placement_cpus;
    out->numa_node = L->stats.st.placement_node;
    out->pci_bus_id = NULL;
}

uint64_t coordl_num_items(const coordl *L) { return L ? cdl__sampler_num_items(L) : 0; }

uint64_t coordl_batches_per_epoch(const coordl *L) {
    if (!L) return 0;
    coordl *M = (coordl *)L;
    cdl__lock(M);
    const uint64_t bpe = L->sampler.bpe; /* coordl_set changes it */
    cdl__unlock(M);
    return bpe;
}

uint32_t coordl_num_classes(const coordl *L) { return L ? L->index.num_classes : 0; }

/* Whether id is an item of L (a lazy index's: of a shard counted yet). */
static int cdl__id_valid(const coordl *L, uint64_t id) {
    return L->index.lazy ? cdl__lazy_id_known(L, id) : id < L->index.num_items;
}

const char *coordl_item_path(const coordl *L, uint64_t id) {
    if (!L || !cdl__id_valid(L, id)) return NULL;
    return cdl__item_path(L, id);
}

int32_t coordl_item_label(const coordl *L, uint64_t id) {
    if (!L || !cdl__id_valid(L, id)) return -1;
    return cdl__item_label(L, id);
}

/* coordl_sample_transform's item bytes: the cache's, where they are cached
 * (an item deleted from storage since still answers), else storage's. A
 * MinIO hit is read in place through the API's reader record, held (with
 * L->api_reader.mu) until cdl__transform_done; nothing is admitted (a
 * diagnostic call must not change what the cache holds). */
static coordl_status cdl__transform_bytes(cdl__worker *W, uint64_t id, cdl__bytes *in) {
    coordl *L = W->L;
    if (cdl__cache_minio(L)) {
        uint32_t len;
        pthread_mutex_lock(&L->api_reader.mu);
        _Atomic uint32_t *reader = cdl__cache_reader(L, CDL_READER_API);
        const cdl__u8 *p = cdl__cache_acquire_minio(L, reader, id, &len, NULL, NULL);
        if (p) {
            W->reader = reader;
            W->held = id + 1;
            in->p = p;
            in->len = len;
            return COORDL_OK;
        }
        pthread_mutex_unlock(&L->api_reader.mu);
    } else if (L->cache.lru) {
        uint32_t len;
        const size_t need = cdl__item_bytes(L, id) + 16;
        if (cdl__reserve(L, (void **)&W->readbuf, &W->readcap, need) &&
            cdl__cache_lookup_lru(L, id, W->readbuf, W->readcap, &len)) {
            in->p = W->readbuf;
            in->len = len;
            return COORDL_OK;
        }
    }
    return cdl__read_file(W, id, in);
}

static void cdl__transform_done(cdl__worker *W) {
    if (W->held) {
        cdl__cache_release_minio(W->reader);
        pthread_mutex_unlock(&W->L->api_reader.mu);
        W->held = 0;
    }
    cdl__free(W->L, W->readbuf);
}

/* The transform of item id in epoch from the item's header bytes in. */
static coordl_status cdl__transform_of(cdl__worker *W, uint64_t epoch, uint64_t id, const cdl__bytes *in,
                                       coordl_transform *out) {
    coordl *L = W->L;
    if (L->cfg.pipeline == COORDL_PIPE_AUDIO) {
        /* audio: the crop window in (resampled) samples, from the header */
        cdl__wav wav;
        uint64_t n = 0;
        coordl_status rc = cdl__wav_open(W, cdl__item_name(L, id, W->item_name, sizeof W->item_name), in, &wav, &n);
        if (rc != COORDL_OK) return rc;
        out->image_w = (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n);
        out->image_h = 1;
        out->x = (double)cdl__audio_offset(L, epoch, id, n);
        out->w = L->cfg.audio_samples;
        out->h = 1;
        return COORDL_OK;
    }
    if (L->cfg.pipeline == COORDL_PIPE_TOKENS) {
        out->image_w = L->cfg.seq_len + 1;
        out->image_h = 1;
        out->w = L->cfg.seq_len + 1;
        out->h = 1;
        return COORDL_OK;
    }
    int iw = 0, ih = 0;
    coordl_status rc = cdl__image_size(W, cdl__item_name(L, id, W->item_name, sizeof W->item_name), in, &iw, &ih);
    if (rc != COORDL_OK) return rc;
    cdl__geom g;
    cdl__lock(L); /* the plan reads the output size coordl_set writes */
    cdl__plan(L, L->cfg.out_w, L->cfg.out_h, epoch, id, iw, ih, &g);
    cdl__unlock(L);
    out->image_w = (uint32_t)iw;
    out->image_h = (uint32_t)ih;
    out->x = g.x0; out->y = g.y0; out->w = g.sw; out->h = g.sh;
    if (g.darknet) { /* the window's footprint, centred where the row's centre reads */
        const double cx = g.out_w / 2.0, cy = g.out_h / 2.0;
        const double fw = g.out_w * sqrt(g.m[0] * g.m[0] + g.m[3] * g.m[3]);
        const double fh = g.out_h * sqrt(g.m[1] * g.m[1] + g.m[4] * g.m[4]);
        out->x = g.m[0] * cx + g.m[1] * cy + g.m[2] - fw / 2.0;
        out->y = g.m[3] * cx + g.m[4] * cy + g.m[5] - fh / 2.0;
        out->w = fw;
        out->h = fh;
    }
    out->flip = g.flip;
    out->angle = g.angle * 180.0 / 3.14159265358979;
    out->aspect = g.daspect;
    out->saturation = g.dsat;
    out->exposure = g.dexp;
    out->hue = g.dhue;
    return COORDL_OK;
}

/* Any thread: the item is read through the cache like a worker's (the
 * API's own reader record), and a failure's detail goes to L->errmsg
 * under the stream's lock (the consumer's calls write it under that lock). */
CDL_PRIVATE coordl_status cdl__sample_transform(coordl *L, uint64_t epoch, uint64_t id, coordl_transform *out) {
    if (!L) return COORDL_ERR_INVALID;
    if (!out || !cdl__id_valid(L, id)) {
        cdl__lock(L);
        if (!out) snprintf(L->errmsg, sizeof L->errmsg, "coordl_sample_transform: out must not be NULL");
        else snprintf(L->errmsg, sizeof L->errmsg, "coordl_sample_transform: item %llu is not below num_items "
                      "(%llu)", (unsigned long long)id, (unsigned long long)L->index.num_items);
        cdl__unlock(L);
        return COORDL_ERR_INVALID;
    }
    memset(out, 0, sizeof *out);
    /* A throwaway worker: this is a diagnostic call, not the hot path. */
    cdl__worker W;
    memset(&W, 0, sizeof W);
    W.L = L;
    cdl__bytes in = {NULL, 0};
    coordl_status rc = cdl__transform_bytes(&W, id, &in);
    if (rc == COORDL_OK) rc = cdl__transform_of(&W, epoch, id, &in, out);
    cdl__transform_done(&W);
    if (rc != COORDL_OK) {
        if (!W.err[0]) snprintf(W.err, sizeof W.err, "%.400s: %s", cdl__item_name(L, id, W.item_name, sizeof W.item_name),
                                      coordl_strerror(rc));
        cdl__lock(L);
        snprintf(L->errmsg, sizeof L->errmsg, "coordl_sample_transform: %.480s", W.err);
        cdl__unlock(L);
        memset(out, 0, sizeof *out);
    }
    return rc;
}


const char *coordl_errmsg(const coordl *L) { return L ? L->errmsg : cdl__open_errmsg; }

const char *coordl_strerror(coordl_status s) {
    switch (s) {
#define CDL_STATUS_CASE(name, value, text) case COORDL_##name: return text;
        COORDL_STATUS_MAP(CDL_STATUS_CASE)
#undef CDL_STATUS_CASE
    default: return "unknown status";
    }
}

void coordl_close(coordl *L) {
    if (!L) return;
    if (L->S) cdl__pool_stop(L);
#ifdef COORDL_MPI
    cdl__peer_close(L);
#endif
    cdl__remote_destroy(L); /* after the workers and the read-ahead: no reader is left */
    cdl__cache_destroy(L);
    cdl__ring_free(L); /* before the group is left: it knows which arrays are shared */
    if (L->member.shm_base) {
        cdl__group_leave(L);
    } else if (L->S) {
        pthread_mutex_destroy(&L->S->mu);
        pthread_cond_destroy(&L->S->work_cv.cv);
        pthread_cond_destroy(&L->S->ready_cv.cv);
        pthread_cond_destroy(&L->S->idle_cv.cv);
        cdl__free(L, L->S);
    }
    cdl__member_thread_stop(L); /* a group whose open failed before it was left */
    cdl__free(L, L->index.items);
    cdl__free(L, L->index.tar_items);
    cdl__free(L, L->index.tar_txt);
    cdl__free(L, L->index.boxes.box);
    cdl__free(L, L->index.boxes.first);
    cdl__free(L, L->index.boxes.bad);
    cdl__free(L, L->index.tar_shards);
    cdl__ix_release(L);
    cdl__lazy_free(L);
    cdl__llmc_free(L);
    cdl__window_free(L);
    cdl__free(L, L->index.shards);
    cdl__free(L, L->index.strings);
    cdl__free(L, L->conf.source_copy);
    cdl__free(L, L->conf.group_copy);
    cdl__free(L, L->conf.topology_copy);
    cdl__placement_free(L, &L->place);
    pthread_mutex_destroy(&L->api_reader.mu);
    coordl_allocator a = L->alloc;
    a.free_fn(a.user, L);
}

int coordl_libversion_number(void) { return COORDL_VERSION_NUMBER; }

const coordl_io *coordl_io_posix(void) { return &cdl__posix_io; }

