/* SPDX-License-Identifier: MIT */
/*
 * readahead.c - read-ahead in the known order.
 *
 * Owns:  L->pool.ra: the I/O threads, their arena and the window of entries
 *        they read ahead of the workers
 * Lock:  its own mutex (R->mu); lock order: the stream's lock, then this
 *        one; the I/O threads never take the stream's lock
 * Calls: status, placement, arena, remote, io, uring, index, source, sampler,
 *        cache, peers (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "readahead_state.h"
#include "readahead.h"
#include "status.h"
#include "placement.h"
#include "arena.h"
#include "worker_state.h"
#include "remote.h"
#include "io.h"
#include "uring.h"
#include "index.h"
#include "source.h"
#include "source_state.h"
#include "sampler.h"
#include "sampler_state.h"
#include "cache.h"
#include "peers.h"
#include "handle.h"

/* ---- read-ahead in the known order ----------------------------------------
 * The permutation of every epoch is known, so the items the workers will
 * claim next are known: a few I/O threads keep up to readahead_items of
 * them in flight ahead of the claims, in claim order, reading through the
 * reader into one arena (a byte ring bounded by readahead_bytes, allocated
 * at open: nothing per item). A worker that claims a row takes its entry:
 * the bytes are there (decoded in place), or in flight (it waits for that
 * read only), or were not read ahead (a cache hit, an item a peer serves,
 * one too large for the arena, a position the read-ahead had not reached):
 * then it reads as before. Entries and arena space are handed out in
 * position order and freed in that order once their rows are prepared.
 * A seek or coordl_set restarts it at the new position (a new generation:
 * reads still in flight finish into their own space and are dropped); a
 * coordl_set of the output size alone keeps what it has read (the items at
 * each position are the same).
 * Private loaders only: in a coordinated group the rows are claimed by
 * every member's workers, and each member reading ahead would read every
 * item k times. Lock order: the stream's lock, then this one; the I/O
 * threads never take the stream's lock. */

static int cdl__pos_before(uint64_t e1, uint64_t p1, uint64_t e2, uint64_t p2) {
    return e1 < e2 || (e1 == e2 && p1 < p2);
}

/* cdl__epoch_end on the snapshot taken at the last restart. */
static uint64_t cdl__ra_epoch_end(const cdl__readahead *R, uint64_t epoch) {
    uint64_t share = R->share;
    if (share == UINT64_MAX) { /* a lazy index: its end, once every shard is counted */
        const uint64_t n = cdl__sampler_num_items(R->L);
        if (n) share = n / (uint64_t)R->L->cfg.world;
    }
    return cdl__epoch_end_at(share, R->batch_size, R->drop_last, R->cut_epoch, R->cut_pos, epoch);
}

/* Frees the entries at the tail that are done with, and their bytes. */
static void cdl__ra_trim(cdl__readahead *R) {
    int freed = 0;
    while (R->tail < R->head) {
        cdl__ra_entry *x = &R->e[R->tail % R->depth];
        const int done = x->state == CDL_RA_TAKEN || (x->stale && x->state != CDL_RA_READING);
        if (!done) break;
        R->atail = x->end;
        x->state = CDL_RA_FREE;
        x->stale = 0;
        R->tail++;
        freed++;
    }
    if (R->tail == R->head) R->atail = R->ahead; /* nothing in use */
    /* The I/O threads waiting for room are woken once half the window is
     * free, entries and bytes, not per freed entry: they then refill half
     * the window in one go, and the worker or trainer thread that frees an
     * entry makes no system call and causes no context switch for the
     * other entries (issue 23: a wake per row cost a token batch a context
     * switch per row). Nothing waits on it meanwhile: a position not yet
     * read ahead is read by whoever claims it. */
    if (freed && R->room_waiters && R->head - R->tail <= R->depth / 2 && R->ahead - R->atail <= R->bytes / 2)
        pthread_cond_broadcast(&R->room_cv);
}

