/* SPDX-License-Identifier: MIT */
/* worker.h - a worker's scratch: the types and functions other modules use (see worker.c). */
#ifndef CDL_WORKER_H
#define CDL_WORKER_H
#include "platform.h"
#include "worker_state.h"

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__worker_error(cdl__worker *W, coordl_status s, const char *fmt, ...);
CDL_PRIVATE void cdl__budget_row(cdl__worker *W, uint64_t busy_ns);
#ifndef COORDL_NO_JPEGTURBO
CDL_PRIVATE void cdl__budget_rewrite(cdl__worker *W, uint64_t ns);
CDL_PRIVATE void cdl__budget_decode(cdl__worker *W, int spliced, uint64_t ns);
CDL_PRIVATE int cdl__budget_allows(const cdl__worker *W, double f);
#endif
#endif /* CDL_WORKER_H */
