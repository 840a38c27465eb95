/* SPDX-License-Identifier: MIT */
/*
 * tar.c - WebDataset tar shards.
 *
 * Owns:  the state of one shard scan (cdl__tar_index, on the scanning
 *        thread's stack); writes L->index at open; a lazy index's scan of
 *        one shard (cdl__tar_lazy_scan, index.c's callback)
 * Lock:  none: at open, one thread; a lazy scan writes only its own
 *        block, on any thread (index.c publishes it under its lock)
 * Calls: status, remote, io, index (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "tar.h"
#include "status.h"
#include "remote.h"
#include "io.h"
#include "io_state.h"
#include "index.h"
#include "index_state.h"
#include "handle.h"

/* ---- WebDataset tar shards ------------------------------------------------
 * A shard is indexed from its headers (ustar, GNU long names 'L', pax
 * extended headers 'x'), read through the reader one 512-byte header at a
 * time; the only data read at open is that of the small members the index
 * needs (.cls labels, long names, pax records), each together with the
 * header after it, so image data is never read at open.
 * Consecutive members with the same key (the path up to the first dot of
 * its last component, as WebDataset groups them) form a sample; its image
 * is the first member whose extension the pipeline reads, and an item is
 * (shard, offset, size) of that member. Labels: every sample's .cls text,
 * or else (no sample has one) the first folder of the key, numbered as an
 * ImageFolder numbers its class folders; in that case items are ordered as
 * an ImageFolder of the same tree orders its files (by class, then path),
 * so a tar of a tree gives the tree's batches. With .cls labels, items are
 * in shard order, then in member order. Hidden members (a path component
 * starting with '.') are skipped, as ImageFolder skips hidden files.
 * Links are members like any other (a tar of a tree holds a file's second
 * hard link, and every symbolic link, as a link, not as data): once the
 * shard's headers are all read (a symbolic link may point forward), each
 * link is followed to the regular member it leads to, inside the same
 * shard, and the item reads that member's bytes under the link's name. A
 * hard link names an earlier member; a symbolic link's relative target is
 * taken from the link's folder, folders on its way may be links too. A
 * link that leads nowhere in the shard (an absolute target, one climbing
 * out of it, a missing member, a folder, a loop) is skipped with a warning
 * in the log, as are sparse members (their data is not the file). */
#define CDL_TAR_BLOCK 512u
#define CDL_TAR_WINDOW 4096u     /* largest small-member read (its data and the next header) */
#define CDL_TAR_NAME_MAX 4096u   /* longest member name accepted */
#define CDL_TAR_PAX_MAX (1u << 20) /* largest pax extended header accepted */
#define CDL_TAR_CLS_MAX 64u      /* a .cls member longer than this is not a class number */
#define CDL_TAR_LINK_HOPS 40u    /* links followed for one, as Linux's MAXSYMLINKS: more is a loop */
#define CDL_TAR_SKIPS_LOGGED 8u  /* skipped members named one by one; the rest are counted */
#define CDL_TAR_NONE UINT32_MAX

/* What a member is, for link resolution. */
enum { CDL_TAR_FILE = 'f', CDL_TAR_HARD = 'h', CDL_TAR_SYM = 's', CDL_TAR_DIR = 'd', CDL_TAR_OTHER = 'o' };

/* A member of the shard being scanned, kept until its links are resolved. */
typedef struct cdl__tar_entry {
    uint64_t name_off;   /* its path, normalized, in t->names             */
    uint64_t target_off; /* a link's target as stored, in t->names        */
    uint64_t hdr, data, size; /* its header; a regular member's data      */
    uint32_t order;      /* its position in the shard                      */
    uint32_t leads_to;   /* a link's regular member once resolved, or CDL_TAR_NONE */
    char kind;           /* CDL_TAR_*                                      */
} cdl__tar_entry;

/* A sample while the shards are scanned (the items are built from these
 * once every shard is indexed and the labels are known). */
typedef struct cdl__tar_sample {
    uint64_t path_off; /* "shard:member" in the string arena           */
    uint64_t offset;   /* of the image member's data in the shard      */
    uint64_t bytes;
    uint32_t shard;
    uint32_t member_off; /* the member's name: path + member_off       */
    int32_t label;       /* the .cls label, or -1                      */
    uint32_t image_link, cls_link; /* while its shard is scanned: the link
                            entry the image (or .cls) is, or CDL_TAR_NONE */
    uint32_t txt_bytes;  /* the .txt member (box labels); UINT32_MAX: none */
    uint64_t txt_offset;
} cdl__tar_sample;

typedef struct cdl__tar_index {
    coordl *L;
    /* shard being scanned */
    const char *shard;
    uint32_t shard_index;
    void *file;
    uint64_t size;
    cdl__u8 *win; /* the last window read: [win_off, win_off + win_len) */
    uint64_t win_off;
    size_t win_len;
    char *pending_name; size_t pending_cap; int have_pending_name; /* GNU 'L' or pax path */
    uint64_t pending_size; int have_pending_size;                 /* pax size            */
    int pending_sparse;                                           /* pax GNU.sparse.*    */
    char *pending_link; size_t pending_link_cap; int have_pending_link; /* GNU 'K' or pax linkpath */
    cdl__u8 *pax; size_t pax_cap;
    /* the sample being grouped */
    char *key; size_t key_len, key_cap; int in_sample;
    char *image; size_t image_cap; int has_image;
    uint64_t image_off, image_bytes;
    int32_t cls;
    uint32_t image_link, cls_link; /* the image (.cls) is a link entry   */
    uint64_t txt_off, txt_bytes; int has_txt; /* the key's .txt member (box labels) */
    char *path; size_t path_cap; /* "shard:member" being built */
    /* the shard's members by name, for its links */
    cdl__tar_entry *entries; size_t nentries, entries_cap;
    char *names; size_t names_len, names_cap;
    uint32_t *by_name; size_t by_name_cap; /* entries sorted by (name, order) */
    char *link_path, *link_work; size_t link_path_cap, link_work_cap;
    size_t nlinks, first_sample; /* in this shard */
    size_t skipped; /* links and sparse members skipped (the first few logged) */
    /* every shard's samples so far */
    cdl__tar_sample *samples; size_t nsamples, samples_cap;
    /* a lazy scan (one shard at a time, while training): member names go to
     * lz_names, not the handle's string arena, which other threads read */
    int lazy;
    char *lz_names; size_t lz_len, lz_cap;
    /* class folders seen (first components of member paths), NUL-separated */
    char *classes; size_t classes_len, classes_cap;
    size_t last_class_off; int have_last_class;
} cdl__tar_index;

CDL_PRIVATE int cdl__is_tar_name(const char *p) {
    size_t n = strlen(p);
    return n >= 4 && strcasecmp(p + n - 4, ".tar") == 0;
}

/* An octal numeric field (optionally space- or NUL-padded), or GNU's
 * base-256 (leading byte 0x80). 0 for anything else. */
static int cdl__tar_number(const cdl__u8 *f, size_t n, uint64_t *out) {
    uint64_t v = 0;
    size_t i = 0;
    if (f[0] & 0x80) {
        if (f[0] != 0x80) return 0; /* negative (0xFF) or beyond 2^88 */
        for (i = 1; i < n; i++) {
            if (v >> 56) return 0;
            v = v << 8 | f[i];
        }
        *out = v;
        return 1;
    }
    while (i < n && (f[i] == ' ' || f[i] == 0)) i++;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v >> 61) return 0;
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    for (; i < n; i++)
        if (f[i] != ' ' && f[i] != 0) return 0;
    *out = v;
    return 1;
}

/* The header's checksum: the bytes summed with the checksum field as
 * spaces, unsigned (POSIX) or signed (old writers). */
