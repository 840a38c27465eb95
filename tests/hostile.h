/*
 * hostile.h - makers of hostile image files, shared by the unit tests
 * (tests/test_decode_limits.c) and the fuzz seed generator
 * (tests/fuzz/gen_seeds.c). Header-only, no test framework: each maker
 * returns a malloc'd buffer (NULL only when malloc fails) and its size.
 *
 *   hostile_bmp      a 24-bit BMP of any declared size (0 included), with
 *                    `pixels` bytes of pixel data after the header
 *   hostile_ppm      a binary PPM (P6) header of any size, plus pixel bytes
 *   hostile_tga      an uncompressed 24-bit TGA of any size, plus pixel bytes
 *   hostile_gif_1x1  the classic 43-byte 1x1 GIF
 *   hostile_png_zero_bomb
 *                    a valid RGB PNG of w x h black pixels whose IDAT is a
 *                    fixed-Huffman deflate stream (13 bits per 258 bytes:
 *                    ~160:1), written without a compressor, so a small file
 *                    declares hundreds of MB of pixels
 *   hostile_png_palette, hostile_bmp_palette
 *                    paletted images whose pixels may index past the palette
 *   hostile_jpeg_set_size
 *                    rewrites the SOF size of a JPEG in place (a small
 *                    progressive file then declares a huge image)
 */
#ifndef COORDL_TESTS_HOSTILE_H
#define COORDL_TESTS_HOSTILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void hostile_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void hostile_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline uint8_t *hostile_bmp(int32_t w, int32_t h, size_t pixels, size_t *n)
{
    *n = 54 + pixels;
    uint8_t *b = calloc(1, *n);
    if (!b)
        return NULL;
    b[0] = 'B';
    b[1] = 'M';
    hostile_le(b + 2, *n, 4);
    hostile_le(b + 10, 54, 4);      /* pixel data offset */
    hostile_le(b + 14, 40, 4);      /* BITMAPINFOHEADER */
    hostile_le(b + 18, (uint32_t)w, 4);
    hostile_le(b + 22, (uint32_t)h, 4);
    hostile_le(b + 26, 1, 2);       /* planes */
    hostile_le(b + 28, 24, 2);      /* bits per pixel */
    hostile_le(b + 34, pixels, 4);  /* image size */
    for (size_t i = 0; i < pixels; i++)
        b[54 + i] = (uint8_t)(i * 37);
    return b;
}

static inline uint8_t *hostile_ppm(uint32_t w, uint32_t h, size_t pixels, size_t *n)
{
    char head[64];
    int k = snprintf(head, sizeof head, "P6\n%u %u\n255\n", w, h);
    *n = (size_t)k + pixels;
    uint8_t *b = malloc(*n ? *n : 1);
    if (!b)
        return NULL;
    memcpy(b, head, (size_t)k);
    for (size_t i = 0; i < pixels; i++)
        b[k + i] = (uint8_t)(i * 53);
    return b;
}

static inline uint8_t *hostile_tga(uint16_t w, uint16_t h, size_t pixels, size_t *n)
{
    *n = 18 + pixels;
    uint8_t *b = calloc(1, *n);
    if (!b)
        return NULL;
    b[2] = 2;                  /* uncompressed true colour */
    hostile_le(b + 12, w, 2);
    hostile_le(b + 14, h, 2);
    b[16] = 24;                /* bits per pixel */
    for (size_t i = 0; i < pixels; i++)
        b[18 + i] = (uint8_t)(i * 71);
    return b;
}

static inline uint8_t *hostile_gif_1x1(size_t *n)
{
    static const uint8_t gif[] = {
        0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80,
        0x00, 0x00, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x21, 0xf9, 0x04,
        0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00, 0x01,
        0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b};
    *n = sizeof gif;
    uint8_t *b = malloc(sizeof gif);
    if (b)
        memcpy(b, gif, sizeof gif);
    return b;
}

/* ---- PNG -------------------------------------------------------------- */

static inline uint32_t hostile_crc32(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xffffffffu;
}

