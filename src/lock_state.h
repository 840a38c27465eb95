/* SPDX-License-Identifier: MIT */
/* lock_state.h - the stream's shared state and its lock: the types lock.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; lock.h declares
 * the functions. */
#ifndef CDL_LOCK_STATE_H
#define CDL_LOCK_STATE_H
#include "platform.h"

enum { CDL_SLOT_FREE = 0, CDL_SLOT_FILLING, CDL_SLOT_READY };

#define CDL_MAX_MEMBERS 32
/* Readers of cached bytes per member: its workers (0..255; a worker past
 * them reads cached items by their misses, from storage), the consumer's
 * helper, the MPI peer server and the API's own calls. Item ids fit in
 * 31 bits (source.c), so a record is 32 bits: 1 KiB a member. */
#define CDL_MAX_READERS (256 + 3)
#define CDL_READER_HELPER (CDL_MAX_READERS - 3)
#define CDL_READER_PEERS (CDL_MAX_READERS - 2)
#define CDL_READER_API (CDL_MAX_READERS - 1)

/* Row marks, one uint32 per row of a slot: free, done, or claimed by one
 * generation of one member: (generation mod 2^26) << 6 | (member + 1). A
 * mark names the generation, so a member that was dropped and resumed (or
 * whose index a late joiner took) is never mistaken for the mark's owner. */
#define CDL_ROW_FREE 0u
#define CDL_ROW_DONE 0xFFFFFFFFu
#define CDL_MARK_GEN_MASK 0x3FFFFFFull

/* A batch slot. Who holds it is a set of consumer bits: a READY slot is
 * handed to every member in need_mask; it is free again when all of them
 * have released it (done_mask). A single loader is a group of one. `gen`
 * changes at every assignment and every freeing, so a claim or a batch
 * handle taken under an older generation no longer refers to the slot. */
typedef struct cdl__slot {
    int state;
    uint64_t gen;
    uint32_t need_mask, taken_mask, done_mask;
    uint64_t epoch, pos;    /* first row = position pos of the rank's share */
    uint64_t index;         /* batch number within the epoch                */
    uint32_t n;             /* rows                                         */
    uint32_t out_w, out_h;  /* row geometry when the batch was assigned     */
    size_t row_bytes;
    uint32_t rows_claimed, rows_done;
    coordl_status status;   /* first error by row order                     */
    uint32_t err_row;
    size_t data_off, labels_off, ids_off, targets_off; /* in the ring arena */
    size_t nboxes_off;      /* boxes: each row's box count (uint32)        */
    /* last: what a ready batch's next and release read is in the lines
     * above (issue 23: after the trainer's step those lines are cold) */
    char errmsg[CDL_ERRMSG_MAX];
} cdl__slot;

/* A claimed row: everything its worker needs, copied under the lock, so
 * that it never reads the slot again before completing. */
typedef struct cdl__claim {
    uint32_t slot, row;
    uint64_t slot_gen;    /* the slot's assignment the row belongs to      */
    uint32_t mark;        /* this member generation's mark on the row      */
    uint64_t epoch, pos;  /* the row is position pos of the epoch's share  */
    uint32_t out_w, out_h; /* the slot's output size (coordl_set may change
                            * cfg's while the row is prepared)      */
    size_t row_bytes;
    size_t data_off, targets_off; /* the row's place in the ring arena    */
} cdl__claim;

/* A condition to wait on under the stream's mutex. A private loader uses
 * the pthread condition variable. A group uses the sequence word with a
 * futex instead: glibc's process-shared condition variables keep state
 * per waiter, and a waiter killed in the middle of a wait leaves a later
 * broadcast blocked forever; a futex word holds no such state. `parked`
 * counts the group's threads inside (or entering) the futex wait: a wake
 * with none parked makes no system call (issue 23). */
typedef struct cdl__cond {
    pthread_cond_t cv;
    _Atomic uint32_t seq;
    _Atomic uint32_t parked;
} cdl__cond;

/* A process in the (possibly one-member) group. Its identity is (index,
 * gen): gen changes when it joins and when it is dropped. */
typedef struct cdl__member {
    _Atomic uint64_t gen;
    _Atomic int32_t pid;           /* in its own PID namespace: messages only */
    _Atomic uint32_t died_holding_lock; /* set by the repair that found this
                                      generation dead holding the stream lock
                                      (maybe before it ever took `alive`);
                                      member threads drop it and say so */
    _Atomic uint64_t heartbeat_ns; /* CLOCK_MONOTONIC, by its member thread */
    uint64_t start_epoch;          /* first epoch it consumes (late join)   */
    pthread_mutex_t alive;         /* robust, process-shared: held by the
                                      member's thread for its whole life, so
                                      the kernel releases it (EOWNERDEAD) when
                                      the process dies, in any PID namespace */
    _Atomic uint32_t reading[CDL_MAX_READERS]; /* per reader of this member:
                                      the cache entry (id + 1) whose bytes it
                                      reads now, 0: none. The record is the
                                      reference (cache.c): a rewrite looks
                                      at the live members' records, so a
                                      dead member holds nothing */
} cdl__member;

/* The stream's shared state: what every worker and consumer of the group
 * agrees on, under one robust, process-shared mutex. Lives in the handle's
 * own memory, or in the group's shm object. Section 14 owns its
 * transitions. */
typedef struct cdl__stream {
    pthread_mutex_t mu;
    cdl__cond work_cv;        /* workers wait for a free slot or row       */
    cdl__cond ready_cv;       /* consumers wait for a ready slot           */
    cdl__cond idle_cv;        /* seek/set wait for in-flight rows          */
    int32_t paused;           /* seek/set in progress: no new claims       */
    int32_t broken;           /* the ring could not be remapped            */
    uint64_t claim_epoch, claim_pos, claim_index; /* next batch to assign  */
    uint64_t cut_epoch, cut_pos; /* the batch size took effect here        */
    uint32_t inflight;        /* rows claimed and not yet done             */
    uint32_t slots_free;      /* slots in state FREE: a release reads this,
                                 not every slot's line (issue 23)          */
    _Atomic uint32_t live_mask; /* members in the group                    */
    int32_t lock_owner;       /* member holding mu (-1: none or joining),  */
    uint64_t lock_owner_gen;  /*   and its generation                      */
    int32_t lock_tid;         /* COORDL_DEBUG: thread holding mu           */
    struct {                  /* a slot assignment in progress (slot + 1) */
        uint32_t slot, n;
        uint64_t epoch, pos, index;
    } assign;
    uint32_t started;         /* group_size members joined once            */
    cdl__member members[CDL_MAX_MEMBERS];
    _Atomic uint64_t cache_used;  /* MinIO slab bytes reserved             */
    _Atomic uint64_t cache_items;
    _Atomic uint64_t cache_src_bytes; /* the cached items' bytes as read   */
    _Atomic uint64_t cache_rst_items; /* of them, held as JPEG rewrites    */
    _Atomic uint64_t cache_plain_items; /* ... JPEGs that may still be
                                           rewritten (ce->jpeg PLAIN)       */
} cdl__stream;

#define CDL_PER_SLOT 0
#define CDL_PER_ROW 1

#endif /* CDL_LOCK_STATE_H */
