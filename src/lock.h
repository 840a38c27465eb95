/* SPDX-License-Identifier: MIT */
/* lock.h - the stream's shared state and its lock: the types and functions other modules use (see lock.c). */
#ifndef CDL_LOCK_H
#define CDL_LOCK_H
#include "platform.h"
#include "lock_state.h"
#include "status.h"

/* ---- interface ---- */
/* COORDL_DEBUG: the calling thread holds the stream's lock. */
#ifdef COORDL_DEBUG
#define cdl__assert_locked(L) cdl__debug_assert((L), (L)->S->lock_tid == cdl__gettid(), "stream lock not held by this thread")
#else
#define cdl__assert_locked(L) ((void)0)
#endif

CDL_PRIVATE void cdl__broadcast(coordl *L, cdl__cond *c);
CDL_PRIVATE void cdl__lock(coordl *L);
CDL_PRIVATE void cdl__unlock(coordl *L);
CDL_PRIVATE void cdl__wait_ms(coordl *L, cdl__cond *c, int ms);
CDL_PRIVATE void cdl__signal(coordl *L, cdl__cond *c);
CDL_PRIVATE void cdl__wait(coordl *L, cdl__cond *c);
CDL_PRIVATE void cdl__lock_acquired(coordl *L, int e);
CDL_PRIVATE void cdl__signal_unlocked(coordl *L, cdl__cond *c);
CDL_PRIVATE int cdl__mutex_lock_until(pthread_mutex_t *mu, uint64_t deadline_ns);
CDL_PRIVATE int cdl__mutex_held(pthread_mutex_t *mu, int e);
#endif /* CDL_LOCK_H */
