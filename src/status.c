/* SPDX-License-Identifier: MIT */
/*
 * status.c - status codes, errors, logging, allocation, counters.
 *
 * Every failure becomes a coordl_status plus a message naming the file
 * or setting. Memory comes from the configured allocator (all three
 * hooks or none); nothing here calls exit().
 *
 * Owns:  the handle's error detail (L->errmsg), its allocator hooks
 *        (L->alloc), its counters (L->stats), and the one state outside any
 *        handle: the thread-local message of the last failed coordl_open
 * Lock:  L->stats under the stream's lock; L->errmsg is written by the
 *        thread whose call failed (the API is one consumer thread); the
 *        allocator is fixed at open
 * Calls: none (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */
#include "platform.h"
#include "status.h"
#include "handle.h"

/* The message of the last failed coordl_open on this thread (the handle
 * does not exist yet, so it cannot hold it; tj3GetErrorStr(NULL) does the
 * same). This is the only state outside a handle. */
CDL_PRIVATE _Thread_local char cdl__open_errmsg[CDL_ERRMSG_MAX];

CDL_PRIVATE void *cdl__default_malloc(void *u, size_t n) { (void)u; return malloc(n); }
CDL_PRIVATE void *cdl__default_realloc(void *u, void *p, size_t n) { (void)u; return realloc(p, n); }
CDL_PRIVATE void cdl__default_free(void *u, void *p) { (void)u; free(p); }

CDL_PRIVATE void cdl__default_log(void *user, coordl_log_level level, const char *msg) {
    static const char *names[] = {"error", "warning", "info", "debug"};
    (void)user;
    fprintf(stderr, "coordl %s: %s\n", names[level <= COORDL_LOG_DEBUG ? level : 3], msg);
}

CDL_PRIVATE void *cdl__malloc(const coordl *L, size_t n) {
    return L->alloc.malloc_fn(L->alloc.user, n ? n : 1);
}
CDL_PRIVATE void *cdl__calloc(const coordl *L, size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) return NULL;
    void *p = cdl__malloc(L, count * size);
    if (p) memset(p, 0, count * size);
    return p;
}
CDL_PRIVATE void *cdl__realloc(const coordl *L, void *p, size_t n) {
    return L->alloc.realloc_fn(L->alloc.user, p, n ? n : 1);
}
CDL_PRIVATE void cdl__free(const coordl *L, void *p) {
    if (p) L->alloc.free_fn(L->alloc.user, p);
}

#ifdef COORDL_DEBUG
CDL_PRIVATE int cdl__gettid(void) {
#ifdef SYS_gettid
    return (int)syscall(SYS_gettid);
#else
    return 0;
#endif
}
#endif

CDL_PRIVATE void cdl__test_hook(coordl *L, const char *point) {
    if (L->cfg.test_hook) L->cfg.test_hook(L->cfg.test_hook_user, point);
}

CDL_PRIVATE void cdl__vformat(char *dst, size_t cap, const char *fmt, va_list ap) {
    vsnprintf(dst, cap, fmt, ap);
}

CDL_PRIVATE void cdl__log(const coordl *L, coordl_log_level level, const char *fmt, ...) {
    char msg[CDL_ERRMSG_MAX + 64];
    va_list ap;
    if (!L->cfg.log || level > L->cfg.log_level) return;
    va_start(ap, fmt);
    cdl__vformat(msg, sizeof msg, fmt, ap);
    va_end(ap);
    L->cfg.log(L->cfg.log_user, level, msg);
}

/* Record the detail of an open failure and return its status. */
CDL_PRIVATE coordl_status cdl__open_fail(coordl_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cdl__vformat(cdl__open_errmsg, sizeof cdl__open_errmsg, fmt, ap);
    va_end(ap);
    return s;
}

/* Grow *buf to at least need bytes (amortised doubling); 0 on failure. */
CDL_PRIVATE int cdl__reserve(const coordl *L, void **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 1;
    size_t ncap = *cap ? *cap : 4096;
    while (ncap < need) ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    void *p = cdl__realloc(L, *buf, ncap);
    if (!p) return 0;
    *buf = p;
    *cap = ncap;
    return 1;
}

#ifdef COORDL_DEBUG
/* COORDL_DEBUG: a broken invariant stops the process here, where it broke,
 * instead of as a wrong batch much later (release builds compile it out). */
CDL_PRIVATE void cdl__debug_assert(const coordl *L, int ok, const char *what) {
    (void)L;
    if (ok) return;
    fprintf(stderr, "coordl (COORDL_DEBUG): %s\n", what);
    abort();
}
#endif /* COORDL_DEBUG */
