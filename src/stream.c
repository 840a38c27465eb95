/* SPDX-License-Identifier: MIT */
/*
 * stream.c - the ring and the stream state machine.
 *
 * The stream is one state machine over the ring's slots, owned here.
 * Each transition runs under the stream's lock and ends with
 * cdl__stream_check (COORDL_DEBUG builds assert the invariants):
 *   claim     a worker takes the next row: a snapshot of all it needs
 *   complete  the row counts only if slot and member generations match
 *   take      the consumer's next batch; its handle carries slot + gen
 *   release   a no-op unless the handle's generation matches
 *   drop      a member generation leaves: its marks and bits go
 *   repair    after a lock holder died: finish, recount from the marks
 *   pause / restart   seek and set: wait for rows in flight, resume
 * Workers only claim, prepare with no lock held, and complete. The ring
 * allocator sizes every per-slot array (CDL_RING_ARRAYS).
 *
 * Owns:  L->ring and the transitions of *L->S: assign, claim, complete,
 *        take, release, drop, repair, pause and restart (COORDL_DEBUG
 *        asserts the invariants after each)
 * Lock:  the stream's lock (lock module) around every transition
 * Calls: status, arena, lock, sampler, peers, readahead, config (lower
 *        layers only: src/modules.txt; tools/check-layers.py checks this
 *        line).
 */
#include "platform.h"
#include "stream_state.h"
#include "stream.h"
#include "status.h"
#include "status_state.h"
#include "arena.h"
#include "lock.h"
#include "lock_state.h"
#include "sampler.h"
#include "peers.h"
#include "readahead.h"
#include "config.h"
#include "handle.h"

/* --- the ring allocator ----------------------------------------------- */

/* Every array with an entry per slot or per row of a slot, as
 * X(owning member of coordl, its field, element type, CDL_PER_SLOT or
 * CDL_PER_ROW, shared).
 * cdl__ring_alloc sizes them all: per-slot arrays once (nslots never
 * changes), per-row arrays (nslots x slot_rows_cap entries, zeroed) at open
 * and again whenever coordl_set grows the ring; cdl__ring_free frees them.
 * shared = 1: in a group the array is the shm object's (group.c), not
 * allocated. Another section's per-slot state (the MPI peers' per-row
 * offsets, lengths and states) goes in CDL_RING_ARRAYS_PEER, defined before
 * this point: it is then sized, grown and freed with the ring, and can
 * never be smaller than the ring it describes. */
#ifndef CDL_RING_ARRAYS_PEER
#define CDL_RING_ARRAYS_PEER(X)
#endif
#define CDL_RING_ARRAYS(X)                 \
    X(ring, slots, cdl__slot, CDL_PER_SLOT, 1)   \
    X(ring, row_state, uint32_t, CDL_PER_ROW, 1) \
    CDL_RING_ARRAYS_PEER(X)

/* Bytes of one ring slot holding rows_cap rows in data_cap data bytes:
 * data, labels, ids, (tokens) targets or (boxes) boxes, and (boxes) the
 * rows' box counts, each 64-byte aligned. */
CDL_PRIVATE size_t cdl__ring_slot_bytes(const coordl *L, uint32_t rows_cap, size_t data_cap, size_t *data,
                                   size_t *labels, size_t *ids) {
    const size_t B = rows_cap, align = 64;
    *data = cdl__round_up(data_cap, align);
    *labels = cdl__round_up(B * sizeof(int32_t), align);
    *ids = cdl__round_up(B * sizeof(uint64_t), align);
    return *data + *labels + *ids + cdl__round_up(B * L->geom.target_row_bytes, align) +
           (L->geom.box_rows ? cdl__round_up(B * sizeof(uint32_t), align) : 0);
}

/* Points every slot at its part of the ring arena, and frees it. */
CDL_PRIVATE void cdl__ring_layout(coordl *L) {
    size_t data, labels, ids;
    const size_t per_slot = cdl__ring_slot_bytes(L, L->geom.slot_rows_cap, L->geom.slot_data_cap, &data, &labels, &ids);
    for (uint32_t s = 0; s < L->ring.nslots; s++) {
        cdl__slot *sl = &L->ring.slots[s];
        sl->data_off = s * per_slot;
        sl->labels_off = s * per_slot + data;
        sl->ids_off = s * per_slot + data + labels;
        sl->targets_off = s * per_slot + data + labels + ids;
        sl->nboxes_off = sl->targets_off + cdl__round_up((size_t)L->geom.slot_rows_cap * L->geom.target_row_bytes, 64);
        sl->state = CDL_SLOT_FREE;
        sl->gen++;
    }
    L->S->slots_free = L->ring.nslots;
}

/* Maps the ring arena for rows_cap rows and data_cap data bytes per slot,
 * and allocates the per-row arrays (and the first time the per-slot ones).
 * The new arrays are allocated first; the old arena is unmapped before the
 * new one is mapped (growing never holds both). On failure the old arrays
 * stay installed and the arena is gone: coordl_set then maps the old size
 * again. In a group the arena and the shared arrays are the shm object's:
 * only the private arrays are allocated. */