static int cdl__tar_checksum_ok(const cdl__u8 *h) {
    uint64_t stored;
    if (!cdl__tar_number(h + 148, 8, &stored)) return 0;
    uint64_t u = 0;
    int64_t sgn = 0;
    for (unsigned i = 0; i < CDL_TAR_BLOCK; i++) {
        const int c = (i >= 148 && i < 156) ? ' ' : h[i];
        u += (unsigned)c;
        sgn += (signed char)c;
    }
    return stored == u || (int64_t)stored == sgn;
}

/* Reads [off, off + len) of the shard (clipped at its end) into the
 * window. */
static coordl_status cdl__tar_fill(cdl__tar_index *t, uint64_t off, size_t len) {
    char err[CDL_ERRMSG_MAX];
    uint64_t got = 0;
    if (len > t->size - off) len = (size_t)(t->size - off);
    t->win_len = 0;
    coordl_status rc = cdl__io_read(t->L, t->file, t->shard, t->win, len, off, &got, err, sizeof err);
    if (rc != COORDL_OK) return cdl__open_fail(rc, "source: tar shard %s", err);
    t->win_off = off;
    t->win_len = (size_t)got;
    return COORDL_OK;
}

/* len bytes at off (off + len <= size): from the window when they lie in
 * it, else read (a header is one read of its 512 bytes). */
static coordl_status cdl__tar_get(cdl__tar_index *t, uint64_t off, size_t len, void *dst) {
    uint64_t got = 0;
    coordl_status rc = COORDL_OK;
    if (off >= t->win_off && off - t->win_off <= t->win_len && len <= t->win_len - (off - t->win_off)) {
        memcpy(dst, t->win + (off - t->win_off), len);
        return COORDL_OK;
    }
    if (len > CDL_TAR_WINDOW) {
        char err[CDL_ERRMSG_MAX];
        rc = cdl__io_read(t->L, t->file, t->shard, dst, len, off, &got, err, sizeof err);
        if (rc != COORDL_OK) return cdl__open_fail(rc, "source: tar shard %s", err);
    } else {
        if ((rc = cdl__tar_fill(t, off, len)) != COORDL_OK) return rc;
        got = t->win_len;
        if (got >= len) memcpy(dst, t->win, len);
    }
    if (got < len)
        return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: cut short at offset %llu (the reader "
                              "gave %llu of %zu bytes; its size was %llu at open)", t->shard,
                              (unsigned long long)(off + got), (unsigned long long)got, len,
                              (unsigned long long)t->size);
    return COORDL_OK;
}

/* The data of a small member the index needs (a .cls, a pax header, a long
 * name): read together with the header after it, one read for both. */
static coordl_status cdl__tar_get_data(cdl__tar_index *t, uint64_t data, size_t len, void *dst) {
    const uint64_t padded = ((uint64_t)len + CDL_TAR_BLOCK - 1) / CDL_TAR_BLOCK * CDL_TAR_BLOCK;
    const int in_window = data >= t->win_off && data - t->win_off <= t->win_len &&
                          len <= t->win_len - (data - t->win_off);
    if (!in_window && padded + CDL_TAR_BLOCK <= CDL_TAR_WINDOW) {
        coordl_status rc = cdl__tar_fill(t, data, (size_t)(padded + CDL_TAR_BLOCK));
        if (rc != COORDL_OK) return rc;
    }
    return cdl__tar_get(t, data, len, dst);
}

/* Keeps the first folder of a member path as a class name (the run of
 * equal names is stored once; sorted and deduplicated at the end). */
static int cdl__tar_note_class(cdl__tar_index *t, const char *name, size_t n) {
    if (t->have_last_class && strlen(t->classes + t->last_class_off) == n &&
        memcmp(t->classes + t->last_class_off, name, n) == 0)
        return 1;
    if (!cdl__reserve(t->L, (void **)&t->classes, &t->classes_cap, t->classes_len + n + 1)) return 0;
    memcpy(t->classes + t->classes_len, name, n);
    t->classes[t->classes_len + n] = '\0';
    t->last_class_off = t->classes_len;
    t->have_last_class = 1;
    t->classes_len += n + 1;
    return 1;
}

/* The sample grouped so far becomes a staged item (when it has an image). */
static coordl_status cdl__tar_flush(cdl__tar_index *t) {
    coordl *L = t->L;
    if (!t->in_sample || !t->has_image) {
        t->in_sample = 0;
        return COORDL_OK;
    }
    t->in_sample = 0;
    const size_t slen = strlen(t->shard), mlen = strlen(t->image);
    if (!cdl__reserve(L, (void **)&t->path, &t->path_cap, slen + 1 + mlen + 1) ||
        !cdl__reserve(L, (void **)&t->samples, &t->samples_cap, (t->nsamples + 1) * sizeof *t->samples))
        return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
    memcpy(t->path, t->shard, slen);
    t->path[slen] = ':';
    memcpy(t->path + slen + 1, t->image, mlen + 1);
    cdl__tar_sample *s = &t->samples[t->nsamples];
    if (t->lazy) {
        if (t->lz_len + mlen + 1 > UINT32_MAX ||
            !cdl__reserve(L, (void **)&t->lz_names, &t->lz_cap, t->lz_len + mlen + 1))
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
        memcpy(t->lz_names + t->lz_len, t->image, mlen + 1);
        s->path_off = t->lz_len;
        t->lz_len += mlen + 1;
    } else if (!cdl__strings_append(L, t->path, slen + 1 + mlen, &s->path_off)) {
        return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
    }
    s->offset = t->image_off;
    s->bytes = t->image_bytes;
    s->shard = t->shard_index;
    s->member_off = (uint32_t)(slen + 1);
    s->label = t->cls;
    s->image_link = t->image_link;
    s->cls_link = t->cls_link;
    s->txt_bytes = t->has_txt ? (uint32_t)t->txt_bytes : UINT32_MAX;
    s->txt_offset = t->has_txt ? t->txt_off : 0;
    t->nsamples++;
    return COORDL_OK;
}

/* A .cls member: decimal digits, optionally surrounded by white space. */
static coordl_status cdl__tar_read_cls(cdl__tar_index *t, const char *name, uint64_t hdr, uint64_t data,
                                       uint64_t size, int32_t *label) {
    char text[CDL_TAR_CLS_MAX + 1];
    if (size > CDL_TAR_CLS_MAX)
        return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: .cls member \"%s\" at offset %llu has "
                              "%llu bytes; expected a class number", t->shard, name, (unsigned long long)hdr,
                              (unsigned long long)size);
    coordl_status rc = cdl__tar_get_data(t, data, (size_t)size, text);
    if (rc != COORDL_OK) return rc;
    text[size] = '\0';
    size_t a = 0, b = (size_t)size;
    while (a < b && (text[a] == ' ' || text[a] == '\t' || text[a] == '\n' || text[a] == '\r')) a++;
    while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t' || text[b - 1] == '\n' || text[b - 1] == '\r' ||
                     text[b - 1] == '\0')) b--;
    uint64_t v = 0;
    size_t i = a;
    for (; i < b && text[i] >= '0' && text[i] <= '9' && v < INT32_MAX; i++) v = v * 10 + (uint64_t)(text[i] - '0');
    if (i == a || i != b || v >= INT32_MAX) {
        text[b] = '\0';
        return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: .cls member \"%s\" at offset %llu: "
                              "\"%s\" is not a class number (0..2147483646)", t->shard, name,
                              (unsigned long long)hdr, text + a);
    }
    *label = (int32_t)v;
    return COORDL_OK;
}

/* A skipped member, in the log: the first few by name, the rest counted
 * (cdl__index_tar logs how many). */