/* Whether item id will not come from storage: in the cache, or (MPI) on a
 * peer that serves it (once the map is known, rows claimed from then on
 * ask the peers, whatever the epoch). */
static int cdl__ra_not_from_storage(const coordl *L, uint64_t id) {
    /* an entry being rewritten (jpeg.c) is held too, its rewrite long
     * done by the time its row is claimed */
    if (cdl__cache_minio(L) && cdl__cache_holds(L, id)) return 1;
    if (L->cache.lru) {
        pthread_mutex_lock(&L->cache.lru->mu);
        const int held = L->cache.lru->data[id] != NULL;
        pthread_mutex_unlock(&L->cache.lru->mu);
        if (held) return 1;
    }
#ifdef COORDL_MPI
    if (L->peers.comm_set && __atomic_load_n(&L->peers.map_ready, __ATOMIC_ACQUIRE)) {
        const int owner = L->peers.owner[id];
        if (owner >= 0 && owner != L->cfg.rank) return 1;
    }
#endif
    return 0;
}

static void *cdl__ra_main(void *arg);

/* An asynchronous read ended (remote.c's event-loop thread): the entry is
 * done as a synchronous read's would be. */
static void cdl__ra_read_done(void *arg, coordl_status status, uint64_t got, const char *err) {
    cdl__ra_entry *x = arg;
    cdl__readahead *R = x->ra;
    pthread_mutex_lock(&R->mu);
    R->async_reads--;
    R->reads++;
    R->read_ns += cdl__now_ns() - x->t0;
    x->len = got;
    x->storage_bytes = got;
    x->status = status;
    if (status != COORDL_OK) snprintf(x->err, sizeof x->err, "%s: %s", cdl__item_path(R->L, x->id), err);
    x->state = status == COORDL_OK ? CDL_RA_DONE : CDL_RA_FAILED;
    pthread_cond_broadcast(&R->done_cv);
    if (x->stale) cdl__ra_trim(R);
    pthread_mutex_unlock(&R->mu);
}

/* A read through the caller's cfg.io_async ended (coordl_io_done_fn, on
 * the caller's thread): ended as any asynchronous read, under the lock,
 * checks included, so that a close that gave up on it (R->abandoned) is
 * seen before anything of the handle is touched. */
static void cdl__ra_user_done(void *token, int64_t result) {
    cdl__item_aread *a = token;
    cdl__ra_entry *x = a->arg;
    cdl__readahead *R = x->ra;
    pthread_mutex_lock(&R->mu);
    R->user_reads--;
    R->user_last_ns = cdl__now_ns(); /* coordl_close's bound runs from the last start or end */
    if (R->abandoned) { /* the handle is gone; R and the arena were left for this */
        pthread_mutex_unlock(&R->mu);
        return;
    }
    if (R->user_reads == 0 && R->stop) pthread_cond_broadcast(&R->room_cv); /* coordl_close waits */
    uint64_t got;
    char why[CDL_ERRMSG_MAX - 64];
    const coordl_status status = cdl__read_item_result(a, result, &got, why, sizeof why);
    R->async_reads--;
    R->reads++;
    R->read_ns += cdl__now_ns() - x->t0;
    x->len = got;
    x->storage_bytes = got;
    x->status = status;
    if (status != COORDL_OK) snprintf(x->err, sizeof x->err, "%s: %s", cdl__item_path(R->L, x->id), why);
    /* larger than indexed: its worker reads it through cfg.io */
    x->state = a->grew ? CDL_RA_SKIPPED : status == COORDL_OK ? CDL_RA_DONE : CDL_RA_FAILED;
    pthread_cond_broadcast(&R->done_cv);
    if (x->stale) cdl__ra_trim(R);
    pthread_mutex_unlock(&R->mu);
}