CDL_PRIVATE coordl_status cdl__ring_alloc(coordl *L, uint32_t rows_cap, size_t data_cap) {
    const int in_group = L->member.shm_base != NULL;
    const uint64_t nslots = L->ring.nslots, nrows = nslots * rows_cap;
    size_t data, labels, ids;
    const size_t per_slot = cdl__ring_slot_bytes(L, rows_cap, data_cap, &data, &labels, &ids);
    if (nslots == 0 || rows_cap == 0 || per_slot > SIZE_MAX / nslots || nrows > SIZE_MAX / sizeof(uint64_t))
        return cdl__open_fail(COORDL_ERR_INVALID, "batch ring too large (%llu slots of %u rows)",
                              (unsigned long long)nslots, rows_cap);
    struct {
#define CDL_RING_NEW_FIELD(o, f, type, per, shared) type *f;
        CDL_RING_ARRAYS(CDL_RING_NEW_FIELD)
#undef CDL_RING_NEW_FIELD
        int unused;
    } nw;
    memset(&nw, 0, sizeof nw);
    int ok = 1;
#define CDL_RING_NEW_ALLOC(o, f, type, per, shared)                                               \
    if (ok && !((shared) && in_group) && ((per) == CDL_PER_ROW || !L->o.f)) {                    \
        nw.f = cdl__calloc(L, (size_t)((per) == CDL_PER_ROW ? nrows : nslots), sizeof(type)); \
        ok = nw.f != NULL;                                                                     \
    }
    CDL_RING_ARRAYS(CDL_RING_NEW_ALLOC)
#undef CDL_RING_NEW_ALLOC
    coordl_status rc = ok ? COORDL_OK : cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the batch ring's tables; lower "
                                                "prefetch_batches or batch_size (max_batch_size)");
    if (rc == COORDL_OK && !in_group) {
        cdl__arena_unmap(L, &L->ring.arena);
        rc = cdl__arena_map(L, &L->ring.arena, per_slot * nslots, 1, "batch ring",
                            "prefetch_batches, batch_size (max_batch_size) or out_w/out_h (max_out_w/max_out_h)");
    }
    if (rc != COORDL_OK) {
#define CDL_RING_NEW_FREE(o, f, type, per, shared) cdl__free(L, nw.f);
        CDL_RING_ARRAYS(CDL_RING_NEW_FREE)
#undef CDL_RING_NEW_FREE
        return rc;
    }
#define CDL_RING_INSTALL(o, f, type, per, shared) \
    if (nw.f) {                                \
        cdl__free(L, L->o.f);                    \
        L->o.f = nw.f;                           \
    }
    CDL_RING_ARRAYS(CDL_RING_INSTALL)
#undef CDL_RING_INSTALL
    L->geom.slot_rows_cap = rows_cap;
    L->geom.slot_data_cap = data_cap;
    if (!in_group) cdl__ring_layout(L);
    return COORDL_OK;
}

/* Unregisters and unmaps the arena and frees the private arrays (before a
 * group is left: which arrays are shared depends on it). */
CDL_PRIVATE void cdl__ring_free(coordl *L) {
    const int in_group = L->member.shm_base != NULL;
    cdl__arena_unmap(L, &L->ring.arena);
#define CDL_RING_FREE(o, f, type, per, shared) \
    if (!((shared) && in_group)) {          \
        cdl__free(L, L->o.f);                 \
        L->o.f = NULL;                        \
    }
    CDL_RING_ARRAYS(CDL_RING_FREE)
#undef CDL_RING_FREE
}

/* --- slots, members, marks -------------------------------------------- */

static cdl__u8 *cdl__slot_data(const coordl *L, const cdl__slot *s) { return L->ring.arena.base + s->data_off; }
static int32_t *cdl__slot_labels(const coordl *L, const cdl__slot *s) {
    return (int32_t *)(void *)(L->ring.arena.base + s->labels_off);
}
static uint64_t *cdl__slot_ids(const coordl *L, const cdl__slot *s) {
    return (uint64_t *)(void *)(L->ring.arena.base + s->ids_off);
}
static uint32_t *cdl__slot_rows(const coordl *L, const cdl__slot *s) {
    return L->ring.row_state + (size_t)(s - L->ring.slots) * L->geom.slot_rows_cap;
}

static uint32_t cdl__mark_for(int m, uint64_t gen) {
    return (uint32_t)((gen & CDL_MARK_GEN_MASK) << 6) | (uint32_t)(m + 1);
}

/* Member m is in the group with generation gen. */
CDL_PRIVATE CDL_HOT int cdl__member_is(const cdl__stream *S, int m, uint64_t gen) {
    return m >= 0 && m < CDL_MAX_MEMBERS && (atomic_load(&S->live_mask) >> m & 1u) &&
           atomic_load(&S->members[m].gen) == gen;
}

