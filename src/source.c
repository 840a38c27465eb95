/* SPDX-License-Identifier: MIT */
/*
 * source.c - token shards, the source dispatcher, reading one item.
 *
 * Owns:  the token shards' part of L->index; which indexer a source string
 *        names; the storage read of one item's bytes (whole file, tar
 *        member or token window)
 * Lock:  index writes at open only; reads are lock-free (W's buffers are
 *        its own)
 * Calls: status, remote, io, uring, index, tar, indexfile (lower layers
 *        only: src/modules.txt; tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "source_state.h"
#include "source.h"
#include "status.h"
#include "worker_state.h"
#include "remote.h"
#include "remote_state.h"
#include "http_state.h"
#include "io.h"
#include "io_state.h"
#include "uring.h"
#include "uring_state.h"
#include "index.h"
#include "index_state.h"
#include "tar.h"
#include "indexfile.h"
#include "handle.h"

#define CDL_SHARD_HEADER_BYTES 1024
#define CDL_SHARD_MAGIC_U16 20240520
#define CDL_SHARD_MAGIC_U32 20240801

#ifndef COORDL_NO_TOKENS
static coordl_status cdl__add_shard(coordl *L, const char *path, size_t *cap) {
    char err[CDL_ERRMSG_MAX];
    void *f;
    uint64_t shard_bytes, got = 0;
    coordl_status rc = cdl__io_open(L, path, &f, &shard_bytes, err, sizeof err);
    if (rc != COORDL_OK) return cdl__open_fail(rc, "source: cannot open token shard %s: %s", path, err);
    int32_t h[256];
    rc = cdl__io_read(L, f, path, h, sizeof h, 0, &got, err, sizeof err);
    cdl__io_close(L, f);
    if (rc != COORDL_OK) return cdl__open_fail(rc, "source: token shard %s", err);
    if (got != sizeof h)
        return cdl__open_fail(COORDL_ERR_CORRUPT, "source: token shard %s: shorter than its %d-byte header",
                              path, CDL_SHARD_HEADER_BYTES);
    uint32_t tb;
    if (h[0] == CDL_SHARD_MAGIC_U16 && h[1] == 1) tb = 2;
    else if (h[0] == CDL_SHARD_MAGIC_U32 && h[1] == 7) tb = 4;
    else
        return cdl__open_fail(COORDL_ERR_CORRUPT, "source: token shard %s: bad header (magic %d version %d; "
                              "expected 20240520/1 or 20240801/7)", path, h[0], h[1]);
    if (h[2] < 0) return cdl__open_fail(COORDL_ERR_CORRUPT, "source: token shard %s: negative token count", path);
    uint64_t ntok = (uint32_t)h[2];
    if (shard_bytes < CDL_SHARD_HEADER_BYTES + ntok * tb)
        return cdl__open_fail(COORDL_ERR_CORRUPT, "source: token shard %s: truncated body (%llu bytes; the "
                              "header promises %llu tokens = %llu bytes)", path, (unsigned long long)shard_bytes,
                              (unsigned long long)ntok, (unsigned long long)(CDL_SHARD_HEADER_BYTES + ntok * tb));
    if (L->index.nshards == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        void *p = cdl__realloc(L, L->index.shards, ncap * sizeof *L->index.shards);
        if (!p) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
        L->index.shards = p;
        *cap = ncap;
    }
    cdl__shard *sh = &L->index.shards[L->index.nshards++];
    if (!cdl__strings_append(L, path, strlen(path), &sh->path_off)) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    sh->tok_bytes = tb;
    sh->first_item = L->index.num_items;
    sh->nwindows = ntok > L->cfg.seq_len ? (ntok - 1) / L->cfg.seq_len : 0;
    L->index.num_items += sh->nwindows;
    L->index.dataset_bytes += sh->nwindows * (uint64_t)(L->cfg.seq_len + 1) * tb;
    return COORDL_OK;
}

static coordl_status cdl__index_tokens(coordl *L) {
    const char *src = L->cfg.source;
    size_t cap = 0;
    coordl_status rc = COORDL_OK;
    struct stat sb;
    if (strpbrk(src, "*?[")) {
        glob_t g;
        int e = glob(src, 0, NULL, &g);
        if (e == GLOB_NOMATCH) return cdl__open_fail(COORDL_ERR_INVALID, "source: no file matches %s", src);
        if (e != 0) return cdl__open_fail(COORDL_ERR_IO, "source: cannot expand %s", src);
        for (size_t i = 0; rc == COORDL_OK && i < g.gl_pathc; i++) rc = cdl__add_shard(L, g.gl_pathv[i], &cap);
        globfree(&g);
    } else if (stat(src, &sb) != 0 && L->io == &cdl__posix_io) {
        return cdl__open_fail(COORDL_ERR_INVALID, "source: %s does not exist (%s)", src, strerror(errno));
    } else if (stat(src, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        struct dirent **names;
        int n = scandir(src, &names, NULL, alphasort);
        if (n < 0) return cdl__open_fail(COORDL_ERR_IO, "source: cannot list %s: %s", src, strerror(errno));
        char path[PATH_MAX];
        for (int i = 0; i < n; i++) {
            struct stat fb;
            if (rc == COORDL_OK && names[i]->d_name[0] != '.' &&
                snprintf(path, sizeof path, "%s/%s", src, names[i]->d_name) < (int)sizeof path &&
                stat(path, &fb) == 0 && S_ISREG(fb.st_mode))
                rc = cdl__add_shard(L, path, &cap);
            free(names[i]);
        }
        free(names);
    } else {
        /* one shard, or a text list of shards (paths relative to it): a
         * list is text, a shard's header has NUL bytes */
        char err[CDL_ERRMSG_MAX];
        unsigned char head[CDL_SHARD_HEADER_BYTES];
        void *f;
        uint64_t src_bytes, got = 0;
        rc = cdl__io_open(L, src, &f, &src_bytes, err, sizeof err);
        if (rc != COORDL_OK) return cdl__open_fail(rc, "source: cannot open %s: %s", src, err);
        rc = cdl__io_read(L, f, src, head, sizeof head, 0, &got, err, sizeof err);
        cdl__io_close(L, f);
        if (rc != COORDL_OK) return cdl__open_fail(rc, "source: %s", err);
        char *text = NULL;
        size_t len = 0, at = 0;
        /* one shard still goes through the checks below (no window at all;
         * num_classes) */
        if (memchr(head, 0, (size_t)got)) rc = cdl__add_shard(L, src, &cap);
        else rc = cdl__io_slurp(L, src, "shard list", &text, &len);
        if (rc != COORDL_OK) return rc;
        char *path = NULL;
        size_t path_cap = 0, path_len;
        cdl__list_line ln = {0};
        int more;
        while (rc == COORDL_OK && (more = cdl__list_next(text, len, &at, &ln)) != 0) {
            if (more < 0)
                rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s line %llu: holds a NUL byte", src,
                                    (unsigned long long)ln.lineno);
            else if (!cdl__list_path(L, src, ln.text, ln.len, &path, &path_cap, &path_len))
                rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while reading %s", src);
            else
                rc = cdl__add_shard(L, path, &cap);
        }
        cdl__free(L, path);
        cdl__free(L, text);
    }
    if (rc == COORDL_OK && L->index.nshards == 0) rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s names no token shards", src);
    if (rc == COORDL_OK && L->index.num_items == 0)
        rc = cdl__open_fail(COORDL_ERR_INVALID, "source: the shards of %s hold no window of seq_len + 1 = %u tokens; "
                            "lower seq_len", src, L->cfg.seq_len + 1);
    L->index.num_classes = (uint32_t)L->index.nshards;
    return rc;
}
#else /* COORDL_NO_TOKENS: open refuses COORDL_PIPE_TOKENS (abi.c) */
static coordl_status cdl__index_tokens(coordl *L) {
    return cdl__open_fail(COORDL_ERR_UNSUPPORTED, "source: %s: token shards are not in this build "
                          "(COORDL_NO_TOKENS)", L->cfg.source);
}
#endif /* COORDL_NO_TOKENS */

