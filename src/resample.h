/* SPDX-License-Identifier: MIT */
/* resample.h - resampling and the fused resize/flip/normalize pass: the types and functions other modules use (see resample.c). */
#ifndef CDL_RESAMPLE_H
#define CDL_RESAMPLE_H
#include "platform.h"
#include "worker.h"
#include "plan.h"

typedef struct cdl__axis {
    int K;          /* taps per output */
    int32_t *start; /* first source index per output (absolute)            */
    float *w;       /* out x K weights                                     */
    int lo, hi;     /* source index range the table reads                  */
    float *w8;      /* AVX2 horizontal pass: w, spread for its registers
                       (cdl__axis_spread_avx2); NULL: not made           */
} cdl__axis;


/* ---- interface ---- */
CDL_PRIVATE void cdl__resample(coordl *L, cdl__worker *W, const cdl__u8 *src, size_t stride, int sx0, int sy0, const cdl__axis *ax, const cdl__axis *ay, const cdl__geom *g, void *dst);
CDL_PRIVATE coordl_status cdl__tables_for(cdl__worker *W, const cdl__geom *g, cdl__axis *ax, cdl__axis *ay);
CDL_PRIVATE uint64_t cdl__window_bytes(const coordl *L, const cdl__axis *ax, const cdl__axis *ay);
CDL_PRIVATE int cdl__resample_use_avx2(void);
#endif /* CDL_RESAMPLE_H */
