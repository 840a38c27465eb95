/* SPDX-License-Identifier: MIT */
/* jpeg_layout.h - the JPEG marker walk: the types and functions other modules use (see jpeg_layout.c). */
#ifndef CDL_JPEG_LAYOUT_H
#define CDL_JPEG_LAYOUT_H
#include "platform.h"
#include "jpeg_layout_state.h"

/* ---- interface ---- */
CDL_PRIVATE size_t cdl__rst_room(const cdl__u8 *p, size_t len);
CDL_PRIVATE int cdl__jpeg_walk(const cdl__u8 *p, size_t len, cdl__jpeg_layout *lay);
CDL_PRIVATE uint32_t cdl__rst_interval(const cdl__jpeg_layout *lay, size_t len);
#endif /* CDL_JPEG_LAYOUT_H */
