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

CDL_PRIVATE CDL_HOT void cdl__lock_acquired(coordl *L, int e) {
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

/* A thread that finds the lock held spins briefly before it sleeps: the
 * lock is held for a transition of a few microseconds (a claim, a
 * completion, a take), so the trainer's thread meeting a worker inside one
 * then makes no system call and is not descheduled (issue 23: 65 futex
 * waits per 100 ready next + release pairs before). Bounded: a holder that
 * was preempted costs the spinner a few microseconds, then it blocks. */
static inline void cdl__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

enum { CDL_LOCK_SPINS = 100 };

CDL_PRIVATE CDL_HOT void cdl__lock(coordl *L) {
    pthread_mutex_t *mu = &L->S->mu;
    for (int i = 0; i < CDL_LOCK_SPINS; i++) {
        const int e = pthread_mutex_trylock(mu);
        if (e != EBUSY) {
            cdl__lock_acquired(L, e);
            return;
        }
        cdl__cpu_relax();
    }
    cdl__lock_acquired(L, pthread_mutex_lock(mu));
}

CDL_PRIVATE CDL_HOT void cdl__unlock(coordl *L) {
    L->S->lock_owner = -1;
#ifdef COORDL_DEBUG
    L->S->lock_tid = 0;
#endif
    pthread_mutex_unlock(&L->S->mu);
}

/* The group's wait and wake: an event count. A waiter reads the sequence
 * word under the lock, counts itself parked, unlocks and sleeps only while
 * the word is unchanged; a waker changes the state, bumps the word, and
 * makes the futex call only when someone is parked. Both the park count
 * and the word are sequentially consistent read-modify-writes, so either
 * the waker sees the waiter parked, or the waiter's futex sees the new
 * word and does not sleep: no lost wake-up, and no system call for a wake
 * that nobody waits for. A group wakes every parked thread, never one: a
 * single wake-up could go to a member that is stopped or dying, and the
 * others would sleep on with work to do until its drop. Waits have no
 * timer: what a parked thread waits for is always announced by a wake
 * (a release, a completion, a join, a drop, a repair, close), so an idle
 * loader makes no wake-ups at all; the group's liveness is the member
 * thread's, at its own cadence. */
#ifdef __linux__
static void cdl__futex_wait(_Atomic uint32_t *word, uint32_t seen, int ms) {
    struct timespec rel = {ms / 1000, (long)(ms % 1000) * 1000000L};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, seen, ms < 0 ? NULL : &rel, NULL, 0);
}
static void cdl__futex_wake_all(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}
#else /* no futex: sleep briefly and recheck (a wake cannot reach us) */
static void cdl__futex_wait(_Atomic uint32_t *word, uint32_t seen, int ms) {
    (void)word, (void)seen;
    usleep((useconds_t)(ms < 0 || ms > 5 ? 5 : ms) * 1000);
}
static void cdl__futex_wake_all(_Atomic uint32_t *word) { (void)word; }
#endif

static void cdl__group_wake(cdl__cond *c) {
    atomic_fetch_add(&c->seq, 1u);
    if (atomic_load(&c->parked) != 0) cdl__futex_wake_all(&c->seq);
}

/* Waits on a stream condition for at most ms milliseconds (ms < 0: until
 * woken). */
CDL_PRIVATE void cdl__wait_ms(coordl *L, cdl__cond *c, int ms) {
    int e = 0;
    if (L->cfg.group) {
        const uint32_t seen = atomic_load(&c->seq);
        atomic_fetch_add(&c->parked, 1u);
        cdl__unlock(L);
        cdl__futex_wait(&c->seq, seen, ms);
        atomic_fetch_sub(&c->parked, 1u);
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

/* Wakes waiters of c: all of them, or (cdl__signal) at most one in a
 * private loader (every parked one in a group, see above). Called with the
 * mutex held. */
CDL_PRIVATE void cdl__broadcast(coordl *L, cdl__cond *c) {
    if (L->cfg.group) cdl__group_wake(c);
    else pthread_cond_broadcast(&c->cv);
}

CDL_PRIVATE CDL_HOT void cdl__signal(coordl *L, cdl__cond *c) {
    if (L->cfg.group) cdl__group_wake(c);
    else pthread_cond_signal(&c->cv);
}

/* The same after the caller has unlocked (a state change made under the
 * lock): a waiter that checked the state before the change either sees
 * the new sequence word and does not sleep, or is parked and woken; one
 * that locks after the change sees it. */
CDL_PRIVATE CDL_HOT void cdl__signal_unlocked(coordl *L, cdl__cond *c) { cdl__signal(L, c); }

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
