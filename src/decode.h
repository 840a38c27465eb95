/* SPDX-License-Identifier: MIT */
/* decode.h - the per-item decode dispatch: the types and functions other modules use (see decode.c). */
#ifndef CDL_DECODE_H
#define CDL_DECODE_H
#include "platform.h"
#include "status_state.h"
#include "worker_state.h"

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__prepare_item(cdl__worker *W, uint64_t epoch, uint64_t id, void *dst);
#ifndef COORDL_NO_JPEGTURBO
CDL_PRIVATE int cdl__rewrite_idle(cdl__worker *W, cdl__counters *done);
#endif
CDL_PRIVATE void cdl__worker_decoder_init(cdl__worker *W);
CDL_PRIVATE coordl_status cdl__image_size(cdl__worker *W, const char *path, const cdl__bytes *in, int *iw, int *ih);
#endif /* CDL_DECODE_H */