/* This handle is still the member generation it joined as. */
CDL_PRIVATE CDL_HOT int cdl__member_current(const coordl *L) { return cdl__member_is(L->S, L->member.me, L->member.my_gen); }

/* A claim mark whose member generation is no longer in the group. */
static int cdl__mark_stale(const cdl__stream *S, uint32_t mark) {
    if (mark == CDL_ROW_FREE || mark == CDL_ROW_DONE) return 0;
    const int m = (int)(mark & 63u) - 1;
    if (m < 0 || m >= CDL_MAX_MEMBERS || !(atomic_load(&S->live_mask) >> m & 1u)) return 1;
    return (atomic_load(&S->members[m].gen) & CDL_MARK_GEN_MASK) != (uint64_t)(mark >> 6);
}

/* Members that consume batches of `epoch`: in the group, and joined no
 * later than that epoch. Under mu. */
static uint32_t cdl__consumers_of(const coordl *L, uint64_t epoch) {
    const uint32_t live = atomic_load(&L->S->live_mask);
    uint32_t m = 0;
    for (int i = 0; i < CDL_MAX_MEMBERS; i++)
        if ((live >> i & 1u) && L->S->members[i].start_epoch <= epoch) m |= 1u << i;
    return m;
}

CDL_PRIVATE CDL_HOT cdl__epoch_counters *cdl__epoch_entry(coordl *L, uint64_t epoch) {
    cdl__epoch_counters *e = &L->stats.epochs[epoch % CDL_EPOCH_STATS_KEPT];
    if (!e->used || e->epoch != epoch) {
        memset(e, 0, sizeof *e);
        e->used = 1;
        e->epoch = epoch;
        e->s.epoch = epoch;
    }
    return e;
}

/* A finished row's counters into the handle's and its epoch's totals. */
static void cdl__counters_add(coordl *L, uint64_t epoch, const cdl__counters *c) {
    cdl__epoch_counters *ec = cdl__epoch_entry(L, epoch);
    (void)ec;
#define CDL_COUNTER_ADD(name, row, in_stats, ep) \
    CDL_IF_##row(CDL_IF_##in_stats(L->stats.st.name += c->name;) CDL_IF_##ep(ec->s.name += c->name;))
    CDL_COUNTERS(CDL_COUNTER_ADD)
#undef CDL_COUNTER_ADD
}

/* --- invariants -------------------------------------------------------- */

/* The stream's invariants: rows claimed equal rows marked, rows in flight
 * equal claimed minus done, a READY slot has every row done and is held
 * only by members still in the group, every mark belongs to a member
 * generation in the group, no assignment is left half-done, and this
 * consumer's count of held batches matches the slots. 1 when they hold,
 * else 0 and the first broken one in why. Under mu. COORDL_DEBUG builds
 * check them after every transition; tests that include coordl.c call it
 * in any build (hence "unused" where neither does). */
#if defined(__GNUC__)
__attribute__((unused))
#endif
static int cdl__stream_invariants(const coordl *L, char *why, size_t cap) {
    const cdl__stream *S = L->S;
    const uint32_t live = atomic_load(&S->live_mask);
    uint64_t inflight = 0;
    uint32_t held = 0, nfree = 0;
#define CDL_BROKEN(...) do { snprintf(why, cap, __VA_ARGS__); return 0; } while (0)
    if (S->assign.slot != 0) CDL_BROKEN("the assignment of slot %u was left half-done", S->assign.slot - 1);
    for (uint32_t s = 0; s < L->ring.nslots; s++) {
        const cdl__slot *sl = &L->ring.slots[s];
        const uint32_t *rows = cdl__slot_rows(L, sl);
        nfree += sl->state == CDL_SLOT_FREE;
        if (sl->state == CDL_SLOT_FREE) continue;
        if (sl->state != CDL_SLOT_FILLING && sl->state != CDL_SLOT_READY) CDL_BROKEN("slot %u: state %d", s, sl->state);
        if (sl->n == 0 || sl->n > L->geom.slot_rows_cap) CDL_BROKEN("slot %u: %u rows (capacity %u)", s, sl->n, L->geom.slot_rows_cap);
        uint32_t marked = 0, done = 0;
        for (uint32_t r = 0; r < sl->n; r++) {
            marked += rows[r] != CDL_ROW_FREE;
            done += rows[r] == CDL_ROW_DONE;
            if (cdl__mark_stale(S, rows[r]))
                CDL_BROKEN("slot %u row %u: mark %#x belongs to member %d generation %u, which is not in the group",
                           s, r, rows[r], (int)(rows[r] & 63u) - 1, rows[r] >> 6);
        }
        if (marked != sl->rows_claimed) CDL_BROKEN("slot %u: %u rows claimed but %u marked", s, sl->rows_claimed, marked);
        if (done != sl->rows_done) CDL_BROKEN("slot %u: %u rows done but %u marked done", s, sl->rows_done, done);
        if (sl->state == CDL_SLOT_FILLING) {
            inflight += marked - done;
            continue;
        }
        if (done != sl->n) CDL_BROKEN("slot %u is READY with %u of %u rows done", s, done, sl->n);
        if ((sl->need_mask | sl->taken_mask | sl->done_mask) & ~live)
            CDL_BROKEN("slot %u: consumer bits %#x/%#x/%#x of members not in the group (%#x)", s, sl->need_mask,
                       sl->taken_mask, sl->done_mask, live);
        if ((sl->done_mask & sl->need_mask) == sl->need_mask)
            CDL_BROKEN("slot %u is READY though every consumer released it", s);
        if (sl->taken_mask & ~sl->done_mask & L->member.bit) held++;
    }
    if (nfree != S->slots_free) CDL_BROKEN("%u slots counted free, but %u are FREE", S->slots_free, nfree);
    if (inflight != S->inflight)
        CDL_BROKEN("%u rows counted in flight, but claimed minus done is %llu", S->inflight, (unsigned long long)inflight);
    if (L->member.me >= 0 && cdl__member_current(L) && held != L->consumer.held)
        CDL_BROKEN("this consumer counts %u held batches, the slots say %u", L->consumer.held, held);
#undef CDL_BROKEN
    return 1;
}