/* readahead_items is the number of reads in flight (issue 24): with a
 * synchronous reader that takes one thread per read, so the I/O threads
 * grow, one at a time, while every one of them is inside the reader and
 * the window has room, up to readahead_threads (by default the depth).
 * On a fast store reads rarely overlap and the pool stays small; a store
 * with 10 ms reads grows it to the depth (remote items take no thread:
 * cdl__read_item_async). Small stacks: a thread
 * only calls the reader. Under R->mu; 0 when a thread could not start
 * (the others go on: fewer reads in flight, nothing lost). */
enum { CDL_RA_STACK_BYTES = 256 * 1024 };

static int cdl__ra_grow(cdl__readahead *R) {
    if (R->stop || R->nthreads >= R->max_threads) return 0;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return 0;
    size_t stack = CDL_RA_STACK_BYTES;
    if (stack < (size_t)PTHREAD_STACK_MIN) stack = (size_t)PTHREAD_STACK_MIN;
    (void)pthread_attr_setstacksize(&attr, stack);
    const int e = pthread_create(&R->threads[R->nthreads], &attr, cdl__ra_main, R);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        R->max_threads = R->nthreads; /* the system refuses more: stop trying */
        return 0;
    }
    R->nthreads++;
    return 1;
}

static void *cdl__ra_main(void *arg) {
    cdl__readahead *R = arg;
    coordl *L = R->L;
    cdl__perm perm;
    cdl__kept_file kept; /* this thread's open shard */
    memset(&kept, 0, sizeof kept);
    uint64_t perm_epoch = UINT64_MAX;
    char name[16];
    snprintf(name, sizeof name, "coordl-io");
    pthread_setname_np(pthread_self(), name);
    pthread_mutex_lock(&R->mu);
    while (!R->stop) {
        if (R->paused || R->head - R->tail >= R->depth) {
            R->room_waiters++;
            pthread_cond_wait(&R->room_cv, &R->mu);
            R->room_waiters--;
            continue;
        }
        /* the next position, never one a worker has already claimed */
        if (cdl__pos_before(R->next_epoch, R->next_pos, R->front_epoch, R->front_pos)) {
            R->next_epoch = R->front_epoch;
            R->next_pos = R->front_pos;
        }
        uint64_t epoch = R->next_epoch, pos = R->next_pos;
        if (pos >= cdl__ra_epoch_end(R, epoch)) {
            epoch++;
            pos = 0;
        }
        /* partitioned cache: past the admission epoch a peer may serve the
         * item; wait for the map of who holds what before reading any of it
         * (the claims wait for it there too) */
        if (cdl__peer_map_pending(L, epoch)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 5000000L;
            if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
            pthread_cond_timedwait(&R->room_cv, &R->mu, &ts);
            continue;
        }
        if (epoch != perm_epoch) {
            perm = cdl__perm_for(L, epoch);
            perm_epoch = epoch;
        }
        if (!cdl__sampler_known(L, epoch, pos, 0)) {
            /* a lazy index: the shards of the window ahead are scanned
             * here, without the lock the workers take their entries under */
            pthread_mutex_unlock(&R->mu);
            cdl__sampler_known(L, epoch, pos, 1);
            pthread_mutex_lock(&R->mu);
            continue;
        }
        const uint64_t id = cdl__item_at(L, &perm, pos);
        if (id == CDL_NO_ITEM) continue; /* past a lazy epoch's end, now known */
        /* the cache first: a lazily indexed item's size needs its shard's
         * block, which a cached shard no longer keeps */
        const int cached = cdl__ra_not_from_storage(L, id);
        const uint64_t want = cached ? 0 : cdl__item_bytes(L, id), need = (want + 16 + 63) / 64 * 64;
        const int skip = cached || want == 0 || want > L->cfg.max_item_bytes || need > R->bytes;
        /* arena space, contiguous: a span that would cross the end starts
         * over at the beginning (the rest of the lap is left unused) */
        if (R->tail == R->head) /* empty: start a fresh lap, so any item that fits the arena fits now */
            R->ahead = R->atail = (R->ahead + R->bytes - 1) / R->bytes * R->bytes;
        uint64_t start = R->ahead, end = R->ahead;
        if (!skip) {
            if (start % R->bytes + need > R->bytes) start += R->bytes - start % R->bytes;
            end = start + need;
            if (end - R->atail > R->bytes) { /* full: wait for the workers to free some */
                R->room_waiters++;
                pthread_cond_wait(&R->room_cv, &R->mu);
                R->room_waiters--;
                continue;
            }
        }
        R->next_epoch = epoch;
        R->next_pos = pos + 1;
        cdl__ra_entry *x = &R->e[R->head++ % R->depth];
        x->gen = R->gen;
        x->stale = 0;
        x->epoch = epoch;
        x->pos = pos;
        x->id = id;
        x->start = start;
        x->end = end;
        x->len = x->storage_bytes = 0;
        x->status = COORDL_OK;
        x->err[0] = '\0';
        R->ahead = end;
        if (skip) {
            x->state = CDL_RA_SKIPPED;
            R->skips++;
            continue;
        }
        x->state = CDL_RA_READING;
        x->ra = R;
        x->t0 = cdl__now_ns();
        x->user_read = 0;
        /* a remote item: a transfer on the event loop, not a thread; this
         * thread goes on to the next position (depth 512 = 512 transfers) */
        if (cdl__read_item_async(L, id, R->base + start % R->bytes, (size_t)(end - start), R, cdl__ra_read_done, x)) {
            R->async_reads++;
            continue;
        }
        /* a caller's asynchronous reader: started here, and this thread
         * goes on; outside the lock, since its done may run before its
         * read returns (and takes the lock) */
        if (L->cfg.io_async) {
            x->user_read = 1;
            R->async_reads++;
            R->user_reads++;
            R->user_last_ns = cdl__now_ns();
            pthread_mutex_unlock(&R->mu);
            /* one caller of read at a time, as coordl.h promises, though a
             * declined read's blocking fallback may have grown the pool */
            pthread_mutex_lock(&R->submit_mu);
            const int sent = cdl__read_item_submit(L, &x->aread, id, R->base + start % R->bytes, (size_t)(end - start),
                                                   cdl__ra_user_done, x);
            pthread_mutex_unlock(&R->submit_mu);
            pthread_mutex_lock(&R->mu);
            if (sent) {
                /* at most: some may be done already */
                if (R->user_reads > R->max_user_reads) R->max_user_reads = R->user_reads;
                continue;
            }
            R->async_reads--; /* declined: read through cfg.io below */
            R->user_reads--;
            x->user_read = 0;
        }
        if (++R->reading == R->nthreads && R->head - R->tail < R->depth) (void)cdl__ra_grow(R);
        if ((uint64_t)R->reading > R->max_reading) R->max_reading = (uint64_t)R->reading;
        if (R->uring) R->async_reads++; /* before the ring can end it (cdl__ra_read_done) */
        pthread_mutex_unlock(&R->mu);
        cdl__u8 *dst = R->base + start % R->bytes;
        size_t cap = (size_t)(end - start);
        uint64_t len = 0, sbytes = 0;
        int too_big = 0;
        const uint64_t t0 = cdl__now_ns();
        coordl_status rc = COORDL_OK;
        /* a local file with the built-in reader: what the page cache lacks
         * goes to the ring, and this thread goes on (docs/storage.md) */
        const int how = cdl__read_item_start(L, R->uring, &x->aread, id, dst, cap, &rc, &len, &sbytes, x->err,
                                             sizeof x->err, cdl__ra_read_done, x);
        if (how == 0)
            rc = cdl__read_item(L, &kept, id, &dst, &cap, 0, &too_big, &len, &sbytes, x->err, sizeof x->err);
        const uint64_t t1 = cdl__now_ns();
        pthread_mutex_lock(&R->mu);
        R->reading--;
        if (how == 2) continue; /* the ring's now: cdl__ra_read_done ends it */
        if (R->uring) R->async_reads--;
#ifdef COORDL_DEBUG
        /* the entry stays this read's until the read ends: nobody frees or
         * reuses an entry (or its bytes) while its read is in flight */
        cdl__debug_assert(L, x->state == CDL_RA_READING && x->start == start && x->id == id,
                          "read-ahead: an entry was freed or reused while its read was in flight");
#endif
        R->reads++;
        R->read_ns += t1 - t0;
        x->len = len;
        x->storage_bytes = sbytes;
        x->status = rc;
        /* an item larger now than indexed: its worker reads it */
        x->state = too_big ? CDL_RA_SKIPPED : rc == COORDL_OK ? CDL_RA_DONE : CDL_RA_FAILED;
        pthread_cond_broadcast(&R->done_cv);
        if (x->stale) cdl__ra_trim(R);
    }
    pthread_mutex_unlock(&R->mu);
    cdl__kept_free(L, &kept);
    return NULL;
}