/* A folder of tar shards: .tar files and no subfolder (a folder with
 * class folders stays an ImageFolder, whatever else it holds). */
static int cdl__is_shard_folder(const char *path) {
    DIR *d = opendir(path);
    if (!d) return 0;
    int tars = 0, dirs = 0;
    struct dirent *e;
    while (!dirs && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        int is_dir = e->d_type == DT_DIR;
        if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) {
            struct stat sb;
            is_dir = fstatat(dirfd(d), e->d_name, &sb, 0) == 0 && S_ISDIR(sb.st_mode);
        }
        dirs += is_dir;
        tars += !is_dir && cdl__is_tar_name(e->d_name);
    }
    closedir(d);
    return tars > 0 && dirs == 0;
}

/* A list of shards rather than of items: its first non-empty line has no
 * TAB and names a .tar file. */
static int cdl__is_shard_list(const char *text, size_t len) {
    size_t a = 0;
    while (a < len && (text[a] == '\n' || text[a] == '\r')) a++;
    size_t b = a;
    while (b < len && text[b] != '\n') b++;
    while (b > a && text[b - 1] == '\r') b--;
    if (b - a < 4 || memchr(text + a, '\t', b - a) || memchr(text + a, '\0', b - a)) return 0;
    return strncasecmp(text + b - 4, ".tar", 4) == 0;
}

/* What a file given as source is when it is no list: an image, a sound,
 * an archive, a token shard (by its leading bytes), or NULL. A newcomer's
 * first try is often one image; "line 1 holds a NUL byte" does not say
 * that it was the wrong kind of file. */
static const char *cdl__sniff_not_list(const unsigned char *b, size_t n) {
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return "a JPEG image";
    if (n >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0) return "a PNG image";
    if (n >= 6 && (memcmp(b, "GIF87a", 6) == 0 || memcmp(b, "GIF89a", 6) == 0)) return "a GIF image";
    if (n >= 12 && memcmp(b, "RIFF", 4) == 0 && memcmp(b + 8, "WAVE", 4) == 0) return "a WAV file";
    if (n >= 262 && memcmp(b + 257, "ustar", 5) == 0) return "a tar archive not named .tar";
    if (n >= 2 && b[0] == 0x1F && b[1] == 0x8B) return "a gzip file";
    if (n >= 4 && memcmp(b, "PK\x03\x04", 4) == 0) return "a zip file";
    if (n >= 4) {
        const uint32_t magic = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        if (magic == CDL_SHARD_MAGIC_U16 || magic == CDL_SHARD_MAGIC_U32) return "an llm.c token shard";
    }
    if (n >= 2 && b[0] == 'B' && b[1] == 'M' && memchr(b, 0, n < 64 ? n : 64)) return "a BMP image";
    return NULL;
}

/* WebDataset's brace notation, as its braceexpand does: each {a..b}
 * (numbers, zero-padded to the width of a when it has leading zeros or a
 * and b are as wide) or {x,y,z} group in turn, left to right, expanded
 * into lines of *out (paths relative to the folder before the first
 * brace unless URLs, as a list file's lines are). 0 with why set when the
 * pattern is malformed or names more than CDL_BRACE_MAX paths. */
