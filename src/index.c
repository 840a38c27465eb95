/* SPDX-License-Identifier: MIT */
/*
 * index.c - the item table.
 *
 * Owns:  L->index: items (path, size, label), the string arena, classes,
 *        token shards and tar items; ImageFolder and list sources; the item
 *        accessors
 * Lock:  filled at open (index, tar, source), read-only after: any thread
 *        reads it without a lock
 * Calls: status, io (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "index_state.h"
#include "index.h"
#include "status.h"
#include "io.h"
#include "io_state.h"
#include "handle.h"

/* ---- the source index --------------------------------------------------- */

typedef struct cdl__indexer {
    coordl *L;
    uint64_t cap_items;
} cdl__indexer;

CDL_PRIVATE int cdl__strings_append(coordl *L, const char *s, size_t n, uint64_t *off) {
    if (!cdl__reserve(L, (void **)&L->index.strings, &L->index.strings_cap, L->index.strings_len + n + 1)) return 0;
    memcpy(L->index.strings + L->index.strings_len, s, n);
    L->index.strings[L->index.strings_len + n] = '\0';
    *off = L->index.strings_len;
    L->index.strings_len += n + 1;
    return 1;
}

static int cdl__items_push(cdl__indexer *ix, uint64_t path_off, uint64_t bytes, int32_t label) {
    coordl *L = ix->L;
    if (L->index.num_items == ix->cap_items) {
        uint64_t ncap = ix->cap_items ? ix->cap_items * 2 : 1024;
        void *p = cdl__realloc(L, L->index.items, ncap * sizeof *L->index.items);
        if (!p) return 0;
        L->index.items = p;
        ix->cap_items = ncap;
    }
    cdl__item *it = &L->index.items[L->index.num_items++];
    it->path_off = path_off;
    it->bytes = bytes;
    it->label = label;
    return 1;
}

/* Files an ImageFolder-style tree contributes: image extensions, or .wav
 * for the audio pipeline; any case. */
CDL_PRIVATE int cdl__wanted_file(const coordl *L, const char *name) {
    static const char *image_exts[] = {"jpg", "jpeg", "png", "bmp", "ppm", "pgm", "tga"};
    const char *dot = strrchr(name, '.');
    if (!dot) return 0;
    if (L->cfg.pipeline == COORDL_PIPE_AUDIO) return strcasecmp(dot + 1, "wav") == 0;
    for (size_t i = 0; i < sizeof image_exts / sizeof image_exts[0]; i++)
        if (strcasecmp(dot + 1, image_exts[i]) == 0) return 1;
    return 0;
}

/* Sort items [lo, hi) by path; the arena is stable during the sort.
 * qsort has no context argument, so the arena base goes through a
 * thread-local: two threads opening handles at once do not race. */
static _Thread_local const char *cdl__sort_base_tls;
static int cdl__cmp_item_path(const void *a, const void *b) {
    const cdl__item *x = a, *y = b;
    return strcmp(cdl__sort_base_tls + x->path_off, cdl__sort_base_tls + y->path_off);
}
static void cdl__sort_items_by_path(coordl *L, uint64_t lo, uint64_t hi) {
    if (hi - lo < 2) return; /* also: an empty class has no item array yet */
    cdl__sort_base_tls = L->index.strings;
    qsort(L->index.items + lo, (size_t)(hi - lo), sizeof *L->index.items, cdl__cmp_item_path);
    cdl__sort_base_tls = NULL;
}

static int cdl__cmp_cstr_ptr(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Recursively adds image files under dir (an absolute-ish path). */
static coordl_status cdl__index_class_dir(cdl__indexer *ix, char *path, size_t path_len,
                                          size_t path_cap, int32_t label, int depth) {
    coordl *L = ix->L;
    if (depth > 32)
        return cdl__open_fail(COORDL_ERR_INVALID, "source: directories nested deeper than 32 at %s", path);
    DIR *d = opendir(path);
    if (!d) return cdl__open_fail(COORDL_ERR_IO, "cannot open directory %s: %s", path, strerror(errno));
    int dfd = dirfd(d);
    struct dirent *e;
    coordl_status rc = COORDL_OK;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        if (name[0] == '.') continue; /* ., .., hidden files */
        size_t nlen = strlen(name);
        struct stat sb;
        int is_dir = e->d_type == DT_DIR, is_reg = e->d_type == DT_REG;
        int want_file = !is_dir && cdl__wanted_file(L, name);
        if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK || want_file) {
            if (fstatat(dfd, name, &sb, 0) != 0) { /* a dangling link: the tree does not hold the file */
                cdl__log(L, COORDL_LOG_WARN, "source: %s/%s skipped: %s", path, name, strerror(errno));
                continue;
            }
            is_dir = S_ISDIR(sb.st_mode);
            is_reg = S_ISREG(sb.st_mode);
        }
        if (path_len + 1 + nlen + 1 > path_cap) {
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: path too long under %s", path);
            break;
        }
        if (is_dir) {
            path[path_len] = '/';
            memcpy(path + path_len + 1, name, nlen + 1);
            rc = cdl__index_class_dir(ix, path, path_len + 1 + nlen, path_cap, label, depth + 1);
            path[path_len] = '\0';
            if (rc != COORDL_OK) break;
        } else if (is_reg && cdl__wanted_file(L, name)) {
            uint64_t off;
            path[path_len] = '/';
            memcpy(path + path_len + 1, name, nlen + 1);
            int ok = cdl__strings_append(L, path, path_len + 1 + nlen, &off) &&
                     cdl__items_push(ix, off, (uint64_t)sb.st_size, label);
            path[path_len] = '\0';
            if (!ok) { rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing"); break; }
            L->index.dataset_bytes += (uint64_t)sb.st_size;
        }
    }
    closedir(d);
    return rc;
}

