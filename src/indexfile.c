/* SPDX-License-Identifier: MIT */
/*
 * indexfile.c - the saved index of a tar-shard source (cfg.index_path).
 *
 * Owns:  the index image (its format, its checksum, its checks), the
 *        packed per-item records L->index.tar_refs and the names they
 *        point to; writing index_path atomically, loading it, deciding it
 *        is stale, foreign or corrupt
 * Lock:  runs at open only; the image is read-only after (names are read
 *        by any thread without a lock)
 * Calls: status, io, tar (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "indexfile.h"
#include "status.h"
#include "io.h"
#include "index_state.h"
#include "tar.h"
#include "handle.h"

/* ---- the image ------------------------------------------------------------
 * Every tar-shard index, scanned or loaded, ends as one image: the bytes
 * index_path holds, in this machine's byte order (a file from another
 * byte order is foreign). Layout, all offsets from the image's start:
 *
 *   header (144 bytes): magic "coordlIX", u32 byte-order mark 0x01020304,
 *     u32 version, u64 image bytes, u64 checksum (of the whole image with
 *     these 8 bytes as zeros), u64 items, u64 shards, u64 dataset bytes,
 *     u32 classes, u32 what the source was indexed for (1: WAV files, 0:
 *     images), then (offset, length) of the sections: source, shards,
 *     items, name offsets, names
 *   source: cfg.source as given (no NUL)
 *   shards: per shard u64 size, i64 mtime in ns (-1: not known: an URL or
 *     a caller's reader), u32 path bytes, u32 ETag bytes, the path, the
 *     ETag, zeros to a multiple of 8
 *   items: per item a cdl__tar_ref (24 bytes: offset, size, shard, label)
 *   name offsets: per item a u64 into names
 *   names: per item "<shard path>:<member>" and a NUL
 *
 * Loading copies the items (24 bytes each stay resident) and keeps the
 * rest mapped: coordl_item_path reads a name from the mapping, so names
 * cost page cache, not the process's memory. */
#define CDL_IX_MAGIC "coordlIX"
#define CDL_IX_BOM 0x01020304u
#define CDL_IX_VERSION 1u
#define CDL_IX_HEADER 144u
#define CDL_IX_SHARD_FIXED 24u
#define CDL_IX_MTIME_UNKNOWN (-1)
#define CDL_IX_ETAG_MAX 128u

/* Header field offsets. */
enum {
    CDL_IXH_BOM = 8, CDL_IXH_VERSION = 12, CDL_IXH_LEN = 16, CDL_IXH_SUM = 24, CDL_IXH_ITEMS = 32,
    CDL_IXH_SHARDS = 40, CDL_IXH_BYTES = 48, CDL_IXH_CLASSES = 56, CDL_IXH_AUDIO = 60, CDL_IXH_SOURCE = 64,
    CDL_IXH_SHARDSEC = 80, CDL_IXH_ITEMSEC = 96, CDL_IXH_NAMEOFFS = 112, CDL_IXH_NAMES = 128
};

