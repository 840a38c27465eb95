/* SPDX-License-Identifier: MIT */
/* readahead.h - read-ahead in the known order: the types and functions other modules use (see readahead.c). */
#ifndef CDL_READAHEAD_H
#define CDL_READAHEAD_H
#include "platform.h"
#include "readahead_state.h"
#include "worker_state.h"

/* ---- interface ---- */
CDL_PRIVATE int cdl__ra_wait(cdl__worker *W, cdl__ra_entry *x, cdl__bytes *out, coordl_status *rc);
CDL_PRIVATE void cdl__ra_pause(coordl *L);
CDL_PRIVATE void cdl__ra_restart(coordl *L, int keep);
CDL_PRIVATE void cdl__ra_release(coordl *L, cdl__ra_entry *x);
CDL_PRIVATE void cdl__ra_closing(coordl *L);
CDL_PRIVATE int cdl__ra_is_closing(coordl *L);
CDL_PRIVATE void cdl__ra_stop(coordl *L);
CDL_PRIVATE cdl__ra_entry *cdl__ra_take(coordl *L, uint64_t epoch, uint64_t pos, uint64_t id);
CDL_PRIVATE coordl_status cdl__ra_start(coordl *L);
#endif /* CDL_READAHEAD_H */