/* Stops issuing new reads until the restart (a seek or set is under way;
 * reads in flight finish). Under the stream's lock. */
CDL_PRIVATE void cdl__ra_pause(coordl *L) {
    cdl__readahead *R = L->pool.ra;
    if (!R) return;
    pthread_mutex_lock(&R->mu);
    R->paused = 1;
    pthread_mutex_unlock(&R->mu);
}

/* Restarts at the stream's claim position, with the stream's geometry:
 * entries not taken are dropped (those still being read when their read
 * ends). With keep (the positions ahead hold the same items as before: an
 * output-size change), and the snapshot the epoch ends come from
 * unchanged, what was read ahead of the claim position stays: a Darknet
 * resize every 10 batches would otherwise read up to readahead_items items
 * again each time. Called under the stream's lock, when no row is in
 * flight. */
CDL_PRIVATE void cdl__ra_restart(coordl *L, int keep) {
    cdl__readahead *R = L->pool.ra;
    if (!R) return;
    pthread_mutex_lock(&R->mu);
    keep = keep && R->batch_size == L->cfg.batch_size && R->drop_last == L->cfg.drop_last &&
           R->share == L->sampler.share && R->cut_epoch == L->S->cut_epoch && R->cut_pos == L->S->cut_pos;
    R->paused = 0;
    if (keep) {
        /* the claims go back to the consumer's position: entries there and
         * beyond are taken as they are claimed again; any before it could
         * never be */
        for (uint64_t i = R->tail; i < R->head; i++) {
            cdl__ra_entry *x = &R->e[i % R->depth];
            if (cdl__pos_before(x->epoch, x->pos, L->S->claim_epoch, L->S->claim_pos)) x->stale = 1;
        }
        cdl__ra_trim(R);
        R->front_epoch = L->S->claim_epoch; /* the next read stays after the kept entries */
        R->front_pos = L->S->claim_pos;
        pthread_cond_broadcast(&R->room_cv);
        pthread_mutex_unlock(&R->mu);
        return;
    }
    R->gen++;
    for (uint64_t i = R->tail; i < R->head; i++) R->e[i % R->depth].stale = 1;
    cdl__ra_trim(R);
    R->next_epoch = R->front_epoch = L->S->claim_epoch;
    R->next_pos = R->front_pos = L->S->claim_pos;
    R->batch_size = L->cfg.batch_size;
    R->drop_last = L->cfg.drop_last;
    R->share = L->sampler.share;
    R->cut_epoch = L->S->cut_epoch;
    R->cut_pos = L->S->cut_pos;
    pthread_cond_broadcast(&R->room_cv);
    pthread_mutex_unlock(&R->mu);
}

