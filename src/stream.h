/* SPDX-License-Identifier: MIT */
/* stream.h - the ring and the stream state machine: the types and functions other modules use (see stream.c). */
#ifndef CDL_STREAM_H
#define CDL_STREAM_H
#include "platform.h"
#include "status.h"
#include "arena.h"
#include "lock.h"

/* A claimed row: everything its worker needs, copied under the lock, so
 * that it never reads the slot again before completing. */
typedef struct cdl__claim {
    uint32_t slot, row;
    uint64_t slot_gen;    /* the slot's assignment the row belongs to      */
    uint32_t mark;        /* this member generation's mark on the row      */
    uint64_t epoch, pos;  /* the row is position pos of the epoch's share  */
    size_t row_bytes;
    size_t data_off, targets_off; /* the row's place in the ring arena    */
} cdl__claim;

/* What a worker made of its claimed row. */
typedef struct cdl__row_result {
    coordl_status status;
    uint64_t id;                   /* item used (a substitute for a bad one) */
    int32_t label;
    const cdl__u8 *staged;         /* group: the row, copied in on complete */
    const int32_t *staged_targets;
    const char *errmsg;
} cdl__row_result;


/* The ring: the arena and every per-slot array (CDL_RING_ARRAYS), sized
 * by cdl__ring_alloc. In a group the arena and the shared arrays are the
 * shm object's. Slots change under the stream's lock. */
typedef struct cdl__ring {
    cdl__arena arena;
    cdl__slot *slots;
    uint32_t *row_state;   /* slot s, row r: row_state[s * slot_rows_cap + r] */
    uint32_t nslots;
} cdl__ring;

/* ---- interface ---- */
CDL_PRIVATE void cdl__stream_repair(coordl *L, int dead, uint64_t dead_gen);
CDL_PRIVATE int cdl__stream_claim(coordl *L, cdl__claim *c, int idle);
CDL_PRIVATE void cdl__stream_complete(coordl *L, const cdl__claim *c, const cdl__counters *counters, const cdl__row_result *r);
CDL_PRIVATE int cdl__member_current(const coordl *L);
CDL_PRIVATE int cdl__member_is(const cdl__stream *S, int m, uint64_t gen);
CDL_PRIVATE void cdl__ring_layout(coordl *L);
CDL_PRIVATE size_t cdl__ring_slot_bytes(const coordl *L, uint32_t rows_cap, size_t data_cap, size_t *data, size_t *labels, size_t *ids);
#ifdef COORDL_DEBUG
CDL_PRIVATE void cdl__stream_check(const coordl *L, const char *transition);
#else
#define cdl__stream_check(L, transition) ((void)0)
#endif
CDL_PRIVATE void cdl__stream_drop_member(coordl *L, int m, uint64_t gen);
CDL_PRIVATE coordl_status cdl__stream_init(cdl__stream *S, int pshared);
CDL_PRIVATE cdl__epoch_counters *cdl__epoch_entry(coordl *L, uint64_t epoch);
CDL_PRIVATE coordl_status cdl__ring_alloc(coordl *L, uint32_t rows_cap, size_t data_cap);
CDL_PRIVATE void cdl__ring_free(coordl *L);
CDL_PRIVATE int cdl__stream_find(const coordl *L);
CDL_PRIVATE void cdl__stream_pause(coordl *L);
CDL_PRIVATE int cdl__stream_release(coordl *L, const coordl_batch *b);
CDL_PRIVATE void cdl__stream_restart(coordl *L);
CDL_PRIVATE coordl_status cdl__stream_take(coordl *L, uint32_t s, coordl_batch *out);
CDL_PRIVATE int cdl__stream_try_claim(coordl *L, cdl__claim *c);
#endif /* CDL_STREAM_H */
