/* SPDX-License-Identifier: MIT */
/* cache.h - the MinIO cache: the types and functions other modules use (see cache.c). */
#ifndef CDL_CACHE_H
#define CDL_CACHE_H
#include "platform.h"
#include "cache_state.h"

/* ---- interface ---- */
CDL_PRIVATE _Atomic uint32_t *cdl__cache_reader(coordl *L, uint32_t k);
CDL_PRIVATE int cdl__cache_holds(const coordl *L, uint64_t id);
CDL_PRIVATE int cdl__cache_label(const coordl *L, uint64_t id, int32_t *label);
CDL_PRIVATE int cdl__cache_minio(const coordl *L);
#ifdef COORDL_MPI
CDL_PRIVATE uint32_t cdl__cache_room(const coordl *L, uint64_t id);
#endif
CDL_PRIVATE const cdl__u8 *cdl__cache_acquire_minio(coordl *L, _Atomic uint32_t *reader, uint64_t id, uint32_t *len,
                                               int *kind, uint32_t *cap);
CDL_PRIVATE void cdl__cache_admit_lru(coordl *L, uint64_t id, const cdl__u8 *bytes, size_t len);
CDL_PRIVATE int cdl__cache_admit_minio(coordl *L, uint64_t id, const cdl__u8 *bytes, size_t len, uint32_t *cap_out);
CDL_PRIVATE int cdl__cache_lookup_lru(coordl *L, uint64_t id, cdl__u8 *dst, size_t cap, uint32_t *len);
CDL_PRIVATE void cdl__cache_release_minio(_Atomic uint32_t *reader);
CDL_PRIVATE void cdl__cache_drop_member(coordl *L, int m);
#ifndef COORDL_NO_JPEGTURBO
CDL_PRIVATE int cdl__cache_claim_rewrite(coordl *L, uint64_t id);
CDL_PRIVATE void cdl__cache_unclaim_rewrite(coordl *L, uint64_t id);
CDL_PRIVATE void cdl__cache_keep_minio(coordl *L, uint64_t id);
CDL_PRIVATE int cdl__cache_replace_minio(coordl *L, const _Atomic uint32_t *self, uint64_t id, const cdl__u8 *bytes,
                                    size_t len);
#endif
CDL_PRIVATE coordl_status cdl__cache_clamp(coordl *L);
CDL_PRIVATE coordl_status cdl__cache_create(coordl *L);
CDL_PRIVATE void cdl__cache_destroy(coordl *L);
#endif /* CDL_CACHE_H */
