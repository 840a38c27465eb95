/* SPDX-License-Identifier: MIT */
/*
 * decode.c - the per-item decode dispatch.
 *
 * JPEG (recognised by content, jpeg.c): read the header, draw the crop,
 * pick the DCT scale, decode only the crop's columns and rows, then
 * resample straight into the batch row; a cached JPEG may be rewritten
 * with restart markers, then only the segments that cover the crop are
 * decoded. Other formats: stb_image (image.c), full decode. Here: which
 * decoder an item goes to, token windows, and the rewrite budget.
 *
 * Owns:  nothing of its own: chooses the decoder for an item, widens token
 *        windows, and keeps the JPEG rewrite budget in the worker's scratch
 * Lock:  none (cache entries by their atomic state)
 * Calls: status, worker, index, jpeg_layout, cache, fetch, image, jpeg,
 *        audio (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */
#include "platform.h"
#include "decode.h"
#include "status.h"
#include "status_state.h"
#include "worker.h"
#include "worker_state.h"
#include "index.h"
#include "jpeg_layout.h"
#include "jpeg_layout_state.h"
#include "cache.h"
#include "cache_state.h"
#include "fetch.h"
#include "image.h"
#include "jpeg.h"
#include "audio.h"
#include "handle.h"

#ifndef COORDL_NO_TOKENS
/* Tokens: widen the window into inputs and targets (shifted by one). */
static coordl_status cdl__decode_tokens(cdl__worker *W, const cdl__bytes *in, void *dst) {
    coordl *L = W->L;
    const uint32_t T = L->cfg.seq_len;
    int32_t *inputs = dst, *targets = W->targets;
    const size_t tb = in->len / (T + 1);
    uint64_t t0 = cdl__now_ns();
    /* one loop per token width and array, with no branch inside: the
     * compiler vectorizes them (a B = 128 batch is 8,000 tokens) */
    if (tb == 2) {
        for (uint32_t t = 0; t < T; t++) {
            uint16_t u;
            memcpy(&u, in->p + 2 * (size_t)t, 2);
            inputs[t] = u;
        }
        if (targets)
            for (uint32_t t = 0; t < T; t++) {
                uint16_t u;
                memcpy(&u, in->p + 2 * (size_t)(t + 1), 2);
                targets[t] = u;
            }
    } else {
        for (uint32_t t = 0; t < T; t++) {
            uint32_t u;
            memcpy(&u, in->p + 4 * (size_t)t, 4);
            inputs[t] = (int32_t)u;
        }
        if (targets)
            for (uint32_t t = 0; t < T; t++) {
                uint32_t u;
                memcpy(&u, in->p + 4 * (size_t)(t + 1), 4);
                targets[t] = (int32_t)u;
            }
    }
    W->row.decode_ns += cdl__now_ns() - t0;
    return COORDL_OK;
}
#else /* COORDL_NO_TOKENS: open refuses COORDL_PIPE_TOKENS (abi.c) */
static coordl_status cdl__decode_tokens(cdl__worker *W, const cdl__bytes *in, void *dst) {
    (void)in, (void)dst;
    return cdl__worker_error(W, COORDL_ERR_UNSUPPORTED, "tokens are not in this build (COORDL_NO_TOKENS)");
}
#endif /* COORDL_NO_TOKENS */

#ifndef COORDL_NO_JPEGTURBO /* else stb's JPEG decoder takes them */
static int cdl__is_jpeg(const cdl__bytes *in) {
    return in->len >= 3 && in->p[0] == 0xFF && in->p[1] == 0xD8 && in->p[2] == 0xFF;
}
#endif

/* The size an image's header gives, checked like a decode would (format,
 * sides, max_pixels); for coordl_sample_transform. */
CDL_PRIVATE coordl_status cdl__image_size(cdl__worker *W, const char *path, const cdl__bytes *in, int *iw, int *ih) {
    *iw = *ih = 0;
#ifndef COORDL_NO_JPEGTURBO
    if (cdl__is_jpeg(in)) {
        /* the JPEG header, with a throwaway decompressor */
        struct jpeg_decompress_struct jd;
        coordl_status rc;
        jd.err = jpeg_std_error(&W->jerr.pub);
        W->jerr.pub.error_exit = cdl__jpeg_error_exit;
        W->jerr.pub.emit_message = cdl__jpeg_emit_message; /* libjpeg's own prints warnings on stderr */
        jpeg_create_decompress(&jd);
        if (setjmp(W->jerr.jump) == 0) {
            jpeg_mem_src(&jd, in->p, (unsigned long)in->len);
            jpeg_read_header(&jd, TRUE);
            *iw = (int)jd.image_width;
            *ih = (int)jd.image_height;
            rc = cdl__check_image_size(W, path, *iw, *ih);
        } else {
            rc = cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: not a decodable JPEG: %s", path, W->jerr.msg);
        }
        jpeg_destroy_decompress(&jd);
        return rc;
    }
#endif
    return cdl__stb_header(W, path, in, iw, ih, NULL);
}

