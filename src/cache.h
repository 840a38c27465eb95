/* SPDX-License-Identifier: MIT */
/* cache.h - the MinIO cache: the types and functions other modules use (see cache.c). */
#ifndef CDL_CACHE_H
#define CDL_CACHE_H
#include "platform.h"
#include "cache_state.h"

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
