/* SPDX-License-Identifier: MIT */
/* uring.h - local reads in flight on io_uring: the functions other modules use (see uring.c). */
#ifndef CDL_URING_H
#define CDL_URING_H
#include "platform.h"
#include "uring_state.h"

/* ---- interface ---- */
CDL_PRIVATE cdl__uring *cdl__uring_start(const coordl *L, uint32_t depth);
CDL_PRIVATE int cdl__uring_submit(cdl__uring *U, cdl__uring_req *q);
CDL_PRIVATE void cdl__uring_counters_get(cdl__uring *U, cdl__uring_counters *out);
CDL_PRIVATE void cdl__uring_stop(const coordl *L, cdl__uring *U);
#endif /* CDL_URING_H */
