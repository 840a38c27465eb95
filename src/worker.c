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
#include "worker_state.h"
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

/* ---- the JPEG rewrite budget: every count in one place -------------- */

#define CDL_BUDGET_WINDOW_NS 2000000000ull

/* A prepared row's CPU time, rewrites excluded; the window slides (halves)
 * once it holds more than CDL_BUDGET_WINDOW_NS. */
CDL_PRIVATE void cdl__budget_row(cdl__worker *W, uint64_t busy_ns) {
    cdl__rewrite_budget *b = &W->budget;
    b->busy_cpu += busy_ns;
    if (b->busy_cpu + b->rewrite_cpu > CDL_BUDGET_WINDOW_NS) {
        b->busy_cpu /= 2;
        b->rewrite_cpu /= 2;
        b->splice_win /= 2;
    }
}

#ifndef COORDL_NO_JPEGTURBO /* only libjpeg rewrites and splices */
/* A rewrite's CPU time (while the trainer waits: idle rewrites are free). */
CDL_PRIVATE void cdl__budget_rewrite(cdl__worker *W, uint64_t ns) { W->budget.rewrite_cpu += ns; }

/* The CPU time of one JPEG decode: spliced (from a rewrite) or plain. */
CDL_PRIVATE void cdl__budget_decode(cdl__worker *W, int spliced, uint64_t ns) {
    cdl__rewrite_budget *b = &W->budget;
    if (spliced) {
        b->splice_cpu += ns;
        b->splice_n++;
        b->splice_win++;
    } else {
        b->plain_cpu += ns;
        b->plain_n++;
    }
}

/* Whether a rewrite may be spent now, with budget fraction f. Over the
 * window, rewrites may take f of the worker's time plus the time the
 * spliced decodes in it saved (each against the worker's mean plain
 * decode): rewrite <= f x (busy + rewrite) + saved. So in any stretch of
 * its work it takes at most 1 / (1 - f) of the time the same samples
 * would take without random access: throughput stays >= (1 - f) of that
 * (0.92x at the default 0.08), epoch by epoch, from the first; and what
 * converted items save converts the rest sooner. */
CDL_PRIVATE int cdl__budget_allows(const cdl__worker *W, double f) {
    const cdl__rewrite_budget *b = &W->budget;
    if (f <= 0.0) return 0;
    if (f >= 1.0) return 1;
    double saved = 0.0;
    if (b->plain_n && b->splice_n) {
        const double plain = (double)b->plain_cpu / (double)b->plain_n, spliced = (double)b->splice_cpu / (double)b->splice_n;
        if (plain > spliced) saved = (plain - spliced) * (double)b->splice_win;
    }
    return (double)b->rewrite_cpu <= f * (double)(b->busy_cpu + b->rewrite_cpu) + saved;
}
#endif /* COORDL_NO_JPEGTURBO */
