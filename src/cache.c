/* SPDX-License-Identifier: MIT */
/*
 * cache.c - the MinIO cache.
 *
 * Encoded bytes of items, admitted on first read until the byte budget
 * is full, never evicted: under a fresh random permutation per epoch
 * the hit rate is then exactly the cached fraction, the best a demand
 * cache can do. One slab, space reserved by a lock-free bump counter;
 * entries hold offsets. The LRU variant (malloc per item, a mutex) is
 * only for comparison.
 *
 * Owns:  L->cache: the slab, an entry per item (state, offset, length,
 *        room, JPEG kind) and the LRU alternative; the slab's byte counts
 *        live in the stream (S) so a group shares them
 * Lock:  entries change by atomic compare-and-swap on their state word (one
 *        writer per state change); the LRU has its own mutex
 * Calls: status, arena, jpeg_layout (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "cache_state.h"
#include "cache.h"
#include "status.h"
#include "arena.h"
#include "jpeg_layout.h"
#include "handle.h"

/* Cached JPEGs may be rewritten in place (jpeg.c: restart markers for
 * crop-only decoding), so whoever reads an entry's bytes holds a reader
 * reference in its state word until done: a rewrite replaces the bytes
 * only while nobody reads them, and a lookup that finds the entry being
 * replaced (a memcpy long) takes it as a miss. */

/* Returns a pointer to the cached bytes and takes a reader reference (give
 * it back with cdl__cache_release_minio), or NULL on a miss. */
CDL_PRIVATE const cdl__u8 *cdl__cache_acquire_minio(coordl *L, uint64_t id, uint32_t *len, int *kind,
                                               uint32_t *cap) {
    cdl__cache_entry *ce = &L->cache.entries[id];
    uint32_t s = atomic_load_explicit(&ce->state, memory_order_acquire);
    do {
        if ((s & CDL_CE_STATE) != CDL_CE_PRESENT) return NULL;
    } while (!atomic_compare_exchange_weak_explicit(&ce->state, &s, s + CDL_CE_READER, memory_order_acquire,
                                                    memory_order_acquire));
    *len = ce->len;
    if (kind) *kind = (int)atomic_load_explicit(&ce->jpeg, memory_order_relaxed);
    if (cap) *cap = ce->cap;
    return L->cache.arena.base + ce->off;
}

CDL_PRIVATE void cdl__cache_release_minio(coordl *L, uint64_t id) {
    atomic_fetch_sub_explicit(&L->cache.entries[id].state, CDL_CE_READER, memory_order_release);
}

/* Admits an item read from storage. A JPEG coordl may rewrite gets room to
 * grow into (cdl__rst_room, about 3-4% of its bytes for photos), but only
 * while the budget still holds every item not yet admitted at its size as
 * read: so random access never costs the cache an item it would have held
 * (a budget of exactly the dataset holds all of it, without room). Without
 * room an item is rewritten only if it fits in place (optimized tables
 * usually make it smaller). Returns the entry's ce->jpeg, or -1 when the
 * item was not admitted. */
