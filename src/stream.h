/* SPDX-License-Identifier: MIT */
/* stream.h - the ring and the stream state machine: the types and functions other modules use (see stream.c). */
#ifndef CDL_STREAM_H
#define CDL_STREAM_H
#include "platform.h"
#include "stream_state.h"
#include "status_state.h"
#include "lock_state.h"

/* ---- interface ---- */
CDL_PRIVATE void cdl__stream_repair(coordl *L, int dead, uint64_t dead_gen);
CDL_PRIVATE int cdl__stream_claim(coordl *L, cdl__claim *c, int idle);
CDL_PRIVATE void cdl__stream_complete(coordl *L, const cdl__claim *c, const cdl__counters *counters, const cdl__row_result *r);
CDL_PRIVATE int cdl__member_current(const coordl *L);
CDL_PRIVATE int cdl__member_is(const cdl__stream *S, int m, uint64_t gen);
CDL_PRIVATE void cdl__ring_layout(coordl *L);
CDL_PRIVATE size_t cdl__ring_slot_bytes(const coordl *L, uint32_t rows_cap, size_t data_cap, size_t *data, size_t *labels, size_t *ids);
#ifdef COORDL_DEBUG
CDL_PRIVATE void cdl__stream_check(const coordl *L, const char *transition);
#else
#define cdl__stream_check(L, transition) ((void)0)
#endif
CDL_PRIVATE void cdl__stream_drop_member(coordl *L, int m, uint64_t gen);
CDL_PRIVATE coordl_status cdl__stream_init(cdl__stream *S, int pshared);
CDL_PRIVATE cdl__epoch_counters *cdl__epoch_entry(coordl *L, uint64_t epoch);
CDL_PRIVATE coordl_status cdl__ring_alloc(coordl *L, uint32_t rows_cap, size_t data_cap);
CDL_PRIVATE void cdl__ring_free(coordl *L);
CDL_PRIVATE int cdl__stream_find(const coordl *L);
CDL_PRIVATE void cdl__stream_pause(coordl *L);
CDL_PRIVATE int cdl__stream_holds(const coordl *L, const coordl_batch *b);
CDL_PRIVATE int cdl__stream_release(coordl *L, const coordl_batch *b);
CDL_PRIVATE void cdl__stream_restart(coordl *L, int same_order);
CDL_PRIVATE coordl_status cdl__stream_take(coordl *L, uint32_t s, coordl_batch *out);
CDL_PRIVATE int cdl__stream_try_claim(coordl *L, cdl__claim *c);
#endif /* CDL_STREAM_H */
