/* SPDX-License-Identifier: MIT */
/* audio.h - WAV audio: the types and functions other modules use (see audio.c). */
#ifndef CDL_AUDIO_H
#define CDL_AUDIO_H
#include "platform.h"
#include "audio_state.h"
#include "worker_state.h"

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__decode_wav(cdl__worker *W, const char *path, const cdl__bytes *in, uint64_t epoch, uint64_t id, void *dst);
CDL_PRIVATE uint64_t cdl__audio_offset(const coordl *L, uint64_t epoch, uint64_t id, uint64_t n);
CDL_PRIVATE coordl_status cdl__wav_open(cdl__worker *W, const char *path, const cdl__bytes *in, cdl__wav *wav, uint64_t *n_out);
#endif /* CDL_AUDIO_H */
