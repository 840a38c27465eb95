/* SPDX-License-Identifier: MIT */
/* jpeg_layout.h - the JPEG marker walk: the types and functions other modules use (see jpeg_layout.c). */
#ifndef CDL_JPEG_LAYOUT_H
#define CDL_JPEG_LAYOUT_H
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

/* ---- interface ---- */
CDL_PRIVATE size_t cdl__rst_room(const cdl__u8 *p, size_t len);
CDL_PRIVATE int cdl__jpeg_walk(const cdl__u8 *p, size_t len, cdl__jpeg_layout *lay);
CDL_PRIVATE uint32_t cdl__rst_interval(const cdl__jpeg_layout *lay, size_t len);
#endif /* CDL_JPEG_LAYOUT_H */
