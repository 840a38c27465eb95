/* SPDX-License-Identifier: MIT */
/*
 * io.c - the storage seam (coordl_io).
 *
 * Every byte read from storage goes through the handle's coordl_io
 * (cdl__io_open / cdl__io_read): the built-in POSIX reader, or the
 * trainer's. Folder listings (ImageFolder, shard folders, globs) use
 * readdir/glob. The index turns the source into items (path, size,
 * label). Paths live in one string arena addressed by offsets (no
 * malloc per item); the item array is plain. ImageFolder: classes
 * sorted by name are labels, files sorted by relative path. List file:
 * "path<TAB>label" per line. Tar shards: see "WebDataset tar shards".
 *
 * Owns:  L->io: the reader every storage access goes through (the built-in
 *        POSIX one, or the caller's); and the line parser list files share
 * Lock:  none: readers are called concurrently from any thread (coordl.h
 *        documents it); L->io is fixed at open
 * Calls: status, remote (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */
#include "platform.h"
#include "io_state.h"
#include "io.h"
#include "status.h"
#include "remote.h"
#include "handle.h"

/* ---- the built-in POSIX reader ------------------------------------------
 * Only a regular file is read: a FIFO would block the open (and then every
 * read) until some writer appears, and a device may never end. O_NONBLOCK
 * makes the open itself return at once whatever the path names; fstat then
 * refuses anything but a regular file (reads of a regular file ignore
 * O_NONBLOCK). Symbolic links are followed (datasets are often trees of
 * links); a loop fails the open with ELOOP. A handle is the descriptor
 * shifted left with the low bit set (never NULL, and never the even address
 * of a remote file: cdl__io_is_remote): nothing is allocated per open. *why
 * gets a static description when the refusal is ours, not an errno's. */
CDL_PRIVATE int cdl__posix_open_why(const char *path, void **file, uint64_t *size, const char **why) {
    *why = NULL;
    int fd;
    do fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return -errno;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        const int e = errno;
        close(fd);
        return -e;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        *why = S_ISFIFO(sb.st_mode)  ? "not a regular file (it is a FIFO)"
               : S_ISDIR(sb.st_mode) ? "not a regular file (it is a directory)"
               : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "not a regular file (it is a device)"
               : S_ISSOCK(sb.st_mode) ? "not a regular file (it is a socket)"
                                      : "not a regular file";
        return S_ISDIR(sb.st_mode) ? -EISDIR : -EINVAL;
    }
    *file = (void *)(((uintptr_t)fd << 1) | 1u);
    *size = (uint64_t)sb.st_size;
    return 0;
}

CDL_PRIVATE int cdl__posix_fd(void *file) { return (int)((uintptr_t)file >> 1); }

static int cdl__posix_open(void *user, const char *path, void **file, uint64_t *size) {
    const char *why;
    (void)user;
    return cdl__posix_open_why(path, file, size, &why);
}

/* pread until len bytes or the end of the file; EINTR and short reads are
 * looped over here, so the caller's loop sees them only from other
 * readers. */
