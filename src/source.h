/* SPDX-License-Identifier: MIT */
/* source.h - token shards, the source dispatcher, reading one item: the types and functions other modules use (see source.c). */
#ifndef CDL_SOURCE_H
#define CDL_SOURCE_H
#include "platform.h"
#include "source_state.h"
#include "worker_state.h"
#include "remote_state.h"
#include "http_state.h"
#include "uring_state.h"

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__read_item(const coordl *L, cdl__kept_file *kept, uint64_t id, cdl__u8 **buf, size_t *cap, int grow, int *too_big, uint64_t *len, uint64_t *storage_bytes, char *err, size_t errcap);
CDL_PRIVATE int cdl__read_item_async(const coordl *L, uint64_t id, cdl__u8 *dst, size_t cap, const void *owner, cdl__remote_done_fn done, void *arg);
CDL_PRIVATE int cdl__read_item_start(const coordl *L, cdl__uring *U, cdl__item_aread *a, uint64_t id, cdl__u8 *dst, size_t cap, coordl_status *rc, uint64_t *len, uint64_t *storage_bytes, char *err, size_t errcap, cdl__remote_done_fn done, void *arg);
CDL_PRIVATE coordl_status cdl__read_item_result(cdl__item_aread *a, int64_t result, uint64_t *got, char *why, size_t cap);
CDL_PRIVATE int cdl__read_item_submit(const coordl *L, cdl__item_aread *a, uint64_t id, cdl__u8 *dst, size_t cap, coordl_io_done_fn done, void *arg);
CDL_PRIVATE coordl_status cdl__read_file(cdl__worker *W, uint64_t id, cdl__bytes *out);
CDL_PRIVATE coordl_status cdl__index_source(coordl *L);
#endif /* CDL_SOURCE_H */
