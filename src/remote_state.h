/* SPDX-License-Identifier: MIT */
/* remote_state.h - http(s):// and s3:// reads: the types remote.c owns (its
 * state, and the data it shares with other modules). handle.h composes the
 * states; remote.h declares the functions. The event loop's state is
 * private to remote.c (it holds libcurl's types, which no other module
 * sees). */
#ifndef CDL_REMOTE_STATE_H
#define CDL_REMOTE_STATE_H
#include "platform.h"

typedef struct cdl__rloop cdl__rloop;

/* A finished asynchronous read (cdl__remote_submit): its status, the bytes
 * it delivered, and on failure the message naming the URL. Runs on the
 * event-loop thread: it must not block, nor submit and wait. */
typedef void (*cdl__remote_done_ptr)(void *arg, coordl_status status, uint64_t got, const char *err);
typedef cdl__remote_done_ptr cdl__remote_done_fn; /* (a plain name: tools/check-layers.py finds its owner) */

/* Counters of a handle's event loop (coordl_stats remote_*). */
typedef struct cdl__remote_counters {
    uint64_t requests;      /* HTTP requests sent (retries included)      */
    uint64_t retries;       /* of them, retries after a 5xx or a dropped
                               connection                                 */
    uint64_t bytes;         /* body bytes received into callers' buffers  */
    uint64_t max_in_flight; /* most requests in flight at once            */
} cdl__remote_counters;

#endif /* CDL_REMOTE_STATE_H */
