/* SPDX-License-Identifier: MIT */
/* sampler_state.h - the sampler: the types sampler.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; sampler.h declares
 * the functions. */
#ifndef CDL_SAMPLER_STATE_H
#define CDL_SAMPLER_STATE_H
#include "platform.h"

typedef struct cdl__perm {
    uint64_t n;
    unsigned half_bits;
    uint64_t half_mask;
    uint64_t keys[6];
    int identity;
    uint64_t epoch;
} cdl__perm;
typedef struct cdl__llmc_epoch {
    uint64_t epoch;
    int valid;
    uint32_t *order;  /* shard at visiting position i                       */
    uint64_t *prefix; /* batches before position i; prefix[nshards] = total */
} cdl__llmc_epoch;

typedef struct cdl__llmc {
    uint64_t *samples;  /* G_s per shard, in source order                    */
    uint64_t total;     /* batches per epoch: sum of G_s                     */
    pthread_mutex_t mu; /* guards ep[] and victim                            */
    cdl__llmc_epoch ep[2];
    unsigned victim;    /* entry the next new epoch replaces                 */
} cdl__llmc;

/* The shard-window order (shuffle = COORDL_SHUFFLE_SHARD_WINDOW): one
 * epoch's shard order and the prefix sums of item counts along it. */
typedef struct cdl__window_epoch {
    uint64_t epoch;
    int valid;
    uint32_t *order;  /* shard at visiting position i                       */
    uint64_t *prefix; /* items before visiting position i; prefix[nshards]
                         = num_items                                        */
    size_t known;     /* a lazy index: prefix[0..known] holds, known being
                         the end of the last window whose every shard's
                         count is known (nshards: all)                      */
} cdl__window_epoch;

typedef struct cdl__window {
    size_t nshards;
    uint64_t width;     /* shards per window (shuffle_window_shards)         */
    uint64_t *count;    /* items per shard, in source order                  */
    uint64_t *first;    /* per shard: its first id when a shard's items are
                           consecutive ids, else its first entry of by_shard */
    uint32_t *by_shard; /* NULL, or the ids grouped by shard (a tar set
                           labelled by class folders orders its ids by
                           class, not by shard): 4 bytes per item           */
    uint64_t bytes;     /* what the tables above and below hold             */
    int lazy;           /* a lazily indexed tar source: ids are
                           CDL_LAZY_ID(shard, ordinal), count[s] is
                           UINT64_MAX until shard s is scanned              */
    size_t unknown;     /* lazy: shards whose count is not known yet        */
    _Atomic uint64_t total; /* lazy: the items of the set once every count
                           is known, else 0                                 */
    int front_valid;    /* lazy: the furthest window an item was mapped in  */
    uint64_t front_epoch, front_window; /* (reset by a seek)                */
    int ahead_stop;     /* lazy: the scan-ahead threads exit                */
    pthread_cond_t ahead_cv; /* with mu: the front moved, or stop           */
    pthread_mutex_t mu; /* guards ep[] and victim                            */
    cdl__window_epoch ep[2];
    unsigned victim;    /* entry the next new epoch replaces                 */
} cdl__window;

/* The sampler's state: fixed at open, but for the batch count coordl_set
 * changes (under the stream's lock). */
typedef struct cdl__sampler {
    struct cdl__llmc *llmc; /* token_order COORDL_TOKENS_LLMC               */
    struct cdl__window *window; /* shuffle COORDL_SHUFFLE_SHARD_WINDOW     */
    uint64_t share;        /* items per rank per epoch                      */
    uint64_t bpe;          /* batches per epoch                             */
} cdl__sampler;

#endif /* CDL_SAMPLER_STATE_H */