/* The entry read ahead for the row at (epoch, pos) holding item id, or
 * NULL; marks every position up to it as claimed. */
CDL_PRIVATE cdl__ra_entry *cdl__ra_take(coordl *L, uint64_t epoch, uint64_t pos, uint64_t id) {
    cdl__readahead *R = L->pool.ra;
    cdl__ra_entry *found = NULL;
    if (!R) return NULL;
    pthread_mutex_lock(&R->mu);
    if (cdl__pos_before(R->front_epoch, R->front_pos, epoch, pos + 1)) {
        R->front_epoch = epoch;
        R->front_pos = pos + 1;
    }
    for (uint64_t i = R->tail; i < R->head && !found; i++) {
        cdl__ra_entry *x = &R->e[i % R->depth];
        if (!x->stale && x->gen == R->gen && x->epoch == epoch && x->pos == pos && x->id == id &&
            x->state != CDL_RA_TAKEN)
            found = x;
    }
    if (found && found->state == CDL_RA_SKIPPED) { /* nothing to wait for */
        found->state = CDL_RA_TAKEN;
        cdl__ra_trim(R);
        found = NULL;
    }
    pthread_mutex_unlock(&R->mu);
    return found;
}

/* Waits for a taken entry's read; its bytes or its error. Returns 1 with
 * *out set, 0 when the worker must read the item itself (the read-ahead
 * skipped it after all), or -1 with the read's status in *rc. */
