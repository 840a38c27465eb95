/* SPDX-License-Identifier: MIT */
/* config.h - configuration: defaults, validation, output geometry: the types and functions other modules use (see config.c). */
#ifndef CDL_CONFIG_H
#define CDL_CONFIG_H
#include "platform.h"
#include "config_state.h"

/* ---- interface ---- */
CDL_PRIVATE void cdl__row_shape(const coordl *L, uint32_t out_w, uint32_t out_h, uint32_t *c, uint32_t *h, uint32_t *w);
CDL_PRIVATE size_t cdl__row_bytes_at(const coordl *L, uint32_t out_w, uint32_t out_h);
CDL_PRIVATE void cdl__output_setup(coordl *L);
CDL_PRIVATE coordl_status cdl__validate(const coordl_config *c);
CDL_PRIVATE coordl_config cdl__config_default(void);
#endif /* CDL_CONFIG_H */