#ifdef COORDL_DEBUG

CDL_PRIVATE void cdl__stream_check(const coordl *L, const char *transition) {
    char why[256], msg[320];
    cdl__assert_locked(L);
    if (!cdl__stream_invariants(L, why, sizeof why)) {
        snprintf(msg, sizeof msg, "stream invariant broken after %s: %s", transition, why);
        cdl__debug_assert(L, 0, msg);
    }
}
#endif

/* --- transitions ------------------------------------------------------- */

#ifdef COORDL_MPI
#endif

/* Carries out the recorded assignment S->assign (idempotent: repair runs
 * it again when its holder died half-way). Under mu. */
static void cdl__slot_assign(coordl *L) {
    cdl__stream *S = L->S;
    cdl__slot *sl = &L->ring.slots[S->assign.slot - 1];
    sl->gen++;
    sl->epoch = S->assign.epoch;
    sl->pos = S->assign.pos;
    sl->index = S->assign.index;
    sl->n = S->assign.n;
    sl->out_w = L->cfg.out_w;
    sl->out_h = L->cfg.out_h;
    sl->row_bytes = L->geom.row_bytes;
    sl->rows_claimed = sl->rows_done = 0;
    sl->need_mask = sl->taken_mask = sl->done_mask = 0;
    sl->status = COORDL_OK;
    sl->err_row = UINT32_MAX;
    sl->errmsg[0] = '\0';
    memset(cdl__slot_rows(L, sl), 0, (size_t)L->geom.slot_rows_cap * sizeof(uint32_t));
    if (sl->state == CDL_SLOT_FREE) S->slots_free--; /* a repair may run it again */
    sl->state = CDL_SLOT_FILLING;
    S->claim_epoch = S->assign.epoch;
    S->claim_pos = S->assign.pos + S->assign.n;
    S->claim_index = S->assign.index + 1;
    S->assign.slot = 0;
}

/* The oldest FILLING slot with an unclaimed row, else a FREE slot given
 * the next batch of the stream; NULL when the ring is full. Under mu. */
static cdl__slot *cdl__slot_to_fill(coordl *L) {
    cdl__stream *S = L->S;
    cdl__slot *best = NULL;
    for (uint32_t s = 0; s < L->ring.nslots; s++) {
        cdl__slot *c = &L->ring.slots[s];
        if (c->state == CDL_SLOT_FILLING && c->rows_claimed < c->n &&
            (!best || c->epoch < best->epoch || (c->epoch == best->epoch && c->pos < best->pos)))
            best = c;
    }
    if (best) return best;
    for (uint32_t s = 0; s < L->ring.nslots; s++) {
        cdl__slot *sl = &L->ring.slots[s];
        if (sl->state != CDL_SLOT_FREE) continue;
        uint64_t epoch = S->claim_epoch, pos = S->claim_pos, index = S->claim_index;
        uint64_t end = cdl__epoch_end(L, epoch);
        if (end == UINT64_MAX) {
            /* a lazy index whose shards are not all counted: the batch's
             * last row either maps or lies past the end, which is known
             * from then on (the scan-ahead threads keep the next window
             * scanned, so this rarely reads a shard under the lock); a
             * consumer waiting at the end learns it */
            cdl__sampler_known(L, epoch, pos + L->cfg.batch_size - 1, 1);
            if (cdl__sampler_settle(L)) {
                end = cdl__epoch_end(L, epoch);
                cdl__broadcast(L, &S->ready_cv);
            }
        }
        if (pos >= end) {
            /* partitioned cache: past the cached epoch, wait for the map */
            if (cdl__peer_claim_waits(L, epoch)) return NULL;
            epoch++;
            pos = 0;
            index = 0;
            end = cdl__epoch_end(L, epoch);
        }
        const uint64_t left = end - pos;
        /* the intent first, committed by setting assign.slot last: a member
         * killed in the middle leaves either nothing or a whole intent for
         * cdl__stream_repair to carry out */
        S->assign.epoch = epoch;
        S->assign.pos = pos;
        S->assign.index = index;
        S->assign.n = (uint32_t)(left < L->cfg.batch_size ? left : L->cfg.batch_size);
        S->assign.slot = s + 1;
        cdl__slot_assign(L);
#ifdef COORDL_MPI
        /* ask peers for their rows now, before any worker needs them */
        cdl__peer_request_slot(L, s);
#endif
        return sl;
    }
    return NULL;
}

