/* SPDX-License-Identifier: MIT */
/*
 * worker.c - a worker's scratch.
 *
 * Owns:  cdl__worker: one per worker thread (and the consumer's helper),
 *        every buffer grown on demand and reused, so the steady state
 *        allocates nothing per item
 * Lock:  none: a worker's scratch is touched only by its own thread
 * Calls: status (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */
#include "platform.h"
#include "worker.h"
#include "status.h"

CDL_PRIVATE coordl_status cdl__worker_error(cdl__worker *W, coordl_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cdl__vformat(W->err, sizeof W->err, fmt, ap);
    va_end(ap);
    return s;
}

/* Item id's bytes from storage, through the reader, into *buf (of *cap
 * bytes): a plain item is its whole file, at the size it has now (it may
 * have changed since indexing); a token window and a tar member are a byte
 * range (their shard may not have shrunk). With grow, *buf is grown
 * through the allocator to fit; without (the read-ahead arena), an item
 * larger than *cap is not read and *too_big is set. *len receives the
 * item's bytes, *storage_bytes what the reader delivered. Errors name the
 * item: COORDL_ERR_IO (the reader, a file gone or shrunk), COORDL_ERR_CORRUPT
 * (empty, over max_item_bytes, a window cut short), COORDL_ERR_NOMEM. Any
 * thread; touches only its arguments. */