static void cdl__tar_skip(cdl__tar_index *t, const char *fmt, ...) {
    char msg[CDL_ERRMSG_MAX];
    va_list ap;
    if (t->skipped++ >= CDL_TAR_SKIPS_LOGGED) return;
    va_start(ap, fmt);
    cdl__vformat(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cdl__log(t->L, COORDL_LOG_WARN, "source: tar shard %s: %s", t->shard, msg);
}

/* A path with its empty and "." components dropped and each ".." taking
 * the component before it away: into out (cap bytes), its length in *len.
 * 0 when a ".." climbs above the shard's root, or out is too small. */
static int cdl__tar_normalize(const char *in, size_t n, char *out, size_t cap, size_t *len) {
    size_t o = 0, i = 0;
    while (i < n) {
        while (i < n && in[i] == '/') i++;
        size_t j = i;
        while (j < n && in[j] != '/') j++;
        const size_t c = j - i;
        if (c == 2 && in[i] == '.' && in[i + 1] == '.') {
            if (o == 0) return 0;
            while (o > 0 && out[o - 1] != '/') o--;
            if (o > 0) o--; /* the slash before it */
        } else if (c > 0 && !(c == 1 && in[i] == '.')) {
            if (o + 1 + c + 1 > cap) return 0;
            if (o) out[o++] = '/';
            memcpy(out + o, in + i, c);
            o += c;
        }
        i = j;
    }
    if (o + 1 > cap) return 0;
    out[o] = '\0';
    *len = o;
    return 1;
}

/* Adds s (n bytes) to the shard's name arena; its offset in *off. */
static int cdl__tar_name_add(cdl__tar_index *t, const char *s, size_t n, uint64_t *off) {
    if (!cdl__reserve(t->L, (void **)&t->names, &t->names_cap, t->names_len + n + 1)) return 0;
    memcpy(t->names + t->names_len, s, n);
    t->names[t->names_len + n] = '\0';
    *off = t->names_len;
    t->names_len += n + 1;
    return 1;
}

/* Records a member for link resolution: its normalized name, and a link's
 * target as stored. Returns its entry, or CDL_TAR_NONE when its name
 * cannot be a target (it climbs out of the shard) or memory ran out
 * (*nomem). */
static uint32_t cdl__tar_entry_add(cdl__tar_index *t, const char *name, int kind, const char *target, uint64_t hdr,
                                   uint64_t data, uint64_t size, int *nomem) {
    coordl *L = t->L;
    const size_t n = strlen(name);
    size_t len;
    *nomem = 0;
    if (t->nentries >= CDL_TAR_NONE) return CDL_TAR_NONE;
    if (!cdl__reserve(L, (void **)&t->link_path, &t->link_path_cap, n + 1) ||
        !cdl__reserve(L, (void **)&t->entries, &t->entries_cap, (t->nentries + 1) * sizeof *t->entries)) {
        *nomem = 1;
        return CDL_TAR_NONE;
    }
    if (!cdl__tar_normalize(name, n, t->link_path, t->link_path_cap, &len)) return CDL_TAR_NONE;
    cdl__tar_entry *e = &t->entries[t->nentries];
    memset(e, 0, sizeof *e);
    if (!cdl__tar_name_add(t, t->link_path, len, &e->name_off) ||
        (target && !cdl__tar_name_add(t, target, strlen(target), &e->target_off))) {
        *nomem = 1;
        return CDL_TAR_NONE;
    }
    e->kind = (char)kind;
    e->hdr = hdr;
    e->data = data;
    e->leads_to = CDL_TAR_NONE;
    e->size = size;
    e->order = (uint32_t)t->nentries;
    if (kind == CDL_TAR_HARD || kind == CDL_TAR_SYM) t->nlinks++;
    return (uint32_t)t->nentries++;
}

/* One member: class folders are noted; a file (regular, or a link to be
 * resolved once the shard is read) joins (or starts) the sample of its
 * key. kind: CDL_TAR_*; target: a link's target; sparse: a sparse member
 * (skipped, logged). */
static coordl_status cdl__tar_member(cdl__tar_index *t, char *name, int kind, const char *target, int sparse,
                                     uint64_t hdr, uint64_t data, uint64_t size) {
    coordl *L = t->L;
    int nomem;
    const uint32_t entry = cdl__tar_entry_add(t, name, sparse ? CDL_TAR_OTHER : kind, target, hdr, data, size, &nomem);
    if (nomem) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
    while (name[0] == '.' && name[1] == '/') name += 2;
    while (name[0] == '/') name++;
    size_t n = strlen(name);
    while (n > 0 && name[n - 1] == '/') name[--n] = '\0';
    if (n == 0 || name[0] == '.' || strstr(name, "/.")) return COORDL_OK; /* hidden, as in an ImageFolder */
    const char *slash = strchr(name, '/');
    if ((slash || kind == CDL_TAR_DIR) && !cdl__tar_note_class(t, name, slash ? (size_t)(slash - name) : n))
        return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
    if (sparse) {
        cdl__tar_skip(t, "sparse member \"%s\" at offset %llu skipped (coordl reads regular members only; "
                      "archive it without --sparse)", name, (unsigned long long)hdr);
        return COORDL_OK;
    }
    const int link = kind == CDL_TAR_HARD || kind == CDL_TAR_SYM;
    if (kind != CDL_TAR_FILE && !link) return COORDL_OK;
    if (link && entry == CDL_TAR_NONE) {
        cdl__tar_skip(t, "link \"%s\" at offset %llu skipped: its name climbs out of the shard", name,
                      (unsigned long long)hdr);
        return COORDL_OK;
    }
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strchr(base, '.');
    const size_t key_len = dot ? (size_t)(dot - name) : n;
    if (!t->in_sample || key_len != t->key_len || memcmp(t->key, name, key_len) != 0) {
        coordl_status rc = cdl__tar_flush(t);
        if (rc != COORDL_OK) return rc;
        if (!cdl__reserve(L, (void **)&t->key, &t->key_cap, key_len + 1))
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
        memcpy(t->key, name, key_len);
        t->key[key_len] = '\0';
        t->key_len = key_len;
        t->in_sample = 1;
        t->has_image = 0;
        t->cls = -1;
        t->image_link = t->cls_link = CDL_TAR_NONE;
        t->has_txt = 0;
    }
    if (!t->has_image && cdl__wanted_file(L, base)) {
        if (!cdl__reserve(L, (void **)&t->image, &t->image_cap, n + 1))
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
        memcpy(t->image, name, n + 1);
        t->has_image = 1;
        t->image_off = data;
        t->image_bytes = size;
        t->image_link = link ? entry : CDL_TAR_NONE;
    } else if (dot && strcasecmp(dot + 1, "cls") == 0 && t->cls < 0 && t->cls_link == CDL_TAR_NONE) {
        if (link) t->cls_link = entry; /* read once the link is resolved */
        else return cdl__tar_read_cls(t, name, hdr, data, size, &t->cls);
    } else if (dot && strcasecmp(dot + 1, "txt") == 0 && !t->has_txt) {
        /* box labels (labels = COORDL_LABELS_BOXES): located here, read
         * at the end of the index (source.c); a size no label file has is
         * kept as "too large" for that reader to name */
        t->has_txt = 1;
        t->txt_off = data;
        t->txt_bytes = size < UINT32_MAX ? size : UINT32_MAX - 1;
    }
    return COORDL_OK;
}

/* Entries by (name, order), for cdl__tar_lookup. */
static _Thread_local const cdl__tar_index *cdl__tar_entries_tls;
static int cdl__cmp_tar_entry(const void *a, const void *b) {
    const cdl__tar_index *t = cdl__tar_entries_tls;
    const cdl__tar_entry *x = &t->entries[*(const uint32_t *)a], *y = &t->entries[*(const uint32_t *)b];
    const int c = strcmp(t->names + x->name_off, t->names + y->name_off);
    if (c) return c;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The last member named path before position `before` (a hard link names
 * a member archived before it; anything else sees the shard's last one,
 * as extracting it would leave), or CDL_TAR_NONE. */
static uint32_t cdl__tar_lookup(const cdl__tar_index *t, const char *path, uint32_t before) {
    size_t lo = 0, hi = t->nentries; /* first entry after (path, before) */
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        const cdl__tar_entry *m = &t->entries[t->by_name[mid]];
        const int c = strcmp(t->names + m->name_off, path);
        if (c < 0 || (c == 0 && m->order < before)) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return CDL_TAR_NONE;
    const uint32_t e = t->by_name[lo - 1];
    return strcmp(t->names + t->entries[e].name_off, path) == 0 ? e : CDL_TAR_NONE;
}

/* t->link_path = the folder of `from` (a normalized member path; its
 * first `from_len` bytes), then target, then tail, normalized. 0 and why
 * when it cannot be a member of the shard. */
static int cdl__tar_join(cdl__tar_index *t, const char *from, size_t from_len, const char *target, const char *tail,
                         const char **why) {
    size_t dir = from_len;
    while (dir > 0 && from[dir - 1] != '/') dir--;
    const size_t tl = strlen(target), rest = strlen(tail), need = dir + tl + rest + 1;
    if (target[0] == '/') { *why = "its target is an absolute path (outside the shard)"; return 0; }
    if (tl == 0) { *why = "its target is empty"; return 0; }
    if (!cdl__reserve(t->L, (void **)&t->link_work, &t->link_work_cap, need)) {
        *why = "out of memory";
        return 0;
    }
    memcpy(t->link_work, from, dir); /* from and tail may point into link_path: copied before it may move */
    memcpy(t->link_work + dir, target, tl);
    memcpy(t->link_work + dir + tl, tail, rest);
    if (!cdl__reserve(t->L, (void **)&t->link_path, &t->link_path_cap, need)) {
        *why = "out of memory";
        return 0;
    }
    size_t len;
    if (!cdl__tar_normalize(t->link_work, dir + tl + rest, t->link_path, t->link_path_cap, &len)) {
        *why = "its target climbs out of the shard";
        return 0;
    }
    return 1;
}

/* The regular member link entry e leads to, or CDL_TAR_NONE and why. */
static uint32_t cdl__tar_follow(cdl__tar_index *t, uint32_t e, const char **why) {
    uint32_t x = e;
    unsigned hops = 0;
    for (;;) {
        const cdl__tar_entry m = t->entries[x]; /* a copy: the arenas do not move, but x changes */
        if (m.kind == CDL_TAR_FILE) return x;
        if (m.kind == CDL_TAR_DIR) {
            *why = "it leads to a folder (a tar holds the link, not the files under it)";
            return CDL_TAR_NONE;
        }
        if (m.kind != CDL_TAR_HARD && m.kind != CDL_TAR_SYM) {
            *why = "it leads to a member that is not a regular file";
            return CDL_TAR_NONE;
        }
        if (++hops > CDL_TAR_LINK_HOPS) {
            *why = "a loop of links (or a chain of more than 40)";
            return CDL_TAR_NONE;
        }
        const char *target = t->names + m.target_off;
        if (m.kind == CDL_TAR_HARD) { /* an archive path, as stored */
            size_t len;
            if (!cdl__reserve(t->L, (void **)&t->link_path, &t->link_path_cap, strlen(target) + 1)) {
                *why = "out of memory";
                return CDL_TAR_NONE;
            }
            if (!cdl__tar_normalize(target, strlen(target), t->link_path, t->link_path_cap, &len)) {
                *why = "its target climbs out of the shard";
                return CDL_TAR_NONE;
            }
        } else {
            const char *name = t->names + m.name_off;
            if (!cdl__tar_join(t, name, strlen(name), target, "", why)) return CDL_TAR_NONE;
        }
        /* a folder on the way may itself be a symbolic link */
        size_t i = 0;
        while (t->link_path[i]) {
            if (t->link_path[i] != '/') { i++; continue; }
            t->link_path[i] = '\0';
            const uint32_t y = cdl__tar_lookup(t, t->link_path, CDL_TAR_NONE);
            t->link_path[i] = '/';
            const int ykind = y == CDL_TAR_NONE ? CDL_TAR_DIR : t->entries[y].kind; /* folders need no member */
            if (ykind == CDL_TAR_DIR) {
                i++;
                continue;
            }
            if (ykind != CDL_TAR_SYM) {
                *why = "a folder on its way is a file";
                return CDL_TAR_NONE;
            }
            if (++hops > CDL_TAR_LINK_HOPS) {
                *why = "a loop of links (or a chain of more than 40)";
                return CDL_TAR_NONE;
            }
            if (!cdl__tar_join(t, t->link_path, i, t->names + t->entries[y].target_off, t->link_path + i, why))
                return CDL_TAR_NONE;
            i = 0;
        }
        x = cdl__tar_lookup(t, t->link_path, m.kind == CDL_TAR_HARD ? m.order : CDL_TAR_NONE);
        if (x == CDL_TAR_NONE) {
            *why = "no member of the shard has its target's name";
            return CDL_TAR_NONE;
        }
    }
}

/* Once the shard's headers are read: every link followed to the regular
 * member it leads to; the shard's samples whose image (or .cls) is a link
 * take that member's bytes, and those whose image leads nowhere are
 * dropped, with a warning naming each link that was skipped. */
static coordl_status cdl__tar_resolve_links(cdl__tar_index *t) {
    coordl *L = t->L;
    if (!t->nlinks) return COORDL_OK;
    if (!cdl__reserve(L, (void **)&t->by_name, &t->by_name_cap, t->nentries * sizeof *t->by_name))
        return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
    for (size_t i = 0; i < t->nentries; i++) t->by_name[i] = (uint32_t)i;
    cdl__tar_entries_tls = t;
    qsort(t->by_name, t->nentries, sizeof *t->by_name, cdl__cmp_tar_entry);
    cdl__tar_entries_tls = NULL;
    for (size_t i = 0; i < t->nentries; i++) {
        cdl__tar_entry *e = &t->entries[i];
        if (e->kind != CDL_TAR_HARD && e->kind != CDL_TAR_SYM) continue;
        const char *why = "";
        e->leads_to = cdl__tar_follow(t, (uint32_t)i, &why);
        if (e->leads_to != CDL_TAR_NONE) continue;
        if (strcmp(why, "out of memory") == 0)
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
        const char *name = t->names + e->name_off;
        if (name[0] == '.' || strstr(name, "/.")) continue; /* hidden: skipped anyway, quietly */
        cdl__tar_skip(t, "%s link \"%s\" -> \"%s\" skipped: %s", e->kind == CDL_TAR_HARD ? "hard" : "symbolic", name,
                      t->names + e->target_off, why);
    }
    size_t kept = t->first_sample;
    for (size_t i = t->first_sample; i < t->nsamples; i++) {
        cdl__tar_sample s = t->samples[i];
        if (s.image_link != CDL_TAR_NONE) {
            const uint32_t to = t->entries[s.image_link].leads_to;
            if (to == CDL_TAR_NONE) continue; /* its image leads nowhere: logged above */
            s.offset = t->entries[to].data;
            s.bytes = t->entries[to].size;
        }
        if (s.cls_link != CDL_TAR_NONE && t->entries[s.cls_link].leads_to != CDL_TAR_NONE) {
            const cdl__tar_entry *link = &t->entries[s.cls_link], *c = &t->entries[link->leads_to];
            coordl_status rc = cdl__tar_read_cls(t, t->names + link->name_off, link->hdr, c->data, c->size, &s.label);
            if (rc != COORDL_OK) return rc;
        }
        s.image_link = s.cls_link = CDL_TAR_NONE;
        t->samples[kept++] = s;
    }
    t->nsamples = kept;
    return COORDL_OK;
}

/* A pax extended header: records "<len> <key>=<value>\n"; path, linkpath
 * and size apply to the next member; GNU sparse members are skipped. */
static coordl_status cdl__tar_pax(cdl__tar_index *t, uint64_t hdr, const cdl__u8 *p, size_t n) {
    size_t at = 0;
    while (at < n) {
        if (p[at] == '\0') break; /* NUL padding after the records */
        size_t len = 0, i = at;
        while (i < n && p[i] >= '0' && p[i] <= '9' && len < n) len = len * 10 + (size_t)(p[i++] - '0');
        if (i == at || i >= n || p[i] != ' ' || len < 5 || len > n - at || p[at + len - 1] != '\n')
            return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: bad pax record in the extended "
                                  "header at offset %llu", t->shard, (unsigned long long)hdr);
        const char *kv = (const char *)p + i + 1, *end = (const char *)p + at + len - 1;
        const char *eq = memchr(kv, '=', (size_t)(end - kv));
        if (!eq)
            return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: pax record without '=' in the "
                                  "extended header at offset %llu", t->shard, (unsigned long long)hdr);
        const size_t klen = (size_t)(eq - kv), vlen = (size_t)(end - eq - 1);
        if (klen == 4 && memcmp(kv, "path", 4) == 0) {
            if (vlen >= CDL_TAR_NAME_MAX || memchr(eq + 1, '\0', vlen))
                return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: pax path of %zu bytes at offset "
                                      "%llu", t->shard, vlen, (unsigned long long)hdr);
            if (!cdl__reserve(t->L, (void **)&t->pending_name, &t->pending_cap, vlen + 1))
                return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
            memcpy(t->pending_name, eq + 1, vlen);
            t->pending_name[vlen] = '\0';
            t->have_pending_name = 1;
        } else if (klen == 4 && memcmp(kv, "size", 4) == 0) {
            uint64_t v = 0;
            size_t k = 0;
            for (; k < vlen && eq[1 + k] >= '0' && eq[1 + k] <= '9' && v < (UINT64_MAX - 9) / 10; k++)
                v = v * 10 + (uint64_t)(eq[1 + k] - '0');
            if (k == 0 || k != vlen)
                return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: bad pax size in the extended "
                                      "header at offset %llu", t->shard, (unsigned long long)hdr);
            t->pending_size = v;
            t->have_pending_size = 1;
        } else if (klen == 8 && memcmp(kv, "linkpath", 8) == 0) {
            if (vlen >= CDL_TAR_NAME_MAX || memchr(eq + 1, '\0', vlen))
                return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: pax linkpath of %zu bytes at "
                                      "offset %llu", t->shard, vlen, (unsigned long long)hdr);
            if (!cdl__reserve(t->L, (void **)&t->pending_link, &t->pending_link_cap, vlen + 1))
                return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
            memcpy(t->pending_link, eq + 1, vlen);
            t->pending_link[vlen] = '\0';
            t->have_pending_link = 1;
        } else if (klen > 11 && memcmp(kv, "GNU.sparse.", 11) == 0) {
            t->pending_sparse = 1;
            /* format 1.0 stores the member as GNUSparseFile.<pid>/<name>: the
             * real name names it in the log and notes its class folder */
            if (klen == 15 && memcmp(kv + 11, "name", 4) == 0 && vlen > 0 && vlen < CDL_TAR_NAME_MAX &&
                !memchr(eq + 1, '\0', vlen)) {
                if (!cdl__reserve(t->L, (void **)&t->pending_name, &t->pending_cap, vlen + 1))
                    return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
                memcpy(t->pending_name, eq + 1, vlen);
                t->pending_name[vlen] = '\0';
                t->have_pending_name = 1;
            }
        }
        at += len;
    }
    return COORDL_OK;
}