typedef struct {
    uint8_t *p;
    size_t len, cap;
    uint64_t bitbuf;
    int nbits;
    int failed;
} hostile_buf;

static inline void hostile_put(hostile_buf *b, const void *data, size_t n)
{
    if (b->failed || n == 0)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

/* deflate packs bits from the least significant end; Huffman codes go in
 * from their most significant bit */
static inline void hostile_bits(hostile_buf *b, uint32_t v, int n)
{
    for (int i = 0; i < n; i++) {
        b->bitbuf |= (uint64_t)((v >> i) & 1u) << b->nbits;
        if (++b->nbits == 8) {
            uint8_t byte = (uint8_t)b->bitbuf;
            hostile_put(b, &byte, 1);
            b->bitbuf = 0;
            b->nbits = 0;
        }
    }
}

static inline void hostile_code(hostile_buf *b, uint32_t code, int n)
{
    for (int i = n - 1; i >= 0; i--)
        hostile_bits(b, (code >> i) & 1u, 1);
}

static inline void hostile_chunk(hostile_buf *b, const char *type, const uint8_t *data, size_t n)
{
    uint8_t len[4], crc[4];
    hostile_be32(len, (uint32_t)n);
    hostile_put(b, len, 4);
    size_t at = b->len;
    hostile_put(b, type, 4);
    hostile_put(b, data, n);
    if (b->failed)
        return;
    hostile_be32(crc, hostile_crc32(b->p + at, 4 + n));
    hostile_put(b, crc, 4);
}

static inline uint8_t *hostile_png_zero_bomb(uint32_t w, uint32_t h, size_t *n)
{
    const uint64_t raw = (uint64_t)h * (1 + 3 * (uint64_t)w); /* filter byte + RGB */
    hostile_buf z = {0};
    const uint8_t zhead[2] = {0x78, 0x01};
    hostile_put(&z, zhead, 2);
    hostile_bits(&z, 1, 1); /* BFINAL */
    hostile_bits(&z, 1, 2); /* BTYPE 01: fixed Huffman */
    uint64_t left = raw;
    if (left > 0) {
        hostile_code(&z, 0x30, 8); /* literal 0 */
        left--;
    }
    while (left >= 258) {
        hostile_code(&z, 0xC5, 8); /* length code 285: 258 bytes */
        hostile_code(&z, 0, 5);    /* distance code 0: 1 back */
        left -= 258;
    }
    while (left-- > 0)
        hostile_code(&z, 0x30, 8);
    hostile_code(&z, 0, 7); /* end of block */
    if (z.nbits)
        hostile_bits(&z, 0, 8 - z.nbits);
    uint8_t adler[4];
    hostile_be32(adler, (uint32_t)((raw % 65521u) << 16 | 1u));
    hostile_put(&z, adler, 4);

    hostile_buf png = {0};
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    hostile_put(&png, sig, 8);
    uint8_t ihdr[13] = {0};
    hostile_be32(ihdr, w);
    hostile_be32(ihdr + 4, h);
    ihdr[8] = 8; /* bit depth */
    ihdr[9] = 2; /* RGB */
    hostile_chunk(&png, "IHDR", ihdr, 13);
    hostile_chunk(&png, "IDAT", z.p, z.len);
    hostile_chunk(&png, "IEND", NULL, 0);
    free(z.p);
    if (z.failed || png.failed) {
        free(png.p);
        return NULL;
    }
    *n = png.len;
    return png.p;
}

/* A w x h paletted PNG (8-bit indices, all `index`) whose PLTE has
 * `entries` colours (entry i = 10 + i, 20 + i, 30 + i), its IDAT one stored
 * (uncompressed) deflate block: index may lie past the palette. */
static inline uint8_t *hostile_png_palette(uint32_t w, uint32_t h, int entries, uint8_t index, size_t *n)
{
    const size_t raw = (size_t)h * (1 + w);
    if (raw > 65535)
        return NULL;
    hostile_buf z = {0};
    uint8_t zh[7] = {0x78, 0x01, 0x01, (uint8_t)raw, (uint8_t)(raw >> 8), (uint8_t)~raw, (uint8_t)(~raw >> 8)};
    hostile_put(&z, zh, 7);
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < raw; i++) {
        const uint8_t v = i % (1 + w) == 0 ? 0 : index; /* filter byte 0, then the row */
        hostile_put(&z, &v, 1);
        a = (a + v) % 65521u;
        b = (b + a) % 65521u;
    }
    uint8_t adler[4];
    hostile_be32(adler, b << 16 | a);
    hostile_put(&z, adler, 4);
    hostile_buf png = {0};
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    hostile_put(&png, sig, 8);
    uint8_t ihdr[13] = {0};
    hostile_be32(ihdr, w);
    hostile_be32(ihdr + 4, h);
    ihdr[8] = 8; /* bit depth */
    ihdr[9] = 3; /* paletted */
    hostile_chunk(&png, "IHDR", ihdr, 13);
    uint8_t plte[768];
    for (int i = 0; i < entries && i < 256; i++) {
        plte[3 * i] = (uint8_t)(10 + i);
        plte[3 * i + 1] = (uint8_t)(20 + i);
        plte[3 * i + 2] = (uint8_t)(30 + i);
    }
    hostile_chunk(&png, "PLTE", plte, (size_t)entries * 3);
    hostile_chunk(&png, "IDAT", z.p, z.len);
    hostile_chunk(&png, "IEND", NULL, 0);
    free(z.p);
    if (z.failed || png.failed) {
        free(png.p);
        return NULL;
    }
    *n = png.len;
    return png.p;
}