#define CDL_BRACE_MAX 10000000u
static int cdl__brace_expand(const coordl *L, const char *pat, size_t strip, char **out, size_t *len, size_t *cap,
                             size_t *count, char *why, size_t whycap) {
    const char *open = strchr(pat, '{');
    if (!open) {
        const size_t n = strlen(pat) - strip;
        if (++*count > CDL_BRACE_MAX) {
            snprintf(why, whycap, "names more than %u paths", CDL_BRACE_MAX);
            return 0;
        }
        if (!cdl__reserve(L, (void **)out, cap, *len + n + 2)) {
            snprintf(why, whycap, "out of memory");
            return 0;
        }
        memcpy(*out + *len, pat + strip, n);
        *len += n;
        (*out)[(*len)++] = '\n';
        (*out)[*len] = '\0';
        return 1;
    }
    const char *close = strchr(open, '}');
    if (!close || memchr(open + 1, '{', (size_t)(close - open - 1))) {
        snprintf(why, whycap, "unbalanced or nested braces at offset %zu", (size_t)(open - pat));
        return 0;
    }
    const size_t pre = (size_t)(open - pat), body = (size_t)(close - open - 1), rest = strlen(close + 1);
    char *buf = cdl__malloc(L, pre + body + rest + 32);
    if (!buf) {
        snprintf(why, whycap, "out of memory");
        return 0;
    }
    memcpy(buf, pat, pre);
    int ok = 1;
    unsigned long long a, b;
    int na = 0, nb = 0;
    char dots[3] = "";
    if (sscanf(open + 1, "%llu%n..%llu%n", &a, &na, &b, &nb) == 2 && (size_t)nb == body &&
        sscanf(open + 1 + na, "%2[.]", dots) == 1) {
        const int wa = na, wb = nb - na - 2;
        const int width = open[1] == '0' || wa == wb ? wa : 0;
        if (a > b || b - a >= CDL_BRACE_MAX) {
            snprintf(why, whycap, "the range {%.*s} is empty or too large", (int)body, open + 1);
            ok = 0;
        }
        for (unsigned long long i = a; ok && i <= b; i++) {
            const int w = snprintf(buf + pre, 32, "%0*llu", width, i);
            memcpy(buf + pre + w, close + 1, rest + 1);
            ok = cdl__brace_expand(L, buf, strip, out, len, cap, count, why, whycap);
        }
    } else {
        for (const char *alt = open + 1; ok && alt <= close;) {
            const char *end = memchr(alt, ',', (size_t)(close - alt));
            if (!end) end = close;
            const size_t n = (size_t)(end - alt);
            char *nb2 = cdl__realloc(L, buf, pre + n + rest + 32);
            if (!nb2) {
                snprintf(why, whycap, "out of memory");
                ok = 0;
                break;
            }
            buf = nb2;
            memcpy(buf + pre, alt, n);
            memcpy(buf + pre + n, close + 1, rest + 1);
            ok = cdl__brace_expand(L, buf, strip, out, len, cap, count, why, whycap);
            alt = end + 1;
        }
    }
    cdl__free(L, buf);
    return ok;
}

/* --- box labels (labels = COORDL_LABELS_BOXES) ---------------------------
 * Read at open, not at fetch: a label file is a few hundred bytes beside
 * an image of tens of kilobytes, every member of a group, every MPI rank
 * and every seek needs the same boxes, and a worker then never opens a
 * second file per row. Held in the index, they need no cache entry, no
 * peer request and no read-ahead slot of their own; the row's geometry
 * moves them (plan.c) when its pixels are prepared. */

#define CDL_LABEL_FILE_MAX (1u << 20) /* bytes; a larger label file is a bad label */

/* Darknet's label path for an image: the last folder named "images" or
 * "JPEGImages" becomes "labels" (Darknet replaces the first occurrence of
 * the text anywhere, which misfires on ".../myimages/..."), and the
 * extension ".txt". Without such a folder the .txt sits beside the image. */
static int cdl__label_path(coordl *L, const char *img, char **buf, size_t *cap) {
    const size_t n = strlen(img);
    size_t cut = 0, cut_len = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && img[i - 1] != '/') continue;
        const char *end = strchr(img + i, '/');
        if (!end) break;
        const size_t len = (size_t)(end - (img + i));
        if ((len == 6 && memcmp(img + i, "images", 6) == 0) || (len == 10 && memcmp(img + i, "JPEGImages", 10) == 0)) {
            cut = i;
            cut_len = len;
        }
    }
    const char *base = strrchr(img, '/');
    base = base ? base + 1 : img;
    const char *dot = strrchr(base, '.');
    const size_t stem = dot && dot != base ? (size_t)(dot - img) : n;
    if (!cdl__reserve(L, (void **)buf, cap, n + 16)) return 0;
    char *o = *buf;
    size_t k = 0;
    if (cut_len) {
        memcpy(o, img, cut);
        memcpy(o + cut, "labels", 6);
        k = cut + 6;
        memcpy(o + k, img + cut + cut_len, stem - cut - cut_len);
        k += stem - cut - cut_len;
    } else {
        memcpy(o, img, stem);
        k = stem;
    }
    memcpy(o + k, ".txt", 5);
    return 1;
}

/* One "class cx cy w h" line (space or tab separated). Returns NULL with
 * the box in out, or why the line is bad. */
static const char *cdl__box_line(const char *line, size_t n, int32_t num_classes, float out[5]) {
    char tmp[256];
    if (n >= sizeof tmp) return "longer than 255 bytes";
    memcpy(tmp, line, n);
    tmp[n] = '\0';
    char *p = tmp, *end;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '-' && p[1] >= '0' && p[1] <= '9') return "the class is negative";
    if (*p < '0' || *p > '9') return "expected \"class cx cy w h\" (the class first, an integer)";
    errno = 0;
    const long cls = strtol(p, &end, 10);
    if (*end != ' ' && *end != '\t') return "the class is not an integer, or the line has only one field";
    if (errno || cls > INT32_MAX - 1) return "the class is out of range";
    if (num_classes > 0 && cls >= num_classes) return "the class is not below num_classes";
    out[4] = (float)cls;
    p = end;
    for (int k = 0; k < 4; k++) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) return "expected 5 fields \"class cx cy w h\", got fewer";
        const float v = strtof(p, &end);
        if (end == p || (*end && *end != ' ' && *end != '\t')) return "a coordinate is not a number";
        if (!isfinite(v)) return "a coordinate is not finite";
        if (v < 0.0f || v > 1.0f) return "a coordinate is outside [0, 1] (boxes are normalized to the image)";
        out[k] = v;
        p = end;
    }
    while (*p == ' ' || *p == '\t') p++;
    if (*p) return "more than 5 fields (expected \"class cx cy w h\")";
    return NULL;
}

/* Reads [off, off + len) of file (len = UINT64_MAX: the whole file) into
 * *buf; why says what failed. */
static int cdl__read_label(coordl *L, const char *file, uint64_t off, uint64_t len, char **buf, size_t *cap,
                           size_t *got_len, char *why, size_t whycap) {
    void *f;
    uint64_t size, got = 0;
    char err[256];
    if (cdl__io_open(L, file, &f, &size, err, sizeof err) != COORDL_OK) {
        snprintf(why, whycap, "missing label file (%s)", err);
        return 0;
    }
    if (len == UINT64_MAX) len = size, off = 0;
    if (len > CDL_LABEL_FILE_MAX || off > size || len > size - off) {
        cdl__io_close(L, f);
        snprintf(why, whycap, "%llu bytes: not a label file (at most %u)", (unsigned long long)len, CDL_LABEL_FILE_MAX);
        return 0;
    }
    if (!cdl__reserve(L, (void **)buf, cap, (size_t)len + 1)) {
        cdl__io_close(L, f);
        snprintf(why, whycap, "out of memory");
        return 0;
    }
    const coordl_status rc = cdl__io_read(L, f, file, *buf, len, off, &got, err, sizeof err);
    cdl__io_close(L, f);
    if (rc != COORDL_OK || got != len) {
        snprintf(why, whycap, "cannot read it: %s", rc != COORDL_OK ? err : "cut short");
        return 0;
    }
    (*buf)[got] = '\0';
    *got_len = (size_t)got;
    return 1;
}