/* Walks one shard's headers; fails at the first thing a tar cannot be,
 * naming the shard and the offset. */
static coordl_status cdl__tar_scan(cdl__tar_index *t) {
    cdl__u8 h[CDL_TAR_BLOCK];
    uint64_t off = 0;
    coordl_status rc = COORDL_OK;
    t->win_off = 0;
    t->win_len = 0;
    t->have_pending_name = t->have_pending_size = t->pending_sparse = t->have_pending_link = 0;
    t->in_sample = 0;
    t->have_last_class = 0;
    t->nentries = t->names_len = t->nlinks = 0;
    t->first_sample = t->nsamples;
    for (;;) {
        if (t->size - off < CDL_TAR_BLOCK) {
            if (off == t->size)
                return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: ends at offset %llu without the "
                                      "end-of-archive blocks (truncated?)", t->shard, (unsigned long long)off);
            return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: truncated header at offset %llu (the "
                                  "shard has %llu bytes)", t->shard, (unsigned long long)off,
                                  (unsigned long long)t->size);
        }
        if ((rc = cdl__tar_get(t, off, CDL_TAR_BLOCK, h)) != COORDL_OK) return rc;
        unsigned nonzero = 0;
        for (unsigned i = 0; i < CDL_TAR_BLOCK && !nonzero; i++) nonzero = h[i];
        if (!nonzero) break; /* end of archive */
        if (!cdl__tar_checksum_ok(h))
            return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: bad header checksum at offset %llu "
                                  "(not a tar file, or corrupt)", t->shard, (unsigned long long)off);
        uint64_t size;
        if (!cdl__tar_number(h + 124, 12, &size))
            return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: bad size field in the header at "
                                  "offset %llu", t->shard, (unsigned long long)off);
        const int type = h[156];
        const int meta = type == 'L' || type == 'K' || type == 'x' || type == 'g';
        if (!meta && t->have_pending_size) size = t->pending_size;
        uint64_t data = off + CDL_TAR_BLOCK;
        if (type == 'S' && h[482]) { /* old GNU sparse: extension headers (a flag each at 504) precede the data */
            cdl__u8 ext[CDL_TAR_BLOCK];
            do {
                if (t->size - data < CDL_TAR_BLOCK)
                    return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: the sparse member at offset %llu "
                                          "has extension headers past the end of the shard (truncated?)", t->shard,
                                          (unsigned long long)off);
                if ((rc = cdl__tar_get(t, data, CDL_TAR_BLOCK, ext)) != COORDL_OK) return rc;
                data += CDL_TAR_BLOCK;
            } while (ext[504]);
        }
        if (size > t->size - data)
            return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: the member at offset %llu has %llu "
                                  "data bytes, past the end of the shard (%llu bytes; truncated?)", t->shard,
                                  (unsigned long long)off, (unsigned long long)size, (unsigned long long)t->size);
        const uint64_t next = data + (size + CDL_TAR_BLOCK - 1) / CDL_TAR_BLOCK * CDL_TAR_BLOCK;
        if (type == 'L') { /* GNU long name of the next member */
            if (size == 0 || size >= CDL_TAR_NAME_MAX)
                return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: GNU long name of %llu bytes at "
                                      "offset %llu", t->shard, (unsigned long long)size, (unsigned long long)off);
            if (!cdl__reserve(t->L, (void **)&t->pending_name, &t->pending_cap, (size_t)size + 1))
                return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
            if ((rc = cdl__tar_get_data(t, data, (size_t)size, t->pending_name)) != COORDL_OK) return rc;
            t->pending_name[size] = '\0'; /* the name ends at its first NUL */
            t->have_pending_name = 1;
        } else if (type == 'K') { /* GNU long link target of the next member */
            if (size == 0 || size >= CDL_TAR_NAME_MAX)
                return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: GNU long link name of %llu bytes at "
                                      "offset %llu", t->shard, (unsigned long long)size, (unsigned long long)off);
            if (!cdl__reserve(t->L, (void **)&t->pending_link, &t->pending_link_cap, (size_t)size + 1))
                return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
            if ((rc = cdl__tar_get_data(t, data, (size_t)size, t->pending_link)) != COORDL_OK) return rc;
            t->pending_link[size] = '\0';
            t->have_pending_link = 1;
        } else if (type == 'x') { /* pax extended header of the next member */
            if (size > CDL_TAR_PAX_MAX)
                return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: pax extended header of %llu bytes "
                                      "at offset %llu", t->shard, (unsigned long long)size, (unsigned long long)off);
            if (!cdl__reserve(t->L, (void **)&t->pax, &t->pax_cap, (size_t)size + 1))
                return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
            if ((rc = cdl__tar_get_data(t, data, (size_t)size, t->pax)) != COORDL_OK) return rc;
            if ((rc = cdl__tar_pax(t, off, t->pax, (size_t)size)) != COORDL_OK) return rc;
        } else if (!meta) { /* 'g' (pax global) changes nothing we use */
            char name[CDL_TAR_BLOCK], target[101];
            char *nm = name;
            if (t->have_pending_name) {
                nm = t->pending_name;
            } else {
                size_t pn = 0, nn = strnlen((const char *)h, 100);
                if (memcmp(h + 257, "ustar\0", 6) == 0) { /* POSIX ustar: a prefix folder (GNU uses the room) */
                    pn = strnlen((const char *)h + 345, 155);
                    memcpy(name, h + 345, pn);
                    if (pn) name[pn++] = '/';
                }
                memcpy(name + pn, h, nn);
                name[pn + nn] = '\0';
            }
            const int kind = type == '0' || type == '\0' || type == '7' ? CDL_TAR_FILE
                             : type == '1' ? CDL_TAR_HARD : type == '2' ? CDL_TAR_SYM : type == '5' ? CDL_TAR_DIR
                             : CDL_TAR_OTHER;
            const char *tg = NULL;
            if (kind == CDL_TAR_HARD || kind == CDL_TAR_SYM) {
                const size_t tn = strnlen((const char *)h + 157, 100);
                memcpy(target, h + 157, tn);
                target[tn] = '\0';
                tg = t->have_pending_link ? t->pending_link : target;
            }
            rc = cdl__tar_member(t, nm, kind, tg, type == 'S' || t->pending_sparse, off, data, size);
            if (rc != COORDL_OK) return rc;
            t->have_pending_name = t->have_pending_size = t->pending_sparse = t->have_pending_link = 0;
        }
        off = next;
    }
    if ((rc = cdl__tar_flush(t)) != COORDL_OK) return rc;
    return cdl__tar_resolve_links(t);
}

