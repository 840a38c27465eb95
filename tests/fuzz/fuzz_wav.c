/*
 * fuzz_wav.c - the WAV parser and the audio pipeline. Input: 8 parameter
 * bytes, then the file. Runs a worker's decode (cdl__decode_item: parse,
 * crop drawn on the resampled length, conversion and resampling of the
 * kept window only, max_audio_samples) and coordl_sample_transform's
 * header path (cdl__wav_open).
 * Oracles: a successful decode writes all audio_samples floats (two
 * decodes over different fills agree bit for bit); the header path
 * accepts what the decode accepted.
 *
 * Parameters: 0-1 audio_samples = 1 + v % 4096; 2 audio_rate (0: the
 * file's; else from a table including 1 Hz and 384 kHz); 3 epoch; 4-5 item
 * id; 6 max_audio_samples = 2^(8 + b % 19); 7 seed.
 */
#include "../../coordl.c"
#include "fuzz_common.h"

#define FZ_PARAMS 8

static const uint32_t fz_rates[] = {0, 1, 3, 8000, 11025, 16000, 22050, 44100, 48000, 96000, 192000, 384000, 7, 65535};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_bytes in = {data, size};
    uint8_t b[FZ_PARAMS];
    fz_params(&in, b, FZ_PARAMS);
    coordl_config cfg = fz_config();
    cfg.pipeline = COORDL_PIPE_AUDIO;
    cfg.audio_samples = 1u + (uint32_t)(b[0] | b[1] << 8) % 4096u;
    cfg.audio_rate = fz_rates[b[2] % (sizeof fz_rates / sizeof fz_rates[0])];
    cfg.max_audio_samples = (uint64_t)1 << (8 + b[6] % 19);
    cfg.seed = b[7];
    if (cdl__validate(&cfg) != COORDL_OK)
        return 0;
    coordl *L = fz_loader(&cfg);
    cdl__worker W;
    fz_worker_init(&W, L);
    const uint64_t epoch = b[3], id = (uint64_t)b[4] | (uint64_t)b[5] << 8;
    const size_t row = L->geom.row_bytes;
    FZ_CHECK(row == (size_t)cfg.audio_samples * sizeof(float), "row %zu", row);
    uint8_t *x = malloc(row), *y = malloc(row);
    FZ_CHECK(x && y, "out of memory");
    memset(x, 0x00, row);
    memset(y, 0x5A, row);
    cdl__bytes bytes = {in.p, in.n};
    coordl_status rc = cdl__decode_item(&W, "fuzz.wav", epoch, id, &bytes, x);
    FZ_CHECK(rc == COORDL_OK || rc == COORDL_ERR_CORRUPT, "status %d", (int)rc);
    if (rc != COORDL_OK)
        FZ_CHECK(strstr(W.err, "fuzz.wav") != NULL, "message \"%s\" does not name the file", W.err);
    coordl_status rc2 = cdl__decode_item(&W, "fuzz.wav", epoch, id, &bytes, y);
    FZ_CHECK(rc2 == rc, "second decode %d, first %d", (int)rc2, (int)rc);
    if (rc == COORDL_OK)
        FZ_CHECK(memcmp(x, y, row) == 0, "the row differs between two decodes (samples left unwritten?)");
    cdl__wav wav;
    uint64_t n = 0;
    coordl_status hrc = cdl__wav_open(&W, "fuzz.wav", &bytes, &wav, &n);
    if (rc == COORDL_OK)
        FZ_CHECK(hrc == COORDL_OK, "decoded, but the header path says %d: %s", (int)hrc, W.err);
    if (hrc == COORDL_OK)
        FZ_CHECK(cdl__audio_offset(L, epoch, id, n) <= (n > cfg.audio_samples ? n - cfg.audio_samples : 0),
                 "crop offset past the end");
    free(x);
    free(y);
    fz_worker_free(&W);
    fz_loader_free(L);
    return 0;
}
