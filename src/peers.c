/* SPDX-License-Identifier: MIT */
/*
 * peers.c - the partitioned cache over MPI.
 *
 * The partitioned cache. Each rank admits the items of its share of one
 * epoch, the first whole epoch it trains (epoch 0, or the one a seek at
 * open resumes), up to its budget: which rank reads which item is a
 * pure function of the seed, the epoch and the world size, so the ranks
 * cache disjoint parts. Claims past that epoch wait for one map
 * exchange (an MPI_Allreduce over the per-item owner array), after
 * which every rank knows where each cached item lives and nothing more
 * is admitted (spare budget is left unused: the map stays exact). Every
 * rank runs exactly one exchange, at that point or at close, whichever
 * comes first, and only then the closing barrier. From then on, when a
 * slot is assigned, one request per peer asks for the rows that peer
 * holds; the reply lands in the slot's buffer; workers wait for it at
 * most peer_timeout_ms (or until close) and otherwise read storage. All
 * MPI traffic runs on one coordl thread over a duplicate of the
 * trainer's communicator; all its memory comes from the allocator hooks.
 *
 * Owns:  L->peers: who caches which item after epoch 0, the requests in
 *        flight and the replies per slot and row, the send buffers, and the
 *        peer thread
 * Lock:  the stream's lock; admit_epoch is atomic, map_ready a release
 *        store (the I/O threads read both unlocked)
 * One scan per job: cdl__peer_index lets rank 0 alone index the source
 * (scan, or load cfg.index_path) and broadcasts the index image to the
 * other ranks, so N ranks make the storage calls of one; the ranks of a
 * node share one copy of it, in /dev/shm.
 *
 * Calls: status, indexfile, source, lock, sampler, cache (lower layers
 *        only: src/modules.txt; tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "peers_state.h"
#include "peers.h"
#include "status.h"
#include "lock.h"
#include "lock_state.h"
#include "worker_state.h"
#include "sampler.h"
#include "sampler_state.h"
#include "cache.h"
#include "indexfile.h"
#include "source.h"
#include "handle.h"

#define CDL_ADMIT_CLOSED UINT64_MAX

/* Whether a storage read of `epoch` may be admitted into the cache (any
 * thread: the admission epoch moves only while no row is in flight, at a
 * seek, or closes at the exchange, when admitting more is harmless). */
CDL_PRIVATE int cdl__peer_admits(coordl *L, uint64_t epoch) {
    return atomic_load_explicit(&L->peers.admit_epoch, memory_order_relaxed) == epoch;
}

/* Whether the claims, at the end of `epoch`, must wait for the map before
 * moving on: past the admission epoch (or while the exchange runs), rows
 * would miss the peers that hold them. Under mu. */
CDL_PRIVATE int cdl__peer_claim_waits(coordl *L, uint64_t epoch) {
    const uint64_t admit = atomic_load(&L->peers.admit_epoch);
    return L->peers.comm_set && !L->peers.map_ready && (admit == CDL_ADMIT_CLOSED || epoch >= admit);
}

/* Whether rows of `epoch` may be served by peers once the map is known,
 * and it is not known yet: the read-ahead waits before reading them. The
 * admission epoch and those before it are read from storage (the claims
 * reach no later epoch before the map); while the exchange runs, every
 * epoch waits. Without the stream's lock. */
CDL_PRIVATE int cdl__peer_map_pending(coordl *L, uint64_t epoch) {
    if (!L->peers.comm_set || __atomic_load_n(&L->peers.map_ready, __ATOMIC_ACQUIRE)) return 0;
    const uint64_t admit = atomic_load(&L->peers.admit_epoch);
    return admit == CDL_ADMIT_CLOSED || epoch > admit;
}

/* The trainer asks for its first batch (coordl_next, _next_into): from
 * now on the admission epoch moves only by a seek mid-run. Under mu. */
CDL_PRIVATE CDL_HOT void cdl__peer_consumer_started(coordl *L) {
    if (L->peers.comm_set && !L->peers.consumer_started) L->peers.consumer_started = 1;
}

/* coordl_seek before the exchange: the rank caches its share of the first
 * whole epoch from the new position instead (a mid-epoch resume skips
 * the rest of that epoch). After the exchange (or once it began) the map
 * is final. Under mu. */
CDL_PRIVATE void cdl__peer_seek(coordl *L, uint64_t epoch, uint64_t batch) {
    if (!L->peers.comm_set || atomic_load(&L->peers.admit_epoch) == CDL_ADMIT_CLOSED) return;
    atomic_store(&L->peers.admit_epoch, batch == 0 ? epoch : epoch + 1);
}

#ifdef COORDL_MPI
static cdl__remote_row *cdl__peer_rows_of(const coordl *L, uint32_t s) {
    return L->peers.rows + (size_t)s * L->geom.slot_rows_cap;
}
static uint32_t *cdl__peer_asked_of(const coordl *L, uint32_t s) {
    return L->peers.asked + (size_t)s * L->geom.slot_rows_cap;
}

