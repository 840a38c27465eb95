/* SPDX-License-Identifier: MIT */
/* api.h - the public API: the types and functions other modules use (see api.c). */
#ifndef CDL_API_H
#define CDL_API_H
#include "platform.h"
#include "api_state.h"

/* ---- interface ---- */
CDL_PRIVATE void cdl__get_config(const coordl *L, coordl_config *out);
CDL_PRIVATE coordl_status cdl__get_epoch_stats(const coordl *L, uint64_t epoch, coordl_epoch_stats *out);
CDL_PRIVATE void cdl__get_stats(const coordl *L, coordl_stats *out);
CDL_PRIVATE coordl_status cdl__next(coordl *L, coordl_batch *out);
CDL_PRIVATE coordl_status cdl__open(const coordl_config *cfg, coordl **out);
CDL_PRIVATE coordl_status cdl__sample_transform(coordl *L, uint64_t epoch, uint64_t id, coordl_transform *out);
#endif /* CDL_API_H */
