/* SPDX-License-Identifier: MIT */
/* pool.h - the worker pool: the types and functions other modules use (see pool.c). */
#ifndef CDL_POOL_H
#define CDL_POOL_H
#include "platform.h"
#include "pool_state.h"
#include "lock_state.h"
#include "worker_state.h"
#include "stream_state.h"

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__pool_start(coordl *L);
CDL_PRIVATE void cdl__pool_stop(coordl *L);
CDL_PRIVATE void cdl__worker_prepare(cdl__worker *W, const cdl__claim *c, cdl__row_result *r);
#endif /* CDL_POOL_H */
