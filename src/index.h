/* SPDX-License-Identifier: MIT */
/* index.h - the item table: the types and functions other modules use (see index.c). */
#ifndef CDL_INDEX_H
#define CDL_INDEX_H
#include "platform.h"


typedef struct cdl__item {
    uint64_t path_off; /* into the string arena                        */
    uint64_t bytes;    /* encoded size at indexing                     */
    int32_t label;
} cdl__item;

/* Where a tar-shard item's bytes are (tar sources only; beside the items
 * so that other sources pay nothing for it). */
typedef struct cdl__tar_item {
    uint64_t offset; /* of the member's data in its shard               */
    uint32_t shard;  /* index into tar_shards                           */
} cdl__tar_item;
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
    cdl__tar_item *tar_items; /* tar sources: per item                    */
} cdl__index;

/* ---- interface ---- */
CDL_PRIVATE int cdl__strings_append(coordl *L, const char *s, size_t n, uint64_t *off);
CDL_PRIVATE int cdl__wanted_file(const coordl *L, const char *name);
CDL_PRIVATE coordl_status cdl__index_image_folder(coordl *L, const char *root);
CDL_PRIVATE coordl_status cdl__index_list_text(coordl *L, const char *list, const char *text, size_t len);
CDL_PRIVATE const char *cdl__item_path(const coordl *L, uint64_t id);
CDL_PRIVATE const cdl__shard *cdl__shard_of(const coordl *L, uint64_t id);
CDL_PRIVATE uint64_t cdl__item_bytes(const coordl *L, uint64_t id);
CDL_PRIVATE int32_t cdl__item_label(const coordl *L, uint64_t id);
#endif /* CDL_INDEX_H */
