/* SPDX-License-Identifier: MIT */
/*
 * audio.c - WAV audio.
 *
 * Owns:  nothing: parses a WAV and crops audio_samples frames at an offset
 *        drawn from (seed, epoch, item)
 * Lock:  none
 * Calls: rand, worker (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "audio_state.h"
#include "audio.h"
#include "rand.h"
#include "rand_state.h"
#include "worker.h"
#include "worker_state.h"
#include "handle.h"

#ifndef COORDL_NO_AUDIO

static const char *cdl__wav_parse(const cdl__u8 *p, size_t len, cdl__wav *w) {
    memset(w, 0, sizeof *w);
    if (len < 12 || memcmp(p, "RIFF", 4) != 0 || memcmp(p + 8, "WAVE", 4) != 0) return "not a RIFF/WAVE file";
    int have_fmt = 0;
    uint32_t block_align = 0;
    size_t at = 12;
    while (at + 8 <= len) {
        const cdl__u8 *ck = p + at;
        uint64_t size = cdl__le32(ck + 4);
        if (memcmp(ck, "fmt ", 4) == 0) {
            if (size < 16 || at + 8 + size > len) return "truncated fmt chunk";
            w->format = cdl__le16(ck + 8);
            w->channels = cdl__le16(ck + 10);
            w->rate = cdl__le32(ck + 12);
            block_align = cdl__le16(ck + 20);
            w->bits = cdl__le16(ck + 22);
            if (w->format == 0xFFFE) {
                if (size < 40) return "truncated WAVE_FORMAT_EXTENSIBLE fmt chunk";
                w->format = cdl__le16(ck + 32); /* first two bytes of the subformat GUID */
            }
            have_fmt = 1;
        } else if (memcmp(ck, "data", 4) == 0) {
            if (!have_fmt) return "data chunk before the fmt chunk";
            if (at + 8 + size > len) return "truncated data chunk";
            if (!((w->format == 1 && w->bits == 16) || (w->format == 3 && w->bits == 32)))
                return "unsupported sample format (coordl reads 16-bit PCM and 32-bit float)";
            if (w->channels == 0 || w->rate == 0 || block_align != w->channels * (w->bits / 8))
                return "inconsistent fmt chunk";
            w->data = ck + 8;
            w->frames = size / block_align;
            return NULL;
        }
        at += 8 + size + (size & 1);
    }
    return have_fmt ? "no data chunk" : "no fmt chunk";
}

/* The item's length in output samples (after resampling to audio_rate),
 * from the header alone: the crop is drawn on it before anything is
 * converted. */
CDL_PRIVATE coordl_status cdl__wav_open(cdl__worker *W, const char *path, const cdl__bytes *in, cdl__wav *wav,
                                   uint64_t *n_out) {
    const char *why = cdl__wav_parse(in->p, in->len, wav);
    if (why) return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: %s", path, why);
    const uint32_t out_rate = W->L->cfg.audio_rate ? W->L->cfg.audio_rate : wav->rate;
    /* frames < 2^31 (a 32-bit data size over >= 2 bytes a frame), so the
     * product stays below 2^63 */
    *n_out = out_rate == wav->rate ? wav->frames : wav->frames * out_rate / wav->rate;
    return COORDL_OK;
}

/* Frame f as one mono sample: the mean of its channels. */
static float cdl__wav_mono(const cdl__wav *w, uint64_t f) {
    const uint32_t ch = w->channels, bps = w->bits / 8;
    const cdl__u8 *s = w->data + f * ch * bps;
    float acc = 0.0f;
    for (uint32_t c = 0; c < ch; c++, s += bps) {
        if (w->format == 1) {
            acc += (float)(int16_t)cdl__le16(s) / 32768.0f;
        } else {
            float v;
            uint32_t u = cdl__le32(s);
            memcpy(&v, &u, 4);
            acc += v;
        }
    }
    return ch == 1 ? acc : acc / (float)ch;
}

/* Crop offset for an item of n samples: uniform from (seed, epoch, item). */
CDL_PRIVATE uint64_t cdl__audio_offset(const coordl *L, uint64_t epoch, uint64_t id, uint64_t n) {
    if (n <= L->cfg.audio_samples) return 0;
    cdl__rng rng = cdl__rng_for(L->cfg.seed, CDL_STREAM_CROP, epoch, id);
    return cdl__rng_below(&rng, n - L->cfg.audio_samples + 1);
}

