/* SPDX-License-Identifier: MIT */
/* readahead_state.h - read-ahead in the known order: the types readahead.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; readahead.h declares
 * the functions. */
#ifndef CDL_READAHEAD_STATE_H
#define CDL_READAHEAD_STATE_H
#include "platform.h"
#include "uring_state.h"
#include "source_state.h"

enum { CDL_RA_FREE = 0, CDL_RA_READING, CDL_RA_DONE, CDL_RA_FAILED, CDL_RA_SKIPPED, CDL_RA_TAKEN };

typedef struct cdl__ra_entry {
    struct cdl__readahead *ra; /* its read-ahead (an asynchronous read's completion finds it) */
    uint64_t t0;               /* when its read started                   */
    int state;
    int stale;              /* its generation was restarted: free it when done */
    int user_read;          /* in flight through the caller's cfg.io_async */
    uint64_t gen;
    uint64_t epoch, pos, id;
    uint64_t start, end;    /* its arena bytes: [start, end) in ring space    */
    uint64_t len;           /* bytes read                                     */
    uint64_t storage_bytes; /* as the reader delivered them                   */
    coordl_status status;
    char err[CDL_ERRMSG_MAX];
    cdl__item_aread aread;  /* its read while in the io_uring             */
} cdl__ra_entry;

typedef struct cdl__readahead cdl__readahead;
struct cdl__readahead {
    coordl *L;
    pthread_mutex_t mu;
    pthread_mutex_t submit_mu; /* around a caller's io_async read: one at a time */
    pthread_cond_t room_cv; /* I/O threads: an entry or arena space freed, a restart */
    pthread_cond_t done_cv; /* workers: a read finished                       */
    int stop;
    int paused;   /* a seek or set is under way: no new reads */
    uint64_t gen;
    /* the next position to read ahead, and the first not yet claimed */
    uint64_t next_epoch, next_pos, front_epoch, front_pos;
    /* what cdl__epoch_end needs, as of the last restart */
    uint64_t batch_size, share, cut_epoch, cut_pos;
    int drop_last;
    /* entries: a ring in position order; [tail, head) are live */
    cdl__ra_entry *e;
    uint32_t depth;
    uint64_t head, tail;
    /* the arena: a byte ring; [atail, ahead) in use (monotonic counters) */
    cdl__u8 *base;
    size_t bytes, map_bytes; /* the ring's size (readahead_bytes), mapped */
    uint64_t ahead, atail;
    pthread_t *threads;     /* max_threads of them, started as needed     */
    int nthreads, started;
    int max_threads;        /* readahead_threads: reads in flight at most */
    int reading;            /* I/O threads inside the reader now          */
    int room_waiters; /* I/O threads waiting for entries or arena space   */
    uint64_t async_reads; /* reads in flight on the remote event loop or
                             the io_uring                                 */
    uint64_t user_reads;  /* of them, through the caller's cfg.io_async */
    uint64_t max_user_reads; /* most of those at once                     */
    uint64_t user_last_ns; /* when the last one started (or, at close,
                              ended): coordl_close's bound               */
    int closing;          /* coordl_close: workers stop waiting for reads */
    uint64_t user_timeouts; /* io_async reads a worker stopped waiting for
                             (io_timeout_ms) and read through cfg.io     */
    int abandoned;        /* coordl_close gave up waiting for them: R and
                             the arena are left to their late dones     */
    cdl__uring *uring;    /* local reads in flight (NULL: I/O threads)    */
    uint64_t max_reading; /* most I/O threads inside the reader at once   */
    /* counters of the I/O threads (coordl_stats readahead_*) */
    uint64_t reads, read_ns, skips;
};

#endif /* CDL_READAHEAD_STATE_H */
