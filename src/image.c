/* SPDX-License-Identifier: MIT */
/*
 * image.c - decode limits and stb_image.
 *
 * Owns:  the decode bounds every decoder applies, and stb's allocations
 *        during one decode call (a budget reached through one thread-local
 *        pointer, set and cleared within the call)
 * Lock:  none: everything is per call, in the calling worker's thread
 * Calls: status, worker, plan, resample (lower layers only:
 *        src/modules.txt; tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "image.h"
#include "status.h"
#include "worker.h"
#include "worker_state.h"
#include "plan.h"
#include "plan_state.h"
#include "resample.h"
#include "resample_state.h"
#include "handle.h"

/* stb_image is compiled into this translation unit with static linkage so
 * that a trainer that also uses stb_image gets no symbol clash. libjpeg
 * handles JPEG unless COORDL_NO_JPEGTURBO is defined. Only the formats
 * coordl documents are compiled in (PNG, BMP, binary PPM/PGM, TGA; JPEG
 * only without libjpeg): GIF, PSD, PIC and HDR bytes are refused, not
 * decoded, whatever the file is named. stb's allocations go through the
 * handle's allocator hooks and the decode budget (below). */
#ifndef COORDL_NO_STB
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO
#define STBI_NO_HDR
#define STBI_NO_LINEAR
#define STBI_NO_PSD
#define STBI_NO_PIC
#define STBI_NO_GIF
#ifndef COORDL_NO_JPEGTURBO
#define STBI_NO_JPEG
#endif
#define STBI_MAX_DIMENSIONS CDL_MAX_SIDE
static void *cdl__stb_malloc(size_t n);
static void *cdl__stb_realloc(void *p, size_t n);
static void cdl__stb_free(void *p);
#define STBI_MALLOC(n) cdl__stb_malloc(n)
#define STBI_REALLOC(p, n) cdl__stb_realloc(p, n)
#define STBI_FREE(p) cdl__stb_free(p)
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif
#if defined(COORDL_STB_IMAGE_H)
#include COORDL_STB_IMAGE_H
#elif defined(COORDL_STB_UPSTREAM)
#include "stb_image.h"
#else
#include <stb/stb_image.h>
#endif
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#endif /* COORDL_NO_STB */
#if defined(__GNUC__) && !defined(__clang__) && !defined(COORDL_NO_STB)
/* stb_image.h declares stbi_set_unpremultiply_on_load_thread static without
 * defining it under STB_IMAGE_STATIC (its definition is misspelled
 * stbi__unpremultiply_on_load_thread); gcc warns at the end of the file, so
 * it cannot be scoped to the include. Only gcc builds with stb carry it:
 * clang and COORDL_NO_STB builds still report coordl.c's own unused
 * functions (make test-switches builds both with -Werror). */
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
/* --- what is decoded, and within which bounds --------------------------
 * Only the documented formats are decoded: JPEG (libjpeg; stb's JPEG
 * decoder only under COORDL_NO_JPEGTURBO), PNG, BMP, binary PPM/PGM and
 * TGA (stb_image, every other stb decoder compiled out). A file in another
 * format coordl knows by its signature is COORDL_ERR_UNSUPPORTED naming
 * the format; bytes no decoder recognises are COORDL_ERR_CORRUPT. Before
 * any pixel is decoded the header must give each side in 1..CDL_MAX_SIDE
 * and at most max_pixels, and the decode's memory (the decoder's buffers,
 * coordl's decoded region and resampling window) must fit
 * max_decode_bytes; otherwise the item is a bad sample. */

static const char *cdl__unsupported_format(const cdl__u8 *p, size_t n) {
#define CDL_SIG(off, lit) (n >= (off) + sizeof(lit) - 1 && memcmp(p + (off), lit, sizeof(lit) - 1) == 0)
    if (CDL_SIG(0, "GIF87a") || CDL_SIG(0, "GIF89a")) return "GIF";
    if (CDL_SIG(0, "8BPS")) return "PSD";
    if (CDL_SIG(0, "#?RADIANCE") || CDL_SIG(0, "#?RGBE")) return "Radiance HDR";
    if (CDL_SIG(0, "\x53\x80\xf6\x34")) return "Softimage PIC";
    if (CDL_SIG(0, "RIFF") && CDL_SIG(8, "WEBP")) return "WebP";
    if (CDL_SIG(0, "II*\0") || CDL_SIG(0, "MM\0*")) return "TIFF";
    if (CDL_SIG(0, "\0\0\0\x0cjP  ") || CDL_SIG(0, "\xff\x4f\xff\x51")) return "JPEG 2000";
    if (CDL_SIG(0, "\xff\x0a") || CDL_SIG(0, "\0\0\0\x0cJXL ")) return "JPEG XL";
    if (CDL_SIG(4, "ftyp")) return "ISO media (HEIF/AVIF)";
    if (n >= 2 && p[0] == 'P' && (p[1] == '1' || p[1] == '2' || p[1] == '3' || p[1] == '4' || p[1] == '7'))
        return "ASCII, bitmap or PAM netpbm (only binary P5/P6 are read)";
#undef CDL_SIG
    return NULL;
}

