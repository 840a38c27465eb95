/*
 * test_util.h - helpers shared by the coordl unit tests.
 *
 * Everything a test needs is generated at test time under a fresh temporary
 * directory: images in every supported format (libjpeg for JPEG, stb for
 * PNG/BMP/TGA, by hand for PPM/PGM), ImageFolder trees and list files. The
 * helpers abort the test (cmocka fail) on any failure of their own, so a test
 * body only asserts the behaviour it is about.
 */
#ifndef COORDL_TEST_UTIL_H
#define COORDL_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "coordl.h"

/* ---- files and directories ------------------------------------------- */

/* Makes a fresh directory /tmp/coordl-test-XXXXXX; returns a malloc'd path. */
char *tu_mkdtemp(void);
/* Removes a file or a directory tree; a missing path is not an error. */
void tu_rmtree(const char *path);
/* malloc'd "a/b" (printf-style format for the second part). */
char *tu_join(const char *dir, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* mkdir -p. */
void tu_mkdirs(const char *path);
/* Writes bytes to a file (creating parent folders). */
void tu_write_file(const char *path, const void *data, size_t n);
/* Reads a whole file into a malloc'd buffer; *n receives its size. */
uint8_t *tu_read_file(const char *path, size_t *n);
/* Size of a file in bytes. */
uint64_t tu_file_size(const char *path);
/* Sum of the sizes of all regular files under a directory (recursively). */
uint64_t tu_tree_bytes(const char *dir);

/* ---- pixels ------------------------------------------------------------ */

/* Deterministic 64-bit generator for test data. */
uint64_t tu_rand(uint64_t *state);

/* malloc'd w*h*comps buffer filled with one colour (comps 1, 3 or 4). */
uint8_t *tu_solid(int w, int h, int comps, const uint8_t *colour);
/* malloc'd RGB buffer with R = x * 255 / (w - 1), G = y * 255 / (h - 1),
 * B = b. With w = h = 256 this is R = x, G = y. */
uint8_t *tu_gradient_rgb(int w, int h, uint8_t b);
/* malloc'd RGB buffer: a base colour plus a smooth per-item texture (so that
 * every item decodes differently and JPEG sizes are similar). */
uint8_t *tu_textured_rgb(int w, int h, const uint8_t base[3], uint64_t seed);
/* malloc'd RGB buffer of uniform noise (compresses badly: big files). */
uint8_t *tu_noise_rgb(int w, int h, uint64_t seed);

/* ---- image writers (all fail the test on error) ----------------------- */

typedef enum { TU_SUB_444 = 0, TU_SUB_422 = 1, TU_SUB_420 = 2 } tu_subsampling;

typedef struct {
    int quality;                /* 1..100; 0 means 95 */
    tu_subsampling subsampling; /* chroma subsampling for RGB input */
    int progressive;            /* 1: progressive JPEG */
    int no_adobe_marker;        /* CMYK: 1 = omit libjpeg's Adobe marker
                                   (then the values are plain, not the
                                   Adobe-inverted convention) */
} tu_jpeg_opts;

/* comps: 1 = grayscale, 3 = RGB, 4 = CMYK (the bytes are stored as given;
 * libjpeg writes an Adobe marker unless opts->no_adobe_marker). opts may be
 * NULL (quality 95, 4:4:4, baseline). */
void tu_write_jpeg(const char *path, const uint8_t *pix, int w, int h,
                   int comps, const tu_jpeg_opts *opts);
/* Encodes a JPEG into memory; returns a malloc'd buffer, *n its size. */
uint8_t *tu_encode_jpeg(const uint8_t *pix, int w, int h, int comps,
                        const tu_jpeg_opts *opts, size_t *n);
void tu_write_png(const char *path, const uint8_t *pix, int w, int h, int comps);
void tu_write_bmp(const char *path, const uint8_t *pix, int w, int h, int comps);
void tu_write_tga(const char *path, const uint8_t *pix, int w, int h, int comps);
void tu_write_ppm(const char *path, const uint8_t *rgb, int w, int h);
void tu_write_pgm(const char *path, const uint8_t *gray, int w, int h);

/* Offset of the first byte after the SOS header of a JPEG (where entropy
 * coded data starts), or 0 if none. */
size_t tu_jpeg_scan_offset(const uint8_t *jpg, size_t n);

/* ---- ImageFolder datasets -------------------------------------------- */

typedef enum {
    TU_FMT_JPEG = 0,
    TU_FMT_PNG,
    TU_FMT_BMP,
    TU_FMT_TGA,
    TU_FMT_PPM
} tu_format;

typedef enum {
    TU_PAT_SOLID = 0,   /* every pixel the class colour                */
    TU_PAT_TEXTURED = 1 /* class colour plus a per-item smooth texture */
} tu_pattern;

typedef struct {
    int classes;       /* K class folders "class_000" ...               */
    int per_class;     /* N files per class "img_00000.<ext>" ...       */
    int w, h;          /* image size                                    */
    int size_jitter;   /* 0: all w x h; else each side + [0, jitter]    */
    tu_pattern pattern;
    tu_format format;
    int quality;       /* JPEG quality; 0 means 95 (4:4:4 always)       */
    uint64_t seed;     /* texture / jitter seed                         */
} tu_folder_spec;

/* Writes root/class_%03d/img_%05d.<ext>; item id of (k, j) is k*per_class+j.
 * Returns the total bytes written. */
uint64_t tu_make_image_folder(const char *root, const tu_folder_spec *spec);
/* malloc'd path of file (k, j) of a tree made by tu_make_image_folder. */
char *tu_folder_file(const char *root, const tu_folder_spec *spec, int k, int j);
/* Writes the tree made by tu_make_image_folder as one tar shard at
 * tar_path: its files in (k, j) order, named by their paths under root,
 * with the end-of-archive blocks. */
void tu_tar_of_folder(const char *tar_path, const char *root, const tu_folder_spec *spec);
/* The solid colour of class k (distinct for k < 64, away from 0 and 255). */
void tu_class_colour(int k, uint8_t rgb[3]);

/* ---- logging ----------------------------------------------------------- */

/* A log callback that swallows everything. */
void tu_log_quiet(void *user, coordl_log_level level, const char *msg);

/* A log callback that records every message (thread-safe). Pass a
 * tu_log_record* as log_user. */
typedef struct tu_log_record tu_log_record;
tu_log_record *tu_log_record_new(void);
void tu_log_record_free(tu_log_record *r);
void tu_log_record_fn(void *user, coordl_log_level level, const char *msg);
/* Number of messages recorded so far. */
int tu_log_count(tu_log_record *r);
/* 1 if any recorded message contains needle. */
int tu_log_contains(tu_log_record *r, const char *needle);

/* ---- configs and runs ------------------------------------------------- */

/* coordl_config_default() with: source, a quiet log, 2 threads, batch 8,
 * out 16 x 16, U8_NHWC. Tests change what they are about. */
coordl_config tu_config(const char *source);

/* Opens a loader and fails the test (printing coordl_errmsg) if it fails. */
coordl *tu_open(const coordl_config *cfg);

/* FNV-1a 64-bit. */
#define TU_FNV_OFFSET 0xcbf29ce484222325ULL
uint64_t tu_fnv1a(uint64_t h, const void *data, size_t n);
/* Hash of a batch: n, epoch, index, ids, labels and every data byte. */
uint64_t tu_batch_hash(const coordl_batch *b);

/* What a run over whole epochs saw, batch by batch and row by row. */
typedef struct {
    size_t nbatches;
    uint64_t *hash;  /* per batch */
    uint64_t *epoch; /* per batch */
    uint64_t *index; /* per batch */
    uint32_t *n;     /* per batch */
    size_t nrows;
    uint64_t *ids;       /* per row */
    int32_t *labels;     /* per row */
    uint64_t *row_epoch; /* per row */
    uint64_t ends;       /* COORDL_END_OF_EPOCH returns seen */
    size_t cap_b, cap_r;
} tu_run;

/* Calls coordl_next until `epochs` COORDL_END_OF_EPOCH returns have been
 * seen, recording every batch (released at once). Returns COORDL_OK, or the
 * first error status (the run stops there). */
coordl_status tu_run_epochs(coordl *L, unsigned epochs, tu_run *run);
void tu_run_free(tu_run *run);
/* Count of rows of epoch e whose id is `id`. */
size_t tu_run_count_id(const tu_run *run, uint64_t e, uint64_t id);

/* Kills the test binary with SIGALRM after `seconds` (a hang is a failure),
 * and applies the cmocka test filter from $COORDL_TEST_FILTER (a glob on
 * test names) when set. Call first in main. */
void tu_main_init(unsigned seconds);

/* Compare two u64 (for qsort). */
int tu_cmp_u64(const void *a, const void *b);

/* ---- token shards (llm.c format) --------------------------------------- */

#define TU_SHARD_MAGIC_U16 20240520 /* version 1: uint16 tokens */
#define TU_SHARD_MAGIC_U32 20240801 /* version 7: uint32 tokens */

/* Writes an llm.c shard with an explicit header: 256 int32 (header[0] =
 * magic, header[1] = version, header[2] = ntok_header, the rest 0), then n
 * tokens of token_bytes (2 or 4) bytes each, little-endian. The header may
 * lie (for corrupt shards); body_bytes_cut bytes are cut off the end. */
void tu_write_shard_raw(const char *path, int32_t magic, int32_t version,
                        int32_t ntok_header, const uint32_t *tokens, size_t n,
                        int token_bytes, size_t body_bytes_cut);
/* A valid shard: version 1 (uint16 tokens, each must be < 65536) or
 * version 7 (uint32 tokens); header[2] = n. */
void tu_write_shard(const char *path, int version, const uint32_t *tokens,
                    size_t n);

/* ---- WAV files ---------------------------------------------------------- */

typedef struct {
    uint16_t format;    /* 1 PCM, 3 IEEE float, 0xFFFE WAVE_FORMAT_EXTENSIBLE */
    uint16_t subformat; /* extensible only: the GUID's format code (1, 3, ...) */
    uint16_t channels;
    uint16_t bits;      /* bits per sample */
    uint32_t rate;      /* frames per second */
    int list_before_fmt;   /* 1: a LIST chunk (even size) before fmt */
    int list_before_data;  /* 1: a LIST chunk (even size) between fmt and data */
    int odd_chunk;         /* 1: an odd-sized "junk" chunk plus its RIFF pad
                              byte between fmt and data */
    int no_fmt;            /* 1: no fmt chunk at all */
    int not_riff;          /* 1: "JUNK" instead of "RIFF" */
    int not_wave;          /* 1: "AVI " instead of "WAVE" */
    uint32_t data_claim_extra; /* the data chunk's size field claims this
                                  many bytes more than are written */
} tu_wav_spec;

/* Encodes a WAV: `samples` holds nframes x channels interleaved samples of
 * bits/8 bytes each (little-endian, as stored). Returns a malloc'd buffer,
 * *n its size. */
uint8_t *tu_encode_wav(const tu_wav_spec *s, const void *samples,
                       size_t nframes, size_t *n);
void tu_write_wav(const char *path, const tu_wav_spec *s, const void *samples,
                  size_t nframes);
/* Plain PCM16 / float32 WAVs (interleaved frames). */
void tu_write_wav_i16(const char *path, uint16_t channels, uint32_t rate,
                      const int16_t *samples, size_t nframes);
void tu_write_wav_f32(const char *path, uint16_t channels, uint32_t rate,
                      const float *samples, size_t nframes);

/* ---- JSON and running programs ------------------------------------------ */

/* 1 if s[0..n) is exactly one JSON value (RFC 8259: objects, arrays,
 * strings with escapes, numbers, true/false/null) with optional whitespace
 * around it; 0 otherwise, with *err_off (if not NULL) set to the offset
 * where it went wrong. Nesting deeper than 256 levels counts as invalid. */
int tu_json_valid(const char *s, size_t n, size_t *err_off);
/* 1 if json holds "key" as an object key (the string followed by ':'). */
int tu_json_has_key(const char *json, const char *key);

/* Runs a shell command line with stdout and stderr captured into malloc'd
 * NUL-terminated strings (either out pointer may be NULL). Returns the exit
 * status, or 128 + the signal number when it was killed, or -1 when it
 * could not be run (the test fails in that case). */
int tu_run_capture(const char *cmdline, char **out, char **err);
/* malloc'd single-quoted form of s for a POSIX shell. */
char *tu_shell_quote(const char *s);

#endif /* COORDL_TEST_UTIL_H */