static int cdl__cmp_cstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Sort key of a class-folder-labelled sample: class, then the member path
 * (as an ImageFolder sorts its files), then where it is. */
static _Thread_local const char *cdl__tar_sort_base_tls;
static int cdl__cmp_tar_sample(const void *a, const void *b) {
    const cdl__tar_sample *x = a, *y = b;
    if (x->label != y->label) return x->label < y->label ? -1 : 1;
    int c = strcmp(cdl__tar_sort_base_tls + x->path_off + x->member_off,
                   cdl__tar_sort_base_tls + y->path_off + y->member_off);
    if (c) return c;
    if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Labels, order and the item arrays from the staged samples. */
static coordl_status cdl__tar_finish(cdl__tar_index *t) {
    coordl *L = t->L;
    size_t with_cls = 0, first_without = SIZE_MAX;
    int32_t max_label = -1;
    for (size_t i = 0; i < t->nsamples; i++) {
        if (t->samples[i].label >= 0) {
            with_cls++;
            if (t->samples[i].label > max_label) max_label = t->samples[i].label;
        } else if (first_without == SIZE_MAX) {
            first_without = i;
        }
    }
    if (with_cls && with_cls != t->nsamples)
        return cdl__open_fail(COORDL_ERR_INVALID, "source: %s: %zu samples have a .cls label and %zu do not (the "
                              "first without: %s); label every sample, or none (then each key's class folder is its "
                              "label)", L->cfg.source, with_cls, t->nsamples - with_cls,
                              L->index.strings + t->samples[first_without].path_off);
    size_t n = t->nsamples;
    if (with_cls) {
        L->index.num_classes = (uint32_t)max_label + 1;
    } else {
        /* class folders: sorted names are labels 0..K-1 (an empty folder, a
         * directory member, still takes its label, as in an ImageFolder) */
        size_t nclasses = 0;
        for (size_t o = 0; o < t->classes_len; o += strlen(t->classes + o) + 1) nclasses++;
        const char **names = cdl__malloc(L, (nclasses ? nclasses : 1) * sizeof *names);
        if (!names) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", L->cfg.source);
        nclasses = 0;
        for (size_t o = 0; o < t->classes_len; o += strlen(t->classes + o) + 1) names[nclasses++] = t->classes + o;
        qsort(names, nclasses, sizeof *names, cdl__cmp_cstr);
        size_t k = 0;
        for (size_t i = 0; i < nclasses; i++)
            if (k == 0 || strcmp(names[k - 1], names[i]) != 0) names[k++] = names[i];
        nclasses = k;
        size_t kept = 0, skipped = 0;
        for (size_t i = 0; i < n; i++) {
            cdl__tar_sample s = t->samples[i];
            const char *member = L->index.strings + s.path_off + s.member_off;
            const char *slash = strchr(member, '/');
            if (!slash && L->cfg.labels == COORDL_LABELS_BOXES) { /* boxes: the .txt is the label, no class needed */
                s.label = 0;
                t->samples[kept++] = s;
                continue;
            }
            if (!slash) { skipped++; continue; } /* beside the class folders: an ImageFolder skips it too */
            size_t lo = 0, hi = nclasses, cl = strlen(member) - strlen(slash);
            while (lo < hi) { /* the class name is the member's prefix up to the slash */
                size_t mid = (lo + hi) / 2;
                int c = strncmp(names[mid], member, cl);
                if (c == 0) c = names[mid][cl] == '\0' ? 0 : 1;
                if (c < 0) lo = mid + 1; else hi = mid;
            }
            s.label = (int32_t)lo;
            t->samples[kept++] = s;
        }
        cdl__free(L, names);
        if (skipped)
            cdl__log(L, COORDL_LOG_WARN, "%s: %zu sample(s) at the top of their shard (no class folder, no .cls) "
                     "skipped, as an ImageFolder skips files beside its class folders", L->cfg.source, skipped);
        n = kept;
        L->index.num_classes = (uint32_t)nclasses;
        if (n > 1) { /* no sample at all (an empty shard): samples is NULL, which qsort may not get */
            cdl__tar_sort_base_tls = L->index.strings;
            qsort(t->samples, n, sizeof *t->samples, cdl__cmp_tar_sample);
            cdl__tar_sort_base_tls = NULL;
        }
    }
    L->index.items = cdl__malloc(L, (n ? n : 1) * sizeof *L->index.items);
    L->index.tar_items = cdl__malloc(L, (n ? n : 1) * sizeof *L->index.tar_items);
    if (!L->index.items || !L->index.tar_items) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for %zu items", n);
    for (size_t i = 0; i < n; i++) {
        const cdl__tar_sample *s = &t->samples[i];
        L->index.items[i].path_off = s->path_off;
        L->index.items[i].bytes = s->bytes;
        L->index.items[i].label = s->label;
        L->index.tar_items[i].offset = s->offset;
        L->index.tar_items[i].shard = s->shard;
        L->index.tar_items[i].txt_bytes = s->txt_bytes;
        L->index.tar_items[i].txt_offset = s->txt_offset;
        L->index.dataset_bytes += s->bytes;
    }
    L->index.num_items = n;
    return COORDL_OK;
}

/* Adds a shard path to the list the index walks (in the order given). */
static coordl_status cdl__tar_add_path(coordl *L, const char *path, size_t *cap) {
    if (L->index.ntar_shards == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        void *p = cdl__realloc(L, L->index.tar_shards, ncap * sizeof *L->index.tar_shards);
        if (!p) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
        L->index.tar_shards = p;
        *cap = ncap;
    }
    if (!cdl__strings_append(L, path, strlen(path), &L->index.tar_shards[L->index.ntar_shards]))
        return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    L->index.ntar_shards++;
    return COORDL_OK;
}

/* The shards named by the source: a .tar file, a folder of them, a glob,
 * or a list file of .tar paths (text: relative to the list's folder). */
CDL_PRIVATE coordl_status cdl__tar_list_shards(coordl *L, int kind, const char *list_text, size_t list_len) {
    const char *src = L->cfg.source;
    size_t cap = 0;
    coordl_status rc = COORDL_OK;
    char **names = NULL;
    size_t nnames = 0, names_cap = 0;
    if (kind == 1) return cdl__tar_add_path(L, src, &cap);
    if (kind == 2 || kind == 3) {
        /* a folder of shards, or a glob: sorted by strcmp, so the order does
         * not depend on the locale */
        if (kind == 2) {
            DIR *d = opendir(src);
            if (!d) return cdl__open_fail(COORDL_ERR_IO, "source: cannot list %s: %s", src, strerror(errno));
            struct dirent *e;
            while (rc == COORDL_OK && (e = readdir(d)) != NULL) {
                if (e->d_name[0] == '.' || !cdl__is_tar_name(e->d_name)) continue;
                char *p = cdl__malloc(L, strlen(src) + strlen(e->d_name) + 2);
                if (!p || !cdl__reserve(L, (void **)&names, &names_cap, (nnames + 1) * sizeof *names)) {
                    cdl__free(L, p);
                    rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
                    break;
                }
                sprintf(p, "%s/%s", src, e->d_name);
                names[nnames++] = p;
            }
            closedir(d);
        } else {
            glob_t g;
            int e = glob(src, GLOB_NOSORT, NULL, &g);
            if (e == GLOB_NOMATCH) return cdl__open_fail(COORDL_ERR_INVALID, "source: no file matches %s", src);
            if (e != 0) return cdl__open_fail(COORDL_ERR_IO, "source: cannot expand %s", src);
            for (size_t i = 0; rc == COORDL_OK && i < g.gl_pathc; i++) {
                if (!cdl__is_tar_name(g.gl_pathv[i])) {
                    rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s matches %s, which is not a .tar shard",
                                        src, g.gl_pathv[i]);
                    break;
                }
                size_t len = strlen(g.gl_pathv[i]);
                char *p = cdl__malloc(L, len + 1);
                if (!p || !cdl__reserve(L, (void **)&names, &names_cap, (nnames + 1) * sizeof *names)) {
                    cdl__free(L, p);
                    rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
                    break;
                }
                memcpy(p, g.gl_pathv[i], len + 1);
                names[nnames++] = p;
            }
            globfree(&g);
        }
        if (rc == COORDL_OK && nnames > 1) qsort(names, nnames, sizeof *names, cdl__cmp_cstr); /* none: NULL */
        for (size_t i = 0; rc == COORDL_OK && i < nnames; i++) rc = cdl__tar_add_path(L, names[i], &cap);
        for (size_t i = 0; i < nnames; i++) cdl__free(L, names[i]);
        cdl__free(L, names);
        return rc;
    }
    /* a list of shard paths, one a line */
    char *path = NULL;
    size_t pos = 0, path_cap = 0, path_len;
    cdl__list_line ln = {0};
    int got;
    while (rc == COORDL_OK && (got = cdl__list_next(list_text, list_len, &pos, &ln)) != 0) {
        if (got < 0) {
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s line %llu: holds a NUL byte", src,
                                (unsigned long long)ln.lineno);
            break;
        }
        if (!cdl__list_path(L, src, ln.text, ln.len, &path, &path_cap, &path_len)) {
            rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
            break;
        }
        if (memchr(ln.text, '\t', ln.len) || !cdl__is_tar_name(path)) {
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s line %llu: expected the path of a .tar shard", src,
                                (unsigned long long)ln.lineno);
            break;
        }
        rc = cdl__tar_add_path(L, path, &cap);
    }
    cdl__free(L, path);
    return rc;
}