static uint64_t cdl__fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Every item's boxes, from its label file (or tar .txt member). A bad
 * label (missing, empty, malformed, out of range) marks its item bad with
 * a message naming the file and line: the row is then a bad sample
 * (on_bad_sample). Fails the open only for lack of memory. */
static coordl_status cdl__index_boxes(coordl *L) {
    cdl__boxes *B = &L->index.boxes;
    const uint64_t n = L->index.num_items;
    const uint32_t max_boxes = L->cfg.max_boxes;
    B->first = cdl__malloc(L, (size_t)(n + 1) * sizeof *B->first);
    B->bad = cdl__malloc(L, (size_t)(n ? n : 1) * sizeof *B->bad);
    if (!B->first || !B->bad) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the box labels of %llu items",
                                                    (unsigned long long)n);
    size_t nbox = 0, boxcap = 0, pathcap = 0, textcap = 0;
    char *lpath = NULL, *text = NULL, why[CDL_ERRMSG_MAX - 96], first_bad[CDL_ERRMSG_MAX] = "";
    coordl_status rc = COORDL_OK;
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t i = 0; i < n && rc == COORDL_OK; i++) {
        B->first[i] = nbox;
        B->bad[i] = 0;
        const char *file;
        uint64_t off = 0, len = UINT64_MAX;
        size_t tlen = 0;
        int ok;
        if (L->index.tar_txt || L->index.tar_items) {
            const uint32_t shard = L->index.tar_refs ? L->index.tar_refs[i].shard : L->index.tar_items[i].shard;
            const uint64_t toff = L->index.tar_txt ? L->index.tar_txt[i].offset : L->index.tar_items[i].txt_offset;
            const uint32_t tbytes = L->index.tar_txt ? L->index.tar_txt[i].bytes : L->index.tar_items[i].txt_bytes;
            file = L->index.strings + L->index.tar_shards[shard];
            ok = tbytes != UINT32_MAX;
            if (!ok) snprintf(why, sizeof why, "missing label: the sample has no .txt member");
            off = toff, len = tbytes;
        } else {
            if (!cdl__label_path(L, cdl__item_path(L, i), &lpath, &pathcap)) { rc = COORDL_ERR_NOMEM; break; }
            file = lpath;
            ok = 1;
        }
        if (ok) ok = cdl__read_label(L, file, off, len, &text, &textcap, &tlen, why, sizeof why);
        size_t at = 0, kept = 0, lineno = 0;
        while (ok && at < tlen) {
            const char *line = text + at, *nl = memchr(line, '\n', tlen - at);
            size_t ll = nl ? (size_t)(nl - line) : tlen - at;
            at += ll + (nl ? 1 : 0);
            lineno++;
            if (ll && line[ll - 1] == '\r') ll--;
            size_t b = 0;
            while (b < ll && (line[b] == ' ' || line[b] == '\t')) b++;
            if (b == ll) continue; /* blank */
            if (memchr(line, '\0', ll)) {
                snprintf(why, sizeof why, "line %zu: holds a NUL byte", lineno);
                ok = 0;
                break;
            }
            float box[5];
            const char *bad = cdl__box_line(line, ll, L->cfg.num_classes, box);
            if (bad) {
                snprintf(why, sizeof why, "line %zu: %s", lineno, bad);
                ok = 0;
                break;
            }
            if (kept == max_boxes) { B->dropped++; continue; }
            if (!cdl__reserve(L, (void **)&B->box, &boxcap, (nbox + 1) * sizeof *B->box)) { rc = COORDL_ERR_NOMEM; break; }
            memcpy(B->box[nbox++], box, sizeof box);
            kept++;
        }
        if (rc != COORDL_OK) break;
        if (ok && kept == 0) {
            snprintf(why, sizeof why, "empty label file (no boxes)");
            ok = 0;
        }
        if (!ok) {
            char msg[CDL_ERRMSG_MAX];
            uint64_t soff;
            if (L->index.tar_txt || L->index.tar_items)
                snprintf(msg, sizeof msg, "%s: bad box label (.txt member): %s", cdl__item_path(L, i), why);
            else
                snprintf(msg, sizeof msg, "%s: bad box label %s: %s", cdl__item_path(L, i), file, why);
            if (!cdl__strings_append(L, msg, strlen(msg), &soff)) { rc = COORDL_ERR_NOMEM; break; }
            B->bad[i] = soff + 1;
            nbox = B->first[i]; /* a bad file's boxes are not used */
            if (B->bad_items++ == 0) snprintf(first_bad, sizeof first_bad, "%s", msg);
        }
        const uint64_t cnt = nbox - B->first[i];
        h = cdl__fnv(h, &cnt, sizeof cnt);
        const unsigned char is_bad = B->bad[i] != 0;
        h = cdl__fnv(h, &is_bad, 1);
        if (cnt) h = cdl__fnv(h, B->box[B->first[i]], (size_t)cnt * sizeof *B->box);
    }
    cdl__free(L, lpath);
    cdl__free(L, text);
    if (rc != COORDL_OK) return cdl__open_fail(rc, "out of memory while reading box labels");
    B->first[n] = nbox;
    B->hash = h;
    if (B->dropped)
        cdl__log(L, COORDL_LOG_WARN, "box labels: %llu boxes beyond max_boxes (%u) dropped (coordl_stats.boxes_dropped)",
                 (unsigned long long)B->dropped, max_boxes);
    if (B->bad_items)
        cdl__log(L, COORDL_LOG_WARN, "box labels: %llu of %llu items have a bad label, each a bad sample when "
                 "its row is prepared (on_bad_sample); the first: %s", (unsigned long long)B->bad_items,
                 (unsigned long long)n, first_bad);
    return COORDL_OK;
}

