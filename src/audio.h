/* SPDX-License-Identifier: MIT */
/* audio.h - WAV audio: the types and functions other modules use (see audio.c). */
#ifndef CDL_AUDIO_H
#define CDL_AUDIO_H
#include "platform.h"
#include "worker.h"

/* WAV: RIFF/WAVE with a fmt chunk (PCM 16-bit, IEEE float 32-bit, or
 * WAVE_FORMAT_EXTENSIBLE with one of those) and a data chunk; other
 * chunks are skipped. */
typedef struct cdl__wav {
    const cdl__u8 *data;
    uint64_t frames;
    uint32_t rate, channels, bits, format; /* format 1 = PCM, 3 = float */
} cdl__wav;

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__decode_wav(cdl__worker *W, const char *path, const cdl__bytes *in, uint64_t epoch, uint64_t id, void *dst);
CDL_PRIVATE uint64_t cdl__audio_offset(const coordl *L, uint64_t epoch, uint64_t id, uint64_t n);
CDL_PRIVATE coordl_status cdl__wav_open(cdl__worker *W, const char *path, const cdl__bytes *in, cdl__wav *wav, uint64_t *n_out);
#endif /* CDL_AUDIO_H */
