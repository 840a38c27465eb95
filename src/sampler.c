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
 * samples instead, as llm.c's DataLoader does (below); the shard-window
 * order (shuffle = COORDL_SHUFFLE_SHARD_WINDOW) maps an epoch's global
 * positions through a shard order cut into windows (below).
 *
 * Owns:  L->sampler: items per rank per epoch, batches per epoch, llm.c's
 *        shard order tables and the shard-window order's tables
 * Lock:  the llm.c tables under their own mutex (llmc->mu), the
 *        shard-window tables under theirs (window->mu); the rest is set
 *        at open and by coordl_set under the stream's lock
 * Calls: status, rand, index (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "sampler_state.h"
#include "sampler.h"
#include "status.h"
#include "rand.h"
#include "rand_state.h"
#include "worker_state.h"
#include "index.h"
#include "index_state.h"
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
    return cdl__perm_keyed(L->index.num_items, L->cfg.shuffle != COORDL_SHUFFLE_FULL || L->sampler.llmc, L->cfg.seed,
                           CDL_STREAM_PERM, epoch, 0);
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
CDL_PRIVATE CDL_HOT uint64_t cdl__epoch_end_at(uint64_t share, uint64_t B, int drop_last, uint64_t cut_epoch, uint64_t cut_pos,
                                       uint64_t epoch) {
    if (share == UINT64_MAX) return UINT64_MAX; /* a lazy index, not all counted yet */
    const uint64_t from = epoch == cut_epoch ? cut_pos : 0;
    return drop_last ? from + (share - from) / B * B : share;
}

CDL_PRIVATE CDL_HOT uint64_t cdl__epoch_end(const coordl *L, uint64_t epoch) {
    /* a lazy index settles the share on another thread (UINT64_MAX before) */
    return cdl__epoch_end_at(__atomic_load_n(&L->sampler.share, __ATOMIC_RELAXED), L->cfg.batch_size, L->cfg.drop_last, L->S->cut_epoch, L->S->cut_pos,
                             epoch);
}

CDL_PRIVATE uint64_t cdl__batches_for(const coordl *L, uint64_t B) {
    const uint64_t share = __atomic_load_n(&L->sampler.share, __ATOMIC_RELAXED);
    if (share == UINT64_MAX) return 0; /* a lazy index, not all counted yet */
    return L->cfg.drop_last ? share / B : (share + B - 1) / B;
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

/* The shard-window order (shuffle = COORDL_SHUFFLE_SHARD_WINDOW). An
 * epoch visits the shards in an order keyed by (seed, epoch); that order is
 * cut into consecutive windows of `width` shards; the epoch's global
 * sequence is window 0's items in an order keyed by (seed, epoch, window),
 * then window 1's, and so on. Ranks split the global sequence exactly as
 * the full shuffle does (rank r of P takes global positions r, r + P, ...),
 * so the global batches do not depend on the rank count. Global position g
 * finds its window through the prefix sums of item counts in the epoch's
 * shard order (O(log shards)), the window's permutation gives the offset
 * inside the window, and the same prefix sums give the shard and the item
 * within it. The tables are O(shards), built once per epoch and kept for
 * the last two epochs asked for, under a lock of this process (workers,
 * the read-ahead, the MPI thread ask), as llm.c's tables are. */
static const cdl__window_epoch *cdl__window_table(const coordl *L, uint64_t epoch) {
    cdl__window *Wn = L->sampler.window;
    for (int i = 0; i < 2; i++)
        if (Wn->ep[i].valid && Wn->ep[i].epoch == epoch) return &Wn->ep[i];
    cdl__window_epoch *e = &Wn->ep[Wn->victim];
    Wn->victim ^= 1u;
    cdl__perm order = cdl__perm_keyed(Wn->nshards, 0, L->cfg.seed, CDL_STREAM_WINDOW_SHARDS, epoch, 0);
    e->prefix[0] = 0;
    e->known = Wn->nshards;
    for (size_t i = 0; i < Wn->nshards; i++) {
        e->order[i] = (uint32_t)cdl__perm_apply(&order, i);
        if (Wn->count[e->order[i]] == UINT64_MAX && e->known == Wn->nshards) e->known = i;
        e->prefix[i + 1] = e->known == Wn->nshards ? e->prefix[i] + Wn->count[e->order[i]] : e->prefix[i];
    }
    if (e->known < Wn->nshards) e->known = e->known / Wn->width * Wn->width; /* whole windows */
    e->epoch = epoch;
    e->valid = 1;
    return e;
}

/* The last visiting position i in [lo, hi) with prefix[i] <= g: the one
 * whose shard holds g (prefix[i + 1] > g, since g < prefix[hi]; an empty
 * shard's equal prefix is passed over). */
static size_t cdl__window_find(const uint64_t *prefix, size_t lo, size_t hi, uint64_t g) {
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (prefix[mid] <= g) lo = mid; else hi = mid;
    }
    return lo;
}

/* A lazy index: shard s's count into the tables (scanned if not known).
 * Not under Wn->mu. */
static void cdl__window_learn(const coordl *L, uint32_t s) {
    cdl__window *Wn = L->sampler.window;
    uint32_t count = 0;
    char err[CDL_ERRMSG_MAX];
    /* a shard that cannot be scanned counts 0 (index.c logs it); a later
     * failure of a counted shard does not change its count */
    if (cdl__lazy_count(L, s, &count, err, sizeof err) != COORDL_OK || count == CDL_LAZY_UNKNOWN) count = 0;
    pthread_mutex_lock(&Wn->mu);
    if (Wn->count[s] == UINT64_MAX) {
        Wn->count[s] = count;
        Wn->ep[0].valid = Wn->ep[1].valid = 0; /* prefix sums grow: rebuilt when next asked */
        if (--Wn->unknown == 0) {
            uint64_t total = 0;
            for (size_t i = 0; i < Wn->nshards; i++) total += Wn->count[i];
            atomic_store_explicit(&Wn->total, total, memory_order_release);
        }
    }
    pthread_mutex_unlock(&Wn->mu);
}

/* A lazy index: scans (through index.c) the shards of the windows of
 * `epoch` up to the one holding global position g, so that g maps to an item
 * or is known to be past the epoch's end. 1: it is; 0: not without a scan
 * (scan = 0 asks only). Not under Wn->mu: a scan reads storage. */
static int cdl__window_ensure(const coordl *L, uint64_t epoch, uint64_t g, int scan) {
    cdl__window *Wn = L->sampler.window;
    uint32_t pending[64];
    for (;;) {
        pthread_mutex_lock(&Wn->mu);
        const cdl__window_epoch *e = cdl__window_table(L, epoch);
        const size_t ns = Wn->nshards;
        if (e->known == ns || g < e->prefix[e->known]) {
            pthread_mutex_unlock(&Wn->mu);
            return 1;
        }
        if (!scan) {
            pthread_mutex_unlock(&Wn->mu);
            return 0;
        }
        /* the next window's shards not counted yet, up to 64 at a time */
        size_t n = 0;
        const size_t hi = Wn->width < ns - e->known ? e->known + (size_t)Wn->width : ns;
        for (size_t i = e->known; i < hi && n < 64; i++)
            if (Wn->count[e->order[i]] == UINT64_MAX) pending[n++] = e->order[i];
        /* the scan-ahead threads join in on this window (the first one
         * of a run: no item mapped yet) rather than wait for the next */
        const uint64_t w = e->known / Wn->width;
        if (!Wn->front_valid || epoch > Wn->front_epoch || (epoch == Wn->front_epoch && w > Wn->front_window)) {
            Wn->front_valid = 1;
            Wn->front_epoch = epoch;
            Wn->front_window = w;
            pthread_cond_broadcast(&Wn->ahead_cv);
        }
        pthread_mutex_unlock(&Wn->mu);
        for (size_t i = 0; i < n; i++) cdl__window_learn(L, pending[i]);
    }
}

/* The item at global position g < num_items of `epoch` (a lazy index:
 * CDL_NO_ITEM past the epoch's end, which may not have been known). */
static uint64_t cdl__window_item(const coordl *L, uint64_t epoch, uint64_t g) {
    cdl__window *Wn = L->sampler.window;
    if (Wn->lazy) cdl__window_ensure(L, epoch, g, 1);
    pthread_mutex_lock(&Wn->mu);
    const cdl__window_epoch *e = cdl__window_table(L, epoch);
    const size_t ns = Wn->nshards;
    if (Wn->lazy && g >= e->prefix[ns]) { /* every count known (ensured): past the end */
        pthread_mutex_unlock(&Wn->mu);
        return CDL_NO_ITEM;
    }
    const uint64_t w = cdl__window_find(e->prefix, 0, ns, g) / Wn->width;
    const size_t lo = (size_t)(w * Wn->width), hi = Wn->width < ns - lo ? lo + (size_t)Wn->width : ns;
    const uint64_t base = e->prefix[lo], n = e->prefix[hi] - base;
    if (Wn->lazy && (!Wn->front_valid || epoch > Wn->front_epoch || (epoch == Wn->front_epoch && w > Wn->front_window))) {
        /* the scan-ahead threads make the window after this one ready */
        Wn->front_valid = 1;
        Wn->front_epoch = epoch;
        Wn->front_window = w;
        pthread_cond_broadcast(&Wn->ahead_cv);
    }
    cdl__perm within = cdl__perm_keyed(n, 0, L->cfg.seed, CDL_STREAM_WINDOW_ITEMS, epoch, w);
    const uint64_t t = base + cdl__perm_apply(&within, g - base);
    const size_t i = cdl__window_find(e->prefix, lo, hi, t);
    const uint32_t s = e->order[i];
    const uint64_t k = Wn->lazy ? 0 : Wn->first[s] + (t - e->prefix[i]);
    const uint64_t id = Wn->lazy ? CDL_LAZY_ID(s, t - e->prefix[i]) : Wn->by_shard ? Wn->by_shard[k] : k;
    pthread_mutex_unlock(&Wn->mu);
    return id;
}

/* The shard of item i of a source with shards (tar or token shards). */
static uint32_t cdl__window_shard_of(const coordl *L, uint64_t i) {
    return L->index.tar_refs ? L->index.tar_refs[i].shard : L->index.tar_items[i].shard;
}

/* Sizes the order at open (after indexing): items per shard, where each
 * shard's ids are, and the tables of epoch 0. A source without shards (an
 * ImageFolder, a list file) is refused: its files are not shards, and a
 * window of single files would be the full shuffle at a higher cost. */
CDL_PRIVATE coordl_status cdl__window_init(coordl *L) {
    const int tokens = L->index.shards != NULL, tar = L->index.tar_shards != NULL;
    if (!tokens && !tar)
        return cdl__open_fail(COORDL_ERR_INVALID, "shuffle: COORDL_SHUFFLE_SHARD_WINDOW orders shards "
                              "(shuffle_window_shards of them per window), and %s has none (an ImageFolder or a "
                              "list of files); use COORDL_SHUFFLE_FULL, or tar shards (WebDataset) or token "
                              "shards", L->cfg.source);
    const size_t ns = tokens ? L->index.nshards : L->index.ntar_shards;
    if (ns > UINT32_MAX)
        return cdl__open_fail(COORDL_ERR_INVALID, "shuffle: COORDL_SHUFFLE_SHARD_WINDOW: %zu shards (at most 2^32)", ns);
    cdl__window *Wn = cdl__calloc(L, 1, sizeof *Wn);
    if (!Wn) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    if (pthread_mutex_init(&Wn->mu, NULL) != 0) {
        cdl__free(L, Wn);
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot create a mutex");
    }
    if (pthread_cond_init(&Wn->ahead_cv, NULL) != 0) {
        pthread_mutex_destroy(&Wn->mu);
        cdl__free(L, Wn);
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot create a condition variable");
    }
    L->sampler.window = Wn; /* from here on cdl__window_free (via coordl_close) owns it */
    if (L->cfg.shuffle_window_shards == 0) L->cfg.shuffle_window_shards = 8; /* coordl_get_config reports it */
    Wn->nshards = ns;
    Wn->width = L->cfg.shuffle_window_shards;
    Wn->count = cdl__calloc(L, ns + 1, sizeof *Wn->count);
    Wn->first = cdl__calloc(L, ns + 1, sizeof *Wn->first);
    int ok = Wn->count && Wn->first;
    for (int i = 0; i < 2; i++) {
        Wn->ep[i].order = cdl__calloc(L, ns + 1, sizeof *Wn->ep[i].order);
        Wn->ep[i].prefix = cdl__calloc(L, ns + 1, sizeof *Wn->ep[i].prefix);
        ok = ok && Wn->ep[i].order && Wn->ep[i].prefix;
    }
    if (!ok) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the shard-window order of %zu shards", ns);
    Wn->bytes = sizeof *Wn + (ns + 1) * (sizeof *Wn->count + sizeof *Wn->first) +
                2 * (ns + 1) * (sizeof *Wn->ep[0].order + sizeof *Wn->ep[0].prefix);
    const uint64_t N = L->index.num_items;
    if (L->index.lazy) { /* counted as the windows reach the shards */
        Wn->lazy = 1;
        Wn->unknown = ns;
        for (size_t s = 0; s < ns; s++) Wn->count[s] = UINT64_MAX;
    } else if (tokens) { /* a token shard's windows are consecutive ids */
        for (size_t s = 0; s < ns; s++) {
            Wn->count[s] = L->index.shards[s].nwindows;
            Wn->first[s] = L->index.shards[s].first_item;
        }
    } else {
        /* a shard's items are consecutive ids when every one of them lies in
         * [its first id, first id + count): .cls-labelled sets (shard, then
         * member order); a set labelled by class folders is ordered by class
         * and needs the ids grouped by shard */
        for (size_t s = 0; s < ns; s++) Wn->first[s] = UINT64_MAX;
        for (uint64_t i = 0; i < N; i++) {
            const uint32_t s = cdl__window_shard_of(L, i);
            Wn->count[s]++;
            if (Wn->first[s] == UINT64_MAX) Wn->first[s] = i;
        }
        int consecutive = 1;
        for (uint64_t i = 0; i < N && consecutive; i++) {
            const uint32_t s = cdl__window_shard_of(L, i);
            consecutive = i - Wn->first[s] < Wn->count[s];
        }
        if (!consecutive) {
            Wn->by_shard = cdl__malloc(L, (N ? N : 1) * sizeof *Wn->by_shard);
            if (!Wn->by_shard) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the shard-window order");
            Wn->bytes += N * sizeof *Wn->by_shard;
            uint64_t at = 0;
            for (size_t s = 0; s < ns; s++) {
                Wn->first[s] = at;
                at += Wn->count[s];
            }
            uint64_t *fill = Wn->ep[0].prefix; /* scratch: the next free entry of each shard */
            for (size_t s = 0; s < ns; s++) fill[s] = Wn->first[s];
            for (uint64_t i = 0; i < N; i++) Wn->by_shard[fill[cdl__window_shard_of(L, i)]++] = (uint32_t)i;
        } else {
            for (size_t s = 0; s < ns; s++)
                if (Wn->count[s] == 0) Wn->first[s] = 0;
        }
    }
    pthread_mutex_lock(&Wn->mu);
    cdl__window_table(L, 0);
    pthread_mutex_unlock(&Wn->mu);
    return COORDL_OK;
}

/* A lazy index: whether position pos of `epoch` (this rank's share) maps
 * without a scan; with scan, scans what it needs (see cdl__window_ensure). */
CDL_PRIVATE int cdl__sampler_known(const coordl *L, uint64_t epoch, uint64_t pos, int scan) {
    if (!L->sampler.window || !L->sampler.window->lazy) return 1;
    return cdl__window_ensure(L, epoch, pos * (uint64_t)L->cfg.world + (uint64_t)L->cfg.rank, scan);
}

/* A lazy index's scan-ahead (pool.c runs the threads): the shards of the
 * front window (the furthest an item was mapped in) and of the one after
 * it, possibly in the next epoch, whose blocks are not resident, into
 * out[0..n); waits while there are none. 0: stop. */
CDL_PRIVATE size_t cdl__sampler_ahead(const coordl *L, uint32_t *out, size_t cap) {
    cdl__window *Wn = L->sampler.window;
    pthread_mutex_lock(&Wn->mu);
    for (;;) {
        if (Wn->ahead_stop) break;
        size_t n = 0;
        if (Wn->front_valid) {
            const size_t ns = Wn->nshards;
            const uint64_t nwin = (ns + Wn->width - 1) / Wn->width;
            for (uint64_t k = 0; k < 2 && n < cap; k++) {
                uint64_t epoch = Wn->front_epoch, w = Wn->front_window + k;
                if (w >= nwin) {
                    epoch++;
                    w -= nwin;
                }
                const cdl__window_epoch *e = cdl__window_table(L, epoch);
                const size_t hi = (w + 1) * Wn->width < ns ? (size_t)((w + 1) * Wn->width) : ns;
                for (size_t i = (size_t)(w * Wn->width); i < hi && n < cap; i++)
                    if (!cdl__lazy_ready(L, e->order[i])) out[n++] = e->order[i];
            }
        }
        if (n) {
            pthread_mutex_unlock(&Wn->mu);
            return n;
        }
        pthread_cond_wait(&Wn->ahead_cv, &Wn->mu);
    }
    pthread_mutex_unlock(&Wn->mu);
    return 0;
}

/* Shard s made resident by a scan-ahead thread, its count recorded. */
CDL_PRIVATE void cdl__sampler_ahead_scan(const coordl *L, uint32_t s) {
    if (cdl__lazy_prefetch(L, s)) cdl__window_learn(L, s);
}

/* The scan-ahead threads exit (they may be mid-scan: join them after). */
CDL_PRIVATE void cdl__sampler_ahead_stop(const coordl *L) {
    cdl__window *Wn = L->sampler.window;
    if (!Wn || !Wn->lazy) return;
    pthread_mutex_lock(&Wn->mu);
    Wn->ahead_stop = 1;
    pthread_cond_broadcast(&Wn->ahead_cv);
    pthread_mutex_unlock(&Wn->mu);
}

/* A seek: the front window is found again from the next item mapped. */
CDL_PRIVATE void cdl__sampler_seeked(const coordl *L) {
    cdl__window *Wn = L->sampler.window;
    if (!Wn || !Wn->lazy) return;
    pthread_mutex_lock(&Wn->mu);
    Wn->front_valid = 0;
    pthread_mutex_unlock(&Wn->mu);
}

/* The key of item id's random augmentation (its crop, flip, ...): the id,
 * but in the shard-window order on a .cls-labelled tar set the sample's
 * place in its shard ((shard << 32) | ordinal: a lazy index's id), so a
 * run that indexed its shards lazily (one process) and one that shares a
 * full index (a group, MPI ranks, index_path) draw the same augmentation
 * for the same sample, as they visit the same samples in the same order:
 * a job resumed on another rank count gets the same pixels. */
CDL_PRIVATE uint64_t cdl__sample_key(const coordl *L, uint64_t id) {
    const cdl__window *Wn = L->sampler.window;
    if (!Wn || Wn->lazy || Wn->by_shard || !L->index.tar_refs) return id;
    const uint32_t s = L->index.tar_refs[id].shard;
    return CDL_LAZY_ID(s, id - Wn->first[s]);
}

/* Items in the set: a lazy index's once every shard is counted, else 0. */
CDL_PRIVATE uint64_t cdl__sampler_num_items(const coordl *L) {
    if (!L->index.lazy) return L->index.num_items;
    return L->sampler.window ? atomic_load_explicit(&L->sampler.window->total, memory_order_acquire) : 0;
}

/* A lazy index's share and batch count once every shard is counted (the
 * last window of epoch 0 reached): until then the share is UINT64_MAX (an
 * epoch end found by the stream) and the batch count 0. 1: they are set
 * (now or before). Under the stream's lock. */
CDL_PRIVATE int cdl__sampler_settle(coordl *L) {
    if (!L->sampler.window || !L->sampler.window->lazy) return 1;
    if (__atomic_load_n(&L->sampler.share, __ATOMIC_RELAXED) != UINT64_MAX) return 1;
    /* 0 until every shard is counted: a lazy set has items (open found
     * some in its first shard), so a known total is never 0 */
    const uint64_t total = atomic_load_explicit(&L->sampler.window->total, memory_order_acquire);
    if (total == 0) return 0;
    __atomic_store_n(&L->sampler.share, total / (uint64_t)L->cfg.world, __ATOMIC_RELAXED);
    __atomic_store_n(&L->sampler.bpe, cdl__batches_for(L, L->cfg.batch_size), __ATOMIC_RELAXED);
    return 1;
}

CDL_PRIVATE void cdl__window_free(coordl *L) {
    cdl__window *Wn = L->sampler.window;
    if (!Wn) return;
    for (int i = 0; i < 2; i++) {
        cdl__free(L, Wn->ep[i].order);
        cdl__free(L, Wn->ep[i].prefix);
    }
    cdl__free(L, Wn->count);
    cdl__free(L, Wn->first);
    cdl__free(L, Wn->by_shard);
    pthread_cond_destroy(&Wn->ahead_cv);
    pthread_mutex_destroy(&Wn->mu);
    cdl__free(L, Wn);
    L->sampler.window = NULL;
}

/* Bytes the sampler's tables hold (coordl_stats.sampler_bytes): none for
 * the full shuffle (a Feistel network's keys), O(shards) for the orders
 * that keep per-epoch shard tables. */
CDL_PRIVATE uint64_t cdl__sampler_bytes(const coordl *L) {
    uint64_t b = 0;
    if (L->sampler.window) b += L->sampler.window->bytes;
    if (L->sampler.llmc)
        b += sizeof *L->sampler.llmc + L->index.nshards * sizeof *L->sampler.llmc->samples +
             2 * (L->index.nshards * sizeof(uint32_t) + (L->index.nshards + 1) * sizeof(uint64_t));
    return b;
}

/* cdl__item_at for a thread that keeps a hint: in llm.c's order a batch's
 * rows are consecutive windows from its first, so only the batch's first
 * row locates it (the tables' lock, two searches, a permutation); the
 * others add their row (B = 128: that was 128 lock round trips a batch).
 * The hint is keyed by (epoch, batch, batch size): the order is a pure
 * function of them for a handle, so it never goes stale. */
CDL_PRIVATE uint64_t cdl__item_at_hinted(const coordl *L, const cdl__perm *p, uint64_t pos, cdl__item_hint *h) {
    if (!L->sampler.llmc || L->sampler.window) return cdl__item_at(L, p, pos);
    const uint64_t B = L->cfg.batch_size, k = pos / B;
    if (!h->valid || h->epoch != p->epoch || h->batch != k || h->batch_size != B) {
        h->first = cdl__item_at(L, p, k * B);
        h->epoch = p->epoch;
        h->batch = k;
        h->batch_size = B;
        h->valid = 1;
    }
    return h->first + pos % B;
}

/* Dataset item at position `pos` of this rank's share of an epoch. */
CDL_PRIVATE uint64_t cdl__item_at(const coordl *L, const cdl__perm *p, uint64_t pos) {
    if (L->sampler.window) return cdl__window_item(L, p->epoch, pos * (uint64_t)L->cfg.world + (uint64_t)L->cfg.rank);
    if (L->sampler.llmc) {
        const uint64_t B = L->cfg.batch_size;
        uint64_t shard_pos, sample_pos;
        uint32_t s;
        cdl__llmc_locate(L, p->epoch, pos / B, &shard_pos, &sample_pos, &s);
        return cdl__llmc_block_first(L, p->epoch, s, sample_pos) + pos % B;
    }
    return cdl__perm_apply(p, pos * (uint64_t)L->cfg.world + (uint64_t)L->cfg.rank);
}

