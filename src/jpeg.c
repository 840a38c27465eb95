/* SPDX-License-Identifier: MIT */
/*
 * jpeg.c - libjpeg decode and JPEG random access.
 *
 * Owns:  the worker's libjpeg objects (W->jd, W->jc and their error
 *        managers); ROI and DCT-scaled decode, restart-marker rewrites and
 *        spliced crops
 * Lock:  none: a worker's decoder is its own
 * Calls: status, worker, jpeg_layout, plan, resample, image (lower layers
 *        only: src/modules.txt; tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "jpeg.h"
#include "status.h"
#include "worker.h"
#include "worker_state.h"
#include "jpeg_layout.h"
#include "jpeg_layout_state.h"
#include "plan.h"
#include "plan_state.h"
#include "resample.h"
#include "resample_state.h"
#include "image.h"
#include "image_state.h"
#include "handle.h"

#ifndef COORDL_NO_JPEGTURBO
CDL_PRIVATE void cdl__jpeg_scan_limit(j_common_ptr cinfo) {
    if (cinfo->is_decompressor && ((j_decompress_ptr)cinfo)->input_scan_number > CDL_JPEG_MAX_SCANS) {
        struct cdl__jpeg_err *e = (struct cdl__jpeg_err *)cinfo->err;
        snprintf(e->msg, sizeof e->msg, "more than %d scans", CDL_JPEG_MAX_SCANS);
        longjmp(e->jump, 1);
    }
}

/* What libjpeg will allocate for this decode beyond small tables: the
 * whole-image coefficient arrays of a multi-scan (progressive or
 * non-interleaved) file, 128 bytes per block, and its strip buffers (a
 * few block rows across the image; an estimate). After
 * jpeg_calc_output_dimensions. */
static uint64_t cdl__jpeg_need(j_decompress_ptr jd) {
    uint64_t need = 0;
    for (int c = 0; c < jd->num_components; c++) {
        const jpeg_component_info *ci = &jd->comp_info[c];
        if (jpeg_has_multiple_scans(jd)) {
            const uint64_t bw = (ci->width_in_blocks + (JDIMENSION)ci->h_samp_factor - 1) / (JDIMENSION)ci->h_samp_factor *
                                (JDIMENSION)ci->h_samp_factor;
            const uint64_t bh = (ci->height_in_blocks + (JDIMENSION)ci->v_samp_factor - 1) / (JDIMENSION)ci->v_samp_factor *
                                (JDIMENSION)ci->v_samp_factor;
            need += bw * bh * sizeof(JBLOCK);
        }
        need += (uint64_t)ci->width_in_blocks * DCTSIZE * (uint64_t)ci->v_samp_factor * DCTSIZE * 3;
    }
    need += (uint64_t)jd->output_width * 4 * (uint64_t)jd->max_v_samp_factor * DCTSIZE * 2;
    return need;
}

CDL_PRIVATE void cdl__jpeg_error_exit(j_common_ptr cinfo) {
    struct cdl__jpeg_err *e = (struct cdl__jpeg_err *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, e->msg);
    longjmp(e->jump, 1);
}

CDL_PRIVATE void cdl__jpeg_emit_message(j_common_ptr cinfo, int level) {
    struct cdl__jpeg_err *e = (struct cdl__jpeg_err *)cinfo->err;
    if (level >= 0) return; /* trace messages */
    int code = cinfo->err->msg_code;
    /* Data that ends early or is damaged would otherwise decode as grey:
     * report it as a corrupt sample. Extraneous bytes are harmless. */
    if (code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER || code == JWRN_HUFF_BAD_CODE ||
        code == JWRN_MUST_RESYNC) {
        if (!e->fatal_warning) (*cinfo->err->format_message)(cinfo, e->msg);
        e->fatal_warning = 1;
    }
    if (code != JWRN_EXTRANEOUS_DATA) e->guessed = 1;
    cinfo->err->num_warnings++;
}

static int cdl__jpeg_has_eoi(const cdl__u8 *p, size_t len, size_t from) {
    /* 0xFF 0xD9 cannot occur inside entropy-coded data (0xFF is stuffed),
     * so its absence after the first scan means the file was cut short. */
    for (size_t i = len; i >= from + 2; i--)
        if (p[i - 2] == 0xFF && p[i - 1] == 0xD9) return 1;
    return 0;
}

static void cdl__cmyk_row_to_rgb(const cdl__u8 *in, cdl__u8 *out, int n, int inverted) {
    for (int x = 0; x < n; x++) {
        int c = in[4 * x], m = in[4 * x + 1], y = in[4 * x + 2], k = in[4 * x + 3];
        if (!inverted) { c = 255 - c; m = 255 - m; y = 255 - y; k = 255 - k; }
        /* now "ink absent" values: R = (255 - C)(255 - K) / 255 */
        out[3 * x] = (cdl__u8)((c * k + 127) / 255);
        out[3 * x + 1] = (cdl__u8)((m * k + 127) / 255);
        out[3 * x + 2] = (cdl__u8)((y * k + 127) / 255);
    }
}

