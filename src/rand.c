/* SPDX-License-Identifier: MIT */
/*
 * rand.c - counter-based randomness.
 *
 * Every random choice is a pure function of (seed, stream, epoch, item):
 * a keyed SplitMix64 hash, with a counter for draws within one sample.
 * Nothing depends on which thread, process or machine asks, so batches
 * are identical across thread counts and after seek (no replay).
 *
 * Owns:  nothing: every draw is a pure function of (seed, stream, epoch,
 *        item, counter)
 * Lock:  none
 * Calls: none (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */
#include "platform.h"
#include "rand_state.h"
#include "rand.h"

CDL_PRIVATE uint64_t cdl__mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

CDL_PRIVATE uint64_t cdl__hash4(uint64_t seed, uint64_t stream, uint64_t a, uint64_t b) {
    uint64_t h = cdl__mix64(seed ^ 0x243f6a8885a308d3ull);
    h = cdl__mix64(h ^ (stream * 0x9e3779b97f4a7c15ull));
    h = cdl__mix64(h ^ (a + 0x13198a2e03707344ull));
    return cdl__mix64(h ^ (b * 0xa4093822299f31d1ull + 0x082efa98ec4e6c89ull));
}

CDL_PRIVATE cdl__rng cdl__rng_for(uint64_t seed, uint64_t stream, uint64_t epoch, uint64_t item) {
    cdl__rng r = {cdl__hash4(seed, stream, epoch, item), 0};
    return r;
}

CDL_PRIVATE uint64_t cdl__rng_next(cdl__rng *r) {
    r->counter++;
    return cdl__mix64(r->key + r->counter * 0x9e3779b97f4a7c15ull);
}

/* Uniform in [0, 1) with 53 bits. */
CDL_PRIVATE double cdl__rng_uniform(cdl__rng *r) {
    return (double)(cdl__rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n), n > 0: the high word of a 64x64 multiply
 * (Lemire), in portable C; bias below n / 2^64. */
CDL_PRIVATE uint64_t cdl__rng_below(cdl__rng *r, uint64_t n) {
    uint64_t x = cdl__rng_next(r);
    uint64_t xl = x & 0xffffffffu, xh = x >> 32, nl = n & 0xffffffffu, nh = n >> 32;
    uint64_t ll = xl * nl, lh = xl * nh, hl = xh * nl, hh = xh * nh;
    uint64_t mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
    return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}

