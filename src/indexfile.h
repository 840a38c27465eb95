/* SPDX-License-Identifier: MIT */
/* indexfile.h - the saved index of a tar-shard source: the types and functions other modules use (see indexfile.c). */
#ifndef CDL_INDEXFILE_H
#define CDL_INDEXFILE_H
#include "platform.h"

/* cdl__ix_check's verdicts besides 0 (sound) */
#define CDL_IX_FOREIGN 1
#define CDL_IX_CORRUPT 2

/* ---- interface ---- */
CDL_PRIVATE uint64_t cdl__ix_checksum(const cdl__u8 *p, size_t n);
CDL_PRIVATE int cdl__ix_check(const cdl__u8 *p, size_t n, const char *source, int audio, char *why, size_t cap);
CDL_PRIVATE void cdl__ix_release(coordl *L);
CDL_PRIVATE coordl_status cdl__ix_adopt(coordl *L, cdl__u8 *p, size_t n, int mapped);
CDL_PRIVATE int cdl__ix_write(const cdl__u8 *p, size_t n, const char *path, char *why, size_t cap);
CDL_PRIVATE coordl_status cdl__index_tar_saved(coordl *L, int kind, const char *text, size_t len);
#ifdef COORDL_MPI
CDL_PRIVATE coordl_status cdl__index_from_image(coordl *L, cdl__u8 *p, size_t n);
#endif
#endif /* CDL_INDEXFILE_H */
