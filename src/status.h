/* SPDX-License-Identifier: MIT */
/* status.h - status codes, errors, logging, allocation, counters: the types and functions other modules use (see status.c). */
#ifndef CDL_STATUS_H
#define CDL_STATUS_H
#include "platform.h"

/* Every counter, once: X(name, row, stats, epoch).
 *   row:   a worker counts it per prepared row (cdl__counters), added to
 *          the handle's and the epoch's totals when the row completes;
 *   stats: a field of coordl_stats and a key of coordl_stats_json;
 *   epoch: a field of coordl_epoch_stats and a key of its JSON.
 * In coordl_stats' field order (the JSON follows it). */
#define CDL_COUNTERS(X)                 \
    X(stall_ns, 0, 1, 1)                \
    X(compute_ns, 0, 1, 0)              \
    X(batches, 0, 1, 1)                 \
    X(items, 1, 1, 1)                   \
    X(cache_hits, 1, 1, 1)              \
    X(cache_misses, 1, 1, 1)            \
    X(cache_hit_bytes, 1, 1, 1)         \
    X(cache_bytes_used, 0, 1, 0)        \
    X(cache_items, 0, 1, 0)             \
    X(cache_bytes_budget, 0, 1, 0)      \
    X(dataset_bytes, 0, 1, 0)           \
    X(fetch_bytes, 1, 0, 1)             \
    X(storage_bytes, 1, 1, 1)           \
    X(storage_reads, 1, 1, 0)           \
    X(bad_samples, 1, 1, 1)             \
    X(read_ns, 1, 1, 0)                 \
    X(read_cache_ns, 1, 1, 1)           \
    X(read_storage_ns, 1, 1, 1)         \
    X(decode_ns, 1, 1, 1)               \
    X(augment_ns, 1, 1, 1)              \
    X(wait_slot_ns, 0, 1, 0)            \
    X(threads, 0, 1, 0)                 \
    X(pinned_bytes, 0, 1, 0)            \
    X(threads_bound, 0, 1, 0)           \
    X(items_prepared, 0, 1, 0)          \
    X(group_members, 0, 1, 0)           \
    X(peer_hits, 1, 1, 0)               \
    X(peer_bytes, 1, 1, 0)              \
    X(peer_fallbacks, 1, 1, 0)          \
    X(peer_served, 0, 1, 0)             \
    X(jpeg_rewrites, 1, 1, 1)           \
    X(jpeg_rewrites_idle, 1, 1, 0)      \
    X(jpeg_rewrite_ns, 1, 1, 1)         \
    X(jpeg_rewrite_failures, 1, 1, 0)   \
    X(jpeg_spliced, 1, 1, 1)            \
    X(jpeg_rewritten_items, 0, 1, 0)    \
    X(cache_item_bytes, 0, 1, 0)        \
    X(readahead_reads, 0, 1, 0)         \
    X(readahead_read_ns, 0, 1, 0)       \
    X(readahead_skips, 0, 1, 0)         \
    X(readahead_hits, 1, 1, 0)          \
    X(readahead_wait_ns, 1, 1, 0)

#define CDL_IF_0(...)
#define CDL_IF_1(...) __VA_ARGS__

/* What a worker counts while preparing one row. */
typedef struct cdl__counters {
#define CDL_COUNTER_FIELD(name, row, in_stats, epoch) CDL_IF_##row(uint64_t name;)
    CDL_COUNTERS(CDL_COUNTER_FIELD)
#undef CDL_COUNTER_FIELD
} cdl__counters;

typedef struct cdl__epoch_counters {
    uint64_t epoch;
    int used;
    coordl_epoch_stats s;
} cdl__epoch_counters;



/* Counters (under the stream's lock): totals and the last epochs'. */
typedef struct cdl__stats {
    coordl_stats st;
    cdl__epoch_counters epochs[CDL_EPOCH_STATS_KEPT];
} cdl__stats;

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
