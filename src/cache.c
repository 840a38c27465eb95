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
 * Lock:  entries change by atomic compare-and-swap on their state and JPEG
 *        words (one writer per state change, its member recorded); readers
 *        record what they read in their member's reading[] words; the LRU
 *        has its own mutex
 * Calls: status, index, arena, jpeg_layout (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "cache_state.h"
#include "cache.h"
#include "status.h"
#include "arena.h"
#include "lock_state.h"
#include "jpeg_layout.h"
#include "index.h"
#include "index_state.h"
#include "handle.h"

/* Cached JPEGs may be rewritten in place (jpeg.c: restart markers for
 * crop-only decoding), so whoever reads an entry's bytes says so first: a
 * reader records the entry in its own word of its member's reading[]
 * (lock_state.h), then checks that the entry is PRESENT; a rewrite marks
 * the entry REWRITING, then looks at every live member's records and backs
 * off if anyone reads the entry. Both sides store, then load, sequentially
 * consistent, so at least one sees the other (a reader that sees REWRITING
 * takes it as a miss). The records are plain words, not counts in the
 * entry: a member that dies, or is dropped, holds nothing (its records are
 * not looked at, and are cleared), where a count it raised would stay
 * raised for the life of a group's shared memory. */

/* A lazy index's table for item id's shard, or NULL: none made yet (or no
 * such shard, or no lazy index). */
static cdl__shard_entries *cdl__shard_table(const coordl *L, uint64_t id) {
    const uint32_t s = CDL_LAZY_SHARD(id);
    if (!L->cache.by_shard || s >= L->cache.nshards) return NULL;
    return atomic_load_explicit(&L->cache.by_shard[s], memory_order_acquire);
}

/* Item id's entry, or NULL: a lazy index's shard that holds no item yet
 * (every lookup then is a miss). */
static cdl__cache_entry *cdl__ce(const coordl *L, uint64_t id) {
    if (L->cache.entries) return &L->cache.entries[id];
    cdl__shard_entries *se = cdl__shard_table(L, id);
    const uint32_t k = CDL_LAZY_ORDINAL(id);
    return se && k < se->n ? &se->e[k] : NULL;
}

/* Item id's entry, its shard's table made first if need be (a lazy index:
 * the shard's count is known, it was scanned to read the item). */
static cdl__cache_entry *cdl__ce_make(coordl *L, uint64_t id) {
    cdl__cache_entry *ce = cdl__ce(L, id);
    const uint32_t s = CDL_LAZY_SHARD(id);
    if (ce || !L->cache.by_shard || s >= L->cache.nshards) return ce;
    uint32_t n = 0;
    char err[CDL_ERRMSG_MAX];
    if (cdl__lazy_count(L, s, &n, err, sizeof err) != COORDL_OK || n == 0 ||
        n == CDL_LAZY_UNKNOWN)
        return NULL;
    cdl__shard_entries *se = cdl__calloc(L, 1, sizeof *se + (size_t)n * (sizeof se->e[0] + sizeof *se->labels));
    cdl__shard_entries *none = NULL;
    if (!se) return NULL;
    se->n = n;
    se->labels = (int32_t *)(void *)(se->e + n);
    if (cdl__lazy_labels(L, s, se->labels, n) != COORDL_OK) { /* the shard failed or changed: not cached */
        cdl__free(L, se);
        return NULL;
    }
    if (!atomic_compare_exchange_strong(&L->cache.by_shard[s], &none, se)) cdl__free(L, se); /* another made it */
    return cdl__ce(L, id);
}

/* A lazily indexed item's label from its shard's cache table (made when
 * the shard's first item was admitted): 1, or 0 when there is none (the
 * label then comes from the shard's block, cdl__item_label). */
CDL_PRIVATE int cdl__cache_label(const coordl *L, uint64_t id, int32_t *label) {
    const cdl__shard_entries *se = cdl__shard_table(L, id);
    const uint32_t k = CDL_LAZY_ORDINAL(id);
    if (!se || k >= se->n) return 0;
    *label = se->labels[k];
    return 1;
}

/* Whether the MinIO cache is on (a table per item, or per shard). */
CDL_PRIVATE int cdl__cache_minio(const coordl *L) { return L->cache.entries != NULL || L->cache.by_shard != NULL; }

/* What a reader records for item id: never 0 (no record); two items may
 * share it (a lazy id's two halves are folded), which only makes a rewrite
 * back off for nothing. */
static uint32_t cdl__reader_tag(uint64_t id) { return (uint32_t)((id ^ (id >> 32)) % 0xFFFFFFFFu) + 1; }

/* This member's reader record k (0 <= k < CDL_MAX_READERS). */
CDL_PRIVATE _Atomic uint32_t *cdl__cache_reader(coordl *L, uint32_t k) {
    return &L->S->members[L->member.me].reading[k];
}

#ifdef COORDL_MPI /* the peer server sizes its replies by it */
/* The room item id's entry holds (its bytes never outgrow it), 0 when the
 * item is not cached. */
CDL_PRIVATE uint32_t cdl__cache_room(const coordl *L, uint64_t id) {
    const cdl__cache_entry *ce = cdl__ce(L, id);
    if (!ce) return 0;
    const uint32_t s = atomic_load_explicit(&ce->state, memory_order_acquire) & CDL_CE_STATE;
    return s == CDL_CE_PRESENT || s == CDL_CE_REWRITING ? ce->cap : 0;
}
#endif

/* Whether item id's bytes are cached (present, or being rewritten). */
CDL_PRIVATE int cdl__cache_holds(const coordl *L, uint64_t id) {
    const cdl__cache_entry *ce = cdl__ce(L, id);
    if (!ce) return 0;
    const uint32_t s = atomic_load_explicit(&ce->state, memory_order_acquire) & CDL_CE_STATE;
    return s == CDL_CE_PRESENT || s == CDL_CE_REWRITING;
}

/* Returns a pointer to the cached bytes, recorded in the caller's reader
 * word (give it back with cdl__cache_release_minio), or NULL on a miss.
 * kind: the entry's CDL_CE_PLAIN / _RST / _KEEP (a claimed entry's bytes
 * are still plain). */
CDL_PRIVATE const cdl__u8 *cdl__cache_acquire_minio(coordl *L, _Atomic uint32_t *reader, uint64_t id, uint32_t *len,
                                               int *kind, uint32_t *cap) {
    cdl__cache_entry *ce = cdl__ce(L, id);
    if (!ce) return NULL;
    atomic_store(reader, cdl__reader_tag(id)); /* then look: see the comment above */
    if ((atomic_load(&ce->state) & CDL_CE_STATE) != CDL_CE_PRESENT) {
        atomic_store_explicit(reader, 0, memory_order_release);
        return NULL;
    }
    *len = ce->len;
    if (kind) {
        const uint32_t j = atomic_load_explicit(&ce->jpeg, memory_order_relaxed) & CDL_CE_STATE;
        *kind = j == CDL_CE_CLAIMED ? CDL_CE_PLAIN : (int)j;
    }
    if (cap) *cap = ce->cap;
    return L->cache.arena.base + ce->off;
}

CDL_PRIVATE void cdl__cache_release_minio(_Atomic uint32_t *reader) {
    atomic_store_explicit(reader, 0, memory_order_release);
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
    if (len == 0 || len > UINT32_MAX / 2) return -1;
    /* full for this item: a lazy index makes no shard table for it */
    if (atomic_load(&L->S->cache_used) + len > L->cfg.cache_bytes) return -1;
    cdl__cache_entry *ce = cdl__ce_make(L, id);
    if (!ce) return -1;
    const uint32_t admitting = CDL_CE_ADMITTING | CDL_CE_OWNER(L->member.me);
    uint32_t expect = CDL_CE_EMPTY;
    if (!atomic_compare_exchange_strong(&ce->state, &expect, admitting)) return -1;
    const int image = cdl__pipeline_is_image(L->cfg.pipeline);
    /* a lazy index does not know the bytes still to come, so it gives no
     * JPEG rewrite room (MinIO must never lose an item to it) */
    const size_t room = L->cfg.jpeg_random_access && image && L->cache.entries ? cdl__rst_room(bytes, len) : 0;
    const uint64_t rest = L->index.dataset_bytes > atomic_load(&L->S->cache_src_bytes) + len
                              ? L->index.dataset_bytes - atomic_load(&L->S->cache_src_bytes) - len : 0;
    uint64_t used = atomic_load(&L->S->cache_used), cap;
    for (;;) {
        if (used + len > L->cfg.cache_bytes) { /* full for this item: never evict */
            expect = admitting; /* a CAS: a drop of this member may have made it LOST */
            atomic_compare_exchange_strong(&ce->state, &expect, CDL_CE_EMPTY);
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
    expect = admitting;
    if (!atomic_compare_exchange_strong(&ce->state, &expect, CDL_CE_PRESENT)) return -1; /* dropped meanwhile */
    /* counted once present: a member dropped half-way counted nothing */
    if (room) atomic_fetch_add(&L->S->cache_plain_items, 1);
    atomic_fetch_add(&L->S->cache_items, 1);
    atomic_fetch_add(&L->S->cache_src_bytes, len);
    cdl__shard_entries *se = cdl__shard_table(L, id); /* a lazy index: its last item in, its block is needed no more */
    if (se && atomic_fetch_add(&se->present, 1) + 1 == se->n) cdl__lazy_mark_cached(L, CDL_LAZY_SHARD(id));
    *cap_out = (uint32_t)cap;
    return room ? CDL_CE_PLAIN : CDL_CE_KEEP;
}

#ifndef COORDL_NO_JPEGTURBO /* only JPEG rewrites claim, replace or keep entries */
/* Takes the rewrite of a PLAIN entry for this member: 1 when the caller is
 * now its one owner (finish with cdl__cache_replace_minio or
 * cdl__cache_keep_minio), 0 when it is not plain (rewritten, kept, or
 * claimed by another worker). */
CDL_PRIVATE int cdl__cache_claim_rewrite(coordl *L, uint64_t id) {
    uint32_t plain = CDL_CE_PLAIN;
    cdl__cache_entry *ce = cdl__ce(L, id);
    return ce && atomic_compare_exchange_strong(&ce->jpeg, &plain, CDL_CE_CLAIMED | CDL_CE_OWNER(L->member.me));
}

/* The claim's owner gives the rewrite back untried (PLAIN again). */
CDL_PRIVATE void cdl__cache_unclaim_rewrite(coordl *L, uint64_t id) {
    uint32_t claimed = CDL_CE_CLAIMED | CDL_CE_OWNER(L->member.me);
    cdl__cache_entry *ce = cdl__ce(L, id);
    if (ce) atomic_compare_exchange_strong(&ce->jpeg, &claimed, CDL_CE_PLAIN);
}

/* Whether a reader other than `self` reads entry id now: the records of
 * every member in the live set (and this one). */
static int cdl__cache_read_elsewhere(coordl *L, const _Atomic uint32_t *self, uint64_t id) {
    const uint32_t live = atomic_load(&L->S->live_mask) | (1u << L->member.me);
    for (int m = 0; m < CDL_MAX_MEMBERS; m++) {
        if (!(live >> m & 1u)) continue;
        const cdl__member *mb = &L->S->members[m];
        for (uint32_t k = 0; k < CDL_MAX_READERS; k++) /* 1 KiB a member, once per rewrite */
            if (&mb->reading[k] != self && atomic_load(&mb->reading[k]) == cdl__reader_tag(id)) return 1;
    }
    return 0;
}

/* The claim's owner replaces the entry's bytes by their rewrite (len <= its
 * cap), if no reader but `self` (the owner's own record, or NULL) reads
 * them. Returns 1 when replaced (now RST); 0 when another reader was
 * there: the claim is given back (PLAIN again, tried again later). */
CDL_PRIVATE int cdl__cache_replace_minio(coordl *L, const _Atomic uint32_t *self, uint64_t id, const cdl__u8 *bytes,
                                    size_t len) {
    cdl__cache_entry *ce = cdl__ce(L, id);
    if (!ce) return 0;
    const uint32_t claimed = CDL_CE_CLAIMED | CDL_CE_OWNER(L->member.me);
    const uint32_t rewriting = CDL_CE_REWRITING | CDL_CE_OWNER(L->member.me);
    if (len > ce->cap) { /* cannot happen with cdl__jpeg_rewrite's limit; never loop on it */
        cdl__cache_keep_minio(L, id);
        return 0;
    }
    if (atomic_load(&ce->jpeg) != claimed) return 0; /* a drop of this member took the claim back */
    uint32_t expect = CDL_CE_PRESENT;
    if (!atomic_compare_exchange_strong(&ce->state, &expect, rewriting)) { /* LOST after a drop of ours */
        cdl__cache_unclaim_rewrite(L, id);
        return 0;
    }
    if (cdl__cache_read_elsewhere(L, self, id)) { /* then look: see the comment above */
        expect = rewriting;
        atomic_compare_exchange_strong(&ce->state, &expect, CDL_CE_PRESENT);
        cdl__cache_unclaim_rewrite(L, id);
        return 0;
    }
    cdl__test_hook(L, "rewriting");
    memcpy(L->cache.arena.base + ce->off, bytes, len);
    ce->len = (uint32_t)len;
    /* CASes: a drop of this member meanwhile took the claim back (the bytes
     * are a whole rewrite, decodable as plain) or made the entry LOST;
     * either way nothing is counted */
    expect = claimed;
    const int mine = atomic_compare_exchange_strong(&ce->jpeg, &expect, CDL_CE_RST);
    expect = rewriting;
    const int present = atomic_compare_exchange_strong(&ce->state, &expect, CDL_CE_PRESENT);
    if (!mine || !present) return 0;
    atomic_fetch_add(&L->S->cache_rst_items, 1);
    atomic_fetch_sub(&L->S->cache_plain_items, 1);
    return 1;
}

/* The claim's owner gives the rewrite up for good: never tried again. */
CDL_PRIVATE void cdl__cache_keep_minio(coordl *L, uint64_t id) {
    uint32_t claimed = CDL_CE_CLAIMED | CDL_CE_OWNER(L->member.me);
    cdl__cache_entry *ce = cdl__ce(L, id);
    if (ce && atomic_compare_exchange_strong(&ce->jpeg, &claimed, CDL_CE_KEEP))
        atomic_fetch_sub(&L->S->cache_plain_items, 1);
}
#endif

/* Member m left the group: its reader records are cleared, its rewrite
 * claims given back, and an entry it left half-written (ADMITTING or
 * REWRITING) made LOST: its bytes are neither what was read nor a whole
 * rewrite. Under the stream's lock (the drop); O(items), once per drop. */
CDL_PRIVATE void cdl__cache_drop_member(coordl *L, int m) {
    if (!L->cache.entries || m < 0 || m >= CDL_MAX_MEMBERS) return;
    cdl__member *mb = &L->S->members[m];
    for (uint32_t k = 0; k < CDL_MAX_READERS; k++) atomic_store(&mb->reading[k], 0);
    uint64_t lost = 0;
    for (uint64_t id = 0; id < L->index.num_items; id++) {
        cdl__cache_entry *ce = &L->cache.entries[id];
        uint32_t j = CDL_CE_CLAIMED | CDL_CE_OWNER(m);
        atomic_compare_exchange_strong(&ce->jpeg, &j, CDL_CE_PLAIN);
        uint32_t s = atomic_load(&ce->state);
        const uint32_t what = s & CDL_CE_STATE;
        if ((what == CDL_CE_ADMITTING || what == CDL_CE_REWRITING) && s >> CDL_CE_OWNER_SHIFT == (uint32_t)m &&
            atomic_compare_exchange_strong(&ce->state, &s, CDL_CE_LOST)) {
            if (what == CDL_CE_REWRITING) { /* it was present, and plain */
                atomic_fetch_sub(&L->S->cache_items, 1);
                atomic_fetch_sub(&L->S->cache_plain_items, 1);
            }
            lost++;
        }
    }
    if (lost)
        cdl__log(L, COORDL_LOG_WARN, "cache: %llu item(s) that a dropped member was writing are no longer cached "
                 "(read from storage from now on)", (unsigned long long)lost);
}

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

/* The budget in force: a MinIO budget beyond the dataset is never used,
 * so only what can fill is mapped (silently: nothing is lost); and no
 * budget may exceed 3/4 of the machine's memory (a 1 TiB cache on a 24 GiB
 * machine would only end in the OOM killer once the cache fills), which
 * is logged. A group's budget is cut further to what /dev/shm holds
 * (group.c). coordl_get_config and coordl_get_stats report the result. */
CDL_PRIVATE coordl_status cdl__cache_clamp(coordl *L) {
    uint64_t slab = L->cfg.cache_bytes;
    L->stats.st.cache_bytes_requested = slab;
    if (L->cfg.cache_policy == COORDL_CACHE_MINIO) {
        /* JPEG rewrites may use up to 1/8 more (the room jpeg_layout.c reserves:
         * 3-5% for photos, 12-25% for progressive and arithmetic sources) */
        const uint64_t most = L->index.dataset_bytes + (L->cfg.jpeg_random_access ? L->index.dataset_bytes / 8 : 0) + (64u << 20);
        if (slab > most && !L->index.lazy) slab = most; /* a lazy index does not know the set's bytes */
    }
    const long pages = sysconf(_SC_PHYS_PAGES);
    const uint64_t ram = pages > 0 ? (uint64_t)pages * cdl__page_size() : 0;
    if (ram && slab > ram / 4 * 3) {
        cdl__log(L, COORDL_LOG_WARN, "cache_bytes: %llu asked for, but this machine has %llu bytes of memory; "
                 "using %llu (3/4 of it; coordl_get_stats reports cache_bytes_budget and cache_bytes_requested)",
                 (unsigned long long)L->cfg.cache_bytes, (unsigned long long)ram,
                 (unsigned long long)(ram / 4 * 3));
        slab = ram / 4 * 3;
    }
    if (slab > SIZE_MAX / 2)
        return cdl__open_fail(COORDL_ERR_INVALID, "cache_bytes: %llu is too large for this platform",
                              (unsigned long long)slab);
    L->cfg.cache_bytes = slab;
    L->stats.st.cache_bytes_budget = slab;
    return COORDL_OK;
}

CDL_PRIVATE coordl_status cdl__cache_create(coordl *L) {
    if (L->cfg.cache_bytes == 0) return COORDL_OK;
    if (L->cfg.cache_policy == COORDL_CACHE_LRU) {
        cdl__lru *c = cdl__calloc(L, 1, sizeof *c);
        if (!c) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the LRU cache; lower cache_bytes");
        L->cache.lru = c;
        pthread_mutex_init(&c->mu, NULL);
        c->prev = cdl__malloc(L, L->index.num_items * sizeof *c->prev);
        c->next = cdl__malloc(L, L->index.num_items * sizeof *c->next);
        c->data = cdl__calloc(L, L->index.num_items, sizeof *c->data);
        c->len = cdl__calloc(L, L->index.num_items, sizeof *c->len);
        if (!c->prev || !c->next || !c->data || !c->len)
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the LRU cache; lower cache_bytes");
        for (uint64_t i = 0; i < L->index.num_items; i++) c->prev[i] = c->next[i] = -1;
        c->head = c->tail = -1;
        return COORDL_OK;
    }
    const uint64_t slab = L->cfg.cache_bytes;
    if (L->index.lazy) {
        L->cache.nshards = L->index.ntar_shards;
        L->cache.by_shard = cdl__calloc(L, L->cache.nshards ? L->cache.nshards : 1, sizeof *L->cache.by_shard);
        if (!L->cache.by_shard) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the cache's shard table");
        return cdl__arena_map(L, &L->cache.arena, (size_t)slab, 0, "cache slab", "cache_bytes");
    }
    L->cache.entries = cdl__calloc(L, L->index.num_items, sizeof *L->cache.entries);
    if (!L->cache.entries) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the cache table (one entry per item); set cache_bytes = 0 for no cache");
    return cdl__arena_map(L, &L->cache.arena, (size_t)slab, 0, "cache slab", "cache_bytes");
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
    if (L->cache.by_shard) {
        for (size_t s = 0; s < L->cache.nshards; s++) cdl__free(L, atomic_load(&L->cache.by_shard[s]));
        cdl__free(L, (void *)L->cache.by_shard);
        L->cache.by_shard = NULL;
    }
    if (!L->member.shm_base) cdl__free(L, L->cache.entries);
    L->cache.entries = NULL;
}

