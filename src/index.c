/* SPDX-License-Identifier: MIT */
/*
 * index.c - the item table.
 *
 * Owns:  L->index: items (path, size, label), the string arena, classes,
 *        token shards and tar items; ImageFolder and list sources; the item
 *        accessors
 * Lock:  filled at open (index, tar, source), read-only after: any thread
 *        reads it without a lock; a lazy index's counts and blocks
 *        (L->index.lazy) under its own mutex
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

/* ---- a lazily indexed tar source (index_state.h) --------------------------- */

CDL_PRIVATE coordl_status cdl__lazy_init(coordl *L, cdl__lazy_scan_fn scan, size_t max_resident) {
    const size_t ns = L->index.ntar_shards;
    cdl__lazy *z = cdl__calloc(L, 1, sizeof *z);
    if (!z) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    if (pthread_mutex_init(&z->mu, NULL) != 0) {
        cdl__free(L, z);
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot create a mutex");
    }
    if (pthread_cond_init(&z->cv, NULL) != 0) {
        pthread_mutex_destroy(&z->mu);
        cdl__free(L, z);
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot create a condition variable");
    }
    L->index.lazy = z; /* from here on cdl__lazy_free (via coordl_close) owns it */
    z->nshards = ns;
    z->scan = scan;
    z->max_resident = max_resident < 2 ? 2 : max_resident;
    z->count = cdl__malloc(L, (ns ? ns : 1) * sizeof *z->count);
    z->block = cdl__calloc(L, ns ? ns : 1, sizeof *z->block);
    z->used = cdl__calloc(L, ns ? ns : 1, sizeof *z->used);
    z->scanning = cdl__calloc(L, ns ? ns : 1, 1);
    z->cached = cdl__calloc(L, ns ? ns : 1, 1);
    z->resident_list = cdl__malloc(L, (z->max_resident + 1) * sizeof *z->resident_list);
    if (!z->count || !z->block || !z->used || !z->scanning || !z->cached || !z->resident_list)
        return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the lazy index of %zu shards", ns);
    for (size_t s = 0; s < ns; s++) z->count[s] = CDL_LAZY_UNKNOWN;
    return COORDL_OK;
}

CDL_PRIVATE void cdl__lazy_block_free(const coordl *L, cdl__lazy_block *b) {
    cdl__free(L, b->refs);
    cdl__free(L, b->name_offs);
    cdl__free(L, b->names);
    memset(b, 0, sizeof *b);
}

CDL_PRIVATE void cdl__lazy_free(coordl *L) {
    cdl__lazy *z = L->index.lazy;
    if (!z) return;
    for (size_t s = 0; z->block && s < z->nshards; s++) cdl__lazy_block_free(L, &z->block[s]);
    for (size_t i = 0; i < z->ninterned; i++) cdl__free(L, z->interned[i]);
    cdl__free(L, z->interned);
    cdl__free(L, z->count);
    cdl__free(L, z->block);
    cdl__free(L, z->used);
    cdl__free(L, z->scanning);
    cdl__free(L, z->cached);
    cdl__free(L, z->resident_list);
    pthread_cond_destroy(&z->cv);
    pthread_mutex_destroy(&z->mu);
    cdl__free(L, z);
    L->index.lazy = NULL;
}

/* Shard s's freshly scanned block b becomes resident (its count learned
 * if it was not known). Under z->mu. */
static void cdl__lazy_publish(const coordl *L, uint32_t s, cdl__lazy_block *b) {
    cdl__lazy *z = L->index.lazy;
    if (z->count[s] == CDL_LAZY_UNKNOWN) {
        z->count[s] = b->count;
        z->counted++;
        z->counted_items += b->count;
        for (uint32_t i = 0; i < b->count; i++) z->counted_bytes += b->refs[i].bytes;
    }
    if (b->count == 0) {
        cdl__lazy_block_free(L, b);
        return;
    }
    /* room for it: the least recently used blocks go (readers copy out
     * under this lock, so none still points into one) */
    while (z->resident >= z->max_resident) {
        size_t lru = 0;
        for (size_t i = 1; i < z->resident; i++)
            if (z->used[z->resident_list[i]] < z->used[z->resident_list[lru]]) lru = i;
        cdl__lazy_block_free(L, &z->block[z->resident_list[lru]]);
        z->resident_list[lru] = z->resident_list[--z->resident];
    }
    z->block[s] = *b;
    z->resident_list[z->resident++] = s;
    z->used[s] = ++z->tick;
}