/* What a scan's state holds (not the window: its owner frees it). */
static void cdl__tar_index_free(cdl__tar_index *t) {
    coordl *L = t->L;
    cdl__free(L, t->pending_name);
    cdl__free(L, t->pending_link);
    cdl__free(L, t->entries);
    cdl__free(L, t->names);
    cdl__free(L, t->by_name);
    cdl__free(L, t->link_path);
    cdl__free(L, t->link_work);
    cdl__free(L, t->pax);
    cdl__free(L, t->key);
    cdl__free(L, t->image);
    cdl__free(L, t->path);
    cdl__free(L, t->samples);
    cdl__free(L, t->classes);
    cdl__free(L, t->lz_names);
}

/* Indexes tar shards: kind 1 a .tar file, 2 a folder of them, 3 a glob,
 * 4 a list of them (its text given); shards already listed (a saved
 * index found stale) are scanned as listed. */
CDL_PRIVATE coordl_status cdl__index_tar(coordl *L, int kind, const char *list_text, size_t list_len) {
    cdl__tar_index t;
    memset(&t, 0, sizeof t);
    t.L = L;
    coordl_status rc = L->index.ntar_shards ? COORDL_OK : cdl__tar_list_shards(L, kind, list_text, list_len);
    if (rc == COORDL_OK && L->index.ntar_shards == 0)
        rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s names no .tar shards", L->cfg.source);
    if (rc == COORDL_OK && L->index.ntar_shards > UINT32_MAX)
        rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s names more than 2^32 shards", L->cfg.source);
    if (rc == COORDL_OK && !(t.win = cdl__malloc(L, CDL_TAR_WINDOW)))
        rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    /* remote shards: their bytes are asked for ahead of the scan, every
     * shard at once through the event loop (remote.c); the shards are still
     * parsed one after another, in order, so the index is the same */
    const int stream = rc == COORDL_OK && L->io == &cdl__posix_io && L->index.ntar_shards > 0;
    if (stream) {
        const char **urls = cdl__calloc(L, L->index.ntar_shards, sizeof *urls);
        if (urls) {
            for (size_t i = 0; i < L->index.ntar_shards; i++) urls[i] = L->index.strings + L->index.tar_shards[i];
            cdl__remote_scan_begin(L, urls, L->index.ntar_shards); /* copies them: the arena may move */
            cdl__free(L, urls);
        }
    }
    for (size_t i = 0; rc == COORDL_OK && i < L->index.ntar_shards; i++) {
        char err[CDL_ERRMSG_MAX];
        t.shard = L->index.strings + L->index.tar_shards[i];
        t.shard_index = (uint32_t)i;
        rc = cdl__io_open(L, t.shard, &t.file, &t.size, err, sizeof err);
        if (rc != COORDL_OK) { rc = cdl__open_fail(rc, "source: cannot open tar shard %s: %s", t.shard, err); break; }
        cdl__io_sequential(L, t.file); /* a remote shard's headers: in large ranged reads */
        /* the string arena may move while this shard's paths are added */
        char *copy = cdl__malloc(L, strlen(t.shard) + 1);
        if (!copy) {
            cdl__io_close(L, t.file);
            rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
            break;
        }
        strcpy(copy, t.shard);
        t.shard = copy;
        rc = cdl__tar_scan(&t);
        cdl__io_close(L, t.file);
        cdl__free(L, copy);
    }
    if (stream) cdl__remote_scan_end(L);
    if (rc == COORDL_OK) rc = cdl__tar_finish(&t);
    cdl__free(L, t.win);
    if (rc == COORDL_OK && t.skipped > CDL_TAR_SKIPS_LOGGED)
        cdl__log(L, COORDL_LOG_WARN, "source: %s: %zu more link or sparse members skipped (the first %u are named "
                 "above)", L->cfg.source, t.skipped - CDL_TAR_SKIPS_LOGGED, CDL_TAR_SKIPS_LOGGED);
    cdl__tar_index_free(&t);
    return rc;
}

