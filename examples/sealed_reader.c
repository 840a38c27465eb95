/*
 * sealed_reader - train from a dataset stored sealed (encrypted at rest),
 * decrypting in coordl's reader: a custom coordl_io.
 *
 *   sealed_reader --data DIR [--workdir W] [--epochs 2]
 *   sealed_reader --check [--workdir W]
 *
 * coordl reads every storage byte through cfg.io (like SQLite's VFS). This
 * reader wraps the built-in POSIX one (coordl_io_posix()) and decrypts in
 * read_at: each file under W/sealed is the plain file XOR a keystream that
 * depends on (key, path, offset), so any byte range can be decrypted on its
 * own, as with AES-CTR. The keystream here is SplitMix64 - a stand-in to keep
 * the example free of dependencies, NOT a cipher: use a real one (AES-CTR,
 * ChaCha20) from your crypto library in the same place.
 *
 * The reader is called from several threads at once (coordl's workers), so
 * it keeps no mutable state outside its per-open handle.
 *
 * The same store is also read through the asynchronous form of the reader
 * (coordl_io_async, cfg.io_async): read starts a read and returns, and the
 * reader calls done(token, result) later from its own thread, so coordl's
 * read-ahead keeps its reads in flight without a thread each. Here the
 * reads queue for one service thread of the reader's, which decrypts and
 * calls done: the shape of an object-store client's event loop (which
 * keeps its requests outstanding at once), small enough to read.
 *
 * --data DIR: seals the ImageFolder tree DIR into W/sealed, then trains
 * (consumes) --epochs epochs from the sealed copy (through io, and through
 * io_async) and from DIR side by side and compares every batch. --check: the same on a small generated tree
 * (W/plain), for `make test`. Exit status 0 when every batch of the sealed
 * store equals the plain one, byte for byte; 1 otherwise.
 */
#include <errno.h>
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE and size_t */

#include "coordl.h"

/* ---- the keystream: byte i of file `path` under key k ------------------- */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t path_nonce(uint64_t key, const char *path)
{
    /* the nonce is the file's name below the store's root, so a file keeps
     * its keystream wherever the store is mounted */
    const char *base = strstr(path, "/sealed/");
    uint64_t h = key ^ 0xcbf29ce484222325ull;
    for (const char *p = base ? base + 8 : path; *p; p++) h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    return h;
}

/* XOR buf (the bytes at [offset, offset + n) of the file) with the stream. */
static void keystream_xor(uint64_t nonce, uint64_t offset, uint8_t *buf, size_t n)
{
    for (size_t i = 0; i < n;) {
        const uint64_t block = (offset + i) / 8;
        const uint64_t ks = mix64(nonce + block * 0x9e3779b97f4a7c15ull);
        for (unsigned b = (unsigned)((offset + i) % 8); b < 8 && i < n; b++, i++)
            buf[i] ^= (uint8_t)(ks >> (8 * b));
    }
}

/* ---- the reader ----------------------------------------------------------- */

typedef struct sealed_store {
    uint64_t key;
} sealed_store;

typedef struct sealed_file {
    void *posix;    /* the POSIX reader's handle */
    uint64_t nonce; /* of this file */
} sealed_file;

static int sealed_open(void *user, const char *path, void **file, uint64_t *size)
{
    const sealed_store *st = user;
    const coordl_io *posix = coordl_io_posix();
    sealed_file *f = malloc(sizeof *f);
    if (!f) return -ENOMEM;
    int rc = posix->open(posix->user, path, &f->posix, size); /* refuses FIFOs, folders */
    if (rc != 0) {
        free(f);
        return rc;
    }
    f->nonce = path_nonce(st->key, path);
    *file = f;
    return 0;
}

static int64_t sealed_read_at(void *user, void *file, void *buf, uint64_t len, uint64_t offset)
{
    const sealed_file *f = file;
    const coordl_io *posix = coordl_io_posix();
    (void)user;
    int64_t got = posix->read_at(posix->user, f->posix, buf, len, offset);
    if (got > 0) keystream_xor(f->nonce, offset, buf, (size_t)got);
    return got;
}

