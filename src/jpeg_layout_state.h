/* SPDX-License-Identifier: MIT */
/* jpeg_layout_state.h - the JPEG marker walk: the types jpeg_layout.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; jpeg_layout.h declares
 * the functions. */
#ifndef CDL_JPEG_LAYOUT_STATE_H
#define CDL_JPEG_LAYOUT_STATE_H
#include "platform.h"

#define CDL_RST_TAG "coordl-rst"
#define CDL_RST_TAG_LEN 10
#define CDL_RST_HEAD 16        /* tag, version, 0, interval u16, rows u16     */
#define CDL_RST_MAX_ROWS ((65533u - CDL_RST_HEAD) / 4u)
#define CDL_RST_BYTES_PER_MARKER_X10 43 /* mean growth a marker, standard tables */
#define CDL_RST_ROOM_PER_MARKER_X10 65  /* reserved: above the worst file seen (6.0) */

typedef struct cdl__jpeg_layout {
    int sof;                     /* SOF marker code (0xC0 ...)                */
    uint32_t w, h;
    int ncomp, max_h, max_v;
    int subsampled;              /* some component has fewer samples: fancy
                                    upsampling reads neighbours             */
    int hsub;                    /* ... fewer columns                          */
    uint32_t mcu_w, mcu_h, mcus_per_row, mcu_rows;
    size_t sof_off, data_off;    /* SOF marker; first entropy-coded byte      */
    size_t index_off, index_len; /* our APP15 segment, marker included; 0: none */
    uint32_t interval;           /* restart interval the index records        */
} cdl__jpeg_layout;

#endif /* CDL_JPEG_LAYOUT_STATE_H */
