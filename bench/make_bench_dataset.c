/*
 * make_bench_dataset - cuts an ImageNet-like ImageFolder out of photos.
 *
 *   make_bench_dataset --src /usr/share/wallpapers --out DIR
 *                      [--classes 100] [--per-class 50] [--seed 1]
 *                      [--sigma 32] [--threads 2]
 *
 * Every output file is a random crop of a random source photo, downscaled
 * (area average) so that its shorter side is 256-500 px (most near 375, the
 * long side mostly 4:3, as ImageNet's), with Gaussian noise added and encoded
 * as a baseline 4:2:0 JPEG of quality 75-95. The noise is there because the
 * wallpapers are clean renders and studio photos: they compress to about a
 * quarter of ImageNet's bytes per pixel, and a decoder's cost follows the
 * number of non-zero coefficients, so a benchmark on them would flatter every
 * decoder. sigma 32 brings the mean file to about 100 KB, as ImageNet's.
 *
 * Deterministic: each file is a pure function of (seed, file number), so the
 * thread count does not change the output. The tree is written under
 * DIR.tmp and renamed to DIR when complete, so a half-made tree never passes
 * for a finished one.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE */

#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#pragma GCC diagnostic ignored "-Wconversion"
#endif
#include <stb/stb_image.h>
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
/* STB_IMAGE_STATIC declares a few functions it leaves undefined under
 * STBI_ONLY_*; gcc reports that at the end of the file, past the pop. */
#pragma GCC diagnostic ignored "-Wunused-function"
#endif

/* Sources are pre-shrunk (2x box steps) until the shorter side is at most
 * this, which bounds the cost of one crop's area-average resize. */
#define SRC_MAX_SHORT 1600
#define NOISE_TABLE 65536

typedef struct {
    char *path;
    int w, h; /* after pre-shrinking */
    unsigned char *rgb;
} source_photo;

typedef struct {
    const char *out_tmp;
    source_photo *src;
    int nsrc;
    int classes, per_class;
    uint64_t seed;
    const int16_t *noise; /* NOISE_TABLE samples of N(0, sigma^2) */
    int next;             /* next file number to make (under lock) */
    pthread_mutex_t lock;
    int failed;
} job;

typedef struct {
    job *J;
    uint64_t files, bytes, w_sum, h_sum;
} worker;

/* ---- randomness: splitmix64, keyed per file ---------------------------- */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rand_unit(uint64_t *s) /* [0, 1) */
{
    return (double)(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0);
}
static double rand_normal(uint64_t *s)
{
    double u1 = rand_unit(s), u2 = rand_unit(s);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- finding and loading the source photos ---------------------------- */
static int has_image_ext(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (strcmp(dot, ".jpg") == 0 || strcmp(dot, ".png") == 0 ||
                   strcmp(dot, ".jpeg") == 0);
}

/* One photo per folder: the one with the most pixels (the wallpaper packs
 * hold the same picture at a dozen resolutions). Screenshots are skipped. */
static void scan_dir(const char *dir, char ***paths, int *n, int *cap)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char best[4096] = "";
    long best_px = 0;
    char **subdirs = NULL;
    int nsub = 0, capsub = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            if (nsub == capsub) {
                capsub = capsub ? 2 * capsub : 8;
                subdirs = realloc(subdirs, (size_t)capsub * sizeof *subdirs);
                if (!subdirs) { perror("realloc"); exit(1); }
            }
            subdirs[nsub++] = strdup(p);
        } else if (has_image_ext(e->d_name) &&
                   strncmp(e->d_name, "screenshot", 10) != 0) {
            int w, h, c;
            if (!stbi_info(p, &w, &h, &c)) continue;
            long px = (long)w * h;
            if (px > best_px || (px == best_px && strcmp(p, best) < 0)) {
                best_px = px;
                snprintf(best, sizeof best, "%s", p);
            }
        }
    }
    closedir(d);
    if (best_px > 0) {
        if (*n == *cap) {
            *cap = *cap ? 2 * *cap : 16;
            *paths = realloc(*paths, (size_t)*cap * sizeof **paths);
            if (!*paths) { perror("realloc"); exit(1); }
        }
        (*paths)[(*n)++] = strdup(best);
    }
    for (int i = 0; i < nsub; i++) {
        scan_dir(subdirs[i], paths, n, cap);
        free(subdirs[i]);
    }
    free(subdirs);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

struct jerr {
    struct jpeg_error_mgr mgr;
    jmp_buf jb;
};
static void jerr_exit(j_common_ptr c)
{
    longjmp(((struct jerr *)c->err)->jb, 1);
}