static void sealed_close(void *user, void *file)
{
    sealed_file *f = file;
    (void)user;
    coordl_io_posix()->close(NULL, f->posix);
    free(f);
}

/* ---- the asynchronous form: reads queued for the reader's own thread ------- */

typedef struct sealed_request {
    struct sealed_request *next;
    char *path; /* copied: coordl's string is only lent for the call */
    void *buf;  /* coordl's until done */
    uint64_t len, offset;
    coordl_io_done_fn done;
    void *token;
} sealed_request;

typedef struct sealed_async {
    const sealed_store *store;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sealed_request *head, *tail;
    int stop;
    unsigned long long started;
    pthread_t thread;
} sealed_async;

/* coordl_io_async.read: queue the read and return at once. A request that
 * cannot be made is "not started" (-errno): coordl then reads the item
 * through cfg.io instead. coordl never calls this from two threads at
 * once, but the lock is for the service thread anyway. */
static int sealed_async_read(void *user, const char *path, void *buf, uint64_t len, uint64_t offset,
                             coordl_io_done_fn done, void *token)
{
    sealed_async *a = user;
    sealed_request *q = malloc(sizeof *q);
    char *copy = strdup(path);
    if (!q || !copy) {
        free(q);
        free(copy);
        return -ENOMEM;
    }
    *q = (sealed_request){NULL, copy, buf, len, offset, done, token};
    pthread_mutex_lock(&a->mu);
    if (a->tail) a->tail->next = q;
    else a->head = q;
    a->tail = q;
    a->started++;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return 0;
}

/* The service thread: each request read, decrypted and ended with exactly
 * one done (bytes read, or -errno), outside the queue's lock. */
static void *sealed_async_main(void *arg)
{
    sealed_async *a = arg;
    for (;;) {
        pthread_mutex_lock(&a->mu);
        while (!a->head && !a->stop) pthread_cond_wait(&a->cv, &a->mu);
        sealed_request *q = a->head;
        if (q) {
            a->head = q->next;
            if (!a->head) a->tail = NULL;
        }
        pthread_mutex_unlock(&a->mu);
        if (!q) return NULL; /* stopped, nothing left */
        void *file = NULL;
        uint64_t size = 0;
        int64_t result = sealed_open((void *)a->store, q->path, &file, &size);
        if (result == 0) {
            result = sealed_read_at(NULL, file, q->buf, q->len, q->offset);
            sealed_close(NULL, file);
        }
        q->done(q->token, result);
        free(q->path);
        free(q);
    }
}

static int sealed_async_start(sealed_async *a, const sealed_store *store)
{
    memset(a, 0, sizeof *a);
    a->store = store;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    return pthread_create(&a->thread, NULL, sealed_async_main, a) == 0 ? 0 : -1;
}

/* After coordl_close of every handle reading through it. The thread ends
 * once the queue is empty: every request still queued gets its done first
 * (coordl_close waits for them within a bound, and a done that comes after
 * it gave up lands in memory it left for it), so a request is never freed
 * without its done. */
static void sealed_async_stop(sealed_async *a)
{
    pthread_mutex_lock(&a->mu);
    a->stop = 1;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
}

/* ---- sealing a tree, and a small tree to seal ----------------------------- */