/* Pixels of context the chroma upsampler reads around a decoded region
 * (after jpeg_calc_output_dimensions). libjpeg-turbo's fancy upsampling
 * (h2v1, h2v2) takes each output pixel from its chroma sample and the
 * nearest neighbouring one, so an edge pixel needs the chroma sample one
 * output pixel beyond it; jpeg_skip_scanlines into the middle of a chroma
 * row pair needs one row more. Measured over every region of 4:2:0, 4:2:2,
 * 4:4:0, 4:1:1, 4:4:4, gray, CMYK and YCCK sources at each DCT scale: 2
 * pixels make every region equal to a full decode's, 1 left 0.1% of them
 * off (tests/test_jpeg_exact.c). At 1/8 libjpeg does not upsample fancily
 * (and at 1/2 and 1/4 4:2:0 chroma comes out of the IDCT at full size), so
 * no context is needed there; the margin is kept for every scale below 1/8
 * since it costs one more iMCU only when the crop ends near one. */
static int cdl__jpeg_context_margin(const struct jpeg_decompress_struct *jd, int d) {
    if (d >= 8) return 0;
    for (int c = 0; c < jd->num_components; c++)
        if (jd->comp_info[c].h_samp_factor != jd->max_h_samp_factor ||
            jd->comp_info[c].v_samp_factor != jd->max_v_samp_factor)
            return 2;
    return 0;
}

/* A component's DCT scaled size and the smallest one (after
 * jpeg_calc_output_dimensions), under either libjpeg API. */
#if JPEG_LIB_VERSION >= 70
#define CDL_JPEG_SCALED_W(ci) ((ci)->DCT_h_scaled_size)
#define CDL_JPEG_SCALED_H(ci) ((ci)->DCT_v_scaled_size)
#define CDL_JPEG_MIN_SCALED_W(jd) ((jd)->min_DCT_h_scaled_size)
#define CDL_JPEG_MIN_SCALED_H(jd) ((jd)->min_DCT_v_scaled_size)
#else
#define CDL_JPEG_SCALED_W(ci) ((ci)->DCT_scaled_size)
#define CDL_JPEG_SCALED_H(ci) ((ci)->DCT_scaled_size)
#define CDL_JPEG_MIN_SCALED_W(jd) ((jd)->min_DCT_scaled_size)
#define CDL_JPEG_MIN_SCALED_H(jd) ((jd)->min_DCT_scaled_size)
#endif

/* Whether jpeg_crop_scanline gives a full decode's pixels for this layout
 * at this scale (after jpeg_calc_output_dimensions); where it does not,
 * a plain decode takes the whole width. The rule is measured, not
 * derived: with libjpeg-turbo 2.1, over every 3- and 4-component layout
 * with sampling factors 1..4 (311 and 68 of them) at each DCT scale,
 * random crops widened by cdl__jpeg_context_margin came out equal to a
 * full decode except where
 *  - components are upsampled by two different ratios (luma 4x1 with
 *    chroma 2x1 and 1x1: 1 crop in 700 off even at 1/1), or
 *  - fancy upsampling is on (below 1/8) and a component is both enlarged
 *    by the IDCT and still upsampled: 4x2 (4:1:0) and 2x4 luma at 1/2
 *    and 1/4 (chroma comes out of the IDCT at twice its size, then is
 *    upsampled 2x1): most crops off, by up to a whole colour.
 * The rule below refuses both; it also refuses some layouts that were
 * exact (4x1 with chroma 2x2 at 1/1), which costs only speed.
 * jpeg_skip_scanlines was exact in every case. tests/test_jpeg_exact.c
 * holds the layouts found in files. */
static int cdl__jpeg_crop_is_exact(const struct jpeg_decompress_struct *jd) {
    const int min_w = CDL_JPEG_MIN_SCALED_W(jd), min_h = CDL_JPEG_MIN_SCALED_H(jd);
    int up_h = 0, up_v = 0; /* the factors of the upsampled components */
    for (int c = 0; c < jd->num_components; c++) {
        const jpeg_component_info *ci = &jd->comp_info[c];
        if (ci->h_samp_factor == jd->max_h_samp_factor && ci->v_samp_factor == jd->max_v_samp_factor) continue;
        if (up_h && (ci->h_samp_factor != up_h || ci->v_samp_factor != up_v)) return 0;
        up_h = ci->h_samp_factor;
        up_v = ci->v_samp_factor;
        const int sw = CDL_JPEG_SCALED_W(ci), sh = CDL_JPEG_SCALED_H(ci);
        const int enlarged = sw > min_w || sh > min_h;
        const int upsampled = ci->h_samp_factor * sw != jd->max_h_samp_factor * min_w ||
                              ci->v_samp_factor * sh != jd->max_v_samp_factor * min_h;
        if (min_w > 1 && enlarged && upsampled) return 0;
    }
    return 1;
}

/* The body that may longjmp: only plain locals that are not changed after
 * setjmp, per C11 7.13.2.1. */
/* A libjpeg destination that writes into worker scratch and stops the
 * rewrite (through the error handler) when the output outgrows the room
 * the item has: nothing is allocated behind coordl's back. */
