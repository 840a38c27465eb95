/* SPDX-License-Identifier: MIT */
/* image.h - decode limits and stb_image: the types and functions other modules use (see image.c). */
#ifndef CDL_IMAGE_H
#define CDL_IMAGE_H
#include "platform.h"
#include "image_state.h"
#include "worker_state.h"

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__check_image_size(cdl__worker *W, const char *path, int64_t iw, int64_t ih);
CDL_PRIVATE coordl_status cdl__name_error(cdl__worker *W, const char *path, coordl_status rc);
CDL_PRIVATE coordl_status cdl__over_decode_limit(cdl__worker *W, const char *path, const char *what, uint64_t need);
CDL_PRIVATE coordl_status cdl__decode_stb(cdl__worker *W, const char *path, const cdl__bytes *in, uint64_t epoch, uint64_t id, void *dst);
CDL_PRIVATE coordl_status cdl__stb_header(cdl__worker *W, const char *path, const cdl__bytes *in, int *iw, int *ih, int *comp);
#endif /* CDL_IMAGE_H */