static uint64_t cdl__ix_u64(const cdl__u8 *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t cdl__ix_u32(const cdl__u8 *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static void cdl__ix_put64(cdl__u8 *p, uint64_t v) { memcpy(p, &v, 8); }
static void cdl__ix_put32(cdl__u8 *p, uint32_t v) { memcpy(p, &v, 4); }

/* A 64-bit checksum, eight bytes a step (a 1M-item image is about 80 MB:
 * it must take well under the 1 s a load may take). Not cryptographic: it
 * catches a torn or damaged file, not a forged one. */
static uint64_t cdl__ix_mix(uint64_t h, const cdl__u8 *p, size_t n) {
    const uint64_t k = 0x9E3779B97F4A7C15ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        h = (h ^ cdl__ix_u64(p + i)) * k;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ p[i]) * k;
    return h;
}
CDL_PRIVATE uint64_t cdl__ix_checksum(const cdl__u8 *p, size_t n) {
    static const cdl__u8 zero[8];
    uint64_t h = cdl__ix_mix(0xC0D1D1C5ull ^ n, p, CDL_IXH_SUM);
    h = cdl__ix_mix(h, zero, 8);
    return cdl__ix_mix(h, p + CDL_IXH_SUM + 8, n - CDL_IXH_SUM - 8);
}

/* One shard record of an image, parsed (path and etag point into it). */
typedef struct cdl__ix_shard {
    uint64_t size;
    int64_t mtime_ns;
    const char *path, *etag;
    uint32_t path_len, etag_len;
} cdl__ix_shard;

/* The shard record at *pos, within [pos, end); *pos moves past it. 0 when
 * it does not fit. */
static int cdl__ix_shard_next(const cdl__u8 *p, uint64_t *pos, uint64_t end, cdl__ix_shard *s) {
    if (*pos > end || end - *pos < CDL_IX_SHARD_FIXED) return 0;
    const cdl__u8 *r = p + *pos;
    s->size = cdl__ix_u64(r);
    s->mtime_ns = (int64_t)cdl__ix_u64(r + 8);
    s->path_len = cdl__ix_u32(r + 16);
    s->etag_len = cdl__ix_u32(r + 20);
    const uint64_t body = (uint64_t)s->path_len + s->etag_len, padded = (CDL_IX_SHARD_FIXED + body + 7) / 8 * 8;
    if (s->path_len == 0 || s->etag_len >= CDL_IX_ETAG_MAX || padded > end - *pos) return 0;
    s->path = (const char *)r + CDL_IX_SHARD_FIXED;
    s->etag = s->path + s->path_len;
    if (memchr(s->path, '\0', s->path_len) || memchr(s->etag, '\0', s->etag_len)) return 0;
    *pos += padded;
    return 1;
}

/* Checks an image of n bytes for what it indexes (source, audio) and its
 * own consistency, so that nothing read from it later is out of bounds.
 * 0: sound; CDL_IX_FOREIGN: another source, pipeline, version or byte
 * order; CDL_IX_CORRUPT: damaged. why says what. Touches nothing else:
 * the fuzz target feeds it any bytes. */
CDL_PRIVATE int cdl__ix_check(const cdl__u8 *p, size_t n, const char *source, int audio, char *why, size_t cap) {
    if (n < CDL_IX_HEADER || memcmp(p, CDL_IX_MAGIC, 8) != 0) {
        snprintf(why, cap, "not a coordl index (no \"%s\" header)", CDL_IX_MAGIC);
        return CDL_IX_CORRUPT;
    }
    if (cdl__ix_u32(p + CDL_IXH_BOM) != CDL_IX_BOM) {
        snprintf(why, cap, "written on a machine of another byte order");
        return CDL_IX_FOREIGN;
    }
    if (cdl__ix_u32(p + CDL_IXH_VERSION) != CDL_IX_VERSION) {
        snprintf(why, cap, "format version %u (this coordl reads %u)", cdl__ix_u32(p + CDL_IXH_VERSION),
                 CDL_IX_VERSION);
        return CDL_IX_FOREIGN;
    }
    if (cdl__ix_u64(p + CDL_IXH_LEN) != n) {
        snprintf(why, cap, "%zu bytes, the header says %llu (cut short or appended to)", n,
                 (unsigned long long)cdl__ix_u64(p + CDL_IXH_LEN));
        return CDL_IX_CORRUPT;
    }
    if (cdl__ix_checksum(p, n) != cdl__ix_u64(p + CDL_IXH_SUM)) {
        snprintf(why, cap, "checksum mismatch (the file is damaged)");
        return CDL_IX_CORRUPT;
    }
    const uint64_t items = cdl__ix_u64(p + CDL_IXH_ITEMS), shards = cdl__ix_u64(p + CDL_IXH_SHARDS);
    uint64_t off[5], len[5];
    static const unsigned at[5] = {CDL_IXH_SOURCE, CDL_IXH_SHARDSEC, CDL_IXH_ITEMSEC, CDL_IXH_NAMEOFFS, CDL_IXH_NAMES};
    if (items > (uint64_t)INT32_MAX || shards > UINT32_MAX || shards == 0) {
        snprintf(why, cap, "implausible counts (%llu items, %llu shards)", (unsigned long long)items,
                 (unsigned long long)shards);
        return CDL_IX_CORRUPT;
    }
    for (int i = 0; i < 5; i++) {
        off[i] = cdl__ix_u64(p + at[i]);
        len[i] = cdl__ix_u64(p + at[i] + 8);
        if (off[i] < CDL_IX_HEADER || off[i] > n || len[i] > n - off[i] || ((i == 2 || i == 3) && off[i] % 8) ||
            (i == 2 && len[i] != items * sizeof(cdl__tar_ref)) || (i == 3 && len[i] != items * 8)) {
            snprintf(why, cap, "section %d out of bounds", i);
            return CDL_IX_CORRUPT;
        }
    }
    if (len[4] == 0 || p[off[4] + len[4] - 1] != '\0') {
        snprintf(why, cap, "names not NUL-terminated");
        return CDL_IX_CORRUPT;
    }
    if (len[0] != strlen(source) || memcmp(p + off[0], source, len[0]) != 0) {
        snprintf(why, cap, "indexes another source (\"%.*s\")", (int)(len[0] < 200 ? len[0] : 200),
                 (const char *)p + off[0]);
        return CDL_IX_FOREIGN;
    }
    if ((int)cdl__ix_u32(p + CDL_IXH_AUDIO) != (audio ? 1 : 0)) {
        snprintf(why, cap, "indexed for another pipeline (%s)", audio ? "images, not WAV files" : "WAV files");
        return CDL_IX_FOREIGN;
    }
    uint64_t pos = off[1];
    cdl__ix_shard s;
    for (uint64_t i = 0; i < shards; i++)
        if (!cdl__ix_shard_next(p, &pos, off[1] + len[1], &s)) {
            snprintf(why, cap, "shard record %llu malformed", (unsigned long long)i);
            return CDL_IX_CORRUPT;
        }
    const uint32_t classes = cdl__ix_u32(p + CDL_IXH_CLASSES);
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < items; i++) {
        cdl__tar_ref r;
        memcpy(&r, p + off[2] + i * sizeof r, sizeof r);
        const uint64_t name = cdl__ix_u64(p + off[3] + i * 8);
        if (r.shard >= shards || r.label < 0 || (uint32_t)r.label >= classes || name >= len[4] ||
            r.bytes > UINT64_MAX - bytes) {
            snprintf(why, cap, "item %llu malformed", (unsigned long long)i);
            return CDL_IX_CORRUPT;
        }
        bytes += r.bytes;
    }
    if (bytes != cdl__ix_u64(p + CDL_IXH_BYTES)) {
        snprintf(why, cap, "the items' sizes do not add up to the dataset's bytes");
        return CDL_IX_CORRUPT;
    }
    return 0;
}