static int make_dirs(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(tmp, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* Copies every file under src to dst (same relative paths), sealed. */
static int seal_tree(uint64_t key, const char *src, const char *dst)
{
    DIR *d = opendir(src);
    if (!d) { fprintf(stderr, "sealed_reader: cannot open %s: %s\n", src, strerror(errno)); return -1; }
    if (make_dirs(dst) != 0) { closedir(d); return -1; }
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char s[4096], t[4096];
        snprintf(s, sizeof s, "%s/%s", src, e->d_name);
        snprintf(t, sizeof t, "%s/%s", dst, e->d_name);
        struct stat sb;
        if (stat(s, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) { rc = seal_tree(key, s, t); continue; }
        if (!S_ISREG(sb.st_mode)) continue;
        FILE *in = fopen(s, "rb"), *out = fopen(t, "wb");
        if (!in || !out) { rc = -1; if (in) fclose(in); if (out) fclose(out); break; }
        const uint64_t nonce = path_nonce(key, t);
        uint8_t buf[65536];
        uint64_t off = 0;
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
            keystream_xor(nonce, off, buf, n);
            if (fwrite(buf, 1, n, out) != n) { rc = -1; break; }
            off += n;
        }
        fclose(in);
        if (fclose(out) != 0) rc = -1;
    }
    closedir(d);
    return rc;
}

/* A tiny ImageFolder: 3 classes x 12 gradient JPEGs of 48 x 40. */
static int make_small_tree(const char *root)
{
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 12; j++) {
            char dir[4200], path[4300];
            snprintf(dir, sizeof dir, "%s/class_%d", root, k);
            if (make_dirs(dir) != 0) return -1;
            snprintf(path, sizeof path, "%s/img_%02d.jpg", dir, j);
            FILE *f = fopen(path, "wb");
            if (!f) return -1;
            const int w = 48, h = 40;
            unsigned char row[48 * 3];
            struct jpeg_compress_struct c;
            struct jpeg_error_mgr err;
            c.err = jpeg_std_error(&err);
            jpeg_create_compress(&c);
            jpeg_stdio_dest(&c, f);
            c.image_width = w;
            c.image_height = h;
            c.input_components = 3;
            c.in_color_space = JCS_RGB;
            jpeg_set_defaults(&c);
            jpeg_set_quality(&c, 90, TRUE);
            jpeg_start_compress(&c, TRUE);
            for (int y = 0; y < h; y++) {
                for (int x = 0; x < w; x++) {
                    row[3 * x] = (unsigned char)(80 * k + 3 * x);
                    row[3 * x + 1] = (unsigned char)(5 * y + 7 * j);
                    row[3 * x + 2] = (unsigned char)((x * y + 11 * j) & 255);
                }
                JSAMPROW r = row;
                jpeg_write_scanlines(&c, &r, 1);
            }
            jpeg_finish_compress(&c);
            jpeg_destroy_compress(&c);
            fclose(f);
        }
    return 0;
}

/* ---- train from both, compare --------------------------------------------- */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