CDL_PRIVATE void cdl__jdest_init(j_compress_ptr c) {
    struct cdl__jdest *d = (struct cdl__jdest *)c->dest;
    d->pub.next_output_byte = d->buf;
    d->pub.free_in_buffer = d->cap;
}
CDL_PRIVATE boolean cdl__jdest_full(j_compress_ptr c) {
    ((struct cdl__jdest *)c->dest)->overflow = 1;
    ERREXIT(c, JERR_BUFFER_SIZE);
    return FALSE;
}
CDL_PRIVATE void cdl__jdest_term(j_compress_ptr c) { (void)c; }

/* The Huffman tables a baseline source uses are libjpeg's standard ones
 * (what jpeg_copy_critical_parameters put in the fresh compress object):
 * then a standard-table rewrite reproduces the source's code lengths. */
static int cdl__same_huff(const JHUFF_TBL *a, const JHUFF_TBL *b) {
    if (!a || !b || memcmp(a->bits, b->bits, sizeof a->bits) != 0) return 0;
    int n = 0;
    for (int i = 1; i <= 16; i++) n += a->bits[i];
    return n <= 256 && memcmp(a->huffval, b->huffval, (size_t)n) == 0;
}
static int cdl__standard_tables(const struct jpeg_decompress_struct *jd, const struct jpeg_compress_struct *jc) {
    if (jd->progressive_mode || jd->arith_code) return 0;
    for (int c = 0; c < jd->num_components; c++) {
        const jpeg_component_info *s = &jd->comp_info[c], *t = &jc->comp_info[c];
        if (s->dc_tbl_no < 0 || s->dc_tbl_no >= NUM_HUFF_TBLS || s->ac_tbl_no < 0 || s->ac_tbl_no >= NUM_HUFF_TBLS ||
            t->dc_tbl_no < 0 || t->dc_tbl_no >= NUM_HUFF_TBLS || t->ac_tbl_no < 0 || t->ac_tbl_no >= NUM_HUFF_TBLS ||
            !cdl__same_huff(jd->dc_huff_tbl_ptrs[s->dc_tbl_no], jc->dc_huff_tbl_ptrs[t->dc_tbl_no]) ||
            !cdl__same_huff(jd->ac_huff_tbl_ptrs[s->ac_tbl_no], jc->ac_huff_tbl_ptrs[t->ac_tbl_no]))
            return 0;
    }
    return 1;
}

/* Fills the row index of a rewrite in W->rw: walks every segment, checking
 * each restart marker's number, so that a splice can trust the layout. */
static int cdl__rst_index(cdl__u8 *p, size_t len, cdl__jpeg_layout *lay) {
    if (!cdl__jpeg_walk(p, len, lay) || !lay->index_off || lay->interval == 0 ||
        lay->mcus_per_row % lay->interval != 0)
        return 0;
    const uint32_t segs_per_row = lay->mcus_per_row / lay->interval;
    const uint64_t nseg = (uint64_t)segs_per_row * lay->mcu_rows;
    if (lay->index_len != 4 + CDL_RST_HEAD + 4u * (size_t)lay->mcu_rows) return 0;
    cdl__u8 *tab = p + lay->index_off + 4 + CDL_RST_HEAD;
    size_t at = lay->data_off;
    uint64_t seg = 0;
    for (uint32_t r = 0; r < lay->mcu_rows; r++) {
        const uint64_t off = at - lay->data_off;
        if (off > UINT32_MAX) return 0;
        for (int b = 0; b < 4; b++) tab[4 * r + (uint32_t)b] = (cdl__u8)(off >> (8 * b));
        for (uint32_t s = 0; s < segs_per_row; s++, seg++) {
            for (;;) {
                const cdl__u8 *q = at < len ? memchr(p + at, 0xFF, len - at) : NULL;
                if (!q || q + 1 >= p + len) return 0;
                at = (size_t)(q - p);
                if (q[1] == 0x00) { at += 2; continue; }
                const int want = seg + 1 == nseg ? 0xD9 : 0xD0 + (int)(seg & 7);
                if (q[1] != want) return 0;
                at += 2;
                break;
            }
        }
    }
    return at == len;
}

/* Starts an image on a fresh decompress object. libjpeg keeps the
 * Huffman and quantization tables an image defines in the object for the
 * next one (for abbreviated streams), and fills only empty Huffman slots
 * with the standard tables: so on a reused object a file that uses a table
 * it does not define (Motion-JPEG style, which a fresh object reads with
 * the standard table, or an error for a quantization table) decoded with
 * whatever the worker's previous image had defined, and batches depended
 * on which worker decoded what before (CI's fuzz_random_access found it:
 * a spliced crop's optimized DC table 1 decoding the next file). A
 * destroy and create costs 0.08 us here and reuses the memory just
 * freed; bench/compare_revs.sh showed no change in images/s. Call after setjmp: creating can fail (out of memory), and a half
 * made object is one jpeg_abort and jpeg_destroy accept. */
static void cdl__jpeg_fresh_decoder(cdl__worker *W) {
    struct jpeg_progress_mgr *const progress = W->jd.progress; /* the scan limit (decode.c) */
    jpeg_destroy_decompress(&W->jd);
    jpeg_create_decompress(&W->jd); /* keeps W->jd.err */
    W->jd.progress = progress;
}