/* What a shard is now: its size, and its mtime (a local file) or its ETag
 * (an http(s):// object). A caller's reader gives the size only. */
static coordl_status cdl__ix_stamp(const coordl *L, const char *path, uint64_t *size, int64_t *mtime_ns, char *etag,
                                   char *why, size_t cap) {
    struct stat sb;
    *mtime_ns = CDL_IX_MTIME_UNKNOWN;
    etag[0] = '\0';
    if (L->io == &cdl__posix_io && stat(path, &sb) == 0) {
        *size = (uint64_t)sb.st_size;
        *mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
        return COORDL_OK;
    }
    void *f;
    coordl_status rc = cdl__io_open(L, path, &f, size, why, cap);
    if (rc != COORDL_OK) return rc;
    cdl__io_etag(L, f, etag, CDL_IX_ETAG_MAX);
    cdl__io_close(L, f);
    return COORDL_OK;
}

/* The image of the index just scanned (items, tar_items, strings,
 * tar_shards), in *out (cdl__malloc). */
static coordl_status cdl__ix_build(coordl *L, cdl__u8 **out, size_t *out_len) {
    const cdl__index *x = &L->index;
    const size_t src_len = strlen(L->cfg.source);
    uint64_t shards_len = 0, names_len = 0;
    char (*etags)[CDL_IX_ETAG_MAX] = cdl__calloc(L, x->ntar_shards, sizeof *etags);
    uint64_t *sizes = cdl__calloc(L, x->ntar_shards, sizeof *sizes);
    int64_t *mtimes = cdl__calloc(L, x->ntar_shards, sizeof *mtimes);
    coordl_status rc = etags && sizes && mtimes ? COORDL_OK : cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; rc == COORDL_OK && i < x->ntar_shards; i++) {
        char why[CDL_ERRMSG_MAX];
        const char *path = x->strings + x->tar_shards[i];
        rc = cdl__ix_stamp(L, path, &sizes[i], &mtimes[i], etags[i], why, sizeof why);
        if (rc != COORDL_OK) rc = cdl__open_fail(rc, "index: cannot stat shard %s: %s", path, why);
        shards_len += (CDL_IX_SHARD_FIXED + strlen(path) + strlen(etags[i]) + 7) / 8 * 8;
    }
    for (uint64_t i = 0; rc == COORDL_OK && i < x->num_items; i++) names_len += strlen(x->strings + x->items[i].path_off) + 1;
    if (names_len == 0) names_len = 1;
    const uint64_t src_off = CDL_IX_HEADER, sh_off = (src_off + src_len + 7) / 8 * 8, it_off = sh_off + shards_len,
                   no_off = it_off + x->num_items * sizeof(cdl__tar_ref), nm_off = no_off + x->num_items * 8,
                   total = nm_off + names_len;
    cdl__u8 *p = rc == COORDL_OK ? cdl__calloc(L, 1, (size_t)total) : NULL;
    if (rc == COORDL_OK && !p) rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the index (%llu bytes)",
                                                   (unsigned long long)total);
    if (rc == COORDL_OK) {
        memcpy(p, CDL_IX_MAGIC, 8);
        cdl__ix_put32(p + CDL_IXH_BOM, CDL_IX_BOM);
        cdl__ix_put32(p + CDL_IXH_VERSION, CDL_IX_VERSION);
        cdl__ix_put64(p + CDL_IXH_LEN, total);
        cdl__ix_put64(p + CDL_IXH_ITEMS, x->num_items);
        cdl__ix_put64(p + CDL_IXH_SHARDS, x->ntar_shards);
        cdl__ix_put64(p + CDL_IXH_BYTES, x->dataset_bytes);
        cdl__ix_put32(p + CDL_IXH_CLASSES, x->num_classes);
        cdl__ix_put32(p + CDL_IXH_AUDIO, L->cfg.pipeline == COORDL_PIPE_AUDIO);
        const uint64_t sec[5][2] = {{src_off, src_len}, {sh_off, shards_len}, {it_off, x->num_items * sizeof(cdl__tar_ref)},
                                    {no_off, x->num_items * 8}, {nm_off, names_len}};
        static const unsigned at[5] = {CDL_IXH_SOURCE, CDL_IXH_SHARDSEC, CDL_IXH_ITEMSEC, CDL_IXH_NAMEOFFS,
                                       CDL_IXH_NAMES};
        for (int i = 0; i < 5; i++) {
            cdl__ix_put64(p + at[i], sec[i][0]);
            cdl__ix_put64(p + at[i] + 8, sec[i][1]);
        }
        memcpy(p + src_off, L->cfg.source, src_len);
        uint64_t at_sh = sh_off;
        for (size_t i = 0; i < x->ntar_shards; i++) {
            const char *path = x->strings + x->tar_shards[i];
            const uint32_t pl = (uint32_t)strlen(path), el = (uint32_t)strlen(etags[i]);
            cdl__ix_put64(p + at_sh, sizes[i]);
            cdl__ix_put64(p + at_sh + 8, (uint64_t)mtimes[i]);
            cdl__ix_put32(p + at_sh + 16, pl);
            cdl__ix_put32(p + at_sh + 20, el);
            memcpy(p + at_sh + CDL_IX_SHARD_FIXED, path, pl);
            memcpy(p + at_sh + CDL_IX_SHARD_FIXED + pl, etags[i], el);
            at_sh += (CDL_IX_SHARD_FIXED + pl + el + 7) / 8 * 8;
        }
        uint64_t name_at = 0;
        for (uint64_t i = 0; i < x->num_items; i++) {
            cdl__tar_ref r = {x->tar_items[i].offset, x->items[i].bytes, x->tar_items[i].shard, x->items[i].label};
            memcpy(p + it_off + i * sizeof r, &r, sizeof r);
            cdl__ix_put64(p + no_off + i * 8, name_at);
            const char *name = x->strings + x->items[i].path_off;
            const size_t nl = strlen(name) + 1;
            memcpy(p + nm_off + name_at, name, nl);
            name_at += nl;
        }
        cdl__ix_put64(p + CDL_IXH_SUM, cdl__ix_checksum(p, (size_t)total));
        *out = p;
        *out_len = (size_t)total;
    }
    cdl__free(L, etags);
    cdl__free(L, sizes);
    cdl__free(L, mtimes);
    return rc;
}