CDL_PRIVATE coordl_status cdl__index_source(coordl *L) {
    struct stat sb;
    const char *src = L->cfg.source;
    if (L->cfg.pipeline == COORDL_PIPE_TOKENS) return cdl__index_tokens(L);
    /* A path the local file system does not know may still be one the
     * trainer's reader knows (an object store key): read it as a file. A
     * glob is a pattern no file is named after; braces are WebDataset's
     * shard ranges; an http(s):// or s3:// URL is read by the remote
     * reader, and an s3:// prefix ending in '/' is listed (docs/remote.md). */
    const int local = stat(src, &sb) == 0;
    const int is_dir = local && S_ISDIR(sb.st_mode);
    const int remote = !local && L->io == &cdl__posix_io && cdl__remote_is_url(src);
    coordl_status rc;
    const size_t src_len = strlen(src);
    if (remote && strncasecmp(src, "s3://", 5) == 0 && src[src_len - 1] == '/') {
        /* s3://bucket/prefix/: every .tar object under it, listed */
        char *text = NULL, why[CDL_ERRMSG_MAX];
        size_t len = 0;
        const coordl_status lrc = cdl__remote_list(L, src, &text, &len, why, sizeof why);
        if (lrc != COORDL_OK)
            rc = cdl__open_fail(lrc, "source: %s", why);
        else if (!len)
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s: no .tar objects under this prefix", src);
        else
            rc = cdl__index_tar_saved(L, 4, text, len);
        cdl__free(L, text);
    } else if (!local && strchr(src, '{') && strchr(src, '}')) {
        char *text = NULL, why[256];
        size_t len = 0, cap = 0, count = 0;
        const char *brace = strchr(src, '{'), *slash = brace;
        while (slash > src && slash[-1] != '/') slash--;
        if (!cdl__brace_expand(L, src, cdl__remote_is_url(src) ? 0 : (size_t)(slash - src), &text, &len, &cap, &count,
                               why, sizeof why))
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s: %s", src, why);
        else if (!cdl__is_shard_list(text, len))
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s: a brace pattern must name .tar shards", src);
        else
            rc = cdl__index_tar_saved(L, 4, text, len);
        cdl__free(L, text);
    } else if (!local && !remote && strpbrk(src, "*?[")) {
        rc = cdl__index_tar_saved(L, 3, NULL, 0);
    } else if (!local && !remote && L->io == &cdl__posix_io) {
        return cdl__open_fail(COORDL_ERR_INVALID, "source: %s does not exist (%s); set cfg.source to an "
                              "ImageFolder root, a list file or tar shards", src, strerror(errno));
    } else if (!is_dir && cdl__is_tar_name(src)) {
        rc = cdl__index_tar_saved(L, 1, NULL, 0);
    } else if (is_dir) {
        rc = cdl__is_shard_folder(src) ? cdl__index_tar_saved(L, 2, NULL, 0) : cdl__index_image_folder(L, src);
    } else {
        char *text;
        size_t len;
        rc = cdl__io_slurp(L, src, "list file", &text, &len);
        const char *kind = rc == COORDL_OK ? cdl__sniff_not_list((const unsigned char *)text, len) : NULL;
        if (kind)
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s is %s, not a dataset; set source to an ImageFolder "
                                "root (a folder of class folders of images), a list file of \"path<TAB>label\" "
                                "lines, a .tar shard, a folder of .tar shards, a list of them, or a glob of them%s",
                                src, kind, strcmp(kind, "an llm.c token shard") == 0
                                ? " (token shards: pipeline = COORDL_PIPE_TOKENS)" : "");
        else if (rc == COORDL_OK)
            rc = cdl__is_shard_list(text, len) ? cdl__index_tar_saved(L, 4, text, len) : cdl__index_list_text(L, src, text, len);
        cdl__free(L, text);
    }
    if (rc != COORDL_OK) return rc;
    if (L->cfg.index_path && L->cfg.index_path[0] && !L->index.tar_refs)
        cdl__log(L, COORDL_LOG_INFO, "index_path: %s is not tar shards; scanned, nothing saved (a saved index "
                 "is for tar-shard sources: docs/index.md)", src);
    if (L->index.lazy) return COORDL_OK; /* counted as the shards are reached */
    if (L->index.num_items == 0)
        return cdl__open_fail(COORDL_ERR_INVALID, "source: %s holds no %s", src,
                              L->cfg.pipeline == COORDL_PIPE_AUDIO ? "WAV files (.wav)"
                              : "images (extensions .jpg .jpeg .png .bmp .ppm .pgm .tga)");
    if (L->index.num_items > (uint64_t)INT32_MAX)
        return cdl__open_fail(COORDL_ERR_INVALID, "source: more than 2^31 items");
    if (L->cfg.labels == COORDL_LABELS_BOXES) return cdl__index_boxes(L);
    return COORDL_OK;
}

/* The shard holding token window `id` (the last shard whose first id is
 * <= id and that has windows). */
/* Bytes a thread reads from a kept token shard at once (a window inside
 * the last block read is a copy). */
#define CDL_KEPT_BLOCK ((uint64_t)64 << 10)