/* A free send buffer of at least `bytes` (the smallest that fits, else one
 * grown), marked FILLING; -1 when memory runs out. Under mu. */
static int cdl__peer_send_get(coordl *L, size_t bytes) {
    int best = -1, any = -1;
    for (size_t i = 0; i < L->peers.nsends; i++) {
        const cdl__peer_send *ps = &L->peers.sends[i];
        if (ps->state != CDL_SEND_FREE) continue;
        if (ps->cap >= bytes && (best < 0 || ps->cap < L->peers.sends[best].cap)) best = (int)i;
        if (any < 0 || ps->cap > L->peers.sends[any].cap) any = (int)i;
    }
    if (best < 0 && any < 0) {
        if (L->peers.nsends == L->peers.sends_cap) {
            size_t ncap = L->peers.sends_cap ? L->peers.sends_cap * 2 : 16;
            cdl__peer_send *q = cdl__realloc(L, L->peers.sends, ncap * sizeof *q);
            if (!q) return -1;
            L->peers.sends = q;
            L->peers.sends_cap = ncap;
        }
        memset(&L->peers.sends[L->peers.nsends], 0, sizeof *L->peers.sends);
        any = (int)L->peers.nsends++;
    }
    const int i = best >= 0 ? best : any;
    cdl__peer_send *ps = &L->peers.sends[i];
    if (!cdl__reserve(L, (void **)&ps->buf, &ps->cap, bytes)) return -1;
    ps->state = CDL_SEND_FILLING;
    return i;
}

/* Non-blocking send of a filled buffer, so no rank ever blocks in a send
 * while its peer does the same. 1: sent. Under mu. */
static int cdl__peer_isend(coordl *L, int i, MPI_Datatype type, size_t count, int dest, int tag) {
    cdl__peer_send *ps = &L->peers.sends[i];
    if (count > INT_MAX || MPI_Isend(ps->buf, (int)count, type, dest, tag, L->peers.comm, &ps->req) != MPI_SUCCESS) {
        ps->state = CDL_SEND_FREE;
        return 0;
    }
    ps->state = CDL_SEND_INFLIGHT;
    return 1;
}

/* Frees the buffers of finished sends for reuse; returns how many are
 * still in flight. Under mu. */
