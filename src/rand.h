#ifndef CDL_RAND_H
#define CDL_RAND_H
#include "platform.h"

/* ===================================================================== */
/* 3. Counter-based randomness                                           */
/* Every random choice is a pure function of (seed, stream, epoch, item):*/
/* a keyed SplitMix64 hash, with a counter for draws within one sample.  */
/* Nothing depends on which thread, process or machine asks, so batches  */
/* are identical across thread counts and after seek (no replay).        */
/* ===================================================================== */

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
