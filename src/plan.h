/* SPDX-License-Identifier: MIT */
/* plan.h - a sample's crop geometry: the types and functions other modules use (see plan.c). */
#ifndef CDL_PLAN_H
#define CDL_PLAN_H
#include "platform.h"
#include "plan_state.h"
#include "worker_state.h"

/* ---- interface ---- */
CDL_PRIVATE void cdl__plan(const coordl *L, uint32_t out_w, uint32_t out_h, uint64_t epoch, uint64_t id, int W, int H,
                           cdl__geom *g);
CDL_PRIVATE void cdl__plan_row(cdl__worker *W, uint64_t epoch, uint64_t id, int iw, int ih, cdl__geom *g);
CDL_PRIVATE uint32_t cdl__boxes_map(const coordl *L, const cdl__geom *g, int iw, int ih, uint64_t id, void *out);
#ifndef COORDL_NO_JPEGTURBO
CDL_PRIVATE int cdl__choose_dct_denominator(const cdl__geom *g);
CDL_PRIVATE void cdl__geom_scale(cdl__geom *g, int d, int scaled_w, int scaled_h);
#endif
#endif /* CDL_PLAN_H */
