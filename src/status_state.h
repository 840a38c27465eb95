/* SPDX-License-Identifier: MIT */
/* status_state.h - status codes, errors, logging, allocation, counters: the types status.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; status.h declares
 * the functions. */
#ifndef CDL_STATUS_STATE_H
#define CDL_STATUS_STATE_H
#include "platform.h"

/* Every counter, once: X(name, row, stats, epoch).
 *   row:   a worker counts it per prepared row (cdl__counters), added to
 *          the handle's and the epoch's totals when the row completes;
 *   stats: a field of coordl_stats and a key of coordl_stats_json;
 *   epoch: a field of coordl_epoch_stats and a key of its JSON.
 * In coordl_stats' field order (the JSON follows it). */
#define CDL_COUNTERS(X)                 \
    X(stall_ns, 0, 1, 1)                \
    X(compute_ns, 0, 1, 1)              \
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
    X(readahead_wait_ns, 1, 1, 0)       \
    X(cache_bytes_requested, 0, 1, 0)   \
    X(threads_requested, 0, 1, 0)

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

#endif /* CDL_STATUS_STATE_H */
