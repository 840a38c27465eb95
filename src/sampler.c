/* SPDX-License-Identifier: MIT */
/*
 * sampler.c - the sampler.
 *
 * The epoch permutation is a keyed Feistel network over the next power
 * of four with cycle walking: a bijection on [0, N) computed in O(1)
 * per position from (seed, epoch), with no per-epoch array, so any
 * worker can map (epoch, position) to an item and seek is O(1). Rank r
 * of W gets positions r, r+W, ... (floor(N/W) of them). Token windows
 * in llm.c's order (token_order LLMC) map positions through shards and
 * samples instead, as llm.c's DataLoader does (below).
 *
 * Owns:  L->sampler: items per rank per epoch, batches per epoch, and
 *        llm.c's shard order tables
 * Lock:  the llm.c tables under their own mutex (llmc->mu); the rest is set
 *        at open and by coordl_set under the stream's lock
 * Calls: status, rand (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "sampler_state.h"
#include "sampler.h"
#include "status.h"
#include "rand.h"
#include "rand_state.h"
#include "handle.h"

/* A permutation of [0, n) keyed by (seed, stream, epoch, salt): the epoch
 * permutation of the items, and for token_order LLMC the shard order and
 * the order of a shard's samples. */
static cdl__perm cdl__perm_keyed(uint64_t n, int identity, uint64_t seed, uint64_t stream, uint64_t epoch,
                                 uint64_t salt) {
    cdl__perm p;
    memset(&p, 0, sizeof p);
    p.n = n;
    p.identity = identity;
    p.epoch = epoch;
    /* the least even bits >= 2 with 2^bits >= n (a token row asks for two
     * perms: no loop) */
    unsigned bits = p.n <= 4 ? 2u : 64u - (unsigned)__builtin_clzll(p.n - 1);
    if (bits & 1) bits++;
    p.half_bits = bits / 2;
    p.half_mask = (1ull << p.half_bits) - 1;
    if (!identity) /* an identity needs no keys (a token row asks for two perms) */
        for (uint64_t r = 0; r < 6; r++) p.keys[r] = cdl__hash4(seed, stream, epoch, salt * 8 + r);
    return p;
}

CDL_PRIVATE cdl__perm cdl__perm_for(const coordl *L, uint64_t epoch) {
    /* llm.c's order maps positions through its own tables (cdl__item_at):
     * only the epoch of this perm is read then */
    return cdl__perm_keyed(L->index.num_items, !L->cfg.shuffle || L->sampler.llmc, L->cfg.seed, CDL_STREAM_PERM,
                           epoch, 0);
}

static uint64_t cdl__perm_apply(const cdl__perm *p, uint64_t x) {
    if (p->identity) return x;
    do {
        uint64_t left = x >> p->half_bits, right = x & p->half_mask;
        for (int r = 0; r < 6; r++) {
            uint64_t f = cdl__mix64(right ^ p->keys[r]) & p->half_mask;
            uint64_t nl = right;
            right = left ^ f;
            left = nl;
        }
        x = (left << p->half_bits) | right;
    } while (x >= p->n); /* cycle walking keeps the bijection inside [0, n) */
    return x;
}

/* Where an epoch's batches stop: drop_last cuts the share at the last
 * whole batch of the current batch size, counted from where that size
 * took effect (coordl_set mid-epoch) or from the epoch's start. */
/* The position an epoch ends at (its share, less the rows a dropped last
 * batch leaves), given the geometry: where the batch size B took effect
 * (cut_epoch, cut_pos) counts from there. The one place this arithmetic
 * lives: the stream asks with its live values, the read-ahead with the
 * snapshot it took at its last restart. */
CDL_PRIVATE uint64_t cdl__epoch_end_at(uint64_t share, uint64_t B, int drop_last, uint64_t cut_epoch, uint64_t cut_pos,
                                       uint64_t epoch) {
    const uint64_t from = epoch == cut_epoch ? cut_pos : 0;
    return drop_last ? from + (share - from) / B * B : share;
}

CDL_PRIVATE uint64_t cdl__epoch_end(const coordl *L, uint64_t epoch) {
    return cdl__epoch_end_at(L->sampler.share, L->cfg.batch_size, L->cfg.drop_last, L->S->cut_epoch, L->S->cut_pos,
                             epoch);
}

CDL_PRIVATE uint64_t cdl__batches_for(const coordl *L, uint64_t B) {
    return L->cfg.drop_last ? L->sampler.share / B : (L->sampler.share + B - 1) / B;
}

/* llm.c's DataLoader order (token_order = COORDL_TOKENS_LLMC). With P
 * ranks and batch size B, shard s of n_s windows holds G_s = floor(n_s /
 * (P B)) samples (llm.c's shard_num_samples: floor((tokens - 1) / (P B T))
 * is the same number); sample j is P blocks of B consecutive windows and
 * rank r takes block j P + r; windows past the last sample are dropped. An
 * epoch visits the shards in an order (identity, or a permutation keyed by
 * (seed, epoch)) and a shard's samples in an order (identity, or keyed by
 * (seed, epoch, shard)); batch k of an epoch is the k-th sample visited, so
 * a rank's share is sum(G_s) x B positions and position p is row p % B of
 * batch p / B. Finding the shard of batch k needs the prefix sums of G in
 * the epoch's shard order: computed once per epoch (O(shards)) and kept for
 * the last two epochs asked for, under a lock of this process (workers,
 * the MPI thread and the converters ask). */
static cdl__perm cdl__llmc_shard_perm(const coordl *L, uint64_t epoch) {
    return cdl__perm_keyed(L->index.nshards, !L->cfg.shuffle, L->cfg.seed, CDL_STREAM_SHARD_ORDER, epoch, 0);
}