/* A w x h 8-bit BMP (BITMAPINFOHEADER) with `entries` palette colours
 * (entry i = 10 + i, 20 + i, 30 + i as R, G, B) and every index `index`. */
static inline uint8_t *hostile_bmp_palette(int32_t w, int32_t h, int entries, uint8_t index, size_t *n)
{
    const size_t row = ((size_t)w + 3) & ~(size_t)3, off = 54 + (size_t)entries * 4;
    *n = off + row * (size_t)h;
    uint8_t *b = calloc(1, *n);
    if (!b)
        return NULL;
    b[0] = 'B';
    b[1] = 'M';
    hostile_le(b + 2, *n, 4);
    hostile_le(b + 10, off, 4);
    hostile_le(b + 14, 40, 4);
    hostile_le(b + 18, (uint32_t)w, 4);
    hostile_le(b + 22, (uint32_t)h, 4);
    hostile_le(b + 26, 1, 2);
    hostile_le(b + 28, 8, 2);
    for (int i = 0; i < entries; i++) {
        b[54 + 4 * i] = (uint8_t)(30 + i); /* B, G, R, 0 */
        b[54 + 4 * i + 1] = (uint8_t)(20 + i);
        b[54 + 4 * i + 2] = (uint8_t)(10 + i);
    }
    for (int32_t y = 0; y < h; y++)
        memset(b + off + (size_t)y * row, index, (size_t)w);
    return b;
}

/* ---- JPEG ------------------------------------------------------------- */

/* Sets the size in the first SOF marker (baseline, extended, progressive,
 * lossless, arithmetic); returns 0 if there is none. */
static inline int hostile_jpeg_set_size(uint8_t *jpg, size_t n, uint16_t w, uint16_t h)
{
    size_t i = 2;
    while (i + 9 < n) {
        if (jpg[i] != 0xFF)
            return 0;
        uint8_t m = jpg[i + 1];
        size_t len = ((size_t)jpg[i + 2] << 8) | jpg[i + 3];
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            jpg[i + 5] = (uint8_t)(h >> 8);
            jpg[i + 6] = (uint8_t)h;
            jpg[i + 7] = (uint8_t)(w >> 8);
            jpg[i + 8] = (uint8_t)w;
            return 1;
        }
        i += 2 + len;
    }
    return 0;
}

#endif /* COORDL_TESTS_HOSTILE_H */
