/*
 * fuzz_image.c - image decode and both image pipelines, with fuzzed
 * geometry. Input: 16 parameter bytes, then the file (JPEG, PNG, BMP, PPM,
 * TGA, or anything else). The worker's decode path runs exactly as in a
 * batch (cdl__decode_item: format sniffing, header checks, crop plan, ROI
 * JPEG or stb decode, resampling, Darknet extras, normalization), then
 * coordl_sample_transform's header path (cdl__image_size).
 * Oracles: a successful decode writes every byte of its row (the row is
 * decoded twice, over two different fills, and must come out the same);
 * a decode never succeeds where the header path fails; and whatever it
 * returns is a coordl status with a message naming the file.
 *
 * Parameters (byte: meaning):
 *   0  bit 0 eval pipeline, bit 1 flip, bits 2-3 layout, bit 4 Darknet
 *      crop, bit 5 rotation, bit 6 colour jitter, bit 7 aspect jitter
 *   1, 2  out_w, out_h: 1 + b % 48
 *   3, 4  scale_min = (1 + b3) / 256, scale_max between it and 1
 *   5, 6  ratio_min = 2^((b5 - 128) / 32), ratio_max = ratio_min x 2^(b6 / 64);
 *         with bit 7 of b6, extreme ranges: 2^((b5 - 128) / 2) and x 2^b6
 *   7     epoch; 8, 9 item id (the random draws)
 *   10    max_decode_bytes = 16 KiB << (b % 11)   (16 KiB .. 16 MiB)
 *   11    max_pixels = 2^(6 + b % 13)             (64 .. 256 Ki)
 * The limits stay small so that an execution takes milliseconds (stb fills
 * the missing pixels of a short raw BMP/TGA/PNM one by one, and a header
 * may declare max_pixels of them); tests/test_decode_limits.c covers the
 * default limits with real bombs.
 *   12, 13  Darknet min_crop, max_crop - min_crop (0: defaults)
 *   14    jitter amounts; 15 seed
 */
#include "../../coordl.c"
#include "fuzz_common.h"

#define FZ_PARAMS 16

static int fz_image_config(const uint8_t *b, coordl_config *c)
{
    *c = fz_config();
    c->pipeline = b[0] & 1 ? COORDL_PIPE_EVAL : COORDL_PIPE_TRAIN;
    c->flip = b[0] >> 1 & 1;
    c->layout = (coordl_layout)(b[0] >> 2 & 3);
    c->out_w = 1u + b[1] % 48u;
    c->out_h = 1u + b[2] % 48u;
    c->scale_min = (float)(1 + b[3]) / 256.0f;
    c->scale_max = c->scale_min + (1.0f - c->scale_min) * (float)b[4] / 255.0f;
    if (b[6] & 128) { /* any finite range is a valid config */
        c->ratio_min = exp2f(((float)b[5] - 128.0f) / 2.0f);
        c->ratio_max = c->ratio_min * exp2f((float)(b[6] & 127));
    } else {
        c->ratio_min = exp2f(((float)b[5] - 128.0f) / 32.0f);
        c->ratio_max = c->ratio_min * exp2f((float)b[6] / 64.0f);
    }
    c->seed = b[15];
    c->max_decode_bytes = (uint64_t)16384 << (b[10] % 11);
    c->max_pixels = (uint64_t)1 << (6 + b[11] % 13);
    if (b[0] & 16) {
        c->train_crop = COORDL_CROP_DARKNET;
        c->min_crop = b[12];
        c->max_crop = b[12] && b[13] ? (uint32_t)b[12] + b[13] : 0;
    }
    if (b[0] & 32) c->rotate_deg = (float)(b[14] % 181);
    if (b[0] & 64) {
        c->hue = (float)(b[14] % 51) / 100.0f;
        c->saturation = 1.0f + (float)(b[14] % 7) / 2.0f;
        c->exposure = 1.0f + (float)(b[14] % 5) / 2.0f;
    }
    if (b[0] & 128) c->aspect = 1.0f + (float)(b[14] % 9) / 4.0f;
    return cdl__validate(c) == COORDL_OK;
}

static coordl_status fz_decode(cdl__worker *W, const fz_bytes *file, uint64_t epoch, uint64_t id, void *dst)
{
    cdl__bytes in = {file->p, file->n};
    W->err[0] = '\0';
    return cdl__decode_item(W, "fuzz.img", epoch, id, &in, dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_bytes in = {data, size};
    uint8_t b[FZ_PARAMS];
    fz_params(&in, b, FZ_PARAMS);
    coordl_config cfg;
    if (!fz_image_config(b, &cfg))
        return 0;
    coordl *L = fz_loader(&cfg);
    cdl__worker W;
    fz_worker_init(&W, L);
    const uint64_t epoch = b[7], id = (uint64_t)b[8] | (uint64_t)b[9] << 8;
    const size_t row = L->geom.row_bytes;
    uint8_t *a = malloc(row), *c = malloc(row);
    FZ_CHECK(a && c, "out of memory");
    memset(a, 0x00, row);
    memset(c, 0xA5, row);
    coordl_status rc = fz_decode(&W, &in, epoch, id, a);
    FZ_CHECK(rc == COORDL_OK || rc == COORDL_ERR_CORRUPT || rc == COORDL_ERR_UNSUPPORTED ||
             rc == COORDL_ERR_NOMEM, "status %d", (int)rc);
    if (rc != COORDL_OK)
        FZ_CHECK(strstr(W.err, "fuzz.img") != NULL, "message \"%s\" does not name the file", W.err);
    coordl_status rc2 = fz_decode(&W, &in, epoch, id, c);
    FZ_CHECK(rc2 == rc, "second decode: %d, first %d", (int)rc2, (int)rc);
    if (rc == COORDL_OK)
        FZ_CHECK(memcmp(a, c, row) == 0, "the row differs between two decodes (bytes left unwritten?)");
    int iw = 0, ih = 0;
    cdl__bytes bytes = {in.p, in.n};
    coordl_status hrc = cdl__image_size(&W, "fuzz.img", &bytes, &iw, &ih);
    if (rc == COORDL_OK)
        FZ_CHECK(hrc == COORDL_OK && iw >= 1 && ih >= 1, "decoded, but the header path says %d (%dx%d): %s",
                 (int)hrc, iw, ih, W.err);
    free(a);
    free(c);
    fz_worker_free(&W);
    fz_loader_free(L);
    return 0;
}