/* Work a woken worker could claim now: an unclaimed row or a free slot. */
static int cdl__stream_has_work(const coordl *L) {
    for (uint32_t s = 0; s < L->ring.nslots; s++) {
        const cdl__slot *sl = &L->ring.slots[s];
        if (sl->state == CDL_SLOT_FREE || (sl->state == CDL_SLOT_FILLING && sl->rows_claimed < sl->n)) return 1;
    }
    return 0;
}

/* A slot whose every consumer has released it is free again, under a new
 * generation. One waiting worker is woken, not all: the one that claims a
 * row wakes the next while work remains (cdl__stream_claim). And only once
 * half the ring is free, not at every release: the woken worker then fills
 * several slots in one go, and the releases in between cost the consumer
 * no system call and no preemption by the worker it wakes (the trainer's
 * time inside coordl_release/next_into; issue #14). A consumer about to
 * wait for a batch wakes a worker itself (cdl__consumer_next), so a free
 * slot below the mark never strands it. With wake = 0 the caller wakes it
 * after unlocking (cdl__signal_unlocked), so the woken worker does not
 * block at once on the lock its waker still holds. Returns 1 when the slot
 * was freed and a worker is to be woken. */
static CDL_HOT int cdl__slot_free_if_done(coordl *L, cdl__slot *sl, int wake) {
    if (sl->state != CDL_SLOT_READY || (sl->done_mask & sl->need_mask) != sl->need_mask) return 0;
    sl->state = CDL_SLOT_FREE;
    sl->gen++;
    if (++L->S->slots_free < (L->ring.nslots + 1) / 2) return 0;
    if (wake) cdl__signal(L, &L->S->work_cv);
    return 1;
}

static CDL_HOT void cdl__slot_maybe_free(coordl *L, cdl__slot *sl) { (void)cdl__slot_free_if_done(L, sl, 1); }

/* Every row done: the batch goes to every member that consumes its epoch. */
static void cdl__slot_ready(coordl *L, cdl__slot *sl) {
    sl->state = CDL_SLOT_READY;
    sl->need_mask = cdl__consumers_of(L, sl->epoch);
    sl->taken_mask = sl->done_mask = 0;
    cdl__broadcast(L, &L->S->ready_cv); /* every member's consumer, and workers waiting for peers */
    cdl__slot_maybe_free(L, sl);        /* nobody left to consume it */
}

/* try_claim: marks the next row as this member generation's and fills c
 * with a snapshot of everything its preparer needs; 0 when no row can be
 * claimed now (nothing to fill, paused, stopping). Under mu. */
CDL_PRIVATE int cdl__stream_try_claim(coordl *L, cdl__claim *c) {
    cdl__stream *S = L->S;
    if (L->pool.stop || S->paused || S->broken || !S->started || !cdl__member_current(L)) return 0;
    cdl__slot *sl = cdl__slot_to_fill(L);
    if (!sl) return 0;
    uint32_t *rows = cdl__slot_rows(L, sl);
    /* rows are claimed in order, so the first free one is usually at
     * rows_claimed; a drop may free rows below it: the scan wraps (which
     * row a claim gets changes nothing in the batch). rows_claimed < n:
     * one is free. A scan from row 0 cost B/2 steps a claim: a quarter
     * of a token batch's time at B = 128. */
    uint32_t row = sl->rows_claimed;
    while (rows[row] != CDL_ROW_FREE) row = row + 1 == sl->n ? 0 : row + 1;
    c->slot = (uint32_t)(sl - L->ring.slots);
    c->row = row;
    c->slot_gen = sl->gen;
    c->mark = cdl__mark_for(L->member.me, L->member.my_gen);
    c->epoch = sl->epoch;
    c->pos = sl->pos + row;
    c->out_w = sl->out_w;
    c->out_h = sl->out_h;
    c->row_bytes = sl->row_bytes;
    c->data_off = sl->data_off + (size_t)row * sl->row_bytes;
    c->targets_off = sl->targets_off + (size_t)row * L->geom.target_row_bytes;
    rows[row] = c->mark;
    sl->rows_claimed++;
    S->inflight++;
    /* pass the baton: a worker may sleep while work remains (none to wake
     * in a private loader without workers: its consumer prepares) */
    if ((L->pool.nworkers > 0 || L->cfg.group) && cdl__stream_has_work(L)) cdl__signal(L, &S->work_cv);
    cdl__stream_check(L, "claim");
    return 1;
}