/* Frees the image and what points into it. */
CDL_PRIVATE void cdl__ix_release(coordl *L) {
    cdl__index *x = &L->index;
    if (x->image) {
        if (x->image_mapped) munmap(x->image, x->image_len);
        else cdl__free(L, x->image);
    }
    if (!x->tar_refs_shared) cdl__free(L, x->tar_refs);
    x->tar_refs_shared = 0;
    x->image = NULL;
    x->image_len = 0;
    x->image_mapped = 0;
    x->tar_refs = NULL;
    x->name_offs = NULL;
    x->names = NULL;
    x->names_len = 0;
}

/* L's tar index becomes the checked image p (n bytes; mapped or a
 * cdl__malloc allocation, which L then owns): the scan's arrays and
 * string arena go, the shard paths come from the image. */
CDL_PRIVATE coordl_status cdl__ix_adopt(coordl *L, cdl__u8 *p, size_t n, int mapped) {
    cdl__index *x = &L->index;
    const uint64_t items = cdl__ix_u64(p + CDL_IXH_ITEMS), shards = cdl__ix_u64(p + CDL_IXH_SHARDS);
    /* a group's index (in /dev/shm: never evicted, never re-read from a
     * slow file system) keeps its items where they are, shared by every
     * sibling; any other image's items are copied, so a training step
     * never waits on a page fault to a network file system */
    const int shared = mapped == CDL_IX_MAPPED_SHARED;
    cdl__tar_ref *refs = shared ? (cdl__tar_ref *)(void *)(p + cdl__ix_u64(p + CDL_IXH_ITEMSEC))
                                : cdl__malloc(L, (size_t)(items ? items : 1) * sizeof *refs);
    uint64_t *shard_offs = cdl__malloc(L, (size_t)shards * sizeof *shard_offs);
    char *strings = NULL;
    size_t strings_cap = 0, strings_len = 0;
    int ok = refs && shard_offs;
    uint64_t pos = cdl__ix_u64(p + CDL_IXH_SHARDSEC), end = pos + cdl__ix_u64(p + CDL_IXH_SHARDSEC + 8);
    for (uint64_t i = 0; ok && i < shards; i++) {
        cdl__ix_shard s;
        memset(&s, 0, sizeof s); /* filled: the image was checked (gcc -O3 cannot see it) */
        cdl__ix_shard_next(p, &pos, end, &s); /* checked */
        ok = cdl__reserve(L, (void **)&strings, &strings_cap, strings_len + s.path_len + 1);
        if (!ok) break;
        memcpy(strings + strings_len, s.path, s.path_len);
        strings[strings_len + s.path_len] = '\0';
        shard_offs[i] = strings_len;
        strings_len += s.path_len + 1;
    }
    if (!ok) {
        if (!shared) cdl__free(L, refs);
        cdl__free(L, shard_offs);
        cdl__free(L, strings);
        return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory loading the index of %llu items",
                              (unsigned long long)items);
    }
    if (!shared) memcpy(refs, p + cdl__ix_u64(p + CDL_IXH_ITEMSEC), (size_t)items * sizeof *refs);
    /* box labels, read once the index is made (source.c), need each
     * item's .txt member, which the image does not hold: kept from the
     * scan (a saved index is not loaded with box labels) */
    if (x->tar_items && L->cfg.labels == COORDL_LABELS_BOXES && !x->tar_txt) {
        x->tar_txt = cdl__malloc(L, (size_t)(items ? items : 1) * sizeof *x->tar_txt);
        if (!x->tar_txt) {
            if (!shared) cdl__free(L, refs);
            cdl__free(L, shard_offs);
            cdl__free(L, strings);
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the box labels' places of %llu items",
                                  (unsigned long long)items);
        }
        for (uint64_t i = 0; i < items; i++) {
            x->tar_txt[i].offset = x->tar_items[i].txt_offset;
            x->tar_txt[i].bytes = x->tar_items[i].txt_bytes;
        }
    }
    cdl__ix_release(L);
    cdl__free(L, x->items);
    cdl__free(L, x->tar_items);
    cdl__free(L, x->tar_shards);
    cdl__free(L, x->strings);
    x->items = NULL;
    x->tar_items = NULL;
    x->strings = strings;
    x->strings_len = strings_len;
    x->strings_cap = strings_cap;
    x->tar_shards = shard_offs;
    x->ntar_shards = (size_t)shards;
    x->tar_refs = refs;
    x->num_items = items;
    x->num_classes = cdl__ix_u32(p + CDL_IXH_CLASSES);
    x->dataset_bytes = cdl__ix_u64(p + CDL_IXH_BYTES);
    x->image = p;
    x->image_len = n;
    x->image_mapped = mapped != CDL_IX_HEAP;
    x->tar_refs_shared = shared;
    x->name_offs = (const uint64_t *)(const void *)(p + cdl__ix_u64(p + CDL_IXH_NAMEOFFS));
    x->names = (const char *)p + cdl__ix_u64(p + CDL_IXH_NAMES);
    x->names_len = cdl__ix_u64(p + CDL_IXH_NAMES + 8);
    /* the checks and the copy touched every page: drop them from this
     * process (the file's pages stay in the page cache); a name is read
     * back when asked for */
    if (mapped) madvise(p, n, MADV_DONTNEED);
    return COORDL_OK;
}

