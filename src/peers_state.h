/* SPDX-License-Identifier: MIT */
/* peers_state.h - the partitioned cache over MPI: the types peers.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; peers.h declares
 * the functions. */
#ifndef CDL_PEERS_STATE_H
#define CDL_PEERS_STATE_H
#include "platform.h"
#include "lock_state.h"

#ifdef COORDL_MPI
#define CDL_TAG_REQ 7701
#define CDL_TAG_RESP 8192 /* + the requester's slot (< 1024): the reply is received in place */

enum { CDL_REMOTE_NONE = 0, CDL_REMOTE_WAIT, CDL_REMOTE_ARRIVED, CDL_REMOTE_FAILED };

/* Peer bookkeeping of one row of a slot. */
typedef struct cdl__remote_row {
    uint64_t id;       /* the item asked for                               */
    uint32_t off, len; /* ARRIVED: its bytes in the slot's reply buffer    */
    uint8_t state;
} cdl__remote_row;

/* What this rank asked one peer for one slot. */
typedef struct cdl__remote_ask {
    uint64_t id;        /* the request awaiting its reply; 0: none         */
    uint32_t first, n;  /* its rows: asked[first .. first + n), in order   */
} cdl__remote_ask;

/* Peer bookkeeping of one ring slot (private to this rank). Its rows'
 * state is the slot's part of peer_rows; the reply to the k-th item of a
 * request belongs to row peer_asked[first + k] (the slot's part), recorded
 * when the request was built, so filing a reply is linear in its items. */
typedef struct cdl__remote {
    uint64_t gen;          /* the slot's generation the requests were for */
    int requested;
    uint64_t request_ns;
    cdl__u8 *buf;          /* replies, received in place                 */
    size_t cap, used;
    cdl__remote_ask *ask;  /* world peers (allocated by cdl__peer_start) */
} cdl__remote;

/* The ring allocator (stream.c) sizes, grows and frees these with the
 * ring, so they always cover slot_rows_cap rows of every slot (coordl_set
 * growing the batch cannot outgrow them); grown arrays are zeroed. */
#define CDL_RING_ARRAYS_PEER(X)                     \
    X(peers, remote, cdl__remote, CDL_PER_SLOT, 0)  \
    X(peers, rows, cdl__remote_row, CDL_PER_ROW, 0) \
    X(peers, asked, uint32_t, CDL_PER_ROW, 0)

#endif /* COORDL_MPI */
#ifdef COORDL_MPI
/* A send buffer: handed to MPI_Isend, reused once MPI is done with it, so
 * the steady state allocates nothing per batch. */
enum { CDL_SEND_FREE = 0, CDL_SEND_FILLING, CDL_SEND_INFLIGHT };
typedef struct cdl__peer_send {
    MPI_Request req;
    cdl__u8 *buf;
    size_t cap;
    int state;
} cdl__peer_send;
#endif /* COORDL_MPI */

/* The peers module's state (distributed builds; a plain build keeps the
 * first fields at zero). The per-slot and per-row arrays are ring arrays
 * (CDL_RING_ARRAYS_PEER): the ring allocator sizes them with the ring.
 * Guarded by the stream's lock, but for admit_epoch (atomic) and
 * map_ready (stored with release: the I/O threads read it unlocked). */
typedef struct cdl__peers {
    int comm_set, map_ready, closing, thread_started;
    int consumer_started;         /* the trainer has asked for a batch:
                                     until then a coordl_seek (a resume)
                                     may still move the admission epoch,
                                     so the map exchange waits for it     */
    _Atomic uint64_t admit_epoch; /* whose share is cached; closed
                                     (UINT64_MAX) by the map exchange     */
    int node_rank, node_ranks;    /* MPI ranks on this node (placement)   */
#ifdef COORDL_MPI
    MPI_Comm comm;
    pthread_t thread;
    int32_t *owner;               /* per item: the rank caching it, -1    */
    struct cdl__remote *remote;   /* per slot                             */
    struct cdl__remote_row *rows; /* slot s, row r: [s * slot_rows_cap + r] */
    uint32_t *asked;              /* same layout: rows grouped by peer    */
    struct cdl__peer_send *sends; /* send buffers, reused                 */
    size_t nsends, sends_cap;
    uint64_t request_seq;
    uint64_t outstanding;         /* requests sent, replies not yet in    */
    cdl__u8 *rx;                  /* the peer thread's request buffer     */
    size_t rxcap;
#endif
} cdl__peers;

#endif /* CDL_PEERS_STATE_H */