/* Decode and augment the bytes of item `id` (named path) into dst. */
static coordl_status cdl__decode_item(cdl__worker *W, const char *path, uint64_t epoch, uint64_t id,
                                      const cdl__bytes *in, void *dst) {
    switch (W->L->cfg.pipeline) {
    case COORDL_PIPE_TOKENS: return cdl__decode_tokens(W, in, dst);
    case COORDL_PIPE_AUDIO: return cdl__decode_wav(W, path, in, epoch, id, dst);
    default: break;
    }
#ifndef COORDL_NO_JPEGTURBO
    if (cdl__is_jpeg(in)) return cdl__decode_jpeg(W, path, in, epoch, id, dst, NULL);
#endif
    return cdl__decode_stb(W, path, in, epoch, id, dst);
}

/* The worker's JPEG decompressor, created once and reused. */
CDL_PRIVATE void cdl__worker_decoder_init(cdl__worker *W) {
#ifndef COORDL_NO_JPEGTURBO
    W->jd.err = jpeg_std_error(&W->jerr.pub);
    W->jerr.pub.error_exit = cdl__jpeg_error_exit;
    W->jerr.pub.emit_message = cdl__jpeg_emit_message;
    jpeg_create_decompress(&W->jd);
    W->jprogress.progress_monitor = cdl__jpeg_scan_limit;
    W->jd.progress = &W->jprogress;
    W->jd_ready = 1;
    W->jdest.pub.init_destination = cdl__jdest_init; /* rewrites write into W->rw (jpeg.c) */
    W->jdest.pub.empty_output_buffer = cdl__jdest_full;
    W->jdest.pub.term_destination = cdl__jdest_term;
#else
    (void)W;
#endif
}

#ifndef COORDL_NO_JPEGTURBO
/* Whether this worker may spend a rewrite now (its budget: worker.c). */
static int cdl__rewrite_allowed(const cdl__worker *W) {
    return cdl__budget_allows(W, W->L->cfg.jpeg_random_access ? W->L->cfg.jpeg_rewrite_budget : 0.0);
}

/* The outcome of a rewrite: made (and in the cache, or not yet: a reader
 * was there), or given up for good (the item stays as read). */
enum { CDL_REWRITE_GIVEN_UP = 0, CDL_REWRITE_CACHED = 1, CDL_REWRITE_NOT_YET = 2 };

/* Rewrites item id (its bytes in *in, fetched by W; W owns the entry's
 * rewrite claim) with restart markers and puts the rewrite in the cache in
 * place of the bytes. When the rewrite was made *in points to it (in
 * W->rw) and *lay holds its layout; otherwise the item stays as it was,
 * marked never to be tried again. Returns a CDL_REWRITE_* outcome. */
static int cdl__rewrite_item(cdl__worker *W, uint64_t id, cdl__bytes *in, cdl__jpeg_layout *lay, int idle) {
    coordl *L = W->L;
    const uint64_t t0 = cdl__now_ns(), cpu0 = cdl__thread_cpu_ns();
    int outcome = CDL_REWRITE_GIVEN_UP;
    int too_big = 0;
    /* no room reserved: only a rewrite that fits in place, so the smaller
     * optimized tables */
    const size_t n = cdl__jpeg_rewrite(W, in->p, in->len, W->fetch_cap, W->fetch_cap <= in->len, lay, &too_big);
    if (n) {
        /* a reader elsewhere (the same item in another epoch, another
         * member): it stays plain for now and is tried again later */
        outcome = CDL_REWRITE_NOT_YET;
        if (cdl__cache_replace_minio(L, W->held ? W->reader : NULL, id, W->rw, n)) {
            outcome = CDL_REWRITE_CACHED;
            W->row.jpeg_rewrites++;
            W->row.jpeg_rewrites_idle += (uint64_t)idle;
        }
        in->p = W->rw;
        in->len = n;
    } else {
        cdl__cache_keep_minio(L, id);
        W->row.jpeg_rewrite_failures++;
        cdl__log(L, COORDL_LOG_DEBUG, "%s: kept as it is, not rewritten for random access (%s)",
                 cdl__item_path(L, id), too_big ? "the rewrite outgrows its room in the cache" : "cannot rewrite it");
    }
    W->row.jpeg_rewrite_ns += cdl__now_ns() - t0;
    if (!idle) cdl__budget_rewrite(W, cdl__thread_cpu_ns() - cpu0); /* idle time is free */
    return outcome;
}

