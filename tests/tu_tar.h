/*
 * tu_tar.h - a small tar writer for the coordl tests (header-only): ustar
 * headers, GNU long names ('L'), pax extended headers ('x'), base-256 size
 * fields, and the end-of-archive blocks (or not), so that tests can build
 * exactly the archive they are about, including broken ones. System `tar`
 * is used beside it for archives made the usual way.
 */
#ifndef COORDL_TU_TAR_H
#define COORDL_TU_TAR_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tu_tar {
    FILE *f;
    uint64_t off; /* bytes written so far = offset of the next header */
} tu_tar;

enum { TU_TAR_SIZE_OCTAL = 0, TU_TAR_SIZE_BASE256 = 1 };

static inline void tu_tar_open(tu_tar *t, const char *path)
{
    t->f = fopen(path, "wb");
    if (!t->f) {
        fprintf(stderr, "tu_tar: cannot write %s\n", path);
        abort();
    }
    t->off = 0;
}

static inline void tu_tar__write(tu_tar *t, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, t->f) != n) abort();
    t->off += n;
}

static inline void tu_tar__pad(tu_tar *t)
{
    static const uint8_t zero[512];
    const size_t r = (size_t)(t->off % 512);
    if (r) tu_tar__write(t, zero, 512 - r);
}

/* One header block into h: name (at most 100 bytes stored; longer is
 * cut, the caller adds a long-name record first), the POSIX ustar prefix
 * (NULL or a folder of at most 155 bytes), type, size (octal or
 * base-256), magic "ustar\0" "00" (POSIX) or "ustar  \0" (GNU). */