/* llm.c token shards: a 256 x int32 header (magic, version, token
 * count), then the tokens. Items are windows of seq_len + 1 tokens at a
 * stride of seq_len; they are not materialised (a 10-billion-token corpus
 * has 10 million windows of 1024): an item id maps to its shard by a
 * binary search over the shards' first ids. */

/* ---- shards indexed as the window reaches them ------------------------------
 * (docs/shuffle.md) The shard-window order on tar shards, in one process
 * with no cache or the MinIO one, no saved index and class labels from
 * .cls members, needs no index at open: it lists the shards, scans the first one (to learn
 * that its samples carry .cls labels, and to fail early on a source that
 * is not tar shards), and leaves every other shard to the sampler, which
 * has each scanned when its window is reached (index.c keeps the counts and
 * the resident blocks). A scan here is the open's scan of one shard: the
 * same members, links and labels, so an item is what a full scan makes of
 * it; only its id differs ((shard << 32) | ordinal, not a dense number). */

/* The lazy index's scan of shard s (cdl__lazy_scan_fn): on any thread. */
static coordl_status cdl__tar_lazy_scan(coordl *L, uint32_t shard, cdl__lazy_block *out, char *err, size_t errcap) {
    cdl__tar_index t;
    memset(&t, 0, sizeof t);
    t.L = L;
    t.lazy = 1;
    t.shard_index = shard;
    char why[CDL_ERRMSG_MAX];
    const char *path = L->index.strings + L->index.tar_shards[shard]; /* the arena no longer moves */
    t.shard = path;
    coordl_status rc = (t.win = cdl__malloc(L, CDL_TAR_WINDOW)) ? COORDL_OK : COORDL_ERR_NOMEM;
    if (rc != COORDL_OK) {
        snprintf(err, errcap, "out of memory");
        return rc;
    }
    rc = cdl__io_open(L, path, &t.file, &t.size, why, sizeof why);
    if (rc != COORDL_OK) {
        snprintf(err, errcap, "cannot open it: %s", why);
    } else {
        cdl__io_sequential(L, t.file);
        cdl__open_errmsg[0] = '\0';
        rc = cdl__tar_scan(&t);
        cdl__io_close(L, t.file);
        if (rc != COORDL_OK) snprintf(err, errcap, "%s", cdl__open_errmsg[0] ? cdl__open_errmsg : coordl_strerror(rc));
    }
    if (rc == COORDL_OK && t.nsamples > UINT32_MAX - 1) {
        snprintf(err, errcap, "more than 2^32 - 2 samples in one shard");
        rc = COORDL_ERR_INVALID;
    }
    memset(out, 0, sizeof *out);
    if (rc == COORDL_OK && t.nsamples) {
        out->refs = cdl__malloc(L, t.nsamples * sizeof *out->refs);
        out->name_offs = cdl__malloc(L, t.nsamples * sizeof *out->name_offs);
        if (!out->refs || !out->name_offs) {
            cdl__lazy_block_free(L, out);
            snprintf(err, errcap, "out of memory for %zu items", t.nsamples);
            rc = COORDL_ERR_NOMEM;
        }
    }
    if (rc == COORDL_OK) {
        size_t unlabelled = 0;
        for (size_t i = 0; i < t.nsamples; i++) {
            const cdl__tar_sample *x = &t.samples[i];
            out->refs[i].offset = x->offset;
            out->refs[i].bytes = x->bytes;
            out->refs[i].shard = shard;
            out->refs[i].label = x->label;
            out->name_offs[i] = (uint32_t)x->path_off;
            unlabelled += x->label < 0;
        }
        out->count = (uint32_t)t.nsamples;
        out->names = t.lz_names; /* the block owns them now */
        t.lz_names = NULL;
        if (unlabelled)
            cdl__log(L, COORDL_LOG_WARN, "source: tar shard %s: %zu of %zu samples have no .cls member; their label "
                     "is -1 (a lazily indexed source takes labels from .cls members only)", path, unlabelled,
                     t.nsamples);
    }
    cdl__free(L, t.win);
    cdl__tar_index_free(&t);
    return rc;
}