/* Shard s's block resident, under z->mu (released while this thread scans
 * it; another thread's scan of it is waited for). A shard whose first scan
 * fails counts 0 items from then on (said once in the log): the order must
 * stay a function of the counts. A later scan that fails, or finds another
 * count (the shard changed), is an error for the item that asked. */
static coordl_status cdl__lazy_resident(const coordl *L, uint32_t s, char *err, size_t errcap, int wait) {
    cdl__lazy *z = L->index.lazy;
    for (;;) {
        if (z->block[s].refs || z->count[s] == 0) {
            z->used[s] = ++z->tick;
            return COORDL_OK;
        }
        if (!z->scanning[s]) break;
        if (!wait) return COORDL_OK; /* another thread scans it */
        pthread_cond_wait(&z->cv, &z->mu);
    }
    z->scanning[s] = 1;
    pthread_mutex_unlock(&z->mu);
    cdl__lazy_block b;
    memset(&b, 0, sizeof b);
    char why[CDL_ERRMSG_MAX];
    why[0] = '\0';
    const coordl_status rc = z->scan((coordl *)L, s, &b, why, sizeof why);
    const char *shard = L->index.strings + L->index.tar_shards[s];
    pthread_mutex_lock(&z->mu);
    z->scanning[s] = 0;
    pthread_cond_broadcast(&z->cv);
    if (rc != COORDL_OK && z->count[s] == CDL_LAZY_UNKNOWN) {
        z->count[s] = 0;
        z->counted++;
        cdl__log(L, COORDL_LOG_ERROR, "source: tar shard %s: %s; its items are left out of every epoch", shard, why);
        if (z->failed++ == 0) {
            z->first_fail_rc = rc;
            snprintf(z->first_fail, sizeof z->first_fail, "tar shard %.180s: %.260s; its items are left out of every "
                     "epoch", shard, why); /* within the buffer: the log line above has it whole */
        }
        return COORDL_OK;
    }
    if (rc != COORDL_OK) {
        snprintf(err, errcap, "%s", why);
        return rc;
    }
    if (z->count[s] != CDL_LAZY_UNKNOWN && z->count[s] != b.count) {
        snprintf(err, errcap, "tar shard %s changed since it was first indexed (%u items then, %u now)", shard,
                 z->count[s], b.count);
        cdl__lazy_block_free(L, &b);
        return COORDL_ERR_IO;
    }
    cdl__lazy_publish(L, s, &b);
    return COORDL_OK;
}

/* Open's scan of a shard (tar.c checks its labels first) kept as if the
 * sampler had asked for it. */
CDL_PRIVATE void cdl__lazy_adopt(const coordl *L, uint32_t s, cdl__lazy_block *b) {
    cdl__lazy *z = L->index.lazy;
    pthread_mutex_lock(&z->mu);
    cdl__lazy_publish(L, s, b);
    pthread_mutex_unlock(&z->mu);
}

CDL_PRIVATE coordl_status cdl__lazy_count(const coordl *L, uint32_t s, uint32_t *count, char *err, size_t errcap) {
    cdl__lazy *z = L->index.lazy;
    coordl_status rc = COORDL_OK;
    pthread_mutex_lock(&z->mu);
    if (z->count[s] == CDL_LAZY_UNKNOWN) rc = cdl__lazy_resident(L, s, err, errcap, 1);
    *count = z->count[s];
    pthread_mutex_unlock(&z->mu);
    return rc;
}