static unsigned char *load_jpeg(const char *path, int *w, int *h)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct jpeg_decompress_struct d;
    struct jerr je;
    unsigned char *volatile rgb = NULL;
    d.err = jpeg_std_error(&je.mgr);
    je.mgr.error_exit = jerr_exit;
    if (setjmp(je.jb)) {
        jpeg_destroy_decompress(&d);
        fclose(f);
        free(rgb);
        return NULL;
    }
    jpeg_create_decompress(&d);
    jpeg_stdio_src(&d, f);
    jpeg_read_header(&d, TRUE);
    d.out_color_space = JCS_RGB;
    jpeg_start_decompress(&d);
    *w = (int)d.output_width;
    *h = (int)d.output_height;
    rgb = malloc((size_t)*w * (size_t)*h * 3);
    if (!rgb) longjmp(je.jb, 1);
    while (d.output_scanline < d.output_height) {
        JSAMPROW row = rgb + (size_t)d.output_scanline * (size_t)*w * 3;
        jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    fclose(f);
    return rgb;
}

static unsigned char *load_photo(const char *path, int *w, int *h)
{
    const char *dot = strrchr(path, '.');
    if (dot && strcmp(dot, ".png") != 0) return load_jpeg(path, w, h);
    int c;
    return stbi_load(path, w, h, &c, 3);
}

static void shrink_half(source_photo *s)
{
    int w = s->w / 2, h = s->h / 2;
    unsigned char *o = malloc((size_t)w * (size_t)h * 3);
    if (!o) { perror("malloc"); exit(1); }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                const unsigned char *p =
                    s->rgb + ((size_t)(2 * y) * (size_t)s->w + (size_t)(2 * x)) * 3 + c;
                size_t stride = (size_t)s->w * 3;
                o[((size_t)y * (size_t)w + (size_t)x) * 3 + c] =
                    (unsigned char)((p[0] + p[3] + p[stride] + p[stride + 3] + 2) / 4);
            }
    free(s->rgb);
    s->rgb = o;
    s->w = w;
    s->h = h;
}

/* ---- one output file --------------------------------------------------- */

/* Area-average resize of the crop (cx, cy, cw, ch) of s to ow x oh (a
 * downscale: every output pixel covers >= 1 source pixel per axis). */
static void resize_area(const source_photo *s, double cx, double cy, double cw,
                        double ch, int ow, int oh, float *tmp, float *out)
{
    int y0 = (int)cy, y1 = (int)ceil(cy + ch);
    if (y1 > s->h) y1 = s->h;
    int rows = y1 - y0;
    double sx = cw / ow;
    /* horizontal pass: rows x ow x 3 into tmp */
    for (int x = 0; x < ow; x++) {
        double a = cx + x * sx, b = a + sx;
        int xa = (int)a, xb = (int)ceil(b);
        if (xb > s->w) xb = s->w;
        for (int r = 0; r < rows; r++) {
            const unsigned char *row = s->rgb + (size_t)(y0 + r) * (size_t)s->w * 3;
            float acc[3] = {0, 0, 0};
            for (int xi = xa; xi < xb; xi++) {
                double lo = xi < a ? a : xi, hi = xi + 1 > b ? b : xi + 1;
                float wgt = (float)(hi - lo);
                acc[0] += wgt * row[xi * 3 + 0];
                acc[1] += wgt * row[xi * 3 + 1];
                acc[2] += wgt * row[xi * 3 + 2];
            }
            float *t = tmp + ((size_t)r * (size_t)ow + (size_t)x) * 3;
            t[0] = acc[0] / (float)sx;
            t[1] = acc[1] / (float)sx;
            t[2] = acc[2] / (float)sx;
        }
    }
    /* vertical pass */
    double sy = ch / oh;
    for (int y = 0; y < oh; y++) {
        double a = cy + y * sy, b = a + sy;
        int ya = (int)a, yb = (int)ceil(b);
        if (yb > y1) yb = y1;
        float *o = out + (size_t)y * (size_t)ow * 3;
        for (int i = 0; i < ow * 3; i++) o[i] = 0;
        for (int yi = ya; yi < yb; yi++) {
            double lo = yi < a ? a : yi, hi = yi + 1 > b ? b : yi + 1;
            float wgt = (float)((hi - lo) / sy);
            const float *t = tmp + (size_t)(yi - y0) * (size_t)ow * 3;
            for (int i = 0; i < ow * 3; i++) o[i] += wgt * t[i];
        }
    }
}

static int write_jpeg(const char *path, const unsigned char *rgb, int w, int h,
                      int quality)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr em;
    c.err = jpeg_std_error(&em);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c); /* YCbCr 4:2:0, baseline, standard Huffman tables */
    jpeg_set_quality(&c, quality, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * (size_t)w * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return fclose(f);
}