CDL_PRIVATE coordl_status cdl__check_image_size(cdl__worker *W, const char *path, int64_t iw, int64_t ih) {
    if (iw < 1 || ih < 1 || iw > CDL_MAX_SIDE || ih > CDL_MAX_SIDE)
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: image size %lldx%lld is not decodable (each side "
                                 "must be 1..%d)", path, (long long)iw, (long long)ih, CDL_MAX_SIDE);
    if ((uint64_t)iw * (uint64_t)ih > W->L->cfg.max_pixels)
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: %lldx%lld pixels exceeds max_pixels (%llu)", path,
                                 (long long)iw, (long long)ih, (unsigned long long)W->L->cfg.max_pixels);
    return COORDL_OK;
}

CDL_PRIVATE coordl_status cdl__over_decode_limit(cdl__worker *W, const char *path, const char *what, uint64_t need) {
    return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: decoding needs %s%llu bytes, over max_decode_bytes (%llu)",
                             path, what, (unsigned long long)need, (unsigned long long)W->L->cfg.max_decode_bytes);
}

/* A resampling error (resample knows no path) gets the file's name. */
CDL_PRIVATE coordl_status cdl__name_error(cdl__worker *W, const char *path, coordl_status rc) {
    char msg[CDL_ERRMSG_MAX];
    memcpy(msg, W->err, sizeof msg);
    return cdl__worker_error(W, rc, "%s: %s", path, msg);
}

#ifndef COORDL_NO_STB
/* --- stb_image's memory ------------------------------------------------
 * STBI_MALLOC/REALLOC/FREE (defined above, before stb_image.h) are these functions: every block
 * comes from the handle's allocator hooks and counts against the budget of
 * the stb call in progress, which refuses (stb then fails "outofmem") what
 * would pass its limit. stb has no context argument, so the budget reaches
 * them through a thread-local pointer set only around a call into stb
 * (cdl__stb_enter/leave) and NULL otherwise, when every allocation is
 * refused: a trainer's own stb_image is a separate copy and never comes
 * here. Each block carries its size and handle in a header. */
typedef union cdl__stb_block cdl__stb_block;

typedef struct cdl__stb_budget {
    const coordl *L;
    uint64_t limit, used, peak;
    uint64_t refused; /* the total an allocation would have reached; 0: none */
    cdl__stb_block *live; /* every block of this call not yet freed */
} cdl__stb_budget;

static _Thread_local cdl__stb_budget *cdl__stb_active;

union cdl__stb_block {
    struct {
        size_t size;
        const coordl *L;
        cdl__stb_block *prev, *next; /* in its call's live list; NULL after the call */
    } h;
    max_align_t align;
};

static void cdl__stb_enter(cdl__stb_budget *b, const coordl *L, uint64_t limit) {
    b->L = L;
    b->limit = limit;
    b->used = b->peak = b->refused = 0;
    b->live = NULL;
    cdl__stb_active = b;
}

static void cdl__stb_unlink(cdl__stb_budget *b, cdl__stb_block *k) {
    if (k->h.prev) k->h.prev->h.next = k->h.next; else if (b->live == k) b->live = k->h.next;
    if (k->h.next) k->h.next->h.prev = k->h.prev;
    k->h.prev = k->h.next = NULL;
}

/* Ends the call: every block stb still holds except `keep` (the image the
 * call returns, or NULL) is freed. stb 2.27 leaks on some failure paths
 * (stbi__convert_16_to_8 keeps the 16-bit image when the 8-bit one is
 * refused: fuzz_image found it), so whatever stb forgets comes back here,
 * and a failed decode can never leak. */
