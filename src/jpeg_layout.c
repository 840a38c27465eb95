/* SPDX-License-Identifier: MIT */
/*
 * jpeg_layout.c - the JPEG marker walk.
 *
 * Owns:  nothing: parses a JPEG's markers (frame, scans, restart interval)
 *        and sizes a rewrite's room; no libjpeg
 * Lock:  none
 * Calls: none (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */
#include "platform.h"
#include "jpeg_layout_state.h"
#include "jpeg_layout.h"

/* --- JPEG random access: restart-marker rewrite and spliced crops -------
 * Huffman decoding is most of a JPEG decode, and the libjpeg API cannot
 * skip it for the MCUs above and beside a crop: each MCU's bits must be
 * decoded to find where the next one starts, and DC prediction chains
 * them. That is a property of the file, and the MinIO cache lets coordl
 * change the file: it holds the item's bytes for every later epoch.
 *
 * Rewrite: jpeg_read_coefficients + jpeg_write_coefficients (coefficients
 * untouched, so the pixels a decoder makes are the same) as baseline
 * Huffman with a restart marker every k MCUs, plus an APP15 segment
 * ("coordl-rst") holding where each MCU row's entropy-coded data starts.
 * DC prediction restarts at every marker, so each run of k MCUs (a
 * segment) decodes on its own. k divides the MCUs per row, so segments
 * never straddle rows; it is the smallest such divisor that keeps the
 * markers under ~3.5% of the bytes (~4.3 bytes a marker with the standard
 * tables, measured: k = 1 for ImageNet-like photos, more for 4:4:4, gray
 * and low-detail large files, which have fewer bytes per MCU).
 *
 * Splice: for a crop, a small valid JPEG is built in worker scratch: the
 * headers copied (every marker before SOS: DHT may follow SOF), the frame
 * size patched in place, DRI k, and only the segments that cover the crop,
 * their restart markers renumbered 0-7 in sequence. The stock libjpeg
 * decodes it at the sample's DCT scale and the resampler cuts the crop.
 * The spliced image's edges are image edges to libjpeg, where fancy chroma
 * upsampling replicates the edge sample; so a side gets one more MCU when
 * the crop comes within a pixel of it (tests/test_jpeg_exact.c: the result
 * is byte-identical to a full decode's crop at every scale), and a span is
 * at least two MCUs wide (libjpeg upsamples a component 2 samples wide or
 * less by replication instead).
 *
 * Tables: a source with the standard Huffman tables is rewritten with them
 * (one pass, ~1.3x a full decode); progressive, arithmetic and
 * custom-table sources, and items with no room to grow, with optimized
 * tables (two passes, ~3x; they usually come out smaller than the original).
 * A fresh compress object per rewrite: libjpeg-turbo 2.1 keeps the tables
 * a reused one holds, so a standard-table rewrite after an optimized one
 * would write a corrupt stream. */

static uint32_t cdl__be16(const cdl__u8 *p) { return (uint32_t)p[0] << 8 | p[1]; }

/* Walks a JPEG's markers up to the first SOS. Returns 0 when the bytes are
 * not a JPEG this code can rewrite or splice (only the frame types libjpeg
 * decodes to 8-bit samples, 1, 3 or 4 components). Reads nothing past len. */
