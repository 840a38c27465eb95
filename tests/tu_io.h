/*
 * tu_io.h - a test reader (coordl_io) for the coordl tests: it wraps the
 * built-in POSIX reader (coordl_io_posix()), counts what goes through it,
 * can serve files from memory, and injects faults as SQLite's test VFS
 * does: an errno on the k-th read or on every read of a path, short reads,
 * EINTR, latency and latency spikes, and garbage return values.
 *
 * Header-only (static functions): include it in the test that needs it.
 * Every counter and fault setting is safe to use from coordl's threads
 * (the reader's callbacks run on workers and read-ahead threads at once).
 *
 *     tu_io io;
 *     tu_io_init(&io);
 *     io.fail_read_nth = 3; io.fail_read_errno = EIO;   // 3rd read_at: -EIO
 *     cfg.io = &io.table;
 *     ...
 *     tu_io_destroy(&io);
 */
#ifndef COORDL_TU_IO_H
#define COORDL_TU_IO_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coordl.h"

typedef struct tu_io_mem_file {
    char *path;
    uint8_t *data;
    size_t len;
} tu_io_mem_file;

typedef struct tu_io {
    coordl_io table; /* pass &io.table as cfg.io */

    /* counters */
    atomic_long opens, closes, reads, open_now, max_open_now;
    atomic_long open_calls; /* every call to open, EINTR and failures too */
    atomic_ullong bytes; /* bytes returned by read_at */

    /* faults; 0 / NULL = off. Set them before use; to switch them on only
     * later (after coordl_open has indexed, say), set `disarmed` to 1
     * first and back to 0 when they should start. */
    atomic_int disarmed;
    const char *fail_open_path; /* opens of a path containing this ...  */
    int fail_open_errno;        /* ... return -this (default ENOENT)    */
    long fail_read_nth;         /* the nth read_at call (1-based) ...   */
    int fail_read_errno;        /* ... returns -this (default EIO)      */
    const char *fail_read_path; /* every read_at of a path containing
                                   this returns -fail_read_errno        */
    int fail_read_at_start;     /* with fail_read_path: only reads at
                                   offset 0 fail (a tar scan's first
                                   header; an item's bytes come later)  */
    size_t max_chunk;           /* short reads: at most this per call   */
    int eintr_every;            /* every nth read_at call returns -EINTR
                                   (before reading anything)           */
    int open_eintr_every;       /* same for open                        */
    unsigned delay_us;          /* every read_at sleeps this long       */
    long spike_nth;             /* the nth read_at call sleeps ...      */
    unsigned spike_ms;          /* ... this long first                  */
    const char *garbage_path;   /* read_at of a matching path returns   */
    int64_t garbage_ret;        /* this instead of reading              */
    const char *garbage_size_path; /* open of a matching path reports  */
    uint64_t garbage_size;         /* this size                        */
    int open_ret;               /* non-zero: every open returns this    */

    /* what was injected: count, and the path of the first fault */
    atomic_long faults;
    pthread_mutex_t mu;
    char first_fault_path[4096];

    /* files served from memory (tu_io_add_mem); with mem_only, a path not
     * among them is -ENOENT (the disk is never touched) */
    tu_io_mem_file *mem;
    size_t nmem;
    int mem_only;
} tu_io;

typedef struct tu_io_file {
    void *inner;  /* the POSIX reader's handle, or NULL for a memory file */
    const tu_io_mem_file *mem;
    char path[];  /* as opened */
} tu_io_file;

static inline int tu_io__match(const char *path, const char *needle)
{
    return needle && needle[0] && strstr(path, needle) != NULL;
}

static inline void tu_io__fault(tu_io *io, const char *path)
{
    if (atomic_fetch_add(&io->faults, 1) == 0) {
        pthread_mutex_lock(&io->mu);
        snprintf(io->first_fault_path, sizeof io->first_fault_path, "%s", path);
        pthread_mutex_unlock(&io->mu);
    }
}