static void cdl__stb_leave(cdl__stb_budget *b, void *keep) {
    cdl__stb_block *kept = keep ? (cdl__stb_block *)keep - 1 : NULL;
    if (kept) cdl__stb_unlink(b, kept);
    while (b->live) {
        cdl__stb_block *k = b->live;
        cdl__stb_unlink(b, k);
        b->used -= k->h.size;
        cdl__free(k->h.L, k);
    }
    cdl__stb_active = NULL;
}

static int cdl__stb_grant(cdl__stb_budget *b, size_t more) {
    if (more > b->limit - b->used || more > SIZE_MAX - sizeof(cdl__stb_block)) {
        b->refused = b->used + more < b->used ? UINT64_MAX : b->used + more;
        return 0;
    }
    return 1;
}

/* Blocks are zeroed: stb leaves the rows of a truncated uncompressed TGA
 * unwritten (fuzz_image found it), and uninitialized heap must never reach
 * a batch. Zeros make such an image the same on every run. */
static void *cdl__stb_malloc(size_t n) {
    cdl__stb_budget *b = cdl__stb_active;
    if (!b || !cdl__stb_grant(b, n)) return NULL;
    cdl__stb_block *k = cdl__malloc(b->L, sizeof *k + n);
    if (!k) return NULL;
    memset(k + 1, 0, n);
    k->h.size = n;
    k->h.L = b->L;
    k->h.prev = NULL;
    k->h.next = b->live;
    if (b->live) b->live->h.prev = k;
    b->live = k;
    b->used += n;
    if (b->used > b->peak) b->peak = b->used;
    return k + 1;
}

static void cdl__stb_free(void *p) {
    if (!p) return;
    cdl__stb_block *k = (cdl__stb_block *)p - 1;
    if (cdl__stb_active) { /* a block of the call in progress (a kept image is unlinked at leave) */
        cdl__stb_unlink(cdl__stb_active, k);
        cdl__stb_active->used -= k->h.size;
    }
    cdl__free(k->h.L, k);
}

static void *cdl__stb_realloc(void *p, size_t n) {
    if (!p) return cdl__stb_malloc(n);
    cdl__stb_budget *b = cdl__stb_active;
    cdl__stb_block *k = (cdl__stb_block *)p - 1;
    const size_t old = k->h.size;
    if (!b || (n > old && !cdl__stb_grant(b, n - old))) return NULL;
    cdl__stb_block *prev = k->h.prev, *next = k->h.next;
    const int head = b->live == k;
    cdl__stb_block *nk = cdl__realloc(b->L, k, sizeof *nk + n);
    if (!nk) return NULL; /* k is untouched, still in the list */
    if (n > old) memset((cdl__u8 *)(nk + 1) + old, 0, n - old);
    nk->h.size = n;
    if (prev) prev->h.next = nk;
    if (next) next->h.prev = nk;
    if (head) b->live = nk;
    b->used = b->used - old + n;
    if (b->used > b->peak) b->peak = b->used;
    return nk + 1;
}

/* stb 2.27 reads the numbers of a PNM header into an int with no overflow
 * check (undefined behaviour from the tenth digit; fuzz_image found it).
 * The header's three numbers are scanned here first, token for token as
 * stb scans them (whitespace, '#' comments to the end of the line), and a
 * number of more than 9 digits is refused before stb sees it. */
static int cdl__pnm_numbers_fit(const cdl__u8 *p, size_t n) {
    if (n < 2 || p[0] != 'P' || (p[1] != '5' && p[1] != '6')) return 1; /* not a PNM stb reads */
    size_t i = 2;
    for (int k = 0; k < 3; k++) {
        for (;;) {
            while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\v' || p[i] == '\f' ||
                             p[i] == '\r'))
                i++;
            if (i >= n || p[i] != '#') break;
            while (i < n && p[i] != '\n' && p[i] != '\r') i++;
        }
        size_t digits = 0;
        while (i < n && p[i] >= '0' && p[i] <= '9') i++, digits++;
        if (digits > 9) return 0;
    }
    return 1;
}

/* stb 2.27 computes idata + 0 on a null idata when a PNG's first IDAT
 * chunk is empty (undefined behaviour; fuzz_image found it). Real encoders
 * do not write one; the chunks are walked as stb walks them (length, type,
 * data, CRC) up to the first IDAT, and a file whose first IDAT is empty is
 * refused. */