/* claim: a worker's try_claim, waiting for work. Returns 1 with a row
 * claimed, 0 when the worker should exit, 2 (only when `idle` allows) when
 * there is no slot to fill and cached JPEGs wait for a rewrite: the worker
 * does one with no lock held and claims again (idle time, decode.c).
 * Under mu (the waits release it). */
CDL_PRIVATE int cdl__stream_claim(coordl *L, cdl__claim *c, int idle) {
    cdl__stream *S = L->S;
    for (;;) {
        if (L->pool.stop) return 0;
        if (S->paused || S->broken || !S->started || !cdl__member_current(L)) {
            cdl__wait(L, &S->work_cv);
            continue;
        }
        if (cdl__stream_try_claim(L, c)) return 1;
        /* not stopped nor paused (checked above, under mu): no slot to fill */
        if (idle && L->cache.entries && L->cfg.jpeg_random_access && atomic_load(&S->cache_plain_items) > 0)
            return 2;
        const uint64_t t0 = cdl__now_ns();
        cdl__wait(L, &S->work_cv);
        L->stats.st.wait_slot_ns += cdl__now_ns() - t0;
    }
}

/* complete: the row counts only if nothing reset it meanwhile: this member
 * generation is still in the group and its mark still on the row, and the
 * slot still holds that assignment. Otherwise a drop already put the row
 * back (and took it out of the rows in flight), so nothing changes. The
 * work is counted in the stats either way: it was done. Under mu. */
CDL_PRIVATE void cdl__stream_complete(coordl *L, const cdl__claim *c, const cdl__counters *counters,
                                 const cdl__row_result *r) {
    cdl__stream *S = L->S;
    cdl__slot *sl = &L->ring.slots[c->slot];
    uint32_t *rows = cdl__slot_rows(L, sl);
    cdl__counters_add(L, c->epoch, counters);
    if (cdl__member_current(L) && sl->gen == c->slot_gen && sl->state == CDL_SLOT_FILLING && rows[c->row] == c->mark) {
        if (r->staged) {
            memcpy(L->ring.arena.base + c->data_off, r->staged, c->row_bytes);
            if (r->staged_targets) memcpy(L->ring.arena.base + c->targets_off, r->staged_targets, L->geom.target_row_bytes);
        }
        cdl__slot_ids(L, sl)[c->row] = r->id;
        cdl__slot_labels(L, sl)[c->row] = r->label;
        if (L->geom.box_rows) /* the counts of a row's boxes (boxes: targets area) */
            ((uint32_t *)(void *)(L->ring.arena.base + sl->nboxes_off))[c->row] = r->nboxes;
        if (r->status != COORDL_OK && c->row < sl->err_row) {
            sl->err_row = c->row;
            sl->status = r->status;
            snprintf(sl->errmsg, sizeof sl->errmsg, "%s", r->errmsg);
        }
        rows[c->row] = CDL_ROW_DONE; /* the marks are the truth repair reads: first */
        S->inflight--;
        if (++sl->rows_done == sl->n) cdl__slot_ready(L, sl);
    }
    if (S->paused && S->inflight == 0) cdl__broadcast(L, &S->idle_cv);
    cdl__stream_check(L, "complete");
}

/* The READY slot holding this consumer's next batch, or -1. Slots are
 * mostly assigned in ring order, so the search starts at the slot after
 * the last one taken: a ready batch then costs one slot's lines, not
 * every slot's (issue 23: after the trainer's step they are cold). At
 * most one slot matches, wherever the search starts. Under mu. */
CDL_PRIVATE CDL_HOT int cdl__stream_find(const coordl *L) {
    const uint32_t n = L->ring.nslots;
    const uint32_t first = L->consumer.next_slot < n ? L->consumer.next_slot : 0;
    for (uint32_t k = 0; k < n; k++) {
        const uint32_t s = first + k < n ? first + k : first + k - n;
        const cdl__slot *c = &L->ring.slots[s];
        if (c->state == CDL_SLOT_READY && c->epoch == L->consumer.cur_epoch && c->pos == L->consumer.cur_pos &&
            (c->need_mask & L->member.bit) && !(c->taken_mask & L->member.bit))
            return (int)s;
    }
    return -1;
}

