/* SPDX-License-Identifier: MIT */
/* fetch.h - where a row's bytes come from: the types and functions other modules use (see fetch.c). */
#ifndef CDL_FETCH_H
#define CDL_FETCH_H
#include "platform.h"
#include "worker_state.h"

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__fetch(cdl__worker *W, uint64_t id, cdl__bytes *out);
CDL_PRIVATE void cdl__fetch_done(cdl__worker *W);
#endif /* CDL_FETCH_H */