static int cdl__png_first_idat_ok(const cdl__u8 *p, size_t n) {
    static const cdl__u8 sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n < 8 || memcmp(p, sig, 8) != 0) return 1;
    for (size_t at = 8; at + 8 <= n;) {
        const uint64_t len = (uint64_t)p[at] << 24 | (uint64_t)p[at + 1] << 16 | (uint64_t)p[at + 2] << 8 | p[at + 3];
        if (memcmp(p + at + 4, "IDAT", 4) == 0) return len != 0;
        if (len > n - at - 8) return 1; /* cut short: stb fails on its own */
        at += 12 + (size_t)len;
    }
    return 1;
}

/* The size (and channels, if comp is not NULL) in an stb-decodable
 * header, checked; refuses formats coordl does not decode. */
CDL_PRIVATE coordl_status cdl__stb_header(cdl__worker *W, const char *path, const cdl__bytes *in, int *iw, int *ih,
                                     int *comp) {
    const char *other = cdl__unsupported_format(in->p, in->len);
    if (other)
        return cdl__worker_error(W, COORDL_ERR_UNSUPPORTED, "%s: %s images are not decoded (coordl reads JPEG, PNG, "
                                 "BMP, binary PPM/PGM and TGA)", path, other);
    if (in->len > INT_MAX) return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: too large for stb_image", path);
    if (!cdl__pnm_numbers_fit(in->p, in->len))
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: PPM/PGM header number of more than 9 digits", path);
    if (!cdl__png_first_idat_ok(in->p, in->len))
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: PNG whose first IDAT chunk is empty", path);
    cdl__stb_budget b;
    int channels = 0, ok;
    *iw = *ih = 0;
    cdl__stb_enter(&b, W->L, W->L->cfg.max_decode_bytes);
    ok = stbi_info_from_memory(in->p, (int)in->len, iw, ih, &channels);
    cdl__stb_leave(&b, NULL);
    if (comp) *comp = channels;
    if (!ok)
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: not a recognised image (%s)", path,
                                 stbi_failure_reason());
    return cdl__check_image_size(W, path, *iw, *ih);
}
#else /* COORDL_NO_STB: JPEG only. Every other image is refused, naming the switch. */
CDL_PRIVATE coordl_status cdl__stb_header(cdl__worker *W, const char *path, const cdl__bytes *in, int *iw, int *ih,
                                     int *comp) {
    const char *other = cdl__unsupported_format(in->p, in->len);
    *iw = *ih = 0;
    if (comp) *comp = 0;
    return cdl__worker_error(W, COORDL_ERR_UNSUPPORTED, "%s: %s; this build decodes only JPEG (coordl.c was "
                             "compiled with COORDL_NO_STB, without stb_image)", path,
                             other ? other : "not a JPEG");
}
#endif /* COORDL_NO_STB */

#ifndef COORDL_NO_STB
/* stb's pixels in the file's own channel count (1 gray, 2 gray + alpha,
 * 3 RGB, 4 RGBA) to RGB, in place, growing the block through the budget:
 * gray is replicated, alpha dropped. coordl asks stb for the file's own
 * channels and converts here because stb 2.27's conversion of 16-bit PGM
 * to another channel count reads past its buffer (fuzz_image found it). */
static cdl__u8 *cdl__stb_to_rgb(cdl__u8 *img, size_t pixels, int comp) {
    if (comp == 4) { /* shrinks: forward */
        for (size_t i = 0; i < pixels; i++) {
            img[3 * i] = img[4 * i];
            img[3 * i + 1] = img[4 * i + 1];
            img[3 * i + 2] = img[4 * i + 2];
        }
        return img;
    }
    cdl__u8 *p = cdl__stb_realloc(img, pixels * 3);
    if (!p) {
        cdl__stb_free(img);
        return NULL;
    }
    for (size_t i = pixels; i-- > 0;) { /* grows: backward, so no source byte is overwritten before it is read */
        const cdl__u8 v = p[(size_t)comp * i];
        p[3 * i] = p[3 * i + 1] = p[3 * i + 2] = v;
    }
    return p;
}

/* stb 2.27 keeps the palette of a PNG or BMP in an uninitialized stack
 * array and looks pixel indices up in it unchecked: an index past the
 * file's palette copies stack contents into the image (fuzz_image found it;
 * a 2-entry PLTE and index 255 gave 0xAA bytes from an earlier call). An
 * index past the palette is an error by both formats' specifications, and
 * encoders often write short palettes for images that never use them. So a
 * paletted PNG or BMP with fewer than 256 entries is handed to stb with its
 * palette padded to 256 black entries: the same pixels for every valid
 * file, and black, the same on every run, for an index past the palette.
 * Returns a padded copy from the stb budget (stbi_image_free it), NULL when
 * the file needs none (*refused: the budget refused the copy). */

