/* SPDX-License-Identifier: MIT */
/* rand.h - counter-based randomness: the types and functions other modules use (see rand.c). */
#ifndef CDL_RAND_H
#define CDL_RAND_H
#include "platform.h"
#include "rand_state.h"

/* ---- interface ---- */
CDL_PRIVATE uint64_t cdl__hash4(uint64_t seed, uint64_t stream, uint64_t a, uint64_t b);
CDL_PRIVATE uint64_t cdl__mix64(uint64_t z);
CDL_PRIVATE uint64_t cdl__rng_below(cdl__rng *r, uint64_t n);
CDL_PRIVATE cdl__rng cdl__rng_for(uint64_t seed, uint64_t stream, uint64_t epoch, uint64_t item);
CDL_PRIVATE uint64_t cdl__rng_next(cdl__rng *r);
CDL_PRIVATE double cdl__rng_uniform(cdl__rng *r);
#endif /* CDL_RAND_H */