/* Whether the checked image p indexes the shards listed now, as they are
 * now. 0 and why when not. */
static int cdl__ix_fresh(const coordl *L, const cdl__u8 *p, char *why, size_t cap) {
    const cdl__index *x = &L->index;
    const uint64_t shards = cdl__ix_u64(p + CDL_IXH_SHARDS);
    if (shards != x->ntar_shards) {
        snprintf(why, cap, "it records %llu shards, the source names %zu now", (unsigned long long)shards,
                 x->ntar_shards);
        return 0;
    }
    uint64_t pos = cdl__ix_u64(p + CDL_IXH_SHARDSEC), end = pos + cdl__ix_u64(p + CDL_IXH_SHARDSEC + 8);
    for (size_t i = 0; i < x->ntar_shards; i++) {
        cdl__ix_shard s;
        cdl__ix_shard_next(p, &pos, end, &s); /* checked */
        const char *path = x->strings + x->tar_shards[i];
        if (strlen(path) != s.path_len || memcmp(path, s.path, s.path_len) != 0) {
            snprintf(why, cap, "shard %zu is %.150s now, it records %.*s", i, path, (int)(s.path_len < 150 ? s.path_len : 150), s.path);
            return 0;
        }
        uint64_t size;
        int64_t mtime;
        char etag[CDL_IX_ETAG_MAX], err[CDL_ERRMSG_MAX];
        if (cdl__ix_stamp(L, path, &size, &mtime, etag, err, sizeof err) != COORDL_OK) {
            snprintf(why, cap, "shard %.200s: %.200s", path, err);
            return 0;
        }
        if (size != s.size || mtime != s.mtime_ns || strlen(etag) != s.etag_len ||
            memcmp(etag, s.etag, s.etag_len) != 0) {
            snprintf(why, cap, "shard %.300s changed since it was indexed (%s)", path,
                     size != s.size ? "its size" : mtime != s.mtime_ns ? "its modification time" : "its ETag");
            return 0;
        }
    }
    return 1;
}