int main(int argc, char **argv)
{
    const char *data = NULL, *workdir = "sealed_reader-data";
    int check = 0, epochs = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check")) check = 1;
        else if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
        else if (!strcmp(argv[i], "--workdir") && i + 1 < argc) workdir = argv[++i];
        else if (!strcmp(argv[i], "--epochs") && i + 1 < argc) epochs = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: sealed_reader --data DIR [--workdir W] [--epochs 2]\n"
                            "       sealed_reader --check [--workdir W]\n");
            return 2;
        }
    }
    if (!data && !check) { fprintf(stderr, "sealed_reader: give --data DIR or --check\n"); return 2; }
    char plain[4096], sealed[4096];
    if (check) {
        snprintf(plain, sizeof plain, "%s/plain", workdir);
        if (make_small_tree(plain) != 0) { fprintf(stderr, "sealed_reader: cannot write %s\n", plain); return 1; }
        data = plain;
    }
    snprintf(sealed, sizeof sealed, "%s/sealed", workdir);
    sealed_store store = {0x5eed5eed12345678ull};
    if (seal_tree(store.key, data, sealed) != 0) { fprintf(stderr, "sealed_reader: sealing failed\n"); return 1; }

    const coordl_io io = {&store, sealed_open, sealed_read_at, sealed_close};
    coordl_config cfg = coordl_config_default();
    cfg.batch_size = 8;
    cfg.out_w = cfg.out_h = 32;
    cfg.layout = COORDL_U8_NHWC;
    cfg.threads = 2;
    /* P: the plain tree; S: the sealed store through io; A: through io_async */
    coordl *P = NULL, *S = NULL, *A = NULL;
    cfg.source = data;
    if (coordl_open(&cfg, &P) != COORDL_OK) { fprintf(stderr, "plain: %s\n", coordl_errmsg(NULL)); return 1; }
    cfg.source = sealed;
    cfg.io = &io; /* every byte of the sealed store is decrypted in sealed_read_at */
    if (coordl_open(&cfg, &S) != COORDL_OK) {
        fprintf(stderr, "sealed: %s\n", coordl_errmsg(NULL));
        coordl_close(P);
        return 1;
    }
    sealed_async async; /* the reader's thread: started before the handle, stopped after its close */
    if (sealed_async_start(&async, &store) != 0) {
        fprintf(stderr, "sealed_reader: cannot start the reader's thread\n");
        coordl_close(P);
        coordl_close(S);
        return 1;
    }
    const coordl_io_async io_async = {&async, sealed_async_read};
    cfg.io_async = &io_async; /* the read-ahead's reads; io still serves the index scan and workers' own reads */
    if (coordl_open(&cfg, &A) != COORDL_OK) {
        fprintf(stderr, "sealed, io_async: %s\n", coordl_errmsg(NULL));
        coordl_close(P);
        coordl_close(S);
        sealed_async_stop(&async); /* a failed open has waited for the dones of any reads it started */
        return 1;
    }
    uint64_t batches = 0, differ = 0, differ_async = 0;
    int failed = 0;
    for (int e = 0; e < epochs && !failed; e++) {
        for (;;) {
            coordl_batch a, b, c;
            coordl_status ra = coordl_next(P, &a), rb = coordl_next(S, &b), rc = coordl_next(A, &c);
            if (ra != rb || ra != rc) {
                fprintf(stderr, "epoch %d: plain %s, sealed %s, sealed through io_async %s: %s\n", e,
                        coordl_strerror(ra), coordl_strerror(rb), coordl_strerror(rc),
                        coordl_errmsg(rc != COORDL_OK ? A : rb != COORDL_OK ? S : P));
                failed = 1;
                break;
            }
            if (ra == COORDL_END_OF_EPOCH) break;
            if (ra != COORDL_OK) { fprintf(stderr, "%s\n", coordl_errmsg(P)); failed = 1; break; }
            /* a real trainer steps on b.data / b.labels here */
            uint64_t ha = fnv1a(fnv1a(0xcbf29ce484222325ull, a.data, a.data_bytes), a.labels, a.n * sizeof(int32_t));
            uint64_t hb = fnv1a(fnv1a(0xcbf29ce484222325ull, b.data, b.data_bytes), b.labels, b.n * sizeof(int32_t));
            uint64_t hc = fnv1a(fnv1a(0xcbf29ce484222325ull, c.data, c.data_bytes), c.labels, c.n * sizeof(int32_t));
            differ += ha != hb;
            differ_async += ha != hc;
            batches++;
            coordl_release(P, &a);
            coordl_release(S, &b);
            coordl_release(A, &c);
        }
    }
    coordl_stats st, sta;
    coordl_get_stats(S, &st);
    coordl_get_stats(A, &sta);
    coordl_close(P);
    coordl_close(S);
    coordl_close(A); /* returns once every read it started has had its done */
    const unsigned long long async_reads = async.started;
    sealed_async_stop(&async);
    printf("sealed_reader: %llu batches over %d epochs; sealed store read through the reader: %llu files, "
           "%llu bytes; batches differing from the plain tree: %llu\n", (unsigned long long)batches, epochs,
           (unsigned long long)st.storage_reads, (unsigned long long)st.storage_bytes,
           (unsigned long long)differ);
    printf("sealed_reader: through io_async: %llu reads started by the read-ahead (%llu at once at most, "
           "%u I/O thread(s) of coordl's), %llu late; batches differing from the plain tree: %llu\n",
           async_reads, (unsigned long long)sta.readahead_max_in_flight, sta.readahead_io_threads,
           (unsigned long long)sta.readahead_late_reads, (unsigned long long)differ_async);
    /* the io_async reads must have served rows, each with its done in time
     * (a reader that never calls done would still give right batches, late,
     * through io: the count of late reads shows it) */
    if (failed || differ || differ_async || batches == 0 || async_reads == 0 || sta.readahead_hits == 0 ||
        sta.readahead_late_reads != 0) {
        printf("sealed_reader: FAILED\n");
        return 1;
    }
    printf("sealed_reader: OK: every batch from the sealed store, through io and through io_async, equals the "
           "plain tree's\n");
    return 0;
}