CDL_PRIVATE coordl_status cdl__read_item(const coordl *L, cdl__kept_file *kept, uint64_t id, cdl__u8 **buf, size_t *cap, int grow,
                                    int *too_big, uint64_t *len, uint64_t *storage_bytes, char *err, size_t errcap) {
    enum { PLAIN, WINDOW, MEMBER } kind = L->index.shards ? WINDOW
                                          : L->index.tar_refs || L->index.lazy ? MEMBER : PLAIN;
    /* a token window's shard is found once: it is also its path */
    const cdl__shard *sh = kind == WINDOW ? cdl__shard_of(L, id) : NULL;
    cdl__tar_ref copy;
    coordl_status ref_rc = COORDL_OK;
    /* a lazy item's shard is scanned again here if its block was dropped */
    const cdl__tar_ref *ti = kind == MEMBER ? cdl__tar_ref_of(L, id, &copy, &ref_rc, err, errcap) : NULL;
    *len = 0;
    if (ref_rc != COORDL_OK) return ref_rc;
    /* a lazy item's messages name its shard (and the offset): its member
     * name is not resident */
    const char *path = sh ? L->index.strings + sh->path_off
                       : L->index.lazy ? L->index.strings + L->index.tar_shards[CDL_LAZY_SHARD(id)] : cdl__item_path(L, id);
    const char *file = path;
    uint64_t off = 0, want = 0;
    int whole = 0;
    char why[CDL_ERRMSG_MAX - 64];
    if (kind == WINDOW) {
        want = (uint64_t)(L->cfg.seq_len + 1) * sh->tok_bytes;
        off = CDL_SHARD_HEADER_BYTES + (id - sh->first_item) * L->cfg.seq_len * sh->tok_bytes;
    } else if (kind == MEMBER) {
        file = L->index.strings + L->index.tar_shards[ti->shard];
        off = ti->offset;
        want = ti->bytes;
    } else {
        whole = 1;
    }
    if (!whole && want > L->cfg.max_item_bytes) {
        snprintf(err, errcap, "%s: %llu bytes exceeds max_item_bytes (%llu)", path, (unsigned long long)want,
                 (unsigned long long)L->cfg.max_item_bytes);
        return COORDL_ERR_CORRUPT;
    }
    if (kind == MEMBER && want == 0) {
        snprintf(err, errcap, "%s: empty member", path);
        return COORDL_ERR_CORRUPT;
    }
    void *f;
    uint64_t size, got = 0;
    coordl_status rc = COORDL_OK;
    /* a token shard stays open for this thread's next window of it
     * (kept); a plain file or a tar shard is opened and closed each time,
     * so a file replaced or deleted after open is seen at the next read */
    const int keep = kept && kind == WINDOW;
    if (keep && kept->f && kept->path == file) {
        f = kept->f;
        size = kept->size;
    } else {
        if (keep) cdl__kept_close(L, kept);
        rc = cdl__io_open(L, file, &f, &size, why, sizeof why);
        if (rc != COORDL_OK) {
            snprintf(err, errcap, "%s: cannot open%s: %s", path, kind == MEMBER ? " the shard" : "", why);
            return rc;
        }
        if (keep) {
            kept->f = f;
            kept->path = file;
            kept->size = size;
        }
    }
/* done with f: closed unless kept; kept after a failure is closed too,
 * so the next read opens the file again */
#define CDL_DONE_WITH(failed) \
    do { if (!keep) cdl__io_close(L, f); else if (failed) cdl__kept_close(L, kept); } while (0)
    if (whole) {
        if (size > L->cfg.max_item_bytes) {
            CDL_DONE_WITH(1);
            snprintf(err, errcap, "%s: %llu bytes exceeds max_item_bytes (%llu)", path, (unsigned long long)size,
                     (unsigned long long)L->cfg.max_item_bytes);
            return COORDL_ERR_CORRUPT;
        }
        want = size;
    } else if (kind == MEMBER && (off > size || want > size - off)) {
        CDL_DONE_WITH(1);
        snprintf(err, errcap, "%s: the shard has %llu bytes now; the member's %llu bytes at offset %llu are past its "
                 "end (it shrank since indexing)", path, (unsigned long long)size, (unsigned long long)want,
                 (unsigned long long)off);
        return COORDL_ERR_IO;
    }
    if (want + 16 > *cap) {
        void *p = *buf;
        size_t c = *cap;
        if (!grow || want > SIZE_MAX / 2 || !cdl__reserve(L, &p, &c, (size_t)want + 16)) {
            CDL_DONE_WITH(0);
            if (!grow) {
                *too_big = 1;
                snprintf(err, errcap, "%s: %llu bytes do not fit the read-ahead's %zu", path,
                         (unsigned long long)want, *cap);
            } else {
                snprintf(err, errcap, "%s: out of memory for %llu bytes", path, (unsigned long long)want);
            }
            return COORDL_ERR_NOMEM;
        }
        *buf = p;
        *cap = c;
    }
    if (keep) {
        /* a token window: from the kept block when it holds it, else one
         * read of a block (64 KiB, or the window) from the window on */
        if (kept->block_len && off >= kept->block_off && off + want <= kept->block_off + kept->block_len) {
            memcpy(*buf, kept->block + (off - kept->block_off), (size_t)want);
            got = want;
        } else {
            uint64_t n = want > CDL_KEPT_BLOCK ? want : CDL_KEPT_BLOCK;
            if (off < size && n > size - off && size - off >= want) n = size - off;
            kept->block_len = 0;
            if (n > kept->block_cap) {
                void *p = kept->block;
                size_t c = kept->block_cap;
                if (!cdl__reserve(L, &p, &c, (size_t)n)) {
                    CDL_DONE_WITH(1);
                    snprintf(err, errcap, "%s: out of memory for a %llu-byte read block", path, (unsigned long long)n);
                    return COORDL_ERR_NOMEM;
                }
                kept->block = p;
                kept->block_cap = c;
            }
            rc = cdl__io_read(L, f, file, kept->block, n, off, &got, why, sizeof why);
            if (rc == COORDL_OK) {
                kept->block_off = off;
                kept->block_len = got;
                *storage_bytes += got;
                if (got > want) got = want;
                memcpy(*buf, kept->block, (size_t)got);
            }
        }
    } else {
        rc = cdl__io_read(L, f, file, *buf, want, off, &got, why, sizeof why);
        *storage_bytes += got;
    }
    CDL_DONE_WITH(rc != COORDL_OK || got != want);
#undef CDL_DONE_WITH
    if (rc != COORDL_OK) {
        if (kind == MEMBER) snprintf(err, errcap, "%s: %s", path, why); /* why names the shard */
        else snprintf(err, errcap, "%s", why);
        return rc;
    }
    if (kind == WINDOW && got != want) {
        snprintf(err, errcap, "%s: token window %llu is cut short (%llu of %llu bytes)", path,
                 (unsigned long long)(id - sh->first_item), (unsigned long long)got, (unsigned long long)want);
        return COORDL_ERR_CORRUPT;
    }
    if (kind == MEMBER && got != want) {
        snprintf(err, errcap, "%s: cut short: %llu of %llu bytes at offset %llu (the shard shrank since indexing)",
                 path, (unsigned long long)got, (unsigned long long)want, (unsigned long long)off);
        return COORDL_ERR_IO;
    }
    /* a plain file with fewer bytes than at open shrank meanwhile: decode
     * what is there */
    if (got == 0) {
        snprintf(err, errcap, "%s: empty file", path);
        return COORDL_ERR_CORRUPT;
    }
    *len = got;
    return COORDL_OK;
}

