/* SPDX-License-Identifier: MIT */
/* source_state.h - token shards, the source dispatcher, reading one item's
 * bytes: the types source.c shares with other modules. handle.h composes
 * the states; source.h declares the functions. */
#ifndef CDL_SOURCE_STATE_H
#define CDL_SOURCE_STATE_H
#include "platform.h"
#include "remote_state.h"
#include "http_state.h"
#include "uring_state.h"

/* An item's read in the io_uring (cdl__read_item_start), in the caller's
 * memory from start to done: nothing is allocated per read. */
typedef struct cdl__item_aread {
    cdl__uring_req q;          /* first: the ring's request (done finds us) */
    const coordl *L;
    void *file;                /* the open file, closed when the read ends */
    uint64_t id;
    uint64_t want;             /* the item's bytes                          */
    int member;                /* a tar member (short = cut short), or a
                                  plain file (short = decode what is there) */
    cdl__remote_done_fn done;  /* the caller's, as a remote read's          */
    void *arg;
    /* a read through cfg.io_async (cdl__read_item_submit) */
    uint64_t off, asked;       /* where, and the bytes asked for            */
    int grew;                  /* the file is larger than indexed: the
                                  caller reads it again through cfg.io     */
} cdl__item_aread;

#endif /* CDL_SOURCE_STATE_H */