static uint32_t cdl__crc32(const cdl__u8 *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xffffffffu;
}

static uint32_t cdl__be32(const cdl__u8 *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

enum { CDL_PAD_NONE = 0, CDL_PAD_COPY, CDL_PAD_CORRUPT, CDL_PAD_NOMEM };

static int cdl__pad_palette(const cdl__u8 *p, size_t n, cdl__u8 **out, size_t *out_len) {
    static const cdl__u8 sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    *out = NULL;
    if (n >= 33 && memcmp(p, sig, 8) == 0 && memcmp(p + 12, "IHDR", 4) == 0 && p[25] == 3) {
        /* colour type 3: the first PLTE chunk, wherever it is */
        for (size_t at = 8; at + 8 <= n;) {
            const uint32_t len = cdl__be32(p + at);
            if (len > n - at - 8) return CDL_PAD_NONE; /* cut short: stb fails on its own */
            if (memcmp(p + at + 4, "IEND", 4) == 0) return CDL_PAD_NONE;
            if (memcmp(p + at + 4, "PLTE", 4) != 0) {
                at += 12 + (size_t)len;
                continue;
            }
            if (len >= 768 || len % 3 != 0 || len + 12 > n - at) return CDL_PAD_NONE; /* full, or refused by stb */
            const size_t old = (size_t)len + 12, grown = 768 + 12; /* the chunk with its CRC */
            cdl__u8 *q = cdl__stb_malloc(n - old + grown);
            if (!q) return CDL_PAD_NOMEM;
            cdl__u8 *c = q + at;
            memcpy(q, p, at);
            c[0] = 0; c[1] = 0; c[2] = 768 >> 8; c[3] = 768 & 255;
            memcpy(c + 4, "PLTE", 4);
            memcpy(c + 8, p + at + 8, len);
            memset(c + 8 + len, 0, 768 - len);
            const uint32_t crc = cdl__crc32(c + 4, 4 + 768);
            c[776] = (cdl__u8)(crc >> 24); c[777] = (cdl__u8)(crc >> 16);
            c[778] = (cdl__u8)(crc >> 8); c[779] = (cdl__u8)crc;
            memcpy(c + grown, p + at + old, n - at - old);
            *out = q;
            *out_len = n - old + grown;
            return CDL_PAD_COPY;
        }
        return CDL_PAD_NONE;
    }
    if (n >= 2 && p[0] == 'B' && p[1] == 'M') {
        /* as stb reads it: the palette right after the header, its size
         * from the pixel offset, entries of 3 bytes (OS/2 header) or 4;
         * stb reads 0 past the end of the file, and so does this */
        cdl__u8 h[30] = {0};
        memcpy(h, p, n < sizeof h ? n : sizeof h);
        const uint32_t off = cdl__le32(h + 10), hsz = cdl__le32(h + 14);
        if (hsz != 12 && hsz != 40 && hsz != 56 && hsz != 108 && hsz != 124) return CDL_PAD_NONE; /* refused by stb */
        const uint32_t bpp = hsz == 12 ? cdl__le16(h + 24) : cdl__le16(h + 28), k = hsz == 12 ? 3 : 4;
        if (bpp >= 16 || off > (uint32_t)INT_MAX) return CDL_PAD_NONE; /* no palette, or refused by stb */
        /* stb's count, in its int arithmetic: (off - 38) / 3 truncated for
         * OS/2, (off - 14 - hsz) >> 2 (a floor) otherwise */
        const int64_t d = hsz == 12 ? (int64_t)off - 38 : (int64_t)off - 14 - hsz;
        const int64_t psize = hsz == 12 ? d / 3 : d >= 0 ? d / 4 : -((-d + 3) / 4);
        if (psize < 0) return CDL_PAD_CORRUPT; /* stb would read no entry and then use them all */
        const uint64_t end = 14u + hsz + (uint64_t)psize * k; /* entries follow the header */
        if (psize == 0 || psize >= 256 || end > n) return CDL_PAD_NONE; /* refused by stb, full, or cut short */
        const size_t add = (size_t)(256 - psize) * k;
        if (off > (uint32_t)INT_MAX - add) return CDL_PAD_NONE;
        cdl__u8 *q = cdl__stb_malloc(n + add);
        if (!q) return CDL_PAD_NOMEM;
        memcpy(q, p, (size_t)end);
        memset(q + end, 0, add);
        memcpy(q + end + add, p + end, n - (size_t)end);
        const uint32_t noff = off + (uint32_t)add;
        q[10] = (cdl__u8)noff; q[11] = (cdl__u8)(noff >> 8); q[12] = (cdl__u8)(noff >> 16); q[13] = (cdl__u8)(noff >> 24);
        *out = q;
        *out_len = n + add;
        return CDL_PAD_COPY;
    }
    return CDL_PAD_NONE;
}

/* PNG, BMP, binary PPM/PGM, TGA (and JPEG without libjpeg): the header is
 * checked and the crop drawn first; stb then decodes the whole image into
 * a buffer it allocates under the budget left after coordl's window. */
CDL_PRIVATE coordl_status cdl__decode_stb(cdl__worker *W, const char *path, const cdl__bytes *in,
                                     uint64_t epoch, uint64_t id, void *dst) {
    coordl *L = W->L;
    const uint64_t t0 = cdl__now_ns();
    int iw, ih, channels;
    coordl_status rc = cdl__stb_header(W, path, in, &iw, &ih, &channels);
    if (rc != COORDL_OK) return rc;
    cdl__geom g;
    cdl__plan_row(W, epoch, id, iw, ih, &g);
    cdl__axis ax, ay;
    rc = cdl__tables_for(W, &g, &ax, &ay);
    if (rc != COORDL_OK) return cdl__name_error(W, path, rc);
    /* stb's output in the file's channels, then RGB when that differs */
    const uint64_t pixels = (uint64_t)iw * (uint64_t)ih, window = cdl__window_bytes(&g, &ax, &ay);
    const uint64_t image = pixels * (uint64_t)(channels > 0 ? channels : 3) + (channels != 3 ? pixels * 3 : 0);
    if (image + window > L->cfg.max_decode_bytes) return cdl__over_decode_limit(W, path, "at least ", image + window);
    cdl__stb_budget b;
    int w2 = 0, h2 = 0, comp = 0;
    cdl__stb_enter(&b, L, L->cfg.max_decode_bytes - window);
    cdl__u8 *padded = NULL, *img = NULL;
    size_t plen = 0;
    const int pad = cdl__pad_palette(in->p, in->len, &padded, &plen);
    if (pad == CDL_PAD_CORRUPT)
        rc = cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: BMP pixel offset inside its header", path);
    else if (pad == CDL_PAD_NONE || (pad == CDL_PAD_COPY && plen <= INT_MAX))
        img = stbi_load_from_memory(padded ? padded : in->p, padded ? (int)plen : (int)in->len, &w2, &h2, &comp, 0);
    cdl__stb_free(padded);
    if (img && (w2 != iw || h2 != ih || comp < 1 || comp > 4)) { /* never resample past the buffer */
        stbi_image_free(img);
        img = NULL;
        b.refused = 0;
        rc = cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: the decoder gave %dx%d x %d for a %dx%d header", path, w2,
                               h2, comp, iw, ih);
    }
    if (img && comp != 3) img = cdl__stb_to_rgb(img, (size_t)pixels, comp);
    cdl__stb_leave(&b, img);
    if (!img) {
        if (rc != COORDL_OK) return rc;
        if (b.refused) return cdl__over_decode_limit(W, path, "more than ", b.refused + window);
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: cannot decode: %s", path, stbi_failure_reason());
    }
    const uint64_t t1 = cdl__now_ns();
    W->row.decode_ns += t1 - t0;
    /* straight from stb's buffer: the resampler reads no byte past a row's
     * last pixel */
    cdl__resample(L, W, img, (size_t)iw * 3, 0, 0, &ax, &ay, &g, dst);
    stbi_image_free(img);
    W->row.augment_ns += cdl__now_ns() - t1;
    return COORDL_OK;
}
#else
CDL_PRIVATE coordl_status cdl__decode_stb(cdl__worker *W, const char *path, const cdl__bytes *in,
                                     uint64_t epoch, uint64_t id, void *dst) {
    int iw, ih;
    (void)epoch, (void)id, (void)dst;
    return cdl__stb_header(W, path, in, &iw, &ih, NULL);
}
#endif /* COORDL_NO_STB */