CDL_PRIVATE coordl_status cdl__index_image_folder(coordl *L, const char *root) {
    cdl__indexer ix = {L, 0};
    DIR *d = opendir(root);
    if (!d) return cdl__open_fail(COORDL_ERR_IO, "source: cannot open directory %s: %s", root, strerror(errno));
    int dfd = dirfd(d);
    char **classes = NULL;
    size_t nclasses = 0, cap = 0;
    coordl_status rc = COORDL_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        int is_dir = e->d_type == DT_DIR;
        if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) {
            struct stat sb;
            is_dir = fstatat(dfd, e->d_name, &sb, 0) == 0 && S_ISDIR(sb.st_mode);
        }
        if (!is_dir) continue;
        if (nclasses == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            char **p = cdl__realloc(L, classes, ncap * sizeof *p);
            if (!p) { rc = COORDL_ERR_NOMEM; break; }
            classes = p;
            cap = ncap;
        }
        size_t n = strlen(e->d_name);
        classes[nclasses] = cdl__malloc(L, n + 1);
        if (!classes[nclasses]) { rc = COORDL_ERR_NOMEM; break; }
        memcpy(classes[nclasses++], e->d_name, n + 1);
    }
    closedir(d);
    if (rc == COORDL_ERR_NOMEM) rc = cdl__open_fail(rc, "out of memory while listing %s", root);
    if (rc == COORDL_OK && nclasses == 0)
        rc = cdl__open_fail(COORDL_ERR_INVALID,
                            "source: %s has no class folders (expected root/<class>/<image files>)", root);
    if (rc == COORDL_OK) {
        qsort(classes, nclasses, sizeof *classes, cdl__cmp_cstr_ptr);
        size_t cap_path = 4096;
        char *path = cdl__malloc(L, cap_path);
        if (!path) rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
        for (size_t c = 0; rc == COORDL_OK && c < nclasses; c++) {
            int n = snprintf(path, cap_path, "%s/%s", root, classes[c]);
            if (n < 0 || (size_t)n >= cap_path) {
                rc = cdl__open_fail(COORDL_ERR_INVALID, "source: path too long: %s/%s", root, classes[c]);
                break;
            }
            uint64_t first = L->index.num_items;
            rc = cdl__index_class_dir(&ix, path, (size_t)n, cap_path, (int32_t)c, 0);
            if (rc == COORDL_OK) cdl__sort_items_by_path(L, first, L->index.num_items);
        }
        cdl__free(L, path);
        L->index.num_classes = (uint32_t)nclasses;
    }
    for (size_t c = 0; c < nclasses; c++) cdl__free(L, classes[c]);
    cdl__free(L, classes);
    return rc;
}

/* A list-file label is a class index: the bytes after the line's last
 * TAB, one or more ASCII digits and nothing else (no sign, no spaces, no
 * NUL), read in base 10, at most CDL_MAX_LABEL, so that the class count
 * (the largest label + 1) is itself an int32. */
#define CDL_MAX_LABEL 2147483646
static int cdl__parse_label(const char *s, size_t n, int32_t *out) {
    int64_t v = 0;
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
        if (v > CDL_MAX_LABEL) return 0;
    }
    *out = (int32_t)v;
    return 1;
}

/* A printable copy of n bytes for a message: printable ASCII as is, other
 * bytes as \xNN; cut with "..." to fit cap. */
static void cdl__quote_bytes(char *dst, size_t cap, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        const size_t w = c >= 0x20 && c < 0x7f && c != '\\' ? 1 : 4;
        if (o + w + 4 > cap) { memcpy(dst + o, "...", 3); o += 3; break; }
        if (w == 1) dst[o++] = (char)c;
        else { dst[o++] = '\\'; dst[o++] = 'x'; dst[o++] = hex[c >> 4]; dst[o++] = hex[c & 15]; }
    }
    dst[o] = '\0';
}