CDL_PRIVATE int cdl__jpeg_walk(const cdl__u8 *p, size_t len, cdl__jpeg_layout *lay) {
    memset(lay, 0, sizeof *lay);
    if (len < 4 || p[0] != 0xFF || p[1] != 0xD8) return 0;
    size_t at = 2;
    for (;;) {
        while (at + 1 < len && p[at] == 0xFF && p[at + 1] == 0xFF) at++; /* fill bytes */
        if (at + 4 > len || p[at] != 0xFF) return 0;
        const int m = p[at + 1];
        const size_t seg = cdl__be16(p + at + 2);
        if (seg < 2 || at + 2 + seg > len) return 0;
        const cdl__u8 *q = p + at + 4;
        if (m == 0xC0 || m == 0xC1 || m == 0xC2 || m == 0xC9 || m == 0xCA) {
            if (lay->sof || seg < 8 || q[0] != 8) return 0;
            lay->sof = m;
            lay->sof_off = at;
            lay->h = cdl__be16(q + 1);
            lay->w = cdl__be16(q + 3);
            lay->ncomp = q[5];
            if (lay->w == 0 || lay->h == 0 || (lay->ncomp != 1 && lay->ncomp != 3 && lay->ncomp != 4) ||
                seg != 8 + 3u * (unsigned)lay->ncomp)
                return 0;
            int hs[4], vs[4];
            for (int c = 0; c < lay->ncomp; c++) {
                hs[c] = q[7 + 3 * c] >> 4;
                vs[c] = q[7 + 3 * c] & 15;
                if (hs[c] < 1 || hs[c] > 4 || vs[c] < 1 || vs[c] > 4) return 0;
                if (hs[c] > lay->max_h) lay->max_h = hs[c];
                if (vs[c] > lay->max_v) lay->max_v = vs[c];
            }
            for (int c = 0; c < lay->ncomp && lay->ncomp > 1; c++) {
                if (hs[c] != lay->max_h) lay->hsub = 1;
                if (hs[c] != lay->max_h || vs[c] != lay->max_v) lay->subsampled = 1;
            }
            /* a one-component scan is not interleaved: its MCU is one block */
            lay->mcu_w = lay->ncomp == 1 ? 8u : 8u * (uint32_t)lay->max_h;
            lay->mcu_h = lay->ncomp == 1 ? 8u : 8u * (uint32_t)lay->max_v;
            lay->mcus_per_row = (lay->w + lay->mcu_w - 1) / lay->mcu_w;
            lay->mcu_rows = (lay->h + lay->mcu_h - 1) / lay->mcu_h;
        } else if ((m >= 0xC3 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) || m == 0xD8 ||
                   m == 0xD9 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) {
            return 0; /* lossless, hierarchical, 12-bit-only frame types; stray markers */
        } else if (m == 0xEF && seg >= 2 + CDL_RST_HEAD && memcmp(q, CDL_RST_TAG, CDL_RST_TAG_LEN) == 0 &&
                   q[CDL_RST_TAG_LEN] == 1) {
            lay->index_off = at;
            lay->index_len = 2 + seg;
            lay->interval = (uint32_t)q[12] | (uint32_t)q[13] << 8;
        } else if (m == 0xDA) {
            lay->data_off = at + 2 + seg;
            return lay->sof != 0 && lay->data_off < len;
        }
        at += 2 + seg;
    }
}

/* The restart interval for a rewrite: the smallest divisor of the MCUs per
 * row that keeps the markers' bytes under ~3.5% of the file. */
CDL_PRIVATE uint32_t cdl__rst_interval(const cdl__jpeg_layout *lay, size_t len) {
    const uint64_t mcus = (uint64_t)lay->mcus_per_row * lay->mcu_rows;
    /* markers * 4.3 <= 0.035 * len  <=>  k >= mcus * 43 / (0.35 * len) */
    uint64_t want = (mcus * CDL_RST_BYTES_PER_MARKER_X10 * 100 + (uint64_t)len * 35 - 1) / ((uint64_t)len * 35);
    if (want < 1) want = 1;
    for (uint32_t k = (uint32_t)(want < lay->mcus_per_row ? want : lay->mcus_per_row); k < lay->mcus_per_row; k++)
        if (lay->mcus_per_row % k == 0) return k;
    return lay->mcus_per_row;
}

/* Bytes a rewrite may add to an item (room reserved at admission so the
 * rewrite fits in place), or 0 when the item is not a JPEG coordl
 * rewrites. Measured on the bench photos (bench/README.md): the standard
 * tables add 4.3 bytes a marker (at most 6.0); progressive sources grow
 * by 8-11% as baseline, arithmetic ones by 14-20%. */
CDL_PRIVATE size_t cdl__rst_room(const cdl__u8 *p, size_t len) {
#ifdef COORDL_NO_JPEGTURBO
    (void)p; (void)len;
    return 0; /* no rewrites without libjpeg */
#endif
    cdl__jpeg_layout lay;
    if (!cdl__jpeg_walk(p, len, &lay) || lay.index_off || lay.mcu_rows > CDL_RST_MAX_ROWS) return 0;
    const uint64_t markers = (uint64_t)lay.mcus_per_row * lay.mcu_rows / cdl__rst_interval(&lay, len);
    uint64_t room = markers * CDL_RST_ROOM_PER_MARKER_X10 / 10 + CDL_RST_HEAD + 4u * lay.mcu_rows + 64;
    if (lay.sof == 0xC2) room += len / 8;
    if (lay.sof == 0xC9 || lay.sof == 0xCA) room += len / 4;
    return room > UINT32_MAX / 2 ? 0 : (size_t)room;
}

