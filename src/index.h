/* SPDX-License-Identifier: MIT */
/* index.h - the item table: the types and functions other modules use (see index.c). */
#ifndef CDL_INDEX_H
#define CDL_INDEX_H
#include "platform.h"
#include "index_state.h"

/* ---- interface ---- */
CDL_PRIVATE int cdl__strings_append(coordl *L, const char *s, size_t n, uint64_t *off);
CDL_PRIVATE int cdl__wanted_file(const coordl *L, const char *name);
CDL_PRIVATE coordl_status cdl__index_image_folder(coordl *L, const char *root);
CDL_PRIVATE coordl_status cdl__index_list_text(coordl *L, const char *list, const char *text, size_t len);
CDL_PRIVATE const char *cdl__item_path(const coordl *L, uint64_t id);
CDL_PRIVATE const char *cdl__item_name(const coordl *L, uint64_t id, char *buf, size_t cap);
CDL_PRIVATE const cdl__shard *cdl__shard_of(const coordl *L, uint64_t id);
CDL_PRIVATE uint64_t cdl__item_bytes(const coordl *L, uint64_t id);
CDL_PRIVATE int32_t cdl__item_label(const coordl *L, uint64_t id);
CDL_PRIVATE coordl_status cdl__lazy_init(coordl *L, cdl__lazy_scan_fn scan, size_t max_resident);
CDL_PRIVATE void cdl__lazy_free(coordl *L);
CDL_PRIVATE void cdl__lazy_block_free(const coordl *L, cdl__lazy_block *b);
CDL_PRIVATE void cdl__lazy_adopt(const coordl *L, uint32_t s, cdl__lazy_block *b);
CDL_PRIVATE coordl_status cdl__lazy_count(const coordl *L, uint32_t s, uint32_t *count, char *err, size_t errcap);
CDL_PRIVATE coordl_status cdl__lazy_census(const coordl *L, size_t most, uint64_t *items, uint64_t *bytes,
                                      uint64_t *counted, int *exact);
CDL_PRIVATE int cdl__lazy_id_known(const coordl *L, uint64_t id);
CDL_PRIVATE int cdl__lazy_new_failure(const coordl *L, coordl_status *rc, char *msg, size_t cap);
CDL_PRIVATE int cdl__lazy_prefetch(const coordl *L, uint32_t s);
CDL_PRIVATE int cdl__lazy_ready(const coordl *L, uint32_t s);
CDL_PRIVATE coordl_status cdl__lazy_labels(const coordl *L, uint32_t s, int32_t *out, uint32_t n);
CDL_PRIVATE void cdl__lazy_mark_cached(const coordl *L, uint32_t s);
CDL_PRIVATE const cdl__tar_ref *cdl__tar_ref_of(const coordl *L, uint64_t id, cdl__tar_ref *copy, coordl_status *rc,
                                                char *err, size_t errcap);
CDL_PRIVATE coordl_status cdl__lazy_ref(const coordl *L, uint64_t id, cdl__tar_ref *ref, char *name, size_t namecap,
                                        char *err, size_t errcap);
#endif /* CDL_INDEX_H */