/* Whether every coefficient of the image fits what a baseline rewrite can
 * code: |AC| <= 1023 (a 10-bit category) and DC in [-1024, 1023], so that
 * any DC difference, whatever the restart markers around it, is at most
 * 11 bits. A file can hold more: its differences are each legal while the
 * DC values they add up to drift past the range, and a progressive or
 * arithmetic-coded file has no such bound at all. libjpeg decodes such
 * values, but its encoder writes a category with no
 * Huffman code without complaint, and the rewrite would decode to other
 * pixels (CI's fuzz_random_access found it in a grey 50x50 file). Only
 * the blocks the image holds: jpeg_write_coefficients makes the padding
 * blocks of the edge MCUs itself. */
static int cdl__coefficients_codable(struct jpeg_decompress_struct *jd, jvirt_barray_ptr *coefs) {
    for (int c = 0; c < jd->num_components; c++) {
        const jpeg_component_info *ci = &jd->comp_info[c];
        for (JDIMENSION r = 0; r < ci->height_in_blocks; r++) {
            JBLOCKARRAY row = (*jd->mem->access_virt_barray)((j_common_ptr)jd, coefs[c], r, 1, FALSE);
            unsigned out_of_range = 0;
            for (JDIMENSION b = 0; b < ci->width_in_blocks; b++) {
                const JCOEF *k = row[0][b];
                out_of_range |= (unsigned)((int)k[0] + 1024) > 2047u;
                for (int i = 1; i < DCTSIZE2; i++) out_of_range |= (unsigned)((int)k[i] + 1023) > 2046u;
            }
            if (out_of_range) return 0;
        }
    }
    return 1;
}

/* Rewrites the JPEG src into W->rw (see above). `room`: the most bytes the
 * result may take; `small`: use optimized tables whatever the source's (the
 * item has no room to grow). Returns the rewritten length and its layout
 * in *got, or 0 when the source cannot be rewritten (corrupt, unsupported,
 * or too big for the room: then *too_big). */
CDL_PRIVATE size_t cdl__jpeg_rewrite(cdl__worker *W, const cdl__u8 *src, size_t len, size_t room, int small,
                                cdl__jpeg_layout *got, int *too_big) {
    coordl *L = W->L;
    struct jpeg_decompress_struct *jd = &W->jd;
    struct jpeg_compress_struct *jc = &W->jc;
    cdl__jpeg_layout lay;
    *too_big = 0;
    if (!cdl__jpeg_walk(src, len, &lay) || lay.index_off || lay.mcu_rows > CDL_RST_MAX_ROWS ||
        (uint64_t)lay.w * lay.h > L->cfg.max_pixels)
        return 0;
    const uint32_t k = cdl__rst_interval(&lay, len);
    const size_t idx_len = CDL_RST_HEAD + 4u * (size_t)lay.mcu_rows;
    if (!cdl__reserve(L, (void **)&W->rw, &W->rwcap, room + 16) ||
        !cdl__reserve(L, (void **)&W->rwidx, &W->rwidxcap, idx_len))
        return 0;
    memset(W->rwidx, 0, idx_len);
    memcpy(W->rwidx, CDL_RST_TAG, CDL_RST_TAG_LEN);
    W->rwidx[CDL_RST_TAG_LEN] = 1; /* version */
    W->rwidx[12] = (cdl__u8)(k & 0xFF);
    W->rwidx[13] = (cdl__u8)(k >> 8);
    W->rwidx[14] = (cdl__u8)(lay.mcu_rows & 0xFF);
    W->rwidx[15] = (cdl__u8)(lay.mcu_rows >> 8);
    W->jdest.buf = W->rw;
    W->jdest.cap = room;
    W->jdest.overflow = 0;
    W->jerr.fatal_warning = 0;
    W->jerr.guessed = 0;
    W->jc_live = 0;
    if (setjmp(W->jerr.jump)) {
        if (W->jc_live) jpeg_destroy_compress(jc);
        W->jc_live = 0;
        jpeg_abort_decompress(jd);
        *too_big = W->jdest.overflow;
        return 0;
    }
    cdl__jpeg_fresh_decoder(W);
    jpeg_mem_src(jd, src, (unsigned long)len);
    jpeg_read_header(jd, TRUE);
    if (jd->image_width != lay.w || jd->image_height != lay.h || jd->num_components != lay.ncomp ||
        jd->data_precision != 8)
        longjmp(W->jerr.jump, 1);
    /* the whole image's coefficients, within max_decode_bytes like a decode */
    uint64_t need = room;
    for (int c = 0; c < jd->num_components; c++)
        need += (uint64_t)(jd->comp_info[c].width_in_blocks + 4) * (jd->comp_info[c].height_in_blocks + 4) *
                sizeof(JBLOCK);
    if (need > L->cfg.max_decode_bytes) longjmp(W->jerr.jump, 1);
    const uint64_t left = L->cfg.max_decode_bytes - room;
    jd->mem->max_memory_to_use = left > (uint64_t)LONG_MAX ? LONG_MAX : (long)left;
    jvirt_barray_ptr *coefs = jpeg_read_coefficients(jd);
    /* Any warning, not only those that make a decode fail: libjpeg made
     * something up (data ending early read as zeros, a bad arithmetic
     * code ending its segment, a scan out of order), and a plain ROI
     * decode that stops above the damage never sees it. A rewrite would
     * write the guess into the file as data, so such a file stays as it
     * is. Extraneous bytes between segments are the one exception: the
     * decoder has finished the segment's blocks and skips them, and the
     * rewrite just leaves them out. */
    if (W->jerr.fatal_warning || W->jerr.guessed || !coefs) longjmp(W->jerr.jump, 1);
    if (!cdl__coefficients_codable(jd, coefs)) longjmp(W->jerr.jump, 1);
    jc->err = &W->jerr.pub;
    jpeg_create_compress(jc);
    W->jc_live = 1;
    jc->dest = &W->jdest.pub;
    jpeg_copy_critical_parameters(jd, jc);
    /* the colour interpretation stays: a CMYK file without an Adobe
     * marker holds plain ink amounts, with one inverted (coordl's rule) */
    if (jd->jpeg_color_space == JCS_CMYK) jc->write_Adobe_marker = jd->saw_Adobe_marker;
    jc->optimize_coding = (boolean)(small || !cdl__standard_tables(jd, jc));
    jc->restart_interval = k;
    jpeg_write_coefficients(jc, coefs);
    jpeg_write_marker(jc, JPEG_APP0 + 15, W->rwidx, (unsigned)idx_len);
    jpeg_finish_compress(jc);
    const size_t out = W->jdest.cap - W->jdest.pub.free_in_buffer;
    jpeg_destroy_compress(jc);
    W->jc_live = 0;
    jpeg_abort_decompress(jd);
    if (!cdl__rst_index(W->rw, out, got) || got->w != lay.w || got->h != lay.h || got->ncomp != lay.ncomp ||
        got->mcu_w != lay.mcu_w || got->mcu_h != lay.mcu_h || got->interval != k ||
        (got->sof != 0xC0 && got->sof != 0xC1))
        return 0;
    return out;
}