CDL_PRIVATE int cdl__ra_wait(cdl__worker *W, cdl__ra_entry *x, cdl__bytes *out, coordl_status *rc) {
    cdl__readahead *R = W->L->pool.ra;
    const uint64_t t0 = cdl__now_ns();
    pthread_mutex_lock(&R->mu);
    const int waited = x->state == CDL_RA_READING;
    int state = CDL_RA_READING, closing = 0;
    while ((state = x->state) == CDL_RA_READING) {
        if (!x->user_read) { /* ours (a thread, the ring, the event loop): bounded, and ended at close */
            pthread_cond_wait(&R->done_cv, &R->mu);
            continue;
        }
        if ((closing = R->closing) != 0) break;
        /* a caller's io_async read: its done is the caller's to call, so
         * the wait is bounded (io_timeout_ms from its start); past it the
         * row is read through cfg.io, and the entry, still in flight, is
         * freed when the done comes (cdl__ra_release) */
        const uint64_t bound = (uint64_t)(W->L->cfg.io_timeout_ms ? W->L->cfg.io_timeout_ms : 30000) * 1000000u,
                       now = cdl__now_ns();
        if (now - x->t0 >= bound) {
            if (R->user_timeouts++ == 0) /* the first: a stuck reader is the caller's to know of */
                cdl__log(W->L, COORDL_LOG_WARN, "%s: its read through io_async had no done within io_timeout_ms (%u "
                         "ms); read through io instead (said once per handle)", cdl__item_path(W->L, x->id),
                         W->L->cfg.io_timeout_ms ? W->L->cfg.io_timeout_ms : 30000u);
            break;
        }
        const uint64_t left = x->t0 + bound - now;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t)(left / 1000000000u);
        ts.tv_nsec += (long)(left % 1000000000u);
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&R->done_cv, &R->mu, &ts);
    }
    pthread_mutex_unlock(&R->mu);
    if (waited) W->row.readahead_wait_ns += cdl__now_ns() - t0;
    if (state == CDL_RA_READING) {
        if (!closing) return 0; /* timed out: read it through cfg.io */
        snprintf(W->err, sizeof W->err, "%s: the handle is closing while its read is in flight",
                 cdl__item_path(W->L, x->id));
        *rc = COORDL_ERR_IO;
        return -1;
    }
    if (state == CDL_RA_SKIPPED) return 0;
    W->row.storage_bytes += x->storage_bytes;
    if (state == CDL_RA_FAILED) {
        snprintf(W->err, sizeof W->err, "%s", x->err);
        *rc = x->status;
        return -1;
    }
    W->row.readahead_hits++;
    out->p = R->base + x->start % R->bytes;
    out->len = (size_t)x->len;
    return 1;
}