static inline void tu_io__sleep_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static inline int tu_io__open(void *user, const char *path, void **file, uint64_t *size)
{
    tu_io *io = user;
    const long calls = atomic_fetch_add(&io->open_calls, 1) + 1;
    const int armed = !atomic_load(&io->disarmed);
    atomic_fetch_add(&io->opens, 1);
    if (armed && io->open_eintr_every > 0 && calls % io->open_eintr_every == 0) {
        atomic_fetch_sub(&io->opens, 1); /* not an open: retried */
        return -EINTR;
    }
    if (armed && io->open_ret) {
        tu_io__fault(io, path);
        atomic_fetch_sub(&io->opens, 1);
        return io->open_ret;
    }
    if (armed && tu_io__match(path, io->fail_open_path)) {
        tu_io__fault(io, path);
        atomic_fetch_sub(&io->opens, 1);
        return -(io->fail_open_errno ? io->fail_open_errno : ENOENT);
    }
    const size_t plen = strlen(path);
    tu_io_file *f = malloc(sizeof *f + plen + 1);
    if (!f) {
        atomic_fetch_sub(&io->opens, 1);
        return -ENOMEM;
    }
    memcpy(f->path, path, plen + 1);
    f->inner = NULL;
    f->mem = NULL;
    for (size_t i = 0; i < io->nmem; i++)
        if (strcmp(io->mem[i].path, path) == 0) f->mem = &io->mem[i];
    if (f->mem) {
        *size = f->mem->len;
    } else if (io->mem_only) {
        free(f);
        atomic_fetch_sub(&io->opens, 1);
        return -ENOENT;
    } else {
        const coordl_io *posix = coordl_io_posix();
        const int r = posix->open(posix->user, path, &f->inner, size);
        if (r != 0) {
            free(f);
            atomic_fetch_sub(&io->opens, 1);
            return r;
        }
    }
    if (armed && tu_io__match(path, io->garbage_size_path)) {
        tu_io__fault(io, path);
        *size = io->garbage_size;
    }
    const long now = atomic_fetch_add(&io->open_now, 1) + 1;
    long seen = atomic_load(&io->max_open_now);
    while (now > seen && !atomic_compare_exchange_weak(&io->max_open_now, &seen, now)) {
    }
    *file = f;
    return 0;
}

static inline int64_t tu_io__read_at(void *user, void *file, void *buf, uint64_t len, uint64_t offset)
{
    tu_io *io = user;
    tu_io_file *f = file;
    const long n = atomic_fetch_add(&io->reads, 1) + 1;
    const int armed = !atomic_load(&io->disarmed);
    if (armed && io->spike_nth > 0 && n == io->spike_nth) tu_io__sleep_us((uint64_t)io->spike_ms * 1000u);
    if (io->delay_us) tu_io__sleep_us(io->delay_us);
    if (armed && io->eintr_every > 0 && n % io->eintr_every == 0) return -EINTR;
    if (armed && ((io->fail_read_nth > 0 && n == io->fail_read_nth) ||
                  (tu_io__match(f->path, io->fail_read_path) && (!io->fail_read_at_start || offset == 0)))) {
        tu_io__fault(io, f->path);
        return -(io->fail_read_errno ? io->fail_read_errno : EIO);
    }
    if (armed && tu_io__match(f->path, io->garbage_path)) {
        tu_io__fault(io, f->path);
        return io->garbage_ret;
    }
    if (io->max_chunk && len > io->max_chunk) len = io->max_chunk;
    int64_t got;
    if (f->mem) {
        if (offset >= f->mem->len) {
            got = 0;
        } else {
            const uint64_t left = f->mem->len - offset;
            got = (int64_t)(len < left ? len : left);
            memcpy(buf, f->mem->data + offset, (size_t)got);
        }
    } else {
        const coordl_io *posix = coordl_io_posix();
        got = posix->read_at(posix->user, f->inner, buf, len, offset);
    }
    if (got > 0) atomic_fetch_add(&io->bytes, (unsigned long long)got);
    return got;
}

static inline void tu_io__close(void *user, void *file)
{
    tu_io *io = user;
    tu_io_file *f = file;
    if (f->inner) coordl_io_posix()->close(NULL, f->inner);
    free(f);
    atomic_fetch_add(&io->closes, 1);
    atomic_fetch_sub(&io->open_now, 1);
}

static inline void tu_io_init(tu_io *io)
{
    memset(io, 0, sizeof *io);
    io->table.user = io;
    io->table.open = tu_io__open;
    io->table.read_at = tu_io__read_at;
    io->table.close = tu_io__close;
    pthread_mutex_init(&io->mu, NULL);
}

/* Clears the counters and the record of injected faults (not the fault
 * settings, not the memory files). */
static inline void tu_io_reset_counts(tu_io *io)
{
    atomic_store(&io->opens, 0);
    atomic_store(&io->open_calls, 0);
    atomic_store(&io->closes, 0);
    atomic_store(&io->reads, 0);
    atomic_store(&io->max_open_now, atomic_load(&io->open_now));
    atomic_store(&io->bytes, 0);
    atomic_store(&io->faults, 0);
    io->first_fault_path[0] = '\0';
}

/* Serves `path` from a copy of data[0..n). Call before the loader opens. */
static inline void tu_io_add_mem(tu_io *io, const char *path, const void *data, size_t n)
{
    io->mem = realloc(io->mem, (io->nmem + 1) * sizeof *io->mem);
    tu_io_mem_file *m = &io->mem[io->nmem++];
    m->path = strdup(path);
    m->data = malloc(n ? n : 1);
    memcpy(m->data, data, n);
    m->len = n;
}

static inline void tu_io_destroy(tu_io *io)
{
    for (size_t i = 0; i < io->nmem; i++) {
        free(io->mem[i].path);
        free(io->mem[i].data);
    }
    free(io->mem);
    pthread_mutex_destroy(&io->mu);
}

#endif /* COORDL_TU_IO_H */