/* Builds in W->splice a JPEG of the segments of the rewritten item p that
 * cover pixels [x0, x1) x [y0, y1) of its decode at 1/d (see above), and
 * says where the span starts in those pixels. Returns its length, or 0
 * when p's segments are not where its index says (then the caller decodes
 * p as a plain JPEG: it is one). */
static size_t cdl__jpeg_splice(cdl__worker *W, const cdl__u8 *p, size_t len, const cdl__jpeg_layout *lay, int d,
                               int x0, int x1, int y0, int y1, int *ox, int *oy) {
    const uint32_t k = lay->interval, spr = lay->mcus_per_row / k;
    const int smw = (int)lay->mcu_w / d, smh = (int)lay->mcu_h / d; /* MCU at 1/d */
    /* one pixel of upsampling context, where the image has it */
    const int m = lay->subsampled && d < 8 ? 1 : 0;
    x0 = x0 > m ? x0 - m : 0;
    y0 = y0 > m ? y0 - m : 0;
    x1 += m;
    y1 += m;
    uint32_t s0 = (uint32_t)(x0 / smw) / k, s1 = ((uint32_t)((x1 + smw - 1) / smw) + k - 1) / k;
    uint32_t r0 = (uint32_t)(y0 / smh), r1 = (uint32_t)((y1 + smh - 1) / smh);
    if (s1 > spr) s1 = spr;
    if (r1 > lay->mcu_rows) r1 = lay->mcu_rows;
    /* libjpeg upsamples a component at most 2 samples wide by replication,
     * not fancily: keep the span 2 MCUs wide (or the whole width) */
    const uint64_t seg_w = (uint64_t)k * lay->mcu_w;
    const uint64_t min_w = lay->hsub && d < 8 ? (2 * lay->mcu_w < lay->w ? 2 * lay->mcu_w : lay->w) : 1;
    for (;;) {
        const uint64_t a = s0 * seg_w, b = s1 * seg_w < lay->w ? s1 * seg_w : lay->w;
        if (b - a >= min_w || (s0 == 0 && s1 == spr)) break;
        if (s1 < spr) s1++; else s0--;
    }
    if (s0 >= s1 || r0 >= r1) return 0;
    const uint32_t px0 = (uint32_t)(s0 * seg_w), py0 = r0 * lay->mcu_h;
    const uint32_t px1 = s1 * seg_w < lay->w ? (uint32_t)(s1 * seg_w) : lay->w;
    const uint32_t py1 = r1 * lay->mcu_h < lay->h ? r1 * lay->mcu_h : lay->h;
    const uint64_t total = (uint64_t)(s1 - s0) * (r1 - r0);
    /* headers + entropy bytes of the span + EOI: never more than len */
    const size_t cap = len + 16;
    if (!cdl__reserve(W->L, (void **)&W->splice, &W->splicecap, cap)) return 0;
    cdl__u8 *out = W->splice;
    size_t o = 0;
    out[o++] = 0xFF;
    out[o++] = 0xD8;
    const size_t hdr_end = lay->data_off; /* through the SOS header */
    memcpy(out + o, p + 2, lay->index_off - 2);
    o += lay->index_off - 2;
    memcpy(out + o, p + lay->index_off + lay->index_len, hdr_end - lay->index_off - lay->index_len);
    o += hdr_end - lay->index_off - lay->index_len;
    const size_t sof = lay->sof_off > lay->index_off ? lay->sof_off - lay->index_len : lay->sof_off;
    out[sof + 5] = (cdl__u8)((py1 - py0) >> 8);
    out[sof + 6] = (cdl__u8)(py1 - py0);
    out[sof + 7] = (cdl__u8)((px1 - px0) >> 8);
    out[sof + 8] = (cdl__u8)(px1 - px0);
    const cdl__u8 *tab = p + lay->index_off + 4 + CDL_RST_HEAD;
    uint64_t g = 0;
    for (uint32_t r = r0; r < r1; r++) {
        size_t at = lay->data_off + ((size_t)tab[4 * r] | (size_t)tab[4 * r + 1] << 8 |
                                     (size_t)tab[4 * r + 2] << 16 | (size_t)tab[4 * r + 3] << 24);
        for (uint32_t s = 0; s < s1; s++) {
            const size_t start = at;
            for (;;) { /* the marker that ends this segment (0xFF00 is a stuffed byte) */
                const cdl__u8 *q = at < len ? memchr(p + at, 0xFF, len - at) : NULL;
                if (!q || q + 1 >= p + len) return 0;
                at = (size_t)(q - p);
                if (q[1] == 0x00) { at += 2; continue; }
                if (!((q[1] >= 0xD0 && q[1] <= 0xD7) || q[1] == 0xD9)) return 0;
                break;
            }
            if (s >= s0) {
                if (o + (at - start) + 4 > cap) return 0;
                memcpy(out + o, p + start, at - start);
                o += at - start;
                if (++g < total) {
                    out[o++] = 0xFF;
                    out[o++] = (cdl__u8)(0xD0 + ((g - 1) & 7));
                }
            }
            at += 2;
        }
    }
    out[o++] = 0xFF;
    out[o++] = 0xD9;
    *ox = (int)(px0 / (uint32_t)d);
    *oy = (int)(py0 / (uint32_t)d);
    return o;
}

