/* SPDX-License-Identifier: MIT */
/* remote.h - http(s):// and s3:// reads: the functions other modules use (see remote.c). */
#ifndef CDL_REMOTE_H
#define CDL_REMOTE_H
#include "platform.h"
#include "remote_state.h"
#include "http_state.h"

/* ---- interface ---- */
CDL_PRIVATE int cdl__remote_is_url(const char *path);
CDL_PRIVATE coordl_status cdl__remote_open(const coordl *L, const char *url, void **file, uint64_t *size, char *why, size_t cap);
CDL_PRIVATE coordl_status cdl__remote_read(const coordl *L, void *file, void *buf, uint64_t len, uint64_t off, uint64_t *got, char *err, size_t cap);
CDL_PRIVATE coordl_status cdl__remote_list(const coordl *L, const char *url, char **text, size_t *len, char *why, size_t cap);
CDL_PRIVATE void cdl__remote_close(const coordl *L, void *file);
CDL_PRIVATE void cdl__remote_scan_begin(const coordl *L, const char *const *urls, size_t n);
CDL_PRIVATE void cdl__remote_scan_end(const coordl *L);
CDL_PRIVATE void cdl__remote_sequential(void *file);
CDL_PRIVATE void cdl__remote_etag(const void *file, char *out, size_t cap);
CDL_PRIVATE int cdl__remote_submit(const coordl *L, const char *url, uint64_t off, uint64_t len, void *dst, const void *owner, cdl__remote_done_fn done, void *arg);
CDL_PRIVATE void cdl__remote_cancel(const coordl *L, const void *owner);
CDL_PRIVATE void cdl__remote_counters_get(const coordl *L, cdl__remote_counters *out);
CDL_PRIVATE void cdl__remote_destroy(coordl *L);
#endif /* CDL_REMOTE_H */