/* The row is prepared: its entry's bytes may be reused. A read still in
 * flight (the row came from the cache or a peer after all) is left to
 * finish into its own bytes: the entry is freed when it ends. */
CDL_PRIVATE void cdl__ra_release(coordl *L, cdl__ra_entry *x) {
    cdl__readahead *R = L->pool.ra;
    if (!R || !x) return;
    pthread_mutex_lock(&R->mu);
    if (x->state == CDL_RA_READING) x->stale = 1;
    else x->state = CDL_RA_TAKEN;
    cdl__ra_trim(R);
    pthread_mutex_unlock(&R->mu);
}

/* Sizes and starts the read-ahead (after the ring, before the workers). */
CDL_PRIVATE coordl_status cdl__ra_start(coordl *L) {
    const uint32_t depth = L->cfg.readahead_items;
    if (depth == 0 || L->cfg.group) return COORDL_OK;
    cdl__readahead *R = cdl__calloc(L, 1, sizeof *R);
    if (!R) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the read-ahead");
    L->pool.ra = R;
    R->L = L;
    R->depth = depth;
    R->e = cdl__calloc(L, depth, sizeof *R->e);
    if (!R->e) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for %u read-ahead entries; lower readahead_items", depth);
    R->bytes = (size_t)L->cfg.readahead_bytes; /* the ring: exactly the bound */
    R->map_bytes = cdl__round_up(R->bytes, cdl__page_size());
    void *p = mmap(NULL, R->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot map %zu bytes for the read-ahead: %s; lower "
                              "readahead_bytes (or readahead_items; 0 = off)", R->map_bytes, strerror(errno));
    R->base = p;
    /* its first lap touches every page: in 4 KiB pages that was most of a
     * cold epoch's loss at depth 512 (64 MiB, ~0.25 s of an I/O thread) */
    cdl__arena_advise_huge(p, R->map_bytes);
    cdl__placement_bind_memory(L, p, R->map_bytes);
    if (pthread_mutex_init(&R->mu, NULL) != 0 || pthread_mutex_init(&R->submit_mu, NULL) != 0 ||
        pthread_cond_init(&R->room_cv, NULL) != 0 || pthread_cond_init(&R->done_cv, NULL) != 0)
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot initialise the read-ahead's lock");
    R->cut_epoch = UINT64_MAX;
    R->batch_size = L->cfg.batch_size;
    R->drop_last = L->cfg.drop_last;
    R->share = L->sampler.share;
    R->cut_epoch = L->S->cut_epoch;
    R->cut_pos = L->S->cut_pos;
    R->next_epoch = R->front_epoch = L->consumer.cur_epoch;
    R->next_pos = R->front_pos = L->consumer.cur_pos;
    R->max_threads = (int)L->cfg.readahead_threads;
    /* local files through the built-in reader: reads in flight in one
     * io_uring, so one I/O thread (it opens each file and submits); token
     * windows keep their shard open per thread, and a caller's reader is
     * a blocking call: those keep the threads */
    if (L->io == &cdl__posix_io && !L->index.shards) R->uring = cdl__uring_start(L, depth);
    if (R->uring) R->max_threads = 1;
    R->threads = cdl__calloc(L, (size_t)R->max_threads, sizeof *R->threads);
    if (!R->threads) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the read-ahead threads; lower readahead_threads");
    pthread_mutex_lock(&R->mu);
    const int started = cdl__ra_grow(R); /* the first; the rest as reads wait */
    pthread_mutex_unlock(&R->mu);
    if (!started) return cdl__open_fail(COORDL_ERR_NOMEM, "cannot start a read-ahead thread; lower readahead_threads");
    return COORDL_OK;
}

/* The handle is closing: workers waiting for a read stop waiting (the
 * read may be a caller's that never ends: io_async). Before the workers
 * are joined. */