/* A decode's error exits (libjpeg's errors longjmp to W->jerr.jump; each
 * entry below sets it before its first libjpeg call). */
static coordl_status cdl__jpeg_failed(cdl__worker *W, const char *path) {
    jpeg_abort_decompress(&W->jd);
    if (W->jerr.pub.msg_code == JERR_NO_BACKING_STORE) /* over max_memory_to_use */
        return cdl__over_decode_limit(W, path, "more than ", W->L->cfg.max_decode_bytes);
    return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: not a decodable JPEG: %s", path, W->jerr.msg);
}

/* The decode both entries share, once W->jd has read a header (the item's
 * own, or a splice's) and the crop's tables are made: budget libjpeg's
 * memory, decode the rows and columns the resampler reads, and resample
 * them into dst. (ox, oy): where the decoded image's pixel (0, 0) lies in
 * the whole image at 1/d (a splice starts at the crop's segments; a plain
 * decode at 0, 0). The exactness rule lives here: a plain decode widens
 * the region by the chroma upsampler's context (cdl__jpeg_context_margin)
 * so its edge pixels equal a full decode's; a splice carries that margin
 * in the segments it kept. */
static coordl_status cdl__jpeg_decode_crop(cdl__worker *W, const char *path, void *dst, const cdl__geom *g,
                                           const cdl__axis *ax, const cdl__axis *ay, int d, int ox, int oy,
                                           int spliced, int cmyk, uint64_t t0, uint64_t cpu0) {
    coordl *L = W->L;
    struct jpeg_decompress_struct *jd = &W->jd;
    /* Memory, before libjpeg allocates any: coordl's region (the crop's
     * columns, widened to whole iMCUs by jpeg_crop_scanline, times its
     * rows) and window, plus libjpeg's need. libjpeg's own allocations
     * cannot go through the hooks; max_memory_to_use makes it fail (no
     * backing store) rather than realize coefficient arrays past what is
     * left of the budget. */
    const int crop_exact = spliced || cdl__jpeg_crop_is_exact(jd);
    {
        const uint64_t imcu = (uint64_t)jd->max_h_samp_factor * DCTSIZE;
        uint64_t cols = (uint64_t)(ax->hi - ax->lo) + 2 * imcu;
        if (cols > jd->output_width || !crop_exact) cols = jd->output_width;
        /* rows: a splice's from its top; the ROI's 2 rows of context */
        const uint64_t rows = (uint64_t)(spliced ? ay->hi - oy : ay->hi - ay->lo + 2);
        const uint64_t region = cols * 3 * rows + 64 + (cmyk ? cols * 4 + 64 : 0);
        const uint64_t window = cdl__window_bytes(g, ax, ay), need = cdl__jpeg_need(jd) + region + window;
        const uint64_t limit = L->cfg.max_decode_bytes;
        if (need > limit) {
            jpeg_abort_decompress(jd);
            return cdl__over_decode_limit(W, path, "", need);
        }
        const uint64_t left = limit - region - window;
        jd->mem->max_memory_to_use = left > (uint64_t)LONG_MAX ? LONG_MAX : (long)left;
    }
    jpeg_start_decompress(jd);
    /* The region the resampler reads, widened where the chroma upsampler
     * needs context: decoded to end exactly at the crop, libjpeg treats the
     * region's edge as the image's and replicates the edge chroma sample,
     * so edge pixels differed from a full decode (by up to ~15 levels) for
     * 4:2:0 and 4:2:2 sources. A splice has its margins already. */
    const int m = spliced ? 0 : cdl__jpeg_context_margin(jd, d);
    const int x0 = ax->lo - ox > m ? ax->lo - ox - m : 0, y0 = spliced ? 0 : ay->lo > m ? ay->lo - m : 0;
    const int x1 = ax->hi - ox + m < (int)jd->output_width ? ax->hi - ox + m : (int)jd->output_width;
    JDIMENSION xoff = (JDIMENSION)x0, cw = (JDIMENSION)(x1 - x0);
    if (spliced || !crop_exact) xoff = 0, cw = jd->output_width; /* a splice is the crop's columns already */
    else if (cw < jd->output_width) jpeg_crop_scanline(jd, &xoff, &cw);
    const size_t stride = (size_t)cw * 3;
    const int rows = ay->hi - oy - y0;
    if (!cdl__reserve(L, (void **)&W->pix, &W->pixcap, stride * (size_t)rows + 64) ||
        (cmyk && !cdl__reserve(L, (void **)&W->row4, &W->row4cap, (size_t)cw * 4 + 64))) {
        jpeg_abort_decompress(jd);
        return cdl__worker_error(W, COORDL_ERR_NOMEM, "%s: out of memory for the decoded region; lower max_decode_bytes or max_pixels", path);
    }
    if (y0 > 0) jpeg_skip_scanlines(jd, (JDIMENSION)y0);
    for (int r = 0; r < rows;) {
        cdl__u8 *target = cmyk ? W->row4 : W->pix + (size_t)r * stride;
        JSAMPROW rowp[1] = {target};
        JDIMENSION got = jpeg_read_scanlines(jd, rowp, 1);
        if (got != 1) break;
        if (cmyk) cdl__cmyk_row_to_rgb(W->row4, W->pix + (size_t)r * stride, (int)cw, jd->saw_Adobe_marker);
        r++;
    }
    const int complete = jd->output_scanline >= (JDIMENSION)(ay->hi - oy);
    jpeg_abort_decompress(jd); /* rows below the crop are never decoded */
    if (W->jerr.fatal_warning || !complete)
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: corrupt JPEG data: %s", path,
                                 W->jerr.fatal_warning ? W->jerr.msg : "rows missing");
    uint64_t t1 = cdl__now_ns();
    W->row.decode_ns += t1 - t0;
    W->row.jpeg_spliced += (uint64_t)spliced;
    cdl__budget_decode(W, spliced, cdl__thread_cpu_ns() - cpu0);
    cdl__resample(L, W, W->pix, stride, ox + (int)xoff, oy + y0, ax, ay, g, dst);
    W->row.augment_ns += cdl__now_ns() - t1;
    return COORDL_OK;
}

