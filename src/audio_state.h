/* SPDX-License-Identifier: MIT */
/* audio_state.h - WAV audio: the types audio.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; audio.h declares
 * the functions. */
#ifndef CDL_AUDIO_STATE_H
#define CDL_AUDIO_STATE_H
#include "platform.h"

/* WAV: RIFF/WAVE with a fmt chunk (PCM 16-bit, IEEE float 32-bit, or
 * WAVE_FORMAT_EXTENSIBLE with one of those) and a data chunk; other
 * chunks are skipped. */
typedef struct cdl__wav {
    const cdl__u8 *data;
    uint64_t frames;
    uint32_t rate, channels, bits, format; /* format 1 = PCM, 3 = float */
} cdl__wav;

#endif /* CDL_AUDIO_STATE_H */