static size_t cdl__peer_sends_retire(coordl *L) {
    size_t inflight = 0;
    for (size_t i = 0; i < L->peers.nsends; i++) {
        cdl__peer_send *ps = &L->peers.sends[i];
        if (ps->state != CDL_SEND_INFLIGHT) continue;
        int done = 0;
        if (MPI_Test(&ps->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 1;
        if (done) ps->state = CDL_SEND_FREE;
        else inflight++;
    }
    return inflight;
}

/* Builds and sends this slot's requests: one message per peer holding
 * some of its rows: [u64 request id][u64 id]..., the id carrying the slot
 * (the reply's tag). Called when the slot is assigned. Under mu. */
CDL_PRIVATE void cdl__peer_request_slot(coordl *L, uint32_t s) {
    if (!L->peers.map_ready) return;
    cdl__slot *sl = &L->ring.slots[s];
    cdl__remote *rm = &L->peers.remote[s];
    cdl__remote_row *rows = cdl__peer_rows_of(L, s);
    uint32_t *asked = cdl__peer_asked_of(L, s);
    const int world = L->cfg.world;
    rm->gen = sl->gen;
    rm->requested = 1;
    rm->used = 0;
    rm->request_ns = cdl__now_ns();
    for (int p = 0; p < world; p++) rm->ask[p].id = rm->ask[p].n = 0;
    /* each row's item and owner once; rows grouped by owner in `asked` */
    cdl__perm perm = cdl__perm_for(L, sl->epoch);
    for (uint32_t r = 0; r < sl->n; r++) {
        cdl__remote_row *row = &rows[r];
        row->id = cdl__item_at(L, &perm, sl->pos + r);
        const int owner = L->peers.owner[row->id];
        row->state = owner >= 0 && owner != L->cfg.rank ? CDL_REMOTE_WAIT : CDL_REMOTE_NONE;
        if (row->state == CDL_REMOTE_WAIT) rm->ask[owner].n++;
    }
    uint32_t first = 0;
    for (int p = 0; p < world; p++) {
        rm->ask[p].first = first;
        first += rm->ask[p].n;
        rm->ask[p].n = 0;
    }
    for (uint32_t r = 0; r < sl->n; r++)
        if (rows[r].state == CDL_REMOTE_WAIT) {
            cdl__remote_ask *a = &rm->ask[L->peers.owner[rows[r].id]];
            asked[a->first + a->n++] = r;
        }
    for (int p = 0; p < world; p++) {
        cdl__remote_ask *a = &rm->ask[p];
        if (!a->n) continue;
        const int i = cdl__peer_send_get(L, (1 + (size_t)a->n) * sizeof(uint64_t));
        uint64_t *msg = i >= 0 ? (uint64_t *)(void *)L->peers.sends[i].buf : NULL;
        if (msg) {
            L->peers.request_seq = (L->peers.request_seq + 1) & 0xffffffffffffull;
            if (!L->peers.request_seq) L->peers.request_seq = 1; /* 0 means none */
            msg[0] = ((uint64_t)s << 48) | L->peers.request_seq;
            for (uint32_t k = 0; k < a->n; k++) msg[1 + k] = rows[asked[a->first + k]].id;
        }
        if (msg && cdl__peer_isend(L, i, MPI_UINT64_T, 1 + (size_t)a->n, p, CDL_TAG_REQ)) {
            a->id = msg[0];
            L->peers.outstanding++;
        } else { /* unsent: those rows simply come from storage, at once */
            if (i >= 0) L->peers.sends[i].state = CDL_SEND_FREE;
            for (uint32_t k = 0; k < a->n; k++) rows[asked[a->first + k]].state = CDL_REMOTE_NONE;
            a->n = 0;
        }
    }
}

/* Answers one request: [u64 request id][u32 n][per item: u64 id, u32 len]
 * then the bytes, tagged with the requester's slot; len 0 when this rank
 * does not hold the item (or holds no cache at all). */
static void cdl__peer_serve(coordl *L, int source, int count) {
    if (count < 1 || !cdl__reserve(L, (void **)&L->peers.rx, &L->peers.rxcap,
                                   (size_t)count * (sizeof(uint64_t) + sizeof(uint32_t))))
        return; /* left queued: the requester falls back after peer_timeout_ms */
    uint64_t *ids = (uint64_t *)(void *)L->peers.rx;
    MPI_Recv(ids, count, MPI_UINT64_T, source, CDL_TAG_REQ, L->peers.comm, MPI_STATUS_IGNORE);
    cdl__test_hook(L, "peer_serve");
    const uint32_t n = (uint32_t)(count - 1);
    const uint32_t slot = (uint32_t)(ids[0] >> 48);
    if (slot >= 1024) return; /* not a request coordl sent */
    size_t bytes = 12 + (size_t)n * 12;
    /* sized by each entry's room, which a JPEG rewrite (jpeg.c) never
     * outgrows; each item then copied under the server's one reader
     * record. The rooms live in the request buffer behind the ids. */
    uint32_t *rooms = (uint32_t *)(void *)(L->peers.rx + (size_t)count * sizeof(uint64_t));
    for (uint32_t i = 0; i < n; i++) {
        rooms[i] = L->cache.entries && ids[1 + i] < L->index.num_items ? cdl__cache_room(L, ids[1 + i]) : 0;
        bytes += rooms[i];
    }
    /* every request gets exactly one reply (closing counts on it): short
     * of memory for the items, a reply holding none of them */
    cdl__lock(L); /* the send buffers are shared with the requests, under mu */
    int si = cdl__peer_send_get(L, bytes);
    uint32_t nreply = n;
    if (si < 0) si = cdl__peer_send_get(L, bytes = 12), nreply = 0;
    cdl__unlock(L);
    cdl__u8 *out = si < 0 ? NULL : L->peers.sends[si].buf; /* FILLING: ours alone until sent */
    size_t at = 12 + (size_t)nreply * 12;
    uint64_t served = 0;
    if (!out) return; /* not even that: the requester gives up after peer_timeout_ms */
    memcpy(out, &ids[0], 8);
    memcpy(out + 8, &nreply, 4);
    _Atomic uint32_t *reader = cdl__cache_reader(L, CDL_READER_PEERS);
    for (uint32_t i = 0; i < nreply; i++) {
        uint32_t len = 0;
        const cdl__u8 *p = rooms[i] ? cdl__cache_acquire_minio(L, reader, ids[1 + i], &len, NULL, NULL) : NULL;
        if (!p || len > rooms[i]) len = 0; /* admitted since the sizing: not in this reply */
        memcpy(out + 12 + (size_t)i * 12, &ids[1 + i], 8);
        memcpy(out + 12 + (size_t)i * 12 + 8, &len, 4);
        if (len) { memcpy(out + at, p, len); at += len; served++; }
        if (p) cdl__cache_release_minio(reader);
    }
    cdl__lock(L);
    if (cdl__peer_isend(L, si, MPI_BYTE, at, source, CDL_TAG_RESP + (int)slot)) L->stats.st.peer_served += served;
    cdl__unlock(L);
}

/* Files the rows of a reply received at rm->buf + at0, if it answers the
 * request the slot is still waiting for. A reply that answers it but does
 * not parse fails its rows (they come from storage at once). Under mu. */
static void cdl__peer_file_reply(coordl *L, uint32_t s, int source, size_t at0, size_t count) {
    cdl__remote *rm = &L->peers.remote[s];
    cdl__slot *sl = &L->ring.slots[s];
    cdl__remote_ask *a = &rm->ask[source];
    uint64_t req = 0;
    uint32_t n = 0;
    const cdl__u8 *in = rm->buf + at0;
    if (count >= 12) {
        memcpy(&req, in, 8);
        memcpy(&n, in + 8, 4);
    }
    if (!rm->requested || !a->id || a->id != req || sl->gen != rm->gen || sl->state != CDL_SLOT_FILLING) return;
    cdl__remote_row *rows = cdl__peer_rows_of(L, s);
    const uint32_t *asked = cdl__peer_asked_of(L, s);
    int ok = n == a->n && (size_t)n * 12 + 12 <= count;
    size_t at = 12 + (size_t)n * 12;
    for (uint32_t k = 0; k < a->n; k++) {
        cdl__remote_row *row = &rows[asked[a->first + k]];
        uint64_t id = 0;
        uint32_t len = 0;
        if (ok) {
            memcpy(&id, in + 12 + (size_t)k * 12, 8);
            memcpy(&len, in + 12 + (size_t)k * 12 + 8, 4);
            ok = id == row->id && len <= count - at && at0 + at + len <= UINT32_MAX; /* offsets are 32-bit */
        }
        if (ok && len) {
            row->off = (uint32_t)(at0 + at);
            row->len = len;
            row->state = CDL_REMOTE_ARRIVED;
            at += len;
        } else {
            row->state = CDL_REMOTE_FAILED;
        }
    }
    a->id = 0;
    rm->used = at0 + count;
    cdl__broadcast(L, &L->S->ready_cv); /* workers wait there for peers */
}

/* Receives one reply straight into its slot's buffer (only this thread
 * grows that buffer or writes past `used`, and workers read only rows
 * already filed), then files it. */
static void cdl__peer_take_reply(coordl *L, int source, int tag, int count) {
    const uint32_t s = (uint32_t)(tag - CDL_TAG_RESP);
    cdl__u8 *dst = NULL;
    size_t at0 = 0;
    cdl__lock(L);
    if (s < L->ring.nslots && count >= 0) {
        cdl__remote *rm = &L->peers.remote[s];
        if (cdl__reserve(L, (void **)&rm->buf, &rm->cap, rm->used + (size_t)count + 1)) {
            at0 = rm->used;
            dst = rm->buf + at0;
        }
    }
    cdl__unlock(L);
    if (!dst) { /* consume it anyway, into the request buffer (else retried) */
        if (count < 0 || !cdl__reserve(L, (void **)&L->peers.rx, &L->peers.rxcap, (size_t)count + 1)) return;
        MPI_Recv(L->peers.rx, count, MPI_BYTE, source, tag, L->peers.comm, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(dst, count, MPI_BYTE, source, tag, L->peers.comm, MPI_STATUS_IGNORE);
    }
    cdl__lock(L);
    if (dst) cdl__peer_file_reply(L, s, source, at0, (size_t)count);
    if (L->peers.outstanding) L->peers.outstanding--;
    cdl__unlock(L);
}

/* The admission epoch has been prepared: the trainer has asked for a
 * batch (so a resume's coordl_seek, which comes before it, has set the
 * epoch), the claims have moved past it and no slot of it or before is
 * still being filled. Without the first condition a rank whose workers
 * prepared its share of epoch 0 before its trainer's seek would enter
 * that share, its peers the share of the epoch resumed at, and items in
 * neither share would come from storage in every epoch. Under mu. */
static int cdl__peer_share_prepared(coordl *L) {
    const uint64_t E = atomic_load(&L->peers.admit_epoch);
    const cdl__stream *S = L->S;
    if (E == CDL_ADMIT_CLOSED) return 1;
    if (!L->peers.consumer_started) return 0;
    if (S->claim_epoch < E || (S->claim_epoch == E && S->claim_pos < cdl__epoch_end(L, E))) return 0;
    for (uint32_t s = 0; s < L->ring.nslots; s++)
        if (L->ring.slots[s].state == CDL_SLOT_FILLING && L->ring.slots[s].epoch <= E) return 0;
    return 1;
}

/* The map exchange, run exactly once by every rank's peer thread. Each
 * rank enters its rank for the items it holds and INT32_MAX for the rest;
 * one MPI_Allreduce(MIN) in place leaves the lowest rank holding each
 * item. It needs no memory beyond the map allocated at open, so it cannot
 * fail for want of it; if MPI fails, the map is empty (every row from
 * storage), never a guess. */
static void cdl__peer_exchange_map(coordl *L) {
    int32_t *owner = L->peers.owner;
    cdl__lock(L);
    atomic_store(&L->peers.admit_epoch, CDL_ADMIT_CLOSED); /* what is cached now is final */
    cdl__unlock(L);
    for (uint64_t id = 0; id < L->index.num_items; id++)
        owner[id] = L->cache.entries && cdl__cache_holds(L, id) ? L->cfg.rank : INT32_MAX;
    int ok = 1;
    const uint64_t chunk = 1u << 30; /* counts are ints; every rank has the same num_items */
    for (uint64_t at = 0; at < L->index.num_items; at += chunk) {
        const uint64_t n = L->index.num_items - at < chunk ? L->index.num_items - at : chunk;
        ok &= MPI_Allreduce(MPI_IN_PLACE, owner + at, (int)n, MPI_INT32_T, MPI_MIN, L->peers.comm) == MPI_SUCCESS;
    }
    for (uint64_t id = 0; id < L->index.num_items; id++)
        if (!ok || owner[id] == INT32_MAX) owner[id] = -1;
    if (!ok) cdl__log(L, COORDL_LOG_WARN, "mpi: the cache map exchange failed; every miss reads storage");
    cdl__lock(L);
    __atomic_store_n(&L->peers.map_ready, 1, __ATOMIC_RELEASE); /* the read-ahead reads it without mu */
    cdl__broadcast(L, &L->S->work_cv); /* claims past the admission epoch */
    cdl__unlock(L);
}

/* The peer thread: serves requests, files replies, runs the exchange, and
 * closes in three steps, so that no message is left half-way:
 * (1) close stopped this rank's workers: it sends no new request; it
 *     waits for the replies to the requests it sent, serving meanwhile;
 * (2) it enters the barrier and goes on serving until every rank is in;
 *     then no rank has a request unanswered, so no message is left to
 *     send or receive;
 * (3) it waits for its own sends to complete and leaves.
 * A peer that never answers is waited for peer_timeout_ms in each of (1)
 * and (3); then the rank leaves anyway (its buffers in flight left to
 * MPI) rather than hang. */
static void *cdl__peer_main(void *arg) {
    coordl *L = arg;
    int exchanged = 0, barrier_started = 0, barrier_done = 0, idle_us = 100;
    uint64_t closing_ns = 0;
    MPI_Request barrier = MPI_REQUEST_NULL;
    pthread_setname_np(pthread_self(), "coordl-peer");
    for (;;) {
        int flag = 0, handled = 0;
        MPI_Status st;
        /* serve and take replies */
        for (int k = 0; k < 64; k++) {
            if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, L->peers.comm, &flag, &st) != MPI_SUCCESS || !flag) break;
            handled++;
            int count = 0;
            if (st.MPI_TAG == CDL_TAG_REQ) {
                MPI_Get_count(&st, MPI_UINT64_T, &count);
                cdl__peer_serve(L, st.MPI_SOURCE, count);
            } else if (st.MPI_TAG >= CDL_TAG_RESP && st.MPI_TAG < CDL_TAG_RESP + 1024) {
                MPI_Get_count(&st, MPI_BYTE, &count);
                cdl__peer_take_reply(L, st.MPI_SOURCE, st.MPI_TAG, count);
            } else {
                break;
            }
        }
        cdl__lock(L);
        const size_t inflight = cdl__peer_sends_retire(L);
        const uint64_t outstanding = L->peers.outstanding;
        const int closing = L->peers.closing;
        const int need_map = !exchanged && (closing || cdl__peer_share_prepared(L));
        cdl__unlock(L);
        /* every rank exchanges exactly once, before the barrier, however
         * far it got: a rank closing early contributes what it holds */
        if (need_map) {
            cdl__peer_exchange_map(L);
            exchanged = 1;
        }
        if (closing) {
            const uint64_t now = cdl__now_ns(), bound = (uint64_t)L->cfg.peer_timeout_ms * 1000000ull;
            if (!closing_ns) closing_ns = now;
            if (!barrier_started && (outstanding == 0 || now - closing_ns > bound)) {
                if (MPI_Ibarrier(L->peers.comm, &barrier) != MPI_SUCCESS) break;
                barrier_started = 1;
                closing_ns = now; /* step (3)'s bound counts from here */
            }
            if (barrier_started && !barrier_done && MPI_Test(&barrier, &barrier_done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                break;
            if (barrier_done && ((inflight == 0 && outstanding == 0) || now - closing_ns > 2 * bound)) break;
        }
        /* poll fast while traffic flows, back off to 2 ms when idle (an
         * idle 200 us poll cost 4-10% of a core per rank) */
        idle_us = handled || need_map || closing ? 100 : (idle_us < 2000 ? idle_us * 2 : 2000);
        usleep((useconds_t)idle_us);
    }
    return NULL;
}

/* Worker side: the row's bytes from a peer, if this row was asked of one,
 * waiting at most peer_timeout_ms after the request, and not past close.
 * 1: got them; 0: read storage. */
CDL_PRIVATE int cdl__peer_fetch(cdl__worker *W, uint64_t id, cdl__bytes *out) {
    coordl *L = W->L;
    if (!L->peers.comm_set || !L->peers.remote) return 0;
    const uint32_t s = W->claim->slot, r = W->claim->row;
    cdl__slot *sl = &L->ring.slots[s];
    cdl__remote *rm = &L->peers.remote[s];
    int got = 0, asked = 0;
    cdl__lock(L);
    /* the row array is re-read after each wait: only coordl_set moves it,
     * and never while a row is in flight */
#define CDL_ROW (cdl__peer_rows_of(L, s)[r])
#define CDL_SAME_BATCH (rm->requested && rm->gen == sl->gen)
    if (CDL_SAME_BATCH && CDL_ROW.state != CDL_REMOTE_NONE && CDL_ROW.id == id) {
        asked = 1;
        const uint64_t deadline = rm->request_ns + (uint64_t)L->cfg.peer_timeout_ms * 1000000ull;
        while (CDL_SAME_BATCH && CDL_ROW.state == CDL_REMOTE_WAIT && !L->pool.stop && cdl__now_ns() < deadline)
            cdl__wait_ms(L, &L->S->ready_cv, 5);
        if (CDL_SAME_BATCH && CDL_ROW.state == CDL_REMOTE_ARRIVED) {
            const size_t len = CDL_ROW.len;
            /* copy out: the slot's reply buffer may grow while we decode */
            if (cdl__reserve(L, (void **)&W->readbuf, &W->readcap, len + 16)) {
                memcpy(W->readbuf, rm->buf + CDL_ROW.off, len);
                out->p = W->readbuf;
                out->len = len;
                got = 1;
            }
        }
    }
#undef CDL_SAME_BATCH
#undef CDL_ROW
    if (got) {
        W->row.peer_hits++;
        W->row.peer_bytes += out->len;
    } else if (asked) {
        W->row.peer_fallbacks++;
    }
    cdl__unlock(L);
    return got;
}

CDL_PRIVATE coordl_status cdl__peer_open(coordl *L) {
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
        return cdl__open_fail(COORDL_ERR_UNSUPPORTED, "mpi_comm: coordl serves peers from its own thread and needs "
                              "MPI_THREAD_MULTIPLE; initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)");
    if (MPI_Comm_dup(*(const MPI_Comm *)L->cfg.mpi_comm, &L->peers.comm) != MPI_SUCCESS)
        return cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: MPI_Comm_dup failed");
    L->peers.comm_set = 1;
    /* errors come back as codes on this communicator (a failed send means
     * storage reads), never as an abort of the trainer's job */
    MPI_Comm_set_errhandler(L->peers.comm, MPI_ERRORS_RETURN);
    int rank = 0, world = 1;
    MPI_Comm_rank(L->peers.comm, &rank);
    MPI_Comm_size(L->peers.comm, &world);
    L->cfg.rank = rank;
    L->cfg.world = world;
    /* ranks sharing this node, for the default placement */
    MPI_Comm node;
    if (MPI_Comm_split_type(L->peers.comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &L->peers.node_rank);
        MPI_Comm_size(node, &L->peers.node_ranks);
        MPI_Comm_free(&node);
    }
    return COORDL_OK;
}

/* Collective, at open: rank 0 indexes the source; a tar-shard index (an
 * image: indexfile.c) is broadcast and every other rank adopts it,
 * touching no storage; any other source is indexed by each rank (only
 * tar shards have an image). A failure on rank 0, or on any rank while
 * adopting, fails every rank's open. */
#define CDL_PEER_BCAST_CHUNK ((uint64_t)1 << 30)
static coordl_status cdl__peer_index_per_node(coordl *L, size_t n);
CDL_PRIVATE coordl_status cdl__peer_index(coordl *L) {
    const int root = L->cfg.rank == 0;
    /* box labels are read by every rank from its own scan (the index image
     * holds no .txt members; the ranks compare the labels' hash at open) */
    if (L->cfg.labels == COORDL_LABELS_BOXES) return cdl__index_source(L);
    uint64_t head[3] = {0, 0, 0}; /* status, an image follows, its bytes */
    char msg[CDL_ERRMSG_MAX];
    coordl_status rc = COORDL_OK;
    memset(msg, 0, sizeof msg);
    if (root) {
        rc = cdl__index_source(L);
        head[0] = (uint64_t)(int64_t)rc;
        head[1] = rc == COORDL_OK && L->index.image;
        head[2] = head[1] ? L->index.image_len : 0;
        snprintf(msg, sizeof msg, "%s", cdl__open_errmsg);
    }
    if (MPI_Bcast(head, 3, MPI_UINT64_T, 0, L->peers.comm) != MPI_SUCCESS)
        return cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: cannot receive the index from rank 0 (MPI_Bcast failed)");
    if ((coordl_status)(int64_t)head[0] != COORDL_OK) {
        MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, 0, L->peers.comm);
        msg[sizeof msg - 1] = '\0';
        if (root) return rc;
        return cdl__open_fail((coordl_status)(int64_t)head[0], "mpi_comm: rank 0 could not index the source: %s", msg);
    }
    if (!head[1]) return root ? COORDL_OK : cdl__index_source(L);
    return cdl__peer_index_per_node(L, (size_t)head[2]);
}

/* Sends the n-byte image at p from rank 0 of comm to its other ranks. */
static int cdl__peer_bcast_bytes(cdl__u8 *p, size_t n, MPI_Comm comm) {
    for (uint64_t at = 0; at < n; at += CDL_PEER_BCAST_CHUNK) {
        const uint64_t k = n - at < CDL_PEER_BCAST_CHUNK ? n - at : CDL_PEER_BCAST_CHUNK;
        if (MPI_Bcast(p + at, (int)k, MPI_BYTE, 0, comm) != MPI_SUCCESS) return 0;
    }
    return 1;
}

/* A node's copy of the image: written by its first rank to a file in
 * /dev/shm that every rank of the node maps, then unlinked once all have
 * (the mappings stay; nothing is left behind, whatever happens later).
 * 1 and the mapping in *m on success; 0 (errno-style why) when the file
 * cannot be made: the node then falls back to a copy per rank. */
static int cdl__peer_node_file(const coordl *L, const cdl__u8 *p, size_t n, char *name, size_t cap, void **m) {
    *m = NULL;
    snprintf(name, cap, "/dev/shm/coordl-mpi-%ld-%lx.index", (long)getpid(), (unsigned long)(uintptr_t)L);
    const int fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return 0;
    size_t at = 0;
    while (at < n) {
        const ssize_t w = write(fd, p + at, n - at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        at += (size_t)w;
    }
    void *map = at == n ? mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (map == MAP_FAILED) { /* /dev/shm full: ENOSPC */
        unlink(name);
        return 0;
    }
    *m = map;
    return 1;
}

/* The image reaches each node once (rank 0 to the first rank of every
 * node, over MPI), and the ranks of a node share one copy of it: the
 * node's first rank writes it to /dev/shm and every rank of the node maps
 * that file and reads its items in place (MPI-3's shared-memory
 * communicator says which ranks share a node). Where the file cannot be
 * written (a full /dev/shm), the node's first rank sends each rank its own
 * copy, as before. Collective over the trainer's communicator. */
static coordl_status cdl__peer_index_per_node(coordl *L, size_t n) {
    const int root = L->cfg.rank == 0;
    MPI_Comm node = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
    int node_rank = 0;
    if (MPI_Comm_split_type(L->peers.comm, MPI_COMM_TYPE_SHARED, L->cfg.rank, MPI_INFO_NULL, &node) != MPI_SUCCESS ||
        MPI_Comm_rank(node, &node_rank) != MPI_SUCCESS ||
        MPI_Comm_split(L->peers.comm, node_rank == 0 ? 0 : MPI_UNDEFINED, L->cfg.rank, &leaders) != MPI_SUCCESS) {
        if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
        return cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: cannot group the ranks by node (MPI_Comm_split_type failed)");
    }
    const int leader = node_rank == 0; /* rank 0 leads its node: the ranks are ordered by rank */
    coordl_status rc = COORDL_OK;
    /* 1. rank 0 to every node's first rank */
    cdl__u8 *p = root ? (cdl__u8 *)L->index.image : leader ? cdl__malloc(L, n ? n : 1) : NULL;
    int ok = !leader || p != NULL, all = 0;
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, L->peers.comm) != MPI_SUCCESS || !all) {
        rc = cdl__open_fail(ok ? COORDL_ERR_PEER : COORDL_ERR_NOMEM, "mpi_comm: %s (%llu bytes)",
                            ok ? "a rank has no memory for the index" : "no memory for the index",
                            (unsigned long long)n);
        if (leader && !root) cdl__free(L, p);
        goto out;
    }
    if (leader) ok = cdl__peer_bcast_bytes(p, n, leaders);
    /* 2. the node's copy, named to the node's ranks ("" when not made) */
    char name[128] = "";
    void *m = NULL;
    if (leader && ok && !cdl__peer_node_file(L, p, n, name, sizeof name, &m)) {
        cdl__log(L, COORDL_LOG_WARN, "mpi: cannot write the index to /dev/shm (%s); each rank of this node gets "
                 "its own copy", strerror(errno));
        name[0] = '\0';
    }
    /* the node follows its first rank: whether it has the image, and the
     * file's name */
    int leader_ok = ok;
    if (MPI_Bcast(&leader_ok, 1, MPI_INT, 0, node) != MPI_SUCCESS ||
        MPI_Bcast(name, (int)sizeof name, MPI_CHAR, 0, node) != MPI_SUCCESS)
        leader_ok = 0;
    ok = ok && leader_ok;
    name[sizeof name - 1] = '\0';
    if (!leader && ok && name[0]) { /* 3a. map the node's copy */
        const int fd = open(name, O_RDONLY | O_CLOEXEC);
        struct stat sb;
        if (fd >= 0 && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size == n) m = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
        if (fd >= 0) close(fd);
        if (m == MAP_FAILED) m = NULL;
        ok = m != NULL;
        if (!ok) rc = cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: cannot map the node's index %s: %s", name, strerror(errno));
    } else if (ok && !name[0]) { /* 3b. the node's first rank sends each its copy */
        if (!leader) p = cdl__malloc(L, n ? n : 1);
        int mine = leader || p != NULL, node_all = 0;
        ok = MPI_Allreduce(&mine, &node_all, 1, MPI_INT, MPI_MIN, node) == MPI_SUCCESS && node_all &&
             cdl__peer_bcast_bytes(p, n, node);
        if (!mine) rc = cdl__open_fail(COORDL_ERR_NOMEM, "mpi_comm: no memory for the index (%llu bytes)",
                                       (unsigned long long)n);
    }
    /* 4. adopt: the mapping (one copy per node), else the rank's own copy */
    if (ok && m) {
        rc = cdl__index_from_shared(L, m, n); /* rank 0: replaces its own image */
        if (rc != COORDL_OK) munmap(m, n);
        if (leader && !root) cdl__free(L, p);
    } else if (ok && !root) {
        rc = cdl__index_from_image(L, p, n);
        if (rc != COORDL_OK) cdl__free(L, p);
    } else if (!root) {
        cdl__free(L, p); /* NULL, or this rank's copy */
        if (m) munmap(m, n);
        if (rc == COORDL_OK) rc = cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: the index broadcast from rank 0 failed");
    }
    ok = rc == COORDL_OK;
    /* every rank of the node has mapped it (or failed): the name goes */
    MPI_Barrier(node);
    if (leader && name[0]) unlink(name);
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, L->peers.comm) != MPI_SUCCESS || !all)
        rc = rc != COORDL_OK ? rc : cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: another rank could not adopt the "
                                                   "index rank 0 sent (see its log)");