/* The lines of a list file: "path<TAB>label", LF or CRLF, empty lines
 * skipped. The path is everything before the last TAB (it may hold spaces
 * and tabs), relative to the list file's folder unless absolute, and must
 * name a regular file now; a malformed line fails the open naming it. */
CDL_PRIVATE coordl_status cdl__index_list_text(coordl *L, const char *list, const char *text, size_t len) {
    cdl__indexer ix = {L, 0};
    char *path = NULL;
    size_t path_cap = 0, at = 0;
    cdl__list_line ln = {0};
    int32_t max_label = -1;
    coordl_status rc = COORDL_OK;
    char shown[96];
    int got;
    while (rc == COORDL_OK && (got = cdl__list_next(text, len, &at, &ln)) != 0) {
        const char *line = ln.text;
        const size_t n = ln.len;
        const uint64_t lineno = ln.lineno;
        if (got < 0) {
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s line %llu: holds a NUL byte", list,
                                (unsigned long long)lineno);
            break;
        }
        const char *tab = NULL;
        for (size_t i = n; i > 0 && !tab; i--)
            if (line[i - 1] == '\t') tab = line + i - 1;
        const int bare = !tab && L->cfg.labels == COORDL_LABELS_BOXES; /* Darknet's train.txt: paths only */
        if (!bare && (!tab || tab == line)) {
            cdl__quote_bytes(shown, sizeof shown, line, n);
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s line %llu: expected \"path<TAB>label\", got \"%s\"",
                                list, (unsigned long long)lineno, shown);
            break;
        }
        int32_t label = 0;
        const size_t plen = bare ? n : (size_t)(tab - line), llen = bare ? 0 : n - plen - 1;
        if (!bare && !cdl__parse_label(tab + 1, llen, &label)) {
            cdl__quote_bytes(shown, sizeof shown, tab + 1, llen);
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s line %llu: label \"%s\" is not a class index "
                                "(decimal digits only, 0..%d, after the last TAB)", list,
                                (unsigned long long)lineno, shown, CDL_MAX_LABEL);
            break;
        }
        size_t path_len;
        if (!cdl__list_path(L, list, line, plen, &path, &path_cap, &path_len)) { rc = COORDL_ERR_NOMEM; break; }
        char why[CDL_ERRMSG_MAX];
        void *f;
        uint64_t size;
        if (cdl__io_open(L, path, &f, &size, why, sizeof why) != COORDL_OK) {
            cdl__quote_bytes(shown, sizeof shown, path, path_len);
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s line %llu: %s is not a readable file (%s)",
                                list, (unsigned long long)lineno, shown, why);
            break;
        }
        cdl__io_close(L, f);
        uint64_t off;
        if (!cdl__strings_append(L, path, path_len, &off) ||
            !cdl__items_push(&ix, off, size, label)) {
            rc = COORDL_ERR_NOMEM;
            break;
        }
        L->index.dataset_bytes += size;
        if (label > max_label) max_label = label;
    }
    if (rc == COORDL_ERR_NOMEM) rc = cdl__open_fail(rc, "out of memory while reading %s", list);
    cdl__free(L, path);
    L->index.num_classes = max_label < 0 ? 0 : (uint32_t)max_label + 1;
    return rc;
}

CDL_PRIVATE const cdl__shard *cdl__shard_of(const coordl *L, uint64_t id) {
    size_t lo = 0, hi = L->index.nshards;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (L->index.shards[mid].first_item <= id) lo = mid; else hi = mid;
    }
    while (lo > 0 && L->index.shards[lo].nwindows == 0) lo--;
    return &L->index.shards[lo];
}

CDL_PRIVATE const char *cdl__item_path(const coordl *L, uint64_t id) {
    if (L->index.shards) return L->index.strings + cdl__shard_of(L, id)->path_off;
    if (L->index.tar_refs) return L->index.names + L->index.name_offs[id];
    return L->index.strings + L->index.items[id].path_off;
}

CDL_PRIVATE int32_t cdl__item_label(const coordl *L, uint64_t id) {
    if (L->index.shards) return (int32_t)(cdl__shard_of(L, id) - L->index.shards);
    if (L->index.tar_refs) return L->index.tar_refs[id].label;
    return L->index.items[id].label;
}

CDL_PRIVATE uint64_t cdl__item_bytes(const coordl *L, uint64_t id) {
    if (L->index.shards) return (uint64_t)(L->cfg.seq_len + 1) * cdl__shard_of(L, id)->tok_bytes;
    if (L->index.tar_refs) return L->index.tar_refs[id].bytes;
    return L->index.items[id].bytes;
}

