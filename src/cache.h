/* SPDX-License-Identifier: MIT */
/* cache.h - the MinIO cache: the types and functions other modules use (see cache.c). */
#ifndef CDL_CACHE_H
#define CDL_CACHE_H
#include "platform.h"
#include "arena.h"


/* A cache entry lives beside the slab so that both can be shared later. */
typedef struct cdl__cache_entry {
    _Atomic uint32_t state; /* low byte CDL_CE_EMPTY / _ADMITTING / _PRESENT /
                               _REWRITING; + CDL_CE_READER per worker that
                               decodes from the bytes now                   */
    uint32_t len;  /* bytes of the item as held now                         */
    uint64_t off;  /* offset of the bytes in the slab                       */
    uint32_t cap;  /* bytes reserved there: len + room for a JPEG rewrite   */
    _Atomic uint32_t jpeg; /* CDL_CE_PLAIN / _RST / _KEEP                   */
} cdl__cache_entry;

enum { CDL_CE_EMPTY = 0, CDL_CE_ADMITTING = 1, CDL_CE_PRESENT = 2, CDL_CE_REWRITING = 3 };
#define CDL_CE_STATE 0xFFu
#define CDL_CE_READER 0x100u
/* ce->jpeg: PLAIN bytes as read (may be rewritten), RST a restart-marker
 * rewrite (jpeg.c), KEEP never rewritten (not a JPEG coordl rewrites,
 * or its rewrite failed or did not fit) */
enum { CDL_CE_PLAIN = 0, CDL_CE_RST = 1, CDL_CE_KEEP = 2 };

typedef struct cdl__lru {
    pthread_mutex_t mu;
    int32_t *prev, *next; /* per item; -1 = none                            */
    cdl__u8 **data;       /* per item; NULL when not cached                 */
    uint32_t *len;
    int32_t head, tail;   /* head = most recently used                      */
    uint64_t bytes_used, items;
} cdl__lru;



/* The cache module's state. The entries' states are atomics (see
 * cdl__cache_entry); the slab's byte counts live in the stream (S), so a
 * group shares them. */
typedef struct cdl__cache {
    cdl__arena arena;          /* the slab                                  */
    cdl__cache_entry *entries; /* per item                                  */
    cdl__lru *lru;             /* cache_policy LRU instead of MinIO         */
    _Atomic uint64_t idle_cursor; /* next entry an idle worker looks at for
                                     a JPEG rewrite (decode)              */
} cdl__cache;

/* ---- interface ---- */
CDL_PRIVATE const cdl__u8 *cdl__cache_acquire_minio(coordl *L, uint64_t id, uint32_t *len, int *kind, uint32_t *cap);
CDL_PRIVATE void cdl__cache_admit_lru(coordl *L, uint64_t id, const cdl__u8 *bytes, size_t len);
CDL_PRIVATE int cdl__cache_admit_minio(coordl *L, uint64_t id, const cdl__u8 *bytes, size_t len, uint32_t *cap_out);
CDL_PRIVATE int cdl__cache_lookup_lru(coordl *L, uint64_t id, cdl__u8 *dst, size_t cap, uint32_t *len);
CDL_PRIVATE void cdl__cache_release_minio(coordl *L, uint64_t id);
#ifndef COORDL_NO_JPEGTURBO
CDL_PRIVATE void cdl__cache_keep_minio(coordl *L, uint64_t id);
CDL_PRIVATE int cdl__cache_replace_minio(coordl *L, uint64_t id, const cdl__u8 *bytes, size_t len, int held);
#endif
CDL_PRIVATE coordl_status cdl__cache_clamp(coordl *L);
CDL_PRIVATE coordl_status cdl__cache_create(coordl *L);
CDL_PRIVATE void cdl__cache_destroy(coordl *L);
#endif /* CDL_CACHE_H */
