/*
 * bench_uring - the read-ahead's local reads in flight: io_uring against the
 * I/O-thread path, cold and warm, side by side in one run.
 *
 *   bench_uring --data DIR [--images N] [--threads 2] [--depths 8,32,128]
 *               [--out 32]
 *
 *   bench_uring --wav DIR [--files 2000] [--kb 100] ...
 *
 * Every case opens a fresh handle on DIR with the built-in POSIX reader (no
 * coordl cache) and times one epoch from open (--images N: the first N
 * images). With --data, the bench images through a cheap pipeline (eval:
 * resize the shorter side and crop to --out px, which libjpeg's DCT scaling
 * decodes at 1/8): still bound by the JPEG decode on 2 cores. With --wav,
 * a tree of --files WAV files of --kb KiB (made once, 16-bit mono) through
 * COORDL_PIPE_AUDIO with a 256-sample crop: prep costs next to nothing, so
 * the storage reads are what the two paths are compared on.
 * "uring" is the default; "threads" sets COORDL_URING=0 before the open
 * (the fallback: one I/O thread per read in flight). Cold: the page cache
 * is dropped before the case (echo 3 > /proc/sys/vm/drop_caches as root,
 * else posix_fadvise(DONTNEED) on every file after a sync); warm: the same
 * epoch right after. Prints a table and one line per case:
 *   RESULT uring <images|wav> <cold|warm> <depth> <uring img/s> <threads img/s> <ratio>
 *     <uring max in flight> <uring I/O threads> <threads max in flight> <threads I/O threads>
 */
#include "bench_common.h"
#include "coordl.h"

#include <errno.h>
#include <fcntl.h>

static void quiet(void *user, coordl_log_level level, const char *msg)
{
    (void)user;
    if (level <= COORDL_LOG_WARN) fprintf(stderr, "  coordl: %s\n", msg);
}

static void drop_page_cache(const char *root)
{
    sync();
    FILE *f = fopen("/proc/sys/vm/drop_caches", "w");
    if (f) {
        int ok = fputs("3\n", f) >= 0;
        ok = fclose(f) == 0 && ok;
        if (ok) return;
    }
    size_t nclasses;
    char **classes = sorted_names(root, &nclasses);
    for (size_t c = 0; classes && c < nclasses; c++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", root, classes[c]);
        size_t n;
        char **files = sorted_names(dir, &n);
        for (size_t k = 0; files && k < n; k++) {
            char p[8192];
            snprintf(p, sizeof p, "%s/%s", dir, files[k]);
            int fd = open(p, O_RDONLY);
            if (fd >= 0) { posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); close(fd); }
            free(files[k]);
        }
        free(files);
        free(classes[c]);
    }
    free(classes);
}

typedef struct {
    double img_s;
    uint64_t max_in_flight;
    uint32_t io_threads; /* the read-ahead's, plus the ring's completion thread */
    uint32_t uring;
} result;

/* DIR/cNNN/wNNNNN.wav, 10 classes, made once (kept when present). */
static void make_wav_tree(const char *dir, int files, int kb)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/c009", dir);
    if (access(p, F_OK) == 0) return;
    const uint32_t bytes = (uint32_t)kb * 1024u, rate = 16000;
    uint8_t *buf = xmalloc(44 + bytes);
    uint64_t x = 88172645463325252ull;
    for (int c = 0; c < 10; c++) {
        snprintf(p, sizeof p, "%s", dir);
        mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/c%03d", dir, c);
        mkdir(p, 0755);
        for (int i = c; i < files; i += 10) {
            uint8_t *h = buf;
            memcpy(h, "RIFF", 4);
            const uint32_t riff = 36 + bytes, fmt = 16, byte_rate = rate * 2;
            const uint16_t pcm = 1, ch = 1, align = 2, bits = 16;
            memcpy(h + 4, &riff, 4);
            memcpy(h + 8, "WAVEfmt ", 8);
            memcpy(h + 16, &fmt, 4);
            memcpy(h + 20, &pcm, 2);
            memcpy(h + 22, &ch, 2);
            memcpy(h + 24, &rate, 4);
            memcpy(h + 28, &byte_rate, 4);
            memcpy(h + 32, &align, 2);
            memcpy(h + 34, &bits, 2);
            memcpy(h + 36, "data", 4);
            memcpy(h + 40, &bytes, 4);
            for (uint32_t k = 0; k < bytes; k += 8) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                memcpy(buf + 44 + k, &x, bytes - k < 8 ? bytes - k : 8);
            }
            snprintf(p, sizeof p, "%s/c%03d/w%05d.wav", dir, c, i);
            FILE *f = fopen(p, "wb");
            if (!f || fwrite(buf, 1, 44 + bytes, f) != 44 + bytes || fclose(f) != 0) {
                fprintf(stderr, "bench_uring: cannot write %s\n", p);
                exit(1);
            }
        }
    }
    free(buf);
}

static int g_wav; /* the WAV tree, COORDL_PIPE_AUDIO */