/* The set's items and data bytes, for what needs them before an epoch has
 * counted every shard (coordl_analyze's report and its warm run's cache):
 * every shard counted when there are at most `most`, else `most` shards
 * spread evenly over the set (with those already counted) and the totals
 * extrapolated from them. *counted: the shards the totals stand on; *exact:
 * that is all of them. Scans what it counts on the calling thread (most =
 * 0: none, what is known now). */
CDL_PRIVATE coordl_status cdl__lazy_census(const coordl *L, size_t most, uint64_t *items, uint64_t *bytes,
                                      uint64_t *counted, int *exact) {
    cdl__lazy *z = L->index.lazy;
    const size_t ns = z->nshards;
    char err[CDL_ERRMSG_MAX];
    uint32_t count;
    for (size_t i = 0; i < ns && i < most; i++) {
        const size_t s = ns <= most ? i : (size_t)((uint64_t)i * ns / most); /* i < most: no overflow */
        const coordl_status rc = cdl__lazy_count(L, (uint32_t)s, &count, err, sizeof err);
        if (rc != COORDL_OK)
            return cdl__open_fail(rc, "source: tar shard %s: %s", L->index.strings + L->index.tar_shards[s], err);
    }
    pthread_mutex_lock(&z->mu);
    const uint64_t n = z->counted, k = z->counted_items, b = z->counted_bytes;
    pthread_mutex_unlock(&z->mu);
    *counted = n;
    *exact = n >= ns;
    *items = *exact ? k : n ? (uint64_t)((double)k / (double)n * (double)ns + 0.5) : 0;
    *bytes = *exact ? b : n ? (uint64_t)((double)b / (double)n * (double)ns + 0.5) : 0;
    return COORDL_OK;
}

/* Shard s's block made resident ahead of need (the scan-ahead threads):
 * scanned here unless it is resident or another thread scans it. 1: its
 * count is known now (0: being scanned elsewhere, or a later scan failed). */
CDL_PRIVATE int cdl__lazy_prefetch(const coordl *L, uint32_t s) {
    cdl__lazy *z = L->index.lazy;
    char err[CDL_ERRMSG_MAX];
    pthread_mutex_lock(&z->mu);
    cdl__lazy_resident(L, s, err, sizeof err, 0);
    const int known = z->count[s] != CDL_LAZY_UNKNOWN;
    pthread_mutex_unlock(&z->mu);
    return known;
}

/* Shard s's n labels, in member order, into out (its block made resident
 * for it if need be): what the MinIO cache keeps beside a shard's entries,
 * so that a cached item needs no block. */
CDL_PRIVATE coordl_status cdl__lazy_labels(const coordl *L, uint32_t s, int32_t *out, uint32_t n) {
    cdl__lazy *z = L->index.lazy;
    char err[CDL_ERRMSG_MAX];
    pthread_mutex_lock(&z->mu);
    coordl_status rc = cdl__lazy_resident(L, s, err, sizeof err, 1);
    if (rc == COORDL_OK && (!z->block[s].refs || z->block[s].count != n)) rc = COORDL_ERR_IO; /* failed, or changed */
    for (uint32_t i = 0; rc == COORDL_OK && i < n; i++) out[i] = z->block[s].refs[i].label;
    pthread_mutex_unlock(&z->mu);
    return rc;
}

/* Every item of shard s is in the MinIO cache with its label: the items
 * need its block no more, so the scan-ahead threads leave it alone (a
 * whole set cached reads no shard again after the epoch that cached it). */
CDL_PRIVATE void cdl__lazy_mark_cached(const coordl *L, uint32_t s) {
    cdl__lazy *z = L->index.lazy;
    pthread_mutex_lock(&z->mu);
    z->cached[s] = 1;
    pthread_mutex_unlock(&z->mu);
}

/* Whether shard s's block is resident, or it has no items, or they are
 * all cached (nothing to scan ahead). */
CDL_PRIVATE int cdl__lazy_ready(const coordl *L, uint32_t s) {
    cdl__lazy *z = L->index.lazy;
    pthread_mutex_lock(&z->mu);
    const int ready = z->block[s].refs != NULL || z->count[s] == 0 || z->scanning[s] || z->cached[s];
    pthread_mutex_unlock(&z->mu);
    return ready;
}