CDL_PRIVATE int cdl__cache_admit_minio(coordl *L, uint64_t id, const cdl__u8 *bytes, size_t len, uint32_t *cap_out) {
    cdl__cache_entry *ce = &L->cache.entries[id];
    uint32_t expect = CDL_CE_EMPTY;
    if (len == 0 || len > UINT32_MAX / 2) return -1;
    if (!atomic_compare_exchange_strong(&ce->state, &expect, CDL_CE_ADMITTING)) return -1;
    const int image = L->cfg.pipeline == COORDL_PIPE_TRAIN || L->cfg.pipeline == COORDL_PIPE_EVAL;
    const size_t room = L->cfg.jpeg_random_access && image ? cdl__rst_room(bytes, len) : 0;
    const uint64_t rest = L->index.dataset_bytes > atomic_load(&L->S->cache_src_bytes) + len
                              ? L->index.dataset_bytes - atomic_load(&L->S->cache_src_bytes) - len : 0;
    uint64_t used = atomic_load(&L->S->cache_used), cap;
    for (;;) {
        if (used + len > L->cfg.cache_bytes) { /* full for this item: never evict */
            atomic_store_explicit(&ce->state, CDL_CE_EMPTY, memory_order_release);
            return -1;
        }
        cap = room && used + len + room + rest <= L->cfg.cache_bytes ? len + room : len;
        if (atomic_compare_exchange_weak(&L->S->cache_used, &used, used + cap)) break;
    }
    cdl__test_hook(L, "admitting");
    memcpy(L->cache.arena.base + used, bytes, len);
    ce->off = used;
    ce->len = (uint32_t)len;
    ce->cap = (uint32_t)cap;
    atomic_store_explicit(&ce->jpeg, room ? CDL_CE_PLAIN : CDL_CE_KEEP, memory_order_relaxed);
    if (room) atomic_fetch_add(&L->S->cache_plain_items, 1);
    atomic_fetch_add(&L->S->cache_items, 1);
    atomic_fetch_add(&L->S->cache_src_bytes, len);
    atomic_store_explicit(&ce->state, CDL_CE_PRESENT, memory_order_release);
    *cap_out = (uint32_t)cap;
    return room ? CDL_CE_PLAIN : CDL_CE_KEEP;
}

#ifndef COORDL_NO_JPEGTURBO /* only JPEG rewrites replace or keep entries */
/* Replaces a cached item's bytes by its rewrite (len <= its cap), if no
 * reader but the caller (held: it holds a reader reference, which it keeps)
 * has them. Returns 1 when replaced. */
CDL_PRIVATE int cdl__cache_replace_minio(coordl *L, uint64_t id, const cdl__u8 *bytes, size_t len, int held) {
    cdl__cache_entry *ce = &L->cache.entries[id];
    uint32_t expect = CDL_CE_PRESENT + (held ? CDL_CE_READER : 0u);
    if (!atomic_compare_exchange_strong_explicit(&ce->state, &expect, CDL_CE_REWRITING, memory_order_acquire,
                                                 memory_order_relaxed))
        return 0;
    uint32_t plain = CDL_CE_PLAIN;
    /* a CAS: cdl__cache_keep_minio may mark it KEEP meanwhile */
    const int skip = len > ce->cap || !atomic_compare_exchange_strong(&ce->jpeg, &plain, CDL_CE_RST);
    if (!skip) {
        memcpy(L->cache.arena.base + ce->off, bytes, len);
        ce->len = (uint32_t)len;
        atomic_fetch_add(&L->S->cache_rst_items, 1);
        atomic_fetch_sub(&L->S->cache_plain_items, 1);
    }
    atomic_store_explicit(&ce->state, expect, memory_order_release);
    return !skip;
}

/* A rewrite that failed is not tried again. */
CDL_PRIVATE void cdl__cache_keep_minio(coordl *L, uint64_t id) {
    uint32_t plain = CDL_CE_PLAIN;
    if (atomic_compare_exchange_strong(&L->cache.entries[id].jpeg, &plain, CDL_CE_KEEP))
        atomic_fetch_sub(&L->S->cache_plain_items, 1);
}
#endif

static void cdl__lru_unlink(cdl__lru *c, int32_t i) {
    if (c->prev[i] >= 0) c->next[c->prev[i]] = c->next[i]; else c->head = c->next[i];
    if (c->next[i] >= 0) c->prev[c->next[i]] = c->prev[i]; else c->tail = c->prev[i];
    c->prev[i] = c->next[i] = -1;
}
static void cdl__lru_push_front(cdl__lru *c, int32_t i) {
    c->prev[i] = -1;
    c->next[i] = c->head;
    if (c->head >= 0) c->prev[c->head] = i;
    c->head = i;
    if (c->tail < 0) c->tail = i;
}

