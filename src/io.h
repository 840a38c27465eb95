/* SPDX-License-Identifier: MIT */
/* io.h - the storage seam (coordl_io): the types and functions other modules use (see io.c). */
#ifndef CDL_IO_H
#define CDL_IO_H
#include "platform.h"
#include "io_state.h"

/* ---- interface ---- */
CDL_PRIVATE void cdl__io_close(const coordl *L, void *file);
CDL_PRIVATE void cdl__kept_close(const coordl *L, cdl__kept_file *k);
CDL_PRIVATE void cdl__kept_free(const coordl *L, cdl__kept_file *k);
CDL_PRIVATE void cdl__io_sequential(const coordl *L, void *file);
CDL_PRIVATE void cdl__io_etag(const coordl *L, const void *file, char *out, size_t cap);
CDL_PRIVATE coordl_status cdl__io_open(const coordl *L, const char *path, void **file, uint64_t *size, char *why, size_t cap);
CDL_PRIVATE coordl_status cdl__io_read(const coordl *L, void *file, const char *path, void *buf, uint64_t len, uint64_t off, uint64_t *got, char *err, size_t cap);
CDL_PRIVATE int cdl__list_next(const char *text, size_t len, size_t *pos, cdl__list_line *out);
CDL_PRIVATE int cdl__list_path(const coordl *L, const char *list, const char *name, size_t n, char **buf, size_t *cap,
                               size_t *path_len);
CDL_PRIVATE coordl_status cdl__io_slurp(coordl *L, const char *path, const char *what, char **out, size_t *len);
CDL_PRIVATE const coordl_io cdl__posix_io;
CDL_PRIVATE void cdl__posix_close(void *user, void *file);
CDL_PRIVATE int cdl__posix_fd(void *file);
CDL_PRIVATE int cdl__posix_open_why(const char *path, void **file, uint64_t *size, const char **why);
#endif /* CDL_IO_H */