/* Idle time (no slot to fill: the ring is full, the trainer is the
 * bottleneck): rewrites one cached JPEG not rewritten yet, found from this
 * handle's cursor and claimed (one owner per rewrite), with no lock held.
 * Its counters go into *done. Returns 1 when an entry was settled (rewritten
 * or given up: more may remain), 0 when no work was done: none is left
 * unclaimed, or a reader was on the one tried (the worker then sleeps
 * until the next row; a loop here would spin a core while the trainer
 * idles). */
CDL_PRIVATE int cdl__rewrite_idle(cdl__worker *W, cdl__counters *done) {
    coordl *L = W->L;
    memset(done, 0, sizeof *done);
    if (!L->cache.entries || !W->reader || !L->cfg.jpeg_random_access || atomic_load(&L->S->cache_plain_items) == 0)
        return 0;
    for (uint64_t tries = 0; tries < L->index.num_items; tries++) {
        const uint64_t id = atomic_fetch_add(&L->cache.idle_cursor, 1) % L->index.num_items;
        if (atomic_load_explicit(&L->cache.entries[id].jpeg, memory_order_relaxed) != CDL_CE_PLAIN ||
            !cdl__cache_claim_rewrite(L, id))
            continue;
        uint32_t len, cap;
        int kind;
        const cdl__u8 *p = cdl__cache_acquire_minio(L, W->reader, id, &len, &kind, &cap);
        if (!p) { /* being admitted: not plain bytes yet */
            cdl__cache_unclaim_rewrite(L, id);
            continue;
        }
        W->held = id + 1;
        W->fetch_kind = kind;
        W->fetch_cap = cap;
        cdl__bytes in = {p, len};
        cdl__jpeg_layout lay;
        memset(&W->row, 0, sizeof W->row);
        const int outcome = cdl__rewrite_item(W, id, &in, &lay, 1);
        *done = W->row;
        cdl__fetch_done(W);
        return outcome != CDL_REWRITE_NOT_YET;
    }
    return 0;
}
#endif

/* Decodes and augments the fetched bytes of item `id` into dst: a cached
 * JPEG rewrite through a spliced crop, a plain cached JPEG rewritten first
 * when the budget allows, everything else as cdl__decode_item does. */
static coordl_status cdl__prepare_item_bytes(cdl__worker *W, uint64_t epoch, uint64_t id, void *dst,
                                             cdl__bytes *in) {
    coordl *L = W->L;
    const char *path = cdl__item_name(L, id, W->item_name, sizeof W->item_name);
#ifndef COORDL_NO_JPEGTURBO
    if (L->cfg.pipeline != COORDL_PIPE_TOKENS && L->cfg.pipeline != COORDL_PIPE_AUDIO && cdl__is_jpeg(in)) {
        cdl__jpeg_layout lay;
        if (W->fetch_kind == CDL_CE_RST && cdl__jpeg_walk(in->p, in->len, &lay) && lay.index_off)
            return cdl__decode_jpeg(W, path, in, epoch, id, dst, &lay);
        if (W->fetch_kind == CDL_CE_PLAIN && cdl__rewrite_allowed(W) && cdl__cache_claim_rewrite(L, id) &&
            cdl__rewrite_item(W, id, in, &lay, 0) != CDL_REWRITE_GIVEN_UP)
            return cdl__decode_jpeg(W, path, in, epoch, id, dst, &lay);
    }
#endif
    return cdl__decode_item(W, path, epoch, id, in, dst);
}

/* Fetch, decode and augment item `id` into dst. */
CDL_PRIVATE coordl_status cdl__prepare_item(cdl__worker *W, uint64_t epoch, uint64_t id, void *dst) {
    cdl__bytes in = {NULL, 0};
#ifndef COORDL_NO_JPEGTURBO
    const int budget = W->L->cfg.jpeg_random_access && W->L->cache.entries;
#else
    const int budget = 0; /* no rewrites without libjpeg: nothing to account */
#endif
    const uint64_t cpu0 = budget ? cdl__thread_cpu_ns() : 0, rw0 = W->budget.rewrite_cpu;
    const uint64_t bad_label = W->L->index.boxes.bad ? W->L->index.boxes.bad[id] : 0;
    if (bad_label) /* found at open (source.c): a bad sample like a corrupt image, nothing fetched */
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s", W->L->index.strings + bad_label - 1);
    coordl_status rc = cdl__fetch(W, id, &in);
    if (rc == COORDL_OK) rc = cdl__prepare_item_bytes(W, epoch, id, dst, &in);
    cdl__fetch_done(W);
    if (budget) cdl__budget_row(W, cdl__thread_cpu_ns() - cpu0 - (W->budget.rewrite_cpu - rw0));
    return rc;
}