/* LRU hit: copies into dst (an evicting cache cannot lend its memory). */
CDL_PRIVATE int cdl__cache_lookup_lru(coordl *L, uint64_t id, cdl__u8 *dst, size_t cap, uint32_t *len) {
    cdl__lru *c = L->cache.lru;
    int hit = 0;
    pthread_mutex_lock(&c->mu);
    if (c->data[id] && c->len[id] <= cap) {
        memcpy(dst, c->data[id], c->len[id]);
        *len = c->len[id];
        cdl__lru_unlink(c, (int32_t)id);
        cdl__lru_push_front(c, (int32_t)id);
        hit = 1;
    }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

CDL_PRIVATE void cdl__cache_admit_lru(coordl *L, uint64_t id, const cdl__u8 *bytes, size_t len) {
    cdl__lru *c = L->cache.lru;
    if (len == 0 || len > L->cfg.cache_bytes) return;
    pthread_mutex_lock(&c->mu);
    if (!c->data[id]) {
        while (c->bytes_used + len > L->cfg.cache_bytes && c->tail >= 0) {
            int32_t victim = c->tail;
            cdl__lru_unlink(c, victim);
            c->bytes_used -= c->len[victim];
            c->items--;
            cdl__free(L, c->data[victim]);
            c->data[victim] = NULL;
        }
        cdl__u8 *copy = cdl__malloc(L, len);
        if (copy) {
            memcpy(copy, bytes, len);
            c->data[id] = copy;
            c->len[id] = (uint32_t)len;
            c->bytes_used += len;
            c->items++;
            cdl__lru_push_front(c, (int32_t)id);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* A budget beyond the dataset is never used: map only what can fill. */
CDL_PRIVATE coordl_status cdl__cache_clamp(coordl *L) {
    uint64_t slab = L->cfg.cache_bytes;
    /* JPEG rewrites may use up to 1/8 more (the room jpeg_layout.c reserves:
     * 3-5% for photos, 12-25% for progressive and arithmetic sources) */
    const uint64_t most = L->index.dataset_bytes + (L->cfg.jpeg_random_access ? L->index.dataset_bytes / 8 : 0) + (64u << 20);
    if (slab > most) slab = most;
    if (slab > SIZE_MAX / 2)
        return cdl__open_fail(COORDL_ERR_INVALID, "cache_bytes: %llu is too large for this platform",
                              (unsigned long long)slab);
    L->cfg.cache_bytes = slab;
    return COORDL_OK;
}

CDL_PRIVATE coordl_status cdl__cache_create(coordl *L) {
    if (L->cfg.cache_bytes == 0) return COORDL_OK;
    if (L->cfg.cache_policy == COORDL_CACHE_LRU) {
        cdl__lru *c = cdl__calloc(L, 1, sizeof *c);
        if (!c) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the LRU cache");
        L->cache.lru = c;
        pthread_mutex_init(&c->mu, NULL);
        c->prev = cdl__malloc(L, L->index.num_items * sizeof *c->prev);
        c->next = cdl__malloc(L, L->index.num_items * sizeof *c->next);
        c->data = cdl__calloc(L, L->index.num_items, sizeof *c->data);
        c->len = cdl__calloc(L, L->index.num_items, sizeof *c->len);
        if (!c->prev || !c->next || !c->data || !c->len)
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the LRU cache");
        for (uint64_t i = 0; i < L->index.num_items; i++) c->prev[i] = c->next[i] = -1;
        c->head = c->tail = -1;
        return COORDL_OK;
    }
    const uint64_t slab = L->cfg.cache_bytes;
    L->cache.entries = cdl__calloc(L, L->index.num_items, sizeof *L->cache.entries);
    if (!L->cache.entries) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the cache table");
    return cdl__arena_map(L, &L->cache.arena, (size_t)slab, 0, "cache slab");
}

CDL_PRIVATE void cdl__cache_destroy(coordl *L) {
    if (L->cache.lru) {
        cdl__lru *c = L->cache.lru;
        if (c->data)
            for (uint64_t i = 0; i < L->index.num_items; i++) cdl__free(L, c->data[i]);
        cdl__free(L, c->prev);
        cdl__free(L, c->next);
        cdl__free(L, c->data);
        cdl__free(L, c->len);
        pthread_mutex_destroy(&c->mu);
        cdl__free(L, c);
        L->cache.lru = NULL;
    }
    cdl__arena_unmap(L, &L->cache.arena);
    if (!L->member.shm_base) cdl__free(L, L->cache.entries);
    L->cache.entries = NULL;
}