/* Starts item id's storage read without a thread: a member of a remote
 * shard goes to the event loop (remote.c), which calls done(arg, ...) on
 * its thread once the bytes are in dst (cap bytes; 16 past the item stay
 * free, as cdl__read_item leaves them). 1: submitted; 0: read it with
 * cdl__read_item (a local or caller-read file, or a check that must
 * name the item: that read says why). */
CDL_PRIVATE int cdl__read_item_async(const coordl *L, uint64_t id, cdl__u8 *dst, size_t cap, const void *owner,
                                     cdl__remote_done_fn done, void *arg) {
    if (L->index.shards) return 0;
    cdl__tar_ref copy;
    char why[CDL_ERRMSG_MAX];
    coordl_status rc;
    const cdl__tar_ref *ti = cdl__tar_ref_of(L, id, &copy, &rc, why, sizeof why);
    if (!ti) return 0; /* not a tar member, or cdl__read_item says why */
    const char *file = L->index.strings + L->index.tar_shards[ti->shard];
    const uint64_t want = ti->bytes;
    if (L->io != &cdl__posix_io || !cdl__remote_is_url(file) || want == 0 || want > L->cfg.max_item_bytes ||
        want + 16 > cap)
        return 0;
    return cdl__remote_submit(L, file, ti->offset, want, dst, owner, done, arg);
}

/* ---- local reads in flight on io_uring --------------------------------------
 * The read-ahead's reads of local files with the built-in POSIX reader
 * (docs/storage.md, "Reads in flight"): the file is opened here, on the
 * calling thread (O_NONBLOCK and fstat, as every open: a FIFO or a device
 * is refused before any read), then read with preadv2(RWF_NOWAIT), which
 * takes what the page cache holds and never waits for the device. A read
 * the page cache answered whole ends there, at the cost of a pread; what
 * is missing goes to the ring and this thread goes on. So the reads in
 * flight are the reads that miss, up to the depth: a warm epoch puts
 * none in the ring (128 buffered reads in flight on a warm page cache ran
 * at 0.6x a pread loop here), a cold one keeps the depth in flight.
 * Every check that can fail before the read (the file cannot be opened,
 * is larger than max_item_bytes or the arena's span, is empty, a tar
 * shard shrank) is left to cdl__read_item, which opens the file again and
 * says why exactly as a worker's read would. */

/* The end of an item's read: its status, and the message without the item's
 * path (the caller names the item, as cdl__ra_read_done does). */
static coordl_status cdl__item_read_end(const coordl *L, const cdl__item_aread *a, const char *file, int e,
                                        uint64_t len, uint64_t off, uint64_t got, char *err, size_t cap) {
    (void)L;
    if (e) {
        if (a->member) snprintf(err, cap, "%s: read of %llu bytes at offset %llu failed: %s", file,
                                (unsigned long long)len, (unsigned long long)off, strerror(e));
        else snprintf(err, cap, "read of %llu bytes at offset %llu failed: %s", (unsigned long long)len,
                      (unsigned long long)off, strerror(e));
        return COORDL_ERR_IO;
    }
    if (a->member && got != a->want) {
        snprintf(err, cap, "cut short: %llu of %llu bytes at offset %llu (the shard shrank since indexing)",
                 (unsigned long long)got, (unsigned long long)a->want, (unsigned long long)(off - got));
        return COORDL_ERR_IO;
    }
    if (got == 0) {
        snprintf(err, cap, "empty file");
        return COORDL_ERR_CORRUPT;
    }
    return COORDL_OK;
}

/* A tar member's place in its shard, from the index: 1 with *off and
 * *want, 0 when the index cannot say (cdl__read_item then says why). */
static int cdl__member_place(const coordl *L, uint64_t id, uint64_t *off, uint64_t *want) {
    cdl__tar_ref copy;
    char why[CDL_ERRMSG_MAX];
    coordl_status rc;
    const cdl__tar_ref *ti = cdl__tar_ref_of(L, id, &copy, &rc, why, sizeof why);
    if (!ti) return 0;
    *off = ti->offset;
    *want = ti->bytes;
    return 1;
}

static const char *cdl__item_file(const coordl *L, uint64_t id) {
    if (L->index.lazy) return L->index.strings + L->index.tar_shards[CDL_LAZY_SHARD(id)];
    if (!L->index.tar_refs) return cdl__item_path(L, id);
    return L->index.strings + L->index.tar_shards[L->index.tar_refs[id].shard];
}

/* The ring's completion of an item's read (on its thread). */
static void cdl__item_ring_done(cdl__uring_req *q, int e) {
    cdl__item_aread *a = (cdl__item_aread *)q; /* q is its first member */
    char err[CDL_ERRMSG_MAX - 64];
    err[0] = '\0';
    const coordl_status rc = cdl__item_read_end(a->L, a, cdl__item_file(a->L, a->id), e, q->len - q->got,
                                                q->off + q->got, q->got, err, sizeof err);
    cdl__io_close(a->L, a->file);
    const uint64_t got = q->got;
    /* last: the caller may reuse *a from here on */
    a->done(a->arg, rc, got, err);
}

/* Starts item id's read for the read-ahead: 0: not a read for the ring
 * (read it with cdl__read_item); 1: ended here (*rc, *len, *storage_bytes
 * and err as cdl__read_item sets them); 2: in the ring: done(arg, ...) is
 * called on the ring's thread, *a in use until then. */
