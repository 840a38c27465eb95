/* SPDX-License-Identifier: MIT */
/* indexfile.h - the saved index of a tar-shard source: the types and functions other modules use (see indexfile.c). */
#ifndef CDL_INDEXFILE_H
#define CDL_INDEXFILE_H
#include "platform.h"

/* cdl__ix_check's verdicts besides 0 (sound) */
#define CDL_IX_FOREIGN 1
#define CDL_IX_CORRUPT 2

/* cdl__ix_adopt's `mapped`: where the image lives */
#define CDL_IX_HEAP 0          /* a cdl__malloc allocation L then owns       */
#define CDL_IX_MAPPED 1        /* a mapping of index_path: items copied      */
#define CDL_IX_MAPPED_SHARED 2 /* a mapping of a group's index: items stay   */

/* ---- interface ---- */
CDL_PRIVATE uint64_t cdl__ix_checksum(const cdl__u8 *p, size_t n);
CDL_PRIVATE int cdl__ix_check(const cdl__u8 *p, size_t n, const char *source, int audio, char *why, size_t cap);
CDL_PRIVATE void cdl__ix_release(coordl *L);
CDL_PRIVATE coordl_status cdl__ix_adopt(coordl *L, cdl__u8 *p, size_t n, int mapped);
CDL_PRIVATE int cdl__ix_write(const cdl__u8 *p, size_t n, const char *path, char *why, size_t cap);
CDL_PRIVATE coordl_status cdl__index_tar_saved(coordl *L, int kind, const char *text, size_t len);
CDL_PRIVATE int cdl__ix_group_path(const coordl *L, char *buf, size_t cap);
CDL_PRIVATE void cdl__ix_group_remove(const coordl *L);
#ifdef COORDL_MPI
CDL_PRIVATE coordl_status cdl__index_from_image(coordl *L, cdl__u8 *p, size_t n);
CDL_PRIVATE coordl_status cdl__index_from_shared(coordl *L, cdl__u8 *p, size_t n);
#endif
#endif /* CDL_INDEXFILE_H */