static int64_t cdl__posix_read_at(void *user, void *file, void *buf, uint64_t len, uint64_t offset) {
    const int fd = cdl__posix_fd(file);
    uint64_t got = 0;
    (void)user;
    if (offset > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - offset) return -EOVERFLOW;
    while (got < len) {
        const size_t want = len - got > (1u << 30) ? (size_t)1 << 30 : (size_t)(len - got);
        const ssize_t r = pread(fd, (cdl__u8 *)buf + got, want, (off_t)(offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -errno;
        if (r == 0) break;
        got += (uint64_t)r;
    }
    return (int64_t)got;
}

CDL_PRIVATE void cdl__posix_close(void *user, void *file) {
    (void)user;
    close(cdl__posix_fd(file));
}

CDL_PRIVATE const coordl_io cdl__posix_io = {NULL, cdl__posix_open, cdl__posix_read_at, cdl__posix_close};

/* ---- reading through the handle's reader ---------------------------------
 * A custom reader is trusted with nothing: its return values are checked,
 * and what it says becomes an error naming the file, never a crash. */
#define CDL_IO_EINTR_RETRIES 100 /* a reader returning -EINTR forever must not hang us */

/* Remote sources: the built-in reader reads a path that is an http(s)://
 * or s3:// URL through remote.c (docs/remote.md); a caller's reader is
 * given every path as it is. A remote file is an allocation (even address),
 * a POSIX one an odd number. */
static int cdl__io_is_remote(const coordl *L, const void *file) {
    return L->io == &cdl__posix_io && ((uintptr_t)file & 1u) == 0;
}

/* Marks a file read in order from start to end in small pieces (a tar
 * scan): a remote one then reads ahead in large ranged requests. */
CDL_PRIVATE void cdl__io_sequential(const coordl *L, void *file) {
    if (cdl__io_is_remote(L, file)) cdl__remote_sequential(file);
}

/* The ETag of an open remote file, "" for any other (a saved index
 * records a local shard's mtime instead). */
CDL_PRIVATE void cdl__io_etag(const coordl *L, const void *file, char *out, size_t cap) {
    if (cdl__io_is_remote(L, file)) cdl__remote_etag(file, out, cap);
    else if (cap) out[0] = '\0';
}

/* Opens path. On failure: COORDL_ERR_IO (COORDL_ERR_UNSUPPORTED for a URL
 * this build cannot read), and the reason in why (not the path: callers
 * name the file as they need; a URL's reason may name it). */
CDL_PRIVATE coordl_status cdl__io_open(const coordl *L, const char *path, void **file, uint64_t *size,
                                  char *why, size_t cap) {
    const coordl_io *io = L->io;
    const char *ours = NULL;
    void *f = NULL;
    uint64_t sz = 0;
    int r;
    if (io == &cdl__posix_io && cdl__remote_is_url(path)) return cdl__remote_open(L, path, file, size, why, cap);
    for (int tries = 0;; tries++) {
        r = io == &cdl__posix_io ? cdl__posix_open_why(path, &f, &sz, &ours) : io->open(io->user, path, &f, &sz);
        if (r != -EINTR || tries >= CDL_IO_EINTR_RETRIES) break;
    }
    if (r == 0) {
        *file = f;
        *size = sz;
        return COORDL_OK;
    }
    if (ours) snprintf(why, cap, "%s", ours);
    else if (r < 0 && r > -4096) snprintf(why, cap, "%s", strerror(-r));
    else snprintf(why, cap, "the reader's open returned %d (not 0 or -errno)", r);
    return COORDL_ERR_IO;
}

CDL_PRIVATE void cdl__io_close(const coordl *L, void *file) {
    if (cdl__io_is_remote(L, file)) cdl__remote_close(L, file);
    else L->io->close(L->io->user, file);
}

/* Reads len bytes at offset off of an open file, looping over short reads
 * and EINTR; *got receives the bytes read (fewer than len: the file ended
 * there). A reader error, or a count it cannot have read, is
 * COORDL_ERR_IO with "<path>: ..." in err. */
CDL_PRIVATE coordl_status cdl__io_read(const coordl *L, void *file, const char *path, void *buf, uint64_t len,
                                  uint64_t off, uint64_t *got, char *err, size_t cap) {
    const coordl_io *io = L->io;
    uint64_t done = 0;
    int eintr = 0;
    *got = 0;
    if (cdl__io_is_remote(L, file)) return cdl__remote_read(L, file, buf, len, off, got, err, cap);
    while (done < len) {
        const int64_t r = io->read_at(io->user, file, (cdl__u8 *)buf + done, len - done, off + done);
        if (r == -EINTR && ++eintr <= CDL_IO_EINTR_RETRIES) continue;
        if (r < 0 && r > -4096) {
            snprintf(err, cap, "%s: read of %llu bytes at offset %llu failed: %s", path,
                     (unsigned long long)(len - done), (unsigned long long)(off + done), strerror((int)-r));
            return COORDL_ERR_IO;
        }
        if (r < 0 || (uint64_t)r > len - done) {
            snprintf(err, cap, "%s: the reader returned %lld for a read of %llu bytes at offset %llu (not a "
                     "byte count up to the length, nor -errno)", path, (long long)r,
                     (unsigned long long)(len - done), (unsigned long long)(off + done));
            return COORDL_ERR_IO;
        }
        if (r == 0) break;
        done += (uint64_t)r;
        eintr = 0;
    }
    *got = done;
    return COORDL_OK;
}

/* Closes the kept file; the block's memory stays for the next one, unless
 * free_block (the thread ends). */
CDL_PRIVATE void cdl__kept_close(const coordl *L, cdl__kept_file *k) {
    if (k->f) cdl__io_close(L, k->f);
    k->f = NULL;
    k->path = NULL;
    k->size = 0;
    k->block_off = k->block_len = 0;
}

CDL_PRIVATE void cdl__kept_free(const coordl *L, cdl__kept_file *k) {
    cdl__kept_close(L, k);
    cdl__free(L, k->block);
    k->block = NULL;
    k->block_cap = 0;
}

/* A whole (text) file through the reader, NUL-terminated, into memory from
 * the allocator (list files). Open-time errors go to cdl__open_fail. */
CDL_PRIVATE coordl_status cdl__io_slurp(coordl *L, const char *path, const char *what, char **out, size_t *len) {
    char err[CDL_ERRMSG_MAX];
    void *f;
    uint64_t size, got = 0;
    *out = NULL;
    *len = 0;
    coordl_status rc = cdl__io_open(L, path, &f, &size, err, sizeof err);
    if (rc != COORDL_OK) return cdl__open_fail(rc, "source: cannot open %s %s: %s", what, path, err);
    if (size >= SIZE_MAX / 2) {
        cdl__io_close(L, f);
        return cdl__open_fail(COORDL_ERR_IO, "source: %s %s: size %llu is not plausible", what, path,
                              (unsigned long long)size);
    }
    char *buf = cdl__malloc(L, (size_t)size + 1);
    if (!buf) {
        cdl__io_close(L, f);
        return cdl__open_fail(COORDL_ERR_NOMEM, "source: out of memory for %s %s (%llu bytes)", what, path,
                              (unsigned long long)size);
    }
    rc = cdl__io_read(L, f, path, buf, size, 0, &got, err, sizeof err);
    cdl__io_close(L, f);
    if (rc != COORDL_OK) {
        cdl__free(L, buf);
        return cdl__open_fail(rc, "source: %s %s", what, err);
    }
    buf[got] = '\0';
    *out = buf;
    *len = (size_t)got;
    return COORDL_OK;
}

/* The one parser of list files (item lists, token-shard lists, tar-shard
 * lists), so they share one set of rules: a line ends at LF, trailing CRs
 * are dropped (CRLF files), empty lines are skipped, lines are numbered
 * from 1 counting every line, and a line holding a NUL byte is refused
 * (it would otherwise be cut short at the NUL and name another file). The
 * text is never modified. Returns 1 with the next non-empty line, 0 at the
 * end, -1 for a line holding a NUL (out->lineno says which). */
CDL_PRIVATE int cdl__list_next(const char *text, size_t len, size_t *pos, cdl__list_line *out) {
    while (*pos < len) {
        const char *line = text + *pos;
        const char *nl = memchr(line, '\n', len - *pos);
        size_t n = nl ? (size_t)(nl - line) : len - *pos;
        *pos += n + (nl != NULL);
        out->lineno++;
        while (n > 0 && line[n - 1] == '\r') n--;
        if (n == 0) continue;
        out->text = line;
        out->len = n;
        return memchr(line, '\0', n) ? -1 : 1;
    }
    return 0;
}

/* The path a list line names, NUL-terminated in *buf (grown): relative to
 * the list file's folder (or URL) unless absolute or a URL. Its length in
 * *path_len; 0 when memory runs out. */
CDL_PRIVATE int cdl__list_path(const coordl *L, const char *list, const char *name, size_t n, char **buf, size_t *cap,
                               size_t *path_len) {
    const char *slash = strrchr(list, '/');
    char scheme[9];
    const size_t k = n < sizeof scheme - 1 ? n : sizeof scheme - 1;
    memcpy(scheme, name, k);
    scheme[k] = '\0';
    const size_t dir_len = name[0] == '/' || !slash || cdl__remote_is_url(scheme) ? 0 : (size_t)(slash - list);
    if (!cdl__reserve(L, (void **)buf, cap, dir_len + n + 2)) return 0;
    size_t o = 0;
    if (dir_len > 0) {
        memcpy(*buf, list, dir_len);
        (*buf)[dir_len] = '/';
        o = dir_len + 1;
    }
    memcpy(*buf + o, name, n);
    (*buf)[o + n] = '\0';
    *path_len = o + n;
    return 1;
}