out:
    if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
    MPI_Comm_free(&node);
    return rc;
}

/* Collective: every rank checks that all index the same dataset (the map
 * is by item id), then allocates the map and the per-slot bookkeeping and
 * starts the peer thread. */
CDL_PRIVATE coordl_status cdl__peer_start(coordl *L) {
    /* box labels are read by each rank at open: their hash too */
    uint64_t mine[3] = {L->index.num_items, L->index.dataset_bytes, L->index.boxes.hash}, lo[3], hi[3];
    if (MPI_Allreduce(mine, lo, 3, MPI_UINT64_T, MPI_MIN, L->peers.comm) != MPI_SUCCESS ||
        MPI_Allreduce(mine, hi, 3, MPI_UINT64_T, MPI_MAX, L->peers.comm) != MPI_SUCCESS)
        return cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: cannot compare the ranks' datasets (MPI_Allreduce failed)");
    if (lo[2] != hi[2])
        return cdl__open_fail(COORDL_ERR_PEER, "source: the ranks read different box labels (labels = "
                              "COORDL_LABELS_BOXES); every rank must see the same label files");
    if (lo[0] != hi[0] || lo[1] != hi[1])
        return cdl__open_fail(COORDL_ERR_PEER, "source: the ranks index different datasets (%llu-%llu items, "
                              "%llu-%llu bytes); every rank must see the same files",
                              (unsigned long long)lo[0], (unsigned long long)hi[0], (unsigned long long)lo[1],
                              (unsigned long long)hi[1]);
    if (L->ring.nslots > 1024)
        return cdl__open_fail(COORDL_ERR_INVALID, "prefetch_batches: at most 1024 with mpi_comm");
    L->peers.owner = cdl__malloc(L, (size_t)L->index.num_items * sizeof *L->peers.owner);
    if (!L->peers.owner || !L->peers.remote) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the peer map");
    for (uint32_t s = 0; s < L->ring.nslots; s++) {
        cdl__remote *rm = &L->peers.remote[s]; /* allocated (zeroed) with the ring */
        rm->ask = cdl__calloc(L, (size_t)L->cfg.world, sizeof *rm->ask);
        if (!rm->ask) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the peer map");
    }
    if (pthread_create(&L->peers.thread, NULL, cdl__peer_main, L) != 0)
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot start the peer thread");
    L->peers.thread_started = 1;
    return COORDL_OK;
}