static CDL_HOT void cdl__fill_batch(coordl *L, const cdl__slot *sl, uint32_t slot_index, coordl_batch *out) {
    out->n = sl->n;
    out->data = cdl__slot_data(L, sl);
    out->data_bytes = (size_t)sl->n * sl->row_bytes;
    out->labels = cdl__slot_labels(L, sl);
    out->ids = cdl__slot_ids(L, sl);
    out->targets = L->geom.target_row_bytes && !L->geom.box_rows
        ? (int32_t *)(void *)(L->ring.arena.base + sl->targets_off) : NULL;
    out->boxes = L->geom.box_rows ? (const float *)(const void *)(L->ring.arena.base + sl->targets_off) : NULL;
    out->nboxes = L->geom.box_rows ? (const uint32_t *)(const void *)(L->ring.arena.base + sl->nboxes_off) : NULL;
    out->epoch = sl->epoch;
    out->index = sl->index;
    cdl__row_shape(L, sl->out_w, sl->out_h, &out->c, &out->h, &out->w);
    out->layout = L->cfg.layout;
    out->slot_ = slot_index + 1; /* 0 marks a batch that holds no slot */
    out->gen_ = (uint32_t)sl->gen;
}

/* take: the consumer takes its next batch from slot s. A batch whose rows
 * failed is skipped (released at once) and its status returned. Under mu. */
CDL_PRIVATE CDL_HOT coordl_status cdl__stream_take(coordl *L, uint32_t s, coordl_batch *out) {
    cdl__slot *sl = &L->ring.slots[s];
    L->consumer.cur_pos += sl->n;
    L->consumer.cur_index++;
    L->consumer.next_slot = s + 1 < L->ring.nslots ? s + 1 : 0;
    cdl__epoch_entry(L, sl->epoch)->s.batches++;
    sl->taken_mask |= L->member.bit;
    const coordl_status rc = sl->status;
    if (rc != COORDL_OK) {
        snprintf(L->errmsg, sizeof L->errmsg, "%s", sl->errmsg);
        sl->done_mask |= L->member.bit;
        cdl__slot_maybe_free(L, sl);
    } else {
        L->consumer.held++;
        L->stats.st.batches++;
        cdl__fill_batch(L, sl, s, out);
    }
    cdl__stream_check(L, "take");
    return rc;
}

/* Whether this member still holds batch b: its generation still in the
 * group, the slot READY with b's generation, taken and not yet released
 * by it. What coordl_next_into checks after copying with the lock
 * released: a member dropped meanwhile lost the slot, which may have been
 * refilled while it was copied. Under mu. */
CDL_PRIVATE CDL_HOT int cdl__stream_holds(const coordl *L, const coordl_batch *b) {
    if (b->slot_ == 0 || b->slot_ > L->ring.nslots) return 0;
    const cdl__slot *sl = &L->ring.slots[b->slot_ - 1];
    return cdl__member_current(L) && sl->state == CDL_SLOT_READY && (uint32_t)sl->gen == b->gen_ &&
           (sl->taken_mask & L->member.bit) && !(sl->done_mask & L->member.bit);
}

/* release: only the batch the handle names, slot and generation; a stale
 * copy of a released batch (the slot has moved on), a batch of a dropped
 * member generation, or a second release is a no-op. Returns 1 when it
 * freed the slot and half the ring is free: the caller then wakes one
 * worker once it has unlocked (cdl__signal_unlocked). Under mu. */
CDL_PRIVATE CDL_HOT int cdl__stream_release(coordl *L, const coordl_batch *b) {
    if (b->slot_ == 0 || b->slot_ > L->ring.nslots) return 0;
    cdl__slot *sl = &L->ring.slots[b->slot_ - 1];
    if (!cdl__stream_holds(L, b)) return 0;
    sl->done_mask |= L->member.bit;
    L->consumer.held--;
    const int freed = cdl__slot_free_if_done(L, sl, 0);
    cdl__stream_check(L, "release");
    return freed;
}

/* Recomputes everything that follows from the marks and the member set:
 * marks of member generations no longer in the group are freed, claimed,
 * done and in-flight counts recounted, fully done slots made READY,
 * consumer bits of departed members cleared and slots nobody needs freed.
 * Idempotent; the core of drop and repair. Under mu. */
static void cdl__stream_recount(coordl *L) {
    cdl__stream *S = L->S;
    const uint32_t live = atomic_load(&S->live_mask);
    uint32_t inflight = 0;
    for (uint32_t s = 0; s < L->ring.nslots; s++) {
        cdl__slot *sl = &L->ring.slots[s];
        sl->need_mask &= live;
        sl->taken_mask &= live;
        sl->done_mask &= live;
        if (sl->state == CDL_SLOT_FILLING) {
            uint32_t *rows = cdl__slot_rows(L, sl);
            uint32_t claimed = 0, done = 0;
            for (uint32_t r = 0; r < sl->n; r++) {
                if (cdl__mark_stale(S, rows[r])) rows[r] = CDL_ROW_FREE;
                claimed += rows[r] != CDL_ROW_FREE;
                done += rows[r] == CDL_ROW_DONE;
            }
            sl->rows_claimed = claimed;
            sl->rows_done = done;
            inflight += claimed - done;
            if (done == sl->n) cdl__slot_ready(L, sl);
        } else {
            cdl__slot_maybe_free(L, sl);
        }
    }
    S->inflight = inflight;
    /* a member killed between a slot's state and this count leaves it
     * off: recounted from the states, like the rows */
    uint32_t nfree = 0;
    for (uint32_t s = 0; s < L->ring.nslots; s++) nfree += L->ring.slots[s].state == CDL_SLOT_FREE;
    S->slots_free = nfree;
}