/* A shard whose first scan failed since the last call: 1 once per such
 * shard (the message of the first one), for coordl_next to report under
 * COORDL_BAD_FAIL. */
CDL_PRIVATE int cdl__lazy_new_failure(const coordl *L, coordl_status *rc, char *msg, size_t cap) {
    cdl__lazy *z = L->index.lazy;
    pthread_mutex_lock(&z->mu);
    const int news = z->failed > z->failed_reported;
    if (news) {
        *rc = z->first_fail_rc;
        if (z->failed_reported == 0) snprintf(msg, cap, "%s", z->first_fail);
        else snprintf(msg, cap, "%llu more tar shard(s) could not be read; their items are left out of every epoch "
                      "(the log names them)", (unsigned long long)(z->failed - z->failed_reported));
        z->failed_reported = z->failed;
    }
    pthread_mutex_unlock(&z->mu);
    return news;
}

/* Whether id names an item of a shard whose count is known. */
CDL_PRIVATE int cdl__lazy_id_known(const coordl *L, uint64_t id) {
    cdl__lazy *z = L->index.lazy;
    const uint32_t s = CDL_LAZY_SHARD(id), k = CDL_LAZY_ORDINAL(id);
    if (s >= z->nshards) return 0;
    pthread_mutex_lock(&z->mu);
    const int ok = z->count[s] != CDL_LAZY_UNKNOWN && k < z->count[s];
    pthread_mutex_unlock(&z->mu);
    return ok;
}

/* Item k of shard s named into buf: "shard:member" while the shard's block
 * is resident, else "shard:#k" (its ordinal in member order). Under z->mu. */
static void cdl__lazy_name(const coordl *L, uint32_t s, uint32_t k, char *buf, size_t cap) {
    const cdl__lazy_block *b = &L->index.lazy->block[s];
    const char *shard = L->index.strings + L->index.tar_shards[s];
    if (b->refs && k < b->count) snprintf(buf, cap, "%s:%s", shard, b->names + b->name_offs[k]);
    else snprintf(buf, cap, "%s:#%u", shard, k);
}

/* Item id's record, and its "shard:member" name into name (namecap > 0),
 * its shard scanned again if its block was dropped. */
CDL_PRIVATE coordl_status cdl__lazy_ref(const coordl *L, uint64_t id, cdl__tar_ref *ref, char *name, size_t namecap,
                                        char *err, size_t errcap) {
    cdl__lazy *z = L->index.lazy;
    const uint32_t s = CDL_LAZY_SHARD(id), k = CDL_LAZY_ORDINAL(id);
    if (s >= z->nshards) {
        snprintf(err, errcap, "item %llu: no such shard", (unsigned long long)id);
        return COORDL_ERR_INVALID;
    }
    const char *shard = L->index.strings + L->index.tar_shards[s];
    pthread_mutex_lock(&z->mu);
    coordl_status rc = cdl__lazy_resident(L, s, err, errcap, 1);
    if (rc == COORDL_OK && k >= z->count[s]) {
        snprintf(err, errcap, "%s: item %u of a shard of %u", shard, k, z->count[s]);
        rc = COORDL_ERR_INVALID;
    }
    if (rc == COORDL_OK) *ref = z->block[s].refs[k];
    if (namecap) cdl__lazy_name(L, s, k, name, namecap);
    pthread_mutex_unlock(&z->mu);
    return rc;
}

/* Item id's tar record: in tar_refs, or for a lazy index copied into
 * *copy (its shard scanned again if its block was dropped); NULL when the
 * source has no tar records, or it cannot be had (*rc and err say why). */