CDL_PRIVATE void cdl__ra_closing(coordl *L) {
    cdl__readahead *R = L->pool.ra;
    if (!R) return;
    pthread_mutex_lock(&R->mu);
    R->closing = 1;
    pthread_cond_broadcast(&R->done_cv);
    pthread_mutex_unlock(&R->mu);
}

/* Whether coordl_close has begun (a row that failed for it is not
 * substituted). */
CDL_PRIVATE int cdl__ra_is_closing(coordl *L) {
    cdl__readahead *R = L->pool.ra;
    if (!R) return 0;
    pthread_mutex_lock(&R->mu);
    const int closing = R->closing;
    pthread_mutex_unlock(&R->mu);
    return closing;
}

/* Waits for the done of every read a caller's coordl_io_async has in
 * flight (their bytes land in the arena): 1 when none is left; 0 when
 * none ended for io_timeout_ms (logged: the caller's reader is stuck). */
static int cdl__ra_user_reads_end(cdl__readahead *R) {
    coordl *L = R->L;
    const uint64_t bound_ns = (uint64_t)(L->cfg.io_timeout_ms ? L->cfg.io_timeout_ms : 30000) * 1000000u;
    pthread_mutex_lock(&R->mu);
    const uint64_t began = cdl__now_ns();
    if (R->user_last_ns < began) R->user_last_ns = began; /* never less than the bound from now */
    while (R->user_reads) {
        const uint64_t now = cdl__now_ns(), since = R->user_last_ns;
        if (now - since >= bound_ns) {
            const uint64_t left = R->user_reads;
            R->abandoned = 1; /* a late done touches nothing but R */
            pthread_mutex_unlock(&R->mu);
            cdl__log(L, COORDL_LOG_ERROR, "coordl_close: %llu read(s) started through io_async had no done within "
                     "io_timeout_ms (%u ms); their buffers (the read-ahead's %zu bytes) stay mapped and are leaked, "
                     "so that a late read writes into memory nobody reuses", (unsigned long long)left,
                     L->cfg.io_timeout_ms ? L->cfg.io_timeout_ms : 30000u, R->map_bytes);
            return 0;
        }
        /* a done restarts the bound (cdl__ra_user_done): a slow reader
         * still ending reads is waited for */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&R->room_cv, &R->mu, &ts);
    }
    pthread_mutex_unlock(&R->mu);
    return 1;
}

/* Stops the I/O threads (after the workers: a worker may wait on a read)
 * and frees everything. */
CDL_PRIVATE void cdl__ra_stop(coordl *L) {
    cdl__readahead *R = L->pool.ra;
    if (!R) return;
    if (R->threads) {
        pthread_mutex_lock(&R->mu);
        R->stop = 1;
        pthread_cond_broadcast(&R->room_cv);
        pthread_mutex_unlock(&R->mu);
        for (int i = 0; i < R->nthreads; i++) pthread_join(R->threads[i], NULL);
        /* transfers still in flight write into the arena: ended first */
        if (!cdl__ra_user_reads_end(R)) {
            /* a caller's reader that never called done: its read may yet
             * write into the arena and call cdl__ra_user_done, so the
             * arena and R stay (a leak, said) rather than be reused */
            L->pool.ra = NULL;
            return;
        }
        cdl__remote_cancel(L, R);
        cdl__uring_stop(L, R->uring);
        R->uring = NULL;
        pthread_mutex_destroy(&R->mu);
        pthread_mutex_destroy(&R->submit_mu);
        pthread_cond_destroy(&R->room_cv);
        pthread_cond_destroy(&R->done_cv);
    }
    cdl__uring_stop(L, R->uring); /* made, but no thread started: nothing in it */
    R->uring = NULL;
    if (R->base) munmap(R->base, R->map_bytes);
    cdl__free(L, R->threads);
    cdl__free(L, R->e);
    cdl__free(L, R);
    L->pool.ra = NULL;
}