/* Loads index_path when it is sound and fresh. 1: loaded; 0: not (absent,
 * stale, foreign, corrupt: *why, and *absent for a missing file); -1: an
 * error that fails the open (out of memory). */
static int cdl__ix_try_file(coordl *L, const char *path, int how, int *absent, char *why, size_t cap) {
    *absent = 0;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *absent = errno == ENOENT;
        snprintf(why, cap, "%s", strerror(errno));
        return 0;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < (off_t)CDL_IX_HEADER) {
        close(fd);
        snprintf(why, cap, "corrupt: not a coordl index (a regular file of at least %u bytes)", CDL_IX_HEADER);
        return 0;
    }
    const size_t n = (size_t)sb.st_size;
    void *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(why, cap, "cannot map it: %s", strerror(errno));
        return 0;
    }
    char what[CDL_ERRMSG_MAX - 64];
    const int bad = cdl__ix_check(m, n, L->cfg.source, L->cfg.pipeline == COORDL_PIPE_AUDIO, what, sizeof what);
    if (bad) {
        snprintf(why, cap, "%s: %s", bad == CDL_IX_FOREIGN ? "foreign" : "corrupt", what);
        munmap(m, n);
        return 0;
    }
    if (!cdl__ix_fresh(L, m, what, sizeof what)) {
        snprintf(why, cap, "stale: %s", what);
        munmap(m, n);
        return 0;
    }
    if (cdl__ix_adopt(L, m, n, how) != COORDL_OK) {
        munmap(m, n);
        return -1;
    }
    return 1;
}

/* Writes the image to path atomically: a temporary beside it, fsync,
 * rename, fsync of the folder. 0 and why on failure (nothing left). */