static inline void tu_tar_make_header(uint8_t h[512], const char *name, const char *prefix, char type,
                                      uint64_t size, int size_mode, int gnu_magic)
{
    memset(h, 0, 512);
    size_t n = strlen(name);
    memcpy(h, name, n < 100 ? n : 100);
    if (prefix) {
        const size_t pn = strlen(prefix);
        memcpy(h + 345, prefix, pn < 155 ? pn : 155);
    }
    snprintf((char *)h + 100, 8, "%07o", type == '5' ? 0755 : 0644);
    snprintf((char *)h + 108, 8, "%07o", 1000);
    snprintf((char *)h + 116, 8, "%07o", 1000);
    if (size_mode == TU_TAR_SIZE_BASE256) {
        h[124] = 0x80;
        for (int i = 0; i < 8; i++) h[135 - i] = (uint8_t)(size >> (8 * i));
    } else {
        char tmp[24]; /* a 64-bit size in octal: up to 22 digits */
        snprintf(tmp, sizeof tmp, "%011llo", (unsigned long long)size);
        memcpy(h + 124, tmp, 11);
    }
    snprintf((char *)h + 136, 12, "%011o", 0);
    h[156] = (uint8_t)type;
    if (gnu_magic) memcpy(h + 257, "ustar  ", 8);
    else { memcpy(h + 257, "ustar", 6); memcpy(h + 263, "00", 2); }
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

/* One header block (see tu_tar_make_header), written. Returns its offset. */
static inline uint64_t tu_tar_header(tu_tar *t, const char *name, char type, uint64_t size, int size_mode,
                                     int gnu_magic)
{
    uint8_t h[512];
    tu_tar_make_header(h, name, NULL, type, size, size_mode, gnu_magic);
    const uint64_t at = t->off;
    tu_tar__write(t, h, sizeof h);
    return at;
}

/* A regular file member (the name must fit in 100 bytes; see the long-name
 * helpers). Returns the offset of its header; its data is at +512. */
static inline uint64_t tu_tar_file(tu_tar *t, const char *name, const void *data, size_t n)
{
    const uint64_t at = tu_tar_header(t, name, '0', n, TU_TAR_SIZE_OCTAL, 0);
    tu_tar__write(t, data, n);
    tu_tar__pad(t);
    return at;
}

/* A regular file member whose path is split into the POSIX ustar prefix
 * field (the folder, up to 155 bytes) and the name field (up to 100).
 * Returns the offset of its header; its data is at +512. */
static inline uint64_t tu_tar_file_prefixed(tu_tar *t, const char *prefix, const char *name, const void *data,
                                            size_t n)
{
    uint8_t h[512];
    tu_tar_make_header(h, name, prefix, '0', n, TU_TAR_SIZE_OCTAL, 0);
    const uint64_t at = t->off;
    tu_tar__write(t, h, sizeof h);
    tu_tar__write(t, data, n);
    tu_tar__pad(t);
    return at;
}

static inline uint64_t tu_tar_dir(tu_tar *t, const char *name)
{
    return tu_tar_header(t, name, '5', 0, TU_TAR_SIZE_OCTAL, 0);
}

/* A GNU 'L' record naming the next member. */
static inline void tu_tar_gnu_long_name(tu_tar *t, const char *name)
{
    const size_t n = strlen(name) + 1;
    tu_tar_header(t, "././@LongLink", 'L', n, TU_TAR_SIZE_OCTAL, 1);
    tu_tar__write(t, name, n);
    tu_tar__pad(t);
}

/* A GNU 'K' record: the link target of the next member. */
static inline void tu_tar_gnu_long_link(tu_tar *t, const char *target)
{
    const size_t n = strlen(target) + 1;
    tu_tar_header(t, "././@LongLink", 'K', n, TU_TAR_SIZE_OCTAL, 1);
    tu_tar__write(t, target, n);
    tu_tar__pad(t);
}

/* The header's checksum again, after a field was changed. */
static inline void tu_tar__checksum(uint8_t h[512])
{
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

/* A link member: type '1' (hard: target is an archived member's path) or
 * '2' (symbolic: target as the link holds it). At most 100 bytes of the
 * target are stored (a GNU 'K' record or a pax linkpath carries longer
 * ones). Returns the offset of its header. */
static inline uint64_t tu_tar_link(tu_tar *t, const char *name, char type, const char *target)
{
    uint8_t h[512];
    tu_tar_make_header(h, name, NULL, type, 0, TU_TAR_SIZE_OCTAL, 0);
    const size_t n = strlen(target);
    memcpy(h + 157, target, n < 100 ? n : 100);
    tu_tar__checksum(h);
    const uint64_t at = t->off;
    tu_tar__write(t, h, sizeof h);
    return at;
}

/* An old-GNU sparse member ('S', GNU magic) whose header says it has
 * `ext_blocks` extension headers (written after it, before the n bytes of
 * data, as GNU tar writes a file of more than 4 data regions). The sparse
 * map itself is left empty: a reader that does not expand sparse files
 * needs only where the member ends. Returns the offset of its header. */
static inline uint64_t tu_tar_gnu_sparse(tu_tar *t, const char *name, const void *data, size_t n, int ext_blocks)
{
    uint8_t h[512];
    tu_tar_make_header(h, name, NULL, 'S', n, TU_TAR_SIZE_OCTAL, 1);
    h[482] = ext_blocks > 0;
    tu_tar__checksum(h);
    const uint64_t at = t->off;
    tu_tar__write(t, h, sizeof h);
    for (int i = 0; i < ext_blocks; i++) {
        uint8_t ext[512];
        memset(ext, 0, sizeof ext);
        ext[504] = i + 1 < ext_blocks; /* another extension header follows */
        tu_tar__write(t, ext, sizeof ext);
    }
    tu_tar__write(t, data, n);
    tu_tar__pad(t);
    return at;
}

/* A pax 'x' header with records key=value (pass pairs; NULL ends). */
static inline void tu_tar_pax(tu_tar *t, const char *key, const char *value, const char *key2,
                              const char *value2)
{
    char body[8192];
    size_t len = 0;
    const char *k[2] = {key, key2}, *v[2] = {value, value2};
    for (int i = 0; i < 2 && k[i]; i++) {
        /* "<len> key=value\n" where len counts itself */
        size_t rest = strlen(k[i]) + strlen(v[i]) + 3, digits = 1, total;
        for (;;) {
            total = rest + digits;
            size_t d = 0;
            for (size_t x = total; x; x /= 10) d++;
            if (d == digits) break;
            digits = d;
        }
        len += (size_t)snprintf(body + len, sizeof body - len, "%zu %s=%s\n", total, k[i], v[i]);
    }
    tu_tar_header(t, "PaxHeaders/x", 'x', len, TU_TAR_SIZE_OCTAL, 0);
    tu_tar__write(t, body, len);
    tu_tar__pad(t);
}

/* Raw bytes as the data of the header just written (for headers written
 * by hand with tu_tar_header). */
static inline void tu_tar_data(tu_tar *t, const void *data, size_t n)
{
    tu_tar__write(t, data, n);
    tu_tar__pad(t);
}

/* Two zero blocks (unless end_blocks is 0), then closes the file. */
static inline void tu_tar_close(tu_tar *t, int end_blocks)
{
    static const uint8_t zero[1024];
    if (end_blocks) tu_tar__write(t, zero, sizeof zero);
    if (fclose(t->f) != 0) abort();
    t->f = NULL;
}

#endif /* COORDL_TU_TAR_H */
