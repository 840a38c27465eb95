/* SPDX-License-Identifier: MIT */
/* jpeg.h - libjpeg decode and JPEG random access: the types and functions other modules use (see jpeg.c). */
#ifndef CDL_JPEG_H
#define CDL_JPEG_H
#include "platform.h"
#include "worker_state.h"
#include "jpeg_layout_state.h"

/* ---- interface ---- */
#ifndef COORDL_NO_JPEGTURBO
CDL_PRIVATE coordl_status cdl__decode_jpeg(cdl__worker *W, const char *path, const cdl__bytes *in, uint64_t epoch, uint64_t id, void *dst, const cdl__jpeg_layout *rst);
CDL_PRIVATE boolean cdl__jdest_full(j_compress_ptr c);
CDL_PRIVATE void cdl__jdest_init(j_compress_ptr c);
CDL_PRIVATE void cdl__jdest_term(j_compress_ptr c);
CDL_PRIVATE void cdl__jpeg_emit_message(j_common_ptr cinfo, int level);
CDL_PRIVATE void cdl__jpeg_error_exit(j_common_ptr cinfo);
CDL_PRIVATE size_t cdl__jpeg_rewrite(cdl__worker *W, const cdl__u8 *src, size_t len, size_t room, int small, cdl__jpeg_layout *got, int *too_big);
CDL_PRIVATE void cdl__jpeg_scan_limit(j_common_ptr cinfo);
#endif
#endif /* CDL_JPEG_H */
