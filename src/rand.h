/* SPDX-License-Identifier: MIT */
/* rand.h - counter-based randomness: the types and functions other modules use (see rand.c). */
#ifndef CDL_RAND_H
#define CDL_RAND_H
#include "platform.h"


enum { CDL_STREAM_PERM = 1, CDL_STREAM_CROP = 2, CDL_STREAM_SUBST = 3, CDL_STREAM_SHARD_ORDER = 4,
       CDL_STREAM_SHARD_SAMPLES = 5 };

typedef struct cdl__rng {
    uint64_t key, counter;
} cdl__rng;


/* ---- interface ---- */
CDL_PRIVATE uint64_t cdl__hash4(uint64_t seed, uint64_t stream, uint64_t a, uint64_t b);
CDL_PRIVATE uint64_t cdl__mix64(uint64_t z);
CDL_PRIVATE uint64_t cdl__rng_below(cdl__rng *r, uint64_t n);
CDL_PRIVATE cdl__rng cdl__rng_for(uint64_t seed, uint64_t stream, uint64_t epoch, uint64_t item);
CDL_PRIVATE uint64_t cdl__rng_next(cdl__rng *r);
CDL_PRIVATE double cdl__rng_uniform(cdl__rng *r);
#endif /* CDL_RAND_H */