CDL_PRIVATE const cdl__tar_ref *cdl__tar_ref_of(const coordl *L, uint64_t id, cdl__tar_ref *copy, coordl_status *rc,
                                                char *err, size_t errcap) {
    *rc = COORDL_OK;
    if (L->index.tar_refs) return &L->index.tar_refs[id];
    if (!L->index.lazy) return NULL;
    *rc = cdl__lazy_ref(L, id, copy, NULL, 0, err, errcap);
    return *rc == COORDL_OK ? copy : NULL;
}

/* coordl_item_path of a lazy item: its name, kept until close (a name is
 * not resident once its block is dropped). */
static const char *cdl__lazy_path(const coordl *L, uint64_t id) {
    cdl__lazy *z = L->index.lazy;
    char name[CDL_ERRMSG_MAX], err[CDL_ERRMSG_MAX];
    cdl__tar_ref ref;
    if (cdl__lazy_ref(L, id, &ref, name, sizeof name, err, sizeof err) != COORDL_OK) return NULL;
    const size_t n = strlen(name);
    char *copy = cdl__malloc(L, n + 1);
    if (!copy) return NULL;
    memcpy(copy, name, n + 1);
    pthread_mutex_lock(&z->mu);
    if (!cdl__reserve(L, (void **)&z->interned, &z->interned_cap, (z->ninterned + 1) * sizeof *z->interned)) {
        pthread_mutex_unlock(&z->mu);
        cdl__free(L, copy);
        return NULL;
    }
    z->interned[z->ninterned++] = copy;
    pthread_mutex_unlock(&z->mu);
    return copy;
}

/* Item id's name for a message: cdl__item_path, or for a lazy item its
 * name formatted into buf (cdl__item_path would keep a copy until close):
 * "shard:member" while its shard's block is resident, else "shard:#k" (its
 * ordinal in member order). Never a scan: a worker names every item it
 * decodes, and a cached item's shard may have no block (its rows would
 * read the whole shard again for a name that no message uses). */
CDL_PRIVATE const char *cdl__item_name(const coordl *L, uint64_t id, char *buf, size_t cap) {
    if (!L->index.lazy) return cdl__item_path(L, id);
    cdl__lazy *z = L->index.lazy;
    const uint32_t s = CDL_LAZY_SHARD(id), k = CDL_LAZY_ORDINAL(id);
    if (s >= z->nshards) {
        snprintf(buf, cap, "item %llu", (unsigned long long)id);
        return buf;
    }
    pthread_mutex_lock(&z->mu);
    cdl__lazy_name(L, s, k, buf, cap);
    pthread_mutex_unlock(&z->mu);
    return buf;
}

CDL_PRIVATE const char *cdl__item_path(const coordl *L, uint64_t id) {
    if (L->index.lazy) return cdl__lazy_path(L, id);
    if (L->index.shards) return L->index.strings + cdl__shard_of(L, id)->path_off;
    if (L->index.tar_refs) return L->index.names + L->index.name_offs[id];
    return L->index.strings + L->index.items[id].path_off;
}

CDL_PRIVATE int32_t cdl__item_label(const coordl *L, uint64_t id) {
    if (L->index.tar_refs || L->index.lazy) {
        cdl__tar_ref copy;
        char err[CDL_ERRMSG_MAX];
        coordl_status rc;
        const cdl__tar_ref *r = cdl__tar_ref_of(L, id, &copy, &rc, err, sizeof err);
        return r ? r->label : -1;
    }
    if (L->index.shards) return (int32_t)(cdl__shard_of(L, id) - L->index.shards);
    return L->index.items[id].label;
}

CDL_PRIVATE uint64_t cdl__item_bytes(const coordl *L, uint64_t id) {
    if (L->index.tar_refs || L->index.lazy) {
        cdl__tar_ref copy;
        char err[CDL_ERRMSG_MAX];
        coordl_status rc;
        const cdl__tar_ref *r = cdl__tar_ref_of(L, id, &copy, &rc, err, sizeof err);
        return r ? r->bytes : 0;
    }
    if (L->index.shards) return (uint64_t)(L->cfg.seq_len + 1) * cdl__shard_of(L, id)->tok_bytes;
    return L->index.items[id].bytes;
}

