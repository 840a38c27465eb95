/* SPDX-License-Identifier: MIT */
/* rand_state.h - counter-based randomness: the types rand.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; rand.h declares
 * the functions. */
#ifndef CDL_RAND_STATE_H
#define CDL_RAND_STATE_H
#include "platform.h"

enum { CDL_STREAM_PERM = 1, CDL_STREAM_CROP = 2, CDL_STREAM_SUBST = 3, CDL_STREAM_SHARD_ORDER = 4,
       CDL_STREAM_SHARD_SAMPLES = 5, CDL_STREAM_WINDOW_SHARDS = 6, CDL_STREAM_WINDOW_ITEMS = 7 };

typedef struct cdl__rng {
    uint64_t key, counter;
} cdl__rng;

#endif /* CDL_RAND_STATE_H */
