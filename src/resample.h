/* SPDX-License-Identifier: MIT */
/* resample.h - resampling and the fused resize/flip/normalize pass: the types and functions other modules use (see resample.c). */
#ifndef CDL_RESAMPLE_H
#define CDL_RESAMPLE_H
#include "platform.h"
#include "resample_state.h"
#include "worker_state.h"
#include "plan_state.h"

/* ---- interface ---- */
CDL_PRIVATE void cdl__resample(coordl *L, cdl__worker *W, const cdl__u8 *src, size_t stride, int sx0, int sy0, const cdl__axis *ax, const cdl__axis *ay, const cdl__geom *g, void *dst);
CDL_PRIVATE coordl_status cdl__tables_for(cdl__worker *W, const cdl__geom *g, cdl__axis *ax, cdl__axis *ay);
CDL_PRIVATE uint64_t cdl__window_bytes(const cdl__geom *g, const cdl__axis *ax, const cdl__axis *ay);
CDL_PRIVATE int cdl__resample_use_avx2(void);
#endif /* CDL_RESAMPLE_H */