/* The image's size within the decode bounds, else the decode ends. */
static coordl_status cdl__jpeg_check_size(cdl__worker *W, const char *path, int iw, int ih) {
    const coordl_status rc = cdl__check_image_size(W, path, iw, ih);
    if (rc != COORDL_OK) jpeg_abort_decompress(&W->jd);
    return rc;
}

/* Sets the output of a read header: 1/d DCT scaling, RGB (CMYK kept for
 * cdl__cmyk_row_to_rgb), the exact IDCT, no block smoothing. Returns
 * whether it is CMYK. Block smoothing is libjpeg's guess at the AC
 * coefficients a progressive file that ends early (fewer scans than it
 * needs) does not hold, made from the neighbouring blocks' DC values: a
 * crop's edge blocks (ROI or spliced) have other neighbours than in a
 * full decode, and a rewrite, baseline, has nothing left to guess, so
 * with it the same file gave other pixels with random access on. coordl
 * decodes the coefficients a file holds. */
static int cdl__jpeg_set_output(struct jpeg_decompress_struct *jd, int d) {
    const int cmyk = jd->jpeg_color_space == JCS_CMYK || jd->jpeg_color_space == JCS_YCCK;
    jd->scale_num = 1;
    jd->scale_denom = (unsigned)d;
    jd->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    jd->dct_method = JDCT_ISLOW;
    jd->do_block_smoothing = FALSE;
    jpeg_calc_output_dimensions(jd);
    return cmyk;
}

/* A plain JPEG (the bytes as read): its header, the crop drawn on its
 * size, the DCT scale, then only the crop's region decoded (ROI). */
