/* SPDX-License-Identifier: MIT */
/* resample_state.h - resampling and the fused resize/flip/normalize pass: the types resample.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; resample.h declares
 * the functions. */
#ifndef CDL_RESAMPLE_STATE_H
#define CDL_RESAMPLE_STATE_H
#include "platform.h"

typedef struct cdl__axis {
    int K;          /* taps per output */
    int32_t *start; /* first source index per output (absolute)            */
    float *w;       /* out x K weights                                     */
    int lo, hi;     /* source index range the table reads                  */
    float *w8;      /* AVX2 horizontal pass: w, spread for its registers
                       (cdl__axis_spread_avx2); NULL: not made           */
} cdl__axis;

#endif /* CDL_RESAMPLE_STATE_H */