/* Only the window the crop keeps is converted: output sample i (absolute,
 * in the resampled signal) is the linear interpolation at i * rate_in /
 * rate_out between two source frames, each the mean of its channels. The
 * work is the source samples (frames x channels) the window reads, known
 * before reading any and bounded by max_audio_samples; no buffer is
 * needed beyond the row itself. */
CDL_PRIVATE coordl_status cdl__decode_wav(cdl__worker *W, const char *path, const cdl__bytes *in, uint64_t epoch,
                                     uint64_t id, void *dst) {
    coordl *L = W->L;
    const uint64_t t0 = cdl__now_ns();
    cdl__wav wav;
    uint64_t n = 0;
    coordl_status rc = cdl__wav_open(W, path, in, &wav, &n);
    if (rc != COORDL_OK) return rc;
    const uint64_t S = L->cfg.audio_samples, off = cdl__audio_offset(L, epoch, id, n);
    const uint64_t take = n - off < S ? n - off : S;
    const uint32_t out_rate = L->cfg.audio_rate ? L->cfg.audio_rate : wav.rate;
    const double step = (double)wav.rate / out_rate;
    uint64_t frames_read = take;
    if (take > 0 && out_rate != wav.rate) {
        /* each output reads 2 frames; neighbours share them */
        uint64_t first = (uint64_t)((double)off * step), last = (uint64_t)((double)(off + take - 1) * step) + 1;
        if (last >= wav.frames) last = wav.frames - 1;
        if (first > last) first = last;
        frames_read = last - first + 1 < 2 * take ? last - first + 1 : 2 * take;
    }
    if (frames_read * wav.channels > L->cfg.max_audio_samples)
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: the crop reads %llu source samples (%llu frames x %u "
                                 "channels), over max_audio_samples (%llu)", path,
                                 (unsigned long long)(frames_read * wav.channels), (unsigned long long)frames_read,
                                 wav.channels, (unsigned long long)L->cfg.max_audio_samples);
    float *out = dst;
    if (out_rate == wav.rate) {
        for (uint64_t i = 0; i < take; i++) out[i] = cdl__wav_mono(&wav, off + i);
    } else {
        uint64_t have[2] = {UINT64_MAX, UINT64_MAX}; /* the last two frames converted */
        float val[2] = {0.0f, 0.0f};
        for (uint64_t i = 0; i < take; i++) {
            const double x = (double)(off + i) * step;
            const uint64_t i0 = (uint64_t)x;
            const double fr = x - (double)i0;
            const uint64_t fa = i0 < wav.frames ? i0 : wav.frames - 1;
            const uint64_t fb = i0 + 1 < wav.frames ? i0 + 1 : wav.frames - 1;
            float ab[2];
            for (int k = 0; k < 2; k++) {
                const uint64_t f = k ? fb : fa;
                if (f == have[1]) ab[k] = val[1];
                else if (f == have[0]) ab[k] = val[0];
                else {
                    have[0] = have[1];
                    val[0] = val[1];
                    have[1] = f;
                    val[1] = ab[k] = cdl__wav_mono(&wav, f);
                }
            }
            out[i] = (float)(ab[0] + (ab[1] - ab[0]) * fr);
        }
    }
    for (uint64_t i = take; i < S; i++) out[i] = 0.0f;
    W->row.decode_ns += cdl__now_ns() - t0; /* conversion and crop are one pass */
    return COORDL_OK;
}
#else /* COORDL_NO_AUDIO: open refuses COORDL_PIPE_AUDIO (abi.c), so
        * nothing calls these; they keep the callers' code the same. */
CDL_PRIVATE coordl_status cdl__wav_open(cdl__worker *W, const char *path, const cdl__bytes *in, cdl__wav *wav,
                                   uint64_t *n_out) {
    (void)in;
    memset(wav, 0, sizeof *wav);
    *n_out = 0;
    return cdl__worker_error(W, COORDL_ERR_UNSUPPORTED, "%s: audio is not in this build (COORDL_NO_AUDIO)", path);
}
CDL_PRIVATE uint64_t cdl__audio_offset(const coordl *L, uint64_t epoch, uint64_t id, uint64_t n) {
    (void)L, (void)epoch, (void)id, (void)n;
    return 0;
}
CDL_PRIVATE coordl_status cdl__decode_wav(cdl__worker *W, const char *path, const cdl__bytes *in, uint64_t epoch,
                                     uint64_t id, void *dst) {
    cdl__wav wav;
    uint64_t n;
    (void)epoch, (void)id, (void)dst;
    return cdl__wav_open(W, path, in, &wav, &n);
}
#endif /* COORDL_NO_AUDIO */
