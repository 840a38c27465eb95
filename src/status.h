/* SPDX-License-Identifier: MIT */
/* status.h - status codes, errors, logging, allocation, counters: the types and functions other modules use (see status.c). */
#ifndef CDL_STATUS_H
#define CDL_STATUS_H
#include "platform.h"
#include "status_state.h"

/* ---- interface ---- */
CDL_PRIVATE void cdl__free(const coordl *L, void *p);
CDL_PRIVATE void *cdl__malloc(const coordl *L, size_t n);
CDL_PRIVATE void *cdl__realloc(const coordl *L, void *p, size_t n);
#ifdef COORDL_DEBUG
CDL_PRIVATE void cdl__debug_assert(const coordl *L, int ok, const char *what);
CDL_PRIVATE int cdl__gettid(void);
#endif
CDL_PRIVATE coordl_status cdl__open_fail(coordl_status s, const char *fmt, ...);
CDL_PRIVATE void cdl__log(const coordl *L, coordl_log_level level, const char *fmt, ...);
CDL_PRIVATE int cdl__reserve(const coordl *L, void **buf, size_t *cap, size_t need);
CDL_PRIVATE void *cdl__calloc(const coordl *L, size_t count, size_t size);
CDL_PRIVATE void cdl__test_hook(coordl *L, const char *point);
CDL_PRIVATE void cdl__vformat(char *dst, size_t cap, const char *fmt, va_list ap);
CDL_PRIVATE void cdl__default_log(void *user, coordl_log_level level, const char *msg);
CDL_PRIVATE void cdl__default_free(void *u, void *p);
CDL_PRIVATE void *cdl__default_malloc(void *u, size_t n);
CDL_PRIVATE void *cdl__default_realloc(void *u, void *p, size_t n);
CDL_PRIVATE _Thread_local char cdl__open_errmsg[CDL_ERRMSG_MAX];
#endif /* CDL_STATUS_H */
