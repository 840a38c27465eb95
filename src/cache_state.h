/* SPDX-License-Identifier: MIT */
/* cache_state.h - the MinIO cache: the types cache.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; cache.h declares
 * the functions. */
#ifndef CDL_CACHE_STATE_H
#define CDL_CACHE_STATE_H
#include "platform.h"
#include "arena_state.h"

/* A cache entry lives beside the slab so that both can be shared later. */
typedef struct cdl__cache_entry {
    _Atomic uint32_t state; /* low byte CDL_CE_EMPTY / _ADMITTING / _PRESENT /
                               _REWRITING / _LOST; while ADMITTING or
                               REWRITING, the writing member's index in
                               CDL_CE_OWNER (a dropped member's half-written
                               entry is found and made LOST)                */
    uint32_t len;  /* bytes of the item as held now                         */
    uint64_t off;  /* offset of the bytes in the slab                       */
    uint32_t cap;  /* bytes reserved there: len + room for a JPEG rewrite   */
    _Atomic uint32_t jpeg; /* low byte CDL_CE_PLAIN / _RST / _KEEP /
                              _CLAIMED (+ the claiming member in
                              CDL_CE_OWNER): one owner per rewrite          */
} cdl__cache_entry;

/* LOST: left half-written by a member that was dropped; a miss for good
 * (a dropped member still running could yet write its old place), its
 * room stays counted as used. */
enum { CDL_CE_EMPTY = 0, CDL_CE_ADMITTING = 1, CDL_CE_PRESENT = 2, CDL_CE_REWRITING = 3, CDL_CE_LOST = 4 };
#define CDL_CE_STATE 0xFFu
#define CDL_CE_OWNER_SHIFT 8
#define CDL_CE_OWNER(m) ((uint32_t)(m) << CDL_CE_OWNER_SHIFT)
/* ce->jpeg: PLAIN bytes as read (may be rewritten), RST a restart-marker
 * rewrite (jpeg.c), KEEP never rewritten (not a JPEG coordl rewrites,
 * or its rewrite failed or did not fit), CLAIMED plain bytes a worker is
 * rewriting now (nobody else tries) */
enum { CDL_CE_PLAIN = 0, CDL_CE_RST = 1, CDL_CE_KEEP = 2, CDL_CE_CLAIMED = 3 };

typedef struct cdl__lru {
    pthread_mutex_t mu;
    int32_t *prev, *next; /* per item; -1 = none                            */
    cdl__u8 **data;       /* per item; NULL when not cached                 */
    uint32_t *len;
    int32_t head, tail;   /* head = most recently used                      */
    uint64_t bytes_used, items;
} cdl__lru;

/* A lazily indexed source's entries for one shard (ids (shard << 32) |
 * ordinal): allocated when the shard's first item is admitted, so a set no
 * index fits costs 8 bytes a shard plus an entry per item of the shards
 * the cache holds items of. */
typedef struct cdl__shard_entries {
    uint32_t n;
    _Atomic uint32_t present; /* entries admitted: all n, and the shard's
                                 block is needed no more (labels below)   */
    int32_t *labels;          /* the shard's n labels, after e[]: a cached
                                 item's row needs no rescan of its shard  */
    cdl__cache_entry e[];
} cdl__shard_entries;

/* The cache module's state. The entries' states are atomics (see
 * cdl__cache_entry); the slab's byte counts live in the stream (S), so a
 * group shares them. */
typedef struct cdl__cache {
    cdl__arena arena;          /* the slab                                  */
    cdl__cache_entry *entries; /* per item                                  */
    _Atomic(cdl__shard_entries *) *by_shard; /* instead, for a lazy index:
                                  per shard, NULL until it holds an item  */
    size_t nshards;
    cdl__lru *lru;             /* cache_policy LRU instead of MinIO         */
    _Atomic uint64_t idle_cursor; /* next entry an idle worker looks at for
                                     a JPEG rewrite (decode)              */
} cdl__cache;

#endif /* CDL_CACHE_STATE_H */
