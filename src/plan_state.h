/* SPDX-License-Identifier: MIT */
/* plan_state.h - a sample's crop geometry: the types plan.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; plan.h declares
 * the functions. */
#ifndef CDL_PLAN_STATE_H
#define CDL_PLAN_STATE_H
#include "platform.h"

typedef struct cdl__geom {
    uint32_t out_w, out_h;        /* the output size it is drawn for: the
                                   * claim's snapshot, never cfg (coordl_set
                                   * writes that under the stream's lock) */
    double x0, y0, sw, sh;        /* source rectangle, float              */
    int clip_x0, clip_y0, clip_x1, clip_y1; /* pixels the filter may read */
    int flip;
    /* Darknet-style extras (0 / 1 when off) */
    float dhue, dsat, dexp; /* hue shift (turns), saturation and value scale */
    float angle;            /* rotation, radians                             */
    double daspect;         /* the aspect factor drawn                       */
    /* COORDL_CROP_DARKNET: output pixel (x, y), before the flip, samples
     * source point (m0 x + m1 y + m2, m3 x + m4 y + m5), bilinearly, black
     * outside the image; the clip rectangle holds every tap inside it. */
    int darknet;
    double m[6];
    /* A canvas (COORDL_CROP_DARKNET_BOXES, and COORDL_PIPE_EVAL's letterbox
     * with boxes; darknet = 1): only output pixels in [px0, px1) x [py0,
     * py1), before the flip, sample the image; the rest are grey (0.5),
     * Darknet's fill_image(sized, .5). */
    int canvas;
    int px0, py0, px1, py1;
    /* COORDL_CROP_SSD: a box is kept only when its centre lies inside the
     * crop (SSD's rule), then clipped */
    int centre_rule;
} cdl__geom;

#endif /* CDL_PLAN_STATE_H */
