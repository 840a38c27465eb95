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
} cdl__tar_item;

/* A tar-shard item once indexed: everything a read needs, 24 bytes; its
 * name is not resident (names below). The same bytes are the items
 * section of a saved index (indexfile.c). */
typedef struct cdl__tar_ref {
    uint64_t offset; /* of the member's data in its shard               */
    uint64_t bytes;  /* the member's size                               */
    uint32_t shard;  /* index into tar_shards                           */
    int32_t label;
} cdl__tar_ref;
/* One llm.c token shard. */
typedef struct cdl__shard {
    uint64_t path_off;   /* into the string arena                          */
    uint64_t first_item; /* id of its first window                         */
    uint64_t nwindows;
    uint32_t tok_bytes;  /* 2 (uint16) or 4 (uint32)                       */
} cdl__shard;

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
} cdl__index;

#endif /* CDL_INDEX_STATE_H */
