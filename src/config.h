/* SPDX-License-Identifier: MIT */
/* config.h - configuration: defaults, validation, output geometry: the types and functions other modules use (see config.c). */
#ifndef CDL_CONFIG_H
#define CDL_CONFIG_H
#include "platform.h"

#define CDL_DEFAULT_MAX_DECODE_BYTES (256ull << 20)
#define CDL_DEFAULT_MAX_AUDIO_SAMPLES (1ull << 26)


/* The config module's state: the copies of the caller's strings that
 * L->cfg points into (set at open, read-only after). */
typedef struct cdl__config_strings {
    char *source_copy;
    char *group_copy;
    char *topology_copy; /* cfg.topology after open (coordl_get_config) */
} cdl__config_strings;

/* Output geometry of the config in effect: computed at open and by
 * coordl_set (under the stream's lock, with the stream paused). */
typedef struct cdl__geometry {
    size_t row_bytes;      /* bytes of one output row                       */
    size_t target_row_bytes; /* tokens: bytes of one targets row; else 0    */
    size_t slot_data_cap;  /* ring capacity per slot: data bytes, rows      */
    uint32_t slot_rows_cap;
    size_t elem_bytes;
    float norm_scale[3], norm_bias[3]; /* y = x * scale + bias             */
    float crop_min_ratio, crop_max_ratio; /* COORDL_CROP_DARKNET: min_crop and
                              max_crop over the out_w at open (Darknet's
                              min_ratio/max_ratio, floats as Darknet's)     */
    int avx2;              /* resample with the AVX2 loops (resample)       */
} cdl__geometry;

/* ---- interface ---- */
CDL_PRIVATE void cdl__row_shape(const coordl *L, uint32_t out_w, uint32_t out_h, uint32_t *c, uint32_t *h, uint32_t *w);
CDL_PRIVATE size_t cdl__image_row_bytes(const coordl *L, uint64_t w, uint64_t h);
CDL_PRIVATE void cdl__output_setup(coordl *L);
CDL_PRIVATE coordl_status cdl__validate(const coordl_config *c);
CDL_PRIVATE coordl_config cdl__config_default(void);
#endif /* CDL_CONFIG_H */
