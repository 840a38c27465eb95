/*
 * bench_floor.h - the libjpeg-turbo full-decode floor that bench_prep and
 * bench_jpeg set beside coordl: every file read into memory first, one
 * decompressor and one RGB buffer reused, the files decoded in a fixed
 * shuffle walked cyclically, 1 thread. Include after <stdio.h>, <jpeglib.h>
 * and bench_common.h; a file libjpeg cannot decode ends the program.
 */
#ifndef COORDL_BENCH_FLOOR_H
#define COORDL_BENCH_FLOOR_H

#include <setjmp.h>

typedef struct {
    unsigned char **bytes;
    uint64_t *sizes;
    size_t n;
    size_t *order; /* a fixed shuffle, walked cyclically */
    size_t pos;
    unsigned char *rgb;
    size_t rgb_cap;
    struct jpeg_decompress_struct d;
    struct jpeg_error_mgr em;
    jmp_buf jb;
} floor_state;

BENCH_UNUSED static void floor_error_exit(j_common_ptr c)
{
    floor_state *fs = (floor_state *)c->client_data;
    char msg[JMSG_LENGTH_MAX];
    c->err->format_message(c, msg);
    fprintf(stderr, BENCH_PROG ": libjpeg: %s\n", msg);
    longjmp(fs->jb, 1);
}

BENCH_UNUSED static void floor_init(floor_state *fs, const file_list *fl)
{
    memset(fs, 0, sizeof *fs);
    fs->n = fl->n;
    fs->bytes = xmalloc(fl->n * sizeof *fs->bytes);
    fs->sizes = xmalloc(fl->n * sizeof *fs->sizes);
    fs->order = xmalloc(fl->n * sizeof *fs->order);
    for (size_t i = 0; i < fl->n; i++) {
        FILE *f = fopen(fl->paths[i], "rb");
        if (!f) { perror(fl->paths[i]); exit(1); }
        fs->sizes[i] = fl->sizes[i];
        fs->bytes[i] = xmalloc(fl->sizes[i]);
        if (fread(fs->bytes[i], 1, fl->sizes[i], f) != fl->sizes[i]) {
            fprintf(stderr, BENCH_PROG ": short read %s\n", fl->paths[i]);
            exit(1);
        }
        fclose(f);
        fs->order[i] = i;
    }
    uint64_t r = 12345;
    for (size_t i = fl->n; i > 1; i--) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        size_t j = (size_t)((r >> 33) % i), t = fs->order[i - 1];
        fs->order[i - 1] = fs->order[j];
        fs->order[j] = t;
    }
    fs->d.err = jpeg_std_error(&fs->em);
    fs->em.error_exit = floor_error_exit;
    jpeg_create_decompress(&fs->d);
    fs->d.client_data = fs;
}

/* Decodes the next file of the shuffle to RGB. */
BENCH_UNUSED static void floor_decode_one(floor_state *fs)
{
    size_t i = fs->order[fs->pos];
    fs->pos = (fs->pos + 1) % fs->n;
    struct jpeg_decompress_struct *d = &fs->d;
    if (setjmp(fs->jb)) {
        fprintf(stderr, BENCH_PROG ": cannot decode item %zu\n", i);
        exit(1);
    }
    jpeg_mem_src(d, fs->bytes[i], (unsigned long)fs->sizes[i]);
    jpeg_read_header(d, TRUE);
    d->out_color_space = JCS_RGB;
    jpeg_start_decompress(d);
    size_t stride = (size_t)d->output_width * 3,
           need = stride * (size_t)d->output_height;
    if (need > fs->rgb_cap) {
        free(fs->rgb);
        fs->rgb = xmalloc(need);
        fs->rgb_cap = need;
    }
    while (d->output_scanline < d->output_height) {
        JSAMPROW rows[16];
        JDIMENSION k, want = d->output_height - d->output_scanline;
        if (want > 16) want = 16;
        for (k = 0; k < want; k++)
            rows[k] = fs->rgb + (size_t)(d->output_scanline + k) * stride;
        jpeg_read_scanlines(d, rows, want);
    }
    jpeg_finish_decompress(d);
    bench_sink += fs->rgb[need / 2];
}

BENCH_UNUSED static void floor_free(floor_state *fs)
{
    jpeg_destroy_decompress(&fs->d);
    for (size_t i = 0; i < fs->n; i++) free(fs->bytes[i]);
    free(fs->bytes);
    free(fs->sizes);
    free(fs->order);
    free(fs->rgb);
}

#endif