/* drop: member m of generation gen leaves the stream (dropped by another
 * member, or its own close). It gets a new generation and leaves the live
 * set first, so its marks and handles are stale from then on; then the
 * recount frees its claimed rows and clears its consumer bits. A process
 * killed in the middle leaves nothing repair cannot finish. Under mu. */
CDL_PRIVATE void cdl__stream_drop_member(coordl *L, int m, uint64_t gen) {
    cdl__stream *S = L->S;
    if (!cdl__member_is(S, m, gen)) return;
    atomic_fetch_add(&S->members[m].gen, 1);
    atomic_fetch_and(&S->live_mask, ~(1u << m));
    cdl__stream_recount(L);
    cdl__broadcast(L, &S->work_cv);
    cdl__broadcast(L, &S->ready_cv);
    cdl__broadcast(L, &S->idle_cv);
    cdl__stream_check(L, "drop member");
}

/* repair: the lock came back EOWNERDEAD. The dead holder's assignment is
 * finished and the rest recounted from the marks, which every transition
 * writes first. The holder itself (if still that generation) is flagged
 * dead, not dropped here: dropping, and saying so, belongs to the member
 * threads (whichever thread locked next, a query included, only repairs),
 * and one of them drops it within a heartbeat period. */
CDL_PRIVATE void cdl__stream_repair(coordl *L, int dead, uint64_t dead_gen) {
    cdl__stream *S = L->S;
    if (S->assign.slot > 0 && S->assign.slot <= L->ring.nslots) cdl__slot_assign(L);
    S->assign.slot = 0;
    if (dead >= 0 && cdl__member_is(S, dead, dead_gen)) atomic_store(&S->members[dead].died_holding_lock, 1u);
    cdl__stream_recount(L);
    cdl__broadcast(L, &S->work_cv);
    cdl__broadcast(L, &S->ready_cv);
    cdl__broadcast(L, &S->idle_cv);
    cdl__stream_check(L, "repair");
}

/* pause: no new claims; waits until no row is in flight. Under mu. */
CDL_PRIVATE void cdl__stream_pause(coordl *L) {
    L->S->paused = 1;
    cdl__ra_pause(L); /* no new reads of positions about to be dropped */
    while (L->S->inflight > 0) cdl__wait(L, &L->S->idle_cv);
    cdl__stream_check(L, "pause");
}

/* restart: frees every slot not held by the caller (a new generation for
 * each) and restarts the claims at the consumer's position. same_order: the
 * positions from there on hold the items they held before (only the output
 * size changed), so the read-ahead keeps what it has read. Under mu,
 * paused. */
CDL_PRIVATE void cdl__stream_restart(coordl *L, int same_order) {
    for (uint32_t s = 0; s < L->ring.nslots; s++) {
        cdl__slot *sl = &L->ring.slots[s];
        const int held = sl->state == CDL_SLOT_READY && (sl->taken_mask & ~sl->done_mask & L->member.bit);
        if (!held && sl->state != CDL_SLOT_FREE) {
            sl->state = CDL_SLOT_FREE;
            sl->gen++;
            L->S->slots_free++;
        }
    }
    L->S->claim_epoch = L->consumer.cur_epoch;
    L->S->claim_pos = L->consumer.cur_pos;
    L->S->claim_index = L->consumer.cur_index;
    L->S->paused = 0;
    cdl__ra_restart(L, same_order); /* the read-ahead follows the claims */
    cdl__broadcast(L, &L->S->work_cv);
    cdl__stream_check(L, "restart");
}

/* A stream block with a robust mutex and monotonic condition variables;
 * process-shared (with a liveness lock per member) in a group's object. */
CDL_PRIVATE coordl_status cdl__stream_init(cdl__stream *S, int pshared) {
    pthread_mutexattr_t ma;
    pthread_condattr_t ca;
    memset(S, 0, sizeof *S);
    if (pthread_mutexattr_init(&ma) != 0 || pthread_condattr_init(&ca) != 0)
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot initialise the stream's lock");
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pshared) {
        pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
        pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    }
    int e = pthread_mutex_init(&S->mu, &ma);
    for (int m = 0; !e && pshared && m < CDL_MAX_MEMBERS; m++) e = pthread_mutex_init(&S->members[m].alive, &ma);
    if (!e) e = pthread_cond_init(&S->work_cv.cv, &ca);
    if (!e) e = pthread_cond_init(&S->ready_cv.cv, &ca);
    if (!e) e = pthread_cond_init(&S->idle_cv.cv, &ca);
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_destroy(&ca);
    if (e) return cdl__open_fail(COORDL_ERR_NOMEM, "cannot initialise the stream's lock: %s", strerror(e));
    S->cut_epoch = UINT64_MAX;
    S->lock_owner = -1;
    return COORDL_OK;
}

