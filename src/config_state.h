/* SPDX-License-Identifier: MIT */
/* config_state.h - configuration: defaults, validation, output geometry: the types config.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; config.h declares
 * the functions. */
#ifndef CDL_CONFIG_STATE_H
#define CDL_CONFIG_STATE_H
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
    size_t target_row_bytes; /* tokens: bytes of one targets row; boxes:
                              one row's max_boxes x 5 floats; else 0       */
    int box_rows;          /* labels = COORDL_LABELS_BOXES: the targets are
                              boxes, and each slot holds per-row counts    */
    size_t slot_data_cap;  /* ring capacity per slot: data bytes, rows      */
    uint32_t slot_rows_cap;
    size_t elem_bytes;
    float norm_scale[3], norm_bias[3]; /* y = x * scale + bias             */
    float crop_min_ratio, crop_max_ratio; /* COORDL_CROP_DARKNET: min_crop and
                              max_crop over the out_w at open (Darknet's
                              min_ratio/max_ratio, floats as Darknet's)     */
    int avx2;              /* resample with the AVX2 loops (resample)       */
} cdl__geometry;

#endif /* CDL_CONFIG_STATE_H */