/* Whether open may leave the shards unscanned (see above). */
CDL_PRIVATE int cdl__tar_lazy_possible(const coordl *L) {
    return L->cfg.shuffle == COORDL_SHUFFLE_SHARD_WINDOW && L->cfg.pipeline != COORDL_PIPE_TOKENS && L->cfg.pipeline != COORDL_PIPE_AUDIO &&
           L->cfg.labels == COORDL_LABELS_CLASS &&
           (L->cfg.cache_bytes == 0 || L->cfg.cache_policy == COORDL_CACHE_MINIO) && !(L->cfg.group && L->cfg.group[0]) &&
           !L->cfg.mpi_comm;
}

/* Open's part of a lazy index, the shards listed: the first shard scanned.
 * 1: lazy from here on; 0: scan every shard instead (the first shard's
 * samples carry no .cls label: their labels are class folders, numbered
 * over the whole set); < 0: an error (said through cdl__open_fail). */
CDL_PRIVATE int cdl__tar_lazy_open(coordl *L, coordl_status *rc) {
    const size_t ns = L->index.ntar_shards;
    const uint64_t width = L->cfg.shuffle_window_shards ? L->cfg.shuffle_window_shards : 8;
    /* the windows the workers, the read-ahead and the stream may be in at
     * once: the current one, the next, and the one before */
    const uint64_t resident = 3 * width + 16;
    *rc = cdl__lazy_init(L, cdl__tar_lazy_scan, (size_t)(resident < ns ? resident : ns));
    if (*rc != COORDL_OK) return -1;
    char err[CDL_ERRMSG_MAX];
    cdl__lazy_block b;
    coordl_status r = cdl__tar_lazy_scan(L, 0, &b, err, sizeof err);
    if (r != COORDL_OK) {
        *rc = cdl__open_fail(r, "source: tar shard %s: %s", L->index.strings + L->index.tar_shards[0], err);
        return -1;
    }
    int labelled = b.count > 0;
    for (uint32_t i = 0; i < b.count && labelled; i++) labelled = b.refs[i].label >= 0;
    if (!labelled) {
        cdl__lazy_block_free(L, &b);
        cdl__lazy_free(L);
        cdl__log(L, COORDL_LOG_INFO, "source: %s: the first shard's samples have no .cls labels, so every shard is "
                 "scanned at open (class-folder labels are numbered over the whole set)", L->cfg.source);
        return 0;
    }
    cdl__lazy_adopt(L, 0, &b); /* kept: epoch 0 may start there */
    cdl__log(L, COORDL_LOG_INFO, "source: %s: %zu tar shards, indexed as the shard window reaches them "
             "(docs/shuffle.md)", L->cfg.source, ns);
    return 1;
}