CDL_PRIVATE void cdl__peer_close(coordl *L) {
    if (L->peers.thread_started) {
        cdl__lock(L);
        L->peers.closing = 1;
        cdl__unlock(L);
        pthread_join(L->peers.thread, NULL);
        L->peers.thread_started = 0;
    }
    for (size_t i = 0; i < L->peers.nsends; i++) {
        if (L->peers.sends[i].state == CDL_SEND_INFLIGHT) {
            /* only after an MPI error ended the thread: MPI may still read
             * the buffer, so it is left to it rather than freed */
            MPI_Request_free(&L->peers.sends[i].req);
            cdl__log(L, COORDL_LOG_WARN, "mpi: a send was still in flight at close; its buffer is not freed");
            continue;
        }
        cdl__free(L, L->peers.sends[i].buf);
    }
    cdl__free(L, L->peers.sends);
    cdl__free(L, L->peers.rx);
    if (L->peers.remote) /* the arrays themselves go with the ring (cdl__ring_free) */
        for (uint32_t s = 0; s < L->ring.nslots; s++) {
            cdl__free(L, L->peers.remote[s].buf);
            cdl__free(L, L->peers.remote[s].ask);
            L->peers.remote[s].buf = NULL;
            L->peers.remote[s].ask = NULL;
            L->peers.remote[s].requested = 0;
        }
    cdl__free(L, L->peers.owner);
    L->peers.owner = NULL;
    if (L->peers.comm_set) MPI_Comm_free(&L->peers.comm);
    L->peers.comm_set = 0;
}
#endif /* COORDL_MPI */