static coordl_status cdl__decode_jpeg_plain(cdl__worker *W, const char *path, const cdl__bytes *in, uint64_t epoch,
                                            uint64_t id, void *dst) {
    struct jpeg_decompress_struct *jd = &W->jd;
    const uint64_t t0 = cdl__now_ns(), cpu0 = cdl__thread_cpu_ns();
    W->jerr.fatal_warning = 0;
    if (setjmp(W->jerr.jump)) return cdl__jpeg_failed(W, path);
    W->jerr.pub.msg_code = 0;
    cdl__jpeg_fresh_decoder(W);
    jpeg_mem_src(jd, in->p, (unsigned long)in->len);
    jpeg_read_header(jd, TRUE);
    const int iw = (int)jd->image_width, ih = (int)jd->image_height;
    coordl_status rc = cdl__jpeg_check_size(W, path, iw, ih);
    if (rc != COORDL_OK) return rc;
    if (!cdl__jpeg_has_eoi(in->p, in->len, in->len - jd->src->bytes_in_buffer)) {
        jpeg_abort_decompress(jd);
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: truncated JPEG (no end-of-image marker)", path);
    }
    cdl__geom g;
    cdl__plan_row(W, epoch, id, iw, ih, &g);
    const int d = cdl__choose_dct_denominator(&g);
    const int cmyk = cdl__jpeg_set_output(jd, d);
    cdl__geom_scale(&g, d, (int)jd->output_width, (int)jd->output_height);
    cdl__axis ax, ay;
    if ((rc = cdl__tables_for(W, &g, &ax, &ay)) != COORDL_OK) {
        jpeg_abort_decompress(jd);
        return cdl__name_error(W, path, rc);
    }
    return cdl__jpeg_decode_crop(W, path, dst, &g, &ax, &ay, d, 0, 0, 0, cmyk, t0, cpu0);
}

/* A restart-marker rewrite (its layout in rst): the crop drawn on the
 * size the layout records, then only the segments covering the crop
 * spliced into a JPEG of their own and decoded. Returns 0 when no splice
 * can be made (the caller decodes the bytes as a plain JPEG), else 1 with
 * the decode's status in *rc. */
static int cdl__decode_jpeg_spliced(cdl__worker *W, const char *path, const cdl__bytes *in, uint64_t epoch,
                                    uint64_t id, void *dst, const cdl__jpeg_layout *rst, coordl_status *rc) {
    struct jpeg_decompress_struct *jd = &W->jd;
    const uint64_t t0 = cdl__now_ns(), cpu0 = cdl__thread_cpu_ns();
    W->jerr.fatal_warning = 0;
    if (setjmp(W->jerr.jump)) {
        *rc = cdl__jpeg_failed(W, path);
        return 1;
    }
    W->jerr.pub.msg_code = 0;
    const int iw = (int)rst->w, ih = (int)rst->h;
    if ((*rc = cdl__jpeg_check_size(W, path, iw, ih)) != COORDL_OK) return 1;
    cdl__geom g;
    cdl__plan_row(W, epoch, id, iw, ih, &g);
    const int d = cdl__choose_dct_denominator(&g);
    /* libjpeg's scaled size: jdiv_round_up(w, d) */
    cdl__geom_scale(&g, d, (iw + d - 1) / d, (ih + d - 1) / d);
    cdl__axis ax, ay;
    if ((*rc = cdl__tables_for(W, &g, &ax, &ay)) != COORDL_OK) {
        *rc = cdl__name_error(W, path, *rc);
        return 1;
    }
    int ox = 0, oy = 0; /* where the splice's pixel (0, 0) is, at 1/d */
    const size_t n = cdl__jpeg_splice(W, in->p, in->len, rst, d, ax.lo, ax.hi, ay.lo, ay.hi, &ox, &oy);
    if (!n) return 0;
    cdl__jpeg_fresh_decoder(W);
    jpeg_mem_src(jd, W->splice, (unsigned long)n);
    jpeg_read_header(jd, TRUE);
    const int cmyk = cdl__jpeg_set_output(jd, d);
    if ((int)jd->output_width < ax.hi - ox || (int)jd->output_height < ay.hi - oy) {
        *rc = cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: spliced crop is %ux%u, short of the crop", path,
                                jd->output_width, jd->output_height);
        jpeg_abort_decompress(jd);
        *rc = cdl__name_error(W, path, *rc);
        return 1;
    }
    *rc = cdl__jpeg_decode_crop(W, path, dst, &g, &ax, &ay, d, ox, oy, 1, cmyk, t0, cpu0);
    return 1;
}

/* Decodes what the sample needs and resamples it into dst. rst: the
 * layout of a restart-marker rewrite (in holds one): then only the crop's
 * segments are decoded, spliced into a JPEG of their own; a rewrite no
 * splice can be made of is decoded as the plain JPEG it also is. */
CDL_PRIVATE coordl_status cdl__decode_jpeg(cdl__worker *W, const char *path, const cdl__bytes *in,
                                      uint64_t epoch, uint64_t id, void *dst, const cdl__jpeg_layout *rst) {
    coordl_status rc;
    if (rst && cdl__decode_jpeg_spliced(W, path, in, epoch, id, dst, rst, &rc)) return rc;
    return cdl__decode_jpeg_plain(W, path, in, epoch, id, dst);
}

#endif
