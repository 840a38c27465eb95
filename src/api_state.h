/* SPDX-License-Identifier: MIT */
/* api_state.h - the public API: the types api.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; api.h declares
 * the functions. */
#ifndef CDL_API_STATE_H
#define CDL_API_STATE_H
#include "platform.h"

/* The consumer: the trainer's thread's position and timing (only the
 * consumer thread writes them; stall_tail_ns is read by stats). */
typedef struct cdl__consumer {
    uint32_t held;            /* batches this consumer holds               */
    uint64_t cur_epoch, cur_pos, cur_index; /* next batch to hand out      */
    uint32_t next_slot;       /* where that batch most likely is: the slot
                                 after the last taken (cdl__stream_find) */
    uint64_t last_return_ns;  /* when the consumer's last coordl call ended */
    _Atomic uint64_t stall_tail_ns; /* its time after the last counted point */
    uint64_t stall_tail_epoch;
} cdl__consumer;

/* The API's one reader record on the MinIO cache (CDL_READER_API): calls
 * that may run on any thread (coordl_sample_transform) take mu while they
 * read a cache entry in place, so two of them never share the record. */
typedef struct cdl__api_reader {
    pthread_mutex_t mu;
} cdl__api_reader;

#endif /* CDL_API_STATE_H */
