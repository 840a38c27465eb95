/* SPDX-License-Identifier: MIT */
/* uring_state.h - local reads in flight on io_uring: the types uring.c owns
 * (its state, and the data it shares with other modules). handle.h composes
 * the states; uring.h declares the functions. The ring itself is private to
 * uring.c (it holds liburing's types, which no other module sees). */
#ifndef CDL_URING_STATE_H
#define CDL_URING_STATE_H
#include "platform.h"

typedef struct cdl__uring cdl__uring;
typedef struct cdl__uring_req cdl__uring_req;

/* A finished read: err is 0 or an errno; q->got the bytes read (fewer than
 * q->len: the file ended there). Runs on the ring's completion thread: it
 * must not block, nor submit and wait. */
typedef void (*cdl__uring_done_ptr)(cdl__uring_req *q, int err);
typedef cdl__uring_done_ptr cdl__uring_done_fn; /* (a plain name: tools/check-layers.py finds its owner) */

/* One read of [off, off + len) of fd into dst, owned by the caller (it
 * lives in the caller's memory from submit to done: nothing is allocated
 * per read). Short reads are continued by the ring until len bytes or the
 * end of the file. */
struct cdl__uring_req {
    int fd;
    cdl__u8 *dst;
    uint64_t len, off;
    uint64_t got;            /* bytes read so far                        */
    cdl__uring_done_fn done;
};

/* Counters of a handle's ring (coordl_stats readahead_*). */
typedef struct cdl__uring_counters {
    uint64_t reads;          /* reads submitted (continuations not counted) */
    uint64_t max_in_flight;  /* most reads in the ring at once              */
} cdl__uring_counters;

#endif /* CDL_URING_STATE_H */
