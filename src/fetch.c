/* SPDX-License-Identifier: MIT */
/*
 * fetch.c - where a row's bytes come from.
 *
 * The one place bytes come from: the cache, else a peer, else storage
 * (which admits into the cache): the row's item read ahead by the I/O
 * threads into their arena, or read now into the worker's buffer.
 *
 * Owns:  nothing of its own: a worker's reader record on a cache entry
 *        (W->reader, W->held) between fetch and fetch_done
 * Lock:  none (entries by their atomic state; read-ahead by its mutex)
 * Calls: status, index, source, cache, peers, readahead (lower layers only:
 *        src/modules.txt; tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "fetch.h"
#include "status.h"
#include "worker_state.h"
#include "index.h"
#include "source.h"
#include "cache.h"
#include "peers.h"
#include "readahead.h"
#include "handle.h"

/* Bytes of item id into *out. A MinIO hit lends the cache's own bytes:
 * the worker's reader record holds the entry (W->held) until
 * cdl__fetch_done. W->fetch_kind says whether the bytes are a JPEG rewrite
 * (jpeg.c), or may become one. */
CDL_PRIVATE coordl_status cdl__fetch(cdl__worker *W, uint64_t id, cdl__bytes *out) {
    coordl *L = W->L;
    uint64_t t0 = cdl__now_ns();
    coordl_status rc = COORDL_OK;
    int hit = 0;
    W->held = 0;
    W->fetch_kind = -1;
    if (cdl__cache_minio(L) && W->reader) {
        uint32_t len;
        const cdl__u8 *p = cdl__cache_acquire_minio(L, W->reader, id, &len, &W->fetch_kind, &W->fetch_cap);
        if (p) { out->p = p; out->len = len; hit = 1; W->held = id + 1; }
    } else if (L->cache.lru) {
        uint32_t len;
        size_t need = cdl__item_bytes(L, id) + 16;
        if (cdl__reserve(L, (void **)&W->readbuf, &W->readcap, need) &&
            cdl__cache_lookup_lru(L, id, W->readbuf, W->readcap, &len)) {
            out->p = W->readbuf; out->len = len; hit = 1;
        }
    }
    uint64_t t1 = cdl__now_ns();
    if (hit) {
        W->row.cache_hits++;
        W->row.cache_hit_bytes += out->len;
        W->row.read_cache_ns += t1 - t0;
    } else
#ifdef COORDL_MPI
    if (cdl__peer_fetch(W, id, out)) {
        W->row.read_cache_ns += t1 - t0;
        t1 = cdl__now_ns();
    } else
#endif
    {
        /* the row's item read ahead (or in flight), else read now */
        int ahead = 0;
        if (W->ra_entry && W->ra_entry->id == id) ahead = cdl__ra_wait(W, W->ra_entry, out, &rc);
        if (ahead == 0) rc = cdl__read_file(W, id, out);
        /* partitioned: only the rank's share of one epoch is admitted,
         * before the map exchange, so the exchanged map stays exact */
        const int may_admit = !L->peers.comm_set || cdl__peer_admits(L, W->claim->epoch);
        if (rc == COORDL_OK) {
            W->row.cache_misses++;
            W->row.storage_reads++;
            if (cdl__cache_minio(L) && may_admit) W->fetch_kind = cdl__cache_admit_minio(L, id, out->p, out->len, &W->fetch_cap);
            else if (L->cache.lru) cdl__cache_admit_lru(L, id, out->p, out->len);
        }
        uint64_t t2 = cdl__now_ns();
        W->row.read_cache_ns += t1 - t0; /* the lookup that missed */
        W->row.read_storage_ns += t2 - t1;
        t1 = t2;
    }
    if (rc == COORDL_OK) W->row.fetch_bytes += out->len;
    W->row.read_ns += t1 - t0;
    return rc;
}

CDL_PRIVATE void cdl__fetch_done(cdl__worker *W) {
    if (W->held) cdl__cache_release_minio(W->reader);
    W->held = 0;
}

