/* SPDX-License-Identifier: MIT */
/* stream_state.h - the ring and the stream state machine: the types stream.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; stream.h declares
 * the functions. */
#ifndef CDL_STREAM_STATE_H
#define CDL_STREAM_STATE_H
#include "platform.h"
#include "arena_state.h"
#include "lock_state.h"

/* What a worker made of its claimed row. */
typedef struct cdl__row_result {
    coordl_status status;
    uint64_t id;                   /* item used (a substitute for a bad one) */
    int32_t label;
    const cdl__u8 *staged;         /* group: the row, copied in on complete */
    const int32_t *staged_targets;
    const char *errmsg;
    uint32_t nboxes;               /* labels = COORDL_LABELS_BOXES: boxes kept */
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

#endif /* CDL_STREAM_STATE_H */
