/* SPDX-License-Identifier: MIT */
/* index_state.h - the item table: the types index.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; index.h declares
 * the functions. */
#ifndef CDL_INDEX_STATE_H
#define CDL_INDEX_STATE_H
#include "platform.h"

typedef struct cdl__item {
    uint64_t path_off; /* into the string arena                        */
    uint64_t bytes;    /* encoded size at indexing                     */
    int32_t label;
} cdl__item;

/* Where a tar-shard item's bytes are while its shards are scanned (tar.c
 * fills them beside items; indexfile.c packs both into tar_refs). */
typedef struct cdl__tar_item {
    uint64_t offset; /* of the member's data in its shard               */
    uint32_t shard;  /* index into tar_shards                           */
    uint32_t txt_bytes;  /* the sample's .txt member (box labels): its  */
    uint64_t txt_offset; /* size and data offset; UINT32_MAX: none       */
} cdl__tar_item;

/* Box labels (labels = COORDL_LABELS_BOXES), read and checked at open:
 * item i's boxes are box[first[i] .. first[i + 1]), each cx, cy, w, h,
 * class as its label file gives them (normalized to the source image).
 * Read-only after open. */
typedef struct cdl__boxes {
    float (*box)[5];
    uint64_t *first;    /* num_items + 1                                  */
    uint64_t *bad;      /* per item: 0, or 1 + the string-arena offset of
                           why its label is bad (it is a bad sample)      */
    uint64_t dropped;   /* boxes beyond max_boxes                         */
    uint64_t bad_items; /* items with a bad label                         */
    uint64_t hash;      /* of every box and bad mark: group members compare */
} cdl__boxes;
/* A tar-shard item once indexed: everything a read needs, 24 bytes; its
 * name is not resident (names below). The same bytes are the items
 * section of a saved index (indexfile.c). */
typedef struct cdl__tar_ref {
    uint64_t offset; /* of the member's data in its shard               */
    uint64_t bytes;  /* the member's size                               */
    uint32_t shard;  /* index into tar_shards                           */
    int32_t label;
} cdl__tar_ref;
/* Where a tar item's .txt member (its box labels) lies in its shard: kept
 * from the scan for labels = COORDL_LABELS_BOXES (the compact index holds
 * no such member). bytes UINT32_MAX: none. */
typedef struct cdl__tar_txt {
    uint64_t offset;
    uint32_t bytes;
} cdl__tar_txt;

/* One llm.c token shard. */
typedef struct cdl__shard {
    uint64_t path_off;   /* into the string arena                          */
    uint64_t first_item; /* id of its first window                         */
    uint64_t nwindows;
    uint32_t tok_bytes;  /* 2 (uint16) or 4 (uint32)                       */
} cdl__shard;

/* A tar-shard source indexed lazily (docs/shuffle.md, "Shards indexed as
 * the window reaches them"): open lists the shards and reads none; a shard
 * is scanned when the shard-window order first needs its item count or
 * one of its items. Item ids are (shard << 32) | ordinal in the shard: unique
 * and stable whatever order the shards are reached in. A shard's count,
 * once known, is kept (O(shards)); its items (a block: refs and names) stay
 * resident while in use, at most max_resident blocks, the least recently
 * used dropped first and scanned again if needed. Everything is under mu:
 * readers copy what they need out. */
#define CDL_LAZY_UNKNOWN UINT32_MAX
#define CDL_LAZY_ID(shard, ordinal) (((uint64_t)(shard) << 32) | (uint64_t)(ordinal))
#define CDL_LAZY_SHARD(id) ((uint32_t)((id) >> 32))
#define CDL_LAZY_ORDINAL(id) ((uint32_t)((id) & 0xFFFFFFFFu))
typedef struct cdl__lazy_block {
    cdl__tar_ref *refs;  /* count of them, NULL: not resident              */
    uint32_t *name_offs; /* per item: its member name in names             */
    char *names;
    uint32_t count;
} cdl__lazy_block;
/* Scans shard s into *out (refs, names, count); on failure says why in err.
 * Set by tar.c, which owns the scan (index.c sits below it). */
typedef coordl_status (*cdl__lazy_scan_fn)(coordl *L, uint32_t shard, cdl__lazy_block *out, char *err,
                                          size_t errcap);
typedef struct cdl__lazy {
    size_t nshards;
    uint32_t *count;        /* per shard: items, or CDL_LAZY_UNKNOWN      */
    cdl__lazy_block *block; /* per shard                                  */
    uint64_t *used;         /* per shard: the tick of its last use         */
    uint8_t *scanning;      /* per shard: a thread is scanning it          */
    uint8_t *cached;        /* per shard: every item in the MinIO cache,
                               labels too (cache.c): no scan-ahead for it */
    uint32_t *resident_list; /* the shards whose block is resident        */
    size_t resident, max_resident;
    uint64_t tick;
    uint64_t counted, counted_items, counted_bytes; /* shards whose count is
                                       known, and their items' and data bytes
                                       (cdl__lazy_census)                 */
    uint64_t failed, failed_reported; /* shards whose first scan failed;
                                         those coordl_next has reported  */
    coordl_status first_fail_rc;
    char first_fail[CDL_ERRMSG_MAX];   /* the first one's message         */
    cdl__lazy_scan_fn scan;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* a scan ended                                */
    char **interned;        /* coordl_item_path's strings: kept until close */
    size_t ninterned, interned_cap;
} cdl__lazy;

/* The index module's state (index, tar and source fill it at open; it is
 * read-only after, so any thread reads it without a lock). */
typedef struct cdl__index {
    cdl__item *items;
    uint64_t num_items;
    char *strings;         /* the string arena: item and shard paths        */
    size_t strings_len, strings_cap;
    uint32_t num_classes;
    uint64_t dataset_bytes;
    cdl__shard *shards;    /* tokens pipeline only                         */
    size_t nshards;
    uint64_t *tar_shards;  /* tar sources: each shard's path (string arena) */
    size_t ntar_shards;
    cdl__tar_item *tar_items; /* tar sources while scanned: per item       */
    /* tar sources once indexed (items and tar_items are then NULL): */
    cdl__tar_ref *tar_refs;   /* per item                                  */
    const uint64_t *name_offs; /* per item: its "shard:member" in names    */
    const char *names;
    uint64_t names_len;
    void *image;              /* the saved index's bytes names point into: */
    size_t image_len;         /* a read-only mapping of index_path, or an  */
    int image_mapped;         /* allocation (no file; an MPI broadcast)    */
    int tar_refs_shared;      /* tar_refs point into a group's mapped image
                                 (not freed: indexfile.c's cdl__ix_adopt)  */
    cdl__boxes boxes;         /* labels = COORDL_LABELS_BOXES only         */
    cdl__tar_txt *tar_txt;    /* labels = COORDL_LABELS_BOXES, tar: per item */
    cdl__lazy *lazy;          /* a lazily indexed tar source, else NULL:
                                 items, tar_refs and names are then NULL
                                 and num_items is 0 until every shard's
                                 count is known                            */
} cdl__index;

#endif /* CDL_INDEX_STATE_H */