/* The table of `epoch`, built if it is not one of the two kept. Under mu. */
CDL_PRIVATE const cdl__llmc_epoch *cdl__llmc_table(const coordl *L, uint64_t epoch) {
    cdl__llmc *M = L->sampler.llmc;
    for (int i = 0; i < 2; i++)
        if (M->ep[i].valid && (M->ep[i].epoch == epoch || !L->cfg.shuffle)) return &M->ep[i];
    cdl__llmc_epoch *e = &M->ep[M->victim];
    M->victim ^= 1u;
    cdl__perm order = cdl__llmc_shard_perm(L, epoch);
    e->prefix[0] = 0;
    for (size_t i = 0; i < L->index.nshards; i++) {
        e->order[i] = (uint32_t)cdl__perm_apply(&order, i);
        e->prefix[i + 1] = e->prefix[i] + M->samples[e->order[i]];
    }
    e->epoch = epoch;
    e->valid = 1;
    return e;
}

/* Batch k < total of `epoch`: the visiting position of its shard and the
 * sample's position within the shard (llm.c's current_shard_idx and
 * current_sample_idx before it loads the batch), and the shard. */
CDL_PRIVATE void cdl__llmc_locate(const coordl *L, uint64_t epoch, uint64_t k, uint64_t *shard_pos,
                             uint64_t *sample_pos, uint32_t *shard) {
    cdl__llmc *M = L->sampler.llmc;
    pthread_mutex_lock(&M->mu);
    const cdl__llmc_epoch *e = cdl__llmc_table(L, epoch);
    size_t lo = 0, hi = L->index.nshards; /* the last i with prefix[i] <= k */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (e->prefix[mid] <= k) lo = mid; else hi = mid;
    }
    *shard_pos = lo;
    *sample_pos = k - e->prefix[lo];
    *shard = e->order[lo];
    pthread_mutex_unlock(&M->mu);
}

/* The first window of sample position j of shard s for this rank. */
static uint64_t cdl__llmc_block_first(const coordl *L, uint64_t epoch, uint32_t s, uint64_t j) {
    const uint64_t G = L->sampler.llmc->samples[s];
    cdl__perm within = cdl__perm_keyed(G, !L->cfg.shuffle, L->cfg.seed, CDL_STREAM_SHARD_SAMPLES, epoch, s);
    const uint64_t idx = cdl__perm_apply(&within, j);
    const uint64_t B = L->cfg.batch_size;
    return L->index.shards[s].first_item + (idx * (uint64_t)L->cfg.world + (uint64_t)L->cfg.rank) * B;
}

/* Sizes the order at open (after indexing): G_s per shard and one table
 * (shuffle = 0 needs no other). */
CDL_PRIVATE coordl_status cdl__llmc_init(coordl *L) {
    cdl__llmc *M = cdl__calloc(L, 1, sizeof *M);
    if (!M) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    if (pthread_mutex_init(&M->mu, NULL) != 0) {
        cdl__free(L, M);
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot create a mutex");
    }
    L->sampler.llmc = M; /* from here on cdl__llmc_free (via coordl_close) owns it */
    M->samples = cdl__calloc(L, L->index.nshards, sizeof *M->samples);
    int ok = M->samples != NULL;
    for (int i = 0; i < 2; i++) {
        M->ep[i].order = cdl__calloc(L, L->index.nshards, sizeof *M->ep[i].order);
        M->ep[i].prefix = cdl__calloc(L, L->index.nshards + 1, sizeof *M->ep[i].prefix);
        ok = ok && M->ep[i].order && M->ep[i].prefix;
    }
    if (!ok) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    const uint64_t per_sample = (uint64_t)L->cfg.world * L->cfg.batch_size;
    for (size_t s = 0; s < L->index.nshards; s++) {
        M->samples[s] = L->index.shards[s].nwindows / per_sample;
        M->total += M->samples[s];
    }
    if (M->total == 0)
        return cdl__open_fail(COORDL_ERR_INVALID, "token_order: llm.c's order needs a shard of at least world x "
                              "batch_size x seq_len + 1 = %llu tokens; no shard of %s has that many",
                              (unsigned long long)(per_sample * L->cfg.seq_len + 1), L->cfg.source);
    pthread_mutex_lock(&M->mu);
    cdl__llmc_table(L, 0);
    pthread_mutex_unlock(&M->mu);
    return COORDL_OK;
}

CDL_PRIVATE void cdl__llmc_free(coordl *L) {
    cdl__llmc *M = L->sampler.llmc;
    if (!M) return;
    for (int i = 0; i < 2; i++) {
        cdl__free(L, M->ep[i].order);
        cdl__free(L, M->ep[i].prefix);
    }
    cdl__free(L, M->samples);
    pthread_mutex_destroy(&M->mu);
    cdl__free(L, M);
    L->sampler.llmc = NULL;
}

/* Dataset item at position `pos` of this rank's share of an epoch. */
CDL_PRIVATE uint64_t cdl__item_at(const coordl *L, const cdl__perm *p, uint64_t pos) {
    if (L->sampler.llmc) {
        const uint64_t B = L->cfg.batch_size;
        uint64_t shard_pos, sample_pos;
        uint32_t s;
        cdl__llmc_locate(L, p->epoch, pos / B, &shard_pos, &sample_pos, &s);
        return cdl__llmc_block_first(L, p->epoch, s, sample_pos) + pos % B;
    }
    return cdl__perm_apply(p, pos * (uint64_t)L->cfg.world + (uint64_t)L->cfg.rank);
}