CDL_PRIVATE int cdl__read_item_start(const coordl *L, cdl__uring *U, cdl__item_aread *a, uint64_t id, cdl__u8 *dst,
                                     size_t cap, coordl_status *rc, uint64_t *len, uint64_t *storage_bytes, char *err,
                                     size_t errcap, cdl__remote_done_fn done, void *arg) {
    if (!U || L->io != &cdl__posix_io || L->index.shards) return 0;
    const char *file = cdl__item_file(L, id);
    const int member = L->index.tar_refs != NULL || L->index.lazy != NULL;
    uint64_t off = 0, want = 0;
    if (member && (!cdl__member_place(L, id, &off, &want) || want == 0 || want > L->cfg.max_item_bytes)) return 0;
    if (cdl__remote_is_url(file)) return 0;
    char why[CDL_ERRMSG_MAX - 64];
    void *f;
    uint64_t size;
    if (cdl__io_open(L, file, &f, &size, why, sizeof why) != COORDL_OK) return 0;
    if (!member) {
        if (size > L->cfg.max_item_bytes) want = 0;
        else want = size;
    } else if (off > size || want > size - off) {
        want = 0;
    }
    const int fd = cdl__posix_fd(f);
    const int fl = fcntl(fd, F_GETFL);
    /* io_uring fails a read of an O_NONBLOCK file that misses the page
     * cache with EAGAIN instead of waiting for it: the flag only guarded
     * the open (a FIFO), and the file is regular */
    if (want == 0 || want + 16 > cap || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        cdl__io_close(L, f);
        return 0;
    }
    uint64_t got = 0;
    int missed = 0, e = 0;
    while (got < want) {
        struct iovec v = {dst + got, (size_t)(want - got > ((uint64_t)1 << 30) ? (uint64_t)1 << 30 : want - got)};
        const ssize_t r = preadv2(fd, &v, 1, (off_t)(off + got), RWF_NOWAIT);
        if (r > 0) got += (uint64_t)r;
        else if (r == 0) break;
        else if (errno == EINTR) continue;
        else { /* EAGAIN: not in the page cache; EOPNOTSUPP: no RWF_NOWAIT here; an error: the ring says */
            missed = 1;
            break;
        }
    }
    if (missed) {
        memset(a, 0, sizeof *a);
        a->q.fd = fd;
        a->q.dst = dst;
        a->q.len = want;
        a->q.off = off;
        a->q.got = got;
        a->q.done = cdl__item_ring_done;
        a->L = L;
        a->file = f;
        a->id = id;
        a->want = want;
        a->member = member;
        a->done = done;
        a->arg = arg;
        if (cdl__uring_submit(U, &a->q)) return 2;
        /* the ring refused it (closing): the rest here */
        uint64_t more = 0;
        if (cdl__io_read(L, f, file, dst + got, want - got, off + got, &more, why, sizeof why) != COORDL_OK) {
            cdl__io_close(L, f);
            *storage_bytes += got;
            *rc = COORDL_ERR_IO;
            if (member) snprintf(err, errcap, "%s: %s", cdl__item_path(L, id), why);
            else snprintf(err, errcap, "%s", why);
            return 1;
        }
        got += more;
    }
    cdl__io_close(L, f);
    cdl__item_aread view;
    view.member = member;
    view.want = want;
    *storage_bytes += got;
    *rc = cdl__item_read_end(L, &view, file, e, want - got, off + got, got, why, sizeof why);
    if (*rc != COORDL_OK) snprintf(err, errcap, "%s: %s", cdl__item_path(L, id), why);
    else *len = got;
    return 1;
}

/* ---- a caller's asynchronous reader (cfg.io_async) ---------------------------
 * The read-ahead's reads of items through a caller's coordl_io_async: the
 * item's place (a whole file, or a member of a tar shard) and its size come
 * from the index, so a read needs no open and no thread: one I/O thread
 * starts readahead_items of them and goes on (depth 512 = 512 reads in the
 * caller's machinery, not 512 threads inside read_at). A whole file is
 * asked for one byte more than indexed, so that a file that grew since is
 * seen (and read again through cfg.io by its worker, as a synchronous
 * read-ahead leaves an item larger than its span) instead of cut short. */

/* A read through cfg.io_async ended with `result` (the caller's done):
 * its status, checked as a synchronous read's would be, the bytes it
 * delivered, and why it failed (without the item's path: the caller names
 * the item). */
CDL_PRIVATE coordl_status cdl__read_item_result(cdl__item_aread *a, int64_t result, uint64_t *got, char *why,
                                                size_t cap) {
    const coordl *L = a->L;
    const char *file = cdl__item_file(L, a->id);
    why[0] = '\0';
    *got = 0;
    a->grew = 0;
    if (result < -4095 || result > (int64_t)a->asked) { /* neither bytes nor an errno: never trusted */
        snprintf(why, cap, "%s%sthe reader's read returned %lld for %llu bytes at offset %llu (neither a byte count "
                 "nor a negative errno)", a->member ? file : "", a->member ? ": " : "", (long long)result,
                 (unsigned long long)a->asked, (unsigned long long)a->off);
        return COORDL_ERR_IO;
    }
    if (result < 0) return cdl__item_read_end(L, a, file, (int)-result, a->asked, a->off, 0, why, cap);
    if (!a->member && (uint64_t)result > a->want) {
        a->grew = 1; /* larger than indexed: the caller reads it again through cfg.io */
        return COORDL_OK;
    }
    *got = (uint64_t)result;
    return cdl__item_read_end(L, a, file, 0, a->want, a->off + *got, *got, why, cap);
}

/* Starts item id's read through cfg.io_async into dst (cap bytes), with
 * done(a, result) at its end: 1 when started (done may run before this
 * returns: call it without a lock done takes), 0 when the item is to be
 * read through cfg.io (no io_async, a token shard, a size the index does
 * not know or that does not fit, or the reader declined it). */
CDL_PRIVATE int cdl__read_item_submit(const coordl *L, cdl__item_aread *a, uint64_t id, cdl__u8 *dst, size_t cap,
                                      coordl_io_done_fn done, void *arg) {
    const coordl_io_async *io = L->cfg.io_async;
    if (!io || L->index.shards) return 0;
    const int member = L->index.tar_refs != NULL || L->index.lazy != NULL;
    uint64_t off = 0, want = 0;
    if (member && !cdl__member_place(L, id, &off, &want)) return 0;
    if (!member) want = L->index.items[id].bytes;
    if (want == 0 || want > L->cfg.max_item_bytes || want + 16 > cap) return 0;
    memset(a, 0, sizeof *a);
    a->L = L;
    a->id = id;
    a->want = want;
    a->member = member;
    a->arg = arg;
    a->off = off;
    a->asked = member ? want : want + 1;
    return io->read(io->user, cdl__item_file(L, id), dst, a->asked, off, done, a) == 0;
}

/* An item's bytes from storage into the worker's buffer. */
CDL_PRIVATE coordl_status cdl__read_file(cdl__worker *W, uint64_t id, cdl__bytes *out) {
    uint64_t len = 0;
    int too_big = 0;
    coordl_status rc = cdl__read_item(W->L, &W->kept, id, &W->readbuf, &W->readcap, 1, &too_big, &len, &W->row.storage_bytes,
                                      W->err, sizeof W->err);
    if (rc != COORDL_OK) return rc;
    out->p = W->readbuf;
    out->len = (size_t)len;
    return COORDL_OK;
}