CDL_PRIVATE int cdl__ix_write(const cdl__u8 *p, size_t n, const char *path, char *why, size_t cap) {
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%lx", path, (long)getpid(), (unsigned long)(uintptr_t)p) >= (int)sizeof tmp) {
        snprintf(why, cap, "path too long");
        return 0;
    }
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(why, cap, "cannot create %.300s: %s", tmp, strerror(errno));
        return 0;
    }
    size_t at = 0;
    while (at < n) {
        const ssize_t w = write(fd, p + at, n - at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        at += (size_t)w;
    }
    int ok = at == n;
    if (!ok) snprintf(why, cap, "cannot write %.300s: %s", tmp, strerror(errno));
    if (ok && fsync(fd) != 0) {
        snprintf(why, cap, "cannot fsync %.300s: %s", tmp, strerror(errno));
        ok = 0;
    }
    close(fd);
    if (ok && rename(tmp, path) != 0) {
        snprintf(why, cap, "cannot rename %.150s to %.150s: %s", tmp, path, strerror(errno));
        ok = 0;
    }
    if (!ok) {
        unlink(tmp);
        return 0;
    }
    /* the rename itself is durable once its folder is synced */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    const int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return 1;
}

/* Scans the listed shards and makes the result an image: written to
 * path (when given) and mapped from there, else kept in memory. */
static coordl_status cdl__ix_scan(coordl *L, int kind, const char *text, size_t len, const char *path, int how,
                                  const char *what) {
    coordl_status rc = cdl__index_tar(L, kind, text, len);
    cdl__u8 *p = NULL;
    size_t n = 0;
    if (rc == COORDL_OK) rc = cdl__ix_build(L, &p, &n);
    if (rc != COORDL_OK) return rc;
    if (path) {
        char why[CDL_ERRMSG_MAX];
        if (!cdl__ix_write(p, n, path, why, sizeof why)) {
            cdl__log(L, COORDL_LOG_WARN, "%s: %s not saved (%s); this open uses the scan", what, path, why);
        } else {
            const int fd = open(path, O_RDONLY | O_CLOEXEC);
            void *m = fd >= 0 ? mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
            if (fd >= 0) close(fd);
            /* the file is what later opens load: this one reads it too
             * (its names stay on disk), once it checks as written */
            if (m != MAP_FAILED && memcmp(m, p, CDL_IX_HEADER) == 0) {
                rc = cdl__ix_adopt(L, m, n, how);
                if (rc != COORDL_OK) munmap(m, n);
                cdl__free(L, p);
                if (rc == COORDL_OK)
                    cdl__log(L, COORDL_LOG_INFO, "%s: saved %s (%llu items, %zu shards, %zu bytes)", what, path,
                             (unsigned long long)L->index.num_items, L->index.ntar_shards, n);
                return rc;
            }
            if (m != MAP_FAILED) munmap(m, n);
        }
    }
    rc = cdl__ix_adopt(L, p, n, CDL_IX_HEAP);
    if (rc != COORDL_OK) cdl__free(L, p);
    return rc;
}

/* The file a coordinated group shares its index through when index_path
 * is not set: the first member to open scans and writes it, its siblings
 * map it (cfg.group is a checked name: no slash). 0: not a group, or
 * index_path is set (the group then shares that file the same way). */
CDL_PRIVATE int cdl__ix_group_path(const coordl *L, char *buf, size_t cap) {
    if (!L->cfg.group || !L->cfg.group[0] || (L->cfg.index_path && L->cfg.index_path[0])) return 0;
    const int n = snprintf(buf, cap, "/dev/shm/coordl-%s.index", L->cfg.group);
    return n > 0 && (size_t)n < cap;
}

/* Indexes a tar-shard source (kind and list as cdl__index_tar takes
 * them), through cfg.index_path when set: loaded when sound and fresh,
 * else scanned and saved. Processes opening at once take the lock file
 * "<index_path>.lock" while they scan, so one scans and the others load
 * what it wrote. A coordinated group without index_path does the same
 * through its file in /dev/shm (cdl__ix_group_path), whose items its
 * members map instead of copying. */