/* The shape of file i: shorter side ~ N(375, 45) in [256, 500]; long/short
 * 4:3 half the time (ImageNet's 500x375), else 1:1, 5:4 or 3:2; a quarter
 * portrait. */
static void pick_shape(uint64_t *rs, int *ow, int *oh)
{
    double s = 375.0 + 45.0 * rand_normal(rs);
    if (s < 256) s = 256;
    if (s > 500) s = 500;
    double u = rand_unit(rs), ar;
    if (u < 0.5) ar = 4.0 / 3.0;
    else if (u < 0.7) ar = 1.0;
    else if (u < 0.8) ar = 1.25;
    else ar = 1.5;
    int shrt = (int)lround(s), lng = (int)lround(s * ar);
    if (rand_unit(rs) < 0.25) { *ow = shrt; *oh = lng; }
    else { *ow = lng; *oh = shrt; }
}

static int make_one(job *J, int i, worker *W, float *tmp, float *fimg,
                    unsigned char *img)
{
    uint64_t rs = J->seed * 0x9e3779b97f4a7c15ull ^ ((uint64_t)i + 1) * 0xd1342543de82ef95ull;
    splitmix64(&rs);
    const source_photo *s = &J->src[splitmix64(&rs) % (uint64_t)J->nsrc];
    int ow, oh;
    pick_shape(&rs, &ow, &oh);
    /* crop of the output's aspect, its scale (relative to the largest that
     * fits) uniform in [0.3, 1], but never smaller than the output */
    double fit = fmin((double)s->w / ow, (double)s->h / oh);
    if (fit < 1.0) { /* source smaller than the output: shrink the output */
        ow = (int)(ow * fit);
        oh = (int)(oh * fit);
        fit = 1.0;
    }
    double scale = fmax(1.0, fit * (0.3 + 0.7 * rand_unit(&rs)));
    double cw = ow * scale, ch = oh * scale;
    double cx = rand_unit(&rs) * (s->w - cw), cy = rand_unit(&rs) * (s->h - ch);
    resize_area(s, cx, cy, cw, ch, ow, oh, tmp, fimg);

    /* noise: one table lookup per sample, 16 bits of the generator each */
    size_t n = (size_t)ow * (size_t)oh * 3;
    uint64_t bits = 0;
    int left = 0;
    for (size_t k = 0; k < n; k++) {
        if (left == 0) { bits = splitmix64(&rs); left = 4; }
        int v = (int)lrintf(fimg[k]) + J->noise[bits & (NOISE_TABLE - 1)];
        bits >>= 16;
        left--;
        img[k] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
    int quality = 75 + (int)(splitmix64(&rs) % 21);

    int cls = i / J->per_class;
    char path[4200];
    snprintf(path, sizeof path, "%s/c%03d/c%03d_%05d.jpg", J->out_tmp, cls, cls, i);
    if (write_jpeg(path, img, ow, oh, quality) != 0) {
        fprintf(stderr, "make_bench_dataset: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat(path, &st) == 0) W->bytes += (uint64_t)st.st_size;
    W->files++;
    W->w_sum += (uint64_t)ow;
    W->h_sum += (uint64_t)oh;
    return 0;
}

static void *worker_main(void *arg)
{
    worker *W = arg;
    job *J = W->J;
    size_t maxw = 800, maxh = 800; /* bigger than any output (500 * 1.5) */
    size_t max_rows = 0; /* the crop's rows: at most the tallest source */
    for (int k = 0; k < J->nsrc; k++)
        if ((size_t)J->src[k].h > max_rows) max_rows = (size_t)J->src[k].h;
    float *tmp = malloc(max_rows * maxw * 3 * sizeof *tmp);
    float *fimg = malloc(maxw * maxh * 3 * sizeof *fimg);
    unsigned char *img = malloc(maxw * maxh * 3);
    if (!tmp || !fimg || !img) { perror("malloc"); exit(1); }
    int total = J->classes * J->per_class;
    for (;;) {
        pthread_mutex_lock(&J->lock);
        int i = J->failed ? total : J->next++;
        pthread_mutex_unlock(&J->lock);
        if (i >= total) break;
        if (make_one(J, i, W, tmp, fimg, img) != 0) {
            pthread_mutex_lock(&J->lock);
            J->failed = 1;
            pthread_mutex_unlock(&J->lock);
        }
    }
    free(tmp);
    free(fimg);
    free(img);
    return NULL;
}

static int rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? 0 : -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) rm_tree(p);
        else unlink(p);
    }
    closedir(d);
    return rmdir(dir);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: make_bench_dataset --out DIR [--src /usr/share/wallpapers]\n"
            "       [--classes 100] [--per-class 50] [--seed 1] [--sigma 32] [--threads 2]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *src = "/usr/share/wallpapers", *out = NULL;
    int classes = 100, per_class = 50, threads = 2;
    uint64_t seed = 1;
    double sigma = 32.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) usage();
        const char *v = argv[++i];
        if (strcmp(a, "--src") == 0) src = v;
        else if (strcmp(a, "--out") == 0) out = v;
        else if (strcmp(a, "--classes") == 0) classes = atoi(v);
        else if (strcmp(a, "--per-class") == 0) per_class = atoi(v);
        else if (strcmp(a, "--seed") == 0) seed = strtoull(v, NULL, 10);
        else if (strcmp(a, "--sigma") == 0) sigma = atof(v);
        else if (strcmp(a, "--threads") == 0) threads = atoi(v);
        else usage();
    }
    if (!out || classes <= 0 || per_class <= 0 || threads <= 0 || sigma < 0) usage();

    char **paths = NULL;
    int npaths = 0, cap = 0;
    scan_dir(src, &paths, &npaths, &cap);
    if (npaths == 0) {
        fprintf(stderr, "make_bench_dataset: no .jpg/.png photos under %s\n", src);
        return 1;
    }
    qsort(paths, (size_t)npaths, sizeof *paths, cmp_str);

    source_photo *photos = calloc((size_t)npaths, sizeof *photos);
    int nphotos = 0;
    for (int i = 0; i < npaths; i++) {
        source_photo *s = &photos[nphotos];
        s->rgb = load_photo(paths[i], &s->w, &s->h);
        if (!s->rgb) {
            fprintf(stderr, "make_bench_dataset: skipping %s (cannot decode)\n", paths[i]);
            free(paths[i]);
            continue;
        }
        while ((s->w < s->h ? s->w : s->h) > SRC_MAX_SHORT) shrink_half(s);
        s->path = paths[i];
        nphotos++;
    }
    free(paths);
    if (nphotos == 0) return 1;
    printf("make_bench_dataset: %d source photos from %s\n", nphotos, src);

    int16_t *noise = malloc(NOISE_TABLE * sizeof *noise);
    uint64_t ns = seed ^ 0x5eed5eed5eed5eedull;
    for (int k = 0; k < NOISE_TABLE; k++)
        noise[k] = (int16_t)lrint(sigma * rand_normal(&ns));

    char out_tmp[4096];
    snprintf(out_tmp, sizeof out_tmp, "%s.tmp", out);
    if (rm_tree(out_tmp) != 0 || mkdir(out_tmp, 0755) != 0) {
        fprintf(stderr, "make_bench_dataset: cannot make %s: %s\n", out_tmp, strerror(errno));
        return 1;
    }
    for (int c = 0; c < classes; c++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/c%03d", out_tmp, c);
        if (mkdir(p, 0755) != 0) {
            fprintf(stderr, "make_bench_dataset: cannot make %s: %s\n", p, strerror(errno));
            return 1;
        }
    }

    job J = {.out_tmp = out_tmp, .src = photos, .nsrc = nphotos, .classes = classes,
             .per_class = per_class, .seed = seed, .noise = noise};
    pthread_mutex_init(&J.lock, NULL);
    worker *W = calloc((size_t)threads, sizeof *W);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    for (int t = 0; t < threads; t++) {
        W[t].J = &J;
        pthread_create(&tid[t], NULL, worker_main, &W[t]);
    }
    uint64_t files = 0, bytes = 0, wsum = 0, hsum = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        files += W[t].files;
        bytes += W[t].bytes;
        wsum += W[t].w_sum;
        hsum += W[t].h_sum;
    }
    if (J.failed) return 1;
    if (rename(out_tmp, out) != 0) {
        fprintf(stderr, "make_bench_dataset: cannot rename %s to %s: %s\n", out_tmp, out,
                strerror(errno));
        return 1;
    }
    printf("make_bench_dataset: %s: %llu files in %d classes, %.1f MB, mean %.1f KB, "
           "mean %.0f x %.0f px, %.2f bytes/px (sigma %.1f, seed %llu)\n",
           out, (unsigned long long)files, classes, bytes / 1e6, bytes / 1e3 / (double)files,
           (double)wsum / (double)files, (double)hsum / (double)files,
           (double)bytes / ((double)wsum / (double)files * (double)hsum / (double)files) /
               (double)files,
           sigma, (unsigned long long)seed);

    for (int i = 0; i < nphotos; i++) {
        free(photos[i].rgb);
        free(photos[i].path);
    }
    free(photos);
    free(noise);
    free(W);
    free(tid);
    return 0;
}