static result run_case(const char *data, int threads, uint32_t depth, int out, uint64_t images, int use_uring)
{
    coordl_config cfg = coordl_config_default();
    cfg.source = data;
    cfg.pipeline = g_wav ? COORDL_PIPE_AUDIO : COORDL_PIPE_EVAL;
    cfg.threads = threads;
    cfg.batch_size = 32;
    if (g_wav) {
        cfg.audio_samples = 256;
    } else {
        cfg.out_w = cfg.out_h = (uint32_t)out;
        cfg.layout = COORDL_U8_NHWC;
    }
    cfg.seed = 1;
    cfg.log = quiet;
    cfg.readahead_items = depth;
    if (use_uring) unsetenv("COORDL_URING");
    else setenv("COORDL_URING", "0", 1);
    const double t0 = now_s();
    coordl *L = NULL;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "bench_uring: %s\n", coordl_errmsg(NULL));
        exit(1);
    }
    unsetenv("COORDL_URING");
    uint64_t got = 0;
    const uint64_t want = images ? images : coordl_num_items(L);
    while (got < want) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) break;
        if (rc != COORDL_OK) {
            fprintf(stderr, "bench_uring: %s: %s\n", coordl_strerror(rc), coordl_errmsg(L));
            exit(1);
        }
        got += b.n;
        coordl_release(L, &b);
    }
    const double secs = now_s() - t0;
    coordl_stats st;
    coordl_get_stats(L, &st);
    coordl_close(L);
    result r;
    r.img_s = (double)got / secs;
    r.max_in_flight = st.readahead_max_in_flight;
    r.uring = st.readahead_uring;
    r.io_threads = st.readahead_io_threads + (st.readahead_uring ? 1u : 0u);
    return r;
}

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        out[n++] = atoi(s);
        const char *c = strchr(s, ',');
        if (!c) break;
        s = c + 1;
    }
    return n;
}

int main(int argc, char **argv)
{
    const char *data = NULL;
    uint64_t images = 0;
    int threads = 2, out = 32, dep[8] = {8, 32, 128}, ndep = 3, files = 2000, kb = 100;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--data") && v) { data = v; i++; }
        else if (!strcmp(a, "--images") && v) { images = strtoull(v, NULL, 10); i++; }
        else if (!strcmp(a, "--threads") && v) { threads = atoi(v); i++; }
        else if (!strcmp(a, "--out") && v) { out = atoi(v); i++; }
        else if (!strcmp(a, "--wav") && v) { data = v; g_wav = 1; i++; }
        else if (!strcmp(a, "--files") && v) { files = atoi(v); i++; }
        else if (!strcmp(a, "--kb") && v) { kb = atoi(v); i++; }
        else if (!strcmp(a, "--depths") && v) { ndep = parse_list(v, dep, 8); i++; }
        else {
            fprintf(stderr, "usage: bench_uring --data DIR | --wav DIR [--files 2000] [--kb 100] [--images N] [--threads 2] "
                            "[--depths 8,32,128] [--out 32]\n");
            return 2;
        }
    }
    if (!data) { fprintf(stderr, "bench_uring: --data DIR or --wav DIR is required\n"); return 2; }
    if (g_wav) {
        make_wav_tree(data, files, kb);
        printf("bench_uring: %s, %d WAV files of %d KiB, audio crop of 256 samples, %d prep threads, one epoch "
               "from open per case%s\n", data, files, kb, threads, images ? " (first items only)" : "");
    } else {
        printf("bench_uring: %s, eval %dx%d U8, %d prep threads, one epoch from open per case%s\n", data, out, out,
               threads, images ? " (first images only)" : "");
    }
    printf("%-5s %5s | %12s %12s %7s | %18s | %18s\n", "cache", "depth", "uring img/s", "threads img/s", "ratio",
           "uring: in flight/IO thr", "threads: in flight/IO thr");
    for (int k = 0; k < ndep; k++) {
        result c[2][2]; /* [cold, warm][uring, threads] */
        for (int u = 0; u < 2; u++) {
            drop_page_cache(data);
            c[0][u] = run_case(data, threads, (uint32_t)dep[k], out, images, u == 0);
            c[1][u] = run_case(data, threads, (uint32_t)dep[k], out, images, u == 0);
        }
        for (int w = 0; w < 2; w++) {
            const result *a = &c[w][0], *b = &c[w][1];
            printf("%-5s %5d | %12.0f %12.0f %6.2fx | %10llu / %-5u | %10llu / %-5u%s\n", w ? "warm" : "cold", dep[k],
                   a->img_s, b->img_s, a->img_s / b->img_s, (unsigned long long)a->max_in_flight, a->io_threads,
                   (unsigned long long)b->max_in_flight, b->io_threads, a->uring ? "" : "  (io_uring refused)");
        }
        for (int w = 0; w < 2; w++) {
            const result *a = &c[w][0], *b = &c[w][1];
            printf("RESULT uring %s %s %d %.1f %.1f %.3f %llu %u %llu %u\n", g_wav ? "wav" : "images", w ? "warm" : "cold", dep[k], a->img_s,
                   b->img_s, a->img_s / b->img_s, (unsigned long long)a->max_in_flight, a->io_threads,
                   (unsigned long long)b->max_in_flight, b->io_threads);
        }
        fflush(stdout);
    }
    return 0;
}