CDL_PRIVATE coordl_status cdl__index_tar_saved(coordl *L, int kind, const char *text, size_t len) {
    const char *path = L->cfg.index_path;
    const char *what = "index_path";
    int how = CDL_IX_MAPPED;
    char group_path[PATH_MAX];
    if ((!path || !path[0]) && cdl__ix_group_path(L, group_path, sizeof group_path)) {
        path = group_path;
        what = "group index";
        how = CDL_IX_MAPPED_SHARED;
    }
    coordl_status rc = cdl__tar_list_shards(L, kind, text, len);
    if (rc != COORDL_OK) return rc;
    if (L->index.ntar_shards == 0)
        return cdl__open_fail(COORDL_ERR_INVALID, "source: %s names no .tar shards", L->cfg.source);
    if (path && path[0] && L->cfg.labels == COORDL_LABELS_BOXES) {
        /* the saved index holds no .txt members: box labels need the scan */
        cdl__log(L, COORDL_LOG_INFO, "%s: %s not used with labels = COORDL_LABELS_BOXES (the shards are "
                 "scanned for their .txt members)", what, path);
        path = NULL;
    }
    if ((!path || !path[0]) && cdl__tar_lazy_possible(L)) {
        const int lazy = cdl__tar_lazy_open(L, &rc);
        if (lazy > 0) return COORDL_OK;
        if (lazy < 0) return rc;
    }
    if (!path || !path[0]) return cdl__ix_scan(L, kind, text, len, NULL, CDL_IX_HEAP, what);
    char why[CDL_ERRMSG_MAX];
    int absent;
    int got = cdl__ix_try_file(L, path, how, &absent, why, sizeof why);
    if (got > 0)
        cdl__log(L, COORDL_LOG_INFO, "%s: loaded %s (%llu items, %zu shards)", what, path,
                 (unsigned long long)L->index.num_items, L->index.ntar_shards);
    if (got) return got > 0 ? COORDL_OK : cdl__open_fail(COORDL_ERR_NOMEM, "out of memory loading %s", path);
    char lock[PATH_MAX];
    int lfd = -1;
    if (snprintf(lock, sizeof lock, "%s.lock", path) < (int)sizeof lock) {
        lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        while (lfd >= 0 && flock(lfd, LOCK_EX) != 0 && errno == EINTR) {}
    }
    if (lfd >= 0) { /* another process may have saved it while we waited */
        char why2[CDL_ERRMSG_MAX];
        int absent2;
        got = cdl__ix_try_file(L, path, how, &absent2, why2, sizeof why2);
        if (got) {
            close(lfd);
            if (got > 0) cdl__log(L, COORDL_LOG_INFO, "%s: loaded %s, saved meanwhile by another process", what, path);
            return got > 0 ? COORDL_OK : cdl__open_fail(COORDL_ERR_NOMEM, "out of memory loading %s", path);
        }
    }
    if (absent) cdl__log(L, COORDL_LOG_INFO, "%s: %s does not exist yet; scanning the shards to save it", what, path);
    else cdl__log(L, COORDL_LOG_WARN, "%s: %s not used (%s); rescanning the shards", what, path, why);
    rc = cdl__ix_scan(L, kind, text, len, path, how, what);
    if (lfd >= 0) close(lfd); /* releases the lock */
    return rc;
}

/* Removes a group's index file and its lock (the last member leaving). */
CDL_PRIVATE void cdl__ix_group_remove(const coordl *L) {
    char path[PATH_MAX], lock[PATH_MAX + 8];
    if (!cdl__ix_group_path(L, path, sizeof path)) return;
    snprintf(lock, sizeof lock, "%s.lock", path);
    unlink(path);
    unlink(lock);
}

#ifdef COORDL_MPI
/* A rank's index from the image another rank broadcast (p: cdl__malloc,
 * n bytes; L owns it on success). */
CDL_PRIVATE coordl_status cdl__index_from_image(coordl *L, cdl__u8 *p, size_t n) {
    char why[CDL_ERRMSG_MAX - 128];
    if (cdl__ix_check(p, n, L->cfg.source, L->cfg.pipeline == COORDL_PIPE_AUDIO, why, sizeof why))
        return cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: the index rank 0 sent does not fit this rank's config: %s",
                              why);
    return cdl__ix_adopt(L, p, n, CDL_IX_HEAP);
}

/* A rank's index from its node's copy of that image (p: a read-only
 * mapping of n bytes that L then owns; its items are read in place). */
CDL_PRIVATE coordl_status cdl__index_from_shared(coordl *L, cdl__u8 *p, size_t n) {
    char why[CDL_ERRMSG_MAX - 128];
    if (cdl__ix_check(p, n, L->cfg.source, L->cfg.pipeline == COORDL_PIPE_AUDIO, why, sizeof why))
        return cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: the node's copy of rank 0's index does not fit this "
                              "rank's config: %s", why);
    return cdl__ix_adopt(L, p, n, CDL_IX_MAPPED_SHARED);
}
#endif /* COORDL_MPI */
