/* SPDX-License-Identifier: MIT */
/*
 * lock.c - the stream's shared state and its lock.
 *
 * Owns:  the types of the stream's shared state (cdl__stream, cdl__slot,
 *        cdl__member, cdl__cond), the lock's owner fields in *L->S, and the
 *        waits and wakes on its conditions
 * Lock:  the stream's robust mutex itself (S->mu); in a group it is
 *        process-shared. On EOWNERDEAD it runs L->lock_repair (the stream's
 *        repair, set at open) before marking the mutex consistent
 * Calls: status (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */
#include "platform.h"
#include "lock_state.h"
#include "lock.h"
#include "status.h"
#include "handle.h"

/* --- the stream's lock -------------------------------------------------
 * One robust mutex guards the stream (claims, slots, members). In a group
 * it is shared by processes: a thread killed while holding it leaves it
 * EOWNERDEAD, and the next locker runs the stream's repair transition
 * (stream.c) before marking it consistent. Taking the lock does nothing
 * else: heartbeats, liveness and reaping belong to the group's member
 * thread (group.c), so a thread that only queries never drops anyone.
 * The repair transition belongs to the stream, a layer above: open sets
 * L->lock_repair to it, so this module never calls up. */

CDL_PRIVATE void cdl__lock_acquired(coordl *L, int e) {
    cdl__stream *S = L->S;
    const int dead = S->lock_owner;
    const uint64_t dead_gen = S->lock_owner_gen;
    S->lock_owner = L->member.me;
    S->lock_owner_gen = L->member.my_gen;
#ifdef COORDL_DEBUG
    S->lock_tid = cdl__gettid();
#endif
    if (e == EOWNERDEAD) {
        /* the holder died mid-transition: what it may have left
         * half-done is recomputed, and it is flagged for the member
         * threads to drop (if still that generation) */
        L->lock_repair(L, dead, dead_gen);
        pthread_mutex_consistent(&S->mu);
    }
}

CDL_PRIVATE void cdl__lock(coordl *L) { cdl__lock_acquired(L, pthread_mutex_lock(&L->S->mu)); }

CDL_PRIVATE void cdl__unlock(coordl *L) {
    L->S->lock_owner = -1;
#ifdef COORDL_DEBUG
    L->S->lock_tid = 0;
#endif
    pthread_mutex_unlock(&L->S->mu);
}

/* Waits on a stream condition for at most ms milliseconds (ms < 0: no
 * bound; a group always bounds it at 50 ms, so a waiter rechecks even if a
 * wake-up went to a process that died). */
CDL_PRIVATE void cdl__wait_ms(coordl *L, cdl__cond *c, int ms) {
    int e = 0;
    if (L->cfg.group) {
        const uint32_t seen = atomic_load(&c->seq);
        if (ms < 0 || ms > 50) ms = 50;
        cdl__unlock(L);
#ifdef __linux__
        struct timespec rel = {0, (long)ms * 1000000L};
        syscall(SYS_futex, (uint32_t *)&c->seq, FUTEX_WAIT, seen, &rel, NULL, 0);
#else
        (void)seen;
        usleep((useconds_t)ms * 1000);
#endif
        e = pthread_mutex_lock(&L->S->mu);
    } else if (ms < 0) {
        L->S->lock_owner = -1;
        e = pthread_cond_wait(&c->cv, &L->S->mu);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        L->S->lock_owner = -1;
        e = pthread_cond_timedwait(&c->cv, &L->S->mu, &ts);
        if (e == ETIMEDOUT) e = 0;
    }
    cdl__lock_acquired(L, e);
}

CDL_PRIVATE void cdl__wait(coordl *L, cdl__cond *c) { cdl__wait_ms(L, c, -1); }

/* Wakes waiters of c: all of them, or (cdl__signal) at most one. Called
 * with the mutex held, which is what makes the sequence word race-free. */
static void cdl__wake(coordl *L, cdl__cond *c, int all) {
    if (L->cfg.group) {
        atomic_fetch_add(&c->seq, 1u);
#ifdef __linux__
        syscall(SYS_futex, (uint32_t *)&c->seq, FUTEX_WAKE, all ? INT_MAX : 1, NULL, NULL, 0);
#endif
    } else if (all) {
        pthread_cond_broadcast(&c->cv);
    } else {
        pthread_cond_signal(&c->cv);
    }
}

CDL_PRIVATE void cdl__broadcast(coordl *L, cdl__cond *c) { cdl__wake(L, c, 1); }
CDL_PRIVATE void cdl__signal(coordl *L, cdl__cond *c) { cdl__wake(L, c, 0); }

/* Wakes at most one waiter of c after the caller has unlocked (a state
 * change made under the lock): a waiter that checked the state before the
 * change either sees the new sequence word and does not sleep, or sleeps
 * and is woken; one that locks after the change sees it. */
CDL_PRIVATE void cdl__signal_unlocked(coordl *L, cdl__cond *c) {
    if (L->cfg.group) {
        atomic_fetch_add(&c->seq, 1u);
#ifdef __linux__
        syscall(SYS_futex, (uint32_t *)&c->seq, FUTEX_WAKE, 1, NULL, NULL, 0);
#endif
    } else {
        pthread_cond_signal(&c->cv);
    }
}

/* ---- robust mutexes: the one way to take them -------------------------
 * Every robust, process-shared mutex of a group (the stream's, each
 * member's liveness lock, a retired object's) is taken through these two,
 * so EOWNERDEAD is handled in one place: the stream's own through
 * cdl__lock_acquired (which repairs the stream and records the owner),
 * any other through cdl__mutex_held.
 *
 * cdl__mutex_lock_until: takes mu waiting at most until deadline_ns
 * (cdl__now_ns): a mutex found in /dev/shm may say "held" forever
 * (damaged, or its holder stopped). Returns pthread's result (0,
 * EOWNERDEAD, ETIMEDOUT, ...). */
CDL_PRIVATE int cdl__mutex_lock_until(pthread_mutex_t *mu, uint64_t deadline_ns) {
    /* polled: timedlock/clocklock would do, but ThreadSanitizer does not
     * follow their EOWNERDEAD; this runs at open and while a member
     * thread waits, and a lock held for microseconds is had within one
     * retry */
    for (int tries = 0;; tries++) {
        const int e = pthread_mutex_trylock(mu);
        if (e != EBUSY) return e;
        if (cdl__now_ns() > deadline_ns) return ETIMEDOUT;
        if (tries < 16) sched_yield();
        else usleep(500);
    }
}

/* The result e of taking a robust mutex that guards nothing to repair (a
 * liveness lock, a retired object's): a dead holder's EOWNERDEAD is made
 * consistent. 1 when the mutex is now held. */
CDL_PRIVATE int cdl__mutex_held(pthread_mutex_t *mu, int e) {
    if (e == EOWNERDEAD) pthread_mutex_consistent(mu);
    return e == 0 || e == EOWNERDEAD;
}
